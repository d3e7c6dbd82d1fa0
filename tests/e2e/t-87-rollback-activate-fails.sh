#!/bin/bash
# t-87-rollback-activate-fails: a rollback whose target cannot start in one container.  v87
# runs through a #! script whose interpreter lives outside the release, in the containers
# (/usr/local/lib/drover-e2e-t87/sh, busybox's sh); it is promoted, then v1 is deployed again
# and promoted (v87 its previous good release).  The interpreter is then removed from h2:201
# only: the target still verifies there (the release is intact) and the agent's checks before a
# switch (store entry, command present and executable) pass, so the rollback's switch stops the
# old gang everywhere and activates; in h1 v87 starts, in h2:201 the exec fails (activate exit 6,
# its agent starts v1 again by itself).  drover must put v1 back in every container at once, as
# one gang, as a failed deploy's revert does, and exit 3; it stopped at ROLLBACK FAILED, exit 4,
# "run `drover rollback --job J`", leaving h1 on v87 unpromoted and h2:201 on v1 (the gang split
# until the agents' probation deadline): the exit code and "v1 current everywhere when the
# rollback returns" catch that.  The record is `reverted`, named rollback, "activate failed".
# No container marks v87 bad: drover's revert is --no-mark, and h2:201's agent, which went back
# by itself after the failed exec, does not mark a release that ran there promoted (the container
# is at fault); it did, in h2:201 only, and a later plain rollback refused v87 as "marked bad by
# its agents".
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
ISH=/usr/local/lib/drover-e2e-t87
INV_W="$E2E_WORK/inventory-t87.ini"
inv_variant "$INV_W" t87wrap
INV_T="$E2E_WORK/inventory-t87-tol.ini"
inv_variant "$INV_T"
for c in $E2E_CTS; do ct "$c" sh -c "mkdir -p $ISH && ln -sf /bin/busybox $ISH/sh" || fatal "cannot place the interpreter in $c"; done
d=$(make_release v87 train.seed=87)
release_script "$d" t87wrap <<EOF
#!$ISH/sh
exec ./bin/drover-train "\$@"
EOF

say "drover deploy v87 (its command a #! script; the interpreter in every container)"
INV="$INV_W" deploy_promoted v87 "$d"
v87=$DEPLOYED
say "drover deploy v1 again (promoted: v87 becomes its previous good release)"
INV="$INV_T" deploy_promoted v1 "$E2E_WORK/releases/v1"
check "... v1 as before" test "$DEPLOYED" = "$v1"

say "the interpreter removed from h2:201 only, then drover rollback --job train (to v87)"
ct h2:201 rm -rf "$ISH"
check "h2:201 still has v87 intact in its store (release verify)" ct h2:201 /usr/local/bin/drover-agent release verify "$v87"
t0=$(now_cs)
drover rollback --job train
t=$(($(now_cs) - t0))
show_drover 12
check "the rollback went for v87" drover_said "rolling job 'train' back from ${v1:0:12} to .*${v87:0:12}"
check "it names h2:201's failed activation" drover_said "h2:201.*(interpreter|cannot execute|exec)"
check "ROLLBACK FAILED says v87 started in some containers only and v1 goes back everywhere now" \
	drover_said "ROLLBACK FAILED for job 'train': .*${v87:0:12} was activated in some containers only \(the gang is split\): putting ${v1:0:12} back in every container now, as one gang"
check "it does not send the operator to run drover rollback by hand" \
	eval '! drover_said "\`drover rollback --job train\` puts ${v1:0:12} back"'
check "... and reverts as a failed deploy does: v1 confirmed everywhere" drover_said "reverted job 'train' to ${v1:0:12}"
check "the rollback exits 3 (reverted), in $(secs $t) s: $DROVER_RC" test "$DROVER_RC" = 3
check "v1 is current in every container when it returns (no split gang)" all_current_is "$v1"
check "v1 trains on all three ranks, one gang" all_ranks_advance 3 90
rollback_record() {
	local rec
	rec=$("$E2E_BUILD/drover" -i "$INV" history --job train -o json 2>/dev/null | jq -c '.history | last')
	printf '    %s\n' "$rec"
	jq -e --arg t "$v87" --arg g "$v1" '.result == "reverted" and .name == "rollback" and .release == $t and
		.previous == $g and (.reason | test("activate failed"))' <<<"$rec" >/dev/null
}
check "history: reverted, named rollback, target v87 from v1, 'activate failed'" rollback_record
marks() {
	status_json | jq -r --arg r "$v87" '.jobs[] | select(.job == "train") | .containers[] |
		"\(.container): v87 \(if ((.bad // []) | index($r)) then "marked bad" else "not marked" end)"'
}
say "v87's marks after the rollback (it never ran as one gang): $(marks | tr '\n' ';')"
check "no container marks v87 bad (h2:201's agent neither: the container is at fault)" eval '! marks | grep -q "marked bad"'
# the interpreter back in h2:201: v87 is among the job's promoted releases, so a later rollback
# in the suite may go to it
ct h2:201 sh -c "mkdir -p $ISH && ln -sf /bin/busybox $ISH/sh"
finish
