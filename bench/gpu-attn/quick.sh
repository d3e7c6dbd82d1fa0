#!/bin/bash
# bench/gpu-attn/quick.sh: attention checks of every variant, the attention rows of the per-kernel
# table (B=32), and ours with the mma.sync (default) and wgmma attention at B=16 and 32 (no
# PyTorch).  Same folder as device.sh; logs to $OUT.
set -u
cd "$(dirname "$0")" || exit 1
export LD_LIBRARY_PATH=$PWD/lib
O=${OUT:-/tmp/out}
mkdir -p "$O"
timeout 120 build/gpu/test_kernels 11 attention > "$O/attn.txt" 2>&1
echo "attention checks rc=$?: $(grep -c ' ok$' "$O/attn.txt") ok, $(grep -c FAIL "$O/attn.txt") FAIL"
grep FAIL "$O/attn.txt" | head
grep -E "wgmma5 \(B1 T1024|mma \(B1 T1024" "$O/attn.txt"
BENCH_ONLY=attention timeout 120 build/gpu/bench kernels 32 > "$O/kernels32.txt" 2>&1
grep -E "attention fwd|default|dq (1|3|5|7) dkv (1|5)\)|mma.sync" "$O/kernels32.txt"
for b in 16 32; do
    timeout 120 build/gpu/bench $b 30
    DROVER_ATTN=wgmma timeout 120 build/gpu/bench $b 30
done 2>&1 | tee "$O/train.txt" | cut -c1-60,150-
