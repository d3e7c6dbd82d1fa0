#!/bin/bash
# t-47-deploy-time: the whole `drover deploy` command for a one-file change, timed (issue 11: the
# deploy's lease, survey, rollback-target check, activation, promote, history and revert go to
# every host at once, bounded by [drover] parallel).  Three `deploy --stage-only` runs (lease,
# survey, check of the good release, transfer, lease given back) and one full deploy (switch,
# probation, promote) of a one-file change.  DROVER_BEFORE=PATH (another drover binary, e.g.
# main's before a change) runs the same with it first, for docs/benchmarks.md.  The last
# stage-only run of this build also checks its step structure in h1's pct log (pct calls per
# container) and sshd log (host execs), and drover's own CPU time, so a step added back, or a
# wait that spins, is caught without timing; the full deploy's, that the lease goes back with
# each container's history record (no lease-release round).  Then one container's agent plays
# one older than `lease take --status`: the deploy, stage-only and full, still completes, asking
# that container the old way and giving its lease back separately.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
rel=$(make_release v47 train.seed=47)
timed_deploy() { # BIN ARGS...: sets t (the deploy's centiseconds), cpu (drover's user+sys s), DROVER_RC
	local bin=$1 t0 TIMEFORMAT='%U %S'
	shift
	t0=$(now_cs)
	{ time "$bin" -i "$INV" deploy "$@" >"$E2E_WORK/last.out" 2>"$E2E_WORK/last.err"; } 2>"$E2E_WORK/last.cpu"
	DROVER_RC=$?
	t=$(($(now_cs) - t0))
	cpu=$(awk '{ printf "%.2f", $1 + $2 }' "$E2E_WORK/last.cpu")
	sed 's/^/  | /' "$E2E_WORK/last.out" "$E2E_WORK/last.err" >>"$E2E_WORK/drover.log"
}
for label in before after; do
	bin=$E2E_BUILD/drover
	if [[ $label == before ]]; then
		[[ -n ${DROVER_BEFORE:-} ]] || continue
		bin=$DROVER_BEFORE
	fi
	figures=""
	for k in 1 2 3; do
		echo "# $label $k: a one-file change" >>"$rel/etc/train.ini"
		pct_mark
		timed_deploy "$bin" "$rel" --job train --stage-only
		check "$label: deploy --stage-only of a one-file change exits 0 ($(secs "$t") s)" test "$DROVER_RC" = 0
		if [[ $label == after && $k == 3 ]]; then
			# the step structure, not the time: per container `lease take --status` (the lease
			# and the survey's status document at once; not renewed a moment later), `release
			# verify` of the good release, `release missing` and `release install`, which gives
			# the lease back; a host's containers in one host exec each, the host's own steps
			# (store, manifest, object check) in the exec of `release missing`, the staging of
			# the changed object in the exec of `release install`: four host execs (lease,
			# verify, ask, stage and install); no `release have` for a small code release
			n=$(wc -w <<<"$(grep -o 'h1:[0-9]*' <<<"$E2E_CTS")")
			calls=$(pct_since h1 | grep -c ' pct exec ')
			check "the stage-only deploy made at most 4 pct exec per container on h1 ($calls for $n)" \
				test "$calls" -le $((4 * n))
			check "the lease was taken once per container, not renewed before the push" \
				test "$(pct_since h1 | grep -c 'lease take')" = "$n"
			check "the status document came with the lease (lease take --status), no status call" \
				eval '[[ $(pct_since h1 | grep -c "lease take .* --status") == "$n" ]] && ! pct_since_has h1 " status --json"'
			check "no release have for a small code release" eval '! pct_since_has h1 "release have"'
			check "the lease went back with each install (release install --lease-release), no lease release call" \
				eval '[[ $(pct_since h1 | grep -c "release install .*--lease-release") == "$n" ]] && ! pct_since_has h1 "lease release"'
			held=""
			for c in $E2E_CTS; do ct "$c" test -e /var/lib/drover/leases/train.json && held+="$c "; done
			check "no container holds the job's lease after the stage-only deploy (${held:-none})" test -z "$held"
			hx=$(host_execs_since h1)
			check "the stage-only deploy made at most 4 host execs on h1 ($hx)" test "$hx" -le 4
			# drover waits for its hosts in poll(2): its own CPU stays small whatever the hosts
			# take (a wait that polled for a writable socket spun a core per host)
			check "drover's own CPU for the stage-only deploy: $cpu s (under 0.2 s)" \
				awk -v c="$cpu" 'BEGIN { exit !(c < 0.2) }'
		fi
		say "$label $k: drover's own CPU (user+sys) $cpu s"
		figures+="$(secs "$t") "
		margin "$(secs "$t")" "$label stage-only one-file s"
	done
	say "$label: deploy --stage-only, one-file change, whole command: $figures s"
	echo "# $label full: a one-file change" >>"$rel/etc/train.ini"
	pct_mark
	timed_deploy "$bin" "$rel" --job train
	show_drover 3
	check "$label: a full deploy of a one-file change reaches a verdict (exit $DROVER_RC, $(secs "$t") s)" \
		eval '[[ $DROVER_RC == 0 || $DROVER_RC == 3 || $DROVER_RC == 7 ]]'
	if [[ $label == after ]]; then
		# the outcome's record is each container's last call, and gives the lease back
		n=$(wc -w <<<"$(grep -o 'h1:[0-9]*' <<<"$E2E_CTS")")
		check "the full deploy gave the lease back with each history record (history add --lease-release), no lease release call" \
			eval '[[ $(pct_since h1 | grep -c "history add .*--lease-release") == "$n" ]] && ! pct_since_has h1 "lease release"'
		held=""
		for c in $E2E_CTS; do ct "$c" test -e /var/lib/drover/leases/train.json && held+="$c "; done
		check "no container holds the job's lease after the full deploy (${held:-none})" test -z "$held"
	fi
	say "$label: full deploy, h1: $(pct_since h1 | grep -c ' pct exec ') pct exec, $(host_execs_since h1) host execs"
	say "$label: full deploy (switch, probation, promote), one-file change, whole command: $(secs "$t") s"
done

# An agent older than `lease take --status` refuses the flag (getopt: exit 2) and takes nothing:
# drover takes the plain lease there and asks its status separately; every other container
# answers both at once.  Played by a wrapper in front of h1's first container's agent.
old_ct=$(grep -o 'h1:[0-9]*' <<<"$E2E_CTS" | head -n 1)
old_vmid=${old_ct#*:}
ct "$old_ct" sh -c 'mv /usr/local/bin/drover-agent /usr/local/bin/drover-agent.real &&
	printf "%s\n" "#!/bin/sh" \
		"for a; do [ \"\$a\" = --status ] && { echo \"lease: unknown option or missing value --status\" >&2; exit 2; }; done" \
		"exec /usr/local/bin/drover-agent.real \"\$@\"" >/usr/local/bin/drover-agent &&
	chmod 0755 /usr/local/bin/drover-agent'
echo "# old agent: a one-file change" >>"$rel/etc/train.ini"
pct_mark
timed_deploy "$E2E_BUILD/drover" "$rel" --job train --stage-only
check "with an agent older than lease take --status in $old_ct, deploy --stage-only exits 0 ($DROVER_RC)" \
	test "$DROVER_RC" = 0
check "$old_ct: refused --status, then took the plain lease and was asked its status" \
	eval 'pct_since_has h1 "pct exec $old_vmid .*lease take .* --status" &&
		pct_since_has h1 "pct exec $old_vmid .*lease take train [^ ]+ [0-9]+\$" &&
		pct_since_has h1 "pct exec $old_vmid .* status --json"'
check "only $old_ct was asked its status separately, and gave the lease back separately" \
	eval '[[ $(pct_since h1 | grep -c " status --json") == 1 && $(pct_since h1 | grep -c "lease release") == 1 ]] &&
		pct_since_has h1 "pct exec $old_vmid .*lease release" && ! pct_since_has h1 "pct exec $old_vmid .*--lease-release"'
check "the lease is given back in $old_ct too" eval '! ct "$old_ct" test -e /var/lib/drover/leases/train.json'
# a full deploy: the old agent's record comes without --lease-release and its lease goes back in a
# round of its own; the others' records give theirs back
echo "# old agent full: a one-file change" >>"$rel/etc/train.ini"
pct_mark
timed_deploy "$E2E_BUILD/drover" "$rel" --job train
show_drover 3
check "with an agent older than lease take --status in $old_ct, a full deploy reaches a verdict ($DROVER_RC)" \
	eval '[[ $DROVER_RC == 0 || $DROVER_RC == 3 || $DROVER_RC == 7 ]]'
check "$old_ct: its record without --lease-release, then its lease given back separately (only there)" \
	eval 'pct_since_has h1 "pct exec $old_vmid .*history add" && ! pct_since_has h1 "pct exec $old_vmid .*--lease-release" &&
		[[ $(pct_since h1 | grep -c "lease release") == 1 ]] && pct_since_has h1 "pct exec $old_vmid .*lease release"'
held=""
for c in $E2E_CTS; do ct "$c" test -e /var/lib/drover/leases/train.json && held+="$c "; done
check "no container holds the job's lease after that full deploy (${held:-none})" test -z "$held"
ct "$old_ct" mv /usr/local/bin/drover-agent.real /usr/local/bin/drover-agent
finish
