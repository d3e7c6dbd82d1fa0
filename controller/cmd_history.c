/* controller/cmd_history.c: `drover history [--job J] [--local] [-o json]`: the record of
 * deploys, reverts and rollbacks, oldest first: this controller's (state_dir/history.jsonl)
 * merged with what every agent of the job keeps (drover-agent history list, agent/history.h), so
 * two operators with their own state dirs see the same history.  --local: state_dir only
 * (connects nowhere).  Read-only.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/text.h"
#include "common/agentcli.h"
#include "controller/cli.h"
#include "controller/cmd.h"
#include "controller/verbs.h"
#include "controller/deploy/state.h"
#include "controller/transport/pct.h"

/* Merge into (h, n) the records the agents of job j keep.  Returns how many containers could
 * not be asked; says which once each. */
static int merge_from_agents(struct fleet *f, const struct inv_job *j, struct history_entry **h, size_t *n)
{
    struct agent_argv a;
    agent_argv_init(&a);
    agent_argv_history_list(&a, j->name);
    int missed = 0;
    for (int i = 0; i < j->ncts; i++) {
        const struct inv_ct *ct = &j->cts[i];
        struct conn *c;
        struct exec_result res;
        if (fleet_conn(f, ct->host, &c) < 0) {
            log_warn("%s: unreachable: its history is not merged", ct->label);
            missed++;
            continue;
        }
        if (pct_run_agent(c, ct, a.argv, f->inv->exec_timeout_s, &res) < 0) {
            log_warn("%s: %s: its history is not merged", ct->label, c->err);
            missed++;
            continue;
        }
        if (res.status != 0) {
            char why[600];
            log_warn("%s: drover-agent history list failed (exit %d: %s)%s", ct->label, res.status,
                     exec_result_reason(&res, why, sizeof why),
                     res.status == 2 ? "; this agent is older than the fleet history: drover install" : "");
            missed++;
        } else {
            struct history_entry *more = NULL;
            size_t nmore = 0, skipped = 0;
            if (state_history_parse_lines(res.out, j->name, &more, &nmore, &skipped) < 0 ||
                state_history_merge(h, n, more, nmore, ct->label) < 0)
                log_warn("%s: out of memory merging its history", ct->label);
            else if (skipped) /* once per container: its history, not each line */
                log_warn("%s: %zu unreadable %s of its history skipped", ct->label, skipped,
                         text_plural((long long)skipped, "line", "lines"));
            free(more);
        }
        exec_result_done(&res);
    }
    return missed;
}

int cmd_history(struct fleet *f, int argc, char **argv)
{
    static const struct option opts[] = {
        { "output", required_argument, NULL, 'o' },
        { "job", required_argument, NULL, 'j' },
        { "local", no_argument, NULL, 'l' },
        { NULL, 0, NULL, 0 },
    };
    const char *job = NULL;
    bool json = false, local = false;
    int c;
    optind = 0; /* 0: glibc re-initialises (main parsed with "+") */
    while ((c = cli_getopt(argc, argv, "o:j:", opts)) != -1) {
        int k;
        if (c == 'o') { /* `-o yaml` printed the usage line alone */
            if (cli_output(argv, optarg, cli_output_json, &k) != EXIT_OK)
                return EXIT_USAGE;
            json = true;
        } else if (c == 'j') {
            if (cli_take_once(argv[0], "--job", &job, optarg) != EXIT_OK)
                return EXIT_USAGE;
        } else if (c == 'l')
            local = true;
        else {
            return verb_usage_error(argv[0], NULL);
        }
    }
    if (optind != argc) {
        return verb_usage_error(argv[0], argv[optind]);
    }
    cmd_result_want(f, json, "history", &job, 1);
    if (f->args_only) /* controller/cli.c: arguments checked, no inventory yet */
        return EXIT_OK;
    struct history_entry *h;
    size_t n;
    int r = state_history_read(f->inv->state_dir, job, &h, &n, NULL);
    if (r < 0) {
        log_error("cannot read the history in '%s': %s", f->inv->state_dir, strerror(-r));
        return EXIT_FAIL;
    }
    for (int k = 0; !local && k < f->inv->njobs; k++)
        if (!job || !strcmp(job, f->inv->jobs[k].name))
            (void)merge_from_agents(f, &f->inv->jobs[k], &h, &n);
    if (job && n == 0 && !inventory_find_job(f->inv, job)) {
        /* a mistyped --job showed an empty history, exit 0; a job no longer in the inventory
         * still shows its records */
        char why[512];
        log_error("no history of job '%s' in '%s', and %s", job, f->inv->state_dir,
                  inventory_no_job(f->inv, job, why, sizeof why));
        free(h);
        return EXIT_USAGE;
    }
    if (json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) /* a record as the result documents show it */
            json_array_append_new(arr, history_entry_json(&h[i]));
        json_t *root = json_pack("{s:i,s:o}", "v", 1, "history", arr);
        char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (text)
            printf("%s\n", text);
        free(text);
        json_decref(root);
    } else {
        printf("%-20s %-12s %-13s %-10s %-14s %8s  %s\n", "TIME (UTC)", "JOB", "RELEASE", "NAME",
               "RESULT", "KTOK/S", "REASON");
        for (size_t i = 0; i < n; i++) {
            char when[32], sid[RELEASE_SHORT_LEN + 1], k[16] = "-";
            time_t t = (time_t)h[i].time;
            struct tm tm;
            gmtime_r(&t, &tm);
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
            if (h[i].ktok_s >= 0)
                snprintf(k, sizeof k, "%.1f", h[i].ktok_s);
            /* reasons quote workers and agents; records written before escaping existed too */
            char name[MANIFEST_NAME_MAX], name_e[4 * sizeof name], reason_e[4 * sizeof h[i].reason];
            /* the release's name, also for the records a rollback, promote, revert, stop, start
             * or rebaseline wrote under its verb (state.h) */
            state_history_release_name(f->inv->state_dir, h, n, i, name);
            /* an agent's own record (no drover decided): where, since its reason cannot say */
            char where[sizeof h[i].containers + 16] = "";
            if (!strcmp(h[i].by, HISTORY_BY_AGENT) && h[i].containers[0])
                snprintf(where, sizeof where, " (in %s)", h[i].containers);
            printf("%-20s %-12s %-13s %-10s %-14s %8s  %s%s\n", when, h[i].job,
                   ui_short(h[i].release, sid),
                   ui_table_word(name, name_e, sizeof name_e), h[i].result, k,
                   text_escape(h[i].reason, strlen(h[i].reason), reason_e, sizeof reason_e), where);
        }
    }
    free(h);
    return EXIT_OK;
}
