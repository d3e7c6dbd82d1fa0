#!/bin/bash
# t-40-push-fails: objects that cannot be stored inside the container: h1:102's object store
# (<agent root>/objects) is a 64 KiB tmpfs, so the objects streamed into `release install` run
# out of space midway.  The deploy must notice (the agent stores and verifies every object and
# says the disk is full), stop before anything is stopped, and leave v1 running untouched.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
# where the agent stores objects (releases link to them; v1 keeps running from its links)
dir=/var/lib/drover/objects
say "h1:102 stores objects in $dir; mounting a 64 KiB tmpfs there"
ct h1:102 sh -c "mkdir -p '$dir' && mount -t tmpfs -o size=64k tmpfs '$dir'" || fatal "cannot mount the small tmpfs"
trap 'ct h1:102 umount "$dir" 2>/dev/null' EXIT
pids_before=$(all_pids)
printf '    workers before: %s\n' "$pids_before"
pct_mark

d=$(make_release v5 train.seed=5)
# Only missing objects travel (a pack of them): make v5's new objects larger than the tmpfs.
head -c 262144 /dev/urandom >"$d/blob.bin"
say "drover deploy v5"
drover deploy "$d" --job train
show_drover 15
check "deploy v5 exits 1 (failed, nothing switched)" test "$DROVER_RC" = 1
check "deploy names the failed verification" drover_said 'verif|sha|corrupt|size|short|bundle|release add|release install|pack|space'
check "deploy names the container (h1:102)" drover_said 'h1:102'
pids_after=$(all_pids)
printf '    workers after:  %s\n' "$pids_after"
check "no worker was stopped or restarted (same pids in every container)" test "$pids_before" = "$pids_after"
check "every container is still on v1" all_current_is "$v1"
no_activate() { ! pct_since_has h1 'activate|[ ]stop[ ]' && ! pct_since_has h2 'activate|[ ]stop[ ]'; }
check "pct logs show no activate/stop after the failed install" no_activate
installed_102() { pct_since_has h1 ' pct exec 102 .*release install'; }
check "the install into h1:102 was attempted (pct log)" installed_102
no_manifest_left() { [[ -z $(ct h1:102 sh -c 'ls /var/lib/drover/incoming | grep -E "[.]manifest$"') ]]; }
check "the failed install left no manifest in h1:102's incoming/" no_manifest_left
check "v1's steps still advance, Ktok/s > 0" all_ranks_advance 3 60

# A release directory without the job's command is refused before anything leaves this machine.
empty=$E2E_WORK/empty-release
mkdir -p "$empty/etc" && echo "[train]" >"$empty/etc/train.ini"
pct_mark
say "drover deploy of a release without bin/drover-train"
drover deploy "$empty" --job train
show_drover 5
check "deploy exits 2 (bad input found before any host was contacted)" test "$DROVER_RC" = 2
check "deploy names the missing command" drover_said "'bin/drover-train' \(the (command|preflight) of \[job train\].* is missing"
check "it says nothing was contacted" drover_said "nothing was contacted, nothing changed"
nothing_sent() { ! pct_since_has h1 'pct (push|exec)' && ! pct_since_has h2 'pct (push|exec)'; }
check "no pct push or exec was made for it" nothing_sent

# A wave (several jobs in one deploy) checks every job's command before any host is contacted:
# a release that lacks the second job's command deploys nothing, not even the first job (the
# second job's command was looked for only once the first job had been deployed; exit 1 after a
# rollback of it).  Its own inventory: the lab's plus [job second] in h1:102, running ./w.sh.
INV_LAB=$INV
INV="$E2E_WORK/wave.ini"
{
	cat "$LAB_DIR/inventory.ini"
	printf '\n[job second]\ncontainers = h1:102\ncommand = ./w.sh\nmaster_port = 29531\n'
} >"$INV"
d=$(make_release v6 train.seed=6)
pids_before=$(all_pids)
pct_mark
say "drover deploy v6 --job train --job second (v6 has no ./w.sh)"
drover deploy "$d" --job train --job second
show_drover 5
check "the wave exits 2 (bad input found before any host was contacted)" test "$DROVER_RC" = 2
check "it names the second job and its missing command" drover_said "'./w.sh' \(the command of \[job second\] in the inventory\) is missing"
check "it says nothing was contacted" drover_said "nothing was contacted, nothing changed"
check "the first job was not started" eval '! drover_said "wave: job"'
check "no pct push or exec was made for it" nothing_sent
check "no worker was stopped or restarted (same pids in every container)" test "$pids_before" = "$(all_pids)"
check "every container is still on v1" all_current_is "$v1"
INV=$INV_LAB
finish
