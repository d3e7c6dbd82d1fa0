#!/bin/bash
# t-75-cli: the operator's command line (issue 14): a verb's --help without any inventory,
# validate, logs and events over SSH + pct, and deploy/plan/install/trust -o json (stdout is one
# JSON document).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

say "drover deploy --help with no inventory anywhere"
out=$(cd "$E2E_WORK" && env -u DROVER_INVENTORY "$E2E_BUILD/drover" -i /nonexistent/inv.ini deploy --help)
rc=$?
check "deploy --help exits 0 without an inventory" test "$rc" = 0
check "deploy --help prints deploy's usage" grep -q 'usage: drover .*deploy DIR' <<<"$out"
check "logs --help too" bash -c "'$E2E_BUILD/drover' -i /nonexistent logs --help | grep -q -- '--rank'"
check "drover-agent --version answers" bash -c "'$E2E_BUILD/drover-agent' --version | grep -q '^drover-agent '"
out=$(cd "$E2E_WORK" && "$E2E_BUILD/drover" -i "$INV" deploy . --job train -o yaml 2>&1)
rc=$?
check "deploy -o yaml is a usage error" test "$rc" = 2
check "deploy -o yaml says why" grep -q "\-o takes json, not 'yaml'" <<<"$out"
drover deploy . --jbo train
check "a mistyped option is a usage error naming the nearest one" bash -c "test '$DROVER_RC' = 2 && grep -q \"unknown option '--jbo' for drover deploy: did you mean --job?\" '$E2E_WORK/last.err'"
drover deplyo .
check "a mistyped verb too" bash -c "test '$DROVER_RC' = 2 && grep -q 'did you mean deploy?' '$E2E_WORK/last.err'"
out=$("$E2E_BUILD/drover" -i /nonexistent.ini install --job train -o json 2>/dev/null)
check "install -o json without an inventory still writes its document, with the error" \
	jq -e '.kind == "install" and .exit == 2 and .outcome == "usage" and (.error | test("cannot read inventory")) and .containers == []' <<<"$out"
check "bash completion names every verb" bash -c "'$E2E_BUILD/drover' completion bash | grep -q 'validate' && '$E2E_BUILD/drover' completion bash | bash -n"

ensure_v1
v1=$(v1_id)
d=$(make_release v1cli)
drover validate "$d"
show_drover 5
check "validate of a good release exits 0" test "$DROVER_RC" = 0
check "validate says the inventory is ok" drover_said 'inventory .*: ok'
rm -f "$d/bin/drover-train"
drover validate "$d"
show_drover 5
check "validate of a release without the job's command exits 1" test "$DROVER_RC" = 1
check "it names the missing command" drover_said "'bin/drover-train' \(the (command|preflight) of \[job train\].* is missing"

drover logs --job train --rank 0 -n 5
show_drover 5
check "logs --rank 0 exits 0" test "$DROVER_RC" = 0
check "logs prints rank 0's worker log" test -s "$E2E_WORK/last.out"
drover logs --job train --rank 0 -n 100000
check "the log marks where the agent started the gang's release" \
	drover_said "^--- drover-agent [0-9-]+ [0-9:]+ UTC: job 'train' gang [0-9]+: rank 0 starts release [0-9a-f]{12} ---$"
drover logs --job train --rank 99
check "a rank that does not exist is a usage error" test "$DROVER_RC" = 2
# logs -f ended by Ctrl-C, its documented end: the tail it followed with in the container went
# on (and its lxc-attach on the host) until the log grew after the reader was gone, one more
# pair per Ctrl-C
say "logs -f, then Ctrl-C: nothing of it is left in the container"
c0=${E2E_CTS%% *}
"$E2E_BUILD/drover" -i "$INV" logs --job train --rank 0 -f >"$E2E_WORK/follow.out" 2>&1 &
fpid=$!
for _ in $(seq 1 50); do [[ -s $E2E_WORK/follow.out ]] && break; sleep 0.2; done
follow_tails() { # the tail -F processes following rank 0's log in c0
	ct "$c0" sh -c 'for p in /proc/[0-9]*; do tr "\0" " " <$p/cmdline 2>/dev/null; echo; done' |
		grep -c '^tail -n 100 -F .*/rank0\.log'
}
check "logs -f prints rank 0's log, its tail runs in $c0" \
	eval '[[ -s $E2E_WORK/follow.out && $(follow_tails) == 1 ]]'
kill -INT "$fpid"
wait "$fpid"
check "logs -f exits 0 on Ctrl-C" test "$?" = 0
for _ in $(seq 1 25); do [[ $(follow_tails) == 0 ]] && break; sleep 0.2; done
check "no tail of it is left in $c0 after Ctrl-C" test "$(follow_tails)" = 0

# the agent's own log: liveness and bad-line notes send the operator there ("agent.log says why")
drover logs --job train --agent -n 200
show_drover 4
check "logs --agent exits 0" test "$DROVER_RC" = 0
check "logs --agent prints each container's agent log once, under its header" \
	eval '[[ $(grep -c "^==> agent (h[12]:[0-9]*) <==$" "$E2E_WORK/last.out") == 3 ]]'
check "... the agent's own lines (its events)" grep -q "event " "$E2E_WORK/last.out"
drover logs --job train --rank 2 --agent -n 5
check "logs --rank 2 --agent: h2:201's agent log alone, no header" \
	eval '((DROVER_RC == 0)) && [[ -s $E2E_WORK/last.out ]] && ! grep -q "^==> " "$E2E_WORK/last.out"'

drover events --job train -o json
show_drover 3
check "events exits 0" test "$DROVER_RC" = 0
check "events -o json: every line is a v1 event with its container" \
	jq -e -s 'length > 0 and all(.v == 1 and (.container | test(":")) and has("kind") and has("seq"))' "$E2E_WORK/last.out"

drover deploy "$E2E_WORK/releases/v1" --job train -o json
show_drover 5
check "deploy of the current release -o json exits 0" test "$DROVER_RC" = 0
check "deploy -o json: stdout is one result document" \
	jq -e '.v == 1 and .kind == "deploy" and .exit == 0 and .outcome == "ok" and .jobs == ["train"]' "$E2E_WORK/last.out"
check "deploy -o json: it says the job was unchanged (nothing to do), with no record" \
	jq -e '.unchanged == ["train"] and .records == []' "$E2E_WORK/last.out"
check "every container is still on v1" all_current_is "$v1"

say "deploy of a release directory that does not exist: bad input, exit 2, nothing touched"
drover deploy "$E2E_WORK/releases/no-such-release" --job train
show_drover 3
check "it is a usage error (exit 2), not a failed deploy (1)" test "$DROVER_RC" = 2
check "it names the path and what to give" drover_said "release directory '$E2E_WORK/releases/no-such-release' does not exist: give the directory that holds the release"
check "it says nothing was contacted" drover_said "nothing was contacted, nothing changed"
check "every container is still on v1" all_current_is "$v1"

drover plan "$E2E_WORK/releases/v1" --job train -o json
show_drover 5
check "plan -o json exits 0" test "$DROVER_RC" = 0
check "plan -o json: one plan document, v1 already current in every container" \
	jq -e --arg v1 "$v1" '.v == 1 and .kind == "plan" and .outcome == "ok" and .records == [] and
		(.plans | length) == 1 and .plans[0].job == "train" and .plans[0].release == $v1 and
		.plans[0].unreachable == 0 and (.plans[0].containers | length) == 3 and
		all(.plans[0].containers[]; .reachable and .already_current and .current == $v1) and
		.plans[0].policy.auto_revert == true and (.plans[0].command[0] == "bin/drover-train")' "$E2E_WORK/last.out"
drover plan "$E2E_WORK/releases/v1" --job train -o yaml
check "plan -o yaml is a usage error" test "$DROVER_RC" = 2

drover install --job train -o json
show_drover 5
check "install -o json exits 0" test "$DROVER_RC" = 0
check "install -o json: every container already has this agent and it runs" \
	jq -e '.v == 1 and .kind == "install" and .outcome == "ok" and .jobs == ["train"] and
		(.sha256 | length) == 64 and (.containers | length) == 3 and
		all(.containers[]; .binary == "already-installed" and .agent == "running" and .error == null and .missing == null)' "$E2E_WORK/last.out"

say "the lab's containers have the C library and none of the host's other libraries"
check "h1:101 has libc" ct h1:101 test -e /lib/x86_64-linux-gnu/libc.so.6
check "h1:101 has no libjansson anywhere the loader looks" \
	ct h1:101 sh -c '! ls /lib/x86_64-linux-gnu/libjansson* /usr/lib/x86_64-linux-gnu/libjansson* /lib/libjansson* /usr/lib/libjansson* 2>/dev/null | grep -q .'
check "and its agent runs there (it answered install above)" ct h1:101 /usr/local/bin/drover-agent --version

say "install of a binary that needs libraries the container lacks (/usr/bin/zstd: libz, liblzma, liblz4)"
sum_before=$(ct h1:102 sha256sum /usr/local/bin/drover-agent | cut -d' ' -f1)
drover install h1:102 --agent-binary /usr/bin/zstd -o json
show_drover 6
check "install fails (exit 1)" test "$DROVER_RC" = 1
check "install -o json names the missing library and its Debian package" \
	jq -e '.outcome == "failed" and .containers[0].container == "h1:102" and .containers[0].binary == "failed" and
		(.containers[0].missing.library | test("^lib(z|lzma|lz4)\\.so")) and (.containers[0].missing.package | test("^(zlib1g|liblzma5|liblz4-1)$"))' "$E2E_WORK/last.out"
check "it says what to install" drover_said 'apt-get install -y (zlib1g|liblzma5|liblz4-1)'
check "the installed agent was not replaced" test "$(ct h1:102 sha256sum /usr/local/bin/drover-agent | cut -d' ' -f1)" = "$sum_before"
check "nothing was left behind" ct h1:102 test ! -e /usr/local/bin/drover-agent.new

say "install with both hosts' sshd stopped: their connects run at once (one connect timeout, not one per host)"
STOPPED="$(cat "$LAB_DIR/hosts/h1/sshd.pid") $(cat "$LAB_DIR/hosts/h2/sshd.pid")"
trap '[[ -n $STOPPED ]] && kill -CONT $STOPPED 2>/dev/null' EXIT
kill -STOP $STOPPED
t0=$(now_cs)
drover install --job train -o json
took=$(($(now_cs) - t0))
kill -CONT $STOPPED
STOPPED=""
show_drover 4
check "install fails (exit 1)" test "$DROVER_RC" = 1
check "install -o json: every container says why, none was touched" \
	jq -e '(.containers | length) == 3 and all(.containers[]; .binary == null and .agent == null and (.error | length) > 0)' "$E2E_WORK/last.out"
# the lab's connect_timeout is 10 s: two hosts one after another take 20 s
check "both hosts gave up within one connect timeout (10 s) + 6 s" saw "$(secs $took) s of 16 s" test "$took" -le 1600
check "afterwards install finds every agent running again" bash -c "'$E2E_BUILD/drover' -i '$INV' install --job train -o json | jq -e 'all(.containers[]; .agent == \"running\")' >/dev/null"

say "preflight runs on every host at once: a release whose preflight takes 3 s and fails"
pf=$(make_release pfslow)
printf '#!/bin/sh\nsleep 3\necho "slowcheck: no GPU here" >&2\nexit 1\n' >"$pf/bin/slowcheck"
chmod 0755 "$pf/bin/slowcheck"
sed -e 's|^preflight = .*|preflight = bin/slowcheck|' -e '/^preflight_arg = /d' "$INV" >"$E2E_WORK/pf.ini"
mark1=$(wc -l <"$LAB_DIR/pct-h1.log") mark2=$(wc -l <"$LAB_DIR/pct-h2.log")
INV_SAVED=$INV INV="$E2E_WORK/pf.ini"
drover deploy "$pf" --job train
INV=$INV_SAVED
show_drover 5
check "the deploy stops at the preflight (exit 1)" test "$DROVER_RC" = 1
check "it names the first container in order that failed" drover_said 'h1:101: drover-agent preflight failed'
check "nothing was switched: every container is still on v1" all_current_is "$v1"
# the start of each host's preflight call, in seconds of the day (pct logs every call it runs)
pf_start() { tail -n +$(($2 + 1)) "$LAB_DIR/pct-$1.log" | grep -m1 'drover-agent.* preflight ' | sed -E 's/^[0-9-]+T([0-9]+):([0-9]+):([0-9.]+) .*/\1 \2 \3/' | awk '{ printf "%.3f", $1 * 3600 + $2 * 60 + $3 }'; }
s1=$(pf_start h1 "$mark1") s2=$(pf_start h2 "$mark2")
check "h2's preflight ran although h1:101's failed (hosts at once, not one after another)" test -n "$s2"
check "and started within 2 s of h1's (h1's takes 3 s)" \
	saw "h1 at ${s1:-?}, h2 at ${s2:-?}" awk -v a="${s1:-0}" -v b="${s2:-99999}" 'BEGIN { d = a - b; exit !(d < 2 && d > -2) }'

drover trust h1 -o json
check "trust -o json: h1 already trusted" \
	jq -e '.v == 1 and .kind == "trust" and .hosts[0].host == "h1" and .hosts[0].result == "already-trusted" and (.hosts[0].fingerprint | startswith("SHA256:"))' "$E2E_WORK/last.out"

say "drover exporter on 127.0.0.1:19464"
"$E2E_BUILD/drover" -i "$INV" exporter --listen 127.0.0.1:19464 --interval 1 2>"$E2E_WORK/exporter.err" &
exp_pid=$!
# every rank's line: the exporter's per-host pollers answer one by one, and a scrape taken
# before h1's first answer (seen under load) holds only h2's rank
scrape() { curl -s -f http://127.0.0.1:19464/metrics >"$E2E_WORK/metrics.txt" && test "$(grep -c '^drover_rank_step{' "$E2E_WORK/metrics.txt")" -ge 3; }
wait_until 30 scrape
check "/metrics has every rank's step with drover_job, host, vmid and rank labels" \
	grep -q '^drover_rank_step{drover_job="train",host="h1",vmid="[0-9]*",rank="0"} [0-9]' "$E2E_WORK/metrics.txt"
# the lab has no NVML and its job no gpus: no gpu or UUID label at all (gpu="" was printed)
check "no empty gpu or UUID label" bash -c "! grep -q 'gpu=\"\"\\|UUID=\"\"' '$E2E_WORK/metrics.txt'"
check "/metrics has drover_build_info" grep -q '^drover_build_info{program="drover",version=' "$E2E_WORK/metrics.txt"
check "no job= label (Prometheus's own)" bash -c "! grep -q '{job=' '$E2E_WORK/metrics.txt'"
check "no float noise" bash -c "! grep -Eq ' -?[0-9]+\.[0-9]*0000000[0-9]+\$' '$E2E_WORK/metrics.txt'"
kill "$exp_pid"
wait "$exp_pid"
check "the exporter exits 0 on SIGTERM" test "$?" = 0
if command -v promtool >/dev/null; then
	check "promtool accepts deploy/drover-alerts.yml" promtool check rules "$E2E_ROOT/deploy/drover-alerts.yml"
else
	say "promtool not installed (Debian: apt-get install prometheus): alert rules not checked"
fi
finish
