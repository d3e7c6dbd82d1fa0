#!/bin/sh
# mk/deb.sh BUILD: build/drover_<version>_<arch>.deb with drover, drover-agent, the agent's
# systemd unit, the completions and the man pages (`make deb`).  No debhelper: the tree is what
# `make install PREFIX=/usr` writes (minus drover-train, which travels inside releases), the
# control file is written here, and dpkg-deb --root-owner-group builds it as any user.
# Depends: the Debian packages that own the shared libraries drover itself loads (found with
# dpkg -S on this machine); drover-agent needs only libc6 (docs/operations.md).
set -eu
b=${1:?usage: mk/deb.sh BUILD}
command -v dpkg-deb >/dev/null || { echo "make deb: dpkg-deb not found (Debian's dpkg)" >&2; exit 1; }
arch=$(dpkg --print-architecture)
desc=$(git describe --always --dirty 2>/dev/null || echo unknown)
# a Debian version must start with a digit: 0~gitN.HASH sorts by commit count, below any 1.0
n=$(git rev-list --count HEAD 2>/dev/null || echo 0)
version="0~git$n.$(printf '%s' "$desc" | sed 's/[^A-Za-z0-9.+~]/./g')"
stage="$b/deb/root"
rm -rf "$b/deb"
mkdir -p "$stage/DEBIAN"
${MAKE:-make} --no-print-directory install BUILD="$b" DESTDIR="$(cd "$stage" && pwd)" PREFIX=/usr >/dev/null
rm -f "$stage/usr/bin/drover-train"
gzip -9n "$stage"/usr/share/man/man*/*
# the shared libraries drover and drover-agent name (DT_NEEDED, not their dependencies, which
# those packages depend on themselves) -> the packages that own them
deps=$(for p in "$b/drover" "$b/drover-agent"; do
	for so in $(readelf -d "$p" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
		ldd "$p" | awk -v so="$so" '$1 == so && $3 ~ /^\// { print $3 }'
	done
done | sort -u | while read -r lib; do
	dpkg -S "$(readlink -f "$lib")" 2>/dev/null || dpkg -S "$lib" 2>/dev/null || true
done | cut -d: -f1 | sort -u | paste -sd, - | sed 's/,/, /g')
size=$(du -sk "$stage/usr" | cut -f1)
cat >"$stage/DEBIAN/control" <<CONTROL
Package: drover
Version: $version
Architecture: $arch
Maintainer: drover developers <drover@localhost>
Installed-Size: $size
Depends: ${deps:-libc6}
Section: admin
Priority: optional
Homepage: https://localhost/drover
Description: deploy trainer releases to GPU containers and watch them
 drover (the controller) deploys releases of a training job to LXC containers on Proxmox
 hosts over SSH and pct, watches each release on probation and promotes or reverts it.
 drover-agent runs in each container (it needs only the C library) and supervises the
 gang; its systemd unit is drover-agent.service.
CONTROL
out="$b/drover_${version}_$arch.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$out" >/dev/null
echo "$out"
