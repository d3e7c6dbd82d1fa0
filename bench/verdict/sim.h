/* bench/verdict/sim.h: the verdict matrix's simulated workers (issue 13).  Each scenario is a
 * gang of synthetic ranks stepping on a simulated clock with seeded noise; every second each
 * container's agent status document (the same struct agent_status the real agent sends through
 * `drover-agent watch --json --interval 1`) goes through status_format/status_parse into the real
 * controller/probation.c.  The baseline is what the same code recorded when a healthy release of
 * the same gang was promoted (probation_samples).  Used by bench/verdict/matrix.c (prints the
 * matrix) and tests/unit/test-controller-verdict.c (asserts zero wrong verdicts); the rows that
 * need the agent's own policy (a promoted release crashing) run through the real agent in
 * bench/verdict/agent-rows.sh.
 *
 * Header-only on purpose: two programs share it and neither is part of a library.
 */
#ifndef DROVER_BENCH_VERDICT_SIM_H
#define DROVER_BENCH_VERDICT_SIM_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/samples.h"
#include "common/status.h"
#include "controller/deploy/probation.h"

#define SIM_NEW "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define SIM_OLD "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define SIM_MAX_RANKS 8

enum sim_expect { SIM_PROMOTE, SIM_REVERT };

struct sim_scenario {
    const char *name;
    enum sim_expect expect;
    int ncts, nproc;
    double slower;        /* candidate throughput: (1 - slower) x the baseline's */
    double noise;         /* sd of each step's time, as a fraction */
    double slow_first_s;  /* the first seconds run at slow_first_x the step time (compilation) */
    double slow_first_x;
    int every_n;          /* every n-th step takes every_x the time (evaluation, in the baseline
                             release too: it is the job's); 0 none */
    double every_x;
    double crash_at_s;    /* rank 0 exits with code 4 at this time; < 0 never */
    double nan_at_s;      /* rank 0's loss turns NaN; < 0 never */
    double hang_at_s;     /* every rank stops stepping, still heartbeating; < 0 never */
    double gap_at_s;      /* container 0's documents stop for gap_s; < 0 never */
    double gap_s;
    int slow_rank;        /* this rank runs at slow_rank_x speed; -1 none */
    double slow_rank_x;
    int no_rate;          /* ranks report no tok_s at all */
    int want_straggler;   /* the verdict must name this rank (-1: no check) */
};

/* The 11 rows the simulation runs (row 7, a promoted release crashing, is the agent's policy:
 * bench/verdict/agent-rows.sh).  tolerance 0.10 for all of them. */
static const struct sim_scenario sim_rows[] = {
    { "healthy, noise 5%", SIM_PROMOTE, 2, 2, 0, 0.05, 0, 1, 0, 1, -1, -1, -1, -1, 0, -1, 1, 0, -1 },
    { "15% slower", SIM_REVERT, 2, 2, 0.15, 0.05, 0, 1, 0, 1, -1, -1, -1, -1, 0, -1, 1, 0, -1 },
    { "5% slower, noise 3%", SIM_PROMOTE, 2, 2, 0.05, 0.03, 0, 1, 0, 1, -1, -1, -1, -1, 0, -1, 1, 0, -1 },
    { "3x slower for 20s (compile)", SIM_PROMOTE, 2, 2, 0, 0.05, 20, 3, 0, 1, -1, -1, -1, -1, 0, -1, 1, 0, -1 },
    { "every 20th step 3x (eval)", SIM_PROMOTE, 2, 2, 0, 0.05, 0, 1, 20, 3, -1, -1, -1, -1, 0, -1, 1, 0, -1 },
    { "crash at start", SIM_REVERT, 2, 2, 0, 0.05, 0, 1, 0, 1, 2, -1, -1, -1, 0, -1, 1, 0, -1 },
    { "NaN loss", SIM_REVERT, 2, 2, 0, 0.05, 0, 1, 0, 1, -1, 25, -1, -1, 0, -1, 1, 0, -1 },
    { "hang, process alive", SIM_REVERT, 2, 2, 0, 0.05, 0, 1, 0, 1, -1, -1, 30, -1, 0, -1, 1, 0, -1 },
    { "heartbeats missing 1 interval", SIM_PROMOTE, 2, 2, 0, 0.05, 0, 1, 0, 1, -1, -1, -1, 20, 2.5, -1, 1, 0, -1 },
    { "1 rank of 8 at half speed", SIM_REVERT, 1, 8, 0, 0.05, 0, 1, 0, 1, -1, -1, -1, -1, 0, 5, 0.5, 0, 5 },
    { "no samples (no tok_s)", SIM_REVERT, 2, 2, 0, 0.05, 0, 1, 0, 1, -1, -1, -1, -1, 0, -1, 1, 1, -1 },
};
#define SIM_NROWS ((int)(sizeof sim_rows / sizeof sim_rows[0]))

struct sim_result {
    enum probation_verdict verdict;
    int promoted;        /* the action: PASS promotes; everything else reverts (on_inconclusive = revert) */
    double t_verdict;    /* simulated seconds from activation */
    int straggler;
    int excluded;
    char reason[PROBATION_REASON_MAX];
};

/* xorshift64* and Box-Muller: the same draws everywhere. */
struct sim_rng { uint64_t s; };
static inline double sim_uniform(struct sim_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return ((r->s * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
}
static inline double sim_gauss(struct sim_rng *r)
{
    double u = sim_uniform(r), v = sim_uniform(r);
    return sqrt(-2 * log(u + 1e-300)) * cos(2 * M_PI * v);
}

static inline void sim_policy(struct inv_policy *p)
{
    inventory_policy_defaults(p);
    p->healthy_deadline_s = 15;
    p->warmup_steps = 10;
    p->min_healthy_time_s = 60;
    p->max_probation_time_s = 240;
    p->progress_deadline_s = 600;
    p->tolerance = 0.10;
    p->confidence = 0.95;
}

struct sim_rank {
    double next_t;   /* time the step in progress completes */
    long long step, tokens;
    double tok_s, step_ms;
    double last_hb;
};

/* Run one release through probation.  baseline: NULL for the healthy first release (no
 * baseline); otherwise the candidate `sc` against it.  ret_samples (may be NULL) receives the
 * pass window as a baseline set. */
static inline int sim_run(const struct sim_scenario *sc, int candidate, uint64_t seed,
                          const struct sample_set *baseline, struct sim_result *res,
                          struct sample_set *ret_samples)
{
    static const char *labels[] = { "h1:101", "h1:102", "h1:103", "h1:104" };
    struct inv_policy pol;
    sim_policy(&pol);
    struct probation *p;
    int world = sc->ncts * sc->nproc;
    int r = probation_new(&pol, "train", SIM_NEW, sc->ncts, labels, sc->nproc,
                          baseline ? baseline->ktok_s[0] : -1, false, 0, &p);
    if (r < 0)
        return r;
    if (baseline)
        (void)probation_set_baseline_samples(p, baseline);
    struct sim_rng rng = { seed * 0x9E3779B97F4A7C15ULL + (uint64_t)candidate + 1 };
    struct sim_rank rk[SIM_MAX_RANKS * 4];
    const double base_ms = 200, tokens = 8192; /* 40.96 Ktok/s per rank */
    for (int i = 0; i < world; i++) {
        /* ranks start within the first 3 s (loading, compiling the first step) */
        rk[i] = (struct sim_rank){ .next_t = 1 + 2 * sim_uniform(&rng), .step = 0 };
    }
    struct agent_status *st = calloc(1, sizeof *st);
    char *text = NULL;
    enum probation_verdict v = PROBATION_PENDING;
    double t;
    const double dt = 0.05;
    int tick = 0;
    for (t = 0; v == PROBATION_PENDING && t < 700; t += dt, tick++) {
        /* advance the ranks */
        for (int i = 0; i < world; i++) {
            struct sim_rank *x = &rk[i];
            bool hung = candidate && sc->hang_at_s >= 0 && t >= sc->hang_at_s;
            while (!hung && x->next_t <= t) {
                double ms = base_ms;
                /* evaluation steps are the job's, so the baseline release has them too */
                if (sc->every_n > 0 && (x->step + 1) % sc->every_n == 0)
                    ms *= sc->every_x;
                if (candidate) {
                    ms /= 1 - sc->slower;
                    if (t < sc->slow_first_s)
                        ms *= sc->slow_first_x;
                    if (i == sc->slow_rank)
                        ms /= sc->slow_rank_x;
                }
                double noise = candidate ? sc->noise : 0.05;
                ms *= exp(noise * sim_gauss(&rng));
                x->step++;
                x->tokens += (long long)tokens;
                x->step_ms = ms;
                x->tok_s = candidate && sc->no_rate ? 0 : tokens / (ms / 1000);
                x->last_hb = x->next_t;
                x->next_t += ms / 1000;
            }
            if (hung && t - x->last_hb >= 1)
                x->last_hb = t; /* a heartbeat thread that keeps beating with the same step */
        }
        if (tick % 20 != 0)
            continue; /* one document a second, like watch --interval 1 */
        for (int c = 0; c < sc->ncts; c++) {
            if (candidate && c == 0 && sc->gap_at_s >= 0 && t >= sc->gap_at_s &&
                t < sc->gap_at_s + sc->gap_s)
                continue;
            memset(st, 0, sizeof *st);
            strcpy(st->host, "ct");
            st->njobs = 1;
            struct job_status *js = &st->jobs[0];
            strcpy(js->job, "train");
            strcpy(js->current, SIM_NEW);
            strcpy(js->good, SIM_OLD);
            strcpy(js->release, SIM_NEW);
            js->state = GANG_RUNNING;
            js->nranks = sc->nproc;
            for (int lr = 0; lr < sc->nproc; lr++) {
                int g = c * sc->nproc + lr;
                struct rank_status *rs = &js->ranks[lr];
                rs->rank = g;
                rs->local_rank = lr;
                rs->pid = 100 + g;
                strcpy(rs->state, "running");
                rs->exit_code = -1;
                rs->hb_age_s = rk[g].step ? t - rk[g].last_hb : -1;
                heartbeat_init(&rs->hb);
                rs->has_hb = rk[g].step > 0;
                rs->hb.rank = g;
                rs->hb.step = rk[g].step;
                rs->hb.tok_s = rk[g].tok_s;
                rs->hb.tokens = candidate && sc->no_rate ? 0 : rk[g].tokens;
                rs->hb.step_ms = rk[g].step_ms;
                rs->hb.loss = 3.0;
                rs->hb.loss_finite = true;
                rs->hb.phase = HB_PHASE_TRAIN;
                strcpy(rs->hb.release, SIM_NEW);
                if (candidate && g == 0 && sc->nan_at_s >= 0 && t >= sc->nan_at_s) {
                    rs->hb.loss_finite = false;
                    rs->hb.nonfinite = 1;
                }
                if (candidate && g == 0 && sc->crash_at_s >= 0 && t >= sc->crash_at_s) {
                    strcpy(rs->state, "exited");
                    rs->exit_code = 4;
                    rs->pid = 0;
                    if (rk[g].step == 0)
                        rs->has_hb = false;
                }
            }
            /* the wire: format and parse, as the controller receives it */
            free(text);
            text = NULL;
            if (status_format(st, &text) < 0 || status_parse(text, strlen(text), st) < 0) {
                r = -EIO;
                goto out;
            }
            probation_feed(p, c, st, t);
        }
        v = probation_check(p, t);
    }
    res->verdict = v;
    res->promoted = v == PROBATION_PASS;
    res->t_verdict = t;
    res->straggler = probation_straggler(p);
    res->excluded = probation_warmup_excluded(p);
    snprintf(res->reason, sizeof res->reason, "%s", probation_reason(p));
    if (ret_samples && v == PROBATION_PASS && probation_samples(p, ret_samples) < 0)
        r = -ENODATA;
out:
    free(text);
    free(st);
    probation_free(p);
    return r;
}

/* One seed of one row: the healthy release first (no baseline, promoted: its samples are the
 * baseline), then the candidate.  Returns 1 when the verdict is wrong, 0 right, < 0 error. */
static inline int sim_row(const struct sim_scenario *sc, uint64_t seed, struct sim_result *res)
{
    struct sample_set *base = calloc(1, sizeof *base);
    struct sim_result first;
    int r = sim_run(sc, 0, seed, NULL, &first, base);
    if (r == 0 && !first.promoted)
        r = -EPROTO; /* the healthy baseline release must pass */
    if (r == 0)
        r = sim_run(sc, 1, seed, base, res, NULL);
    free(base);
    if (r < 0)
        return r;
    bool right = sc->expect == SIM_PROMOTE ? res->promoted : !res->promoted;
    if (right && sc->want_straggler >= 0)
        right = res->straggler == sc->want_straggler;
    return right ? 0 : 1;
}

#endif
