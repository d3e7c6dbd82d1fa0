#!/bin/bash
# bench/deploy/run.sh BUILD: release transfer on the lab (root; takes the lab lock, brings the lab
# down afterwards).  Grows the lab to BENCH_HOSTS x containers, then measures, in one run:
#   (a) a full deploy (--stage-only: up to "verified in every container", probation excluded) of a
#       release holding a 1 GiB incompressible file (BENCH_MIB) and a 20 KB file;
#   (b) the same release with the 20 KB file changed;
#   (c) the manual method: scp to each host in turn, pct push into each of its containers, no
#       verification;
# plus OpenSSH scp of the same file to one host, for the staging rate.  Figures: docs/benchmarks.md.
set -euo pipefail
B0=$(cd "${1:-build}" && pwd)
# a snapshot of the binaries: a rebuild while this waits for the lab or runs changes nothing here
B=$(mktemp -d /tmp/drover-bench-bin.XXXXXX)
cp "$B0/drover" "$B0/drover-agent" "$B0/drover-train" "$B/"
trap 'rm -rf "$B"' EXIT
ROOT=${DROVER_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
export LAB_DIR=${LAB_DIR:-/tmp/drover-lab}
export LAB_HOSTS=${BENCH_HOSTS:-"h1 h2 h3 h4"}
export LAB_CONTAINERS=${BENCH_CTS:-"h1:101 h1:102 h2:201 h2:202 h3:301 h3:302 h4:401 h4:402"}
MIB=${BENCH_MIB:-1024}
LAB="$ROOT/tests/lab/lab"
exec 8>>"$LAB_DIR.e2e.lock"
echo "bench/deploy: waiting for the lab lock" >&2
flock 8
W=$(mktemp -d /tmp/drover-bench-deploy.XXXXXX)
trap '"$LAB" down >/dev/null 2>&1; rm -rf "$W" "$B"' EXIT
"$LAB" down >/dev/null 2>&1 || true
"$LAB" up >"$W/lab.log" 2>&1 || { tail -20 "$W/lab.log"; exit 1; }
INV=$LAB_DIR/inventory.ini
# one `containers =` line per container: the lab writes them all on one line, longer than an
# inventory line may be (196 bytes) once there are more than about 20
awk '/^containers = / { for (i = 3; i <= NF; i++) print "containers = " $i; next } { print }' "$INV" >"$W/inv.ini"
INV=$W/inv.ini
D() { "$B/drover" -i "$INV" "$@"; }
D trust $LAB_HOSTS >/dev/null 2>&1 || true
D install >/dev/null
rel=$W/rel
mkdir -p "$rel/bin" "$rel/etc"
cp "$B/drover-train" "$rel/bin/drover-train"
echo "[train]" >"$rel/etc/train.ini"
head -c $((MIB << 20)) /dev/urandom >"$rel/data.bin"
head -c 20000 /dev/urandom >"$rel/app.py"
nct=$(wc -w <<<"$LAB_CONTAINERS")
nh=$(wc -w <<<"$LAB_HOSTS")
echo "$(date -u '+%F %T') UTC, $(nproc) cores, $(uptime | sed 's/.*load/load/')"
echo "command: BENCH_HOSTS='$LAB_HOSTS' BENCH_CTS='$LAB_CONTAINERS' BENCH_MIB=$MIB bench/deploy/run.sh"
echo "lab: $nh hosts, $nct containers; release: ${MIB} MiB + 20 KB; $(df -h --output=avail "$LAB_DIR" | tail -1) free"

t0=$(date +%s.%N)
"$B/drover" -v -i "$INV" deploy "$rel" --stage-only --job train 2>"$W/a.err" >/dev/null || { cat "$W/a.err"; exit 1; }
ta=$(echo "$(date +%s.%N) - $t0" | bc)
grep -E "objsync h[0-9]+ " "$W/a.err" | sed 's/^/  (a) step: /' || true # where the time goes, per host
grep -E "^stage h[0-9]+: sent|in every container in" "$W/a.err" | sed 's/^/  (a) /' || true
printf '(a) full deploy, verified in %d containers: %.1f s\n' "$nct" "$ta"

head -c 20000 /dev/urandom >"$rel/app.py"
t0=$(date +%s.%N)
"$B/drover" -v -i "$INV" deploy "$rel" --stage-only --job train 2>"$W/b.err" >/dev/null || { cat "$W/b.err"; exit 1; }
tb=$(echo "$(date +%s.%N) - $t0" | bc)
grep -E "objsync h1[: ]" "$W/b.err" | sed 's/^/  (b) step: /' || true # where the time goes, on one host
grep -E "^stage h[0-9]+: (sent|[0-9]+ of)|in every container in" "$W/b.err" | sed 's/^/  (b) /' || true
printf '(b) one 20 KB file changed, verified in %d containers: %.1f s\n' "$nct" "$tb"

SSHO=(-i "$LAB_DIR/id_ed25519" -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o LogLevel=ERROR)
addr() { awk -v h="[host $1]" '$0 == h { f = 1; next } /^\[/ { f = 0 } f && $1 == "address" { print $3 }' "$INV"; }
t0=$(date +%s.%N)
first=""
for h in $LAB_HOSTS; do
	a=$(addr "$h")
	s0=$(date +%s.%N)
	scp -q "${SSHO[@]}" "$rel/data.bin" "root@$a:/tmp/bench-manual.bin"
	s1=$(date +%s.%N)
	[[ -n $first ]] || first=$(echo "$MIB / ($s1 - $s0)" | bc -l)
	for c in $LAB_CONTAINERS; do
		[[ ${c%%:*} == "$h" ]] || continue
		ssh "${SSHO[@]}" "root@$a" pct push "${c#*:}" /tmp/bench-manual.bin /root/bench-manual.bin
	done
	ssh "${SSHO[@]}" "root@$a" rm -f /tmp/bench-manual.bin
done
tc=$(echo "$(date +%s.%N) - $t0" | bc)
for c in $LAB_CONTAINERS; do # not timed: pct push exits 0 even when the copy failed (PCT.md), so
	# check that the copy is whole, then free the disk for (d)
	sz=$(ssh "${SSHO[@]}" "root@$(addr "${c%%:*}")" pct exec "${c#*:}" -- stat -c %s /root/bench-manual.bin || echo 0)
	[[ $sz == $((MIB << 20)) ]] || { echo "(c) $c: the manual copy is $sz bytes, not $((MIB << 20))" >&2; exit 1; }
	ssh "${SSHO[@]}" "root@$(addr "${c%%:*}")" pct exec "${c#*:}" -- rm -f /root/bench-manual.bin
done
printf '(c) manual scp + pct push, %d hosts in turn, %d containers, unverified: %.1f s\n' "$nh" "$nct" "$tc"
# staging alone to one host, next to scp's rate: a job on h1:101 only, a fresh object
awk '/^containers = / { if (!done) print "containers = h1:101"; done = 1; next } { print }' "$INV" >"$W/one.ini"
head -c $((MIB << 20)) /dev/urandom >"$rel/data.bin"
"$B/drover" -i "$W/one.ini" deploy "$rel" --stage-only --job train 2>"$W/d.err" >/dev/null || { cat "$W/d.err"; exit 1; }
grep -E "^stage h1: sent" "$W/d.err" | sed 's/^/  (d) one host alone: /' || true
printf 'OpenSSH scp of the %d MiB file to h1: %.1f MiB/s\n' "$MIB" "$first"
printf '(a) vs (c): %.2fx faster\n' "$(echo "$tc / $ta" | bc -l)"
