/* controller/deploy/rebaseline.c: `drover rebaseline --job J`: measure the job's running good
 * release again, as a probation measures a candidate, and make those samples its baseline.
 *
 * Why: the baseline is the samples of the last promotion's probation, and nothing else replaces
 * it.  One measured on a lucky-quiet host (or before a driver update, a data change, a slower
 * neighbour) makes every later release look like a regression, and each is reverted; before
 * this, only promoting a release by hand reset it.  Nothing is switched or stopped here: the
 * gang that runs is watched, its warm samples judged on health alone (no comparison), and on a
 * pass they become the baseline, kept by the agents (promote --samples of the release already
 * good: the agent's promote is idempotent) and cached in state_dir.
 */
#include "controller/deploy/deploy_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/text.h"
#include "common/util.h"
#include "controller/cmd.h"
#include "controller/deploy/deploy.h"
#include "controller/deploy/probation.h"
#include "controller/deploy/state.h"
#include "controller/transport/send.h"

/* The rank of job d that froze, by the rule the probation's verdict names a frozen rank
 * (probation_find_silent(): it ran, then sent no heartbeat for PROBATION_QUIET_S or more while
 * it still runs, the oldest heartbeat of the gang) over the survey's documents: the global rank,
 * its container's index in *ret_ct, its heartbeat's age and step in *ret_age_s and *ret_step;
 * -1 none, and nothing written.  A gang behind a frozen rank steps no more (its peers wait in
 * their next collective): its measurement would end as silent after healthy_deadline, or worse,
 * catch the last samples before it froze. */
static int rebaseline_find_silent_rank(const struct deploy *d, int *ret_ct, double *ret_age_s,
                                       long long *ret_step)
{
    struct rank_silence r[INV_MAX_CTS * STATUS_MAX_RANKS];
    const struct rank_status *of[INV_MAX_CTS * STATUS_MAX_RANKS];
    int ct[INV_MAX_CTS * STATUS_MAX_RANKS], n = 0, next;
    for (int i = 0; i < d->job->ncts; i++) {
        const struct job_status *js = &d->sv_js[i];
        for (int k = 0; d->sv_found[i] && k < js->nranks && k < STATUS_MAX_RANKS; k++) {
            probation_rank_silence(&js->ranks[k], d->good, &r[n]);
            of[n] = &js->ranks[k];
            ct[n++] = i;
        }
    }
    int f = probation_find_silent(r, n, &next);
    if (f < 0)
        return -1;
    *ret_ct = ct[f];
    *ret_age_s = r[f].hb_age_s;
    *ret_step = of[f]->hb.step;
    return of[f]->rank;
}

/* Why job d runs nothing a rebaseline could measure ("" when it can be measured): it must run
 * its good release with its good spec in every container, every rank training, none frozen. */
static void unmeasurable_why(const struct deploy *d, char *buf, size_t sz)
{
    char sid[RELEASE_SHORT_LEN + 1], gsid[RELEASE_SHORT_LEN + 1];
    buf[0] = '\0';
    if (!d->good[0]) {
        snprintf(buf, sz, "it has no good release yet (its first deploy measures the baseline)");
        return;
    }
    for (int i = 0; i < d->job->ncts; i++) {
        const struct job_status *js = &d->sv_js[i];
        const char *label = d->job->cts[i].label;
        if (!d->sv_found[i]) {
            snprintf(buf, sz, "its agent on %s does not know the job", label);
            return;
        }
        if (strcmp(js->current, d->good) != 0) {
            snprintf(buf, sz, "%s runs %s, not its good release %s (a deploy or rollback on "
                     "probation, or a revert not finished)", label,
                     js->current[0] ? ui_short(js->current, sid) : "nothing", ui_short(d->good, gsid));
            return;
        }
        if (status_runs_unpromoted_spec(js)) {
            snprintf(buf, sz, "%s runs its good release with a job spec that was not promoted", label);
            return;
        }
        if (js->state != GANG_RUNNING) {
            snprintf(buf, sz, "its gang on %s is %s, not running (`drover status --job %s`)", label,
                     status_job_state_name(js), d->job->name);
            return;
        }
    }
    int ct, rank;
    double age;
    long long step;
    if ((rank = rebaseline_find_silent_rank(d, &ct, &age, &step)) >= 0)
        snprintf(buf, sz, "rank %d on %s has sent no heartbeat for %.0f s (last step %lld) while its gang "
                 "runs: it is frozen (hung in a collective or its data loader?), and the gang behind it "
                 "measures nothing; see why with `drover logs --job %s`, restart the job (`drover stop "
                 "--job %s`, then `drover start --job %s`), and rebaseline once every rank steps again",
                 rank, d->job->cts[ct].label, age, step, d->job->name, d->job->name, d->job->name);
}

int deploy_rebaseline(struct fleet *f, const char *job)
{
    struct deploy d;
    int ret = deploy_init(&d, f, job, false);
    if (ret)
        return ret;
    ret = EXIT_FAIL;
    char err[2048], sid[RELEASE_SHORT_LEN + 1];
    interrupt_handlers(on_sigint_send);
    int lock = deploy_lock(&d, NULL);
    if (lock < 0)
        goto out;
    bool all_current;
    int sr = survey(&d, false, &all_current, err, sizeof err);
    if (deploy_interrupted) {
        log_error("rebaseline of job '%s' interrupted by the operator: the baseline is unchanged",
                  d.job->name);
        goto out;
    }
    if (sr < 0) {
        ret = f->key_refused ? EXIT_HOSTKEY : EXIT_FAIL;
        goto out;
    }
    char why[800];
    unmeasurable_why(&d, why, sizeof why);
    if (why[0]) {
        log_error("rebaseline of job '%s' refused, the baseline is unchanged: %s", d.job->name, why);
        goto out;
    }
    (void)str_copy(d.id, sizeof d.id, d.good);
    ui_short(d.id, d.sid);
    (void)str_copy(d.name, sizeof d.name, "rebaseline");
    /* promote passes back the pair that runs (promote --spec-digest): the agent refuses if
     * another pair runs by the time the measurement is done */
    for (int i = 0; i < d.job->ncts; i++)
        (void)str_copy(d.want_spec[i], sizeof d.want_spec[i], d.sv_js[i].spec_digest);
    const struct inv_policy *pol = &d.job->policy;
    int nproc = d.sv_js[0].nproc > 0 && d.sv_js[0].nproc <= STATUS_MAX_RANKS ? d.sv_js[0].nproc
                                                                             : d.job->nproc_per_node;
    struct sample_set *old = load_base_samples(&d);
    char was[200] = "there was none";
    if (old)
        snprintf(was, sizeof was, "was %s: %d %s, median %.1f Ktok/s", ui_short(old->release, sid),
                 old->n, text_plural(old->n, "sample", "samples"), probation_median(old->ktok_s, old->n));
    d.baseline = old ? probation_median(old->ktok_s, old->n) : -1;
    free(old);
    fprintf(stderr, "rebaseline: measuring the good release of job '%s', %s, as it runs (%d %s; nothing "
            "is switched): its warm samples over %.0f s become the baseline (%s)\n", d.job->name,
            d.sid, d.job->ncts * nproc, text_plural(d.job->ncts * nproc, "rank", "ranks"),
            pol->min_healthy_time_s, was);
    struct probation *p;
    if (probation_new(pol, d.job->name, d.id, d.job->ncts, d.labels, nproc, -1, false, time_mono(), &p) < 0)
        goto out;
    probation_unjudged(p, "this measures the baseline"); /* its progress said "(no baseline)" */
    interrupt_handlers(on_sigint);
    enum probation_verdict v = watch_probation(&d, p, "rebaseline");
    if (d.lease_lost) {
        probation_free(p);
        ret = taken_over(&d, "the rebaseline's measurement");
        goto out;
    }
    if (deploy_interrupted && v == PROBATION_PENDING) {
        probation_free(p);
        log_error("rebaseline of job '%s' interrupted by the operator: the baseline is unchanged "
                  "(%s)", d.job->name, was);
        goto out;
    }
    if (v != PROBATION_PASS) {
        /* the agents judge a promoted release's health on their own (restart, or stop it): this
         * only says what the measurement saw */
        log_error("rebaseline of job '%s' failed, the baseline is unchanged (%s): its good release "
                  "%s measured %s: %s", d.job->name, was, d.sid, probation_verdict_name(v), probation_reason(p));
        probation_free(p);
        goto out;
    }
    double k = probation_ktok_s(p);
    struct sample_set *ss = pass_samples(&d, p);
    int excluded = probation_warmup_excluded(p);
    probation_free(p);
    if (!ss || ss->n == 0 || k <= 0) {
        log_error("rebaseline of job '%s': its good release %s passed on health but gave no "
                  "throughput samples (does the worker report tokens?): the baseline is unchanged",
                  d.job->name, d.sid);
        free(ss);
        goto out;
    }
    if (promote_all(&d, k, ss) < 0) {
        log_error("rebaseline of job '%s': the agents could not keep the new samples (named "
                  "above); the baseline is unchanged", d.job->name);
        free(ss);
        goto out;
    }
    if (state_baseline_set(d.inv->state_dir, d.key, d.id, k) < 0 ||
        state_samples_set(d.inv->state_dir, d.key, false, ss) < 0)
        log_warn("cannot cache the baseline in '%s' (the agents keep it; the next deploy reads it "
                 "from them)", d.inv->state_dir);
    char reason[400], change[48] = "";
    if (d.baseline > 0)
        snprintf(change, sizeof change, ", %+.1f%%", (k / d.baseline - 1) * 100);
    snprintf(reason, sizeof reason, "baseline measured again: %d %s, median %.1f Ktok/s (%s%s; %d "
             "warmup %s excluded)", ss->n, text_plural(ss->n, "sample", "samples"), k, was, change,
             excluded, text_plural(excluded, "sample", "samples"));
    printf("rebaselined job '%s' on %s: %s\n", d.job->name, d.sid, reason);
    history_record(&d, "rebaselined", HISTORY_RC_NONE, reason, k);
    free(ss);
    ret = EXIT_OK;
out:
    interrupt_handlers(NULL);
    exec_interrupted = 0;
    send_interrupted = 0;
    deploy_done(&d, lock);
    return ret;
}
