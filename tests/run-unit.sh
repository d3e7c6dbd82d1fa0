#!/bin/sh
# tests/run-unit.sh BUILD [STATIC_LIBS]: runs every unit test binary, every fuzz corpus replay,
# the agent's library check (unless STATIC_LIBS is 0) and the Debian package's check (make deb);
# prints one closing line
# "unit: N passed, N failed".  Exit 1 if anything failed.
B=${1:-build}
pass=0; fail=0
for t in "$B"/tests/test-*; do
    [ -x "$t" ] || continue
    if "$t"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAILED: $t"; fi
done
for f in "$B"/fuzz-replay/fuzz-*; do
    [ -x "$f" ] || continue
    n=${f##*/fuzz-}
    if "$f" "tests/fuzz/corpus/$n"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAILED: $f"; fi
done
# python/drover_heartbeat.py and the raw-protocol example of docs/protocol.md (unittest)
if command -v python3 >/dev/null 2>&1; then
    if python3 -m unittest discover -s python -p 'test_*.py' >"$B/python-unit.log" 2>&1; then
        pass=$((pass+1))
    else
        fail=$((fail+1)); cat "$B/python-unit.log"; echo "FAILED: python unittest (python/)"
    fi
else
    fail=$((fail+1)); echo "FAILED: python3 not found (python/ tests; tests/deps.txt lists it)"
fi
# no "3 container(s)" in a message for people (text_plural)
if tests/check-plurals.sh; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAILED: tests/check-plurals.sh"; fi
# drover-agent needs nothing but glibc in a container (Makefile: STATIC_LIBS)
if [ "${2:-1}" = 1 ]; then
    if tests/check-agent-libs.sh "$B/drover-agent"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAILED: tests/check-agent-libs.sh"; fi
fi
# a CUDA build's drover-train holds the CUDA backend (Makefile: LDFLAGS_TRAINER_CUDA)
if nm "$B/trainer/cuda_backend.o" 2>/dev/null | grep -q ' D backend_cuda$'; then
    if nm "$B/drover-train" | grep -q ' [DdRr] backend_cuda$'; then pass=$((pass+1)); else
        fail=$((fail+1)); echo "FAILED: $B/drover-train was built with CUDA but lacks backend_cuda"; fi
fi
# make deb: the Debian package's contents (dpkg-deb -c)
if command -v dpkg-deb >/dev/null 2>&1; then
    if tests/test-deb.sh "$B"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAILED: tests/test-deb.sh"; fi
else
    fail=$((fail+1)); echo "FAILED: dpkg-deb not found (make deb, tests/test-deb.sh)"
fi
echo "unit: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
