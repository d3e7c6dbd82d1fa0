#!/bin/sh
# tests/gpu/run.sh BUILD: what `make gpu-test` runs (needs a GPU; see docs/cuda.md).
#   1. the preflight selftest; 2. every kernel against the CPU reference on fresh random inputs;
#   3. the whole model against the CPU backend, the fixed-seed losses against
#      tests/gpu/expected_losses.txt, checkpoint-state reload and CPU/GPU interop, the step
#      modes (DROVER_STEP staged and graph against plain, bit for bit; tests/gpu/train-modes.sh
#      through drover-train's heartbeats and checkpoint files);
#   4. compute-sanitizer memcheck over the selftest's short training run (when installed);
#   5. with two or more GPUs, data parallel over NCCL against one GPU.
# GPU_PREBUILT=1 skips compiling (binaries already in BUILD/gpu).  Exit 1 on the first failure.
set -eu
B=${1:-build}
[ "${GPU_PREBUILT:-0}" = 1 ] || tests/gpu/build.sh "$B"
G=$B/gpu
fail=0
step() { echo "== $*"; }
step "selftest";       "$G/test_model" selftest || fail=1
step "kernels";        "$G/test_kernels" ${GPU_SEED:-} || fail=1
step "model";          "$G/test_model" tests/gpu/expected_losses.txt || fail=1
step "drover-train end to end (checkpoint files, resume, cpu interop, heartbeats)"
tests/gpu/train-e2e.sh "${DROVER_TRAIN:-$B/drover-train}" || fail=1
step "drover-train DROVER_STEP=plain, staged, graph: the same bits, NaN detection with graph"
tests/gpu/train-modes.sh "${DROVER_TRAIN:-$B/drover-train}" || fail=1
if command -v compute-sanitizer >/dev/null 2>&1; then
    step "compute-sanitizer memcheck (selftest run)"
    compute-sanitizer --tool memcheck --error-exitcode 3 "$G/test_model" selftest || fail=1
else
    echo "== compute-sanitizer not installed: memcheck skipped"
fi
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$ngpu" -ge 2 ]; then
    step "data parallel: 2 ranks over NCCL vs 1 GPU"
    export WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=${MASTER_PORT:-29511}
    RANK=1 LOCAL_RANK=1 "$G/test_model" dp > "$G/dp-rank1.log" 2>&1 &
    p1=$!
    RANK=0 LOCAL_RANK=0 "$G/test_model" dp || fail=1
    wait $p1 || { cat "$G/dp-rank1.log"; fail=1; }
else
    echo "== one GPU: data-parallel check skipped (run on a 2-GPU machine)"
fi
[ $fail = 0 ] && echo "gpu-test: PASS" || echo "gpu-test: FAIL"
exit $fail
