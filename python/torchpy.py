"""Test helper: which interpreter has torch (the python tests' one copy of that lookup)."""

import os
import subprocess
import sys


def torch_python():
    """This interpreter if it has torch, else the system's (make unit may run pyenv's)."""
    for py in (sys.executable, "/usr/bin/python3"):
        if py and os.access(py, os.X_OK) and subprocess.run(
                [py, "-c", "import torch"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL).returncode == 0:
            return py
    return None
