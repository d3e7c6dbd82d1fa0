#!/bin/bash
# t-41-changed-file: a release file that changes while drover sends it (an editor saving, a
# build still writing) is refused with its name: exit 1, nothing switched.  The refusal used to
# read "drover: error:  (0.0 MiB of 286.1 MiB stored on the host)": the reason, said by the
# pack writer on a line of its own, was missing from the error that ends the deploy.  Its own
# inventory: the lab's plus [job changing] in h1:102 (the job is never started).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

one_ct_job changing
d="$E2E_WORK/releases/changing"
rm -rf "$d"
mkdir -p "$d"
printf '#!/bin/sh\nexit 0\n' >"$d/w.sh"
chmod 0755 "$d/w.sh"
# random, so no host store has it yet: the whole file is sent, for seconds
head -c 300000000 /dev/urandom >"$d/big.bin"

say "drover deploy changing, writing into big.bin once it is being sent"
"$E2E_BUILD/drover" -i "$INV" deploy "$d" --job changing >"$E2E_WORK/last.out" 2>"$E2E_WORK/last.err" &
pid=$!
sending() { grep -q "missing on the host" "$E2E_WORK/last.err"; }
for _ in $(seq 1200); do sending && break; sleep 0.05; done # the send takes seconds: poll fast
check "the staging begins" sending
dd if=/dev/zero of="$d/big.bin" bs=1000 count=1 seek=100 conv=notrunc 2>/dev/null
wait $pid
DROVER_RC=$?
show_drover 6
check "deploy exits 1 (nothing switched)" test "$DROVER_RC" = 1
check "the error names the file that changed and what to do" \
	said_in "^drover: error: '.*/big.bin' changed while it was being deployed: deploy again \\([0-9.]+ of [0-9.]+ MiB stored on the host\\)" last.err
check "no error line without its reason" eval '! grep -q "^drover: error:  *(" "$E2E_WORK/last.err"'
check "nothing was switched" drover_said "stopped before anything was switched"
check "job 'changing' was never started in h1:102" eval '[[ -z $(ct_current h1:102 changing) ]]'
rm -f "$d/big.bin"
finish
