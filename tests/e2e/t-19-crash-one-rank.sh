#!/bin/bash
# t-19-crash-one-rank: deploy v19 whose rank 2 (in h2:201) aborts mid-probation.  The ranks in
# the other containers then exit 8 (peer_lost): they ended because of rank 2, and their agents'
# documents come first (the controller reads h1 before h2).  The verdict must name h2:201 and
# the abort, not a peer_lost in h1 that sends the operator to the wrong container.  Reverted to
# v1, which trains again.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
check "every rank trains before the deploy" all_ranks_advance 3 90
# the 40th step of rank 2's process: crash_at=<now + 60> was missed when v1 trained past it
# during the deploy and v19 resumed from a checkpoint beyond it (promoted, no crash)
at=40
d=$(make_release v19 train.seed=19)
mkdir -p "$d/bin/real" && mv "$d/bin/drover-train" "$d/bin/real/drover-train"
cat >"$d/bin/drover-train" <<WRAP
#!/bin/sh
# t-19: rank 2 aborts at step $at (SIGABRT); every other rank, and the selftest preflight, run as v1
[ "\$1" = train ] && [ "\${RANK:-}" = 2 ] && export DROVER_TRAIN_FAULT=crash_after=$at
exec "\$(dirname "\$0")/real/drover-train" "\$@"
WRAP
chmod 0755 "$d/bin/drover-train"

say "drover deploy v19 (rank 2 aborts at its process's step $at)"
drover deploy "$d" --job train
show_drover 8
check "deploy v19 exits 3 (reverted)" test "$DROVER_RC" = 3
grep -h -o '^FAILED .*' "$E2E_WORK/last.out" "$E2E_WORK/last.err" | head -n 1 | sed 's/^/    verdict: /'
check "the verdict names the rank that aborted, in h2:201" drover_said '^FAILED .*h2:201.*signal 6'
check "... not a rank that only lost its peer" eval '! grep -E "^FAILED .*(peer_lost|peer lost|code 8)" "$E2E_WORK/last.out" "$E2E_WORK/last.err"'
check "every container is back on v1" all_current_is "$v1"
check "v1's ranks train again" all_ranks_advance 3 90
finish
