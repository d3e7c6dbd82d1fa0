"""drover_heartbeat: heartbeats from a Python (PyTorch) worker to drover-agent.

Standard library only, Python 3.8 or later.  Copy this file into your release next to your
training script (examples/pytorch/make-release.sh does; see docs/pytorch.md).  The wire format is the heartbeat line of
docs/protocol.md (v1): one JSON object per line on the file descriptor DROVER_HEARTBEAT_FD.

    from drover_heartbeat import Heartbeat
    hb = Heartbeat()                      # reads DROVER_HEARTBEAT_FD, RANK, DROVER_RELEASE; first,
                                          # before torch and init_process_group: sends a hello
    hb.init(resumed_from=start_step)      # after init_process_group: "loading" (phase init)
    for step in range(start_step, max_steps):
        loss = train_step()
        hb.step(step + 1, loss.item(), tokens=batch_tokens)
        if (step + 1) % 100 == 0:
            with hb.phase("checkpoint"):
                save_checkpoint()
            hb.checkpointed(step + 1)
    hb.done()

Exits the agent reads with a meaning of their own (common/trainexit.h, docs/errors.md): the
EXIT_* constants, and for the two that must leave by os._exit after hb.error():

    from drover_heartbeat import Heartbeat, disk_full, peer_lost
    try:
        train(hb)
    except Exception as e:
        if disk_full(e, ckpt_dir):        # OSError ENOSPC/EDQUOT, or torch's writer failing on
            hb.exit_disk_full(e)          # a full ckpt_dir: exit 6, not retried
        if peer_lost(e):                  # gloo lost another rank: exit 8 (only once
            hb.exit_peer_lost(e)          # init_process_group has returned)
        raise

Checkpoints (torch, imported only when called):

    save_checkpoint(state, path)          # atomic: a temp file in path's directory, fsync,
                                          # rename; a full disk raises OSError ENOSPC
    path, state = load_checkpoint(paths)  # the first of paths (newest first) that loads;
                                          # a truncated one is skipped, said on stderr

Outside drover (no DROVER_HEARTBEAT_FD) every call does nothing.  No call ever raises into the
training loop: once the agent's end of the pipe is gone (EPIPE, EBADF), beats are dropped.  A
call with a bad argument (a step or token count that is not a non-negative integer, a loss that
is not one number, an unknown phase) is checked before anything changes: it is counted in
`invalid`, warned about on stderr (once per call and argument), sends nothing and leaves every
counter as it was.  So is an hb.phase(...) that no `with` entered (it would do nothing, and the
silence deadline would apply during the save): counted and warned about at the next call.
"""

import atexit
import errno
import json
import math
import numbers
import operator
import os
import socket
import sys
import time
import weakref

__all__ = ["Heartbeat", "PHASES", "LINE_MAX", "EXIT_CONFIG", "EXIT_DISK_FULL", "EXIT_DIVERGED",
           "EXIT_PEER_LOST", "EXIT_PEER_STOPPED", "peer_lost", "disk_full", "save_checkpoint",
           "load_checkpoint", "loadable_checkpoints"]

VERSION = 1
LINE_MAX = 1024  # bytes per line, newline included (the agent drops longer lines)
PHASES = ("init", "train", "checkpoint", "done")

# drover-train's exit codes (common/trainexit.h, docs/errors.md "drover-train"), which the agent
# reads the same way from any worker.  Never renumbered; test_drover_heartbeat.py checks them
# against the header.
# Not retried (restarting the same release cannot help; on probation reverted at once):
EXIT_CONFIG = 3      # the config file is missing, unreadable or invalid (name the file and where)
EXIT_DISK_FULL = 6   # ENOSPC / EDQUOT writing a checkpoint or a log line: hb.exit_disk_full()
EXIT_DIVERGED = 7    # stopped after consecutive non-finite losses (3, as drover-train)
# A rank that ended only because of a rank elsewhere (the gang is restarted after a grace, and
# the controller's verdict looks for the cause in the other containers):
EXIT_PEER_LOST = 8     # a collective failed because another rank went away: hb.exit_peer_lost()
EXIT_PEER_STOPPED = 12  # stopped with a checkpoint because another rank got SIGTERM, not this one

# What a gloo collective raises when its peer is gone: a RuntimeError from gloo's TCP transport,
# e.g. "[.../gloo/transport/tcp/pair.cc:538] Read error [10.0.0.2]:43197: Connection reset by
# peer" from an all-reduce or DDP's backward when the peer aborted or exited (torch 1.13 and 2.11
# alike), or "Connection closed by peer".  Both the transport's signature and the words are
# required: a RuntimeError that only quotes "Connection reset" (a compile worker's, a data
# loader's) is this rank's own failure.  A timeout is not in the list: a silent peer is what the
# agent's liveness rule finds, in the container where the silence is.  NCCL is not covered: its
# watchdog usually ends a rank whose peer died with SIGABRT before Python sees an exception.
PEER_LOST_SIGNATURE = "gloo/transport"
PEER_LOST_MARKS = ("Connection closed by peer", "Connection reset by peer", "Broken pipe")
DISK_FULL_ERRNOS = tuple(getattr(errno, n) for n in ("ENOSPC", "EDQUOT") if hasattr(errno, n))
# What torch's zip writer raises when a write of torch.save(obj, PATH) fails: a RuntimeError,
# not the OSError underneath, e.g. "[enforce fail at inline_container.cc:471] .
# PytorchStreamWriter failed writing file data/0: file write failed" (torch 2.x) or "[enforce
# fail at inline_container.cc:325] . unexpected pos 320 vs 248" (torch 1.13, measured on a full
# tmpfs).  The words alone do not say why the write failed: disk_full() also wants the
# checkpoint directory's filesystem to be full (DISK_FULL_FREE_BYTES).
TORCH_WRITE_FAILED_MARKS = ("PytorchStreamWriter failed writing file", "file write failed",
                            "unexpected pos")
TORCH_WRITE_FAILED_SIGNATURE = ("inline_container", "PytorchStreamWriter")
# A filesystem with less than this available to the worker is full: the write that failed
# needed more (a filesystem keeps some blocks back for its metadata, so "full" is rarely 0).
DISK_FULL_FREE_BYTES = 1 << 20


def peer_lost(exc):
    """True for the error a gloo collective raises when another rank went away: a RuntimeError
    whose message has PEER_LOST_SIGNATURE and one of PEER_LOST_MARKS.  Ask it only once
    init_process_group has returned (before that there is no peer to lose)."""
    if not isinstance(exc, RuntimeError):
        return False
    try:
        msg = str(exc)
    except Exception:  # noqa: BLE001 -- an unprintable exception is nobody's lost peer
        return False
    return PEER_LOST_SIGNATURE in msg and any(m in msg for m in PEER_LOST_MARKS)


def _fs_full(path):
    """Is the filesystem holding path (a file or directory; the nearest existing directory
    above it when it does not exist) full: under DISK_FULL_FREE_BYTES available, or no inode
    left?  False when it cannot be asked."""
    try:
        path = os.path.abspath(path)
        while not os.path.exists(path) and os.path.dirname(path) != path:
            path = os.path.dirname(path)
        st = os.statvfs(path)
    except (OSError, TypeError, ValueError):
        return False
    if st.f_bavail * st.f_frsize < DISK_FULL_FREE_BYTES:
        return True
    return st.f_files > 0 and st.f_favail == 0


def disk_full(exc, path=None):
    """True for an OSError whose errno is ENOSPC or EDQUOT (DISK_FULL_ERRNOS), and for torch's
    RuntimeError of a failed write (TORCH_WRITE_FAILED_MARKS: torch.save(obj, PATH) on a full
    disk never raises the OSError) when the filesystem of path (the checkpoint file or
    directory; default $DROVER_RUN_DIR, where checkpoints go) is full: another write failure is
    this release's own (exit 1, retried).  save_checkpoint() raises the OSError itself."""
    if isinstance(exc, OSError):
        return exc.errno in DISK_FULL_ERRNOS
    if not isinstance(exc, RuntimeError):
        return False
    msg = _text(exc)
    if not (any(s in msg for s in TORCH_WRITE_FAILED_SIGNATURE) and
            any(m in msg for m in TORCH_WRITE_FAILED_MARKS)):
        return False
    if path is None:
        path = os.environ.get("DROVER_RUN_DIR")
    return bool(path) and _fs_full(path)


class _Sink:
    """torch.save's stream for save_checkpoint: keeps the first write error (ENOSPC) instead of
    raising it into torch, whose zip writer then aborts the process from a destructor (SIGABRT,
    torch 1.13, a path or a file alike) instead of raising; save_checkpoint raises it after."""

    def __init__(self, f):
        self.f, self.error = f, None

    def write(self, b):
        if self.error is None:
            try:
                self.f.write(b)
            except OSError as e:
                self.error = e
        return len(b)

    def flush(self):
        pass


def _remove_dead_temps(d, prefix):
    """Remove d/PREFIX<pid> files whose process no longer runs (pid namespace: this container's)."""
    try:
        names = os.listdir(d)
    except OSError:
        return
    for name in names:
        pid = name[len(prefix):]
        if not name.startswith(prefix) or not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # alive (or not ours to signal: EPERM), its save may be under way
        except ProcessLookupError:
            pass
        except OSError:
            continue
        try:
            os.unlink(os.path.join(d, name))
            sys.stderr.write("drover_heartbeat: removed %s, a checkpoint temp file of a process that "
                             "died while saving\n" % os.path.join(d, name))
        except OSError:
            pass


def save_checkpoint(state, path, save=None):
    """Write state (torch.save's object) to path so that path is either the old file or the
    whole new one, never a torn one: into PATH_DIR/.tmp.<host>.<pid>, flushed and fsynced, then
    os.replace()d over path, then the directory fsynced.  A failed write (a full disk:
    OSError ENOSPC, which disk_full() knows) raises the OSError and removes the temp file; the
    previous checkpoint at path is untouched.  torch.save in place left a truncated file on a
    full disk that every restart then resumed and died on.  save: the serializer, save(obj,
    file) (default torch.save, imported here)."""
    if save is None:
        import torch
        save = torch.save
    d = os.path.dirname(os.path.abspath(path))
    # named by host and pid: a temp file another container writes into a shared directory is
    # never taken for one of ours; ours whose process is gone (SIGKILL mid-save, an OOM kill)
    # are removed here, or they would fill the checkpoint disk save after save
    mine = ".tmp.%s." % socket.gethostname()
    _remove_dead_temps(d, mine)
    tmp = os.path.join(d, "%s%d" % (mine, os.getpid()))
    try:
        with open(tmp, "wb") as f:
            sink = _Sink(f)
            save(state, sink)
            if sink.error is not None:
                raise sink.error
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass  # the rename is done; a directory that cannot be fsynced (some network fs) is no failure


def loadable_checkpoints(paths, check=None, load=None, **load_args):
    """(path, state) for each of paths, in their order (give them newest first), that loads:
    load(path, **load_args) (default torch.load, map_location="cpu") returns and check(state),
    when given, does not raise.  One that does not (a file torn by a crash or a full disk,
    "PytorchStreamReader failed reading zip archive", OSError EINVAL) is skipped with a line on
    stderr naming it and why, instead of ending every restart on the same file."""
    if load is None:
        import torch
        load = torch.load
        load_args.setdefault("map_location", "cpu")
    for path in paths:
        try:
            state = load(path, **load_args)
            if check is not None:
                check(state)
        except Exception as e:  # noqa: BLE001 -- any failure to read it: try the next one
            _say("checkpoint '%s' cannot be loaded (%s: %s): skipped, trying an older one"
                 % (path, type(e).__name__, _text(e)[:200]), flush_stdout=False)
            continue
        yield path, state


def load_checkpoint(paths, check=None, load=None, **load_args):
    """The first of loadable_checkpoints(paths, ...): (path, state), or (None, None) when none
    loads."""
    for found in loadable_checkpoints(paths, check, load, **load_args):
        return found
    return None, None


def _text(exc):
    try:
        return str(exc)
    except Exception:  # noqa: BLE001
        return "<unprintable %s>" % type(exc).__name__


def _say(text, flush_stdout):
    """One line on stderr ("train.py: TEXT"), flushed with stdout, before an os._exit: a full
    disk (OSError) or a closed stream is no reason not to exit."""
    try:
        prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
        sys.stderr.write("%s: %s\n" % (prog, text))
        sys.stderr.flush()
        if flush_stdout:
            sys.stdout.flush()
    except Exception:  # noqa: BLE001
        pass


def _env_int(env, name, default):
    try:
        return int(env.get(name, default))
    except (TypeError, ValueError):
        return default


# The largest count the agent reads (a JSON integer it keeps in 64 bits): a larger one made
# every line "not JSON: too big integer" there, and the worker never reached its first step.
_COUNT_MAX = 2 ** 63 - 1


def _count(v):
    """v as a non-negative int, or None when it is not one (bool, str, None, 2.5, -1, NaN, or
    above _COUNT_MAX)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, float):
        if not math.isfinite(v) or not v.is_integer():
            return None
        v = int(v)
    else:
        try:
            v = operator.index(v)  # int, numpy integers, integer 0-d tensors
        except Exception:  # noqa: BLE001 -- any __index__ failure is bad input
            return None
    return v if 0 <= v <= _COUNT_MAX else None


def _loss(v):
    """v as a float (NaN and inf included: a real non-finite loss), or None when it is not one
    number: a bool, a str ("2.0"), None, a list, a multi-element tensor.  Such a value used to be
    sent as a non-finite loss, and 3 of them stopped the gang for a divergence that was not."""
    if v is None or isinstance(v, (bool, str, bytes)):
        return None
    try:
        return float(v)  # float, int, numpy scalars, one-element tensors (0-d or not)
    except Exception:  # noqa: BLE001 -- any __float__ failure is bad input
        return None


_STEP_WANT = "pass a non-negative integer"
_LOSS_WANT = "pass a float or a one-element tensor (loss.item()); NaN and inf are reported as " \
             "non-finite losses"

_CORE_KEYS = ("v", "kind", "rank", "pid", "step", "tokens", "loss", "nonfinite", "tok_s",
              "step_ms", "phase", "resumed_from", "ckpt_step", "release", "backend")

# Steps in a row with no token at all before step() says, once, that drover cannot measure this
# rank's throughput (a probation then ends "no data": docs/pytorch.md, "tokens=").  Not the
# first one: a step that processed nothing (a skipped batch) is no mistake.
NO_TOKENS_WARN_STEPS = 3


def _bad_extra(extra):
    """The first bad (key, value) of step()'s keyword numbers, or None when all are sendable."""
    for k, v in extra.items():
        if k in _CORE_KEYS:
            return k, v
        if v is None or isinstance(v, (bool, str)):
            continue
        if isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral):
            continue
        if isinstance(v, numbers.Integral):
            continue
        return k, v
    return None


def _check_phases_at_exit(ref):
    """atexit: a bare hb.phase(...) as the last call before exit has no next call to be said
    at (Heartbeat._check_phases); say it here."""
    hb = ref()
    if hb is not None:
        hb._check_phases()


_newest = None  # weakref to the newest Heartbeat with a pipe: an uncaught exception's reporter
_prev_excepthook = None


def _excepthook(etype, value, tb):
    """sys.excepthook while a Heartbeat with a pipe exists: an exception nobody caught is this
    rank's last word (hb.error), which the agent quotes in the crash's reason ("rank 1 exited
    with code 1 ... [rank 1: RuntimeError: ...]"); then Python's own traceback as before."""
    hb = _newest() if _newest is not None else None
    try:
        if hb is not None and hb.current_phase != "done" and issubclass(etype, Exception):
            text = str(value)
            hb.error("%s: %s" % (etype.__name__, text) if text else etype.__name__)
    except Exception:  # noqa: BLE001 -- the traceback below matters more
        pass
    (_prev_excepthook or sys.__excepthook__)(etype, value, tb)


class _Phase:
    """What hb.phase(name) returns: the phase holds from `with`'s enter to its exit."""

    def __init__(self, hb, name, known):
        self.hb, self.name, self.known = hb, name, known
        self.entered = False
        self.before = None

    def __enter__(self):
        self.entered = True
        hb = self.hb
        if hb._unentered is self:
            hb._unentered = None
        if self.known:
            self.before = hb.current_phase
            hb.current_phase = self.name
            hb._send()
        return hb

    def __exit__(self, etype, value, tb):
        if self.known:
            hb = self.hb
            hb.current_phase = self.before
            hb._t_last = hb.clock()  # the pause is not a slow step
            if self.before == "train":
                hb._send()
        return False  # an exception in the block goes on


class Heartbeat:
    """One rank's heartbeat writer.

    fd: the pipe to write to (default: int(DROVER_HEARTBEAT_FD), None when unset);
    env: the environment to read RANK, DROVER_RELEASE from (default os.environ);
    backend: a word for the dashboard ("torch-cuda", "torch-cpu", ...);
    clock: a monotonic clock in seconds (tests pass their own);
    report_uncaught: with a pipe, an exception that nothing caught is sent as hb.error()
    before Python prints its traceback (sys.excepthook, chained), unless hb.error() or
    hb.done() was already called.
    """

    def __init__(self, fd=None, env=None, backend="torch", clock=time.monotonic,
                 report_uncaught=True):
        self.invalid = 0  # calls refused for a bad argument (nothing sent, nothing changed)
        self._warned = set()
        env = os.environ if env is None else env
        if fd is None:
            raw = env.get("DROVER_HEARTBEAT_FD")
            fd = _env_int(env, "DROVER_HEARTBEAT_FD", -1) if raw else -1
        else:
            ok = _count(fd)
            if ok is None and fd != -1:
                self._bad("Heartbeat", "fd", fd)
            fd = -1 if ok is None else ok
        self.fd = fd if fd >= 0 else None
        self.rank = _env_int(env, "RANK", 0)
        self.local_rank = _env_int(env, "LOCAL_RANK", 0)
        self.world_size = _env_int(env, "WORLD_SIZE", 1)
        self.release = env.get("DROVER_RELEASE", "")
        try:
            self.backend = str(backend)[:15]
        except Exception:  # noqa: BLE001
            self.backend = "torch"
            self._bad("Heartbeat", "backend", "?")
        self.clock = clock
        self.pid = os.getpid()
        self.last_step = 0
        self.tokens = 0
        self.nonfinite = 0
        self.loss = None
        self.tok_s = 0.0
        self.step_ms = 0.0
        self.resumed_from = -1
        self.ckpt_step = -1
        self.current_phase = "init"
        self.dropped = 0  # lines not written (fd gone, or a step() line too long for its extras)
        self._t_last = None
        self._unentered = None  # the newest hb.phase(...) that no `with` has entered yet
        self._steps_no_tokens = 0  # step() calls since the last one with tokens > 0
        atexit.register(_check_phases_at_exit, weakref.ref(self))
        # The first line, before the script's imports and its rendezvous: "the module started",
        # so a rank that never gets to hb.init() (a peer missing from init_process_group) is
        # told apart from a worker that does not report at all (docs/protocol.md, "hello").  An
        # agent that does not know "kind" reads it as the phase-init heartbeat it also is.
        self._send({"kind": "hello"})
        if self.fd is not None and report_uncaught:
            global _newest, _prev_excepthook
            if sys.excepthook is not _excepthook:
                _prev_excepthook = sys.excepthook
                sys.excepthook = _excepthook
            _newest = weakref.ref(self)

    def _bad(self, call, what, value, want=None, text=None):
        """A refused call: counted, and said on stderr once per call and argument (never
        raises), with what to pass instead (want).  text replaces the "bad WHAT VALUE" words."""
        self.invalid += 1
        if (call, what) in self._warned:
            return
        self._warned.add((call, what))
        if text is None:
            try:
                shown = repr(value)[:80]
            except Exception:  # noqa: BLE001
                shown = "<unprintable %s>" % type(value).__name__
            text = "bad %s %s, call ignored" % (what, shown)
        if want:
            text += ": " + want
        try:
            sys.stderr.write("drover_heartbeat: %s(): %s (further such calls are counted in "
                             "Heartbeat.invalid, not shown)\n" % (call, text))
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass

    def _warn_once(self, call, what, text):
        """A call that was taken but is likely a mistake: said on stderr once per call and what
        (never raises), not counted in `invalid`."""
        if (call, what) in self._warned:
            return
        self._warned.add((call, what))
        try:
            sys.stderr.write("drover_heartbeat: %s(): %s\n" % (call, text))
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass

    # ---- what a training loop calls ----

    def _check_phases(self):
        """An hb.phase(...) made but never entered by a `with` (a bare `hb.phase("checkpoint")`
        before a save) did nothing: the silence deadline applied during the save.  Counted and
        said once, at the next call (every public call asks)."""
        p, self._unentered = self._unentered, None
        if p is not None and not p.entered:
            self._bad("phase", "with", p.name, text="phase %r was never entered, so it did "
                      "nothing" % (p.name,), want="use `with hb.phase(%r):` around the save"
                      % (p.name,))

    @property
    def enabled(self):
        return self.fd is not None

    def init(self, resumed_from=-1):
        """Phase init: loading data / model / checkpoint, before the first step."""
        self._check_phases()
        r = -1 if resumed_from == -1 else _count(resumed_from)
        if r is None:
            self._bad("init", "resumed_from", resumed_from, "pass -1 or a non-negative integer")
            return
        self.resumed_from = r
        if self.resumed_from >= 0:
            self.last_step = self.resumed_from
        self.current_phase = "init"
        self._t_last = self.clock()
        self._send()

    def step(self, step, loss, tokens, **extra):
        """One optimizer step done: step = steps completed (counting from the resumed
        checkpoint's step), loss = this step's loss (a float or a one-element tensor; NaN/inf
        allowed: sent as null and counted non-finite), tokens = tokens this rank processed in
        this step.  Extra keyword numbers (mfu, mem_peak) are sent as they are.  A bad step,
        loss, token count or extra value: the call is refused (see _bad)."""
        self._check_phases()
        s, t, f = _count(step), _count(tokens), _loss(loss)
        if s is None:
            self._bad("step", "step", step, _STEP_WANT)
            return
        if f is None:
            self._bad("step", "loss", loss, _LOSS_WANT)
            return
        if t is None or self.tokens + t > _COUNT_MAX:  # the line carries the running total
            self._bad("step", "tokens", tokens, _STEP_WANT + " (the total stays under 2**63)")
            return
        bad = _bad_extra(extra)
        if bad is not None:
            self._bad("step", "extra %s=" % bad[0], bad[1],
                      "pass a number, a bool, a str or None, under a key the line does not "
                      "already have")
            return
        step, tokens, loss = s, t, f
        now = self.clock()
        if self._t_last is not None and now > self._t_last:
            dt = now - self._t_last
            self.step_ms = dt * 1000.0
            self.tok_s = tokens / dt
        self._t_last = now
        self.tokens += tokens
        self._steps_no_tokens = 0 if tokens else self._steps_no_tokens + 1
        if self._steps_no_tokens == NO_TOKENS_WARN_STEPS and self.enabled:
            self._warn_once("step", "tokens 0", "%d steps in a row with tokens=0: drover measures "
                            "throughput from the tokens each step processed and cannot judge this "
                            "release without them (its probation ends \"no data\"): pass this rank's "
                            "tokens in the step, hb.step(step, loss, tokens=batch * seq) "
                            "(docs/pytorch.md)" % NO_TOKENS_WARN_STEPS)
        self.last_step = step
        if math.isfinite(loss):
            self.loss = loss
            self.nonfinite = 0
        else:
            self.loss = None
            self.nonfinite += 1
        self.current_phase = "train"
        self._send(extra)

    def checkpointed(self, step):
        """A checkpoint of step `step` is on disk."""
        self._check_phases()
        s = _count(step)
        if s is None:
            self._bad("checkpointed", "step", step, _STEP_WANT)
            return
        self.ckpt_step = s

    def phase(self, name):
        """with hb.phase("checkpoint"): save() -- tells the agent a long pause is expected
        (the checkpoint deadline applies instead of the silence one).  Back to the previous
        phase afterwards.  An unknown name (phases: PHASES) is refused: the block runs, nothing
        is sent and the phase does not change.  Only `with` does anything: a phase no `with`
        entered is counted in `invalid` and warned about at the next call (or at exit)."""
        self._check_phases()
        try:
            known = name in PHASES
        except Exception:  # noqa: BLE001 -- an unhashable/odd object
            known = False
        if not known:
            self._bad("phase", "name", name, "the phases are " + ", ".join(PHASES))
            return _Phase(self, name, False)
        p = _Phase(self, name, True)
        self._unentered = p
        return p

    def error(self, message):
        """Report why this rank is about to exit on an error (phase done + error)."""
        self._check_phases()
        try:
            text = str(message)[:150]
        except Exception:  # noqa: BLE001
            text = "<unprintable %s>" % type(message).__name__
        self.current_phase = "done"
        self._send({"error": text}, cut="error")

    def done(self):
        """Clean exit (max steps reached, or stopping after SIGTERM)."""
        self._check_phases()
        self.current_phase = "done"
        self._send()

    def exit_disk_full(self, exc):
        """Exit 6 (EXIT_DISK_FULL) now, for a disk_full(exc): a full disk is not fixed by
        restarting the release (an uncaught OSError exits 1, which the agent retries into a
        crash loop).  hb.error("disk full: ..."), a line on stderr, then os._exit: Python's own
        flush of stdout at exit fails on the full disk too and turns any exit code into 120.
        Never returns."""
        try:
            text = _text(exc)
            self.error("disk full: " + text)
            _say("disk full: " + text, flush_stdout=False)
        finally:
            os._exit(EXIT_DISK_FULL)

    def exit_peer_lost(self, exc):
        """Exit 8 (EXIT_PEER_LOST) now, for a peer_lost(exc): this rank is a casualty of
        another rank's death, and with 8 the controller's verdict names the rank that died
        instead of this one's "exited with code 1".  hb.error("peer lost: ..."), a line on
        stderr, then os._exit: after hb.error() (phase "done", out of the liveness rule's reach)
        nothing may hang in the process group's teardown, nor turn the exit code into 120 on a
        full disk.  Never returns."""
        try:
            what = "%s: %s" % (type(exc).__name__, _text(exc))
            self.error("peer lost: " + what)
            _say("rank %d lost a peer: %s" % (self.rank, what), flush_stdout=True)
        finally:
            os._exit(EXIT_PEER_LOST)

    # ---- the wire ----

    def line(self, extra=None, release=True):
        """The heartbeat line (str, ending in newline) for the current state (without the
        release field when release is False)."""
        o = {
            "v": VERSION,
            "rank": self.rank,
            "pid": self.pid,
            "step": self.last_step,
            "tokens": self.tokens,
            "loss": self.loss,
            "nonfinite": self.nonfinite,
            "tok_s": round(self.tok_s, 3),
            "step_ms": round(self.step_ms, 3),
            "phase": self.current_phase,
            "resumed_from": self.resumed_from,
            "ckpt_step": self.ckpt_step,
            "release": self.release,
            "backend": self.backend,
        }
        if not release:
            del o["release"]
        if extra:
            for k, v in extra.items():
                if isinstance(v, float) and not math.isfinite(v):
                    v = None
                o[k] = v
        return json.dumps(o, separators=(",", ":"), allow_nan=False) + "\n"

    def _encode(self, extra=None, release=True):
        return self.line(extra, release).encode("utf-8", "replace")

    def _fit(self, extra, key):
        """The line with extra[key] (text) cut to the longest prefix whose *encoded* line fits
        in LINE_MAX, or None: json.dumps writes a non-ASCII character as \\uXXXX (6 or 12
        bytes), so 150 characters of error text can be 1800 bytes.  An over-long
        DROVER_RELEASE is left out when even the empty text does not fit with it (the agent
        fills it in, docs/protocol.md)."""
        text = extra[key]
        for release in (True, False):
            if len(self._encode(dict(extra, **{key: ""}), release)) > LINE_MAX:
                continue
            lo, hi = 0, len(text)  # text[:lo] fits, text[:hi + 1] does not
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if len(self._encode(dict(extra, **{key: text[:mid]}), release)) <= LINE_MAX:
                    lo = mid
                else:
                    hi = mid - 1
            return self._encode(dict(extra, **{key: text[:lo]}), release)
        return None

    def _send(self, extra=None, cut=None):
        if self.fd is None:
            return
        try:
            data = self._encode(extra)
            if len(data) > LINE_MAX:
                if cut is not None:  # an error line: never dropped for its length
                    data = self._fit(extra, cut)
                elif self.release and len(self._encode(extra, False)) < len(data):
                    data = self._encode(extra, False)  # the agent fills the release in
        except (TypeError, ValueError):
            self.dropped += 1
            return
        if data is None or len(data) > LINE_MAX:
            self.dropped += 1
            return
        try:
            # one write() per line: a pipe write of <= PIPE_BUF bytes is atomic
            n = os.write(self.fd, data)
            if n != len(data):
                self.dropped += 1
        except BlockingIOError:
            self.dropped += 1
        except OSError:
            # EPIPE / EBADF: the agent is gone; training goes on, beats are dropped
            self.dropped += 1
            self.fd = None
