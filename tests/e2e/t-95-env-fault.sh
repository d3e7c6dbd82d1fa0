#!/bin/bash
# t-95-env-fault: a release whose workers fail to start their device (drover-train exit 9, here
# backend.device = cuda on the lab's GPU-less containers) is an environment fault, not the
# release's: the agents stop the job marked "needs attention" (no rollback, no restart loop),
# deploy exits 8 without reverting; the next deploy there is refused while gpu-check fails (the
# lab has no NVIDIA driver), and goes through with --force.  Issue 12.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)

d=$(make_release v95 backend.device=cuda train.seed=95)
say "drover deploy v95 (device cannot start: exit 9)"
drover deploy "$d" --job train
show_drover 8
check "deploy exits 8 (environment fault, docs/controller.md)" test "$DROVER_RC" = 8
check "deploy says ENVIRONMENT FAULT and does not revert" drover_said 'ENVIRONMENT FAULT.*not reverted'
not_on_v1() { local c; for c in $E2E_CTS; do [[ $(ct_current "$c") != "$v1"* ]] || return 1; done; }
check "nothing was rolled back to v1 (the release is not blamed)" not_on_v1
marked() { status_json | jq -e '[.jobs[].containers[] | select(.state == "failed" and (.reason | startswith("needs attention: environment fault:")))] | length >= 1' >/dev/null; }
check "status marks the container(s) as needing attention" wait_until 30 marked
restarts_stay() { status_json | jq -e '[.jobs[].containers[].restarts] | max == 0' >/dev/null; }
check "no restart loop (restarts stay 0)" restarts_stay
drover status -o wide
check "status -o wide shows the reason" drover_said 'needs attention'

say "drover deploy v1 while the environment fault stands"
pct_mark
drover deploy "$E2E_WORK/releases/v1" --job train
show_drover 6
check "deploy exits 1 (refused: gpu-check fails where the fault was)" test "$DROVER_RC" = 1
check "the refusal names the GPU environment and --force" drover_said 'NVIDIA user-space driver.*--force'
no_push() { ! pct_since_has h1 ' pct push ' && ! pct_since_has h2 ' pct push '; }
check "nothing was pushed" no_push

say "drover deploy v1 --force"
drover deploy "$E2E_WORK/releases/v1" --job train --force
show_drover 6
check "deploy --force exits 0" test "$DROVER_RC" = 0
check "every container is on v1 again" all_current_is "$v1"
check "v1's steps advance again" all_ranks_advance 3 6
finish
