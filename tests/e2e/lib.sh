# tests/e2e/lib.sh: shared helpers for the end-to-end tests (sourced by run.sh and each t-*.sh).
#
# Owns: the release builder, the `drover` wrapper, status JSON queries, container inspection
# (lxc-attach directly, so that inspection never shows up in the pct call logs) and the
# check/assert vocabulary.  Tests assert on what a user sees (exit code, message, status JSON)
# and on what is true in the containers afterwards.  Never changes the lab's shape.
#
# Environment (set by run.sh): E2E_BUILD (absolute build dir), LAB_DIR, E2E_WORK (scratch).

: "${E2E_BUILD:?run through tests/e2e/run.sh}"
: "${LAB_DIR:?}"
: "${E2E_WORK:?}"
E2E_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LAB="$E2E_ROOT/tests/lab/lab"
INV="$LAB_DIR/inventory.ini"
E2E_CTS=${E2E_CTS:-"h1:101 h1:102 h2:201"}
E2E_DATA_TRAIN=${E2E_DATA_TRAIN:-/srv/drover-data/train_000000.bin}
E2E_DATA_VAL=${E2E_DATA_VAL:-/srv/drover-data/val_000000.bin}
export LAB_DIR

CHECKS_FAILED=0
CHECKS_PASSED=0

say() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }

check() { # check DESCRIPTION COMMAND...  (passes when COMMAND succeeds)
	local d=$1
	shift
	WAITED="" # set by wait_until (and the other timed helpers): the figure, said after the verdict
	if "$@"; then
		CHECKS_PASSED=$((CHECKS_PASSED + 1))
		printf '  ok   %s%s\n' "$d" "${WAITED:+  [$WAITED]}"
	else
		CHECKS_FAILED=$((CHECKS_FAILED + 1))
		printf '  FAIL %s%s\n' "$d" "${WAITED:+  [$WAITED]}"
	fi
	[[ -n $WAITED ]] && margin "$d" "$WAITED"
	return 0
}

# ---------------------------------------------------------------- timing
# Timed checks measure from the moment the thing under test is ready (a frame on screen, a rank
# stepping), with bounds meant to hold on a 2-core machine that compiles beside the lab (the
# load CI must survive), and say the figure they saw.  Speed claims belong in bench/.
# Every figure goes to $E2E_WORK/margins.tsv (test, check, figure); run.sh prints the tightest.

# now_cs: a monotonic clock in centiseconds (/proc/uptime: no date(1), not the wall clock)
now_cs() {
	local up
	read -r up _ </proc/uptime
	echo $((10#${up/./}))
}
# secs CENTISECONDS: "12.34"
secs() { printf '%d.%02d' $(($1 / 100)) $(($1 % 100)); }
# margin CHECK FIGURE: record a timed check's figure ("3.21 s of 15 s", "5 frames >= 4")
margin() { printf '%s\t%s\t%s\n' "${E2E_TEST:-?}" "$2" "$1" >>"$E2E_WORK/margins.tsv"; }
fatal() { printf '  FATAL %s\n' "$*"; exit 1; }

finish() { # end of a test script
	printf '  (%d checks passed, %d failed)\n' "$CHECKS_PASSED" "$CHECKS_FAILED"
	((CHECKS_FAILED == 0))
}

wait_until() { # wait_until SECONDS COMMAND...: polls COMMAND until it succeeds; says how long it took
	local bound=$1 t0 t
	shift
	t0=$(now_cs)
	while (($(now_cs) - t0 < bound * 100)); do
		if "$@"; then
			t=$(($(now_cs) - t0))
			WAITED="$(secs $t) s of $bound s"
			return 0
		fi
		sleep 0.5
	done
	"$@"
	local rc=$?
	t=$(($(now_cs) - t0))
	WAITED="$(secs $t) s of $bound s"
	((rc == 0)) || WAITED="not within $bound s (gave up after $(secs $t) s)"
	return $rc
}

# saw FIGURE COMMAND...: runs COMMAND (a check's test) and reports FIGURE with its verdict
saw() {
	WAITED=$1
	shift
	"$@"
}

# ---------------------------------------------------------------- drover
# drover ARGS... : runs the controller against the lab inventory; output also kept in
# $E2E_WORK/last.out / last.err; sets DROVER_RC.
drover() {
	local t0=$SECONDS
	"$E2E_BUILD/drover" -i "$INV" "$@" >"$E2E_WORK/last.out" 2>"$E2E_WORK/last.err"
	DROVER_RC=$?
	{
		printf '$ drover -i %s %s   (exit %d, %ds)\n' "$INV" "$*" "$DROVER_RC" $((SECONDS - t0))
		sed 's/^/  out| /' "$E2E_WORK/last.out" | tail -40
		sed 's/^/  err| /' "$E2E_WORK/last.err" | tail -40
	} >>"$E2E_WORK/drover.log"
	return 0
}
drover_out() { cat "$E2E_WORK/last.out" "$E2E_WORK/last.err"; }
# drover_said REGEX: the last drover call said it (stdout or stderr).  No `cmd | grep -q` in these
# tests: with pipefail, grep's early exit can fail the writer with SIGPIPE and flip the verdict.
drover_said() { grep -E -i -q -- "$1" "$E2E_WORK/last.out" "$E2E_WORK/last.err"; }
said_in() { grep -E -q -- "$1" "$E2E_WORK/$2"; } # said_in REGEX FILE: a background drover's output (in $E2E_WORK) says it
show_drover() { sed 's/^/    | /' "$E2E_WORK/last.out" "$E2E_WORK/last.err" | tail -${1:-15}; }

status_json() { # prints `drover status -o json` (empty on failure)
	"$E2E_BUILD/drover" -i "$INV" status -o json 2>>"$E2E_WORK/status.err" || true
}

# every rank object anywhere in the status document (the agent's rank shape: rank + hb)
ranks_of() { jq -c '[.. | objects | select(has("rank") and has("hb"))]' 2>/dev/null; }

# "rank step ktok_s release resumed_from pid" lines for the ranks in a status document on stdin
rank_table() {
	jq -r '[.. | objects | select(has("rank") and has("hb"))] | .[] |
		[.rank, (.hb.step // -1), ((.hb.tok_s // 0) / 1000), (.hb.release // "-"),
		 (.hb.resumed_from // -1), (.pid // 0)] | @tsv' 2>/dev/null
}

# all_ranks_advance N SECONDS: within SECONDS, N ranks report in status (a restarting gang is
# given the time to come back) and then every one of them reports a larger step than it did
# then, with Ktok/s > 0.  Says how long each part took (the bound is for "not stalled": a step
# of the lab's model takes well under a second, even with both cores busy).
all_ranks_advance() {
	local n=$1 bound=$2 a="" b="" t0 t_up t
	t0=$(now_cs)
	while :; do
		a=$(status_json | rank_table | sort -n)
		[[ $(echo "$a" | grep -c .) == "$n" ]] && break
		(($(now_cs) - t0 < bound * 100)) || break
		sleep 1
	done
	t_up=$(($(now_cs) - t0))
	advanced() {
		[[ $(echo "$a" | grep -c .) == "$n" && $(echo "$b" | grep -c .) == "$n" ]] || return 1
		paste <(echo "$a") <(echo "$b") | awk -F'\t' '{ if ($1 != $7 || !($8 > $2) || !($9 > 0)) bad = 1 } END { exit bad }'
	}
	while :; do
		b=$(status_json | rank_table | sort -n)
		advanced && break
		(($(now_cs) - t0 < bound * 100)) || break
		sleep 1
	done
	t=$(($(now_cs) - t0))
	printf '    before: %s\n    after:  %s\n' "$(echo "$a" | tr '\n' ';')" "$(echo "$b" | tr '\n' ';')"
	if advanced; then
		WAITED="all $n ranks up after $(secs $t_up) s, all advanced after $(secs $t) s of $bound s"
		return 0
	fi
	WAITED="not within $bound s ($(echo "$a" | grep -c .) of $n ranks up after $(secs $t_up) s)"
	return 1
}

# ---------------------------------------------------------------- hosts
# host_addr NAME: fake host NAME's address, from the lab's own inventory (a private lab's
# LAB_HOSTS puts its hosts elsewhere on 127/8: never assume 127.0.0.2 and .3)
host_addr() {
	awk -v s="[host $1]" '/^\[/ { in_s = ($0 == s) } in_s && $1 == "address" { print $3; exit }' "$LAB_DIR/inventory.ini"
}
re_quote() { sed 's/[][\.*^$|+?(){}]/\\&/g' <<<"$1"; } # re_quote TEXT: TEXT as an ERE matching itself

# ---------------------------------------------------------------- containers
ct_name() { echo "${1%%:*}-${1#*:}"; }
ct() { # ct HOST:VMID CMD... : run in the container directly (not through pct; not logged)
	local c=$1
	shift
	lxc-attach -P "$LAB_DIR/lxc" -n "$(ct_name "$c")" --clear-env -- "$@"
}
ct_current() { ct "$1" readlink /var/lib/drover/jobs/${2:-train}/current 2>/dev/null | sed 's|.*/||'; }
# pids of worker processes (argv[0] is .../drover-train) in a container
ct_pids() { ct "$1" sh -c 'for p in /proc/[0-9]*; do c=$(tr "\0" "\n" < $p/cmdline 2>/dev/null | head -n 1); case "$c" in *drover-train) echo "${p#/proc/}";; esac; done' | sort -n | tr '\n' ' '; }
# true when no container of the job runs a drover-train process; names the ones that do
no_worker_anywhere() {
	local c rc=0
	for c in $E2E_CTS; do
		[[ -z $(ct_pids "$c") ]] || { printf '    %s: workers %s\n' "$c" "$(ct_pids "$c")"; rc=1; }
	done
	return $rc
}
all_pids() { local c; for c in $E2E_CTS; do printf '%s=[%s] ' "$c" "$(ct_pids "$c")"; done; }

# ---------------------------------------------------------------- pct call logs
pct_mark() {
	local h
	for h in h1 h2; do
		wc -l <"$LAB_DIR/pct-$h.log" 2>/dev/null >"$E2E_WORK/mark-$h" || echo 0 >"$E2E_WORK/mark-$h"
		wc -l <"$LAB_DIR/hosts/$h/sshd.log" 2>/dev/null >"$E2E_WORK/mark-ssh-$h" || echo 0 >"$E2E_WORK/mark-ssh-$h"
	done
}
host_execs_since() { # host_execs_since HOST : SSH commands HOST's sshd started since pct_mark
	local m      # (every round trip to the host: a host shell, or a pct the controller ran itself)
	m=$(cat "$E2E_WORK/mark-ssh-$1" 2>/dev/null || echo 0)
	tail -n +$((m + 1)) "$LAB_DIR/hosts/$1/sshd.log" 2>/dev/null | grep -c 'Starting session: command'
}
pct_since_has() { # pct_since_has HOST REGEX : a call matching REGEX was logged since pct_mark
	local calls
	calls=$(pct_since "$1")
	grep -E -q -- "$2" <<<"$calls"
}
pct_since() { # pct_since HOST : calls logged on HOST since pct_mark
	local m
	m=$(cat "$E2E_WORK/mark-$1" 2>/dev/null || echo 0)
	tail -n +$((m + 1)) "$LAB_DIR/pct-$1.log" 2>/dev/null
}

# ---------------------------------------------------------------- releases
# make_release NAME [section.key=value ...]: $E2E_WORK/releases/NAME with bin/drover-train and
# etc/train.ini (a tiny model reading the lab's shared Brown shards); prints the directory.
make_release() {
	local name=$1 d="$E2E_WORK/releases/$1"
	shift
	rm -rf "$d"
	mkdir -p "$d/bin" "$d/etc"
	cp "$E2E_BUILD/drover-train" "$d/bin/drover-train"
	chmod 0755 "$d/bin/drover-train"
	local -A kv=(
		[model.layers]=2 [model.heads]=2 [model.dim]=64 [model.seq]=64 [model.vocab]=${E2E_VOCAB:-4096}
		[train.batch]=4 [train.lr]=0.001 [train.warmup_steps]=10 [train.max_steps]=0
		[train.checkpoint_every]=10 [train.keep_checkpoints]=3 [train.seed]=1337 [train.log_every]=10
		[data.train]=$E2E_DATA_TRAIN [data.val]=$E2E_DATA_VAL
		[backend.device]=cpu [backend.threads]=1
	)
	local o
	for o in "$@"; do kv[${o%%=*}]=${o#*=}; done
	local sec k
	{
		echo "# release $name (tests/e2e)"
		for sec in model train data backend; do
			echo "[$sec]"
			for k in $(printf '%s\n' "${!kv[@]}" | grep "^$sec\\." | sort); do
				[[ -n ${kv[$k]} ]] && echo "${k#*.} = ${kv[$k]}"
			done
		done
	} >"$d/etc/train.ini"
	echo "release $name" >"$d/RELEASE"
	echo "$d"
}

# one_ct_job JOB: sets INV to the lab's inventory plus [job JOB] in h1:102 running ./w.sh (a job
# of its own, never started by the lab's), with the agent installed there
one_ct_job() {
	INV="$E2E_WORK/$1.ini"
	{
		cat "$LAB_DIR/inventory.ini"
		printf '\n[job %s]\ncontainers = h1:102\ncommand = ./w.sh\n' "$1"
	} >"$INV"
	if ! ct h1:102 test -x /usr/local/bin/drover-agent; then
		drover install
		((DROVER_RC == 0)) || { show_drover; fatal "drover install failed"; }
	fi
}

# inv_variant FILE [COMMAND]: FILE is the lab's inventory with a tolerance the shared machine's
# load cannot fail (0.9) and, given COMMAND, the job's command bin/COMMAND (a wrapper in the
# release, written by release_script)
inv_variant() {
	sed -e "s|^command = bin/drover-train\$|command = bin/${2:-drover-train}|" -e 's|^tolerance = .*|tolerance = 0.9|' "$INV" >"$1"
}
release_script() { cat >"$1/bin/$2" && chmod 0755 "$1/bin/$2"; } # release_script DIR NAME: bin/NAME from stdin

# deploy_promoted NAME DIR: `drover deploy DIR --job train` (with $INV) must promote it: checks
# the exit and that every container runs it; DEPLOYED is its id (what h1:101 runs)
deploy_promoted() {
	drover deploy "$2" --job train
	show_drover 3
	check "deploy $1 exits 0 (promoted)" test "$DROVER_RC" = 0
	DEPLOYED=$(ct_current h1:101)
	say "$1 is ${DEPLOYED:-?}"
	check "every container runs $1" all_current_is "${DEPLOYED:-none}"
}

deployed_ids() { status_json | jq -r '[.. | objects | select(has("current")) | .current] | unique | .[]' 2>/dev/null; }

# ---------------------------------------------------------------- shared state between tests
V1_FILE="$E2E_WORK/v1.id"
v1_id() { cat "$V1_FILE" 2>/dev/null; }

# every container's job current points at release $1 (a full id or a prefix)
all_current_is() {
	local c cur rc=0
	for c in $E2E_CTS; do
		cur=$(ct_current "$c")
		if [[ -z $cur || $cur != "$1"* ]]; then
			printf '    %s: current=%s (want %s)\n' "$c" "${cur:-none}" "$1"
			rc=1
		fi
	done
	return $rc
}

# make sure v1 is deployed and running (for tests that start from the good state)
ensure_v1() {
	local id
	id=$(v1_id)
	if [[ -n $id ]] && all_current_is "$id" >/dev/null && [[ $(status_json | rank_table | grep -c .) -ge 3 ]]; then
		return 0
	fi
	say "v1 is not running; deploying it first"
	local c
	for c in $E2E_CTS; do # run alone (E2E_ONLY without t-10): the agents are not installed yet
		ct "$c" test -x /usr/local/bin/drover-agent && continue
		say "no agent in $c; drover install first"
		drover install
		((DROVER_RC == 0)) || { show_drover; fatal "drover install failed (exit $DROVER_RC)"; }
		break
	done
	local d="$E2E_WORK/releases/v1"
	# the same directory as t-10's, so the same release id (the build may have changed since)
	[[ -x $d/bin/drover-train ]] || d=$(make_release v1)
	drover deploy "$d" --job train
	((DROVER_RC == 0)) || { show_drover; fatal "could not deploy v1 (exit $DROVER_RC)"; }
	id=$(ct_current h1:101)
	echo "$id" >"$V1_FILE"
}
