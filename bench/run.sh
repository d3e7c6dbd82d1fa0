#!/bin/sh
# bench/run.sh BUILD: every benchmark this machine can run (`make bench`).
#   bench/top/run.sh    dashboard frame time (8x8x8 synthetic fleet) and idle CPU; any machine
#   bench/verdict/run.sh  the probation verdict matrix: false promotes/reverts, time to verdict
#   bench/objects/run.sh  200,000 files + a 5 GiB file through manifest, pack, install, re-verify:
#                         run it by hand (needs 5 GiB free and a few minutes)
#   bench/train/run.sh  drover-train CUDA vs PyTorch on GPT-2 124M; only where a GPU is visible
#   bench/gpu-loop/run.sh  the whole deploy loop on a GPU machine: run it by hand (docs/gpu-loop.md)
# Figures and the machines they came from are recorded in docs/benchmarks.md.
set -u
B=${1:-build}
here=$(dirname "$0")
rc=0
"$here/top/run.sh" "$B" || rc=1
"$here/verdict/run.sh" "$B" || rc=1
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    "$here/train/run.sh" "$B" || rc=1
else
    echo "bench: no GPU visible: bench/train skipped (run it on a GPU machine, see docs/benchmarks.md)" >&2
fi
exit $rc
