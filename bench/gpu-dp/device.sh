#!/bin/bash
# bench/gpu-dp/device.sh: one device call for the data-parallel work of issue 15, on a machine
# with two GPUs (nvidia-h200-x2), from a folder made by bench/gpu-attn/pack.sh (as device-dp.sh):
# `make gpu-test` (the 2-GPU checks included), then drover-train at B=16 and 32 on one GPU alone,
# with SOLO=1 the two GPUs each running its own one-GPU job at once (what two busy GPUs cost
# without any communication), and two ranks with each gradient reduction (docs/cuda.md: DROVER_DP
# flat, the default; overlap; bucket; DROVER_DP_PRIO, DROVER_DP_CTAS) and DROVER_DP_TIMING=1 (the
# forward, the backward and the reduction's exposed time per step, per rank); then torch.compile
# on one GPU if the call has been short enough (TORCH_IF_BEFORE seconds, 430).  STEPS (40),
# TORCH (1), GPUTEST (1).  nvidia-smi samples clocks and power meanwhile.  Logs go to $OUT;
# JSON lines to $OUT/bench.jsonl, a summary last.
set -u
cd "$(dirname "$0")" || exit 1
export LD_LIBRARY_PATH=$PWD/lib
# NVLink multicast stays off (the device notes: it can take the host's GPUs out of service)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=${OUT:-/tmp/out}
mkdir -p "$O"
STEPS=${STEPS:-40}
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$O/log.txt"
nvidia-smi topo -m | head -3 | tee -a "$O/log.txt"
if [ "${GPUTEST:-1}" = 1 ]; then
    GPU_PREBUILT=1 DROVER_TRAIN=build/drover-train timeout 300 tests/gpu/run.sh build > "$O/gputest.txt" 2>&1
    echo "gpu-test rc=$? ($(($(date +%s) - T0)) s)" | tee -a "$O/log.txt"
    grep -E "FAIL|gpu-test|identical|data parallel|gpus|1 gpu|the same" "$O/gputest.txt" | head -30
fi
nvidia-smi --query-gpu=index,clocks.sm,power.draw,temperature.gpu,utilization.gpu --format=csv,noheader -lms 500 > "$O/smi.csv" 2>&1 &
SMI=$!
G=build/gpu
J=$O/bench.jsonl
# dp2 NAME VAR=VALUE...: two ranks, one per GPU, with the given environment
dp2() {
    local name=$1
    shift
    (
        export "$@" WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29541 DROVER_DP_TIMING=1
        RANK=1 LOCAL_RANK=1 timeout 60 "$G/bench" "$b" "$STEPS" > "$O/rank1-$name-$b.txt" 2>&1 &
        local p1=$!
        RANK=0 LOCAL_RANK=0 timeout 60 "$G/bench" "$b" "$STEPS" 2> "$O/rank0-$name-$b.txt" |
            sed "s/\"system\": \"drover\"/\"system\": \"dp-$name\"/" | tee -a "$J"
        wait $p1
        grep -h "gradient reduction" "$O/rank0-$name-$b.txt" "$O/rank1-$name-$b.txt" | sed "s/^/  $name B=$b: /"
    )
}
for b in ${BATCHES:-16 32}; do
    echo "== B=$b $(($(date +%s) - T0)) s"
    timeout 60 "$G/bench" "$b" "$STEPS" | tee -a "$J"
    if [ "${SOLO:-0}" = 1 ]; then
        # both GPUs busy, each with its own one-GPU job, no communication
        CUDA_VISIBLE_DEVICES=1 timeout 60 "$G/bench" "$b" "$STEPS" > "$O/solo1-$b.txt" 2>&1 &
        p1=$!
        CUDA_VISIBLE_DEVICES=0 timeout 60 "$G/bench" "$b" "$STEPS" | sed 's/"system": "drover"/"system": "two-solo-gpu0"/' | tee -a "$J"
        wait $p1
        sed 's/"system": "drover"/"system": "two-solo-gpu1"/' "$O/solo1-$b.txt" | grep '^{' | tee -a "$J"
    fi
    dp2 flat DROVER_DP=flat
    dp2 overlap DROVER_DP=overlap
    dp2 overlap-prio DROVER_DP=overlap DROVER_DP_PRIO=1
    dp2 overlap-c8-prio DROVER_DP=overlap DROVER_DP_CTAS=8 DROVER_DP_PRIO=1
    dp2 overlap-c16-prio DROVER_DP=overlap DROVER_DP_CTAS=16 DROVER_DP_PRIO=1
    dp2 overlap-c8-prio-simple DROVER_DP=overlap DROVER_DP_CTAS=8 DROVER_DP_PRIO=1 NCCL_PROTO=Simple
    dp2 bucket-c8-prio DROVER_DP=bucket DROVER_DP_CTAS=8 DROVER_DP_PRIO=1
done
kill $SMI 2>/dev/null
if [ "${TORCH:-1}" = 1 ] && [ $(($(date +%s) - T0)) -lt ${TORCH_IF_BEFORE:-430} ]; then
    for b in ${BATCHES:-16 32}; do
        timeout 100 python3 torch_gpt2.py --batch "$b" --steps "$STEPS" --compile 2>"$O/torch-$b.err" | tee -a "$J"
    done
fi
echo "== summary (Ktok/s) after $(($(date +%s) - T0)) s"
python3 - "$J" "$O/smi.csv" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {}
for r in rows:
    name = r["system"] + (" compile" if r.get("compile") else "")
    by.setdefault(r["B"], {})[name] = r
for b, d in sorted(by.items()):
    one = d.get("drover", {}).get("ktok_s")
    print(f"B={b}:")
    for k, v in d.items():
        extra = ""
        if one and v.get("gpus", 1) == 2:
            extra = f"  scaling {v['ktok_s'] / (2 * one):.3f}"
        elif one and k.startswith("two-solo"):
            extra = f"  ({v['ktok_s'] / one:.3f} of alone)"
        print(f"  {k:22s} {v['ktok_s']:7.1f} Ktok/s  step {v.get('step_ms', '-')} ms  peak {v.get('mem_peak_gib', '-')} GiB{extra}")
    tc = d.get("torch compile", {}).get("ktok_s")
    if one and tc:
        print(f"  drover / torch.compile = {one / tc:.3f}x")
try:
    clk = {}
    for l in open(sys.argv[2]):
        f = [x.strip() for x in l.split(",")]
        if len(f) >= 3 and f[1].endswith("MHz"):
            clk.setdefault(f[0], []).append((int(f[1].split()[0]), float(f[2].split()[0])))
    for g, v in clk.items():
        busy = [c for c in v if c[1] > 200]
        if busy:
            print(f"GPU{g}: {len(busy)} busy samples, SM clock min {min(c[0] for c in busy)} "
                  f"mean {sum(c[0] for c in busy) / len(busy):.0f} MHz, power max {max(c[1] for c in busy):.0f} W")
except Exception as e:
    print("smi:", e)
PY
