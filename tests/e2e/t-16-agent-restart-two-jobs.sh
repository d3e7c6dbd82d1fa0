#!/bin/bash
# t-16-agent-restart-two-jobs: an agent restart re-adopts the gang of EVERY job in a container,
# not only the first one of its state.json.  h1:101 runs two jobs (train, and a second job
# "side" deployed there with the same release); its agent is stopped (SIGTERM) and a new one
# started.  Both gangs must be re-adopted: the same worker processes, no relaunch, no second gang
# beside an orphaned first one (found by hand with a PyTorch job: the second job's gang was left
# running unowned while a new one was launched, which then failed on the rendezvous port).
# Meanwhile: `drover top` counts h1:101 once in its header, and `drover status` says its agent's
# absence once, not once per job (the newcomer pass).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

C=h1:101
ensure_v1
port=$(sed -n 's/^master_port = //p' "$LAB_DIR/inventory.ini" | head -n 1)
LAB_INV=$INV
INV="$E2E_WORK/two-jobs.ini"
{
	cat "$LAB_INV"
	cat <<-INI

		[job side]
		containers = $C
		command = bin/drover-train
		arg = train
		arg = --config
		arg = etc/train.ini
		master_port = $((port + 3))
		healthy_deadline = 90
		min_healthy_time = 5
		warmup_steps = 2
		tolerance = 0.9
	INI
} >"$INV"

v1dir="$E2E_WORK/releases/v1"
[[ -x $v1dir/bin/drover-train ]] || v1dir=$(make_release v1)
drover deploy "$v1dir" --job side
check "the second job 'side' is promoted in $C (exit 0)" test "$DROVER_RC" = 0
((DROVER_RC == 0)) || show_drover
side_step() { "$E2E_BUILD/drover" -i "$INV" status -o json --job side 2>/dev/null |
	jq '[.. | objects | select(has("rank") and has("hb")) | .hb.step // -1] | max // -1'; }
side_advances() {
	local s0
	s0=$(side_step)
	wait_until 60 eval '(( $(side_step) > s0 ))'
}
train_advances() { local i=$INV; INV=$LAB_INV; all_ranks_advance 3 90; local r=$?; INV=$i; return $r; }
check "every rank of job train trains" train_advances
check "job side trains" side_advances
pids0=$(ct_pids "$C")
say "worker pids in $C: $pids0"
check "two workers run in $C" test "$(wc -w <<<"$pids0")" = 2
seq0=$(ct "$C" sh -c 'wc -l < /var/lib/drover/events.jsonl')

# the dashboard counts containers as validate does: h1:101 runs two jobs and is one container
drover validate
nct=$(sed -n 's/.* \([0-9][0-9]*\) containers).*/\1/p' "$E2E_WORK/last.out")
drover top --once --timeout 8 --width 132
show_drover 3
check "top's header counts each container once ($nct, as validate does), not once per job" \
	drover_said "containers $nct/$nct "

check "SIGTERM ends the agent in $C" ct "$C" sh -c 'kill -TERM "$(cat /run/drover/agent.pid)"'
check "the agent is gone" wait_until 30 eval '! ct "$C" /usr/local/bin/drover-agent status >/dev/null 2>&1'
drover status --job side
check "drover status exits 1 while the agent is down" test "$DROVER_RC" = 1
check "drover status says how to start the agent again (drover install --job side)" \
	drover_said "$(re_quote "$C"): .*no drover-agent daemon listening.*drover install --job side starts it"
drover status
show_drover 6
check "drover status (both jobs) names $C's missing agent once, not once per job" \
	test "$(grep -c "$(re_quote "$C"): .*no drover-agent daemon listening" "$E2E_WORK/last.err")" = 1
check "... while the table keeps a row per job for $C" \
	test "$(grep -cE "^(train|side) +$(re_quote "$C") .*agent-unreachable" "$E2E_WORK/last.out")" = 2
check "a new agent starts in $C" wait_until 60 ct "$C" /usr/local/bin/drover-agent daemon --detach
sleep 3
new_events() { ct "$C" sh -c "tail -n +$((seq0 + 1)) /var/lib/drover/events.jsonl"; }
adopted() { new_events | jq -r 'select(.kind == "adopt") | .job' | sort | tr '\n' ' '; }
say "adopted: $(adopted)"
check "both jobs' gangs were re-adopted (train and side)" eval '[[ "$(adopted)" == "side train " ]]'
check "no gang was relaunched nor orphans stopped" eval '! new_events | grep -E "\"kind\":\"(restart|orphans-stopped|crash)\""'
check "the same two worker processes run in $C (nothing relaunched, nothing orphaned)" \
	eval '[[ "$(ct_pids "$C")" == "$pids0" ]]'
check "every rank of job train trains on" train_advances
check "job side trains on" side_advances

# leave the lab as the next tests expect it: only job train
ct "$C" /usr/local/bin/drover-agent stop --job side >/dev/null 2>&1 || true
INV=$LAB_INV
finish
