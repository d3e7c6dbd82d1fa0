/* controller/cmd_stopstart.c: `drover stop --job J... | --all-jobs [--dry-run] [-o json]` and
 * `drover start` with the same arguments: argument parsing and job selection only (the jobs as
 * deploy selects them, but never implicitly: stopping training is always named); the deploy
 * engine's deploy_stop_start() (controller/deploy/stopstart.c) acts, one job after another.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "controller/cli.h"
#include "controller/cmd.h"
#include "controller/verbs.h"
#include "controller/deploy/stopstart.h"
#include "controller/transport/fanout.h"

int cmd_stopstart_parse(int argc, char **argv, struct stopstart_args *ret)
{
    static const struct option opts[] = {
        { "job", required_argument, NULL, 'j' },
        { "all-jobs", no_argument, NULL, 'a' },
        { "dry-run", no_argument, NULL, 'n' },
        { "output", required_argument, NULL, 'o' },
        { NULL, 0, NULL, 0 },
    };
    struct stopstart_args a = { .njobs = 0 };
    int c;
    optind = 0; /* 0: glibc re-initialises (main parsed with "+") */
    while ((c = cli_getopt(argc, argv, "j:no:", opts)) != -1) {
        if (c == 'j' && a.njobs < INV_MAX_JOBS)
            a.jobs[a.njobs++] = optarg;
        else if (c == 'j') {
            log_error("--job given more than %d times", INV_MAX_JOBS);
            return verb_usage_error(argv[0], NULL);
        } else if (c == 'a')
            a.all = true;
        else if (c == 'n')
            a.dry_run = true;
        else if (c == 'o') {
            int k;
            if (cli_output(argv, optarg, cli_output_json, &k) != EXIT_OK)
                return EXIT_USAGE;
            a.json = true;
        } else
            return cli_option_error(argv[0], c, optarg);
    }
    if (optind != argc)
        return verb_usage_error(argv[0], argv[optind]);
    int r = cli_job_selection(argv[0], a.jobs, a.njobs, a.all, CLI_JOBS_SOME);
    if (r != EXIT_OK)
        return r;
    *ret = a;
    return EXIT_OK;
}

static int stop_or_start(struct fleet *f, int argc, char **argv, bool start)
{
    struct stopstart_args a;
    int ret = cmd_stopstart_parse(argc, argv, &a);
    if (ret != EXIT_OK)
        return ret;
    const char *kind = start ? "start" : "stop";
    cmd_result_want(f, a.json, kind, a.jobs, a.njobs);
    if (f->args_only) /* controller/cli.c: arguments checked, no inventory yet */
        return EXIT_OK;
    if (a.all)
        for (int i = 0; i < f->inv->njobs && a.njobs < INV_MAX_JOBS; i++)
            a.jobs[a.njobs++] = f->inv->jobs[i].name;
    struct cmd_result cr = { .saved_fd = -1 };
    if (a.json && cmd_result_begin(&cr) < 0) {
        log_error("cannot redirect stdout for -o json");
        return EXIT_FAIL;
    }
    /* every host of these jobs at once: a dead host costs one connect timeout in total.  A dry
     * run contacts nothing */
    if (!a.dry_run) {
        bool need[INV_MAX_HOSTS];
        fleet_hosts_of_jobs(f->inv, a.jobs, a.njobs, need);
        (void)fleet_connect_all(f, need);
    }
    /* one job after another, each in all its containers at once; every job is asked even when
     * an earlier one failed (a stop in an incident should reach all it can): the first failure's
     * code is the exit code.  One after another, so the worst case is the sum of each job's
     * (stopstart_job_budget, the number each job's own line says): said first, in all, since the
     * first job's line alone read as the whole wait */
    if (a.njobs > 1 && !a.dry_run) {
        char each[512] = "";
        size_t off = 0;
        double total = 0;
        for (int k = 0; k < a.njobs; k++) {
            const struct inv_job *j = inventory_find_job(f->inv, a.jobs[k]);
            if (!j)
                continue; /* deploy_stop_start says so */
            struct stopstart_budget b;
            stopstart_job_budget(f->inv, j, start, &b);
            total += b.total;
            if (off < sizeof each)
                off += (size_t)snprintf(each + off, sizeof each - off, "%s%s %.0f s", off ? ", " : "",
                                        j->name, b.total);
        }
        fprintf(stderr, "%s: %d jobs, one after another (each in all its containers at once): at most "
                "%.0f s in all, the sum of each job's (%s)\n", kind, a.njobs, total, each);
    }
    ret = EXIT_OK;
    for (int k = 0; k < a.njobs; k++) {
        int r = deploy_stop_start(f, a.jobs[k], start, a.dry_run);
        if (r != EXIT_OK && ret == EXIT_OK)
            ret = r;
    }
    return a.json ? cmd_result_end(&cr, f->inv, kind, a.jobs, a.njobs, ret) : ret;
}

int cmd_stop(struct fleet *f, int argc, char **argv)
{
    return stop_or_start(f, argc, argv, false);
}

int cmd_start(struct fleet *f, int argc, char **argv)
{
    return stop_or_start(f, argc, argv, true);
}
