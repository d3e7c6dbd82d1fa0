#!/bin/bash
# t-37-interrupt-stop: Ctrl-C while the job's old gang stops (the first phase of the switch).
# The old release's ranks ignore SIGTERM in every container, so each stop lasts the agent's 30 s
# grace and the SIGINT lands while all three are still stopping.  The verdict said the reason once
# per container ("SWITCH ABORTED ...: h1:101: interrupted while its old gang was stopping; h1:102:
# interrupted while its old gang was stopping; h2:201: ..." and the same for what became of each);
# it now says it once, naming the containers.  What it says is checked against what is true:
# nothing of the new release was activated, the old release trains again in every container once
# its old gang is gone (a new rendezvous generation), history records the abort, the deploy lease
# is given back and the next deploy (a rollback to v1) goes through.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
INV_S="$E2E_WORK/inventory-stubborn-all.ini"
# the job run through a wrapper; a verdict the load of the shared machine cannot turn into a
# revert (held is as good here)
sed -e 's|^command = bin/drover-train$|command = bin/stubborn|' -e 's|^tolerance = .*|tolerance = 0.9|' "$INV" >"$INV_S"
printf '[policy]\non_inconclusive = hold\n' >>"$INV_S"
stubborn_all() { # NAME SEED: a release whose every rank outlives SIGTERM (it goes at SIGKILL)
	local d
	d=$(make_release "$1" train.seed="$2")
	cat >"$d/bin/stubborn" <<-'EOF'
		#!/bin/sh
		trap '' TERM
		./bin/drover-train "$@" &
		wait
		while :; do sleep 1; done
	EOF
	chmod 0755 "$d/bin/stubborn"
	echo "$d"
}
lease_free() {
	local c
	for c in $E2E_CTS; do ct "$c" test -f /var/lib/drover/leases/train.json && return 1; done
	return 0
}

say "deploy a release whose ranks all ignore SIGTERM"
ds=$(stubborn_all vs37 37)
"$E2E_BUILD/drover" -i "$INV_S" deploy "$ds" --job train >"$E2E_WORK/last.out" 2>"$E2E_WORK/last.err"
DROVER_RC=$?
show_drover 6
check "it runs (exit 0 promoted or 7 held)" eval '[[ $DROVER_RC == 0 || $DROVER_RC == 7 ]]'
vs=$(ct_current h1:101)
check "every container runs it" all_current_is "$vs"
check "it trains on every rank" all_ranks_advance 3 120

say "deploy the next release; SIGINT while the old gang stops in all three containers"
dn=$(stubborn_all v37 38) # the inventory runs bin/stubborn
env --default-signal=INT "$E2E_BUILD/drover" -i "$INV_S" deploy "$dn" --job train >"$E2E_WORK/is.out" 2>"$E2E_WORK/is.err" &
pid=$!
stop_phase() { said_in 'stopping the old gang of job .train. in 3 container' is.err || ! kill -0 "$pid" 2>/dev/null; }
wait_until 240 stop_phase
check "the deploy stops the old gang in the three containers" said_in 'stopping the old gang of job .train. in 3 container' is.err ||
	{ sed 's/^/    | /' "$E2E_WORK/is.err" | tail -5; kill "$pid" 2>/dev/null; fatal "the deploy never reached its switch"; }
sleep 3 # the stops are in flight; each lasts the 30 s grace
stopping_all() { ! said_in 'old gang gone' is.err; }
check "no old gang is gone yet (they ignore SIGTERM)" stopping_all
t0=$(now_cs)
kill -INT "$pid"
wait "$pid"
rc=$?
took=$(($(now_cs) - t0))
sed 's/^/    | /' "$E2E_WORK/is.out" "$E2E_WORK/is.err" | tail -8
check "drover exits 1, not killed by the signal ($rc), in $(secs $took) s" test "$rc" = 1
# Every container is asked to start the old release again at once, and a start queued behind a
# stop still in flight is waited for 10 s: asked one after another (10 s each) it took 26-30 s.
check "the Ctrl-C is answered within 20 s, not after the three restarts one by one" test "$took" -lt 2000
check "the verdict: SWITCH ABORTED, the reason once with the three containers" \
	grep -q "SWITCH ABORTED for job 'train': switch to [0-9a-f]* aborted before anything new started: interrupted while the old gang was stopping on h1:101, h1:102 and h2:201\\.  Nothing of" "$E2E_WORK/is.out"
# The old release is asked to start again in every container at once (10 s where its old gang
# is still stopping: each says "starts again once the old gang is gone").  Each outcome is said
# once, with its containers.
count() { grep -o "$1" "$E2E_WORK/is.out" | wc -l; }
check "... not repeated per container; each outcome once, all three named" \
	eval '[[ $(count "interrupted while") == 1 && $(count "starts again once") -le 1 && $(count "started again on") -le 1 ]] &&
		grep -Eq "was started anywhere; .*h1:101.*h1:102.*h2:201" "$E2E_WORK/is.out"'
check "nothing of the new release was activated: the old one is current everywhere" all_current_is "$vs"
check "the old release trains again on all three ranks (after the grace)" all_ranks_advance 3 150
say "$WAITED"
check "the deploy lease is given back in every container" lease_free
"$E2E_BUILD/drover" -i "$INV_S" history --job train >"$E2E_WORK/last.out" 2>"$E2E_WORK/last.err"
check "history records the abort, the reason once" \
	eval 'drover_said "aborted.*interrupted while the old gang was stopping on h1:101" &&
		[[ $(grep -o "interrupted while" "$E2E_WORK/last.out" | wc -l) == 1 ]]'

say "the next deploy goes through: back to v1 (the stubborn gang goes at SIGKILL, within the default switch deadline)"
drover rollback --job train --to "${v1:0:12}" --now
show_drover 5
check "rollback to v1 goes through (exit 0)" test "$DROVER_RC" = 0
check "v1 is current everywhere" all_current_is "$v1"
check "v1 trains on every rank" all_ranks_advance 3 120
finish
