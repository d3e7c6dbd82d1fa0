/* controller/cmd_rollback.c: `drover rollback --job J`: argument parsing only; the deploy engine
 * (deploy_rollback() in controller/deploy/) returns the job to its last good release.
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
        { NULL, 0, NULL, 0 },
    };
    const char *job = NULL;
    int c;
    optind = 0; /* 0: glibc re-initialises (main parsed with "+") */
    while ((c = getopt_long(argc, argv, "j:", opts, NULL)) != -1) {
        if (c != 'j')
            return EXIT_USAGE;
        job = optarg;
    }
    if (optind != argc) {
        log_error("usage: drover rollback --job J");
        return EXIT_USAGE;
    }
    return deploy_rollback(f, job);
}
