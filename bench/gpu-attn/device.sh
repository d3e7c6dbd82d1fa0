#!/bin/bash
# bench/gpu-attn/device.sh: one device call for the wgmma attention (issue 15): descriptor
# probe, `make gpu-test` equivalent, the per-kernel table and ours (wgmma and mma.sync attention)
# against torch eager / torch.compile.  Runs from a folder made by bench/gpu-attn/pack.sh (binaries,
# the libraries the device lacks, the test and bench scripts, torch_gpt2.py); logs go to $OUT.
set -u
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
O=${OUT:-/tmp/out}
mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$O/log.txt"
# 1. descriptor encoding probe: the first variant that passes every attention check
V=none
for v in 0 1 2 3; do
    if DROVER_WG_DESC=$v timeout 120 build/gpu/test_kernels 7 attention > "$O/probe$v.txt" 2>&1; then V=$v; break; fi
    grep -E "FAIL|rror" "$O/probe$v.txt" | head -5
done
echo "wgmma descriptor variant: $V" | tee -a "$O/log.txt"
if [ "$V" = none ]; then export DROVER_ATTN=mma; else export DROVER_WG_DESC=$V; rm -f "$O"/probe[1-3].txt; fi
# 2. make gpu-test with the default attention, then the model checks with the mma.sync one
GPU_PREBUILT=1 DROVER_TRAIN=build/drover-train timeout 300 tests/gpu/run.sh build > "$O/gputest.txt" 2>&1
echo "gpu-test rc=$?" | tee -a "$O/log.txt"
grep -E "FAIL|PASS|rel_err.*(attention|model)|identical|max abs" "$O/gputest.txt" | head -60
DROVER_ATTN=mma timeout 120 build/gpu/test_model tests/gpu/expected_losses.txt > "$O/model-mma.txt" 2>&1
echo "test_model (mma attention) rc=$?" | tee -a "$O/log.txt"
DROVER_WRITE_EXPECTED=1 timeout 120 build/gpu/test_model "$O/expected_losses_default.txt" > /dev/null 2>&1
# 3. per-kernel table (B=32), ours with both attentions, torch eager and compile
timeout 120 build/gpu/bench kernels 32 2>&1 | tee "$O/kernels32.txt" | grep -E "attention|sum of"
KERNELS=0 TORCH_REF=torch_gpt2.py timeout 450 bench/train/run.sh build > "$O/bench.txt" 2>&1
sed -n '/== summary/,$p' "$O/bench.txt"
grep '^{' "$O/bench.txt"
