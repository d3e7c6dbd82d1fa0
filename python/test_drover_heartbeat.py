"""unittest tests of drover_heartbeat.py and of the raw-protocol example in docs/protocol.md.

Run by `make unit` (tests/run-unit.sh): python3 -m unittest discover -s python
"""

import contextlib
import errno
import io
import json
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import drover_heartbeat  # noqa: E402
from torchpy import torch_python  # noqa: E402
from drover_heartbeat import Heartbeat  # noqa: E402

ENV = {"DROVER_HEARTBEAT_FD": "-1", "RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4",
       "DROVER_RELEASE": "ab" * 32}


class FakeTensor:
    """torch.Tensor's float(): one element (0-d or not) converts, more raise."""

    def __init__(self, data):
        self.data = data

    def __float__(self):
        if isinstance(self.data, list):
            if len(self.data) != 1:
                raise ValueError("only one element tensors can be converted to Python scalars")
            return float(self.data[0])
        return float(self.data)

    def __repr__(self):
        return "tensor(%r)" % (self.data,)


TORCH_PY = torch_python()


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def read_lines(fd):
    os.set_blocking(fd, False)
    data = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    return [json.loads(x) for x in data.decode().splitlines()]


class HeartbeatTest(unittest.TestCase):
    def setUp(self):
        self.r, self.w = os.pipe()
        self.clock = Clock()
        self.hb = Heartbeat(fd=self.w, env=ENV, backend="torch-cpu", clock=self.clock)
        hello = read_lines(self.r)  # Heartbeat()'s own first line (test_hello_first)
        self.assertEqual([x.get("kind") for x in hello], ["hello"])

    def tearDown(self):
        for fd in (self.r, self.w):
            try:
                os.close(fd)
            except OSError:
                pass

    def test_env_and_step(self):
        self.hb.init(resumed_from=40)
        self.clock.t += 0.5
        self.hb.step(41, 3.25, tokens=1000)
        lines = read_lines(self.r)
        self.assertEqual(len(lines), 2)
        init, st = lines
        self.assertEqual(init["phase"], "init")
        self.assertEqual(init["step"], 40)
        self.assertEqual(init["resumed_from"], 40)
        self.assertEqual(st["v"], 1)
        self.assertEqual(st["rank"], 3)
        self.assertEqual(st["pid"], os.getpid())
        self.assertEqual(st["release"], "ab" * 32)
        self.assertEqual(st["phase"], "train")
        self.assertEqual(st["step"], 41)
        self.assertEqual(st["loss"], 3.25)
        self.assertEqual(st["tokens"], 1000)
        self.assertAlmostEqual(st["tok_s"], 2000.0)
        self.assertAlmostEqual(st["step_ms"], 500.0)
        self.assertEqual(st["nonfinite"], 0)

    def test_nonfinite_loss_is_null_and_counted(self):
        self.hb.step(1, 2.0, tokens=10)
        self.hb.step(2, float("nan"), tokens=10)
        self.hb.step(3, float("inf"), tokens=10)
        self.hb.step(4, FakeTensor([float("-inf")]), tokens=10)  # a one-element tensor's NaN/inf too
        self.hb.step(5, 1.5, tokens=10)
        raw = os.read(self.r, 65536).decode()
        self.assertNotIn("NaN", raw)
        self.assertNotIn("Infinity", raw)
        lines = [json.loads(x) for x in raw.splitlines()]
        self.assertEqual([x["loss"] for x in lines], [2.0, None, None, None, 1.5])
        self.assertEqual([x["nonfinite"] for x in lines], [0, 1, 2, 3, 0])
        self.assertEqual(self.hb.invalid, 0)

    def test_loss_that_is_not_a_number_is_refused(self):
        # a list, a multi-element tensor, None, "2.0", a bool were sent as a non-finite loss:
        # 3 of them and the agent stopped the gang for "3 consecutive non-finite steps", a
        # divergence that was not.  They are bad calls, like tokens=None.
        self.hb.step(1, 2.0, tokens=10)
        read_lines(self.r)
        bad = ([3.0, 2.9], FakeTensor([3.0, 2.9]), None, "2.0", True, b"1", object(), 1j)
        err = self.bad_call(lambda: [self.hb.step(2, v, tokens=10) for v in bad])
        self.assertEqual(err.count("\n"), 1, err)  # one line for them all
        self.assertIn("step(): bad loss [3.0, 2.9]", err)
        self.assertIn("pass a float or a one-element tensor", err)
        self.assertEqual(self.hb.invalid, len(bad))
        self.assertEqual(read_lines(self.r), [])  # nothing sent
        self.assertEqual((self.hb.nonfinite, self.hb.last_step, self.hb.tokens), (0, 1, 10))
        # numbers of any kind, one-element tensors (0-d or not) are losses
        for i, v in enumerate((3, 2.5, FakeTensor([1.25]), FakeTensor(0.5))):
            self.hb.step(3 + i, v, tokens=10)
        lines = read_lines(self.r)
        self.assertEqual([x["loss"] for x in lines], [3.0, 2.5, 1.25, 0.5])
        self.assertEqual(self.hb.invalid, len(bad))

    @unittest.skipUnless(TORCH_PY, "no python3 with torch")
    def test_loss_torch_tensors(self):
        # the real thing: torch's multi-element tensor, bool tensor and one-element tensors
        code = ("import io, sys, contextlib, torch; sys.path.insert(0, %r)\n"
                "from drover_heartbeat import Heartbeat\n"
                "hb = Heartbeat(report_uncaught=False)\n"
                "hb.step(1, torch.tensor([3.0, 2.9]), tokens=256)\n"
                "hb.step(1, torch.ones(2, 2), tokens=256)\n"
                "hb.step(1, torch.tensor(2.5), tokens=256)\n"
                "hb.step(2, torch.tensor([1.5], requires_grad=True), tokens=256)\n"
                "hb.step(3, torch.tensor(float('nan')), tokens=256)\n"
                "print(hb.invalid, hb.last_step, hb.nonfinite)\n" % HERE)
        r, w = os.pipe()
        env = dict(os.environ, DROVER_HEARTBEAT_FD=str(w), RANK="0")
        p = subprocess.run([TORCH_PY, "-c", code], env=env, pass_fds=(w,), timeout=120,
                           capture_output=True, text=True)
        os.close(w)
        lines = read_lines(r)
        os.close(r)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split(), ["2", "3", "1"])
        self.assertEqual(lines[0].get("kind"), "hello")  # Heartbeat()'s
        self.assertEqual([x["loss"] for x in lines[1:]], [2.5, 1.5, None])
        self.assertIn("bad loss tensor([3.0000, 2.9000])", p.stderr)

    def test_tokens_and_step_must_be_integers(self):
        self.hb.step(1, 2.0, tokens=10)
        read_lines(self.r)
        for step, tokens in ((2, True), (2, "256"), (2, 10.5), (2, -1), (True, 10), ("2", 10),
                             (2.5, 10)):
            self.bad_call(lambda: self.hb.step(step, 1.0, tokens=tokens))
        self.assertEqual(self.hb.invalid, 7)
        self.assertEqual(read_lines(self.r), [])
        # a float that is a whole number is that number (docs/pytorch.md)
        self.hb.step(2.0, 1.0, tokens=10.0)
        st = read_lines(self.r)[-1]
        self.assertEqual((st["step"], st["tokens"]), (2, 20))
        self.assertEqual(self.hb.invalid, 7)

    def test_step_going_back_is_sent(self):
        # a worker that went back to a checkpoint (after a loss spike) steps from there: the
        # agent takes any change of step as progress, so it is sent as it is, not refused
        self.hb.step(50, 2.0, tokens=10)
        self.hb.step(41, 2.0, tokens=10)
        self.assertEqual([x["step"] for x in read_lines(self.r)], [50, 41])
        self.assertEqual(self.hb.invalid, 0)

    def test_phase_context(self):
        self.hb.step(10, 1.0, tokens=1)
        with self.hb.phase("checkpoint"):
            self.clock.t += 30  # a long save is not a slow step
        self.hb.checkpointed(10)
        self.clock.t += 1
        self.hb.step(11, 1.0, tokens=100)
        lines = read_lines(self.r)
        self.assertEqual([x["phase"] for x in lines], ["train", "checkpoint", "train", "train"])
        self.assertEqual(lines[-1]["ckpt_step"], 10)
        self.assertAlmostEqual(lines[-1]["tok_s"], 100.0)

    def test_phase_restored_on_exception(self):
        self.hb.step(1, 1.0, tokens=1)
        with self.assertRaises(RuntimeError):
            with self.hb.phase("checkpoint"):
                raise RuntimeError("disk")
        self.assertEqual(self.hb.current_phase, "train")

    def test_error_and_done(self):
        self.hb.error("x" * 500)
        self.hb.done()
        lines = read_lines(self.r)
        self.assertEqual(lines[0]["phase"], "done")
        self.assertEqual(len(lines[0]["error"]), 150)
        self.assertEqual(lines[1]["phase"], "done")
        self.assertNotIn("error", lines[1])

    def test_error_non_ascii_never_dropped(self):
        # json.dumps writes each non-ASCII character as \\uXXXX: 150 characters of Chinese or
        # accented text made a line over LINE_MAX, dropped (no reason, no done phase reached
        # the agent).  The text is cut until the encoded line fits.
        for msg in ("配置错误: " + "无效的值" * 40, "é" * 150, "\U0001F525" * 150, "x" * 500):
            self.hb.error(msg)
            self.assertEqual(self.hb.dropped, 0, msg[:10])
            raw = os.read(self.r, 65536)
            self.assertLessEqual(len(raw), drover_heartbeat.LINE_MAX)
            got = json.loads(raw.decode())
            self.assertEqual(got["phase"], "done")
            self.assertTrue(msg.startswith(got["error"]), got["error"][:20])
            self.assertGreater(len(got["error"]), 50)
            self.assertEqual(got["release"], "ab" * 32)
        # an over-long DROVER_RELEASE: the error line leaves the release out (the agent fills
        # it in) rather than being dropped
        hb = Heartbeat(fd=self.w, env=dict(ENV, DROVER_RELEASE="r" * 2000), report_uncaught=False)
        hello = json.loads(os.read(self.r, 65536).decode())  # sent too, without the release
        self.assertEqual((hello["kind"], "release" in hello), ("hello", False))
        hb.error("é" * 150)
        self.assertEqual(hb.dropped, 0)
        got = json.loads(os.read(self.r, 65536).decode())
        self.assertNotIn("release", got)
        self.assertEqual(got["phase"], "done")
        hb.done()
        self.assertEqual(hb.dropped, 0)
        self.assertNotIn("release", json.loads(os.read(self.r, 65536).decode()))

    def test_fd_gone_never_raises(self):
        os.close(self.r)  # the agent went away: EPIPE
        for i in range(3):
            self.hb.step(i + 1, 1.0, tokens=1)
        with self.hb.phase("checkpoint"):
            pass
        self.hb.error("bye")
        self.assertIsNone(self.hb.fd)
        self.assertGreaterEqual(self.hb.dropped, 1)
        hb = Heartbeat(fd=987, env=ENV)  # EBADF
        hb.step(1, 1.0, tokens=1)
        self.assertIsNone(hb.fd)

    def test_without_drover(self):
        hb = Heartbeat(env={})
        self.assertFalse(hb.enabled)
        hb.init()
        hb.step(1, 1.0, tokens=1)
        hb.done()
        hb = Heartbeat(env={"DROVER_HEARTBEAT_FD": "garbage"})
        self.assertFalse(hb.enabled)

    def bad_call(self, call):
        """Runs call(), which must be refused: returns what it wrote on stderr."""
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            call()
        return err.getvalue()

    def test_hello_first(self):
        # Heartbeat() says "the module started" before the script's imports and rendezvous, so
        # a rank waiting in init_process_group for a missing peer is not told "it sent none:
        # does the worker use drover_heartbeat?" (docs/protocol.md, "hello")
        r, w = os.pipe()
        try:
            Heartbeat(fd=w, env=ENV, report_uncaught=False)
            (hello,) = read_lines(r)
        finally:
            os.close(r)
            os.close(w)
        self.assertEqual(hello["kind"], "hello")
        self.assertEqual((hello["v"], hello["rank"], hello["step"], hello["phase"]), (1, 3, 0, "init"))
        self.assertEqual(hello["release"], "ab" * 32)
        self.assertEqual(hello["resumed_from"], -1)
        # the next line is an ordinary heartbeat, without "kind"
        self.hb.init()
        (init,) = read_lines(self.r)
        self.assertNotIn("kind", init)
        # a step() extra cannot pose as a hello
        err = self.bad_call(lambda: self.hb.step(1, 2.0, tokens=5, kind="hello"))
        self.assertIn("extra kind=", err)
        self.assertEqual(read_lines(self.r), [])
        # run by hand (no DROVER_HEARTBEAT_FD): nothing written, nothing said
        err = self.bad_call(lambda: Heartbeat(env={"RANK": "0"}, report_uncaught=False))
        self.assertEqual(err, "")

    def test_no_tokens_warned_once(self):
        # tokens=0 on every step: the module sent it as it was, and the deploy waited its whole
        # max_probation_time for "no data"; after NO_TOKENS_WARN_STEPS steps in a row it says so
        steps = drover_heartbeat.NO_TOKENS_WARN_STEPS
        err = self.bad_call(lambda: [self.hb.step(i, 2.0, tokens=0) for i in range(1, steps)])
        self.assertEqual(err, "")  # one step without tokens (a skipped batch) is no mistake
        err = self.bad_call(lambda: [self.hb.step(i, 2.0, tokens=0) for i in range(steps, 3 * steps)])
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn("drover_heartbeat: step(): %d steps in a row with tokens=0" % steps, err)
        self.assertIn("tokens=batch * seq", err)
        self.assertEqual(self.hb.invalid, 0)  # taken, not refused: every step was sent
        self.assertEqual(len(read_lines(self.r)), 3 * steps - 1)
        # said once per Heartbeat, even after tokens came and went again
        self.hb.step(3 * steps, 2.0, tokens=5)
        err = self.bad_call(lambda: [self.hb.step(i, 2.0, tokens=0) for i in range(3 * steps + 1, 5 * steps)])
        self.assertEqual(err, "")
        # a rank that counts its tokens is never warned
        r, w = os.pipe()
        try:
            hb = Heartbeat(fd=w, env=ENV, report_uncaught=False)
            err = self.bad_call(lambda: [hb.step(i, 2.0, tokens=256) for i in range(1, 10)])
        finally:
            os.close(r)
            os.close(w)
        self.assertEqual(err, "")

    def test_bad_step_refused_before_counting(self):
        self.hb.step(1, 2.0, 5)
        self.clock.t += 1.0
        before = read_lines(self.r)
        self.assertEqual(before[-1]["tokens"], 5)
        err = self.bad_call(lambda: self.hb.step(1, 2.0, None))
        self.assertIn("step()", err)
        self.assertIn("None", err)
        self.assertIn("pass a non-negative integer", err)
        err = self.bad_call(lambda: self.hb.step("x", 1.0, 5))
        self.assertIn("bad step 'x'", err)  # another argument: its own line
        err = self.bad_call(lambda: self.hb.step(1, 2.0, None))
        self.assertEqual(err, "")  # warned once per call and argument
        self.assertEqual(self.hb.invalid, 3)
        self.assertEqual(read_lines(self.r), [])  # nothing sent
        self.assertEqual((self.hb.tokens, self.hb.last_step), (5, 1))
        self.hb.step(2, 1.5, 3)
        st = read_lines(self.r)[-1]
        self.assertEqual(st["tokens"], 8)  # 5 + 3, not 5 + 5 + 3
        self.assertEqual(st["step"], 2)
        self.assertAlmostEqual(st["tok_s"], 3.0)  # 3 tokens over the 1 s since step 1

    def test_count_beyond_64_bits_refused(self):
        # tokens=10**30 or 1e20 went out as JSON the agent cannot read ("too big integer"):
        # every line was dropped there and the rank "never reached its first step", while
        # hb.invalid stayed 0 and nothing was said here
        self.hb.step(1, 2.0, 5)
        read_lines(self.r)
        err = self.bad_call(lambda: self.hb.step(2, 2.0, 10 ** 30))
        self.assertIn("bad tokens", err)
        self.bad_call(lambda: self.hb.step(2 ** 63, 2.0, 5))
        self.bad_call(lambda: self.hb.step(2, 2.0, 1e20))
        self.bad_call(lambda: self.hb.step(2, 2.0, 2 ** 63 - 5))  # the total would pass it
        self.assertEqual(self.hb.invalid, 4)
        self.assertEqual(read_lines(self.r), [])  # nothing sent
        self.hb.step(2, 2.0, 2 ** 63 - 6)  # the total is exactly the largest the agent reads
        self.assertEqual(read_lines(self.r)[-1]["tokens"], 2 ** 63 - 1)

    def test_bad_phase_refused(self):
        self.hb.step(1, 1.0, 1)
        read_lines(self.r)
        ran = []

        def use():
            with self.hb.phase("ckpt"):
                ran.append(self.hb.current_phase)
        err = self.bad_call(use)
        self.assertIn("phase()", err)
        self.assertIn("'ckpt'", err)
        self.assertEqual(ran, ["train"])  # the block ran, the phase did not change
        self.assertEqual(self.hb.current_phase, "train")
        self.assertEqual(self.hb.invalid, 1)
        self.assertEqual(read_lines(self.r), [])

    def test_phase_without_with_is_counted(self):
        # hb.phase("checkpoint") without `with` did nothing at all (a generator nobody ran):
        # no count, no warning, and the silence deadline applied during the save
        self.hb.step(1, 1.0, 1)
        read_lines(self.r)
        err = self.bad_call(lambda: self.hb.phase("checkpoint"))
        self.assertEqual(err, "")
        err = self.bad_call(lambda: self.hb.step(2, 1.0, 1))  # said at the next call
        self.assertEqual(self.hb.invalid, 1)
        self.assertIn("phase(): phase 'checkpoint' was never entered", err)
        self.assertIn("use `with hb.phase('checkpoint'):`", err)
        self.assertEqual([x["phase"] for x in read_lines(self.r)], ["train"])  # the step still went
        # before done() too; counted each time, said once
        err = self.bad_call(lambda: (self.hb.phase("checkpoint"), self.hb.done()))
        self.assertEqual((self.hb.invalid, err), (2, ""))
        # made first and entered later is fine; so is `with` as always
        self.hb.current_phase = "train"
        p = self.hb.phase("checkpoint")
        with p as got:
            self.assertIs(got, self.hb)
            self.assertEqual(self.hb.current_phase, "checkpoint")
        self.hb.step(3, 1.0, 1)
        self.assertEqual(self.hb.invalid, 2)

    def test_phase_without_with_said_at_exit(self):
        # the bare hb.phase() as the very last call: no next call said it, so nothing ever did
        code = ("import sys; sys.path.insert(0, %r)\n"
                "from drover_heartbeat import Heartbeat\n"
                "hb = Heartbeat(fd=-1)\n"
                "hb.phase('checkpoint')\n" % HERE)
        p = subprocess.run([sys.executable, "-c", code], timeout=60, capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("phase(): phase 'checkpoint' was never entered", p.stderr)
        # entered, or said already: nothing more at exit
        code2 = code.replace("hb.phase('checkpoint')\n", "with hb.phase('checkpoint'): pass\n")
        p = subprocess.run([sys.executable, "-c", code2], timeout=60, capture_output=True, text=True)
        self.assertEqual((p.returncode, p.stderr), (0, ""))

    def test_line_limit(self):
        self.hb.step(1, 1.0, tokens=1, note="y" * 2000)
        self.assertEqual(self.hb.dropped, 1)
        self.hb.step(2, 1.0, tokens=1, mfu=float("nan"), mem_peak=123)
        line = read_lines(self.r)[-1]
        self.assertIsNone(line["mfu"])
        self.assertEqual(line["mem_peak"], 123)
        self.assertLessEqual(len(self.hb.line()), drover_heartbeat.LINE_MAX)


class UncaughtExceptionTest(unittest.TestCase):
    """A script with the five lines of docs/pytorch.md and no except clause of its own: the
    exception that kills it is its last heartbeat's error, which the agent quotes."""

    def run_worker(self, body, make="Heartbeat()"):
        code = ("import sys; sys.path.insert(0, %r)\n"
                "from drover_heartbeat import Heartbeat\n"
                "hb = %s\n"
                "hb.step(1, 2.5, tokens=100)\n" % (HERE, make)) + body
        r, w = os.pipe()
        env = dict(os.environ, DROVER_HEARTBEAT_FD=str(w), RANK="1", DROVER_RELEASE="ab" * 32)
        p = subprocess.run([sys.executable, "-c", code], env=env, pass_fds=(w,), timeout=60,
                           stderr=subprocess.PIPE)
        os.close(w)
        lines = read_lines(r)
        os.close(r)
        return p, lines

    def test_uncaught_exception_is_the_last_word(self):
        p, lines = self.run_worker("raise RuntimeError('boom: the loss divides by zero')\n")
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"Traceback", p.stderr)  # Python's own report still comes
        self.assertEqual(lines[-1]["phase"], "done")
        self.assertEqual(lines[-1]["error"], "RuntimeError: boom: the loss divides by zero")

    def test_uncaught_non_ascii_exception_reaches_the_agent(self):
        # 150 characters of non-ASCII text were a line over LINE_MAX: dropped, no reason
        p, lines = self.run_worker("raise ValueError('配置错误: ' + '无效的值' * 40)\n")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(lines[-1]["phase"], "done")
        self.assertTrue(lines[-1]["error"].startswith("ValueError: 配置错误: 无效的值"), lines[-1])

    def test_own_error_is_not_replaced(self):
        p, lines = self.run_worker("hb.error('disk full: /ckpt')\nraise OSError(28, 'No space')\n")
        self.assertEqual(p.returncode, 1)
        self.assertEqual([x.get("error") for x in lines if "error" in x], ["disk full: /ckpt"])

    def test_clean_exit_and_opt_out_send_nothing_more(self):
        p, lines = self.run_worker("import sys\nsys.exit(3)\n")
        self.assertEqual(p.returncode, 3)
        self.assertNotIn("error", lines[-1])
        p, lines = self.run_worker("raise ValueError('x')\n", make="Heartbeat(report_uncaught=False)")
        self.assertEqual(p.returncode, 1)
        self.assertNotIn("error", lines[-1])


class ExitCodesTest(unittest.TestCase):
    """The exits with a meaning for the agent: the constants, peer_lost(), and the two exits by
    os._exit after hb.error()."""

    GLOO_RESET = ("[../third_party/gloo/gloo/transport/tcp/pair.cc:538] Read error "
                  "[10.0.0.2]:43197: Connection reset by peer")

    def test_constants_are_the_c_contract(self):
        # common/trainexit.h is the one table (the agent, the controller, drover-train): a
        # renumbered or misspelt constant here would make a PyTorch worker say something else
        with open(os.path.join(HERE, "..", "common", "trainexit.h")) as f:
            header = f.read()
        rows = dict(re.findall(r"X\(TX_(\w+),\s*(\d+),", header))
        self.assertIn("PEER_LOST", rows, "common/trainexit.h's TRAIN_EXITS table not parsed")
        names = [n for n in dir(drover_heartbeat) if n.startswith("EXIT_")]
        self.assertEqual(sorted(names), ["EXIT_CONFIG", "EXIT_DISK_FULL", "EXIT_DIVERGED", "EXIT_PEER_LOST",
                                         "EXIT_PEER_STOPPED"])
        for name in names:
            tx = name[len("EXIT_"):]
            self.assertIn(tx, rows, "%s has no TX_%s in common/trainexit.h" % (name, tx))
            self.assertEqual(getattr(drover_heartbeat, name), int(rows[tx]), name)
            self.assertIn(name, drover_heartbeat.__all__)

    def test_peer_lost(self):
        pl = drover_heartbeat.peer_lost
        self.assertTrue(pl(RuntimeError(self.GLOO_RESET)))
        self.assertTrue(pl(RuntimeError("[/x/gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.0.0.3]:1234")))
        self.assertTrue(pl(RuntimeError("gloo/transport/tcp/unbound_buffer.cc:81: Broken pipe")))
        # a subclass of RuntimeError (torch's DistBackendError is one) counts too
        self.assertTrue(pl(type("DistBackendError", (RuntimeError,), {})(self.GLOO_RESET)))
        # gloo's transport without a lost-connection phrase: a timeout, this rank's own failure
        self.assertFalse(pl(RuntimeError("[/x/gloo/transport/tcp/unbound_buffer.cc:133] Timed out waiting 1800000ms for recv operation to complete")))
        # the phrase without gloo's transport: a data loader's, a compile worker's
        self.assertFalse(pl(RuntimeError("DataLoader worker: Connection reset by peer")))
        # not a RuntimeError, whatever it says
        self.assertFalse(pl(ConnectionResetError(self.GLOO_RESET)))
        self.assertFalse(pl(OSError(errno.ECONNRESET, self.GLOO_RESET)))
        self.assertFalse(pl(ValueError(self.GLOO_RESET)))
        self.assertFalse(pl(None))
        self.assertFalse(pl(self.GLOO_RESET))

    def test_disk_full(self):
        df = drover_heartbeat.disk_full
        self.assertTrue(df(OSError(errno.ENOSPC, "No space left on device")))
        self.assertTrue(df(OSError(errno.EDQUOT, "Disk quota exceeded")))
        self.assertFalse(df(OSError(errno.EIO, "Input/output error")))
        self.assertFalse(df(PermissionError(errno.EACCES, "Permission denied")))
        self.assertFalse(df(RuntimeError("No space left on device")))

    def run_exit(self, call, stdout=None):
        """A worker that beats once, writes to stdout, then calls call (source text) with `hb`;
        (process, heartbeat lines, stderr)."""
        code = ("import errno, sys; sys.path.insert(0, %r)\n"
                "import drover_heartbeat as dh\n"
                "hb = dh.Heartbeat()\n"
                "hb.step(1, 2.5, tokens=100)\n"
                "sys.stdout.write('a log line still in the buffer')  # no newline: buffered\n"
                "%s\n"
                "sys.exit(99)  # not reached\n" % (HERE, call))
        r, w = os.pipe()
        env = dict(os.environ, DROVER_HEARTBEAT_FD=str(w), RANK="1", DROVER_RELEASE="ab" * 32)
        env.pop("PYTHONUNBUFFERED", None)  # stdout buffered, as a worker's is (not a tty)
        p = subprocess.run([sys.executable, "-c", code], env=env, pass_fds=(w,), timeout=60,
                           stdout=stdout if stdout is not None else subprocess.PIPE,
                           stderr=subprocess.PIPE)
        os.close(w)
        lines = read_lines(r)
        os.close(r)
        return p, lines, p.stderr.decode(errors="replace")

    def test_exit_peer_lost(self):
        p, lines, err = self.run_exit("hb.exit_peer_lost(RuntimeError(%r))" % self.GLOO_RESET)
        self.assertEqual(p.returncode, drover_heartbeat.EXIT_PEER_LOST, err)
        self.assertEqual(p.returncode, 8)
        self.assertEqual([x.get("kind") for x in lines], ["hello", None, None])
        self.assertEqual(lines[-1]["phase"], "done")
        self.assertEqual(lines[-1]["error"], ("peer lost: RuntimeError: " + self.GLOO_RESET)[:150])
        self.assertEqual(lines[-1]["rank"], 1)
        self.assertIn("-c: rank 1 lost a peer: RuntimeError: " + self.GLOO_RESET, err)
        self.assertNotIn("Traceback", err)  # os._exit: no excepthook, no second error
        self.assertIn(b"a log line still in the buffer", p.stdout)  # stdout flushed first

    def test_exit_disk_full(self):
        call = "hb.exit_disk_full(OSError(errno.ENOSPC, 'No space left on device', '/ckpt/x'))"
        p, lines, err = self.run_exit(call)
        self.assertEqual(p.returncode, drover_heartbeat.EXIT_DISK_FULL, err)
        self.assertEqual(p.returncode, 6)
        self.assertEqual(lines[-1]["phase"], "done")
        self.assertEqual(lines[-1]["error"],
                         "disk full: [Errno 28] No space left on device: '/ckpt/x'")
        self.assertIn("-c: disk full: [Errno 28]", err)
        # stdout on the full disk: Python's flush at exit would fail and exit 120 instead
        with open("/dev/full", "w") as full:
            p, lines, err = self.run_exit(call, stdout=full)
        self.assertEqual(p.returncode, 6, err)
        self.assertIn("disk full", lines[-1]["error"])

    def test_exits_with_non_ascii_text(self):
        # the agent's reason for exits 6 and 8 was lost to an over-long line the same way
        for call, code in (("hb.exit_peer_lost(RuntimeError('gloo/transport: Connection reset by "
                            "peer ' + 'é' * 150))", 8),
                           ("hb.exit_disk_full(OSError(errno.ENOSPC, 'No space', '/ckpt/' + "
                            "'\\U0001F525' * 150))", 6)):
            p, lines, err = self.run_exit(call)
            self.assertEqual(p.returncode, code, err)
            self.assertEqual(lines[-1]["phase"], "done")
            self.assertTrue(lines[-1]["error"].startswith(("peer lost: ", "disk full: ")))

    def test_exit_without_drover(self):
        # run by hand (no DROVER_HEARTBEAT_FD): no heartbeat, the same exit
        code = ("import sys; sys.path.insert(0, %r)\n"
                "import drover_heartbeat as dh\n"
                "dh.Heartbeat().exit_peer_lost(RuntimeError('x'))\n" % HERE)
        env = dict(os.environ)
        env.pop("DROVER_HEARTBEAT_FD", None)
        p = subprocess.run([sys.executable, "-c", code], env=env, timeout=60,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.assertEqual(p.returncode, 8)
        self.assertIn(b"lost a peer: RuntimeError: x", p.stderr)


class RawProtocolExampleTest(unittest.TestCase):
    """The raw-protocol example in docs/protocol.md, run as it is written there."""

    def test_docs_example(self):
        doc = open(os.path.join(HERE, "..", "docs", "protocol.md")).read()
        m = re.search(r"```python raw-heartbeat-example\n(.*?)```", doc, re.S)
        self.assertIsNotNone(m, "docs/protocol.md lost its raw-heartbeat-example block")
        code = m.group(1) + "\nbeat(1, 2.5, 1000.0)\nbeat(2, float('nan'), 1000.0)\n"
        r, w = os.pipe()
        env = dict(os.environ, DROVER_HEARTBEAT_FD=str(w), RANK="0")
        p = subprocess.run([sys.executable, "-c", code], env=env, pass_fds=(w,), timeout=60)
        os.close(w)
        self.assertEqual(p.returncode, 0)
        raw = b""
        while True:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            raw += chunk
        os.close(r)
        lines = raw.decode().splitlines()
        self.assertEqual(len(lines), 2)
        first = json.loads(lines[0])
        self.assertEqual(first["v"], 1)
        self.assertEqual(first["step"], 1)
        self.assertEqual(first["phase"], "train")
        self.assertNotIn("release", first)  # the agent fills it in
        # json.dumps writes NaN: the agent reads it as a non-finite loss (common/heartbeat.c)
        self.assertIn("NaN", lines[1])


if __name__ == "__main__":
    unittest.main()
