#!/bin/sh
# tests/check-agent-libs.sh AGENT: drover-agent must run in a container that has only the C
# library (docs/operations.md): every shared library it names (DT_NEEDED) must be glibc's own, or
# a sanitizer runtime in `make asan`'s build.  Prints what else it needs and exits 1.
set -u
a=${1:?usage: check-agent-libs.sh AGENT}
[ -x "$a" ] || { echo "check-agent-libs: $a is missing"; exit 1; }
needed=$(readelf -d "$a" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ -n "$needed" ] || { echo "check-agent-libs: readelf found no NEEDED entries in $a"; exit 1; }
bad=
for l in $needed; do
    case $l in
    libc.so.6 | libm.so.6 | libdl.so.2 | libpthread.so.0 | librt.so.1 | ld-linux-*.so.*) ;;
    libasan.so.* | libubsan.so.*) ;;
    *) bad="$bad $l" ;;
    esac
done
if [ -n "$bad" ]; then
    echo "check-agent-libs: $a needs more than glibc:$bad (link them statically: Makefile STATIC_LIBS)"
    exit 1
fi
echo "check-agent-libs: $a needs only:" $needed
