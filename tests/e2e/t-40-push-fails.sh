#!/bin/bash
# t-50-push-fails: a push that fails inside the container (its target directory is missing: a
# plain file stands where the directory was, so nothing can be created under it).  pct push
# exits 0 all the same (PCT.md); the deploy must notice, stop before anything is stopped, and
# leave v1 running untouched.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
# the directory drover pushes blobs into, as seen in h1's pct log (e.g. /var/lib/drover/incoming)
dest=$(grep -E ' pct push 102 ' "$LAB_DIR/pct-h1.log" | tail -1 | awk '{ for (i = 1; i <= NF; i++) if ($i == "push") { print $(i + 3); exit } }')
dir=$(dirname "${dest:-/var/lib/drover/incoming/x}")
say "h1:102 receives pushes in $dir; replacing that directory by a plain file"
case $dir in /var/lib/drover/* | /tmp/* | /var/tmp/*) ;; *) fatal "unexpected push directory '$dir'" ;; esac
ct h1:102 sh -c "rm -rf '$dir' && echo 'not a directory' > '$dir'"
pids_before=$(all_pids)
printf '    workers before: %s\n' "$pids_before"
pct_mark

d=$(make_release v5 train.seed=5)
say "drover deploy v5"
drover deploy "$d" --job train
show_drover 15
check "deploy v5 exits non-zero" test "$DROVER_RC" != 0
check "deploy names the failed push or verification" drover_said 'push|verif|sha|corrupt|missing|No such|Not a directory|release add|h1:102|102'
pids_after=$(all_pids)
printf '    workers after:  %s\n' "$pids_after"
check "no worker was stopped or restarted (same pids in every container)" test "$pids_before" = "$pids_after"
check "every container is still on v1" all_current_is "$v1"
no_activate() { ! pct_since h1 | grep -E -q 'activate|[ ]stop[ ]'; ! pct_since h2 | grep -E -q 'activate|[ ]stop[ ]'; }
check "pct logs show no activate/stop after the failed push" no_activate
pct_since h1 | grep -q 'pct push 102' ; check "the push to h1:102 was attempted (pct log)" test $? = 0
check "v1's steps still advance, Ktok/s > 0" all_ranks_advance 3 5

ct h1:102 sh -c "rm -f '$dir' && mkdir -p '$dir'"
finish
