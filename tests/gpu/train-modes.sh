#!/bin/sh
# tests/gpu/train-modes.sh DROVER_TRAIN: the real drover-train binary with each DROVER_STEP
# (plain, staged, graph; docs/cuda.md) on the same shard and seed: (1) the heartbeat losses of 20
# steps (a checkpoint at 10) are the same bits in every mode; (2) the step-10 checkpoint files are
# byte-identical; (3) with graph, a NaN injected from step 6 (DROVER_TRAIN_FAULT=nan_at=6) ends
# the run as diverged (exit 7) after three non-finite steps, the heartbeats saying so, and no
# checkpoint is written after it.  Needs python3.  Exit 1 on failure.
set -eu
DT=$(readlink -f "${1:-build/drover-train}")
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W"
python3 - <<'PY'
import struct, random
random.seed(11)
V, n = 1000, 200000
toks, prev = [], 1
for i in range(n):
    prev = random.randrange(V) if random.random() < 0.125 else (prev * 7 + 3) % V
    toks.append(prev)
hdr = [20240520, 1, n] + [0] * 253
open("train_000.bin", "wb").write(struct.pack("<256i", *hdr) + struct.pack("<%dH" % n, *toks))
PY
cat > cfg.ini <<INI
[model]
layers = 2
heads = 4
dim = 256
vocab = 1000
seq = 128
[train]
batch = 8
lr = 0.001
warmup_steps = 5
max_steps = 20
checkpoint_every = 10
log_every = 5
[data]
train = train_000.bin
[backend]
device = cuda
INI
for m in plain staged graph; do
    DROVER_STEP=$m DROVER_HEARTBEAT_FD=3 "$DT" train --config cfg.ini --checkpoint-dir "ck-$m" \
        3>>"$m.jsonl" 2>>log.txt
done
rc=0
DROVER_STEP=graph DROVER_TRAIN_FAULT=nan_at=6 DROVER_HEARTBEAT_FD=3 "$DT" train --config cfg.ini \
    --checkpoint-dir ck-nan 3>>nan.jsonl 2>>log.txt || rc=$?
python3 - "$rc" <<'PY'
import glob, json, sys
def beats(f):
    return [json.loads(l) for l in open(f)]
def losses(f):
    return {h["step"]: h.get("loss") for h in beats(f) if h.get("phase") == "train"}
fail = 0
def check(name, ok, detail=""):
    global fail
    print("%-58s %s  %s" % (name, "ok" if ok else "FAIL", detail), flush=True)
    fail |= not ok
p = losses("plain.jsonl")
check("DROVER_STEP=plain: 20 steps", len(p) == 20, "%d steps" % len(p))
def ck(m):
    f = sorted(glob.glob("ck-%s/ckpt-*-000000000010.bin" % m))
    return open(f[0], "rb").read() if f else None
for m in ("staged", "graph"):
    q = losses(m + ".jsonl")
    check("DROVER_STEP=%s: heartbeat losses = plain's bits" % m, q == p,
          " ".join("%.6f" % q.get(s, float("nan")) for s in (1, 10, 20)))
    a, b = ck("plain"), ck(m)
    check("DROVER_STEP=%s: step-10 checkpoint = plain's bytes" % m, a is not None and a == b)
rc = int(sys.argv[1])
n = beats("nan.jsonl")
tr = [h for h in n if h.get("phase") == "train"]
bad = [h["step"] for h in tr if h.get("nonfinite", 0) > 0]
done = [h for h in n if h.get("phase") == "done"]
check("DROVER_STEP=graph nan_at=6: exit 7 (diverged)", rc == 7, "exit %d" % rc)
check("  heartbeats: steps 6..8 non-finite, then done", bad == [6, 7, 8] and len(done) == 1
      and "diverged" in done[-1].get("error", ""), "non-finite %s" % bad)
check("  no checkpoint written", not glob.glob("ck-nan/ckpt-*"))
check("  losses before the NaN = plain's", all(losses("nan.jsonl")[s] == p[s] for s in range(1, 6)))
sys.exit(fail)
PY
