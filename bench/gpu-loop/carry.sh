#!/bin/sh
# bench/gpu-loop/carry.sh [BUILD] [DEST]: put drover, drover-agent, drover-train from BUILD
# (default build/) and the shared libraries they link (glibc, libstdc++ and CUDA's own excepted)
# into DEST (default build/gpuloop, ignored by git), for a machine without our -dev packages:
# run.sh with BIN=DEST uses a library from DEST/lib only where ldd finds none there.
# Owns DEST only; never installs anything.
set -eu
B=${1:-build}
D=${2:-build/gpuloop}
rm -rf "$D"
mkdir -p "$D/lib"
cp "$B/drover" "$B/drover-agent" "$B/drover-train" "$D/"
for b in "$D"/drover*; do ldd "$b"; done | awk '/=>/ {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|libpthread|librt|libresolv|libgcc_s|libstdc\+\+|libicu[a-z]*)\.so|/usr/local/cuda|ld-linux' |
    while read -r l; do cp -L "$l" "$D/lib/"; done
du -sh "$D"
