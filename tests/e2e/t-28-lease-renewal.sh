#!/bin/bash
# t-28-lease-renewal: the deploy lease outlives a short TTL while its holder works, and a dead
# holder's lease is taken over and reported (issue 11).  A lease left by a controller that died
# (TTL 1 s) is taken over by the next deploy: the deploy says so and the agent journals a
# lease-takeover event naming both.  With lease_ttl = 12s, operator A's probation lasts well past
# 12 s; A renews the lease while it watches, so operator B, trying 25 s into A's probation, is
# still refused naming A.  Then A is stopped (SIGSTOP) past its TTL during its probation and B
# takes the lease over: A, continued, stops deciding (exit 9, TAKEN OVER naming B, history
# aborted), neither promoting nor reverting; B's rollback then reverts two-phase.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
AGENT=/usr/local/bin/drover-agent

say "a lease left behind in h1:101 by a controller that died (TTL 1 s)"
check "the ghost takes the lease" ct h1:101 "$AGENT" lease take train ghost@nowhere/pid-1 1
sleep 2
drover deploy "$E2E_WORK/releases/v1" --job train
show_drover 6
check "the next deploy goes through the expired lease (v1 is current: nothing to do, exit 0)" test "$DROVER_RC" = 0
check "it says the lease was taken over, from whom and why" \
	drover_said 'h1:101: deploy lease taken over by [^ ]+ from ghost@nowhere/pid-1 \(idle [0-9]+ s, past its 1 s TTL\)'
journalled() { ct h1:101 cat /var/lib/drover/events.jsonl | jq -e -s '[.[] | select(.kind == "lease-takeover" and .job == "train" and (.detail | test("from ghost@nowhere/pid-1")))] | length == 1' >/dev/null; }
check "h1:101's agent journals a lease-takeover event naming the ghost" journalled
check "no other container journals one" \
	eval '! ct h1:102 grep -q lease-takeover /var/lib/drover/events.jsonl && ! ct h2:201 grep -q lease-takeover /var/lib/drover/events.jsonl'
check "the lease is free again afterwards" eval '! ct h1:101 test -f /var/lib/drover/leases/train.json'

INV_A="$E2E_WORK/inventory-lease-a.ini"
INV_B="$E2E_WORK/inventory-lease-b.ini"
mkdir -p "$E2E_WORK/state-lease-b"
# a lease TTL far shorter than the probation (min_healthy_time 40 s; [job train] sets it)
sed -e 's|^min_healthy_time = .*|min_healthy_time = 40|' "$INV" >"$INV_A"
printf '[policy]\nlease_ttl = 12s\n' >>"$INV_A"
sed "s|^state_dir = .*|state_dir = $E2E_WORK/state-lease-b|" "$INV_A" >"$INV_B"
d=$(make_release v9 train.seed=9)
say "operator A deploys v9 (lease_ttl 12s, a probation of 40 s and more)"
: >"$E2E_WORK/a.out" # t-26 left its own A's output here (see the second deploy below)
: >"$E2E_WORK/a.err"
"$E2E_BUILD/drover" -i "$INV_A" deploy "$d" --job train >"$E2E_WORK/a.out" 2>"$E2E_WORK/a.err" &
apid=$!
watching() { grep -q '^probation' "$E2E_WORK/a.err"; }
check "A reaches its probation" wait_until 240 watching
t0=$(now_cs)
sleep 25
say "operator B deploys v9 25 s into A's probation (more than twice the TTL)"
"$E2E_BUILD/drover" -i "$INV_B" deploy "$d" --job train >"$E2E_WORK/b.out" 2>"$E2E_WORK/b.err"
brc=$?
sed 's/^/    B| /' "$E2E_WORK/b.err" | tail -3
a_running=$(kill -0 $apid 2>/dev/null && echo yes || echo no)
check "A was still watching its probation when B tried ($(secs $(($(now_cs) - t0))) s after it began)" test "$a_running" = yes
check "B is refused: A renewed the lease while it watched" test "$brc" != 0
check "B is told A holds it (renewed seconds ago, not 25 s ago)" \
	grep -E -q "being deployed by [^ ]+ \(lease taken [0-9]+ s ago, renewed [0-9] s ago" "$E2E_WORK/b.err"
check "B took nothing over" eval '! grep -q "taken over" "$E2E_WORK/b.err"'
wait $apid
arc=$?
sed 's/^/    A| /' "$E2E_WORK/a.err" | tail -3
check "A's deploy reaches its verdict (exit 0 or 3)" eval '[[ $arc == 0 || $arc == 3 ]]'
check "A gave the lease back" eval '! ct h1:101 test -f /var/lib/drover/leases/train.json'
check "nobody journalled a takeover during A's deploy" \
	eval '[[ $(ct h1:101 grep -c lease-takeover /var/lib/drover/events.jsonl) == 1 ]]'

say "operator A stopped (SIGSTOP) during its probation past the TTL; operator B takes the lease over"
d=$(make_release v10 train.seed=10)
# emptied here, not by the background job's own redirection: that runs in the child after the
# fork, and `watching` could read the first deploy's "probation" line before it (it matched at
# 0.00 s in CI, A was stopped before it took the lease, and B's takeover found no deploy to stop)
: >"$E2E_WORK/a.out"
: >"$E2E_WORK/a.err"
"$E2E_BUILD/drover" -i "$INV_A" deploy "$d" --job train >"$E2E_WORK/a.out" 2>"$E2E_WORK/a.err" &
apid=$!
check "A reaches its probation" wait_until 240 watching
kill -STOP "$apid"
sleep 15
check "B takes A's expired lease over in h1:101" \
	ct h1:101 "$AGENT" lease take train operator-b@elsewhere/pid-7 120
kill -CONT "$apid"
wait "$apid"
arc=$?
sed 's/^/    A| /' "$E2E_WORK/a.out" "$E2E_WORK/a.err" | tail -4
check "A exits 9 (taken-over), not a verdict" test "$arc" = 9
check "A says TAKEN OVER, naming B" grep -E -q "TAKEN OVER .*being deployed by operator-b@elsewhere/pid-7" "$E2E_WORK/a.out"
check "A says it decided nothing" grep -q "decides nothing (no promote, no revert)" "$E2E_WORK/a.out"
v10=$(ct_current h1:101)
good_of() { ct "$1" "$AGENT" status --json | jq -r '.jobs[] | select(.job == "train") | .good'; }
check "A neither reverted nor promoted: v10 is still current and not good" \
	eval '[[ -n $v10 && $v10 != "$(good_of h1:101)" ]] && all_current_is "$v10"'
check "A's history row says aborted: taken over" \
	eval '"$E2E_BUILD/drover" -i "$INV_A" history --job train --local | grep -E -q "aborted.*taken over"'
ct h1:101 "$AGENT" lease release train operator-b@elsewhere/pid-7 >/dev/null
say "B (here: drover rollback) puts the good release back: a two-phase revert"
drover rollback --job train
show_drover 6
check "the rollback goes through (exit 0)" test "$DROVER_RC" = 0
check "it stopped the unpromoted release in the three containers at once first" \
	drover_said 'stopping the old gang of job .train. in 3 container'
g=$(good_of h1:101)
check "every container runs the good release again" all_current_is "$g"
check "... trains on every rank" all_ranks_advance 3 120
finish
