#!/bin/bash
# bench/gpu-step/device.sh: one device call for the step work of issue 15 (one H200): `make
# gpu-test` with the default kernels (the other row kernels are checked inside test_kernels
# too); the kernel and model checks again with DROVER_BLAS_TUNE (timed cuBLASLt algorithm
# choice); the per-kernel table at B=32 without and with it; then drover-train at B=16 and 32
# with the default kernels, the earlier ones (DROVER_LN=old DROVER_ADAMW=old), the
# shared-memory classifier (DROVER_CLS=smem), DROVER_BLAS_TUNE, the default again, and
# torch.compile, all in this call.  Runs from a folder made by bench/gpu-attn/pack.sh with this
# script copied in (as step.sh); logs to $OUT, a summary last.
# TRACE (unset): step modes traced through CUPTI before the runs (the step's idle time), at
# TRACE_B (16 32), TRACE_STEPS (10) steps each;
# NSYS (1): Nsight Systems summaries where installed.
# TUNE (8): candidates timed per shape, 0 = no DROVER_BLAS_TUNE checks, table or run; STEPS
# (30); GPUTEST (1); TORCH (1); VARIANTS: the drover-train runs, ';'-separated "label ENV=V ..."
# or "label BIN=path ENV=V ..." (another bench binary, e.g. the previous build's, side by side),
# default the list below (the LayerNorm backward's call used
# VARIANTS='drover;drover-lnbwd-old DROVER_LN_BWD=old;drover-lnbwd-reg3 DROVER_LN_BWD=reg3;drover2;drover-lnbwd-old2 DROVER_LN_BWD=old').
set -u
cd "$(dirname "$0")" || exit 1
export LD_LIBRARY_PATH=$PWD/lib
O=${OUT:-/tmp/out}
mkdir -p "$O"
STEPS=${STEPS:-30}
TUNE=${TUNE:-8}
T0=$(date +%s)
el() { echo "($(($(date +%s) - T0)) s)"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$O/log.txt"
G=build/gpu
if [ "${GPUTEST:-1}" = 1 ]; then
    GPU_PREBUILT=1 DROVER_TRAIN=build/drover-train timeout 300 tests/gpu/run.sh build > "$O/gputest.txt" 2>&1
    echo "gpu-test rc=$? $(el)" | tee -a "$O/log.txt"
    grep -E "FAIL|gpu-test|classifier|layernorm_|identical|test_kernels|ERROR SUMMARY|DROVER_STEP|encoder_backward_dev" "$O/gputest.txt" | head -70
fi
if [ "${GPUTEST:-1}" = 1 ] && [ "$TUNE" != 0 ]; then
    DROVER_BLAS_TUNE=$TUNE timeout 120 $G/test_kernels > "$O/kernels-tune.txt" 2>&1
    echo "test_kernels with DROVER_BLAS_TUNE=$TUNE rc=$? $(el)" | tee -a "$O/log.txt"
    grep -E "FAIL|matmul|test_kernels" "$O/kernels-tune.txt" | head -20
    DROVER_BLAS_TUNE=$TUNE timeout 120 $G/test_model tests/gpu/expected_losses.txt > "$O/model-tune.txt" 2>&1
    echo "test_model with DROVER_BLAS_TUNE=$TUNE rc=$? $(el)" | tee -a "$O/log.txt"
    grep -E "FAIL|loss|identical|PASS" "$O/model-tune.txt" | head -20
fi
BENCH_VARIANTS=0 timeout 100 $G/bench kernels 32 > "$O/kernels32.txt" 2>&1
if [ "$TUNE" != 0 ]; then
    BENCH_VARIANTS=0 DROVER_BLAS_TUNE=$TUNE timeout 100 $G/bench kernels 32 > "$O/kernels32-tune.txt" 2>&1
    echo "per-kernel tables $(el)"
    paste -d'|' <(cut -c1-110 "$O/kernels32.txt") <(cut -c35-110 "$O/kernels32-tune.txt") | grep -v "wgmma dq\|wgmma [0-7])"
else
    echo "per-kernel table $(el)"
    grep -v "wgmma dq\|wgmma [0-7])" "$O/kernels32.txt" | cut -c1-120
fi
# TRACE: step modes (DROVER_STEP) whose GPU timeline build/gpu/trace records through CUPTI at
# B=16 and 32 (busy, idle by gap length, kernel sum per step; bench/train/trace.c)
if [ -n "${TRACE:-}" ] && [ -x $G/trace ]; then
    : > "$O/trace.txt"
    for m in $TRACE; do
        for b in ${TRACE_B:-16 32}; do
            DROVER_STEP=$m timeout 120 $G/trace $b ${TRACE_STEPS:-10} >> "$O/trace.txt" 2>&1
        done
    done
    echo "CUPTI traces $(el)"
    grep '^{' "$O/trace.txt"
fi
# Nsight Systems, where the machine has it (NSYS=0 skips): kernel and API summaries of 8 steps
# at B=32 for the plain and graph steps
NS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NS:-not installed}"
if [ -n "$NS" ] && [ "${NSYS:-1}" = 1 ]; then
    for m in plain graph; do
        DROVER_STEP=$m timeout 150 "$NS" profile -t cuda -o "/tmp/nsys-$m" --force-overwrite true \
            --stats=true $G/bench 32 8 > "$O/nsys-$m.txt" 2>&1
        echo "nsys $m rc=$? $(el)"
        grep -A14 "cuda_gpu_kern_sum\|cuda_api_sum" "$O/nsys-$m.txt" | cut -c1-160 | head -40
    done
fi
res=$O/bench.jsonl
: > "$res"
run() { # label, [BIN=another bench binary, e.g. an earlier build's], env...
    local lab=$1 bin=$G/bench; shift
    if [[ ${1:-} == BIN=* ]]; then
        bin=${1#BIN=}
        shift
    fi
    for b in 16 32; do
        env "$@" timeout 120 "$bin" $b $STEPS | sed "s/\"system\": \"drover\"/\"system\": \"$lab\"/" | tee -a "$res"
    done
}
# the default twice, first and last: the drift over the call
VARIANTS=${VARIANTS:-"drover;drover-old DROVER_LN=old DROVER_ADAMW=old;drover-smemcls DROVER_CLS=smem;drover-tune DROVER_BLAS_TUNE=$TUNE;drover2"}
IFS=';' read -r -a variants <<<"$VARIANTS"
for v in "${variants[@]}"; do
    read -r -a words <<<"$v"
    [ ${#words[@]} -gt 0 ] && run "${words[@]}"
done
echo "drover runs $(el)"
if [ "${TORCH:-1}" = 1 ]; then
    for b in 16 32; do
        timeout 240 python3 torch_gpt2.py --batch $b --steps $STEPS --compile | tee -a "$res"
    done
fi
echo "done $(el)"
python3 - "$res" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {}
for r in rows:
    name = r["system"] + (" compile" if r.get("compile") else "")
    by.setdefault(r["B"], {})[name] = r
for b, d in sorted(by.items()):
    tc = d.get("torch compile", {}).get("ktok_s")
    for k, r in d.items():
        extra = f" / compile {r['ktok_s'] / tc:.3f}x" if tc and k != "torch compile" else ""
        mfu = f" mfu {r['mfu']:.3f} peak {r.get('mem_peak_gib')} GiB step {r.get('step_ms')} ms" if "mfu" in r and k.startswith("drover") else ""
        if "step_ms_median" in r:
            mfu += f" (median {r['step_ms_median']}, min {r['step_ms_min']}, max {r['step_ms_max']})"
        print(f"B={b} {k:18s} {r['ktok_s']:7.1f} Ktok/s{extra}{mfu}")
PY
