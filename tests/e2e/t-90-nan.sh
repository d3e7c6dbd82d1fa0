#!/bin/bash
# t-90-nan: deploy v4 with a learning rate that diverges: non-finite loss detected, reverted, and
# v1 trains again from a checkpoint that v1 wrote (not from one the diverging v4 wrote: v4 has
# the same model shape, so its checkpoints look compatible).  Runs last: when this goes wrong the
# job is down, and the tests after it would only fail for the same reason.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
# checkpoint_every=1: v4 writes checkpoints (finite loss, weights already wrecked) before its
# loss goes non-finite, every time, not only when a step number happens to line up
d=$(make_release v4 train.lr=10 train.warmup_steps=0 train.grad_clip=0 train.seed=4 train.checkpoint_every=1)
say "drover deploy v4 (lr 10, no warmup, no clipping)"
t0=$SECONDS
drover deploy "$d" --job train
say "deploy took $((SECONDS - t0))s"
show_drover 15
check "deploy v4 exits 3 (reverted to the last good release, docs/errors.md)" test "$DROVER_RC" = 3
check "deploy names the loss rule (non-finite loss)" drover_said 'finite|nan|inf|loss'
check "deploy says it reverted" drover_said 'revert|roll(ed)? ?back'
check "every container is back on v1" all_current_is "$v1"
check "v1's steps advance again, Ktok/s > 0" all_ranks_advance 3 90
resumed_from_v1() { # only the rank that logs progress (rank 0) prints the resume line
	local c line n=0
	for c in $E2E_CTS; do
		line=$(ct "$c" sh -c 'cat /var/lib/drover/runs/train/logs/rank*.log 2>/dev/null | grep "resuming from" | tail -n 1')
		[[ -n $line ]] || continue
		printf '    %s: %s\n' "$c" "$line"
		[[ $line == *"written by release '$v1"* ]] || return 1
		n=$((n + 1))
	done
	((n > 0))
}
check "v1 resumed from a checkpoint written by v1 itself" resumed_from_v1
finish
