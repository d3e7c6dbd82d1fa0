#!/bin/bash
# t-34-dead-controller: a drover killed -9 during its probation (the operator's laptop or shell
# died) used to lock its own operator out for lease_ttl (5 min): the next deploy from the same
# machine was refused as "another operator", naming the dead drover as the holder.  Now the next
# deploy from this machine sees the holder is a drover of this host and boot that no longer runs
# and takes its lease over at once, saying so; the dead drover's candidate keeps running until the
# new deploy's switch replaces it.  A second operator whose drover is alive is still refused,
# from this host too.  The killed deploy's release, replaced without a verdict, gets its one
# history row (aborted, never decided) from the deploy that replaced it.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
d=$(make_release v34 train.seed=34)
lease_holder() { ct h1:101 cat /var/lib/drover/leases/train.json 2>/dev/null | jq -r .holder; }

say "deploy v34 (lease_ttl: the default 5 min); kill -9 drover during its probation"
"$E2E_BUILD/drover" -i "$INV" deploy "$d" --job train >"$E2E_WORK/dead.out" 2>"$E2E_WORK/dead.err" &
pid=$!
check "the deploy watches its probation" wait_until 180 said_in '^probation ' dead.err
kill -9 "$pid"
wait "$pid" 2>/dev/null
holder=$(lease_holder)
printf '    lease left behind: %s\n' "$holder"
check "the dead drover's lease is left in h1:101, naming its pid, boot and start time" \
	eval '[[ $holder == *"/pid-$pid/boot-"*"/start-"* ]]'
v34=$(ct_current h1:101)
check "its candidate v34 keeps running unpromoted (nothing stopped it)" \
	eval '[[ -n $v34 && $v34 != "$v1"* ]] && all_current_is "$v34"'

say "the same operator deploys v1 again at once, from the same machine"
INV_B="$E2E_WORK/inventory-b34.ini"
mkdir -p "$E2E_WORK/state-b34"
sed "s|^state_dir = .*|state_dir = $E2E_WORK/state-b34|" "$INV" >"$INV_B"
t0=$(now_cs)
"$E2E_BUILD/drover" -i "$INV" deploy "$E2E_WORK/releases/v1" --job train >"$E2E_WORK/next.out" 2>"$E2E_WORK/next.err" &
npid=$!
check "it takes the dead drover's lease over at once, saying so" \
	wait_until 60 said_in "deploy lease held by [^ ]+/pid-$pid/[^ ]*, which is no longer running on this host: taken over \(3 containers\)" next.err
sed 's/^/    | /' "$E2E_WORK/next.err" | head -4
check "it goes on to switch the gang (activate in every container)" wait_until 180 said_in '^probation ' next.err
check "the lease is now the new drover's" eval '[[ $(lease_holder) == *"/pid-$npid/"* ]]'

say "a second operator on this machine, whose drover is alive, tries meanwhile"
"$E2E_BUILD/drover" -i "$INV_B" deploy "$d" --job train >"$E2E_WORK/b34.out" 2>"$E2E_WORK/b34.err"
brc=$?
sed 's/^/    B| /' "$E2E_WORK/b34.err" | tail -3
check "the live operator's lease is not taken over: B is refused (exit != 0)" test "$brc" != 0
check "B is told who holds the lease (the live drover), and nothing is taken over" \
	eval 'grep -E -q "being deployed by [^ ]+/pid-$npid/[^ ]* \(lease taken" "$E2E_WORK/b34.err" &&
		! grep -q "taken over" "$E2E_WORK/b34.err"'
wait "$npid"
nrc=$?
took=$(($(now_cs) - t0))
sed 's/^/    | /' "$E2E_WORK/next.out" | tail -2
# v1 is the good release: promoted (0), or reverted to itself on the shared machine's load (3)
check "the deploy after the kill runs to its verdict (exit 0 or 3: $nrc) well under lease_ttl ($(secs $took) s of 300 s)" \
	eval '[[ $nrc == 0 || $nrc == 3 ]] && ((took < 24000))'
check "v1 is current everywhere" all_current_is "$v1"
# v34's deploy died without a verdict and the switch replaced it: nothing recorded how it ended
# (no row of v34 at all); the deploy that replaced it records it, aborted, and says so
check "the deploy says v34 had no record and records it as aborted" \
	said_in "${v34:0:12} ran unpromoted with no record of how its deploy ended .*: recorded as aborted" next.err
rows34=$("$E2E_BUILD/drover" -i "$INV" history --job train -o json | jq -c --arg id "$v34" '.history[] | select(.release == $id)')
printf '    v34 rows: %s\n' "$(cut -c1-300 <<<"$rows34")"
check "drover history has v34's one row: aborted, never decided, replaced by v1" \
	eval '[[ $(grep -c . <<<"$rows34") == 1 && $(jq -r .result <<<"$rows34") == aborted && $(jq -r .reason <<<"$rows34") == "never decided: "*"replaced by ${v1:0:12}"* ]]'
check "the lease is given back at the end" eval '! ct h1:101 test -f /var/lib/drover/leases/train.json'
journalled() { ct h1:101 cat /var/lib/drover/events.jsonl | jq -e -s --arg p "/pid-$pid/" '[.[] | select(.kind == "lease-takeover" and (.detail | contains($p)) and (.detail | contains("no longer running on its host")))] | length == 1' >/dev/null; }
check "h1:101's agent journals the takeover from the dead drover" journalled
check "every rank trains v1" all_ranks_advance 3 120
finish
