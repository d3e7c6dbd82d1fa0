#!/bin/bash
# bench/gpu-attn/qtma.sh: one device call for the forward and dQ kernels with a TMA producer
# warpgroup (DROVER_WG_VARIANT's bit 64 in their fields, 2026-12-02): the attention checks
# (every variant; nothing below runs with a new variant if any check fails; CHECKS=0 leaves
# them to gpu-test), the kernel table
# of the previous build (build/gpu/bench-old, copied in by hand, with its test_model-old) and of this one with BENCH_WG's
# variants, then, with the fastest forward F and dQ Q of that table as
# DROVER_WG_VARIANT=F,Q,96 (FQ overrides, e.g. FQ=73,73): `make gpu-test` as if it were the
# default, and step.sh (gpu-test skipped there) with the drover-train runs of VARIANTS, where
# NEW stands for that variant, and torch.compile.  Runs from a folder made by
# bench/gpu-attn/pack.sh with this script and bench/gpu-step/device.sh (as step.sh) copied in.
set -u
cd "$(dirname "$0")" || exit 1
export LD_LIBRARY_PATH=$PWD/lib
O=${OUT:-/tmp/out}
mkdir -p "$O"
T0=$(date +%s)
el() { echo "($(($(date +%s) - T0)) s)"; }
if [ "${CHECKS:-1}" = 1 ]; then # CHECKS=0: only inside gpu-test below (test_kernels checks them all)
    timeout 240 stdbuf -oL build/gpu/test_kernels 13 attention > "$O/attn-check.txt" 2>&1
    rc=$?
else
    : > "$O/attn-check.txt"
    rc=0
fi
echo "attention checks rc=$rc: $(grep -c ' ok' "$O/attn-check.txt") ok, $(grep -c FAIL "$O/attn-check.txt") FAIL $(el)"
grep FAIL "$O/attn-check.txt" | head -30
BW=${BENCH_WG:-13,13,96 77,96,96 77,64,96 80,80,96 64,64,96 66,66,96 73,73,96}
for b in bench-old bench; do
    [ -x build/gpu/$b ] || continue
    if [ $b = bench ]; then export BENCH_WG="$BW"; else unset BENCH_WG; fi
    BENCH_VARIANTS=0 timeout 150 stdbuf -oL build/gpu/$b kernels 32 > "$O/kernels-$b.txt" 2>&1
    echo "== $b kernels 32 rc=$? $(el)"
    grep -E "attention|classifier|sum|total" "$O/kernels-$b.txt" | cut -c1-120
done
unset BENCH_WG
if [ $rc != 0 ] || grep -q FAIL "$O/attn-check.txt"; then
    echo "attention checks failed (rc=$rc): no runs with the new variants"
    exit 1
fi
F=$(awk '/^attention fwd \(wgmma [0-9]+,[0-9]+,[0-9]+\)/ {split($4, a, ","); print $5, a[1]}' "$O/kernels-bench.txt" | sort -n | head -1 | cut -d' ' -f2)
Q=$(awk '/^attention  dq alone \(wgmma [0-9]+\)/ {sub(/\)/, "", $5); print $6, $5}' "$O/kernels-bench.txt" | sort -n | head -1 | cut -d' ' -f2)
FQ=${FQ:-$F,$Q}
echo "fastest forward ${F:-none}, dQ ${Q:-none}: NEW = DROVER_WG_VARIANT=$FQ,96"
N=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$N" ] && [ "${NCU:-0}" = 1 ]; then
    for k in 13,13,96 $FQ,96; do
        BENCH_WG="$k" BENCH_VARIANTS=0 BENCH_ONLY="attention fwd (wgmma $k)" timeout 120 "$N" --clock-control none \
            --section SpeedOfLight --section SchedulerStats --section WarpStateStats \
            -k regex:'wg_forward|wg_qside' -c 1 build/gpu/bench kernels 32 > "$O/ncu-fwd-$k.txt" 2>&1
        echo "ncu forward $k rc=$? $(el)"
        grep -E "^  wg_|Duration|No Eligible|Registers Per" "$O/ncu-fwd-$k.txt" | awk '{$1=$1; print}' | head -12
    done
fi
if [ "${GPUTEST:-1}" = 1 ]; then
    DROVER_WG_VARIANT=$FQ,96 GPU_PREBUILT=1 DROVER_TRAIN=build/drover-train timeout 300 tests/gpu/run.sh build > "$O/gputest.txt" 2>&1
    echo "gpu-test with DROVER_WG_VARIANT=$FQ,96 rc=$? $(el)"
    grep -E "FAIL|gpu-test|identical|test_kernels|ERROR SUMMARY|DROVER_STEP|PASS" "$O/gputest.txt" | head -40
fi
for v in 13,13,96 $FQ,96; do
    DROVER_WG_VARIANT=$v DROVER_WRITE_EXPECTED=1 timeout 120 build/gpu/test_model "$O/losses-$v.txt" > /dev/null 2>&1
done
cmp "$O/losses-13,13,96.txt" "$O/losses-$FQ,96.txt" && echo "fixed-seed losses: $FQ,96 the same bits as 13,13,96"
if [ -x build/gpu/test_model-old ]; then # the previous build's default (copied in by hand)
    DROVER_WRITE_EXPECTED=1 timeout 120 build/gpu/test_model-old "$O/losses-old.txt" > /dev/null 2>&1
    cmp "$O/losses-old.txt" "$O/losses-13,13,96.txt" && echo "fixed-seed losses: this build's default the same bits as the previous build's"
fi
VARIANTS=${VARIANTS:-"drover-new NEW;drover-old BIN=build/gpu/bench-old;drover;drover-new2 NEW;drover-old2 BIN=build/gpu/bench-old"}
export VARIANTS=${VARIANTS//NEW/DROVER_WG_VARIANT=$FQ,96}
GPUTEST=0 TUNE=0 NSYS=0 exec ./step.sh
