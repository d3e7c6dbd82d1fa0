#!/bin/sh
# tests/gpu/train-e2e.sh DROVER_TRAIN: the real drover-train binary on the GPU, through real
# checkpoint files: (1) a 20-step CUDA run; (2) the same run split at a step-10 checkpoint
# reproduces steps 11..20 exactly (heartbeat losses); (3) the step-10 GPU checkpoint resumes on
# the CPU backend within 1e-2 relative; (4) heartbeats carry mfu and mem_peak.  Needs python3
# (shard writing and comparisons).  Exit 1 on failure.
set -eu
DT=$(readlink -f "${1:-build/drover-train}")
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W"
python3 - <<'PY'
import struct, random
random.seed(5)
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
dim = ${DIM:-256}
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
threads = 8
INI
run() { # dir device max_steps heartbeat-file
    DROVER_HEARTBEAT_FD=3 "$DT" train --config cfg.ini --checkpoint-dir "$1" --device "$2" \
        --max-steps "$3" 3>>"$4" 2>>log.txt
}
D=${DEVICE:-cuda}
run a $D 20 a.jsonl
run b $D 10 b.jsonl
run b $D 20 b.jsonl
mkdir c && cp b/ckpt-*-000000000010.bin c/
run c cpu 15 c.jsonl
python3 - <<'PY'
import json, sys
def losses(f):
    d = {}
    for l in open(f):
        h = json.loads(l)
        if h.get("phase") == "train":
            d[h["step"]] = h
    return d
a, b, c = losses("a.jsonl"), losses("b.jsonl"), losses("c.jsonl")
fail = 0
def check(name, ok, detail):
    global fail
    print("%-52s %s  %s" % (name, "ok" if ok else "FAIL", detail), flush=True)
    fail |= not ok
check("drover-train cuda: 20 steps, loss falls", len(a) == 20 and a[20]["loss"] < a[1]["loss"] - 0.3,
      "%.4f -> %.4f" % (a[1]["loss"], a[20]["loss"]))
same = all(b[s]["loss"] == a[s]["loss"] for s in range(11, 21))
check("checkpoint at 10 + resume: steps 11..20 identical", same,
      " ".join("%.6f" % b[s]["loss"] for s in range(11, 21)))
rel = max(abs(c[s]["loss"] - a[s]["loss"]) / a[s]["loss"] for s in range(11, 16))
check("gpu checkpoint resumed on cpu: steps 11..15", rel < 1e-2, "max rel diff %.2e" % rel)
h = a[20]
check("heartbeats carry mfu and mem_peak", h.get("backend") != "cuda" or h.get("mfu", -1) > 0 and h.get("mem_peak", -1) > 0,
      "backend %s mfu %s mem_peak %s tok_s %.0f" % (h.get("backend"), h.get("mfu"), h.get("mem_peak"), h["tok_s"]))
sys.exit(fail)
PY
