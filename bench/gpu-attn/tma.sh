#!/bin/bash
# bench/gpu-attn/tma.sh: one device call for the dK/dV kernel with a TMA producer warpgroup
# (DROVER_WG_VARIANT's bit 64, 2026-12-02): the attention checks (every variant, the TMA ones
# included; the TMA runs below are skipped if any check fails), the kernel table of the
# previous build (build/gpu/bench-old, copied in by hand) and of this one with BENCH_WG's
# variants, ncu on the fastest TMA dK/dV variant of that table (TMA_VARIANT overrides), then
# with that variant as DROVER_WG_VARIANT=13,13,V: `make gpu-test` (the fixed-seed loss list,
# reload and drover-train end to end as if it were the default) and step.sh (gpu-test skipped
# there) with the drover-train runs of VARIANTS, where TMA stands for that variant, and
# torch.compile.  Runs from a folder made by bench/gpu-attn/pack.sh with this script and
# bench/gpu-step/device.sh (as step.sh) copied in.
set -u
cd "$(dirname "$0")" || exit 1
export LD_LIBRARY_PATH=$PWD/lib
O=${OUT:-/tmp/out}
mkdir -p "$O"
T0=$(date +%s)
el() { echo "($(($(date +%s) - T0)) s)"; }
timeout 150 build/gpu/test_kernels 13 attention > "$O/attn-check.txt" 2>&1
rc=$?
echo "attention checks rc=$rc: $(grep -c ' ok' "$O/attn-check.txt") ok, $(grep -c FAIL "$O/attn-check.txt") FAIL $(el)"
grep FAIL "$O/attn-check.txt" | head -30
grep -E "wgmma13,13,(64|65|66|67|96|104) dqkv \(B[0-9]+ T1024" "$O/attn-check.txt" | head -12
BW=${BENCH_WG:-13,13,32 13,13,96 13,13,104 13,13,67 13,13,65 13,13,66 13,13,64}
for b in bench-old bench; do
    [ -x build/gpu/$b ] || continue
    if [ $b = bench ]; then export BENCH_WG="$BW"; else unset BENCH_WG; fi
    BENCH_VARIANTS=0 timeout 150 build/gpu/$b kernels 32 > "$O/kernels-$b.txt" 2>&1
    echo "== $b kernels 32 rc=$? $(el)"
    grep -E "attention|sum|total" "$O/kernels-$b.txt" | cut -c1-120
done
unset BENCH_WG
# TMA configurations with a failed check are not candidates; a failure elsewhere, or a check
# run that did not finish, ends the call here
TV='64|65|66|67|96|104'
bad=$(grep FAIL "$O/attn-check.txt" | grep -oE "wgmma13,13,($TV) " | sed 's/wgmma13,13,//' | sort -u | tr '\n' ' ')
other=$(grep FAIL "$O/attn-check.txt" | grep -cvE "wgmma13,13,($TV) ")
echo "TMA configurations failing a check: ${bad:-none}; other failures: $other"
V=${TMA_VARIANT:-$(awk -v bad=" $bad" '/dkv alone \(wgmma (64|65|66|67|96|104)\)/ {sub(/\)/, "", $5); if (index(bad, " " $5 " ") == 0) print $6, $5}' "$O/kernels-bench.txt" | sort -n | head -1 | cut -d' ' -f2)}
echo "TMA variant: ${V:-none}"
if [ "$other" != 0 ] || [ -z "$V" ] || [ $rc -gt 1 ] || { [ $rc = 1 ] && [ -z "$bad" ]; }; then
    echo "attention checks failed (rc=$rc) or no TMA candidate: no TMA runs"
    exit 1
fi
N=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$N" ] && [ "${NCU:-1}" = 1 ]; then
    for k in 32 $V; do
        BENCH_WG="13,13,$k" BENCH_VARIANTS=0 BENCH_ONLY="attention  dkv alone (wgmma $k)" timeout 120 "$N" --clock-control none \
            --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section Occupancy \
            --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
            -k regex:wg_backward_dkv -c 2 build/gpu/bench kernels 32 > "$O/ncu-$k.txt" 2>&1
        echo "ncu dkv $k rc=$? $(el)"
        grep -E "^  wg_|Duration|Compute \(SM\) Throughput|No Eligible|Eligible Warps|Registers Per|Achieved Occupancy|stalled_(barrier|long_score|wait|math|mio|short|lg|not_sel|sleep|selected|branch|membar|no_inst)[a-z_]*_per_issue_active" "$O/ncu-$k.txt" | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | awk '{$1=$1; print}' | head -40
    done
fi
DROVER_WG_VARIANT=13,13,$V GPU_PREBUILT=1 DROVER_TRAIN=build/drover-train timeout 300 tests/gpu/run.sh build > "$O/gputest.txt" 2>&1
echo "gpu-test with DROVER_WG_VARIANT=13,13,$V rc=$? $(el)"
grep -E "FAIL|gpu-test|identical|test_kernels|ERROR SUMMARY|DROVER_STEP|PASS" "$O/gputest.txt" | head -40
VARIANTS=${VARIANTS:-"drover-tma TMA;drover-old BIN=build/gpu/bench-old;drover;drover-tma2 TMA;drover-old2 BIN=build/gpu/bench-old"}
export VARIANTS=${VARIANTS//TMA/DROVER_WG_VARIANT=13,13,$V}
GPUTEST=0 TUNE=0 NSYS=0 exec ./step.sh
