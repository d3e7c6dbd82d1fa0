#!/bin/bash
# t-31-setsid-stop: a gang is one cgroup (issue 11 item 6).  Release "esc" wraps drover-train in a
# script that first starts a daemonised child with setsid (its own session and process group, so
# a stop sent to the gang's process group misses it), then execs the trainer.  Deploying v1 over
# it stops esc's gang: the escapee must be gone in every container before v1's ranks start, and
# the escapee was in the gang's cgroup.  Then the same with every agent restarted with
# `--cgroup v1` (v1's freezer hierarchy, as on a host without cgroup v2; the gang survives the
# restarts), and the agents restarted plain at the end.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)

d=$(make_release esc)
mv "$d/bin/drover-train" "$d/bin/drover-train.bin"
cat >"$d/bin/drover-train" <<'EOF'
#!/bin/sh
# t-31: a worker that leaves a setsid child behind (only for training, not for the preflight)
if [ "$1" = train ]; then
	setsid sh -c 'echo $$ >/run/t31-escapee.pid; exec sleep 100000' </dev/null >/dev/null 2>&1 &
fi
exec "${0%/*}/drover-train.bin" "$@"
EOF
chmod 0755 "$d/bin/drover-train"

escapee() { ct "$1" cat /run/t31-escapee.pid 2>/dev/null; }
alive() { # alive CT PID: PID runs in CT and is the escapee (a sleep), not a reused pid
	ct "$1" sh -c 'tr "\0" " " </proc/'"$2"'/cmdline 2>/dev/null' | grep -q 'sleep 100000'
}
declare -A esc_pid
escapees_run() {
	local c p
	for c in $E2E_CTS; do
		p=$(escapee "$c")
		[[ -n $p ]] && alive "$c" "$p" || { printf '    %s: no escapee running (pid %s)\n' "$c" "${p:-none}"; return 1; }
		esc_pid[$c]=$p
	done
}
own_session() { # setsid made the escapee a session leader: session id = its pid, so a stop
	# sent to the worker's process group (or session) cannot reach it
	local c=$1 p=${esc_pid[$1]}
	[[ $(ct "$c" cat "/proc/$p/stat" | awk '{print $6}') == "$p" ]]
}
in_gang_cgroup() { # in_gang_cgroup REGEX: every escapee's /proc/PID/cgroup has a line matching it
	local c rc=0 cg
	for c in $E2E_CTS; do
		cg=$(ct "$c" cat "/proc/${esc_pid[$c]}/cgroup" 2>/dev/null | grep -E "$1")
		[[ -n $cg ]] || { printf '    %s: escapee not in a gang cgroup: %s\n' "$c" "$(ct "$c" cat "/proc/${esc_pid[$c]}/cgroup" | tr '\n' ' ')"; rc=1; }
	done
	return $rc
}
escapees_gone() {
	local c rc=0
	for c in $E2E_CTS; do
		if alive "$c" "${esc_pid[$c]}"; then
			printf '    %s: escapee %s still runs\n' "$c" "${esc_pid[$c]}"
			rc=1
		fi
	done
	return $rc
}
agents_restart() { # agents_restart [DAEMON ARGS]: a new agent in every container (gangs survive)
	local c
	for c in $E2E_CTS; do
		ct "$c" sh -c 'kill -TERM "$(cat /run/drover/agent.pid)"' || return 1
		wait_until 30 eval '! ct "$c" /usr/local/bin/drover-agent status >/dev/null 2>&1' >/dev/null || return 1
		wait_until 60 ct "$c" /usr/local/bin/drover-agent daemon --detach "$@" >/dev/null || return 1
	done
}

round() { # round LABEL CGROUP_REGEX
	say "[$1] drover deploy esc (its worker starts a setsid child)"
	drover deploy "$d" --job train
	show_drover 4
	check "[$1] deploy esc exits 0 (promoted)" test "$DROVER_RC" = 0
	check "[$1] every container runs esc's escapee" wait_until 30 escapees_run
	check "[$1] the escapee in h1:101 leads its own session (not the worker's)" own_session h1:101
	check "[$1] every escapee is in its gang's cgroup ($2)" in_gang_cgroup "$2"
	say "[$1] drover deploy v1 over esc (stops esc's gang)"
	drover deploy "$E2E_WORK/releases/v1" --job train
	show_drover 4
	check "[$1] deploy v1 exits 0" test "$DROVER_RC" = 0
	check "[$1] every container is on v1 again" all_current_is "$v1"
	check "[$1] no escapee survived the stop, in any container" escapees_gone
	check "[$1] v1's ranks train" all_ranks_advance 3 60
}

round v2 '^0::.*/drover-train-g[0-9]+-[0-9]+$'
say "every agent restarted with --cgroup v1 (the freezer hierarchy)"
check "a new agent with --cgroup v1 in every container" agents_restart --cgroup v1
round v1-freezer '^[0-9]+:freezer:.*/drover-train-g[0-9]+-[0-9]+$'
check "a plain agent again in every container" agents_restart
check "v1's ranks still train after the restarts" all_ranks_advance 3 60
finish
