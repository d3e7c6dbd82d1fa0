#!/bin/sh
# launch.sh: the release's entry point (the job's `command`).  The release names its Python:
# the first line of the file PYTHON next to this script (an interpreter path, e.g. a venv's
# /opt/venvs/torch-2.11/bin/python; a relative one is taken from here), else the environment
# deployed with `drover deploy --env` (.drover-env/bin/python), else python3 from PATH.  Everything else comes from the
# agent's environment (RANK, WORLD_SIZE, ..., DROVER_HEARTBEAT_FD) and config.json.
here=$(cd "$(dirname "$0")" && pwd)
py=python3
if [ -f "$here/PYTHON" ]; then
	read -r py <"$here/PYTHON" || true
	if [ -z "$py" ]; then # exec "" would say only "Permission denied"; exit 2 is not retried
		echo "launch.sh: $here/PYTHON has no interpreter on its first line: write the path there (e.g. /opt/venvs/torch/bin/python) or remove the file" >&2
		exit 2
	fi
	case $py in /*) ;; */*) py=$here/$py ;; esac
elif [ -e "$here/.drover-env" ] || [ -L "$here/.drover-env" ]; then
	# an environment was deployed with the release (--env): its interpreter, never python3
	# from PATH instead (the job would run, and be promoted, without the environment)
	if [ ! -x "$here/.drover-env/bin/python" ]; then
		echo "launch.sh: an environment was deployed with this release ($here/.drover-env) but it has no executable bin/python: deploy a venv built with \`python3 -m venv --copies DIR\` (drover deploy REL --env DIR), or name the interpreter in $here/PYTHON" >&2
		exit 2
	fi
	py=$here/.drover-env/bin/python
fi
exec "$py" "$here/train.py" --config "$here/config.json" "$@"
