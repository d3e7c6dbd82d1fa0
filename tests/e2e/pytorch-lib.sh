# tests/e2e/pytorch-lib.sh: helpers for the PyTorch e2e tests (t-80, t-85), sourced after lib.sh.
#
# The lab's containers run the host's python3 and Debian's python3-torch (CPU, torch 1.13; the
# lab binds the host's /usr at /opt/host/usr and /usr/bin/python3 is a wrapper: docs/lab.md).  These tests use their own inventory:
# the lab's plus [job pt] (examples/pytorch, 2 DDP ranks over gloo in h1:101) and [job raw] (a
# worker speaking the raw heartbeat protocol without "release"), with short liveness deadlines.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PT_SILENCE=${PT_SILENCE:-10}
PT_CKPT_DEADLINE=${PT_CKPT_DEADLINE:-60}
PT_CT=h1:101

pt_setup() {
	local why
	why=$(ct "$PT_CT" /usr/bin/python3 -c 'import torch' 2>&1) ||
		fatal "no python3 with torch in $PT_CT (python3-torch on the host: tests/deps.txt): $(echo "$why" | tail -n 3)"
	local port
	port=$(sed -n 's/^master_port = //p' "$LAB_DIR/inventory.ini" | head -n 1)
	INV="$E2E_WORK/pytorch.ini"
	{
		cat "$LAB_DIR/inventory.ini"
		cat <<-INI

			[job pt]
			containers = $PT_CT
			nproc_per_node = 2
			command = ./launch.sh
			preflight = ./launch.sh
			preflight_arg = --selftest
			preflight_timeout = 3m
			env = OMP_NUM_THREADS=1
			master_port = $((port + 1))
			grace = 15s
			healthy_deadline = 120
			min_healthy_time = 25
			warmup_steps = 3
			; the throughput rule is not what these tests are about (a loaded 2-core machine)
			tolerance = 0.9
			first_step_deadline = 3m
			silence_deadline = ${PT_SILENCE}s
			stall_deadline = 60s
			checkpoint_deadline = ${PT_CKPT_DEADLINE}s

			[job raw]
			containers = $PT_CT
			command = ./raw.py
			master_port = $((port + 2))
			healthy_deadline = 60
			min_healthy_time = 5
			warmup_steps = 2
		INI
	} >"$INV"
	if ! ct "$PT_CT" test -x /usr/local/bin/drover-agent; then
		drover install
		((DROVER_RC == 0)) || { show_drover; fatal "drover install failed"; }
	fi
}

# pt_release NAME [KEY=JSON]...: examples/pytorch's release with config overrides; prints the dir
pt_release() {
	local name=$1 d="$E2E_WORK/releases/$1"
	shift
	rm -rf "$d"
	"$ROOT/examples/pytorch/make-release.sh" "$d" ckpt_every=20 step_sleep_s=0.05 "$@" >/dev/null ||
		fatal "make-release.sh $name failed"
	echo "$d"
}

pt_current() { ct_current "$PT_CT" "${1:-pt}"; }
# the status document's ranks of job pt: "rank step resumed_from state"
pt_ranks() {
	status_json | jq -r --arg j "${1:-pt}" '.. | objects | select(has("job") and .job == $j) |
		.. | objects | select(has("rank") and has("hb")) |
		"\(.rank) \(.step // -1) \(.hb.resumed_from // -1) \(.state) \(.state_age_s // 0)"' 2>/dev/null
}
pt_training() { # both ranks report a step > $1
	local n
	n=$(pt_ranks | awk -v s="$1" '$2 > s' | wc -l)
	((n >= 2))
}
pt_events() { ct "$PT_CT" cat /var/lib/drover/events.jsonl 2>/dev/null | jq -c 'select(.job == "pt")' 2>/dev/null; }
# stop job pt in its container: the tests after these get the CPU back
pt_stop() { ct "$PT_CT" /usr/local/bin/drover-agent stop --job pt >/dev/null 2>&1 || true; }
