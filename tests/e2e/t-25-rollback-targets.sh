#!/bin/bash
# t-25-rollback-targets: rollback targets are always good (issue 11).  A release that failed
# probation is marked bad in every agent's status and `drover rollback` never picks it (with v1
# the only good release it refuses instead of activating the failed one).  A deploy whose
# rollback target (v1) was deleted from one container's store is refused before anything is
# pushed or stopped, naming the container.
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

say "drover rollback --job train (v1 is the only good release)"
pids0=$(all_pids)
drover rollback --job train
show_drover 5
check "rollback refuses (exit != 0): no earlier good release, v2b is not one" test "$DROVER_RC" != 0
check "it says why" drover_said 'no earlier good release'
check "nothing moved: v1 still current everywhere" all_current_is "$v1"
check "nothing was restarted" eval '[[ "$(all_pids)" == "$pids0" ]]'
drover rollback --job train --to "${v2b:0:12}"
check "rollback --to the bad release without --force is refused" test "$DROVER_RC" != 0
check "it says the release failed probation" drover_said 'failed probation'

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
