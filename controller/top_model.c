/* controller/top_model.c: the dashboard's model as pure functions: agent status documents ->
 * per-container snapshots with Ktok/s trends; snapshot -> states, rows and cells (tree or flat,
 * sorted, filtered, folded), header totals, column layout for the terminal width, and the text
 * frame `drover top --once` prints.  Owns the meaning of every column (docs/dashboard.md).
 * Must never do I/O or read a clock: `now` comes from the caller, so tests and bench/top drive
 * it with synthetic fleets.
 */
#include "controller/top.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

/* ------------------------------------------------------------------ states */

static const char *const state_names[TOP_STATE_COUNT] = {
    [TOP_RUNNING] = "running",   [TOP_STARTING] = "starting", [TOP_PROBATION] = "probation",
    [TOP_DEGRADED] = "degraded", [TOP_STALLED] = "stalled",   [TOP_BACKOFF] = "backoff",
    [TOP_REVERTED] = "reverted", [TOP_FAILED] = "failed",     [TOP_STOPPING] = "stopping",
    [TOP_STOPPED] = "stopped",   [TOP_UNREACHABLE] = "unreachable",
};

const char *top_state_name(enum top_state s)
{
    return (unsigned)s < TOP_STATE_COUNT ? state_names[s] : "?";
}

int top_state_severity(enum top_state s)
{
    static const int sev[TOP_STATE_COUNT] = {
        [TOP_RUNNING] = 0, [TOP_STOPPED] = 1,  [TOP_PROBATION] = 2, [TOP_STOPPING] = 3,
        [TOP_STARTING] = 4, [TOP_DEGRADED] = 5, [TOP_BACKOFF] = 6,   [TOP_STALLED] = 7,
        [TOP_REVERTED] = 8, [TOP_FAILED] = 9,   [TOP_UNREACHABLE] = 10,
    };
    return (unsigned)s < TOP_STATE_COUNT ? sev[s] : 0;
}

bool top_state_is_alert(enum top_state s)
{
    return s == TOP_UNREACHABLE || s == TOP_FAILED || s == TOP_REVERTED || s == TOP_STALLED ||
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
        ct->restarts = 0;
        ct->age_s = -1;
        return;
    }
    ct->gang = js->state;
    (void)str_copy(ct->release, sizeof ct->release, js->release);
    (void)str_copy(ct->current, sizeof ct->current, js->current);
    (void)str_copy(ct->good, sizeof ct->good, js->good);
    (void)str_copy(ct->previous, sizeof ct->previous, js->previous);
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
        r->pid = rs->pid;
        r->hb_age_s = rs->hb_age_s;
        r->exit_code = rs->exit_code;
        r->exit_signal = rs->exit_signal;
        r->gpu = rs->gpu;
        r->has_hb = rs->has_hb;
        r->ntrend = prev.ntrend;
        memcpy(r->trend, prev.trend, sizeof r->trend);
        r->resumed_from = -1;
        if (rs->has_hb) {
            const struct heartbeat *hb = &rs->hb;
            r->step = hb->step;
            r->resumed_from = hb->resumed_from;
            r->loss = hb->loss;
            r->loss_finite = hb->loss_finite && isfinite(hb->loss);
            r->ktok = isfinite(hb->tok_s) && hb->tok_s > 0 ? hb->tok_s / 1000.0 : 0;
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

bool top_ct_is_stale(const struct top_snapshot *s, const struct top_ct *ct, double now)
{
    if (ct->err[0])
        return true;
    if (ct->host >= 0 && ct->host < s->nhosts && s->hosts[ct->host].err[0] && !s->hosts[ct->host].up)
        return true;
    return ct->seen && now - ct->doc_mono > top_stale_after(s->interval_s);
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

static const struct top_job *job_of(const struct top_snapshot *s, const struct top_ct *ct)
{
    return ct->job >= 0 && ct->job < s->njobs ? &s->jobs[ct->job] : NULL;
}

/* Ktok/s under which n ranks count as slow; <= 0 when there is no baseline. */
static double slow_threshold(const struct top_job *j, int n)
{
    if (!j || j->baseline_ktok <= 0 || j->expected_ranks <= 0)
        return 0;
    return (1.0 - j->tolerance) * j->baseline_ktok * n / j->expected_ranks;
}

static bool rank_past_warmup(const struct top_job *j, const struct top_rank *r)
{
    int64_t ran = r->resumed_from >= 0 ? r->step - r->resumed_from : r->step;
    return r->has_hb && r->phase == HB_PHASE_TRAIN && ran > (j ? j->warmup_steps : 0);
}

/* Median of the newest (at most 5) trend samples: one slow step does not turn a row red. */
static double recent_ktok(const float *trend, int n, double fallback)
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

static bool rank_is_slow(const struct top_snapshot *s, const struct top_ct *ct,
                         const struct top_rank *r)
{
    const struct top_job *j = job_of(s, ct);
    double t = slow_threshold(j, 1);
    return t > 0 && rank_past_warmup(j, r) && recent_ktok(r->trend, r->ntrend, r->ktok) < t;
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
    if (ct->gang == GANG_REVERTED)
        return TOP_REVERTED;
    if (!r->has_hb || r->phase == HB_PHASE_INIT || ct->gang == GANG_STARTING)
        return TOP_STARTING;
    if (r->phase == HB_PHASE_DONE)
        return TOP_STOPPING;
    if (top_hb_lateness(r, top_rank_hb_age(s, ct, r, now)) >= 2)
        return TOP_STALLED;
    if (!r->loss_finite || rank_is_slow(s, ct, r))
        return TOP_DEGRADED;
    if (!ct->good[0] || strcmp(ct->current, ct->good) != 0)
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
        return TOP_STOPPED;
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
    enum top_state w = TOP_RUNNING;
    for (int k = 0; k < ct->nranks; k++)
        w = worse(w, top_rank_state(s, ct, &ct->ranks[k], now));
    return w;
}

enum top_state top_host_state(const struct top_snapshot *s, int host, double now)
{
    const struct top_host *h = &s->hosts[host];
    if (h->err[0] && !h->up)
        return TOP_UNREACHABLE;
    enum top_state w = TOP_RUNNING;
    bool any = false;
    for (int i = 0; i < s->ncts; i++)
        if (s->cts[i].host == host) {
            w = worse(w, top_ct_state(s, &s->cts[i], now));
            any = true;
        }
    return any ? w : TOP_RUNNING;
}

/* ------------------------------------------------------------------ formatting */

const char *top_fmt_age(double sec, char *buf, size_t buf_sz)
{
    if (!(sec >= 0))
        snprintf(buf, buf_sz, "-");
    else if (sec < 120)
        snprintf(buf, buf_sz, "%.0fs", floor(sec));
    else if (sec < 7200)
        snprintf(buf, buf_sz, "%.0fm", floor(sec / 60));
    else if (sec < 172800)
        snprintf(buf, buf_sz, "%.0fh", floor(sec / 3600));
    else
        snprintf(buf, buf_sz, "%.0fd", floor(sec / 86400));
    return buf;
}

const char *top_fmt_spark(const float *v, int n, int width, bool ascii, char *buf, size_t buf_sz)
{
    static const char *const blocks[8] = { "\u2581", "\u2582", "\u2583", "\u2584",
                                           "\u2585", "\u2586", "\u2587", "\u2588" };
    static const char ascii_levels[] = " .:-=+*#";
    size_t len = 0;
    buf[0] = '\0';
    if (n <= 0 || width <= 0 || buf_sz < 2)
        return buf;
    int first = n > width ? n - width : 0;
    float max = 0;
    for (int i = first; i < n; i++)
        if (isfinite(v[i]) && v[i] > max)
            max = v[i];
    for (int i = first; i < n; i++) {
        int lvl = 0;
        if (max > 0 && isfinite(v[i]) && v[i] > 0) {
            lvl = (int)lroundf(v[i] / max * 7.0f);
            lvl = lvl < 0 ? 0 : lvl > 7 ? 7 : lvl;
        }
        if (ascii) {
            if (len + 2 > buf_sz)
                break;
            buf[len++] = ascii_levels[lvl];
        } else {
            if (len + 4 > buf_sz)
                break;
            memcpy(buf + len, blocks[lvl], 3);
            len += 3;
        }
    }
    buf[len] = '\0';
    return buf;
}

const char *top_fmt_restarts(int restarts, double since_s, char *buf, size_t buf_sz)
{
    char age[16];
    if (restarts > 0 && since_s >= 0)
        snprintf(buf, buf_sz, "%d (%s ago)", restarts, top_fmt_age(since_s, age, sizeof age));
    else
        snprintf(buf, buf_sz, "%d", restarts > 0 ? restarts : 0);
    return buf;
}

const char *top_fmt_bytes(int64_t bytes, char *buf, size_t buf_sz)
{
    if (bytes < 0)
        snprintf(buf, buf_sz, "-");
    else if (bytes >= (int64_t)1 << 30)
        snprintf(buf, buf_sz, "%.1fG", (double)bytes / (double)(1 << 30));
    else if (bytes >= (int64_t)1 << 20)
        snprintf(buf, buf_sz, "%.0fM", (double)bytes / (double)(1 << 20));
    else
        snprintf(buf, buf_sz, "%.0fK", (double)bytes / 1024.0);
    return buf;
}

int top_str_width(const char *s)
{
    int w = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p & 0xC0) != 0x80)
            w++;
    return w;
}

static const char *const col_titles[TOP_NCOLS] = {
    "NAME", "REL", "STATE", "STEP", "LOSS", "KTOK/S", "TREND", "HB", "RST", "GPU%", "MEM", "TEMP",
};

const char *top_col_title(enum top_col c)
{
    return (unsigned)c < TOP_NCOLS ? col_titles[c] : "?";
}

/* ------------------------------------------------------------------ rows */

static unsigned state_attr(enum top_state st)
{
    if (top_state_is_alert(st))
        return TOP_A_RED | TOP_A_BOLD;
    switch (st) {
    case TOP_DEGRADED:
    case TOP_STARTING:
    case TOP_PROBATION:
    case TOP_STOPPING:
        return TOP_A_YELLOW;
    case TOP_RUNNING:
        return TOP_A_GREEN;
    default:
        return TOP_A_DIM;
    }
}

static void cellf(struct top_row *row, enum top_col c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void cellf(struct top_row *row, enum top_col c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(row->cell[c], TOP_CELL_MAX, fmt, ap);
    va_end(ap);
}

static void fill_rel(struct top_row *row, const struct top_job *j, const char *release)
{
    if (!release || !release[0]) {
        cellf(row, TOP_COL_REL, "-");
        return;
    }
    bool off = j && j->target[0] && strcmp(release, j->target) != 0;
    cellf(row, TOP_COL_REL, "%.8s%s", release, off ? "*" : "");
    if (off)
        row->attr[TOP_COL_REL] |= TOP_A_YELLOW | TOP_A_BOLD;
}

static void fill_gpu(struct top_row *row, bool valid, double util, int64_t mem, double temp,
                     double slowdown, bool training)
{
    char b[16];
    if (!valid) {
        cellf(row, TOP_COL_GPU, "-");
        cellf(row, TOP_COL_MEM, "-");
        cellf(row, TOP_COL_TEMP, "-");
        return;
    }
    bool low = training && util < TOP_GPU_LOW;
    cellf(row, TOP_COL_GPU, "%.0f%s", util, low ? " LOW" : "");
    if (low)
        row->attr[TOP_COL_GPU] |= TOP_A_YELLOW | TOP_A_BOLD;
    cellf(row, TOP_COL_MEM, "%s", top_fmt_bytes(mem, b, sizeof b));
    cellf(row, TOP_COL_TEMP, "%.0fC", temp);
    if (slowdown > 0 && temp >= slowdown)
        row->attr[TOP_COL_TEMP] |= TOP_A_RED | TOP_A_BOLD;
    else if (slowdown > 0 && temp >= slowdown - 5)
        row->attr[TOP_COL_TEMP] |= TOP_A_YELLOW;
}

static void fill_hb(struct top_row *row, const struct top_rank *r, double age)
{
    char b[16];
    cellf(row, TOP_COL_HB, "%s", top_fmt_age(age, b, sizeof b));
    int late = age >= 0 ? top_hb_lateness(r, age) : 0;
    if (late == 2)
        row->attr[TOP_COL_HB] |= TOP_A_RED | TOP_A_BOLD;
    else if (late == 1)
        row->attr[TOP_COL_HB] |= TOP_A_YELLOW;
}

static void fill_rank(struct top_row *row, const struct top_snapshot *s, const struct top_ct *ct,
                      const struct top_rank *r, const struct top_view *v, double now)
{
    const struct top_job *j = job_of(s, ct);
    char b[TOP_CELL_MAX];
    row->state = top_rank_state(s, ct, r, now);
    fill_rel(row, j, r->release[0] ? r->release : ct->release);
    cellf(row, TOP_COL_STATE, "%s", top_state_name(row->state));
    row->attr[TOP_COL_STATE] |= state_attr(row->state);
    if (r->has_hb) {
        cellf(row, TOP_COL_STEP, "%lld", (long long)r->step);
        if (r->loss_finite)
            cellf(row, TOP_COL_LOSS, "%.3f", r->loss);
        else {
            cellf(row, TOP_COL_LOSS, "NaN");
            row->attr[TOP_COL_LOSS] |= TOP_A_RED | TOP_A_BOLD;
        }
        cellf(row, TOP_COL_KTOK, "%.1f", r->ktok);
        if (rank_is_slow(s, ct, r))
            row->attr[TOP_COL_KTOK] |= TOP_A_RED | TOP_A_BOLD;
    } else {
        cellf(row, TOP_COL_STEP, "-");
        cellf(row, TOP_COL_LOSS, "-");
        cellf(row, TOP_COL_KTOK, "-");
    }
    cellf(row, TOP_COL_TREND, "%s", top_fmt_spark(r->trend, r->ntrend, v->trend_width, v->ascii, b, sizeof b));
    fill_hb(row, r, top_rank_hb_age(s, ct, r, now));
    if (v->flat) {
        double since = ct->age_s + (now - ct->doc_mono);
        cellf(row, TOP_COL_RST, "%s", top_fmt_restarts(ct->restarts, since, b, sizeof b));
        if (ct->restarts > 0)
            row->attr[TOP_COL_RST] |= since < TOP_RECENT_RESTART_S ? TOP_A_RED | TOP_A_BOLD : TOP_A_YELLOW;
    }
    fill_gpu(row, r->gpu.valid, r->gpu.util, r->gpu.mem_used, r->gpu.temp, r->gpu.slowdown_temp,
             r->has_hb && r->phase == HB_PHASE_TRAIN);
}

static void fill_ct(struct top_row *row, const struct top_snapshot *s, const struct top_ct *ct,
                    const struct top_view *v, double now)
{
    const struct top_job *j = job_of(s, ct);
    char b[TOP_CELL_MAX];
    row->state = top_ct_state(s, ct, now);
    fill_rel(row, j, ct->release[0] ? ct->release : ct->current);
    cellf(row, TOP_COL_STATE, "%s", top_state_name(row->state));
    row->attr[TOP_COL_STATE] |= state_attr(row->state);
    int64_t min_step = -1;
    double ktok = 0, loss = 0, max_age = -1, util = 0, temp = 0, slowdown = 0;
    int nloss = 0, nhb = 0, ngpu = 0;
    int64_t mem = 0;
    bool nan = false, training = false;
    const struct top_rank *oldest = NULL;
    for (int k = 0; k < ct->nranks; k++) {
        const struct top_rank *r = &ct->ranks[k];
        if (r->has_hb) {
            nhb++;
            if (min_step < 0 || r->step < min_step)
                min_step = r->step;
            ktok += r->ktok;
            if (r->loss_finite) {
                loss += r->loss;
                nloss++;
            } else
                nan = true;
            training = training || r->phase == HB_PHASE_TRAIN;
        }
        double age = top_rank_hb_age(s, ct, r, now);
        if (age > max_age) {
            max_age = age;
            oldest = r;
        }
        if (r->gpu.valid) {
            ngpu++;
            util += r->gpu.util;
            mem += r->gpu.mem_used;
            if (r->gpu.temp > temp) {
                temp = r->gpu.temp;
                slowdown = r->gpu.slowdown_temp;
            }
        }
    }
    if (nhb) {
        cellf(row, TOP_COL_STEP, "%lld", (long long)min_step);
        if (nan) {
            cellf(row, TOP_COL_LOSS, "NaN");
            row->attr[TOP_COL_LOSS] |= TOP_A_RED | TOP_A_BOLD;
        } else
            cellf(row, TOP_COL_LOSS, "%.3f", loss / nloss);
        cellf(row, TOP_COL_KTOK, ktok >= 1000 ? "%.0f" : "%.1f", ktok);
        double t = slow_threshold(j, ct->nranks);
        bool warm = true;
        for (int k = 0; k < ct->nranks; k++)
            warm = warm && rank_past_warmup(j, &ct->ranks[k]);
        if (t > 0 && warm && recent_ktok(ct->trend, ct->ntrend, ktok) < t)
            row->attr[TOP_COL_KTOK] |= TOP_A_RED | TOP_A_BOLD;
    } else {
        cellf(row, TOP_COL_STEP, "-");
        cellf(row, TOP_COL_LOSS, "-");
        cellf(row, TOP_COL_KTOK, "-");
    }
    cellf(row, TOP_COL_TREND, "%s", top_fmt_spark(ct->trend, ct->ntrend, v->trend_width, v->ascii, b, sizeof b));
    if (oldest)
        fill_hb(row, oldest, max_age);
    else if (ct->seen)
        cellf(row, TOP_COL_HB, "%s", top_fmt_age(now - ct->doc_mono, b, sizeof b));
    else
        cellf(row, TOP_COL_HB, "-");
    if (ct->has_job) {
        double since = ct->age_s + (now - ct->doc_mono);
        cellf(row, TOP_COL_RST, "%s", top_fmt_restarts(ct->restarts, since, b, sizeof b));
        if (ct->restarts > 0)
            row->attr[TOP_COL_RST] |= since < TOP_RECENT_RESTART_S ? TOP_A_RED | TOP_A_BOLD : TOP_A_YELLOW;
    } else
        cellf(row, TOP_COL_RST, "-");
    fill_gpu(row, ngpu > 0, ngpu ? util / ngpu : 0, mem, temp, slowdown, training);
}

static void fill_host(struct top_row *row, const struct top_snapshot *s, int host,
                      const struct top_view *v, double now, float *trend, int ntrend)
{
    const struct top_host *h = &s->hosts[host];
    char b[TOP_CELL_MAX];
    row->state = top_host_state(s, host, now);
    cellf(row, TOP_COL_STATE, "%s", top_state_name(row->state));
    row->attr[TOP_COL_STATE] |= state_attr(row->state);
    double ktok = 0;
    bool any = false;
    for (int i = 0; i < s->ncts; i++) {
        const struct top_ct *ct = &s->cts[i];
        if (ct->host != host)
            continue;
        for (int k = 0; k < ct->nranks; k++)
            if (ct->ranks[k].has_hb) {
                ktok += ct->ranks[k].ktok;
                any = true;
            }
    }
    cellf(row, TOP_COL_KTOK, "%s", "-");
    if (any)
        cellf(row, TOP_COL_KTOK, ktok >= 1000 ? "%.0f" : "%.1f", ktok);
    cellf(row, TOP_COL_TREND, "%s", top_fmt_spark(trend, ntrend, v->trend_width, v->ascii, b, sizeof b));
    if (row->state == TOP_UNREACHABLE && h->ok_mono > 0)
        cellf(row, TOP_COL_HB, "%s", top_fmt_age(now - h->ok_mono, b, sizeof b));
}

int64_t top_row_key(enum top_level level, int host, int ct, int rank)
{
    return ((int64_t)level << 56) | ((int64_t)(host & 0xffff) << 40) | ((int64_t)(ct & 0xffffff) << 16) |
           (int64_t)(rank & 0xffff);
}

/* Lower-case copy for matching. */
static void lower(char *dst, size_t sz, const char *src)
{
    size_t i = 0;
    for (; src[i] && i + 1 < sz; i++)
        dst[i] = (char)tolower((unsigned char)src[i]);
    dst[i] = '\0';
}

static bool text_matches(const char *filter_lc, const char *a, const char *b, const char *c)
{
    if (!filter_lc[0])
        return true;
    char t[512];
    char joined[512];
    snprintf(joined, sizeof joined, "%s %s %s", a ? a : "", b ? b : "", c ? c : "");
    lower(t, sizeof t, joined);
    return strstr(t, filter_lc) != NULL;
}

struct sort_item {
    int idx;
    int sev;
    const char *name;
    int num;
};

static int cmp_items_sev(const void *a, const void *b)
{
    const struct sort_item *x = a, *y = b;
    if (x->sev != y->sev)
        return y->sev - x->sev;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    return x->num - y->num;
}

static int cmp_items_name(const void *a, const void *b)
{
    const struct sort_item *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    return x->num - y->num;
}

static void sort_items(struct sort_item *it, int n, bool problems_first)
{
    qsort(it, (size_t)n, sizeof *it, problems_first ? cmp_items_sev : cmp_items_name);
}

static const char *ct_short_name(const struct top_ct *ct)
{
    const char *colon = strchr(ct->label, ':');
    return colon ? colon + 1 : ct->label;
}

static bool rank_matches(const struct top_snapshot *s, const struct top_ct *ct,
                         const struct top_rank *r, const char *flt, double now)
{
    char rn[400];
    snprintf(rn, sizeof rn, "%s/%d rank %d", ct->label, r->rank, r->rank);
    char rel[24];
    snprintf(rel, sizeof rel, "%.12s", r->release);
    return text_matches(flt, rn, top_state_name(top_rank_state(s, ct, r, now)), rel);
}

/* The container's name (label and job): when it matches, all its ranks show. */
static bool ct_matches_name(const struct top_snapshot *s, const struct top_ct *ct, const char *flt)
{
    return text_matches(flt, ct->label, s->jobs[ct->job].name, NULL);
}

/* The container row itself: name, state or release. */
static bool ct_matches_self(const struct top_snapshot *s, const struct top_ct *ct, const char *flt,
                            double now)
{
    char rel[24];
    snprintf(rel, sizeof rel, "%.12s", ct->release);
    return ct_matches_name(s, ct, flt) ||
           text_matches(flt, top_state_name(top_ct_state(s, ct, now)), rel, NULL);
}

int top_build_rows(const struct top_snapshot *s, const struct inventory *inv,
                   const struct top_view *v, double now, struct top_row *rows, int max_rows)
{
    (void)inv;
    char flt[TOP_FILTER_MAX];
    lower(flt, sizeof flt, v->filter);
    int n = 0;
    const char *open_g = v->ascii ? "-" : "\u25be", *closed_g = v->ascii ? "+" : "\u25b8";
    struct sort_item *cti = malloc((size_t)(s->ncts ? s->ncts : 1) * sizeof *cti);
    if (!cti)
        return 0;

    if (v->flat) {
        /* every rank of every container, one list */
        struct sort_item *ri = malloc((size_t)(s->ncts ? s->ncts : 1) * STATUS_MAX_RANKS * sizeof *ri);
        if (!ri) {
            free(cti);
            return 0;
        }
        int nr = 0;
        for (int i = 0; i < s->ncts; i++) {
            const struct top_ct *ct = &s->cts[i];
            if (ct->nranks == 0 || top_ct_is_stale(s, ct, now)) {
                /* containers without ranks (or unreachable) still get one line */
                if (ct->nranks == 0 && ct_matches_self(s, ct, flt, now))
                    ri[nr++] = (struct sort_item){ .idx = i * STATUS_MAX_RANKS + STATUS_MAX_RANKS - 1,
                                                   .sev = top_state_severity(top_ct_state(s, ct, now)),
                                                   .name = ct->label, .num = -1 };
                if (ct->nranks == 0)
                    continue;
            }
            bool by_name = ct_matches_name(s, ct, flt);
            for (int k = 0; k < ct->nranks; k++)
                if (by_name || rank_matches(s, ct, &ct->ranks[k], flt, now))
                    ri[nr++] = (struct sort_item){
                        .idx = i * STATUS_MAX_RANKS + k,
                        .sev = top_state_severity(top_rank_state(s, ct, &ct->ranks[k], now)),
                        .name = ct->label, .num = ct->ranks[k].rank };
        }
        sort_items(ri, nr, v->problems_first);
        for (int q = 0; q < nr && n < max_rows; q++) {
            int i = ri[q].idx / STATUS_MAX_RANKS, k = ri[q].idx % STATUS_MAX_RANKS;
            const struct top_ct *ct = &s->cts[i];
            struct top_row *row = &rows[n++];
            memset(row, 0, sizeof *row);
            row->level = ct->nranks ? TOP_L_RANK : TOP_L_CT;
            row->host = ct->host;
            row->ct = i;
            row->rank = ct->nranks ? k : -1;
            row->stale = ct->seen && top_ct_is_stale(s, ct, now);
            if (ct->nranks) {
                fill_rank(row, s, ct, &ct->ranks[k], v, now);
                cellf(row, TOP_COL_NAME, "%s/%d", ct->label, ct->ranks[k].rank);
                row->key = top_row_key(TOP_L_RANK, ct->host, i, ct->ranks[k].rank);
            } else {
                fill_ct(row, s, ct, v, now);
                cellf(row, TOP_COL_NAME, "%s", ct->label);
                row->key = top_row_key(TOP_L_CT, ct->host, i, 0);
            }
        }
        free(ri);
        free(cti);
        return n;
    }

    struct sort_item hi[INV_MAX_HOSTS];
    int nh = 0;
    for (int h = 0; h < s->nhosts; h++)
        hi[nh++] = (struct sort_item){ .idx = h, .sev = top_state_severity(top_host_state(s, h, now)),
                                       .name = s->hosts[h].name, .num = h };
    sort_items(hi, nh, v->problems_first);
    for (int q = 0; q < nh && n < max_rows; q++) {
        int h = hi[q].idx;
        /* a host or container matched by name shows everything under it; states and releases
         * match only their own row (and show its parents) */
        bool host_self = text_matches(flt, s->hosts[h].name, NULL, NULL);
        /* containers of this host that match (or all when the host itself matches) */
        int nc = 0;
        for (int i = 0; i < s->ncts; i++) {
            const struct top_ct *ct = &s->cts[i];
            if (ct->host != h)
                continue;
            bool m = host_self || ct_matches_self(s, ct, flt, now);
            for (int k = 0; !m && k < ct->nranks; k++)
                m = rank_matches(s, ct, &ct->ranks[k], flt, now);
            if (m)
                cti[nc++] = (struct sort_item){ .idx = i,
                                                .sev = top_state_severity(top_ct_state(s, ct, now)),
                                                .name = ct->label, .num = ct->job };
        }
        if (!host_self && nc == 0)
            continue;
        sort_items(cti, nc, v->problems_first);
        /* the host's trend: sum of its containers' trends aligned on the newest sample */
        float trend[TOP_TREND] = { 0 };
        int ntrend = 0;
        for (int i = 0; i < s->ncts; i++) {
            const struct top_ct *ct = &s->cts[i];
            if (ct->host != h)
                continue;
            if (ct->ntrend > ntrend)
                ntrend = ct->ntrend;
        }
        for (int i = 0; i < s->ncts; i++) {
            const struct top_ct *ct = &s->cts[i];
            if (ct->host != h)
                continue;
            for (int t = 0; t < ct->ntrend; t++)
                trend[ntrend - ct->ntrend + t] += ct->trend[t];
        }
        struct top_row *hrow = &rows[n++];
        memset(hrow, 0, sizeof *hrow);
        hrow->level = TOP_L_HOST;
        hrow->host = h;
        hrow->ct = hrow->rank = -1;
        hrow->folded = v->host_folded[h];
        fill_host(hrow, s, h, v, now, trend, ntrend);
        hrow->stale = hrow->state == TOP_UNREACHABLE;
        cellf(hrow, TOP_COL_NAME, "%s %s", hrow->folded ? closed_g : open_g, s->hosts[h].name);
        hrow->attr[TOP_COL_NAME] |= TOP_A_BOLD;
        hrow->key = top_row_key(TOP_L_HOST, h, 0, 0);
        if (hrow->folded)
            continue;
        for (int c = 0; c < nc && n < max_rows; c++) {
            int i = cti[c].idx;
            const struct top_ct *ct = &s->cts[i];
            struct top_row *crow = &rows[n++];
            memset(crow, 0, sizeof *crow);
            crow->level = TOP_L_CT;
            crow->host = h;
            crow->ct = i;
            crow->rank = -1;
            crow->folded = i < TOP_MAX_CTS && v->ct_folded[i];
            crow->stale = ct->seen && top_ct_is_stale(s, ct, now);
            fill_ct(crow, s, ct, v, now);
            cellf(crow, TOP_COL_NAME, "  %s %s %s", ct->nranks ? (crow->folded ? closed_g : open_g) : " ",
                  ct_short_name(ct), s->jobs[ct->job].name);
            crow->key = top_row_key(TOP_L_CT, h, i, 0);
            if (crow->folded)
                continue;
            bool ct_self = host_self || ct_matches_name(s, ct, flt);
            struct sort_item ri[STATUS_MAX_RANKS];
            int nr = 0;
            for (int k = 0; k < ct->nranks; k++)
                if (ct_self || rank_matches(s, ct, &ct->ranks[k], flt, now))
                    ri[nr++] = (struct sort_item){
                        .idx = k, .sev = top_state_severity(top_rank_state(s, ct, &ct->ranks[k], now)),
                        .name = "", .num = ct->ranks[k].rank };
            sort_items(ri, nr, v->problems_first);
            for (int k = 0; k < nr && n < max_rows; k++) {
                const struct top_rank *r = &ct->ranks[ri[k].idx];
                struct top_row *rrow = &rows[n++];
                memset(rrow, 0, sizeof *rrow);
                rrow->level = TOP_L_RANK;
                rrow->host = h;
                rrow->ct = i;
                rrow->rank = ri[k].idx;
                rrow->stale = crow->stale;
                fill_rank(rrow, s, ct, r, v, now);
                cellf(rrow, TOP_COL_NAME, "      rank %d", r->rank);
                rrow->key = top_row_key(TOP_L_RANK, h, i, r->rank);
            }
        }
    }
    free(cti);
    return n;
}

const char *top_row_problem(const struct top_snapshot *s, const struct top_row *row, double now,
                            char *buf, size_t buf_sz)
{
    char age[16];
    buf[0] = '\0';
    if (row->host < 0 || row->host >= s->nhosts)
        return buf;
    const struct top_host *h = &s->hosts[row->host];
    const struct top_ct *ct = row->ct >= 0 && row->ct < s->ncts ? &s->cts[row->ct] : NULL;
    if (h->err[0] && !h->up)
        snprintf(buf, buf_sz, "%s: %s", h->name, h->err);
    else if (ct && ct->err[0])
        snprintf(buf, buf_sz, "%s: %s", ct->label, ct->err);
    else if (ct && top_ct_is_stale(s, ct, now))
        snprintf(buf, buf_sz, "%s: no status document for %s", ct->label,
                 top_fmt_age(now - ct->doc_mono, age, sizeof age));
    else if (ct && ct->reason[0] && row->state != TOP_RUNNING)
        snprintf(buf, buf_sz, "%s: %s", ct->label, ct->reason);
    return buf;
}

/* ------------------------------------------------------------------ header */

void top_summarize(const struct top_snapshot *s, double now, struct top_summary *ret)
{
    struct top_summary m = { 0 };
    m.hosts = s->nhosts;
    for (int h = 0; h < s->nhosts; h++) {
        /* up: the session is open and some container (if it has any) sends fresh documents */
        int n = 0, fresh = 0;
        for (int i = 0; i < s->ncts; i++)
            if (s->cts[i].host == h) {
                n++;
                fresh += !top_ct_is_stale(s, &s->cts[i], now);
            }
        if (s->hosts[h].up && (n == 0 || fresh > 0))
            m.hosts_up++;
    }
    m.cts = s->ncts;
    for (int j = 0; j < s->njobs; j++)
        m.ranks_expected += s->jobs[j].expected_ranks;
    for (int i = 0; i < s->ncts; i++) {
        const struct top_ct *ct = &s->cts[i];
        enum top_state cs = top_ct_state(s, ct, now);
        m.alerts[cs]++;
        bool stale = top_ct_is_stale(s, ct, now);
        if (ct->seen && !stale)
            m.cts_up++;
        for (int k = 0; k < ct->nranks; k++) {
            const struct top_rank *r = &ct->ranks[k];
            if (stale)
                continue;
            enum top_state rs = top_rank_state(s, ct, r, now);
            if (rs == TOP_RUNNING || rs == TOP_PROBATION || rs == TOP_DEGRADED)
                m.ranks_running++;
            if (r->has_hb) {
                m.ktok += r->ktok;
                if (!r->loss_finite)
                    m.nan_ranks++;
                if (r->gpu.valid && r->phase == HB_PHASE_TRAIN && r->gpu.util < TOP_GPU_LOW)
                    m.gpu_low++;
            }
            if (r->gpu.valid && r->gpu.slowdown_temp > 0 && r->gpu.temp >= r->gpu.slowdown_temp)
                m.gpu_hot++;
        }
    }
    for (int j = 0; j < s->njobs && !m.deploy[0]; j++) {
        const struct top_job *tj = &s->jobs[j];
        if (!tj->deploying)
            continue;
        /* the deploy's phase, as the containers show it */
        const char *phase = "staging";
        for (int i = 0; i < s->ncts; i++) {
            const struct top_ct *ct = &s->cts[i];
            if (ct->job != j || !ct->has_job)
                continue;
            if (ct->gang == GANG_STOPPING || ct->gang == GANG_STARTING) {
                phase = "activating";
                break;
            }
            if (ct->current[0] && strcmp(ct->current, ct->good) != 0)
                phase = ct->gang == GANG_REVERTED ? "reverting" : "probation";
        }
        snprintf(m.deploy, sizeof m.deploy, "%s: %s", tj->name, phase);
    }
    *ret = m;
}

void top_header_lines(const struct top_snapshot *s, const struct top_summary *m, bool ascii,
                      char *line1, size_t l1_sz, char *line2, size_t l2_sz)
{
    char spark[TOP_CELL_MAX * 2], age[16];
    top_fmt_spark(s->trend, s->ntrend, 16, ascii, spark, sizeof spark);
    snprintf(line1, l1_sz,
             "hosts %d/%d  containers %d/%d  ranks %d/%d running  Ktok/s %.1f %s  refresh %s",
             m->hosts_up, m->hosts, m->cts_up, m->cts, m->ranks_running, m->ranks_expected, m->ktok,
             spark, top_fmt_age(s->interval_s, age, sizeof age));
    size_t len = (size_t)snprintf(line2, l2_sz, "deploy: %s  alerts:", m->deploy[0] ? m->deploy : "none");
    bool any = false;
    static const enum top_state kinds[] = { TOP_UNREACHABLE, TOP_FAILED,   TOP_REVERTED,
                                            TOP_STALLED,     TOP_BACKOFF,  TOP_DEGRADED };
    for (size_t i = 0; i < ARRAY_SIZE(kinds) && len < l2_sz; i++)
        if (m->alerts[kinds[i]]) {
            len += (size_t)snprintf(line2 + len, l2_sz - len, " %s %d", top_state_name(kinds[i]),
                                    m->alerts[kinds[i]]);
            any = true;
        }
    if (len < l2_sz && m->nan_ranks) {
        len += (size_t)snprintf(line2 + len, l2_sz - len, " NaN %d", m->nan_ranks);
        any = true;
    }
    if (len < l2_sz && m->gpu_low) {
        len += (size_t)snprintf(line2 + len, l2_sz - len, " gpu-low %d", m->gpu_low);
        any = true;
    }
    if (len < l2_sz && m->gpu_hot) {
        len += (size_t)snprintf(line2 + len, l2_sz - len, " gpu-hot %d", m->gpu_hot);
        any = true;
    }
    if (!any && len < l2_sz)
        snprintf(line2 + len, l2_sz - len, " none");
}

/* ------------------------------------------------------------------ layout */

void top_layout(int width, struct top_view *v, int w[TOP_NCOLS])
{
    static const int base[TOP_NCOLS] = {
        [TOP_COL_NAME] = 16, [TOP_COL_REL] = 9,  [TOP_COL_STATE] = 11, [TOP_COL_STEP] = 7,
        [TOP_COL_LOSS] = 6,  [TOP_COL_KTOK] = 7, [TOP_COL_TREND] = 10, [TOP_COL_HB] = 4,
        [TOP_COL_RST] = 11,  [TOP_COL_GPU] = 6,  [TOP_COL_MEM] = 6,    [TOP_COL_TEMP] = 4,
    };
    static const enum top_col drop[] = { TOP_COL_MEM, TOP_COL_TEMP, TOP_COL_GPU, TOP_COL_RST,
                                         TOP_COL_TREND, TOP_COL_LOSS, TOP_COL_REL };
    memcpy(w, base, sizeof base);
    int total = -1;
    for (int c = 0; c < TOP_NCOLS; c++)
        total += w[c] + 1;
    for (size_t d = 0; d < ARRAY_SIZE(drop) && total > width; d++) {
        enum top_col c = drop[d];
        if (c == TOP_COL_TREND && total - (w[c] - 6) <= width) {
            w[c] -= total - width;
            total = width;
            break;
        }
        total -= w[c] + 1;
        w[c] = 0;
    }
    int spare = width - total;
    if (spare > 0 && w[TOP_COL_TREND]) {
        int grow = spare / 2 < 10 ? spare / 2 : 10;
        w[TOP_COL_TREND] += grow;
        spare -= grow;
    }
    if (spare > 0) {
        int grow = spare < 14 ? spare : 14;
        w[TOP_COL_NAME] += grow;
    }
    v->trend_width = w[TOP_COL_TREND];
}

/* ------------------------------------------------------------------ text frame */

struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16384;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(struct sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

static void sb_pad(struct sbuf *b, int n)
{
    static const char spaces[] = "                                                                ";
    while (n > 0) {
        int k = n < (int)sizeof spaces - 1 ? n : (int)sizeof spaces - 1;
        sb_add(b, spaces, (size_t)k);
        n -= k;
    }
}

/* Bytes of s that make up at most w display columns. */
static size_t bytes_for_width(const char *s, int w)
{
    size_t i = 0;
    int cols = 0;
    while (s[i]) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            if (cols == w)
                break;
            cols++;
        }
        i++;
    }
    return i;
}

static bool col_right_aligned(enum top_col c)
{
    return c == TOP_COL_STEP || c == TOP_COL_LOSS || c == TOP_COL_KTOK || c == TOP_COL_HB ||
           c == TOP_COL_GPU || c == TOP_COL_MEM || c == TOP_COL_TEMP;
}

const char *top_fmt_cell(const char *text, int w, bool right, char *buf, size_t buf_sz)
{
    size_t nb = bytes_for_width(text, w);
    int tw = top_str_width(text);
    int pad = w - (tw < w ? tw : w);
    size_t len = 0;
    if (right)
        for (; pad > 0 && len + 1 < buf_sz; pad--)
            buf[len++] = ' ';
    if (nb > buf_sz - 1 - len)
        nb = buf_sz - 1 - len;
    memcpy(buf + len, text, nb);
    len += nb;
    for (; pad > 0 && len + 1 < buf_sz; pad--)
        buf[len++] = ' ';
    buf[len] = '\0';
    return buf;
}

bool top_col_right_aligned(enum top_col c)
{
    return col_right_aligned(c);
}

static void sb_cell(struct sbuf *b, const char *text, int w, bool right)
{
    size_t nb = bytes_for_width(text, w);
    int tw = top_str_width(text);
    int shown = tw < w ? tw : w;
    if (right)
        sb_pad(b, w - shown);
    sb_add(b, text, nb);
    if (!right)
        sb_pad(b, w - shown);
}

static void sb_color(struct sbuf *b, unsigned attr)
{
    if (attr & TOP_A_BOLD)
        sb_puts(b, "\033[1m");
    if (attr & TOP_A_DIM)
        sb_puts(b, "\033[2m");
    if (attr & TOP_A_RED)
        sb_puts(b, "\033[31m");
    else if (attr & TOP_A_YELLOW)
        sb_puts(b, "\033[33m");
    else if (attr & TOP_A_GREEN)
        sb_puts(b, "\033[32m");
}

int top_render_text(const struct top_snapshot *s, const struct inventory *inv,
                    struct top_view *v, double now, int width, bool color, char **ret_text)
{
    int w[TOP_NCOLS];
    top_layout(width, v, w);
    int max_rows = s->nhosts + s->ncts * (STATUS_MAX_RANKS + 1) + 1;
    struct top_row *rows = malloc((size_t)max_rows * sizeof *rows);
    if (!rows)
        return -ENOMEM;
    int n = top_build_rows(s, inv, v, now, rows, max_rows);
    struct top_summary m;
    top_summarize(s, now, &m);
    char l1[512], l2[512];
    top_header_lines(s, &m, v->ascii, l1, sizeof l1, l2, sizeof l2);
    struct sbuf b = { 0 };
    sb_puts(&b, l1);
    sb_puts(&b, "\n");
    if (color && strstr(l2, "alerts: none") == NULL)
        sb_puts(&b, "\033[1;31m");
    sb_puts(&b, l2);
    if (color && strstr(l2, "alerts: none") == NULL)
        sb_puts(&b, "\033[0m");
    sb_puts(&b, "\n");
    if (color)
        sb_puts(&b, "\033[1m");
    bool first = true;
    for (int c = 0; c < TOP_NCOLS; c++) {
        if (!w[c])
            continue;
        if (!first)
            sb_puts(&b, " ");
        first = false;
        sb_cell(&b, top_col_title((enum top_col)c), w[c], col_right_aligned((enum top_col)c));
    }
    if (color)
        sb_puts(&b, "\033[0m");
    sb_puts(&b, "\n");
    for (int i = 0; i < n; i++) {
        const struct top_row *row = &rows[i];
        first = true;
        for (int c = 0; c < TOP_NCOLS; c++) {
            if (!w[c])
                continue;
            if (!first)
                sb_puts(&b, " ");
            first = false;
            unsigned a = row->attr[c] | (row->stale ? TOP_A_DIM : 0);
            if (color && a)
                sb_color(&b, a);
            sb_cell(&b, row->cell[c], w[c], col_right_aligned((enum top_col)c));
            if (color && a)
                sb_puts(&b, "\033[0m");
        }
        /* trailing spaces are noise in a captured frame */
        while (b.len && b.p[b.len - 1] == ' ')
            b.p[--b.len] = '\0';
        sb_puts(&b, "\n");
    }
    /* why rows have no fresh data, once per host or container */
    char last[TOP_ERR_MAX + 400] = "";
    for (int i = 0; i < n; i++) {
        char why[TOP_ERR_MAX + 400];
        if (rows[i].state != TOP_UNREACHABLE || !top_row_problem(s, &rows[i], now, why, sizeof why)[0])
            continue;
        if (strcmp(why, last) == 0)
            continue;
        snprintf(last, sizeof last, "%s", why);
        sb_puts(&b, "! ");
        sb_puts(&b, why);
        sb_puts(&b, "\n");
    }
    free(rows);
    if (b.oom) {
        free(b.p);
        return -ENOMEM;
    }
    *ret_text = b.p;
    return 0;
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

int top_event_parse(const char *line, size_t len, struct top_event *ret)
{
    if (len > TOP_EVENT_LINE_MAX)
        return -E2BIG;
    json_error_t jerr;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!o)
        return -EINVAL;
    int r = -EINVAL;
    json_t *seq = json_object_get(o, "seq"), *ts = json_object_get(o, "ts");
    json_t *job = json_object_get(o, "job"), *kind = json_object_get(o, "kind");
    json_t *rel = json_object_get(o, "release"), *det = json_object_get(o, "detail");
    if (!json_is_object(o) || !json_is_integer(seq) || !json_is_number(ts) || !json_is_string(kind))
        goto out;
    if ((job && !json_is_string(job)) || (rel && !json_is_string(rel)) || (det && !json_is_string(det)))
        goto out;
    struct top_event e = { 0 };
    e.seq = json_integer_value(seq);
    e.ts = json_number_value(ts);
    (void)str_copy(e.kind, sizeof e.kind, json_string_value(kind));
    if (job)
        (void)str_copy(e.job, sizeof e.job, json_string_value(job));
    if (rel)
        (void)str_copy(e.release, sizeof e.release, json_string_value(rel));
    if (det)
        (void)str_copy(e.detail, sizeof e.detail, json_string_value(det));
    *ret = e;
    r = 0;
out:
    json_decref(o);
    return r;
}

const char *top_event_format(const struct top_event *e, char *buf, size_t buf_sz)
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
