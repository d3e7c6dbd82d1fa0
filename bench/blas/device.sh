#!/bin/bash
# bench/blas/device.sh: one device call for the measured cuBLASLt picks (DROVER_BLAS_PICKS=table,
# the default): `make gpu-test` with them (GPUTEST=1); the fixed-seed losses from two processes
# (the same algorithms, so the same bits); the matmul rows of the kernel table with the table and
# with the heuristic's first choices; then step.sh (bench/gpu-step/device.sh copied in): the
# drover-train runs of VARIANTS, table and heuristic in turn, and torch.compile.  Runs from a
# folder made by bench/gpu-attn/pack.sh with bench/blas and step.sh copied in; logs to $OUT.
set -u
cd "$(dirname "$0")/../.." || exit 1
export LD_LIBRARY_PATH=$PWD/lib
O=${OUT:-/tmp/out}
mkdir -p "$O"
T0=$(date +%s)
el() { echo "($(($(date +%s) - T0)) s)"; }
G=build/gpu
if [ "${GPUTEST:-1}" = 1 ]; then
    GPU_PREBUILT=1 DROVER_TRAIN=build/drover-train timeout 300 tests/gpu/run.sh build > "$O/gputest.txt" 2>&1
    rc=$?
    echo "gpu-test (table) rc=$rc $(el)"
    grep -E "FAIL|gpu-test|test_kernels:|test_model:|ERROR SUMMARY|PASS|matmuls:" "$O/gputest.txt" | head -20
    [ $rc = 0 ] || { echo "gpu-test failed: no runs after it"; exit 1; }
fi
for i in 1 2; do
    DROVER_WRITE_EXPECTED=1 timeout 120 $G/test_model "$O/losses-$i.txt" > "$O/model-$i.txt" 2>&1
    echo "test_model losses, process $i rc=$? $(el)"
done
cmp "$O/losses-1.txt" "$O/losses-2.txt" && echo "fixed-seed losses: two processes, the same bits"
for p in table heuristic table heuristic; do
    DROVER_BLAS_PICKS=$p BENCH_VARIANTS=0 BENCH_ONLY=matmul timeout 100 $G/bench kernels 32 > "$O/mm-$p.txt" 2>&1
    echo "== matmuls B=32, $p: $(grep -E '^matmuls:' "$O/mm-$p.txt") $(grep -E '^sum of kernels' "$O/mm-$p.txt" | cut -d'(' -f1) $(el)"
done
export VARIANTS=${VARIANTS:-"drover;drover-heuristic DROVER_BLAS_PICKS=heuristic;drover2;drover-heuristic2 DROVER_BLAS_PICKS=heuristic"}
GPUTEST=0 TUNE=0 NSYS=0 exec ./step.sh
