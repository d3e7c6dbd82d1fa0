/* controller/top/top_rows.c: the dashboard's rows: formatting helpers (ages, sparklines,
 * restarts, bytes), one row per host, container and rank with its cells and attributes (tree or
 * flat, sorted, filtered, folded), the problem line of a row, and the header totals.  Owns the
 * meaning of every column (docs/dashboard.md).  Pure like top_model.c: no I/O, no clock.
 */
#include "controller/top/top_model.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/text.h"
#include "common/util.h"
#include "controller/cmd.h"
#include "controller/deploy/state.h"

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
    case TOP_RENDEZVOUS:
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
    const struct top_job *j = top_job_of(s, ct);
    char b[TOP_CELL_MAX];
    row->state = top_rank_state(s, ct, r, now);
    fill_rel(row, j, r->release[0] ? r->release : ct->release);
    if ((row->state == TOP_STALLED || row->state == TOP_SILENT || row->state == TOP_CHECKPOINTING) &&
        r->state_age_s > 0) /* "checkpointing 42s": the agent's word and age, as `drover status` */
        cellf(row, TOP_COL_STATE, "%s %s", top_state_name(row->state), top_fmt_age(r->state_age_s, b, sizeof b));
    else
        cellf(row, TOP_COL_STATE, "%s", top_state_name(row->state));
    row->attr[TOP_COL_STATE] |= state_attr(row->state);
    if (r->has_hb) {
        cellf(row, TOP_COL_STEP, "%lld", (long long)r->step);
        if (r->loss_finite)
            cellf(row, TOP_COL_LOSS, "%.3f", r->loss);
        else if (r->loss_nan) {
            cellf(row, TOP_COL_LOSS, "NaN");
            row->attr[TOP_COL_LOSS] |= TOP_A_RED | TOP_A_BOLD;
        } else
            cellf(row, TOP_COL_LOSS, "-"); /* no loss yet, as `drover status` says */
        if (r->ktok > 0)
            cellf(row, TOP_COL_KTOK, "%.1f", r->ktok);
        else /* unknown, or a rank that is silent, stalled or gone (rank_status_ktok) */
            cellf(row, TOP_COL_KTOK, "-");
        if (top_rank_is_slow(s, ct, r))
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
    const struct top_job *j = top_job_of(s, ct);
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
            } else if (r->loss_nan)
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
        } else if (nloss)
            cellf(row, TOP_COL_LOSS, "%.3f", loss / nloss);
        else
            cellf(row, TOP_COL_LOSS, "-");
        if (ktok > 0) /* "-" when no rank has a figure now, as status's null (not "0.0") */
            cellf(row, TOP_COL_KTOK, ktok >= 1000 ? "%.0f" : "%.1f", ktok);
        else
            cellf(row, TOP_COL_KTOK, "-");
        double t = top_slow_threshold(j, ct->nranks);
        bool warm = true;
        for (int k = 0; k < ct->nranks; k++)
            warm = warm && top_rank_past_warmup(j, &ct->ranks[k]);
        if (t > 0 && warm && top_recent_ktok(ct->trend, ct->ntrend, ktok) < t)
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
    if (any && ktok > 0)
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

bool top_filter_hides_all(const struct top_snapshot *s, const struct inventory *inv,
                          const struct top_view *v, double now)
{
    if (!v->filter[0])
        return false;
    /* top_build_rows() is the one rule of what shows: one row either way is enough */
    struct top_row row;
    if (top_build_rows(s, inv, v, now, &row, 1) > 0)
        return false;
    struct top_view all = *v;
    all.filter[0] = '\0';
    return top_build_rows(s, inv, &all, now, &row, 1) > 0;
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
    else if (ct && !ct->seen && top_ct_is_stale(s, ct, now))
        snprintf(buf, buf_sz, "%s: its agent sent no status document in %s: is drover-agent stopped or "
                 "hung there?", ct->label, top_fmt_age(ct->asked_mono > 0 ? now - ct->asked_mono : -1, age, sizeof age));
    else if (ct && top_ct_is_stale(s, ct, now))
        snprintf(buf, buf_sz, "%s: no status document for %s", ct->label,
                 top_fmt_age(now - ct->doc_mono, age, sizeof age));
    else if (ct && ct->reason[0] && row->state != TOP_RUNNING)
        snprintf(buf, buf_sz, "%s: %s", ct->label, ct->reason);
    return text_escape_inplace(buf, buf_sz); /* agents' reasons and remote errors */
}

int top_notes(const struct top_snapshot *s, const struct top_view *v, char *buf, size_t sz)
{
    int nlines = 0;
    size_t off = 0;
    buf[0] = '\0';
    struct status_bad_marks *marks = malloc(sizeof *marks); /* ~11 KB */
    if (!marks)
        return 0;
    for (int ji = 0; ji < s->njobs; ji++) {
        memset(marks, 0, sizeof *marks);
        struct status_probation prob = { .left_s = 0 };
        for (int i = 0; i < s->ncts; i++) {
            const struct top_ct *ct = &s->cts[i];
            if (ct->job == ji && ct->seen && ct->has_job) {
                status_bad_marks_add(marks, ct->label, ct->bad, ct->bad_good, ct->bad_reason);
                status_probation_merge(&prob, &ct->prob);
            }
        }
        int nmarks = status_bad_marks_nlines(marks);
        for (int k = 0; k <= nmarks; k++) {
            char line[2400];
            if (k < nmarks) {
                status_bad_marks_line(marks, k, s->jobs[ji].name, v->inv_arg, line, sizeof line);
                (void)text_escape_inplace(line, sizeof line); /* the agents' reasons */
            } else {
                /* the table said `ID* probation`, not that no drover watches it, nor until when;
                 * read only when there is such a release (rare): not every frame */
                line[0] = '\0';
                if (prob.release[0] && !prob.watched && prob.left_s > 0) {
                    char pname[MANIFEST_NAME_MAX];
                    if (!v->state_dir || state_release_name(v->state_dir, prob.release, pname) < 0)
                        pname[0] = '\0';
                    status_probation_line(&prob, s->jobs[ji].name,
                                          status_release_held(v->state_dir, s->jobs[ji].name, prob.release),
                                          pname, v->inv_arg, time_wall(), line, sizeof line);
                    (void)text_escape_inplace(line, sizeof line); /* the release's name */
                }
                if (!line[0])
                    continue;
            }
            size_t n = strlen(line);
            if (off + n + 2 > sz)
                goto out;
            memcpy(buf + off, line, n);
            buf[off + n] = '\n';
            off += n + 1;
            buf[off] = '\0';
            nlines++;
        }
    }
out:
    free(marks);
    return nlines;
}

/* ------------------------------------------------------------------ header */

/* Distinct containers and those whose agent answers: the snapshot holds one entry per (job,
 * container), and a container running two jobs is one container (as `drover validate` counts
 * it).  It answers when any of its entries has a fresh document. */
static void count_cts(const struct top_snapshot *s, double now, int *ret_up, int *ret_all)
{
    bool up[TOP_MAX_CTS] = { false };
    int n = 0, nup = 0;
    for (int i = 0; i < s->ncts && i < TOP_MAX_CTS; i++) {
        const struct top_ct *ct = &s->cts[i];
        int d = ct->same_as >= 0 && ct->same_as <= i ? ct->same_as : i;
        n += d == i;
        if (ct->seen && !top_ct_is_stale(s, ct, now) && !up[d]) {
            up[d] = true;
            nup++;
        }
    }
    *ret_up = nup;
    *ret_all = n;
}

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
    count_cts(s, now, &m.cts_up, &m.cts);
    for (int j = 0; j < s->njobs; j++)
        m.ranks_expected += s->jobs[j].expected_ranks;
    for (int i = 0; i < s->ncts; i++) {
        const struct top_ct *ct = &s->cts[i];
        enum top_state cs = top_ct_state(s, ct, now);
        m.alerts[cs]++;
        bool stale = top_ct_is_stale(s, ct, now);
        for (int k = 0; k < ct->nranks; k++) {
            const struct top_rank *r = &ct->ranks[k];
            if (stale)
                continue;
            enum top_state rs = top_rank_state(s, ct, r, now);
            /* alive and doing its work: a rank writing a checkpoint is as much running as a slow one
             * (the header said 2/3 running during every checkpoint) */
            if (rs == TOP_RUNNING || rs == TOP_PROBATION || rs == TOP_DEGRADED || rs == TOP_CHECKPOINTING)
                m.ranks_running++;
            if (r->has_hb) {
                m.ktok += r->ktok;
                if (r->loss_nan)
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
            if (ct->current[0] && status_on_probation(ct->current, ct->good, ct->spec_unpromoted))
                phase = ct->gang == GANG_REVERTED ? "reverting" : STATUS_WORD_PROBATION;
        }
        snprintf(m.deploy, sizeof m.deploy, "%s: %s", tj->name, phase);
    }
    *ret = m;
}

void top_header_lines(const struct top_snapshot *s, const struct top_summary *m, bool ascii,
                      char *line1, size_t l1_sz, char *line2, size_t l2_sz)
{
    char spark[TOP_CELL_MAX * 2], age[16], kt[32] = "-";
    top_fmt_spark(s->trend, s->ntrend, 16, ascii, spark, sizeof spark);
    if (m->ktok > 0)
        snprintf(kt, sizeof kt, "%.1f", m->ktok);
    snprintf(line1, l1_sz,
             "hosts %d/%d  containers %d/%d  ranks %d/%d running  Ktok/s %s %s  refresh %s",
             m->hosts_up, m->hosts, m->cts_up, m->cts, m->ranks_running, m->ranks_expected, kt,
             spark, top_fmt_age(s->interval_s, age, sizeof age));
    size_t len = (size_t)snprintf(line2, l2_sz, "deploy: %s  alerts:", m->deploy[0] ? m->deploy : "none");
    bool any = false;
    static const enum top_state kinds[] = { TOP_UNREACHABLE, TOP_FAILED,   TOP_REVERTED,
                                            TOP_STALLED,     TOP_SILENT,   TOP_BACKOFF,  TOP_DEGRADED };
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
