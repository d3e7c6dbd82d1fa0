#!/bin/bash
# t-48-agent-stopped: a deploy while the agent daemon in h1:101 is stopped (SIGSTOP).  The deploy
# fails before anything is pushed or stopped, and its error says which step stalled, in which
# container, and what to look at -- not the text of drover's host-side shell script (it used to
# say `'sh -c 'mkdir -p "$1" && cd "$1" || exit 1; mode=$2; ...' timed out after 15s`).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
C=h1:101
say "the agent daemon in $C stopped (SIGSTOP)"
ct "$C" sh -c 'kill -STOP "$(cat /run/drover/agent.pid)"' || fatal "cannot stop the agent in $C"
trap 'ct "$C" sh -c "kill -CONT \"\$(cat /run/drover/agent.pid)\"" 2>/dev/null' EXIT
d=$(make_release v48 train.seed=48)
say "drover deploy v48"
drover deploy "$d" --job train
show_drover 10
check "deploy exits 1 (nothing switched)" test "$DROVER_RC" = 1
check "the error names the container and says its agent did not answer" drover_said "agent in ([^ ]+, )*$C.* did not (all )?answer within"
check "... and what to look at" drover_said 'drover-agent stopped or hung'
check "the container is named once, not '$C: the agent in $C'" eval '! drover_said "$C: the agents? in"'
check "no shell script text in the error" eval '! drover_said "mkdir -p|sh -c .mkdir|mode=\\\$2"'
ct "$C" sh -c 'kill -CONT "$(cat /run/drover/agent.pid)"'
check "every container is still on v1" all_current_is "$v1"
finish
