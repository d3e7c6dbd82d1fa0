#!/bin/sh
# bench/train/run.sh BUILD: drover-train's CUDA backend and the PyTorch reference
# (../shared/bench/torch_gpt2.py, or $TORCH_REF) on GPT-2 124M (12 layers, 12 heads, width 768,
# vocabulary 50304, sequence 1024), same micro-batches, one after the other on the same GPU.
# BATCHES (default "16 32"), STEPS (30), TORCH_COMPILE=0 skips torch.compile, TORCH_EAGER=0 eager
# PyTorch, KERNELS=0 the per-kernel table, OLD_ATTN=0 the run with the mma.sync attention
# (DROVER_ATTN=mma, reported as "drover-mma").  JSON lines on stdout, a summary table last.
# Figures go to docs/benchmarks.md.
set -u
B=${1:-build}
G=$B/gpu
[ -x "$G/bench" ] || tests/gpu/build.sh "$B" || exit 1
REF=${TORCH_REF:-../shared/bench/torch_gpt2.py}
BATCHES=${BATCHES:-16 32}
STEPS=${STEPS:-30}
res=$(mktemp)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
if [ "${KERNELS:-1}" = 1 ]; then
    for b in $BATCHES; do timeout 300 "$G/bench" kernels "$b"; done
fi
for b in $BATCHES; do
    timeout 300 "$G/bench" "$b" "$STEPS" | tee -a "$res"
    # the previous attention (mma.sync, DROVER_ATTN=mma) in the same run, as "drover-mma"
    [ "${OLD_ATTN:-1}" = 1 ] && DROVER_ATTN=mma timeout 300 "$G/bench" "$b" "$STEPS" |
        sed 's/"system": "drover"/"system": "drover-mma"/' | tee -a "$res"
done
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$ngpu" -ge 2 ]; then
    for b in $BATCHES; do
        WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 RANK=1 LOCAL_RANK=1 timeout 300 "$G/bench" "$b" "$STEPS" &
        WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 RANK=0 LOCAL_RANK=0 timeout 300 "$G/bench" "$b" "$STEPS" | tee -a "$res"
        wait
    done
fi
if [ -f "$REF" ] && python3 -c 'import torch' 2>/dev/null; then
    for b in $BATCHES; do
        [ "${TORCH_EAGER:-1}" = 1 ] && timeout 300 python3 "$REF" --batch "$b" --steps "$STEPS" | tee -a "$res"
        [ "${TORCH_COMPILE:-1}" = 1 ] && timeout 400 python3 "$REF" --batch "$b" --steps "$STEPS" --compile | tee -a "$res"
    done
else
    echo "bench: PyTorch reference not run ($REF missing or no torch)"
fi
echo "== summary (Ktok/s)"
python3 - "$res" <<'PY' 2>/dev/null || cat "$res"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {}
for r in rows:
    name = r["system"] + (" compile" if r.get("compile") else (" eager" if r["system"] == "torch" else ""))
    if r.get("gpus", 1) > 1:
        name += f" x{r['gpus']} GPUs"
    by.setdefault(r["B"], {})[name] = r
for b, d in sorted(by.items()):
    ours = d.get("drover", {}).get("ktok_s")
    line = f"B={b}: " + ", ".join(f"{k} {v['ktok_s']}" for k, v in d.items())
    tc = d.get("torch compile", {}).get("ktok_s")
    if ours and tc:
        line += f"; drover / torch.compile = {ours / tc:.2f}x"
    old = d.get("drover-mma", {}).get("ktok_s")
    if ours and old:
        line += f"; drover / drover-mma = {ours / old:.2f}x"
    dp = d.get("drover x2 GPUs", {}).get("ktok_s")
    if ours and dp:
        line += f"; 2-GPU scaling efficiency {dp / (2 * ours):.2f}"
    if "drover" in d:
        line += f"; drover MFU {d['drover']['mfu']:.3f}, peak {d['drover']['mem_peak_gib']} GiB"
    print(line)
PY
rm -f "$res"
