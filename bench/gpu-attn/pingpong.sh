#!/bin/bash
# bench/gpu-attn/pingpong.sh: one device call for the attention variants of
# kernels/attention_wgmma.cu's bits 8-32 (longest-first grid, ping-pong, three warpgroups):
# Nsight Compute on the attention kernels of each NCU_VARIANTS entry where ncu is installed
# (NCU=0 skips; SpeedOfLight, SchedulerStats, WarpStateStats, Occupancy and the stall reasons
# per issued instruction), then step.sh (bench/gpu-step/device.sh: gpu-test, the kernel table
# with BENCH_WG's variants timed alone, the drover-train VARIANTS, torch.compile unless TORCH=0).
# Runs from a folder made by bench/gpu-attn/pack.sh with this script and step.sh copied in.
set -u
cd "$(dirname "$0")" || exit 1
export LD_LIBRARY_PATH=$PWD/lib
O=${OUT:-/tmp/out}
mkdir -p "$O"
N=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${N:-not installed}"
if [ -n "$N" ] && [ "${NCU:-1}" = 1 ]; then
    for v in ${NCU_VARIANTS:-5,5,5 24,24,24}; do
        for what in fwd bwd; do
            DROVER_WG_VARIANT=$v BENCH_ONLY="attention $what (wgmma default)" timeout 150 "$N" --clock-control none \
                --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section Occupancy \
                --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
                -k regex:wg_ -c 3 build/gpu/bench kernels 32 > "$O/ncu1.txt" 2>&1
            echo "ncu $what $v rc=$?" | tee -a "$O/ncu.txt"
            cat "$O/ncu1.txt" >> "$O/ncu.txt"
            grep -E "^  wg_|Duration|Compute \(SM\) Throughput|Memory Throughput|No Eligible|Eligible Warps|Registers Per|Achieved Occupancy|gmma|stalled_(barrier|long_score|wait|math|mio|short|lg|dispatch|not_sel|sleep|selected|branch|membar|tex|drain|no_inst|imc)[a-z_]*_per_issue_active" "$O/ncu1.txt" | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | awk '{$1=$1; print}' | head -80
        done
    done
    rm -f "$O/ncu1.txt"
fi
exec ./step.sh
