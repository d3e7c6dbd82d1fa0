#!/bin/bash
# t-27-two-phase-switch: a new gang starts only when every old rank of the job in every container
# is gone (issue 11).  A deploy stops the old gang in all three containers at once and activates
# nowhere before every agent said its old gang is gone (journals: every stop before any
# activate); each switch has its own rendezvous generation (DROVER_RDZV job:release:generation).
# Then a release whose rank in h2:201 ignores SIGTERM (it goes only at SIGKILL, after the 30 s
# grace): a deploy with switch_deadline = 8s aborts naming h2:201, starts nothing of the new
# release anywhere, and the old release comes back in every container (h1 at once, h2:201 as
# soon as its old gang is gone) with a new rendezvous generation; nothing is left down.
# Then a controller SIGKILLed between the two phases: every agent starts the release its switch
# stopped again on its own at its switch deadline (event switch-expired); the job trains again.
# Last, a revert after a failed probation with the same stubborn rank: the failed gang stops
# everywhere first; h2:201 is named, the good release starts there once its old gang is gone.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
INV_S="$E2E_WORK/inventory-stubborn.ini"
# the same job, run through a wrapper; switch_deadline short of the agent's 30 s grace; a
# verdict the load of the shared machine cannot turn into a revert (held is as good here)
sed -e 's|^command = bin/drover-train$|command = bin/stubborn|' -e 's|^tolerance = .*|tolerance = 0.9|' "$INV" >"$INV_S"
printf '[policy]\nswitch_deadline = 8s\non_inconclusive = hold\n' >>"$INV_S"
drover_s() {
	"$E2E_BUILD/drover" -i "$INV_S" "$@" >"$E2E_WORK/last.out" 2>"$E2E_WORK/last.err"
	DROVER_RC=$?
	sed 's/^/  | /' "$E2E_WORK/last.out" "$E2E_WORK/last.err" >>"$E2E_WORK/drover.log"
}
stubborn_release() { # NAME SEED [KEY=VALUE...]: a release whose node-2 rank outlives SIGTERM
	local d
	d=$(make_release "$1" train.seed="$2" "${@:3}")
	cat >"$d/bin/stubborn" <<-'EOF'
		#!/bin/sh
		# node 2 (h2:201): SIGTERM is ignored; after drover-train is done the shell stays until SIGKILL
		if [ "$GROUP_RANK" = 2 ]; then
			trap '' TERM
			./bin/drover-train "$@" &
			wait
			while :; do sleep 1; done
		fi
		exec ./bin/drover-train "$@"
	EOF
	chmod 0755 "$d/bin/stubborn"
	echo "$d"
}
# the newest journal seq of every container, and the events after it
seq_marks() { local c; for c in $E2E_CTS; do printf '%s=%s ' "$c" "$(ct "$c" sh -c 'tail -n 1 /var/lib/drover/events.jsonl' | jq -r '.seq // 0')"; done; }
events_since() { # CT MARKS: the container's journal lines after its mark
	local m
	m=$(printf '%s\n' $2 | sed -n "s/^$1=//p")
	ct "$1" cat /var/lib/drover/events.jsonl | jq -c --argjson s "${m:-0}" 'select(.seq > $s and .job == "train")'
}
rdzv_of() { # CT: DROVER_RDZV of the container's drover-train
	local p
	p=$(ct_pids "$1" | awk '{print $1}')
	[[ -n $p ]] && ct "$1" sh -c "tr '\\0' '\\n' </proc/$p/environ" | sed -n 's/^DROVER_RDZV=//p'
}

say "deploy of the stubborn release: a two-phase switch from v1"
ds=$(stubborn_release vs 27)
marks=$(seq_marks)
drover_s deploy "$ds" --job train
show_drover 8
check "the deploy reaches a verdict with the release running (exit 0 promoted or 7 held)" \
	eval '[[ $DROVER_RC == 0 || $DROVER_RC == 7 ]]'
check "it stopped the old gang in the three containers at once before activating" \
	drover_said 'stopping the old gang of job .train. in 3 container'
vs=$(ct_current h1:101)
stops_before_activates() {
	local c all last_stop first_act
	all=$(for c in $E2E_CTS; do events_since "$c" "$marks"; done)
	last_stop=$(echo "$all" | jq -s '[.[] | select(.kind == "stop") | .ts] | max // empty')
	first_act=$(echo "$all" | jq -s '[.[] | select(.kind == "activate") | .ts] | min // empty')
	printf '    stops: %s, activates: %s; last stop %s, first activate %s\n' \
		"$(echo "$all" | jq -s '[.[] | select(.kind == "stop")] | length')" \
		"$(echo "$all" | jq -s '[.[] | select(.kind == "activate")] | length')" "$last_stop" "$first_act"
	[[ -n $last_stop && -n $first_act ]] && awk -v s="$last_stop" -v a="$first_act" 'BEGIN { exit !(s <= a) }'
}
check "every container's old gang was gone (journal 'stop') before any container activated" stops_before_activates
check "every container runs the stubborn release" all_current_is "$vs"
tok0=$(rdzv_of h1:101)
say "DROVER_RDZV of h1:101's rank: $tok0"
check "the rendezvous token names job, release and a switch generation" \
	eval '[[ $tok0 =~ ^train:$vs:[0-9a-f]{16}$ ]]'
check "the other containers' ranks carry the same token" \
	eval '[[ "$(rdzv_of h1:102)" == "$tok0" && "$(rdzv_of h2:201)" == "$tok0" ]]'

say "deploy v8 while h2:201's old rank ignores SIGTERM (switch_deadline 8s, grace 30s)"
d8=$(stubborn_release v8 28)
check "the stubborn release trains on every rank first" all_ranks_advance 3 120
marks=$(seq_marks)
t0=$(now_cs)
drover_s deploy "$d8" --job train
t=$(($(now_cs) - t0))
show_drover 10
check "the deploy fails (exit 1), in $(secs $t) s" test "$DROVER_RC" = 1
check "the verdict: switch aborted, naming h2:201 and the deadline" \
	drover_said 'SWITCH ABORTED.*the old gang on h2:201 was not gone within the switch deadline of 8 s'
check "it says nothing of the new release was started" drover_said 'Nothing of [0-9a-f]+ was started anywhere'
check "it says the old release is started again, h2:201 once its old gang is gone" \
	drover_said "starts again once the old gang is gone on h2:201|started again on (.*, |.* and )?h2:201"
no_activate() {
	local c n=0
	for c in $E2E_CTS; do n=$((n + $(events_since "$c" "$marks" | jq -s '[.[] | select(.kind == "activate")] | length'))); done
	printf '    activate events since the deploy: %d\n' "$n"
	((n == 0))
}
check "no container activated anything" no_activate
check "every container still has the stubborn release current (v8 never switched to)" all_current_is "$vs"
check "the old release trains again on all three ranks (h2:201 after its grace)" all_ranks_advance 3 150
say "$WAITED"
tok1=$(rdzv_of h1:101)
say "DROVER_RDZV now: $tok1"
check "the restarted gang has a new generation (cannot pair with the old ranks)" \
	eval '[[ $tok1 =~ ^train:$vs:[0-9a-f]{16}$ && $tok1 != "$tok0" ]]'
check "... the same in every container" eval '[[ "$(rdzv_of h1:102)" == "$tok1" && "$(rdzv_of h2:201)" == "$tok1" ]]'
check "h2:201's journal: the stop was replaced by a start once the old gang was gone" \
	eval 'events_since h2:201 "$marks" | grep -q "once the old gang was gone"'
check "history records the abort with its cause" \
	eval '"$E2E_BUILD/drover" -i "$INV_S" history --job train 2>/dev/null | grep -E -q "aborted.*h2:201"'

say "SIGKILL the controller between the phases: h1's old gangs are gone, h2:201's still going"
# The agents' stops carry the switch deadline (switch_deadline 8 s + 30 s): an agent that hears
# no activation by then starts the release it stopped again on its own (event switch-expired).
check "the stubborn release trains on every rank again first" all_ranks_advance 3 120
dk=$(stubborn_release vk 29)
marks=$(seq_marks)
"$E2E_BUILD/drover" -i "$INV_S" deploy "$dk" --job train >"$E2E_WORK/k.out" 2>"$E2E_WORK/k.err" &
kpid=$!
phase1() { grep -q 'switch: h1:10[12]: old gang gone' "$E2E_WORK/k.err"; }
check "the deploy reaches its first phase (an old gang in h1 is gone)" wait_until 240 phase1
kill -KILL "$kpid"
wait "$kpid" 2>/dev/null
tk=$(now_cs)
sed 's/^/    k| /' "$E2E_WORK/k.err" | tail -4
check "the switch said the agents' own deadline (38s)" grep -q 'start it again on their own if nothing follows within 38s' "$E2E_WORK/k.err"
expired_everywhere() {
	local c
	for c in $E2E_CTS; do events_since "$c" "$marks" | grep -q '"kind":"switch-expired"' || return 1; done
}
check "every agent starts the stopped release again on its own (event switch-expired)" wait_until 150 expired_everywhere
say "$WAITED"
check "the journal says why" \
	eval 'events_since h1:101 "$marks" | grep "switch-expired" | grep -q "no activation within the switch deadline"'
check "nothing of the new release was activated anywhere" no_activate
check "every container still has the stubborn release current" all_current_is "$vs"
check "the old release trains again on all three ranks" all_ranks_advance 3 150
say "training again $(secs $(($(now_cs) - tk))) s after the controller was killed ($WAITED)"
# the dead controller's lease (default lease_ttl 5 min) is given back by hand
holder=$(ct h1:101 cat /var/lib/drover/leases/train.json | jq -r .holder)
for c in $E2E_CTS; do ct "$c" /usr/local/bin/drover-agent lease release train "$holder" >/dev/null 2>&1; done

say "back to v1 (the stubborn gang goes at SIGKILL, within the default switch deadline)"
drover rollback --job train --to "${v1:0:12}" --now
show_drover 5
check "rollback to v1 goes through (exit 0)" test "$DROVER_RC" = 0
check "v1 is current everywhere" all_current_is "$v1"

say "a revert is two-phase too: a slow stubborn release fails probation, h2:201's rank outlives SIGTERM"
# the same job with the normal verdict rules (a throughput regression reverts) and switch_deadline 8s
INV_R="$E2E_WORK/inventory-revert.ini"
sed -e 's|^command = bin/drover-train$|command = bin/stubborn|' "$INV" >"$INV_R"
printf '[policy]\nswitch_deadline = 8s\n' >>"$INV_R"
dr=$(stubborn_release vr 30 model.layers=4 model.dim=256 model.heads=4 model.seq=128)
check "v1 trains on every rank first" all_ranks_advance 3 120
"$E2E_BUILD/drover" -i "$INV_R" deploy "$dr" --job train >"$E2E_WORK/last.out" 2>"$E2E_WORK/last.err"
DROVER_RC=$?
sed 's/^/  | /' "$E2E_WORK/last.out" "$E2E_WORK/last.err" >>"$E2E_WORK/drover.log"
show_drover 12
check "the deploy fails probation and reverts (exit 3)" test "$DROVER_RC" = 3
check "the revert stopped the failed gang in the three containers at once first" \
	drover_said 'reverting job .train. .*two-phase'
check "it names h2:201 as the container whose failed gang was not gone within the switch deadline" \
	drover_said 'revert: h2:201: the old gang was not gone within the switch deadline of 8 s'
check "... and says the good release starts there once it is gone" \
	drover_said 'h2:201: .*the good release starts there once the old gang is gone'
check "every container is back on v1" all_current_is "$v1"
check "v1 trains again on all three ranks" all_ranks_advance 3 150
# polled: one lxc-attach on the loaded 2 cores can fail, and did once in a full run (the agent
# journals the revert before it starts the good release, so the line is there by now)
journal_has_revert() { ct h2:201 cat /var/lib/drover/events.jsonl | tail -n 20 | grep -q '"kind":"revert"'; }
check "h2:201's journal: the stop was replaced by the revert" wait_until 15 journal_has_revert
finish
