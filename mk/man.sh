#!/bin/sh
# mk/man.sh BUILD OUTDIR: drover(1), drover-agent(8) and drover.ini(5) from what the programs say
# about themselves (the verb table behind `drover help` and `drover VERB --help`, drover-agent's
# usage) and from docs/config.md, so the pages never drift from the code or the docs.
set -eu
b=$1 out=$2
mkdir -p "$out"
ver=$("$b/drover" version | cut -d' ' -f2)
date=$(git log -1 --format=%cs 2>/dev/null || date +%F)
esc() { sed -e 's/\\/\\e/g' -e 's/^\./\\\&./' -e "s/^'/\\\\\\&'/"; }
{
	printf '.TH DROVER 1 "%s" "drover %s" "User Commands"\n' "$date" "$ver"
	printf '.SH NAME\ndrover \\- deploy trainer releases to GPU containers and watch them\n'
	printf '.SH SYNOPSIS\n.B drover\n[\\-i INVENTORY] [\\-v] VERB [ARGS]\n.SH DESCRIPTION\n'
	printf '.nf\n'; "$b/drover" help | esc; printf '.fi\n.SH VERBS\n'
	for v in $("$b/drover" completion bash | sed -n "s/^    '') words='[^']* --version \(.*\)' ;;$/\1/p"); do
		printf '.SS %s\n.nf\n' "$v"; "$b/drover" "$v" --help 2>/dev/null | esc || true; printf '.fi\n'
	done
	printf '.SH FILES\n.TP\n.I drover.ini\nthe inventory: drover.ini(5)\n'
	printf '.SH SEE ALSO\ndrover-agent(8), drover.ini(5); docs/controller.md in the source\n'
} >"$out/drover.1"
{
	printf '.TH DROVER-AGENT 8 "%s" "drover %s" "System Administration"\n' "$date" "$ver"
	printf '.SH NAME\ndrover-agent \\- release store and gang supervisor inside each GPU container\n'
	printf '.SH DESCRIPTION\n.nf\n'; "$b/drover-agent" --help | esc; printf '.fi\n'
	printf '.SH FILES\n.TP\n.I /var/lib/drover\nthe store (releases, jobs, runs, events.jsonl)\n'
	printf '.SH SEE ALSO\ndrover(1); docs/agent.md and docs/protocol.md in the source\n'
} >"$out/drover-agent.8"
{
	printf '.TH DROVER.INI 5 "%s" "drover %s" "File Formats"\n' "$date" "$ver"
	printf '.SH NAME\ndrover.ini \\- the drover inventory\n.SH DESCRIPTION\n.nf\n'
	esc <docs/config.md
	printf '.fi\n.SH SEE ALSO\ndrover(1)\n'
} >"$out/drover.ini.5"
echo "man pages in $out: drover.1 drover-agent.8 drover.ini.5"
