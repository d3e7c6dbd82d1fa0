#!/bin/bash
# bench/deploy/command.sh BUILD [BEFORE_DROVER]: the whole `drover deploy --stage-only` command for
# a one-file (20 KB) change on the grown lab, as bench/deploy/run.sh's case (b), with this build's
# drover and, when given, another drover binary (e.g. main's before a change) in alternation, so
# both see the same lab and load (root; takes the lab lock, brings the lab down afterwards).
# BENCH_HOSTS, BENCH_CTS as in run.sh; BENCH_ROUNDS (default 3) runs of each; BENCH_TRACE=1: one
# more run of each with `drover -v`, its lines stamped with the time since the start (where the
# time goes, step by step and host by host).  Figures: docs/benchmarks.md.
set -euo pipefail
B0=$(cd "${1:-build}" && pwd)
B=$(mktemp -d /tmp/drover-bench-bin.XXXXXX)
cp "$B0/drover" "$B0/drover-agent" "$B0/drover-train" "$B/"
BEFORE=""
if [[ -n ${2:-} ]]; then cp "$2" "$B/drover-before"; BEFORE=$B/drover-before; fi
trap 'rm -rf "$B"' EXIT
ROOT=${DROVER_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
export LAB_DIR=${LAB_DIR:-/tmp/drover-lab}
export LAB_HOSTS=${BENCH_HOSTS:-"h1 h2 h3 h4"}
export LAB_CONTAINERS=${BENCH_CTS:-"h1:101 h1:102 h2:201 h2:202 h3:301 h3:302 h4:401 h4:402"}
ROUNDS=${BENCH_ROUNDS:-3}
LAB="$ROOT/tests/lab/lab"
exec 8>>"$LAB_DIR.e2e.lock"
echo "bench/deploy/command: waiting for the lab lock" >&2
flock 8
W=$(mktemp -d /tmp/drover-bench-command.XXXXXX)
trap '"$LAB" down >/dev/null 2>&1; rm -rf "$W" "$B"' EXIT
"$LAB" down >/dev/null 2>&1 || true
"$LAB" up >"$W/lab.log" 2>&1 || { tail -20 "$W/lab.log"; exit 1; }
# one `containers =` line per container (run.sh says why)
awk '/^containers = / { for (i = 3; i <= NF; i++) print "containers = " $i; next } { print }' \
	"$LAB_DIR/inventory.ini" >"$W/inv.ini"
INV=$W/inv.ini
"$B/drover" -i "$INV" trust $LAB_HOSTS >/dev/null 2>&1 || true
"$B/drover" -i "$INV" install >/dev/null
rel=$W/rel
mkdir -p "$rel/bin" "$rel/etc"
cp "$B/drover-train" "$rel/bin/drover-train"
echo "[train]" >"$rel/etc/train.ini"
head -c 20000 /dev/urandom >"$rel/app.py"
"$B/drover" -i "$INV" deploy "$rel" --stage-only --job train >/dev/null 2>"$W/first.err" || { cat "$W/first.err"; exit 1; }
echo "$(date -u '+%F %T') UTC, $(nproc) cores, $(uptime | sed 's/.*load/load/')"
echo "lab: $(wc -w <<<"$LAB_HOSTS") hosts, $(wc -w <<<"$LAB_CONTAINERS") containers"
for k in $(seq "$ROUNDS"); do
	for which in before after; do
		bin=$B/drover
		if [[ $which == before ]]; then [[ -n $BEFORE ]] || continue; bin=$BEFORE; fi
		head -c 20000 /dev/urandom >"$rel/app.py"
		t0=$(date +%s.%N)
		"$bin" -i "$INV" deploy "$rel" --stage-only --job train >/dev/null 2>"$W/$which.err" || { cat "$W/$which.err"; exit 1; }
		printf '%s %d: one-file change, deploy --stage-only, whole command: %.2f s\n' "$which" "$k" \
			"$(echo "$(date +%s.%N) - $t0" | bc)"
	done
done
if [[ -n ${BENCH_TRACE:-} ]]; then
	for which in before after; do
		bin=$B/drover
		if [[ $which == before ]]; then [[ -n $BEFORE ]] || continue; bin=$BEFORE; fi
		head -c 20000 /dev/urandom >"$rel/app.py"
		echo "--- $which, drover -v, seconds since the start:"
		t0=$EPOCHREALTIME
		"$bin" -v -i "$INV" deploy "$rel" --stage-only --job train 2>&1 >/dev/null |
			while IFS= read -r l; do printf '%6.2f %s\n' "$(echo "$EPOCHREALTIME - $t0" | bc)" "$l"; done
	done
fi
