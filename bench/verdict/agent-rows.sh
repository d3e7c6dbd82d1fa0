#!/bin/bash
# bench/verdict/agent-rows.sh [BUILD]: the verdict matrix rows that go through the real agent and
# the real controller (issue 13).  No lab, no root, no SSH: `drover` with a local host and one
# local node (`me:local:ROOT`, docs/gpu-loop.md) whose drover-agent daemon runs the synthetic
# worker of bench/verdict/worker.c (2 ranks, 10 steps/s, 3% noise).  `make verdict` (part of
# `make test`) runs it.
#
#   deploy rows (SEEDS, default 1, seeds each; tolerance 0.1): healthy -> promote (Mann-Whitney
#   against the samples the agent kept); 15% slower -> revert; crash at start -> revert; NaN ->
#   revert; --analysis-only of a healthy release -> verdict pass, good release back.
#   hold rows (job 'hold', on_inconclusive = hold): a worker reporting no throughput -> No data,
#   held (exit 7); `drover revert` puts the good release back; again, `drover promote` promotes it.
#   agent row (AGENT_SEEDS, default 20): a promoted release that crashes after a healthy run ->
#   the agent restarts it, never reverts (drover-agent activate/promote directly).
# Needs cc and jq (tests/deps.txt).  Prints one line per check and a summary; exit 1 on any
# wrong verdict.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=$(cd "$ROOT" && cd "${1:-build}" && pwd) || exit 1
SEEDS=${SEEDS:-1}
AGENT_SEEDS=${AGENT_SEEDS:-20}
W=$(mktemp -d /tmp/drover-verdict.XXXXXX) || exit 1
mkdir -p "$W/bin" "$W/state" "$W/staging" "$W/n0" "$W/n1" "$W/n2" "$W/rel"
cp "$B/drover" "$B/drover-agent" "$W/bin/" || exit 1
cc -O2 -g -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -I"$ROOT" -o "$W/bin/worker" \
	"$ROOT/bench/verdict/worker.c" "$B/libcommon.a" -ljansson -lcrypto -larchive -lm || exit 1
PIDFILES=()
fails=0
checks=0
cleanup() {
	local p pid
	for p in "${PIDFILES[@]}"; do
		pid=$(head -n 1 "$p" 2>/dev/null)
		[[ $pid =~ ^[0-9]+$ ]] && kill -TERM "$pid" 2>/dev/null
	done
	sleep 1
	# SIGTERM leaves an agent's gangs running (the next agent re-adopts them): nothing of this
	# run may outlive it, so end every process started from the work dir (holders, workers)
	pkill -TERM -f -- "$W/" 2>/dev/null
	sleep 1
	pkill -KILL -f -- "$W/" 2>/dev/null
	# the workers: their command line is relative ("bin/worker"), so pkill -f does not find them
	# (three were left by every run), nor does their working directory (a release seen through
	# their holder's read-only bind reads "/<id>" from here); the run dir the agent gave them does
	local d e
	for d in /proc/[0-9]*; do
		while IFS= read -r -d '' e; do
			[[ $e == "DROVER_RUN_DIR=$W/"* ]] && kill -KILL "${d#/proc/}" 2>/dev/null && break
		done 2>/dev/null <"$d/environ"
	done
	[[ ${KEEP:-0} == 1 ]] || rm -rf "$W"
}
trap cleanup EXIT
say() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }
check() { # check DESCRIPTION COMMAND...
	local d=$1
	shift
	checks=$((checks + 1))
	if "$@"; then
		echo "ok   $d"
	else
		echo "FAIL $d"
		fails=$((fails + 1))
	fi
}
start_agent() { # start_agent ROOT [daemon flags]
	local r=$1
	shift
	"$W/bin/drover-agent" --root "$r" --socket "$r/agent.sock" daemon --detach \
		--pidfile "$r/agent.pid" "$@" 2>>"$r/agent.log" || { cat "$r/agent.log"; exit 1; }
	PIDFILES+=("$r/agent.pid")
}
release() { # release NAME KEY VALUE...: a release dir with the worker and its scenario
	local d="$W/rel/$1"
	shift
	mkdir -p "$d/bin"
	cp "$W/bin/worker" "$d/bin/worker"
	: >"$d/scenario"
	while (($# >= 2)); do
		echo "$1 $2" >>"$d/scenario"
		shift 2
	done
	echo "$d"
}
INV="$W/drover.ini"
cat >"$INV" <<EOF
[drover]
state_dir = $W/state
known_hosts = $W/known_hosts
staging_dir = $W/staging
agent_path = $W/bin/drover-agent
[policy]
healthy_deadline = 10s
warmup_steps = 5
min_healthy_time = 12s
max_probation_time = 60s
progress_deadline = 2m
tolerance = 0.1
[host me]
local = true
agent_path = $W/bin/drover-agent
[job train]
containers = me:local:$W/n0
nproc_per_node = 2
command = bin/worker
grace = 5s
[job hold]
containers = me:local:$W/n2
command = bin/worker
grace = 5s
on_inconclusive = hold
max_probation_time = 20s
[job pc]
containers = me:local:$W/n1
command = bin/worker
grace = 5s
EOF
RC=0
OUTF=
dr() { # dr LABEL ARGS...: drover; output kept in $W/LABEL.out; sets RC, OUTF
	local label=$1 t=$SECONDS
	shift
	OUTF="$W/$label.out"
	"$W/bin/drover" -i "$INV" "$@" >"$OUTF" 2>&1
	RC=$?
	say "drover $* -> exit $RC ($((SECONDS - t))s): $(grep -E '^(promoted|FAILED|verdict|HELD)' "$OUTF" | head -n 1 | cut -c1-240)"
}
said() { grep -E -q -- "$1" "$OUTF"; }
agent_json() { "$W/bin/drover-agent" --root "$1" --socket "$1/agent.sock" status --json; }
job_field() { # job_field ROOT JOB FIELD
	agent_json "$1" | jq -r --arg j "$2" --arg f "$3" '.jobs[] | select(.job == $j) | .[$f]'
}

start_agent "$W/n0"
say "deploy rows: $SEEDS seed(s) each, through drover and drover-agent (local node, 2 ranks)"
dr v1 deploy "$(release v1 seed 1)" --job train
check "v1 (first deploy, no baseline) is promoted" test "$RC" = 0
check "v1's samples become the baseline" said "become the baseline"
check "the agent keeps v1's samples (drover-agent baseline)" \
	bash -c "'$W/bin/drover-agent' --root '$W/n0' baseline --job train | grep -q '\"ktok_s\"'"
rm -rf "$W/state/samples" # the next probation reads the baseline back from the agent
for s in $(seq 1 "$SEEDS"); do
	dr "ok$s" deploy "$(release "ok$s" seed $((s + 100)))" --job train
	check "seed $s: healthy -> promoted by Mann-Whitney against the agent's samples" \
		bash -c "[ $RC = 0 ] && grep -q 'within tolerance -10.0% (Mann-Whitney U' '$OUTF'"
	dr "slow$s" deploy "$(release "slow$s" seed $((s + 200)) slower 0.15)" --job train
	check "seed $s: 15% slower -> reverted (throughput regression, or inconclusive: reverted too)" \
		bash -c "[ $RC = 3 ] && grep -E -q 'throughput regression: -1|inconclusive after' '$OUTF'"
	dr "crash$s" deploy "$(release "crash$s" seed $((s + 300)) crash_at 1 crash_code 4)" --job train
	check "seed $s: crash at start -> reverted" test "$RC" = 3
	dr "nan$s" deploy "$(release "nan$s" seed $((s + 400)) nan_at 30)" --job train
	# the controller's own rule ("non-finite loss at step N"), or the agent's when it stopped the
	# gang after 3 non-finite steps before a status document showed the first ("... 3
	# consecutive non-finite steps; stopping the gang"): both name the rule
	check "seed $s: NaN -> reverted (non-finite loss)" \
		bash -c "[ $RC = 3 ] && grep -E -q 'non-finite (loss|steps)' '$OUTF'"
	good=$(job_field "$W/n0" train good)
	dr "ana$s" deploy "$(release "ana$s" seed $((s + 500)))" --job train --analysis-only
	check "seed $s: --analysis-only of a healthy release -> verdict pass, the good release back" \
		bash -c "[ $RC = 0 ] && grep -q 'analysis only): pass' '$OUTF' && [ '$(job_field "$W/n0" train current)' = '$good' ]"
done

say "hold rows: no data with on_inconclusive = hold, decided by hand"
start_agent "$W/n2"
dr h1 deploy "$(release h1 seed 7)" --job hold
check "hold: v1 promoted (first deploy)" test "$RC" = 0
dr h2 deploy "$(release h2 seed 8 no_rate 1)" --job hold
check "hold: a worker without throughput -> no data, HELD, exit 7" \
	bash -c "[ $RC = 7 ] && grep -q '^HELD' '$OUTF' && grep -q 'no data: ' '$OUTF'"
held=$(job_field "$W/n2" hold current)
good=$(job_field "$W/n2" hold good)
check "hold: the held release keeps running, unpromoted" test "$held" != "$good"
dr h2r revert --job hold
check "hold: drover revert -> exit 0, the good release back" \
	bash -c "[ $RC = 0 ] && [ '$(job_field "$W/n2" hold current)' = '$good' ]"
dr h3 deploy "$(release h3 seed 9 no_rate 1)" --job hold
held=$(job_field "$W/n2" hold current)
dr h3p promote --job hold
check "hold: drover promote -> exit 0, the held release is the good one" \
	bash -c "[ $RC = 0 ] && [ '$(job_field "$W/n2" hold good)' = '$held' ] && [ '$held' != '$good' ]"

say "agent row: a promoted release crashing after a healthy run, $AGENT_SEEDS seeds (drover-agent directly)"
start_agent "$W/n1" --backoff-initial 0.2 --backoff-max 1
A=("$W/bin/drover-agent" --root "$W/n1" --socket "$W/n1/agent.sock")
restarted=0
reverted=0
for s in $(seq 1 "$AGENT_SEEDS"); do
	# a healthy run of 20..39 steps at 20 steps/s, then a retryable crash (exit 1)
	d=$(release "pc$s" seed "$s" step_s 0.05 crash_at $((20 + (s * 7) % 20)) crash_code 1)
	# staged (and verified) into n1's store through drover; then activated and promoted directly
	"$W/bin/drover" -i "$INV" deploy "$d" --job pc --stage-only >"$W/pc$s.out" 2>&1
	full=$("${A[@]}" release list --json 2>/dev/null | jq -r --arg n "pc$s" '.[] | select(.name == $n) | .id' | head -n 1)
	"${A[@]}" activate "$full" --job pc --nnodes 1 --node-rank 0 --nproc-per-node 1 -- bin/worker >/dev/null 2>&1
	"${A[@]}" promote "$full" --job pc >/dev/null 2>&1
	ok=0
	for _ in $(seq 1 50); do
		sleep 0.2
		if "${A[@]}" status --json 2>/dev/null | jq -e --arg id "$full" '.jobs[] | select(.job == "pc")
				| .restarts >= 1 and .current == $id and .good == $id
				  and (.state == "running" or .state == "starting" or .state == "backoff")' >/dev/null; then
			ok=1
			break
		fi
	done
	restarted=$((restarted + ok))
	grep -q "\"kind\":\"revert\".*\"job\":\"pc\"\|\"job\":\"pc\".*\"kind\":\"revert\"" "$W/n1/events.jsonl" && reverted=$((reverted + 1))
done
check "promoted release crashing after a healthy run: restarted, never reverted ($restarted/$AGENT_SEEDS restarted, $reverted reverts)" \
	test "$restarted" = "$AGENT_SEEDS" -a "$reverted" = 0

say "agent-rows: $((checks - fails)) of $checks checks passed"
((fails == 0))
