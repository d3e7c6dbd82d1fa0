/* controller/cmd_rollback.c: `drover rollback --job J [--to RELEASE [--force]] [--now]`, and
 * `drover promote --job J` / `drover revert --job J` for a release held on an inconclusive
 * verdict: argument parsing only; the deploy engine (deploy_rollback() and deploy_decide_held()
 * in controller/deploy/) acts.  rollback returns the job to its last good (release, job spec)
 * pair (never a release marked bad, unless named with --to and --force); --now skips the
 * analysis in an incident; --dry-run says where it would go and changes nothing.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "controller/cli.h"
#include "controller/cmd.h"
#include "controller/verbs.h"
#include "controller/deploy/deploy.h"
#include "controller/deploy/rbtarget.h"
#include "controller/transport/fanout.h"

int cmd_rollback(struct fleet *f, int argc, char **argv)
{
    static const struct option opts[] = {
        { "job", required_argument, NULL, 'j' },
        { "to", required_argument, NULL, 't' },
        { "force", no_argument, NULL, 'f' },
        { "output", required_argument, NULL, 'o' },
        { "now", no_argument, NULL, 'N' },
        { "dry-run", no_argument, NULL, 'n' },
        { NULL, 0, NULL, 0 },
    };
    const char *job = NULL, *to = NULL;
    bool force = false, json = false, now = false, dry_run = false;
    int c;
    optind = 0; /* 0: glibc re-initialises (main parsed with "+") */
    while ((c = cli_getopt(argc, argv, "j:t:fo:", opts)) != -1) {
        int r = EXIT_OK;
        if (c == 'j')
            r = cli_take_once(argv[0], "--job", &job, optarg);
        else if (c == 't')
            r = cli_take_once(argv[0], "--to", &to, optarg);
        else if (c == 'f')
            force = true;
        else if (c == 'o') {
            int k;
            r = cli_output(argv, optarg, cli_output_json, &k);
            json = r == EXIT_OK;
        } else if (c == 'N')
            now = true;
        else if (c == 'n')
            dry_run = true;
        else
            return cli_option_error(argv[0], c, optarg);
        if (r != EXIT_OK)
            return r;
    }
    if (optind != argc)
        return verb_usage_error(argv[0], argv[optind]);
    int r = cli_job_selection(argv[0], &job, job ? 1 : 0, false, CLI_JOBS_ONE);
    if (r != EXIT_OK)
        return r;
    /* --force lets --to name a release that failed probation; without --to the target is never
     * such a release, so it changed nothing while it looked like an override of something */
    if (force && !to) {
        log_error("--force only applies with --to ID (roll back to a release that failed "
                  "probation); without --to, rollback never goes to such a release");
        return verb_usage_error(argv[0], NULL);
    }
    /* a malformed --to is bad input, said before any host is contacted (it was found after the
     * survey, worded as if a well-formed prefix were too short) */
    if (to && !rbtarget_prefix_ok(to)) {
        log_error("--to '%s' is not a release id: give %d to %d hex digits of one (`drover history "
                  "--job %s` lists the job's releases)", to, RB_PREFIX_MIN, RELEASE_ID_LEN, job);
        return EXIT_USAGE;
    }
    cmd_result_want(f, json, "rollback", &job, 1);
    if (f->args_only) /* controller/cli.c: arguments checked, no inventory yet */
        return EXIT_OK;
    struct cmd_result cr = { .saved_fd = -1 };
    if (json && cmd_result_begin(&cr) < 0) {
        log_error("cannot redirect stdout for -o json");
        return EXIT_FAIL;
    }
    /* a release this controller's history says failed probation is refused before any host is
     * contacted (it used to be found after the survey, as a usage error, exit 2) */
    int ret = force ? EXIT_OK : deploy_rollback_refuse_failed(f->inv, job, to);
    const struct inv_job *jb = job && ret == EXIT_OK ? inventory_find_job(f->inv, job) : NULL;
    if (jb) { /* all the job's hosts at once: a dead host costs one connect timeout in total */
        bool need[INV_MAX_HOSTS];
        fleet_hosts_of(f->inv, jb, need);
        (void)fleet_connect_all(f, need);
    }
    if (ret == EXIT_OK)
        ret = deploy_rollback(f, job, to, force, now, dry_run);
    const char *jobs[1] = { job };
    return json ? cmd_result_end(&cr, f->inv, "rollback", jobs, job ? 1 : 0, ret) : ret;
}

/* promote --job J, revert --job J */
static int decide_held(struct fleet *f, int argc, char **argv, bool promote)
{
    static const struct option opts[] = {
        { "job", required_argument, NULL, 'j' },
        { NULL, 0, NULL, 0 },
    };
    const char *job = NULL;
    int c;
    optind = 0;
    while ((c = cli_getopt(argc, argv, "j:", opts)) != -1) {
        if (c != 'j')
            return verb_usage_error(argv[0], NULL);
        if (cli_take_once(argv[0], "--job", &job, optarg) != EXIT_OK)
            return EXIT_USAGE;
    }
    if (optind != argc)
        return verb_usage_error(argv[0], argv[optind]);
    /* a decision on a held release names its job, as rollback does: it picked the inventory's
     * only job on its own, after reading the inventory */
    int r = cli_job_selection(argv[0], &job, job ? 1 : 0, false, CLI_JOBS_ONE);
    if (r != EXIT_OK)
        return r;
    if (f->args_only) /* controller/cli.c: arguments checked, no inventory yet */
        return EXIT_OK;
    return deploy_decide_held(f, job, promote);
}

int cmd_promote(struct fleet *f, int argc, char **argv)
{
    return decide_held(f, argc, argv, true);
}

int cmd_revert(struct fleet *f, int argc, char **argv)
{
    return decide_held(f, argc, argv, false);
}
