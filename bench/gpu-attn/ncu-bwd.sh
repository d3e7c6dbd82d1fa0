#!/bin/bash
# bench/gpu-attn/ncu-bwd.sh: Nsight Compute on the wgmma attention kernels at B=32 (the forward,
# the split backward's dQ and dK/dV kernels, the fused backward): speed of light, pipe and
# shared-memory utilisation, warp stalls.  Runs on the GPU machine from a folder made by
# bench/gpu-attn/pack.sh; logs to $OUT/ncu-*.txt and prints the lines that matter.
set -u
cd "$(dirname "$0")" || exit 1
[ -d build/gpu ] || cd ../.. || exit 1
export LD_LIBRARY_PATH=$PWD/lib
O=${OUT:-/tmp/out}
mkdir -p "$O"
N=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$N" ] || { echo "ncu: not installed"; exit 0; }
M=sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active
M=$M,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed
M=$M,smsp__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
run() { # NAME BENCH_ONLY ENV KERNEL-REGEX COUNT
    env BENCH_VARIANTS=0 BENCH_ONLY="$2" $3 timeout 150 "$N" --clock-control none \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section Occupancy --metrics "$M" \
        -k "regex:$4" -c "$5" build/gpu/bench kernels 32 > "$O/ncu-$1.txt" 2>&1
    echo "== ncu $1 rc=$?"
    grep -E "^  [a-z_]+.*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|Max Bandwidth|Mem Pipes Busy|Executed Ipc Active|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|No Eligible|gmma_cycles|mem_shared|inst_executed.sum|sm__throughput" \
        "$O/ncu-$1.txt" | cut -c1-150 | head -60
}
run fwd "attention fwd (wgmma default)" "" "wg_" 1
run split "attention bwd (wgmma default)" "" "wg_" 2
run fused "attention bwd (wgmma fused)" "DROVER_ATTN_BWD=fused" "wg_backward_dkv" 1
