/* controller/cli.h: `drover`'s command line from argv to exit code, as a function so that unit
 * tests run the real thing (tests/unit/test-controller-cli.c).  main.c only calls it.
 */
#ifndef DROVER_CLI_H
#define DROVER_CLI_H

/* Global options, the verb, --help, then the verb's arguments checked with no inventory
 * (fleet.args_only: every usage error is reported before the inventory is read, and whether or
 * not one exists), then the inventory and the verb for real.  Returns the exit code
 * (controller/exitcode.h).  Uses getopt's globals and the process's stdout/stderr. */
int cli_main(int argc, char **argv, const char *version);

#endif
