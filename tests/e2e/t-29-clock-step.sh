#!/bin/bash
# t-29-clock-step: a healthy deploy is promoted while one agent's wall clock is stepped an hour
# during its probation (issue 11, items 5 and 8: no deadline of the agent reads the wall clock).
# The kernel's CLOCK_REALTIME cannot be namespaced per container, so the agent in h1:101 runs
# with Debian's libfaketime preloaded (copied into the container's /run: the lab's containers
# carry only libc), FAKETIME_DONT_FAKE_MONOTONIC=1 (only the wall clock moves) and a timestamp
# file re-read on every call, which the test rewrites.  The gang survives both agent restarts.
# First the preload is proved: `drover status` shows h1:101's clock skew jump to +1 h and back.
# Then deploy A with the clock stepped +0 -> +1h during probation, deploy B with +0 -> -1h: both
# promoted (exit 0), nothing reverted in any container, every rank trains.  Last, the agent in
# h1:101 is restarted without the preload and v1 is rolled back to, for the tests after this one.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

C=h1:101
FT_LIB=${FT_LIB:-/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1}
FT_DIR=/run/drover-faketime # in the container (a tmpfs: gone with the container's next boot)
[[ -r $FT_LIB ]] || fatal "$FT_LIB missing: install libfaketime (tests/deps.txt)"

ensure_v1
v1=$(v1_id)
# the lab's job with a probation long enough to read status in the middle of it (30 s of
# samples), and a throughput rule the machine's load cannot turn into a revert: this test is
# about the clock, t-30 about throughput
INV_C="$E2E_WORK/inventory-clock.ini"
sed -e 's|^min_healthy_time = .*|min_healthy_time = 30|' -e 's|^tolerance = .*|tolerance = 0.9|' "$INV" >"$INV_C"

agent_pid() { ct "$C" cat /run/drover/agent.pid 2>/dev/null; }
agent_faked() { # the running agent in $C has libfaketime mapped
	local p
	p=$(agent_pid) && [[ -n $p ]] && ct "$C" grep -q libfaketime "/proc/$p/maps"
}
agent_down() { # end the daemon in $C (SIGTERM; its gang trains on), wait until it is gone
	ct "$C" sh -c 'kill -TERM "$(cat /run/drover/agent.pid)"' || return 1
	wait_until 30 eval '! ct "$C" /usr/local/bin/drover-agent status >/dev/null 2>&1'
}
agent_up_faked() {
	wait_until 60 ct "$C" sh -c "LD_PRELOAD=$FT_DIR/libfaketime.so.1 FAKETIME_TIMESTAMP_FILE=$FT_DIR/offset \
FAKETIME_NO_CACHE=1 FAKETIME_DONT_FAKE_MONOTONIC=1 NO_FAKE_STAT=1 exec /usr/local/bin/drover-agent daemon --detach"
}
agent_up_plain() { wait_until 60 ct "$C" /usr/local/bin/drover-agent daemon --detach; }
set_offset() { # +0 | +1h | -1h: the faked agent's wall clock from its next clock read on
	ct "$C" sh -c "echo '$1' >$FT_DIR/offset.new && mv $FT_DIR/offset.new $FT_DIR/offset"
}
restore_agent() { # the agent in $C without the preload (idempotent; also the EXIT trap)
	if agent_faked; then
		agent_down && agent_up_plain
	fi
	ct "$C" rm -rf "$FT_DIR"
	! agent_faked
}
trap 'restore_agent >/dev/null 2>&1' EXIT

# skew_of CT [DOC]: the clock skew drover status shows for CT (seconds, "" when none)
skew_of() { jq -r --arg c "$1" '[.jobs[] | select(.job == "train") | .containers[] | select(.container == $c) | .clock_skew_s] | first // empty' <<<"${2:-$(status_json)}"; }
SKEW=""
# skew_near CT SECONDS: the skew shown for CT is SECONDS +- 3 (SKEW: what was shown).  The
# agents share this machine's kernel clock, so the true skew is the offset given to libfaketime;
# 3 s = drover's own 2 s threshold plus half a slow status round trip.
skew_near() {
	SKEW=$(skew_of "$1")
	[[ -n $SKEW ]] && awk -v s="$SKEW" -v w="$2" 'BEGIN { d = s - w; exit !(d < 3 && d > -3) }'
}
others_no_skew() { # the other containers (agents on this machine's clock) show |skew| < 3 s
	local doc c s rc=0
	doc=$(status_json)
	for c in $E2E_CTS; do
		[[ $c == "$C" ]] && continue
		s=$(skew_of "$c" "$doc")
		printf '    %s: skew %s s\n' "$c" "${s:-none}"
		[[ -n $s ]] && awk -v s="$s" 'BEGIN { exit !(s < 3 && s > -3) }' || rc=1
	done
	return $rc
}

check "v1 trains on every rank first" all_ranks_advance 3 90
pids0=$(all_pids)
say "worker pids: $pids0"

say "the agent in $C restarted with libfaketime preloaded (offset +0)"
check "libfaketime copied into $C ($FT_DIR)" \
	eval 'ct "$C" mkdir -p "$FT_DIR" && ct "$C" sh -c "cat >$FT_DIR/libfaketime.so.1" <"$FT_LIB" && set_offset +0'
check "SIGTERM ends the agent in $C" agent_down
check "a new agent starts in $C with LD_PRELOAD=libfaketime" agent_up_faked
check "the running agent has libfaketime mapped" agent_faked
same_pids() { [[ "$(all_pids)" == "$1" ]] || { printf '    now: %s\n' "$(all_pids)"; return 1; }; }
check "the same worker processes run in every container (the gang survived)" same_pids "$pids0"
check "at +0 drover status shows no skew for $C" wait_until 30 skew_near "$C" 0
say "skew of $C at +0: ${SKEW:-none} s"

say "prove the preload: step the agent's wall clock +1h, then back"
set_offset +1h
check "drover status shows $C's clock an hour ahead" wait_until 30 skew_near "$C" 3600
say "skew of $C at +1h: ${SKEW:-none} s"
warned() {
	"$E2E_BUILD/drover" -i "$INV" status >/dev/null 2>"$E2E_WORK/skew.err"
	sed 's/^/    | /' "$E2E_WORK/skew.err"
	grep -E -q "^$C: clock skew \+3[56][0-9]{2}\.[0-9] s \(the agent's clock is ahead of" "$E2E_WORK/skew.err"
}
check "... and drover status warns about it" warned
# a document's wall clock went with 9 significant digits (10 s): agents on this machine's clock
# were shown up to 5 s off and warned about (common/status.c, `wall_ms`)
check "drover status warns about no other container" \
	eval '! grep -E -q "^(h1:102|h2:201): clock skew" "$E2E_WORK/skew.err"'
check "the other containers show no skew" others_no_skew
set_offset +0
check "back at +0, no skew for $C" wait_until 30 skew_near "$C" 0
say "skew of $C back at +0: ${SKEW:-none} s"

# deploy_with_step NAME SEED OFFSET: deploys a healthy release in the background, steps the
# agent's clock to OFFSET once probation has begun, reads the skew while probation still runs,
# and checks the verdict: promoted, nothing reverted, every rank trains
deploy_with_step() {
	local name=$1 seed=$2 off=$3 want d pid t0 tp ts t marks c
	[[ $off == +1h ]] && want=3600 || want=-3600
	d=$(make_release "$name" train.seed="$seed")
	marks=""
	for c in $E2E_CTS; do marks+="$c=$(ct "$c" sh -c 'tail -n 1 /var/lib/drover/events.jsonl' | jq -r '.seq // 0') "; done
	set_offset +0
	t0=$(now_cs)
	"$E2E_BUILD/drover" -i "$INV_C" deploy "$d" --job train >"$E2E_WORK/$name.out" 2>"$E2E_WORK/$name.err" &
	pid=$!
	in_probation() { grep -q '^probation ' "$E2E_WORK/$name.err"; }
	probation_or_exit() { in_probation || ! kill -0 "$pid" 2>/dev/null; }
	wait_until 240 probation_or_exit
	check "deploy of $name reaches probation" saw "$WAITED" in_probation
	tp=$(now_cs)
	set_offset "$off"
	say "$C's wall clock stepped $off, $(secs $((tp - t0))) s into the deploy"
	check "during probation drover status shows $C's clock ${off/h/ h} off" wait_until 20 skew_near "$C" "$want"
	ts=$(now_cs)
	say "skew of $C: ${SKEW:-none} s, $(secs $((ts - tp))) s after the step"
	check "... while the deploy was still in probation (no verdict yet)" \
		eval 'kill -0 "$pid" 2>/dev/null && ! grep -E -q "^(promoted|held|reverted|FAILED)" "$E2E_WORK/$name.out"'
	wait "$pid"
	DROVER_RC=$?
	t=$(now_cs)
	sed 's/^/  | /' "$E2E_WORK/$name.out" "$E2E_WORK/$name.err" >>"$E2E_WORK/drover.log"
	sed 's/^/    | /' "$E2E_WORK/$name.out" "$E2E_WORK/$name.err" | grep -E 'promoted|revert|probation|clock' | tail -8
	WAITED="$(secs $((t - t0))) s in all, $(secs $((t - tp))) s after the step"
	check "deploy of $name with the clock stepped $off: promoted (exit 0)" \
		saw "$WAITED" eval '[[ $DROVER_RC == 0 ]] && grep -q "^promoted " "$E2E_WORK/$name.out"'
	say "promoted $(secs $((t - t0))) s after the deploy began, $(secs $((t - tp))) s after the clock step"
	local id
	id=$(ct_current "$C")
	check "every container runs $name ($id)" all_current_is "$id"
	no_revert() {
		local c m bad=0 ev
		for c in $E2E_CTS; do
			m=$(printf '%s\n' $marks | sed -n "s/^$c=//p")
			ev=$(ct "$c" cat /var/lib/drover/events.jsonl | jq -c --argjson s "${m:-0}" \
				'select(.seq > $s and (.kind | test("^(revert|probation-expired|switch-expired|failed|start-failed|crash|restart|hung|orphans-stopped)$")))')
			[[ -n $ev ]] && { printf '    %s: %s\n' "$c" "$ev"; bad=1; }
		done
		((bad == 0))
	}
	check "no revert, expiry, failure or crash in any container's journal since the deploy" no_revert
	"$E2E_BUILD/drover" -i "$INV" history --job train >"$E2E_WORK/history.out" 2>/dev/null
	check "drover history: $name promoted" grep -E -q "${id:0:12} +$name +promoted" "$E2E_WORK/history.out"
	check "every rank of $name trains (clock still $off in $C)" all_ranks_advance 3 90
}

say "deploy A: the agent's wall clock stepped +1h in the middle of probation"
deploy_with_step vclock-a 291 +1h
say "deploy B: stepped -1h in the middle of probation"
deploy_with_step vclock-b 292 -1h
set_offset +0

say "the agent in $C back without the preload"
pids1=$(all_pids)
check "the agent in $C restarts without libfaketime" restore_agent
check "the same worker processes run in every container" same_pids "$pids1"
check "no skew for $C" wait_until 30 skew_near "$C" 0
say "skew of $C without the preload: ${SKEW:-none} s"
check "every rank trains" all_ranks_advance 3 90
drover rollback --job train --to "${v1:0:12}" --now
show_drover 4
check "rollback to v1 for the tests after this one (exit 0)" test "$DROVER_RC" = 0
check "v1 is current everywhere" all_current_is "$v1"
check "v1 trains on every rank" all_ranks_advance 3 120
finish
