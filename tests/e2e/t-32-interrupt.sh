#!/bin/bash
# t-32-interrupt: Ctrl-C before the switch (the newcomer pass).  A deploy interrupted while its
# preflight runs stops at once, says nothing was switched, records `aborted` and gives the job's
# deploy lease back: the operator's next deploy goes through.  It used to die of the SIGINT with
# the lease held, so every deploy for lease_ttl (5 min) was refused as "another operator",
# naming the dead drover as the holder.  Then the same for `drover rollback`, interrupted while
# its status question (since lease take --status, asked with the lease) waits on a container whose
# agent daemon is stopped (SIGSTOP): it too used to die of
# the signal with the lease held.  Then a second Ctrl-C while a revert's recovery is watched
# (deploy: the revert stands, "not confirmed", exit 3, history aborted; it used to say REVERT
# FAILED, "the job may be down", and record revert-failed), and a Ctrl-C while a rollback's
# recovery is watched (it used to kill drover with the lease held: now ROLLBACK NOT CONFIRMED,
# exit 1, the lease given back, and `drover promote` keeps the rolled-back release).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
# this test's inventory: the job's preflight is a script of the release that takes a minute
INV_P="$E2E_WORK/inventory-slow-preflight.ini"
sed 's|^preflight = .*|preflight = bin/slow-preflight|' "$INV" >"$INV_P"
d=$(make_release v32 train.seed=32)
printf '#!/bin/sh\nsleep 60\n' >"$d/bin/slow-preflight"
chmod 0755 "$d/bin/slow-preflight"

say "deploy v32 (preflight sleeps 60 s); SIGINT to drover while the preflight runs"
pct_mark
# as from a terminal: a background job of a script starts with SIGINT ignored
env --default-signal=INT "$E2E_BUILD/drover" -i "$INV_P" deploy "$d" --job train >"$E2E_WORK/int.out" 2>"$E2E_WORK/int.err" &
pid=$!
preflight_runs() { pct_since_has h1 'preflight'; }
check "the deploy reaches its preflight" wait_until 120 preflight_runs
sleep 1
t0=$(now_cs)
kill -INT "$pid"
wait "$pid"
rc=$?
took=$(($(now_cs) - t0))
sed 's/^/    | /' "$E2E_WORK/int.err" | tail -5
check "drover exits 1 (not killed by the signal: $rc) within 15 s ($(secs $took) s)" \
	eval '[[ $rc == 1 ]] && ((took < 1500))'
check "it says it was interrupted before the switch and nothing was switched" \
	eval 'grep -q "interrupted by the operator before the switch" "$E2E_WORK/int.err" &&
		grep -E -q "stopped before anything was switched|nothing was stopped or switched" "$E2E_WORK/int.err"'
lease_free() {
	local c
	for c in $E2E_CTS; do ct "$c" test -f /var/lib/drover/leases/train.json && return 1; done
	return 0
}
check "the deploy lease is given back in every container" lease_free
# the container's preflight stops with the channel it ran on: it used to run on to its own end
# (60 s here; a GPU self-test's minutes), holding the job's GPUs against the next deploy's checks
preflight_gone() {
	local c rc=0 left
	for c in $E2E_CTS; do
		left=$(ct "$c" sh -c 'for p in /proc/[0-9]*; do tr "\0" " " < $p/cmdline 2>/dev/null; echo; done' |
			grep -E 'slow-preflight|^sleep 60' || true)
		[[ -z $left ]] || { printf '    %s still runs: %s\n' "$c" "$left"; rc=1; }
	done
	return $rc
}
check "no container still runs the preflight (ended with drover's channel)" wait_until 10 preflight_gone
check "v1 is still current everywhere" all_current_is "$v1"
check "every rank still trains" all_ranks_advance 3 90
drover history --job train
check "history records the deploy as aborted" drover_said 'aborted .*interrupted by the operator before the switch'
say "the next deploy is not refused by a lease"
drover deploy "$E2E_WORK/releases/v1" --job train
show_drover 4
check "deploy of v1 again: nothing to do, exit 0 (no lease in the way)" eval '[[ $DROVER_RC == 0 ]] && drover_said "already current"'

C1=${E2E_CTS%% *}
say "drover rollback while $C1's agent daemon is stopped (SIGSTOP); SIGINT to drover while it waits on that status"
ct "$C1" sh -c 'kill -STOP "$(cat /run/drover/agent.pid)"'
pct_mark
env --default-signal=INT "$E2E_BUILD/drover" -i "$INV" rollback --job train >"$E2E_WORK/rb.out" 2>"$E2E_WORK/rb.err" &
pid=$!
survey_asks() { pct_since_has h1 'status'; }
check "the rollback asks the containers for their status" wait_until 60 survey_asks
sleep 2
t0=$(now_cs)
kill -INT "$pid"
wait "$pid"
rc=$?
took=$(($(now_cs) - t0))
ct "$C1" sh -c 'kill -CONT "$(cat /run/drover/agent.pid)"'
sed 's/^/    | /' "$E2E_WORK/rb.err" | tail -5
check "rollback exits 1 (not killed by the signal: $rc) within 15 s ($(secs $took) s)" \
	eval '[[ $rc == 1 ]] && ((took < 1500))'
check "it says the rollback was interrupted before the switch" \
	grep -q "rollback of job 'train' interrupted by the operator before the switch" "$E2E_WORK/rb.err"
check "the deploy lease is given back in every container" lease_free
check "v1 is still current everywhere" all_current_is "$v1"
drover history --job train
check "history records the rollback as aborted" drover_said 'aborted .*rollback interrupted by the operator'
say "the next deploy is not refused by a lease"
drover deploy "$E2E_WORK/releases/v1" --job train
show_drover 4
check "deploy of v1 again after the rollback: exit 0 (no lease in the way)" eval '[[ $DROVER_RC == 0 ]] && drover_said "already current"'
check "every rank still trains" all_ranks_advance 3 90

d33=$(make_release v33 train.seed=33)
# On a quiet machine the good release can be training again within a second of the revert, so
# the recovery may be confirmed before the second SIGINT lands: the watch is looked for every
# 50 ms, and a lost race (the output says it recovered) is tried again, up to three times.
for attempt in 1 2 3; do
	say "deploy v33; SIGINT during its probation, and again while the revert's recovery is watched (attempt $attempt)"
	env --default-signal=INT "$E2E_BUILD/drover" -i "$INV" deploy "$d33" --job train >"$E2E_WORK/dd.out" 2>"$E2E_WORK/dd.err" &
	pid=$!
	check "the deploy watches its probation" wait_until 180 said_in '^probation ' dd.err
	kill -INT "$pid"
	for ((i = 0; i < 2400; i++)); do
		said_in '^recovery ' dd.err && break
		sleep 0.05
	done
	check "the revert's recovery is watched" said_in '^recovery ' dd.err
	kill -INT "$pid" 2>/dev/null
	wait "$pid"
	rc=$?
	grep -q "is training again" "$E2E_WORK/dd.out" || break
	say "the recovery was confirmed before the second SIGINT landed; once more"
	check "every rank trains v1 before the next attempt" all_ranks_advance 3 120
	check "the deploy lease is given back before the next attempt" wait_until 30 lease_free
done
sed 's/^/    | /' "$E2E_WORK/dd.out" "$E2E_WORK/dd.err" | tail -6
check "deploy exits 3, reverted ($rc)" test "$rc" = 3
check "it says the recovery was not confirmed, not REVERT FAILED" \
	eval 'grep -q "not confirmed (interrupted by the operator" "$E2E_WORK/dd.out" &&
		! grep -q "REVERT FAILED" "$E2E_WORK/dd.out" "$E2E_WORK/dd.err"'
check "the deploy lease is given back in every container" lease_free
check "v1 is current everywhere" all_current_is "$v1"
check "every rank trains v1 again" all_ranks_advance 3 120
drover history --job train
check "history records the deploy as aborted, not revert-failed" \
	eval 'drover_said "aborted .*interrupted by the operator during probation" && ! drover_said "revert-failed"'

say "deploy v33 to promotion, then drover rollback; SIGINT while the rollback's recovery is watched"
# tolerance 0.9: v33 must pass whatever the shared cores' load does to its throughput
INV_T9="$E2E_WORK/inventory-tolerant.ini"
sed 's|^tolerance = .*|tolerance = 0.9|' "$INV" >"$INV_T9"
INV_SAVED=$INV
INV=$INV_T9
# SIGHUP during the probation (the terminal, or the SSH session to the jump host, gone): nobody
# asked to stop, so the deploy runs on to its verdict; it used to die of the signal (exit 129,
# no history row, the candidate unwatched until the agents' probation deadline)
env --default-signal=HUP "$E2E_BUILD/drover" -i "$INV" deploy "$d33" --job train >"$E2E_WORK/hup.out" 2>"$E2E_WORK/hup.err" &
pid=$!
check "the deploy watches its probation" wait_until 180 said_in '^probation ' hup.err
kill -HUP "$pid"
wait "$pid"
rc=$?
sed 's/^/    | /' "$E2E_WORK/hup.out" | tail -3
check "SIGHUP during the probation: the deploy runs on to its verdict, v33 promoted (exit $rc)" \
	eval '[[ $rc == 0 ]] && grep -q promoted "$E2E_WORK/hup.out"'
drover history --job train
check "history records v33 promoted" drover_said 'v33 .*promoted|promoted .*v33'
env --default-signal=INT "$E2E_BUILD/drover" -i "$INV" rollback --job train >"$E2E_WORK/rr.out" 2>"$E2E_WORK/rr.err" &
pid=$!
# looked for every 50 ms, as above: the recovery can be confirmed within a second
for ((i = 0; i < 3600; i++)); do
	said_in '^recovery ' rr.err && break
	sleep 0.05
done
check "the rollback's recovery is watched" said_in '^recovery ' rr.err
kill -INT "$pid"
wait "$pid"
rc=$?
sed 's/^/    | /' "$E2E_WORK/rr.out" "$E2E_WORK/rr.err" | tail -6
# The recovery of a release that resumes from its checkpoint can be confirmed within a second of
# the "recovery" line on an idle machine, before the SIGINT lands (CI, 2026-12-02): then the
# interrupt path was not taken, and the run says so instead of failing on a race.
if [[ $rc == 0 ]] && grep -q "^rolled job 'train' back to" "$E2E_WORK/rr.out"; then
	say "the recovery was confirmed before the SIGINT landed: the interrupted-recovery path was not exercised this run"
	check "the rollback finished (exit 0) and says v1 trains again" grep -q "is training again" "$E2E_WORK/rr.out"
	check "the deploy lease is given back in every container" lease_free
	check "v1 is current everywhere (activated by the rollback)" all_current_is "$v1"
else
	check "rollback exits 1, not killed by the signal ($rc)" test "$rc" = 1
	check "it says ROLLBACK NOT CONFIRMED and how to keep it (drover promote)" \
		eval 'grep -q "ROLLBACK NOT CONFIRMED" "$E2E_WORK/rr.err" && grep -q "drover promote --job train" "$E2E_WORK/rr.err"'
	check "the deploy lease is given back in every container" lease_free
	check "v1 is current everywhere (activated by the rollback)" all_current_is "$v1"
	drover promote --job train
	show_drover 3
	check "drover promote keeps v1 (exit 0)" eval '[[ $DROVER_RC == 0 ]] && drover_said promoted'
	drover history --job train
	check "history: the rollback aborted, then v1 promoted by the operator" \
		eval 'drover_said "aborted .*not confirmed \(interrupted by the operator" && drover_said "promoted by the operator"'
	check "... its record says why it was unpromoted: a rollback not confirmed, not a held release" \
		eval 'drover_said "promoted by the operator \(a rollback to it, not confirmed\)" && ! drover_said "held release"'
fi
check "every rank trains v1" all_ranks_advance 3 120
INV=$INV_SAVED
finish
