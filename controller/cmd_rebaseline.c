/* controller/cmd_rebaseline.c: `drover rebaseline --job J`: argument parsing only; the deploy
 * engine (deploy_rebaseline(), controller/deploy/rebaseline.c) acts. */
#include <getopt.h>

#include "controller/cli.h"
#include "controller/cmd.h"
#include "controller/deploy/deploy.h"
#include "controller/transport/fanout.h"
#include "controller/verbs.h"

int cmd_rebaseline(struct fleet *f, int argc, char **argv)
{
    static const struct option opts[] = {
        { "job", required_argument, NULL, 'j' },
        { NULL, 0, NULL, 0 },
    };
    const char *job = NULL;
    int c;
    optind = 0; /* 0: glibc re-initialises (main parsed with "+") */
    while ((c = cli_getopt(argc, argv, "j:", opts)) != -1) {
        if (c != 'j')
            return cli_option_error(argv[0], c, optarg);
        if (cli_take_once(argv[0], "--job", &job, optarg) != EXIT_OK)
            return EXIT_USAGE;
    }
    if (optind != argc)
        return verb_usage_error(argv[0], argv[optind]);
    int r = cli_job_selection(argv[0], &job, job ? 1 : 0, false, CLI_JOBS_ONE);
    if (r != EXIT_OK)
        return r;
    if (f->args_only) /* controller/cli.c: arguments checked, no inventory yet */
        return EXIT_OK;
    const struct inv_job *jb = job ? inventory_find_job(f->inv, job) : NULL;
    if (jb) { /* all the job's hosts at once: a dead host costs one connect timeout in total */
        bool need[INV_MAX_HOSTS];
        fleet_hosts_of(f->inv, jb, need);
        (void)fleet_connect_all(f, need);
    }
    return deploy_rebaseline(f, job);
}
