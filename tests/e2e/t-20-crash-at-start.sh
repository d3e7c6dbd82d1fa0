#!/bin/bash
# t-20-crash-at-start: deploy v2 whose worker fails at start (its config names a missing data
# file): reverted to v1; v1 resumes from its checkpoint (its step continues, not from 0); deploy
# exits non-zero with the reason.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
has_checkpoint() { [[ -n $(ct h1:101 ls /var/lib/drover/runs/train/checkpoints/ 2>/dev/null) ]]; }
check "v1 has written a checkpoint before the test" wait_until 60 has_checkpoint
before=$(status_json | rank_table | sort -n)
printf '    v1 before: %s\n' "$(echo "$before" | tr '\n' ';')"

d=$(make_release v2 data.train=/srv/drover-data/no-such-shard.bin)
say "drover deploy v2 (missing data file)"
t0=$SECONDS
drover deploy "$d" --job train
say "deploy took $((SECONDS - t0))s"
show_drover 15
check "deploy v2 exits 3 (reverted to the last good release, docs/errors.md)" test "$DROVER_RC" = 3
check "deploy names the failure (crash/exit at start)" drover_said 'crash|exit|fail|died|no-such-shard|heartbeat'
check "deploy says it reverted" drover_said 'revert|roll(ed)? ?back'
check "the revert's progress lines say recovery, not probation (the demo's label)" \
	eval 'grep -q "^recovery " "$E2E_WORK/last.err" && ! sed -n "/^reverting job/,\$p" "$E2E_WORK/last.err" | grep -q "^probation "'
check "the reason names the missing shard, in the worker's own words" drover_said "no-such-shard.bin"
check "... and points at the workers' log, naming the job" drover_said 'failed probation: .*; see `drover logs --job train`'
check "every container is back on v1" all_current_is "$v1"

resumed_ok() {
	local t
	t=$(status_json | rank_table)
	printf '    after: %s\n' "$(echo "$t" | tr '\n' ';')"
	[[ $(echo "$t" | grep -c .) == 3 ]] || return 1
	# release column is v1 (id or name), resumed_from >= 1, step > resumed_from - 1
	echo "$t" | awk -F'\t' -v id="${v1:0:12}" '{ if ($5 < 1 || $2 < $5) bad = 1 } END { exit bad }'
}
check "every v1 rank resumed from a checkpoint (resumed_from >= 1, step continues from it)" wait_until 90 resumed_ok
runs_v1() {
	status_json | jq -r '[.. | objects | select(has("rank") and has("hb")) | .hb.release // ""] | .[]' |
		awk -v id="${v1:0:12}" -v n=v1 '{ if (index($0, id) != 1 && $0 != n) bad = 1; c++ } END { exit (bad || c != 3) }'
}
check "the running ranks are v1's" runs_v1
check "v1's steps advance again, Ktok/s > 0" all_ranks_advance 3 60
check "v2's checkpoint dir was not wiped (v1 checkpoints still there)" has_checkpoint
finish
