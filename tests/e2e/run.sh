#!/bin/bash
# tests/e2e/run.sh BUILD_DIR: the end-to-end suite (`make e2e`, root).
#
# Brings a fresh lab up (tests/lab/lab), puts the tokenized Brown shards in its shared data dir,
# runs every tests/e2e/t-*.sh in name order (they share the lab, in order: later tests start from
# the release the earlier ones left running), always brings the lab down at the end, and prints
# the closing line "e2e: N passed, N failed".  Exit non-zero on any failure.
#
# Environment: LAB_DIR (default /tmp/drover-lab), E2E_ONLY (regex on test names),
# E2E_KEEP=1 (leave the lab up afterwards, for looking around), E2E_TEST_TIMEOUT (s, default 420).
# Before the closing line: every timed check's figure against its bound, tightest first.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_ARG=${1:-build}
pass=0
failed=()

# the timed checks' figures against their bounds, tightest first (lib.sh: margin); a used
# share near 100% is a bound that the lab's load may break
margins() {
	[[ -s ${E2E_WORK:-}/margins.tsv ]] || return 0
	echo "e2e: timed checks, tightest first (share of the bound used: figure vs bound)"
	awk -F'\t' '{
		r = -1
		if (match($2, /[0-9.]+ s of [0-9.]+ s/)) { split(substr($2, RSTART, RLENGTH), f, " "); r = f[1] / f[4] }
		else if (match($2, /^[0-9]+ frames \(>= [0-9]+\)/)) { split(substr($2, RSTART, RLENGTH), f, /[ ()>=]+/); r = f[1] ? f[3] / f[1] : 9 }
		else if ($2 ~ /^not within|never/) r = 9
		printf "%8.3f\t%s\t%s\t%s\n", r, $1, $2, $3
	}' "$E2E_WORK/margins.tsv" | sort -rn | awk -F'\t' '{ printf "  %4s  %-22s %-48s %s\n", ($1 < 0 ? "?" : int($1 * 100 + 0.5) "%"), $2, $3, substr($4, 1, 70) }'
}

closing() {
	margins
	echo "e2e: $pass passed, ${#failed[@]} failed"
	((${#failed[@]} == 0)) || echo "e2e: failed: ${failed[*]}"
}

if [[ $(id -u) != 0 ]]; then
	echo "e2e: needs root (LXC containers, sshd on 127.0.0.x:22)"
	failed=(not-root)
	closing
	exit 1
fi
BUILD=$(cd "$ROOT" && cd "$BUILD_ARG" && pwd) || { failed=(no-build-dir); closing; exit 1; }
for b in drover drover-agent drover-train; do
	if [[ ! -x $BUILD/$b ]]; then
		echo "e2e: $BUILD/$b is missing (run make first)"
		failed+=("missing-$b")
	fi
done
((${#failed[@]} == 0)) || { closing; exit 1; }
for t in jq lxc-attach; do command -v $t >/dev/null || { echo "e2e: $t missing (tests/deps.txt)"; failed=(missing-$t); closing; exit 1; }; done

export LAB_DIR=${LAB_DIR:-/tmp/drover-lab}
export E2E_WORK=$BUILD/e2e-work
# the tests use a snapshot of the binaries: a rebuild during the run (another make) changes
# neither the release ids nor the binaries under test halfway
export E2E_BUILD=$E2E_WORK/bin
# short probation windows, so the suite finishes in minutes on 2 cores
export LAB_JOB_HEALTHY_DEADLINE=${LAB_JOB_HEALTHY_DEADLINE:-90}
export LAB_JOB_MIN_HEALTHY_TIME=${LAB_JOB_MIN_HEALTHY_TIME:-12}
export LAB_JOB_WARMUP_STEPS=${LAB_JOB_WARMUP_STEPS:-3}
export LAB_JOB_TOLERANCE=${LAB_JOB_TOLERANCE:-0.35}
# one e2e run per lab at a time: a second `make e2e` on this machine would bring this lab down
exec 8>>"$LAB_DIR.e2e.lock"
if ! flock -n 8; then
	echo "e2e: another e2e run holds $LAB_DIR.e2e.lock; waiting for it (up to 30 min)"
	flock -w 1800 8 || { failed=(lab-busy); closing; exit 1; }
fi
rm -rf "$E2E_WORK"
mkdir -p "$E2E_WORK/logs" "$E2E_BUILD"
cp "$BUILD/drover" "$BUILD/drover-agent" "$BUILD/drover-train" "$E2E_BUILD/" || { failed=(snapshot); closing; exit 1; }

cleanup() {
	if [[ ${E2E_KEEP:-0} == 1 ]]; then
		echo "e2e: E2E_KEEP=1: lab left up in $LAB_DIR (tests/lab/lab down removes it)"
	else
		"$ROOT/tests/lab/lab" down >/dev/null 2>&1 || echo "e2e: warning: lab down failed"
	fi
}
trap cleanup EXIT
trap 'echo "e2e: interrupted"; exit 130' INT TERM

echo "e2e: fresh lab in $LAB_DIR"
"$ROOT/tests/lab/lab" down >/dev/null 2>&1
if ! "$ROOT/tests/lab/lab" up >"$E2E_WORK/logs/lab-up.log" 2>&1 8>&-; then
	cat "$E2E_WORK/logs/lab-up.log"
	failed=(lab-up)
	closing
	exit 1
fi
if ! "$ROOT/tests/e2e/prepare-data.sh" "$BUILD" "$LAB_DIR/data" "$E2E_BUILD/drover-train" >"$E2E_WORK/logs/data.log" 2>&1; then
	tail -20 "$E2E_WORK/logs/data.log"
	failed=(prepare-data)
	closing
	exit 1
fi
echo "e2e: data: $(ls "$LAB_DIR/data" | tr '\n' ' ')"

for t in "$ROOT"/tests/e2e/t-*.sh; do
	name=$(basename "$t" .sh)
	[[ -n ${E2E_ONLY:-} && ! $name =~ $E2E_ONLY ]] && continue
	echo "--- $name"
	export E2E_TEST=$name
	t0=$SECONDS
	timeout -k 10 "${E2E_TEST_TIMEOUT:-420}" bash "$t" 2>&1 | tee "$E2E_WORK/logs/$name.log"
	rc=${PIPESTATUS[0]}
	if ((rc == 0)); then
		pass=$((pass + 1))
		echo "--- $name: PASS ($((SECONDS - t0))s)"
	else
		failed+=("$name")
		((rc == 124)) && echo "--- $name: timed out"
		echo "--- $name: FAIL (exit $rc, $((SECONDS - t0))s); drover calls in $E2E_WORK/drover.log"
		tail -30 "$E2E_WORK/drover.log" 2>/dev/null | sed 's/^/    /'
	fi
done
closing
((${#failed[@]} == 0))
