#!/bin/bash
# bench/pytorch-replay/run.sh: the origin incident of issue 9, replayed on one GPU machine with
# the example PyTorch worker (examples/pytorch) under drover, the way bench/gpu-loop drives
# drover-train: a `local = true` host, one `HOST:local:/ROOT` node, one agent daemon, no LXC.
#
#   hand  the v1 script launched by hand (no agent), its own heartbeats to a file: Ktok/s
#   v1    GPT-2 124M, flex_attention with a causal block mask, torch.compile(flex_attention):
#         promoted, Ktok/s = baseline; compared with `hand` = supervision overhead
#   v2    the one-line change: no torch.compile wrapper around flex_attention (same memory, a
#         silent collapse of throughput): reverted, verdict names rule, value and threshold
#   v3    a release whose import fails at start (a broken dependency): reverted at startup
# The 2-GPU all-reduce hang (rank blocked after promotion) needs two GPUs: not here.
#
# Environment: BIN (drover binaries + lib/, default build/gpuloop from bench/gpu-loop/carry.sh),
# W (work dir, default /tmp/drover-ptreplay), OUT (copy summary and logs there), PY (python with
# torch >= 2.5, default python3), B (micro-batch, default 8), STEPS_HAND (default 120).
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
T0=$SECONDS
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=${W:-/tmp/drover-ptreplay}
BIN=${BIN:-$REPO/build/gpuloop}
PY=${PY:-$(command -v python3)}
B=${B:-8}
STEPS_HAND=${STEPS_HAND:-600}
INV=$W/drover.ini
OK=0 FAIL=0
SUMMARY=()
say() { printf '[%4ds] %s\n' $((SECONDS - T0)) "$*"; }
check() { local d=$1; shift; if "$@"; then OK=$((OK + 1)); echo "  ok   $d"; else FAIL=$((FAIL + 1)); echo "  FAIL $d"; fi; }
note() { SUMMARY+=("$*"); echo "  >> $*"; }

rm -rf "$W"
mkdir -p "$W/bin" "$W/lib" "$W/state" "$W/releases" "$W/nodes/n0" "$W/hand"
cp "$BIN"/drover* "$W/bin/"
# only the libraries this machine lacks, from BIN/lib, as bench/gpu-loop/run.sh does: copying
# all of BIN/lib put the build machine's libxml2 first, which wants a libicu this one lacks
missing_libs() {
    LD_LIBRARY_PATH=$W/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "$W"/bin/drover* 2>/dev/null |
        awk '/not found/ {print $1}' | sort -u
}
for _ in 1 2 3 4; do # a fallback library can itself need another one
    miss=$(missing_libs)
    [[ -z $miss ]] && break
    for l in $miss; do [[ -f $BIN/lib/$l ]] && cp "$BIN/lib/$l" "$W/lib/"; done
done
miss=$(missing_libs)
[[ -z $miss ]] || { echo "missing libraries, not in $BIN/lib either: $miss"; exit 1; }
export LD_LIBRARY_PATH=$W/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
say "python: $PY, torch $("$PY" -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>&1 | tail -n 1)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/  gpu: /'

# GPT-2 124M, T 1024, micro-batch B, random tokens (throughput does not depend on the data)
CFG=(layers=12 heads=12 dim=768 vocab=50304 seq=1024 batch=$B lr=0.0006 'data=""' threads=4
     attention='"flex"' compile_flex=true ckpt_every=400 keep_ckpts=1 "PYTHON=$PY")
mk() { local n=$1; shift; "$REPO/examples/pytorch/make-release.sh" "$W/releases/$n" "${CFG[@]}" "$@" >/dev/null && echo "$W/releases/$n"; }
V1=$(mk v1)
V2=$(mk v2 compile_flex=false)
V3=$(mk v3 fail_import=true)
check "v1 and v2 differ in one config line (compile_flex)" test "$(diff "$V1/config.json" "$V2/config.json" | grep -c '^[<>]')" = 2

# ---- hand: the same script, no agent
say "hand: v1 launched by hand, $STEPS_HAND steps"
( cd "$V1" && RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 DROVER_RUN_DIR=$W/hand DROVER_HEARTBEAT_FD=3 \
    timeout 300 "$PY" train.py --config <("$PY" -c "import json,sys; c=json.load(open('config.json')); c['max_steps']=$STEPS_HAND; print(json.dumps(c))") \
    3>"$W/hand/hb.jsonl" >"$W/hand/log" 2>&1 )
# steady state: median tok_s over the last half of the steps
med() { "$PY" -c "
import json,sys,statistics
v=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
v=[x['tok_s'] for x in v if x.get('phase')=='train' and x['step']>int(sys.argv[2])]
print('%.1f' % (statistics.median(v)/1000) if v else 0)" "$@"; }
HAND=$(med "$W/hand/hb.jsonl" $((STEPS_HAND / 2)))
note "hand-launched v1: $HAND Ktok/s (median of steps $((STEPS_HAND / 2))..$STEPS_HAND)"

# ---- the node and the inventory
"$W/bin/drover-agent" --root "$W/nodes/n0" --socket "$W/nodes/n0/agent.sock" daemon --detach \
    --pidfile "$W/nodes/n0/agent.pid" 2>>"$W/nodes/n0/agent.log" || { cat "$W/nodes/n0/agent.log"; exit 1; }
# At exit the job is stopped first: an agent that gets SIGTERM leaves its gangs running (they
# survive its restarts), and the drafter left on the GPU skewed whatever ran next on the machine
# (a bench/train run after this script saw +12 GiB and half the speed).
finish_node() {
    timeout 120 "$W/bin/drover-agent" --root "$W/nodes/n0" --socket "$W/nodes/n0/agent.sock" \
        stop --job drafter >/dev/null 2>&1
    kill -TERM "$(cat "$W/nodes/n0/agent.pid")" 2>/dev/null
    sleep 3
}
trap finish_node EXIT
cat >"$INV" <<INI
[drover]
state_dir = $W/state
known_hosts = $W/known_hosts
staging_dir = $W/staging
agent_path = $W/bin/drover-agent
[host gpu]
local = true
agent_path = $W/bin/drover-agent
[job drafter]
containers = gpu:local:$W/nodes/n0
gpus = 0
command = ./launch.sh
env = NCCL_NVLS_ENABLE=0
master_port = 29711
grace = 60s
healthy_deadline = 4m
warmup_steps = 30
min_healthy_time = 20s
tolerance = 0.2
progress_deadline = 6m
first_step_deadline = 4m
silence_deadline = 60s
INI
dr() { "$W/bin/drover" -i "$INV" "$@" >"$W/last.out" 2>&1; local rc=$?; cat "$W/last.out" >>"$W/drover.log"; return $rc; }

say "v1: compiled flex_attention"
dr deploy "$V1" --job drafter; rc=$?
tail -n 4 "$W/last.out" | sed 's/^/    | /'
check "v1 promoted (exit 0)" test $rc = 0
V1K=$(grep -o 'promoted .*' "$W/last.out" | grep -o '[0-9.]* Ktok/s' | head -n 1 | grep -o '^[0-9.]*')
V1ID=$(grep -o 'promoted [0-9a-f]*' "$W/last.out" | head -n 1 | awk '{print $2}')
note "v1 under drover: ${V1K:-?} Ktok/s ($(grep -o 'promoted.*' "$W/last.out" | head -n 1))"
DRV=$("$PY" - "$W/nodes/n0" <<'PY'
import json, subprocess, sys, statistics, time
# fresh drover-side figure: the rank's tok_s from status documents over 30 s, only while it
# trains (a checkpoint's steps are not the steady state; the hand run's last half has none)
vals = []
for _ in range(30):
    out = subprocess.run([sys.argv[1] + "/../../bin/drover-agent", "--root", sys.argv[1], "--socket",
                          sys.argv[1] + "/agent.sock", "status", "--json"], capture_output=True, text=True).stdout
    try:
        rk = json.loads(out)["jobs"][0]["ranks"][0]
        if rk["hb"].get("phase") == "train" and rk.get("state") == "running":
            vals.append(rk["hb"]["tok_s"])
    except Exception:
        pass
    time.sleep(1)
print("%.1f" % (statistics.median(vals) / 1000) if vals else 0)
PY
)
note "v1 under drover, steady state: $DRV Ktok/s; by hand: $HAND Ktok/s; overhead $("$PY" -c "print('%.2f%%' % (100*(1-$DRV/$HAND)) if $HAND>0 else 'n/a')")"

say "v2: the one-line change (no torch.compile around flex_attention)"
dr deploy "$V2" --job drafter; rc=$?
tail -n 4 "$W/last.out" | sed 's/^/    | /'
check "v2 reverted (exit 3)" test $rc = 3
check "v2's verdict names the throughput rule, value and threshold" grep -q 'throughput regression: .*beyond tolerance -20.0%.*Ktok/s median' "$W/last.out"
note "v2: $(grep -o 'throughput regression[^"]*' "$W/last.out" | head -n 1)"

say "v3: import fails at start"
dr deploy "$V3" --job drafter; rc=$?
tail -n 4 "$W/last.out" | sed 's/^/    | /'
check "v3 reverted (exit 3)" test $rc = 3
note "v3: $(grep -i -o 'crash loop[^"]*\|reverted[^"]*' "$W/last.out" | head -n 1)"
check "the agent's crash events quote the import error" grep -q "ModuleNotFoundError" "$W/nodes/n0/events.jsonl"
check "v1 is current again" grep -q "^${V1ID:-none}" <<<"$(readlink "$W/nodes/n0/jobs/drafter/current" | sed 's|.*/||')"

say "done: $OK ok, $FAIL failed"
printf '%s\n' "${SUMMARY[@]}" >"$W/summary.txt"
if [[ -n ${OUT:-} ]]; then
    mkdir -p "$OUT"
    cp "$W/summary.txt" "$W/drover.log" "$W/hand/log" "$OUT/" 2>/dev/null
    cp "$W/nodes/n0/runs/drafter/logs/rank0.log" "$OUT/rank0.log" 2>/dev/null
    cp "$W/nodes/n0/events.jsonl" "$OUT/" 2>/dev/null
fi
((FAIL == 0))
