/* controller/top/top_model.c: the dashboard's model, first part: agent status documents ->
 * per-container snapshots with Ktok/s trends, and the states derived from them (rank, container,
 * host), the rollback target and the agent's event lines.  Rows and cells are top_rows.c's, the
 * column layout and the text frame top_render.c's.  Owns the meaning of every state
 * (docs/dashboard.md).  Must never do I/O or read a clock: `now` comes from the caller, so tests
 * and bench/top drive it with synthetic fleets.
 */
#include "controller/top/top_model.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "controller/cmd.h"
#include "controller/exitcode.h"
#include "controller/deploy/holder.h"

#include "common/util.h"

/* ------------------------------------------------------------------ states */

static const char *const state_names[TOP_STATE_COUNT] = {
    [TOP_RUNNING] = "running",   [TOP_STARTING] = "starting", [TOP_PROBATION] = STATUS_WORD_PROBATION,
    [TOP_DEGRADED] = "degraded", [TOP_STALLED] = "stalled",   [TOP_BACKOFF] = "backoff",
    [TOP_SILENT] = "silent",     [TOP_CHECKPOINTING] = "checkpointing",
    [TOP_REVERTED] = "reverted", [TOP_FAILED] = "failed",     [TOP_STOPPING] = "stopping",
    [TOP_STOPPED] = "stopped",   [TOP_UNREACHABLE] = "unreachable",
    [TOP_NO_JOB] = STATUS_STATE_NO_JOB, /* the word `drover status` says */
    [TOP_RENDEZVOUS] = STATUS_WORD_RENDEZVOUS, /* and this one */
};

const char *top_state_name(enum top_state s)
{
    return (unsigned)s < TOP_STATE_COUNT ? state_names[s] : "?";
}

int top_state_col_width(void)
{
    size_t longest = 0;
    for (int s = 0; s < TOP_STATE_COUNT; s++)
        if (state_names[s] && strlen(state_names[s]) > longest)
            longest = strlen(state_names[s]);
    return (int)longest + 1 + 4; /* the words are ASCII: bytes are columns */
}

int top_state_severity(enum top_state s)
{
    static const int sev[TOP_STATE_COUNT] = {
        [TOP_RUNNING] = 0, [TOP_STOPPED] = 1,  [TOP_NO_JOB] = 1, [TOP_PROBATION] = 2, [TOP_STOPPING] = 3,
        [TOP_STARTING] = 4, [TOP_RENDEZVOUS] = 4, [TOP_DEGRADED] = 5, [TOP_BACKOFF] = 6,   [TOP_STALLED] = 7,
        [TOP_SILENT] = 7,   [TOP_CHECKPOINTING] = 3,
        [TOP_REVERTED] = 8, [TOP_FAILED] = 9,   [TOP_UNREACHABLE] = 10,
    };
    return (unsigned)s < TOP_STATE_COUNT ? sev[s] : 0;
}

bool top_state_is_alert(enum top_state s)
{
    return s == TOP_UNREACHABLE || s == TOP_FAILED || s == TOP_REVERTED || s == TOP_STALLED || s == TOP_SILENT ||
           s == TOP_BACKOFF;
}

static enum top_state worse(enum top_state a, enum top_state b)
{
    return top_state_severity(b) > top_state_severity(a) ? b : a;
}

/* ------------------------------------------------------------------ snapshot */

void top_trend_push(float *trend, int *ntrend, float v)
{
    if (*ntrend == TOP_TREND) {
        memmove(trend, trend + 1, (TOP_TREND - 1) * sizeof *trend);
        (*ntrend)--;
    }
    trend[(*ntrend)++] = v;
}

static int64_t steps_this_run(const struct heartbeat *hb)
{
    return hb->resumed_from >= 0 ? hb->step - hb->resumed_from : hb->step;
}

static pthread_once_t self_once = PTHREAD_ONCE_INIT;
static char self_holder[HOLDER_MAX];

static void self_init(void)
{
    holder_self(self_holder, sizeof self_holder);
}

void top_ct_update(struct top_ct *ct, const struct agent_status *st, const char *job,
                   int64_t warmup_steps, double now)
{
    const struct job_status *js = status_find_job(st, job);
    ct->seen = true;
    ct->doc_mono = now;
    ct->err[0] = '\0';
    ct->has_job = js != NULL;
    if (!js) {
        ct->gang = GANG_STOPPED;
        ct->nranks = 0;
        ct->release[0] = ct->current[0] = ct->good[0] = ct->previous[0] = ct->reason[0] = '\0';
        ct->spec_unpromoted = false;
        ct->restarts = 0;
        ct->age_s = -1;
        ct->bad[0] = ct->bad_reason[0] = '\0';
        ct->bad_good = false;
        memset(&ct->prob, 0, sizeof ct->prob);
        return;
    }
    /* this process as a lease holder, to judge the agents' holders by: once, whichever host's
     * poller thread comes first */
    pthread_once(&self_once, self_init);
    memset(&ct->prob, 0, sizeof ct->prob);
    status_probation_add(&ct->prob, js, self_holder);
    const char *bad_reason = NULL, *bad = status_marked_bad(js, &bad_reason);
    (void)str_copy(ct->bad, sizeof ct->bad, bad ? bad : "");
    (void)str_copy(ct->bad_reason, sizeof ct->bad_reason, bad && bad_reason ? bad_reason : "");
    ct->bad_good = bad && !strcmp(bad, js->good);
    ct->gang = js->state;
    (void)str_copy(ct->release, sizeof ct->release, js->release);
    (void)str_copy(ct->current, sizeof ct->current, js->current);
    (void)str_copy(ct->good, sizeof ct->good, js->good);
    (void)str_copy(ct->previous, sizeof ct->previous, js->previous);
    ct->spec_unpromoted = status_runs_unpromoted_spec(js);
    (void)str_copy(ct->reason, sizeof ct->reason, js->reason);
    ct->restarts = js->restarts;
    ct->age_s = js->age_s;
    struct top_rank old[STATUS_MAX_RANKS];
    int nold = ct->nranks;
    memcpy(old, ct->ranks, (size_t)nold * sizeof old[0]);
    int n = js->nranks < STATUS_MAX_RANKS ? js->nranks : STATUS_MAX_RANKS;
    double sum = 0;
    bool sampled = false;
    for (int k = 0; k < n; k++) {
        const struct rank_status *rs = &js->ranks[k];
        struct top_rank *r = &ct->ranks[k];
        struct top_rank prev = { .ntrend = 0 };
        for (int o = 0; o < nold; o++)
            if (old[o].rank == rs->rank) {
                prev = old[o];
                break;
            }
        memset(r, 0, sizeof *r);
        r->rank = rs->rank;
        (void)str_copy(r->pstate, sizeof r->pstate, rs->state);
        r->state_age_s = rs->state_age_s;
        r->pid = rs->pid;
        r->hb_age_s = rs->hb_age_s;
        r->exit_code = rs->exit_code;
        r->exit_signal = rs->exit_signal;
        r->gpu = rs->gpu;
        r->has_hb = rs->has_hb;
        r->hello = status_rank_in_rendezvous(rs);
        r->ntrend = prev.ntrend;
        memcpy(r->trend, prev.trend, sizeof r->trend);
        r->resumed_from = -1;
        if (rs->has_hb) {
            const struct heartbeat *hb = &rs->hb;
            r->step = hb->step;
            r->resumed_from = hb->resumed_from;
            r->loss = hb->loss;
            r->loss_finite = hb->loss_finite && isfinite(hb->loss);
            r->loss_nan = !r->loss_finite && hb->nonfinite > 0;
            double kt = rank_status_ktok(rs); /* silent, stalled, exited: none now */
            r->ktok = isfinite(kt) ? kt : 0;
            r->step_s = isfinite(hb->step_ms) && hb->step_ms > 0 ? hb->step_ms / 1000.0 : 0;
            r->phase = hb->phase;
            (void)str_copy(r->release, sizeof r->release, hb->release);
            bool alive = strcmp(rs->state, "running") == 0 || strcmp(rs->state, "starting") == 0;
            if (alive && hb->phase == HB_PHASE_TRAIN && steps_this_run(hb) > warmup_steps) {
                top_trend_push(r->trend, &r->ntrend, (float)r->ktok);
                sum += r->ktok;
                sampled = true;
            }
        }
        if (!r->release[0])
            (void)str_copy(r->release, sizeof r->release, js->release);
    }
    ct->nranks = n;
    if (sampled)
        top_trend_push(ct->trend, &ct->ntrend, (float)sum);
}

/* Index in the snapshot's cts[] (jobs in inventory order, each job's containers in order) of
 * the first pair that names the same container as job j's container i. */
static int first_same_ct(const struct inventory *inv, int j, int i)
{
    const struct inv_ct *ct = &inv->jobs[j].cts[i];
    int ix = 0;
    for (int k = 0; k <= j; k++)
        for (int d = 0; d < inv->jobs[k].ncts; d++, ix++)
            if (inventory_same_ct(&inv->jobs[k].cts[d], ct))
                return ix;
    return ix; /* not reached: the pair itself matches */
}

int top_snapshot_init(struct top_snapshot *s, const struct inventory *inv, double interval_s)
{
    memset(s, 0, sizeof *s);
    s->interval_s = interval_s;
    int n = 0;
    for (int j = 0; j < inv->njobs; j++)
        n += inv->jobs[j].ncts;
    if (n > TOP_MAX_CTS)
        return -E2BIG;
    s->cts = calloc(n ? (size_t)n : 1, sizeof *s->cts);
    if (!s->cts)
        return -ENOMEM;
    s->nhosts = inv->nhosts;
    for (int h = 0; h < inv->nhosts; h++)
        (void)str_copy(s->hosts[h].name, sizeof s->hosts[h].name, inv->hosts[h].name);
    s->njobs = inv->njobs;
    for (int j = 0; j < inv->njobs; j++) {
        const struct inv_job *ij = &inv->jobs[j];
        struct top_job *tj = &s->jobs[j];
        (void)str_copy(tj->name, sizeof tj->name, ij->name);
        tj->tolerance = ij->policy.tolerance;
        tj->warmup_steps = ij->policy.warmup_steps;
        tj->expected_ranks = ij->ncts * (ij->nproc_per_node > 0 ? ij->nproc_per_node : 1);
        for (int i = 0; i < ij->ncts; i++) {
            struct top_ct *ct = &s->cts[s->ncts++];
            ct->host = ij->cts[i].host;
            ct->job = j;
            ct->node_rank = i;
            ct->same_as = first_same_ct(inv, j, i);
            (void)str_copy(ct->label, sizeof ct->label, ij->cts[i].label);
            ct->age_s = -1;
        }
    }
    return 0;
}

void top_snapshot_done(struct top_snapshot *s)
{
    if (!s)
        return;
    free(s->cts);
    s->cts = NULL;
    s->ncts = 0;
}

int top_snapshot_copy(struct top_snapshot *dst, const struct top_snapshot *src)
{
    struct top_ct *cts = dst->cts;
    if (!cts || dst->ncts != src->ncts) {
        free(cts);
        cts = calloc(src->ncts ? (size_t)src->ncts : 1, sizeof *cts);
        if (!cts) {
            dst->cts = NULL;
            dst->ncts = 0;
            return -ENOMEM;
        }
    }
    *dst = *src;
    dst->cts = cts;
    memcpy(cts, src->cts, (size_t)src->ncts * sizeof *cts);
    return 0;
}

/* ------------------------------------------------------------------ derived states */

double top_stale_after(double interval_s)
{
    return 2.5 * interval_s + 3.0;
}

double top_first_doc_within(double interval_s)
{
    double t = 4 * interval_s + 6;
    return t > 30 ? t : 30;
}

void top_snapshot_wait_over(struct top_snapshot *s, double asked_since, double now)
{
    for (int i = 0; i < s->ncts; i++) {
        struct top_ct *ct = &s->cts[i];
        if (ct->seen)
            continue;
        if (ct->asked_mono <= 0)
            ct->asked_mono = asked_since;
        if (ct->answer_by <= 0 || ct->answer_by > now)
            ct->answer_by = now;
    }
}

bool top_ct_is_stale(const struct top_snapshot *s, const struct top_ct *ct, double now)
{
    if (ct->err[0])
        return true;
    if (ct->host >= 0 && ct->host < s->nhosts && s->hosts[ct->host].err[0] && !s->hosts[ct->host].up)
        return true;
    /* A stopped or hung agent accepts the watch stream and never answers: no error ever comes
     * (the stream ends only after the agent CLI's own idle deadline, a minute), so it showed
     * `starting` with no alert while `drover status` said agent-unreachable. */
    if (!ct->seen)
        return ct->answer_by > 0 && now >= ct->answer_by;
    return now - ct->doc_mono > top_stale_after(s->interval_s);
}

double top_rank_hb_age(const struct top_snapshot *s, const struct top_ct *ct,
                       const struct top_rank *r, double now)
{
    if (r->hb_age_s < 0)
        return -1;
    /* documents come every interval: only the time past that is the host's silence */
    double over = ct->seen ? now - ct->doc_mono - s->interval_s : 0;
    return r->hb_age_s + (over > 0 ? over : 0);
}

int top_hb_lateness(const struct top_rank *r, double age_s)
{
    double interval = r->step_s > TOP_HB_MIN_INTERVAL ? r->step_s : TOP_HB_MIN_INTERVAL;
    if (age_s > 5 * interval)
        return 2;
    if (age_s > 2 * interval)
        return 1;
    return 0;
}

const struct top_job *top_job_of(const struct top_snapshot *s, const struct top_ct *ct)
{
    return ct->job >= 0 && ct->job < s->njobs ? &s->jobs[ct->job] : NULL;
}

/* Ktok/s under which n ranks count as slow; <= 0 when there is no baseline. */
double top_slow_threshold(const struct top_job *j, int n)
{
    if (!j || j->baseline_ktok <= 0 || j->expected_ranks <= 0)
        return 0;
    return (1.0 - j->tolerance) * j->baseline_ktok * n / j->expected_ranks;
}

bool top_rank_past_warmup(const struct top_job *j, const struct top_rank *r)
{
    int64_t ran = r->resumed_from >= 0 ? r->step - r->resumed_from : r->step;
    return r->has_hb && r->phase == HB_PHASE_TRAIN && ran > (j ? j->warmup_steps : 0);
}

/* Median of the newest (at most 5) trend samples: one slow step does not turn a row red. */
double top_recent_ktok(const float *trend, int n, double fallback)
{
    if (n <= 0)
        return fallback;
    float v[5];
    int k = n < 5 ? n : 5;
    memcpy(v, trend + n - k, (size_t)k * sizeof v[0]);
    for (int i = 1; i < k; i++)
        for (int q = i; q > 0 && v[q - 1] > v[q]; q--) {
            float t = v[q];
            v[q] = v[q - 1];
            v[q - 1] = t;
        }
    return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2.0;
}

bool top_rank_is_slow(const struct top_snapshot *s, const struct top_ct *ct,
                         const struct top_rank *r)
{
    const struct top_job *j = top_job_of(s, ct);
    double t = top_slow_threshold(j, 1);
    return t > 0 && top_rank_past_warmup(j, r) && top_recent_ktok(r->trend, r->ntrend, r->ktok) < t;
}

static bool rank_is_dead(const struct top_rank *r)
{
    return strcmp(r->pstate, "exited") == 0 || strcmp(r->pstate, "killed") == 0;
}

enum top_state top_rank_state(const struct top_snapshot *s, const struct top_ct *ct,
                              const struct top_rank *r, double now)
{
    if (top_ct_is_stale(s, ct, now))
        return TOP_UNREACHABLE;
    switch (ct->gang) {
    case GANG_FAILED:
        return TOP_FAILED;
    case GANG_BACKOFF:
        return TOP_BACKOFF;
    case GANG_STOPPED:
        return TOP_STOPPED;
    case GANG_STOPPING:
        return TOP_STOPPING;
    default:
        break;
    }
    if (rank_is_dead(r))
        return TOP_FAILED;
    /* GANG_REVERTED is the container's word (its agent went back to the good release on its
     * own, see top_ct_state): the ranks of the good release it runs are judged as any others,
     * so the header's running count and `drover status` agree with the rank rows. */
    if (!r->has_hb || r->phase == HB_PHASE_INIT || ct->gang == GANG_STARTING)
        /* a hello alone: past its imports, in the rendezvous; `drover status` says it too */
        return r->hello && !strcmp(r->pstate, "starting") ? TOP_RENDEZVOUS : TOP_STARTING;
    if (r->phase == HB_PHASE_DONE)
        return TOP_STOPPING;
    /* Liveness is the agent's word (agent/liveness.h), so `drover status`, `status -o json` and
     * this dashboard name the same state for the same facts; a late heartbeat alone only
     * colours the AGE column. */
    if (strcmp(r->pstate, "stalled") == 0)
        return TOP_STALLED;
    if (strcmp(r->pstate, "silent") == 0)
        return TOP_SILENT;
    if (strcmp(r->pstate, "checkpointing") == 0)
        return TOP_CHECKPOINTING;
    if (r->loss_nan || top_rank_is_slow(s, ct, r))
        return TOP_DEGRADED;
    if (status_on_probation(ct->current, ct->good, ct->spec_unpromoted)) /* `drover status` says it too */
        return TOP_PROBATION;
    return TOP_RUNNING;
}

enum top_state top_ct_state(const struct top_snapshot *s, const struct top_ct *ct, double now)
{
    if (top_ct_is_stale(s, ct, now))
        return TOP_UNREACHABLE;
    if (!ct->seen)
        return TOP_STARTING; /* connecting: nothing known yet */
    if (!ct->has_job)
        return TOP_NO_JOB;
    if (ct->nranks == 0) {
        switch (ct->gang) {
        case GANG_FAILED:
            return TOP_FAILED;
        case GANG_BACKOFF:
            return TOP_BACKOFF;
        case GANG_REVERTED:
            return TOP_REVERTED;
        case GANG_STOPPING:
            return TOP_STOPPING;
        case GANG_STARTING:
            return TOP_STARTING;
        case GANG_RUNNING:
            return TOP_RUNNING;
        default:
            return TOP_STOPPED;
        }
    }
    enum top_state w = ct->gang == GANG_REVERTED ? TOP_REVERTED : TOP_RUNNING;
    for (int k = 0; k < ct->nranks; k++)
        w = worse(w, top_rank_state(s, ct, &ct->ranks[k], now));
    return w;
}

int top_snapshot_exit(const struct top_snapshot *s, double now, int *ret_unanswered)
{
    bool key = false;
    int unreachable = 0, unanswered = 0;
    for (int h = 0; h < s->nhosts; h++)
        key = key || (s->hosts[h].key_refused && !s->hosts[h].up);
    for (int i = 0; i < s->ncts; i++) {
        const struct top_ct *ct = &s->cts[i];
        if (!ct->seen || top_ct_state(s, ct, now) == TOP_UNREACHABLE)
            unreachable++;
        if (top_ct_unanswered(s, ct))
            unanswered++;
    }
    if (ret_unanswered)
        *ret_unanswered = unanswered;
    return key ? EXIT_HOSTKEY : unreachable ? EXIT_FAIL : EXIT_OK;
}

bool top_ct_unanswered(const struct top_snapshot *s, const struct top_ct *ct)
{
    const struct top_host *h = ct->host >= 0 && ct->host < s->nhosts ? &s->hosts[ct->host] : NULL;
    return !ct->seen && !ct->err[0] && !(h && h->err[0] && !h->up);
}


bool top_ct_report_unanswered(const struct top_snapshot *s, int i, double now)
{
    (void)now;
    if (i < 0 || i >= s->ncts || !top_ct_unanswered(s, &s->cts[i]))
        return false;
    int first = s->cts[i].same_as;
    return !(first >= 0 && first < i && top_ct_unanswered(s, &s->cts[first]));
}

enum top_state top_host_state(const struct top_snapshot *s, int host, double now)
{
    const struct top_host *h = &s->hosts[host];
    if (h->err[0] && !h->up)
        return TOP_UNREACHABLE;
    /* no-job is a container's word (its agent does not know that job): a job of the inventory
     * never deployed on this host is nothing wrong with the host, and it hid the job that runs
     * there (`h1 ... no-job` while one ran on h1:101).  Said only when no container knows its
     * job. */
    enum top_state w = TOP_RUNNING;
    bool any = false, all_no_job = true;
    for (int i = 0; i < s->ncts; i++)
        if (s->cts[i].host == host) {
            enum top_state c = top_ct_state(s, &s->cts[i], now);
            any = true;
            if (c == TOP_NO_JOB)
                continue;
            all_no_job = false;
            w = worse(w, c);
        }
    return !any ? TOP_RUNNING : all_no_job ? TOP_NO_JOB : w;
}

const char *top_rollback_target(const struct top_snapshot *s, int job, bool *ret_to_good)
{
    for (int i = 0; i < s->ncts; i++) {
        const struct top_ct *ct = &s->cts[i];
        if (ct->job != job || !ct->has_job || !ct->current[0])
            continue;
        if (ct->good[0] && strcmp(ct->current, ct->good) != 0) {
            *ret_to_good = true;
            return ct->good;
        }
        *ret_to_good = false;
        return ct->previous[0] && strcmp(ct->previous, ct->current) != 0 ? ct->previous : "";
    }
    *ret_to_good = false;
    return "";
}

/* ------------------------------------------------------------------ events */

const char *top_event_format(const struct event *e, char *buf, size_t buf_sz)
{
    char when[32] = "?";
    if (isfinite(e->ts) && e->ts >= 0 && e->ts < 1e11) {
        time_t t = (time_t)e->ts;
        struct tm tm;
        if (localtime_r(&t, &tm))
            strftime(when, sizeof when, "%m-%d %H:%M:%S", &tm);
    }
    snprintf(buf, buf_sz, "%s %-8s %-12s %-8.8s %s", when, e->job[0] ? e->job : "-", e->kind,
             e->release[0] ? e->release : "-", e->detail);
    return buf;
}
