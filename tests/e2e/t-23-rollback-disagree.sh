#!/bin/bash
# t-23-rollback-disagree: `drover rollback` decides from every container, never from the first one
# that answers.  h1:101 is left out of a deploy (an inventory of the job without it, as when a
# container was stopped or taken out while the others moved on): h1:102 and h2:201 promote v2,
# h1:101 still calls v1 good.  A rollback with the lab's inventory used to take h1:101's view (the
# first container) and send the job to v1's predecessor, or say there was none; now it is refused,
# nothing changed, naming every container's release and good release and what to do (--to).
# `rollback --to v1` then brings every container to v1, which the following tests start from.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
LAB_INV=$INV
d2=$(make_release v2-t23 train.seed=23)

say "v2 deployed to h1:102 and h2:201 only (an inventory without h1:101)"
INV="$E2E_WORK/inventory-two.ini"
awk '/^\[/ { in_job = ($0 == "[job train]") }
	in_job && /^containers *=/ { print "containers = h1:102 h2:201"; next }
	/^tolerance *=/ { print "tolerance = 0.9"; next } { print }' "$LAB_INV" >"$INV"
drover deploy "$d2" --job train
show_drover 6
check "deploy of v2 to two containers exits 0" test "$DROVER_RC" = 0
v2=$(ct_current h1:102)
printf '    v2 is %s\n' "${v2:-?}"
check "h1:102 runs v2" test -n "$v2" -a "$v2" != "$v1"
check "h1:101 still runs v1" test "$(ct_current h1:101)" = "$v1"
INV=$LAB_INV

say "drover rollback --job train: the containers disagree on the good release"
drover rollback --job train
show_drover 4
check "rollback exits 1" test "$DROVER_RC" = 1
check "rollback says the containers disagree on the good release" drover_said 'disagree on its good release'
check "rollback names h1:101 with v1 good" drover_said "h1:101 runs ${v1:0:12}, good ${v1:0:12}"
check "rollback names h2:201 with v2 good" drover_said "h2:201 runs ${v2:0:12}, good ${v2:0:12}"
check "rollback says what to do (--to ID)" drover_said '--to ID'
check "nothing changed: h1:102 still runs v2" test "$(ct_current h1:102)" = "$v2"
check "nothing changed: h1:101 still runs v1" test "$(ct_current h1:101)" = "$v1"

say "drover rollback --job train --to v1: every container goes there"
drover rollback --job train --to "${v1:0:12}"
show_drover 6
check "rollback --to v1 exits 0" test "$DROVER_RC" = 0
check "every container runs v1" all_current_is "$v1"
check "v1's steps advance" all_ranks_advance 3 90
drover deploy "$E2E_WORK/releases/v1" --job train
check "the lab's inventory and v1: nothing to do" drover_said 'nothing to do'
finish
