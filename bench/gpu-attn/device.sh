#!/bin/bash
# bench/gpu-attn/device.sh: one device call for the attention work of issue 15: `make gpu-test`
# with the default build, the attention checks of every wgmma variant, the per-kernel table
# (B=32, both attentions, every wgmma variant), ours (wgmma default and mma.sync) against torch
# eager / torch.compile, and Nsight Compute sections of the four main attention kernels (when
# PROFILE=1).  Runs from a folder made by bench/gpu-attn/pack.sh; logs go to $OUT.
set -u
cd "$(dirname "$0")" || exit 1
export LD_LIBRARY_PATH=$PWD/lib
O=${OUT:-/tmp/out}
mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$O/log.txt"
GPU_PREBUILT=1 DROVER_TRAIN=build/drover-train timeout 300 tests/gpu/run.sh build > "$O/gputest.txt" 2>&1
echo "gpu-test (default attention) rc=$?" | tee -a "$O/log.txt"
grep -E "FAIL|PASS|identical to|bit-identical" "$O/gputest.txt" | head -20
if [ "${PROFILE:-0}" = 1 ]; then
    NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
    for k in am_forward wg_forward am_backward_dkv wg_backward_dkv am_backward_dq wg_backward_dq; do
        BENCH_ONLY=attention timeout 120 "$NCU" --clock-control none -k "regex:$k" -c 1 \
            --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
            build/gpu/bench kernels 32 > "$O/ncu-$k.txt" 2>&1
        grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Stall|Warp Cycles Per Issued" "$O/ncu-$k.txt" | head -16 | sed "s/^/$k: /"
    done
    cat "$O"/ncu-*.txt > "$O/ncu.txt"; rm -f "$O"/ncu-*.txt
fi
[ "${BENCH:-1}" = 1 ] || exit 0
timeout 150 build/gpu/bench kernels 32 > "$O/kernels32.txt" 2>&1
grep -E "attention (fwd|bwd) \((mma|wgmma default)|sum of|^(matmul|layernorm|classifier|bias|adamw|grad)" "$O/kernels32.txt"
KERNELS=0 TORCH_EAGER=${TORCH_EAGER:-1} TORCH_REF=torch_gpt2.py timeout 420 bench/train/run.sh build > "$O/bench.txt" 2>&1
sed -n '/== summary/,$p' "$O/bench.txt"
