#!/bin/bash
# t-05-lab-lifecycle: `lab up` and `lab down` are idempotent and leave nothing behind (on a small
# lab of its own beside the suite's).
set -uo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/../lab/test-lab.sh"
