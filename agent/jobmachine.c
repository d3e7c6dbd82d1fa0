/* agent/jobmachine.c: the job state machine (see jobmachine.h).
 *
 * Invariants: the next gang of a job is started only once the old one is gone (GANG_GONE); a
 * promoted release is never reverted on its gang's exit, only restarted or failed, unless it runs
 * a probation again (deployed again after another was promoted); a promoted release stopped for
 * a failure not retried is marked bad, as one that failed its probation is; a revert goes to the
 * good release only, never to another release marked bad (the good release itself may be marked
 * so, stopped while promoted: it stays the revert target until a promote replaces it, and a
 * requested start runs it, warned); at most one operation (activate, revert, stop, start) waits per job.  A start
 * or a revert requested while a requested stop is in flight replaces it (the controller aborted
 * a switch, or reverts two-phase: the job must come back, not stay down).  A switch's stop that
 * no activation follows within its switch deadline (the controller died between the phases)
 * starts the stopped release again.  A release's probation deadline survives a stop and start
 * of it (it is not re-armed, not lost).  A rank's "peer_stopped" exit is never "completed": the
 * gang restarts, but not before JM_PEER_STOP_GRACE_S, and a request in that grace cancels it as
 * if the exit had been that request's.  A revert with no_start (a deploy onto a job the operator
 * had stopped) makes the good release current and starts nothing: the job is left stopped as a
 * stop leaves it.  No I/O, no clock.
 */
#include "agent/jobmachine.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/agentcli.h"
#include "common/status.h"
#include "common/text.h"
#include "common/trainexit.h"
#include "common/util.h"

/* ---- policy ---- */

void crash_policy_default(struct crash_policy *p)
{
    p->crash_limit = 3;
    p->crash_window_s = 120;
    p->max_auto_rollbacks = 3;
    p->backoff_initial_s = 1;
    p->backoff_max_s = 60;
}

bool policy_exit_is_nonretryable(int exit_code)
{
    /* drover-train's codes whose "retry helps?" is "no" (common/trainexit.c): usage, config,
     * data, disk full (cases-field C18: no restart storm), diverged (C23: no blind restart from
     * a poisoned state), nomem, selftest. */
    return train_exit_is_nonretryable(exit_code);
}

double jm_hang_window_s(const struct crash_policy *p, double limit_s)
{
    return p->crash_window_s + p->crash_limit * (fmax(limit_s, 0) + p->backoff_max_s);
}

double policy_backoff(const struct crash_policy *p, int n)
{
    double d = p->backoff_initial_s;
    for (int i = 1; i < n && d < p->backoff_max_s; i++)
        d *= 2;
    return d < p->backoff_max_s ? d : p->backoff_max_s;
}

enum policy_action policy_on_gang_exit(const struct crash_policy *p, bool promoted, bool has_good,
                                       int exit_rank, int exit_code, int exit_signal,
                                       int crashes_in_window, double window_s, int auto_rollbacks,
                                       enum status_reason *code, char *reason, size_t reasonsz)
{
    char how[160];
    /* the cause, as the controller decides on it: what a rank did, before what the policy makes
     * of it (a crash loop, an exit code not retried) */
    *code = exit_code == JM_EXIT_DIVERGED ? STATUS_RC_NONFINITE
            : exit_code == JM_EXIT_HUNG   ? STATUS_RC_LIVENESS
                                          : STATUS_RC_RANK_EXIT;
    if (exit_code == JM_EXIT_DIVERGED)
        snprintf(how, sizeof how, "rank %d reported %d consecutive non-finite steps", exit_rank,
                 JM_DIVERGED_STEPS);
    else if (exit_code == JM_EXIT_HUNG)
        snprintf(how, sizeof how, "rank %d hung (liveness deadline)", exit_rank);
    else if (exit_signal)
        snprintf(how, sizeof how, "rank %d killed by signal %d", exit_rank, exit_signal);
    else if (exit_code == TX_PEER_STOPPED)
        snprintf(how, sizeof how, "rank %d exited with code %d (%s)", exit_rank, exit_code,
                 train_exit_info(TX_PEER_STOPPED)->text);
    else if (exit_code == TRAIN_EXIT_NOT_FOUND) /* the hint preflight gives for it */
        snprintf(how, sizeof how, "rank %d exited with code %d (%s)", exit_rank, exit_code,
                 TRAIN_EXIT_NOT_FOUND_TEXT);
    else
        snprintf(how, sizeof how, "rank %d exited with code %d", exit_rank, exit_code);
    if (!exit_signal && exit_code == 0) {
        snprintf(reason, reasonsz, "completed (%s)", how);
        *code = STATUS_RC_COMPLETED;
        return POLICY_DONE;
    }
    if (!exit_signal && exit_code == JM_EXIT_DEVICE) {
        /* The device or driver failed (drover-train exit 9, docs/errors.md): the environment's
         * fault, not the release's.  Reverting would blame a good release and restarting loops
         * on the same broken GPU: stop and mark the container for attention (issue 12).  The
         * controller refuses the next deploy here until gpu-check passes or it is forced. */
        snprintf(reason, reasonsz, "%s %s (device error): the GPU environment is broken; no "
                 "rollback, no restart: run drover-agent gpu-check in the container, fix it, then "
                 "deploy again", JM_ATTENTION_PREFIX, how);
        *code = STATUS_RC_ENVIRONMENT;
        return POLICY_FAIL;
    }
    /* on probation a hang is the release's verdict, not a reason to retry */
    bool fatal = exit_code == JM_EXIT_DIVERGED || (exit_code == JM_EXIT_HUNG && !promoted) ||
                 (!exit_signal && exit_code > 0 && policy_exit_is_nonretryable(exit_code));
    if (promoted) {
        /* A release that was good: an infrastructure fault, never a rollback. */
        if (exit_code == JM_EXIT_HUNG && crashes_in_window > p->crash_limit) {
            snprintf(reason, reasonsz, "%s on a promoted release, %d times in %.0f s (restart budget %d): "
                     "stopped; find why it hangs (drover logs), then drover start runs it again",
                     how, crashes_in_window, window_s, p->crash_limit);
            return POLICY_FAIL;
        }
        if (fatal) {
            snprintf(reason, reasonsz, "%s (non-retryable) on a promoted release: stopped", how);
            if (*code == STATUS_RC_RANK_EXIT)
                *code = STATUS_RC_FATAL_EXIT;
            return POLICY_FAIL;
        }
        snprintf(reason, reasonsz, "%s; restarting promoted release", how);
        return POLICY_RESTART;
    }
    bool loop = crashes_in_window >= p->crash_limit;
    if (!fatal && !loop) {
        snprintf(reason, reasonsz, "%s (%d of %d in %.0f s); restarting", how, crashes_in_window,
                 p->crash_limit, window_s);
        return POLICY_RESTART;
    }
    /* words for people; the code says the same to programs.  Non-finite loss is no exit: the
     * agent stopped the gang on its heartbeats ("non-retryable exit: rank 0 reported 3
     * consecutive non-finite steps" said it exited) */
    const char *why = exit_code == JM_EXIT_HUNG       ? STATUS_REASON_LIVENESS
                      : exit_code == JM_EXIT_DIVERGED ? "stopped for non-finite loss"
                      : fatal                         ? STATUS_REASON_FATAL_EXIT
                                                      : STATUS_REASON_CRASH_LOOP;
    /* a hang and non-finite loss keep their own code; a rank's exit became a crash loop or an
     * exit not retried */
    if (*code == STATUS_RC_RANK_EXIT)
        *code = fatal ? STATUS_RC_FATAL_EXIT : STATUS_RC_CRASH_LOOP;
    if (!has_good) {
        snprintf(reason, reasonsz, "%s: %s and no good release to return to", why, how);
        return POLICY_FAIL;
    }
    if (auto_rollbacks >= p->max_auto_rollbacks) {
        snprintf(reason, reasonsz, "%s: %s; %d automatic rollbacks in a row, giving up", why, how,
                 auto_rollbacks);
        return POLICY_FAIL;
    }
    snprintf(reason, reasonsz, "%s: %s%s", why, how, loop ? " (crash limit reached)" : "");
    return POLICY_REVERT;
}

/* ---- runtime ---- */

void jm_rt_init(struct jm_rt *rt)
{
    memset(rt, 0, sizeof *rt);
    spec_init(&rt->next_spec);
}

void jm_rt_done(struct jm_rt *rt)
{
    spec_done(&rt->next_spec);
}

bool jm_busy(const struct jm_rt *rt)
{
    return rt->next != JM_NEXT_NONE && rt->next != JM_NEXT_RESTART;
}

bool jm_peer_exit(const struct job_rec *j, const struct jm_rt *rt)
{
    if (j->state == GANG_BACKOFF)
        return rt->next == JM_NEXT_RESTART && rt->restart_peer_exit;
    return j->restarts > 0 && rt->last_restart_peer_exit &&
           (j->state == GANG_STARTING || j->state == GANG_RUNNING);
}

const char *jm_fx_name(enum jm_fx k)
{
    static const char *const names[] = {"stop-gang", "clear-gang", "switch", "start-gang", "event",
                                        "reply", "wait", "answer", "save", "gc", "history"};
    return (unsigned)k < ARRAY_SIZE(names) ? names[k] : "?";
}

/* ---- effects ---- */

static struct jm_effect *fx_add(struct jm_effects *out, enum jm_fx k)
{
    if (out->n >= JM_MAX_EFFECTS) { /* a bug: every step emits a bounded handful */
        static struct jm_effect sink;
        return &sink;
    }
    struct jm_effect *e = &out->fx[out->n++];
    memset(e, 0, sizeof *e);
    e->kind = k;
    return e;
}

static void fx_simple(struct jm_effects *out, enum jm_fx k) { (void)fx_add(out, k); }

static void fx_event(struct jm_effects *out, const char *what, const char *release, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fx_event(struct jm_effects *out, const char *what, const char *release, const char *fmt, ...)
{
    struct jm_effect *e = fx_add(out, JM_FX_EVENT);
    (void)str_copy(e->what, sizeof e->what, what);
    (void)str_copy(e->release, sizeof e->release, release ? release : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->text, sizeof e->text, fmt, ap);
    va_end(ap);
}

static void fx_msg(struct jm_effects *out, enum jm_fx k, int code, const char *text)
{
    struct jm_effect *e = fx_add(out, k);
    e->code = code;
    (void)str_copy(e->text, sizeof e->text, text ? text : "");
}

/* The reason and its code always change together: the controller reads the code. */
static void set_state(struct job_rec *j, enum gang_state s, enum status_reason code, const char *reason)
{
    j->state = s;
    j->reason_code = code;
    /* the reasons are built in JM_TEXT_MAX; the status document's is 256 bytes: cut at a word,
     * never inside a `command` ("(`drover logs --job J --agent` )" reached the history) */
    (void)text_cut_words(reason ? reason : "", NULL, j->reason, sizeof j->reason);
}

/* ---- rules ---- */

/* Is the current (release, spec) pair one that was promoted: the good pair, or promoted once? */
static bool current_is_promoted(struct job_rec *j)
{
    struct job_spec *s = state_current_spec(j);
    return state_on_good(j) || (s && s->promoted);
}

/* Is the current pair's gang to be judged as a promoted release's (an infrastructure fault:
 * restart, never revert)?  The good pair always is.  A pair promoted once and deployed again
 * after another was promoted runs a probation of its own (its deadline armed at activation):
 * until it is promoted again it is judged as any candidate, so that a crash loop, a
 * non-retryable exit, a hang or non-finite loss goes back to the good release, also when the
 * controller that would revert it is gone.  It used to count as promoted: restarted forever. */
static bool current_is_judged_promoted(struct job_rec *j)
{
    return state_on_good(j) || (current_is_promoted(j) && j->probation_deadline <= 0);
}

/* Point current at (id, digest) (previous keeps what it was: a spec change is no new release). */
static void switch_to(struct job_rec *j, const char *id, const char *digest, struct jm_effects *out)
{
    if (strcmp(j->current, id) != 0) {
        memcpy(j->previous, j->current, sizeof j->previous);
        (void)str_copy(j->current, sizeof j->current, id);
    }
    (void)str_copy(j->current_digest, sizeof j->current_digest, digest);
    struct jm_effect *e = fx_add(out, JM_FX_SWITCH);
    (void)str_copy(e->release, sizeof e->release, id);
}

/* A new run of the job gets a fresh restart budget: an activation, a revert, a requested start,
 * and the relaunch after a container restart (a new boot).  The restarts counted before it, the
 * exits in its crash window and the cause of the last restart were the run that ended: counted
 * against the new one, they lengthened its first backoff (policy_backoff grows with `restarts`)
 * and `drover status` said "restarted by its agent N times ..., last after ..." of the old one. */
static void fresh_restart_budget(struct job_rec *j, struct jm_rt *rt)
{
    j->restarts = 0;
    j->last_restart_reason[0] = '\0';
    rt->last_restart_peer_exit = false;
    rt->ncrash = 0;
}

/* Ask for j's current release to be started; the result comes back as START_OK/START_FAILED. */
static void start_gang(struct job_rec *j, struct jm_rt *rt, enum jm_start why, enum gang_state after,
                       enum status_reason code, const char *reason, struct jm_effects *out)
{
    if (!state_current_spec(j)) {
        set_state(j, GANG_FAILED, STATUS_RC_START_FAILURE, "no command recorded for the current release");
        fx_event(out, "failed", j->current, "%s", j->reason);
        fx_simple(out, JM_FX_SAVE);
        if (why == JM_START_ACTIVATE || why == JM_START_REVERT)
            fx_msg(out, JM_FX_ANSWER, AGENT_EXIT_FAIL, j->reason);
        return;
    }
    rt->starting = why;
    rt->start_state = after;
    rt->start_code = code;
    (void)str_copy(rt->start_reason, sizeof rt->start_reason, reason);
    struct jm_effect *e = fx_add(out, JM_FX_START_GANG);
    (void)str_copy(e->release, sizeof e->release, j->current);
    e->code = j->generation + 1;
}

static void run_next(const struct crash_policy *p, struct job_rec *j, struct jm_rt *rt, double now,
                     struct jm_effects *out);
static void set_rdzv(struct job_rec *j, const char *rdzv);

/* Request an operation; stops the gang first when one runs. */
static void request(const struct crash_policy *p, struct job_rec *j, struct jm_rt *rt, enum jm_next k,
                    enum status_reason code, const char *reason, double now, struct jm_effects *out)
{
    rt->next = k;
    rt->next_code = code;
    (void)str_copy(rt->next_reason, sizeof rt->next_reason, reason ? reason : "");
    if (rt->gang) {
        if (!rt->stopping) {
            rt->stopping = true;
            fx_simple(out, JM_FX_STOP_GANG);
        }
        set_state(j, GANG_STOPPING, code, reason);
        fx_simple(out, JM_FX_SAVE);
        return; /* run_next once the gang is gone */
    }
    run_next(p, j, rt, now, out);
}

static void run_activate(const struct crash_policy *p, struct job_rec *j, struct jm_rt *rt, double now,
                         struct jm_effects *out)
{
    (void)p;
    bool same = !strcmp(j->current, rt->next_spec.release);
    bool spec_changed = same && strcmp(j->current_digest, rt->next_spec.digest) != 0;
    int r = state_put_spec(j, &rt->next_spec, NULL);
    if (r < 0) {
        spec_done(&rt->next_spec);
        set_state(j, j->state == GANG_STOPPING ? GANG_STOPPED : j->state, STATUS_RC_NONE,
                  "cannot record the job spec");
        fx_simple(out, JM_FX_SAVE);
        fx_msg(out, JM_FX_ANSWER, AGENT_EXIT_FAIL, "cannot record the job spec");
        return;
    }
    char id[RELEASE_ID_LEN + 1], digest[SPEC_DIGEST_LEN + 1];
    memcpy(id, rt->next_spec.release, sizeof id);
    memcpy(digest, rt->next_spec.digest, sizeof digest);
    spec_done(&rt->next_spec);
    switch_to(j, id, digest, out);
    fresh_restart_budget(j, rt);
    j->probation_deadline = rt->next_probation_s > 0 ? now + rt->next_probation_s : 0;
    fx_event(out, "activate", j->current, "%s%s",
             spec_changed ? "the same release with a changed job spec"
             : same ? "relaunch of the same release" : "switched",
             j->probation_deadline > 0 ? " (probation deadline armed)" : "");
    start_gang(j, rt, JM_START_ACTIVATE, GANG_STARTING, STATUS_RC_NONE, "activated", out);
}

static void run_revert(struct job_rec *j, struct jm_rt *rt, bool automatic, struct jm_effects *out)
{
    char msg[JM_TEXT_MAX];
    if (!j->good[0] || !state_good_spec(j)) {
        snprintf(msg, sizeof msg, "%s; no good release to return to", rt->next_reason);
        set_state(j, GANG_FAILED, rt->next_code, msg);
        fx_event(out, "failed", j->current, "%s", msg);
        fx_simple(out, JM_FX_SAVE);
        fx_msg(out, JM_FX_ANSWER, AGENT_EXIT_FAIL, msg);
        return;
    }
    char from[RELEASE_ID_LEN + 1];
    memcpy(from, j->current, sizeof from);
    /* the good release left with another spec than its good one: a failed spec change, which
     * goes back to the good pair; the release itself is not to blame (never marked bad) */
    bool spec_only = !strcmp(from, j->good) && !state_on_good(j);
    bool again = state_on_good(j);
    /* A pair promoted once and deployed again runs a probation of its own (the deadline armed
     * at its activation, or just expired): failing that one is a failed probation as any other.
     * It used to count as promoted, stayed unmarked and a plain rollback went back to it while
     * `rollback --to` refused it (the controller's history said it failed). */
    bool on_probation = j->probation_deadline > 0 || rt->next_code == STATUS_RC_PROBATION_DEADLINE;
    bool not_blamed = automatic && rt->next_not_blamed;
    rt->next_not_blamed = false;
    bool leaving_bad = !state_on_good(j) && (!current_is_promoted(j) || on_probation) && !spec_only &&
                      !(rt->next_no_mark && !automatic) && !not_blamed;
    rt->next_no_mark = false;
    bool no_start = rt->next_no_start;
    rt->next_no_start = false;
    bool regen = rt->next_regen;
    rt->next_regen = false;
    switch_to(j, j->good, j->good_digest, out);
    set_rdzv(j, rt->next_rdzv);
    rt->next_rdzv[0] = '\0';
    fresh_restart_budget(j, rt);
    j->probation_deadline = 0;
    if (automatic)
        j->auto_rollbacks++;
    if (no_start && again)
        snprintf(msg, sizeof msg, "the good release %.12s is current; the job is left stopped, as "
                 "asked (revert --no-start): %s", from, rt->next_reason);
    else if (no_start)
        snprintf(msg, sizeof msg, "reverted from %.12s%s; the job is left stopped, as asked (revert "
                 "--no-start): %s", from, spec_only ? "'s changed job spec to its good one" : "",
                 rt->next_reason);
    else if (again && regen)
        /* its gang of the good release ran another generation than the one the controller's
         * revert starts everywhere (this agent went back by itself while the controller's stop
         * could not reach it): restarted to join the others */
        snprintf(msg, sizeof msg, "restarted the good release %.12s as the revert's new rendezvous "
                 "generation (its gang ran another one): %s", from, rt->next_reason);
    else if (again)
        /* already on the good pair with no gang of it running (it ended, failed to start, or
         * backs off): a start of it, not a revert "from" it to itself */
        snprintf(msg, sizeof msg, "started the good release %.12s again (no gang of it was running): %s",
                 from, rt->next_reason);
    else if (not_blamed)
        snprintf(msg, sizeof msg, "reverted on its own from %.12s, not marked bad (promoted before, it "
                 "ran in this container: this container cannot start it now): %s", from, rt->next_reason);
    else
        snprintf(msg, sizeof msg, "%s from %.12s%s: %s", automatic ? "reverted on its own" : "reverted",
                 from, spec_only ? "'s changed job spec to its good one" : "", rt->next_reason);
    /* A release reverted before it was ever promoted, or during a probation of it after it was
     * promoted before, failed its probation: never a rollback target again unless an operator
     * names it (and promotes it). */
    if (leaving_bad)
        (void)state_mark_bad(j, from, rt->next_reason);
    fx_event(out, "revert", j->current, "%s", msg);
    if (no_start) {
        /* recorded as a stop leaves it: an agent restart starts nothing (JM_EV_AGENT_START of a
         * stopped job), `start` runs the good release, now current */
        j->switch_deadline = 0;
        set_state(j, GANG_STOPPED, STATUS_RC_NONE, msg);
        fx_simple(out, JM_FX_SAVE);
        fx_msg(out, JM_FX_ANSWER, 0, msg);
        return;
    }
    if (automatic && leaving_bad) {
        struct jm_effect *h = fx_add(out, JM_FX_HISTORY);
        (void)str_copy(h->release, sizeof h->release, from);
        (void)str_copy(h->text, sizeof h->text, msg);
    }
    start_gang(j, rt, automatic ? JM_START_REVERT_AUTO : JM_START_REVERT,
               automatic ? GANG_REVERTED : GANG_STARTING, rt->next_code, msg, out);
}

static void run_next(const struct crash_policy *p, struct job_rec *j, struct jm_rt *rt, double now,
                     struct jm_effects *out)
{
    enum jm_next k = rt->next;
    rt->next = JM_NEXT_NONE;
    switch (k) {
    case JM_NEXT_NONE:
        return;
    case JM_NEXT_STOP:
        if (rt->next_restart_after_s > 0) {
            /* a switch's first phase: the activation (or revert) should follow at once */
            char why[200];
            j->switch_deadline = now + rt->next_restart_after_s;
            snprintf(why, sizeof why, STATUS_SWITCH_STOP_PREFIX "; starts %.12s again on its own unless "
                     "the switch goes on within %.0f s", j->current, rt->next_restart_after_s);
            rt->next_restart_after_s = 0;
            set_state(j, GANG_STOPPED, STATUS_RC_NONE, why);
        } else {
            set_state(j, GANG_STOPPED, STATUS_RC_NONE, "stopped by request");
        }
        fx_event(out, "stop", j->current, "%s", j->reason);
        fx_simple(out, JM_FX_SAVE);
        /* the controller's two-phase switch reads this as "every old rank here is gone"; a rank
         * that outlived SIGTERM is said (common/agentcli.h), as its checkpoint may be missing */
        if (rt->gone_sigkilled) {
            char said[160];
            snprintf(said, sizeof said, "stopped: no process of the gang is left; " AGENT_STOP_SIGKILLED
                     "%.0f s (a rank ignored SIGTERM)", rt->gone_grace_s);
            fx_msg(out, JM_FX_ANSWER, 0, said);
        } else
            fx_msg(out, JM_FX_ANSWER, 0, "stopped: no process of the gang is left");
        return;
    case JM_NEXT_START: {
        /* a requested start (`drover start`, or an aborted switch starting the old release
         * again) is a new run: the restarts counted before it, and their cause, were the run
         * the stop ended (`drover status` said "restarted by its agent N times" of that one
         * after a stop and start); after a failed crash or hang loop ("fix it, then drover
         * start") the exits before it would otherwise fail it again at its first hang */
        fresh_restart_budget(j, rt);
        /* a release marked bad (stopped while promoted for a failure not retried, say, and the
         * operator fixed its data) still starts when asked: said, never refused */
        const char *bad = state_bad_reason(j, j->current);
        if (bad)
            fx_event(out, "start", j->current, "%s; release %.12s is marked bad (%.160s): started "
                     "anyway, as asked", rt->next_reason, j->current, bad);
        else
            fx_event(out, "start", j->current, "%s", rt->next_reason);
        start_gang(j, rt, JM_START_REQUEST, GANG_STARTING, rt->next_code, rt->next_reason, out);
        return;
    }
    case JM_NEXT_ACTIVATE:
        run_activate(p, j, rt, now, out);
        return;
    case JM_NEXT_REVERT:
    case JM_NEXT_REVERT_AUTO:
        run_revert(j, rt, k == JM_NEXT_REVERT_AUTO, out);
        return;
    case JM_NEXT_RESTART: {
        rt->restart_peer_stopped = false;
        rt->last_restart_peer_exit = rt->restart_peer_exit;
        rt->restart_peer_exit = false;
        j->restarts++;
        /* kept while the restarted gang runs: its state's reason is cleared then, the cause is not */
        (void)str_copy(j->last_restart_reason, sizeof j->last_restart_reason, rt->next_reason);
        fx_event(out, "restart", j->current, "restart %d: %s", j->restarts, rt->next_reason);
        bool reverted = j->state == GANG_REVERTED;
        char reason[sizeof j->reason];
        /* the cause itself (exit code, the worker's last error, a hang) stays in the reason: the
         * controller's verdict quotes it, "restarted after a crash" alone named no cause, and
         * called a hang a crash */
        if (reverted)
            (void)str_copy(reason, sizeof reason, j->reason);
        else
            (void)snprintf(reason, sizeof reason, "restarted after %.200s", rt->next_reason);
        start_gang(j, rt, JM_START_RESTART, reverted ? GANG_REVERTED : GANG_STARTING,
                   reverted ? j->reason_code : rt->next_code, reason, out);
        return;
    }
    }
}

static int crashes_in_window(const struct jm_rt *rt, double now, double window)
{
    int n = 0;
    for (int k = 0; k < rt->ncrash; k++)
        n += now - rt->crash_mono[k] <= window;
    return n;
}

/* The agent's own history record of its stop of the promoted release (code: JM_FX_HISTORY's),
 * so that `drover history` shows it and drover can say when and why on a rollback to it. */
static void record_promoted_stop(struct job_rec *j, const char *reason, int code, struct jm_effects *out)
{
    struct jm_effect *h = fx_add(out, JM_FX_HISTORY);
    (void)str_copy(h->release, sizeof h->release, j->current);
    (void)str_copy(h->text, sizeof h->text, reason);
    h->code = code;
}

/* The promoted release that runs was stopped for a failure not retried (non-finite loss, a
 * non-retryable exit code): the release's own verdict, as a failed probation is.  It is marked
 * bad, so that no plain rollback goes back to it (it stays in goods, and a newcomer's rollback
 * from the release it was rolled back to picked it: "the previous good release"), and its
 * checkpoints are no other release's to resume from; the agent's own record in the job's
 * history says when and why, for the controller's skip warning and `drover history`.  It stays
 * the job's good release (the agent has no other verdict: `drover rollback` picks an earlier
 * one; a revert still goes to it and `drover start` runs it again, warned; a promote clears the
 * mark).  Not a hang loop (a promoted release's hangs are judged as infrastructure faults, like
 * its crashes: only recorded, record_promoted_stop with JM_HISTORY_STOPPED_HUNG) nor an
 * environment fault (exit 9), nor a full disk (exit 6: the container's, freed space lets it run
 * on). */
static void mark_bad_promoted(struct job_rec *j, const char *reason, struct jm_effects *out)
{
    char why[JM_TEXT_MAX];
    (void)snprintf(why, sizeof why, "stopped while promoted: %s", reason);
    state_mark_bad(j, j->current, why);
    record_promoted_stop(j, reason, JM_HISTORY_STOPPED, out);
}

/* The gang ended on its own (a rank exited first, or it was stopped for non-finite loss). */
static void after_exit(const struct crash_policy *p, struct job_rec *j, struct jm_rt *rt,
                       const struct jm_event *ev, struct jm_effects *out)
{
    int code = ev->code, sig = ev->sig;
    bool abnormal = sig != 0 || code != 0;
    if (abnormal) {
        if (rt->ncrash == JM_CRASH_HISTORY) {
            memmove(rt->crash_mono, rt->crash_mono + 1, sizeof rt->crash_mono[0] * (JM_CRASH_HISTORY - 1));
            rt->ncrash--;
        }
        rt->crash_mono[rt->ncrash++] = ev->now;
    }
    char reason[JM_TEXT_MAX];
    enum status_reason rc;
    bool promoted = current_is_judged_promoted(j);
    bool has_good = j->good[0] && !state_on_good(j);
    /* a hang is seen only once its deadline has passed: counted over a window that can hold
     * crash_limit + 1 of them (jobmachine.h, JM_EXIT_HUNG) */
    double window = !sig && code == JM_EXIT_HUNG && promoted ? jm_hang_window_s(p, ev->hang_limit_s)
                                                             : p->crash_window_s;
    enum policy_action a = policy_on_gang_exit(p, promoted, has_good, ev->rank, code, sig,
                                               crashes_in_window(rt, ev->now, window), window,
                                               j->auto_rollbacks, &rc, reason, sizeof reason);
    /* The worker's own last word (heartbeat "error", e.g. the missing shard's path) tells the
     * operator what to fix; the exit code alone does not. */
    if (abnormal && ev->text && ev->text[0]) {
        /* a liveness verdict names its rank already ("rank 0 never reached its first step..."):
         * said once, its end (what to run to see why) still fits the status reason's 256 bytes */
        char own[24];
        int k = snprintf(own, sizeof own, "rank %d ", ev->rank);
        bool named = k > 0 && strncmp(ev->text, own, (size_t)k) == 0;
        size_t n = strlen(reason);
        if (named)
            (void)snprintf(reason + n, sizeof reason - n, " [%s]", ev->text);
        else
            (void)snprintf(reason + n, sizeof reason - n, " [rank %d: %s]", ev->rank, ev->text);
    }
    /* a rank that stopped because a rank elsewhere was stopped: not this container's crash, and
     * perhaps the first sign of a stop that is on its way here too */
    bool peer_stopped = !sig && code == TX_PEER_STOPPED;
    if (peer_stopped && a == POLICY_RESTART)
        fx_event(out, "peer-stopped", j->current, "%s; the restart waits %.0f s for a stop or "
                 "switch that may be on its way", reason,
                 fmax(policy_backoff(p, j->restarts + 1), JM_PEER_STOP_GRACE_S));
    else
        fx_event(out, abnormal ? "crash" : "exit", j->current, "%s", reason);
    fx_simple(out, JM_FX_CLEAR_GANG);
    switch (a) {
    case POLICY_DONE:
        set_state(j, GANG_STOPPED, rc, reason);
        fx_simple(out, JM_FX_SAVE);
        break;
    case POLICY_FAIL:
        set_state(j, GANG_FAILED, rc, reason);
        j->probation_deadline = 0;
        fx_event(out, "failed", j->current, "%s", reason);
        /* a full disk (exit 6) is the container's, not the release's: it ran as the good
         * release, and once space is freed it is the one to run again (marked, a plain rollback
         * skipped it) */
        if (promoted && (rc == STATUS_RC_NONFINITE ||
                         (rc == STATUS_RC_FATAL_EXIT && (sig || code != TX_DISK_FULL))))
            mark_bad_promoted(j, reason, out);
        /* its restart budget spent on hangs: recorded (drover warns of it on a rollback or
         * deploy to it), never marked: a peer host down or a frozen network hangs every rank of
         * a good release the same way, and the release stays a rollback target */
        else if (promoted && rc == STATUS_RC_LIVENESS)
            record_promoted_stop(j, reason, JM_HISTORY_STOPPED_HUNG, out);
        fx_simple(out, JM_FX_SAVE);
        break;
    case POLICY_RESTART:
        rt->backoff_until = ev->now + policy_backoff(p, j->restarts + 1);
        if (peer_stopped)
            rt->backoff_until = fmax(rt->backoff_until, ev->now + JM_PEER_STOP_GRACE_S);
        rt->restart_peer_stopped = peer_stopped;
        rt->restart_peer_exit = !sig && train_exit_is_peer_effect(code);
        rt->next = JM_NEXT_RESTART;
        rt->next_code = rc;
        (void)str_copy(rt->next_reason, sizeof rt->next_reason, reason);
        if (j->state != GANG_REVERTED)
            set_state(j, GANG_BACKOFF, rc, reason);
        fx_simple(out, JM_FX_SAVE);
        break;
    case POLICY_REVERT:
        rt->next = JM_NEXT_REVERT_AUTO;
        rt->next_code = rc;
        (void)str_copy(rt->next_reason, sizeof rt->next_reason, reason);
        run_next(p, j, rt, ev->now, out);
        break;
    }
}

static void on_start_result(const struct crash_policy *p, struct job_rec *j, struct jm_rt *rt,
                            const struct jm_event *ev, struct jm_effects *out)
{
    enum jm_start why = rt->starting;
    rt->starting = JM_START_NONE;
    if (ev->kind == JM_EV_START_OK) {
        rt->gang = true;
        rt->stopping = false;
        j->generation++;
        set_state(j, rt->start_state, rt->start_code, rt->start_reason);
        fx_simple(out, JM_FX_SAVE);
        if (why == JM_START_ACTIVATE) {
            fx_msg(out, JM_FX_ANSWER, 0, "started");
            fx_simple(out, JM_FX_GC);
        } else if (why == JM_START_REVERT) {
            fx_msg(out, JM_FX_ANSWER, 0, rt->start_reason);
        } else if (why == JM_START_REQUEST) {
            fx_msg(out, JM_FX_ANSWER, 0, "started");
        }
        return;
    }
    const char *err = ev->text ? ev->text : "";
    char why_s[JM_TEXT_MAX];
    snprintf(why_s, sizeof why_s, "start failed: %s", err);
    set_state(j, GANG_FAILED, STATUS_RC_START_FAILURE, why_s);
    fx_event(out, "start-failed", j->current, "%s", err);
    fx_simple(out, JM_FX_SAVE);
    if (why == JM_START_REVERT || why == JM_START_REQUEST)
        fx_msg(out, JM_FX_ANSWER, AGENT_EXIT_EXEC, j->reason);
    if (why != JM_START_ACTIVATE)
        return;
    fx_msg(out, JM_FX_ANSWER, AGENT_EXIT_EXEC, j->reason);
    /* the release cannot run: like a non-retryable exit, back to good at once (also a release
     * promoted once that starts a probation again).  A release promoted before (a rollback's
     * target, a promoted release deployed again) ran in this container: that its exec fails
     * now (its #! interpreter gone, a path of the container's) is the container's doing, not
     * the release's, so it is not marked bad here: the controller's revert of the same rollback
     * is --no-mark, and the other containers, where it started, mark nothing either.  It was
     * marked in this container only, and the next `drover rollback` refused it as "marked bad
     * by its agents". */
    if (!current_is_judged_promoted(j) && j->good[0] && !state_on_good(j)) {
        rt->next = JM_NEXT_REVERT_AUTO;
        rt->next_not_blamed = current_is_promoted(j);
        rt->next_code = j->reason_code;
        (void)str_copy(rt->next_reason, sizeof rt->next_reason, j->reason);
        run_next(p, j, rt, ev->now, out);
    }
}

/* A request (stop, start, revert, activate) replaces a pending restart.  A restart that waited
 * after a "peer_stopped" exit was waiting for exactly this: the stop or switch that stopped the
 * other containers first.  That exit was the request's doing, not a crash: it leaves the crash
 * window, so repeated stops and starts of a job never add up to a crash loop. */
static void cancel_restart(struct jm_rt *rt)
{
    if (rt->next == JM_NEXT_RESTART && rt->restart_peer_stopped && rt->ncrash > 0)
        rt->ncrash--;
    rt->restart_peer_stopped = false;
    rt->restart_peer_exit = false;
    rt->next = JM_NEXT_NONE;
}

/* A start may bring a new rendezvous generation: the restarted gang then cannot pair with ranks
 * of the gang it replaces that are still on their way out elsewhere. */
static void set_rdzv(struct job_rec *j, const char *rdzv)
{
    struct job_spec *s = state_current_spec(j);
    if (s && rdzv && rdzv[0])
        (void)str_copy(s->rdzv, sizeof s->rdzv, rdzv);
}

/* A revert's rdzv that differs from the generation the current gang runs: the controller's
 * two-phase revert gives every container one new generation. */
static bool new_generation(struct job_rec *j, const char *rdzv)
{
    const struct job_spec *s = state_current_spec(j);
    return rdzv && rdzv[0] && (!s || strcmp(s->rdzv, rdzv) != 0);
}

static void on_request(const struct crash_policy *p, struct job_rec *j, struct jm_rt *rt,
                       const struct jm_event *ev, struct jm_effects *out)
{
    char msg[JM_TEXT_MAX];
    if (rt->quit) {
        fx_msg(out, JM_FX_REPLY, AGENT_EXIT_BUSY, "the agent is shutting down");
        return;
    }
    if (ev->kind == JM_EV_START && rt->next == JM_NEXT_STOP) {
        /* An aborted switch: the stop it asked for is still in flight (a rank slow to go).  The
         * job must not stay down: it starts again as soon as the gang is gone. */
        set_rdzv(j, ev->text);
        fx_msg(out, JM_FX_ANSWER, AGENT_EXIT_BUSY, "stop replaced by a start request");
        fx_simple(out, JM_FX_WAIT);
        rt->next = JM_NEXT_START;
        rt->next_restart_after_s = 0;
        j->switch_deadline = 0;
        rt->next_code = STATUS_RC_NONE;
        (void)str_copy(rt->next_reason, sizeof rt->next_reason, "started by request once the old gang was gone");
        set_state(j, GANG_STOPPING, STATUS_RC_NONE,
                  "stopping; starts again once every process of the gang is gone (start requested)");
        fx_simple(out, JM_FX_SAVE);
        return;
    }
    if (ev->kind == JM_EV_REVERT && rt->next == JM_NEXT_STOP && j->good[0] &&
        (!state_on_good(j) || ev->no_start)) {
        /* The controller's two-phase revert: its stop is still in flight here (a rank slow to
         * go) and the good release starts elsewhere.  The good release starts here as soon as
         * the gang is gone, never a job left down (with no_start: becomes current, and the job
         * stays stopped, as the operator had left it). */
        fx_msg(out, JM_FX_ANSWER, AGENT_EXIT_BUSY, "stop replaced by a revert request");
        fx_simple(out, JM_FX_WAIT);
        rt->next = JM_NEXT_REVERT;
        rt->next_restart_after_s = 0;
        j->switch_deadline = 0;
        rt->next_no_mark = ev->value != 0;
        rt->next_no_start = ev->no_start;
        (void)str_copy(rt->next_rdzv, sizeof rt->next_rdzv, ev->rdzv ? ev->rdzv : "");
        rt->next_code = STATUS_RC_NONE;
        (void)str_copy(rt->next_reason, sizeof rt->next_reason, ev->text && ev->text[0] ? ev->text : "requested");
        set_state(j, GANG_STOPPING, STATUS_RC_NONE, ev->no_start
                  ? "stopping; the good release becomes current once every process of the gang is "
                    "gone, and the job stays stopped (revert --no-start requested)"
                  : "stopping; the good release starts once every process of the gang is gone (revert requested)");
        fx_simple(out, JM_FX_SAVE);
        return;
    }
    if (ev->kind == JM_EV_REVERT && rt->next == JM_NEXT_REVERT_AUTO) {
        /* The controller's revert arrives while this agent goes back by itself (its probation
         * deadline passed; the failed gang still stopping): one revert, not two.  It takes the
         * controller's generation, which the other containers start as, and is answered once
         * the good gang started; the agent's own cause stays the reason and the release it
         * leaves is marked bad, as its own revert would. */
        fx_simple(out, JM_FX_WAIT);
        rt->next = JM_NEXT_REVERT;
        rt->next_code = STATUS_RC_NONE; /* a requested revert's, as below: the good gang starts */
        rt->next_no_mark = false;
        rt->next_no_start = ev->no_start;
        (void)str_copy(rt->next_rdzv, sizeof rt->next_rdzv, ev->rdzv ? ev->rdzv : "");
        fx_event(out, "revert", j->current, "the controller's revert joins this agent's own: %s",
                 rt->next_reason);
        fx_simple(out, JM_FX_SAVE);
        return;
    }
    if (jm_busy(rt)) {
        if (rt->next == JM_NEXT_REVERT_AUTO)
            snprintf(msg, sizeof msg, "job '%s': this agent is going back to the good release "
                     "%.12s by itself (%.120s); its failed gang is still stopping", j->job, j->good,
                     rt->next_reason);
        else
            snprintf(msg, sizeof msg, "job '%s': another operation is in progress", j->job);
        fx_msg(out, JM_FX_REPLY, AGENT_EXIT_BUSY, msg);
        return;
    }
    switch (ev->kind) {
    case JM_EV_ACTIVATE:
        spec_done(&rt->next_spec);
        if (spec_copy(&rt->next_spec, ev->spec) < 0) {
            fx_msg(out, JM_FX_REPLY, AGENT_EXIT_FAIL, "out of memory");
            return;
        }
        rt->next_probation_s = ev->value;
        j->switch_deadline = 0;
        fx_simple(out, JM_FX_WAIT);
        cancel_restart(rt);
        request(p, j, rt, JM_NEXT_ACTIVATE, STATUS_RC_NONE, "activating a new release", ev->now, out);
        return;
    case JM_EV_PROMOTE: {
        if (!ev->release || strcmp(j->current, ev->release) != 0) {
            snprintf(msg, sizeof msg, "release %.12s is not job '%s''s current release",
                     ev->release ? ev->release : "", j->job);
            fx_msg(out, JM_FX_REPLY, AGENT_EXIT_FAIL, msg);
            return;
        }
        if (!spec_digest_matches(j->current_digest, ev->spec_digest)) {
            /* the controller judged another pair than the one that runs now (a deploy or a
             * rollback switched it since, or its own activation never reached this agent):
             * promoting what runs would make an unjudged spec the good one */
            snprintf(msg, sizeof msg, "job '%s' runs release %.12s with job spec %.12s, not the "
                     "job spec %.12s this promote was asked for: not promoted", j->job, j->current,
                     j->current_digest[0] ? j->current_digest : "(unknown)", ev->spec_digest);
            fx_msg(out, JM_FX_REPLY, AGENT_EXIT_FAIL, msg);
            return;
        }
        struct job_spec *s = state_current_spec(j);
        if (s) {
            s->promoted = true;
            if (ev->value > 0)
                s->ktok_s = ev->value;
        }
        memcpy(j->good, j->current, sizeof j->good);
        memcpy(j->good_digest, j->current_digest, sizeof j->good_digest);
        state_unmark_bad(j, j->current);
        state_note_good(j, j->current, j->current_digest);
        j->probation_deadline = 0;
        j->auto_rollbacks = 0;
        fx_event(out, "promote", j->current, "ktok_s %.1f", ev->value);
        fx_simple(out, JM_FX_SAVE);
        fx_simple(out, JM_FX_GC);
        fx_msg(out, JM_FX_REPLY, 0, "promoted");
        return;
    }
    case JM_EV_REVERT:
        if (!j->good[0]) {
            snprintf(msg, sizeof msg, "job '%s' has no good release to revert to", j->job);
            fx_msg(out, JM_FX_REPLY, AGENT_EXIT_FAIL, msg);
            return;
        }
        if (!ev->no_start && state_on_good(j) && rt->gang && !rt->stopping &&
            !new_generation(j, ev->rdzv)) {
            /* its gang of the good release starts or runs (this agent went back by itself, say):
             * stopping it to start it again would only lose steps.  The controller asks so
             * without a generation when every container is back (its generation is the one the
             * rest of the gang runs); with a new one, the other containers start the good
             * release as that generation, and this gang must join them (below). */
            snprintf(msg, sizeof msg, AGENT_REVERT_ALREADY " %.12s, its gang %s: nothing "
                     "stopped or started", j->good, gang_state_name(j->state));
            fx_msg(out, JM_FX_REPLY, 0, msg);
            return;
        }
        fx_simple(out, JM_FX_WAIT);
        cancel_restart(rt);
        j->switch_deadline = 0;
        rt->next_regen = !ev->no_start && state_on_good(j) && rt->gang && !rt->stopping;
        rt->next_no_mark = ev->value != 0;
        /* with a gang running (of any release) it is stopped first, as for a revert */
        rt->next_no_start = ev->no_start;
        (void)str_copy(rt->next_rdzv, sizeof rt->next_rdzv, ev->rdzv ? ev->rdzv : "");
        request(p, j, rt, JM_NEXT_REVERT, STATUS_RC_NONE, ev->text && ev->text[0] ? ev->text : "requested",
                ev->now, out);
        return;
    case JM_EV_STOP:
        fx_simple(out, JM_FX_WAIT);
        cancel_restart(rt);
        /* the probation deadline is kept (it does not fire while the job is stopped): a release
         * on probation or held that is started again (an aborted switch) keeps its deadline */
        j->switch_deadline = 0;
        rt->next_restart_after_s = ev->value > 0 ? ev->value : 0;
        request(p, j, rt, JM_NEXT_STOP, STATUS_RC_NONE,
                ev->value > 0 ? "stopping for a switch" : "stopping by request", ev->now, out);
        return;
    case JM_EV_START:
        if (rt->gang && !rt->stopping) {
            fx_msg(out, JM_FX_REPLY, 0, "already running");
            return;
        }
        if (!j->current[0] || !state_current_spec(j)) {
            snprintf(msg, sizeof msg, "job '%s' has no release with a recorded command to start", j->job);
            fx_msg(out, JM_FX_REPLY, AGENT_EXIT_FAIL, msg);
            return;
        }
        set_rdzv(j, ev->text);
        j->switch_deadline = 0;
        fx_simple(out, JM_FX_WAIT);
        cancel_restart(rt);
        /* a fresh restart budget once the gang is gone (run_next, JM_NEXT_START) */
        request(p, j, rt, JM_NEXT_START, STATUS_RC_NONE, "started by request", ev->now, out);
        return;
    default:
        return;
    }
}

static void on_tick(const struct crash_policy *p, struct job_rec *j, struct jm_rt *rt, double now,
                    struct jm_effects *out)
{
    if (rt->quit || rt->starting != JM_START_NONE)
        return;
    if (rt->next == JM_NEXT_RESTART && !rt->gang && now >= rt->backoff_until) {
        run_next(p, j, rt, now, out);
        return;
    }
    if (j->switch_deadline > 0 && now >= j->switch_deadline && !jm_busy(rt) && !rt->gang &&
        j->state == GANG_STOPPED) {
        /* The switch that stopped the gang never went on (its controller died between the
         * phases, or lost every connection): the job must not stay down. */
        j->switch_deadline = 0;
        char why[300];
        snprintf(why, sizeof why, "no activation within the switch deadline after a switch stopped "
                 "the gang (the controller is gone?): starting %.12s again", j->current);
        fx_event(out, "switch-expired", j->current, "%s", why);
        fx_simple(out, JM_FX_SAVE);
        start_gang(j, rt, JM_START_RESUME, GANG_STARTING, STATUS_RC_NONE, why, out);
        return;
    }
    if (j->switch_deadline > 0 && j->state != GANG_STOPPED)
        j->switch_deadline = 0; /* something else started it */
    /* not while stopped: a stopped job keeps its deadline for when it is started again */
    if (j->probation_deadline > 0 && now >= j->probation_deadline && !jm_busy(rt) &&
        j->state != GANG_STOPPED && !state_on_good(j)) {
        j->probation_deadline = 0;
        char why[200];
        snprintf(why, sizeof why, "release %.12s not promoted before its probation deadline", j->current);
        fx_event(out, "probation-expired", j->current, "%s", why);
        request(p, j, rt, JM_NEXT_REVERT_AUTO, STATUS_RC_PROBATION_DEADLINE, why, now, out);
    }
}

void jm_step(const struct crash_policy *p, struct job_rec *j, struct jm_rt *rt,
             const struct jm_event *ev, struct jm_effects *out)
{
    char why[256];
    switch (ev->kind) {
    case JM_EV_ACTIVATE:
    case JM_EV_PROMOTE:
    case JM_EV_REVERT:
    case JM_EV_STOP:
    case JM_EV_START:
        on_request(p, j, rt, ev, out);
        return;
    case JM_EV_RANK_EXIT:
        /* one rank gone: the others must not hang in a collective (cases-field C11) */
        if (!rt->gang || rt->stopping)
            return;
        snprintf(why, sizeof why, "rank %d %s %d; %s", ev->rank,
                 ev->sig ? "killed by signal" : "exited with code", ev->sig ? ev->sig : ev->code,
                 STATUS_REASON_STOPPING_TAIL);
        rt->stopping = true;
        fx_simple(out, JM_FX_STOP_GANG);
        if (j->state != GANG_REVERTED)
            set_state(j, GANG_STOPPING, STATUS_RC_RANK_EXIT, why);
        fx_simple(out, JM_FX_SAVE);
        return;
    case JM_EV_DIVERGED:
        if (!rt->gang || rt->stopping)
            return;
        snprintf(why, sizeof why, "rank %d reported %d consecutive non-finite steps; %s", ev->rank,
                 JM_DIVERGED_STEPS, STATUS_REASON_STOPPING_TAIL);
        rt->stopping = true;
        fx_simple(out, JM_FX_STOP_GANG);
        if (j->state != GANG_REVERTED)
            set_state(j, GANG_STOPPING, STATUS_RC_NONFINITE, why);
        fx_simple(out, JM_FX_SAVE);
        return;
    case JM_EV_HUNG:
        if (!rt->gang || rt->stopping)
            return;
        snprintf(why, sizeof why, "%s; %s", ev->text ? ev->text : "liveness deadline",
                 STATUS_REASON_STOPPING_TAIL);
        rt->stopping = true;
        fx_event(out, "hung", j->current, "%s", ev->text ? ev->text : "");
        fx_simple(out, JM_FX_STOP_GANG);
        if (j->state != GANG_REVERTED)
            set_state(j, GANG_STOPPING, STATUS_RC_LIVENESS, why);
        fx_simple(out, JM_FX_SAVE);
        return;
    case JM_EV_TRAINING:
        if (rt->gang && !rt->stopping && j->state == GANG_STARTING) {
            set_state(j, GANG_RUNNING, STATUS_RC_NONE, "");
            fx_simple(out, JM_FX_SAVE);
        }
        return;
    case JM_EV_GANG_GONE:
        rt->gang = false;
        rt->stopping = false;
        rt->gone_sigkilled = ev->sigkilled;
        rt->gone_grace_s = ev->grace_s;
        if (rt->quit) { /* shutdown: the job keeps its state for the next agent */
            fx_simple(out, JM_FX_CLEAR_GANG);
            fx_simple(out, JM_FX_SAVE);
            return;
        }
        if (ev->rank >= 0 && rt->next == JM_NEXT_NONE) {
            after_exit(p, j, rt, ev, out);
            return;
        }
        fx_simple(out, JM_FX_CLEAR_GANG);
        if (rt->next == JM_NEXT_NONE) {
            set_state(j, GANG_STOPPED, STATUS_RC_NONE, "stopped");
            fx_simple(out, JM_FX_SAVE);
        }
        run_next(p, j, rt, ev->now, out);
        return;
    case JM_EV_START_OK:
    case JM_EV_START_FAILED:
        on_start_result(p, j, rt, ev, out);
        return;
    case JM_EV_TICK:
        on_tick(p, j, rt, ev->now, out);
        return;
    case JM_EV_AGENT_START:
        switch (j->state) {
        case GANG_STARTING:
        case GANG_RUNNING:
        case GANG_BACKOFF:
        case GANG_REVERTED: {
            bool rev = j->state == GANG_REVERTED;
            char reason[sizeof j->reason];
            /* after a container restart the gang ended with it: said so, not as a rank's death
             * (an adopted dead gang read as "rank 0 killed by signal 9") */
            (void)str_copy(reason, sizeof reason, rev ? j->reason
                                                  : ev->rebooted ? "relaunched after the container restarted "
                                                                   "(its gang ended with it)"
                                                                 : "relaunched after agent restart");
            if (!ev->rebooted) {
                /* the agent alone restarted (same boot): the run goes on, so does its budget */
                fx_event(out, "restart", j->current, "agent restarted: relaunching the gang");
            } else if (j->restarts > 0) {
                /* a new boot is a new run, as a requested start is: the restarts of the previous
                 * boot (and their cause) are not counted against it, nor said of it */
                char lr[200];
                (void)text_cut_words(j->last_restart_reason, NULL, lr, sizeof lr);
                fx_event(out, "restart", j->current, "the container restarted: relaunching the gang with a fresh "
                         "restart budget; the previous boot's %d %s not counted%s%s%s", j->restarts,
                         text_plural(j->restarts, "restart is", "restarts are"), lr[0] ? " (the last after " : "",
                         lr, lr[0] ? ")" : "");
                fresh_restart_budget(j, rt);
            } else {
                fx_event(out, "restart", j->current, "the container restarted: relaunching the gang");
                fresh_restart_budget(j, rt);
            }
            fx_simple(out, JM_FX_SAVE);
            start_gang(j, rt, JM_START_RESUME, rev ? GANG_REVERTED : GANG_STARTING,
                       rev ? j->reason_code : STATUS_RC_NONE, reason, out);
            return;
        }
        case GANG_STOPPING:
            set_state(j, GANG_STOPPED, STATUS_RC_NONE, "agent restarted while stopping");
            fx_simple(out, JM_FX_SAVE);
            return;
        default:
            return;
        }
    case JM_EV_ADOPT:
        rt->gang = true;
        switch (j->state) {
        case GANG_STARTING:
        case GANG_RUNNING:
        case GANG_REVERTED:
            fx_event(out, "adopt", j->current, "gang %d re-adopted from the previous agent%s%s",
                     j->generation, ev->text && ev->text[0] ? ": " : "", ev->text ? ev->text : "");
            fx_simple(out, JM_FX_SAVE);
            return;
        default:
            /* the job was being stopped (or should not run): finish that */
            rt->stopping = true;
            rt->next = JM_NEXT_NONE;
            fx_event(out, "adopt", j->current, "gang %d of the previous agent found while %s: stopping it",
                     j->generation, gang_state_name(j->state));
            fx_simple(out, JM_FX_STOP_GANG);
            set_state(j, GANG_STOPPING, STATUS_RC_NONE, "stopping the gang the previous agent left");
            fx_simple(out, JM_FX_SAVE);
            return;
        }
    case JM_EV_SHUTDOWN:
        /* the gang keeps running: its holders keep its heartbeats and exit status for the
         * next agent, which re-adopts it */
        rt->quit = true;
        if (jm_busy(rt))
            fx_msg(out, JM_FX_ANSWER, AGENT_EXIT_BUSY, "the agent is shutting down");
        spec_done(&rt->next_spec);
        rt->next = JM_NEXT_NONE;
        fx_simple(out, JM_FX_SAVE);
        return;
    }
}
