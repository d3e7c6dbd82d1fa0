#!/bin/bash
# bench/gpu-loop/run.sh: drover's whole deploy / probation / revert loop on one machine with no
# LXC and no sshd (the GPU machine): a `local = true` host, `HOST:local:/ROOT` nodes, one
# drover-agent daemon per node root, synthetic shards, releases built here, `drover deploy`.
# Owns only its work directory ($W) and the daemons it starts there (stopped by pidfile at exit);
# never touches /var/lib/drover, never installs anything, never needs a network.
#
# Phases (PHASES, comma list; default "loop" on one GPU, "loop,gang,split" on two or more):
#   loop   job 'loop', 1 node, GPU 0: v1 promoted (Ktok/s recorded); v2 (micro-batch 1, or the
#          slow fault knob with REGRESS=slow) fails the throughput rule and is reverted, v1 resumes
#          from a checkpoint with its step continuing; v3 (lr 10) diverges and is reverted.
#   gang   job 'gang', 1 node x NGPU ranks: v1 promoted; Ktok/s per GPU and scaling efficiency
#          against the 1-GPU figure of 'loop' (same model, same micro-batch).
#   split  jobs 'a' (first SPLIT part) and 'b' (second) side by side on one node root (one agent,
#          two jobs): v1 to both, each its own baseline; v2 to 'b' reverted, 'a' untouched (same
#          pids, same generation, steps advancing).
#
# Environment:
#   DEVICE=cuda|cpu   (default cuda if nvidia-smi lists a GPU, else cpu)
#   NGPU=N            GPUs to use (default: all listed; cpu: 2)   SPLIT=A+B (default ~5:3, 8 -> 5+3)
#   MODEL=gpt2|small|tiny  (default gpt2 on cuda: GPT-2 124M, T 1024, B 16; tiny on cpu)
#   REGRESS=batch|slow     how v2 regresses: batch = micro-batch 1 (default on cuda); slow =
#                          DROVER_TRAIN_FAULT=slow=4 (default on cpu, where tok/s barely depends on B)
#   NS=0|1            wrap each node's agent in a namespace stand-in (unshare --mount --pid --fork,
#                     the node root bind-mounted on /var/lib/drover); default 0
#   BIN=DIR           drover, drover-agent, drover-train (default: build/); BIN/lib holds fallback
#                     shared libraries for what the machine lacks (bench/gpu-loop/carry.sh makes
#                     build/gpuloop); they are copied into each release too (clean worker env)
#   W=DIR             work directory (default /tmp/drover-gpuloop, wiped first)
#   OUT=DIR           if set: summary, logs, status and history JSON copied there
# Exit 0 when every check passed, 1 otherwise.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
T0=$SECONDS

# NVLink multicast stays off everywhere (shared hosts: see the device notes); the agent gives
# workers a clean environment, so the release's launcher sets these again.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

if [[ -z ${DEVICE:-} ]]; then
    if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then DEVICE=cuda; else DEVICE=cpu; fi
fi
if [[ $DEVICE == cuda ]]; then
    NGPU=${NGPU:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
    MODEL=${MODEL:-gpt2}
else
    NGPU=${NGPU:-2}
    MODEL=${MODEL:-tiny}
fi
((NGPU >= 1)) || { echo "run.sh: no GPU (NGPU=$NGPU)"; exit 1; }
if [[ -z ${PHASES:-} ]]; then
    if ((NGPU >= 2)); then PHASES=loop,gang,split; else PHASES=loop; fi
fi
# default split: about 5:3 (8 -> 5+3, 2 -> 1+1, 4 -> 2+2)
_sb=$(((3 * NGPU + 4) / 8)); ((_sb < 1)) && _sb=1
SPLIT=${SPLIT:-$((NGPU - _sb))+$_sb}
SA=${SPLIT%+*}
SB=${SPLIT#*+}
if [[ $DEVICE == cuda ]]; then REGRESS=${REGRESS:-batch}; else REGRESS=${REGRESS:-slow}; fi
NS=${NS:-0}
W=${W:-/tmp/drover-gpuloop}
BIN=${BIN:-$REPO/build}
INV=$W/drover.ini

case $MODEL in
gpt2)  M_L=12 M_H=12 M_C=768 M_V=50257 M_T=1024 M_B=16 SHARD_TOK=4000000 CKPT_EVERY=500 ;;
small) M_L=6 M_H=8 M_C=512 M_V=50257 M_T=512 M_B=16 SHARD_TOK=2000000 CKPT_EVERY=500 ;;
tiny)  M_L=2 M_H=4 M_C=64 M_V=2048 M_T=64 M_B=16 SHARD_TOK=400000 CKPT_EVERY=100 ;;
*) echo "run.sh: MODEL is gpt2, small or tiny"; exit 2 ;;
esac
THREADS=${THREADS:-1}  # [backend] threads (CPU matmul threads; the CUDA backend ignores it)
# probation policy: short windows, the same rules as production
if [[ $DEVICE == cuda ]]; then
    POL_HEALTHY=${POL_HEALTHY:-90s} POL_WARMUP=${POL_WARMUP:-20} POL_MINH=${POL_MINH:-12s}
else
    POL_HEALTHY=${POL_HEALTHY:-30s} POL_WARMUP=${POL_WARMUP:-10} POL_MINH=${POL_MINH:-8s}
fi

CHECKS_OK=0 CHECKS_FAIL=0
SUMMARY=()
say() { printf '[%4ds] %s\n' $((SECONDS - T0)) "$*"; }
check() { # check DESCRIPTION COMMAND...
    local d=$1
    shift
    if "$@"; then
        CHECKS_OK=$((CHECKS_OK + 1)); printf '  ok   %s\n' "$d"
    else
        CHECKS_FAIL=$((CHECKS_FAIL + 1)); printf '  FAIL %s\n' "$d"
    fi
}
note() { SUMMARY+=("$*"); printf '  >> %s\n' "$*"; }

# ------------------------------------------------------------------ binaries and libraries
rm -rf "$W"
mkdir -p "$W/bin" "$W/lib" "$W/logs" "$W/data" "$W/state" "$W/releases" "$W/nodes"
for b in drover drover-agent drover-train; do
    [[ -x $BIN/$b ]] || { echo "run.sh: $BIN/$b missing (make -j build/$b, or BIN=)"; exit 1; }
    cp "$BIN/$b" "$W/bin/$b"   # a snapshot: a concurrent rebuild cannot change release ids
done
FALLBACK=""
[[ -d $BIN/lib ]] && FALLBACK=$BIN/lib
missing_libs() { # names ldd cannot resolve for the snapshot binaries (with $W/lib in the path)
    LD_LIBRARY_PATH=$W/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "$W"/bin/* 2>/dev/null |
        awk '/not found/ {print $1}' | sort -u
}
for _ in 1 2 3 4; do  # a fallback library can itself need another one
    miss=$(missing_libs)
    [[ -z $miss ]] && break
    for l in $miss; do
        [[ -n $FALLBACK && -f $FALLBACK/$l ]] && cp "$FALLBACK/$l" "$W/lib/"
    done
done
miss=$(missing_libs)
[[ -z $miss ]] || { echo "run.sh: shared libraries missing and not in the fallback dirs: $miss"; exit 1; }
if [[ -n $(ls "$W/lib") ]]; then
    export LD_LIBRARY_PATH=$W/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    say "fallback libraries used: $(ls "$W/lib" | tr '\n' ' ')"
fi
"$W/bin/drover" version >/dev/null 2>&1 || { echo "run.sh: drover does not run"; exit 1; }

say "device=$DEVICE ngpu=$NGPU phases=$PHASES split=$SA+$SB model=$MODEL regress=$REGRESS ns=$NS"
if [[ $DEVICE == cuda ]]; then
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader 2>&1 |
        sed 's/^/  gpu: /'
fi

# ------------------------------------------------------------------ data
python3 "$HERE/mkshard.py" "$W/data/train_000000.bin" "$M_V" "$SHARD_TOK" 1 || exit 1
say "synthetic shard: $SHARD_TOK random tokens, vocab $M_V"

# ------------------------------------------------------------------ releases
# make_release NAME [section.key=value ...] -> prints the directory.  bin/train is the worker:
# it sets the library path and the NCCL variables, then execs drover-train (the agent starts
# workers with a clean environment).  etc/fault, if present, becomes DROVER_TRAIN_FAULT.
make_release() {
    local name=$1 d=$W/releases/$1
    shift
    mkdir -p "$d/bin" "$d/etc"
    cp "$W/bin/drover-train" "$d/bin/drover-train"
    if [[ -n $(ls "$W/lib") ]]; then mkdir -p "$d/lib" && cp "$W"/lib/* "$d/lib/"; fi
    cat >"$d/bin/train" <<'SH'
#!/bin/sh
# release launcher: libraries shipped with the release, NVLink multicast off, optional fault knob
[ -d lib ] && export LD_LIBRARY_PATH="$PWD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
[ -f etc/fault ] && DROVER_TRAIN_FAULT=$(cat etc/fault) && export DROVER_TRAIN_FAULT
exec bin/drover-train train --config etc/train.ini "$@"
SH
    chmod 0755 "$d/bin/train" "$d/bin/drover-train"
    local -A kv=(
        [model.layers]=$M_L [model.heads]=$M_H [model.dim]=$M_C [model.vocab]=$M_V [model.seq]=$M_T
        [train.batch]=$M_B [train.lr]=0.0006 [train.warmup_steps]=10 [train.max_steps]=0
        [train.checkpoint_every]=$CKPT_EVERY [train.keep_checkpoints]=2 [train.log_every]=50
        [data.train]=$W/data/train_*.bin [backend.device]=$DEVICE [backend.threads]=$THREADS
    )
    local o fault=""
    for o in "$@"; do
        if [[ $o == fault=* ]]; then fault=${o#fault=}; else kv[${o%%=*}]=${o#*=}; fi
    done
    [[ -n $fault ]] && echo "$fault" >"$d/etc/fault"
    local sec k
    {
        echo "# release $name (bench/gpu-loop)"
        for sec in model train data backend; do
            echo "[$sec]"
            for k in $(printf '%s\n' "${!kv[@]}" | grep "^$sec\\." | sort); do
                echo "${k#*.} = ${kv[$k]}"
            done
        done
    } >"$d/etc/train.ini"
    echo "$d"
}

# ------------------------------------------------------------------ nodes (agents)
# start_node NAME: one agent daemon with its own root and socket; NS=1 wraps it in a mount+pid
# namespace where the root is bind-mounted on /var/lib/drover (the container's view).
AGENT_PIDFILES=()
start_node() {
    local r=$W/nodes/$1
    mkdir -p "$r"
    if [[ $NS == 1 ]]; then
        # the daemon is pid 1 of its namespace (it reaps its workers' orphans); the root seen
        # from inside is /var/lib/drover, the same files the controller reaches at $r
        setsid unshare --mount --pid --fork --mount-proc --propagation private -- sh -c '
            mkdir -p /var/lib/drover && mount --bind "$1" /var/lib/drover || exit 1
            exec "$2" --root /var/lib/drover --socket /var/lib/drover/agent.sock \
                 daemon --pidfile /var/lib/drover/agent.pid' ns-agent "$r" "$W/bin/drover-agent" \
            </dev/null >/dev/null 2>>"$r/agent.log" &
        local upid=$!
        for _ in $(seq 1 50); do
            if "$W/bin/drover-agent" --root "$r" --socket "$r/agent.sock" status >/dev/null 2>&1; then
                # the agent's pid as this side sees it: unshare's one child
                awk '{print $1}' "/proc/$upid/task/$upid/children" 2>/dev/null >"$r/host.pid"
                AGENT_PIDFILES+=("$r/host.pid")
                return 0
            fi
            sleep 0.2
        done
        note "NS stand-in for $1 did not answer ($(tail -n 1 "$r/agent.log")): plain agent used"
        kill -TERM "$upid" 2>/dev/null
    fi
    "$W/bin/drover-agent" --root "$r" --socket "$r/agent.sock" daemon --detach \
        --pidfile "$r/agent.pid" 2>>"$r/agent.log" || { cat "$r/agent.log"; return 1; }
    AGENT_PIDFILES+=("$r/agent.pid")
}
stop_nodes() {
    local p pid j
    # the jobs first: an agent that gets SIGTERM leaves its gangs running (they survive its
    # restarts), and a gang left on the GPU skews whatever the machine runs next (the split
    # phase's two jobs, or a phase that failed half-way)
    for p in "${AGENT_PIDFILES[@]}"; do
        for j in loop gang a b; do
            timeout 120 "$W/bin/drover-agent" --root "$(dirname "$p")" --socket "$(dirname "$p")/agent.sock" \
                stop --job "$j" >/dev/null 2>&1
        done
    done
    for p in "${AGENT_PIDFILES[@]}"; do
        pid=$(head -n 1 "$p" 2>/dev/null) || continue
        [[ $pid =~ ^[0-9]+$ ]] && kill -TERM "$pid" 2>/dev/null
    done
    for _ in $(seq 1 100); do  # their gangs checkpoint and stop (grace 60s at most)
        local alive=0
        for p in "${AGENT_PIDFILES[@]}"; do
            pid=$(head -n 1 "$p" 2>/dev/null)
            [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && alive=1
        done
        ((alive)) || return 0
        sleep 0.5
    done
}

# ------------------------------------------------------------------ inventory
gpu_list() { # gpu_list FIRST COUNT -> 0,1,2
    seq -s, "$1" $(($1 + $2 - 1))
}
write_inventory() {
    {
        echo "# written by bench/gpu-loop/run.sh"
        echo "[drover]"
        echo "state_dir = $W/state"
        echo "known_hosts = $W/known_hosts"
        echo "staging_dir = $W/staging"
        echo "agent_path = $W/bin/drover-agent"
        echo "[policy]"
        echo "healthy_deadline = $POL_HEALTHY"
        echo "warmup_steps = $POL_WARMUP"
        echo "min_healthy_time = $POL_MINH"
        echo "tolerance = 0.2"
        echo "progress_deadline = 5m"
        echo "[host gpu]"
        echo "local = true"
        echo "agent_path = $W/bin/drover-agent"
        job loop "$W/nodes/n0" 1 0 29601
        ((NGPU >= 2)) && job gang "$W/nodes/g0" "$NGPU" 0 29611
        ((NGPU >= 2)) && job a "$W/nodes/s0" "$SA" 0 29621
        ((NGPU >= 2)) && job b "$W/nodes/s0" "$SB" "$SA" 29631
    } >"$INV"
}
job() { # job NAME ROOT NPROC FIRSTGPU PORT
    echo "[job $1]"
    echo "containers = gpu:local:$2"
    echo "nproc_per_node = $3"
    [[ $DEVICE == cuda ]] && echo "gpus = $(gpu_list "$4" "$3")"
    echo "command = bin/train"
    echo "master_addr = 127.0.0.1"
    echo "master_port = $5"
    echo "grace = 60s"
}

# ------------------------------------------------------------------ drover and JSON helpers
RC=0
dr() { # dr LABEL ARGS... : drover with the inventory; log kept; sets RC
    local label=$1 t=$SECONDS
    shift
    "$W/bin/drover" -i "$INV" "$@" >"$W/logs/$label.out" 2>"$W/logs/$label.err"
    RC=$?
    say "drover $* -> exit $RC ($((SECONDS - t))s)"
    sed 's/^/    | /' "$W/logs/$label.out" "$W/logs/$label.err" | grep -v '^    | *$' | tail -n 12
}
verdict() { # the reason drover printed for a failed release
    grep -h '^FAILED' "$W/logs/$1.out" | head -n 1 | sed "s/^FAILED [0-9a-f]* ([^)]*) for job '[^']*': //"
}
said() { grep -E -i -q -- "$2" "$W/logs/$1.out" "$W/logs/$1.err"; }
status_json() { "$W/bin/drover" -i "$INV" status -o json 2>/dev/null; }
# jq-free queries (python3 is on both machines)
pyq() { python3 -c "$1" "${@:2}"; }
# job_ranks JOB -> "rank step ktok_s release12 resumed_from pid generation" per rank
job_ranks() {
    status_json | pyq '
import json, sys
d = json.load(sys.stdin)
for j in d["jobs"]:
    if j["job"] != sys.argv[1]: continue
    for c in j["containers"]:
        for r in c.get("ranks") or []:
            hb = r.get("hb") or {}
            print(r["rank"], hb.get("step", -1), "%.1f" % (hb.get("tok_s", 0) / 1000),
                  (hb.get("release") or "-")[:12], hb.get("resumed_from", -1), r.get("pid", 0),
                  c.get("generation", -1))
' "$1"
}
last_history() { # last_history JOB FIELD -> the field of the job's newest history record
    "$W/bin/drover" -i "$INV" history --job "$1" -o json 2>/dev/null | pyq '
import json, sys
t = sys.stdin.read().strip()
try:
    d = json.loads(t)
    recs = d if isinstance(d, list) else d.get("history", d.get("records", []))
except ValueError:
    recs = [json.loads(l) for l in t.splitlines() if l.strip()]
recs = [r for r in recs if r.get("job") == sys.argv[1]]
v = recs[-1].get(sys.argv[2]) if recs else None
print("" if v is None else (("%.1f" % v) if isinstance(v, float) else v))
' "$1" "$2"
}
current_is() { # current_is JOB ID12 : every rank heartbeats with release ID12
    local rows
    rows=$(job_ranks "$1")
    [[ -n $rows ]] && ! echo "$rows" | awk -v id="$2" '$4 != substr(id, 1, 12) {bad = 1} END {exit !bad}'
}
steps_advance() { # steps_advance JOB : every rank's step grows over 4 s
    local a b
    a=$(job_ranks "$1" | sort -n)
    sleep 4
    b=$(job_ranks "$1" | sort -n)
    [[ -n $a && $(echo "$a" | wc -l) == $(echo "$b" | wc -l) ]] &&
        paste -d' ' <(echo "$a") <(echo "$b") | awk '{ if (!($9 > $2)) bad = 1 } END { exit bad }'
}
wait_for() { # wait_for SECONDS COMMAND...
    local end=$((SECONDS + $1))
    shift
    while ((SECONDS < end)); do "$@" && return 0; sleep 1; done
    "$@"
}
agent_stop() { # agent_stop ROOT JOB
    "$W/bin/drover-agent" --root "$1" --socket "$1/agent.sock" stop --job "$2" >/dev/null 2>&1
}

finish() {
    stop_nodes
    say "checks: $CHECKS_OK passed, $CHECKS_FAIL failed (total $((SECONDS - T0))s)"
    {
        echo "bench/gpu-loop summary: device=$DEVICE ngpu=$NGPU model=$MODEL (L$M_L C$M_C T$M_T B$M_B V$M_V) regress=$REGRESS ns=$NS"
        printf '%s\n' "${SUMMARY[@]}"
        echo "checks: $CHECKS_OK passed, $CHECKS_FAIL failed; $((SECONDS - T0))s"
    } | tee "$W/summary.txt"
    if [[ -n ${OUT:-} ]]; then
        mkdir -p "$OUT"
        cp "$W/summary.txt" "$OUT/"
        [[ -f $W/status.json ]] && cp "$W/status.json" "$OUT/"
        "$W/bin/drover" -i "$INV" history -o json >"$OUT/history.json" 2>/dev/null
        cp "$INV" "$OUT/drover.ini"
        # logs: drover's output, agent logs, the rank logs (tails), as one tarball
        (cd "$W" && tar -czf "$OUT/logs.tgz" logs drover.ini summary.txt state/history.jsonl \
            state/baselines.json nodes/*/agent.log nodes/*/events.jsonl nodes/*/runs/*/logs \
            releases/*/etc 2>/dev/null)
    fi
    ((CHECKS_FAIL == 0))
}
trap 'stop_nodes' INT TERM

write_inventory
"$W/bin/drover" -i "$INV" history >/dev/null || { echo "run.sh: inventory refused"; cat "$INV"; exit 1; }

slow_or_batch() { # the regressing release's settings
    if [[ $REGRESS == slow ]]; then echo "fault=slow=4"; else echo "train.batch=1"; fi
}

# ------------------------------------------------------------------ phase loop
KTOK_1GPU=""
if [[ ,$PHASES, == *,loop,* ]]; then
    say "== phase loop: job 'loop', one node, GPU 0"
    start_node n0 || exit 1
    v1=$(make_release v1)
    v2=$(make_release v2 "$(slow_or_batch)")
    v3=$(make_release v3 train.lr=10 train.warmup_steps=1)
    dr loop-v1 deploy "$v1" --job loop
    check "v1 deploy exits 0 (promoted)" test $RC = 0
    id1=$(last_history loop release)
    KTOK_1GPU=$(last_history loop ktok_s)
    note "loop: v1 ${id1:0:12} promoted at $KTOK_1GPU Ktok/s (1 GPU, $((M_B * M_T)) tokens/step)"
    check "v1 promoted with a Ktok/s figure" test -n "$KTOK_1GPU"
    sleep 3
    before=$(job_ranks loop)
    say "v1 before v2: $before"
    step_before=$(echo "$before" | awk '{print $2}' | head -n 1)

    dr loop-v2 deploy "$v2" --job loop
    check "v2 deploy exits 3 (failed probation, v1 back)" test $RC = 3
    check "v2 verdict is the throughput rule" said loop-v2 'throughput regression'
    note "loop: v2 ($(slow_or_batch)) -> exit $RC: $(verdict loop-v2)"
    check "v1 heartbeats again on every rank" wait_for 60 current_is loop "$id1"
    after=$(job_ranks loop)
    say "v1 after revert: $after"
    resumed=$(echo "$after" | awk '{print $5}' | head -n 1)
    step_after=$(echo "$after" | awk '{print $2}' | head -n 1)
    check "v1 resumed from a checkpoint (resumed_from $resumed >= 0)" test "${resumed:--1}" -ge 0
    check "v1's step continues (before v2: $step_before, now: $step_after)" test "${step_after:-0}" -gt "${step_before:-0}"
    check "v1 steps advance after the revert" steps_advance loop
    note "loop: v1 back, resumed_from $resumed, step $step_before -> $step_after"

    if [[ ${V3:-1} == 1 ]]; then
        dr loop-v3 deploy "$v3" --job loop
        check "v3 (lr 10) deploy exits 3" test $RC = 3
        check "v3 verdict names the non-finite loss or the divergence exit" said loop-v3 'non-finite|diverg|nan|code 7'
        check "v1 heartbeats again after v3" wait_for 60 current_is loop "$id1"
        # the agent went back on its own: it keeps its own record of that (common/histrec.h),
        # which drover history shows behind drover's verdict of the same release
        check "n0's agent kept its own record of v3 (reverted, agent-revert, by agent)" \
            eval '"$W/bin/drover-agent" --root "$W/nodes/n0" --socket "$W/nodes/n0/agent.sock" history list loop |
                grep "\"name\": *\"v3\"" | grep "\"reason_code\": *\"agent-revert\"" | grep -q "\"by\": *\"agent\""'
        check "drover history shows v3 once, as drover's verdict" \
            eval '[[ $("$W/bin/drover" -i "$INV" history --job loop -o json 2>/dev/null | pyq "
import json, sys
d = json.load(sys.stdin)
recs = d if isinstance(d, list) else d.get(\"history\", d.get(\"records\", []))
print(\" \".join(r.get(\"by\", \"\") for r in recs if r.get(\"name\") == \"v3\"))") == drover ]]'
        note "loop: v3 (lr 10) -> exit $RC: $(verdict loop-v3)"
    fi
    status_json >"$W/status.json"
    agent_stop "$W/nodes/n0" loop  # frees GPU 0 for the next phases
fi

# ------------------------------------------------------------------ phase gang
if [[ ,$PHASES, == *,gang,* ]] && ((NGPU >= 2)); then
    say "== phase gang: job 'gang', one node, $NGPU ranks"
    start_node g0 || exit 1
    g1=$(make_release v1)
    dr gang-v1 deploy "$g1" --job gang
    check "gang v1 deploy exits 0" test $RC = 0
    kg=$(last_history gang ktok_s)
    per=$(pyq 'import sys; print("%.1f" % (float(sys.argv[1]) / int(sys.argv[2])))' "${kg:-0}" "$NGPU")
    eff="n/a"
    [[ -n $KTOK_1GPU ]] && eff=$(pyq 'import sys; print("%.0f%%" % (100 * float(sys.argv[1]) / float(sys.argv[2])))' "$per" "$KTOK_1GPU")
    note "gang: $NGPU ranks, $kg Ktok/s total, $per Ktok/s per GPU, scaling efficiency $eff vs 1 GPU ($KTOK_1GPU)"
    check "every rank of the gang steps" steps_advance gang
    job_ranks gang | sed 's/^/    rank: /'
    status_json >"$W/status-gang.json"
    agent_stop "$W/nodes/g0" gang
fi

# ------------------------------------------------------------------ phase split
if [[ ,$PHASES, == *,split,* ]] && ((NGPU >= 2)); then
    say "== phase split: jobs 'a' ($SA GPUs) and 'b' ($SB GPUs) on one node root"
    start_node s0 || exit 1
    sv1=$(make_release v1)
    sv2=$(make_release v2 "$(slow_or_batch)")
    dr split-a-v1 deploy "$sv1" --job a
    check "job a v1 exits 0" test $RC = 0
    dr split-b-v1 deploy "$sv1" --job b
    check "job b v1 exits 0" test $RC = 0
    ka=$(last_history a ktok_s)
    kb=$(last_history b ktok_s)
    note "split: job a ($SA GPUs) $ka Ktok/s, job b ($SB GPUs) $kb Ktok/s"
    bl=$(pyq 'import json, sys; print(" ".join(sorted(json.load(open(sys.argv[1]))["baselines"])))' "$W/state/baselines.json")
    check "baselines kept apart (keys: $bl)" pyq 'import json, sys; b = json.load(open(sys.argv[1]))["baselines"]; sys.exit(not (any(k.startswith("a@") for k in b) and any(k.startswith("b@") for k in b)))' "$W/state/baselines.json"
    a_before=$(job_ranks a)
    dr split-b-v2 deploy "$sv2" --job b
    check "job b v2 exits 3 (reverted)" test $RC = 3
    check "job b v2 verdict is the throughput rule" said split-b-v2 'throughput regression'
    ida=$(last_history a release)
    check "job b back on v1" wait_for 60 current_is b "$ida"
    a_after=$(job_ranks a)
    say "a before: $(echo "$a_before" | tr '\n' ';')"
    say "a after:  $(echo "$a_after" | tr '\n' ';')"
    check "job a untouched: same pids and generation" test "$(echo "$a_before" | awk '{print $1, $6, $7}')" = "$(echo "$a_after" | awk '{print $1, $6, $7}')"
    check "job a still on v1 and stepping" steps_advance a
    check "job a has no new history record" test "$(last_history a result)" = promoted
    note "split: v2 ($(slow_or_batch)) to job b -> exit $RC: $(verdict split-b-v2); job a before/after (rank step ktok pid gen): $(echo "$a_before" | awk '{print $1, $2, $3, $6, $7}' | tr '\n' ' ')/ $(echo "$a_after" | awk '{print $1, $2, $3, $6, $7}' | tr '\n' ' ')"
    status_json >"$W/status-split.json"
    [[ -n ${OUT:-} ]] && mkdir -p "$OUT" && cp "$W/status-split.json" "$OUT/" 2>/dev/null
    [[ -n ${OUT:-} && -f $W/status-gang.json ]] && cp "$W/status-gang.json" "$OUT/"
fi

finish
