#!/bin/bash
# t-00-pct: the lab's pct stand-in reproduces every row of PCT.md (before drover touches the lab).
set -uo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/../lab/test-pct.sh"
