#!/bin/bash
# t-35-ct-stopped: a container stopped (`pct stop`) under the gang during probation.  It used to
# read "no status for job 'train' from h1:102 within healthy_deadline" a minute and more later,
# then "its agent did not confirm the stop", pct's own "not running" thrown away.  Now the
# probation fails at once naming the container and what pct said; the release is not marked bad
# (the container's stop is not its failure); the revert puts the good release back in the other
# containers, says the stopped one got nothing and what to do, and exits 4 (REVERT FAILED: the
# gang cannot form without it).  Afterwards the container is started again and the gang formed
# again by deploying the good release, as the message says, so the lab stays usable.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
d=$(make_release v35 train.seed=35)
lab_pct() { DROVER_LAB_DIR=$LAB_DIR DROVER_LAB_HOST=$1 "$E2E_ROOT/tests/lab/pct" "${@:2}"; }

say "deploy v35; pct stop 102 on h1 during its probation"
"$E2E_BUILD/drover" -i "$INV" deploy "$d" --job train >"$E2E_WORK/st.out" 2>"$E2E_WORK/st.err" &
pid=$!
check "the deploy watches its probation" wait_until 180 said_in '^probation ' st.err
v35=$(ct_current h1:101)
t0=$(now_cs)
check "pct stop 102 on h1" lab_pct h1 stop 102
wait "$pid"
rc=$?
took=$(($(now_cs) - t0))
sed 's/^/    | /' "$E2E_WORK/st.out" "$E2E_WORK/st.err" | grep -v '^    | probation ' | tail -12
check "the verdict names the container and that it was stopped, with pct's words, at once ($(secs $took) s, healthy_deadline 90 s)" \
	eval 'grep -E -q "FAILED .* container h1:102 stopped during probation \(pct: .*not running" "$E2E_WORK/st.out" && ((took < 6000))'
check "no 'no status for ... within healthy_deadline', no 'did not confirm the stop'" \
	eval '! grep -E -q "no status (for|from)|did not confirm the stop" "$E2E_WORK/st.out" "$E2E_WORK/st.err"'
check "it says v35 is not marked bad (the stop is not the release's failure)" \
	grep -q "h1:102 was stopped under the gang: .* is not marked bad" "$E2E_WORK/st.out"
check "the revert names the stopped container: the good release was NOT started there" \
	grep -E -q "revert: h1:102: container stopped \(pct: .*\): the good release was NOT started there" "$E2E_WORK/st.err"
check "exit 4, REVERT FAILED saying what runs where and what to do (pct start 102 on h1, deploy the good release)" \
	eval '[[ $rc == 4 ]] && grep -E -q "REVERT FAILED for job .train.: 1 container stopped: h1:102 .*started in the other 2.*\`pct start 102\` on h1.*drover deploy DIR --job train" "$E2E_WORK/st.out"'
check "the other containers run the good release v1 again" eval 'for c in h1:101 h2:201; do [[ $(ct_current $c) == "$v1"* ]] || exit 1; done'
not_bad() { ct h1:101 cat /var/lib/drover/state.json | jq -e --arg id "$v35" '[.. | objects | select(has("bad")) | .bad[]? | tostring | select(contains($id))] | length == 0' >/dev/null; }
check "v35 is not marked bad in h1:101" not_bad
drover history --job train
check "history records revert-failed naming the stopped container" drover_said 'revert-failed .*h1:102'

say "start h1:102 again and form the gang by deploying v1, as the message says"
check "pct start 102 on h1" lab_pct h1 start 102
drover install --job train
show_drover 3
check "drover install starts its agent again (exit 0)" test "$DROVER_RC" = 0
drover deploy "$E2E_WORK/releases/v1" --job train
show_drover 4
check "deploy of v1 forms the gang again (exit 0 or 3: $DROVER_RC)" eval '[[ $DROVER_RC == 0 || $DROVER_RC == 3 ]]'
check "v1 is current everywhere" all_current_is "$v1"
check "every rank trains v1" all_ranks_advance 3 120
finish
