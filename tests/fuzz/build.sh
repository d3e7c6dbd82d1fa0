#!/bin/sh
# Builds every tests/fuzz/fuzz-*.c as a libFuzzer binary (clang) into build-fuzz/, then, when
# FUZZ_SECONDS ($1) > 0, runs each for that long on a copy of its corpus.  New findings are
# saved by libFuzzer as crash-* files in the current directory: add the input to
# tests/fuzz/corpus/<name>/ with the fix, so `make unit` replays it forever after.
set -eu
secs=${1:-0}
B=build-fuzz
CFLAGS="-g -O1 -std=gnu11 -D_GNU_SOURCE -I. -pthread -fsanitize=fuzzer-no-link,address,undefined"
make -s BUILD=$B CC=clang SAN="-fsanitize=fuzzer-no-link,address,undefined" \
    $B/libcommon.a $B/libcontroller.a $B/libagent.a $B/libtrainer.a
libs="$B/libcontroller.a $B/libagent.a $B/libtrainer.a $B/libcommon.a"
deps="-lssh -lcurl -linih -lncursesw -ljansson -lcrypto -larchive -lpcre2-8 -ldl -lm"
for src in tests/fuzz/fuzz-*.c; do
    name=$(basename "$src" .c)
    clang $CFLAGS -fsanitize=fuzzer "$src" $libs $deps -o "$B/$name"
    echo "built $B/$name"
    if [ "$secs" -gt 0 ]; then
        n=${name#fuzz-}
        work=$(mktemp -d)
        cp tests/fuzz/corpus/"$n"/* "$work"/ 2>/dev/null || true
        "$B/$name" -max_total_time="$secs" "$work"
        rm -rf "$work"
    fi
done
