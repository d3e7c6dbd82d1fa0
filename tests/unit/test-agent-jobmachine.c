/* The job machine (agent/jobmachine.c) from tables: each row is one event, the effects the
 * daemon must apply (by name, in order), the job's state afterwards, and a text that must appear
 * in one of the row's journal events or answers, or in the job's reason.  No process is forked and no clock is read: the
 * rows carry the monotonic time.  A START_GANG effect is answered by the next row (START_OK or
 * START_FAILED), as the daemon does. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/agentcli.h"

#include "agent/jobmachine.h"
#include "agent/state.h"
#include "common/util.h"

#define A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define C "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
#define ANY (-1)

/* a row may leave out its last column (rc): zero, not checked */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

struct row {
    enum jm_ev kind;
    double now;
    const char *release; /* ACTIVATE: the spec's release; PROMOTE: the release; REVERT: the rdzv */
    double value;        /* ACTIVATE: probation_s; PROMOTE: Ktok/s */
    int rank, code, sig;
    const char *text;
    const char *fx;      /* expected effect names, space-separated ("" none) */
    int state;           /* expected gang_state afterwards, ANY to skip */
    const char *says;    /* substring of an event/answer text of this row, NULL to skip */
    const char *rc;      /* expected reason code afterwards, by its name (common/status.h), NULL
                            to skip: what the controller decides on */
};

struct world {
    struct crash_policy p;
    struct agent_state st;
    struct job_rec *j;
    struct jm_rt rt;
};

static void world_init(struct world *w)
{
    crash_policy_default(&w->p);
    state_init(&w->st);
    assert_int_equal(state_add_job(&w->st, "train", &w->j), 0);
    jm_rt_init(&w->rt);
}

static void world_done(struct world *w)
{
    jm_rt_done(&w->rt);
    state_done(&w->st);
}

static void run_rows(struct world *w, const struct row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        struct job_spec spec;
        spec_init(&spec);
        char *argv[] = {"bin/w.sh"};
        assert_int_equal(spec_set_argv(&spec, 1, argv), 0);
        if (r->release)
            (void)str_copy(spec.release, sizeof spec.release, r->release);
        if (r->kind == JM_EV_ACTIVATE && r->text) /* an ACTIVATE row's text: its spec digest */
            (void)str_copy(spec.digest, sizeof spec.digest, r->text);
        struct jm_event ev = {.kind = r->kind, .now = r->now, .spec = &spec, .release = r->release,
                              .value = r->value, .rank = r->rank, .code = r->code, .sig = r->sig,
                              .text = r->text ? r->text : "",
                              .rdzv = r->kind == JM_EV_REVERT ? r->release : NULL,
                              /* a PROMOTE row's text: the spec digest it is asked for */
                              .spec_digest = r->kind == JM_EV_PROMOTE ? r->text : NULL,
                              /* a GANG_GONE row's value: the liveness deadline that tripped */
                              .hang_limit_s = r->kind == JM_EV_GANG_GONE ? r->value : 0};
        struct jm_effects out = {0};
        jm_step(&w->p, w->j, &w->rt, &ev, &out);
        spec_done(&spec);
        char got[512] = "";
        bool said = r->says == NULL;
        for (int k = 0; k < out.n; k++) {
            size_t len = strlen(got);
            snprintf(got + len, sizeof got - len, "%s%s", k ? " " : "", jm_fx_name(out.fx[k].kind));
            if (r->says && strstr(out.fx[k].text, r->says))
                said = true;
            /* the agent's own history record: of the release it left (never the one it went
             * back to), in the revert's words; or (JM_HISTORY_STOPPED) of the promoted release
             * it stopped for a failure not retried, which stays current */
            bool stopped = out.fx[k].code == JM_HISTORY_STOPPED || out.fx[k].code == JM_HISTORY_STOPPED_HUNG;
            const char *stop_says = out.fx[k].code == JM_HISTORY_STOPPED ? "non-retryable" : "(restart budget";
            if (out.fx[k].kind == JM_FX_HISTORY &&
                (strlen(out.fx[k].release) != RELEASE_ID_LEN ||
                 (stopped ? strcmp(out.fx[k].release, w->j->current) != 0 || !strstr(out.fx[k].text, stop_says)
                          : !strcmp(out.fx[k].release, w->j->current) || !strstr(out.fx[k].text, "reverted on its own"))))
                fail_msg("row %zu: history effect of release '%s' (current %s), text '%s'", i,
                         out.fx[k].release, w->j->current, out.fx[k].text);
        }
        if (strcmp(got, r->fx) != 0)
            fail_msg("row %zu: effects '%s', expected '%s'", i, got, r->fx);
        if (r->state != ANY && (int)w->j->state != r->state)
            fail_msg("row %zu: state %s, expected %s (reason '%s')", i, gang_state_name(w->j->state),
                     gang_state_name((enum gang_state)r->state), w->j->reason);
        if (r->says && strstr(w->j->reason, r->says))
            said = true;
        if (!said)
            fail_msg("row %zu: no effect text says '%s'", i, r->says);
        if (r->rc && strcmp(status_reason_name(w->j->reason_code), r->rc) != 0)
            fail_msg("row %zu: reason code '%s', expected '%s' (reason '%s')", i,
                     status_reason_name(w->j->reason_code), r->rc, w->j->reason);
    }
}

#define RUN(w, rows) run_rows(w, rows, sizeof rows / sizeof rows[0])

/* A running, promoted A (generation 1). */
static const struct row good_a[] = {
    {JM_EV_ACTIVATE, 1, A, 0, 0, 0, 0, NULL, "wait switch event start-gang", GANG_STOPPED, "switched"},
    {JM_EV_START_OK, 1, NULL, 0, 0, 0, 0, NULL, "save answer gc", GANG_STARTING, "started"},
    {JM_EV_TRAINING, 2, NULL, 0, 0, 0, 0, NULL, "save", GANG_RUNNING, NULL},
    {JM_EV_TRAINING, 2, NULL, 0, 0, 0, 0, NULL, "", GANG_RUNNING, NULL},
    {JM_EV_PROMOTE, 3, A, 400, 0, 0, 0, NULL, "event save gc reply", GANG_RUNNING, "ktok_s 400"},
};

/* then B under probation: the old gang is stopped first, B starts once it is gone */
static const struct row then_b[] = {
    {JM_EV_ACTIVATE, 10, B, 60, 0, 0, 0, NULL, "wait stop-gang save", GANG_STOPPING, NULL},
    {JM_EV_TICK, 11, NULL, 0, 0, 0, 0, NULL, "", GANG_STOPPING, NULL},
    {JM_EV_GANG_GONE, 12, NULL, 0, -1, 0, 0, NULL, "clear-gang switch event start-gang", ANY, "probation deadline armed"},
    {JM_EV_START_OK, 12, NULL, 0, 0, 0, 0, NULL, "save answer gc", GANG_STARTING, NULL},
};

static void test_activate_promote(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    assert_string_equal(w.j->good, A);
    assert_int_equal(w.j->generation, 1);
    assert_true(state_find_spec(w.j, A, NULL)->promoted);
    RUN(&w, then_b);
    assert_string_equal(w.j->current, B);
    assert_string_equal(w.j->previous, A);
    assert_int_equal(w.j->generation, 2);
    assert_true(w.j->probation_deadline == 12 + 60);
    static const struct row rows[] = {
        /* a second operation while one waits: refused, nothing else happens */
        {JM_EV_PROMOTE, 13, A, 0, 0, 0, 0, NULL, "reply", GANG_STARTING, "not job 'train''s current"},
        {JM_EV_PROMOTE, 14, B, 380, 0, 0, 0, NULL, "event save gc reply", GANG_STARTING, NULL},
        {JM_EV_TICK, 200, NULL, 0, 0, 0, 0, NULL, "", GANG_STARTING, NULL}, /* promoted: no deadline */
    };
    RUN(&w, rows);
    assert_string_equal(w.j->good, B);
    assert_int_equal(w.j->ngoods, 2);
    assert_string_equal(w.j->goods[1], A);
    assert_string_equal(state_last_good(w.j, B), A);
    world_done(&w);
}

/* cases-field C11 + crash loop: an unpromoted release that keeps crashing goes back to good,
 * with backoff between restarts, and is marked bad. */
static void test_crash_loop_reverts_and_marks_bad(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    RUN(&w, then_b);
    static const struct row rows[] = {
        {JM_EV_RANK_EXIT, 20, NULL, 0, 1, 1, 0, NULL, "stop-gang save", GANG_STOPPING, "rank 1 exited with code 1", "rank-exit"},
        {JM_EV_RANK_EXIT, 20, NULL, 0, 0, 1, 0, NULL, "", GANG_STOPPING, NULL}, /* already stopping */
        {JM_EV_GANG_GONE, 21, NULL, 0, 1, 1, 0, NULL, "event clear-gang save", GANG_BACKOFF, "(1 of 3 in 120 s)", "rank-exit"},
        {JM_EV_TICK, 21.5, NULL, 0, 0, 0, 0, NULL, "", GANG_BACKOFF, NULL}, /* backoff 1 s */
        {JM_EV_TICK, 22, NULL, 0, 0, 0, 0, NULL, "event start-gang", GANG_BACKOFF, "restart 1"},
        {JM_EV_START_OK, 22, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING,
         "restarted after rank 1 exited with code 1", "rank-exit"}, /* the cause stays in the reason */
        {JM_EV_RANK_EXIT, 23, NULL, 0, 0, 0, 9, NULL, "stop-gang save", GANG_STOPPING, "signal 9"},
        {JM_EV_GANG_GONE, 23, NULL, 0, 0, 0, 9, NULL, "event clear-gang save", GANG_BACKOFF, "(2 of 3"},
        {JM_EV_TICK, 24, NULL, 0, 0, 0, 0, NULL, "", GANG_BACKOFF, NULL}, /* backoff 2 s now */
        {JM_EV_TICK, 25, NULL, 0, 0, 0, 0, NULL, "event start-gang", GANG_BACKOFF, "restart 2"},
        {JM_EV_START_OK, 25, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, NULL},
        {JM_EV_RANK_EXIT, 26, NULL, 0, 0, 1, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 26, NULL, 0, 0, 1, 0, NULL, "event clear-gang switch event history start-gang", ANY, "crash limit reached"},
        {JM_EV_START_OK, 26, NULL, 0, 0, 0, 0, NULL, "save", GANG_REVERTED, NULL, "crash-loop"},
        {JM_EV_TRAINING, 27, NULL, 0, 0, 0, 0, NULL, "", GANG_REVERTED, NULL, "crash-loop"}, /* stays said */
    };
    RUN(&w, rows);
    assert_string_equal(w.j->current, A);
    assert_int_equal(w.j->auto_rollbacks, 1);
    assert_true(state_is_bad(w.j, B));
    assert_false(state_is_bad(w.j, A));
    assert_true(w.j->probation_deadline == 0);
    assert_null(state_last_good(w.j, A)); /* B is not a rollback target */
    world_done(&w);
}

/* Non-retryable exit codes: a new release goes back at once; a promoted one is not restarted
 * blindly (C18, C23); exit 0 means done.  The worker's last heartbeat error is in the reason. */
static void test_exit_codes(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    RUN(&w, then_b);
    static const struct row b_data_error[] = {
        {JM_EV_RANK_EXIT, 20, NULL, 0, 0, 4, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 20, NULL, 0, 0, 4, 0, "no shard /d/x", "event clear-gang switch event history start-gang", ANY, "[rank 0: no shard /d/x]"},
        {JM_EV_START_OK, 20, NULL, 0, 0, 0, 0, NULL, "save", GANG_REVERTED, "non-retryable exit", "fatal-exit"},
        /* A itself, promoted, runs out of disk: failed, no restart, no rollback, and not marked
         * bad (no history record): the disk is the container's fault, not the release's */
        {JM_EV_RANK_EXIT, 30, NULL, 0, 0, 6, 0, NULL, "stop-gang save", GANG_REVERTED, NULL},
        {JM_EV_GANG_GONE, 30, NULL, 0, 0, 6, 0, NULL, "event clear-gang event save", GANG_FAILED, "non-retryable) on a promoted release", "fatal-exit"},
        {JM_EV_TICK, 100, NULL, 0, 0, 0, 0, NULL, "", GANG_FAILED, NULL},
    };
    RUN(&w, b_data_error);
    assert_string_equal(w.j->current, A);
    world_done(&w);

    world_init(&w);
    RUN(&w, good_a);
    static const struct row done[] = {
        {JM_EV_RANK_EXIT, 5, NULL, 0, 0, 0, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 5, NULL, 0, 0, 0, 0, NULL, "event clear-gang save", GANG_STOPPED, "completed", "completed"},
        {JM_EV_TICK, 100, NULL, 0, 0, 0, 0, NULL, "", GANG_STOPPED, NULL},
    };
    RUN(&w, done);
    world_done(&w);

    world_init(&w);
    RUN(&w, good_a);
    static const struct row promoted_crash[] = { /* infrastructure fault: restart, never revert */
        {JM_EV_RANK_EXIT, 5, NULL, 0, 0, 1, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 5, NULL, 0, 0, 1, 0, NULL, "event clear-gang save", GANG_BACKOFF, "restarting promoted release", "rank-exit"},
        {JM_EV_TICK, 6, NULL, 0, 0, 0, 0, NULL, "event start-gang", GANG_BACKOFF, NULL},
        {JM_EV_START_OK, 6, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, NULL},
    };
    RUN(&w, promoted_crash);
    assert_string_equal(w.j->current, A);
    world_done(&w);
}

/* Probation runs on the monotonic time the rows carry: no wall clock is ever consulted, so a
 * step of the wall clock cannot change the verdict.  Expiry reverts to good and marks bad. */
static void test_probation_deadline(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    RUN(&w, then_b); /* deadline 72 */
    static const struct row rows[] = {
        {JM_EV_TRAINING, 13, NULL, 0, 0, 0, 0, NULL, "save", GANG_RUNNING, NULL},
        {JM_EV_TICK, 71.9, NULL, 0, 0, 0, 0, NULL, "", GANG_RUNNING, NULL},
        {JM_EV_TICK, 72, NULL, 0, 0, 0, 0, NULL, "event stop-gang save", GANG_STOPPING, "probation deadline", "probation-deadline"},
        {JM_EV_TICK, 73, NULL, 0, 0, 0, 0, NULL, "", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 74, NULL, 0, -1, 0, 0, NULL, "clear-gang switch event history start-gang", ANY, "reverted on its own"},
        {JM_EV_START_OK, 74, NULL, 0, 0, 0, 0, NULL, "save", GANG_REVERTED, NULL, "probation-deadline"},
    };
    RUN(&w, rows);
    assert_string_equal(w.j->current, A);
    assert_true(state_is_bad(w.j, B));
    world_done(&w);
}

/* Non-finite loss from a worker that keeps going: stopped, judged like a diverged exit. */
static void test_diverged(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    RUN(&w, then_b);
    static const struct row rows[] = {
        {JM_EV_DIVERGED, 20, NULL, 0, 1, 0, 0, NULL, "stop-gang save", GANG_STOPPING, "non-finite", "nonfinite"},
        {JM_EV_DIVERGED, 20.1, NULL, 0, 1, 0, 0, NULL, "", GANG_STOPPING, NULL},
        /* the agent stopped it on its heartbeats: no exit, and the words do not say one */
        {JM_EV_GANG_GONE, 21, NULL, 0, 1, JM_EXIT_DIVERGED, 0, NULL, "event clear-gang switch event history start-gang", ANY,
         "stopped for non-finite loss: rank 1 reported 3 consecutive non-finite steps"},
        {JM_EV_START_OK, 21, NULL, 0, 0, 0, 0, NULL, "save", GANG_REVERTED, NULL, "nonfinite"},
    };
    RUN(&w, rows);
    assert_null(strstr(w.j->reason, "exit"));
    world_done(&w);

    /* drover-train's own diverged exit (7) is an exit, not retried: its words stay */
    world_init(&w);
    RUN(&w, good_a);
    RUN(&w, then_b);
    static const struct row exited[] = {
        {JM_EV_GANG_GONE, 21, NULL, 0, 1, 7, 0, NULL, "event clear-gang switch event history start-gang", ANY,
         "non-retryable exit: rank 1 exited with code 7"},
        {JM_EV_START_OK, 21, NULL, 0, 0, 0, 0, NULL, "save", GANG_REVERTED, NULL, "fatal-exit"},
    };
    RUN(&w, exited);
    world_done(&w);
}

/* Liveness (agent/liveness.h): a release on probation that hangs is reverted; a promoted one that
 * hangs later restarts from its checkpoint with backoff, until the restart budget is spent. */
#define SILENT "rank 1 silent: no heartbeat for 61 s in phase train at step 120 (silence_deadline 60 s)"
static void test_hung(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    RUN(&w, then_b);
    static const struct row probation[] = {
        {JM_EV_HUNG, 20, NULL, 0, 1, 0, 0, SILENT, "event stop-gang save", GANG_STOPPING, "rank 1 silent", "liveness"},
        {JM_EV_HUNG, 20.1, NULL, 0, 1, 0, 0, SILENT, "", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 21, NULL, 0, 1, JM_EXIT_HUNG, 0, SILENT, "event clear-gang switch event history start-gang", ANY, "silence_deadline 60 s"},
        {JM_EV_START_OK, 21, NULL, 0, 0, 0, 0, NULL, "save", GANG_REVERTED, NULL, "liveness"},
    };
    RUN(&w, probation);
    assert_string_equal(w.j->current, A);
    world_done(&w);

    world_init(&w);
    RUN(&w, good_a);
    /* A is promoted: each hang restarts it (backoff 1, 2, 4 s) until crash_limit (3) is passed */
    static const struct row promoted[] = {
        {JM_EV_HUNG, 20, NULL, 0, 0, 0, 0, SILENT, "event stop-gang save", GANG_STOPPING, "silent"},
        {JM_EV_GANG_GONE, 21, NULL, 0, 0, JM_EXIT_HUNG, 0, SILENT, "event clear-gang save", GANG_BACKOFF, "restarting promoted release"},
        {JM_EV_TICK, 21.5, NULL, 0, 0, 0, 0, NULL, "", GANG_BACKOFF, NULL},
        {JM_EV_TICK, 22.1, NULL, 0, 0, 0, 0, NULL, "event start-gang", ANY, NULL},
        /* a hang is no crash: "restarted after a crash: rank 0 hung" called it one */
        {JM_EV_START_OK, 22.1, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, "restarted after rank 0 hung"},
        {JM_EV_HUNG, 30, NULL, 0, 0, 0, 0, SILENT, "event stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 31, NULL, 0, 0, JM_EXIT_HUNG, 0, SILENT, "event clear-gang save", GANG_BACKOFF, NULL},
        {JM_EV_TICK, 34, NULL, 0, 0, 0, 0, NULL, "event start-gang", ANY, NULL},
        {JM_EV_START_OK, 34, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, NULL},
        {JM_EV_HUNG, 40, NULL, 0, 0, 0, 0, SILENT, "event stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 41, NULL, 0, 0, JM_EXIT_HUNG, 0, SILENT, "event clear-gang save", GANG_BACKOFF, NULL},
        {JM_EV_TICK, 50, NULL, 0, 0, 0, 0, NULL, "event start-gang", ANY, NULL},
        {JM_EV_START_OK, 50, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, NULL},
        {JM_EV_HUNG, 60, NULL, 0, 0, 0, 0, SILENT, "event stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 61, NULL, 0, 0, JM_EXIT_HUNG, 0, SILENT, "event clear-gang event history save", GANG_FAILED, "restart budget 3", "liveness"},
    };
    RUN(&w, promoted);
    assert_string_equal(w.j->current, A);
    world_done(&w);
}

/* A fresh job (no good release) whose worker writes another format: the agent's first_step
 * verdict ends in the command that shows why its lines were dropped, and that end must survive
 * the status reason's 256 bytes ("[rank 0: rank 0 never reached..." said the rank twice and cut
 * it).  Reason codes are unchanged. */
#define BADLINES "rank 0 never reached its first step: no heartbeat after 8 s (first_step_deadline 8 s); " \
                 "it wrote 16 lines that are not heartbeats (`drover logs --job fresh --agent` says why)"
static void test_hung_first_step_reason_fits(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    static const struct row rows[] = {
        {JM_EV_ACTIVATE, 1, A, 60, 0, 0, 0, NULL, "wait switch event start-gang", GANG_STOPPED, "switched"},
        {JM_EV_START_OK, 1, NULL, 0, 0, 0, 0, NULL, "save answer gc", GANG_STARTING, "started"},
        {JM_EV_HUNG, 9, NULL, 0, 0, 0, 0, BADLINES, "event stop-gang save", GANG_STOPPING, NULL, "liveness"},
        {JM_EV_GANG_GONE, 10, NULL, 0, 0, JM_EXIT_HUNG, 0, BADLINES, "event clear-gang event save", GANG_FAILED,
         "no good release to return to [" BADLINES "]", "liveness"},
    };
    RUN(&w, rows);
    assert_null(strstr(w.j->reason, "[rank 0: rank 0"));
    assert_true(strlen(w.j->reason) < sizeof w.j->reason - 1);
    world_done(&w);
}

/* The same verdict with a longer start (a longer job name, more words): the status reason's 256
 * bytes cut it inside its `drover logs --job J --agent`, and the history showed
 * "(`drover logs --job nc-x --agent` )".  The cut is at a word before the quoted command,
 * marked with an ellipsis. */
#define BADLINES_LONG "rank 0 never reached its first step: no heartbeat after 8 s (first_step_deadline 8 s, " \
                      "counted from the start of the gang); it wrote 16 lines that are not heartbeats " \
                      "(`drover logs --job fresh --agent` says why)"
static void test_reason_not_cut_inside_a_command(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    static const struct row rows[] = {
        {JM_EV_ACTIVATE, 1, A, 60, 0, 0, 0, NULL, "wait switch event start-gang", GANG_STOPPED, "switched"},
        {JM_EV_START_OK, 1, NULL, 0, 0, 0, 0, NULL, "save answer gc", GANG_STARTING, "started"},
        {JM_EV_HUNG, 9, NULL, 0, 0, 0, 0, BADLINES_LONG, "event stop-gang save", GANG_STOPPING, NULL, "liveness"},
        {JM_EV_GANG_GONE, 10, NULL, 0, 0, JM_EXIT_HUNG, 0, BADLINES_LONG, "event clear-gang event save", GANG_FAILED,
         "no good release to return to [", "liveness"},
    };
    RUN(&w, rows);
    int quotes = 0;
    for (const char *c = w.j->reason; *c; c++)
        quotes += *c == '`';
    if (quotes % 2)
        fail_msg("a `command` cut in two: '%s'", w.j->reason);
    assert_non_null(strstr(w.j->reason, "\xe2\x80\xa6")); /* the cut is marked */
    world_done(&w);
}

/* Hangs of a promoted release at the pace a real one hangs: each is seen only once its 60 s
 * silence deadline has passed, so four back-to-back hangs span 210 s.  Counted in crash_window
 * (120 s), never more than two fell inside it and the promoted release was restarted forever,
 * though docs/agent.md promised "at most --crash-limit times ... then failed".  Counted in the
 * hang window (120 + 3 * (60 + 60) = 480 s), the fourth stops it.  Hangs 20 minutes apart are
 * restarted every time. */
static void test_hung_promoted_real_pace(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    static const struct row loop[] = {
        {JM_EV_HUNG, 70, NULL, 0, 0, 0, 0, SILENT, "event stop-gang save", GANG_STOPPING, "silent"},
        {JM_EV_GANG_GONE, 71, NULL, 60, 0, JM_EXIT_HUNG, 0, SILENT, "event clear-gang save", GANG_BACKOFF, "restarting promoted release"},
        {JM_EV_TICK, 72, NULL, 0, 0, 0, 0, NULL, "event start-gang", ANY, NULL},
        {JM_EV_START_OK, 72, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, NULL},
        {JM_EV_TRAINING, 75, NULL, 0, 0, 0, 0, NULL, "save", GANG_RUNNING, NULL},
        {JM_EV_HUNG, 140, NULL, 0, 0, 0, 0, SILENT, "event stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 141, NULL, 60, 0, JM_EXIT_HUNG, 0, SILENT, "event clear-gang save", GANG_BACKOFF, NULL},
        {JM_EV_TICK, 143, NULL, 0, 0, 0, 0, NULL, "event start-gang", ANY, NULL},
        {JM_EV_START_OK, 143, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, NULL},
        {JM_EV_TRAINING, 146, NULL, 0, 0, 0, 0, NULL, "save", GANG_RUNNING, NULL},
        {JM_EV_HUNG, 210, NULL, 0, 0, 0, 0, SILENT, "event stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 211, NULL, 60, 0, JM_EXIT_HUNG, 0, SILENT, "event clear-gang save", GANG_BACKOFF, NULL},
        {JM_EV_TICK, 215, NULL, 0, 0, 0, 0, NULL, "event start-gang", ANY, NULL},
        {JM_EV_START_OK, 215, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, NULL},
        {JM_EV_TRAINING, 218, NULL, 0, 0, 0, 0, NULL, "save", GANG_RUNNING, NULL},
        {JM_EV_HUNG, 280, NULL, 0, 0, 0, 0, SILENT, "event stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 281, NULL, 60, 0, JM_EXIT_HUNG, 0, SILENT, "event clear-gang event history save", GANG_FAILED,
         "4 times in 480 s (restart budget 3): stopped", "liveness"},
    };
    RUN(&w, loop);
    assert_string_equal(w.j->current, A);
    assert_non_null(strstr(w.j->reason, "drover start"));
    /* the operator's start gets a fresh budget: the next hang restarts it, not "5 times" */
    static const struct row started[] = {
        {JM_EV_START, 300, NULL, 0, 0, 0, 0, "g2", "wait event start-gang", GANG_FAILED, "started by request"},
        {JM_EV_START_OK, 300, NULL, 0, 0, 0, 0, NULL, "save answer", GANG_STARTING, NULL},
        {JM_EV_TRAINING, 303, NULL, 0, 0, 0, 0, NULL, "save", GANG_RUNNING, NULL},
        {JM_EV_HUNG, 370, NULL, 0, 0, 0, 0, SILENT, "event stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 371, NULL, 60, 0, JM_EXIT_HUNG, 0, SILENT, "event clear-gang save", GANG_BACKOFF,
         "restarting promoted release"},
    };
    RUN(&w, started);
    world_done(&w);

    world_init(&w);
    RUN(&w, good_a);
    for (int k = 0; k < 6; k++) { /* a hang every 20 minutes: each restarted */
        double t = 1200.0 * (k + 1);
        const struct row slow[] = {
            {JM_EV_HUNG, t, NULL, 0, 0, 0, 0, SILENT, "event stop-gang save", GANG_STOPPING, NULL},
            {JM_EV_GANG_GONE, t + 1, NULL, 60, 0, JM_EXIT_HUNG, 0, SILENT, "event clear-gang save", GANG_BACKOFF,
             "restarting promoted release"},
            {JM_EV_TICK, t + 70, NULL, 0, 0, 0, 0, NULL, "event start-gang", ANY, NULL},
            {JM_EV_START_OK, t + 70, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, NULL},
            {JM_EV_TRAINING, t + 75, NULL, 0, 0, 0, 0, NULL, "save", GANG_RUNNING, NULL},
        };
        RUN(&w, slow);
    }
    assert_int_equal(w.j->restarts, 6);
    world_done(&w);
}

/* A promoted release restarted after a hang and running again: its state's reason is cleared,
 * `drover status -o json` showed reason "" with restarts 1.  The cause stays in
 * last_restart_reason (kept in state.json, said in the status document) until the next
 * activation or revert. */
static void test_last_restart_reason_kept(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    static const struct row rows[] = {
        {JM_EV_HUNG, 20, NULL, 0, 0, 0, 0, SILENT, "event stop-gang save", GANG_STOPPING, "silent"},
        {JM_EV_GANG_GONE, 21, NULL, 0, 0, JM_EXIT_HUNG, 0, SILENT, "event clear-gang save", GANG_BACKOFF, NULL},
        {JM_EV_TICK, 22.1, NULL, 0, 0, 0, 0, NULL, "event start-gang", ANY, NULL},
        {JM_EV_START_OK, 22.1, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, "restarted after rank 0 hung"},
        {JM_EV_TRAINING, 23, NULL, 0, 0, 0, 0, NULL, "save", GANG_RUNNING, NULL},
    };
    RUN(&w, rows);
    assert_int_equal(w.j->restarts, 1);
    assert_null(strstr(w.j->reason, "hung"));
    assert_ptr_equal(strstr(w.j->last_restart_reason, "rank 0 hung (liveness deadline)"), w.j->last_restart_reason);
    assert_non_null(strstr(w.j->last_restart_reason, "rank 1 silent: no heartbeat")); /* the worker's words */
    /* kept across an agent restart */
    char *text = NULL;
    struct agent_state back;
    assert_int_equal(state_format(&w.st, &text), 0);
    assert_int_equal(state_parse(text, strlen(text), &back), 0);
    assert_string_equal(back.jobs[0].last_restart_reason, w.j->last_restart_reason);
    state_done(&back);
    free(text);
    /* a state.json without it (an older agent): "" */
    w.j->last_restart_reason[0] = '\0';
    assert_int_equal(state_format(&w.st, &text), 0);
    assert_null(strstr(text, "last_restart_reason"));
    assert_int_equal(state_parse(text, strlen(text), &back), 0);
    assert_string_equal(back.jobs[0].last_restart_reason, "");
    state_done(&back);
    free(text);
    world_done(&w);
}

/* `drover stop` then `drover start` of a job its agent had restarted: the start is a new run, so
 * the count and its cause start again.  They were kept, and `drover status` went on saying "was
 * restarted by its agent 1 time ..., last after rank 0 hung" of the run the stop had ended. */
static void test_start_resets_restarts(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    static const struct row rows[] = {
        {JM_EV_HUNG, 20, NULL, 0, 0, 0, 0, SILENT, "event stop-gang save", GANG_STOPPING, "silent"},
        {JM_EV_GANG_GONE, 21, NULL, 0, 0, JM_EXIT_HUNG, 0, SILENT, "event clear-gang save", GANG_BACKOFF, NULL},
        {JM_EV_TICK, 22.1, NULL, 0, 0, 0, 0, NULL, "event start-gang", ANY, NULL},
        {JM_EV_START_OK, 22.1, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, NULL},
        {JM_EV_TRAINING, 23, NULL, 0, 0, 0, 0, NULL, "save", GANG_RUNNING, NULL},
    };
    RUN(&w, rows);
    assert_int_equal(w.j->restarts, 1);
    assert_non_null(strstr(w.j->last_restart_reason, "hung"));
    /* a stop keeps them (the status of a stopped job still tells how its run went) */
    static const struct row stop[] = {
        {JM_EV_STOP, 30, NULL, 0, 0, 0, 0, NULL, "wait stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 31, NULL, 0, -1, 0, 0, NULL, "clear-gang event save answer", GANG_STOPPED, "stopped"},
    };
    RUN(&w, stop);
    assert_int_equal(w.j->restarts, 1);
    static const struct row start[] = {
        {JM_EV_START, 40, NULL, 0, 0, 0, 0, "g2", "wait event start-gang", GANG_STOPPED, "started by request"},
        {JM_EV_START_OK, 40, NULL, 0, 0, 0, 0, NULL, "save answer", GANG_STARTING, NULL},
        {JM_EV_TRAINING, 42, NULL, 0, 0, 0, 0, NULL, "save", GANG_RUNNING, NULL},
    };
    RUN(&w, start);
    assert_int_equal(w.j->restarts, 0);
    assert_string_equal(w.j->last_restart_reason, "");
    assert_string_equal(w.j->current, A);
    world_done(&w);
}

/* The controller's revert after an operator's Ctrl-C during probation (value 1, --no-mark):
 * B reached no verdict and stays a rollback target; the same revert without it marks B bad. */
static void test_revert_no_mark(void **state)
{
    (void)state;
    for (int mark = 0; mark < 2; mark++) {
        struct world w;
        world_init(&w);
        RUN(&w, good_a);
        RUN(&w, then_b);
        const struct row rows[] = {
            {JM_EV_REVERT, 20, NULL, mark ? 0 : 1, 0, 0, 0, "drover: interrupted", "wait stop-gang save", ANY, NULL},
            {JM_EV_GANG_GONE, 21, NULL, 0, -1, 0, 0, NULL, "clear-gang switch event start-gang", ANY, "drover: interrupted"},
            {JM_EV_START_OK, 21, NULL, 0, 0, 0, 0, NULL, "save answer", GANG_STARTING, NULL, ""}, /* asked for */
        };
        RUN(&w, rows);
        assert_string_equal(w.j->current, A);
        assert_true(state_is_bad(w.j, B) == (mark == 1));
        world_done(&w);
    }
}

/* after then_b: B promoted, then A (promoted once) deployed again, under probation (its
 * deadline at 90) */
static const struct row promote_b_then_a_again[] = {
    {JM_EV_PROMOTE, 14, B, 380, 0, 0, 0, NULL, "event save gc reply", GANG_STARTING, NULL},
    {JM_EV_ACTIVATE, 30, A, 60, 0, 0, 0, NULL, "wait stop-gang save", GANG_STOPPING, NULL},
    {JM_EV_GANG_GONE, 31, NULL, 0, -1, 0, 0, NULL, "clear-gang switch event start-gang", ANY, "probation deadline armed"},
    {JM_EV_START_OK, 31, NULL, 0, 0, 0, 0, NULL, "save answer gc", GANG_STARTING, NULL},
};

/* A release promoted once and deployed again runs a probation of its own: when that one fails
 * (the controller's revert, or its deadline passing) it is marked bad like any failed release,
 * so the next plain rollback does not go back to it (it was left unmarked: `rollback` went to
 * it while `rollback --to` refused it).  A later promote makes it good again. */
static void test_failed_probation_of_once_promoted_marks_bad(void **state)
{
    (void)state;
    for (int expire = 0; expire < 2; expire++) {
        struct world w;
        world_init(&w);
        RUN(&w, good_a);
        RUN(&w, then_b);
        RUN(&w, promote_b_then_a_again);
        assert_string_equal(w.j->current, A);
        char rl[4 * RELEASE_ID_LEN], want[sizeof rl];
        state_resume_list(w.j, rl, sizeof rl);
        snprintf(want, sizeof want, "%s,%s", A, B);
        assert_string_equal(rl, want);
        if (expire) {
            static const struct row rows[] = {
                {JM_EV_TICK, 200, NULL, 0, 0, 0, 0, NULL, "event stop-gang save", GANG_STOPPING, "probation deadline"},
                {JM_EV_GANG_GONE, 201, NULL, 0, -1, 0, 0, NULL, "clear-gang switch event history start-gang", ANY, NULL},
            };
            RUN(&w, rows);
        } else {
            static const struct row rows[] = {
                {JM_EV_REVERT, 40, NULL, 0, 0, 0, 0, "throughput regression", "wait stop-gang save", ANY, NULL},
                {JM_EV_GANG_GONE, 41, NULL, 0, -1, 0, 0, NULL, "clear-gang switch event start-gang", ANY, "throughput regression"},
            };
            RUN(&w, rows);
        }
        assert_string_equal(w.j->current, B);
        assert_true(state_is_bad(w.j, A));
        assert_null(state_last_good(w.j, B)); /* A is no rollback target now */
        /* nor are its checkpoints resumed: those of its failed probation were (a newcomer's
         * rollback went on from them) */
        state_resume_list(w.j, rl, sizeof rl);
        assert_string_equal(rl, B);
        world_done(&w);
    }
}

/* A release promoted once, deployed again after another was promoted, is judged as a candidate
 * while its probation runs: its crash loop goes back to the good release on the agent's own (the
 * controller that would revert it may be gone), and it is marked bad.  It used to count as
 * promoted: "restarting promoted release" with backoff, forever. */
static void test_crash_loop_of_once_promoted_on_probation_reverts(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    RUN(&w, then_b);
    RUN(&w, promote_b_then_a_again);
    static const struct row rows[] = {
        {JM_EV_RANK_EXIT, 40, NULL, 0, 0, 1, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 40, NULL, 0, 0, 1, 0, NULL, "event clear-gang save", GANG_BACKOFF, "(1 of 3 in 120 s)", "rank-exit"},
        {JM_EV_TICK, 41, NULL, 0, 0, 0, 0, NULL, "event start-gang", GANG_BACKOFF, NULL},
        {JM_EV_START_OK, 41, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, NULL},
        {JM_EV_RANK_EXIT, 42, NULL, 0, 0, 1, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 42, NULL, 0, 0, 1, 0, NULL, "event clear-gang save", GANG_BACKOFF, "(2 of 3"},
        {JM_EV_TICK, 44, NULL, 0, 0, 0, 0, NULL, "event start-gang", GANG_BACKOFF, NULL},
        {JM_EV_START_OK, 44, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, NULL},
        {JM_EV_RANK_EXIT, 45, NULL, 0, 0, 1, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 45, NULL, 0, 0, 1, 0, NULL, "event clear-gang switch event history start-gang", ANY, "crash limit reached"},
        {JM_EV_START_OK, 45, NULL, 0, 0, 0, 0, NULL, "save", GANG_REVERTED, NULL, "crash-loop"},
    };
    RUN(&w, rows);
    assert_string_equal(w.j->current, B);
    assert_int_equal(w.j->auto_rollbacks, 1);
    assert_true(state_is_bad(w.j, A));
    assert_false(state_is_bad(w.j, B));
    assert_true(w.j->probation_deadline == 0);
    world_done(&w);
}

/* The same re-probation ended by an exit not retried (config 3, diverged 7), a hang or a gang
 * that cannot start: back to the good release at once, A marked bad, but for the start failure:
 * A ran in this container as promoted, so that it cannot start here now is the container's
 * fault (test_start_failures).  A promoted release stops
 * as failed on such an exit, restarts on a hang and stays failed on a start failure. */
static void test_fatal_exit_of_once_promoted_on_probation_reverts(void **state)
{
    (void)state;
    for (int k = 0; k < 4; k++) {
        struct world w;
        world_init(&w);
        RUN(&w, good_a);
        RUN(&w, then_b);
        /* k 3: all but the start's answer, which is a failure here */
        run_rows(&w, promote_b_then_a_again, k == 3 ? 3 : sizeof promote_b_then_a_again / sizeof promote_b_then_a_again[0]);
        if (k < 2) {
            int code = k == 0 ? 3 : 7;
            const struct row rows[] = {
                {JM_EV_RANK_EXIT, 40, NULL, 0, 0, code, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
                {JM_EV_GANG_GONE, 40, NULL, 0, 0, code, 0, NULL, "event clear-gang switch event history start-gang", ANY, "non-retryable exit"},
                {JM_EV_START_OK, 40, NULL, 0, 0, 0, 0, NULL, "save", GANG_REVERTED, NULL, "fatal-exit"},
            };
            RUN(&w, rows);
        } else if (k == 2) {
            static const struct row rows[] = {
                {JM_EV_HUNG, 40, NULL, 0, 1, 0, 0, SILENT, "event stop-gang save", GANG_STOPPING, "rank 1 silent", "liveness"},
                {JM_EV_GANG_GONE, 41, NULL, 0, 1, JM_EXIT_HUNG, 0, SILENT, "event clear-gang switch event history start-gang", ANY, "silence_deadline 60 s"},
                {JM_EV_START_OK, 41, NULL, 0, 0, 0, 0, NULL, "save", GANG_REVERTED, NULL, "liveness"},
            };
            RUN(&w, rows);
        } else {
            static const struct row rows[] = {
                {JM_EV_START_FAILED, 31, NULL, 0, 0, 0, 0, "bad interpreter", "event save answer switch event start-gang", GANG_FAILED, "not marked bad", "start-failure"},
                {JM_EV_START_OK, 31, NULL, 0, 0, 0, 0, NULL, "save", GANG_REVERTED, NULL, "start-failure"},
            };
            RUN(&w, rows);
        }
        assert_string_equal(w.j->current, B);
        /* a start failure of A, which ran here promoted: this container's fault, A unmarked */
        assert_true(state_is_bad(w.j, A) == (k < 3));
        if (k < 3)
            assert_null(state_last_good(w.j, B));
        world_done(&w);
    }
}

/* The promoted release that runs stopped for a failure not retried (non-finite loss on its
 * heartbeats, drover-train's diverged exit 7, a config exit 3): failed, and now marked bad, with
 * the agent's own history record of the stop.  A newcomer's NaN release, promoted, stopped this
 * way, stayed in goods unmarked: after a rollback to the release before it, the next plain
 * rollback picked it as "the previous good release" (state_last_good), and that release's
 * DROVER_RESUME_RELEASES offered its checkpoints.  A hang loop (an infrastructure fault on a
 * promoted release) and a device fault (exit 9) mark nothing.  `start` of it still runs it,
 * saying it is marked bad; a revert still goes to it (the good release); a promote clears it. */
static void test_promoted_fatal_stop_marks_bad(void **state)
{
    (void)state;
    for (int k = 0; k < 3; k++) {
        struct world w;
        world_init(&w);
        RUN(&w, good_a);
        RUN(&w, then_b);
        static const struct row promote_b[] = {
            {JM_EV_TRAINING, 13, NULL, 0, 0, 0, 0, NULL, "save", GANG_RUNNING, NULL},
            {JM_EV_PROMOTE, 14, B, 380, 0, 0, 0, NULL, "event save gc reply", GANG_RUNNING, NULL},
        };
        RUN(&w, promote_b);
        if (k == 0) {
            static const struct row nan[] = {
                {JM_EV_DIVERGED, 20, NULL, 0, 1, 0, 0, NULL, "stop-gang save", GANG_STOPPING, "non-finite", "nonfinite"},
                {JM_EV_GANG_GONE, 21, NULL, 0, 1, JM_EXIT_DIVERGED, 0, NULL, "event clear-gang event history save", GANG_FAILED,
                 "rank 1 reported 3 consecutive non-finite steps (non-retryable) on a promoted release: stopped", "nonfinite"},
            };
            RUN(&w, nan);
        } else {
            const int code = k == 1 ? 7 : 3;
            const struct row ex[] = {
                {JM_EV_RANK_EXIT, 20, NULL, 0, 0, code, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
                {JM_EV_GANG_GONE, 21, NULL, 0, 0, code, 0, NULL, "event clear-gang event history save", GANG_FAILED,
                 "(non-retryable) on a promoted release: stopped", "fatal-exit"},
            };
            RUN(&w, ex);
        }
        assert_string_equal(w.j->current, B);
        assert_string_equal(w.j->good, B);
        assert_true(state_is_bad(w.j, B));
        assert_non_null(strstr(state_bad_reason(w.j, B), "stopped while promoted: rank"));
        /* no plain rollback target from A, once A is good again (below) */
        assert_string_equal(state_last_good(w.j, B), A);
        if (k == 0) {
            /* `drover start`: runs B, the job's good release, saying it is marked bad */
            static const struct row start[] = {
                {JM_EV_START, 30, NULL, 0, 0, 0, 0, "g5", "wait event start-gang", GANG_FAILED, "is marked bad (stopped while promoted"},
                {JM_EV_START_OK, 30, NULL, 0, 0, 0, 0, NULL, "save answer", GANG_STARTING, NULL},
            };
            RUN(&w, start);
            assert_string_equal(w.j->current, B);
            char rl[4 * RELEASE_ID_LEN];
            state_resume_list(w.j, rl, sizeof rl); /* its own checkpoints, and A's */
            char want[sizeof rl];
            snprintf(want, sizeof want, "%s,%s", B, A);
            assert_string_equal(rl, want);
        }
        /* `drover rollback` to A: activated and promoted there */
        static const struct row rollback_a[] = {
            {JM_EV_ACTIVATE, 40, A, 60, 0, 0, 0, NULL, NULL, ANY, NULL},
            {JM_EV_GANG_GONE, 41, NULL, 0, -1, 0, 0, NULL, NULL, ANY, NULL},
            {JM_EV_START_OK, 41, NULL, 0, 0, 0, 0, NULL, "save answer gc", GANG_STARTING, NULL},
            {JM_EV_PROMOTE, 42, A, 400, 0, 0, 0, NULL, "event save gc reply", GANG_STARTING, NULL},
        };
        if (k == 0) { /* B runs: the activate stops it first */
            static const struct row r0[] = {
                {JM_EV_ACTIVATE, 40, A, 60, 0, 0, 0, NULL, "wait stop-gang save", GANG_STOPPING, NULL},
                {JM_EV_GANG_GONE, 41, NULL, 0, -1, 0, 0, NULL, "clear-gang switch event start-gang", ANY, NULL},
            };
            RUN(&w, r0);
        } else {
            static const struct row r1[] = {
                {JM_EV_ACTIVATE, 40, A, 60, 0, 0, 0, NULL, "wait switch event start-gang", ANY, NULL},
            };
            RUN(&w, r1);
        }
        run_rows(&w, rollback_a + 2, 2);
        assert_string_equal(w.j->good, A);
        /* B stays bad: the next plain rollback has nowhere to go, and A never resumes from the
         * checkpoints B wrote */
        assert_true(state_is_bad(w.j, B));
        assert_null(state_last_good(w.j, A));
        char rl[4 * RELEASE_ID_LEN];
        state_resume_list(w.j, rl, sizeof rl);
        assert_string_equal(rl, A);
        world_done(&w);
    }

    /* a hang loop on a promoted release, and a device fault: failed, nothing marked; the hang
     * loop's stop is in the job's history (the agent's own record), as the NaN stop's is: it
     * used to leave none, `drover history` still said `promoted` and a rollback to it said
     * nothing (docs/agent.md "Bad releases") */
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    static const struct row device[] = {
        {JM_EV_RANK_EXIT, 20, NULL, 0, 0, 9, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 21, NULL, 0, 0, 9, 0, NULL, "event clear-gang event save", GANG_FAILED, "environment fault", "environment"},
    };
    RUN(&w, device);
    assert_false(state_is_bad(w.j, A));
    world_done(&w);
    world_init(&w);
    RUN(&w, good_a);
    for (int n = 0; n < 4; n++) {
        double t = 20 + n * 100;
        const struct row hang[] = {
            {JM_EV_HUNG, t, NULL, 0, 1, 0, 0, SILENT, "event stop-gang save", GANG_STOPPING, NULL},
            /* the fourth: stopped, and recorded by the agent (agent-stopped-hung), not marked */
            {JM_EV_GANG_GONE, t + 1, NULL, 60, 1, JM_EXIT_HUNG, 0, SILENT, n < 3 ? "event clear-gang save" : "event clear-gang event history save",
             n < 3 ? GANG_BACKOFF : GANG_FAILED, n < 3 ? NULL : "(restart budget 3): stopped", n < 3 ? NULL : "liveness"},
            {JM_EV_TICK, t + 50, NULL, 0, 0, 0, 0, NULL, n < 3 ? "event start-gang" : "", ANY, NULL},
        };
        RUN(&w, hang);
        if (n < 3) {
            const struct row ok[] = {{JM_EV_START_OK, t + 50, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, NULL}};
            RUN(&w, ok);
        }
    }
    assert_int_equal(w.j->state, GANG_FAILED);
    assert_false(state_is_bad(w.j, A));
    world_done(&w);
}

/* A release whose gang cannot start: the activate fails (exit 6) and the job goes back to good
 * at once; a revert whose start fails leaves the job failed. */
static void test_start_failures(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    static const struct row rows[] = {
        {JM_EV_ACTIVATE, 10, B, 60, 0, 0, 0, NULL, "wait stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 11, NULL, 0, -1, 0, 0, NULL, "clear-gang switch event start-gang", ANY, NULL},
        {JM_EV_START_FAILED, 11, NULL, 0, 0, 0, 0, "bad interpreter", "event save answer switch event history start-gang", GANG_FAILED, "bad interpreter", "start-failure"},
        {JM_EV_START_FAILED, 11, NULL, 0, 0, 0, 0, "disk gone", "event save", GANG_FAILED, "disk gone", "start-failure"},
    };
    RUN(&w, rows);
    assert_string_equal(w.j->current, A);
    assert_true(state_is_bad(w.j, B));
    world_done(&w);

    /* A rollback to A, promoted before, from B (promoted since): in this container A's exec
     * fails (its #! interpreter removed here only; t-87).  The agent goes back to B by itself,
     * but A ran here promoted: the container is at fault, not A, so A is not marked bad, as
     * drover's revert of that rollback (--no-mark) and the other containers, where A started,
     * mark nothing.  It used to be marked here only, and `drover rollback` then refused A. */
    world_init(&w);
    RUN(&w, good_a);
    RUN(&w, then_b);
    run_rows(&w, promote_b_then_a_again, 3); /* all but the start's answer, a failure here */
    static const struct row exec_fails[] = {
        {JM_EV_START_FAILED, 31, NULL, 0, 0, 0, 0, "its interpreter is not in the container",
         "event save answer switch event start-gang", GANG_FAILED, "not marked bad", "start-failure"},
        {JM_EV_START_OK, 31, NULL, 0, 0, 0, 0, NULL, "save", GANG_REVERTED, NULL},
    };
    RUN(&w, exec_fails);
    assert_string_equal(w.j->current, B);
    assert_false(state_is_bad(w.j, A));
    assert_string_equal(state_last_good(w.j, B), A); /* still the plain rollback's target */
    world_done(&w);

    world_init(&w); /* without a good release: failed, no revert */
    static const struct row nogood[] = {
        {JM_EV_ACTIVATE, 1, B, 0, 0, 0, 0, NULL, "wait switch event start-gang", ANY, NULL},
        {JM_EV_START_FAILED, 1, NULL, 0, 0, 0, 0, "nope", "event save answer", GANG_FAILED, NULL},
        {JM_EV_REVERT, 2, NULL, 0, 0, 0, 0, NULL, "reply", GANG_FAILED, "no good release"},
    };
    RUN(&w, nogood);
    world_done(&w);
}

/* Requests: stop cancels a pending restart; revert on the good release is a no-op; the cap on
 * automatic rollbacks in a row. */
static void test_requests(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    static const struct row rows[] = {
        {JM_EV_REVERT, 4, NULL, 0, 0, 0, 0, NULL, "reply", GANG_RUNNING, "already on the good release"},
        {JM_EV_RANK_EXIT, 5, NULL, 0, 0, 1, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 5, NULL, 0, 0, 1, 0, NULL, "event clear-gang save", GANG_BACKOFF, NULL},
        {JM_EV_STOP, 5.5, NULL, 0, 0, 0, 0, NULL, "wait event save answer", GANG_STOPPED, "stopped"},
        {JM_EV_TICK, 100, NULL, 0, 0, 0, 0, NULL, "", GANG_STOPPED, NULL}, /* no restart */
    };
    RUN(&w, rows);
    world_done(&w);

    world_init(&w);
    w.p.max_auto_rollbacks = 0;
    RUN(&w, good_a);
    RUN(&w, then_b);
    static const struct row capped[] = {
        {JM_EV_RANK_EXIT, 20, NULL, 0, 0, 7, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 20, NULL, 0, 0, 7, 0, NULL, "event clear-gang event save", GANG_FAILED, "giving up"},
    };
    RUN(&w, capped);
    world_done(&w);
}

/* The controller's two-phase switch (issue 11): it stops the old gang everywhere first; when a
 * container's old gang does not go within its deadline the switch is aborted and the old release
 * started again everywhere with a new rendezvous generation.  A start while the stop is still in
 * flight replaces it (the job comes back once the gang is gone), never leaves it down. */
static void test_switch_stop_then_start(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    static const struct row rows[] = {
        /* the switch's first phase: stop; the answer says every process is gone */
        {JM_EV_STOP, 4, NULL, 0, 0, 0, 0, NULL, "wait stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 5, NULL, 0, -1, 0, 0, NULL, "clear-gang event save answer", GANG_STOPPED,
         "no process of the gang is left"},
        /* the switch was aborted elsewhere: start the current release again, new generation */
        {JM_EV_START, 6, NULL, 0, 0, 0, 0, "g2", "wait event start-gang", GANG_STOPPED, "started by request"},
        {JM_EV_START_OK, 6, NULL, 0, 0, 0, 0, NULL, "save answer", GANG_STARTING, "started"},
        {JM_EV_START, 7, NULL, 0, 0, 0, 0, "g3", "reply", GANG_STARTING, "already running"},
        /* a stop that does not finish in time (a rank ignoring SIGTERM until the grace ends) */
        {JM_EV_STOP, 8, NULL, 0, 0, 0, 0, NULL, "wait stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_START, 9, NULL, 0, 0, 0, 0, "g4", "answer wait save", GANG_STOPPING, "starts again once"},
        /* nothing starts while the old gang is there */
        {JM_EV_TICK, 20, NULL, 0, 0, 0, 0, NULL, "", GANG_STOPPING, NULL},
        {JM_EV_STOP, 21, NULL, 0, 0, 0, 0, NULL, "reply", GANG_STOPPING, "another operation"},
        {JM_EV_GANG_GONE, 39, NULL, 0, -1, 0, 0, NULL, "clear-gang event start-gang", GANG_STOPPING,
         "once the old gang was gone"},
        {JM_EV_START_OK, 39, NULL, 0, 0, 0, 0, NULL, "save answer", GANG_STARTING, "started"},
    };
    RUN(&w, rows);
    assert_string_equal(w.j->current, A);
    assert_string_equal(state_find_spec(w.j, A, NULL)->rdzv, "g4");
    assert_int_equal(w.j->generation, 3);
    world_done(&w);

    /* nothing recorded to start: refused, nothing asked of the daemon */
    world_init(&w);
    static const struct row none[] = {
        {JM_EV_START, 1, NULL, 0, 0, 0, 0, "", "reply", GANG_STOPPED, "no release with a recorded command"},
    };
    RUN(&w, none);
    world_done(&w);
}

/* A controller that dies between the two phases of a switch (issue 11): the stop carried a
 * switch deadline; when nothing follows it by then, the agent starts the release it stopped
 * again on its own (event switch-expired), once.  An activation in time disarms it; a plain
 * stop has none. */
static void test_switch_deadline(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    static const struct row rows[] = {
        {JM_EV_STOP, 4, NULL, 30, 0, 0, 0, NULL, "wait stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 5, NULL, 0, -1, 0, 0, NULL, "clear-gang event save answer", GANG_STOPPED,
         "stopped for a switch; starts aaaaaaaaaaaa again on its own unless the switch goes on within 30 s"},
        {JM_EV_TICK, 34.9, NULL, 0, 0, 0, 0, NULL, "", GANG_STOPPED, NULL},
        {JM_EV_TICK, 35, NULL, 0, 0, 0, 0, NULL, "event save start-gang", GANG_STOPPED,
         "no activation within the switch deadline"},
        {JM_EV_START_OK, 35, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, "starting aaaaaaaaaaaa again"},
        {JM_EV_TICK, 200, NULL, 0, 0, 0, 0, NULL, "", GANG_STARTING, NULL}, /* once */
    };
    RUN(&w, rows);
    assert_string_equal(w.j->current, A);
    assert_int_equal(w.j->generation, 2);
    assert_true(w.j->switch_deadline == 0);
    static const struct row in_time[] = {
        /* the switch goes on: the activation disarms the deadline */
        {JM_EV_STOP, 300, NULL, 30, 0, 0, 0, NULL, "wait stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 301, NULL, 0, -1, 0, 0, NULL, "clear-gang event save answer", GANG_STOPPED, NULL},
        {JM_EV_ACTIVATE, 302, B, 0, 0, 0, 0, NULL, "wait switch event start-gang", GANG_STOPPED, "switched"},
        {JM_EV_START_OK, 302, NULL, 0, 0, 0, 0, NULL, "save answer gc", GANG_STARTING, NULL},
        {JM_EV_TICK, 400, NULL, 0, 0, 0, 0, NULL, "", GANG_STARTING, NULL},
        /* a plain stop (drover stop) has no switch deadline: the job stays stopped */
        {JM_EV_STOP, 500, NULL, 0, 0, 0, 0, NULL, "wait stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 501, NULL, 0, -1, 0, 0, NULL, "clear-gang event save answer", GANG_STOPPED, "stopped by request"},
        {JM_EV_TICK, 5000, NULL, 0, 0, 0, 0, NULL, "", GANG_STOPPED, NULL},
    };
    RUN(&w, in_time);
    assert_string_equal(w.j->current, B);
    assert_true(w.j->switch_deadline == 0);
    world_done(&w);
}

/* One event through the machine; effect names space-separated into got. */
static void step_no_start(struct world *w, enum jm_ev kind, double now, const char *text, char *got,
                          size_t sz)
{
    struct jm_event ev = {.kind = kind, .now = now, .text = text, .rank = -1,
                          .no_start = kind == JM_EV_REVERT};
    struct jm_effects out = {0};
    jm_step(&w->p, w->j, &w->rt, &ev, &out);
    got[0] = '\0';
    for (int k = 0; k < out.n; k++) {
        size_t len = strlen(got);
        snprintf(got + len, sz - len, "%s%s", k ? " " : "", jm_fx_name(out.fx[k].kind));
        if (out.fx[k].kind == JM_FX_ANSWER || out.fx[k].kind == JM_FX_REPLY)
            assert_int_equal(out.fx[k].code, 0);
    }
}

/* `drover stop`, then a deploy of B that fails: the controller's revert of a job the operator
 * had stopped asks with no_start.  The good release becomes current and nothing starts: no
 * start-gang effect, the job recorded stopped as a stop records it, B marked bad; an agent
 * restart starts nothing, and a start runs A.  It used to start A, which the controller then
 * stopped again: A's gang ran for seconds on GPUs the operator had freed.  With B's gang still
 * running when the revert comes, it is stopped first, then the same. */
static void test_revert_no_start_leaves_job_stopped(void **state)
{
    (void)state;
    char got[512];
    for (int running = 0; running <= 1; running++) {
        struct world w;
        world_init(&w);
        RUN(&w, good_a);
        RUN(&w, then_b);
        if (!running) { /* the controller's phase 1 stopped B's gang */
            step_no_start(&w, JM_EV_STOP, 20, NULL, got, sizeof got);
            step_no_start(&w, JM_EV_GANG_GONE, 21, NULL, got, sizeof got);
            assert_int_equal(w.j->state, GANG_STOPPED);
        }
        step_no_start(&w, JM_EV_REVERT, 22, "drover: probation failed", got, sizeof got);
        if (running) {
            assert_string_equal(got, "wait stop-gang save");
            assert_int_equal(w.j->state, GANG_STOPPING);
            step_no_start(&w, JM_EV_GANG_GONE, 23, NULL, got, sizeof got);
            assert_string_equal(got, "clear-gang switch event save answer");
        } else {
            assert_string_equal(got, "wait switch event save answer");
        }
        assert_null(strstr(got, "start-gang"));
        assert_int_equal(w.j->state, GANG_STOPPED);
        assert_int_equal(w.j->reason_code, STATUS_RC_NONE);
        assert_non_null(strstr(w.j->reason, "left stopped"));
        assert_string_equal(w.j->current, A);
        assert_true(state_is_bad(w.j, B));
        assert_true(w.j->probation_deadline == 0 && w.j->switch_deadline == 0);
        /* nothing starts it on its own: not a tick past B's probation deadline, not an agent restart */
        step_no_start(&w, JM_EV_TICK, 500, NULL, got, sizeof got);
        assert_string_equal(got, "");
        jm_rt_done(&w.rt);
        jm_rt_init(&w.rt);
        step_no_start(&w, JM_EV_AGENT_START, 0.5, NULL, got, sizeof got);
        assert_string_equal(got, "");
        assert_int_equal(w.j->state, GANG_STOPPED);
        /* `drover start` runs the good release */
        step_no_start(&w, JM_EV_START, 1, "", got, sizeof got);
        assert_string_equal(got, "wait event start-gang");
        assert_string_equal(w.j->current, A);
        world_done(&w);
    }
}

/* An agent that went back to the good release by itself (B failed) and runs its gang: the
 * controller's revert that follows is answered "already on the good release" and changes
 * nothing: no stop, no start, no new generation (the demo's v2 had all three agents' v1 gangs
 * stopped and "reverted from" v1 to itself).  Once no gang of it runs (a crash, backing off), a
 * revert does start it, and says so as a start, not a revert from the good release to itself. */
static void test_revert_when_already_back(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    RUN(&w, then_b);
    static const struct row rows[] = {
        {JM_EV_TRAINING, 13, NULL, 0, 0, 0, 0, NULL, "save", GANG_RUNNING, NULL},
        {JM_EV_TICK, 72, NULL, 0, 0, 0, 0, NULL, "event stop-gang save", GANG_STOPPING, "probation deadline"},
        {JM_EV_GANG_GONE, 74, NULL, 0, -1, 0, 0, NULL, "clear-gang switch event history start-gang", ANY, "reverted on its own"},
        {JM_EV_START_OK, 74, NULL, 0, 0, 0, 0, NULL, "save", GANG_REVERTED, NULL},
        /* asked without a generation (the controller found every container back) */
        {JM_EV_REVERT, 75, NULL, 0, 0, 0, 0, "drover: failed probation", "reply", GANG_REVERTED,
         "already on the good release aaaaaaaaaaaa, its gang reverted"},
    };
    RUN(&w, rows);
    assert_string_equal(w.j->current, A);
    /* asked with a new generation (the two-phase revert, whose stop this agent answered busy
     * while it went back by itself): the others start the good release as g7, this gang must
     * join them; it used to answer "already" and keep its own generation, and the gang could
     * never form */
    static const struct row regen[] = {
        {JM_EV_REVERT, 76, "g7", 0, 0, 0, 0, "drover: failed probation", "wait stop-gang save",
         GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 77, NULL, 0, -1, 0, 0, NULL, "clear-gang switch event start-gang", ANY,
         "restarted the good release aaaaaaaaaaaa as the revert's new rendezvous generation"},
        {JM_EV_START_OK, 77, NULL, 0, 0, 0, 0, NULL, "save answer", GANG_STARTING, NULL},
        /* the same revert asked again (a retry): its generation runs, nothing is stopped */
        {JM_EV_REVERT, 78, "g7", 0, 0, 0, 0, "drover: failed probation", "reply", GANG_STARTING,
         "already on the good release aaaaaaaaaaaa"},
    };
    RUN(&w, regen);
    assert_string_equal(state_find_spec(w.j, A, NULL)->rdzv, "g7");
    assert_false(state_is_bad(w.j, A));
    static const struct row crashed[] = {
        {JM_EV_RANK_EXIT, 80, NULL, 0, 0, 1, 0, NULL, "stop-gang save", ANY, NULL},
        {JM_EV_GANG_GONE, 80, NULL, 0, 0, 1, 0, NULL, "event clear-gang save", ANY, NULL},
        {JM_EV_REVERT, 80.5, "g9", 0, 0, 0, 0, "drover: failed probation", "wait switch event start-gang", ANY,
         "started the good release aaaaaaaaaaaa again (no gang of it was running)"},
        {JM_EV_START_OK, 80.5, NULL, 0, 0, 0, 0, NULL, "save answer", GANG_STARTING, NULL},
    };
    RUN(&w, crashed);
    assert_string_equal(w.j->current, A);
    assert_false(state_is_bad(w.j, A));
    world_done(&w);
}

/* The controller's revert reaches an agent that is going back by itself (its probation deadline
 * passed while the controller was still watching; the failed gang still stopping).  Its stop is
 * answered busy with the reason; its revert joins the agent's own: one revert, with the
 * controller's generation, answered once the good gang started, and the failed release marked
 * bad as the agent's own revert would.  The revert used to be answered busy too, and the agent
 * then started the good release as its old generation while the others started the new one. */
static void test_revert_joins_own_revert(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    RUN(&w, then_b);
    static const struct row rows[] = {
        {JM_EV_TRAINING, 13, NULL, 0, 0, 0, 0, NULL, "save", GANG_RUNNING, NULL},
        {JM_EV_TICK, 72, NULL, 0, 0, 0, 0, NULL, "event stop-gang save", GANG_STOPPING, "probation deadline"},
        {JM_EV_STOP, 72.5, NULL, 120, 0, 0, 0, NULL, "reply", GANG_STOPPING,
         "is going back to the good release aaaaaaaaaaaa by itself (release bbbbbbbbbbbb not promoted"},
        {JM_EV_REVERT, 73, "g5", 0, 0, 0, 0, "drover: failed probation", "wait event save", GANG_STOPPING,
         "the controller's revert joins this agent's own"},
        {JM_EV_GANG_GONE, 74, NULL, 0, -1, 0, 0, NULL, "clear-gang switch event start-gang", ANY,
         "reverted from bbbbbbbbbbbb: release bbbbbbbbbbbb not promoted before its probation deadline"},
        {JM_EV_START_OK, 74, NULL, 0, 0, 0, 0, NULL, "save answer", GANG_STARTING, NULL, ""},
    };
    RUN(&w, rows);
    assert_string_equal(w.j->current, A);
    assert_string_equal(state_find_spec(w.j, A, NULL)->rdzv, "g5");
    assert_true(state_is_bad(w.j, B));
    world_done(&w);
}

/* The controller's two-phase revert (issue 11): stop everywhere, then revert everywhere with a
 * new generation.  Where the stop is still in flight the revert replaces it: the good release
 * starts once the failed gang is gone, and the failed release is marked bad. */
static void test_two_phase_revert(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    RUN(&w, then_b);
    static const struct row rows[] = {
        {JM_EV_STOP, 20, NULL, 30, 0, 0, 0, NULL, "wait stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 21, NULL, 0, -1, 0, 0, NULL, "clear-gang event save answer", GANG_STOPPED, NULL},
        {JM_EV_REVERT, 22, "g8", 0, 0, 0, 0, "drover: throughput", "wait switch event start-gang",
         GANG_STOPPED, "reverted from bbbbbbbbbbbb"},
        {JM_EV_START_OK, 22, NULL, 0, 0, 0, 0, NULL, "save answer", GANG_STARTING, NULL},
        {JM_EV_TICK, 60, NULL, 0, 0, 0, 0, NULL, "", GANG_STARTING, NULL}, /* disarmed */
    };
    RUN(&w, rows);
    assert_string_equal(w.j->current, A);
    assert_string_equal(state_find_spec(w.j, A, NULL)->rdzv, "g8");
    assert_true(state_is_bad(w.j, B));
    world_done(&w);

    world_init(&w);
    RUN(&w, good_a);
    RUN(&w, then_b);
    static const struct row slow[] = {
        {JM_EV_STOP, 20, NULL, 30, 0, 0, 0, NULL, "wait stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_REVERT, 25, "g9", 0, 0, 0, 0, "drover: throughput", "answer wait save", GANG_STOPPING,
         "revert requested"},
        {JM_EV_TICK, 30, NULL, 0, 0, 0, 0, NULL, "", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 50, NULL, 0, -1, 0, 0, NULL, "clear-gang switch event start-gang", ANY,
         "reverted from bbbbbbbbbbbb: drover: throughput"},
        {JM_EV_START_OK, 50, NULL, 0, 0, 0, 0, NULL, "save answer", GANG_STARTING, NULL},
        {JM_EV_TICK, 100, NULL, 0, 0, 0, 0, NULL, "", GANG_STARTING, NULL},
    };
    RUN(&w, slow);
    assert_string_equal(w.j->current, A);
    assert_string_equal(state_find_spec(w.j, A, NULL)->rdzv, "g9");
    assert_true(state_is_bad(w.j, B));
    assert_true(w.j->switch_deadline == 0 && w.j->probation_deadline == 0);
    world_done(&w);
}

/* A release on probation (or held) that is stopped for a switch and started again after the
 * switch was aborted keeps its probation deadline (it was lost: the stop cleared it, and the
 * agents never reverted a held release whose controller was gone).  While stopped, the
 * deadline does not fire. */
static void test_probation_deadline_survives_abort(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    RUN(&w, then_b); /* B's deadline 72 */
    static const struct row rows[] = {
        {JM_EV_TRAINING, 13, NULL, 0, 0, 0, 0, NULL, "save", GANG_RUNNING, NULL},
        {JM_EV_STOP, 20, NULL, 30, 0, 0, 0, NULL, "wait stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 21, NULL, 0, -1, 0, 0, NULL, "clear-gang event save answer", GANG_STOPPED, NULL},
        {JM_EV_START, 22, NULL, 0, 0, 0, 0, "g5", "wait event start-gang", GANG_STOPPED, "started by request"},
        {JM_EV_START_OK, 22, NULL, 0, 0, 0, 0, NULL, "save answer", GANG_STARTING, NULL},
        {JM_EV_TICK, 71.9, NULL, 0, 0, 0, 0, NULL, "", GANG_STARTING, NULL},
        {JM_EV_TICK, 72, NULL, 0, 0, 0, 0, NULL, "event stop-gang save", GANG_STOPPING, "probation deadline", "probation-deadline"},
        {JM_EV_GANG_GONE, 73, NULL, 0, -1, 0, 0, NULL, "clear-gang switch event history start-gang", ANY, "reverted on its own"},
        {JM_EV_START_OK, 73, NULL, 0, 0, 0, 0, NULL, "save", GANG_REVERTED, NULL},
    };
    RUN(&w, rows);
    assert_string_equal(w.j->current, A);
    world_done(&w);

    /* stopped past its deadline: nothing fires while stopped; started again, it is due */
    world_init(&w);
    RUN(&w, good_a);
    RUN(&w, then_b);
    static const struct row stopped[] = {
        {JM_EV_STOP, 20, NULL, 0, 0, 0, 0, NULL, "wait stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 21, NULL, 0, -1, 0, 0, NULL, "clear-gang event save answer", GANG_STOPPED, NULL},
        {JM_EV_TICK, 100, NULL, 0, 0, 0, 0, NULL, "", GANG_STOPPED, NULL},
        {JM_EV_START, 101, NULL, 0, 0, 0, 0, "", "wait event start-gang", GANG_STOPPED, NULL},
        {JM_EV_START_OK, 101, NULL, 0, 0, 0, 0, NULL, "save answer", GANG_STARTING, NULL},
        {JM_EV_TICK, 102, NULL, 0, 0, 0, 0, NULL, "event stop-gang save", GANG_STOPPING, "probation deadline"},
    };
    RUN(&w, stopped);
    world_done(&w);
}

/* Agent shutdown leaves the gang running and keeps the state; the next agent re-adopts it
 * (nothing relaunched), or relaunches when there was no gang to adopt. */
static void test_shutdown_adopt_and_agent_start(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    static const struct row rows[] = {
        {JM_EV_SHUTDOWN, 5, NULL, 0, 0, 0, 0, NULL, "save", GANG_RUNNING, NULL},
        {JM_EV_ACTIVATE, 6, B, 0, 0, 0, 0, NULL, "reply", GANG_RUNNING, "shutting down"},
    };
    RUN(&w, rows);
    jm_rt_done(&w.rt); /* the next agent */
    jm_rt_init(&w.rt);
    static const struct row adopt[] = {
        {JM_EV_ADOPT, 0.5, NULL, 0, 0, 0, 0, "pid 10, pid 11", "event save", GANG_RUNNING, "re-adopted"},
        /* a rank that died while no agent ran is found in its exit file: the usual rules */
        {JM_EV_RANK_EXIT, 0.6, NULL, 0, 1, -1, 9, NULL, "stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 0.7, NULL, 0, 1, -1, 9, NULL, "event clear-gang save", GANG_BACKOFF, "restarting promoted release"},
    };
    RUN(&w, adopt);
    assert_int_equal(w.j->generation, 1);
    jm_rt_done(&w.rt);
    jm_rt_init(&w.rt);
    static const struct row relaunch[] = { /* no gang left (e.g. a reboot) */
        {JM_EV_AGENT_START, 0.5, NULL, 0, 0, 0, 0, NULL, "event save start-gang", GANG_BACKOFF, "agent restarted"},
        {JM_EV_START_OK, 0.5, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, NULL},
    };
    RUN(&w, relaunch);
    assert_int_equal(w.j->generation, 2);
    jm_rt_done(&w.rt);
    jm_rt_init(&w.rt);
    w.j->state = GANG_STOPPING; /* the agent left while stopping: the next one finishes it */
    static const struct row stopping[] = {
        {JM_EV_ADOPT, 1, NULL, 0, 0, 0, 0, NULL, "event stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 2, NULL, 0, -1, 0, 0, NULL, "clear-gang save", GANG_STOPPED, NULL},
    };
    RUN(&w, stopping);
    world_done(&w);
}

/* The bad list and the promoted list in state.json survive a round trip. */
#define D1 "1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "2222222222222222222222222222222222222222222222222222222222222222"

/* A spec change of the good release (the same release, another spec digest) is a candidate of
 * its own: on probation (a crash is not a promoted release's restart), reverted on its own to
 * the good release WITH the good spec, the release never marked bad; and once promoted, the good
 * pair is the new one, so a later failed change comes back to it. */
static void test_spec_change_of_good_release(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    static const struct row good_a_d1[] = {
        {JM_EV_ACTIVATE, 1, A, 0, 0, 0, 0, D1, "wait switch event start-gang", GANG_STOPPED, "switched"},
        {JM_EV_START_OK, 1, NULL, 0, 0, 0, 0, NULL, "save answer gc", GANG_STARTING, "started"},
        {JM_EV_PROMOTE, 3, A, 400, 0, 0, 0, NULL, "event save gc reply", GANG_STARTING, "ktok_s 400"},
    };
    RUN(&w, good_a_d1);
    assert_string_equal(w.j->good_digest, D1);
    assert_true(state_on_good(w.j));
    static const struct row change[] = {
        {JM_EV_ACTIVATE, 10, A, 60, 0, 0, 0, D2, "wait stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 12, NULL, 0, -1, 0, 0, NULL, "clear-gang switch event start-gang", ANY,
         "the same release with a changed job spec"},
        {JM_EV_START_OK, 12, NULL, 0, 0, 0, 0, NULL, "save answer gc", GANG_STARTING, NULL},
        /* drover-train's usage exit (2, non-retryable): back to the good pair at once */
        {JM_EV_RANK_EXIT, 13, NULL, 0, 0, 2, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 13, NULL, 0, 0, 2, 0, NULL, "event clear-gang switch event start-gang", ANY,
         "changed job spec to its good one"},
        {JM_EV_START_OK, 13, NULL, 0, 0, 0, 0, NULL, "save", GANG_REVERTED, NULL},
    };
    RUN(&w, change);
    assert_string_equal(w.j->current, A);
    assert_string_equal(w.j->current_digest, D1); /* the good spec, not the failed one */
    assert_true(state_on_good(w.j));
    assert_false(state_is_bad(w.j, A));
    assert_int_equal(state_current_spec(w.j)->promoted, true);
    assert_non_null(state_find_spec(w.j, A, D2)); /* kept, unpromoted */
    assert_false(state_find_spec(w.j, A, D2)->promoted);
    assert_true(w.j->probation_deadline == 0);

    /* the change again, promoted this time; then the controller's revert of a later one */
    static const struct row promote_d2[] = {
        {JM_EV_ACTIVATE, 20, A, 60, 0, 0, 0, D2, "wait stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 21, NULL, 0, -1, 0, 0, NULL, "clear-gang switch event start-gang", ANY, NULL},
        {JM_EV_START_OK, 21, NULL, 0, 0, 0, 0, NULL, "save answer gc", GANG_STARTING, NULL},
        /* a promoted release's good spec is not "already on the good release" for a revert */
        {JM_EV_PROMOTE, 22, A, 300, 0, 0, 0, NULL, "event save gc reply", GANG_STARTING, NULL},
        {JM_EV_ACTIVATE, 30, A, 60, 0, 0, 0, D1, "wait stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 31, NULL, 0, -1, 0, 0, NULL, "clear-gang switch event start-gang", ANY, NULL},
        {JM_EV_START_OK, 31, NULL, 0, 0, 0, 0, NULL, "save answer gc", GANG_STARTING, NULL},
        {JM_EV_REVERT, 32, NULL, 0, 0, 0, 0, "probation failed", "wait stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 33, NULL, 0, -1, 0, 0, NULL, "clear-gang switch event start-gang", ANY,
         "changed job spec"},
        {JM_EV_START_OK, 33, NULL, 0, 0, 0, 0, NULL, "save answer", GANG_STARTING, NULL},
        {JM_EV_REVERT, 34, NULL, 0, 0, 0, 0, NULL, "reply", GANG_STARTING, "already on the good release"},
    };
    RUN(&w, promote_d2);
    assert_string_equal(w.j->good_digest, D2);
    assert_string_equal(w.j->current_digest, D2);
    assert_false(state_is_bad(w.j, A));

    /* an agent restart keeps both digests (state.json), and a state.json from before them
     * reads as "" (unknown) for the job and its specs */
    char *text;
    assert_int_equal(state_format(&w.st, &text), 0);
    struct agent_state back;
    assert_int_equal(state_parse(text, strlen(text), &back), 0);
    free(text);
    struct job_rec *j = state_find_job(&back, "train");
    assert_string_equal(j->current_digest, D2);
    assert_string_equal(j->good_digest, D2);
    assert_non_null(state_find_spec(j, A, D1));
    assert_string_equal(state_current_spec(j)->digest, D2);
    state_done(&back);
    static const char old[] =
        "{\"v\":1,\"jobs\":[{\"job\":\"train\",\"current\":\"" A "\",\"previous\":\"\",\"good\":\"" A "\","
        "\"state\":\"running\",\"specs\":[{\"release\":\"" A "\",\"argv\":[\"bin/w.sh\"],\"nnodes\":1,"
        "\"node_rank\":0,\"nproc\":1,\"master_port\":29500,\"promoted\":true}]}]}";
    assert_int_equal(state_parse(old, strlen(old), &back), 0);
    j = state_find_job(&back, "train");
    assert_string_equal(j->current_digest, "");
    assert_true(state_on_good(j));
    assert_non_null(state_current_spec(j));
    assert_string_equal(state_current_spec(j)->digest, "");
    state_done(&back);
    static const char badd[] =
        "{\"v\":1,\"jobs\":[{\"job\":\"train\",\"current\":\"" A "\",\"current_spec\":\"xyz\"}]}";
    assert_int_equal(state_parse(badd, strlen(badd), &back), -EINVAL);
    world_done(&w);
}

/* promote --spec-digest D promotes only the pair that runs with D: a promote for another spec
 * (the controller judged a pair that a later switch replaced) is refused and changes nothing; a
 * promote without a digest (an older controller) promotes what runs.  Each promoted pair is kept
 * in goods with its digest, so the same release's earlier spec is a rollback target, and the
 * pairs survive state.json (one written before them reads as unknown digests). */
static void test_promote_checks_spec_digest(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    static const struct row rows[] = {
        {JM_EV_ACTIVATE, 1, A, 0, 0, 0, 0, D1, "wait switch event start-gang", GANG_STOPPED, NULL},
        {JM_EV_START_OK, 1, NULL, 0, 0, 0, 0, NULL, "save answer gc", GANG_STARTING, NULL},
        {JM_EV_PROMOTE, 2, A, 400, 0, 0, 0, D1, "event save gc reply", GANG_STARTING, "ktok_s 400"},
        {JM_EV_ACTIVATE, 10, A, 60, 0, 0, 0, D2, "wait stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 11, NULL, 0, -1, 0, 0, NULL, "clear-gang switch event start-gang", ANY, NULL},
        {JM_EV_START_OK, 11, NULL, 0, 0, 0, 0, NULL, "save answer gc", GANG_STARTING, NULL},
        /* asked for the old spec while the new one runs: refused, nothing recorded */
        {JM_EV_PROMOTE, 12, A, 300, 0, 0, 0, D1, "reply", GANG_STARTING, "not the job spec 111111111111"},
    };
    RUN(&w, rows);
    assert_string_equal(w.j->good_digest, D1);
    assert_false(state_find_spec(w.j, A, D2)->promoted);
    assert_int_equal(w.j->ngoods, 1);
    static const struct row ok[] = {
        {JM_EV_PROMOTE, 13, A, 300, 0, 0, 0, D2, "event save gc reply", GANG_STARTING, NULL},
    };
    RUN(&w, ok);
    assert_string_equal(w.j->good_digest, D2);
    assert_int_equal(w.j->ngoods, 2); /* (A, D2), then (A, D1): the same release twice */
    assert_string_equal(w.j->goods[0], A);
    assert_string_equal(w.j->goods_digest[0], D2);
    assert_string_equal(w.j->goods[1], A);
    assert_string_equal(w.j->goods_digest[1], D1);
    /* an older controller sends no digest: what runs is promoted, as before */
    static const struct row old_ctl[] = {
        {JM_EV_ACTIVATE, 20, B, 60, 0, 0, 0, NULL, "wait stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 21, NULL, 0, -1, 0, 0, NULL, "clear-gang switch event start-gang", ANY, NULL},
        {JM_EV_START_OK, 21, NULL, 0, 0, 0, 0, NULL, "save answer gc", GANG_STARTING, NULL},
        /* an unknown running spec matches no digest asked for */
        {JM_EV_PROMOTE, 22, B, 300, 0, 0, 0, D2, "reply", GANG_STARTING, "(unknown)"},
        {JM_EV_PROMOTE, 22, B, 300, 0, 0, 0, NULL, "event save gc reply", GANG_STARTING, NULL},
    };
    RUN(&w, old_ctl);
    assert_string_equal(w.j->good, B);
    assert_int_equal(w.j->ngoods, 3);
    assert_string_equal(w.j->goods_digest[0], "");
    /* promoted again: the pair moves to the front, no duplicate */
    state_note_good(w.j, A, D1);
    assert_int_equal(w.j->ngoods, 3);
    assert_string_equal(w.j->goods_digest[0], D1);
    assert_string_equal(w.j->goods[1], B);
    assert_string_equal(w.j->goods_digest[2], D2);

    char *text;
    assert_int_equal(state_format(&w.st, &text), 0);
    struct agent_state back;
    assert_int_equal(state_parse(text, strlen(text), &back), 0);
    free(text);
    struct job_rec *j = state_find_job(&back, "train");
    assert_int_equal(j->ngoods, 3);
    assert_string_equal(j->goods_digest[0], D1);
    assert_string_equal(j->goods_digest[2], D2);
    state_done(&back);
    static const char before_pairs[] =
        "{\"v\":1,\"jobs\":[{\"job\":\"train\",\"current\":\"" A "\",\"good\":\"" A "\","
        "\"goods\":[\"" A "\",\"" B "\"]}]}";
    assert_int_equal(state_parse(before_pairs, strlen(before_pairs), &back), 0);
    j = state_find_job(&back, "train");
    assert_int_equal(j->ngoods, 2);
    assert_string_equal(j->goods_digest[1], "");
    state_done(&back);
    static const char mismatched[] =
        "{\"v\":1,\"jobs\":[{\"job\":\"train\",\"goods\":[\"" A "\",\"" B "\"],\"goods_spec\":[\"\"]}]}";
    assert_int_equal(state_parse(mismatched, strlen(mismatched), &back), -EINVAL);
    world_done(&w);
}

/* A spec that is a rollback target (a promoted pair) is not evicted for newer ones, also when it
 * is the good release's earlier spec (other specs of the current or good release go first). */
static void test_spec_eviction_keeps_promoted_pairs(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    struct job_rec *j = w.j;
    char digest[SPEC_DIGEST_LEN + 1];
    for (int k = 0; k < STATE_MAX_SPECS + 3; k++) {
        struct job_spec s;
        spec_init(&s);
        char *argv[] = {"bin/w.sh"};
        assert_int_equal(spec_set_argv(&s, 1, argv), 0);
        (void)str_copy(s.release, sizeof s.release, A);
        memset(digest, '0' + k, SPEC_DIGEST_LEN);
        digest[SPEC_DIGEST_LEN] = '\0';
        (void)str_copy(s.digest, sizeof s.digest, digest);
        assert_int_equal(state_put_spec(j, &s, NULL), 0);
        spec_done(&s);
        (void)str_copy(j->current, sizeof j->current, A);
        (void)str_copy(j->current_digest, sizeof j->current_digest, digest);
        if (k < 2) { /* the first two promoted: (A, "000..."), then (A, "111...") */
            (void)str_copy(j->good, sizeof j->good, A);
            (void)str_copy(j->good_digest, sizeof j->good_digest, digest);
            state_note_good(j, A, digest);
        }
    }
    assert_int_equal(j->nspecs, STATE_MAX_SPECS);
    memset(digest, '0', SPEC_DIGEST_LEN);
    assert_non_null(state_find_spec(j, A, digest)); /* the earlier promoted spec of A */
    memset(digest, '1', SPEC_DIGEST_LEN);
    assert_non_null(state_find_spec(j, A, digest)); /* the good pair */
    memset(digest, '2', SPEC_DIGEST_LEN);
    assert_null(state_find_spec(j, A, digest)); /* an unpromoted change: went first */
    world_done(&w);
}

static void test_state_marks_round_trip(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    state_note_good(w.j, A, NULL);
    state_note_good(w.j, B, NULL);
    state_note_good(w.j, A, NULL); /* promoted again: moves to the front, no duplicate */
    assert_int_equal(w.j->ngoods, 2);
    assert_string_equal(w.j->goods[0], A);
    for (int i = 0; i < STATE_MAX_BAD + 2; i++)
        state_mark_bad(w.j, i % 2 ? B : C, "probation failed");
    assert_int_equal(w.j->nbad, 2);
    assert_string_equal(w.j->bad[0].release, B);
    w.j->probation_deadline = 12.5;
    w.j->probation_left_s = 3;
    w.j->switch_deadline = 40.5;
    w.j->switch_left_s = 7;
    w.j->state = GANG_REVERTED;
    w.j->reason_code = STATUS_RC_RANK_EXIT; /* kept as said, not re-derived from the words */
    strcpy(w.j->reason, "crash loop: words the code does not follow");
    char *text;
    assert_int_equal(state_format(&w.st, &text), 0);
    struct agent_state back;
    assert_int_equal(state_parse(text, strlen(text), &back), 0);
    free(text);
    struct job_rec *j = state_find_job(&back, "train");
    assert_non_null(j);
    assert_int_equal(j->nbad, 2);
    assert_true(state_is_bad(j, C));
    assert_string_equal(j->bad[0].reason, "probation failed");
    assert_int_equal(j->ngoods, 2);
    assert_string_equal(j->goods[1], B);
    assert_true(j->probation_deadline == 12.5 && j->probation_left_s == 3);
    assert_true(j->switch_deadline == 40.5 && j->switch_left_s == 7);
    assert_int_equal(j->reason_code, STATUS_RC_RANK_EXIT);
    state_unmark_bad(j, C);
    assert_false(state_is_bad(j, C));
    state_done(&back);
    /* a state.json from an agent before the code: the code its reason's words mean */
    assert_int_equal(state_format(&w.st, &text), 0);
    char *member = strstr(text, "\"reason_code\":\"rank-exit\"");
    assert_non_null(member);
    memcpy(member, "\"reason_cod0\"", strlen("\"reason_cod0\"")); /* a key no reader knows */
    assert_int_equal(state_parse(text, strlen(text), &back), 0);
    free(text);
    j = state_find_job(&back, "train");
    assert_non_null(j);
    assert_int_equal(j->reason_code, STATUS_RC_CRASH_LOOP);
    state_done(&back);
    world_done(&w);
}

/* drover-train's "peer_stopped" exit (12): a rank stopped because a rank in another container was
 * stopped.  Not "completed" (the job would stay down everywhere, found on the lab: an agent and
 * its holders killed in one container, the new agent stopped the gang they left, and every
 * other container recorded the job completed): a restart from the checkpoint, but only after
 * JM_PEER_STOP_GRACE_S, because a fleet-wide stop reaches the containers seconds apart and the
 * one that arrives within the grace must find nothing to fight (the skew case). */
/* "peer_exit" in the status document: backing off, then restarted, only because of a rank
 * elsewhere (8 peer_lost, 12 peer_stopped); a crash of its own, an activation or an operator's
 * start clears it.  A restarted gang read before its first train heartbeat used to name no
 * peer, so the verdict quoted it as a cause. */
static void test_peer_exit_said(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    assert_false(jm_peer_exit(w.j, &w.rt));
    static const struct row lost[] = {
        {JM_EV_RANK_EXIT, 5, NULL, 0, 0, 8, 0, NULL, "stop-gang save", GANG_STOPPING, "code 8", "rank-exit"},
        {JM_EV_GANG_GONE, 5, NULL, 0, 0, 8, 0, NULL, "event clear-gang save", GANG_BACKOFF, NULL, "rank-exit"},
    };
    RUN(&w, lost);
    assert_true(jm_peer_exit(w.j, &w.rt));
    static const struct row back[] = {
        {JM_EV_TICK, 6.1, NULL, 0, 0, 0, 0, NULL, "event start-gang", GANG_BACKOFF, "restart 1"},
        {JM_EV_START_OK, 6.1, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, NULL},
    };
    RUN(&w, back);
    assert_true(jm_peer_exit(w.j, &w.rt)); /* restarted for it: still no cause here */
    static const struct row own[] = { /* then a crash of its own */
        {JM_EV_RANK_EXIT, 10, NULL, 0, 0, 1, 0, NULL, "stop-gang save", GANG_STOPPING, "code 1"},
        {JM_EV_GANG_GONE, 10, NULL, 0, 0, 1, 0, NULL, "event clear-gang save", GANG_BACKOFF, NULL},
    };
    RUN(&w, own);
    assert_false(jm_peer_exit(w.j, &w.rt));
    static const struct row again[] = {
        {JM_EV_TICK, 12.1, NULL, 0, 0, 0, 0, NULL, "event start-gang", GANG_BACKOFF, NULL},
        {JM_EV_START_OK, 12.1, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, NULL},
    };
    RUN(&w, again);
    assert_false(jm_peer_exit(w.j, &w.rt));
    world_done(&w);
}

static void test_peer_stopped(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    static const struct row restarts[] = {
        {JM_EV_RANK_EXIT, 5, NULL, 0, 0, 12, 0, NULL, "stop-gang save", GANG_STOPPING, "code 12", "rank-exit"},
        {JM_EV_GANG_GONE, 5, NULL, 0, 0, 12, 0, NULL, "event clear-gang save", GANG_BACKOFF,
         "another rank was stopped", "rank-exit"},
        /* the backoff (1 s) has passed, the grace has not */
        {JM_EV_TICK, 6, NULL, 0, 0, 0, 0, NULL, "", GANG_BACKOFF, NULL},
        {JM_EV_TICK, 5 + JM_PEER_STOP_GRACE_S - 0.1, NULL, 0, 0, 0, 0, NULL, "", GANG_BACKOFF, NULL},
        {JM_EV_TICK, 5 + JM_PEER_STOP_GRACE_S, NULL, 0, 0, 0, 0, NULL, "event start-gang", GANG_BACKOFF, "restart 1"},
        {JM_EV_START_OK, 20, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, "another rank was stopped"},
        {JM_EV_TRAINING, 21, NULL, 0, 0, 0, 0, NULL, "save", GANG_RUNNING, NULL},
    };
    RUN(&w, restarts);
    assert_int_equal(w.j->restarts, 1);
    assert_int_equal(w.j->generation, 2);
    /* the event says it is a peer's stop, and for how long it waits */
    struct jm_effects out = {0};
    struct jm_event ev = {.kind = JM_EV_RANK_EXIT, .now = 30, .rank = 0, .code = 12, .text = ""};
    jm_step(&w.p, w.j, &w.rt, &ev, &out);
    out.n = 0;
    ev.kind = JM_EV_GANG_GONE;
    jm_step(&w.p, w.j, &w.rt, &ev, &out);
    assert_int_equal(out.fx[0].kind, JM_FX_EVENT);
    assert_string_equal(out.fx[0].what, "peer-stopped");
    assert_non_null(strstr(out.fx[0].text, "waits 15 s"));
    world_done(&w);

    /* the skew case: the operator's stop arrives 3 s after the peer's: stopped, no restart,
     * and the exit leaves the crash window */
    world_init(&w);
    RUN(&w, good_a);
    static const struct row skew[] = {
        {JM_EV_RANK_EXIT, 5, NULL, 0, 0, 12, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 5, NULL, 0, 0, 12, 0, NULL, "event clear-gang save", GANG_BACKOFF, NULL},
        {JM_EV_TICK, 6, NULL, 0, 0, 0, 0, NULL, "", GANG_BACKOFF, NULL},
        {JM_EV_STOP, 8, NULL, 0, 0, 0, 0, NULL, "wait event save answer", GANG_STOPPED, "no process of the gang is left", ""},
        {JM_EV_TICK, 100, NULL, 0, 0, 0, 0, NULL, "", GANG_STOPPED, NULL}, /* no restart */
    };
    RUN(&w, skew);
    assert_int_equal(w.rt.ncrash, 0);
    assert_int_equal(w.j->restarts, 0);
    world_done(&w);

    /* the stop arrives while the agent still stops its own part (before the gang is gone): the
     * gang's end answers the stop, nothing is recorded as an exit */
    world_init(&w);
    RUN(&w, good_a);
    static const struct row early[] = {
        {JM_EV_RANK_EXIT, 5, NULL, 0, 0, 12, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_STOP, 5.2, NULL, 0, 0, 0, 0, NULL, "wait save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 5.5, NULL, 0, 0, 12, 0, NULL, "clear-gang event save answer", GANG_STOPPED,
         "stopped by request", ""},
        {JM_EV_TICK, 100, NULL, 0, 0, 0, 0, NULL, "", GANG_STOPPED, NULL},
    };
    RUN(&w, early);
    assert_int_equal(w.rt.ncrash, 0);
    world_done(&w);

    /* a deploy's stop phase (a switch) within the grace, then its activation: B starts, the
     * old release is not restarted in between */
    world_init(&w);
    RUN(&w, good_a);
    static const struct row deploy[] = {
        {JM_EV_RANK_EXIT, 5, NULL, 0, 0, 12, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 5, NULL, 0, 0, 12, 0, NULL, "event clear-gang save", GANG_BACKOFF, NULL},
        {JM_EV_STOP, 9, NULL, 90, 0, 0, 0, NULL, "wait event save answer", GANG_STOPPED, "stopped for a switch", ""},
        {JM_EV_TICK, 30, NULL, 0, 0, 0, 0, NULL, "", GANG_STOPPED, NULL},
        {JM_EV_ACTIVATE, 31, B, 60, 0, 0, 0, NULL, "wait switch event start-gang", GANG_STOPPED, "switched"},
        {JM_EV_START_OK, 31, NULL, 0, 0, 0, 0, NULL, "save answer gc", GANG_STARTING, NULL, ""},
    };
    RUN(&w, deploy);
    assert_string_equal(w.j->current, B);
    world_done(&w);

    /* a release on probation stopped and started again and again by the operator while its
     * ranks elsewhere are stopped first: never a crash loop, never reverted (three exits within
     * the crash window would be one) */
    world_init(&w);
    RUN(&w, good_a);
    RUN(&w, then_b);
    for (int k = 0; k < 3; k++) {
        double t = 20 + 10 * k;
        const struct row cycle[] = {
            {JM_EV_RANK_EXIT, t, NULL, 0, 0, 12, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
            {JM_EV_GANG_GONE, t, NULL, 0, 0, 12, 0, NULL, "event clear-gang save", GANG_BACKOFF, NULL},
            {JM_EV_STOP, t + 2, NULL, 0, 0, 0, 0, NULL, "wait event save answer", GANG_STOPPED, NULL},
            {JM_EV_START, t + 5, NULL, 0, 0, 0, 0, "g", "wait event start-gang", GANG_STOPPED, NULL},
            {JM_EV_START_OK, t + 5, NULL, 0, 0, 0, 0, NULL, "save answer", GANG_STARTING, NULL},
        };
        RUN(&w, cycle);
    }
    assert_string_equal(w.j->current, B);
    assert_int_equal(w.rt.ncrash, 0);
    /* ... while one that nobody follows with a stop is restarted (after the grace), not
     * reverted: the first exit in the window */
    static const struct row alone[] = {
        {JM_EV_RANK_EXIT, 60, NULL, 0, 0, 12, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 60, NULL, 0, 0, 12, 0, NULL, "event clear-gang save", GANG_BACKOFF, "(1 of 3"},
        {JM_EV_TICK, 61, NULL, 0, 0, 0, 0, NULL, "", GANG_BACKOFF, NULL},
        {JM_EV_TICK, 75, NULL, 0, 0, 0, 0, NULL, "event start-gang", GANG_BACKOFF, "restart 1"},
        {JM_EV_START_OK, 75, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, NULL},
    };
    RUN(&w, alone);
    assert_string_equal(w.j->current, B);
    world_done(&w);
    /* an exit 0 is still "completed" (the rank's own stop or max_steps): test_exit_codes' `done` */
}

/* `drover stop` of a gang whose rank ignores SIGTERM: the agent SIGKILLs it after its grace, but
 * answered "stopped: no process of the gang is left" as for any stop, so the controller printed
 * "stopped 15.1 s" and only the agent's log said SIGKILL: a checkpoint written on SIGTERM may be
 * missing.  The answer says it (common/agentcli.h AGENT_STOP_SIGKILLED), and a stop that ended
 * on SIGTERM does not. */
static void test_stop_answer_says_sigkill(void **state)
{
    (void)state;
    for (int killed = 0; killed <= 1; killed++) {
        struct world w;
        world_init(&w);
        RUN(&w, good_a);
        struct jm_event stop = {.kind = JM_EV_STOP, .now = 20, .rank = -1};
        struct jm_effects out = {0};
        jm_step(&w.p, w.j, &w.rt, &stop, &out);
        struct jm_event gone = {.kind = JM_EV_GANG_GONE, .now = 36, .rank = -1, .sigkilled = killed,
                                .grace_s = 15};
        out.n = 0;
        jm_step(&w.p, w.j, &w.rt, &gone, &out);
        const char *answer = NULL;
        for (int k = 0; k < out.n; k++)
            if (out.fx[k].kind == JM_FX_ANSWER)
                answer = out.fx[k].text;
        assert_non_null(answer);
        assert_non_null(strstr(answer, "stopped: no process of the gang is left"));
        double g = 0;
        assert_int_equal(agent_stop_was_sigkilled(answer, &g), killed);
        if (killed) {
            assert_true(g == 15);
            assert_non_null(strstr(answer, "SIGKILLed after its grace of 15 s"));
        }
        world_done(&w);
    }
}

/* `pct stop` and `pct start` of a container, then `drover install`: the new agent adopted the
 * gang its state.json named, whose processes had ended with the container, and read it as
 * "rank 0 killed by signal 9"; `drover status` said "last after rank 0 killed by signal 9".
 * The state records the container's init start with the host's boot id; when either changed,
 * the gang is not adopted and the relaunch says the container restarted.  An agent restart
 * within one boot of the container, and a state.json without the field, read as before. */
static void test_container_restart_said(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    RUN(&w, good_a);
    strcpy(w.j->boot_id, "b1");
    w.j->init_start = 1000;
    char *text = NULL;
    struct agent_state back;
    assert_int_equal(state_format(&w.st, &text), 0);
    assert_non_null(strstr(text, "\"init_start\":1000"));
    assert_int_equal(state_parse(text, strlen(text), &back), 0);
    free(text);
    assert_true(back.jobs[0].init_start == 1000);
    assert_false(state_job_saved_in_other_boot(&back.jobs[0], "b1", 1000)); /* the agent alone restarted */
    assert_true(state_job_saved_in_other_boot(&back.jobs[0], "b1", 2000));  /* pct stop, pct start */
    assert_true(state_job_saved_in_other_boot(&back.jobs[0], "b2", 1000));  /* the host rebooted */
    assert_false(state_job_saved_in_other_boot(&back.jobs[0], "", 0));      /* nothing known */
    state_done(&back);
    w.j->init_start = 0; /* an older agent's state.json: no field, nothing decided on it */
    assert_int_equal(state_format(&w.st, &text), 0);
    assert_null(strstr(text, "init_start"));
    assert_int_equal(state_parse(text, strlen(text), &back), 0);
    free(text);
    assert_false(state_job_saved_in_other_boot(&back.jobs[0], "b1", 2000));
    state_done(&back);
    /* the relaunch after it */
    jm_rt_done(&w.rt);
    jm_rt_init(&w.rt);
    struct jm_event ev = {.kind = JM_EV_AGENT_START, .now = 0.5, .rank = -1, .rebooted = true};
    struct jm_effects out = {0};
    jm_step(&w.p, w.j, &w.rt, &ev, &out);
    bool said = false;
    for (int k = 0; k < out.n; k++)
        said |= out.fx[k].kind == JM_FX_EVENT && strstr(out.fx[k].text, "the container restarted") != NULL;
    assert_true(said);
    struct jm_event ok = {.kind = JM_EV_START_OK, .now = 0.6, .rank = -1};
    out.n = 0;
    jm_step(&w.p, w.j, &w.rt, &ok, &out);
    if (!strstr(w.j->reason, "relaunched after the container restarted"))
        fail_msg("reason: %s", w.j->reason);
    world_done(&w);
}

/* A promoted release restarted twice by its agent, then the container restarted (pct stop and
 * start, a host reboot): the new boot is a new run, as a requested start is.  The old count and
 * its cause carried over: the first crash of the new boot waited the third backoff (4 s, not
 * 1 s), was "restart 3", and `drover status` said "restarted by its agent 2 times ..., last
 * after rank 0 exited with code 1" of a gang that had never crashed.  The relaunch's journal
 * event says what the previous boot counted.  An agent restart within one boot keeps both. */
static void test_container_restart_fresh_budget(void **state)
{
    (void)state;
    static const struct row crashes[] = {
        {JM_EV_RANK_EXIT, 10, NULL, 0, 0, 1, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 10, NULL, 0, 0, 1, 0, NULL, "event clear-gang save", GANG_BACKOFF, NULL},
        {JM_EV_TICK, 11, NULL, 0, 0, 0, 0, NULL, "event start-gang", GANG_BACKOFF, "restart 1"},
        {JM_EV_START_OK, 11, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, NULL},
        {JM_EV_RANK_EXIT, 12, NULL, 0, 0, 1, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
        {JM_EV_GANG_GONE, 12, NULL, 0, 0, 1, 0, NULL, "event clear-gang save", GANG_BACKOFF, NULL},
        {JM_EV_TICK, 14, NULL, 0, 0, 0, 0, NULL, "event start-gang", GANG_BACKOFF, "restart 2"},
        {JM_EV_START_OK, 14, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, NULL},
    };
    for (int rebooted = 0; rebooted <= 1; rebooted++) {
        struct world w;
        world_init(&w);
        RUN(&w, good_a);
        RUN(&w, crashes);
        assert_int_equal(w.j->restarts, 2);
        jm_rt_done(&w.rt); /* the next agent, its gang not adopted */
        jm_rt_init(&w.rt);
        struct jm_event ev = {.kind = JM_EV_AGENT_START, .now = 0.5, .rank = -1, .rebooted = rebooted};
        struct jm_effects out = {0};
        jm_step(&w.p, w.j, &w.rt, &ev, &out);
        const char *said = NULL;
        for (int k = 0; k < out.n; k++)
            if (out.fx[k].kind == JM_FX_EVENT && !strcmp(out.fx[k].what, "restart"))
                said = out.fx[k].text;
        assert_non_null(said);
        if (!rebooted) {
            assert_int_equal(w.j->restarts, 2);
            assert_non_null(strstr(w.j->last_restart_reason, "exited with code 1"));
            world_done(&w);
            continue;
        }
        if (!strstr(said, "fresh restart budget; the previous boot's 2 restarts are not counted (the "
                          "last after rank 0 exited with code 1"))
            fail_msg("event: %s", said);
        assert_int_equal(w.j->restarts, 0);
        assert_string_equal(w.j->last_restart_reason, "");
        static const struct row after[] = {
            {JM_EV_START_OK, 0.5, NULL, 0, 0, 0, 0, NULL, "save", GANG_STARTING, "after the container restarted"},
            {JM_EV_RANK_EXIT, 5, NULL, 0, 0, 1, 0, NULL, "stop-gang save", GANG_STOPPING, NULL},
            {JM_EV_GANG_GONE, 5, NULL, 0, 0, 1, 0, NULL, "event clear-gang save", GANG_BACKOFF, NULL},
            /* the first backoff (1 s) and the first restart of this boot */
            {JM_EV_TICK, 6, NULL, 0, 0, 0, 0, NULL, "event start-gang", GANG_BACKOFF, "restart 1:"},
        };
        RUN(&w, after);
        world_done(&w);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_activate_promote),
        cmocka_unit_test(test_crash_loop_reverts_and_marks_bad),
        cmocka_unit_test(test_exit_codes),
        cmocka_unit_test(test_probation_deadline),
        cmocka_unit_test(test_diverged),
        cmocka_unit_test(test_hung),
        cmocka_unit_test(test_hung_first_step_reason_fits),
        cmocka_unit_test(test_reason_not_cut_inside_a_command),
        cmocka_unit_test(test_hung_promoted_real_pace),
        cmocka_unit_test(test_last_restart_reason_kept),
        cmocka_unit_test(test_start_resets_restarts),
        cmocka_unit_test(test_revert_no_mark),
        cmocka_unit_test(test_failed_probation_of_once_promoted_marks_bad),
        cmocka_unit_test(test_crash_loop_of_once_promoted_on_probation_reverts),
        cmocka_unit_test(test_fatal_exit_of_once_promoted_on_probation_reverts),
        cmocka_unit_test(test_promoted_fatal_stop_marks_bad),
        cmocka_unit_test(test_start_failures),
        cmocka_unit_test(test_requests),
        cmocka_unit_test(test_switch_stop_then_start),
        cmocka_unit_test(test_switch_deadline),
        cmocka_unit_test(test_two_phase_revert),
        cmocka_unit_test(test_revert_when_already_back),
        cmocka_unit_test(test_revert_no_start_leaves_job_stopped),
        cmocka_unit_test(test_probation_deadline_survives_abort),
        cmocka_unit_test(test_shutdown_adopt_and_agent_start),
        cmocka_unit_test(test_state_marks_round_trip),
        cmocka_unit_test(test_promote_checks_spec_digest),
        cmocka_unit_test(test_spec_eviction_keeps_promoted_pairs),
        cmocka_unit_test(test_spec_change_of_good_release),
        cmocka_unit_test(test_revert_joins_own_revert),
        cmocka_unit_test(test_peer_stopped),
        cmocka_unit_test(test_peer_exit_said),
        cmocka_unit_test(test_stop_answer_says_sigkill),
        cmocka_unit_test(test_container_restart_said),
        cmocka_unit_test(test_container_restart_fresh_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
