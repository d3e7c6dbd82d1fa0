/* controller/cmd_rollback.c: `drover rollback --job J [--to RELEASE [--force]]`: argument
 * parsing only; the deploy engine (deploy_rollback() in controller/deploy/) returns the job to
 * its last good release (never one marked bad, unless named with --to and --force).
 */
#include <getopt.h>
#include <stdlib.h>

#include "common/log.h"
#include "controller/cmd.h"
#include "controller/deploy/deploy.h"

int cmd_rollback(struct fleet *f, int argc, char **argv)
{
    static const struct option opts[] = {
        { "job", required_argument, NULL, 'j' },
        { "to", required_argument, NULL, 't' },
        { "force", no_argument, NULL, 'f' },
        { NULL, 0, NULL, 0 },
    };
    const char *job = NULL, *to = NULL;
    bool force = false;
    int c;
    optind = 0; /* 0: glibc re-initialises (main parsed with "+") */
    while ((c = getopt_long(argc, argv, "j:t:f", opts, NULL)) != -1) {
        if (c == 'j')
            job = optarg;
        else if (c == 't')
            to = optarg;
        else if (c == 'f')
            force = true;
        else
            return EXIT_USAGE;
    }
    if (optind != argc) {
        log_error("usage: drover rollback --job J [--to RELEASE [--force]]");
        return EXIT_USAGE;
    }
    return deploy_rollback(f, job, to, force);
}
