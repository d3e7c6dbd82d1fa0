#!/bin/bash
# t-30-slow: deploy v3 whose config makes training markedly slower (a much larger model):
# throughput regression detected, reverted to v1, deploy exits non-zero with the reason.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
d=$(make_release v3 model.layers=4 model.dim=256 model.heads=4 model.seq=128)
say "drover deploy v3 (4x wider, 2x deeper, 2x longer context)"
t0=$SECONDS
drover deploy "$d" --job train
say "deploy took $((SECONDS - t0))s"
show_drover 15
check "deploy v3 exits 3 (reverted to the last good release, docs/errors.md)" test "$DROVER_RC" = 3
check "deploy names the throughput rule (Ktok/s below the baseline)" drover_said 'throughput|ktok|tok/s|regress|baseline'
check "deploy says it reverted" drover_said 'revert|roll(ed)? ?back'
check "every container is back on v1" all_current_is "$v1"
check "v1's steps advance again, Ktok/s > 0" all_ranks_advance 3 90
finish
