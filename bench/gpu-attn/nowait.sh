#!/bin/bash
# bench/gpu-attn/nowait.sh: one device call for the wgmma backward without ptxas' injected
# waits (2026-12-02): the attention checks first (the call stops if they fail), the attention
# kernel table of the previous build (build/gpu/bench-old, copied in by hand) and of this one
# with BENCH_WG's variants, then pingpong.sh (ncu where installed; step.sh: gpu-test, the
# drover-train VARIANTS, where "label BIN=build/gpu/bench-old" runs the previous build, and
# torch.compile).  Runs from a folder made by bench/gpu-attn/pack.sh with this script,
# pingpong.sh and bench/gpu-step/device.sh (as step.sh) copied in.
set -u
cd "$(dirname "$0")" || exit 1
export LD_LIBRARY_PATH=$PWD/lib
O=${OUT:-/tmp/out}
mkdir -p "$O"
timeout 120 build/gpu/test_kernels 13 attention > "$O/attn-check.txt" 2>&1
rc=$?
echo "attention checks rc=$rc: $(grep -c ' ok' "$O/attn-check.txt") ok, $(grep -c FAIL "$O/attn-check.txt") FAIL"
grep FAIL "$O/attn-check.txt" | head -20
[ $rc = 0 ] || exit 1
for b in bench-old bench; do
    [ -x build/gpu/$b ] || continue
    BENCH_VARIANTS=0 timeout 100 build/gpu/$b kernels 32 > "$O/kernels-$b.txt" 2>&1
    echo "== $b kernels 32 rc=$?"
    grep -E "attention|sum|total" "$O/kernels-$b.txt" | cut -c1-120
done
exec ./pingpong.sh
