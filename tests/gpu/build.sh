#!/bin/sh
# tests/gpu/build.sh BUILD: compile the GPU test programs and the trainer benchmark against
# BUILD/libtrainer.a (built with the CUDA backend).  Outputs in BUILD/gpu/.  Needs nvcc's CUDA
# headers and libraries (CUDA_HOME, default /usr/local/cuda); no GPU.
set -eu
B=${1:-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CC=${CC:-cc}
mkdir -p "$B/gpu"
if ! nm "$B/libtrainer.a" 2>/dev/null | grep -q " D backend_cuda\| R backend_cuda"; then
    echo "tests/gpu: $B/libtrainer.a has no CUDA backend (build with nvcc present: make)" >&2
    exit 1
fi
FLAGS="-std=gnu11 -O2 -g -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wno-format-nonliteral -D_GNU_SOURCE -DDROVER_HAVE_CUDA=1 -I. -I$CUDA_HOME/include -pthread"
LIBS="$B/libtrainer.a $B/libcommon.a -L$CUDA_HOME/lib64 -Wl,-rpath,$CUDA_HOME/lib64 -Wl,--as-needed -lcublasLt -lcublas -lcudart -lnccl -lstdc++ -linih -lpcre2-8 -ldl -ljansson -lcrypto -larchive -lm"
for t in tests/gpu/test_kernels tests/gpu/test_model bench/train/bench; do
    $CC $FLAGS -o "$B/gpu/$(basename $t)" $t.c $LIBS
done
# the step's GPU timeline through CUPTI (bench/train/trace.c), where the toolkit has it
tr=
if [ -e "$CUDA_HOME/include/cupti.h" ]; then
    $CC $FLAGS -o "$B/gpu/trace" bench/train/trace.c $LIBS -lcupti
    tr=" $B/gpu/trace"
fi
echo "tests/gpu: built $B/gpu/test_kernels $B/gpu/test_model $B/gpu/bench$tr"
