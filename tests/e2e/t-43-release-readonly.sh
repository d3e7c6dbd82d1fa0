#!/bin/bash
# t-43-release-readonly: a worker that writes into its own release directory (an appended
# config, checkpoints/ relative to its cwd) gets "Read-only file system" in a real LXC
# container, and the release's files, hard links to the store's objects shared with every
# release holding the same content, are unchanged.  A root worker's write used to succeed: it
# changed the object under the last good release too, and the rollback found that damaged.
# Its own inventory: the lab's plus [job ro] in h1:102.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

one_ct_job ro
d="$E2E_WORK/releases/ro"
rm -rf "$d"
mkdir -p "$d"
echo '{"lr": 0.001}' >"$d/config.json"
# each attempt's result into the run dir (writable), then a clean exit: the outcome of the
# deploy itself is not under test here
cat >"$d/w.sh" <<'W'
#!/bin/sh
out="$DROVER_RUN_DIR/ro-result.txt"
{
	echo "append: $( (echo x >>config.json) 2>&1 || true)"
	echo "mkdir: $(mkdir checkpoints 2>&1 || true)"
	echo "run dir: $(touch "$DROVER_RUN_DIR/ok" 2>&1 && echo writable)"
} >"$out.tmp" && mv "$out.tmp" "$out"
sleep 2
exit 0
W
chmod 0755 "$d/w.sh"
ct h1:102 rm -f /var/lib/drover/runs/ro/ro-result.txt
say "drover deploy ro (a worker that writes into its release directory)"
"$E2E_BUILD/drover" -i "$INV" deploy "$d" --job ro >"$E2E_WORK/last.out" 2>"$E2E_WORK/last.err"
DROVER_RC=$?
show_drover 4
res=$(ct h1:102 cat /var/lib/drover/runs/ro/ro-result.txt 2>/dev/null)
result() { printf '%s\n' "$res"; } # (a grep -q on ct's pipe cut it short: SIGPIPE under pipefail)
check "the worker ran and wrote its result in \$DROVER_RUN_DIR" eval '[[ -n $(result) ]]'
printf '    %s\n' "$(result | tr '\n' ';')"
check "appending to a release file: Read-only file system" eval 'result | grep -q "^append: .*Read-only file system"'
check "creating checkpoints/ in the release directory: Read-only file system" \
	eval 'result | grep -q "^mkdir: .*Read-only file system"'
check "\$DROVER_RUN_DIR stays writable" eval 'result | grep -q "^run dir: writable"'
rid=$(ct h1:102 sh -c 'grep -l ro-result /var/lib/drover/releases/*/w.sh' | head -n 1 | sed 's|.*/releases/||; s|/w.sh$||')
check "the release is in the store" eval '[[ $rid =~ ^[0-9a-f]{64}$ ]]'
stored=$(ct h1:102 cat "/var/lib/drover/releases/$rid/config.json")
printf '    stored config.json: %s\n' "$stored"
want=$(cat "$d/config.json")
check "the release's config.json is unchanged in the store" eval '[[ $stored == "$want" ]]'
check "no checkpoints/ in the release directory" eval '! ct h1:102 test -e "/var/lib/drover/releases/$rid/checkpoints"'
"$E2E_BUILD/drover" -i "$INV" logs --job ro -n 200 >"$E2E_WORK/last.out" 2>"$E2E_WORK/last.err"
check "the agent did not fall back to a writable store (the rank's log would say so)" \
	eval '! grep -q "release directory is writable" "$E2E_WORK/last.out"'
finish
