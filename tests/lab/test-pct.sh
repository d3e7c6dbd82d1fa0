#!/bin/bash
# tests/lab/test-pct.sh: checks the lab's `pct` stand-in against every row of PCT.md, through the
# fake hosts' sshd exactly as the controller reaches it.  Needs a running default lab
# (tests/lab/lab up: h1 with 101 and 102, h2 with 201).  Leaves the lab as it found it
# (102 is stopped and started again).  Exit 0 only if every check passed.
set -uo pipefail

LAB_DIR=${LAB_DIR:-/tmp/drover-lab}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LAB="$HERE/lab"
export LAB_DIR
pass=0
fail=0
T=/var/lib/drover/pct-test # scratch dir inside the containers

ok() { pass=$((pass + 1)); printf '  ok   %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %s\n' "$1"; [[ -n ${2:-} ]] && printf '       %s\n' "$2"; }

# run CMDLINE (one remote shell line) on fake host H; sets RC, OUT, ERR
run() {
	local h=$1
	shift
	OUT=$("$LAB" ssh "$h" "$*" 2>/tmp/pct-test.err)
	RC=$?
	ERR=$(cat /tmp/pct-test.err)
}

# expect NAME RC OUT-REGEX ERR-REGEX (regexes anchored by the caller; "" means must be empty)
expect() {
	local name=$1 rc=$2 ore=$3 ere=$4 why=""
	[[ $RC == "$rc" ]] || why+="exit $RC, want $rc; "
	if [[ -z $ore ]]; then [[ -z $OUT ]] || why+="stdout '$OUT', want none; "; else [[ $OUT =~ $ore ]] || why+="stdout '$OUT' !~ /$ore/; "; fi
	if [[ -z $ere ]]; then [[ -z $ERR ]] || why+="stderr '$ERR', want none; "; else [[ $ERR =~ $ere ]] || why+="stderr '$ERR' !~ /$ere/; "; fi
	if [[ -z $why ]]; then ok "$name"; else bad "$name" "$why"; fi
}

# wait_for SECONDS COMMAND...: polls until COMMAND succeeds (no fixed sleeps: the lab shares 2
# busy cores); says how long it took on stdout
wait_for() {
	local bound=$1 t0=$SECONDS
	shift
	until "$@"; do
		((SECONDS - t0 < bound)) || { echo "       (not within $bound s)"; return 1; }
		sleep 0.2
	done
	echo "       (after $((SECONDS - t0)) s of $bound s)"
}

# stat inside a container: "mode uid gid size"
ct_stat() { "$LAB" ssh "$1" "pct exec $2 -- stat -c '%a %u %g %s' $3" 2>/dev/null; }

echo "pct stand-in checks (LAB_DIR=$LAB_DIR)"
[[ -f $LAB_DIR/lab.env ]] || { echo "lab is not up"; exit 1; }
: >"$LAB_DIR/pct-h1.log.mark"
"$LAB" ssh h1 "pct exec 101 -- rm -rf $T; pct exec 101 -- mkdir -p $T" || { echo "cannot reach h1"; exit 1; }

# ---------------------------------------------------------------- list / status
run h1 pct list
expect "list: header and rows, widths 10 10 12 20" 0 \
	"^VMID       Status     Lock         Name                
101        running                 h1-101              
102        running                 h1-102              $" ""
run h2 pct list
expect "list: local node only" 0 "^VMID +Status +Lock +Name *
201 +running +h2-201 *$" ""
run h1 DROVER_LAB_HOST=h9 pct list
expect "list: nothing at all, not even the header, on a node without containers" 0 "" ""
run h1 pct status 101
expect "status: running" 0 "^status: running$" ""
run h1 pct status 201
expect "status: another node's vmid is an error" 255 "" "^Configuration file 'nodes/h1/lxc/201.conf' does not exist$"
run h1 pct status 99999
expect "status: unknown vmid is an error" 255 "" "does not exist"
run h1 pct status abc
expect "status: vmid must be a number" 255 "" "^400 Parameter verification failed"

# ---------------------------------------------------------------- exec
run h1 "pct exec 101 -- sh -c 'echo out; echo err >&2; exit 3'"
expect "exec: stdout and stderr apart, exit status is the command's" 3 "^out$" "^err$"
run h1 "pct exec 101 -- sh -c 'kill -9 \$\$'"
expect "exec: killed by signal 9 gives 137" 137 "" ""
run h1 "pct exec 101 -- /bin/echo 'a  b' '\$HOME' ';' '*'"
expect "exec: argv reaches the command with no shell in between" 0 '^a  b \$HOME ; \*$' ""
run h1 "echo piped | pct exec 101 -- cat"
expect "exec: stdin passes through" 0 "^piped$" ""
run h1 "FOO_LEAK=1 pct exec 101 -- env"
if [[ $OUT == *FOO_LEAK=1* ]]; then ok "exec: --keep-env defaults to 1 (caller's env leaks in)"; else bad "exec: --keep-env default" "$OUT"; fi
run h1 "FOO_LEAK=1 pct exec 101 --keep-env 0 -- env"
if [[ $RC == 0 && $OUT != *FOO_LEAK* ]]; then ok "exec: --keep-env 0 clears the environment"; else bad "exec: --keep-env 0" "$OUT"; fi
run h1 "FOO_LEAK=1 PCT_SHIM_DEFAULT_KEEPENV=0 pct exec 101 -- env"
if [[ $RC == 0 && $OUT != *FOO_LEAK* ]]; then ok "exec: PCT_SHIM_DEFAULT_KEEPENV=0 knob"; else bad "exec: PCT_SHIM_DEFAULT_KEEPENV=0" "$OUT"; fi
run h1 "pct exec 101 -- /no/such/cmd"
expect "exec: missing command exits 127" 127 "" "."
run h1 "pct exec 201 -- true"
expect "exec: another node's vmid" 255 "" "^Configuration file 'nodes/h1/lxc/201.conf' does not exist$"
run h1 "pct exec 101"
expect "exec: no command" 255 "" "missing command"

# ---------------------------------------------------------------- push
"$LAB" ssh h1 "head -c 100000 /dev/urandom > /tmp/pct-test-src; chmod 0755 /tmp/pct-test-src; echo small > /tmp/pct-test-small"
src_sum=$("$LAB" ssh h1 "sha256sum < /tmp/pct-test-src")
run h1 "pct push 101 /tmp/pct-test-src $T/new"
expect "push: new file, nothing printed, exit 0" 0 "" ""
[[ $(ct_stat h1 101 $T/new) == "644 0 0 100000" ]] && ok "push: new file is 0644 (x bit not copied)" || bad "push: new file mode" "$(ct_stat h1 101 $T/new)"
[[ $("$LAB" ssh h1 "pct exec 101 -- sha256sum $T/new" | cut -d' ' -f1) == "${src_sum%% *}" ]] &&
	ok "push: content arrives intact" || bad "push: content differs"
run h1 "pct push 101 /tmp/pct-test-src $T/p600 --perms 0600"
[[ $RC == 0 && $(ct_stat h1 101 $T/p600) == "600 0 0 100000" ]] && ok "push --perms 0600" || bad "push --perms 0600" "$(ct_stat h1 101 $T/p600)"
run h1 "pct push 101 /tmp/pct-test-src $T/p755 --perms 755"
[[ $RC == 0 && $(ct_stat h1 101 $T/p755) == "755 0 0 100000" ]] && ok "push --perms 755 (octal without 0)" || bad "push --perms 755" "$(ct_stat h1 101 $T/p755)"
run h1 "pct push 101 /tmp/pct-test-small $T/own --user trainer --group trainer"
[[ $RC == 0 && $(ct_stat h1 101 $T/own) == "644 1001 1001 6" ]] && ok "push --user/--group names resolve in the CT" || bad "push --user trainer" "$(ct_stat h1 101 $T/own) $ERR"
run h1 "pct push 101 /tmp/pct-test-small $T/own2 --user 1234 --group 0"
[[ $RC == 0 && $(ct_stat h1 101 $T/own2) == "644 1234 0 6" ]] && ok "push --user/--group numeric" || bad "push numeric ids" "$(ct_stat h1 101 $T/own2)"
run h1 "pct push 101 /tmp/pct-test-small $T/own3 --user nosuchuser"
expect "push: unknown user is printed, exit still 0" 0 "" "failed to get uid for: nosuchuser"
run h1 "PCT_SHIM_LEGACY_UID0=1 pct push 101 /tmp/pct-test-small $T/own4 --user root"
expect "push: PCT_SHIM_LEGACY_UID0=1 knob breaks --user root" 0 "" "failed to get uid for: root"
run h1 "pct push 101 /tmp/pct-test-small $T/no/such/dir/f"
expect "push: missing directory fails the copy, exit 0 anyway" 0 "" "No such file or directory"
run h1 "pct exec 101 -- test -e $T/no"
[[ $RC == 1 ]] && ok "push: no parent directories created" || bad "push created parents"
# existing file: truncated in place, keeps its mode and inode
"$LAB" ssh h1 "pct exec 101 -- sh -c 'echo old-old-old-old > $T/exist; chmod 0750 $T/exist'"
ino1=$("$LAB" ssh h1 "pct exec 101 -- stat -c %i $T/exist")
run h1 "pct push 101 /tmp/pct-test-small $T/exist"
ino2=$("$LAB" ssh h1 "pct exec 101 -- stat -c %i $T/exist")
[[ $RC == 0 && $(ct_stat h1 101 $T/exist) == "750 0 0 6" && $ino1 == "$ino2" ]] &&
	ok "push: existing file truncated in place, keeps mode 0750" || bad "push over existing" "$(ct_stat h1 101 $T/exist) $ino1/$ino2"
run h1 "pct push 101 /tmp/pct-test-small $T/exist --perms 0640"
[[ $(ct_stat h1 101 $T/exist) == "640 0 0 6" ]] && ok "push --perms on an existing file sets the mode" || bad "push --perms existing" "$(ct_stat h1 101 $T/exist)"
# a running binary: ETXTBSY, exit 0, binary unchanged
"$LAB" ssh h1 "pct push 101 /usr/bin/sleep $T/busy --perms 0755; pct exec 101 -- sh -c '$T/busy 60 </dev/null >/dev/null 2>&1 &'"
# the container's processes are visible here: wait until busy has been exec'd (not the sh before it)
busy_runs() { pgrep -f "^$T/busy 60\$" >/dev/null; }
wait_for 30 busy_runs || bad "the busy binary did not start in h1:101"
run h1 "pct push 101 /tmp/pct-test-small $T/busy"
expect "push over a running binary: Text file busy, exit 0" 0 "" "Text file busy"
[[ $(ct_stat h1 101 $T/busy) == 755* && $(ct_stat h1 101 $T/busy) != *" 6" ]] && ok "push: running binary left unchanged" || bad "busy binary changed" "$(ct_stat h1 101 $T/busy)"
"$LAB" ssh h1 "pct exec 101 -- pkill -f $T/busy" >/dev/null 2>&1
# disk full midway: real pct ignores File::Copy's result: a short file, nothing printed, exit 0
"$LAB" ssh h1 "pct exec 101 -- mkdir -p $T/small; pct exec 101 -- mount -t tmpfs -o size=64k tmpfs $T/small"
run h1 "pct push 101 /tmp/pct-test-src $T/small/f"
expect "push: disk full midway: exit 0, nothing printed" 0 "" ""
size=$(ct_stat h1 101 $T/small/f | awk '{ print $4 }')
[[ -n $size ]] && ((size < 100000)) && ok "push: disk full leaves a short file ($size of 100000 bytes)" || bad "push: disk full" "size '$size'"
"$LAB" ssh h1 "pct exec 101 -- umount $T/small"
run h1 "pct push 101 /tmp/no-such-source $T/x"
expect "push: unreadable source is printed, exit 0" 0 "" "failed to open /tmp/no-such-source for reading"
# the destination resolves inside the container (a symlink there points into the CT's tree)
"$LAB" ssh h1 "pct exec 101 -- ln -sfn /var/lib/drover $T/lnk"
run h1 "pct push 101 /tmp/pct-test-small $T/lnk/pct-test-via-link"
if [[ $RC == 0 && $(ct_stat h1 101 /var/lib/drover/pct-test-via-link) == "644 0 0 6" && ! -e /var/lib/drover/pct-test-via-link ]]; then
	ok "push: symlinks resolve inside the CT"
else bad "push: symlink resolution"; fi
"$LAB" ssh h1 "pct exec 101 -- rm -f /var/lib/drover/pct-test-via-link"
run h1 "pct push 201 /tmp/pct-test-small /tmp/x"
expect "push: another node's vmid" 255 "" "^can only push files to a running CT$"
run h1 "pct push 101 /tmp/pct-test-small"
expect "push: missing destination is a usage error" 255 "" "^400 "
run h1 "pct push 101 /tmp/pct-test-small $T/bad --perms 9z"
expect "push: invalid mode printed, exit 0" 0 "" "invalid mode"
# the config lock: a second locking operation waits, then fails.  The fake hosts share this
# machine's /tmp: hold the lock from here until the push has answered (not for a fixed time, which
# a slow ssh login on a busy machine could outlast)
lockf=$LAB_DIR/lock/pve-config-h1-101.lock
mkdir -p "$LAB_DIR/lock"
hold=$(mktemp /tmp/pct-test-hold.XXXXXX)
flock "$lockf" sh -c 'while [ -e "$1" ]; do sleep 0.1; done' _ "$hold" &
lockpid=$!
lock_held() { ! flock -n "$lockf" true; }
wait_for 30 lock_held || bad "could not take the config lock of h1:101"
run h1 "PCT_SHIM_LOCK_TIMEOUT=1 pct push 101 /tmp/pct-test-small $T/locked"
expect "push: config lock held elsewhere: got timeout" 255 "" "can't lock file '/run/lock/lxc/pve-config-101.lock' - got timeout"
rm -f "$hold"
wait $lockpid

# ---------------------------------------------------------------- pull
run h1 "rm -f /tmp/pct-test-pulled; pct pull 101 $T/new /tmp/pct-test-pulled && sha256sum < /tmp/pct-test-pulled"
expect "pull: file comes back intact" 0 "^${src_sum%% *}" ""
run h1 "pct pull 101 $T/nonexistent /tmp/pct-test-pulled2"
expect "pull: missing source printed, exit 0" 0 "" "failed to open $T/nonexistent"

# ---------------------------------------------------------------- stop / start / shutdown
run h1 pct stop 102
expect "stop: running CT" 0 "" ""
run h1 pct status 102
expect "status: stopped" 0 "^status: stopped$" ""
run h1 pct list
expect "list: stopped CT" 0 "102        stopped                 h1-102" ""
run h1 pct stop 102
expect "stop: already stopped fails" 255 "" "CT 102 not running"
run h1 "pct push 102 /tmp/pct-test-small /tmp/x"
expect "push: refuses a stopped CT" 255 "" "^can only push files to a running CT$"
run h1 "pct pull 102 /etc/passwd /tmp/x"
expect "pull: refuses a stopped CT" 255 "" "can only pull files from a running VM"
run h1 "pct exec 102 -- true"
expect "exec: refuses a stopped CT" 255 "" "^container '102' not running!$"
run h1 pct start 102
expect "start: stopped CT" 0 "" ""
run h1 pct start 102
expect "start: already running fails with 255" 255 "" "^CT 102 already running$"
"$LAB" ssh h1 "pct exec 102 -- sh -c 'sleep 300 </dev/null >/dev/null 2>&1 &'"
run h1 pct shutdown 102 --timeout 20
expect "shutdown: clean stop through init" 0 "" ""
run h1 pct status 102
expect "shutdown: CT is stopped afterwards" 0 "^status: stopped$" ""
run h1 pct shutdown 102
expect "shutdown: not running fails" 255 "" "CT 102 not running"
run h1 pct start 102
expect "start again" 0 "" ""

# ---------------------------------------------------------------- the containers run our binaries
tmpc=$(mktemp -d)
cat >"$tmpc/t.c" <<'CEOF'
#include <archive.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <stdio.h>
int main(void)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest("abc", 3, md, &n, EVP_sha256(), NULL);
    json_t *j = json_pack("{s:i,s:s}", "sha_len", (int)n, "archive", archive_version_string());
    char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    printf("%s %d\n", s, SSL_CTX_new(TLS_client_method()) != NULL);
    return 0;
}
CEOF
# linked as the Makefile links drover-agent (STATIC_LIBS: everything but glibc from .a files), it
# runs in a CT that has only the C library; linked dynamically, it is told what is missing
if cc -O1 -o "$tmpc/labprobe" "$tmpc/t.c" -Wl,--gc-sections -Wl,-Bstatic -ljansson -larchive -lssl -lcrypto \
	-lzstd -Wl,-Bdynamic -ldl -pthread 2>"$tmpc/cc.err" &&
	cc -O1 -o "$tmpc/labprobe-dyn" "$tmpc/t.c" -ljansson -larchive -lssl -lcrypto 2>>"$tmpc/cc.err"; then
	cp "$tmpc/labprobe" /tmp/pct-test-labprobe
	cp "$tmpc/labprobe-dyn" /tmp/pct-test-labprobe-dyn
	run h1 "pct push 101 /tmp/pct-test-labprobe /usr/local/bin/labprobe --perms 0755 && pct exec 101 -- labprobe"
	expect "a binary built here as drover-agent is (jansson, OpenSSL, libarchive linked in) runs in the CT" 0 '^\{"archive":"libarchive [0-9.]+[^"]*","sha_len":32\} 1$' ""
	run h1 "pct push 101 /tmp/pct-test-labprobe-dyn /usr/local/bin/labprobe-dyn --perms 0755 && pct exec 101 -- labprobe-dyn"
	expect "linked dynamically it does not: the CT has none of the host's libraries" 127 "" "libjansson\.so\.4: cannot open shared object file"
	"$LAB" ssh h1 "pct exec 101 -- rm -f /usr/local/bin/labprobe /usr/local/bin/labprobe-dyn; rm -f /tmp/pct-test-labprobe /tmp/pct-test-labprobe-dyn"
else
	bad "cannot compile the probe binaries" "$(cat "$tmpc/cc.err")"
fi
rm -rf "$tmpc"
run h1 "pct exec 101 -- sh -c 'mkdir -p /run/drover && touch /run/drover/x && rm -r /run/drover && touch /var/lib/drover/w && rm /var/lib/drover/w && echo ok'"
expect "/run and /var/lib/drover are writable in the CT" 0 "^ok$" ""
run h1 "pct exec 101 -- touch /srv/drover-data/x"
expect "/srv/drover-data is read-only in the CT" 1 "" "Read-only file system"
run h1 "pct exec 101 -- sh -c 'test -e /lib/x86_64-linux-gnu/libc.so.6 && test -e /lib64/ld-linux-x86-64.so.2 && ! test -e /usr/lib/x86_64-linux-gnu/libjansson.so.4 && echo ok'"
expect "the CT has the C library (copied) and no host library directory" 0 "^ok$" ""
if [[ -x /usr/bin/python3 ]]; then
	run h1 "pct exec 101 -- sh -c '! touch /opt/host/usr/drover-rw-probe 2>/dev/null && /usr/bin/python3 -c \"print(6 * 7)\"'"
	expect "the workers' python3 runs from the host's /usr, bound read-only at /opt/host/usr" 0 "^42$" ""
fi

# ---------------------------------------------------------------- the call log
if grep -q "pct push 101 /tmp/pct-test-src $T/new\$" "$LAB_DIR/pct-h1.log" &&
	grep -q "pct exec 101 -- /bin/echo a\\\\ \\\\ b" "$LAB_DIR/pct-h1.log"; then
	ok "every call is logged with its argv to pct-h1.log"
else
	bad "pct-h1.log lacks the calls" "$(tail -3 "$LAB_DIR/pct-h1.log")"
fi

"$LAB" ssh h1 "pct exec 101 -- rm -rf $T; rm -f /tmp/pct-test-src /tmp/pct-test-small /tmp/pct-test-pulled /tmp/pct-test-pulled2"
rm -f /tmp/pct-test.err "$LAB_DIR/pct-h1.log.mark"
echo "pct: $pass passed, $fail failed"
((fail == 0))
