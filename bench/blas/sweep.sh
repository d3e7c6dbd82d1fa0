#!/bin/bash
# bench/blas/sweep.sh: time every matmul shape of the GPT-2 124M step (bench kernels' matmul rows,
# B=32 and B=16) with each of the cuBLASLt heuristic's first INDICES results (DROVER_BLAS_INDEX),
# REPS times in turn, and print the table of measured picks for kernels/matmul.cu's blas_picks[]
# (bench/blas/picks.py).  Runs on the GPU machine from a folder made by bench/gpu-attn/pack.sh
# with bench/blas copied in; logs to $OUT.
set -u
cd "$(dirname "$0")" || exit 1
[ -d build/gpu ] || cd ../.. || exit 1
export LD_LIBRARY_PATH=$PWD/lib
O=${OUT:-/tmp/out}
mkdir -p "$O/blas"
INDICES=${INDICES:-8}
REPS=${REPS:-2}
for rep in $(seq 1 "$REPS"); do
    for b in 32 16; do
        for i in $(seq 0 $((INDICES - 1))); do
            DROVER_BLAS_INDEX=$i BENCH_BLAS=1 BENCH_VARIANTS=0 BENCH_ONLY=matmul \
                timeout 120 build/gpu/bench kernels "$b" > "$O/blas/b$b-i$i-r$rep.txt" 2>&1 ||
                echo "bench kernels $b with DROVER_BLAS_INDEX=$i failed: $(tail -1 "$O/blas/b$b-i$i-r$rep.txt")"
        done
    done
done
head -2 "$O/blas/b32-i0-r1.txt"
python3 "$(dirname "$0")/picks.py" "$O"/blas/*.txt | tee "$O/picks.txt"
