#!/bin/bash
# t-88-partial-promote: a deploy whose promote fails in one container only.  v88 passes its
# probation; the moment h2's pct log shows the deploy's `drover-agent promote` call, h2:201's
# agent daemon is killed (SIGKILL from the host, before that call reaches it): h1:101 and h1:102
# promote v88, h2:201 cannot.  The deploy says `promote failed on some containers`, naming
# `drover promote --job train` as what finishes it (it said only "run the deploy again").
# h2:201's agent is started again; it re-adopts the gang, v88 still held there on its agents'
# probation.  `drover revert --job train` must refuse the promoted-here/held-there split, naming
# `rollback --job train --to v1` (it read the first container: "nothing is held", or reverted
# h2:201 alone and split the gang), and `drover promote --job train` must finish the promote in
# h2:201, saying where it was promoted already (it read the first container and refused:
# "runs its good release: nothing is held to promote").  Then back to v1 (a rollback).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
C=h2:201
INV_T="$E2E_WORK/inventory-t88.ini"
inv_variant "$INV_T"

# the host's pid of the agent daemon in container $1 (its pid namespace is the container's)
agent_host_pid() {
	local init ns p want
	init=$(lxc-info -P "$LAB_DIR/lxc" -n "$(ct_name "$1")" -pH) || return 1
	ns=$(readlink "/proc/$init/ns/pid") || return 1
	want=$(ct "$1" cat /run/drover/agent.pid) || return 1
	for p in /proc/[0-9]*; do
		[[ $(readlink "$p/ns/pid" 2>/dev/null) == "$ns" ]] || continue
		[[ $(awk '/^NSpid:/ { print $NF }' "$p/status" 2>/dev/null) == "$want" ]] || continue
		echo "${p#/proc/}"
		return 0
	done
	return 1
}
apid=$(agent_host_pid "$C") || fatal "cannot find the agent daemon of $C"
read -r -a aargv < <(tr '\0' ' ' <"/proc/$apid/cmdline")
say "agent daemon of $C: host pid $apid (${aargv[*]})"

d=$(make_release v88 train.seed=88)
say "drover deploy v88; $C's agent killed when its promote call starts"
rm -f "$E2E_WORK/t88-fault" "$E2E_WORK/t88-tail"
(
	exec 3< <(exec tail -F -n 0 "$LAB_DIR/pct-h2.log" 2>/dev/null)
	echo $! >"$E2E_WORK/t88-tail"
	while IFS= read -r -t 400 -u 3 line; do
		if [[ $line == *"/drover-agent promote "* ]]; then
			kill -KILL "$apid"
			printf '%s\n' "$line" >"$E2E_WORK/t88-fault"
			break
		fi
	done
	kill "$(cat "$E2E_WORK/t88-tail")" 2>/dev/null
) &
wpid=$!
sleep 0.5 # tail is reading
INV="$INV_T" drover deploy "$d" --job train
kill "$(cat "$E2E_WORK/t88-tail" 2>/dev/null)" 2>/dev/null
wait "$wpid" 2>/dev/null
show_drover 6
[[ -s $E2E_WORK/t88-fault ]] || fatal "the deploy made no promote call on h2 (the fault was never injected)"
# the kill races the promote call (pct, lxc-attach, the CLI's start, its connect: tens of ms
# against one kill(2) from an inotify wake-up); lost, h2:201 promoted before its agent died
((DROVER_RC == 0)) && fatal "h2:201's agent was killed too late: the deploy promoted everywhere (the fault lost its race with the promote call; not a drover failure)"
v88=$(ct_current h1:101)
say "v88 is ${v88:-?}"
check "deploy v88 exits 1 ($DROVER_RC)" test "$DROVER_RC" = 1
check "it names $C's failed promote" drover_said "$C.*(promote|daemon|agent)"
check "it says the promote failed on some containers and names \`drover promote --job train\` to finish it" \
	drover_said "promote failed on some containers: ${v88:0:12} passed probation but is not marked good everywhere; .*\`drover promote --job train\` finishes the promote where it is still held"
say "$C's agent started again (it re-adopts the gang)"
# fd 8 (run.sh's e2e lock) closed: a daemon that kept it held the lock of an E2E_KEEP lab
start_agent() { ct "$C" "${aargv[@]}" 8>&-; }
check "a new agent starts in $C" wait_until 60 start_agent
split_state() {
	local doc
	doc=$(status_json | jq -c '[.jobs[] | select(.job == "train") | .containers[] | {container, current, good}]')
	printf '    %s\n' "$doc"
	jq -e --arg t "$v88" --arg g "$v1" 'length == 3 and all(.current == $t) and
		([.[] | select(.good == $t)] | length) == 2 and (.[] | select(.container == "h2:201") | .good == $g)' <<<"$doc" >/dev/null
}
check "v88 runs everywhere: promoted in h1:101 and h1:102, held in $C (good v1 there)" wait_until 30 split_state

say "drover revert --job train: refused, the gang would split"
pids0=$(all_pids)
drover revert --job train
show_drover 3
check "revert exits 1 ($DROVER_RC)" test "$DROVER_RC" = 1
check "it refuses the split, naming where v88 is promoted and \`rollback --to v1\`" \
	drover_said "revert of job 'train' refused, nothing reverted: ${v88:0:12} is promoted already in h1:101, h1:102 .* and held in 1 other container, where a revert goes back to ${v1:0:12}: a revert would split the gang.  \`drover rollback --job train --to ${v1:0:12}\`"
check "nothing moved: v88 current everywhere, the same workers" \
	eval 'all_current_is "$v88" && [[ "$(all_pids)" == "$pids0" ]]'

say "drover promote --job train: finishes the promote in $C"
drover promote --job train
show_drover 3
check "promote exits 0 ($DROVER_RC)" test "$DROVER_RC" = 0
check "it says where v88 was promoted already and promotes it where held" \
	drover_said "promote: ${v88:0:12} is promoted already in h1:101, h1:102 \(an earlier promote worked there only\): promoting it where it is held, 1 container"
promoted_everywhere() {
	local n
	n=$(status_json | jq --arg r "$v88" '[.jobs[] | select(.job == "train") | .containers[] | select(.good == $r and .current == $r)] | length')
	printf '    containers with v88 good: %s\n' "$n"
	[[ $n == 3 ]]
}
check "v88 is the good release in every container" promoted_everywhere
promote_record() {
	local rec
	rec=$("$E2E_BUILD/drover" -i "$INV" history --job train -o json 2>/dev/null | jq -c '.history | last')
	printf '    %s\n' "$rec"
	jq -e --arg t "$v88" --arg g "$v1" '.result == "promoted" and .release == $t and .previous == $g' <<<"$rec" >/dev/null
}
check "history: promoted, previous v1 (the good release it replaced)" promote_record
check "the same workers train on (nothing restarted)" eval '[[ "$(all_pids)" == "$pids0" ]]'

say "back to v1"
drover rollback --job train --to "${v1:0:12}"
show_drover 2
check "rollback to v1 exits 0" test "$DROVER_RC" = 0
check "every container runs v1" all_current_is "$v1"
finish
