#!/bin/sh
# tests/check-plurals.sh: no message for people says "3 container(s)" or "1 file(s)": a count's
# noun comes from text_plural() (common/text.h).  Looks at the C string literals of the programs
# (controller/, agent/, trainer/, common/), the debug log (log_debug) included: whoever reads
# `drover -v` is a person too.  Comments are left out.
# Prints each offending line; exit 1 if there is one.
cd "$(dirname "$0")/.." || exit 2
bad=$(grep -rnE '"[^"]*[a-z]\(s\)[^"]*"' controller agent trainer common --include='*.c' --include='*.h' |
      grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/?\*|//)')
[ -z "$bad" ] && exit 0
printf '%s\n' "$bad"
echo "tests/check-plurals.sh: a count's noun with '(s)': use text_plural() (common/text.h)"
exit 1
