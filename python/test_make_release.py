"""examples/pytorch/make-release.sh builds a release directory (docs/pytorch.md, sections 2 and 3).

A bad KEY=JSON argument (`lr=abc`, `lr` without '=') printed a Python traceback, exited 1 and
left a half-built OUT without config.json; `'lr = 0.1'` made a key "lr ".  `PYTHON=... make-release.sh
OUT`, the form docs/pytorch.md showed, was ignored without a word (the script reads PYTHON=
only as an argument), so the release ran the containers' python3.  No torch needed.

Run by `make unit` (tests/run-unit.sh): python3 -m unittest discover -s python
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "examples", "pytorch", "make-release.sh")
FILES = ["config.json", "drover_heartbeat.py", "launch.sh", "train.py"]


class MakeReleaseTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="drover-make-release-test.")
        self.out = os.path.join(self.dir, "rel")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def make(self, *args, python_env=None):
        env = dict(os.environ)
        env.pop("PYTHON", None)
        if python_env is not None:
            env["PYTHON"] = python_env
        return subprocess.run(["sh", SCRIPT, self.out] + list(args), env=env,
                              capture_output=True, text=True, timeout=60)

    def config(self):
        with open(os.path.join(self.out, "config.json")) as f:
            return json.load(f)

    def test_builds_the_release(self):
        p = self.make("nan_at_step=40", "compile_flex=false", 'attention="flex"')
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(sorted(os.listdir(self.out)), FILES)
        self.assertEqual(os.listdir(self.dir), ["rel"])  # no build directory left behind
        cfg = self.config()
        self.assertEqual((cfg["nan_at_step"], cfg["compile_flex"], cfg["attention"]),
                         (40, False, "flex"))
        for f in ("launch.sh", "train.py"):
            self.assertTrue(os.access(os.path.join(self.out, f), os.X_OK), f)
        self.assertEqual(os.stat(self.out).st_mode & 0o777, 0o755)

    def test_bad_argument_is_named_and_writes_nothing(self):
        for arg, why in (("lr=abc", "is not JSON"), ("lr", "no '='"), ("=0.1", "no KEY"),
                         ("PYTHON=", "interpreter's path"), ('attention=flex', "is not JSON")):
            p = self.make("layers=3", arg)
            self.assertEqual(p.returncode, 2, (arg, p.stderr))
            self.assertIn("argument %r: " % arg, p.stderr)
            self.assertIn(why, p.stderr)
            self.assertIn("KEY=JSON", p.stderr)
            self.assertNotIn("Traceback", p.stderr)
            self.assertEqual(os.listdir(self.dir), [], arg)  # no half-built OUT, no temp dir
        # an existing release is left as it was
        self.assertEqual(self.make("lr=0.5").returncode, 0)
        p = self.make("lr=abc")
        self.assertEqual(p.returncode, 2)
        self.assertEqual(self.config()["lr"], 0.5)
        self.assertEqual(os.listdir(self.dir), ["rel"])

    def test_key_spaces_are_stripped(self):
        p = self.make("lr = 0.1", " layers=3")
        self.assertEqual(p.returncode, 0, p.stderr)
        cfg = self.config()
        self.assertEqual((cfg["lr"], cfg["layers"]), (0.1, 3))
        self.assertFalse([k for k in cfg if k != k.strip()], cfg)

    def test_python_argument_writes_the_file(self):
        p = self.make("PYTHON=/opt/venvs/torch/bin/python")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(self.out, "PYTHON")) as f:
            self.assertEqual(f.read(), "/opt/venvs/torch/bin/python\n")
        self.assertNotIn("PYTHON", self.config())
        # with the variable set too, the argument is what counts
        shutil.rmtree(self.out)
        p = self.make("PYTHON=/a/bin/python", python_env="/b/bin/python")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(self.out, "PYTHON")) as f:
            self.assertEqual(f.read(), "/a/bin/python\n")

    def test_rebuild_without_python_says_the_old_one_is_kept(self):
        # OUT rebuilt for a config change without PYTHON=: the earlier OUT/PYTHON stays and the
        # release keeps running that interpreter, which used to go unsaid
        self.assertEqual(self.make("PYTHON=/opt/venvs/torch/bin/python").returncode, 0)
        p = self.make("lr=0.01")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(self.out, "PYTHON")) as f:
            self.assertEqual(f.read(), "/opt/venvs/torch/bin/python\n")
        self.assertIn("PYTHON from an earlier build is kept: the release runs "
                      "/opt/venvs/torch/bin/python; remove that file", p.stderr)
        # a build that names it, or a first build, says nothing of the kind
        p = self.make("PYTHON=/opt/venvs/other/bin/python")
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        shutil.rmtree(self.out)
        p = self.make("lr=0.01")
        self.assertEqual((p.returncode, p.stderr), (0, ""))

    def test_python_in_the_environment_is_refused(self):
        # the release would run the containers' python3, not the interpreter meant
        p = self.make(python_env="/opt/venvs/torch/bin/python")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("PYTHON is set in the environment", p.stderr)
        self.assertIn(" PYTHON=/opt/venvs/torch/bin/python`", p.stderr)  # the form to type
        self.assertIn("env -u PYTHON", p.stderr)
        self.assertEqual(os.listdir(self.dir), [])

    def test_docs_pass_python_as_an_argument(self):
        # docs/pytorch.md showed `PYTHON=/opt/... examples/pytorch/make-release.sh OUT`
        with open(os.path.join(HERE, "..", "docs", "pytorch.md")) as f:
            doc = f.read()
        self.assertIn("make-release.sh", doc)
        env_form = re.findall(r"PYTHON=\S+\s+\S*make-release\.sh", doc)
        self.assertEqual(env_form, [], "PYTHON=... before make-release.sh is ignored by it")


if __name__ == "__main__":
    unittest.main()
