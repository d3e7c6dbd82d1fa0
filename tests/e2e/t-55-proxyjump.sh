#!/bin/bash
# t-55-proxyjump: h1 is reached through the lab's jump host (tests/lab/lab's bastion sshd, which
# only forwards to the fake hosts) by a `ProxyJump` in an ssh_config the inventory names, h2
# directly.  Host keys are checked on both hops against the inventory's known_hosts: the jump
# host's (libssh 0.10 runs that hop through OpenSSH's `ssh -W`, which drover points at the
# inventory's config and known_hosts, BatchMode), and h1's (libssh, as for any host).  Needs
# agents installed and running (t-10's; ensure_v1 when run alone).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1

B="$LAB_DIR/hosts/bastion"
[[ -s $B/address ]] || fatal "the lab has no bastion ($B/address): tests/lab/lab up starts it"
baddr=$(<"$B/address")
h1a=$(host_addr h1) # the lab's, not always 127.0.0.2 (LAB_HOSTS)
[[ -n $h1a ]] || fatal "no address for h1 in $LAB_DIR/inventory.ini"
h1re=$(re_quote "$h1a")
port=$(awk -F' = ' '$1 == "port" { print $2; exit }' "$INV")
port=${port:-22}
kh_line() { # kh_line ADDRESS PUBKEYFILE: a known_hosts line as OpenSSH and libssh look it up
	local k
	k=$(cut -d' ' -f1,2 "$2")
	if [[ $port == 22 ]]; then echo "$1 $k"; else echo "[$1]:$port $k"; fi
}
PJ="$E2E_WORK/proxyjump"
mkdir -p "$PJ"
cat >"$PJ/ssh_config" <<CFG
# written by t-55: h1 only through the jump host
Host h1-behind
    HostName $h1a
    Port $port
    User root
    ProxyJump root@lab-bastion
Host lab-bastion
    HostName $baddr
    Port $port
    IdentityFile $LAB_DIR/id_ed25519
    IdentitiesOnly yes
CFG
# the lab's inventory with h1 named by its alias (port and user from the config) and this
# test's ssh_config and known_hosts
awk -v cfg="$PJ/ssh_config" -v kh="$PJ/known_hosts" '
	/^\[/ { sect = $0 }
	sect == "[drover]" && /^known_hosts =/ { print "known_hosts = " kh; print "ssh_config = " cfg; next }
	sect == "[host h1]" && /^address =/ { print "address = h1-behind"; next }
	sect == "[host h1]" && /^(port|user) =/ { next }
	{ print }' "$INV" >"$PJ/inventory.ini"
INV="$PJ/inventory.ini"
bmark() { wc -l <"$B/sshd.log"; }
bastion_let_in_since() { tail -n +$(($1 + 1)) "$B/sshd.log" | grep -q 'Accepted publickey for root'; }

say "the jump host's key is not in known_hosts: drover status"
cp "$LAB_DIR/known_hosts" "$PJ/known_hosts"
m=$(bmark)
drover status -o json
show_drover 8
check "status exits 1 (h1's containers could not be asked)" test "$DROVER_RC" = 1
check "OpenSSH refused the unknown jump host key (no prompt, BatchMode), and drover says so" \
	drover_said "host 'h1' .*cannot connect through the jump host: Host key verification failed"
check "h1's containers are named unreachable" bash -c "jq -e '[.jobs[].containers[] | select(.container | startswith(\"h1:\")) | .state] | all(. == \"unreachable\")' '$E2E_WORK/last.out' >/dev/null"
check "h2 (direct) answered" bash -c "jq -e '[.jobs[].containers[] | select(.container == \"h2:201\") | .state] | all(. != \"unreachable\" and . != \"agent-unreachable\")' '$E2E_WORK/last.out' >/dev/null"
check "the jump host let nobody in" bash -c "! { tail -n +$((m + 1)) '$B/sshd.log' | grep -q 'Accepted publickey'; }"
# status and top --once answer a host that cannot be reached with the same exit code
# (docs/errors.md, "status and top")
drover top --once --timeout 8
check "top --once exits 1 too (h1 unreachable)" test "$DROVER_RC" = 1

say "the jump host's key trusted: drover status through ProxyJump"
kh_line "$baddr" "$B/ssh_host_ed25519_key.pub" >>"$PJ/known_hosts"
m=$(bmark)
drover status -o json
show_drover 8
check "status through the jump host exits 0" test "$DROVER_RC" = 0
check "every container answered" bash -c "jq -e '[.jobs[].containers[].state] | all(. != \"unreachable\" and . != \"agent-unreachable\")' '$E2E_WORK/last.out' >/dev/null"
check "the jump host carried the connection (Accepted publickey in its log)" bastion_let_in_since "$m"
drover validate
check "validate resolves h1 through the config" drover_said "h1-behind|$h1re"
drover top --once --timeout 8
check "top --once through the jump host exits 0, as status" test "$DROVER_RC" = 0

say "h1's own key changed (the second hop): libssh refuses it as for any host"
grep -E -v "^$h1re |^\[$h1re\]" "$PJ/known_hosts" >"$PJ/known_hosts.new"
kh_line "$h1a" "$LAB_DIR/hosts/h2/ssh_host_ed25519_key.pub" >>"$PJ/known_hosts.new"
mv "$PJ/known_hosts.new" "$PJ/known_hosts"
drover status
show_drover 6
check "status exits 5 (host key)" test "$DROVER_RC" = 5
check "the refusal names h1" drover_said "h1"
check "and says how to trust it" drover_said 'trust'
drover top --once --timeout 8
check "top --once exits 5 too (it said 1 for a refused host key)" test "$DROVER_RC" = 5

say "the jump host's key changed (the first hop)"
cp "$LAB_DIR/known_hosts" "$PJ/known_hosts"
kh_line "$baddr" "$LAB_DIR/hosts/h2/ssh_host_ed25519_key.pub" >>"$PJ/known_hosts"
m=$(bmark)
drover status
show_drover 6
check "status exits 1" test "$DROVER_RC" = 1
check "OpenSSH says the jump host's key changed" drover_said 'IDENTIFICATION HAS CHANGED|Host key verification failed'
check "the jump host let nobody in" bash -c "! { tail -n +$((m + 1)) '$B/sshd.log' | grep -q 'Accepted publickey'; }"
check "no jump log file is left in /tmp" bash -c "! ls /tmp/drover-jump-* >/dev/null 2>&1"
finish
