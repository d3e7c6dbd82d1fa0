#!/bin/bash
# bench/top/run.sh [BUILD] [INVENTORY]: the dashboard's two budgets (issue 4).
#  1. frame: CPU time of one frame for 8 hosts x 8 containers x 8 ranks (synthetic, no SSH):
#     the model, the --once text frame and the ncursesw frame; must stay under 50 ms.
#  2. idle CPU: `drover top` at the default 2 s refresh, in tmux, for DURATION s (default 30),
#     against INVENTORY, or by default against 8 local "hosts" x 8 "containers" x 8 ranks whose
#     agent is bench/top/fake-agent (the same status documents a real agent sends, over pipes
#     instead of SSH channels; SSH_LAB=LAB_DIR makes them SSH sessions to a lab's sshds); the
#     process's CPU (utime+stime) must stay under 5% of a core.
# One JSON line per measure on stdout; exit 1 when a budget is missed.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=$(cd "$ROOT" && cd "${1:-build}" && pwd) || exit 1
INV=${2:-}
DURATION=${DURATION:-30}
O="$B/bench-top"
mkdir -p "$O"
LIBS="-lssh -linih -lncursesw -ljansson -lcrypto -larchive -lm"
cc -O2 -g -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -I"$ROOT" -pthread -o "$O/bench" \
	"$ROOT/bench/top/bench.c" "$B/libcontroller.a" "$B/libcommon.a" $LIBS || exit 1
cc -O2 -g -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -I"$ROOT" -o "$O/fake-agent" \
	"$ROOT/bench/top/fake-agent.c" "$B/libcommon.a" -ljansson -lcrypto -larchive -lm || exit 1
fail=0
"$O/bench" 8 8 8 50 || fail=1

if [[ -z $INV ]]; then
	INV="$O/inventory.ini"
	# SSH_LAB=DIR (a lab from tests/lab/lab up): the 8 hosts are SSH sessions to the lab's
	# sshds (real channels, real crypto), the fake agent runs there as HOST:local:ROOT nodes
	addrs=()
	[[ -n ${SSH_LAB:-} ]] && mapfile -t addrs < <(awk -F' = ' '$1 == "address" { print $2 }' "$SSH_LAB/inventory.ini")
	{
		echo "# bench/top: 8 hosts x 8 containers x 8 ranks, agent = fake-agent"
		echo "[drover]"
		echo "state_dir = $O/state"
		echo "agent_path = $O/fake-agent"
		if ((${#addrs[@]})); then
			echo "known_hosts = $SSH_LAB/known_hosts"
			echo "identity = $SSH_LAB/id_ed25519"
		fi
		for h in 1 2 3 4 5 6 7 8; do
			if ((${#addrs[@]})); then
				printf '\n[host p%d]\naddress = %s\nuser = root\n' $h "${addrs[$((h % ${#addrs[@]}))]}"
			else
				printf '\n[host p%d]\nlocal = true\n' $h
			fi
		done
		for h in 1 2 3 4 5 6 7 8; do
			printf '\n[job j%d]\ncontainers =' $h
			for c in 1 2 3 4 5 6 7 8; do printf ' p%d:local:/t/j%d/%d' $h $h $c; done
			printf '\nnproc_per_node = 8\ncommand = bin/x\n'
		done
	} >"$INV"
fi
command -v tmux >/dev/null || { echo '{"bench":"top-cpu","skipped":"no tmux"}'; exit $fail; }
TM=(tmux -L "drover-bench-top-$$")
"${TM[@]}" new-session -d -s top -x 160 -y 50 env LANG=C.UTF-8 FAKE_RANKS=8 "$B/drover" -i "$INV" top
pid=$("${TM[@]}" list-panes -t top -F '#{pane_pid}')
ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
sleep 5 # connect and first documents
t0=$(ticks)
s0=$(date +%s%N)
sleep "$DURATION"
t1=$(ticks)
s1=$(date +%s%N)
rows=$("${TM[@]}" capture-pane -p -t top | head -1)
"${TM[@]}" kill-server
rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/drover-bench-top-$$"
hz=$(getconf CLK_TCK)
pct=$(awk -v t=$((t1 - t0)) -v hz="$hz" -v ns=$((s1 - s0)) 'BEGIN { printf "%.2f", 100 * t / hz / (ns / 1e9) }')
echo "{\"bench\":\"top-cpu\",\"inventory\":\"$INV\",\"refresh_s\":2,\"seconds\":$DURATION,\"cpu_pct_of_core\":$pct,\"limit_pct\":5,\"header\":\"${rows//\"/}\"}"
awk -v p="$pct" 'BEGIN { exit !(p < 5) }' || fail=1
exit $fail
