/* controller/cli.h: `drover`'s command line from argv to exit code, as a function so that unit
 * tests run the real thing (tests/unit/test-controller-cli.c).  main.c only calls it.
 */
#ifndef DROVER_CLI_H
#define DROVER_CLI_H

#include <stdbool.h>

/* Global options, the verb, --help, then the verb's arguments checked with no inventory
 * (fleet.args_only: every usage error is reported before the inventory is read, and whether or
 * not one exists), then the inventory and the verb for real.  Returns the exit code
 * (controller/exitcode.h).  Uses getopt's globals and the process's stdout/stderr. */
int cli_main(int argc, char **argv, const char *version);

/* A verb's getopt_long() returned c, an option the verb does not take (cli_getopt said why):
 * the verb's usage line.  Returns EXIT_USAGE.  A bad -o value is cli_output's. */
int cli_option_error(const char *verb, int c, const char *optarg_now);

/* -o/--output's value (value: the optarg cli_getopt just returned for argv, argv[0] the verb):
 * EXIT_OK with *ret_index its position in takes (NULL-terminated; cli_output_json for the verbs
 * that take json only, {"json", "wide", NULL} for status).  Any other value is a usage error,
 * every verb in the same words, the option as typed: "-o takes json, not 'yaml'" ("--output
 * takes json or wide, not 'yaml'"), then the verb's usage line; EXIT_USAGE, *ret_index
 * untouched.  (history, logs and trust said only the usage line.) */
int cli_output(char **argv, const char *value, const char *const *takes, int *ret_index);
extern const char *const cli_output_json[]; /* { "json", NULL } */

struct option;

/* getopt_long() for drover's command lines, getopt's own messages ("stop: option '--job'
 * requires an argument", "invalid option -- 'z'") replaced by drover's: a missing value, an
 * unknown short option, an ambiguous abbreviation or a value given to an option that takes none
 * is logged ("option '--job' for drover stop needs a value (--job J...)", the value's name
 * from the verb's usage line) and returned as '?', which every verb's loop answers with its
 * usage line (exit 2).  argv[0] is the verb, as the verbs get it.  Otherwise as getopt_long
 * (optstring without a leading ':' or '+'; no longindex). */
int cli_getopt(int argc, char **argv, const char *optstring, const struct option *longopts);

/* A value option a verb takes once (--to ID; --job J where one job is named): the first value
 * into *slot; a second one is a usage error (getopt would keep the last silently, so `--job a
 * --job b` acted on b), logged naming the option and both values ("--to given twice ('a' and
 * 'b'): give it once") with the verb's usage line (verb: argv[0]), *slot untouched.  opt is
 * the option as the usage line names it ("--to").  Returns EXIT_OK or EXIT_USAGE. */
int cli_take_once(const char *verb, const char *opt, const char **slot, const char *value);

/* A command-line duration option's value (opt: the option as typed, "--interval" or "-n"), read
 * as the inventory reads a duration (ini_parse_duration: "2s", "500ms", "1.5m", "1h", a plain
 * number is seconds), from lo (excluded when lo_open) to hi seconds.  EXIT_OK with *ret_s; else
 * EXIT_USAGE, logged with the bounds ("--interval takes a duration from 0.5s to 1m (like 2s,
 * 500ms, 1m; a plain number is seconds), not 'abc'"), *ret_s untouched.  `top --timeout 30s`
 * and `status --watch 2s` were refused though the inventory took 30s. */
int cli_duration(const char *opt, const char *value, double lo, bool lo_open, double hi,
                 double *ret_s);

/* What a verb needs of its job selection (cli_job_selection). */
enum cli_jobs_need {
    CLI_JOBS_ANY,  /* none named is fine (deploy, plan: the inventory's one job, or ask) */
    CLI_JOBS_SOME, /* --job J (repeatable) or --all-jobs (stop, start: training is named) */
    CLI_JOBS_ONE,  /* --job J (rollback: no --all-jobs) */
};

/* A verb's job selection, checked once getopt is done (before the inventory is read): a job
 * named twice in jobs[0..njobs), --job with --all-jobs (all), and none named where need asks
 * for one are usage errors, logged with the reason and the verb's usage line (verb: argv[0]).
 * Returns EXIT_OK or EXIT_USAGE (controller/exitcode.h). */
int cli_job_selection(const char *verb, const char *const *jobs, int njobs, bool all, enum cli_jobs_need need);

#endif
