#!/usr/bin/env bash
# tests/install-deps.sh: install the Debian packages in tests/deps.txt that are missing (root).
# A package counts as present when dpkg has it, or when a command of its name is already on the
# PATH: some machines ship npm inside a nodejs package that conflicts with Debian's npm, and
# asking apt for it there fails the whole install.  Used by .ci/run and demo.sh.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mapfile -t pkgs < <(grep -v '^\s*#' "$here/deps.txt" | awk 'NF { print $1 }')
missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' &&
		! command -v "$p" >/dev/null; then
		missing+=("$p")
	fi
done
if ((${#missing[@]} == 0)); then
	echo "install-deps: every package in tests/deps.txt is present"
	exit 0
fi
echo "install-deps: installing ${missing[*]}"
[[ ${SKIP_APT_UPDATE:-0} == 1 ]] || apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
