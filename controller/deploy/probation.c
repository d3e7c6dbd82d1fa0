/* controller/deploy/probation.c: probation verdicts over status documents (see probation.h).  Pure:
 * no I/O, no clocks of its own, no logging; the deploy engine feeds it and reports.
 */
#include "controller/deploy/probation.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/trainexit.h"
#include "common/util.h"

struct prank {
    bool seen;           /* a train heartbeat from the watched release */
    bool past_warmup;
    long long step;
    long long resumed_from;
    double step_t;       /* controller time the step last changed */
    double tok_s;
    bool fresh;          /* the step advanced since the last throughput sample: tok_s is new */
};

struct pct_state {
    char label[64];
    bool have;
    double t_seen;
    struct prank ranks[STATUS_MAX_RANKS];
};

struct probation {
    struct inv_policy pol;
    char job[JOB_NAME_MAX];
    char release[RELEASE_ID_LEN + 1];
    int ncts, nproc;
    double baseline, t0, t_warm;
    bool recovery;
    struct pct_state *cts;
    double samples[PROBATION_MAX_SAMPLES];
    int nsamples;
    enum probation_verdict verdict;
    double ktok;
    char reason[PROBATION_REASON_MAX];
    char note[PROBATION_REASON_MAX];
};

int probation_new(const struct inv_policy *pol, const char *job, const char *release, int ncts,
                  const char *const *labels, int nproc, double baseline_ktok_s, bool recovery,
                  double t0, struct probation **ret_p)
{
    if (ncts <= 0 || ncts > INV_MAX_CTS || nproc <= 0 || nproc > STATUS_MAX_RANKS || !release ||
        !job)
        return -EINVAL;
    struct probation *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->cts = calloc((size_t)ncts, sizeof *p->cts);
    if (!p->cts) {
        free(p);
        return -ENOMEM;
    }
    p->pol = *pol;
    if (recovery) {
        p->pol.warmup_steps = 0;
        p->pol.min_healthy_time_s = 0;
    }
    (void)str_copy(p->job, sizeof p->job, job);
    (void)str_copy(p->release, sizeof p->release, release);
    p->ncts = ncts;
    p->nproc = nproc;
    p->baseline = recovery ? 0 : baseline_ktok_s;
    p->recovery = recovery;
    p->t0 = t0;
    p->ktok = -1;
    for (int i = 0; i < ncts; i++) {
        (void)str_copy(p->cts[i].label, sizeof p->cts[i].label, labels ? labels[i] : "?");
        for (int k = 0; k < STATUS_MAX_RANKS; k++)
            p->cts[i].ranks[k].resumed_from = -1;
    }
    *ret_p = p;
    return 0;
}

void probation_free(struct probation *p)
{
    if (!p)
        return;
    free(p->cts);
    free(p);
}

static void fail(struct probation *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(struct probation *p, const char *fmt, ...)
{
    if (p->verdict != PROBATION_PENDING)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->reason, sizeof p->reason, fmt, ap);
    va_end(ap);
    p->verdict = PROBATION_FAIL;
}

static bool release_matches(const char *reported, const char *want)
{
    size_t n = strlen(reported);
    if (n == 0)
        return false;
    if (strcmp(reported, want) == 0)
        return true;
    /* A worker may report the short form of the id. */
    return n >= RELEASE_SHORT_LEN && strncmp(reported, want, n) == 0;
}

/* Ktok/s with precision that keeps small (CPU) rates readable: 96.5, 4.27, 0.812. */
static const char *ktok_str(double v, char *buf, size_t sz)
{
    snprintf(buf, sz, v >= 10 || v <= -10 ? "%.1f" : v >= 1 || v <= -1 ? "%.2f" : "%.3f", v);
    return buf;
}

double probation_median(const double *v, int n)
{
    if (n <= 0)
        return -1;
    double *c = malloc((size_t)n * sizeof *c);
    if (!c)
        return -1;
    memcpy(c, v, (size_t)n * sizeof *c);
    /* insertion sort: n is small (one sample a second over the window) */
    for (int i = 1; i < n; i++) {
        double x = c[i];
        int j = i - 1;
        while (j >= 0 && c[j] > x) {
            c[j + 1] = c[j];
            j--;
        }
        c[j + 1] = x;
    }
    double m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
    free(c);
    return m;
}

static const struct rank_status *find_rank(const struct job_status *js, int rank)
{
    for (int i = 0; i < js->nranks && i < STATUS_MAX_RANKS; i++)
        if (js->ranks[i].rank == rank)
            return &js->ranks[i];
    return NULL;
}

/* drover-train's exit codes (common/trainexit.h, the contract), to name an exit for people when
 * the worker did not say why in its last heartbeat.  Foreign workers' codes just show as numbers. */
static const char *exit_code_word(int code)
{
    const struct train_exit_info *x = code > 0 ? train_exit_info(code) : NULL;
    return x ? x->text : NULL;
}

static void describe_exit(const struct rank_status *rs, char *buf, size_t sz)
{
    const char *why = rs->has_hb && rs->hb.error[0] ? rs->hb.error : exit_code_word(rs->exit_code);
    char at[64];
    if (rs->has_hb && rs->hb.phase != HB_PHASE_INIT)
        snprintf(at, sizeof at, "at step %lld", (long long)rs->hb.step);
    else
        snprintf(at, sizeof at, "at start");
    if (rs->exit_signal > 0)
        snprintf(buf, sz, "killed by signal %d%s%s%s %s", rs->exit_signal, why ? " (" : "",
                 why ? why : "", why ? ")" : "", at);
    else
        snprintf(buf, sz, "exited with code %d%s%s%s %s", rs->exit_code, why ? " (" : "",
                 why ? why : "", why ? ")" : "", at);
}

void probation_feed(struct probation *p, int ct, const struct agent_status *st, double now)
{
    if (ct < 0 || ct >= p->ncts || p->verdict != PROBATION_PENDING)
        return;
    struct pct_state *cs = &p->cts[ct];
    const struct job_status *js = status_find_job(st, p->job);
    char sid[RELEASE_SHORT_LEN + 1], sid2[RELEASE_SHORT_LEN + 1];
    if (!js)
        return; /* not there yet: the healthy_deadline rule decides */
    cs->have = true;
    cs->t_seen = now;
    if (!p->recovery) {
        if (js->state == GANG_REVERTED || (js->current[0] && !release_matches(js->current, p->release))) {
            fail(p, "the agent on %s went back to %s by itself (%s)", cs->label,
                 release_short(js->current, "none", sid),
                 js->reason[0] ? js->reason : "no reason given");
            return;
        }
    } else if (js->current[0] && !release_matches(js->current, p->release)) {
        fail(p, "%s runs %s, not the release %s we reverted to", cs->label,
             release_short(js->current, "none", sid), release_short(p->release, "none", sid2));
        return;
    }
    if (js->state == GANG_FAILED) {
        fail(p, "the gang on %s failed: %s", cs->label, js->reason[0] ? js->reason : "no reason given");
        return;
    }
    /* activate and revert return once the gang has started: a stopped gang has ended (a worker
     * that exits 0 at once is as useless as one that crashes). */
    if (js->state == GANG_STOPPED && (!js->current[0] || release_matches(js->current, p->release))) {
        fail(p, "the gang on %s stopped: %s", cs->label, js->reason[0] ? js->reason : "no reason given");
        return;
    }
    for (int lr = 0; lr < p->nproc; lr++) {
        int rank = ct * p->nproc + lr;
        const struct rank_status *rs0 = find_rank(js, rank);
        /* Exits count only for the gang of the watched release, not the old one stopping. */
        if (rs0 && release_matches(js->release, p->release) && (rs0->exit_code >= 0 || rs0->exit_signal > 0)) {
            char what[256];
            describe_exit(rs0, what, sizeof what);
            fail(p, "rank %d on %s %s", rank, cs->label, what);
            return;
        }
    }
    if (!p->recovery && (js->restarts > 0 || js->state == GANG_BACKOFF)) {
        fail(p, "the gang on %s %s (restarts %d): %s", cs->label,
             js->state == GANG_BACKOFF ? "lost a rank and is backing off" : "restarted",
             js->restarts, js->reason[0] ? js->reason : "no reason given");
        return;
    }
    for (int lr = 0; lr < p->nproc; lr++) {
        int rank = ct * p->nproc + lr;
        const struct rank_status *rs = find_rank(js, rank);
        if (!rs)
            continue;
        if (release_matches(js->release, p->release) &&
            (strcmp(rs->state, "exited") == 0 || strcmp(rs->state, "killed") == 0)) {
            char what[256];
            describe_exit(rs, what, sizeof what);
            fail(p, "rank %d on %s %s", rank, cs->label, what);
            return;
        }
        if (!rs->has_hb || !release_matches(rs->hb.release, p->release) ||
            (js->release[0] && !release_matches(js->release, p->release)))
            continue; /* heartbeat of the old gang, or none yet */
        struct prank *pr = &cs->ranks[lr];
        const struct heartbeat *hb = &rs->hb;
        if (hb->phase != HB_PHASE_TRAIN && hb->phase != HB_PHASE_CHECKPOINT)
            continue;
        if (hb->nonfinite > 0 || (hb->phase == HB_PHASE_TRAIN && hb->has_loss && !hb->loss_finite)) {
            fail(p, "non-finite loss at step %lld on rank %d (%s)", (long long)hb->step, rank,
                 cs->label);
            return;
        }
        if (!pr->seen || hb->step != pr->step) {
            pr->fresh = pr->seen && hb->step > pr->step;
            pr->step = hb->step;
            pr->step_t = now;
        } else if (hb->phase == HB_PHASE_TRAIN && now - pr->step_t > p->pol.healthy_deadline_s) {
            fail(p, "stalled: rank %d on %s at step %lld for %.0fs while heartbeats flow (healthy_deadline %.0fs)",
                 rank, cs->label, (long long)hb->step, now - pr->step_t, p->pol.healthy_deadline_s);
            return;
        }
        if (rs->hb_age_s > p->pol.healthy_deadline_s) {
            fail(p, "silent: no heartbeat from rank %d (%s) for %.0fs in phase %s (healthy_deadline %.0fs)",
                 rank, cs->label, rs->hb_age_s, hb_phase_name(hb->phase), p->pol.healthy_deadline_s);
            return;
        }
        pr->seen = true;
        pr->resumed_from = hb->resumed_from;
        pr->tok_s = isfinite(hb->tok_s) && hb->tok_s > 0 ? hb->tok_s : 0;
        long long done = hb->step;
        if (hb->resumed_from >= 0 && hb->step >= hb->resumed_from)
            done = hb->step - hb->resumed_from;
        if (done >= p->pol.warmup_steps)
            pr->past_warmup = true;
    }
    /* Throughput sample once every rank is past warmup, and only from fresh figures: every
     * rank's step advanced since the last sample (a silent or stalled rank's last tok_s is not
     * a measurement; counting it again is how a NaN release was once promoted). */
    double sum = 0;
    for (int c = 0; c < p->ncts; c++)
        for (int lr = 0; lr < p->nproc; lr++) {
            if (!p->cts[c].ranks[lr].past_warmup || !p->cts[c].ranks[lr].fresh)
                return;
            sum += p->cts[c].ranks[lr].tok_s;
        }
    for (int c = 0; c < p->ncts; c++)
        for (int lr = 0; lr < p->nproc; lr++)
            p->cts[c].ranks[lr].fresh = false;
    if (p->t_warm == 0) {
        p->t_warm = now;
        return; /* the first sample straddles warmup */
    }
    if (p->nsamples < PROBATION_MAX_SAMPLES)
        p->samples[p->nsamples++] = sum / 1000.0;
}

enum probation_verdict probation_check(struct probation *p, double now)
{
    if (p->verdict != PROBATION_PENDING)
        return p->verdict;
    char sid[RELEASE_SHORT_LEN + 1];
    if (now - p->t0 > p->pol.healthy_deadline_s) {
        for (int c = 0; c < p->ncts; c++) {
            if (!p->cts[c].have) {
                fail(p, "no status for job '%s' from %s within healthy_deadline %.0fs", p->job,
                     p->cts[c].label, p->pol.healthy_deadline_s);
                return p->verdict;
            }
            for (int lr = 0; lr < p->nproc; lr++)
                if (!p->cts[c].ranks[lr].seen) {
                    fail(p, "no heartbeat from rank %d (%s) with release %s within healthy_deadline "
                         "%.0fs", c * p->nproc + lr, p->cts[c].label,
                         release_short(p->release, "none", sid), p->pol.healthy_deadline_s);
                    return p->verdict;
                }
        }
        /* Streams that went quiet: a container whose documents stopped coming. */
        for (int c = 0; c < p->ncts; c++)
            if (now - p->cts[c].t_seen > p->pol.healthy_deadline_s) {
                fail(p, "no status from %s for %.0fs (healthy_deadline %.0fs)", p->cts[c].label,
                     now - p->cts[c].t_seen, p->pol.healthy_deadline_s);
                return p->verdict;
            }
    }
    bool all_seen = true;
    for (int c = 0; c < p->ncts; c++)
        for (int lr = 0; lr < p->nproc; lr++)
            all_seen = all_seen && p->cts[c].ranks[lr].seen;
    if (all_seen && p->t_warm > 0 && now - p->t_warm >= p->pol.min_healthy_time_s &&
        (p->nsamples > 0 || p->recovery)) {
        double med = p->nsamples ? probation_median(p->samples, p->nsamples) : -1;
        p->ktok = med;
        if (p->baseline > 0) {
            double thr = (1 - p->pol.tolerance) * p->baseline;
            char a[32], b[32];
            if (med < thr) {
                fail(p, "throughput regression: %s Ktok/s < %.2f × %s Ktok/s baseline "
                     "(tolerance %.2f)", ktok_str(med, a, sizeof a), 1 - p->pol.tolerance,
                     ktok_str(p->baseline, b, sizeof b), p->pol.tolerance);
                return p->verdict;
            }
            snprintf(p->reason, sizeof p->reason, "%s Ktok/s >= %.2f × %s Ktok/s baseline "
                     "(median of %d samples over %.0fs after %lld warmup steps)",
                     ktok_str(med, a, sizeof a), 1 - p->pol.tolerance,
                     ktok_str(p->baseline, b, sizeof b), p->nsamples, p->pol.min_healthy_time_s,
                     (long long)p->pol.warmup_steps);
        } else if (!p->recovery) {
            char a[32];
            snprintf(p->reason, sizeof p->reason, "%s Ktok/s (median of %d samples over %.0fs "
                     "after %lld warmup steps)", ktok_str(med, a, sizeof a), p->nsamples,
                     p->pol.min_healthy_time_s, (long long)p->pol.warmup_steps);
            snprintf(p->note, sizeof p->note, "no baseline on these containers yet: throughput "
                     "rule skipped; %s Ktok/s becomes the baseline", a);
        } else {
            snprintf(p->reason, sizeof p->reason, "every rank heartbeats in phase train");
        }
        p->verdict = PROBATION_PASS;
        return p->verdict;
    }
    if (now - p->t0 > p->pol.progress_deadline_s) {
        long long low = -1;
        int low_rank = -1;
        for (int c = 0; c < p->ncts; c++)
            for (int lr = 0; lr < p->nproc; lr++) {
                const struct prank *pr = &p->cts[c].ranks[lr];
                if (!pr->past_warmup && (low_rank < 0 || pr->step < low)) {
                    low = pr->step;
                    low_rank = c * p->nproc + lr;
                }
            }
        if (low_rank >= 0)
            fail(p, "probation did not finish within progress_deadline %.0fs: rank %d is at step "
                 "%lld of %lld warmup steps", p->pol.progress_deadline_s, low_rank, low,
                 (long long)p->pol.warmup_steps);
        else
            fail(p, "probation did not finish within progress_deadline %.0fs (no throughput "
                 "samples)", p->pol.progress_deadline_s);
    }
    return p->verdict;
}

const char *probation_reason(const struct probation *p)
{
    return p->reason;
}

const char *probation_note(const struct probation *p)
{
    return p->note;
}

double probation_ktok_s(const struct probation *p)
{
    return p->ktok;
}

void probation_progress(const struct probation *p, long long *ret_step, long long *ret_resumed)
{
    long long low = -1;
    for (int c = 0; c < p->ncts; c++)
        for (int lr = 0; lr < p->nproc; lr++)
            if (p->cts[c].ranks[lr].seen && (low < 0 || p->cts[c].ranks[lr].step < low))
                low = p->cts[c].ranks[lr].step;
    *ret_step = low;
    *ret_resumed = p->cts[0].ranks[0].resumed_from;
}

void probation_describe(const struct probation *p, double now, char *buf, size_t buf_sz)
{
    int seen = 0, warm = 0, total = p->ncts * p->nproc;
    double sum = 0;
    for (int c = 0; c < p->ncts; c++)
        for (int lr = 0; lr < p->nproc; lr++) {
            seen += p->cts[c].ranks[lr].seen;
            warm += p->cts[c].ranks[lr].past_warmup;
            sum += p->cts[c].ranks[lr].tok_s;
        }
    long long step, resumed;
    probation_progress(p, &step, &resumed);
    char base[64] = "no baseline", a[32], b[32];
    if (p->baseline > 0)
        snprintf(base, sizeof base, "baseline %s", ktok_str(p->baseline, b, sizeof b));
    const char *phase = seen < total ? "waiting for heartbeats"
                        : warm < total ? "warmup"
                                       : "measuring";
    char st[32] = "-";
    if (step >= 0)
        snprintf(st, sizeof st, "%lld", step);
    snprintf(buf, buf_sz, "%4.0fs %s: %d/%d ranks heartbeating, step %s, %s Ktok/s (%s)",
             now - p->t0, phase, seen, total, st, ktok_str(sum / 1000.0, a, sizeof a), base);
}
