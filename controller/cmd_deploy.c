/* controller/cmd_deploy.c: `drover deploy DIR [--job J]... | --all-jobs [--dry-run] [--force]` and
 * `drover plan DIR [--job J]`: argument parsing only; the deploy engine (controller/deploy/)
 * does the work, one job through deploy_run() or several in waves through deploy_wave().
 */
#include <getopt.h>
#include <stdlib.h>

#include "common/log.h"
#include "controller/cmd.h"
#include "controller/deploy/deploy.h"

static int deploy_or_plan(struct fleet *f, int argc, char **argv, bool plan)
{
    static const struct option opts[] = {
        { "job", required_argument, NULL, 'j' },
        { "all-jobs", no_argument, NULL, 'a' },
        { "dry-run", no_argument, NULL, 'n' },
        { "force", no_argument, NULL, 'f' },
        { "env", required_argument, NULL, 'e' },
        { "stage-only", no_argument, NULL, 's' },
        { NULL, 0, NULL, 0 },
    };
    struct deploy_opts o = { .dry_run = plan };
    const char *jobs[INV_MAX_JOBS];
    int njobs = 0, c;
    bool all = false;
    optind = 0; /* 0: glibc re-initialises (main parsed with "+") */
    while ((c = getopt_long(argc, argv, "j:n", opts, NULL)) != -1) {
        if (c == 'j' && njobs < INV_MAX_JOBS)
            jobs[njobs++] = optarg;
        else if (c == 'a')
            all = true;
        else if (c == 'n')
            o.dry_run = true;
        else if (c == 'f')
            o.force = true;
        else if (c == 'e')
            o.env_dir = optarg;
        else if (c == 's')
            o.stage_only = true;
        else
            return EXIT_USAGE;
    }
    if (optind + 1 != argc || (all && njobs)) {
        log_error("usage: drover %s DIR [--env ENVDIR] [--stage-only] [--job J]... | --all-jobs%s", argv[0],
                  plan ? "" : " [--dry-run] [--force]");
        return EXIT_USAGE;
    }
    o.dir = argv[optind];
    if (all || (plan && !njobs && f->inv->njobs > 1)) {
        for (int i = 0; i < f->inv->njobs; i++)
            jobs[njobs++] = f->inv->jobs[i].name;
    }
    if (njobs > 1)
        return deploy_wave(f, &o, jobs, njobs);
    o.job = njobs ? jobs[0] : NULL;
    return deploy_run(f, &o);
}

int cmd_deploy(struct fleet *f, int argc, char **argv)
{
    return deploy_or_plan(f, argc, argv, false);
}

int cmd_plan(struct fleet *f, int argc, char **argv)
{
    return deploy_or_plan(f, argc, argv, true);
}
