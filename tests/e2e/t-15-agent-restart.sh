#!/bin/bash
# t-15-agent-restart: the gang survives its agent (issue 11).  The agent in h1:101 is stopped
# (SIGTERM), killed (SIGKILL) and stopped again while v1 trains: every time the new agent
# re-adopts the same worker processes, every container keeps training, and the steps continue
# (nothing relaunched, no "completed" elsewhere).  Then a worker is killed while its agent is
# down: the next agent sees that exit (journal) and the gang trains again.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

C=h1:101
ensure_v1
check "every rank trains before the restarts" all_ranks_advance 3 90
pids0=$(all_pids)
say "worker pids: $pids0"
adopts0=$(ct "$C" sh -c 'grep -c "\"kind\":\"adopt\"" /var/lib/drover/events.jsonl' || true)

agent_down() { # agent_down SIGNAL: end the daemon in $C, wait until it is gone
	ct "$C" sh -c 'kill -'"$1"' "$(cat /run/drover/agent.pid)"' || return 1
	wait_until 30 eval '! ct "$C" /usr/local/bin/drover-agent status >/dev/null 2>&1'
}
agent_up() { # a new daemon (retries while the old one still holds the pidfile lock)
	wait_until 60 ct "$C" /usr/local/bin/drover-agent daemon --detach
}
running_everywhere() {
	local st
	st=$(status_json | jq -r '[.jobs[] | select(.job == "train") | .containers[].state] | unique | join(",")')
	printf '    states: %s\n' "$st"
	[[ $st == running ]]
}

for sig in TERM KILL TERM; do
	say "agent in $C: SIG$sig, then a new agent"
	check "SIG$sig ends the agent in $C" agent_down "$sig"
	sleep 2 # the workers train on; their heartbeats wait in the FIFOs
	check "a new agent starts in $C" agent_up
	check "the same worker processes run in every container (nothing relaunched)" \
		eval '[[ "$(all_pids)" == "$pids0" ]]'
	check "the job is running in every container" wait_until 30 running_everywhere
	check "every rank's step advances" all_ranks_advance 3 60
done
adopts=$(ct "$C" sh -c 'grep -c "\"kind\":\"adopt\"" /var/lib/drover/events.jsonl')
check "the agent journalled 3 re-adoptions" test "$((adopts - ${adopts0:-0}))" = 3
no_bad_events() { ! ct "$C" sh -c 'tail -n 30 /var/lib/drover/events.jsonl | grep -E "\"kind\":\"(crash|failed|orphans-stopped|restart)\""'; }
check "no crash, restart or failure was journalled in $C" no_bad_events

say "a worker killed while its agent is down"
wpid=$(ct_pids "$C" | awk '{print $1}')
check "SIGTERM ends the agent in $C" agent_down TERM
check "kill -9 the worker (pid $wpid) in $C" ct "$C" kill -9 "$wpid"
sleep 1
check "a new agent starts in $C" agent_up
saw_kill() { ct "$C" sh -c 'tail -n 40 /var/lib/drover/events.jsonl | grep "\"kind\":\"crash\"" | grep -q "signal 9"'; }
check "the new agent saw the worker's exit (crash, signal 9, in its journal)" wait_until 30 saw_kill
check "every rank trains again" all_ranks_advance 3 180
finish
