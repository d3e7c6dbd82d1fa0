#!/bin/bash
# t-25-rollback-targets: rollback targets are always good (issue 11).  A release that failed
# probation is marked bad in every agent's status and `drover rollback` never picks it (with v1
# the only good release it refuses instead of activating the failed one).  A deploy whose
# rollback target (v1) was deleted from one container's store is refused before anything is
# pushed or stopped, naming the container.  Deploying the failed release again warns first, from
# the job's history (when and why it failed), and runs its probation again.
# `drover rollback --to` it without --force is refused before any host is contacted, exit 1,
# naming the release, why it failed and --force (it was exit 2, after surveying every container);
# with a state_dir that lacks the history, after the survey, exit 1 too.  With --force it goes,
# fails again, and ends reverted (exit 3) with the agents' reason, v1 confirmed training.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
bad_d=$(make_release v2b data.train=/srv/drover-data/no-such-shard-2b.bin train.seed=25)
say "drover deploy v2b (missing data file: fails probation)"
drover deploy "$bad_d" --job train
check "deploy v2b exits 3 (reverted)" test "$DROVER_RC" = 3
check "every container is back on v1" all_current_is "$v1"
v2b=$(ct h1:101 sh -c 'grep "\"kind\":\"revert\"" /var/lib/drover/events.jsonl | tail -n 1' | sed -n 's/.*reverted on its own from \([0-9a-f]*\).*/\1/p')
say "v2b is ${v2b:-?}"
check "the agent's journal names the release it reverted from" test -n "$v2b"
marked_bad_everywhere() {
	local n
	n=$(status_json | jq --arg p "$v2b" '[.jobs[] | select(.job == "train") | .containers[] | select((.bad // []) | any(startswith($p)))] | length')
	printf '    containers marking %s bad: %s\n' "$v2b" "$n"
	[[ $n == 3 ]]
}
check "status shows v2b as bad in every container" marked_bad_everywhere
# the record says why in a code, not only in words (pastfail and notify decide on it): agent-revert
# where the verdict is the agent's own revert, "" where the verdict caught the rank's exit first
v2b_record_typed() {
	local rec
	rec=$("$E2E_BUILD/drover" -i "$INV" history --job train -o json 2>/dev/null |
		jq -c --arg p "$v2b" '[.history[] | select(.release | startswith($p))] | last')
	printf '    %s\n' "$rec"
	jq -e '(.reason_code | type) == "string" and ((.reason_code == "agent-revert") == (.reason | test("by itself")))' \
		<<<"$rec" >/dev/null
}
check "v2b's history record carries its reason code (agent-revert when the agent went back on its own)" v2b_record_typed
say "drover plan v2b: the plan warns as the deploy would (and says it in -o json)"
drover plan "$bad_d" --job train
show_drover 3
check "plan warns that v2b failed probation for job train before" \
	drover_said "warning: release ${v2b:0:12} \(.*\) failed probation for job 'train' before: .+; deploying it again runs a full probation"
drover plan "$bad_d" --job train -o json
check "plan -o json carries it as failed_before" \
	jq -e '.plans[0].failed_before | test("failed probation for job .train. before")' "$E2E_WORK/last.out"
say "drover deploy v2b again: warned (when and why it failed) before staging, then a full probation"
drover deploy "$bad_d" --job train
show_drover 4
check "it warns that v2b failed probation for job train before, naming when and why" \
	drover_said "warning: release ${v2b:0:12} \(.*\) failed probation for job 'train' before: [a-z-]+ at 20[0-9-]+ [0-9:]+ UTC: .+; deploying it again runs a full probation"
check "... and goes on: the deploy of v2b fails again (exit 3)" test "$DROVER_RC" = 3
check "every container is back on v1" all_current_is "$v1"

# Run alone, v1 is the job's only good release and the rollback refuses.  In suite order the
# containers' promoted histories hold more: t-22 promoted v1 with another job spec (the rollback
# would go to that pair), and t-23 left h1:101 out of v2's promotion (the histories differ, and
# the rollback is refused naming them; without t-22, only some containers have an earlier good
# release, refused too).  A dry run shows where it would go without moving the
# job off the lab's spec; whatever the history, v2b is never where it goes.
say "drover rollback --job train --dry-run (v2b failed probation: never a target)"
pids0=$(all_pids)
drover rollback --job train --dry-run
show_drover 5
check "it never names v2b" eval '! drover_said "${v2b:0:12}"'
check "it refuses (no earlier good release; histories differ) or goes to v1 with an earlier spec" \
	drover_said "no earlier good release|roll back to different releases|of job 'train' have an earlier good release to go back|would go from ${v1:0:12} to the same release ${v1:0:12}"
if ! drover_said 'would go from'; then
	check "the refusal exits != 0" test "$DROVER_RC" != 0
fi
check "nothing moved: v1 still current everywhere" all_current_is "$v1"
check "nothing was restarted" eval '[[ "$(all_pids)" == "$pids0" ]]'
# this controller's history knows v2b failed: refused before any host is contacted, as a
# refusal (exit 1), naming the release, why it failed and --force (it used to survey every
# container first and exit 2, the usage-error code)
pct_mark
drover rollback --job train --to "${v2b:0:12}"
show_drover 3
check "rollback --to the bad release without --force is refused with exit 1 ($DROVER_RC)" test "$DROVER_RC" = 1
check "it names the release, why it failed and --force" \
	drover_said "rollback of job 'train' refused, nothing was contacted, nothing changed: release ${v2b:0:12} \(v2b\) failed probation for job 'train': [a-z-]+ at 20[0-9-]+ [0-9:]+ UTC: .+; roll back to it only with --force"
no_host_contacted() { [[ $(host_execs_since h1) == 0 && $(host_execs_since h2) == 0 ]]; }
check "no host was contacted" no_host_contacted
# only the agents know (a state_dir without the history): refused after the survey, exit 1 too
INV_NH="$E2E_WORK/inventory-no-history.ini"
mkdir -p "$E2E_WORK/state-no-history"
sed "s|^state_dir = .*|state_dir = $E2E_WORK/state-no-history|" "$INV" >"$INV_NH"
"$E2E_BUILD/drover" -i "$INV_NH" rollback --job train --to "${v2b:0:12}" >"$E2E_WORK/last.out" 2>"$E2E_WORK/last.err"
DROVER_RC=$?
show_drover 3
check "without the history: refused after the survey, exit 1 ($DROVER_RC)" test "$DROVER_RC" = 1
check "... naming the release, that it failed probation, and --force" \
	drover_said "rollback of job 'train' refused, nothing changed: release ${v2b:0:12}.* failed probation for job 'train'.*; roll back to it only with --force"
check "nothing moved: v1 still current everywhere" all_current_is "$v1"

# With --force it goes: v2b fails again and the agents go back to v1 by themselves.  That ended
# ROLLBACK FAILED, exit 4 ('the job may be down'), "h1:102 runs <v1>, not the release <v2b> we
# reverted to", the agent's reason dropped, while the job ran v1.
say "drover rollback --to v2b --force: it fails again, the agents go back to v1 by themselves"
drover rollback --job train --to "${v2b:0:12}" --force
show_drover 4
check "the rollback ends reverted (exit 3), not ROLLBACK FAILED (exit 4): $DROVER_RC" test "$DROVER_RC" = 3
check "it says an agent went back to v1 by itself, with the cause" \
	drover_said "FAILED rollback of job 'train' to ${v2b:0:12}: ${v2b:0:12} did not recover: the agent on h[12]:[0-9]+ went back to ${v1:0:12} by itself \\(.*shard"
check "... and reverts as a failed deploy does: each agent confirms, v1 trains again" \
	drover_said "reverted job 'train' to ${v1:0:12}: .*training again"
check "every container is back on v1, training" eval 'all_current_is "$v1" && all_ranks_advance 3 90'
# the agents' own revert leaves the job 'reverted' (status says so) until the next deploy
check "a deploy of v1 goes through (exit 0): the job as the tests after this one expect it" \
	eval 'drover deploy "$E2E_WORK/releases/v1" --job train; (( DROVER_RC == 0 )) && all_current_is "$v1"'

say "v1 taken out of h1:102's store, then a deploy"
ct h1:102 mv "/var/lib/drover/releases/$v1" /var/lib/drover/v1-aside
ok_d=$(make_release v5 train.seed=5)
pids0=$(all_pids)
nrel0=$(ct h1:101 ls /var/lib/drover/releases | wc -l)
drover deploy "$ok_d" --job train
show_drover 6
check "deploy is refused (exit != 0)" test "$DROVER_RC" != 0
check "it names the container and the missing rollback target" drover_said "h1:102.*(not in the store|verif)"
check "nothing was stopped: the same workers run, v1 current everywhere" \
	eval '[[ "$(all_pids)" == "$pids0" ]] && all_current_is "$v1" >/dev/null'
check "v5 was not pushed (h1:101 holds as many releases as before)" \
	eval '[[ $(ct h1:101 ls /var/lib/drover/releases | wc -l) == "$nrel0" ]]'
ct h1:102 mv /var/lib/drover/v1-aside "/var/lib/drover/releases/$v1"
check "v1 is back in h1:102's store" ct h1:102 /usr/local/bin/drover-agent release verify "$v1"
finish
