#!/bin/sh
# bench/gpu-attn/pack.sh [BUILD] DEST: the folder bench/gpu-attn/device.sh runs from on a GPU
# machine without our -dev packages: BUILD's drover-train and build/gpu programs (trace and its
# libcupti when built), the libraries
# they link that are neither glibc's, libstdc++'s nor CUDA's, tests/gpu and bench/train scripts,
# and ../shared/bench/torch_gpt2.py (or $TORCH_REF).  Owns DEST only.
set -eu
B=${1:-build}
D=${2:?DEST}
rm -rf "$D"
mkdir -p "$D/lib" "$D/build/gpu" "$D/tests/gpu" "$D/bench/train"
cp "$B/drover-train" "$D/build/"
cp "$B"/gpu/test_kernels "$B"/gpu/test_model "$B"/gpu/bench "$D/build/gpu/"
cp tests/gpu/run.sh tests/gpu/train-e2e.sh tests/gpu/train-modes.sh tests/gpu/expected_losses.txt "$D/tests/gpu/"
cp bench/train/run.sh "$D/bench/train/"
cp bench/gpu-attn/device.sh "$D/"
cp bench/gpu-dp/device.sh "$D/device-dp.sh"
cp "${TORCH_REF:-../shared/bench/torch_gpt2.py}" "$D/"
for b in "$D"/build/drover-train "$D"/build/gpu/*; do ldd "$b"; done | awk '/=>/ {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|libpthread|librt|libresolv|libgcc_s|libstdc\+\+)\.so|/usr/local/cuda|ld-linux' |
    while read -r l; do cp -L "$l" "$D/lib/"; done
# the CUPTI step trace (bench/train/trace.c) and its CUPTI, which a machine with only the CUDA
# runtime may lack
if [ -x "$B/gpu/trace" ]; then
    cp "$B/gpu/trace" "$D/build/gpu/"
    ldd "$B/gpu/trace" | awk '/libcupti/ {print $3}' | while read -r l; do cp -L "$l" "$D/lib/"; done
fi
du -sh "$D"
