#!/bin/bash
# t-50-unknown-host-key: h2's key is not in known_hosts: the deploy is refused with a clear
# message and nothing is pushed anywhere; `drover trust h2` then lets it in again.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
h2a=$(host_addr h2) # the lab's, not always 127.0.0.3 (LAB_HOSTS)
[[ -n $h2a ]] || fatal "no address for h2 in $LAB_DIR/inventory.ini"
h2re=$(re_quote "$h2a")
cp "$LAB_DIR/known_hosts" "$E2E_WORK/known_hosts.bak"
grep -E -v "^$h2re |^\[$h2re\]" "$E2E_WORK/known_hosts.bak" >"$LAB_DIR/known_hosts"
h2_known() { grep -E -q "^$h2re |^\[$h2re\]" "$LAB_DIR/known_hosts"; }
check "h2's key ($h2a) removed from known_hosts" eval '! h2_known'
pids_before=$(all_pids)
pct_mark
h2_sshd_mark=$(wc -l <"$LAB_DIR/hosts/h2/sshd.log")

d=$(make_release v6 train.seed=6)
say "drover deploy v6 with h2 unknown"
drover deploy "$d" --job train
show_drover 10
check "deploy exits 5 (host key unknown)" test "$DROVER_RC" = 5
check "the message names the unknown host key" drover_said 'host key|known_hosts|not trusted|unknown'
check "the message names the host (h2 or $h2a)" drover_said "h2|$h2re"
check "the message says how to trust it" drover_said 'trust'
no_push_h1() { ! pct_since_has h1 ' pct push '; }
check "nothing was pushed to h1" no_push_h1
check "pct was never called on h2" test -z "$(pct_since h2)"
check "no worker was touched" test "$pids_before" = "$(all_pids)"
check "every container is still on v1" all_current_is "$v1"
check "h2's sshd never let drover in (no 'Accepted publickey' since the mark)" \
	bash -c "! grep -q 'Accepted publickey' <<<\"\$(tail -n +$((h2_sshd_mark + 1)) '$LAB_DIR/hosts/h2/sshd.log')\""

h2fp=$(ssh-keygen -lf "$LAB_DIR/hosts/h2/ssh_host_ed25519_key.pub" | awk '{print $2}')
say "drover trust h2 --fingerprint <another key's>"
drover trust h2 --fingerprint SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
show_drover 5
check "trust with a fingerprint the host does not show exits 5" test "$DROVER_RC" = 5
check "the refusal names what the host shows" grep -qF -- "$h2fp" "$E2E_WORK/last.out" "$E2E_WORK/last.err"
check "nothing was written to known_hosts" eval '! h2_known'

say "drover trust h2 --fingerprint $h2fp"
drover trust h2 --fingerprint "$h2fp"
show_drover 5
check "trust h2 exits 0" test "$DROVER_RC" = 0
check "known_hosts has h2's key again" grep -q "$(cut -d' ' -f2 "$LAB_DIR/hosts/h2/ssh_host_ed25519_key.pub")" "$LAB_DIR/known_hosts"
drover status -o json
check "status works again with h2 trusted" test "$DROVER_RC" = 0
cp "$E2E_WORK/known_hosts.bak" "$LAB_DIR/known_hosts"
finish
