/* agent/liveness.c: see liveness.h. */
#include "agent/liveness.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/status.h"
#include "common/text.h"
#include "common/trainexit.h"

void liveness_policy_default(struct liveness_policy *p)
{
    p->first_step_s = 600;
    p->silence_s = 120;
    p->stall_s = 300;
    p->checkpoint_s = 900;
}

static bool deadline_ok(double s)
{
    return isfinite(s) && s >= 0 && s <= LIVENESS_MAX_S;
}

int liveness_policy_check(const struct liveness_policy *p)
{
    return deadline_ok(p->first_step_s) && deadline_ok(p->silence_s) && deadline_ok(p->stall_s) &&
                   deadline_ok(p->checkpoint_s)
               ? 0
               : -EINVAL;
}

static bool past(double limit, double age)
{
    return limit > 0 && age > limit;
}

static bool judge_one(const struct liveness_policy *p, const struct liveness_rank *r, double started,
                      double now, struct liveness_verdict *v)
{
    if (!r->alive || (r->has_hb && r->phase == HB_PHASE_DONE))
        return false;
    v->rank = r->rank;
    v->has_hb = r->has_hb;
    v->phase = r->has_hb ? r->phase : HB_PHASE_INIT;
    v->step = r->has_hb ? r->step : 0;
    v->bad_lines = r->bad_lines;
    v->hello = r->has_hb && r->hello;
    v->past_init[0] = v->before_init[0] = '\0';
    if (!r->has_hb || r->phase == HB_PHASE_INIT) {
        v->rule = LIVE_FIRST_STEP;
        v->age_s = now - started;
        v->limit_s = p->first_step_s;
        return past(v->limit_s, v->age_s);
    }
    if (r->phase == HB_PHASE_CHECKPOINT) {
        v->rule = LIVE_CHECKPOINT;
        v->age_s = now - r->phase_mono;
        v->limit_s = p->checkpoint_s;
        return past(v->limit_s, v->age_s);
    }
    /* phase train */
    v->rule = LIVE_SILENT;
    v->age_s = now - r->hb_mono;
    v->limit_s = p->silence_s;
    if (past(v->limit_s, v->age_s))
        return true;
    v->rule = LIVE_STALLED;
    /* the stall clock starts when the rank entered train (a checkpoint pause is not a stall) */
    double since = r->step_mono > r->phase_mono ? r->step_mono : r->phase_mono;
    v->age_s = now - since;
    v->limit_s = p->stall_s;
    return past(v->limit_s, v->age_s);
}

/* How far a rank got before its first step: 0 nothing sent, 1 a hello (the module started),
 * 2 init (hb.init(): past the rendezvous), 3 beyond. */
static int start_level(const struct liveness_rank *r)
{
    if (!r->has_hb)
        return 0;
    if (r->phase != HB_PHASE_INIT)
        return 3;
    return r->hello ? 1 : 2;
}

static void rank_list_add(char *buf, size_t sz, int rank)
{
    size_t n = strlen(buf);
    if (n + 4 >= sz) { /* room for "..." and the NUL */
        if (n < 3 || strcmp(buf + n - 3, "..."))
            snprintf(buf + n, sz - n, "...");
        return;
    }
    char one[16];
    snprintf(one, sizeof one, "%s%d", n ? ", " : "", rank);
    if (n + strlen(one) + 4 >= sz)
        snprintf(buf + n, sz - n, "...");
    else
        snprintf(buf + n, sz - n, "%s", one);
}

bool liveness_judge(const struct liveness_policy *p, const struct liveness_rank *r, int n,
                    double started_mono, double now, struct liveness_verdict *v)
{
    int best = -1;
    struct liveness_verdict t, b;
    for (int i = 0; i < n; i++) {
        if (!judge_one(p, &r[i], started_mono, now, &t))
            continue;
        if (best < 0 || (t.rule == LIVE_FIRST_STEP && b.rule == LIVE_FIRST_STEP &&
                         start_level(&r[i]) < start_level(&r[best]))) {
            best = i;
            b = t;
        }
        if (t.rule != LIVE_FIRST_STEP)
            break; /* the first rank past another deadline, as before */
    }
    if (best < 0)
        return false;
    if (b.rule == LIVE_FIRST_STEP && b.hello)
        for (int i = 0; i < n; i++)
            if (r[i].alive)
                rank_list_add(start_level(&r[i]) >= 2 ? b.past_init : b.before_init,
                              sizeof b.past_init, r[i].rank);
    *v = b;
    return true;
}

static bool proc_state_is_stopped(char c)
{
    return c == 'T' || c == 't';
}

enum liveness_blame liveness_blame_peer_lost(const struct liveness_policy *p,
                                             const struct liveness_rank *r, int n, int exit_idx,
                                             int exit_code, int exit_signal, double exit_mono,
                                             double now, struct liveness_verdict *v)
{
    if (exit_signal || exit_code != TX_PEER_LOST || p->silence_s <= 0 || exit_idx < 0 ||
        exit_idx >= n)
        return LIVE_BLAME_NONE;
    bool settled = now - exit_mono >= LIVENESS_PEER_LOST_SETTLE_S;
    bool suspect = false;
    int best = -1;
    for (int i = 0; i < n; i++) {
        const struct liveness_rank *s = &r[i];
        /* silent since before the exit, in the one phase where silence means blocked */
        if (i == exit_idx || !s->alive || !s->has_hb || s->phase != HB_PHASE_TRAIN ||
            s->hb_mono >= exit_mono)
            continue;
        suspect = true;
        bool stopped = proc_state_is_stopped(s->proc_state);
        if (now - s->hb_mono < p->silence_s / 2 || (!stopped && !settled))
            continue;
        if (best < 0) {
            best = i;
            continue;
        }
        bool best_stopped = proc_state_is_stopped(r[best].proc_state);
        if ((stopped && !best_stopped) || (stopped == best_stopped && s->hb_mono < r[best].hb_mono))
            best = i;
    }
    if (best < 0)
        return suspect && !settled ? LIVE_BLAME_WAIT : LIVE_BLAME_NONE;
    const struct liveness_rank *s = &r[best];
    *v = (struct liveness_verdict){
        .rule = LIVE_PEER_LOST,
        .rank = s->rank,
        .phase = s->phase,
        .has_hb = true,
        .step = s->step,
        .age_s = now - s->hb_mono,
        .limit_s = p->silence_s,
        .peer_rank = r[exit_idx].rank,
        .peer_code = exit_code,
        .stopped = proc_state_is_stopped(s->proc_state),
    };
    return LIVE_BLAME_SILENT;
}

const char *liveness_rank_word(const struct liveness_policy *p, const struct liveness_rank *r,
                               double now, double *age_s)
{
    *age_s = 0;
    if (!r->has_hb || r->phase == HB_PHASE_INIT)
        return "starting";
    if (r->phase == HB_PHASE_DONE)
        return "running";
    if (r->phase == HB_PHASE_CHECKPOINT) {
        *age_s = now - r->phase_mono;
        return "checkpointing";
    }
    double hb_age = now - r->hb_mono;
    if (p->silence_s > 0 && hb_age >= p->silence_s / 2) {
        *age_s = hb_age;
        return "silent";
    }
    double since = r->step_mono > r->phase_mono ? r->step_mono : r->phase_mono;
    if (p->stall_s > 0 && now - since >= p->stall_s / 2) {
        *age_s = now - since;
        return "stalled";
    }
    return "running";
}

const char *liveness_rule_name(enum liveness_rule rule)
{
    switch (rule) {
    case LIVE_FIRST_STEP: return "first_step_deadline";
    case LIVE_CHECKPOINT: return "checkpoint_deadline";
    case LIVE_SILENT: return "silence_deadline";
    case LIVE_STALLED: return "stall_deadline";
    case LIVE_PEER_LOST: return "peer_lost";
    default: return "ok";
    }
}

int liveness_describe(const struct liveness_verdict *v, const char *job, char *out, size_t outsz)
{
    int n;
    const char *rule = liveness_rule_name(v->rule);
    const char *ph = hb_phase_name(v->phase);
    long long step = (long long)v->step;
    switch (v->rule) {
    case LIVE_FIRST_STEP:
        if (v->hello) /* the module started: the script is past its imports, before hb.init() */
            n = snprintf(out, outsz, "rank %d never reached its first step after %.0f s (%s %.0f s): it "
                         "created Heartbeat() but never called hb.init(): " HB_HELLO_ONLY_HINT
                         " (ranks here past init: %s; not: %s)", v->rank, v->age_s, rule, v->limit_s,
                         v->past_init[0] ? v->past_init : "none", v->before_init[0] ? v->before_init : "none");
        else
            n = snprintf(out, outsz, "rank %d never reached its first step: %s after %.0f s (%s %.0f s)%s",
                         v->rank, v->has_hb ? "still in phase init" : "no heartbeat", v->age_s, rule, v->limit_s,
                         v->has_hb || v->bad_lines ? "" : "; " HB_NONE_SENT_HINT);
        break;
    case LIVE_CHECKPOINT:
        n = snprintf(out, outsz, "rank %d checkpointing for %.0f s at step %lld (%s %.0f s)", v->rank,
                     v->age_s, step, rule, v->limit_s);
        break;
    case LIVE_SILENT:
        n = snprintf(out, outsz, "rank %d silent: no heartbeat for %.0f s in phase %s at step %lld (%s %.0f s)",
                     v->rank, v->age_s, ph, step, rule, v->limit_s);
        break;
    case LIVE_STALLED:
        n = snprintf(out, outsz, "rank %d stalled: step %lld unchanged for %.0f s in phase %s while heartbeats flow (%s %.0f s)",
                     v->rank, step, v->age_s, ph, rule, v->limit_s);
        break;
    case LIVE_PEER_LOST:
        /* no deadline tripped: the peers' own timeout came first, so none is named */
        n = snprintf(out, outsz, "rank %d silent for %.0f s while its peers lost it (rank %d exited %d)%s",
                     v->rank, v->age_s, v->peer_rank, v->peer_code,
                     v->stopped ? " (stopped by a signal)" : "");
        break;
    default:
        n = snprintf(out, outsz, "rank %d ok", v->rank);
        break;
    }
    /* never a train heartbeat, but lines that were not heartbeats: the format is the story */
    if (n >= 0 && (size_t)n < outsz && v->bad_lines && v->rule == LIVE_FIRST_STEP) {
        /* short: the job's reason (256 bytes) quotes it after the agent's own words, and the
         * end of it is what the operator needs.  The agent's log says why each line was
         * dropped; it is in the container, so name the command that prints it from the
         * controller, as the controller's healthy_deadline verdict does (probation.c).
         * docs/protocol.md "Heartbeat" has the format */
        char where[JOB_NAME_MAX + 40] = "`drover logs --agent`";
        if (job && *job)
            snprintf(where, sizeof where, "`drover logs --job %.*s --agent`", JOB_NAME_MAX - 1,
                     job);
        int k = snprintf(out + n, outsz - (size_t)n, "; it wrote %llu %s (%s says why)",
                         (unsigned long long)v->bad_lines,
                         text_plural((long long)v->bad_lines, "line that is not a heartbeat",
                                     "lines that are not heartbeats"),
                         where);
        n = k < 0 ? k : n + k;
    }
    return n < 0 ? -EINVAL : n;
}
