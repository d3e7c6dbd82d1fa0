#!/bin/bash
# bench/gpu-attn/device.sh: one device call for the wgmma attention (issue 15): the per-kernel
# table with every wgmma kernel variant (B=32), the fastest variants chosen from it
# (DROVER_WG_VARIANT), `make gpu-test` with them, and ours (wgmma and mma.sync attention) against
# torch eager / torch.compile.  Runs from a folder made by bench/gpu-attn/pack.sh (binaries, the
# libraries the device lacks, the test and bench scripts, torch_gpt2.py); logs go to $OUT.
set -u
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
O=${OUT:-/tmp/out}
mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$O/log.txt"
# 1. attention checks of every variant, then the per-kernel table; choose the fastest forward
#    and (dQ, dK/dV) variants among those that passed (a failing variant fails both)
timeout 120 build/gpu/test_kernels 7 attention > "$O/attn.txt" 2>&1
bad=$(grep -E 'wgmma[0-7].*FAIL' "$O/attn.txt" | sed -E 's/.*wgmma([0-7]).*/\1/' | sort -u | tr -d '\n')
echo "attention checks: $(tail -1 "$O/attn.txt"); failing wgmma variants: ${bad:-none}" | tee -a "$O/log.txt"
ok="[0-7]"
[ -n "$bad" ] && ok="[^$bad]"
timeout 150 build/gpu/bench kernels 32 > "$O/kernels32.txt" 2>&1
grep -E "attention|sum of" "$O/kernels32.txt"
F=$(grep -E "^attention fwd \(wgmma $ok\)" "$O/kernels32.txt" | sort -g -k5 | head -1 | sed -E 's/.*wgmma ([0-7]).*/\1/')
QK=$(grep -E "^attention bwd \(wgmma dq $ok dkv $ok\)" "$O/kernels32.txt" | sort -g -k8 | head -1 | sed -E 's/.*dq ([0-7]) dkv ([0-7]).*/\1,\2/')
export DROVER_WG_VARIANT="${F:-2},${QK:-2,0}"
echo "chosen DROVER_WG_VARIANT=$DROVER_WG_VARIANT" | tee -a "$O/log.txt"
# 2. make gpu-test with the chosen variants (every variant is checked by test_kernels anyway)
GPU_PREBUILT=1 DROVER_TRAIN=build/drover-train timeout 300 tests/gpu/run.sh build > "$O/gputest.txt" 2>&1
echo "gpu-test rc=$?" | tee -a "$O/log.txt"
grep -E "FAIL|PASS|rel_err.*T1024|identical|max abs" "$O/gputest.txt" | head -40
DROVER_ATTN=mma timeout 120 build/gpu/test_model tests/gpu/expected_losses.txt > "$O/model-mma.txt" 2>&1
echo "test_model (mma attention) rc=$?" | tee -a "$O/log.txt"
# 3. ours with both attentions, torch eager and compile
KERNELS=0 TORCH_REF=torch_gpt2.py timeout 420 bench/train/run.sh build > "$O/bench.txt" 2>&1
sed -n '/== summary/,$p' "$O/bench.txt"
grep '^{' "$O/bench.txt" | grep drover
