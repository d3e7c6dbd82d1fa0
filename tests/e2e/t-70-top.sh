#!/bin/bash
# t-70-top: `drover top` driven in tmux against the lab (send-keys, capture-pane): the frame
# shows every rank with advancing steps; the keys work (flat, filter, help, events, fold); a
# killed worker turns its container's row red within 6 s; a stopped fake host (its sshd and
# sessions frozen with SIGSTOP, so nothing answers and no connection is refused) shows as
# unreachable within 15 s while the screen keeps refreshing and answering keys, and comes back
# after SIGCONT; resizing to 80 columns drops columns and nothing wraps; NO_COLOR and --ascii
# give a frame without colour and without UTF-8; `top --once` prints one frame and exits.
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
cleanup() {
	[[ -n $STOPPED ]] && kill -CONT $STOPPED 2>/dev/null
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
dimmed_values_kept() { screen "$1" | grep -E "^$(ct_pat "$2")" | awk '{ exit !($6 ~ /^[0-9]+$/) }'; }

# ---------------------------------------------------------------- --once
say "drover top --once"
"$E2E_BUILD/drover" -i "$INV" top --once --width 132 >"$E2E_WORK/top-once.txt" 2>"$E2E_WORK/top-once.err"
rc=$?
sed 's/^/    | /' "$E2E_WORK/top-once.txt"
check "--once exits 0 with every container reachable" test "$rc" = 0
check "--once shows a row for each of the $NRANKS ranks" test "$(grep -c '^ *rank [0-9]' "$E2E_WORK/top-once.txt")" = "$NRANKS"
check "--once prints no colour when stdout is not a terminal" bash -c "! grep -q $'\\e' '$E2E_WORK/top-once.txt'"

say "drover top --watch 1 (text frames, the status --watch way)"
timeout 5 "$E2E_BUILD/drover" -i "$INV" top --watch 1 --width 132 >"$E2E_WORK/top-watch.txt" 2>&1
frames=$(grep -c '^drover top [0-9:]* (every 1s)' "$E2E_WORK/top-watch.txt")
check "--watch 1 prints a dated frame every second (got $frames in 5 s)" test "$frames" -ge 3

# ---------------------------------------------------------------- the live screen
say "drover top in tmux (132x40)"
start_top top 132 40 --
all_ranks_shown() { [[ $(rank_steps top | grep -c .) == "$NRANKS" ]]; }
check "the frame shows all $NRANKS ranks within 15 s" wait_until 15 all_ranks_shown
screen top | sed 's/^/    | /' | head -$((NRANKS * 2 + 8))
hdr=$(screen top | head -1)
check "header: all hosts reachable and $NRANKS/$NRANKS ranks running" \
	bash -c "grep -q 'hosts $NHOSTS/$NHOSTS' <<<'$hdr' && grep -q 'ranks $NRANKS/$NRANKS running' <<<'$hdr'"
a=$(rank_steps top)
sleep 6
b=$(rank_steps top)
printf '    steps before: %s\n    steps after:  %s\n' "$(echo "$a" | tr '\n' ';')" "$(echo "$b" | tr '\n' ';')"
steps_advance() {
	[[ $(echo "$a" | grep -c .) == "$NRANKS" && $(echo "$b" | grep -c .) == "$NRANKS" ]] || return 1
	paste -d' ' <(echo "$a") <(echo "$b") | awk '{ if ($1 != $3 || !($4 > $2)) bad = 1 } END { exit bad }'
}
check "every rank's STEP advances on screen over 6 s" steps_advance

say "keys: t, /, ?, l, enter"
keys top t
check "t: flat view names ranks host:vmid/rank" wait_until 3 shows top "^${CTS[0]}/[0-9]"
keys top t
check "t again: back to the tree" wait_until 3 shows top '^ +rank [0-9]' 
keys top / "$STOP_HOST" Enter
filtered_to_host() { ! host_row_shown top "${KILL_CT%%:*}" && host_row_shown top "$STOP_HOST"; }
check "/ $STOP_HOST: only $STOP_HOST's rows remain" wait_until 3 filtered_to_host
keys top / BSpace BSpace BSpace BSpace BSpace BSpace Enter
check "an empty filter shows every rank again" wait_until 3 all_ranks_shown
keys top '?'
check "?: the help lists the keys" wait_until 3 shows top 'keys and colours' 
keys top x
keys top j l
check "l: recent events of the selected container (its agent's journal)" \
	wait_until 8 shows top 'activate|promote|agent-start' 
screen top | grep -A6 'events of' | sed 's/^/    | /'
keys top x
keys top Home Enter
check "enter on a host folds it (its rank rows disappear)" \
	wait_until 3 fewer_ranks top "$NRANKS"
keys top Enter
check "enter again unfolds it" wait_until 3 all_ranks_shown

say "R asks first, naming the job and its containers; n cancels; --readonly has no actions"
currents() { local c; for c in "${CTS[@]}"; do ct_current "$c"; done | tr '\n' ' '; }
same_currents() { sleep 1; [[ $(currents) == "$currents_before" ]]; }
currents_before=$(currents)
keys top Home j R
names_targets() { shows top "Roll back job 'train' on ${E2E_CTS// / } to [0-9a-f]{12} .*y to confirm" || shows top "job 'train' has no release to roll back to"; }
check "R: a confirmation naming job train and every container (or: nothing to go back to)" wait_until 3 names_targets
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
t0=$(date +%s%N)
ct "$KILL_CT" kill -9 $pid
red_ms=""
for _ in $(seq 1 40); do
	if killed_red; then
		red_ms=$((($(date +%s%N) - t0) / 1000000))
		break
	fi
	sleep 0.2
done
say "row red after ${red_ms:-never} ms"
ct_row top "$KILL_CT" | sed 's/^/    | /'
check "the killed worker's container row turns red within 6 s" test "${red_ms:-99999}" -lt 6000

# ---------------------------------------------------------------- resize, NO_COLOR, --ascii
say "resize to 80x30"
"${TM[@]}" resize-window -t top -x 80 -y 30
check "at 80 columns nothing is wider than 80" wait_until 4 fits_in top 80
check "at 80 columns MEM is dropped" titles_lack top MEM
check "at 80 columns KTOK/S, TREND and HB stay" titles_have top 'KTOK/S.*TREND.*HB' 
"${TM[@]}" resize-window -t top -x 132 -y 40
check "back at 132 columns MEM is shown again" wait_until 4 titles_have top MEM

say "NO_COLOR=1 --ascii --readonly at 80x30"
start_top plain 80 30 NO_COLOR=1 -- --ascii --readonly
plain_cts() { [[ $(screen plain | grep -cE "^  ([^ ]+| ) [0-9]+ train") == "${#CTS[@]}" ]]; }
check "NO_COLOR: the frame shows every container" wait_until 15 plain_cts
screen plain | head -8 | sed 's/^/    | /'
check "NO_COLOR: no colour escapes (30-37, 38;5)" no_colour plain
check "--ascii: nothing but ASCII on the screen" ascii_only plain
keys plain j R
check "--readonly: R does nothing but say so" wait_until 3 shows plain 'read-only \(--readonly\): no actions'
keys plain q
check "q quits" wait_until 3 gone plain

# ---------------------------------------------------------------- a stopped host
stop_ct=${CTS[$((${#CTS[@]} - 1))]}
check "every rank back after the kill (the whole gang restarts)" wait_until 120 all_ranks_shown
check "$stop_ct shows its STEP before its host is stopped" wait_until 60 dimmed_values_kept top "$stop_ct"
say "SIGSTOP every process of fake host $STOP_HOST's sshd (listener and sessions)"
STOPPED=$(host_procs "$STOP_HOST")
kill -STOP $STOPPED
t0=$SECONDS
check "$stop_ct shows as unreachable within 15 s" wait_until 15 ct_row_says top "$stop_ct" unreachable
say "unreachable after $((SECONDS - t0)) s"
screen top | sed 's/^/    | /' | head -$((NRANKS * 2 + 6))
c1=$(title_clock top)
sleep 2.5
c2=$(title_clock top)
check "the screen keeps refreshing while $STOP_HOST is stopped ($c1 -> $c2)" test "$c1" != "$c2"
keys top t
check "and keys are answered at once (t: flat view)" wait_until 2 shows top "^${CTS[0]}/[0-9]"
keys top t
check "the stopped host's row keeps its last values (STEP still shown)" dimmed_values_kept top "$stop_ct"
say "drover top --once while $STOP_HOST is stopped"
t1=$SECONDS
"$E2E_BUILD/drover" -i "$INV" top --once --width 132 >"$E2E_WORK/top-once-stopped.txt" 2>&1
rc=$?
sed 's/^/    | /' "$E2E_WORK/top-once-stopped.txt"
check "--once exits 1 when a container is unreachable" test "$rc" = 1
check "--once says why: a '! $STOP_HOST: ...' line" grep -q "^! $STOP_HOST: " "$E2E_WORK/top-once-stopped.txt"
check "--once gave up on $STOP_HOST within its timeout (connect timeout + 5 s; took $((SECONDS - t1)) s)" test $((SECONDS - t1)) -le 20
kill -CONT $STOPPED
STOPPED=""
check "after SIGCONT $stop_ct is reachable again within 30 s" \
	wait_until 30 ct_row_not_says top "$stop_ct" unreachable
keys top q
check "q quits the dashboard" wait_until 3 gone top

# leave v1 running with every rank stepping for whatever runs next
check "every rank runs and steps again afterwards" wait_until 60 all_ranks_advance "$NRANKS" 4
finish
