#!/bin/sh
# make-release.sh OUT [KEY=JSON]...: a release directory drover deploys as it is:
#   OUT/launch.sh  OUT/train.py  OUT/drover_heartbeat.py  OUT/config.json  [OUT/PYTHON]
# KEY=JSON pairs override config.json (nan_at_step=40, compile_flex=false, ...);
# PYTHON=/path/to/python writes OUT/PYTHON (the interpreter the release runs with).
set -eu
[ $# -ge 1 ] || { echo "usage: $0 OUT [KEY=JSON]..." >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
out=$1; shift
mkdir -p "$out"
cp "$here/launch.sh" "$here/train.py" "$out/"
cp "$here/../../python/drover_heartbeat.py" "$out/"
python3 - "$here/config.json" "$out" "$@" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
out = sys.argv[2]
for kv in sys.argv[3:]:
    k, v = kv.split("=", 1)
    if k == "PYTHON":
        open(out + "/PYTHON", "w").write(v + "\n")
        continue
    cfg[k] = json.loads(v)
json.dump(cfg, open(out + "/config.json", "w"), indent=1, sort_keys=True)
PY
chmod 0755 "$out/launch.sh" "$out/train.py"
