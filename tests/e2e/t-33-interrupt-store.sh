#!/bin/bash
# t-33-interrupt-store: Ctrl-C after every host had its last byte, while the containers store and
# verify.  The reason said "the part of one sent is not kept, and the next deploy sends those
# 64.0 MiB again": false, the host stores had the whole of it (a host stores the pack before it
# asks any container).  Now it says all had been sent; the job keeps running the release it ran;
# the next deploy sends nothing to the hosts (their stores kept it) and goes through.
#
# The store-and-verify phase is held open by stopping (SIGSTOP) every `drover-agent release
# install` in the job's containers, so the interrupt lands in it on any machine.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
before=$(ct_current h1:101)
code=$(make_release v33 train.seed=33)
head -c $((64 << 20)) /dev/urandom >"$code/blob.bin"

# the pattern is built from pieces so that this script's own command line never matches it
sig_installs() { # sig_installs SIGNAL: send it to every release install in the job's containers; prints how many
	local c n=0 k
	for c in $E2E_CTS; do
		k=$(ct "$c" sh -c 'a=release; n=0; for p in /proc/[0-9]*; do c=$(tr "\0" " " <$p/cmdline 2>/dev/null); case "$c" in *"drover-agent $a install"*) kill -'"$1"' ${p#/proc/} 2>/dev/null && n=$((n+1));; esac; done; echo $n' 2>/dev/null)
		n=$((n + ${k:-0}))
	done
	echo "$n"
}
held=$E2E_WORK/t33-held
rm -f "$held"
hold() { while :; do [[ $(sig_installs STOP) -gt 0 ]] && touch "$held"; sleep 0.1; done; }

err=$E2E_WORK/t33.err
say "deploy v33 (64 MiB new) with every release install held; SIGINT once the containers are storing"
env --default-signal=INT DROVER_PROGRESS_EVERY=1 "$E2E_BUILD/drover" -i "$INV" deploy "$code" --job train \
	>"$E2E_WORK/t33.out" 2>"$err" &
dpid=$!
hold &
hpid=$!
storing() { [[ -e $held ]] && grep -Eq "^stage h[12]: all .* sent in .*waiting for [0-9]+ containers? to store and verify" "$err"; }
check "the deploy reaches store and verify (an install held, the wait line said)" wait_until 120 storing
kill -INT "$dpid"
wait "$dpid"
rc=$?
kill "$hpid" 2>/dev/null
wait "$hpid" 2>/dev/null
say "resumed $(sig_installs CONT) held install(s)"
sed 's/^/    | /' "$err" | tail -6
check "drover exits 1 (rc $rc)" test "$rc" = 1
check "the reason says all had been sent, while the containers stored and verified" \
	grep -q "interrupted by the operator while the containers stored and verified the release: all .* had been sent to the hosts" "$err"
check "... and not that a part sent is not kept" eval '! grep -q "the part of one sent is not kept" "$err"'
check "every container still runs the release it ran before" all_current_is "$before"

drover deploy "$code" --job train
show_drover 8
check "the next deploy of v33 exits 0" test "$DROVER_RC" = 0
check "... and sends nothing to the hosts (their stores kept what had arrived)" \
	eval '! drover_said "^stage h[12]: .* missing on the host"'
v33=$(ct_current h1:101)
check "every container runs v33 (not the release before)" eval '[[ $v33 != "$before" ]] && all_current_is "$v33"'
finish
