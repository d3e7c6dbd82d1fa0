#!/bin/bash
# t-49-env-fault: deploy v49 whose workers fail as a broken GPU environment makes drover-train
# fail (exit 9, device error, right after the init heartbeat; the selftest preflight passes).
# The verdict names the environment, not the release: nothing is reverted, the job is not
# restarted, `drover status` says why the containers need attention.  The next plain deploy is
# refused there (gpu-check fails: the lab's containers have no GPU) saying what to do; --force
# deploys v1 anyway, which leaves the lab as the tests after this one expect it.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_v1
v1=$(v1_id)
d=$(make_release v49 train.seed=49)
mkdir -p "$d/bin/real" && mv "$d/bin/drover-train" "$d/bin/real/drover-train"
cat >"$d/bin/drover-train" <<'EOF'
#!/bin/sh
# t-49: the worker's device fails after its init heartbeat (exit 9); the selftest preflight passes
[ "$1" = train ] && export DROVER_TRAIN_FAULT=exit_immediately=9
exec "$(dirname "$0")/real/drover-train" "$@"
EOF
chmod 0755 "$d/bin/drover-train"

say "drover deploy v49 (its workers exit 9: device error)"
t0=$SECONDS
drover deploy "$d" --job train
say "deploy took $((SECONDS - t0))s"
show_drover 8
check "deploy exits 8 (env-fault, docs/errors.md)" test "$DROVER_RC" = 8
check "the verdict names the environment, not the release" \
	drover_said "ENVIRONMENT FAULT for job 'train'.*not reverted \\(the release is not to blame\\)"
check "... and what to do (gpu-check, then deploy again)" drover_said 'drover-agent gpu-check\), then deploy again'
check "no revert: nothing says reverted, no container went back to v1" \
	eval '! drover_said "reverted job|REVERT FAILED|^reverting" && ! all_current_is "$v1" >/dev/null'

sleep 3 # the agents' restart backoff would have started a worker again by now
check "the job is not restarted: no worker in any container" no_worker_anywhere
attention() { # every container: failed, no restart, the reason says environment fault
	status_json | jq -e '[.. | objects | select(has("container") and has("reason"))] |
		length == 3 and all(.state == "failed" and .restarts == 0 and
		(.reason | test("needs attention: environment fault")))' >/dev/null
}
check "status -o json: every container failed, 0 restarts, 'needs attention: environment fault'" attention
drover status
check "drover status shows the attention reason" drover_said 'needs attention: environment fault'

v1dir="$E2E_WORK/releases/v1"
say "drover deploy v1 (no --force) onto the marked containers"
drover deploy "$v1dir" --job train
show_drover 4
check "the plain deploy is refused (exit 1)" test "$DROVER_RC" = 1
check "... saying what to do: fix the GPU environment, or --force" \
	drover_said "fix the container's GPU environment, or deploy --force"
check "... and why the container was marked" drover_said 'it was marked: needs attention: environment fault'
check "... quoting gpu-check's faults whole (it was cut mid-word at 600 bytes: \"nvidia-uvm's majo\")" \
	drover_said "and nvidia-uvm's major too\\); it was marked: "
check "... and its closing line does not say the release keeps running (nothing runs there)" \
	eval '! drover_said "keeps running untouched"'
check "... but that the job stays stopped in the marked containers, and what to do" \
	drover_said "job 'train' stays stopped \\(failed: environment fault\\) in h1:101, h1:102, h2:201; fix the GPU environment there \\(\`drover-agent gpu-check\` in the container"
check "nothing was switched back to v1" eval '! all_current_is "$v1" >/dev/null'

say "drover deploy v1 --force"
drover deploy "$v1dir" --job train --force
show_drover 4
check "the forced deploy goes on (exit 0)" test "$DROVER_RC" = 0
check "... saying that it deploys despite gpu-check" drover_said '--force: deploying anyway'
check "every container is back on v1" all_current_is "$v1"
finish
