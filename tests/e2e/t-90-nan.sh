#!/bin/bash
# t-40-nan: deploy v4 with a learning rate that diverges: non-finite loss detected, reverted.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
d=$(make_release v4 train.lr=10 train.warmup_steps=0 train.grad_clip=0 train.seed=4)
say "drover deploy v4 (lr 10, no warmup, no clipping)"
t0=$SECONDS
drover deploy "$d" --job train
say "deploy took $((SECONDS - t0))s"
show_drover 15
check "deploy v4 exits non-zero" test "$DROVER_RC" != 0
check "deploy names the loss rule (non-finite loss)" drover_said 'finite|nan|inf|loss'
check "deploy says it reverted" drover_said 'revert|roll(ed)? ?back'
check "every container is back on v1" all_current_is "$v1"
check "v1's steps advance again, Ktok/s > 0" wait_until 60 all_ranks_advance 3 5
finish
