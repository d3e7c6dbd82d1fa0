#!/bin/bash
# t-33-interrupt-store: Ctrl-C after every host had its last byte, while the containers store and
# verify.  The reason said "the part of one sent is not kept, and the next deploy sends those
# 64.0 MiB again": false, the host stores had the whole of it (a host stores the pack before it
# asks any container).  Now it says all had been sent; the job keeps running the release it ran;
# the next deploy sends nothing to the hosts (their stores kept it) and goes through.  The held
# installs are ended in their containers by drover itself (they stayed there, stopped, until this
# test resumed them) and stderr says so.
#
# The store-and-verify phase is held open by stopping (SIGSTOP) every `drover-agent release
# install` in the job's containers, so the interrupt lands in it on any machine.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
before=$(ct_current h1:101)
code=$(make_release v33 train.seed=33)
head -c $((64 << 20)) /dev/urandom >"$code/blob.bin"

# the pattern is built from pieces so that no command line here ever matches it
sig_installs() { # sig_installs SIGNAL: send it to every release install in the job's containers; prints how many
	local c n=0 k
	for c in $E2E_CTS; do
		k=$(ct "$c" sh -c 'a=release; n=0; for p in /proc/[0-9]*; do c=$(tr "\0" " " <$p/cmdline 2>/dev/null); case "$c" in *"drover-agent $a install"*) kill -'"$1"' ${p#/proc/} 2>/dev/null && n=$((n+1));; esac; done; echo $n' 2>/dev/null)
		n=$((n + ${k:-0}))
	done
	echo "$n"
}
# one loop inside each container, polling every 20 ms (an install of 64 MiB is over in well
# under a second), until /tmp/t33-stop appears there; /tmp/t33-held says it stopped one
hold_loop='a=release; rm -f /tmp/t33-held /tmp/t33-stop; t=0; while [ ! -e /tmp/t33-stop ] && [ $t -lt 9000 ]; do
	for p in /proc/[0-9]*; do c=$(tr "\0" " " <$p/cmdline 2>/dev/null); case "$c" in *"drover-agent $a install"*) kill -STOP ${p#/proc/} 2>/dev/null && touch /tmp/t33-held;; esac; done
	sleep 0.02; t=$((t+1)); done'
hold_pids=()
for c in $E2E_CTS; do
	ct "$c" sh -c "$hold_loop" &
	hold_pids+=($!)
done
held_somewhere() { local c; for c in $E2E_CTS; do ct "$c" test -e /tmp/t33-held && return 0; done; return 1; }

err=$E2E_WORK/t33.err
say "deploy v33 (64 MiB new) with every release install held; SIGINT once the containers are storing"
env --default-signal=INT DROVER_PROGRESS_EVERY=1 "$E2E_BUILD/drover" -i "$INV" deploy "$code" --job train \
	>"$E2E_WORK/t33.out" 2>"$err" &
dpid=$!
# every host past its last byte: waiting on its held installs, or done (an install that ended
# before the hold caught it); a host still sending would make this the other case
host_past_send() { grep -Eq "^stage $1: (all .* sent in .*waiting for [0-9]+ containers? to store and verify|sent )" "$err"; }
storing() { host_past_send h1 && host_past_send h2 && held_somewhere; }
check "the deploy reaches store and verify on both hosts (an install held, the wait lines said)" wait_until 120 storing
kill -INT "$dpid"
wait "$dpid"
rc=$?
for c in $E2E_CTS; do ct "$c" touch /tmp/t33-stop; done
wait "${hold_pids[@]}" 2>/dev/null
left=$(sig_installs CONT)
say "resumed $left held install(s) left behind"
sed 's/^/    | /' "$err" | tail -6
check "drover exits 1 (rc $rc)" test "$rc" = 1
check "drover ended the held installs in their containers, and said so" \
	grep -q "drover ended the interrupted release install in " "$err"
check "... none was left behind to resume ($left)" test "$left" = 0
check "the reason says all had been sent, while the containers stored and verified" \
	grep -q "interrupted by the operator while the containers stored and verified the release: all .* had been sent to the hosts" "$err"
check "... and not that a part sent is not kept" eval '! grep -q "the part of one sent is not kept" "$err"'
check "every container still runs the release it ran before" all_current_is "$before"

# What a Ctrl-C here leaves in the containers' stores (objects/.tmp.<sha>.<pid>, 400-700 MB each
# in the adversary's run; incoming/<id>.manifest after one during staging) was removed only by
# the next deploy's store contact, never by `drover gc`.  One of each is planted (8 MiB, a pid
# that has exited), whatever this run's interrupt left.
say "drover gc removes what interrupted installs left in the containers' stores"
for c in h1:101 h2:201; do # the job's containers
	ct "$c" sh -c 'p=$(sh -c "echo \$\$"); z=$(printf "%064d" 7)
		head -c 8388608 /dev/zero >/var/lib/drover/objects/.tmp.$z.$p
		echo v2 >/var/lib/drover/incoming/$z.manifest'
done
stale_left() { local c; for c in h1:101 h2:201; do ct "$c" sh -c 'ls -A /var/lib/drover/objects' | grep -q '^\.tmp\.' && return 0; done; return 1; }
drover gc
show_drover 8
check "drover gc exits 0" test "$DROVER_RC" = 0
check "... says what it freed in h1:101" \
	drover_said "^gc h1:101: removed [0-9]+ temp files? left by interrupted deploys \([0-9]+\.[0-9] MiB freed\)"
check "... and in h2:201" drover_said "^gc h2:201: removed [0-9]+ temp files? left by interrupted deploys"
check "no objects/.tmp.* is left in any container" eval '! stale_left'

drover deploy "$code" --job train
show_drover 8
check "the next deploy of v33 exits 0" test "$DROVER_RC" = 0
check "... and sends nothing to the hosts (their stores kept what had arrived)" \
	eval '! drover_said "^stage h[12]: .* missing on the host"'
v33=$(ct_current h1:101)
check "every container runs v33 (not the release before)" eval '[[ $v33 != "$before" ]] && all_current_is "$v33"'
finish
