#!/bin/sh
# bench/objects/run.sh [BUILD] [NFILES] [BIG_GIB]: releases at real size without a lab
# (bench/objects/scale.c): NFILES (default 200000) small files plus one sparse file of BIG_GIB
# GiB (default 5: past 4 GiB) through the controller's manifest and the agent's object store,
# install from a streamed pack and the re-verify before a reactivation.  Work dir: $SCALE_DIR
# (default /var/tmp/drover-scale; needs BIG_GIB GiB free: the object store holds the big file
# as real blocks).  Prints one line per step and the peak RSS; docs/benchmarks.md has figures.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "$ROOT" && cd "${1:-build}" && pwd)
N=${2:-200000}
G=${3:-5}
D=${SCALE_DIR:-/var/tmp/drover-scale}
mkdir -p "$D" "$B/bench-objects"
cc -O2 -g -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -I"$ROOT" -o "$B/bench-objects/scale" \
	"$ROOT/bench/objects/scale.c" "$B/libagent.a" "$B/libcommon.a" -ljansson -lcrypto -larchive -lm
ulimit -n 1024 # what a container's agent gets by default: nothing may hold an fd per file
/usr/bin/time -v "$B/bench-objects/scale" "$D" "$N" "$G" 2>"$D/time.txt"
grep -E 'Maximum resident|Elapsed' "$D/time.txt"
