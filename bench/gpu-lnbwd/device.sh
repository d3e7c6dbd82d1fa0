#!/bin/bash
# bench/gpu-lnbwd/device.sh: one device call for the LayerNorm backward of issue 15 (one H200):
# `make gpu-test` with the new default (test_kernels checks every LayerNorm backward against the
# CPU reference and against the earlier kernel), the per-kernel table at B=32 (default, old and
# reg3 LayerNorm backward rows), drover-train at B=16 and 32 with the default, DROVER_LN_BWD=old,
# DROVER_LN_BWD=reg3 and the default again, then torch.compile, all in this call.  Runs from a
# folder made by bench/gpu-attn/pack.sh with this script copied in (as lnbwd.sh); logs to $OUT.
# STEPS (30); TORCH (1).
set -u
cd "$(dirname "$0")" || exit 1
export LD_LIBRARY_PATH=$PWD/lib
O=${OUT:-/tmp/out}
mkdir -p "$O"
STEPS=${STEPS:-30}
T0=$(date +%s)
el() { echo "($(($(date +%s) - T0)) s)"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$O/log.txt"
G=build/gpu
GPU_PREBUILT=1 DROVER_TRAIN=build/drover-train timeout 300 tests/gpu/run.sh build > "$O/gputest.txt" 2>&1
echo "gpu-test rc=$? $(el)" | tee -a "$O/log.txt"
grep -E "FAIL|gpu-test|layernorm_backward|identical|test_kernels|sanitizer|ERROR SUMMARY" "$O/gputest.txt" | head -60
BENCH_VARIANTS=0 timeout 100 $G/bench kernels 32 > "$O/kernels32.txt" 2>&1
echo "per-kernel table $(el)"
grep -v "wgmma dq\|wgmma [0-7])" "$O/kernels32.txt" | cut -c1-120
res=$O/bench.jsonl
: > "$res"
run() { # label, env...
    local lab=$1; shift
    for b in 16 32; do
        env "$@" timeout 120 $G/bench $b $STEPS | sed "s/\"system\": \"drover\"/\"system\": \"$lab\"/" | tee -a "$res"
    done
}
run drover
run drover-lnbwd-old DROVER_LN_BWD=old
run drover-lnbwd-reg3 DROVER_LN_BWD=reg3
run drover2 # the default again: drift over the call
run drover-lnbwd-old2 DROVER_LN_BWD=old
echo "drover runs $(el)"
if [ "${TORCH:-1}" = 1 ]; then
    for b in 16 32; do
        timeout 240 python3 torch_gpt2.py --batch $b --steps $STEPS --compile | tee -a "$res"
    done
fi
echo "done $(el)"
python3 - "$res" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {}
for r in rows:
    name = r["system"] + (" compile" if r.get("compile") else "")
    by.setdefault(r["B"], {})[name] = r
for b, d in sorted(by.items()):
    tc = d.get("torch compile", {}).get("ktok_s")
    for k, r in d.items():
        extra = f" / compile {r['ktok_s'] / tc:.3f}x" if tc and k != "torch compile" else ""
        mfu = f" mfu {r['mfu']:.3f} peak {r.get('mem_peak_gib')} GiB step {r.get('step_ms')} ms" if "mfu" in r and k.startswith("drover") else ""
        print(f"B={b} {k:18s} {r['ktok_s']:7.1f} Ktok/s{extra}{mfu}")
PY
