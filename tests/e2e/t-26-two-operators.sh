#!/bin/bash
# t-26-two-operators: the fleet holds the deploy lock (issue 11).  Two operators with their own
# state dirs deploy the same job at once: the second is refused before anything changes, naming
# the first as the holder of the job's deploy lease; the first deploy completes; afterwards the
# lease is free again and the second operator's deploy goes through.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
INV_B="$E2E_WORK/inventory-b.ini"
mkdir -p "$E2E_WORK/state-b"
sed "s|^state_dir = .*|state_dir = $E2E_WORK/state-b|" "$INV" >"$INV_B"
d=$(make_release v6 train.seed=6)

say "operator A deploys v6; operator B deploys v6 a moment later from another state dir"
"$E2E_BUILD/drover" -i "$INV" deploy "$d" --job train >"$E2E_WORK/a.out" 2>"$E2E_WORK/a.err" &
apid=$!
lease_held() { ct h1:101 test -f /var/lib/drover/leases/train.json; }
check "operator A holds the job's deploy lease" wait_until 30 lease_held
"$E2E_BUILD/drover" -i "$INV_B" deploy "$d" --job train >"$E2E_WORK/b.out" 2>"$E2E_WORK/b.err"
brc=$?
sed 's/^/    B| /' "$E2E_WORK/b.err" | tail -5
check "operator B is refused (exit != 0)" test "$brc" != 0
check "B is told who holds the lease and for how long" \
	grep -E -q "being deployed by [^ ]+@[^ ]+ \(lease taken [0-9]+ s ago" "$E2E_WORK/b.err"
check "B changed nothing (nothing pushed or activated by B)" eval '! grep -E -q "activate|push h" "$E2E_WORK/b.err"'
wait $apid
arc=$?
sed 's/^/    A| /' "$E2E_WORK/a.err" | tail -4
# A's verdict is its own (0 promoted; 3 reverted, e.g. a throughput rule tripped by the load of
# the shared test machine): what matters is that it ran to a verdict untouched by B
check "operator A's deploy runs to its verdict (exit 0 or 3)" eval '[[ $arc == 0 || $arc == 3 ]]'
check "A activated every container (B did not get in the way)" eval '[[ $(grep -c "^activate " "$E2E_WORK/a.err") == 3 ]]'
check "the lease is given back at the end" eval '! ct h1:101 test -f /var/lib/drover/leases/train.json'

say "operator B again, now that the lease is free"
"$E2E_BUILD/drover" -i "$INV_B" deploy "$d" --job train >"$E2E_WORK/b.out" 2>"$E2E_WORK/b.err"
brc=$?
sed 's/^/    B| /' "$E2E_WORK/b.err" | tail -3
# the lease no longer stands in B's way: when A promoted v6, B's deploy of the same release has
# nothing to do (exit 0, says so); when A's was reverted (load), B activates v6 and reaches a verdict
if ((arc == 0)); then
	check "B's deploy goes through the lease this time (A promoted v6: nothing to do, exit 0)" \
		eval '[[ $brc == 0 ]] && grep -q "already current and promoted" "$E2E_WORK/b.out" "$E2E_WORK/b.err"'
else
	check "B's deploy goes through the lease this time (activates, verdict 0 or 3)" \
		eval '[[ ($brc == 0 || $brc == 3) && $(grep -c "^activate " "$E2E_WORK/b.err") == 3 ]]'
fi
same_view() {
	local a b
	a=$("$E2E_BUILD/drover" -i "$INV" status -o json | jq -c '[.jobs[].containers[] | [.current, .good]]')
	b=$("$E2E_BUILD/drover" -i "$INV_B" status -o json | jq -c '[.jobs[].containers[] | [.current, .good]]')
	[[ -n $a && $a == "$b" ]]
}
check "both operators' status shows the same current and good releases" same_view
# the history is the fleet's too: each operator's view merges its own records with the agents'
same_history() {
	local a b
	a=$("$E2E_BUILD/drover" -i "$INV" history --job train -o json 2>/dev/null | jq -c '[.history[] | [.time, .release, .result]]')
	b=$("$E2E_BUILD/drover" -i "$INV_B" history --job train -o json 2>/dev/null | jq -c '[.history[] | [.time, .release, .result]]')
	printf '    A: %s records, B: %s records\n' "$(echo "$a" | jq length)" "$(echo "$b" | jq length)"
	[[ -n $a && $a != "[]" && $a == "$b" ]]
}
check "both operators' history shows the same records (A's deploys in B's history too)" same_history
check "B's local history lacks A's records: the agents supplied them" \
	eval '(( $("$E2E_BUILD/drover" -i "$INV_B" history --job train --local -o json | jq ".history | length") < $("$E2E_BUILD/drover" -i "$INV_B" history --job train -o json 2>/dev/null | jq ".history | length") ))'
finish
