/* Unit tests for controller/deploy/probation.c: synthetic status sequences for each rule and verdict
 * string: pass, throughput regression, warmup excluded, NaN, crash, missing heartbeat, stalls,
 * agent reverting on its own, no baseline, recovery after a revert. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/samples.h"
#include "common/trainexit.h"
#include "controller/deploy/probation.h"
#include "tests/unit/capture.h"

#define NEW "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define OLD "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static const char *labels[] = { "h1:101", "h1:102" };

static struct inv_policy policy(void)
{
    struct inv_policy p;
    inventory_policy_defaults(&p);
    p.healthy_deadline_s = 30;
    p.min_healthy_time_s = 20;
    p.warmup_steps = 10;
    p.tolerance = 0.2;
    p.progress_deadline_s = 300;
    return p;
}

/* One container's document: nproc ranks of node `node`, all at `step` with tok_s each. */
static void make_status(struct agent_status *st, int node, int nproc, const char *release,
                        long long step, double tok_s, double loss)
{
    memset(st, 0, sizeof *st);
    strcpy(st->host, "ct");
    st->njobs = 1;
    struct job_status *js = &st->jobs[0];
    strcpy(js->job, "train");
    strcpy(js->current, release);
    strcpy(js->good, OLD);
    strcpy(js->release, release);
    js->state = GANG_RUNNING;
    js->nranks = nproc;
    for (int i = 0; i < nproc; i++)
        fake_rank_training(&js->ranks[i], node * nproc + i, i, release, step, tok_s, loss);
}

/* The agent's reason and its code, as an agent of today sends them (common/status.h): the
 * controller decides on the code, the text is for people. */
static void set_reason(struct job_status *js, enum status_reason code, const char *text)
{
    js->reason_code = code;
    snprintf(js->reason, sizeof js->reason, "%s", text);
}

static struct probation *new_p(double baseline, int ncts, int nproc)
{
    struct inv_policy pol = policy();
    struct probation *p = NULL;
    assert_int_equal(probation_new(&pol, "train", NEW, ncts, labels, nproc, baseline, false, 0, &p), 0);
    return p;
}

/* Feed both containers one document per second from t0 to t1, step = t (1 step/s). */
static enum probation_verdict run(struct probation *p, int ncts, int nproc, double t0, double t1,
                                  double tok_s, struct agent_status *st)
{
    enum probation_verdict v = PROBATION_PENDING;
    for (double t = t0; t <= t1 && v == PROBATION_PENDING; t += 1) {
        for (int c = 0; c < ncts; c++) {
            make_status(st, c, nproc, NEW, (long long)t, tok_s, 3.5);
            probation_feed(p, c, st, t);
        }
        v = probation_check(p, t);
    }
    return v;
}

static void test_pass_with_baseline(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct probation *p = new_p(96.5, 2, 2);
    /* 4 ranks * 24 Ktok/s = 96 Ktok/s, above 0.8 * 96.5 */
    assert_int_equal(run(p, 2, 2, 1, 100, 24000, st), PROBATION_PASS);
    assert_true(fabs(probation_ktok_s(p) - 96.0) < 1e-6);
    /* a baseline known as one number: the sign test's interval of the median */
    assert_non_null(strstr(probation_reason(p), "throughput -0.5% [-0.5%, -0.5%] against the baseline, "
                                                "within tolerance -20.0% (sign test"));
    assert_non_null(strstr(probation_reason(p), "median 96.0 Ktok/s of "));
    assert_string_equal(probation_note(p), "");
    probation_free(p);
    probation_free(NULL);
    free(st);
}

/* A container whose host stopped answering: the progress line said "2/2 ranks heartbeating,
 * step 1140, 2.53 Ktok/s" for the whole healthy_deadline, its last figures shown as live.  It
 * names the container and how long it has been quiet once that is PROBATION_QUIET_S or more. */
static void test_describe_names_quiet_container(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct probation *p = new_p(0, 2, 1);
    char line[512];
    for (double t = 1; t <= 5; t += 1)
        for (int c = 0; c < 2; c++) {
            make_status(st, c, 1, NEW, (long long)t, 1000, 3.5);
            probation_feed(p, c, st, t);
        }
    probation_describe(p, 5, line, sizeof line);
    assert_null(strstr(line, "no status"));
    /* h1:102 goes on, h1:101 falls silent after t=5 */
    for (double t = 6; t <= 20; t += 1) {
        make_status(st, 1, 1, NEW, (long long)t, 1000, 3.5);
        probation_feed(p, 1, st, t);
    }
    probation_describe(p, 5 + PROBATION_QUIET_S - 1, line, sizeof line);
    assert_null(strstr(line, "no status"));
    probation_describe(p, 20, line, sizeof line);
    if (!strstr(line, "; no status from h1:101 for 15s: its figures are that old (healthy_deadline 30s)"))
        fail_msg("line: %s", line);
    /* both quiet: the older one, and that there are others */
    probation_describe(p, 40, line, sizeof line);
    if (!strstr(line, "; no status from h1:101 and others for 35s"))
        fail_msg("line: %s", line);
    probation_free(p);
    free(st);
}

/* A rank frozen (SIGSTOP) in a container whose agent still answers: the line said "3/3 ranks
 * heartbeating, step 1424, 3.37 Ktok/s" for a minute, the frozen rank's last figures as live.
 * It names the rank and how long it has been silent once that is PROBATION_QUIET_S or more. */
static void test_describe_names_silent_rank(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct probation *p = new_p(0, 2, 1);
    char line[512];
    for (double t = 1; t <= 20; t += 1)
        for (int c = 0; c < 2; c++) {
            bool frozen = c == 1 && t > 5;
            make_status(st, c, 1, NEW, frozen ? 5 : (long long)t, 1000, 3.5);
            if (frozen)
                st->jobs[0].ranks[0].hb_age_s = t - 5;
            probation_feed(p, c, st, t);
            if (t == 5 + PROBATION_QUIET_S - 1 && c == 1) {
                probation_describe(p, t, line, sizeof line);
                assert_null(strstr(line, "no heartbeat"));
            }
        }
    probation_describe(p, 20, line, sizeof line);
    if (!strstr(line, "; no heartbeat from rank 1 (h1:102) for 15s: their figures are that old (healthy_deadline 30s)"))
        fail_msg("line: %s", line);
    assert_null(strstr(line, "no status"));
    /* the other rank blocks in its next collective and falls silent too: both counted */
    for (double t = 21; t <= 25; t += 1)
        for (int c = 0; c < 2; c++) {
            make_status(st, c, 1, NEW, c == 1 ? 5 : 20, 1000, 3.5);
            st->jobs[0].ranks[0].hb_age_s = c == 1 ? t - 5 : t - 14;
            probation_feed(p, c, st, t);
        }
    probation_describe(p, 25, line, sizeof line);
    if (!strstr(line, "; no heartbeat from rank 1 (h1:102) and 1 other rank for 20s: their figures"))
        fail_msg("line: %s", line);
    probation_free(p);
    free(st);
}

static void test_throughput_regression(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct probation *p = new_p(96.5, 2, 2);
    /* 4 * 10.3 = 41.2 Ktok/s */
    assert_int_equal(run(p, 2, 2, 1, 100, 10300, st), PROBATION_FAIL);
    assert_string_equal(probation_reason(p),
                        "throughput regression: -57.3% [-57.3%, -57.3%] against the baseline, beyond "
                        "tolerance -20.0% (sign test, 95% interval of the median against the recorded "
                        "96.5 Ktok/s baseline; median 41.2 Ktok/s of 21 samples, p<0.001; 8 warmup "
                        "samples excluded)");
    /* the verdict sticks */
    make_status(st, 0, 2, NEW, 500, 90000, 3.0);
    probation_feed(p, 0, st, 200);
    assert_int_equal(probation_check(p, 200), PROBATION_FAIL);
    probation_free(p);
    free(st);
}

static void test_warmup_excluded(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct probation *p = new_p(100, 1, 1);
    /* slow during the first 10 steps (warmup), normal after: must pass */
    enum probation_verdict v = PROBATION_PENDING;
    for (int t = 1; t <= 60 && v == PROBATION_PENDING; t++) {
        make_status(st, 0, 1, NEW, t, t < 10 ? 10000 : 99000, 3.0);
        probation_feed(p, 0, st, t);
        v = probation_check(p, t);
    }
    assert_int_equal(v, PROBATION_PASS);
    assert_true(probation_ktok_s(p) > 98);
    probation_free(p);
    /* warmup counts steps since the resumed checkpoint, not the absolute step */
    p = new_p(100, 1, 1);
    v = PROBATION_PENDING;
    for (int t = 1; t <= 60 && v == PROBATION_PENDING; t++) {
        make_status(st, 0, 1, NEW, 1000 + t, t < 10 ? 10000 : 99000, 3.0);
        st->jobs[0].ranks[0].hb.resumed_from = 1000;
        probation_feed(p, 0, st, t);
        v = probation_check(p, t);
    }
    assert_int_equal(v, PROBATION_PASS);
    assert_true(probation_ktok_s(p) > 98);
    long long step, resumed;
    probation_progress(p, &step, &resumed);
    assert_int_equal(resumed, 1000);
    probation_free(p);
    free(st);
}

static void test_nan_loss(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct probation *p = new_p(100, 2, 1);
    assert_int_equal(run(p, 2, 1, 1, 25, 50000, st), PROBATION_PENDING);
    make_status(st, 1, 1, NEW, 37, 50000, NAN);
    probation_feed(p, 1, st, 31);
    assert_int_equal(probation_check(p, 31), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "non-finite loss at step 37 on rank 1 (h1:102)");
    probation_free(p);
    free(st);
}

/* The exit code the verdict names, typed: the deploy waits for the agent's environment verdict
 * on drover-train's exit 9 (TX_DEVICE), whatever the words around it say (it used to look for
 * "exited with code 9 " in the verdict: a worker's error text quoting those words made it wait,
 * a reworded verdict would have reverted on a broken GPU). */
static void test_exit_code_is_typed(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    make_status(st, 0, 1, NEW, 0, 0, NAN);
    struct rank_status *rs = &st->jobs[0].ranks[0];
    rs->hb.phase = HB_PHASE_INIT;
    strcpy(rs->state, "exited");
    static const struct {
        int code, sig;
        const char *error; /* the worker's last word */
        int want;
    } rows[] = {
        { TX_DEVICE, 0, "", TX_DEVICE },
        { TX_DEVICE, 0, "cudaGetDeviceCount: no CUDA-capable device", TX_DEVICE },
        { 1, 0, "child exited with code 9 (device error)", 1 },
        { -1, 9, "", -1 },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct probation *p = new_p(100, 2, 1);
        strcpy(rs->state, rows[i].sig ? "killed" : "exited");
        rs->exit_code = rows[i].code;
        rs->exit_signal = rows[i].sig;
        rs->has_hb = rows[i].error[0] != '\0';
        strcpy(rs->hb.error, rows[i].error);
        assert_int_equal(probation_exit_code(p), -1); /* no verdict yet */
        probation_feed(p, 0, st, 2);
        assert_int_equal(probation_check(p, 2), PROBATION_FAIL);
        assert_int_equal(probation_exit_code(p), rows[i].want);
        /* a container stopped under the gang explains it instead: no exit named */
        probation_ct_stopped(p, 0, "CT 101 not running");
        assert_int_equal(probation_exit_code(p), -1);
        probation_free(p);
    }
    free(st);
}

static void test_crash(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct probation *p = new_p(100, 2, 1);
    make_status(st, 0, 1, NEW, 0, 0, NAN);
    struct rank_status *rs = &st->jobs[0].ranks[0];
    rs->hb.phase = HB_PHASE_INIT;
    /* no error text in the heartbeat: the code is named from docs/errors.md */
    strcpy(rs->state, "exited");
    rs->exit_code = 4;
    probation_feed(p, 0, st, 2);
    assert_int_equal(probation_check(p, 2), PROBATION_FAIL);
    /* a single rank's exit points at the workers' log as a crash loop's verdict does */
    assert_string_equal(probation_reason(p), "rank 0 on h1:101 exited with code 4 (data error) at start; "
                                             "see `drover logs --job train`");
    assert_int_equal(probation_exit_code(p), 4); /* typed, for the deploy's decisions */
    probation_free(p);
    /* exit 127 (a worker's `#!/usr/bin/env python` without python, a library the loader cannot
     * find): the verdict gives the hint preflight gives, not a bare "exited with code 127" */
    p = new_p(100, 2, 1);
    rs->exit_code = 127;
    probation_feed(p, 0, st, 2);
    assert_int_equal(probation_check(p, 2), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "rank 0 on h1:101 exited with code 127 (a command it runs, or a "
                                             "shared library it needs, was not found) at start; "
                                             "see `drover logs --job train`");
    probation_free(p);
    rs->exit_code = 4;
    /* a worker's error text is quoted escaped: no title change, erase-line or forged record */
    p = new_p(100, 2, 1);
    rs->has_hb = true;
    strcpy(rs->hb.error, "\033]0;owned\007bad\r\033[2Kshard\n<0>forged");
    probation_feed(p, 0, st, 2);
    assert_int_equal(probation_check(p, 2), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "rank 0 on h1:101 exited with code 4 "
                        "(\\x1b]0;owned\\x07bad\\r\\x1b[2Kshard\\n<0>forged) at start; see `drover logs --job train`");
    rs->hb.error[0] = '\0';
    probation_free(p);
    /* a restart the agent already did also fails it */
    p = new_p(100, 2, 1);
    make_status(st, 1, 1, NEW, 5, 50000, 3.0);
    st->jobs[0].restarts = 1;
    set_reason(&st->jobs[0], STATUS_RC_RANK_EXIT, "rank 1 exited with code 1");
    probation_feed(p, 1, st, 3);
    assert_int_equal(probation_check(p, 3), PROBATION_FAIL);
    assert_non_null(strstr(probation_reason(p), "h1:102 restarted (restarts 1)"));
    /* a crash: the verdict points at the workers' own output, naming the job */
    assert_non_null(strstr(probation_reason(p), "rank 1 exited with code 1; see `drover logs --job train`"));
    probation_free(p);
    /* a crash loop: the agent backs off "...; restarting", but drover reverts: the verdict does
     * not repeat the agent's plan */
    p = new_p(100, 2, 1);
    make_status(st, 1, 1, NEW, 5, 50000, 3.0);
    st->jobs[0].state = GANG_BACKOFF;
    set_reason(&st->jobs[0], STATUS_RC_RANK_EXIT, "rank 1 exited with code 1 (1 of 3 in 120 s); restarting");
    probation_feed(p, 1, st, 3);
    assert_int_equal(probation_check(p, 3), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "the gang on h1:102 lost a rank and is backing off (restarts 0): "
                                             "rank 1 exited with code 1 (1 of 3 in 120 s); see `drover logs --job train`");
    probation_free(p);
    /* ... and keeps the worker's own last word that the agent appends after its plan (an
     * uncaught exception a PyTorch worker reported with hb.error(), a ';' in it included):
     * without it the operator sees only "exited with code 1" */
    p = new_p(100, 2, 1);
    set_reason(&st->jobs[0], STATUS_RC_RANK_EXIT, "rank 1 exited with code 1 (1 of 3 in 120 s); restarting "
                               "[rank 1: RuntimeError: boom; the loss divides by zero]");
    probation_feed(p, 1, st, 3);
    assert_int_equal(probation_check(p, 3), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "the gang on h1:102 lost a rank and is backing off (restarts 0): "
                                             "rank 1 exited with code 1 (1 of 3 in 120 s) "
                                             "[rank 1: RuntimeError: boom; the loss divides by zero]; see `drover logs --job train`");
    probation_free(p);
    p = new_p(100, 2, 1);
    set_reason(&st->jobs[0], STATUS_RC_RANK_EXIT, "rank 1 exited with code 1; restarting promoted release [rank 1: OSError: x]");
    probation_feed(p, 1, st, 3);
    assert_int_equal(probation_check(p, 3), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "the gang on h1:102 lost a rank and is backing off (restarts 0): "
                                             "rank 1 exited with code 1 [rank 1: OSError: x]; see `drover logs --job train`");
    probation_free(p);
    st->jobs[0].state = GANG_RUNNING;
    /* a gang whose worker finished at once */
    p = new_p(100, 2, 1);
    make_status(st, 0, 1, NEW, 0, 0, 3.0);
    st->jobs[0].state = GANG_STOPPED;
    st->jobs[0].nranks = 0;
    set_reason(&st->jobs[0], STATUS_RC_COMPLETED, "completed (rank 0 exited with code 0)");
    probation_feed(p, 0, st, 2);
    assert_int_equal(probation_check(p, 2), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "the gang on h1:101 stopped: completed (rank 0 exited with code 0); "
                                             "see `drover logs --job train`");
    probation_free(p);
    /* a killed rank */
    p = new_p(100, 2, 1);
    make_status(st, 1, 1, NEW, 12, 50000, 3.0);
    st->jobs[0].ranks[0].exit_signal = 9;
    strcpy(st->jobs[0].ranks[0].state, "killed");
    probation_feed(p, 1, st, 3);
    assert_int_equal(probation_check(p, 3), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "rank 1 on h1:102 killed by signal 9 at step 12; see `drover logs --job train`");
    probation_free(p);
    free(st);
}

/* Container 1's ranks stopped only because container 0's crashed (drover-train and the PyTorch
 * example exit 12, peer_stopped): its document came first and the verdict quoted it, naming no
 * cause.  Container 0's, fed in the deploy's settle look after the FAIL, replaces it; nothing
 * there, or another peer stop, leaves it.  Container 1 says it either by its rank's exit code
 * (read before the gang is gone) or, backing off for the grace, by "peer_exit" (its ranks are
 * gone by then); a backoff without it is a cause of its own.  peer_lost (8, the usual exit of
 * the others when one rank crashes) gives way the same. */
static void peer_doc(struct agent_status *st, bool backoff, bool flag)
{
    make_status(st, 1, 1, NEW, 6, 50000, 3.0);
    if (!backoff) {
        st->jobs[0].ranks[0].exit_code = TX_PEER_STOPPED;
        strcpy(st->jobs[0].ranks[0].state, "exited");
        return;
    }
    st->jobs[0].nranks = 0;
    st->jobs[0].state = GANG_BACKOFF;
    st->jobs[0].peer_exit = flag;
    set_reason(&st->jobs[0], STATUS_RC_RANK_EXIT, "rank 1 exited with code 12 (peer_stopped); restarting");
}

static void test_peer_stopped_gives_way(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct agent_status *st0 = malloc(sizeof *st0);
    static const struct {
        bool backoff, flag; /* how container 1 says it first */
        int ct0;            /* container 0: 0 crashed, 1 still trains, 2 peer-stopped too */
        bool again;         /* container 1 says it again (backing off) before container 0 */
        bool replaced;
    } rows[] = {
        {false, false, 0, false, true},
        {false, false, 1, false, false},
        {false, false, 2, false, false},
        {false, false, 0, true, true},
        {true, true, 0, false, true},
        {true, true, 2, false, false},
        {true, false, 0, false, false}, /* a backoff of its own (an older agent, or a crash) */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct probation *p = new_p(100, 2, 1);
        assert_int_equal(run(p, 2, 1, 1, 5, 50000, st), PROBATION_PENDING);
        peer_doc(st, rows[i].backoff, rows[i].flag);
        probation_feed(p, 1, st, 6);
        assert_int_equal(probation_check(p, 6), PROBATION_FAIL);
        char first[512];
        snprintf(first, sizeof first, "%s", probation_reason(p));
        assert_non_null(strstr(first, "h1:102"));
        if (rows[i].again) {
            peer_doc(st, true, true);
            probation_feed(p, 1, st, 6.5);
            assert_string_equal(probation_reason(p), first);
        }
        make_status(st0, 0, 1, NEW, 6, 50000, 3.0);
        struct rank_status *r0 = &st0->jobs[0].ranks[0];
        if (rows[i].ct0 == 0) {
            r0->exit_code = 1;
            strcpy(r0->state, "exited");
            strcpy(r0->hb.error, "RuntimeError: boom");
        } else if (rows[i].ct0 == 2) {
            r0->exit_code = TX_PEER_STOPPED;
            strcpy(r0->state, "exited");
        }
        probation_feed(p, 0, st0, 7);
        assert_int_equal(probation_check(p, 7), PROBATION_FAIL);
        if (rows[i].replaced) {
            assert_non_null(strstr(probation_reason(p), "rank 0 on h1:101 exited with code 1"));
            assert_non_null(strstr(probation_reason(p), "boom"));
            assert_int_equal(probation_exit_code(p), 1);
            /* a later peer stop does not take the cause's place */
            peer_doc(st, false, false);
            probation_feed(p, 1, st, 8);
            assert_non_null(strstr(probation_reason(p), "rank 0 on h1:101"));
        } else {
            if (strcmp(probation_reason(p), first) != 0)
                fail_msg("row %zu: '%s' replaced '%s'", i, probation_reason(p), first);
        }
        probation_free(p);
    }
    /* restarted after a peer exit, read before its first train heartbeat: still no cause */
    {
        struct probation *q = new_p(100, 2, 1);
        assert_int_equal(run(q, 2, 1, 1, 5, 50000, st), PROBATION_PENDING);
        make_status(st, 1, 1, NEW, 6, 50000, 3.0);
        st->jobs[0].state = GANG_STARTING;
        st->jobs[0].restarts = 1;
        st->jobs[0].peer_exit = true;
        set_reason(&st->jobs[0], STATUS_RC_RANK_EXIT, "restarted after rank 1 exited with code 8 (peer lost)");
        probation_feed(q, 1, st, 6);
        assert_non_null(strstr(probation_reason(q), "h1:102 restarted (restarts 1)"));
        make_status(st0, 0, 1, NEW, 6, 50000, 3.0);
        st0->jobs[0].ranks[0].exit_code = 1;
        strcpy(st0->jobs[0].ranks[0].state, "exited");
        probation_feed(q, 0, st0, 7);
        assert_non_null(strstr(probation_reason(q), "rank 0 on h1:101 exited with code 1"));
        probation_free(q);
        st->jobs[0].restarts = 0;
        st->jobs[0].peer_exit = false;
    }
    /* a container stopped under the gang is the cause: a crash fed after it does not replace it */
    {
        struct probation *q = new_p(100, 2, 1);
        assert_int_equal(run(q, 2, 1, 1, 5, 50000, st), PROBATION_PENDING);
        peer_doc(st, false, false);
        probation_feed(q, 1, st, 6);
        probation_ct_stopped(q, 0, "CT 101 not running");
        make_status(st0, 0, 1, NEW, 6, 50000, 3.0);
        st0->jobs[0].state = GANG_BACKOFF;
        set_reason(&st0->jobs[0], STATUS_RC_RANK_EXIT, "rank 0 exited with code 1; restarting");
        probation_feed(q, 0, st0, 7);
        assert_string_equal(probation_reason(q), "container h1:101 stopped during probation (pct: CT 101 not running)");
        probation_free(q);
    }
    /* peer_lost (8): the others' exit when one rank crashes outright */
    struct probation *p = new_p(100, 2, 1);
    assert_int_equal(run(p, 2, 1, 1, 5, 50000, st), PROBATION_PENDING);
    peer_doc(st, false, false);
    st->jobs[0].ranks[0].exit_code = TX_PEER_LOST;
    probation_feed(p, 1, st, 6);
    assert_int_equal(probation_exit_code(p), TX_PEER_LOST);
    make_status(st0, 0, 1, NEW, 6, 50000, 3.0);
    st0->jobs[0].ranks[0].exit_signal = 6;
    strcpy(st0->jobs[0].ranks[0].state, "killed");
    probation_feed(p, 0, st0, 7);
    assert_non_null(strstr(probation_reason(p), "rank 0 on h1:101 killed by signal 6"));
    probation_free(p);
    free(st0);
    free(st);
}

/* The frozen rank's peers: ct 1's rank (rank 1) freezes after step 5 at t=5 and stays alive;
 * rank 0 steps once more, blocks in its next collective and exits 8 (peer lost) at t=20.  ct 0
 * is read first. */
static void frozen_docs(struct probation *p, struct agent_status *st, int frozen_steps, bool frozen_killed)
{
    assert_int_equal(run(p, 2, 1, 1, 5, 50000, st), PROBATION_PENDING);
    for (double t = 6; t <= 19; t += 1) {
        make_status(st, 0, 1, NEW, 6, 50000, 3.0);
        st->jobs[0].ranks[0].hb_age_s = t - 6;
        probation_feed(p, 0, st, t);
        make_status(st, 1, 1, NEW, frozen_steps, 50000, 3.0);
        st->jobs[0].ranks[0].hb_age_s = t - 5;
        if (frozen_killed && t == 19) { /* its agent killed it for its silence first */
            st->jobs[0].ranks[0].exit_signal = 9;
            strcpy(st->jobs[0].ranks[0].state, "killed");
        }
        probation_feed(p, 1, st, t);
        if (!frozen_killed || t < 19)
            assert_int_equal(probation_check(p, t), PROBATION_PENDING);
    }
}

/* A rank that froze (no heartbeat, still alive) while its peers timed out and exited 8: the
 * verdict named "rank 0 on h1:101 exited with code 8 (peer lost)", the survivor, and the
 * operator looked at the wrong rank.  The rank silent since before the exit, that had really
 * run (PROBATION_SILENT_MIN_STEPS), with the oldest heartbeat, is the cause, with no exit code
 * of its own; an exit it did not precede by PROBATION_QUIET_S, a rank that never ran, or one
 * that ended itself leave the exit's verdict as it was. */
static void test_frozen_rank_is_the_cause(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct probation *p = new_p(100, 2, 1);
    frozen_docs(p, st, 5, false);
    make_status(st, 0, 1, NEW, 6, 50000, 3.0);
    st->jobs[0].ranks[0].hb_age_s = 14;
    st->jobs[0].ranks[0].exit_code = TX_PEER_LOST;
    strcpy(st->jobs[0].ranks[0].state, "exited");
    probation_feed(p, 0, st, 20);
    assert_int_equal(probation_check(p, 20), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "rank 1 on h1:102 stopped sending heartbeats 15 s before the "
                        "others exited (last step 5), and the others followed it: rank 0 on h1:101 exited "
                        "with code 8 (peer lost) at step 6; see `drover logs --job train`");
    assert_int_equal(probation_exit_code(p), -1); /* no exit of its own */
    /* the frozen rank's container read in the settle look (still frozen) changes nothing */
    char was[PROBATION_REASON_MAX];
    snprintf(was, sizeof was, "%s", probation_reason(p));
    make_status(st, 1, 1, NEW, 5, 50000, 3.0);
    st->jobs[0].ranks[0].hb_age_s = 16;
    probation_feed(p, 1, st, 21);
    assert_string_equal(probation_reason(p), was);
    probation_free(p);

    /* the same told by a container backing off after its ranks' peer exit */
    p = new_p(100, 2, 1);
    frozen_docs(p, st, 5, false);
    make_status(st, 0, 1, NEW, 6, 50000, 3.0);
    st->jobs[0].nranks = 0; /* its rank is gone */
    st->jobs[0].state = GANG_BACKOFF;
    st->jobs[0].peer_exit = true;
    set_reason(&st->jobs[0], STATUS_RC_RANK_EXIT, "rank 0 exited with code 8 (peer_lost); restarting");
    probation_feed(p, 0, st, 20);
    assert_int_equal(probation_check(p, 20), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "rank 1 on h1:102 stopped sending heartbeats 15 s before the "
                        "others exited (last step 5), and the others followed it: the gang on h1:101 lost a "
                        "rank and is backing off (restarts 0): rank 0 exited with code 8 (peer_lost); see "
                        "`drover logs --job train`");
    assert_int_equal(probation_exit_code(p), -1);
    assert_int_equal(probation_agent_code(p), STATUS_RC_NONE);
    probation_free(p);

    /* a rank that froze right at its start (fewer than PROBATION_SILENT_MIN_STEPS steps): not
     * known to have run, the exit is named as before */
    p = new_p(100, 2, 1);
    struct agent_status *st1 = malloc(sizeof *st1);
    assert_int_equal(run(p, 2, 1, 1, 2, 50000, st), PROBATION_PENDING);
    for (double t = 3; t <= 19; t += 1) {
        make_status(st1, 1, 1, NEW, 2, 50000, 3.0);
        st1->jobs[0].ranks[0].hb_age_s = t - 2;
        probation_feed(p, 1, st1, t);
    }
    make_status(st, 0, 1, NEW, 3, 50000, 3.0);
    st->jobs[0].ranks[0].exit_code = TX_PEER_LOST;
    strcpy(st->jobs[0].ranks[0].state, "exited");
    probation_feed(p, 0, st, 20);
    assert_int_equal(probation_check(p, 20), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "rank 0 on h1:101 exited with code 8 (peer lost) at step 3; "
                                             "see `drover logs --job train`");
    assert_int_equal(probation_exit_code(p), TX_PEER_LOST);
    probation_free(p);
    free(st1);

    /* the frozen rank was killed by its agent first: that exit is the cause, named as before */
    p = new_p(100, 2, 1);
    frozen_docs(p, st, 5, true);
    assert_string_equal(probation_reason(p), "rank 1 on h1:102 killed by signal 9 at step 5; "
                                             "see `drover logs --job train`");
    probation_free(p);

    /* an exit with every rank beating until just before it (a crash's peers): as before */
    p = new_p(100, 2, 1);
    assert_int_equal(run(p, 2, 1, 1, 20, 50000, st), PROBATION_PENDING);
    make_status(st, 0, 1, NEW, 20, 50000, 3.0);
    st->jobs[0].ranks[0].hb_age_s = PROBATION_QUIET_S - 2;
    st->jobs[0].ranks[0].exit_code = TX_PEER_LOST;
    strcpy(st->jobs[0].ranks[0].state, "exited");
    probation_feed(p, 0, st, 21);
    assert_string_equal(probation_reason(p), "rank 0 on h1:101 exited with code 8 (peer lost) at step 20; "
                                             "see `drover logs --job train`");
    probation_free(p);
    free(st);
}

/* A whole gang silent behind one rank that froze (the others block in their next collective):
 * the verdict named the rank that the document read first reached first, rank 0, not rank 1,
 * which stopped 4 s before the rest.  ct 0 (ranks 0 and 1) is read last at t=20, then its host
 * is slow to answer until t=40; ct 1 (ranks 2 and 3) answers each second. */
static void test_silent_names_first_to_stop(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct probation *p = new_p(100, 2, 2);
    assert_int_equal(run(p, 2, 2, 1, 5, 50000, st), PROBATION_PENDING);
    enum probation_verdict v = PROBATION_PENDING;
    for (double t = 6; t <= 40 && v == PROBATION_PENDING; t += 1) {
        for (int c = 0; c < 2; c++) {
            if (c == 0 && t > 20 && t < 40)
                continue;
            make_status(st, c, 2, NEW, t < 9 ? (long long)t : 9, 50000, 3.0);
            for (int i = 0; i < 2; i++)
                st->jobs[0].ranks[i].hb_age_s = t < 9 ? 0.5 : t - 9;
            if (c == 0) { /* rank 1 froze after step 5 */
                st->jobs[0].ranks[1].hb.step = 5;
                st->jobs[0].ranks[1].hb_age_s = t - 5;
            }
            probation_feed(p, c, st, t);
        }
        v = probation_check(p, t);
    }
    assert_int_equal(v, PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "silent: no heartbeat from rank 1 (h1:101) for 35s in phase train "
                        "(healthy_deadline 30s); every rank fell silent, rank 1 first (last step 5), 4s "
                        "before rank 0 (h1:101)");
    probation_free(p);
    free(st);
}

/* probation_find_silent(), the rule rebaseline shares: the oldest heartbeat of the ranks that
 * ran, if that rank still runs and is quiet long enough. */
static void test_find_silent_rule(void **state)
{
    (void)state;
    int next = 77;
    struct rank_silence r[3] = {
        {3, 40, false}, {PROBATION_QUIET_S + 4, 37, false}, {PROBATION_QUIET_S + 1, 40, false},
    };
    assert_int_equal(probation_find_silent(r, 3, &next), 1);
    assert_int_equal(next, 2);
    r[1].steps = PROBATION_SILENT_MIN_STEPS - 1; /* never really ran: the next oldest */
    assert_int_equal(probation_find_silent(r, 3, &next), 2);
    assert_int_equal(next, 1);
    r[2].ended = true; /* the oldest that ran ended: its exit is the cause */
    next = 77;
    assert_int_equal(probation_find_silent(r, 3, &next), -1);
    assert_int_equal(next, 77);
    r[2] = (struct rank_silence){PROBATION_QUIET_S - 1, 40, false}; /* not quiet long enough */
    assert_int_equal(probation_find_silent(r, 3, &next), -1);
    r[2].hb_age_s = -1; /* none yet */
    assert_int_equal(probation_find_silent(r, 3, &next), -1);
    assert_int_equal(probation_find_silent(r, 0, &next), -1);
    assert_int_equal(next, 77);
}

static void test_missing_heartbeat(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct probation *p = new_p(100, 2, 1);
    /* node 0 heartbeats with the new release; node 1 still shows the old release's heartbeat */
    enum probation_verdict v = PROBATION_PENDING;
    for (int t = 1; t <= 40 && v == PROBATION_PENDING; t++) {
        make_status(st, 0, 1, NEW, t, 50000, 3.0);
        probation_feed(p, 0, st, t);
        make_status(st, 1, 1, NEW, t, 50000, 3.0);
        strcpy(st->jobs[0].ranks[0].hb.release, OLD);
        probation_feed(p, 1, st, t);
        v = probation_check(p, t);
        if (t <= 30)
            assert_int_equal(v, PROBATION_PENDING);
    }
    assert_int_equal(v, PROBATION_FAIL);
    assert_string_equal(probation_reason(p),
                        "no heartbeat from rank 1 (h1:102) with release bbbbbbbbbbbb within healthy_deadline 30s");
    probation_free(p);
    /* no status at all from a container */
    p = new_p(100, 2, 1);
    for (int t = 1; t <= 31; t++) {
        make_status(st, 0, 1, NEW, t, 50000, 3.0);
        probation_feed(p, 0, st, t);
    }
    assert_int_equal(probation_check(p, 31), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "no status for job 'train' from h1:102 within healthy_deadline 30s");
    probation_free(p);
    /* heartbeats that stop after a good start */
    p = new_p(-1, 1, 1);
    make_status(st, 0, 1, NEW, 1, 50000, 3.0);
    probation_feed(p, 0, st, 1);
    make_status(st, 0, 1, NEW, 2, 50000, 3.0);
    st->jobs[0].ranks[0].hb_age_s = 45;
    probation_feed(p, 0, st, 46);
    assert_int_equal(probation_check(p, 46), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "silent: no heartbeat from rank 0 (h1:101) for 45s in phase train (healthy_deadline 30s)");
    probation_free(p);
    /* a worker writing another format (no heartbeat ever, 40 bad lines) when healthy_deadline
     * comes before the agent's first_step_deadline: the verdict says what it did write */
    p = new_p(-1, 1, 1);
    for (int t = 1; t <= 31; t++) {
        make_status(st, 0, 1, NEW, 0, 0, 3.0);
        st->jobs[0].ranks[0].has_hb = false;
        st->jobs[0].ranks[0].bad_lines = 40;
        probation_feed(p, 0, st, t);
    }
    assert_int_equal(probation_check(p, 31), PROBATION_FAIL);
    assert_string_equal(probation_reason(p),
                        "no heartbeat from rank 0 (h1:101) with release bbbbbbbbbbbb within healthy_deadline 30s; "
                        "it wrote 40 lines that are not heartbeats (`drover logs --job train --agent` says why)");
    probation_free(p);
    /* a worker that sends nothing at all (a PyTorch script without drover_heartbeat: it trains
     * and prints its steps): the verdict asks whether it reports at all */
    p = new_p(-1, 1, 1);
    for (int t = 1; t <= 31; t++) {
        make_status(st, 0, 1, NEW, 0, 0, 3.0);
        st->jobs[0].ranks[0].has_hb = false;
        st->jobs[0].ranks[0].bad_lines = 0;
        probation_feed(p, 0, st, t);
    }
    assert_int_equal(probation_check(p, 31), PROBATION_FAIL);
    assert_string_equal(probation_reason(p),
                        "no heartbeat from rank 0 (h1:101) with release bbbbbbbbbbbb within healthy_deadline 30s; "
                        "it sent none: does the worker use drover_heartbeat (docs/pytorch.md, docs/protocol.md)?");
    probation_free(p);
    free(st);
}

/* One rank of the watched release that has sent only init-phase lines: a hello (its heartbeat
 * module started, Heartbeat()) or init (hb.init()), the last one age_s old. */
static void rank_in_init(struct rank_status *rs, bool hello, double age_s)
{
    rs->has_hb = true;
    rs->hb.phase = HB_PHASE_INIT;
    rs->hb.step = 0;
    rs->hb.tok_s = 0;
    rs->hb.hello = hello;
    rs->hb_age_s = age_s;
}

/* Feed a 2-container, 1-rank job from t = 1 to 31 (healthy_deadline 30s): rank 0 as kind0, rank
 * 1 as kind1 ('n' no line at all, 'h' hello only, 'i' init since t = 3); the verdict's reason. */
static const char *rendezvous_verdict(struct probation *p, struct agent_status *st, char kind0, char kind1)
{
    const char kinds[2] = {kind0, kind1};
    for (int t = 1; t <= 31; t++)
        for (int c = 0; c < 2; c++) {
            make_status(st, c, 1, NEW, 0, 0, 3.0);
            struct rank_status *rs = &st->jobs[0].ranks[0];
            if (kinds[c] == 'n')
                rs->has_hb = false;
            else
                rank_in_init(rs, kinds[c] == 'h' || t < 3, kinds[c] == 'h' ? t - 1 : (t < 3 ? 0 : t - 3));
            probation_feed(p, c, st, t);
        }
    assert_int_equal(probation_check(p, 31), PROBATION_FAIL);
    return probation_reason(p);
}

/* A rendezvous that waits for a peer: the ranks create Heartbeat() first (a hello line), and
 * send init only once init_process_group returned.  The verdict named rank 0 and asked whether
 * the worker uses drover_heartbeat at all; it names the rank that got least far and what it did
 * send. */
static void test_rendezvous_names_missing_rank(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    /* rank 0 is past its init, rank 1 never got there */
    struct probation *p = new_p(-1, 2, 1);
    assert_string_equal(rendezvous_verdict(p, st, 'i', 'h'),
                        "rank 1 (h1:102) with release bbbbbbbbbbbb started drover_heartbeat (at +1s) but never "
                        "called hb.init() within healthy_deadline 30s: waiting for a peer in init_process_group "
                        "or a first collective? (ranks that sent init: 0; did not: 1)");
    probation_free(p);
    /* both wait in the rendezvous: no rank is further than another, so none is named (rank 0,
     * the first found, was: "(ranks that sent init: none; did not: 0, 1)"), and the progress
     * line said "0/2 ranks heartbeating" with no word of the hellos */
    p = new_p(-1, 2, 1);
    assert_string_equal(rendezvous_verdict(p, st, 'h', 'h'),
                        "every rank (2) with release bbbbbbbbbbbb sent its hello (drover_heartbeat started, at "
                        "+1s) and none called hb.init() within healthy_deadline 30s: all wait in the rendezvous: "
                        "is a rank's MASTER_ADDR, MASTER_PORT or world size different, or one rank slow before "
                        "init_process_group?");
    char line[512];
    probation_describe(p, 20, line, sizeof line);
    if (!strstr(line, "waiting for heartbeats: 0/2 ranks heartbeating (2 in rendezvous: sent hello, no init "
                      "yet), step -"))
        fail_msg("line: %s", line);
    probation_free(p);
    /* one hello, one init: the line counts the one */
    p = new_p(-1, 2, 1);
    (void)rendezvous_verdict(p, st, 'i', 'h');
    probation_describe(p, 20, line, sizeof line);
    if (!strstr(line, "0/2 ranks heartbeating (1 in rendezvous: sent hello, no init yet)"))
        fail_msg("line: %s", line);
    probation_free(p);
    /* a hello sent just before the switch's clock started (its age a little more than the time
     * since): "+0s", not "+-0s" */
    p = new_p(-1, 2, 1);
    for (int t = 1; t <= 31; t++)
        for (int c = 0; c < 2; c++) {
            make_status(st, c, 1, NEW, 0, 0, 3.0);
            rank_in_init(&st->jobs[0].ranks[0], c == 1, c == 1 ? t + 0.4 : 0);
            probation_feed(p, c, st, t);
        }
    assert_int_equal(probation_check(p, 31), PROBATION_FAIL);
    if (!strstr(probation_reason(p), "started drover_heartbeat (at +0s) but never called hb.init()"))
        fail_msg("reason: %s", probation_reason(p));
    probation_free(p);
    /* rank 1 sent nothing while rank 0's module started: the same script, stuck before it */
    p = new_p(-1, 2, 1);
    assert_string_equal(rendezvous_verdict(p, st, 'h', 'n'),
                        "no heartbeat from rank 1 (h1:102) with release bbbbbbbbbbbb within healthy_deadline 30s; "
                        "it sent none, while rank 0 started drover_heartbeat: it is stuck before Heartbeat() or "
                        "never started (`drover logs --job train`)");
    assert_null(strstr(probation_reason(p), "does the worker use drover_heartbeat"));
    probation_free(p);
    free(st);
}

/* hb.init() and never a step: the rank did send heartbeats, so "no heartbeat from rank 0" was
 * wrong; it says when it started and that no training step came. */
static void test_init_but_no_step(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct probation *p = new_p(-1, 2, 1);
    assert_string_equal(rendezvous_verdict(p, st, 'i', 'i'),
                        "rank 0 (h1:101) with release bbbbbbbbbbbb started (init at +3s) but never reached its "
                        "first training step within healthy_deadline 30s");
    probation_free(p);
    free(st);
}

/* Steps with tokens=0 on every rank: no sample can ever be taken, and the deploy waited the whole
 * max_probation_time (300s) for "no data ... (no rank reported a rate (tok_s) on a new step)".
 * Once every rank is past warmup it is said at once, as no data (on_inconclusive decides). */
static void test_no_tokens_said_early(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct probation *p = new_p(100, 1, 2);
    enum probation_verdict v = run(p, 1, 2, 1, 300, 0, st);
    assert_int_equal(v, PROBATION_NODATA);
    assert_string_equal(probation_reason(p),
                        "no data: the workers report steps with no tokens: every rank is past warmup (the slowest "
                        "at step 10) and none reported a token or a rate (tokens 0, tok_s 0), so throughput "
                        "cannot be measured; pass each step's tokens to hb.step(step, loss, tokens=...) "
                        "(docs/pytorch.md)");
    probation_free(p);
    /* a rate without a token counter (a foreign worker's tok_s) is sampled as before */
    p = new_p(100, 1, 2);
    assert_int_equal(run(p, 1, 2, 1, 300, 50000, st), PROBATION_PASS);
    probation_free(p);
    free(st);
}

/* A container stopped under the gang (its `pct exec` says "not running"): the probation fails at
 * once naming it and pct's words, not after healthy_deadline as "no status"; a recovery says so
 * too; a verdict already made stays. */
static void test_ct_stopped(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct probation *p = new_p(100, 2, 1);
    assert_int_equal(run(p, 2, 1, 1, 5, 50000, st), PROBATION_PENDING);
    probation_ct_stopped(p, 1, "container '102' not running!");
    assert_int_equal(probation_check(p, 6), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "container h1:102 stopped during probation (pct: container '102' not running!)");
    probation_ct_stopped(p, 0, "CT 101 not running"); /* the first stop said stays */
    assert_string_equal(probation_reason(p), "container h1:102 stopped during probation (pct: container '102' not running!)");
    probation_free(p);
    /* the peers of the stopped container fail first (a rank lost, a non-finite loss ...): the
     * stop, found a moment later, is the verdict */
    p = new_p(100, 2, 1);
    assert_int_equal(run(p, 2, 1, 1, 5, 50000, st), PROBATION_PENDING);
    make_status(st, 0, 1, NEW, 6, 50000, NAN);
    probation_feed(p, 0, st, 6);
    assert_int_equal(probation_check(p, 6), PROBATION_FAIL);
    assert_null(strstr(probation_reason(p), "stopped"));
    probation_ct_stopped(p, 1, "CT 102 not running");
    assert_int_equal(probation_check(p, 7), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "container h1:102 stopped during probation (pct: CT 102 not running)");
    probation_free(p);
    /* a pass stays a pass */
    p = new_p(96.5, 2, 2);
    assert_int_equal(run(p, 2, 2, 1, 100, 24000, st), PROBATION_PASS);
    probation_ct_stopped(p, 1, "CT 102 not running");
    assert_int_equal(probation_check(p, 101), PROBATION_PASS);
    probation_free(p);
    p = new_p(100, 2, 1);
    probation_ct_stopped(p, 2, "out of range"); /* no such container: nothing */
    probation_ct_stopped(p, -1, "out of range");
    assert_int_equal(probation_check(p, 1), PROBATION_PENDING);
    probation_ct_stopped(p, 0, "");
    assert_string_equal(probation_reason(p), "container h1:101 stopped during probation (pct: not running)");
    probation_free(p);
    struct inv_policy pol = policy();
    assert_int_equal(probation_new(&pol, "train", OLD, 1, labels, 1, 100, true, 0, &p), 0);
    probation_ct_stopped(p, 0, "CT 101 not running");
    assert_int_equal(probation_check(p, 1), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "container h1:101 stopped during the recovery (pct: CT 101 not running)");
    probation_free(p);
    free(st);
}

/* An agent daemon killed during probation (kill -9; its gang runs on): the container's watch
 * stream ends with the agent CLI's "no drover-agent daemon listening".  The verdict was a bare
 * "no status from h1:102 for 60s", or "no heartbeat from rank 1" when it died before the first
 * one, and the release was marked bad for its agent's death.  The verdict names the agent, at
 * the same healthy_deadline, and probation_agent_gone_ct() says which container it was. */
static void test_agent_gone(void **state)
{
    (void)state;
    const char *said = "watch: no drover-agent daemon listening on '/run/drover/agent.sock'";
    struct agent_status *st = malloc(sizeof *st);
    char line[512];
    struct probation *p = new_p(100, 2, 1);
    assert_int_equal(run(p, 2, 1, 1, 5, 50000, st), PROBATION_PENDING);
    probation_agent_gone(p, 1, said);
    probation_agent_gone(p, 2, said); /* no such container: nothing */
    probation_agent_gone(p, -1, said);
    /* nothing decided at once: h1:101 goes on alone */
    for (double t = 6; t <= 35; t += 1) {
        make_status(st, 0, 1, NEW, (long long)t, 50000, 3.5);
        probation_feed(p, 0, st, t);
        assert_int_equal(probation_check(p, t), PROBATION_PENDING);
    }
    assert_int_equal(probation_agent_gone_ct(p), -1);
    probation_describe(p, 20, line, sizeof line);
    if (!strstr(line, "; no status from h1:102 for 15s (its drover-agent is not running): its figures"))
        fail_msg("line: %s", line);
    assert_int_equal(probation_check(p, 36), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "no status from h1:102 for 31s (healthy_deadline 30s): its "
                                             "drover-agent is not running (watch: no drover-agent daemon "
                                             "listening on '/run/drover/agent.sock')");
    assert_int_equal(probation_agent_gone_ct(p), 1);
    assert_int_equal(probation_agent_code(p), STATUS_RC_NONE);
    probation_free(p);
    /* it died before its ranks' first heartbeat: its agent, not "no heartbeat from rank 1" */
    p = new_p(100, 2, 1);
    make_status(st, 1, 1, NEW, 0, 0, 3.5);
    st->jobs[0].nranks = 0;
    probation_feed(p, 1, st, 1);
    probation_agent_gone(p, 1, said);
    for (double t = 1; t <= 32; t += 1) {
        make_status(st, 0, 1, NEW, (long long)t, 50000, 3.5);
        probation_feed(p, 0, st, t);
    }
    assert_int_equal(probation_check(p, 32), PROBATION_FAIL);
    if (strstr(probation_reason(p), "no status from h1:102 for 31s (healthy_deadline 30s): its drover-agent "
                                    "is not running (watch: ") != probation_reason(p))
        fail_msg("reason: %s", probation_reason(p));
    assert_int_equal(probation_agent_gone_ct(p), 1);
    probation_free(p);
    /* never a status at all since the switch: the same, counted from the activation */
    p = new_p(100, 2, 1);
    probation_agent_gone(p, 1, "");
    for (double t = 1; t <= 31; t += 1) {
        make_status(st, 0, 1, NEW, (long long)t, 50000, 3.5);
        probation_feed(p, 0, st, t);
    }
    assert_int_equal(probation_check(p, 31), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "no status from h1:102 for 31s (healthy_deadline 30s): its "
                                             "drover-agent is not running (no drover-agent daemon listening "
                                             "on)");
    assert_int_equal(probation_agent_gone_ct(p), 1);
    probation_free(p);
    /* its agent came back (restarted by its service manager): a document clears it, and a
     * silence after that is a plain one, not blamed on the agent */
    p = new_p(100, 2, 1);
    assert_int_equal(run(p, 2, 1, 1, 5, 50000, st), PROBATION_PENDING);
    probation_agent_gone(p, 1, said);
    make_status(st, 1, 1, NEW, 6, 50000, 3.5);
    probation_feed(p, 1, st, 6);
    for (double t = 7; t <= 37; t += 1) {
        make_status(st, 0, 1, NEW, (long long)t, 50000, 3.5);
        probation_feed(p, 0, st, t);
    }
    assert_int_equal(probation_check(p, 37), PROBATION_FAIL);
    /* a stream silent since: its agent answers nothing (stopped, frozen, its host down), which is
     * no verdict on the release either (it used to be a bare "no status ...", marked bad) */
    assert_string_equal(probation_reason(p), "no status from h1:102 for 31s (healthy_deadline 30s): its "
                                             "drover-agent is not answering (stopped or frozen, or its host "
                                             "is down); its workers' figures that old are not judged");
    assert_int_equal(probation_agent_gone_ct(p), 1);
    probation_free(p);
    /* a container stopped under the gang, found after: the stop is the verdict */
    p = new_p(100, 2, 1);
    probation_agent_gone(p, 1, said);
    assert_int_equal(run(p, 1, 1, 1, 31, 50000, st), PROBATION_FAIL);
    assert_int_equal(probation_agent_gone_ct(p), 1);
    probation_ct_stopped(p, 1, "CT 102 not running");
    assert_int_equal(probation_agent_gone_ct(p), -1);
    assert_string_equal(probation_reason(p), "container h1:102 stopped during probation (pct: CT 102 not running)");
    probation_free(p);
    free(st);
}

/* An agent frozen (SIGSTOP) 3 s into probation, its ranks' hellos its last word, while the other
 * container's rank goes on to train: its watch stream sends nothing more but does not end (no
 * "no daemon listening").  At healthy_deadline the verdict came from its stale document, "rank 0
 * (h1:101) ... started drover_heartbeat (at +1s) but never called hb.init() ...", and the release
 * (a good one) was marked bad.  Now nothing is said on those figures; the silence decides once it
 * passes healthy_deadline, as an agent not running does: its container named, not the release's
 * failure. */
static void test_frozen_agent_stream(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    char line[512];
    struct probation *p = new_p(100, 2, 1);
    for (int t = 1; t <= 33; t++) {
        for (int c = 0; c < 2; c++) {
            if (c == 0 && t > 3)
                continue; /* h1:101's agent froze */
            make_status(st, c, 1, NEW, t > 5 ? t - 5 : 0, 50000, 3.5);
            if (t <= 5)
                rank_in_init(&st->jobs[0].ranks[0], t <= 3, 0);
            probation_feed(p, c, st, t);
        }
        if (probation_check(p, t) != PROBATION_PENDING)
            fail_msg("t=%d: %s", t, probation_reason(p));
    }
    probation_describe(p, 33, line, sizeof line);
    if (!strstr(line, "; no status from h1:101 for 30s: its figures are that old"))
        fail_msg("line: %s", line);
    assert_int_equal(probation_check(p, 34), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "no status from h1:101 for 31s (healthy_deadline 30s): its "
                                             "drover-agent is not answering (stopped or frozen, or its host "
                                             "is down); its workers' figures that old are not judged");
    assert_int_equal(probation_agent_gone_ct(p), 0);
    assert_int_equal(probation_agent_code(p), STATUS_RC_NONE);
    probation_free(p);
    /* it answers again before that: its figures are live again, and judged as before */
    p = new_p(100, 2, 1);
    for (int t = 1; t <= 31; t++)
        for (int c = 0; c < 2; c++) {
            if (c == 0 && t > 3 && t < 25)
                continue;
            make_status(st, c, 1, NEW, t > 5 ? t - 5 : 0, 50000, 3.5);
            if (t <= 5 || c == 0)
                rank_in_init(&st->jobs[0].ranks[0], true, 0);
            probation_feed(p, c, st, t);
        }
    assert_int_equal(probation_check(p, 31), PROBATION_FAIL);
    if (strstr(probation_reason(p), "rank 0 (h1:101) with release bbbbbbbbbbbb started drover_heartbeat") !=
        probation_reason(p))
        fail_msg("reason: %s", probation_reason(p));
    assert_int_equal(probation_agent_gone_ct(p), -1);
    probation_free(p);
    free(st);
}

static void test_stall(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct probation *p = new_p(-1, 1, 1);
    enum probation_verdict v = PROBATION_PENDING;
    for (int t = 1; t <= 60 && v == PROBATION_PENDING; t++) {
        make_status(st, 0, 1, NEW, t < 5 ? t : 5, 50000, 3.0); /* hangs at step 5, still beating */
        probation_feed(p, 0, st, t);
        v = probation_check(p, t);
    }
    assert_int_equal(v, PROBATION_FAIL);
    assert_non_null(strstr(probation_reason(p), "stalled: rank 0 on h1:101 at step 5"));
    probation_free(p);
    /* a frozen rank (SIGSTOP) stops stepping and beating at once: silent, not "stalled ...
     * while heartbeats flow" (the newcomer pass: kill -STOP of a worker read as a stall) */
    p = new_p(-1, 1, 1);
    v = PROBATION_PENDING;
    for (int t = 1; t <= 60 && v == PROBATION_PENDING; t++) {
        make_status(st, 0, 1, NEW, t < 5 ? t : 5, 50000, 3.0);
        st->jobs[0].ranks[0].hb_age_s = t < 5 ? 0 : t - 5;
        probation_feed(p, 0, st, t);
        v = probation_check(p, t);
    }
    assert_int_equal(v, PROBATION_FAIL);
    assert_non_null(strstr(probation_reason(p), "silent: no heartbeat from rank 0 (h1:101) for"));
    probation_free(p);
    free(st);
}

/* Only fresh samples count: while a rank's step does not advance, its last tok_s is not a new
 * measurement (issue 9: a NaN release whose lines were dropped kept its last good tok_s and was
 * promoted).  Fast steps, a pause that repeats the fast figure, then slow steps: the median must
 * be the slow figure's. */
static void test_only_fresh_samples(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct probation *p = new_p(100, 1, 1);
    enum probation_verdict v = PROBATION_PENDING;
    long long step = 0;
    for (int t = 1; t <= 200 && v == PROBATION_PENDING; t++) {
        bool paused = t > 12 && t <= 27;
        if (!paused)
            step++;
        make_status(st, 0, 1, NEW, step, t <= 27 ? 100000 : 40000, 3.0);
        probation_feed(p, 0, st, t);
        v = probation_check(p, t);
    }
    assert_int_equal(v, PROBATION_FAIL);
    /* only the fresh 40 Ktok/s samples count: the paused stretch's stale 100 never does */
    assert_non_null(strstr(probation_reason(p), "throughput regression: -60.0% [-60.0%, -60.0%]"));
    assert_non_null(strstr(probation_reason(p), "median 40.0 Ktok/s"));
    probation_free(p);
    free(st);
}

/* A gang its agent is stopping on its own (here: a liveness trip) never passes, even when the
 * samples so far would: the verdict carries the agent's reason. */
static void test_agent_stopping_fails(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct probation *p = new_p(-1, 1, 1);
    for (int t = 1; t <= 15; t++) {
        make_status(st, 0, 1, NEW, t, 50000, 3.0);
        probation_feed(p, 0, st, t);
        assert_int_equal(probation_check(p, t), PROBATION_PENDING);
    }
    make_status(st, 0, 1, NEW, 15, 50000, 3.0);
    st->jobs[0].state = GANG_STOPPING;
    set_reason(&st->jobs[0], STATUS_RC_LIVENESS, "rank 0 silent: no heartbeat for 11 s in phase train at step 15 (silence_deadline 10 s); stopping the gang");
    probation_feed(p, 0, st, 26);
    assert_int_equal(probation_check(p, 26), PROBATION_FAIL);
    assert_non_null(strstr(probation_reason(p), "silence_deadline 10 s"));
    /* a liveness trip's cause is not in the workers' log */
    assert_null(strstr(probation_reason(p), "drover logs"));
    assert_int_equal(probation_agent_code(p), STATUS_RC_LIVENESS);
    probation_free(p);
    /* one rank exited and the agent stops the others: not a crash loop (yet), but its cause is
     * in the workers' log, so the verdict points there as a crash loop's does */
    p = new_p(-1, 1, 1);
    make_status(st, 0, 1, NEW, 15, 50000, 3.0);
    st->jobs[0].state = GANG_STOPPING;
    set_reason(&st->jobs[0], STATUS_RC_RANK_EXIT, "rank 0 exited with code 1; stopping the gang");
    probation_feed(p, 0, st, 16);
    assert_int_equal(probation_check(p, 16), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "the gang on h1:101 is being stopped by its agent: rank 0 exited "
                                             "with code 1; stopping the gang; see `drover logs --job train`");
    probation_free(p);
    /* the controller decides on the code, not the words: a stop the agent was asked for (code
     * none) is no verdict, whatever its reason says */
    p = new_p(-1, 1, 1);
    set_reason(&st->jobs[0], STATUS_RC_NONE, "rank 0 exited with code 1; stopping the gang");
    probation_feed(p, 0, st, 16);
    assert_int_equal(probation_check(p, 16), PROBATION_PENDING);
    /* a code this controller does not know (a newer agent's, read as "other") while the agent
     * stops the gang: never a pass, and no pointer it cannot justify */
    set_reason(&st->jobs[0], STATUS_RC_OTHER, "a newer agent's own cause; stopping the gang");
    probation_feed(p, 0, st, 17);
    assert_int_equal(probation_check(p, 17), PROBATION_FAIL);
    assert_null(strstr(probation_reason(p), "drover logs"));
    probation_free(p);
    free(st);
}

/* A new controller with an agent from before "reason_code": the document carries only the
 * reason's words, and status_parse derives the code from them as the controller read them
 * before (common/status.c), so the verdicts are what they were. */
static void test_old_agent_reason_words(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st), *old = malloc(sizeof *old);
    static const struct {
        enum gang_state state;
        const char *reason;
        const char *want; /* in the verdict */
        bool logs;        /* the verdict points at drover logs */
    } rows[] = {
        {GANG_FAILED, "crash loop: rank 0 exited with code 1 and no good release to return to",
         "failed: crash loop", true},
        {GANG_FAILED, "non-retryable exit: rank 0 exited with code 6 and no good release to return to",
         "failed: non-retryable exit", true},
        {GANG_FAILED, "start failed: bin/t: not found", "failed: start failed", false},
        {GANG_REVERTED, "reverted on its own from bbbbbbbbbbbb: crash loop: rank 0 exited with code 1",
         "by itself (reverted on its own", true},
        {GANG_REVERTED, "reverted on its own from bbbbbbbbbbbb: liveness: rank 0 hung (liveness deadline)",
         "by itself (reverted on its own", false},
        {GANG_STOPPING, "rank 0 killed by signal 9; stopping the gang", "being stopped by its agent", true},
        {GANG_STOPPING, "rank 0 stalled: step 4 for 31 s (stall_deadline 30 s); stopping the gang",
         "being stopped by its agent", false},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        make_status(st, 0, 1, rows[i].state == GANG_REVERTED ? OLD : NEW, 5, 50000, 3.0);
        st->jobs[0].state = rows[i].state;
        set_reason(&st->jobs[0], STATUS_RC_NONE, rows[i].reason);
        /* the document an older agent sends: no "reason_code" member at all */
        char *text = fake_agent_doc(st, true);
        assert_null(strstr(text, "reason_code"));
        assert_int_equal(status_parse(text, strlen(text), old), 0);
        free(text);
        struct probation *p = new_p(-1, 1, 1);
        probation_feed(p, 0, old, 5);
        assert_int_equal(probation_check(p, 5), PROBATION_FAIL);
        assert_non_null(strstr(probation_reason(p), rows[i].want));
        if (rows[i].logs)
            assert_non_null(strstr(probation_reason(p), "; see `drover logs --job train`"));
        else
            assert_null(strstr(probation_reason(p), "drover logs"));
        probation_free(p);
    }
    free(old);
    free(st);
}

static void test_agent_reverted_on_its_own(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct probation *p = new_p(100, 1, 1);
    make_status(st, 0, 1, OLD, 50, 50000, 3.0);
    st->jobs[0].state = GANG_REVERTED;
    set_reason(&st->jobs[0], STATUS_RC_CRASH_LOOP, "crash loop: 3 exits in 60s");
    probation_feed(p, 0, st, 5);
    assert_int_equal(probation_check(p, 5), PROBATION_FAIL);
    assert_string_equal(probation_reason(p),
                        "the agent on h1:101 went back to aaaaaaaaaaaa by itself (crash loop: 3 exits in 60s); see `drover logs --job train`");
    /* typed, for the history record's reason code agent-revert (notify's agent-revert event) */
    assert_true(probation_agent_went_back(p));
    probation_free(p);
    /* not a crash (a liveness trip): nothing in the workers' log to point at */
    p = new_p(100, 1, 1);
    set_reason(&st->jobs[0], STATUS_RC_LIVENESS, "liveness: rank 0 hung (crash limit reached)");
    probation_feed(p, 0, st, 5);
    assert_int_equal(probation_check(p, 5), PROBATION_FAIL);
    assert_null(strstr(probation_reason(p), "drover logs"));
    assert_true(probation_agent_went_back(p));
    /* a container stopped under the gang explains it instead: not the agent's revert */
    probation_ct_stopped(p, 0, "CT 101 not running");
    assert_false(probation_agent_went_back(p));
    probation_free(p);
    /* the agent gave up on a crash loop: failed, with the pointer */
    p = new_p(100, 1, 1);
    make_status(st, 0, 1, NEW, 5, 50000, 3.0);
    st->jobs[0].state = GANG_FAILED;
    set_reason(&st->jobs[0], STATUS_RC_CRASH_LOOP, "crash loop: rank 0 exited with code 1 and no good release to return to");
    probation_feed(p, 0, st, 5);
    assert_int_equal(probation_check(p, 5), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "the gang on h1:101 failed: crash loop: rank 0 exited with code 1 "
                                             "and no good release to return to; see `drover logs --job train`");
    assert_false(probation_agent_went_back(p)); /* it gave up; went back to nothing */
    probation_free(p);
    p = new_p(100, 1, 1);
    set_reason(&st->jobs[0], STATUS_RC_FATAL_EXIT, "non-retryable exit: rank 0 exited with code 6 and no good release to return to");
    probation_feed(p, 0, st, 5);
    assert_int_equal(probation_check(p, 5), PROBATION_FAIL);
    assert_non_null(strstr(probation_reason(p), "return to; see `drover logs --job train`"));
    probation_free(p);
    p = new_p(100, 1, 1);
    set_reason(&st->jobs[0], STATUS_RC_START_FAILURE, "start failed: bin/t: not found");
    probation_feed(p, 0, st, 5);
    assert_int_equal(probation_check(p, 5), PROBATION_FAIL);
    assert_string_equal(probation_reason(p), "the gang on h1:101 failed: start failed: bin/t: not found");
    probation_free(p);
    free(st);
}

/* Several agents went back by themselves: the verdict names every one of them, not only the first
 * seen (the demo's v2: all three agents went back to v1, and the verdict named h1:101 alone);
 * beyond BACK_NAMED_MAX (4) after the first, "and N more".  A container fed again, or one that
 * did not go back, is not named. */
static void test_agents_went_back_all_named(void **state)
{
    (void)state;
    static const char *many[] = { "h1:101", "h1:102", "h2:201", "h2:202", "h3:301", "h3:302", "h4:401", "h4:402" };
    struct inv_policy pol = policy();
    struct agent_status *st = malloc(sizeof *st);
    struct probation *p = NULL;
    assert_int_equal(probation_new(&pol, "train", NEW, 3, many, 1, 100, false, 0, &p), 0);
    make_status(st, 1, 1, OLD, 50, 50000, 3.0);
    st->jobs[0].state = GANG_REVERTED;
    set_reason(&st->jobs[0], STATUS_RC_FATAL_EXIT, "non-retryable exit: rank 1 exited with code 4");
    probation_feed(p, 1, st, 5); /* h1:102 is seen first */
    assert_int_equal(probation_check(p, 5), PROBATION_FAIL);
    const char *one = "the agent on h1:102 went back to aaaaaaaaaaaa by itself (non-retryable exit: rank 1 "
                      "exited with code 4); see `drover logs --job train`";
    assert_string_equal(probation_reason(p), one);
    probation_feed(p, 1, st, 6); /* the same container again: named once */
    assert_string_equal(probation_reason(p), one);
    make_status(st, 0, 1, NEW, 50, 50000, 3.0); /* h1:101 still runs the new release: not named */
    probation_feed(p, 0, st, 6);
    assert_string_equal(probation_reason(p), one);
    make_status(st, 2, 1, OLD, 50, 50000, 3.0);
    st->jobs[0].state = GANG_REVERTED;
    probation_feed(p, 2, st, 6);
    assert_string_equal(probation_reason(p),
                        "the agent on h1:102 went back to aaaaaaaaaaaa by itself (non-retryable exit: rank 1 "
                        "exited with code 4), and so did the agent on h2:201; see `drover logs --job train`");
    make_status(st, 0, 1, OLD, 50, 50000, 3.0);
    st->jobs[0].state = GANG_REVERTED;
    probation_feed(p, 0, st, 7);
    assert_non_null(strstr(probation_reason(p), "4), and so did the agents on h1:101 and h2:201; see `drover logs"));
    assert_true(probation_agent_went_back(p));
    probation_free(p);
    /* eight containers, all back: the first, four more named, "and 3 more" */
    assert_int_equal(probation_new(&pol, "train", NEW, 8, many, 1, 100, false, 0, &p), 0);
    for (int c = 0; c < 8; c++) {
        make_status(st, c, 1, OLD, 50, 50000, 3.0);
        st->jobs[0].state = GANG_REVERTED;
        set_reason(&st->jobs[0], STATUS_RC_LIVENESS, "liveness: rank hung");
        probation_feed(p, c, st, 5);
    }
    assert_int_equal(probation_check(p, 5), PROBATION_FAIL);
    assert_string_equal(probation_reason(p),
                        "the agent on h1:101 went back to aaaaaaaaaaaa by itself (liveness: rank hung), and so "
                        "did the agents on h1:102, h2:201, h2:202, h3:301 and 3 more");
    probation_free(p);
    free(st);
}

static void test_no_baseline(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct probation *p = new_p(-1, 2, 1);
    assert_int_equal(run(p, 2, 1, 1, 100, 1000, st), PROBATION_PASS);
    assert_non_null(strstr(probation_note(p), "no baseline"));
    assert_non_null(strstr(probation_note(p), "(median 2.00 Ktok/s) become the baseline"));
    probation_free(p);
    /* the good release deployed again (its own baseline, kept by the caller): a pass on health,
     * and neither "no baseline" in its progress nor "become the baseline" in its note */
    p = new_p(-1, 2, 1);
    probation_unjudged(p, "its own baseline");
    char line[512];
    probation_describe(p, 0, line, sizeof line);
    if (strstr(line, "no baseline") || !strstr(line, "(throughput not judged: its own baseline)"))
        fail_msg("line: %s", line);
    assert_int_equal(run(p, 2, 1, 1, 100, 1000, st), PROBATION_PASS);
    assert_string_equal(probation_note(p), "");
    probation_free(p);
    /* nproc_per_node 2 -> 1: a baseline there is, measured with other ranks, so not compared
     * and replaced.  Its note said "no baseline on these containers yet" right after the
     * deploy had named that baseline. */
    p = new_p(-1, 2, 1);
    probation_rebase(p, "the baseline ran 2 ranks, this deploy 1");
    probation_describe(p, 0, line, sizeof line);
    if (strstr(line, "no baseline") || !strstr(line, "(throughput not judged: the baseline ran 2 ranks, this deploy 1)"))
        fail_msg("line: %s", line);
    assert_int_equal(run(p, 2, 1, 1, 100, 1000, st), PROBATION_PASS);
    if (strstr(probation_note(p), "no baseline") ||
        !strstr(probation_note(p), "throughput rule skipped (the baseline ran 2 ranks, this deploy 1); these ") ||
        !strstr(probation_note(p), "(median 2.00 Ktok/s) become the baseline"))
        fail_msg("note: %s", probation_note(p));
    probation_free(p);
    free(st);
}

static void test_progress_deadline(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct inv_policy pol = policy();
    pol.warmup_steps = 1000;
    pol.progress_deadline_s = 60;
    struct probation *p;
    assert_int_equal(probation_new(&pol, "train", NEW, 1, labels, 1, 100, false, 0, &p), 0);
    enum probation_verdict v = PROBATION_PENDING;
    for (int t = 1; t <= 100 && v == PROBATION_PENDING; t++) {
        make_status(st, 0, 1, NEW, t, 50000, 3.0);
        probation_feed(p, 0, st, t);
        v = probation_check(p, t);
    }
    /* healthy but never past warmup: no data, which never passes */
    assert_int_equal(v, PROBATION_NODATA);
    assert_string_equal(probation_reason(p), "no data: no throughput verdict within progress_deadline "
                                             "60s (rank 0 has made 61 of 1000 warmup steps)");
    probation_free(p);

    /* a rank resumed from a checkpoint counts its warmup from there: it said "rank 0 is at step
     * 4649 of 100000 warmup steps", the run's step against the count, as if nearly through */
    assert_int_equal(probation_new(&pol, "train", NEW, 1, labels, 1, 100, false, 0, &p), 0);
    v = PROBATION_PENDING;
    for (int t = 1; t <= 100 && v == PROBATION_PENDING; t++) {
        make_status(st, 0, 1, NEW, 4600 + t, 50000, 3.0);
        st->jobs[0].ranks[0].hb.resumed_from = 4600;
        probation_feed(p, 0, st, t);
        v = probation_check(p, t);
    }
    assert_int_equal(v, PROBATION_NODATA);
    assert_string_equal(probation_reason(p), "no data: no throughput verdict within progress_deadline "
                                             "60s (rank 0 has made 61 of 1000 warmup steps since it "
                                             "resumed at step 4600)");
    probation_free(p);
    free(st);
}

/* A rollback (--force) to a release that then fails: its recovery watch found the agent back on
 * the good release by itself.  It said "h1:101 runs aaaa..., not the release bbbb... we reverted
 * to", the agent's reason dropped, and the rollback ended ROLLBACK FAILED (exit 4) while the job
 * ran its good release.  Now it is the agent's going back, with its reason, as in a probation. */
static void test_recovery_agent_went_back(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct inv_policy pol = policy();
    struct probation *p;
    assert_int_equal(probation_new(&pol, "train", NEW, 1, labels, 1, -1, true, 0, &p), 0);
    make_status(st, 0, 1, OLD, 10, 50000, 3.0); /* current OLD, the good release */
    st->jobs[0].state = GANG_REVERTED;
    set_reason(&st->jobs[0], STATUS_RC_CRASH_LOOP, "crash loop: rank 0 exited with code 4 [rank 0: no data shard]");
    probation_feed(p, 0, st, 2);
    assert_int_equal(probation_check(p, 2), PROBATION_FAIL);
    assert_true(probation_agent_went_back(p));
    if (!strstr(probation_reason(p), "the agent on h1:101 went back to aaaaaaaaaaaa by itself (crash loop: "
                                     "rank 0 exited with code 4 [rank 0: no data shard])"))
        fail_msg("reason: %s", probation_reason(p));
    probation_free(p);
    /* another release than the good one, not a going back: said as before, in neutral words */
    assert_int_equal(probation_new(&pol, "train", NEW, 1, labels, 1, -1, true, 0, &p), 0);
    make_status(st, 0, 1, "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc", 10, 50000, 3.0);
    probation_feed(p, 0, st, 2);
    assert_int_equal(probation_check(p, 2), PROBATION_FAIL);
    assert_false(probation_agent_went_back(p));
    if (!strstr(probation_reason(p), "h1:101 runs cccccccccccc, not the release bbbbbbbbbbbb the job was sent back to"))
        fail_msg("reason: %s", probation_reason(p));
    probation_free(p);
    free(st);
}

static void test_recovery(void **state)
{
    (void)state;
    struct agent_status *st = malloc(sizeof *st);
    struct inv_policy pol = policy();
    struct probation *p;
    assert_int_equal(probation_new(&pol, "train", OLD, 1, labels, 1, 100, true, 0, &p), 0);
    /* its progress line said "(no baseline)" although the job has one: a recovery compares no
     * throughput, which is what it says now */
    char line[512];
    probation_describe(p, 0, line, sizeof line);
    if (strstr(line, "baseline") || !strstr(line, "(throughput not judged in a recovery)"))
        fail_msg("line: %s", line);
    /* the agent says "reverted" and runs the good release: that is what we asked for */
    for (int t = 1; t <= 3; t++) {
        make_status(st, 0, 1, OLD, 200 + t, 50000, 3.0);
        st->jobs[0].state = GANG_REVERTED;
        st->jobs[0].ranks[0].hb.resumed_from = 200;
        probation_feed(p, 0, st, t);
    }
    assert_int_equal(probation_check(p, 3), PROBATION_PASS);
    long long step, resumed;
    probation_progress(p, &step, &resumed);
    assert_int_equal(step, 203);
    assert_int_equal(resumed, 200);
    probation_free(p);

    /* a two-phase revert whose stop is slow in this container: the failed release is still
     * current while its gang stops, the revert queued behind it (it was "REVERT FAILED ... runs
     * the failed release" at once); then the good release runs */
    assert_int_equal(probation_new(&pol, "train", OLD, 1, labels, 1, 100, true, 0, &p), 0);
    for (int t = 1; t <= 20; t++) {
        make_status(st, 0, 1, NEW, 50, 50000, 3.0);
        st->jobs[0].state = GANG_STOPPING;
        probation_feed(p, 0, st, t);
        assert_int_equal(probation_check(p, t), PROBATION_PENDING);
    }
    for (int t = 21; t <= 24; t++) {
        make_status(st, 0, 1, OLD, 200 + t, 50000, 3.0);
        probation_feed(p, 0, st, t);
    }
    assert_int_equal(probation_check(p, 24), PROBATION_PASS);
    probation_free(p);
    /* ... but a container that runs another release and is not stopping still fails */
    assert_int_equal(probation_new(&pol, "train", OLD, 1, labels, 1, 100, true, 0, &p), 0);
    make_status(st, 0, 1, NEW, 50, 50000, 3.0);
    probation_feed(p, 0, st, 1);
    assert_int_equal(probation_check(p, 1), PROBATION_FAIL);
    assert_non_null(strstr(probation_reason(p), "not the release"));
    probation_free(p);
    free(st);
}

static void test_bad_args_and_median(void **state)
{
    (void)state;
    struct inv_policy pol = policy();
    struct probation *p = (struct probation *)0x1;
    assert_int_equal(probation_new(&pol, "train", NEW, 0, labels, 1, 0, false, 0, &p), -EINVAL);
    assert_int_equal(probation_new(&pol, "train", NEW, 1, labels, 0, 0, false, 0, &p), -EINVAL);
    assert_int_equal(probation_new(&pol, "train", NEW, 1, labels, STATUS_MAX_RANKS + 1, 0, false, 0, &p),
                     -EINVAL);
    assert_ptr_equal(p, (struct probation *)0x1);
    double v[] = { 5, 1, 3 };
    assert_true(probation_median(v, 3) == 3);
    assert_true(probation_median(v, 2) == 3);
    assert_true(probation_median(v, 0) == -1);
}

/* A job spec change of nproc_per_node 8 -> 4 (half the GPUs to another job): the baseline key
 * names the containers only, so the old 8-rank Ktok/s was the baseline and the deploy was
 * reverted as a 50% throughput regression.  The samples say how many ranks measured them. */
static void test_baseline_world_size(void **state)
{
    (void)state;
    struct sample_set *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->n = 1;
    s->ktok_s[0] = 100;
    s->ranks = 3 * 8;
    assert_true(probation_baseline_fits(s, 3 * 8));
    assert_false(probation_baseline_fits(s, 3 * 4));
    assert_false(probation_baseline_fits(s, 3 * 16));
    s->ranks = 0; /* a set recorded before it said: compared as before */
    assert_true(probation_baseline_fits(s, 3 * 4));
    assert_true(probation_baseline_fits(NULL, 3 * 4));
    free(s);
}

/* Two deploys of the same release with different job specs (the second took the lease over):
 * the first one's probation watched the second's gang (the same release id in every heartbeat)
 * and promoted it: the agents promote the current (release, spec) pair, so it made the other
 * operator's spec good and said "promoted" for its own.  The reported digest now tells. */
static void test_other_spec_fails(void **state)
{
    (void)state;
    struct probation *p = new_p(0, 2, 1);
    char mine[65], other[65];
    memset(mine, 'c', 64);
    mine[64] = '\0';
    memset(other, 'd', 64);
    other[64] = '\0';
    probation_expect_spec(p, 0, mine);
    probation_expect_spec(p, 1, mine);
    struct agent_status *st = calloc(1, sizeof *st);
    for (int t = 0; t <= 3; t++)
        for (int c = 0; c < 2; c++) {
            make_status(st, c, 1, NEW, t, 1000, 2.0);
            strcpy(st->jobs[0].spec_digest, mine);
            probation_feed(p, c, st, t);
        }
    assert_int_equal(probation_check(p, 3), PROBATION_PENDING);
    make_status(st, 1, 1, NEW, 4, 1000, 2.0);
    strcpy(st->jobs[0].spec_digest, other);
    probation_feed(p, 1, st, 4);
    assert_int_equal(probation_check(p, 4), PROBATION_FAIL);
    assert_non_null(strstr(probation_reason(p), "h1:102 runs bbbbbbbbbbbb with another job spec (dddddddddddd)"));
    probation_free(p);
    /* an agent without digests (none expected, none reported) is judged as before */
    p = new_p(0, 2, 1);
    for (int t = 0; t <= 3; t++)
        for (int c = 0; c < 2; c++) {
            make_status(st, c, 1, NEW, t, 1000, 2.0);
            probation_feed(p, c, st, t);
        }
    assert_int_equal(probation_check(p, 3), PROBATION_PENDING);
    probation_free(p);
    free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pass_with_baseline),
        cmocka_unit_test(test_baseline_world_size),
        cmocka_unit_test(test_other_spec_fails),
        cmocka_unit_test(test_describe_names_quiet_container),
        cmocka_unit_test(test_describe_names_silent_rank),
        cmocka_unit_test(test_throughput_regression),
        cmocka_unit_test(test_warmup_excluded),
        cmocka_unit_test(test_nan_loss),
        cmocka_unit_test(test_crash),
        cmocka_unit_test(test_exit_code_is_typed),
        cmocka_unit_test(test_peer_stopped_gives_way),
        cmocka_unit_test(test_frozen_rank_is_the_cause),
        cmocka_unit_test(test_silent_names_first_to_stop),
        cmocka_unit_test(test_find_silent_rule),
        cmocka_unit_test(test_missing_heartbeat),
        cmocka_unit_test(test_rendezvous_names_missing_rank),
        cmocka_unit_test(test_init_but_no_step),
        cmocka_unit_test(test_no_tokens_said_early),
        cmocka_unit_test(test_ct_stopped),
        cmocka_unit_test(test_agent_gone),
        cmocka_unit_test(test_frozen_agent_stream),
        cmocka_unit_test(test_stall),
        cmocka_unit_test(test_only_fresh_samples),
        cmocka_unit_test(test_agent_stopping_fails),
        cmocka_unit_test(test_old_agent_reason_words),
        cmocka_unit_test(test_agent_reverted_on_its_own),
        cmocka_unit_test(test_agents_went_back_all_named),
        cmocka_unit_test(test_no_baseline),
        cmocka_unit_test(test_progress_deadline),
        cmocka_unit_test(test_recovery),
        cmocka_unit_test(test_recovery_agent_went_back),
        cmocka_unit_test(test_bad_args_and_median),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
