/* controller/deploy/stopstart.c: `drover stop --job J` and `drover start --job J`.  An operator's
 * stop is a plain `drover-agent stop --job J` (no --restart-after: the job stays stopped until
 * started again); a start is `drover-agent start --job J` with a new rendezvous
 * generation, so the ranks started together pair only with each other; a gang of several
 * containers that runs in part is stopped there first and started with the others, since a part
 * left running as its old generation never forms a gang with them.  Both run under the
 * job's lock and deploy lease (lease.c), like deploy and rollback: a concurrent deploy is
 * refused before anything is asked, and no deploy starts while a stop is in flight.
 * Never changes a release, a baseline or a promotion; never waits for heartbeats.
 */
#include "controller/deploy/deploy_int.h"
#include "controller/deploy/stopstart.h"
#include "controller/deploy/objsync.h"
#include "controller/deploy/pastfail.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/text.h"
#include "common/util.h"
#include "controller/exitcode.h"
#include "controller/ui.h"
#include "controller/transport/conn.h"
#include "controller/transport/send.h"

enum stopstart_outcome stopstart_judge(bool start, bool asked, const char *ok_line, bool ended,
                                       bool ct_stopped)
{
    if (!asked)
        return SS_UNREACHABLE;
    if (ok_line)
        return start && strstr(ok_line, "already running") ? SS_ALREADY : SS_DONE;
    if (!ended)
        return SS_NO_ANSWER;
    return ct_stopped ? SS_CT_STOPPED : SS_FAILED;
}

const char *stopstart_word(bool start, enum stopstart_outcome o)
{
    switch (o) {
    case SS_DONE:
        return start ? "started" : "stopped";
    case SS_ALREADY:
        return start ? "already running" : "already stopped";
    case SS_CT_STOPPED:
        return "container stopped";
    case SS_FAILED:
        return "FAILED";
    case SS_NO_ANSWER:
        return "NO ANSWER";
    case SS_INTERRUPTED:
        return "INTERRUPTED";
    case SS_UNREACHABLE:
        return "UNREACHABLE";
    case SS_RESTARTED:
        return "restarted";
    case SS_HELD_BACK:
        return "NOT STARTED";
    }
    return "?";
}

bool stopstart_is_ok(bool start, enum stopstart_outcome o)
{
    /* a stopped container is no success for stop either: its agent still has the job started
     * and starts the gang again when the container starts (it used to count as stopped) */
    (void)start;
    return o == SS_DONE || o == SS_ALREADY || o == SS_RESTARTED;
}

bool stopstart_gang_runs(const struct job_status *js)
{
    return js->state == GANG_STARTING || js->state == GANG_RUNNING || js->state == GANG_REVERTED;
}

int stopstart_split_gang(const bool *runs, const bool *down, int n, bool ret_part[])
{
    int nruns = 0, ndown = 0;
    for (int i = 0; i < n; i++) {
        nruns += runs[i];
        ndown += down[i] && !runs[i];
    }
    if (n < 2 || !nruns || !ndown)
        return 0;
    for (int i = 0; i < n; i++)
        ret_part[i] = runs[i];
    return nruns;
}

int stopstart_split_generation(const struct job_status *const *js, int n, bool ret_part[])
{
    if (n < 2)
        return 0;
    bool differ = false;
    for (int i = 0; i < n; i++) {
        if (!js[i] || !js[i]->rdzv[0] ||
            !(stopstart_gang_runs(js[i]) || (js[i]->state == GANG_BACKOFF && js[i]->peer_exit)))
            return 0;
        differ = differ || strcmp(js[i]->rdzv, js[0]->rdzv) != 0;
    }
    if (!differ)
        return 0;
    for (int i = 0; i < n; i++)
        ret_part[i] = true;
    return n;
}

int stopstart_exit(bool start, const enum stopstart_outcome *o, int n, bool key_refused)
{
    if (key_refused)
        return EXIT_HOSTKEY;
    for (int i = 0; i < n; i++)
        if (!stopstart_is_ok(start, o[i]))
            return EXIT_FAIL;
    return EXIT_OK;
}

const char *stopstart_history_result(bool start, const enum stopstart_outcome *o, int n, int ret)
{
    if (ret != EXIT_OK)
        return start ? "start-failed" : "stop-failed";
    for (int i = 0; i < n; i++)
        if (o[i] != SS_ALREADY)
            return start ? "started" : "stopped";
    /* it ran (or was stopped) everywhere already: nothing changed, nothing to record */
    return n > 0 ? NULL : start ? "started" : "stopped";
}

bool stopstart_never_deployed(const enum stopstart_outcome *o, char (*said)[STOPSTART_SAID_MAX],
                              int n)
{
    for (int i = 0; i < n; i++)
        if (o[i] != SS_FAILED || !strstr(said[i], AGENT_NO_JOB))
            return false;
    return n > 0;
}

void stopstart_budget_of(bool start, double grace_s, double exec_timeout_s, int host_rounds,
                         int max_cts_per_host, struct stopstart_budget *ret)
{
    int rounds = host_rounds > 0 ? host_rounds : 1;
    struct stopstart_budget b;
    /* lease take --status everywhere, then the plain take where an agent is older than --status */
    b.lease = rounds * (lease_take_timeout(exec_timeout_s, true) + lease_take_timeout(exec_timeout_s, false));
    /* a stop returns once the gang is gone (SIGKILL after the grace), a start once every rank was
     * exec'd (after the GPU-memory wait); both plus a round trip of exec_timeout, as the switch's
     * restart of an old gang allows */
    b.answer = (grace_s > 0 ? grace_s : 30) + exec_timeout_s + (start ? 30 : 0);
    b.record = (double)rounds * (max_cts_per_host > 0 ? max_cts_per_host : 1) * HISTORY_ADD_TIMEOUT_S;
    b.give_back = rounds * exec_timeout_s; /* leases_release: the lease fan's exec_timeout */
    b.total = b.lease + b.answer + b.record + b.give_back;
    *ret = b;
}

void stopstart_job_budget(const struct inventory *inv, const struct inv_job *j, bool start,
                          struct stopstart_budget *ret)
{
    int per_host[INV_MAX_HOSTS] = { 0 }, nhosts = 0, most = 0;
    for (int i = 0; i < j->ncts; i++) {
        int h = j->cts[i].host;
        if (h < 0 || h >= INV_MAX_HOSTS)
            continue;
        nhosts += per_host[h] == 0;
        if (++per_host[h] > most)
            most = per_host[h];
    }
    int parallel = inv->parallel > 0 ? inv->parallel : 1;
    stopstart_budget_of(start, j->grace_s, inv->exec_timeout_s, (nhosts + parallel - 1) / parallel, most, ret);
}

/* The agent's words for a container that did not succeed, and what to do, into buf. */
static void stopstart_why(const struct deploy *d, int i, bool start, enum stopstart_outcome o,
                          const char *said, double limit, char *buf, size_t sz)
{
    const char *verb = start ? "start" : "stop";
    const struct inv_ct *ct = &d->job->cts[i];
    switch (o) {
    case SS_NO_ANSWER:
        snprintf(buf, sz, "no answer within %.0f s (the agent may still be %s the gang): look with "
                 "`drover status --job %s`, then run `drover %s --job %s` again", limit,
                 start ? "starting" : "stopping", d->job->name, verb, d->job->name);
        return;
    case SS_INTERRUPTED:
        snprintf(buf, sz, "interrupted (Ctrl-C) before it answered; the agent goes on with the %s "
                 "on its own: look with `drover status --job %s`", verb, d->job->name);
        return;
    case SS_UNREACHABLE:
        snprintf(buf, sz, "host unreachable, nothing asked there: once it answers, run `drover %s "
                 "--job %s` again", verb, d->job->name);
        return;
    case SS_CT_STOPPED:
        stopstart_ct_stopped_hint(start, d->job->name, ct->vmid, d->inv->hosts[ct->host].name, said,
                                  buf, sz);
        return;
    case SS_FAILED:
        stopstart_failed_hint(start, d->job->name, ct->label, said, buf, sz);
        return;
    default:
        buf[0] = '\0';
    }
}

bool stopstart_lease_said(const char *said, const char *then, char *buf, size_t sz)
{
    const char *e = strstr(said, "error: "); /* the agent's logger prefix: "drover: error: " */
    if (e && e - said < 24)
        said = e + 7;
    if (!objsync_said_disk_full(said)) {
        snprintf(buf, sz, "%s", said);
        return false;
    }
    if (strstr(said, "(the container's disk is full)")) /* the agent said it already */
        snprintf(buf, sz, "%s: free space there, then %s", said, then);
    else
        snprintf(buf, sz, "%s (the container's disk is full: free space there, then %s)", said, then);
    return true;
}

void stopstart_no_lease_hint(const char *job, const char *said, char *buf, size_t sz)
{
    char then[120], words[800];
    snprintf(then, sizeof then, "run `drover start --job %.64s`", job);
    if (!stopstart_lease_said(said, then, words, sizeof words))
        snprintf(buf, sz, "no deploy lease here, so nothing was started anywhere (the agent: %s): "
                 "once `drover-agent lease take` works there, run `drover start --job %.64s` again",
                 words, job);
    else
        snprintf(buf, sz, "no deploy lease here, so nothing was started anywhere: %s", words);
}

void stopstart_ct_stopped_hint(bool start, const char *job, int vmid, const char *host,
                               const char *said, char *buf, size_t sz)
{
    char how[200];
    if (vmid >= 0)
        snprintf(how, sizeof how, "start the container (`pct start %d` on %.64s)", vmid, host);
    else
        snprintf(how, sizeof how, "start the container");
    if (start)
        snprintf(buf, sz, "the container is not running (pct: %.599s): %s, then run `drover start "
                 "--job %.64s` again", said && said[0] ? said : "-", how, job);
    else
        snprintf(buf, sz, "the container is not running (pct: %.599s): its gang does not run now, but "
                 "its agent still has the job started and starts the gang again when the container "
                 "starts: %s, then run `drover stop --job %.64s` again", said && said[0] ? said : "-",
                 how, job);
}

void stopstart_wedged_hint(bool start, const char *job, double waited, char *buf, size_t sz)
{
    char how[700];
    snprintf(buf, sz, "its drover-agent daemon sent nothing for %.0f s to the status asked with the deploy lease: "
             "it is stopped (SIGSTOP) or wedged, so the %s was not asked there (it would only have waited "
             "again); %s; then run `drover %s --job %.64s` again", waited, start ? "start" : "stop",
             agent_wedged_how(job, AGENT_DEFAULT_PIDFILE, how, sizeof how), start ? "start" : "stop", job);
}

void stopstart_failed_hint(bool start, const char *job, const char *ct_label, const char *said,
                           char *buf, size_t sz)
{
    const char *verb = start ? "start" : "stop";
    if (said && strstr(said, AGENT_NO_JOB)) /* "no job 'J' on this agent" */
        snprintf(buf, sz, "job '%.64s' was never deployed in %.64s (the agent: %s): deploy it there "
                 "first with `drover deploy DIR --job %.64s`, or fix the job's containers in the "
                 "inventory", job, ct_label, said, job);
    else if (said && !strncmp(said, "no container ", 13)) /* pct_ct_problem's -ENODEV words */
        snprintf(buf, sz, "%s", said);
    else
        snprintf(buf, sz, "drover-agent %s --job %.64s failed: %s; see `drover logs --job %.64s` and "
                 "the agent's own log in %.64s, `drover logs --job %.64s --agent`", verb, job,
                 said && said[0] ? said : "no reason given", job, ct_label, job);
}

/* `drover-agent stop --job J`, or `start --job J --rdzv TOK`, in every container that skip
 * (NULL: none) does not leave out, at once, one stream each, at most limit seconds
 * (agent_fan_run).  Fills o[], said[] (the agent's ok line, or its last stderr line) and took[]
 * of the containers asked; those skipped are left as they were. */
static void stopstart_fan(struct deploy *d, bool start, const char *tok, const bool *skip,
                          double limit, enum stopstart_outcome o[], char said[][STOPSTART_SAID_MAX],
                          double took[])
{
    const struct inv_job *j = d->job;
    struct agent_argv a;
    agent_argv_init(&a);
    if (start)
        agent_argv_start(&a, j->name, tok);
    else
        agent_argv_stop(&a, j->name);
    struct agent_fan_ct c[INV_MAX_CTS];
    (void)agent_fan_run(d, agent_argv_end(&a) == 0 ? a.argv : NULL, skip, limit, c, NULL);
    for (int i = 0; i < j->ncts; i++) {
        if (skip && skip[i])
            continue;
        took[i] = c[i].took;
        if (!c[i].asked) {
            o[i] = SS_UNREACHABLE;
            snprintf(said[i], sizeof said[i], "%s", c[i].err);
            continue;
        }
        snprintf(said[i], sizeof said[i], "%s", c[i].ok);
        if (!c[i].ended) { /* no answer in time: the agent goes on with the request on its own */
            o[i] = deploy_interrupted ? SS_INTERRUPTED : stopstart_judge(start, true, NULL, false, false);
            continue;
        }
        char why[CONN_STREAM_ERR_MAX + 200];
        int pr = said[i][0] ? 0 : pct_ct_problem(j->cts[i].vmid, c[i].err, why, sizeof why);
        o[i] = stopstart_judge(start, true, said[i][0] ? said[i] : NULL, !c[i].lost, pr == -EHOSTDOWN);
        if (!said[i][0]) /* a vmid of no container: pct's words as status says them */
            (void)str_copy(said[i], sizeof said[i], c[i].lost ? "connection lost" : pr == -ENODEV ? why : c[i].err);
        (void)text_escape_inplace(said[i], sizeof said[i]);
        /* a stop of a gang the lease's status already had stopped changed nothing there */
        if (!start && o[i] == SS_DONE && d->pre[i] == 1 && d->pre_js[i].state == GANG_STOPPED)
            o[i] = SS_ALREADY;
    }
}

/* A start's first step where the job's gang of several containers runs in part (part[i]:
 * stopstart_split_gang): stop it there, so that it starts with the others as one rendezvous
 * generation.  Says so on stderr, naming where it runs and where not (late: found by the start's
 * answers, the others already started: it is started again after the stop).  Where the stop was not
 * confirmed, o[], said[] and took[] get the stop's outcome and failed[i] is set.  Returns
 * whether it was confirmed everywhere in part. */
enum stop_part_why { STOP_PART_SPLIT, STOP_PART_LATE, STOP_PART_GENERATIONS };

static bool stopstart_stop_part(struct deploy *d, const bool part[], enum stop_part_why whyp, double limit,
                                enum stopstart_outcome o[], char said[][STOPSTART_SAID_MAX],
                                double took[], bool failed[])
{
    const struct inv_job *j = d->job;
    char runs[512] = "", down[512] = "";
    size_t r = 0, w = 0;
    bool skip[INV_MAX_CTS];
    for (int i = 0; i < j->ncts; i++) {
        skip[i] = !part[i];
        if (part[i] && r < sizeof runs)
            r +=
                (size_t)snprintf(runs + r, sizeof runs - r, "%s%s", r ? ", " : "", j->cts[i].label);
        else if (!part[i] && w < sizeof down)
            w +=
                (size_t)snprintf(down + w, sizeof down - w, "%s%s", w ? ", " : "", j->cts[i].label);
    }
    if (whyp == STOP_PART_GENERATIONS)
        fprintf(
            stderr,
            "start: job '%s' runs in %s, but not as one rendezvous generation (its agents name "
            "different rdzv tokens): its ranks cannot form one gang, so it is stopped everywhere "
            "first, then started again as one generation (the stop: at most %.0f s more)\n",
            j->name, runs, limit);
    else if (whyp == STOP_PART_LATE)
        fprintf(
            stderr,
            "start: job '%s' was already running in %s, as another rendezvous generation "
            "than %s just started as: it cannot form a gang with them, so it is stopped there and "
            "started again as theirs (at most %.0f s more)\n",
            j->name, runs, down, 2 * limit + 30);
    else
        fprintf(
            stderr,
            "start: job '%s' runs in %s but not in %s: its ranks there run as another "
            "rendezvous generation and cannot form a gang with the ranks a start starts, so it is "
            "stopped there first, then started with the others as one generation (the stop: at "
            "most %.0f s more)\n",
            j->name, runs, down, limit);
    enum stopstart_outcome so[INV_MAX_CTS];
    static char ssaid[INV_MAX_CTS][STOPSTART_SAID_MAX];
    double stook[INV_MAX_CTS];
    stopstart_fan(d, false, NULL, skip, limit, so, ssaid, stook);
    bool all = true;
    for (int i = 0; i < j->ncts; i++) {
        if (!part[i] || so[i] == SS_DONE || so[i] == SS_ALREADY)
            continue;
        all = false;
        failed[i] = true;
        o[i] = so[i];
        took[i] = stook[i];
        (void)str_copy(said[i], sizeof said[i], ssaid[i]);
    }
    return all;
}

/* A start runs the job's current release (id) whatever its verdict: one that failed probation
 * and stayed current (a first deploy with no good release to go back to) used to be started
 * again with no word.  Said once, before anything is started, from this controller's history
 * (an unreadable one: nothing said, the start goes on).  The caller leaves out a job that runs
 * everywhere already (nothing starts). */
static void start_warn_failed(struct deploy *d, const char *id, const struct job_status *js, const bool *found)
{
    if (!id || !id[0])
        return;
    struct history_entry *hh = NULL;
    size_t nhh = 0;
    char warn[1400], sid[RELEASE_SHORT_LEN + 1];
    bool said = state_history_read(d->inv->state_dir, d->job->name, &hh, &nhh, NULL) >= 0 &&
                pastfail_start_warning(hh, nhh, d->job->name, id, warn, sizeof warn);
    free(hh);
    if (said) {
        log_warn("%s", warn);
        return;
    }
    /* This controller's history knows no failure, but an agent marked the release bad: its
     * agent stopped it while it ran as the promoted release (non-finite loss, an exit not
     * retried), with no drover there to record it.  Started anyway, said. */
    for (int i = 0; i < d->job->ncts; i++)
        for (int k = 0; found[i] && k < js[i].nbad; k++)
            if (!strcmp(js[i].bad[k], id)) {
                log_warn("start: job '%s' runs release %s, which its agent in %s marked bad (a failed "
                         "probation, or a stop while it ran promoted for a failure not retried: "
                         "`drover history --job %s` says when and why); starting it anyway (drover "
                         "rollback --job %s goes to an earlier good release, drover deploy DIR --job "
                         "%s deploys a fixed one)", d->job->name, ui_short(id, sid), d->job->cts[i].label,
                         d->job->name, d->job->name, d->job->name);
                return;
            }
}

/* `start --dry-run`: the same warning as the start, from each agent's status (read only: no
 * lock, no lease), the release and "runs everywhere already" taken as the start takes them
 * from the status that comes with its lease.  It printed no warning: the dry run read nothing. */
static void start_dry_run_warn(struct deploy *d)
{
    const struct inv_job *j = d->job;
    struct job_status *js = calloc((size_t)j->ncts, sizeof *js);
    bool found[INV_MAX_CTS] = { false };
    if (!js || survey_job_status(d, NULL, js, found) < 0) {
        free(js);
        log_warn("start (dry run): out of memory reading the agents' status: whether the release "
                 "it would start failed probation was not checked");
        return;
    }
    const char *id = NULL;
    bool all_run = true;
    int unread = 0;
    for (int i = 0; i < j->ncts; i++) {
        if (found[i] && js[i].current[0] && !id)
            id = js[i].current;
        all_run = all_run && found[i] && stopstart_gang_runs(&js[i]);
        unread += !found[i];
    }
    if (unread == j->ncts)
        log_warn("start (dry run): no agent of job '%s' named the release it runs (unreachable, or "
                 "the job unknown there): whether it failed probation was not checked", j->name);
    else if (!all_run)
        start_warn_failed(d, id, js, found);
    free(js);
}

int deploy_stop_start(struct fleet *f, const char *job, bool start, bool dry_run)
{
    const char *verb = start ? "start" : "stop";
    struct deploy d;
    int ret = deploy_init(&d, f, job, false);
    if (ret)
        return ret;
    ret = EXIT_FAIL;
    int lock = -1;
    if (dry_run) {
        /* a start's dry run reads each agent's status (no lock, no lease: nothing changes) for
         * the warning the start gives before anything starts; a stop's contacts nothing */
        printf("%s of job '%s' (dry run, %s): would take the job's lock and deploy "
               "lease, then run `drover-agent %s --job %s` in %d %s at once:", verb,
               d.job->name, start ? "nothing changed" : "nothing contacted", verb, d.job->name, d.job->ncts,
               text_plural(d.job->ncts, "container", "containers"));
        for (int i = 0; i < d.job->ncts; i++)
            printf(" %s", d.job->cts[i].label);
        printf("\n");
        if (start)
            start_dry_run_warn(&d);
        ret = EXIT_OK;
        goto out;
    }
    /* the worst case, said before the first step: the number the steps below run under (the
     * agents' answers used to be announced alone, as "deadline", without the lease taken before
     * them and the record and lease given back after) */
    struct stopstart_budget b;
    stopstart_job_budget(d.inv, d.job, start, &b);
    fprintf(stderr, "%s: job '%s': drover-agent %s in %d %s at once, under the job's deploy "
            "lease: at most %.0f s (lease %.0f s, the agents' answers %.0f s, history record and lease "
            "given back %.0f s)\n", verb, d.job->name, verb, d.job->ncts,
            text_plural(d.job->ncts, "container", "containers"), b.total, b.lease, b.answer,
            b.record + b.give_back);
    /* Ctrl-C while the lease is taken: given back (deploy_done); during the fan-out the agents
     * go on with what they were asked, and the summary says who had not answered */
    interrupt_handlers(on_sigint_send);
    lock = deploy_lock(&d, NULL);
    if (lock < 0) {
        ret = f->key_refused ? EXIT_HOSTKEY : EXIT_FAIL; /* said: another drover, or the state dir */
        goto out;
    }
    if (deploy_interrupted) {
        log_error("%s of job '%s' interrupted before anything was asked: nothing changed", verb, d.job->name);
        goto out;
    }
    interrupt_handlers(on_sigint);
    /* the release the job runs and its good release, for the history record: from the status
     * documents that came with the lease (the first container that names them) */
    for (int i = 0; i < d.job->ncts; i++)
        if (d.pre[i] == 1 && d.pre_js[i].current[0] && !d.id[0]) {
            (void)str_copy(d.id, sizeof d.id, d.pre_js[i].current);
            (void)str_copy(d.good, sizeof d.good, d.pre_js[i].good);
        }
    ui_short(d.id, d.sid);
    (void)str_copy(d.name, sizeof d.name, verb);
    double limit = b.answer;
    enum stopstart_outcome o[INV_MAX_CTS];
    static char said[INV_MAX_CTS][STOPSTART_SAID_MAX];
    double took[INV_MAX_CTS];
    char tok[17] = "";
    if (start)
        new_rdzv(tok); /* one generation for every container the start asks, in every round */
    /* A gang of several containers that runs in part (a container restarted, a stop that did not
     * reach them all) must come up as one generation: the part that runs is stopped first, as
     * the switch does, then started with the others (it was answered "already running" and kept
     * its old generation: the gang never formed).  From the status that came with the lease;
     * where that did not tell, from the start's answers below. */
    bool runs[INV_MAX_CTS] = { false }, down[INV_MAX_CTS] = { false }, part[INV_MAX_CTS] = { false },
                                               stop_failed[INV_MAX_CTS] = { false };
    for (int i = 0; i < d.job->ncts; i++) {
        runs[i] = d.pre[i] == 1 && stopstart_gang_runs(&d.pre_js[i]);
        down[i] = d.pre[i] == 1 && !runs[i];
    }
    /* A start runs the job's current release whatever its verdict: one that failed probation
     * and stayed current (a first deploy with no good release to go back to) used to be
     * started again with no word.  Said once, before anything is started (not where it runs
     * everywhere already: nothing starts), from this controller's history (an unreadable one:
     * nothing said, the start goes on) */
    bool all_run = true;
    for (int i = 0; i < d.job->ncts; i++)
        all_run = all_run && runs[i];
    bool pre_found[INV_MAX_CTS];
    for (int i = 0; i < d.job->ncts; i++)
        pre_found[i] = d.pre[i] == 1;
    if (start && !all_run)
        start_warn_failed(&d, d.id, d.pre_js, pre_found);
    /* A container whose agent could not take the lease (its disk full: the lease file cannot be
     * written) would run a gang no deploy or stop of another operator is kept from; and the gang
     * is one generation in all its containers, so a start elsewhere alone never forms: nothing
     * is started anywhere (it went on there without the lease, as a deploy does) */
    int no_lease = -1;
    for (int i = 0; start && i < d.job->ncts; i++)
        if (d.lease_failed[i][0] && no_lease < 0)
            no_lease = i;
    int npart = start && no_lease < 0 ? stopstart_split_gang(runs, down, d.job->ncts, part) : 0;
    enum stop_part_why whyp = STOP_PART_SPLIT;
    if (start && no_lease < 0 && !npart) {
        /* it runs everywhere, but as different generations (a switch's abort restarted one
         * container's gang and another's agent restarted its own, each with a token of its own):
         * "already running" everywhere would leave it looping on exit 8 for ever */
        const struct job_status *pjs[INV_MAX_CTS];
        for (int i = 0; i < d.job->ncts; i++)
            pjs[i] = d.pre[i] == 1 ? &d.pre_js[i] : NULL;
        npart = stopstart_split_generation(pjs, d.job->ncts, part);
        whyp = STOP_PART_GENERATIONS;
    }
    bool held = no_lease >= 0 ||
                (npart && !stopstart_stop_part(&d, part, whyp, b.answer - 30, o, said, took, stop_failed));
    if (no_lease >= 0) {
        for (int i = 0; i < d.job->ncts; i++) {
            o[i] = d.lease_failed[i][0] ? SS_FAILED : SS_HELD_BACK;
            (void)str_copy(said[i], sizeof said[i], d.lease_failed[i]);
            took[i] = -1;
        }
    } else if (held) { /* it runs on where the stop failed: a start elsewhere would split it again */
        for (int i = 0; i < d.job->ncts; i++)
            if (!stop_failed[i]) {
                o[i] = SS_HELD_BACK;
                said[i][0] = '\0';
                took[i] = -1;
            }
    } else {
        /* a daemon that sent nothing to the lease's status would only be waited for again */
        bool wedged[INV_MAX_CTS] = { false };
        for (int i = 0; i < d.job->ncts; i++)
            if ((wedged[i] = d.lease_wedged_s[i] > 0)) {
                o[i] = SS_FAILED;
                stopstart_wedged_hint(start, d.job->name, d.lease_wedged_s[i], said[i], sizeof said[i]);
                took[i] = -1;
            }
        stopstart_fan(&d, start, tok, wedged, limit, o, said, took);
    }
    if (start && !held && !npart) {
        /* the lease's status did not say (an older agent, a gang started since): answered
         * "already running" where others started as the new generation */
        for (int i = 0; i < d.job->ncts; i++) {
            runs[i] = o[i] == SS_ALREADY;
            down[i] = o[i] == SS_DONE;
        }
        npart = stopstart_split_gang(runs, down, d.job->ncts, part);
        if (npart &&
            stopstart_stop_part(&d, part, STOP_PART_LATE, b.answer - 30, o, said, took, stop_failed)) {
            bool skip[INV_MAX_CTS];
            for (int i = 0; i < d.job->ncts; i++)
                skip[i] = !part[i];
            stopstart_fan(&d, true, tok, skip, limit, o, said, took);
        }
    }
    for (int i = 0; i < d.job->ncts; i++)
        if (npart && part[i] && o[i] == SS_DONE && !stop_failed[i])
            o[i] = SS_RESTARTED;
    if (stopstart_never_deployed(o, said, d.job->ncts)) {
        /* said once (a table line and an error per container repeated it), and no history row:
         * nothing changed, and there is no release to record it under ("fresh - - start-failed") */
        char where[1024] = "";
        for (int i = 0, off = 0; i < d.job->ncts && off < (int)sizeof where; i++)
            off += snprintf(where + off, sizeof where - (size_t)off, "%s%s", i ? ", " : "",
                            d.job->cts[i].label);
        log_error(
            "%s of job '%s' refused, nothing changed: job '%s' was never deployed in any of its "
            "containers (%s: their agents know no job '%s'): deploy it first with `drover deploy "
            "DIR --job %s`",
            verb, d.job->name, d.job->name, where, d.job->name, d.job->name);
        ret = EXIT_FAIL;
        goto out;
    }
    int nok = 0;
    char summary[600] = "";
    size_t off = 0;
    for (int i = 0; i < d.job->ncts; i++) {
        const struct inv_ct *ct = &d.job->cts[i];
        bool ok = stopstart_is_ok(start, o[i]);
        nok += ok;
        char why[1200] = "";
        /* a stop before the start that failed: said as a stop's failure */
        stopstart_why(&d, i, start && !stop_failed[i], o[i], said[i],
                      stop_failed[i] ? limit - 30 : limit, why, sizeof why);
        if (no_lease >= 0 && o[i] == SS_FAILED)
            stopstart_no_lease_hint(d.job->name, said[i], why, sizeof why);
        else if (o[i] == SS_FAILED && d.lease_wedged_s[i] > 0 && !strncmp(said[i], "its drover-agent daemon", 23))
            (void)str_copy(why, sizeof why, said[i]); /* stopstart_wedged_hint's, whole */
        else if (no_lease >= 0 && o[i] == SS_HELD_BACK)
            snprintf(why, sizeof why,
                     "nothing was started anywhere: the job's deploy lease could not be taken in "
                     "%s (its row says why), and a gang of several containers starts as one "
                     "generation; once it can be, run `drover start --job %s`",
                     d.job->cts[no_lease].label, d.job->name);
        else if (stop_failed[i]) {
            size_t w = strlen(why);
            snprintf(why + w, sizeof why - w,
                     " (stopped first, so that the gang starts as one "
                     "generation; once it is, run `drover start --job %s`)",
                     d.job->name);
        } else if (o[i] == SS_HELD_BACK)
            snprintf(
                why, sizeof why,
                "%snothing was started anywhere: a gang of several containers "
                "starts as one generation, and its running part could not be stopped first (its "
                "row says why); once it can be, run `drover stop --job %s`, then `drover start "
                "--job %s`",
                part[i] ? "its gang was stopped, to start with the others as one "
                          "generation; "
                        : "",
                d.job->name, d.job->name);
        double grace;
        if (ok && took[i] >= 0)
            printf("%-12s %-17s %.1f s\n", ct->label, stopstart_word(start, o[i]), took[i]);
        else
            printf("%-12s %-17s %s\n", ct->label, stopstart_word(start, o[i]), why);
        if (!ok)
            log_error("%s: job '%s' not %s: %s", ct->label, d.job->name, start ? "started" : "stopped", why);
        if (!start && ok && agent_stop_was_sigkilled(said[i], &grace))
            log_warn("%s", deploy_sigkilled_message(why, sizeof why, ct->label, d.job->name, grace));
        if (off < sizeof summary)
            off += (size_t)snprintf(summary + off, sizeof summary - off, "%s%s %s", off ? ", " : "",
                                    ct->label, stopstart_word(start, o[i]));
    }
    ret = stopstart_exit(start, o, d.job->ncts, f->key_refused);
    char reason[700];
    snprintf(reason, sizeof reason, "%s by the operator: %s", start ? "started" : "stopped", summary);
    const char *result = stopstart_history_result(start, o, d.job->ncts, ret);
    if (result) {
        d.lease_with_record = true; /* the record is the last call: it gives the lease back there */
        history_record(&d, result, HISTORY_RC_NONE, reason, -1);
    }
    int nalready = 0, nrestarted = 0;
    for (int i = 0; i < d.job->ncts; i++) {
        nalready += o[i] == SS_ALREADY;
        nrestarted += o[i] == SS_RESTARTED;
    }
    if (ret == EXIT_OK && start && !result)
        printf("job '%s' was already running in %s%d %s: nothing started, nothing recorded in the "
               "history\n", d.job->name, nok > 1 ? "all " : "", nok, text_plural(nok, "container", "containers"));
    else if (ret == EXIT_OK && start && nrestarted)
        printf("job '%s' runs in %d %s as one generation (%d started, %d restarted: its gang ran "
               "there as another generation, which never forms a gang with the others): `drover "
               "status` shows its ranks\n",
               d.job->name, nok, text_plural(nok, "container", "containers"),
               nok - nrestarted - nalready, nrestarted);
    else if (ret == EXIT_OK && start)
        printf("job '%s' runs in %d %s (%d started, %d already running): `drover status` "
               "shows its ranks\n", d.job->name, nok, text_plural(nok, "container", "containers"), nok - nalready,
               nalready);
    else if (ret == EXIT_OK && !result)
        printf("job '%s' was already stopped in %s%d %s: nothing stopped, nothing recorded in the "
               "history\n", d.job->name, nok > 1 ? "all " : "", nok, text_plural(nok, "container", "containers"));
    else if (ret == EXIT_OK)
        printf("job '%s' stopped in %d %s; it stays stopped until `drover start --job %s`\n",
               d.job->name, nok, text_plural(nok, "container", "containers"), d.job->name);
    else
        fprintf(stderr, "%s of job '%s': %d of %d %s %s; the others are named above\n", verb,
                d.job->name, nok, d.job->ncts, text_plural(d.job->ncts, "container", "containers"), start ? "started" : "stopped");
out:
    interrupt_handlers(NULL);
    exec_interrupted = 0; /* a Ctrl-C above: still give the lease back */
    send_interrupted = 0;
    deploy_done(&d, lock);
    return ret;
}
