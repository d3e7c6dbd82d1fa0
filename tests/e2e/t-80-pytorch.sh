#!/bin/bash
# t-80-pytorch: the example PyTorch worker (examples/pytorch, Debian's CPU torch, 2 DDP ranks over
# gloo) deployed by drover: promoted; a release whose loss goes NaN reverted; a release that hangs
# after warmup reverted during probation by the agent's liveness rule; a worker that speaks the
# raw heartbeat protocol without "release" promoted (issue 9).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/pytorch-lib.sh"
pt_setup

d=$(pt_release p1)
say "drover deploy p1 (examples/pytorch) --job pt"
drover deploy "$d" --job pt
show_drover 12
check "deploy p1 exits 0 (promoted)" test "$DROVER_RC" = 0
check "deploy ran the preflight (launch.sh --selftest)" drover_said 'preflight .*passed'
p1=$(pt_current)
check "h1:101 runs p1 for job pt" test -n "$p1"
check "both ranks train (step > 5), heartbeats carry the release" wait_until 60 pt_training 5
check "the heartbeats carry p1's release (python module)" eval 'status_json | jq -e --arg r "$p1" "[.. | objects | select(has(\"rank\") and has(\"hb\")) | select(.hb.release == \$r)] | length >= 2" >/dev/null'

d=$(pt_release p2 nan_at_step=8)
say "drover deploy p2 (loss NaN from step 8)"
drover deploy "$d" --job pt
show_drover 12
check "deploy p2 exits 3 (reverted)" test "$DROVER_RC" = 3
check "deploy names the non-finite loss" drover_said 'non-finite'
check "job pt is back on p1" eval '[[ $(pt_current) == "$p1" ]]'

d=$(pt_release p3 hang_at_step=10)
say "drover deploy p3 (rank 1 hangs at step 10, after warmup, inside the 25s window): the agent's silence rule"
t0=$SECONDS
drover deploy "$d" --job pt
show_drover 12
check "deploy p3 exits 3 (reverted)" test "$DROVER_RC" = 3
check "the verdict names the liveness rule, a rank and its step" drover_said 'silence_deadline|silent'
check "the agent journaled a hung event naming rank, phase and step" eval 'pt_events | jq -r "select(.kind == \"hung\") | .detail" | grep -E -q "rank [01] silent: no heartbeat for [0-9]+ s in phase train at step [0-9]+"'
check "detected within silence_deadline + probation slack ($((SECONDS - t0))s)" test $((SECONDS - t0)) -lt $((PT_SILENCE + 150))
check "job pt is back on p1 and trains" eval '[[ $(pt_current) == "$p1" ]] && wait_until 60 pt_training 5'

# the raw protocol of docs/protocol.md, word for word, without "release"
rd="$E2E_WORK/releases/raw1"
rm -rf "$rd"
mkdir -p "$rd"
{
	echo '#!/usr/bin/python3'
	sed -n '/^```python raw-heartbeat-example$/,/^```$/p' "$ROOT/docs/protocol.md" | sed '1d;$d'
	cat <<-'PY'
		import time
		step = 0
		while True:
		    step += 1
		    beat(step, 3.0 - step * 0.001, 50000.0)
		    time.sleep(0.2)
	PY
} >"$rd/raw.py"
chmod 0755 "$rd/raw.py"
say "drover deploy raw1 (raw protocol, no release in its heartbeats) --job raw"
drover deploy "$rd" --job raw
show_drover 10
check "deploy raw1 exits 0 (promoted)" test "$DROVER_RC" = 0
ct "$PT_CT" /usr/local/bin/drover-agent stop --job raw >/dev/null 2>&1 || true
pt_stop
finish
