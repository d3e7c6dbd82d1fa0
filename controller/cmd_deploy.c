/* controller/cmd_deploy.c: `drover deploy DIR [--job J]... | --all-jobs [--dry-run | --analysis-only] [--force]` and
 * `drover plan DIR [--job J] [-o json]`: argument parsing only; the deploy engine (controller/deploy/)
 * does the work, one job through deploy_run() or several in waves through deploy_wave().
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "controller/cli.h"
#include "controller/cmd.h"
#include "controller/verbs.h"
#include "controller/deploy/deploy.h"
#include "controller/transport/fanout.h"

static int deploy_or_plan(struct fleet *f, int argc, char **argv, bool plan)
{
    static const struct option opts[] = {
        { "job", required_argument, NULL, 'j' },
        { "all-jobs", no_argument, NULL, 'a' },
        { "dry-run", no_argument, NULL, 'n' },
        { "force", no_argument, NULL, 'f' },
        { "env", required_argument, NULL, 'e' },
        { "stage-only", no_argument, NULL, 's' },
        { "output", required_argument, NULL, 'o' },
        { "analysis-only", no_argument, NULL, 'A' },
        { NULL, 0, NULL, 0 },
    };
    struct deploy_opts o = { .dry_run = plan };
    const char *jobs[INV_MAX_JOBS];
    int njobs = 0, c;
    bool all = false, json = false;
    optind = 0; /* 0: glibc re-initialises (main parsed with "+") */
    while ((c = cli_getopt(argc, argv, "j:no:", opts)) != -1) {
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
        else if (c == 'o') { /* `deploy DIR -o yaml` used to exit 2 without a word */
            int k;
            if (cli_output(argv, optarg, cli_output_json, &k) != EXIT_OK)
                return EXIT_USAGE;
            json = true;
        } else if (c == 'A' && !plan)
            o.analysis_only = true;
        else {
            /* say why */
            if (c == 'A')
                log_error("--analysis-only is deploy's, not plan's");
            optind = argc + 1; /* falls into the usage line below */
            break;
        }
    }
    if (optind <= argc) { /* no usage error yet */
        int r = cli_job_selection(argv[0], jobs, njobs, all, CLI_JOBS_ANY);
        if (r != EXIT_OK)
            return r;
    }
    if (optind == argc) /* say what is missing first: the usage line alone did not */
        log_error("%s: missing the release directory (drover %s DIR)", argv[0], argv[0]);
    if (optind + 1 != argc) /* the usage line of `drover deploy|plan --help` */
        return verb_usage_error(argv[0], optind + 1 < argc ? argv[optind + 1] : NULL);
    cmd_result_want(f, json, o.dry_run ? "plan" : "deploy", jobs, njobs);
    if (f->args_only) /* controller/cli.c: arguments checked, no inventory yet */
        return EXIT_OK;
    o.dir = argv[optind];
    /* -o json from here on: a failure before any host is contacted (a mistyped release
     * directory) still writes the document, with its "error" */
    struct cmd_result cr = { .saved_fd = -1 };
    if (json && cmd_result_begin(&cr) < 0) {
        log_error("cannot redirect stdout for -o json");
        return EXIT_FAIL;
    }
    if (json && o.dry_run) /* the plan document: "kind": "plan" with each job's plan */
        o.plan_out = json_array();
    else if (json) /* the deploy document: the jobs it found with nothing to do */
        o.unchanged_out = json_array();
    int ret;
    /* a mistyped release (or --env) directory is named before any host is contacted: with a dead
     * host in the inventory the user would otherwise wait out a connect timeout first.  It is
     * bad input, exit 2 as a usage error (it was 1, the code of a deploy that failed) */
    const char *dirs[] = { o.dir, o.env_dir };
    for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++) {
        struct stat st;
        if (!dirs[k])
            continue;
        int rc = stat(dirs[k], &st);
        if (rc < 0 || !S_ISDIR(st.st_mode)) {
            const char *what = k ? "environment" : "release";
            char why[160];
            (void)ui_path_problem(rc < 0 ? -errno : -ENOTDIR, why, sizeof why);
            log_error("%s directory '%s' %s: give the directory that holds the %s (drover %s %s); "
                      "nothing was contacted, nothing changed", what, dirs[k], why,
                      k ? "environment, a venv say" : "release, with the job's command in it", argv[0],
                      k ? "DIR --env ENVDIR" : "DIR");
            ret = EXIT_USAGE;
            goto out;
        }
    }
    if (all || (plan && !njobs && f->inv->njobs > 1)) {
        for (int i = 0; i < f->inv->njobs; i++)
            jobs[njobs++] = f->inv->jobs[i].name;
    }
    if (o.analysis_only && (njobs > 1 || o.dry_run)) {
        log_error("--analysis-only takes one job and no --dry-run");
        ret = EXIT_USAGE;
        goto out;
    }
    if (!njobs && f->inv->njobs == 1)
        jobs[njobs++] = f->inv->jobs[0].name; /* the one job deploy_run() would pick */
    /* No host is contacted here: deploy_run() (one job) and deploy_wave() (several) connect
     * once the release is known to hold the command of every job they deploy (a release they
     * would refuse contacts no host, and exits 2) */
    if (njobs > 1)
        ret = deploy_wave(f, &o, jobs, njobs);
    else {
        o.job = njobs ? jobs[0] : NULL;
        ret = deploy_run(f, &o);
    }
out:
    if (!json)
        return ret;
    if (o.plan_out)
        cr.extra = json_pack("{s:o}", "plans", o.plan_out);
    else if (o.unchanged_out)
        cr.extra = json_pack("{s:o}", "unchanged", o.unchanged_out);
    return cmd_result_end(&cr, f->inv, o.dry_run ? "plan" : "deploy", jobs, njobs, ret);
}

int cmd_deploy(struct fleet *f, int argc, char **argv)
{
    return deploy_or_plan(f, argc, argv, false);
}

int cmd_plan(struct fleet *f, int argc, char **argv)
{
    return deploy_or_plan(f, argc, argv, true);
}
