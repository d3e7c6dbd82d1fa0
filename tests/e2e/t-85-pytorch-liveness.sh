#!/bin/bash
# t-85-pytorch-liveness: liveness judged by the agent after promotion too (issue 9).  A promoted
# PyTorch release that hangs later is detected within silence_deadline and restarted from its
# newest checkpoint (never reverted: it was good); a checkpoint longer than silence_deadline but
# shorter than checkpoint_deadline is not a failure.  One that keeps hanging is stopped once its
# restart budget is spent: recorded in the history by its agent, not marked bad.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/pytorch-lib.sh"
pt_setup

# p4 hangs (rank 1, once) when the test drops a file into the run directory, after promotion
d=$(pt_release p4 hang_on_file='"hang-now"' ckpt_every=10)
say "drover deploy p4 (good until told to hang)"
drover deploy "$d" --job pt
show_drover 8
check "deploy p4 exits 0 (promoted)" test "$DROVER_RC" = 0
p4=$(pt_current)
ckpt_written() { ct "$PT_CT" sh -c "ls /var/lib/drover/runs/pt/checkpoints/ | grep -q torch-${p4:0:12}-"; }
check "p4 wrote a checkpoint" wait_until 60 ckpt_written
n_events() { pt_events | jq -r --arg k "$1" 'select(.kind == $k) | .seq' | grep -c .; }
hung_before=$(n_events hung)
restart_before=$(n_events restart)
say "hang rank 1 of the promoted gang"
ct "$PT_CT" touch /var/lib/drover/runs/pt/hang-now
t0=$SECONDS
hung_event() { (($(n_events hung) > hung_before)); }
check "the agent trips the silence rule on its own (no deploy watching)" wait_until $((PT_SILENCE + 40)) hung_event
dt=$((SECONDS - t0))
check "detected within silence_deadline ${PT_SILENCE}s + slack (${dt}s)" test "$dt" -le $((PT_SILENCE + 25))
pt_events | grep '"kind":"hung"' | tail -n 1 | sed 's/^/    /'
restarted() { (($(n_events restart) > restart_before)); }
resumed() { restarted && pt_ranks | awk '$3 > 0 && $2 > $3' | grep -c . | grep -q '^2$'; }
check "the gang restarted and both ranks resumed from the checkpoint (resumed_from > 0)" wait_until 90 resumed
pt_ranks | sed 's/^/    rank step resumed_from state: /'
check "still p4: a promoted release is restarted, never reverted" eval '[[ $(pt_current) == "$p4" ]]'
check "the agent journaled the restart of the promoted release" restarted
# running again, its reason is "": what caused the restart stays said (it used to vanish, and the
# restart's reason called the hang a crash)
restart_said() {
	status_json | jq -e '[.jobs[] | select(.job == "pt") | .containers[] |
		select(.restarts > 0 and (.last_restart_reason | test("^rank [0-9]+ hung")))] | length > 0' >/dev/null
}
check "status -o json keeps last_restart_reason (rank N hung) while p4 runs again" wait_until 30 restart_said
drover status --job pt
check "status says the last restart's cause under the table" drover_said "restarted by its agent 1 time since it was last activated or started, last after rank [0-9]+ hung"
check "no restart reason calls the hang a crash" eval '! pt_events | grep -q "restarted after a crash"'

# p4 now hangs again after every restart.  A hang is seen only once silence_deadline has passed,
# so hangs back to back never fitted in the 120 s crash window and a promoted release that kept
# hanging was restarted forever; the agent counts them in its hang window (120 + 3 * (10 + 60) =
# 330 s here) and the fourth stops it, without a revert (docs/agent.md, "Liveness").
pt_state() { status_json | jq -r '[.jobs[] | select(.job == "pt") | .containers[].state] | join(",")'; }
pt_reason() { status_json | jq -r '[.jobs[] | select(.job == "pt") | .containers[].reason] | join(",")'; }
hang_again() { # touch the trigger once the restarted gang trains (a step past its resume point)
	local n
	n=$(n_events restart)
	((n > restart_seen)) && resumed || return 1
	restart_seen=$n
	ct "$PT_CT" touch /var/lib/drover/runs/pt/hang-now
}
say "make the promoted p4 hang after each restart"
restart_seen=$(n_events restart)
ct "$PT_CT" touch /var/lib/drover/runs/pt/hang-now
t0=$SECONDS
for _ in 1 2 3 4; do
	[[ $(pt_state) == failed ]] && break
	wait_until 120 eval 'hang_again || [[ $(pt_state) == failed ]]' >/dev/null
done
check "the promoted p4 that kept hanging is stopped as failed ($((SECONDS - t0))s)" wait_until 60 eval '[[ $(pt_state) == failed ]]'
pt_reason | sed 's/^/    reason: /'
check "its reason counts the hangs in the hang window and says what to do" \
	eval 'pt_reason | grep -Eq "hung .*on a promoted release, 4 times in [0-9]+ s \(restart budget 3\): stopped; .*drover start"'
check "still p4: a promoted release that hangs is stopped, never reverted" eval '[[ $(pt_current) == "$p4" ]]'
check "at least four hangs before it stopped" eval '(($(n_events hung) - hung_before >= 4))'
# the stop is in the job's history (the agent's own record), and p4 is not marked bad: a hang
# loop can be the infrastructure's (docs/agent.md "Bad releases"); it left no record at all
hang_record() {
	"$E2E_BUILD/drover" -i "$INV" history --job pt -o json 2>/dev/null | jq -e --arg r "$p4" '[.history[] |
		select(.release == $r and .result == "failed" and .reason_code == "agent-stopped-hung" and .by == "agent" and
		(.reason | test("restart budget 3")))] | length > 0' >/dev/null
}
check "drover history shows the agent's stop of p4 (failed, agent-stopped-hung)" hang_record
p4_marked() { status_json | jq -e --arg r "$p4" '[.jobs[] | select(.job == "pt") | .containers[] | (.bad // [])[]] | index($r)' >/dev/null; }
check "p4 is not marked bad" eval '! p4_marked'
drover start --job pt
check "drover start runs the failed p4 again" eval '((DROVER_RC == 0)) && wait_until 90 pt_training 0'

# p5 checkpoints for 20 s (silence_deadline 10 s, checkpoint_deadline 60 s) at step 20
d=$(pt_release p5 ckpt_sleep_s=20 ckpt_every=20)
say "drover deploy p5 (each checkpoint takes 20s: longer than silence_deadline ${PT_SILENCE}s)"
saw_ckpt=$E2E_WORK/pt-saw-checkpointing
rm -f "$saw_ckpt"
( for _ in $(seq 90); do
	pt_ranks | grep -q ' checkpointing ' && { pt_ranks >"$saw_ckpt"; break; }
	sleep 1
  done ) &
watcher=$!
drover deploy "$d" --job pt
show_drover 8
check "deploy p5 exits 0 (promoted)" test "$DROVER_RC" = 0
p5=$(pt_current)
long_ckpt_done() { ct "$PT_CT" sh -c "ls /var/lib/drover/runs/pt/checkpoints/ | grep -q torch-${p5:0:12}-"; }
check "p5's 20s checkpoint completed" wait_until 90 long_ckpt_done
wait "$watcher" 2>/dev/null
check "status showed the ranks as checkpointing (the agent's word)" test -s "$saw_ckpt"
sed 's/^/    /' "$saw_ckpt" 2>/dev/null
check "no hung event for p5" eval '! pt_events | grep "\"kind\":\"hung\"" | grep -q "${p5:0:12}"'
check "p5 still current and training after its checkpoint" eval '[[ $(pt_current) == "$p5" ]] && wait_until 60 pt_training 21'
pt_stop
finish
