#!/bin/bash
# bench/gpu-dp/device.sh: one device call for the data-parallel work of issue 15, on a machine
# with two GPUs (nvidia-h200-x2), from a folder made by bench/gpu-attn/pack.sh (as device-dp.sh):
# `make gpu-test` (the 2-GPU checks included), then drover-train at B=16 and 32 on one GPU and
# on two with each gradient reduction (DROVER_DP=flat: one all-reduce after the backward; bucket:
# per half-layer buckets on a second stream during the backward; overlap, the default: buckets
# and the embedding rows gathered), then torch.compile on one GPU.  STEPS (40), TORCH (1).
# Logs go to $OUT; JSON lines to $OUT/bench.jsonl, a summary last.
set -u
cd "$(dirname "$0")" || exit 1
export LD_LIBRARY_PATH=$PWD/lib
# NVLink multicast stays off (the device notes: it can take the host's GPUs out of service)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=${OUT:-/tmp/out}
mkdir -p "$O"
STEPS=${STEPS:-40}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$O/log.txt"
nvidia-smi topo -m | head -4 | tee -a "$O/log.txt"
if [ "${GPUTEST:-1}" = 1 ]; then
    GPU_PREBUILT=1 DROVER_TRAIN=build/drover-train timeout 300 tests/gpu/run.sh build > "$O/gputest.txt" 2>&1
    echo "gpu-test rc=$?" | tee -a "$O/log.txt"
    grep -E "FAIL|PASS|identical|data parallel|gpus|1 gpu" "$O/gputest.txt" | head -30
fi
G=build/gpu
J=$O/bench.jsonl
for b in ${BATCHES:-16 32}; do
    timeout 120 "$G/bench" "$b" "$STEPS" | tee -a "$J"
    # a mode "overlap:8" runs overlap with NCCL_MAX_CTAS=8 (fewer SMs taken from the backward)
    for mode in ${MODES:-flat bucket overlap overlap:16 overlap:4}; do
        dp=${mode%%:*}
        ctas=${mode#*:}
        [ "$ctas" = "$mode" ] && ctas=
        (
            [ -n "$ctas" ] && export NCCL_MAX_CTAS=$ctas
            export DROVER_DP=$dp WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29541
            RANK=1 LOCAL_RANK=1 timeout 120 "$G/bench" "$b" "$STEPS" > "$O/rank1-$dp$ctas-$b.txt" 2>&1 &
            RANK=0 LOCAL_RANK=0 timeout 120 "$G/bench" "$b" "$STEPS" |
                sed "s/\"system\": \"drover\"/\"system\": \"drover-dp-$mode\"/" | tee -a "$J"
            wait
        )
    done
done
if [ "${TORCH:-1}" = 1 ]; then
    for b in ${BATCHES:-16 32}; do
        timeout 200 python3 torch_gpt2.py --batch "$b" --steps "$STEPS" --compile 2>"$O/torch-$b.err" | tee -a "$J"
    done
fi
echo "== summary (Ktok/s)"
python3 - "$J" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {}
for r in rows:
    name = r["system"] + (" compile" if r.get("compile") else "")
    by.setdefault(r["B"], {})[name] = r
for b, d in sorted(by.items()):
    one = d.get("drover", {}).get("ktok_s")
    line = f"B={b}: " + ", ".join(f"{k} {v['ktok_s']} ({v.get('mem_peak_gib', '?')} GiB)" for k, v in d.items())
    print(line)
    for k, v in d.items():
        if one and k.startswith("drover-dp"):
            print(f"  {k}: scaling {v['ktok_s'] / (2 * one):.3f}, step {v.get('step_ms')} ms")
    tc = d.get("torch compile", {}).get("ktok_s")
    if one and tc:
        print(f"  drover / torch.compile = {one / tc:.3f}x")
PY
