"""examples/pytorch/launch.sh picks the release's interpreter (docs/pytorch.md, section 3).

An empty PYTHON file (or one whose first line is blank) made launch.sh `exec ""`, which failed
with only `exec: : Permission denied` (exit 126, retried by the agent as a crash).  It now says
which file is wrong and what to write there, and exits 2 (not retried).  No torch needed: a
stand-in train.py prints the interpreter it runs under.

Run by `make unit` (tests/run-unit.sh): python3 -m unittest discover -s python
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH = os.path.join(HERE, "..", "examples", "pytorch", "launch.sh")


class LaunchTest(unittest.TestCase):
    def setUp(self):
        self.rel = tempfile.mkdtemp(prefix="drover-launch-test.")
        shutil.copy(LAUNCH, self.rel)
        with open(os.path.join(self.rel, "train.py"), "w") as f:
            f.write("import sys\nprint(sys.executable)\n")

    def tearDown(self):
        shutil.rmtree(self.rel, ignore_errors=True)

    def launch(self, python_file=None):
        if python_file is not None:
            with open(os.path.join(self.rel, "PYTHON"), "w") as f:
                f.write(python_file)
        return subprocess.run(["sh", os.path.join(self.rel, "launch.sh")], capture_output=True,
                              text=True, timeout=60)

    def test_python_file_names_the_interpreter(self):
        p = self.launch(sys.executable + "\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), sys.executable)

    def test_empty_python_file_is_a_clear_error(self):
        for text in ("", "\n", "\n/usr/bin/python3\n"):
            p = self.launch(text)
            self.assertEqual(p.returncode, 2, (text, p.stderr))
            self.assertIn("PYTHON has no interpreter on its first line", p.stderr)
            self.assertNotIn("Permission denied", p.stderr)


if __name__ == "__main__":
    unittest.main()
