"""examples/pytorch/launch.sh picks the release's interpreter (docs/pytorch.md, section 3).

An empty PYTHON file (or one whose first line is blank) made launch.sh `exec ""`, which failed
with only `exec: : Permission denied` (exit 126, retried by the agent as a crash).  It now says
which file is wrong and what to write there, and exits 2 (not retried).  An environment deployed
with the release (.drover-env) without bin/python is the same kind of error, not a silent
fall-back to python3 from PATH.  No torch needed: a
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

    def test_deployed_environment_is_used(self):
        env = os.path.join(self.rel, ".drover-env", "bin")
        os.makedirs(env)
        with open(os.path.join(env, "python"), "w") as f:
            f.write("#!/bin/sh\necho env-python\n")
        os.chmod(os.path.join(env, "python"), 0o755)
        p = self.launch()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), "env-python")

    def test_environment_without_python_is_a_clear_error(self):
        # an --env directory without bin/python (not a venv, a broken build): launch.sh used
        # to fall back to python3 from PATH without a word, so the job ran and was promoted
        # without the environment deployed for it
        os.makedirs(os.path.join(self.rel, ".drover-env", "lib"))
        p = self.launch()
        self.assertEqual(p.returncode, 2, (p.stdout, p.stderr))
        self.assertEqual(p.stdout, "")
        self.assertIn(".drover-env) but it has no executable bin/python", p.stderr)
        # a dangling link (the environment missing from the store) is the same error
        shutil.rmtree(os.path.join(self.rel, ".drover-env"))
        os.symlink("../gone", os.path.join(self.rel, ".drover-env"))
        p = self.launch()
        self.assertEqual(p.returncode, 2, (p.stdout, p.stderr))
        self.assertIn("has no executable bin/python", p.stderr)


if __name__ == "__main__":
    unittest.main()
