#!/bin/sh
# tests/test-deb.sh BUILD: `make deb` builds a Debian package whose contents are what
# docs/operations.md promises (drover, drover-agent, the agent's unit pointing at the packaged
# binary, completions, gzipped man pages; not drover-train), owned by root, with a valid version
# and Depends.  Run by `make unit` (tests/run-unit.sh).  Exit 1 naming each failed check.
set -u
b=${1:-build}
fails=0
bad() { echo "test-deb: FAILED: $*"; fails=$((fails + 1)); }
deb=$(${MAKE:-make} --no-print-directory deb BUILD="$b" 2>"$b/deb.log" | tail -n 1)
if [ ! -f "$deb" ]; then
	echo "test-deb: FAILED: make deb wrote no package:"; tail -n 5 "$b/deb.log"; exit 1
fi
list=$(dpkg-deb -c "$deb") || { echo "test-deb: FAILED: dpkg-deb -c $deb"; exit 1; }
for f in ./usr/bin/drover ./usr/bin/drover-agent ./usr/lib/systemd/system/drover-agent.service \
	./usr/share/man/man1/drover.1.gz ./usr/share/man/man5/drover.ini.5.gz \
	./usr/share/man/man8/drover-agent.8.gz ./usr/share/bash-completion/completions/drover \
	./usr/share/zsh/site-functions/_drover; do
	printf '%s\n' "$list" | awk '{ print $6 }' | grep -qx -- "$f" || bad "$f is not in the package"
done
printf '%s\n' "$list" | grep -q 'drover-train' && bad "drover-train is in the package (it travels in releases)"
printf '%s\n' "$list" | awk '$2 != "root/root"' | grep -q . && bad "files not owned by root/root"
printf '%s\n' "$list" | grep -E ' \./usr/bin/drover(-agent)?$' | grep -qv '^-rwxr-xr-x' && bad "a program is not mode 0755"
[ "$(dpkg-deb -f "$deb" Package)" = drover ] || bad "Package is not drover"
dpkg-deb -f "$deb" Version | grep -Eq '^[0-9][A-Za-z0-9.+~]*$' || bad "Version '$(dpkg-deb -f "$deb" Version)' is not a Debian version"
dep=$(dpkg-deb -f "$deb" Depends)
printf '%s' "$dep" | grep -q 'libc6' || bad "Depends lacks libc6: $dep"
printf '%s' "$dep" | grep -q 'libxml2\|libicu' && bad "Depends names libxml2/ICU (a library's own dependency): $dep"
t=$(mktemp -d)
dpkg-deb -x "$deb" "$t"
cmp -s "$t/usr/bin/drover-agent" "$b/drover-agent" || bad "the packaged drover-agent is not $b/drover-agent"
grep -q '^ExecStart=/usr/bin/drover-agent ' "$t/usr/lib/systemd/system/drover-agent.service" ||
	bad "the unit does not start /usr/bin/drover-agent"
gzip -dc "$t/usr/share/man/man1/drover.1.gz" | grep -q '^\.TH DROVER 1' || bad "drover.1.gz is not the man page"
rm -rf "$t"
[ $fails -eq 0 ] || exit 1
echo "test-deb: $deb ok ($(printf '%s\n' "$list" | grep -c '^-') files; Depends: $dep)"
