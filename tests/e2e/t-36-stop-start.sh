#!/bin/bash
# t-36-stop-start: `drover stop --job J` stops the job's gang in every container at once and it
# stays stopped: no worker process is left, `drover status` and `drover top` say "stopped" (not a
# failure, exit 0), and the history records it.  A start while another operator holds the job's
# deploy lease is refused, nothing started.  `drover start --job J` brings every rank back; a
# second start says it was already running and records nothing; a start of a gang that runs in
# part brings it up as one generation.  A deploy of the release the
# stopped job ran starts it (on probation) and says that the job was stopped; a failed deploy
# onto the stopped job is reverted and leaves it stopped.
# Operators used to run `drover-agent stop --job J` in each container by hand.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
states() { status_json | jq -r '[.jobs[] | select(.job == "train") | .containers[] | .state] | join(" ")'; }

say "drover stop --job train"
drover stop --job train
show_drover 6
check "stop exits 0" test "$DROVER_RC" = 0
# the worst case said first is the whole verb's, lease and record included (it was the agents'
# answers alone, "deadline N s")
check "it announces its whole worst case, step by step" \
	drover_said "^stop: job 'train': drover-agent stop in 3 containers at once, under the job's deploy lease: at most [0-9]+ s \\(lease [0-9]+ s, the agents' answers [0-9]+ s, history record and lease given back [0-9]+ s\\)"
for c in $E2E_CTS; do
	check "it says $c stopped" drover_said "^$(re_quote "$c") +stopped "
done
check "no worker process is left in any container" no_worker_anywhere
sleep 5
check "... and none came back 5 s later (the job stays stopped)" no_worker_anywhere
drover status --job train
show_drover 4
check "drover status exits 0 for a stopped job" test "$DROVER_RC" = 0
check "drover status shows every container's job as stopped" \
	test "$(grep -cE "^train +[^ ]+ .* stopped " "$E2E_WORK/last.out")" = 3
check "... and calls nothing failed or crashed" eval '! drover_said "failed|crash"'
say "status -o json states: $(states)"
check "status -o json: state stopped everywhere" test "$(states)" = "stopped stopped stopped"
drover top --once --timeout 8 --width 132
check "top --once exits 0 and shows the job stopped" eval '(( DROVER_RC == 0 )) && drover_said " stopped "'
check "... and calls nothing failed or crashed" eval '! drover_said "failed|crash"'
drover history --job train
check "the history records the stop" drover_said "v1 +stopped .*stopped by the operator"
nstopped() { drover history --job train >/dev/null; grep -cE " stopped +- +stopped by the operator" "$E2E_WORK/last.out"; }
before=$(nstopped)
say "a second stop of the stopped job: already stopped, nothing recorded"
drover stop --job train
show_drover 4
check "a second stop exits 0: already stopped" eval '(( DROVER_RC == 0 )) && drover_said "already stopped"'
check "... says nothing was stopped or recorded" drover_said "was already stopped in all 3 containers: nothing stopped, nothing recorded"
check "... and records no second 'stopped' line in the history" test "$(nstopped)" = "$before"

say "another operator's deploy lease in h1:102: start is refused, nothing started"
other=carol@elsewhere/pid-1/boot-t36/start-1
ct h1:102 /usr/local/bin/drover-agent lease take train "$other" 60 >/dev/null
drover start --job train
show_drover 3
check "start exits 1" test "$DROVER_RC" = 1
check "it names the other operator" drover_said "being deployed by $(re_quote "$other")"
check "nothing was started" no_worker_anywhere
ct h1:102 /usr/local/bin/drover-agent lease release train "$other" >/dev/null

say "drover start --job train"
drover start --job train
show_drover 5
check "start exits 0" test "$DROVER_RC" = 0
check "every rank heartbeats and trains again" all_ranks_advance 3 90
check "still on v1 everywhere" all_current_is "$v1"
nstarted() { drover history --job train >/dev/null; grep -cE " started +- +started by the operator" "$E2E_WORK/last.out"; }
before=$(nstarted)
drover start --job train
show_drover 4
check "a second start exits 0: already running" eval '(( DROVER_RC == 0 )) && drover_said "already running"'
check "... says nothing was started or recorded" drover_said "was already running in all 3 containers: nothing started, nothing recorded"
check "... and records no 'started' line in the history" test "$(nstarted)" = "$before"

# A start of a gang that ran in part: h2:201's part was answered "already running" and kept its
# old rendezvous generation while h1's started as a new one, so the gang never formed (every rank
# exited 8, rendezvous failed) and start exited 0.  Now the part that runs is stopped first (or,
# where its agent already backs off after its peers went, simply started) and all start as one.
say "h1:101 and h1:102 stopped by hand, h2:201 left running: start brings the gang up as one generation"
for c in h1:101 h1:102; do ct "$c" /usr/local/bin/drover-agent stop --job train >/dev/null; done
drover start --job train
show_drover 6
check "start exits 0" test "$DROVER_RC" = 0
check "... and h2:201 is not left 'already running' as its old generation" \
	eval '! drover_said "^h2:201 +already running"'
check "... h1:101 and h1:102 started" \
	eval 'drover_said "^h1:101 +started " && drover_said "^h1:102 +started "'
check "every rank heartbeats and trains again, as one gang" all_ranks_advance 3 120

# It used to relaunch the job on probation without a word about it being stopped.
say "deploy of the release the stopped job already runs: it starts it, and says so"
drover stop --job train
check "stop exits 0" test "$DROVER_RC" = 0
# plan, the deploy's dry run, said nothing of the start either
drover plan "$E2E_WORK/releases/v1" --job train
show_drover 8
check "plan exits 0" test "$DROVER_RC" = 0
check "plan names the release once (it printed two near-identical lines, one on stderr)" \
	eval '[[ $(grep -c "^release [0-9a-f]* (v1)[:,] " "$E2E_WORK/last.out" "$E2E_WORK/last.err" | awk -F: "{ n += \$NF } END { print n }") == 1 ]]'
check "plan says a deploy would start the stopped job, naming the containers" \
	drover_said "job 'train' is stopped in h1:101, h1:102, h2:201 .*: a deploy would start it, with release [0-9a-f]+ \\(v1\\) on probation"
drover plan "$E2E_WORK/releases/v1" --job train -o json
check "plan -o json names them in starts_stopped" \
	test "$(jq -c '.plans[0].starts_stopped' "$E2E_WORK/last.out")" = '["h1:101","h1:102","h2:201"]'
check "plan -o json: the good pair again, throughput not judged" \
	test "$(jq -c '.plans[0].throughput_rule.judged' "$E2E_WORK/last.out")" = false
check "plan started nothing" test "$(states)" = "stopped stopped stopped"
drover deploy "$E2E_WORK/releases/v1" --job train
show_drover 4
check "deploy exits 0" test "$DROVER_RC" = 0
check "it says the job is stopped, naming the containers, and that it starts it" \
	drover_said "job 'train' is stopped in h1:101, h1:102, h2:201 .*: this deploy starts it, with release [0-9a-f]+ \\(v1\\) on probation"
# a progress line, with the others on stderr: on stdout it came out after the verdict in a pipe
check "... on stderr, before the first activate line" \
	awk '/this deploy starts it/ {s = NR} /^activate / && !a {a = NR} END {exit !(s && a && s < a)}' "$E2E_WORK/last.err"
check "... and that drover start starts it without a deploy" drover_said "\`drover start --job train\` starts the release it ran"
check "... and, as its plan said, that the throughput rule is skipped for its good pair" \
	drover_said "is the good release of job 'train' with the job spec it was promoted with: the throughput rule is skipped"
check "every rank heartbeats and trains again" all_ranks_advance 3 90
check "state running everywhere" test "$(states)" = "running running running"

# It used to leave the good release running: the revert started it, though the operator had left
# the job stopped before the deploy.
say "a failed deploy onto the stopped job: reverted to v1, and left stopped"
drover stop --job train
check "stop exits 0" test "$DROVER_RC" = 0
d=$(make_release v36bad data.train=/srv/drover-data/no-such-shard.bin)
drover deploy "$d" --job train
show_drover 6
check "deploy exits 3 (reverted)" test "$DROVER_RC" = 3
check "it says the job is left stopped on v1, and how to start it" \
	drover_said "^reverted job 'train' to [0-9a-f]+; the job was stopped before the deploy, so it is left stopped: \`drover start --job train\` runs it"
check "every container is back on v1" all_current_is "$(v1_id)"
check "state stopped everywhere" test "$(states)" = "stopped stopped stopped"
check "... and no worker runs 5 s later" eval 'sleep 5; no_worker_anywhere'
drover start --job train
check "start exits 0" test "$DROVER_RC" = 0
check "every rank heartbeats and trains again" all_ranks_advance 3 120
finish
