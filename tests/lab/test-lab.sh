#!/bin/bash
# tests/lab/test-lab.sh: `lab up` and `lab down` are idempotent and leave nothing behind.
# Uses its own small lab (LAB_DIR=/tmp/drover-lab-selftest, one host on 127.0.0.40:2240 with one
# container), so it can run beside the e2e lab.  Exit 0 only if every check passed.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LAB="$HERE/lab"
export LAB_DIR=/tmp/drover-lab-selftest LAB_HOSTS="s1=127.0.0.40" LAB_CONTAINERS="s1:901" LAB_SSH_PORT=2240
pass=0
fail=0
ok() { pass=$((pass + 1)); printf '  ok   %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %s\n' "$1"; [[ -n ${2:-} ]] && printf '       %s\n' "$2"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else bad "$d"; fi; }

fingerprint() { # what must not change between two `lab up`
	md5sum "$LAB_DIR/id_ed25519" "$LAB_DIR/known_hosts" "$LAB_DIR/inventory.ini" \
		"$LAB_DIR/hosts/s1/ssh_host_ed25519_key" "$LAB_DIR/hosts/s1/sshd_config" 2>/dev/null
	cat "$LAB_DIR/hosts/s1/sshd.pid" 2>/dev/null
}
leftovers() { # processes, mounts or files of this lab
	pgrep -af -- "$LAB_DIR/" || true
	grep -- " $LAB_DIR" /proc/self/mounts || true
	[[ -e $LAB_DIR ]] && echo "$LAB_DIR exists"
	return 0
}
ct_state() { lxc-info -P "$LAB_DIR/lxc" -n s1-901 -s -H 2>/dev/null; }
net() { ip -o addr show 2>/dev/null | awk '{ print $2, $4 }' | sort; }

echo "lab lifecycle checks (LAB_DIR=$LAB_DIR)"
"$LAB" down >/dev/null 2>&1
net0=$(net)
check "down with nothing up exits 0" "$LAB" down
check "up exits 0" eval '"$LAB" up >/tmp/test-lab.out 2>&1'
check "up prints a summary naming the host and the container" grep -q 's1:901' /tmp/test-lab.out
check "the container runs" test "$(ct_state)" = RUNNING
check "the container has the C library" "$LAB" attach s1:901 test -e /lib/x86_64-linux-gnu/libc.so.6
check "but not the host's other libraries (no libjansson, the agent must not need it)" \
	"$LAB" attach s1:901 sh -c '! ls /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu 2>/dev/null | grep -q "^libjansson"'
check "pct on the fake host sees it" test "$("$LAB" ssh s1 pct status 901)" = "status: running"
fp1=$(fingerprint)
check "up again exits 0" eval '"$LAB" up >/dev/null 2>&1'
check "up again changes nothing (keys, known_hosts, inventory, sshd pid)" test "$fp1" = "$(fingerprint)"
lxc-stop -P "$LAB_DIR/lxc" -n s1-901 --kill >/dev/null 2>&1
sshd_pid=$(cat "$LAB_DIR/hosts/s1/sshd.pid")
kill "$sshd_pid" 2>/dev/null
# wait until it is gone (a fixed sleep can be too short on a busy machine: `up` would then see
# a live sshd, and the check would fail once it died)
for _ in $(seq 1 100); do kill -0 "$sshd_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$sshd_pid" 2>/dev/null && bad "sshd $sshd_pid still alive 10 s after SIGTERM"
check "up converges: restarts a stopped container and a dead sshd" eval '"$LAB" up >/dev/null 2>&1 && test "$(ct_state)" = RUNNING && "$LAB" ssh s1 true'
check "host addresses unchanged by the lab" test "$net0" = "$(net)"
check "down exits 0" "$LAB" down
left=$(leftovers)
check "down leaves nothing (no process, mount or file of the lab)" test -z "$left"
[[ -z $left ]] || echo "$left" | sed 's/^/       /'
check "down again exits 0" "$LAB" down
rm -f /tmp/test-lab.out "$LAB_DIR.lock"
echo "lab: $pass passed, $fail failed"
((fail == 0))
