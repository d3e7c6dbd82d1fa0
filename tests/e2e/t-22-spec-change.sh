#!/bin/bash
# t-22-spec-change: the inventory's job spec changes, the release does not.  (1) A new env entry
# for the same release is a deploy: relaunch, probation, promote, and the workers run with it;
# (2) deploying again with nothing changed is still "nothing to do"; (3) a spec change whose
# worker cannot start (an unknown argument: drover-train exits 2) is reverted, and the gang runs
# the good release again with the good spec (the env of (1), without the bad argument), never the
# old release under the new spec.  Ends by deploying v1 with the lab's own spec again.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
LAB_INV=$INV
INV="$E2E_WORK/inventory-spec.ini" # drover and status_json read $INV
d="$E2E_WORK/releases/v1"

# a copy of the lab's inventory with extra lines in [job train] (after its header).  Its
# tolerance is 0.9 (not part of the job spec): the verdicts here are about the spec, and on a
# machine that other labs load, a throughput interval that stays wider than the lab's tolerance
# keeps a probation measuring until max_probation_time
spec_inventory() { # spec_inventory LINE...
	awk -v extra="$(printf '%s\n' "$@")" '/^tolerance *=/ { print "tolerance = 0.9"; next } { print }
		/^\[job train\]$/ && extra != "" { print extra }' "$LAB_INV" >"$INV"
}
# every drover-train process of every container has the variable $1 in its environment
workers_env_has() {
	local c p n=0
	for c in $E2E_CTS; do
		for p in $(ct_pids "$c"); do
			ct "$c" sh -c "tr '\0' '\n' </proc/$p/environ" | grep -qx -- "$1" || { echo "    $c pid $p lacks $1"; return 1; }
			n=$((n + 1))
		done
	done
	((n == 3))
}
# no drover-train process of any container has the argument $1
workers_lack_arg() {
	local c p n=0
	for c in $E2E_CTS; do
		for p in $(ct_pids "$c"); do
			! ct "$c" sh -c "tr '\0' '\n' </proc/$p/cmdline" | grep -qx -- "$1" || { echo "    $c pid $p has $1"; return 1; }
			n=$((n + 1))
		done
	done
	((n == 3))
}
# every container reports a spec digest for the job, current == good
spec_on_good() {
	status_json | jq -e '[.. | objects | select(has("spec_digest") and has("good"))] |
		length == 3 and all(.spec_digest != null and .spec_digest == .good_spec_digest)' >/dev/null
}
digests() { status_json | jq -r '[.. | objects | select(has("spec_digest") and has("good")) | .spec_digest // "none"] | join(" ")'; }

say "(1) the same release v1, job spec with a new env entry"
spec_inventory "env = OMP_DROVER_E2E=spec2"
before=$(all_pids)
drover deploy "$d" --job train
show_drover 12
check "deploy exits 0" test "$DROVER_RC" = 0
check "deploy does not say 'nothing to do'" eval '! drover_said "nothing to do"'
check "deploy says the job spec changed (env)" drover_said 'job spec changed: .*env'
check "deploy promoted it" drover_said 'promoted'
check "every container is still on v1" all_current_is "$v1"
check "the gang was relaunched (new worker pids)" test "$(all_pids)" != "$before"
check "every worker runs with OMP_DROVER_E2E=spec2" workers_env_has OMP_DROVER_E2E=spec2
check "status: every container reports the spec digest, promoted (current == good)" spec_on_good
good_digests=$(digests)
printf '    spec digests: %s\n' "$good_digests"
check "the history row says it was a spec change" eval '"$E2E_BUILD/drover" -i "$INV" history -o json 2>/dev/null | grep -q "job spec changed"'

say "(2) deploy again, nothing changed"
before=$(all_pids)
drover deploy "$d" --job train
show_drover 4
check "deploy exits 0" test "$DROVER_RC" = 0
check "deploy says nothing to do" drover_said 'nothing to do'
check "the workers were left alone (same pids)" test "$(all_pids)" = "$before"

say "(3) a spec change whose worker cannot start: an unknown argument"
spec_inventory "env = OMP_DROVER_E2E=spec2" "arg = --no-such-flag"
drover deploy "$d" --job train
show_drover 15
check "deploy exits 3 (reverted)" test "$DROVER_RC" = 3
check "deploy says the job spec changed (arg)" drover_said 'job spec changed: .*arg'
check "deploy says it reverted" drover_said 'revert'
check "every container is still on v1" all_current_is "$v1"
check "status: back on the good spec everywhere" wait_until 60 spec_on_good
check "status: the same spec digests as after (1)" eval 'test "$(digests)" = "$good_digests"'
three_workers() { local c n=0; for c in $E2E_CTS; do n=$((n + $(ct_pids "$c" | wc -w))); done; ((n == 3)); }
check "three workers run again" wait_until 60 three_workers
check "the workers run without the bad argument" workers_lack_arg --no-such-flag
check "the workers run with the good spec's env (not the lab's older spec)" workers_env_has OMP_DROVER_E2E=spec2
check "v1's steps advance again" all_ranks_advance 3 60
check "v1 is not marked bad (a spec change does not blame the release)" \
	eval '! status_json | jq -e --arg id "$v1" "[.. | objects | select(has(\"bad\")) | .bad[]] | index(\$id)" >/dev/null'

say "(4) rollback after a promoted spec change: back to the same release with its earlier spec"
# the good pair is (v1, spec2), promoted in (1); before it, (v1, the lab's spec)
spec_inventory "env = OMP_DROVER_E2E=spec2"
drover rollback --job train --dry-run
show_drover 3
check "rollback --dry-run exits 0" test "$DROVER_RC" = 0
check "rollback --dry-run names the same release with its earlier spec" drover_said 'would go from .* to the same release .* with the job spec it was promoted with before'
check "rollback --dry-run changed nothing" workers_env_has OMP_DROVER_E2E=spec2
drover rollback --job train
show_drover 8
check "rollback exits 0" test "$DROVER_RC" = 0
check "rollback says it goes to v1's earlier job spec" drover_said 'to the same release .* with the job spec it was promoted with before'
check "rollback says the inventory asks for another spec" drover_said 'the inventory asks for another spec'
check "every container is still on v1" all_current_is "$v1"
check "the workers run the earlier spec again (without OMP_DROVER_E2E=spec2)" \
	wait_until 60 eval '! workers_env_has OMP_DROVER_E2E=spec2 >/dev/null'
check "status: the earlier spec is promoted everywhere (current == good)" wait_until 60 spec_on_good
check "status: other spec digests than (1)'s" eval 'test "$(digests)" != "$good_digests"'
check "v1's steps advance" all_ranks_advance 3 60
drover plan "$d" --job train
show_drover 6
check "plan says the inventory's spec differs (env)" drover_said 'job spec changed: .*env'

say "(5) nproc_per_node 1 -> 2 promoted, then rolled back: one rank per container again"
# the lab's spec with two ranks per container (the rollback of (4) promoted the lab's spec again)
awk '/^tolerance *=/ { print "tolerance = 0.9"; next } /^nproc_per_node *=/ { print "nproc_per_node = 2"; next }
	{ print }' "$LAB_INV" >"$INV"
workers() { local c n=0; for c in $E2E_CTS; do n=$((n + $(ct_pids "$c" | wc -w))); done; ((n == $1)); }
drover deploy "$d" --job train
show_drover 6
check "deploy of nproc_per_node 2 exits 0" test "$DROVER_RC" = 0
check "deploy says nproc_per_node 1 -> 2" drover_said 'job spec changed: nproc_per_node 1 -> 2'
check "... on stderr, with the progress lines" said_in 'job spec changed: nproc_per_node 1 -> 2' last.err
check "six workers run (two per container)" wait_until 60 workers 6
drover rollback --job train
show_drover 6
check "rollback exits 0 (the recovery waits for one rank per container, not the inventory's two)" \
	test "$DROVER_RC" = 0
check "rollback says it goes to v1's earlier job spec" drover_said 'to the same release .* with the job spec it was promoted with before'
check "three workers run (one per container)" wait_until 60 workers 3
check "status: promoted everywhere (current == good)" wait_until 60 spec_on_good
drover plan "$d" --job train
check "plan says nproc_per_node 1 -> 2 again" drover_said 'job spec changed: nproc_per_node 1 -> 2'

say "back to the lab's own spec"
spec_inventory
drover deploy "$d" --job train
show_drover 4
check "deploy of v1 with the lab's spec exits 0" test "$DROVER_RC" = 0
check "the workers run without OMP_DROVER_E2E again" eval '! workers_env_has OMP_DROVER_E2E=spec2 >/dev/null'
INV=$LAB_INV
drover deploy "$d" --job train
check "the lab's own inventory: nothing to do" drover_said 'nothing to do'
finish
