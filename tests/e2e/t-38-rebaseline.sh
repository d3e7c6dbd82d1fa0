#!/bin/bash
# t-38-rebaseline: the throughput baseline is the samples of the last promotion's probation.  One
# measured while the containers were faster (here: before a CPU quota slows every container, as a
# noisy neighbour, a throttled host or a driver update would) fails every later release on
# throughput, an identical one too, and nothing but a promote by hand used to reset it.
# `drover rebaseline --job J` measures the running good release again, nothing switched, and
# makes those samples the baseline: the same release then passes.  Once the quota is lifted, a
# second rebaseline raises it again.  A job that is stopped is refused, the baseline unchanged;
# deploying the good release itself (the release the baseline was measured on) to start it again
# is not judged on throughput against itself, and the baseline stays.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
key_median() { # the baseline median drover caches for job train (empty when none)
	jq -r '.baselines | to_entries[] | select(.key | startswith("train@")) | .value.ktok_s' \
		"$LAB_DIR/state/baselines.json" 2>/dev/null | head -n 1
}
quota() { # quota US: every container's CPU quota per 100 ms period (-1: none)
	local c
	for c in $E2E_CTS; do
		lxc-cgroup -P "$LAB_DIR/lxc" -n "$(ct_name "$c")" -- cpu.cfs_quota_us "$1" ||
			lxc-cgroup -P "$LAB_DIR/lxc" -n "$(ct_name "$c")" -- cpu.max "$([[ $1 = -1 ]] && echo max || echo "$1") 100000" ||
			return 1
	done
}
lower() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 < b + 0) }'; }
trap 'quota -1 >/dev/null 2>&1' EXIT

key_release() { # the release the cached baseline was measured on
	jq -r '.baselines | to_entries[] | select(.key | startswith("train@")) | .value.release' \
		"$LAB_DIR/state/baselines.json" 2>/dev/null | head -n 1
}

say "rebaseline v1 first, on the containers as fast as they are"
# an earlier test's rollback to v1 keeps the baseline of the release it left, or of v1 with
# another spec (t-22's nproc_per_node 2: 6 ranks): the baseline to start from is v1's as it runs
drover rebaseline --job train
show_drover 2
check "rebaseline v1 (exit 0)" test "$DROVER_RC" = 0
base0=$(key_median)
check "the baseline is v1's, measured now: ${base0:-none} Ktok/s" eval '[[ -n "$base0" && "$(key_release)" == "$v1" ]]'
check "every container gets a CPU quota of a twelfth of a core (a slower host from now on)" quota 8000
sleep 5

say "rebaseline of a stopped job: refused, baseline unchanged"
drover stop --job train
drover rebaseline --job train
show_drover 3
check "rebaseline of the stopped job exits 1" test "$DROVER_RC" = 1
check "... saying it is refused, the baseline unchanged, and why" \
	drover_said "rebaseline of job 'train' refused, the baseline is unchanged: its gang on h1:101 is stopped"
check "... and the baseline is what it was" test "$(key_median)" = "$base0"

say "deploy v1 itself (the good release, its spec) to start the stopped job on the slower containers"
# It is the release the baseline was measured on: judged on throughput it "regressed" against
# itself, was reverted to itself (exit 3) and recorded failed.  Now the throughput rule is
# skipped, the baseline kept, and the rate said against it.
drover deploy "$E2E_WORK/releases/v1" --job train
show_drover 6
check "it says the throughput rule is skipped: v1 is its own baseline" \
	drover_said "probation: ${v1:0:12} is the good release of job 'train' with the job spec it was promoted with: the throughput rule is skipped \\(a regression could only revert it to itself\\), and the baseline \\(${v1:0:12}, median [0-9.]+ Ktok/s\\) stays"
check "it is promoted (exit 0), not reverted to itself" eval '(( DROVER_RC == 0 )) && drover_said "promoted ${v1:0:12}"'
check "... and says its slower rate against the baseline kept, and what to look at" \
	drover_said "${v1:0:12} ran at [0-9.]+ Ktok/s, -[0-9.]+% against its own baseline of [0-9.]+ Ktok/s \\(kept\\): the release is the same, so the cause lies outside it"
check "the baseline is what it was" test "$(key_median)" = "$base0"
check "v1 runs everywhere and trains" eval 'all_current_is "$v1" && all_ranks_advance 3 90'
"$E2E_BUILD/drover" -i "$INV" history --job train -o json >"$E2E_WORK/t38-history.json" 2>/dev/null
check "history records it promoted, not failed" \
	eval 'jq -e "[.history[] | select(.release | startswith(\"${v1:0:12}\"))] | last | .result == \"promoted\"" "$E2E_WORK/t38-history.json" >/dev/null'

d=$(make_release v1-again)
say "deploy v1-again (v1's files, another id) on the slower containers: judged against v1's faster baseline"
drover deploy "$d" --job train
show_drover 4
check "it fails on throughput alone and is reverted (exit 3)" \
	eval '(( DROVER_RC == 3 )) && drover_said "throughput regression"'
check "every container is back on v1" all_current_is "$v1"
check "v1 trains again" all_ranks_advance 3 90

say "drover rebaseline --job train"
drover rebaseline --job train
show_drover 6
check "rebaseline exits 0" test "$DROVER_RC" = 0
check "it says it measures the running good release, nothing switched" \
	drover_said "rebaseline: measuring the good release of job 'train', ${v1:0:12}, as it runs \\(3 ranks; nothing is switched\\)"
check "it says the new baseline and the old one" \
	drover_said "rebaselined job 'train' on ${v1:0:12}: baseline measured again: [0-9]+ samples, median [0-9.]+ Ktok/s \\(was [0-9a-f]{12}: [0-9]+ samples, median [0-9.]+ Ktok/s, -[0-9.]+%; "
base1=$(key_median)
say "baseline now: $base1 Ktok/s (was $base0)"
check "the cached baseline is lower than before" lower "$base1" "$base0"
check "v1 still runs everywhere, untouched" all_current_is "$v1"
check "the history records it" \
	eval '"$E2E_BUILD/drover" -i "$INV" history --job train -o json 2>/dev/null | jq -e "[.history[] | select(.result == \"rebaselined\")] | length >= 1" >/dev/null'
ct h1:101 /usr/local/bin/drover-agent baseline --job train >"$E2E_WORK/t38-agent-baseline.json" 2>/dev/null
check "the agents keep the new samples (drover-agent baseline)" \
	eval 'jq -e ".release | startswith(\"${v1:0:12}\")" "$E2E_WORK/t38-agent-baseline.json" >/dev/null'
say "the controller's cache of the samples dropped: the next deploy reads the agents' copy"
rm -f "$LAB_DIR/state/samples/"*.json

say "deploy v1-again once more: judged against the baseline just measured"
drover deploy "$d" --job train
show_drover 4
check "now it is promoted (exit 0)" eval '(( DROVER_RC == 0 )) && drover_said "promoted"'
check "every container runs v1-again" all_current_is "$(ct_current h1:101)"

say "the quota lifted: a second rebaseline raises the baseline again"
check "the quota is lifted" quota -1
sleep 5
drover rebaseline --job train
show_drover 3
check "rebaseline exits 0" test "$DROVER_RC" = 0
base2=$(key_median)
say "baseline now: $base2 Ktok/s (was $base1 under the quota)"
check "the baseline is higher than under the quota" lower "$base1" "$base2"
finish
