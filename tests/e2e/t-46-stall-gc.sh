#!/bin/bash
# t-46-stall-gc: a host whose per-connection sshd is stopped (SIGSTOP) mid-upload is reported
# within the idle deadline + 5 s naming host and MiB done, the deploy completes over a new
# session, and no temp files are left in any store once the stopped session is resumed.  Then
# `drover gc --keep 0` keeps every way back: the previous release is reachable by rollback and
# intact in every container, its objects still in the host stores.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
venv=$E2E_WORK/releases/venv
[[ -d $venv ]] || { mkdir -p "$venv/bin" && printf '#!/bin/sh\n' >"$venv/bin/python3" && chmod 0755 "$venv/bin/python3"; }
code=$(make_release v8b train.seed=8)
echo "a file only v8b has" >"$code/new.txt"
sha=$(sha256sum "$code/new.txt" | cut -c1-64)
drover deploy "$code" --env "$venv" --job train
check "deploy v8b exits 0" test "$DROVER_RC" = 0

# ---- a stalled sshd session mid-upload
# what incoming/ holds before it: a refused deploy of an earlier test (t-41's changed file) may
# have left its manifest there, the documented leftover kept 6 h; only this test's are judged
for c in $E2E_CTS; do
	ct "$c" ls /var/lib/drover/incoming 2>/dev/null | sed "s|^|$c |"
done >"$E2E_WORK/t46-incoming-before"
code=$(make_release v9 train.seed=9)
# large enough that the upload to h1 lasts well over a second on an idle machine: the stop must
# land mid-upload (96 MiB was over before the stop on CI's unloaded run)
head -c $((320 << 20)) /dev/urandom >"$code/weights.bin"
idle=5
err=$E2E_WORK/stall.err
DROVER_PROGRESS_EVERY=1 DROVER_IDLE_TIMEOUT=$idle "$E2E_BUILD/drover" -i "$INV" deploy "$code" --env "$venv" --job train >"$E2E_WORK/stall.out" 2>"$err" &
dpid=$!
started() { compgen -G "$LAB_DIR/hosts/h1/staging/objects/.in.*" >/dev/null; }
# poll tightly (wait_until's 0.5 s is too coarse here): stop h1's session as soon as the upload starts
t_end=$((SECONDS + 120))
until started; do
	((SECONDS < t_end)) || fatal "the upload to h1 never started"
	sleep 0.02
done
lpid=$(cat "$LAB_DIR/hosts/h1/sshd.pid")
stopped=$(pgrep -P "$lpid"; for p in $(pgrep -P "$lpid"); do pgrep -P "$p"; done)
say "stopping h1's per-connection sshd processes: $(echo $stopped)"
kill -STOP $stopped
ts=$SECONDS
reported() { grep -q "stopped taking data" "$err"; }
wait_until $((idle + 15)) reported
took=$((SECONDS - ts))
say "stall reported after ${took}s: $(grep -m1 'stopped taking data' "$err")"
check "the stall is reported within idle deadline + 5 s" test "$took" -le $((idle + 5))
check "the report names host h1 and the MiB done" grep -Eq "host 'h1' stopped taking data.*[0-9.]+ MiB" "$err"
wait "$dpid"
rc=$?
kill -CONT $stopped 2>/dev/null
cat "$err" | sed 's/^/    | /' | tail -12
check "the deploy completes over a new session (exit 0)" test "$rc" = 0
# a long staging says how far it got while it runs (every 10 s; 1 s here), on stderr
check "staging said its progress while it ran (stage h1: N of 320.0 MiB sent (R MiB/s))" \
	grep -Eq "^stage h1: [0-9.]+ of 320\.0 MiB sent \([0-9]+ MiB/s\)$" "$err"
check "... and nothing of it on stdout" eval '! grep -q "MiB sent" "$E2E_WORK/stall.out"'
sleep 5
no_temp() {
	! compgen -G "$LAB_DIR/hosts/h[12]/staging/objects/.in.*" >/dev/null &&
		! compgen -G "$LAB_DIR/hosts/h[12]/staging/packs/*" >/dev/null &&
		! compgen -G "$LAB_DIR/hosts/h[12]/staging/manifests/*.tmp.*" >/dev/null
}
check "no temp files left in the host stores after the stopped session resumed" wait_until 20 no_temp
# A manifest the stopped session's `release missing -` kept in incoming/ for an install that
# never came is removed on a store contact once OBJSTORE_INCOMING_MAX_AGE_S old (docs/agent.md,
# "Store"); when the session wrote it after the new one had installed the release (SIGCONT
# lets it finish), it is that documented leftover: said, not failed.  Anything else is a temp
# file left behind.
ct_no_temp() {
	local c left f rc=0
	for c in $E2E_CTS; do
		left=$(ct "$c" sh -c 'ls -a /var/lib/drover/objects /var/lib/drover/releases /var/lib/drover/incoming | grep -E "\.tmp|\.pack$|\.manifest$"')
		for f in $left; do
			if grep -qx "$c $f" "$E2E_WORK/t46-incoming-before"; then
				printf '    %s: incoming/%s was there before this test (an earlier refused deploy)\n' "$c" "$f"
				continue
			fi
			if [[ $f =~ ^([0-9a-f]{64})\.manifest$ ]] && ct "$c" test -d "/var/lib/drover/releases/${BASH_REMATCH[1]}"; then
				printf '    %s: incoming/%s of an installed release (kept until it is %s h old)\n' "$c" "$f" 6
				continue
			fi
			printf '    %s: %s\n' "$c" "$f"
			rc=1
		done
	done
	return $rc
}
check "no temp files left in the container stores" ct_no_temp
check "every container runs v9" all_current_is "$(ct_current h1:101)"

# ---- after the agents' GC (keep 5 + current, previous, good and the environments they name)
# the previous release is intact and reachable by rollback
v9=$(ct_current h1:101)
drover rollback --job train
show_drover 6
check "rollback exits 0" test "$DROVER_RC" = 0
check "every container left v9 for the previous release" bash -c "[[ \$(lxc-attach -P '$LAB_DIR/lxc' -n h1-101 --clear-env -- readlink /var/lib/drover/jobs/train/current) != *$v9 ]]"
intact() { local c cur; for c in $E2E_CTS; do cur=$(ct_current "$c"); ct "$c" /usr/local/bin/drover-agent release missing "/var/lib/drover/releases/$cur/MANIFEST" | grep -qx present || return 1; done; }
check "the release rolled back to is complete in every container (agent: present)" intact
# a release staged a moment ago (as a deploy in flight has it) is not gc's: its objects carry
# mtime 0 from the pack, so the old "untouched for 10 minutes" test matched them all and a gc
# during a deploy removed what it had just staged (the newcomer pass: its install then failed)
code=$(make_release v10 train.seed=10)
echo "a file only v10 has" >"$code/new10.txt"
sha10=$(sha256sum "$code/new10.txt" | cut -c1-64)
drover deploy "$code" --env "$venv" --job train --stage-only
check "deploy --stage-only v10 exits 0" test "$DROVER_RC" = 0
drover gc --keep 0
show_drover 4
check "drover gc --keep 0 exits 0" test "$DROVER_RC" = 0
check "gc says what it kept in words (no \"kept 1 release's\")" \
	drover_said "^gc h1: removed [0-9]+ objects? \(kept the objects of [0-9]+ releases? in use\)$"
check "after gc the current release is still complete everywhere" intact
check "after gc h1's store still holds the current release's objects (new.txt)" test -f "$LAB_DIR/hosts/h1/staging/objects/$sha"
check "after gc h1's store still holds the objects of v10, staged a moment ago (new10.txt)" \
	test -f "$LAB_DIR/hosts/h1/staging/objects/$sha10"

say "a job naming a container that does not exist (h1:150): gc collects on the other hosts, not on h1"
# it stopped the whole GC, every run (after every promote too), naming no way out
INV_G="$E2E_WORK/inventory-ghost.ini"
{ cat "$INV"; printf '\n[job ghost]\ncontainers = h1:150\ncommand = bin/drover-train\nmaster_port = 29650\n'; } >"$INV_G"
INV_SAVED=$INV
INV=$INV_G
drover gc --keep 0
INV=$INV_SAVED
show_drover 4
check "gc exits 1 (not everywhere)" test "$DROVER_RC" = 1
check "it names the container and its job, and what to do" \
	drover_said "gc: h1:150 \(job 'ghost'\): .*nothing is collected on host 'h1' until its agent answers \(start the container, or fix \[job ghost\]'s containers"
check "h2's store is still collected" drover_said "^gc h2: removed [0-9]+ objects?"
check "h1's is not" eval '! drover_said "^gc h1: removed"'
check "after gc the current release is still complete everywhere" intact
finish
