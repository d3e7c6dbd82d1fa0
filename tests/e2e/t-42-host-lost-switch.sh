#!/bin/bash
# t-42-host-lost-switch: h2's sshd freezes (SIGSTOP, the listener and every session) between
# the preflight and the switch.  The deploy must not split the gang: either nothing is stopped
# (the switch is not started while a container cannot be reached), or the containers it did
# stop start the old release again as the generation h2's untouched gang still runs.  It used
# to stop h1's gangs, start them again as a new generation, say h2 "starts again once its old
# gang is gone" although its agent was never asked, and leave a gang that could never form:
# every rank failed its rendezvous until an operator ran `drover stop` and `drover start`.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
code=$(make_release v42 train.lr=0.0013)
err=$E2E_WORK/lost.err
"$E2E_BUILD/drover" -i "$INV" deploy "$code" --job train >"$E2E_WORK/lost.out" 2>"$err" &
dpid=$!
preflighted() { grep -q "^preflight h2:201: passed" "$err"; }
t_end=$((SECONDS + 180))
until preflighted; do
	((SECONDS < t_end)) || fatal "the deploy never passed h2:201's preflight"
	kill -0 "$dpid" 2>/dev/null || fatal "the deploy ended before h2:201's preflight"
	sleep 0.02
done
lpid=$(cat "$LAB_DIR/hosts/h2/sshd.pid")
desc() { local p; for p in $(pgrep -P "$1"); do echo "$p"; desc "$p"; done; }
frozen="$lpid $(desc "$lpid" | tr '\n' ' ')"
say "h2's sshd frozen after its preflight: $frozen"
kill -STOP $frozen
ts=$SECONDS
# bounded: every step towards h2 has a deadline (connect_timeout, exec_timeout, the switch's)
wait_until 400 eval '! kill -0 '"$dpid"' 2>/dev/null'
wait "$dpid"
rc=$?
say "the deploy ended with exit $rc after $((SECONDS - ts)) s with h2 frozen"
kill -CONT $frozen 2>/dev/null
sed 's/^/    | /' "$E2E_WORK/lost.out" "$err" | grep -v "^    | \(stage\|push\|preflight\)" | tail -16
check "the deploy does not succeed (exit $rc)" test "$rc" -ne 0
check "h2:201 is never said to start again behind a stop it was never asked" \
	eval '! grep -Eq "h2:201: [0-9a-f]* starts again once the old gang is gone|starts again once the old gang is gone on (.*, |.* and )?h2:201" "$err" "$E2E_WORK/lost.out"'
check "it says the switch did not go through (not started, or aborted)" \
	grep -Eq "not started: .*h2:201|SWITCH ABORTED|never asked to stop" "$E2E_WORK/lost.out" "$err"
check "every container is still on v1" all_current_is "$v1"
# the gang forms again: h2's ranks (never stopped, or restarted by their agent after losing
# their peers) and h1's, started again, are one generation
check "all 3 ranks of v1 train again, one gang (steps advance)" all_ranks_advance 3 150
say "$WAITED"
gens=$(for c in $E2E_CTS; do ct "$c" cat /var/lib/drover/state.json 2>/dev/null |
	jq -r '.jobs[] | select(.job == "train") | . as $j | .specs[] |
		select(.release == $j.current and .spec_digest == $j.current_spec) | .rdzv // "none"'; done | sort -u)
say "the current spec's rendezvous generation, all containers: $(echo $gens)"
check "one rendezvous generation in all three containers" test "$(echo "$gens" | grep -c .)" = 1
finish
