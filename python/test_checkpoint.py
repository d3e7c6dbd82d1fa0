"""drover_heartbeat's checkpoint helpers and disk_full() against a real full filesystem.

docs/pytorch.md's snippet once saved with torch.save(obj, path) in place.  On a full checkpoint
disk torch raised RuntimeError ("PytorchStreamWriter failed writing file data/0: file write
failed"; torch 1.13: "unexpected pos 320 vs 248"), which disk_full() did not know (exit 1,
retried), the process died of SIGABRT in torch's zip writer and left a truncated .pt, and every
restart resumed that file and died (OSError: [Errno 22] Invalid argument): a crash loop whose
reason never said "disk full".  Now save_checkpoint() is atomic (temp file, fsync, rename) and
raises ENOSPC, load_checkpoint() skips a checkpoint that does not load, and disk_full(e, path)
knows torch's write error when path's filesystem is full.

The full filesystem is a 2 MiB tmpfs mounted under the test's temp directory (root), filled
with a file; without root the tests that need it are skipped (disk_full's statvfs rule is also
tested with a patched os.statvfs).  torch runs in a subprocess (torchpy.torch_python()).

Run by `make unit` (tests/run-unit.sh): python3 -m unittest discover -s python
"""

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import drover_heartbeat  # noqa: E402
from torchpy import torch_python  # noqa: E402

PY = torch_python()

# the worker side: a state of about 1.5 MiB, bigger than what is left on the filled tmpfs
PRELUDE = """
import errno, json, os, sys
sys.path.insert(0, %r)
import torch
import drover_heartbeat as dh
big = {"model": {"w": torch.arange(400000, dtype=torch.float32)}, "step": 2}
small = {"model": {"w": torch.ones(4)}, "step": 1}
def fill(d):
    try:
        with open(os.path.join(d, "filler"), "wb") as f:
            while True:
                f.write(b"x" * 65536)
                f.flush()
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
""" % HERE


class FullFsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="drover-ckpt-test.")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.full = os.path.join(self.dir, "full")
        os.mkdir(self.full)
        if os.geteuid() != 0 or subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", self.full],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
            self.skipTest("cannot mount a small tmpfs (not root)")
        self.addCleanup(subprocess.run, ["umount", "-l", self.full])

    def worker(self, code, env=None):
        """Run PRELUDE + code with torch; (exit code, the JSON object it printed last, stderr)."""
        p = subprocess.run([PY, "-c", PRELUDE + code], env=dict(os.environ, **(env or {})),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        out = p.stdout.decode().strip().splitlines()
        return p.returncode, json.loads(out[-1]) if out else None, p.stderr.decode(errors="replace")

    @unittest.skipUnless(PY, "no python3 with torch (python3-torch, tests/deps.txt)")
    def test_save_checkpoint_on_full_disk(self):
        code, got, err = self.worker("""
d = sys.argv[1] if len(sys.argv) > 1 else %r
p = os.path.join(d, "ck.pt")
dh.save_checkpoint(small, p)
fill(d)
try:
    dh.save_checkpoint(big, p)
    res = {"raised": None}
except Exception as e:
    res = {"raised": type(e).__name__, "errno": getattr(e, "errno", None), "disk_full": dh.disk_full(e)}
res["old_step"] = torch.load(p)["step"]
res["left"] = sorted(x for x in os.listdir(d) if x != "filler")
print(json.dumps(res))
""" % self.full)
        self.assertEqual(code, 0, err)  # not SIGABRT in torch's zip writer
        self.assertEqual(got["raised"], "OSError", got)
        self.assertEqual(got["errno"], errno.ENOSPC)
        self.assertTrue(got["disk_full"])
        self.assertEqual(got["old_step"], 1)  # the previous checkpoint, whole
        self.assertEqual(got["left"], ["ck.pt"])  # no temp file left behind

    @unittest.skipUnless(PY, "no python3 with torch (python3-torch, tests/deps.txt)")
    def test_torch_save_in_place_on_full_disk_is_disk_full(self):
        # the user's own torch.save(obj, path): torch's RuntimeError, told apart by the
        # checkpoint directory's free space; os._exit before torch's writer aborts in its
        # destructor (what hb.exit_disk_full does)
        other = os.path.join(self.dir, "roomy")
        os.mkdir(other)
        code, got, err = self.worker("""
d, other = %r, %r
fill(d)
try:
    torch.save(big, os.path.join(d, "ck.pt"))
    print(json.dumps({"raised": None}))
except RuntimeError as e:
    print(json.dumps({"raised": str(e)[:200], "path": dh.disk_full(e, os.path.join(d, "ck.pt")),
                      "dir": dh.disk_full(e, d), "env": dh.disk_full(e), "roomy": dh.disk_full(e, other),
                      "none": dh.disk_full(e, None) if "DROVER_RUN_DIR" not in os.environ else None}))
    sys.stdout.flush()
    os._exit(0)  # inside the except: once e is gone, torch's writer aborts in its destructor
""" % (self.full, other), env={"DROVER_RUN_DIR": self.full})
        self.assertEqual(code, 0, err)
        self.assertIsNotNone(got["raised"], got)
        self.assertTrue(got["path"], got)
        self.assertTrue(got["dir"], got)
        self.assertTrue(got["env"], got)  # $DROVER_RUN_DIR by default
        self.assertFalse(got["roomy"], got)  # the same error on a filesystem with room: not disk full

    @unittest.skipUnless(PY, "no python3 with torch (python3-torch, tests/deps.txt)")
    def test_load_checkpoint_skips_a_truncated_one(self):
        d = os.path.join(self.dir, "ck")
        os.mkdir(d)
        code, got, err = self.worker("""
d = %r
dh.save_checkpoint(small, os.path.join(d, "ck-1.pt"))
dh.save_checkpoint(big, os.path.join(d, "ck-2.pt"))
with open(os.path.join(d, "ck-2.pt"), "r+b") as f:  # torn, as torch.save in place left it
    f.truncate(os.path.getsize(os.path.join(d, "ck-2.pt")) // 2)
newest = [os.path.join(d, "ck-%%d.pt" %% s) for s in (2, 1)]
path, state = dh.load_checkpoint(newest)
none = dh.load_checkpoint(newest[:1])
bad_step = dh.load_checkpoint(newest[1:], check=lambda st: st["no such key"])
print(json.dumps({"path": os.path.basename(path), "step": state["step"], "none": list(none),
                  "bad_step": list(bad_step)}))
""" % d)
        self.assertEqual(code, 0, err)
        self.assertEqual(got, {"path": "ck-1.pt", "step": 1, "none": [None, None],
                               "bad_step": [None, None]})
        self.assertRegex(err, r"checkpoint '.*ck-2\.pt' cannot be loaded \(\w+: .*\): skipped, "
                              r"trying an older one")
        self.assertIn("ck-1.pt' cannot be loaded (KeyError", err)  # check() refused it


class DiskFullRuleTest(unittest.TestCase):
    """disk_full()'s reading of torch's write error, the filesystem's state patched."""

    TORCH2 = ("[enforce fail at inline_container.cc:471] . PytorchStreamWriter failed writing "
              "file data/0: file write failed")
    TORCH113 = "[enforce fail at inline_container.cc:325] . unexpected pos 320 vs 248"

    @staticmethod
    def statvfs(avail_blocks, favail=1000):
        return os.statvfs_result((4096, 4096, 10000, avail_blocks, avail_blocks, 1000, favail,
                                  favail, 0, 255))

    def test_torch_write_error_needs_a_full_filesystem(self):
        df = drover_heartbeat.disk_full
        d = tempfile.mkdtemp(prefix="drover-df-test.")
        self.addCleanup(shutil.rmtree, d, True)
        for text in (self.TORCH2, self.TORCH113):
            with mock.patch.object(drover_heartbeat.os, "statvfs", return_value=self.statvfs(0)):
                self.assertTrue(df(RuntimeError(text), d), text)
                self.assertTrue(df(RuntimeError(text), os.path.join(d, "not-yet", "ck.pt")), text)
                self.assertFalse(df(RuntimeError("unexpected pos 3 vs 2"), d))  # not torch's writer
                self.assertFalse(df(ValueError(text), d))
            with mock.patch.object(drover_heartbeat.os, "statvfs",
                                   return_value=self.statvfs(10000, favail=0)):
                self.assertTrue(df(RuntimeError(text), d))  # no inode left
            with mock.patch.object(drover_heartbeat.os, "statvfs", return_value=self.statvfs(10000)):
                self.assertFalse(df(RuntimeError(text), d))  # 40 MB free: another failure
            with mock.patch.dict(os.environ, {}, clear=False):
                os.environ.pop("DROVER_RUN_DIR", None)
                self.assertFalse(df(RuntimeError(text)))  # nowhere to look: not said full
        # the OSError rule as before
        self.assertTrue(df(OSError(errno.ENOSPC, "No space left on device")))
        self.assertFalse(df(OSError(errno.EIO, "Input/output error"), d))


class DeadTempTest(unittest.TestCase):
    """A save killed (SIGKILL, an OOM kill) between its temp file and the rename left
    .tmp.<pid> in the checkpoint directory for good, one per kill: the next save removes those
    of this host whose process is gone, and no other's (a live one's, another host's)."""

    def test_dead_temps_of_this_host_removed(self):
        d = tempfile.mkdtemp(prefix="drover-ckpt-temps.")
        self.addCleanup(shutil.rmtree, d, True)
        host = drover_heartbeat.socket.gethostname()
        dead = subprocess.Popen(["true"])
        dead.wait()
        live = subprocess.Popen(["sleep", "30"])
        self.addCleanup(live.kill)
        names = {"dead": ".tmp.%s.%d" % (host, dead.pid), "live": ".tmp.%s.%d" % (host, live.pid),
                 "other": ".tmp.otherhost-%s.%d" % (host, dead.pid)}
        for n in names.values():
            with open(os.path.join(d, n), "wb") as f:
                f.write(b"x" * 1000)
        drover_heartbeat.save_checkpoint({"step": 1}, os.path.join(d, "ckpt.pt"),
                                         save=lambda obj, f: f.write(json.dumps(obj).encode()))
        left = set(os.listdir(d))
        self.assertNotIn(names["dead"], left)
        self.assertIn(names["live"], left)
        self.assertIn(names["other"], left)
        self.assertIn("ckpt.pt", left)
        self.assertEqual(len(left), 3, left)


class DocsSnippetTest(unittest.TestCase):
    def test_pytorch_md_snippet_saves_atomically(self):
        # the snippet is what users copy: its save must be the atomic one, its resume must skip
        # a torn checkpoint, and its disk_full() must know the checkpoint directory
        with open(os.path.join(HERE, "..", "docs", "pytorch.md")) as f:
            doc = f.read()
        m = re.search(r"## 1\. The lines to add to your script.*?```python\n(.*?)```", doc, re.S)
        self.assertIsNotNone(m, "docs/pytorch.md lost section 1's snippet")
        snippet = m.group(1)
        self.assertNotIn("torch.save(", snippet)
        self.assertIn("save_checkpoint(", snippet)
        self.assertIn("load_checkpoint(", snippet)
        self.assertRegex(snippet, r"disk_full\(e, \w+")


if __name__ == "__main__":
    unittest.main()
