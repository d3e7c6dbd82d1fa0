#!/bin/bash
# t-45-objects: releases at real size.  A venv-shaped environment (E2E_VENV_FILES files,
# relative symlinks, an empty directory) deployed as its own release and named by the code
# release; a one-file change sends only that object (counted in each host's store); a corrupt
# object in a host store is caught by the agent, removed and sent again, never installed; a
# host whose per-connection sshd is stopped (SIGSTOP) mid-upload is reported within the idle
# deadline + 5 s naming host and MiB done, and the deploy completes over a new session, leaving
# no temp files in any store once the stopped session is resumed.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NFILES=${E2E_VENV_FILES:-10000}
ensure_v1
# the names in a host store, one per line, sorted
hnames() { find "$LAB_DIR/hosts/$1/staging/objects" -maxdepth 1 -type f -printf '%f\n' 2>/dev/null | sort; }

# ---- 1. a venv-shaped environment, deployed separately and referenced by the code
venv=$E2E_WORK/releases/venv
if [[ ! -f $venv/.done-$NFILES ]]; then
	rm -rf "$venv"
	mkdir -p "$venv/bin" "$venv/lib/python3.11/site-packages" "$venv/include/empty"
	printf '#!/bin/sh\necho "fake python $*"\n' >"$venv/bin/python3.11"
	chmod 0755 "$venv/bin/python3.11"
	ln -s python3.11 "$venv/bin/python3"
	ln -s python3 "$venv/bin/python"
	ln -s lib "$venv/lib64"
	(cd "$venv/lib/python3.11/site-packages" &&
		for p in $(seq 0 $((NFILES / 100 - 1))); do
			mkdir -p "pkg$p"
			: >"pkg$p/__init__.py"
			for m in $(seq 0 98); do echo "X = $p * 1000 + $m" >"pkg$p/m$m.py"; done
		done)
	touch "$venv/.done-$NFILES"
fi
rm -f "$venv/.done-"*
nf=$(find "$venv" -type f | wc -l)
say "environment: $nf files, $(find "$venv" -type l | wc -l) symlinks"
touch "$venv/.done-$NFILES"
code=$(make_release v6 train.seed=6)
t0=$SECONDS
drover deploy "$code" --env "$venv" --job train
say "deploy with the environment took $((SECONDS - t0))s"
show_drover 12
check "deploy of code + environment exits 0 (promoted)" test "$DROVER_RC" = 0
cur=$(ct_current h2:201)
envlink=$(ct h2:201 readlink "/var/lib/drover/releases/$cur/.drover-env")
check "the code release links its environment (.drover-env -> ../<env id>)" test -n "$envlink"
envdir=/var/lib/drover/releases/${envlink#../}
check "the environment's symlink bin/python -> python3 is kept" test "$(ct h1:102 readlink "$envdir/bin/python")" = python3
check "the environment's empty directory is kept" ct h1:102 test -d "$envdir/include/empty"
check "the environment's files are in the container ($((nf - 1)) + 1)" \
	test "$(ct h1:101 find "$envdir" -type f | wc -l)" -ge "$nf"
check "release files are read-only hardlinks to objects" \
	test "$(ct h1:101 stat -c '%a %h' "$envdir/lib/python3.11/site-packages/pkg0/m1.py")" = "444 2"
check "an executable keeps its exec bits" test "$(ct h1:101 stat -c '%a' "$envdir/bin/python3.11")" = 555

# the same code without --env: the plan warns that the workers would lose .drover-env/
drover plan "$code" --job train
show_drover 2
check "plan without --env warns that the running release's environment would be dropped" \
	drover_said "job 'train' runs ${cur:0:12} with environment ${envlink:3:12}; release [0-9a-f]{12} \(v6\) has none \(no --env given\)"
check "... a warning, not a refusal (exit 0)" test "$DROVER_RC" = 0

# ---- 2. one file changes: only that object travels
# Counted by name, not by number: the GC after the promote may remove other releases' objects
# (keep = 5; CI's full run deployed more releases before this test than a lone t-45 does), so
# the store's size says nothing; the names that appear must be exactly the changed file's.
hnames h1 >"$E2E_WORK/t45-h1.before"
hnames h2 >"$E2E_WORK/t45-h2.before"
code=$E2E_WORK/releases/v7
rm -rf "$code" && cp -a "$E2E_WORK/releases/v6" "$code"
echo "# one-file change" >>"$code/etc/train.ini"
changed=$(sha256sum "$code/etc/train.ini" | cut -c1-64)
drover deploy "$code" --env "$venv" --job train
show_drover 8
check "deploy of a one-file change exits 0" test "$DROVER_RC" = 0
check "deploy says 1 object was missing on each host" drover_said 'stage h1: 1 of [0-9]+ objects? missing'
for h in h1 h2; do
	new=$(hnames $h | comm -13 "$E2E_WORK/t45-$h.before" - | tr '\n' ' ')
	check "$h's store gained exactly the changed file's object (new: ${new:-none})" test "$new" = "$changed "
done
check "the environment was not sent again (already in the containers)" drover_said "already in the container"

# ---- 3. a corrupt object in a host store
code=$(make_release v8 train.seed=8)
echo "a file only v8 has" >"$code/new.txt"
sha=$(sha256sum "$code/new.txt" | cut -c1-64)
mkdir -p "$LAB_DIR/hosts/h1/staging/objects"
echo "a file only v8 HAS" >"$LAB_DIR/hosts/h1/staging/objects/$sha"
drover deploy "$code" --env "$venv" --job train
show_drover 10
check "deploy with a corrupt host object exits 0" test "$DROVER_RC" = 0
check "deploy says it found the corrupt object and sent it again" drover_said 'corrupt object'
cur=$(ct_current h1:101)
check "the container holds the right bytes" test "$(ct h1:101 cat "/var/lib/drover/releases/$cur/new.txt")" = "a file only v8 has"
check "the host store now holds the right bytes" test "$(sha256sum <"$LAB_DIR/hosts/h1/staging/objects/$sha" | cut -c1-64)" = "$sha"

# ---- 4. an installed environment changed in a container is re-verified before it runs again
# (the deploy checks the good release it would revert to, environment included): refused,
# naming the file; the next deploy re-sends exactly that object into that container
envdir=/var/lib/drover/releases/${envlink#../}
f=lib/python3.11/site-packages/pkg0/m1.py
ct h1:102 sh -c "chmod 644 $envdir/$f && printf 'X = 9 * 1000 + 1\n' >$envdir/$f"
code=$(make_release v9 train.seed=9)
drover deploy "$code" --env "$venv" --job train
show_drover 8
check "deploy with a changed file in the good release's environment is refused" test "$DROVER_RC" != 0
check "the refusal names the changed file and what to do" drover_said "'$f' does not match its manifest.*deploy it again"
drover deploy "$code" --env "$venv" --job train --force
show_drover 10
check "deploy --force then exits 0" test "$DROVER_RC" = 0
check "the file is back in h1:102's environment" test "$(ct h1:102 cat "$envdir/$f")" = "X = 0 * 1000 + 1"
check "the environment verifies again in h1:102" ct h1:102 /usr/local/bin/drover-agent release verify "${envlink#../}"

finish
