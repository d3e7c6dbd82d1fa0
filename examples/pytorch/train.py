#!/usr/bin/env python3
"""A GPT-2 style PyTorch training script, watched by drover (docs/pytorch.md).

What a user's own script needs for drover, all of it here:
  - torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT): the agent
    sets it for every rank; DDP over NCCL on GPU, gloo on CPU;
  - heartbeats through drover_heartbeat.py (one line per step, phase markers, an error report);
  - SIGTERM means: finish the step, write a checkpoint, exit 0 (the agent stops gangs that way);
    a rank that stopped only because another rank got it exits 12 (peer_stopped);
  - resume from the newest checkpoint in $DROVER_RUN_DIR/checkpoints written by a release named
    in $DROVER_RESUME_RELEASES (the release itself and the promoted ones) for a model of this
    shape (SHAPE_KEYS: a release that changes the architecture trains from scratch, saying so);
    rank 0 reads it and broadcasts it to the other ranks;
  - exit codes from drover-train's contract (common/trainexit.h, docs/errors.md; drover_heartbeat's
    EXIT_* constants, peer_lost(), hb.exit_disk_full(), hb.exit_peer_lost()) where restarting
    the same release cannot help: 3 for a config.json that is unreadable, not a JSON object, or
    has an unknown key or a bad value (one line naming the file and the position or the key), 6 for a full disk (ENOSPC/EDQUOT writing a checkpoint or a log
    line), 7 after 3 consecutive non-finite losses; and 8 (peer_lost) when a collective fails
    because another rank died, so the verdict names that rank, not this one.  Any other failure
    exits 1, which the agent retries up to its crash limit.

Attention: flex_attention with a causal block mask where the installed torch has it (2.5+),
compiled with torch.compile when the config says so; scaled_dot_product_attention (2.0+) or a
plain masked softmax otherwise (Debian 12's python3-torch 1.13 on CPU).

  python3 train.py --config config.json        # under drover: launch.sh does this
"""
import argparse
import glob
import json
import math
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# copied into the release next to this file; the exit codes below and the two exits that leave
# by os._exit after hb.error() (a full disk, a lost gloo peer) are the library's
from drover_heartbeat import (  # noqa: E402
    EXIT_CONFIG, EXIT_DIVERGED, EXIT_PEER_STOPPED, Heartbeat, disk_full, loadable_checkpoints,
    peer_lost, save_checkpoint)

DIVERGED_STEPS = 3  # consecutive non-finite losses (drover-train's and the agent's rule)

DEFAULTS = {
    "layers": 2, "heads": 2, "dim": 64, "seq": 64, "vocab": 50304, "batch": 8,
    "lr": 1e-3, "max_steps": 1000000, "ckpt_every": 50, "keep_ckpts": 2,
    "data": "/srv/drover-data/train_*.bin",  # llm.c-style shards; synthetic tokens when absent
    "attention": "auto",      # auto | flex | sdpa | plain
    "compile_model": False,   # torch.compile the whole model
    "compile_flex": True,     # torch.compile(flex_attention): without it flex runs unfused
    "dtype": "auto",          # bf16 autocast on GPU, fp32 on CPU
    "threads": 1,             # CPU threads per rank
    "step_sleep_s": 0.0,      # pace a CPU demo
    # fault knobs for drover's own tests (a bad release is a release with one of these set);
    # *_at_step count the steps this process did after resuming
    "nan_at_step": -1, "hang_at_step": -1, "hang_once": False, "ckpt_sleep_s": 0.0,
    "nan_once_at_step": -1,   # one non-finite loss, parameters untouched (a GradScaler's skipped step)
    "hang_on_file": "",       # hang (once) when $DROVER_RUN_DIR/<this name> appears
    "fail_import": False, "selftest": False,
    "abort_at_step": -1,      # the last rank aborts (SIGABRT) at this step: a crash in one rank
}


def _integer(lo):
    def ok(v, cfg):
        return isinstance(v, int) and not isinstance(v, bool) and v >= lo
    return ok, "an integer >= %d" % lo


def _number(lo, strict):
    def ok(v, cfg):
        return (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                and (v > lo if strict else v >= lo))
    return ok, "a number %s %g" % (">" if strict else ">=", lo)


def _one_of(*words):
    return (lambda v, cfg: isinstance(v, str) and v in words), " or ".join('"%s"' % w for w in words)


_BOOL = (lambda v, cfg: isinstance(v, bool)), "true or false"
_STRING = (lambda v, cfg: isinstance(v, str)), "a string"
# steps are counted from 1: a 0 was accepted and never fired (a "NaN at step 0" release was
# promoted)
_STEP_KNOB = (lambda v, cfg: _integer(1)[0](v, cfg) or (_integer(-1)[0](v, cfg) and v == -1)), \
    "an integer >= 1, or -1 (off)"

# What each key of config.json may be: (check(value, whole config), what is allowed, in words).
# Checked before anything is built, so a bad value exits 3 (config, not retried) with one line
# naming the file and the key, in the preflight (--selftest) too, instead of a traceback from
# deep in the model (exit 1, retried) or a bad run (ckpt_every 0 dividing by zero at step 1,
# batch 0 reporting itself diverged).
SCHEMA = {
    "layers": _integer(1),
    "heads": _integer(1),
    "dim": _integer(1),
    "seq": _integer(1),
    "vocab": _integer(2),
    "batch": _integer(1),
    "lr": _number(0, strict=True),
    "max_steps": _integer(1),
    "ckpt_every": _integer(1),
    "keep_ckpts": _integer(1),
    "data": _STRING,
    "attention": _one_of("auto", "flex", "sdpa", "plain"),
    "compile_model": _BOOL,
    "compile_flex": _BOOL,
    "dtype": _one_of("auto", "bf16", "fp32"),
    "threads": _integer(1),
    "step_sleep_s": _number(0, strict=False),
    "nan_at_step": _STEP_KNOB, "hang_at_step": _STEP_KNOB, "nan_once_at_step": _STEP_KNOB,
    "abort_at_step": _STEP_KNOB,
    "hang_once": _BOOL, "ckpt_sleep_s": _number(0, strict=False), "hang_on_file": _STRING,
    "fail_import": _BOOL, "selftest": _BOOL,
}


def check_config(path, user, cfg):
    """Raise ConfigError for the first unknown key or bad value of the user's config."""
    import difflib
    for key in user:
        if key not in SCHEMA:
            near = difflib.get_close_matches(key, SCHEMA, n=1)
            raise ConfigError(path, "unknown key %s%s; the keys are %s" % (
                json.dumps(key), " (did you mean %s?)" % json.dumps(near[0]) if near else "",
                ", ".join(sorted(SCHEMA))))
    for key in SCHEMA:
        ok, allowed = SCHEMA[key]
        if not ok(cfg[key], cfg):
            raise ConfigError(path, "key %s is %s: allowed: %s" % (
                json.dumps(key), json.dumps(cfg[key])[:40], allowed))
    if cfg["dim"] % cfg["heads"]:  # each head gets dim/heads channels
        key, other = ("heads", "dim") if "heads" in user or "dim" not in user else ("dim", "heads")
        raise ConfigError(path, "key %s is %d: allowed: %s (%s is %d)" % (
            json.dumps(key), cfg[key], "a divisor of \"dim\"" if key == "heads" else
            "a multiple of \"heads\"", json.dumps(other), cfg[other]))


# What a checkpoint's weights depend on: one written with other values cannot be resumed
# (heads changes no tensor's shape, but what the weights mean).
SHAPE_KEYS = ("layers", "heads", "dim", "seq", "vocab")


def other_shape(state, shape, model):
    """None when the checkpoint `state` fits `model` (of `shape`), else why not, in words.  A
    checkpoint without "shape" (written before it was stored) is compared by its state_dict's
    keys and tensor shapes."""
    theirs = state.get("shape")
    if isinstance(theirs, dict):
        diff = ["%s %s, not %s" % (k, json.dumps(theirs.get(k)), json.dumps(shape[k]))
                for k in SHAPE_KEYS if theirs.get(k) != shape[k]]
        return "; ".join(diff) or None
    sd = state.get("model")
    if not isinstance(sd, dict):
        return "no model weights in it"
    mine = model.state_dict()
    missing = sorted(set(mine) - set(sd))
    extra = sorted(set(sd) - set(mine))
    sized = sorted(k for k in set(mine) & set(sd)
                   if tuple(getattr(sd[k], "shape", ())) != tuple(mine[k].shape))
    if not (missing or extra or sized):
        return None
    parts = []
    for what, keys in (("missing", missing), ("unexpected", extra), ("of another size", sized)):
        if keys:
            parts.append("%d weights %s, e.g. %s" % (len(keys), what, keys[0]))
    return "its weights differ: " + "; ".join(parts)


class ConfigError(Exception):
    """config.json cannot be used: the file, where in it and what is wrong (one line)."""

    def __init__(self, path, what):
        super().__init__("%s: %s" % (path, what))
        self.path, self.what = path, what


def load_config(path):
    cfg = dict(DEFAULTS)
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                user = json.load(f)
        except json.JSONDecodeError as e:  # the position in the user's file, not json/decoder.py's
            raise ConfigError(path, "invalid JSON at line %d column %d: %s" % (e.lineno, e.colno, e.msg)) from None
        except UnicodeDecodeError as e:
            raise ConfigError(path, "not UTF-8 text (byte %d)" % e.start) from None
        except OSError as e:
            raise ConfigError(path, "cannot read it: %s" % (e.strerror or e)) from None
        if not isinstance(user, dict):
            raise ConfigError(path, 'not a JSON object ({"key": value, ...}) but a JSON %s'
                              % {list: "array", str: "string", bool: "boolean"}.get(type(user), "number" if user is not None else "null"))
        cfg.update(user)
        check_config(path, user, cfg)
    return cfg


class Stop:
    requested = False


def on_sigterm(signum, frame):
    Stop.requested = True


def main():
    ap = argparse.ArgumentParser()
    # --config PATH must exist; without it, config.json beside train.py if there is one (a run by
    # hand), else the defaults
    ap.add_argument("--config", default=None)
    ap.add_argument("--selftest", action="store_true",
                    help="import everything, build the model, run one step on CPU, exit 0 (preflight)")
    args = ap.parse_args()
    # first, before anything that can fail: an error from here on reaches the agent's reason
    # (hb.error, or drover_heartbeat's excepthook for one nothing catches), and its first line
    # (a hello) tells drover this rank started, so a rank that never gets through
    # init_process_group is told apart from one that never reports (docs/pytorch.md)
    hb = Heartbeat(backend="torch")
    try:
        default = os.path.join(HERE, "config.json")
        path = args.config or (default if os.path.exists(default) else None)
        cfg = load_config(path)
    except ConfigError as e:
        return config_error(hb, e)
    cfg["_path"] = path or "(defaults)"
    if args.selftest:
        cfg.update(max_steps=1, ckpt_every=10 ** 9, data="", selftest=True)
    # SIGTERM keeps its default (exit at once) until the gang has met: train() takes it over.
    # No hb.init() here: it comes once the gang has met and resumed (train()), so that a rank
    # stuck in the rendezvous reads as one (the hello only), not as one that passed its init
    try:
        if cfg["fail_import"]:
            import drover_missing_dependency  # noqa: F401  (a broken dependency, on purpose)
        code = train(cfg, hb)
        sys.stdout.flush()  # a log on a full disk fails here, where it is caught, not at exit
        return code
    except ConfigError as e:  # a value this machine's torch cannot run (flex's head size)
        return config_error(hb, e)
    except OSError as e:
        if disk_full(e):  # exit 6: restarting the release cannot help
            hb.exit_disk_full(e)
        hb.error("%s: %s" % (type(e).__name__, e))
        raise
    except Exception as e:  # report, then exit non-zero: the agent journals the error
        if Dist.up and peer_lost(e):  # exit 8: the verdict names the rank that died
            hb.exit_peer_lost(e)
        hb.error("%s: %s" % (type(e).__name__, e))
        raise


def shown_path(path):
    # the config as its author knows it: under drover it lies in the container's copy of the
    # release (/var/lib/drover/releases/<id>/config.json), which is the deployed DIR/config.json
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(HERE))
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return path
    return "%s (in the release directory)" % rel


def config_error(hb, e):
    # exit 3 (config): not retried, and one line the preflight's reason and the verdict quote,
    # instead of a traceback (json/decoder.py's, or the model's) that never names the file
    print("train.py: config error: %s: %s: fix the file and deploy the release again (a config "
          "change is a new release)" % (shown_path(e.path), e.what), file=sys.stderr, flush=True)
    hb.error("config error: %s: %s" % (os.path.basename(e.path), e.what))  # cut to fit a line
    return EXIT_CONFIG


class Dist:
    up = False  # init_process_group returned: a failing collective may be a lost peer


def train(cfg, hb):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    rank = int(os.environ.get("RANK", "0"))
    world = 1 if cfg["selftest"] else int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", 0 if os.environ.get("CUDA_VISIBLE_DEVICES") else local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True
    else:
        torch.set_num_threads(int(cfg["threads"]))
    hb.backend = ("torch-cuda" if cuda else "torch-cpu")
    dist = None
    if world > 1:
        import torch.distributed as dist
        dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world)
        Dist.up = True
    # Only now SIGTERM means "checkpoint, then exit 0".  Inside init_process_group the handler
    # cannot run (the rendezvous waits in C++): a stop that came then left rank 0 waiting for a
    # peer the same SIGTERM had ended (EINTR), until SIGKILL after the job's grace (2 minutes on
    # the lab, measured).  Before training starts there is nothing to checkpoint.
    signal.signal(signal.SIGTERM, on_sigterm)

    # ---- attention: flex_attention + block mask where available ----
    flex_attention = create_block_mask = None
    attn = cfg["attention"]
    if attn in ("auto", "flex"):
        try:
            from torch.nn.attention.flex_attention import flex_attention, create_block_mask
        except ImportError:
            if attn == "flex":
                raise ConfigError(cfg["_path"], 'key "attention" is "flex": this torch (%s) has '
                                  'no flex_attention (2.5 or later); "auto" picks what it has'
                                  % torch.__version__) from None
    T, H, D = int(cfg["seq"]), int(cfg["heads"]), int(cfg["dim"])
    if attn == "flex" and flex_attention is not None and cuda and D // H < 16:
        # flex_attention's kernels need at least 16 channels per head (InductorError otherwise)
        raise ConfigError(cfg["_path"], 'key "attention" is "flex": allowed with "dim"/"heads" '
                          '>= 16 only (%d/%d = %d); "auto" uses sdpa then' % (D, H, D // H))
    if flex_attention is not None and cuda and D // H >= 16:
        attn = "flex"
    elif attn in ("auto", "flex"):
        attn = "sdpa" if hasattr(F, "scaled_dot_product_attention") else "plain"
    if attn == "flex" and cfg["compile_flex"]:
        flex_attention = torch.compile(flex_attention)  # v1 of the origin incident has this line
    block_mask = None
    if attn == "flex":
        def causal(b, h, q_idx, kv_idx):
            return q_idx >= kv_idx
        block_mask = create_block_mask(causal, B=None, H=None, Q_LEN=T, KV_LEN=T, device=str(device))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
            self.fc, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

        def forward(self, x):
            B, t, C = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = [z.view(B, t, H, C // H).transpose(1, 2) for z in (q, k, v)]
            if attn == "flex":
                y = flex_attention(q, k, v, block_mask=block_mask)
            elif attn == "sdpa":
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
                mask = torch.ones(t, t, device=x.device, dtype=torch.bool).tril()
                y = att.masked_fill(~mask, float("-inf")).softmax(-1) @ v
            x = x + self.proj(y.transpose(1, 2).contiguous().view(B, t, C))
            return x + self.fc2(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            V = int(cfg["vocab"])
            self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
            self.blocks = nn.ModuleList([Block() for _ in range(int(cfg["layers"]))])
            self.lnf = nn.LayerNorm(D)
            self.head = nn.Linear(D, V, bias=False)
            self.head.weight = self.wte.weight
            L = int(cfg["layers"])
            for name, p in self.named_parameters():  # GPT-2's init
                if p.dim() == 2:
                    std = 0.02 / (2 * L) ** 0.5 if name.endswith(("proj.weight", "fc2.weight")) else 0.02
                    nn.init.normal_(p, 0.0, std)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)

        def forward(self, idx, tgt):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for b in self.blocks:
                x = b(x)
            logits = self.head(self.lnf(x))
            return F.cross_entropy(logits.float().view(-1, logits.size(-1)), tgt.reshape(-1))

    torch.manual_seed(1234)
    model = GPT().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=float(cfg["lr"]), weight_decay=0.1)

    # ---- resume: newest checkpoint of an allowed release and of this model's shape (rank 0
    # reads, then broadcasts) ----
    release = os.environ.get("DROVER_RELEASE", "local")
    run_dir = os.environ.get("DROVER_RUN_DIR", os.path.join(HERE, "run"))
    ckpt_dir = os.path.join(run_dir, "checkpoints")
    allowed = [r for r in os.environ.get("DROVER_RESUME_RELEASES", "").split(",") if r]
    shape = {k: cfg[k] for k in SHAPE_KEYS}
    start = 0
    state = None
    skipped = False  # a newer checkpoint was of another model shape
    if rank == 0 and not cfg["selftest"]:
        os.makedirs(ckpt_dir, exist_ok=True)

        def resumable(path):
            writer = os.path.basename(path).split("-")[1]
            return not allowed or any(a.startswith(writer) for a in allowed)

        newest_first = sorted(filter(resumable, glob.glob(os.path.join(ckpt_dir, "torch-*.pt"))),
                              key=lambda p: int(p.rsplit("-", 1)[1][:-3]), reverse=True)
        # a torn file (a crash before atomic saves, a disk error) is skipped, said on stderr
        for path, state in loadable_checkpoints(newest_first, check=lambda st: int(st["step"])):
            # A release that changes the architecture (layers=3 after 2) cannot load the
            # promoted release's weights: load_state_dict raised, the rank exited 1 and every
            # such deploy was reverted.  It trains from scratch instead, and resumes its own
            # checkpoints (of its shape) after a restart.
            why = other_shape(state, shape, model)
            if why is None:
                break
            print("rank 0: checkpoint %s (release %s, step %d) is of another model shape (%s): "
                  "its weights cannot be loaded into this model, so it is not resumed; looking "
                  "for an older one of this shape, else training from scratch"
                  % (os.path.basename(path), state.get("release", "?"), int(state["step"]), why),
                  flush=True)
            state = None
            skipped = True
        if skipped and state is None:
            print("rank 0: no checkpoint of this model's shape (%s) to resume: training from "
                  "step 0" % ", ".join("%s %s" % kv for kv in shape.items()), flush=True)
    if dist is not None:
        box = [state]
        dist.broadcast_object_list(box, src=0)
        state = box[0]
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        # load_state_dict puts back the writer's hyperparameters too: a release whose config.json
        # changed lr resumed with the old one, its change never took effect, and it was judged
        # (and promoted) on the old release's settings.  This release's config decides.
        for group in opt.param_groups:
            group["lr"] = float(cfg["lr"])
        start = int(state["step"])
        print("rank %d resumed from step %d (release %s)" % (rank, start, state.get("release", "?")), flush=True)
    hb.init(resumed_from=start if state is not None else -1)

    net = model
    if dist is not None:
        from torch.nn.parallel import DistributedDataParallel as DDP
        net = DDP(model, device_ids=[device.index] if cuda else None)
    if cfg["compile_model"] and hasattr(torch, "compile"):
        net = torch.compile(net)

    # ---- data: llm.c shards (uint16 after a 1024-byte header), else synthetic tokens ----
    B = int(cfg["batch"])
    shards = sorted(glob.glob(cfg["data"])) if cfg["data"] else []
    if shards:
        import numpy as np
        tokens = np.fromfile(shards[0], dtype=np.uint16, offset=1024).astype(np.int64)
        tokens = torch.from_numpy(tokens) % int(cfg["vocab"])  # a small demo vocab folds GPT-2's ids
    else:
        # said, once per rank, in `drover logs`: a mistyped data path trains on noise (the loss
        # stays near ln(vocab)) and is promoted like a release that learns
        if cfg["data"] and not cfg.get("selftest"):
            print("rank %d: no file matches data '%s': training on synthetic random tokens" %
                  (rank, cfg["data"]), flush=True)
        g = torch.Generator().manual_seed(42)
        tokens = torch.randint(0, min(int(cfg["vocab"]), 50257), (1 << 20,), generator=g)
    per_step = world * B * T

    def batch(step):
        off = (step * per_step + rank * B * T) % (len(tokens) - B * T - 1)
        chunk = tokens[off:off + B * T + 1]
        return chunk[:-1].view(B, T).to(device), chunk[1:].view(B, T).to(device)

    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if cuda and cfg["dtype"] != "fp32" else None

    def save(step):
        # Every rank marks the checkpoint phase: the others wait in the barrier meanwhile, and
        # the agent applies the checkpoint deadline to them too, not the silence one.
        with hb.phase("checkpoint"):
            if rank == 0:
                write(step)
            if dist is not None:
                dist.barrier()
        hb.checkpointed(step)

    def write(step):
        if cfg["ckpt_sleep_s"]:
            time.sleep(float(cfg["ckpt_sleep_s"]))  # a slow filesystem
        # atomic (a temp file, fsync, rename): a full disk raises ENOSPC (exit 6) and leaves
        # the older checkpoints as they were, never a torn newest one that every restart resumes
        save_checkpoint({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                         "release": release, "shape": shape},
                        os.path.join(ckpt_dir, "torch-%s-%d.pt" % (release[:12], step)))
        mine = sorted(glob.glob(os.path.join(ckpt_dir, "torch-%s-*.pt" % release[:12])),
                      key=lambda p: int(p.rsplit("-", 1)[1][:-3]))
        for old in mine[:-int(cfg["keep_ckpts"])]:
            os.unlink(old)
        # Another release's checkpoints: kept while a release of the job may resume from them
        # (DROVER_RESUME_RELEASES: this one and every promoted one).  A failed release's are never
        # resumed again and filled the disk, one model and optimizer state per failed deploy.
        if allowed:
            for other in glob.glob(os.path.join(ckpt_dir, "torch-*-*.pt")):
                writer = os.path.basename(other).split("-")[1]
                if writer != release[:12] and not any(a.startswith(writer) for a in allowed):
                    try:
                        os.unlink(other)
                    except FileNotFoundError:
                        pass

    def params_finite():
        return all(bool(torch.isfinite(p).all()) for p in net.parameters())

    def healthy():
        # a checkpoint only of a state that trains: the last loss finite and every parameter too
        # (after a skipped non-finite step, as with a GradScaler, checkpoints go on)
        return nonfinite == 0 and params_finite()

    step = start
    poisoned = False  # nan_at_step: a diverged run stays diverged
    nonfinite = 0  # consecutive
    stop_flag = torch.zeros(1, device=device)
    peer_stopped = False  # left the loop on another rank's stop, not on ours
    while step < int(cfg["max_steps"]):
        if dist is not None:  # every rank stops after the same step, so nobody waits in a collective
            stop_flag.fill_(1.0 if Stop.requested else 0.0)
            dist.all_reduce(stop_flag, op=dist.ReduceOp.MAX)
            if stop_flag.item() > 0:
                peer_stopped = not Stop.requested
                break
        elif Stop.requested:
            break
        x, y = batch(step)
        if autocast is not None:
            with autocast:
                loss = net(x, y)
        else:
            loss = net(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        lv = loss.item()
        done = step - start  # fault knobs count the steps of this process (after the resume)
        if done == int(cfg["nan_at_step"]) or poisoned:
            poisoned = True
            lv = float("nan")
        if done == int(cfg["nan_once_at_step"]):
            lv = float("inf")
        if not math.isfinite(lv):
            nonfinite += 1
        else:
            nonfinite = 0
        trigger = cfg["hang_on_file"] and os.path.exists(os.path.join(run_dir, cfg["hang_on_file"]))
        if trigger and rank == world - 1:
            os.unlink(os.path.join(run_dir, cfg["hang_on_file"]))  # once: the restart trains on
            print("rank %d hangs at step %d (hang_on_file)" % (rank, step), flush=True)
            while True:
                time.sleep(3600)
        if done == int(cfg["hang_at_step"]) and rank == world - 1:
            marker = os.path.join(run_dir, "hung-once")
            if not (cfg["hang_once"] and os.path.exists(marker)):
                open(marker, "w").close()
                print("rank %d hangs at step %d (fault knob)" % (rank, step), flush=True)
                while True:  # a rank stuck in its loop: alive, silent; the others wait in all-reduce
                    time.sleep(3600)
        hb.step(step, lv, tokens=B * T)
        if done == int(cfg["abort_at_step"]) and rank == world - 1:
            print("rank %d aborts at step %d (fault knob)" % (rank, step), flush=True)
            os.abort()
        if nonfinite >= DIVERGED_STEPS:
            # as drover-train: no checkpoint of a poisoned state, and an exit the agent does not
            # retry (it stops a worker that goes on beating NaN after as many steps anyway)
            print("rank %d diverged: %d consecutive non-finite losses (last step %d)" % (rank, nonfinite, step),
                  flush=True)
            hb.error("diverged: non-finite loss")
            return EXIT_DIVERGED
        if cfg["step_sleep_s"]:
            time.sleep(float(cfg["step_sleep_s"]))
        if step % int(cfg["ckpt_every"]) == 0 and healthy():
            save(step)
    if step > start and not cfg["selftest"] and healthy():
        save(step)  # SIGTERM or max_steps: checkpoint, then a clean exit
    hb.done()
    if dist is not None:
        dist.destroy_process_group()
    if peer_stopped and not Stop.requested:  # a SIGTERM since then makes the stop ours
        print("rank %d stopped at step %d because another rank was stopped" % (rank, step), flush=True)
        return EXIT_PEER_STOPPED
    return 0


if __name__ == "__main__":
    sys.exit(main())
