"""examples/pytorch/train.py exits with drover-train's codes where a restart cannot help.

A full disk (ENOSPC writing a checkpoint or a log line) exited 1 (an uncaught OSError) or 120
(Python's failed flush of stdout at exit), or died by SIGABRT inside torch's zip writer: the agent
took all of them for a crash and restarted the release into a crash loop.  It now exits 6
(disk full), and 7 after 3 consecutive non-finite losses (diverged), as drover-train does
(common/trainexit.h); and 8 (peer_lost) when a gloo peer dies under it (two local ranks).  A tiny CPU model, a few steps per run; needs a python3 with torch
(python3-torch, tests/deps.txt), skipped without one.

Run by `make unit` (tests/run-unit.sh): python3 -m unittest discover -s python
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torchpy import torch_python  # noqa: E402

EXAMPLE = os.path.join(HERE, "..", "examples", "pytorch")
TINY = {"layers": 1, "heads": 2, "dim": 16, "seq": 8, "vocab": 64, "batch": 2, "data": "",
        "ckpt_every": 1}


PY = torch_python()


@unittest.skipUnless(PY, "no python3 with torch (python3-torch, tests/deps.txt)")
class ExitCodesTest(unittest.TestCase):
    def setUp(self):
        # the tiny models here run on the CPU wherever the tests run: on a GPU machine the example
        # picks CUDA, where flex_attention refuses their head size of 8 (at least 16), and the
        # exit codes under test were lost behind an InductorError (seen on an H200, torch 2.11)
        env = mock.patch.dict(os.environ, {"CUDA_VISIBLE_DEVICES": ""})
        env.start()
        self.addCleanup(env.stop)
        self.dir = tempfile.mkdtemp(prefix="drover-pt-test.")
        self.rel = os.path.join(self.dir, "release")
        os.mkdir(self.rel)
        shutil.copy(os.path.join(EXAMPLE, "train.py"), self.rel)  # as make-release.sh lays it out
        shutil.copy(os.path.join(HERE, "drover_heartbeat.py"), self.rel)
        self.run_dir = os.path.join(self.dir, "run")
        self.ckpts = os.path.join(self.run_dir, "checkpoints")
        os.makedirs(self.ckpts)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def train(self, full_tmp=False, stdout=None, raw_config=None, resume_releases=None, **cfg):
        """Run train.py; (exit code, heartbeat lines).  full_tmp: its checkpoint's temporary file
        (checkpoints/.tmp.HOST.PID) is /dev/full, so writing the checkpoint fails with ENOSPC.
        raw_config: config.json's text as it is (else TINY updated with cfg)."""
        conf = os.path.join(self.dir, "config.json")
        with open(conf, "w") as f:
            if raw_config is not None:
                f.write(raw_config)
            else:
                json.dump(dict(TINY, **cfg), f)
        r, w = os.pipe()
        env = dict(os.environ, DROVER_HEARTBEAT_FD=str(w), RANK="0", WORLD_SIZE="1",
                   DROVER_RUN_DIR=self.run_dir, OMP_NUM_THREADS="1")
        env.pop("DROVER_RESUME_RELEASES", None)
        if resume_releases is not None:  # as the agent sets it: the release and the promoted ones
            env["DROVER_RESUME_RELEASES"] = resume_releases
        # exec keeps the shell's pid: the link is in place before train.py starts
        script = ('[ "$FULL" = 1 ] && ln -s /dev/full "$CKPTS/.tmp.$(uname -n).$$"; exec "$PY" "$REL/train.py" '
                  '--config "$CONF"')
        env.update(FULL="1" if full_tmp else "0", CKPTS=self.ckpts, PY=PY, CONF=conf,
                   REL=self.rel)
        p = subprocess.run(["sh", "-c", script], env=env, pass_fds=(w,), timeout=180,
                           stdout=stdout if stdout is not None else subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
        os.close(w)
        raw = b""
        while True:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            raw += chunk
        os.close(r)
        beats = [json.loads(x) for x in raw.decode().splitlines()]
        self.last_stderr = p.stderr.decode(errors="replace")
        return p.returncode, beats

    def ckpt_files(self):
        return sorted(x for x in os.listdir(self.ckpts) if x.startswith("torch-"))

    def test_exit_codes(self):
        # diverged: NaN from the 2nd step on; exits 7 after the 3rd non-finite step (step 4),
        # keeping step 1's checkpoint and writing none after
        code, beats = self.train(max_steps=50, nan_at_step=2)
        self.assertEqual(code, 7, self.last_stderr)
        steps = [b["step"] for b in beats if b.get("phase") == "train" and "step" in b]
        self.assertEqual(max(steps), 4)
        self.assertIn("diverged", beats[-1].get("error", ""))
        self.assertEqual(self.ckpt_files(), ["torch-local-1.pt"])

        # one non-finite loss that the run recovers from (a GradScaler's skipped step): the
        # checkpoints go on after it; the first version stopped checkpointing for good
        shutil.rmtree(self.ckpts)
        os.makedirs(self.ckpts)
        code, beats = self.train(max_steps=5, nan_once_at_step=2, keep_ckpts=10)
        self.assertEqual(code, 0, self.last_stderr)
        self.assertEqual(self.ckpt_files(), ["torch-local-%d.pt" % s for s in (1, 3, 4, 5)])

        # a log line on a full disk: the resume's "rank 0 resumed" line to /dev/full
        with open("/dev/full", "w") as full:
            code, beats = self.train(max_steps=3, stdout=full)
        self.assertEqual(code, 6, self.last_stderr)  # was 1, or 120
        self.assertIn("disk full", beats[-1].get("error", ""))
        self.assertIn("No space left on device", beats[-1].get("error", ""))

        # a checkpoint on a full disk
        shutil.rmtree(self.ckpts)
        os.makedirs(self.ckpts)
        code, beats = self.train(full_tmp=True, max_steps=3)
        self.assertEqual(code, 6, self.last_stderr)  # was -6 (SIGABRT in torch's zip writer) or 1
        self.assertIn("disk full", beats[-1].get("error", ""))
        self.assertEqual(self.ckpt_files(), [])

    def test_bad_config_exits_3(self):
        # A newcomer's config.json with a missing comma: the preflight's reason quoted the end of
        # a traceback in /usr/lib/python3.11/json/decoder.py, never naming config.json, and the
        # exit (1) was one the agent retries.  Now: one line naming the file and the position,
        # exit 3 (config, not retried), the heartbeat's error saying the same.
        conf = os.path.join(self.dir, "config.json")
        code, beats = self.train(raw_config='{"layers": 1 "heads": 2}\n')
        self.assertEqual(code, 3, self.last_stderr)
        err = self.last_stderr.strip()
        self.assertNotIn("Traceback", err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertTrue(err.startswith("train.py: config error: %s: invalid JSON at line 1 column 14: "
                                       "Expecting ',' delimiter: fix the file" % conf), err)
        self.assertEqual(beats[-1]["phase"], "done")
        self.assertEqual(beats[-1]["error"], "config error: config.json: invalid JSON at line 1 "
                                             "column 14: Expecting ',' delimiter")
        self.assertEqual(self.ckpt_files(), [])

        # valid JSON that is not an object
        code, beats = self.train(raw_config='[1, 2]\n')
        self.assertEqual(code, 3, self.last_stderr)
        self.assertIn("%s: not a JSON object" % conf, self.last_stderr)
        self.assertIn("but a JSON array", beats[-1]["error"])

        # the preflight's run (--selftest, no heartbeat fd) says the same and exits 3 too
        with open(conf, "w") as f:
            f.write('{"layers": 1,}')
        env = dict(os.environ, DROVER_RUN_DIR=self.run_dir, OMP_NUM_THREADS="1")
        env.pop("DROVER_HEARTBEAT_FD", None)
        p = subprocess.run([PY, os.path.join(self.rel, "train.py"), "--config", conf, "--selftest"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
        err = p.stderr.decode(errors="replace").strip()
        self.assertEqual(p.returncode, 3, err)
        self.assertIn("config.json: invalid JSON at line 1 column 14: Expecting property name", err)

        # the release's own config.json (launch.sh's --config under drover): named as the file in
        # the release directory the user deployed, not the container's
        # /var/lib/drover/releases/<id>/config.json, which is nowhere on their machine
        inside = os.path.join(self.rel, "config.json")
        with open(inside, "w") as f:
            f.write('{"lrr": 0.1}')
        try:
            p = subprocess.run([PY, os.path.join(self.rel, "train.py"), "--config", inside, "--selftest"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
        finally:
            os.unlink(inside)
        err = p.stderr.decode(errors="replace").strip()
        self.assertEqual(p.returncode, 3, err)
        self.assertTrue(err.startswith('train.py: config error: config.json (in the release directory): '
                                       'unknown key "lrr"'), err)
        self.assertNotIn(self.rel, err)

        # --config naming a file that is not there (a typo in launch.sh): exit 3 naming it, not a
        # run on the built-in defaults
        missing = os.path.join(self.dir, "conifg.json")
        p = subprocess.run([PY, os.path.join(self.rel, "train.py"), "--config", missing, "--selftest"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
        err = p.stderr.decode(errors="replace").strip()
        self.assertEqual(p.returncode, 3, err)
        self.assertIn("config error: %s: cannot read it: No such file or directory" % missing, err)

    def test_bad_config_values_exit_3(self):
        # A newcomer's adversarial config.json: a typo ("lrr") was silently ignored; a wrong
        # type or a heads count not dividing dim exited 1 with a traceback (retried); ckpt_every
        # 0 passed the preflight then divided by zero at step 1; batch 0 reported itself
        # diverged (7); an unknown attention was accepted.  Each is now exit 3 with one line
        # naming the file, the key and what is allowed, in the preflight (--selftest) too.
        conf = os.path.join(self.dir, "config.json")
        env = dict(os.environ, DROVER_RUN_DIR=self.run_dir, OMP_NUM_THREADS="1")
        env.pop("DROVER_HEARTBEAT_FD", None)
        cases = [
            ({"lrr": 0.1}, 'unknown key "lrr" (did you mean "lr"?); the keys are '),
            ({"layers": "two"}, 'key "layers" is "two": allowed: an integer >= 1'),
            ({"lr": None}, 'key "lr" is null: allowed: a number > 0'),
            ({"heads": 3}, 'key "heads" is 3: allowed: a divisor of "dim" ("dim" is 16)'),
            ({"ckpt_every": 0}, 'key "ckpt_every" is 0: allowed: an integer >= 1'),
            ({"batch": 0}, 'key "batch" is 0: allowed: an integer >= 1'),
            ({"attention": "bogus"}, 'key "attention" is "bogus": allowed: "auto" or "flex" or '
                                     '"sdpa" or "plain"'),
            ({"compile_flex": "false"}, 'key "compile_flex" is "false": allowed: true or false'),
            # steps count from 1: a 0 never fired, and its "NaN at step 0" release was promoted
            ({"nan_at_step": 0}, 'key "nan_at_step" is 0: allowed: an integer >= 1, or -1 (off)'),
            ({"hang_at_step": -2}, 'key "hang_at_step" is -2: allowed: an integer >= 1, or -1'),
        ]
        for bad, what in cases:
            with self.subTest(bad=bad):
                code, beats = self.train(max_steps=3, **bad)
                self.assertEqual(code, 3, self.last_stderr)
                err = self.last_stderr.strip()
                self.assertEqual(len(err.splitlines()), 1, err)
                self.assertTrue(err.startswith("train.py: config error: %s: %s" % (conf, what)), err)
                self.assertEqual(beats[-1]["phase"], "done")
                full, got = "config error: config.json: " + what, beats[-1]["error"]
                n = min(len(full), len(got))
                self.assertEqual(got[:n], full[:n])
                self.assertEqual(self.ckpt_files(), [])
                # the preflight's run says the same
                p = subprocess.run([PY, os.path.join(self.rel, "train.py"), "--config", conf,
                                    "--selftest"], env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, timeout=60)
                self.assertEqual(p.returncode, 3, p.stderr)
                self.assertIn(what, p.stderr.decode())
        # a good one still trains
        code, beats = self.train(max_steps=2, heads=4, lr=1)
        self.assertEqual(code, 0, self.last_stderr)

    def resumed(self, rel, **cfg):
        """Run release `rel` (DROVER_RELEASE); (the resumed_from of its last init heartbeat, its stdout)."""
        out = os.path.join(self.dir, "stdout")
        with mock.patch.dict(os.environ, {"DROVER_RELEASE": rel}), open(out, "w") as f:
            code, beats = self.train(stdout=f, **cfg)
        self.assertEqual(code, 0, self.last_stderr)
        with open(out) as f:
            return [b for b in beats if b["phase"] == "init"][-1]["resumed_from"], f.read()

    def test_new_model_shape_starts_fresh(self):
        # A release built with layers=3 after a promoted one of 2 resumed the promoted
        # release's checkpoint: load_state_dict raised (Missing key(s)), the rank exited 1 and
        # the deploy was reverted, every time.  A checkpoint of another shape is now skipped,
        # saying why, and the release trains from scratch; a same-shape one still resumes.
        self.assertEqual(self.resumed("aaa", max_steps=3)[0], -1)
        self.assertEqual(self.ckpt_files(), ["torch-aaa-2.pt", "torch-aaa-3.pt"])
        # same shape, another release: resumes
        self.assertEqual(self.resumed("aab", max_steps=4)[0], 3)
        # another shape: fresh, and says why
        r, out = self.resumed("bbb", max_steps=2, layers=2)
        self.assertEqual(r, -1)
        self.assertIn("rank 0: checkpoint torch-aab-4.pt (release aab, step 4) is of another "
                      "model shape (layers 1, not 2): its weights cannot be loaded", out)
        self.assertIn("training from step 0", out)
        # its restart resumes its own checkpoint, past the newer ones of the old shape
        self.assertEqual(self.resumed("bbb", max_steps=3, layers=2)[0], 2)
        # a checkpoint written before the shape was stored: compared by its weights
        script = ("import torch, sys\ns = torch.load(sys.argv[1])\ndel s['shape']\ns['step'] = 9\n"
                  "torch.save(s, sys.argv[2])\n")
        subprocess.run([PY, "-c", script, os.path.join(self.ckpts, "torch-aab-4.pt"),
                        os.path.join(self.ckpts, "torch-old-9.pt")], check=True)
        r, out = self.resumed("ccc", max_steps=5, layers=2)
        self.assertEqual(r, 3)  # bbb's step 3, not the old layers=1 one at step 9
        self.assertIn("torch-old-9.pt (release aab, step 9) is of another model shape (its "
                      "weights differ: 12 weights missing, e.g. blocks.1.fc.bias)", out)
        self.assertEqual(self.resumed("ddd", max_steps=10)[0], 9)  # layers 1: it fits

    def test_torn_newest_checkpoint_is_skipped(self):
        # A truncated newest checkpoint (torch.save in place on a full disk, before
        # save_checkpoint) made every restart die on it (OSError EINVAL, exit 1, retried): the
        # example resumes the older one through drover_heartbeat.load_checkpoint, saying why
        self.assertEqual(self.train(max_steps=3)[0], 0)
        self.assertEqual(self.ckpt_files(), ["torch-local-2.pt", "torch-local-3.pt"])
        newest = os.path.join(self.ckpts, "torch-local-3.pt")
        with open(newest, "r+b") as f:
            f.truncate(os.path.getsize(newest) // 2)
        code, beats = self.train(max_steps=4)
        self.assertEqual(code, 0, self.last_stderr)
        self.assertEqual([b for b in beats if b["phase"] == "init"][-1]["resumed_from"], 2)
        self.assertIn("checkpoint '%s' cannot be loaded (" % newest, self.last_stderr)
        self.assertIn("skipped, trying an older one", self.last_stderr)

    def test_config_lr_after_resume_and_failed_releases_pruned(self):
        # A release whose config.json changed lr resumed the promoted release's checkpoint, and
        # load_state_dict put the old lr back: the change never took effect, and the release was
        # promoted on the old settings (a user's lr 1e6, which diverges by hand, was promoted).
        # And a failed release's checkpoints were never deleted: one model and optimizer state per
        # failed deploy, until the disk was full.
        good, bad, new = "a" * 64, "b" * 64, "c" * 64
        with mock.patch.dict(os.environ, {"DROVER_RELEASE": good}):
            self.assertEqual(self.train(max_steps=3, lr=1e-3, resume_releases=good)[0], 0)
        with mock.patch.dict(os.environ, {"DROVER_RELEASE": bad}):  # on probation, then reverted
            self.assertEqual(self.train(max_steps=5, resume_releases=bad + "," + good)[0], 0)
        self.assertEqual(self.ckpt_files(), ["torch-aaaaaaaaaaaa-2.pt", "torch-aaaaaaaaaaaa-3.pt",
                                             "torch-bbbbbbbbbbbb-4.pt", "torch-bbbbbbbbbbbb-5.pt"])
        with mock.patch.dict(os.environ, {"DROVER_RELEASE": new}):
            code, beats = self.train(max_steps=5, lr=0.25, resume_releases=new + "," + good)
        self.assertEqual(code, 0, self.last_stderr)
        self.assertEqual([b for b in beats if b["phase"] == "init"][-1]["resumed_from"], 3)
        # the failed release's are gone, the promoted one's kept (a revert resumes from them)
        self.assertEqual(self.ckpt_files(), ["torch-aaaaaaaaaaaa-2.pt", "torch-aaaaaaaaaaaa-3.pt",
                                             "torch-cccccccccccc-4.pt", "torch-cccccccccccc-5.pt"])
        lr = subprocess.run([PY, "-c", "import torch, sys\nprint(torch.load(sys.argv[1])['opt']"
                             "['param_groups'][0]['lr'])",
                             os.path.join(self.ckpts, "torch-cccccccccccc-5.pt")],
                            check=True, capture_output=True, text=True).stdout.strip()
        self.assertEqual(float(lr), 0.25)

    def test_lost_peer_exits_8(self):
        # A gang of two over gloo; rank 1 aborts at its 3rd step (abort_at_step): rank 0's next
        # collective fails with gloo's lost connection, and it exits 8 (peer_lost,
        # drover_heartbeat.peer_lost / hb.exit_peer_lost), its last heartbeat saying why.
        import socket
        with socket.socket() as so:
            so.bind(("127.0.0.1", 0))
            port = so.getsockname()[1]
        conf = os.path.join(self.dir, "config.json")
        with open(conf, "w") as f:
            json.dump(dict(TINY, max_steps=1000, ckpt_every=10 ** 6, abort_at_step=3), f)
        procs, pipes = [], []
        for rank in (0, 1):
            r, w = os.pipe()
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), DROVER_HEARTBEAT_FD=str(w),
                       DROVER_RUN_DIR=self.run_dir, OMP_NUM_THREADS="1")
            env.pop("DROVER_RESUME_RELEASES", None)
            procs.append(subprocess.Popen([PY, os.path.join(self.rel, "train.py"), "--config", conf],
                                          env=env, pass_fds=(w,), stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE))
            os.close(w)
            pipes.append(r)
        try:
            errs = [p.communicate(timeout=120)[1].decode(errors="replace") for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        raw = b""
        while True:
            chunk = os.read(pipes[0], 65536)
            if not chunk:
                break
            raw += chunk
        for r in pipes:
            os.close(r)
        self.assertEqual(procs[1].returncode, -6, errs[1])  # the rank that died
        self.assertEqual(procs[0].returncode, 8, errs[0])   # the casualty: peer_lost, not 1
        last = json.loads(raw.decode().splitlines()[-1])
        self.assertEqual(last["phase"], "done")
        self.assertTrue(last["error"].startswith("peer lost: RuntimeError: "), last)
        self.assertIn("train.py: rank 0 lost a peer: RuntimeError: ", errs[0])

    def test_sigterm_before_the_gang_met(self):
        # The agent stops a gang that has just started (a deploy's revert stopping a crash loop's
        # restart; drover stop 5 s after drover start): rank 0 sat in init_process_group, the
        # TCPStore waiting for rank 1, which that SIGTERM had ended (EINTR), and rank 0's handler
        # could not run there: it left only at SIGKILL, after the job's grace (120 s measured on
        # the lab).  Here rank 1 never comes; rank 0 must end on SIGTERM all the same.
        import signal
        import socket
        import time
        with socket.socket() as so:
            so.bind(("127.0.0.1", 0))
            port = so.getsockname()[1]
        conf = os.path.join(self.dir, "config.json")
        with open(conf, "w") as f:
            json.dump(dict(TINY, max_steps=5), f)
        env = dict(os.environ, RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), DROVER_RUN_DIR=self.run_dir, OMP_NUM_THREADS="1")
        env.pop("DROVER_HEARTBEAT_FD", None)
        p = subprocess.Popen([PY, os.path.join(self.rel, "train.py"), "--config", conf], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            # until rank 0 listens for its peers: inside init_process_group
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and p.poll() is None:
                with socket.socket() as c:
                    if c.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.1)
            self.assertIsNone(p.poll(), "train.py ended before it listened")
            time.sleep(0.5)
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.fail("rank 0 still waiting for its peer 15 s after SIGTERM")
            self.assertNotEqual(p.returncode, 0)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stderr.close()

if __name__ == "__main__":
    unittest.main()
