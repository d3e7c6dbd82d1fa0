#!/bin/bash
# bench/gpu-attn/fused.sh: one device call for the fused attention backward on the TMA structure
# (DROVER_ATTN_BWD=fused, 2026-12-02): the fused kernel's checks alone first (a short timeout: a
# wrong counter order would hang), then under compute-sanitizer memcheck and synccheck, every
# attention check, the attention rows of the kernel table at B=32 and 16, test_model with the
# fused backward (the fixed-seed losses, reload bit-exact), `make gpu-test` with it
# (GPUTEST=1), then step.sh (bench/gpu-step/device.sh copied in): the drover-train runs of
# VARIANTS and torch.compile.  Nothing after a failed check runs.  Runs from a folder made by
# bench/gpu-attn/pack.sh with this script and step.sh copied in; logs to $OUT.
set -u
cd "$(dirname "$0")" || exit 1
export LD_LIBRARY_PATH=$PWD/lib
O=${OUT:-/tmp/out}
mkdir -p "$O"
T0=$(date +%s)
el() { echo "($(($(date +%s) - T0)) s)"; }
G=build/gpu
stop() { echo "$1: no runs after it $(el)"; exit 1; }
timeout 60 stdbuf -oL $G/test_kernels 13 attention-fused > "$O/fused-check.txt" 2>&1
rc=$?
echo "fused checks rc=$rc $(el)"
grep -E "fused|too small|FAIL|PASS" "$O/fused-check.txt" | cut -c1-140
[ $rc = 0 ] || stop "fused checks failed"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
if [ -n "$CS" ]; then
    for tool in memcheck synccheck; do
        timeout 240 "$CS" --tool $tool --error-exitcode 3 $G/test_kernels 14 attention-fused > "$O/cs-$tool.txt" 2>&1
        echo "compute-sanitizer $tool rc=$? $(el): $(grep -E 'ERROR SUMMARY' "$O/cs-$tool.txt" | tail -1)"
    done
fi
timeout 240 stdbuf -oL $G/test_kernels 15 attention > "$O/attn-check.txt" 2>&1
rc=$?
echo "attention checks rc=$rc: $(grep -c ' ok' "$O/attn-check.txt") ok, $(grep -c FAIL "$O/attn-check.txt") FAIL $(el)"
grep FAIL "$O/attn-check.txt" | head -20
[ $rc = 0 ] || stop "attention checks failed"
for b in 32 16; do
    BENCH_VARIANTS=0 BENCH_ONLY=attention timeout 100 $G/bench kernels $b > "$O/kernels$b.txt" 2>&1
    echo "== attention kernels B=$b rc=$? $(el)"
    grep -E "^attention" "$O/kernels$b.txt" | grep -E "default|fused|D \(" | cut -c1-120
done
DROVER_ATTN_BWD=fused timeout 120 $G/test_model tests/gpu/expected_losses.txt > "$O/model-fused.txt" 2>&1
rc=$?
echo "test_model DROVER_ATTN_BWD=fused rc=$rc $(el)"
grep -E "FAIL|fixed-seed|identical|test_model:" "$O/model-fused.txt" | head -10
[ $rc = 0 ] || stop "test_model with the fused backward failed"
if [ "${GPUTEST:-1}" = 1 ]; then
    DROVER_ATTN_BWD=fused GPU_PREBUILT=1 DROVER_TRAIN=build/drover-train timeout 300 tests/gpu/run.sh build > "$O/gputest.txt" 2>&1
    rc=$?
    echo "gpu-test with DROVER_ATTN_BWD=fused rc=$rc $(el)"
    grep -E "FAIL|gpu-test|test_kernels:|ERROR SUMMARY|PASS" "$O/gputest.txt" | head -20
    [ $rc = 0 ] || stop "gpu-test with the fused backward failed"
fi
export VARIANTS=${VARIANTS:-"drover;drover-fused DROVER_ATTN_BWD=fused;drover2;drover-fused2 DROVER_ATTN_BWD=fused"}
GPUTEST=0 TUNE=0 NSYS=0 exec ./step.sh
