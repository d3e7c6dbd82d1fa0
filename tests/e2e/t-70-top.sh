#!/bin/bash
# t-70-top: `drover top` driven in tmux against the lab (send-keys, capture-pane): the frame
# shows every rank with advancing steps; the keys work (flat, filter, help, events, fold); a
# killed worker turns its container's row red within 6 s; a stopped fake host (its sshd and
# sessions frozen with SIGSTOP, so nothing answers and no connection is refused) shows as
# unreachable within 15 s while the screen keeps refreshing and answering keys, and comes back
# after SIGCONT; resizing to 80 columns drops columns and nothing wraps; NO_COLOR and --ascii
# give a frame without colour and without UTF-8; `top --once` prints one frame and exits; an
# agent stopped with SIGSTOP (it takes the watch stream and says nothing) is unreachable under
# `top --once`, with an alert and a `!` line naming it, as `drover status` says agent-unreachable.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

command -v tmux >/dev/null || fatal "tmux missing (tests/deps.txt)"
ensure_v1

TM=(tmux -L "drover-e2e-top-$$")
read -r -a CTS <<<"$E2E_CTS"
NRANKS=${#CTS[@]} # one rank per container in the lab
NHOSTS=$(printf '%s\n' "${CTS[@]}" | cut -d: -f1 | sort -u | wc -l)
KILL_CT=${CTS[0]}
STOP_HOST=${CTS[$((${#CTS[@]} - 1))]%%:*}
[[ $STOP_HOST == "${KILL_CT%%:*}" ]] && fatal "the lab needs containers on two hosts"
STOPPED=""

descendants() { local p; for p in $(pgrep -P "$1"); do echo "$p"; descendants "$p"; done; }
host_procs() { local p; p=$(cat "$LAB_DIR/hosts/$1/sshd.pid"); echo "$p" $(descendants "$p"); }
HUNG_CT=""
cleanup() {
	[[ -n $STOPPED ]] && kill -CONT $STOPPED 2>/dev/null
	[[ -n $HUNG_CT ]] && ct "$HUNG_CT" sh -c 'kill -CONT "$(cat /run/drover/agent.pid)"' 2>/dev/null
	"${TM[@]}" kill-server 2>/dev/null
	rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/drover-e2e-top-$$"
}
trap cleanup EXIT

# start_top SESSION WIDTH HEIGHT [ENV=V...] -- [top args...]
start_top() {
	local s=$1 w=$2 h=$3 envs=()
	shift 3
	while [[ $# -gt 0 && $1 != -- ]]; do envs+=("$1"); shift; done
	shift
	"${TM[@]}" new-session -d -s "$s" -x "$w" -y "$h" \
		env LANG=C.UTF-8 "${envs[@]}" "$E2E_BUILD/drover" -i "$INV" top "$@"
}
screen() { "${TM[@]}" capture-pane -p -t "$1"; }
screen_esc() { "${TM[@]}" capture-pane -p -e -t "$1"; }
keys() { "${TM[@]}" send-keys -t "$@"; }
alive() { "${TM[@]}" has-session -t "$1" 2>/dev/null; }
title_clock() { screen "$1" | head -1 | grep -o 'drover top [0-9:]*'; }
# "rank step" for every rank row of the tree view
rank_steps() { screen "$1" | awk '$1 == "rank" && $2 ~ /^[0-9]+$/ { print $2, $5 }' | sort -n; }
# a container's row: "  ▾ 101 train ..." (the fold mark is a space when it has no rank rows)
ct_pat() { echo "  ([^ ]+| ) ${1#*:} "; }
ct_row() { screen_esc "$1" | grep -E "^(.\[[0-9;]*m)*$(ct_pat "$2")" | head -1; }
# red STATE (an alert state) or red RST (a restart in the last minute) on the container's row
RED_CELL=$'\e\\[[0-9;]*31m(\e\\[[0-9;]*m)*(backoff|failed|stalled|reverted|unreachable|[0-9]+ \\()'
ct_row_red() { ct_row "$1" "$2" | grep -qE "$RED_CELL"; }
RED_STATE=$'\e\\[[0-9;]*31m(\e\\[[0-9;]*m)*(backoff|failed|stalled|reverted|unreachable)'
ct_state_red() { ct_row "$1" "$2" | grep -qE "$RED_STATE"; }
ct_state_not_red() { ! ct_state_red "$@"; }
# the container's restart count (RST), 0 when none
ct_restarts() { screen "$1" | grep -E "^$(ct_pat "$2")" | grep -oE ' [0-9]+ \([0-9]+[smhd] ago\)' | awk '{ print $1; exit }' | grep . || echo 0; }
ct_row_says() { screen "$1" | grep -E "^$(ct_pat "$2")" | grep -q -- "$3"; }
ct_row_not_says() { ! ct_row_says "$@"; }
max_width() { screen "$1" | LC_ALL=C.UTF-8 wc -L; } # display columns, not bytes
fits_in() { (($(max_width "$1") <= $2)); }
shows() { screen "$1" | grep -qE -- "$2"; }
titles() { screen "$1" | sed -n 3p; }
titles_have() { titles "$1" | grep -q -- "$2"; }
titles_lack() { ! titles_have "$@"; }
host_row_shown() { screen "$1" | grep -qE "^[^ ]+ $2( |\$)"; }
gone() { ! alive "$1"; }
rank_rows() { screen "$1" | grep -c '^ *rank [0-9]'; }
fewer_ranks() { (($(rank_steps "$1" | grep -c .) < $2)); }
no_colour() { ! screen_esc "$1" | grep -q $'\e\\[[0-9;]*\\(3[0-7]\\|38;5\\)[;m]'; }
ascii_only() { ! screen "$1" | LC_ALL=C grep -q '[^ -~]'; }
# the container's row has a STEP: "train REL STATE STEP ..." after the vmid (the fold mark before
# the vmid is a space when no rank rows are shown, so fields are counted from the vmid)
dimmed_values_kept() {
	local row
	row=$(screen "$1" | grep -E "^$(ct_pat "$2")" | head -1)
	[[ -n $row ]] && sed -E "s/^$(ct_pat "$2")//" <<<"$row" | awk '{ exit !($4 ~ /^[0-9]+$/) }'
}

# ---------------------------------------------------------------- --once
say "drover top --once"
"$E2E_BUILD/drover" -i "$INV" top --once --width 132 >"$E2E_WORK/top-once.txt" 2>"$E2E_WORK/top-once.err"
rc=$?
sed 's/^/    | /' "$E2E_WORK/top-once.txt"
check "--once exits 0 with every container reachable" test "$rc" = 0
check "--once shows a row for each of the $NRANKS ranks" test "$(grep -c '^ *rank [0-9]' "$E2E_WORK/top-once.txt")" = "$NRANKS"
check "--once prints no colour when stdout is not a terminal" bash -c "! grep -q $'\\e' '$E2E_WORK/top-once.txt'"

say "a vmid that is no container on its host (h1:199 in place of h1:101): top and status name it"
INV_T="$E2E_WORK/inventory-vmid-typo.ini"
sed -E '/^containers *=/ s/h1:101/h1:199/' "$INV" >"$INV_T"
"$E2E_BUILD/drover" -i "$INV_T" top --once --width 250 >"$E2E_WORK/top-typo.txt" 2>"$E2E_WORK/top-typo.err"
rc=$?
sed 's/^/    | /' "$E2E_WORK/top-typo.txt" "$E2E_WORK/top-typo.err" | head -20
check "top --once exits 1 with a container missing ($rc)" test "$rc" = 1
check "top names the missing container and the fix (not 'container stopped, or agent not installed')" \
	bash -c "grep -h 'no container 199 on this host' '$E2E_WORK/top-typo.txt' '$E2E_WORK/top-typo.err' | grep -q 'check the vmid'"
"$E2E_BUILD/drover" -i "$INV_T" status >"$E2E_WORK/status-typo.txt" 2>"$E2E_WORK/status-typo.err"
rc=$?
sed 's/^/    | /' "$E2E_WORK/status-typo.txt" "$E2E_WORK/status-typo.err" | head -10
check "status exits 1 and says ct-missing for h1:199 ($rc)" \
	bash -c "[[ $rc == 1 ]] && grep -q 'h1:199 .*ct-missing' '$E2E_WORK/status-typo.txt'"

say "the agent daemon in ${CTS[1]} stopped (SIGSTOP): top --once and status both say it did not answer"
HUNG_CT=${CTS[1]}
ct "$HUNG_CT" sh -c 'kill -STOP "$(cat /run/drover/agent.pid)"' || fatal "cannot stop the agent in $HUNG_CT"
"$E2E_BUILD/drover" -i "$INV" top --once --width 132 >"$E2E_WORK/top-hung.txt" 2>"$E2E_WORK/top-hung.err"
rc=$?
"$E2E_BUILD/drover" -i "$INV" status -o json >"$E2E_WORK/status-hung.json" 2>"$E2E_WORK/status-hung.err"
src=$?
ct "$HUNG_CT" sh -c 'kill -CONT "$(cat /run/drover/agent.pid)"'
HUNG_CT=""
sed 's/^/    | /' "$E2E_WORK/top-hung.txt" "$E2E_WORK/top-hung.err" | head -20
hung_state() { jq -r --arg c "${CTS[1]}" '.jobs[].containers[] | select(.container == $c) | .state' "$E2E_WORK/status-hung.json"; }
check "top --once exits 1 with the agent of ${CTS[1]} stopped ($rc)" test "$rc" = 1
check "its row says unreachable (it said starting)" grep -qE "^$(ct_pat "${CTS[1]}").* unreachable " "$E2E_WORK/top-hung.txt"
check "the alerts count it (they said none)" grep -q 'alerts: unreachable 1' "$E2E_WORK/top-hung.txt"
check "a '! ${CTS[1]}: ...' line names it and what stalled" \
	grep -q "^! ${CTS[1]}: its agent sent no status document in [0-9]*s: is drover-agent stopped or hung there?" "$E2E_WORK/top-hung.txt"
check "status agrees: exit 1 ($src), ${CTS[1]} agent-unreachable (got '$(hung_state)')" \
	bash -c "[[ $src == 1 && '$(hung_state)' == agent-unreachable ]]"

say "drover top --watch 1 (text frames, the status --watch way)"
# The first frame waits for the SSH sessions to both fake hosts and a watch channel per
# container, which on a loaded 2-core machine can take most of 5 s; the check is on the frames
# after it: over WATCH_WINDOW seconds from the first frame, at least half of one a second (a
# watch that blocked on its sessions would print one per connect timeout or none).
WATCH_WINDOW=10
WATCH_MIN=5
# watch_frames: runs top --watch 1 until WATCH_WINDOW s after its first frame (at most 90 s in
# all), each line stamped with the monotonic time it arrived; sets FIRST_CS (first frame, from
# the start) and NFRAMES (frames after the first, within the window)
watch_frames() {
	local t0 t1="" t line fd pid out="$E2E_WORK/top-watch.txt"
	: >"$out"
	FIRST_CS="" NFRAMES=0
	t0=$(now_cs)
	exec {fd}< <(exec timeout 90 "$E2E_BUILD/drover" -i "$INV" top --watch 1 --width 132 2>&1)
	pid=$!
	while :; do
		if IFS= read -r -t 1 -u "$fd" line; then
			t=$(now_cs)
			printf '%s %s\n' "$(secs $((t - t0)))" "$line" >>"$out"
			if [[ $line =~ ^drover\ top\ [0-9:]+\ \(every\ 1s\) ]]; then
				if [[ -z $t1 ]]; then
					t1=$t
					FIRST_CS=$((t - t0))
				elif ((t - t1 <= WATCH_WINDOW * 100)); then
					NFRAMES=$((NFRAMES + 1))
				fi
			fi
		elif (($? <= 128)); then
			break # the command ended
		fi
		t=$(now_cs)
		[[ -n $t1 ]] && ((t - t1 > WATCH_WINDOW * 100)) && break
		((t - t0 > 9000)) && break
	done
	kill "$pid" 2>/dev/null
	exec {fd}<&-
	wait "$pid" 2>/dev/null
}
watch_frames
first="never"
[[ -n $FIRST_CS ]] && first="$(secs "$FIRST_CS") s"
say "--watch 1: first frame after $first, then $NFRAMES in $WATCH_WINDOW s"
grep -E '^[0-9.]+ drover top ' "$E2E_WORK/top-watch.txt" | sed 's/^/    | /' | head -20
check "--watch 1 prints a first frame (sessions opened) within 90 s" \
	saw "$first of 90 s" test -n "$FIRST_CS"
check "--watch 1 then prints a dated frame about every second (want >= $WATCH_MIN in the $WATCH_WINDOW s after the first)" \
	saw "$NFRAMES frames (>= $WATCH_MIN) in $WATCH_WINDOW s; first after $first" test "$NFRAMES" -ge "$WATCH_MIN"

# ---------------------------------------------------------------- the live screen
say "drover top in tmux (132x40)"
start_top top 132 40 --
all_ranks_shown() { [[ $(rank_steps top | grep -c .) == "$NRANKS" ]]; }
# the first frame waits for the sessions (see --watch above): bounded for a loaded machine
check "the frame shows all $NRANKS ranks (sessions opened) within 60 s" wait_until 60 all_ranks_shown
screen top | sed 's/^/    | /' | head -$((NRANKS * 2 + 8))
hdr=$(screen top | head -1)
check "header: all hosts reachable and $NRANKS/$NRANKS ranks running" \
	bash -c "grep -q 'hosts $NHOSTS/$NHOSTS' <<<'$hdr' && grep -q 'ranks $NRANKS/$NRANKS running' <<<'$hdr'"
a=$(rank_steps top)
b=""
steps_advance() {
	b=$(rank_steps top)
	[[ $(echo "$a" | grep -c .) == "$NRANKS" && $(echo "$b" | grep -c .) == "$NRANKS" ]] || return 1
	paste -d' ' <(echo "$a") <(echo "$b") | awk '{ if ($1 != $3 || !($4 > $2)) bad = 1 } END { exit bad }'
}
# a step takes well under a second and the screen refreshes every 2 s: 30 s is for "not frozen"
check "every rank's STEP advances on screen within 30 s" wait_until 30 steps_advance
printf '    steps before: %s\n    steps after:  %s\n' "$(echo "$a" | tr '\n' ';')" "$(echo "$b" | tr '\n' ';')"

say "keys: t, /, ?, l, enter"
keys top t
check "t: flat view names ranks host:vmid/rank" wait_until 10 shows top "^${CTS[0]}/[0-9]"
keys top t
check "t again: back to the tree" wait_until 10 shows top '^ +rank [0-9]' 
keys top / "$STOP_HOST" Enter
filtered_to_host() { ! host_row_shown top "${KILL_CT%%:*}" && host_row_shown top "$STOP_HOST"; }
check "/ $STOP_HOST: only $STOP_HOST's rows remain" wait_until 10 filtered_to_host
keys top / BSpace BSpace BSpace BSpace BSpace BSpace Enter
check "an empty filter shows every rank again" wait_until 10 all_ranks_shown
keys top '?'
check "?: the help lists the keys" wait_until 10 shows top 'keys and colours' 
keys top x
keys top j l
check "l: recent events of the selected container (its agent's journal)" \
	wait_until 30 shows top 'activate|promote|agent-start' 
screen top | grep -A6 'events of' | sed 's/^/    | /'
keys top x
keys top Home Enter
check "enter on a host folds it (its rank rows disappear)" \
	wait_until 10 fewer_ranks top "$NRANKS"
keys top Enter
check "enter again unfolds it" wait_until 10 all_ranks_shown

say "R asks first, naming the job and its containers; n cancels; --readonly has no actions"
currents() { local c; for c in "${CTS[@]}"; do ct_current "$c"; done | tr '\n' ' '; }
same_currents() { sleep 1; [[ $(currents) == "$currents_before" ]]; }
currents_before=$(currents)
keys top Home j R
names_targets() { shows top "Roll back job 'train' on ${E2E_CTS// / } to [0-9a-f]{12} .*y to confirm" || shows top "job 'train' has no release to roll back to"; }
check "R: a confirmation naming job train and every container (or: nothing to go back to)" wait_until 10 names_targets
screen top | tail -1 | sed 's/^/    | /'
keys top n
check "any key but y cancels, and nothing was switched" same_currents

# ---------------------------------------------------------------- a killed worker
say "kill -9 the worker in $KILL_CT"
pid=$(ct_pids "$KILL_CT" | awk '{ print $1 }')
check "$KILL_CT has a worker to kill" test -n "$pid"
check "$KILL_CT's STATE is not red before" ct_state_not_red top "$KILL_CT"
rst_before=$(ct_restarts top "$KILL_CT")
# red for this kill: an alert STATE, or a red RST that counts one restart more
killed_red() { ct_row_red top "$KILL_CT" && { ct_state_red top "$KILL_CT" || (($(ct_restarts top "$KILL_CT") > rst_before)); }; }
# measured from the kill (the screen is up and current: the checks above read it); the chain is
# the agent's SIGCHLD, its watch stream (one document per 2 s refresh), SSH, one redraw
RED_BOUND=6
ct "$KILL_CT" kill -9 $pid
check "the killed worker's container row turns red within $RED_BOUND s (docs/dashboard.md)" wait_until $RED_BOUND killed_red
ct_row top "$KILL_CT" | sed 's/^/    | /'


# ---------------------------------------------------------------- resize, NO_COLOR, --ascii
say "resize to 80x30"
"${TM[@]}" resize-window -t top -x 80 -y 30
check "at 80 columns nothing is wider than 80" wait_until 10 fits_in top 80
check "at 80 columns MEM is dropped" titles_lack top MEM
check "at 80 columns KTOK/S, TREND and HB stay" titles_have top 'KTOK/S.*TREND.*HB' 
"${TM[@]}" resize-window -t top -x 132 -y 40
check "back at 132 columns MEM is shown again" wait_until 10 titles_have top MEM

say "NO_COLOR=1 --ascii --readonly at 80x30"
start_top plain 80 30 NO_COLOR=1 -- --ascii --readonly
plain_cts() { [[ $(screen plain | grep -cE "^  ([^ ]+| ) [0-9]+ train") == "${#CTS[@]}" ]]; }
check "NO_COLOR: the frame shows every container (sessions opened) within 60 s" wait_until 60 plain_cts
screen plain | head -8 | sed 's/^/    | /'
check "NO_COLOR: no colour escapes (30-37, 38;5)" no_colour plain
check "--ascii: nothing but ASCII on the screen" ascii_only plain
keys plain j R
check "--readonly: R does nothing but say so" wait_until 10 shows plain 'read-only \(--readonly\): no actions'
keys plain q
check "q quits" wait_until 10 gone plain

# ---------------------------------------------------------------- a stopped host
stop_ct=${CTS[$((${#CTS[@]} - 1))]}
check "every rank back after the kill (the whole gang restarts)" wait_until 120 all_ranks_shown
check "$stop_ct shows its STEP before its host is stopped" wait_until 60 dimmed_values_kept top "$stop_ct"
say "SIGSTOP every process of fake host $STOP_HOST's sshd (listener and sessions)"
STOPPED=$(host_procs "$STOP_HOST")
kill -STOP $STOPPED
# the rule is 2.5 x refresh + 3 s = 8 s at 2 s (docs/dashboard.md), on top's own clock
check "$stop_ct shows as unreachable within 15 s" wait_until 15 ct_row_says top "$stop_ct" unreachable
screen top | sed 's/^/    | /' | head -$((NRANKS * 2 + 6))
c1=$(title_clock top)
c2=$c1
clock_moved() { c2=$(title_clock top); [[ -n $c2 && $c2 != "$c1" ]]; }
check "the screen keeps refreshing while $STOP_HOST is stopped (title clock moves within 10 s)" wait_until 10 clock_moved
say "title clock: $c1 -> $c2"
keys top t
# a screen that waited on the frozen host would answer after a connect timeout (10 s) or never
check "and keys are answered at once (t: flat view within 5 s)" wait_until 5 shows top "^${CTS[0]}/[0-9]"
keys top t
# read the row only once the tree is back: right after the key the screen may still be flat
check "t again: back to the tree" wait_until 10 shows top '^ +rank [0-9]'
check "the stopped host's row keeps its last values (STEP still shown)" dimmed_values_kept top "$stop_ct"
screen top | grep -E -A1 "^$(ct_pat "$stop_ct")" | sed 's/^/    | /'
say "drover top --once while $STOP_HOST is stopped"
t1=$(now_cs)
"$E2E_BUILD/drover" -i "$INV" top --once --width 132 >"$E2E_WORK/top-once-stopped.txt" 2>&1
rc=$?
once_cs=$(($(now_cs) - t1))
sed 's/^/    | /' "$E2E_WORK/top-once-stopped.txt"
check "--once exits 1 when a container is unreachable" test "$rc" = 1
check "--once says why: a '! $STOP_HOST: ...' line" grep -q "^! $STOP_HOST: " "$E2E_WORK/top-once-stopped.txt"
# its own deadline is connect timeout + 5 s = 15 s (its connect to the frozen host fails after
# the 10 s connect timeout); the rest is start-up, render and stopping the session threads
check "--once gives up on $STOP_HOST within 25 s (its timeout: connect timeout + 5 s)" \
	saw "$(secs $once_cs) s of 25 s" test "$once_cs" -le 2500
kill -CONT $STOPPED
STOPPED=""
# a dropped session is reopened with a backoff doubling to 30 s, then the connect and the
# first document: 60 s
check "after SIGCONT $stop_ct is reachable again within 60 s" \
	wait_until 60 ct_row_not_says top "$stop_ct" unreachable
keys top q
check "q quits the dashboard" wait_until 10 gone top

# leave v1 running with every rank stepping for whatever runs next
check "every rank runs and steps again afterwards" all_ranks_advance "$NRANKS" 120
finish
