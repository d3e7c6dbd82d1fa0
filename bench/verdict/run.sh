#!/bin/bash
# bench/verdict/run.sh [BUILD] [SEEDS]: the verdict matrix (issue 13).  Every simulated row of
# bench/verdict/sim.h over SEEDS seeds (default 100) through the real controller/probation.c:
# verdict counts, false promotes, false reverts, the median simulated seconds from activation to
# the verdict and the median warmup samples excluded.  Exit 1 on any wrong verdict.
# (tests/unit/test-controller-verdict.c runs the same rows over 20 seeds in `make unit`.)
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=$(cd "$ROOT" && cd "${1:-build}" && pwd) || exit 1
O="$B/bench-verdict"
mkdir -p "$O"
cc -O2 -g -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -I"$ROOT" -pthread -o "$O/matrix" \
	"$ROOT/bench/verdict/matrix.c" "$B/libcontroller.a" "$B/libcommon.a" \
	-lssh -linih -lncursesw -ljansson -lcrypto -larchive -lm || exit 1
"$O/matrix" "${2:-100}"
