#!/bin/bash
# t-10-install-deploy: install, then deploy v1: promoted; status JSON shows every rank's step
# advancing and Ktok/s above zero; each container's current release is v1.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

say "drover install"
drover install
check "install exits 0" test "$DROVER_RC" = 0
((DROVER_RC == 0)) || show_drover
for c in $E2E_CTS; do
	check "$c: agent installed at /usr/local/bin/drover-agent and executable" ct "$c" test -x /usr/local/bin/drover-agent
	check "$c: agent answers 'version'" eval 'ct "$c" /usr/local/bin/drover-agent version >/dev/null' 
	check "$c: agent daemon running (control socket /run/drover/agent.sock)" wait_until 30 ct "$c" test -S /run/drover/agent.sock
done

say "drover install again (idempotent)"
drover install
check "second install exits 0" test "$DROVER_RC" = 0

d=$(make_release v1)
say "drover deploy v1"
t0=$SECONDS
drover deploy "$d" --job train
say "deploy took $((SECONDS - t0))s"
show_drover 12
check "deploy v1 exits 0" test "$DROVER_RC" = 0
check "deploy says the release was promoted" drover_said 'promot'
preflight_ran() { local h; for h in h1 h2; do grep -q 'drover-agent.* preflight .*selftest' "$LAB_DIR/pct-$h.log" || return 1; done; }
check "the release's selftest ran as preflight in the containers before activation" preflight_ran
id=$(ct_current h1:101)
echo "$id" >"$V1_FILE"
say "v1 is ${id:0:12}"
check "h1:101 has a current release" test -n "$id"
check "every container's jobs/train/current is v1" all_current_is "$id"
check "v1's release dir holds bin/drover-train and MANIFEST (v2)" \
	ct h1:102 test -x "/var/lib/drover/releases/$id/bin/drover-train" -a -f "/var/lib/drover/releases/$id/MANIFEST"
one_worker_each() { local c; for c in $E2E_CTS; do [[ $(ct_pids "$c" | wc -w) == 1 ]] || return 1; done; }
check "one drover-train process in each container" one_worker_each

json=$(status_json)
echo "$json" >"$E2E_WORK/status-v1.json"
check "status -o json is JSON" jq -e . <<<"$json" >/dev/null
check "status JSON shows 3 ranks" test "$(rank_table <<<"$json" | grep -c .)" = 3
check "every rank's step advances and Ktok/s > 0" all_ranks_advance 3 60
good_is_v1() { jq -e --arg id "${id:0:12}" '[.. | objects | select(has("good")) | .good] | length > 0 and all(startswith($id))' <<<"$json" >/dev/null; }
check "status JSON names v1 as the good (promoted) release" good_is_v1

metrics_ok() { ct h1:101 /usr/local/bin/drover-agent metrics | grep -E '^drover_rank_step\{drover_job="train",rank="0"\} [1-9]' >/dev/null; }
check "drover-agent metrics shows rank 0's step as Prometheus text" metrics_ok

drover history
check "history exits 0" test "$DROVER_RC" = 0
finish
