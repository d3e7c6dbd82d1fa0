#!/bin/bash
# t-21-fresh-job: a job whose first deploys all fail (it never had a good release), with workers
# that are not drover-train: one writes lines that are not heartbeats, one exits 1 at once.
# Each deploy exits 3 with "no last good release", and says what went wrong: the first-step
# verdict names the lines that were not heartbeats (it used to say only "no heartbeat"), and a
# new release is not announced as "job spec changed: not promoted yet" (the spec did not change;
# the job never had a promoted one), also when healthy_deadline comes first ([job fresh2]).  Its
# own inventory: the lab's plus [job fresh] and [job fresh2] in h1:102.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

port=$(sed -n 's/^master_port = //p' "$LAB_DIR/inventory.ini" | head -n 1)
INV="$E2E_WORK/fresh.ini"
{
	cat "$LAB_DIR/inventory.ini"
	cat <<-INI

		[job fresh]
		containers = h1:102
		command = ./w.sh
		master_port = $((port + 3))
		grace = 5s
		healthy_deadline = 60
		min_healthy_time = 5
		warmup_steps = 2
		first_step_deadline = 8s

		[job fresh2]
		containers = h1:102
		command = ./w.sh
		master_port = $((port + 4))
		grace = 5s
		healthy_deadline = 12
		min_healthy_time = 5
		warmup_steps = 2
		first_step_deadline = 5m
	INI
} >"$INV"
if ! ct h1:102 test -x /usr/local/bin/drover-agent; then
	drover install
	((DROVER_RC == 0)) || { show_drover; fatal "drover install failed"; }
fi

worker() { # worker NAME BODY: a release whose w.sh runs BODY; prints the dir
	local d="$E2E_WORK/releases/$1"
	rm -rf "$d"
	mkdir -p "$d"
	printf '#!/bin/sh\n%s\n' "$2" >"$d/w.sh"
	chmod 0755 "$d/w.sh"
	echo "$d"
}

d=$(worker garbage 'while :; do echo "step=1 loss=2.0" >&$DROVER_HEARTBEAT_FD; sleep 0.5; done')
say "drover deploy garbage (writes key=value lines, not JSON heartbeats)"
drover deploy "$d" --job fresh
show_drover 6
check "deploy exits 3" test "$DROVER_RC" = 3
check "the verdict is the first-step deadline" drover_said 'never reached its first step: no heartbeat after [0-9]+ s \(first_step_deadline 8 s\)'
check "... and says the worker wrote lines that are not heartbeats" \
	drover_said '; it wrote [0-9]+ lines? that (are|is) not (a )?heartbeats? \(.drover logs --job fresh --agent. says why\)\]'
check "no good release to return to, said" drover_said "no last good release for job 'fresh'"

# the same worker where healthy_deadline (12 s) comes long before first_step_deadline (5 m): the
# controller's verdict said only "no heartbeat ... within healthy_deadline", and the operator
# looked for a slow start
say "drover deploy garbage --job fresh2 (healthy_deadline 12 s, first_step_deadline 5 m)"
drover deploy "$d" --job fresh2
show_drover 4
check "deploy exits 3" test "$DROVER_RC" = 3
check "the healthy_deadline verdict says the worker wrote lines that are not heartbeats, and where to look" \
	drover_said 'no heartbeat from rank 0 \(h1:102\) .*within healthy_deadline 12s; it wrote [0-9]+ lines? that (are|is) not (a )?heartbeats? \(.drover logs --job fresh2 --agent. says why\)'
drover logs --job fresh2 --agent -n 400
check "drover logs --agent shows why: the agent's bad-line warning" \
	grep -q "job 'fresh2' rank 0: bad heartbeat line" "$E2E_WORK/last.out"

d=$(worker exits 'echo "exiting 1" >&2; exit 1')
say "drover deploy exits (a new release, same job spec, job never promoted)"
drover deploy "$d" --job fresh
show_drover 6
check "deploy exits 3" test "$DROVER_RC" = 3
check "the rank's exit is the reason" drover_said 'rank 0 exited with code 1'
check "no 'job spec changed' for a new release under the same spec" eval '! drover_said "job spec changed"'
check "the history row's reason does not start with 'job spec changed'" \
	eval '"$E2E_BUILD/drover" -i "$INV" history --job fresh -o json 2>/dev/null | jq -e "[.. | objects | select(has(\"reason\")) | .reason | select(startswith(\"job spec changed\"))] | length == 0" >/dev/null'

# a good raw worker at last, promoted; then stopped: a rollback with nowhere earlier to go said
# the job "runs its last good release" while nothing ran
d=$(worker good 'i=0; while :; do i=$((i+1)); echo "{\"v\":1,\"rank\":0,\"step\":$i,\"phase\":\"train\",\"loss\":2.0,\"tok_s\":1000}" >&$DROVER_HEARTBEAT_FD; sleep 0.2; done')
say "drover deploy good, stop, rollback"
drover deploy "$d" --job fresh
show_drover 3
check "deploy good exits 0 (promoted)" test "$DROVER_RC" = 0
drover stop --job fresh
check "drover stop exits 0" test "$DROVER_RC" = 0
drover rollback --job fresh
show_drover 3
check "rollback with no earlier good release fails" test "$DROVER_RC" != 0
check "... saying the job is stopped on its good release, and how to run it" \
	drover_said "job 'fresh' is stopped on its last good release .*no earlier good release to roll back to.*; .drover start --job fresh. runs it again"
finish
