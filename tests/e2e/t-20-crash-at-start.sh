#!/bin/bash
# t-20-crash-at-start: deploy v2 whose worker fails at start (its config names a missing data
# file): reverted to v1; v1 resumes from its checkpoint (its step continues, not from 0); deploy
# exits non-zero with the reason.  The agents go back to v1 by themselves (exit 4 is
# non-retryable); when all of them did, the controller's revert leaves their v1 gang running.
# The history shows v2 once (drover's verdict); a release whose drover was killed -9 during its
# probation, reverted by the agents alone, is in the history too: their one row, by agent.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
has_checkpoint() { [[ -n $(ct h1:101 ls /var/lib/drover/runs/train/checkpoints/ 2>/dev/null) ]]; }
check "v1 has written a checkpoint before the test" wait_until 60 has_checkpoint
before=$(status_json | rank_table | sort -n)
printf '    v1 before: %s\n' "$(echo "$before" | tr '\n' ';')"

# the newest journal seq of every container, and the job's events after it (as t-27)
seq_marks() { local c; for c in $E2E_CTS; do printf '%s=%s ' "$c" "$(ct "$c" sh -c 'tail -n 1 /var/lib/drover/events.jsonl' | jq -r '.seq // 0')"; done; }
events_since() { # CT MARKS
	local m
	m=$(tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p")
	ct "$1" cat /var/lib/drover/events.jsonl | jq -c --argjson s "${m:-0}" 'select(.seq > $s and .job == "train")'
}
marks=$(seq_marks)
d=$(make_release v2 data.train=/srv/drover-data/no-such-shard.bin)
say "drover deploy v2 (missing data file)"
t0=$SECONDS
drover deploy "$d" --job train
say "deploy took $((SECONDS - t0))s"
show_drover 15
check "deploy v2 exits 3 (reverted to the last good release, docs/errors.md)" test "$DROVER_RC" = 3
check "deploy names the failure (crash/exit at start)" drover_said 'crash|exit|fail|died|no-such-shard|heartbeat'
check "deploy says it reverted" drover_said 'revert|roll(ed)? ?back'
check "the revert's progress lines say recovery, not probation (the demo's label)" \
	eval 'grep -q "^recovery " "$E2E_WORK/last.err" && ! sed -n "/^reverting job/,\$p" "$E2E_WORK/last.err" | grep -q "^probation "'
check "the reason names the missing shard, in the worker's own words" drover_said "no-such-shard.bin"
check "... and points at the workers' log, naming the job" drover_said '^FAILED .*; see `drover logs --job train`'
said_count() { awk -v re="$1" '$0 ~ re { n++ } END { print n + 0 }' "$E2E_WORK/last.out" "$E2E_WORK/last.err"; }
check "the reason is said once, by the FAILED verdict (not also as 'drover: error: ... failed probation')" \
	eval '[[ $(said_count "no-such-shard[.]bin") == 1 && $(said_count "failed probation") == 0 ]]'
check "every container is back on v1" all_current_is "$v1"

# Each agent sees v2's exit 4 (data) and goes back to v1 by itself.  When every one of them did
# so before the controller's revert stopped anything (the demo's case), that revert must leave
# the v1 gang running: no stop after the agent's own revert, no second revert (journals) (it used to stop
# it and "revert" v1 to itself: `reverted from <v1>`, ~13 steps lost).
self_reverted_gang_kept() {
	local c ev all_auto=1 bad=0
	for c in $E2E_CTS; do
		# after v2's activation (the switch's own stop of v1 comes before it)
		ev=$(events_since "$c" "$marks" | jq -rs '(map(.kind) | index("activate")) as $a | .[($a // -1) + 1:][]
			| select(.kind == "revert" or .kind == "stop") | "\(.kind) \(.detail)"')
		printf '    %s: %s\n' "$c" "$(tr '\n' ';' <<<"$ev" | cut -c1-240)"
		# the first revert or stop in this container was the agent's own revert
		[[ $(head -n 1 <<<"$ev") == "revert reverted on its own"* ]] || all_auto=0
		[[ $(grep -c . <<<"$ev") == 1 ]] || bad=1
	done
	ALL_AUTO=$all_auto
	if ((!all_auto)); then
		echo "    (not every agent went back by itself before the controller's revert: a full two-phase revert is right)"
		return 0
	fi
	((!bad)) && drover_said 'already on'
}
check "agents that went back by themselves keep their v1 gang (no stop, no revert of v1 to itself)" self_reverted_gang_kept
# ... and the verdict names every one of them, not only the first seen (it named h1:101 alone)
verdict_names_all_back() {
	local line c
	line=$(grep -h '^FAILED ' "$E2E_WORK/last.out" | head -n 1)
	((ALL_AUTO)) || { echo "    (not every agent went back by itself: nothing to name)"; return 0; }
	[[ $line == *"by itself"*"and so did the agents on"* ]] || return 1
	for c in $E2E_CTS; do [[ $line == *"$c"* ]] || return 1; done
}
check "the verdict names every container whose agent went back by itself" verdict_names_all_back

resumed_ok() {
	local t
	t=$(status_json | rank_table)
	printf '    after: %s\n' "$(echo "$t" | tr '\n' ';')"
	[[ $(echo "$t" | grep -c .) == 3 ]] || return 1
	# release column is v1 (id or name), resumed_from >= 1, step > resumed_from - 1
	echo "$t" | awk -F'\t' -v id="${v1:0:12}" '{ if ($5 < 1 || $2 < $5) bad = 1 } END { exit bad }'
}
check "every v1 rank resumed from a checkpoint (resumed_from >= 1, step continues from it)" wait_until 90 resumed_ok
runs_v1() {
	status_json | jq -r '[.. | objects | select(has("rank") and has("hb")) | .hb.release // ""] | .[]' |
		awk -v id="${v1:0:12}" -v n=v1 '{ if (index($0, id) != 1 && $0 != n) bad = 1; c++ } END { exit (bad || c != 3) }'
}
check "the running ranks are v1's" runs_v1
check "v1's steps advance again, Ktok/s > 0" all_ranks_advance 3 60
check "v2's checkpoint dir was not wiped (v1 checkpoints still there)" has_checkpoint

# The history: drover watched v2's probation, so its verdict is v2's one row, though agents that
# went back by themselves keep their own record of it too (docs/protocol.md, "An agent's own record").
v2sid=$(sed -n 's/^FAILED \([0-9a-f]*\) .*/\1/p' "$E2E_WORK/last.out" | head -n 1)
hist_rows() { # hist_rows NAME: the history's rows of release NAME, as JSON lines
	"$E2E_BUILD/drover" -i "$INV" history --job train -o json 2>>"$E2E_WORK/status.err" |
		jq -c --arg n "$1" '.history[] | select(.name == $n)'
}
rows=$(hist_rows v2)
printf '    v2 rows: %s\n' "$(cut -c1-300 <<<"$rows")"
check "drover history shows v2 ($v2sid) once, drover's verdict (by drover)" \
	eval '[[ -n $v2sid && $(grep -c . <<<"$rows") == 1 && $(jq -r .by <<<"$rows") == drover && $(jq -r .release <<<"$rows") == "$v2sid"* ]]'
agent_kept_own() {
	((ALL_AUTO)) || { echo "    (not every agent went back by itself: nothing to look for)"; return 0; }
	local c n
	for c in $E2E_CTS; do
		n=$(ct "$c" /usr/local/bin/drover-agent history list train | jq -s --arg id "$v2sid" \
			'[.[] | select(.by == "agent" and (.release | startswith($id)))] | length')
		[[ $n == 1 ]] || { printf '    %s: %s own records of v2\n' "$c" "$n"; return 1; }
	done
}
check "each agent that went back by itself recorded it in its own history (by agent)" agent_kept_own

# A drover killed -9 during the probation of a release that then fails: nobody was there to record
# its end, and the history had no row of it at all.  Now the agents that reverted it write one.
say "deploy v20b (missing data file again, another release); kill -9 drover as its probation starts"
d20b=$(make_release v20b data.train=/srv/drover-data/no-such-shard.bin train.seed=20)
"$E2E_BUILD/drover" -i "$INV" deploy "$d20b" --job train >"$E2E_WORK/k20.out" 2>"$E2E_WORK/k20.err" &
kpid=$!
check "the deploy reaches its probation" wait_until 180 said_in '^probation ' k20.err
kill -9 "$kpid"
wait "$kpid" 2>/dev/null
check "every agent goes back to v1 on its own" wait_until 120 all_current_is "$v1"
agents_recorded() { rows=$(hist_rows v20b); [[ $(jq -r .containers <<<"$rows" | wc -w) == 3 ]]; }
check "drover history shows the agents' record of v20b, naming all 3 containers" wait_until 30 agents_recorded
printf '    v20b rows: %s\n' "$(cut -c1-400 <<<"$rows")"
check "... as one row: reverted, reason agent-revert, by agent, back to v1" \
	eval '[[ $(grep -c . <<<"$rows") == 1 && $(jq -r "[.result, .reason_code, .by] | join(\" \")" <<<"$rows") == "reverted agent-revert agent" && $(jq -r .previous <<<"$rows") == "$v1"* ]]'
check "... in the agents' words" eval '[[ $(jq -r .reason <<<"$rows") == "drover-agent reverted on its own from "* ]]'
"$E2E_BUILD/drover" -i "$INV" history --job train >"$E2E_WORK/h20.out" 2>&1
check "the history table has the row, naming where" grep -q 'v20b.*reverted.*drover-agent reverted on its own.* (in h[0-9:]* h[0-9:]* h[0-9:]*)$' "$E2E_WORK/h20.out"
# the dead drover's lease: the next test's drover would take it over (t-34); nothing to wait for
for c in $E2E_CTS; do ct "$c" rm -f /var/lib/drover/leases/train.json; done
check "v1's steps still advance" all_ranks_advance 3 60
finish
