#!/bin/sh
# make-release.sh OUT [KEY=JSON]... [PYTHON=/path/to/python]: a release directory drover
# deploys as it is:
#   OUT/launch.sh  OUT/train.py  OUT/drover_heartbeat.py  OUT/config.json  [OUT/PYTHON]
# KEY=JSON pairs override config.json (nan_at_step=40, compile_flex=false, 'attention="flex"';
# spaces around KEY are stripped);
# PYTHON=/path/to/python, an argument like them (not the environment variable), writes OUT/PYTHON
# (the interpreter the release runs with).
# Every argument is checked before anything is written: a bad one exits 2 naming it.  The
# release is built in a directory next to OUT and moved into place at the end, so a failure
# never leaves a half-built OUT.
set -eu
me=make-release.sh
[ $# -ge 1 ] || { echo "usage: $0 OUT [KEY=JSON]... [PYTHON=/path/to/python]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
out=${1%/}; shift
[ -n "$out" ] || { echo "$me: OUT is empty or '/': name the release directory to build" >&2; exit 2; }
if { [ -e "$out" ] || [ -L "$out" ]; } && [ ! -d "$out" ]; then
	echo "$me: '$out' exists and is not a directory" >&2
	exit 2
fi

# PYTHON=... in the environment (the form docs/pytorch.md once showed) is not read: refuse it
# rather than build a release that silently runs the container's python3
if [ -n "${PYTHON+x}" ]; then
	given=no
	for a in "$@"; do
		case $a in PYTHON=*) given=yes ;; esac
	done
	if [ "$given" = no ]; then
		echo "$me: PYTHON is set in the environment (PYTHON=$PYTHON), but the interpreter is named by an argument: run \`$0 $out ... PYTHON=$PYTHON\` to write $out/PYTHON, or unset PYTHON (\`env -u PYTHON $0 $out ...\`) for a release that runs the --env environment or the containers' python3 (docs/pytorch.md, section 3)" >&2
		exit 2
	fi
fi

# the config (and PYTHON) first, checked whole, into memory: nothing is written on a bad argument
plan=$(python3 - "$me" "$here/config.json" "$@" <<'PY'
import json, sys
me, conf, args = sys.argv[1], sys.argv[2], sys.argv[3:]

def bad(arg, why):
    sys.stderr.write("%s: argument %r: %s: write KEY=JSON, e.g. lr=0.001, compile_flex=false, "
                     "'attention=\"flex\"' (a JSON string keeps its double quotes), or "
                     "PYTHON=/path/to/python\n" % (me, arg, why))
    sys.exit(2)

with open(conf) as f:
    cfg = json.load(f)
python = None
for kv in args:
    if "=" not in kv:
        bad(kv, "no '='")
    k, v = kv.split("=", 1)
    k = k.strip()  # 'lr = 0.1' is lr (json.loads takes the value's spaces)
    if not k:
        bad(kv, "no KEY before '='")
    if k == "PYTHON":
        if not v.strip() or "\n" in v:
            bad(kv, "PYTHON needs the interpreter's path, on one line")
        python = v
        continue
    try:
        cfg[k] = json.loads(v)
    except ValueError as e:
        bad(kv, "the value %r is not JSON (%s)" % (v, e))
print(json.dumps({"config": cfg, "python": python}))
PY
) || exit $?

parent=$(dirname "$out")
mkdir -p "$parent"
tmp=$(mktemp -d "$parent/.${out##*/}.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP
cp "$here/launch.sh" "$here/train.py" "$tmp/"
cp "$here/../../python/drover_heartbeat.py" "$tmp/"
python3 - "$tmp" "$plan" <<'PY'
import json, sys
tmp, plan = sys.argv[1], json.loads(sys.argv[2])
with open(tmp + "/config.json", "w") as f:
    json.dump(plan["config"], f, indent=1, sort_keys=True)
if plan["python"] is not None:
    with open(tmp + "/PYTHON", "w") as f:
        f.write(plan["python"] + "\n")
PY
chmod 0755 "$tmp/launch.sh" "$tmp/train.py"
chmod 0755 "$tmp"  # mktemp -d made it 0700
if [ -e "$out" ] || [ -L "$out" ]; then
	# an existing OUT keeps its other files, as before; each of ours replaces its old one.  An
	# OUT/PYTHON of an earlier build is one of those others: the release still runs it, so say so
	if [ ! -e "$tmp/PYTHON" ] && [ -f "$out/PYTHON" ]; then
		echo "$me: note: $out/PYTHON from an earlier build is kept: the release runs $(head -n 1 "$out/PYTHON"); remove that file for the --env environment or the containers' python3, or pass PYTHON=/path/to/python to name another" >&2
	fi
	for f in "$tmp"/* ; do
		mv -f "$f" "$out/"
	done
else
	mv "$tmp" "$out"
fi
