/* controller/verbs.h: the table of `drover`'s verbs: name, the function that runs it, its usage
 * line, a one-line summary and its long options.  The one source for `drover help`, `drover VERB
 * --help` (answered before the inventory is read) and `drover completion bash|zsh`.
 */
#ifndef DROVER_VERBS_H
#define DROVER_VERBS_H

#include <stdbool.h>
#include <stdio.h>

#include "controller/transport/fleet.h"

struct verb {
    const char *name;
    /* Exactly one of these: run needs the inventory and a fleet; run_plain needs neither. */
    int (*run)(struct fleet *f, int argc, char **argv);
    int (*run_plain)(int argc, char **argv);
    const char *args;    /* usage after the verb: "DIR [--job J]" */
    const char *summary; /* one line, for drover help */
    const char *opts;    /* long options, space-separated, for completion ("--job --force") */
};

extern const struct verb verbs[];
extern const size_t verbs_n;

/* The verb named name; NULL when there is none. */
const struct verb *verb_find(const char *name);

/* drover's usage, every verb from the table, to fp. */
void verbs_usage(FILE *fp);

/* One verb's usage, summary and options, to fp. */
void verb_help(const struct verb *v, FILE *fp);

/* A verb's usage error: logs "usage: drover NAME ARGS" from the table, the line `drover NAME
 * --help` shows (so the two never differ), with " (unexpected 'X')" when unexpected is not NULL.
 * Returns EXIT_USAGE. */
int verb_usage_error(const char *name, const char *unexpected);

/* The option a verb's getopt_long() just returned with optarg, as the user typed it ("-n",
 * "--interval"), into buf; for "value is wrong" messages.  argv and optind as getopt left them. */
const char *verb_opt_typed(char **argv, int optind_now, const char *optarg_now, char *buf, size_t size);

/* true when argv[1..argc) asks for help (-h or --help) before any "--". */
bool verb_wants_help(int argc, char **argv);

/* kubectl-style: the global -i/--inventory may also follow the verb ("drover status -i x.ini").
 * Takes it out of argv[1..argc) (up to a "--"; argv[0] is the verb), sets *ret_path to its value
 * (the last one wins) and shrinks *argc.  Returns false, argv unchanged in meaning, when -i is
 * the last argument and has no value. */
bool verbs_take_inventory_arg(int *argc, char **argv, const char **ret_path);

/* The verb nearest to a mistyped word ("deplyo" -> "deploy": edit distance with adjacent
 * transpositions, at most 1 for words of up to 4 characters, 2 beyond); NULL when none is near. */
const char *verb_suggest(const char *word);

/* Long options of v (the table's opts) in argv[1..argc), before any "--": a word "--x" that is
 * no option of v nor a prefix of one (getopt_long's abbreviations) is refused before the verb
 * parses anything: logs "unknown option '--jbo' for drover deploy: did you mean --job?" (the
 * nearest of v's options, when one is near) and the verb's usage line.  EXIT_OK or EXIT_USAGE. */
int verb_check_options(const struct verb *v, int argc, char **argv);

/* The completion script for shell ("bash" or "zsh") to fp; -EINVAL for another shell. */
int verbs_completion(const char *shell, FILE *fp);

/* `drover completion bash|zsh`: the script on stdout.  Exit code. */
int cmd_completion(int argc, char **argv);

#endif
