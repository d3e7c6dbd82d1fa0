#!/bin/bash
# t-47-deploy-time: the whole `drover deploy` command for a one-file change, timed (issue 11: the
# deploy's lease, survey, rollback-target check, activation, promote, history and revert go to
# every host at once, bounded by [drover] parallel).  Three `deploy --stage-only` runs (lease,
# survey, check of the good release, transfer, lease given back) and one full deploy (switch,
# probation, promote) of a one-file change.  DROVER_BEFORE=PATH (another drover binary, e.g.
# main's before a change) runs the same with it first, for docs/benchmarks.md.  The last
# stage-only run of this build also checks its step structure in h1's pct log (pct calls per
# container), so a step added back is caught without timing.
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
			# the step structure, not the time: per container `lease take` (not renewed a moment
			# later), `status`, `release verify` of the good release, `release missing`, `release
			# install` and `lease release`, a host's containers in one host exec each; no `release
			# have` for a small code release
			n=$(wc -w <<<"$(grep -o 'h1:[0-9]*' <<<"$E2E_CTS")")
			calls=$(pct_since h1 | grep -c ' pct exec ')
			check "the stage-only deploy made at most 6 pct exec per container on h1 ($calls for $n)" \
				test "$calls" -le $((6 * n))
			check "the lease was taken once per container, not renewed before the push" \
				test "$(pct_since h1 | grep -c 'lease take')" = "$n"
			check "no release have for a small code release" eval '! pct_since_has h1 "release have"'
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
	timed_deploy "$bin" "$rel" --job train
	show_drover 3
	check "$label: a full deploy of a one-file change reaches a verdict (exit $DROVER_RC, $(secs "$t") s)" \
		eval '[[ $DROVER_RC == 0 || $DROVER_RC == 3 || $DROVER_RC == 7 ]]'
	say "$label: full deploy (switch, probation, promote), one-file change, whole command: $(secs "$t") s"
done
finish
