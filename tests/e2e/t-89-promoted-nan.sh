#!/bin/bash
# t-89-promoted-nan: a promoted release whose loss goes non-finite later.  v1 is promoted, v89
# is deployed and promoted; then every rank of v89 is killed (an OOM kill, say: for a promoted
# release an infrastructure fault, restarted from its checkpoint) and the restarted run's loss
# is NaN (drover-train's nan_at knob, set by the release's own wrapper only once the test's
# flag file is in the container: no step count can say "after the promote", the rate depends
# on the machine's load).  Each agent stops v89 for the non-finite loss instead of restarting it
# blindly (state failed, reason code nonfinite) and marks it bad ("stopped while promoted");
# `drover status` warns under the table, `drover history` has the agents' own `failed` record
# with reason code agent-stopped.  The agent does not go back to v1 by itself (a promoted
# release is the job's good release; docs/agent.md "Bad releases"): `drover rollback --job
# train` does, and after it a plain rollback never picks v89 again (it picked it as "the
# previous good release" before the agents marked it: the old bug this catches), and
# `rollback --to v89` is refused without --force.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
FLAG=/run/drover-e2e-t89-nan
for c in $E2E_CTS; do ct "$c" rm -f "$FLAG"; done
INV_N="$E2E_WORK/inventory-t89.ini"
inv_variant "$INV_N" nanwrap # the job through the release's wrapper (this test is about after the promote)
d=$(make_release v89 train.seed=89)
release_script "$d" nanwrap <<EOF
#!/bin/sh
# t-89: once the test's flag is in the container, every run of this release diverges at once
[ "\$1" = train ] && [ -e $FLAG ] && export DROVER_TRAIN_FAULT=nan_at=0
exec ./bin/drover-train "\$@"
EOF

say "drover deploy v89 (promoted: its loss is finite until the flag is set)"
INV="$INV_N" deploy_promoted v89 "$d"
v89=$DEPLOYED
promoted_everywhere() {
	local n
	n=$(status_json | jq --arg r "$v89" '[.jobs[] | select(.job == "train") | .containers[] | select(.good == $r)] | length')
	[[ $n == 3 ]]
}
check "v89 is the good release in every container" promoted_everywhere

say "the flag set in every container, then every rank of v89 killed: the restart runs on NaN"
for c in $E2E_CTS; do ct "$c" touch "$FLAG"; done
pids0=$(all_pids)
for c in $E2E_CTS; do
	p=$(ct_pids "$c")
	[[ -n $p ]] && ct "$c" kill -9 $p
done
say "killed: $pids0"
failed_everywhere() {
	local doc
	doc=$(status_json | jq -c '[.jobs[] | select(.job == "train") | .containers[] | {container, state, reason_code, current}]')
	printf '    %s\n' "$doc"
	[[ $(jq --arg r "$v89" '[.[] | select(.state == "failed" and .reason_code == "nonfinite" and .current == $r)] | length' <<<"$doc") == 3 ]]
}
check "every agent stops v89 for the non-finite loss (state failed, reason code nonfinite)" wait_until 120 failed_everywhere
check "no worker runs any more (v89 is not restarted blindly)" no_worker_anywhere
check "... and no agent went back to v1 by itself (v89 is the job's good release)" all_current_is "$v89"
marked_bad_everywhere() {
	local n
	n=$(status_json | jq --arg r "$v89" '[.jobs[] | select(.job == "train") | .containers[] |
		select([.bad // [], .bad_reasons // []] | transpose | any(.[0] == $r and (.[1] | test("stopped while promoted"))))] | length')
	printf '    containers marking v89 bad (stopped while promoted): %s\n' "$n"
	[[ $n == 3 ]]
}
check "status -o json: v89 marked bad in every container, stopped while promoted" marked_bad_everywhere
drover status --job train
show_drover 6
check "drover status warns that the good release v89 is marked bad, naming the way out" \
	drover_said "job 'train': its good release ${v89:0:12} is marked bad by the agents of h1:101, h1:102, h2:201 \((h1:101: )?stopped while promoted: .*non-finite.*\): a plain rollback never goes to it; .*rollback --job train. goes to an earlier good release"
history_has_agent_stop() {
	local rec
	rec=$("$E2E_BUILD/drover" -i "$INV" history --job train -o json 2>/dev/null |
		jq -c --arg r "$v89" '[.history[] | select(.release == $r and .result == "failed")] | last')
	printf '    %s\n' "$rec"
	jq -e '.reason_code == "agent-stopped"' <<<"$rec" >/dev/null
}
check "drover history has the agents' failed record of v89, reason code agent-stopped" history_has_agent_stop

say "drover rollback --job train: from the failed v89 to v1"
drover rollback --job train
show_drover 4
check "rollback exits 0 ($DROVER_RC)" test "$DROVER_RC" = 0
check "it went to v1" drover_said "rolled job 'train' back to ${v1:0:12}"
check "every container runs v1" all_current_is "$v1"
check "v1 trains again on all three ranks" all_ranks_advance 3 90

say "drover rollback --job train --dry-run: v89 is never where a plain rollback goes"
pids0=$(all_pids)
drover rollback --job train --dry-run
show_drover 4
check "it never goes to v89 (it was 'the previous good release' while unmarked)" \
	eval '! drover_said "would go from ${v1:0:12} to .*${v89:0:12}"'
check "it says it skips v89, stopped by its agent while it ran as the promoted release" \
	drover_said "skipping ${v89:0:12} \(v89\): its agent stopped it for job 'train' at .* while it ran as the promoted release"
check "nothing moved: v1 current everywhere, the same workers" \
	eval 'all_current_is "$v1" && [[ "$(all_pids)" == "$pids0" ]]'

pct_mark
drover rollback --job train --to "${v89:0:12}"
show_drover 3
check "rollback --to v89 without --force is refused, exit 1 ($DROVER_RC)" test "$DROVER_RC" = 1
check "... naming v89 and --force" drover_said "${v89:0:12}.*--force"
check "nothing moved: v1 current everywhere" all_current_is "$v1"
for c in $E2E_CTS; do ct "$c" rm -f "$FLAG"; done
finish
