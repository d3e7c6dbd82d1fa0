/* Unit tests for the dashboard model (controller/top/top_model.c): kubectl ages, sparklines,
 * restarts, the state of every row (running, probation, degraded by NaN and by throughput,
 * stalled, backoff, failed, unreachable by error and by age), warmup left out of the trend,
 * problems-first sorting, filter, fold, tree/flat, the 80-column layout, colour only when asked,
 * and the event journal parser's error paths (ret untouched). */
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

#include "controller/deploy/holder.h"
#include "controller/deploy/state.h"
#include "controller/exitcode.h"
#include "controller/top/top_model.h"
#include "tests/unit/capture.h"

#define GOOD "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define NEW "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static const char inv_text[] = "[drover]\n"
                               "state_dir = /nonexistent/state\n"
                               "[host h1]\n"
                               "address = 127.0.0.2\n"
                               "[host h2]\n"
                               "address = 127.0.0.3\n"
                               "[job train]\n"
                               "containers = h1:101 h1:102 h2:201\n"
                               "nproc_per_node = 2\n"
                               "command = bin/drover-train\n"
                               "warmup_steps = 3\n"
                               "tolerance = 0.2\n";

struct fx {
    struct inventory *inv;
    struct top_snapshot s;
    struct agent_status st;
};

/* One container's document: 2 ranks of node `node` at step, tok_s each, loss. */
static void make_status(struct agent_status *st, int node, const char *current, const char *good,
                        enum gang_state gs, long long step, double tok_s, double loss)
{
    memset(st, 0, sizeof *st);
    strcpy(st->host, "ct");
    st->njobs = 1;
    struct job_status *js = &st->jobs[0];
    strcpy(js->job, "train");
    strcpy(js->current, current);
    strcpy(js->release, current);
    strcpy(js->good, good);
    js->state = gs;
    js->nranks = 2;
    js->age_s = 100;
    for (int k = 0; k < 2; k++) {
        struct rank_status *rs = &js->ranks[k];
        fake_rank_training(rs, node * 2 + k, k, current, step, tok_s, loss);
        rs->hb.step_ms = 100;
        rs->hb.resumed_from = -1;
    }
}

/* Every container healthy at `now` with 10 documents of history (steps 1..10). */
static void feed_all(struct fx *f, const char *current, const char *good, double now)
{
    for (int i = 0; i < f->s.ncts; i++)
        for (int t = 1; t <= 10; t++) {
            make_status(&f->st, f->s.cts[i].node_rank, current, good, GANG_RUNNING, t, 1000, 3.0);
            top_ct_update(&f->s.cts[i], &f->st, "train", 3, now - 10 + t);
        }
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    char err[512];
    assert_non_null(f);
    assert_int_equal(inventory_parse(inv_text, strlen(inv_text), "/t/inv.ini", &f->inv, err, sizeof err), 0);
    assert_int_equal(top_snapshot_init(&f->s, f->inv, 2), 0);
    assert_int_equal(f->s.ncts, 3);
    for (int h = 0; h < f->s.nhosts; h++)
        f->s.hosts[h].up = f->s.hosts[h].tried = true;
    strcpy(f->s.jobs[0].target, GOOD);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    top_snapshot_done(&f->s);
    inventory_free(f->inv);
    free(f);
    return 0;
}

static void test_fmt_age(void **state)
{
    (void)state;
    char b[16];
    assert_string_equal(top_fmt_age(0.4, b, sizeof b), "0s");
    assert_string_equal(top_fmt_age(2, b, sizeof b), "2s");
    assert_string_equal(top_fmt_age(45.9, b, sizeof b), "45s");
    assert_string_equal(top_fmt_age(180, b, sizeof b), "3m");
    assert_string_equal(top_fmt_age(7300, b, sizeof b), "2h");
    assert_string_equal(top_fmt_age(4 * 86400 + 5, b, sizeof b), "4d");
    assert_string_equal(top_fmt_age(-1, b, sizeof b), "-");
    assert_string_equal(top_fmt_age(NAN, b, sizeof b), "-");
}

static void test_fmt_spark(void **state)
{
    (void)state;
    char b[128];
    float v[] = { 0, 1, 2, 4, 8 };
    assert_string_equal(top_fmt_spark(v, 5, 10, true, b, sizeof b), " .:=#");
    assert_string_equal(top_fmt_spark(v, 5, 2, true, b, sizeof b), "=#"); /* newest kept */
    assert_string_equal(top_fmt_spark(v, 0, 10, true, b, sizeof b), "");
    assert_string_equal(top_fmt_spark(v, 5, 0, true, b, sizeof b), "");
    float z[] = { 0, 0 };
    assert_string_equal(top_fmt_spark(z, 2, 10, true, b, sizeof b), "  ");
    assert_string_equal(top_fmt_spark(v + 3, 2, 10, false, b, sizeof b), "\u2585\u2588");
    assert_int_equal(top_str_width(b), 2);
    /* a buffer too small stops early and stays terminated */
    char small[5];
    top_fmt_spark(v, 5, 10, false, small, sizeof small);
    assert_int_equal(top_str_width(small), 1);
}

static void test_fmt_restarts_bytes(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(top_fmt_restarts(0, 10, b, sizeof b), "0");
    assert_string_equal(top_fmt_restarts(3, 300, b, sizeof b), "3 (5m ago)");
    assert_string_equal(top_fmt_restarts(-2, 1, b, sizeof b), "0");
    assert_string_equal(top_fmt_bytes(-1, b, sizeof b), "-");
    assert_string_equal(top_fmt_bytes((int64_t)37 << 30, b, sizeof b), "37.0G");
    assert_string_equal(top_fmt_bytes((int64_t)812 << 20, b, sizeof b), "812M");
}

static void test_running_and_warmup_trend(void **state)
{
    struct fx *f = *state;
    feed_all(f, GOOD, GOOD, 100);
    const struct top_ct *ct = &f->s.cts[0];
    assert_int_equal(ct->nranks, 2);
    /* steps 1..3 are warmup: 7 samples of 10 documents */
    assert_int_equal(ct->ranks[0].ntrend, 7);
    assert_int_equal(ct->ntrend, 7);
    assert_true(fabsf(ct->trend[0] - 2.0f) < 1e-6f);
    assert_int_equal(top_rank_state(&f->s, ct, &ct->ranks[0], 100), TOP_RUNNING);
    assert_int_equal(top_ct_state(&f->s, ct, 100), TOP_RUNNING);
    assert_int_equal(top_host_state(&f->s, 0, 100), TOP_RUNNING);
    struct top_summary m;
    top_summarize(&f->s, 100, &m);
    assert_int_equal(m.ranks_running, 6);
    assert_int_equal(m.ranks_expected, 6);
    assert_int_equal(m.cts_up, 3);
    assert_true(fabs(m.ktok - 6.0) < 1e-9);
    assert_string_equal(m.deploy, "");
    char l1[512], l2[512];
    top_header_lines(&f->s, &m, true, l1, sizeof l1, l2, sizeof l2);
    assert_non_null(strstr(l1, "running  Ktok/s 6.0 "));
    /* no rank has a figure now: "-", as status's null, not "Ktok/s 0.0" (the newcomer pass) */
    m.ktok = 0;
    top_header_lines(&f->s, &m, true, l1, sizeof l1, l2, sizeof l2);
    assert_non_null(strstr(l1, "running  Ktok/s - "));
}

static void test_probation_and_deploy_phase(void **state)
{
    struct fx *f = *state;
    feed_all(f, NEW, GOOD, 100);
    assert_int_equal(top_ct_state(&f->s, &f->s.cts[1], 100), TOP_PROBATION);
    f->s.jobs[0].deploying = true;
    struct top_summary m;
    top_summarize(&f->s, 100, &m);
    assert_string_equal(m.deploy, "train: probation");
}

/* A job-spec change on probation runs the good release with another spec: the dashboard said
 * "running" (its release is the good one) while `drover status` warned of the unpromoted spec. */
static void test_spec_change_on_probation(void **state)
{
    struct fx *f = *state;
    feed_all(f, GOOD, GOOD, 100);
    struct top_ct *ct = &f->s.cts[1];
    make_status(&f->st, ct->node_rank, GOOD, GOOD, GANG_RUNNING, 11, 1000, 3.0);
    strcpy(f->st.jobs[0].spec_digest, "2222222222222222");
    strcpy(f->st.jobs[0].good_spec_digest, "1111111111111111");
    top_ct_update(ct, &f->st, "train", 3, 100);
    assert_true(ct->spec_unpromoted);
    assert_int_equal(top_rank_state(&f->s, ct, &ct->ranks[0], 100), TOP_PROBATION);
    assert_int_equal(top_ct_state(&f->s, ct, 100), TOP_PROBATION);
    f->s.jobs[0].deploying = true;
    struct top_summary m;
    top_summarize(&f->s, 100, &m);
    assert_string_equal(m.deploy, "train: probation");
    /* promoted with it: running again */
    strcpy(f->st.jobs[0].good_spec_digest, "2222222222222222");
    top_ct_update(ct, &f->st, "train", 3, 100);
    assert_false(ct->spec_unpromoted);
    assert_int_equal(top_ct_state(&f->s, ct, 100), TOP_RUNNING);
}

static void test_nan_and_slow_are_degraded(void **state)
{
    struct fx *f = *state;
    feed_all(f, GOOD, GOOD, 100);
    struct top_ct *ct = &f->s.cts[2];
    make_status(&f->st, ct->node_rank, GOOD, GOOD, GANG_RUNNING, 11, 1000, NAN);
    top_ct_update(ct, &f->st, "train", 3, 100);
    assert_false(ct->ranks[0].loss_finite);
    assert_int_equal(top_rank_state(&f->s, ct, &ct->ranks[0], 100), TOP_DEGRADED);
    /* throughput: baseline 6 Ktok/s over 6 ranks, tolerance 0.2 -> 0.8 Ktok/s per rank */
    feed_all(f, GOOD, GOOD, 100);
    f->s.jobs[0].baseline_ktok = 6.0;
    assert_int_equal(top_ct_state(&f->s, ct, 100), TOP_RUNNING);
    for (int t = 11; t < 16; t++) {
        make_status(&f->st, ct->node_rank, GOOD, GOOD, GANG_RUNNING, t, 500, 3.0);
        top_ct_update(ct, &f->st, "train", 3, 100);
    }
    assert_int_equal(top_rank_state(&f->s, ct, &ct->ranks[1], 100), TOP_DEGRADED);
    /* a NaN row's LOSS cell and a slow rank's KTOK/S cell are red */
    struct top_view v = { .ascii = true, .trend_width = 8 };
    struct top_row rows[32];
    int n = top_build_rows(&f->s, f->inv, &v, 100, rows, 32);
    bool red_ktok = false;
    for (int i = 0; i < n; i++)
        if (rows[i].level == TOP_L_RANK && rows[i].ct == 2)
            red_ktok = red_ktok || (rows[i].attr[TOP_COL_KTOK] & TOP_A_RED);
    assert_true(red_ktok);
}

/* After an agent's own revert the container says so (red, an alert) while the good release's
 * ranks it runs again are running: the header counted them as not running and every rank row
 * read "reverted" while `drover status` said running (newcomer pass after ./demo.sh). */
static void test_reverted_container_runs_good_ranks(void **state)
{
    struct fx *f = *state;
    feed_all(f, GOOD, GOOD, 100);
    struct top_ct *ct = &f->s.cts[0];
    make_status(&f->st, ct->node_rank, GOOD, GOOD, GANG_REVERTED, 11, 1000, 3.0);
    top_ct_update(ct, &f->st, "train", 3, 100);
    assert_int_equal(top_rank_state(&f->s, ct, &ct->ranks[0], 100), TOP_RUNNING);
    assert_int_equal(top_rank_state(&f->s, ct, &ct->ranks[1], 100), TOP_RUNNING);
    assert_int_equal(top_ct_state(&f->s, ct, 100), TOP_REVERTED);
    struct top_summary m;
    top_summarize(&f->s, 100, &m);
    assert_int_equal(m.ranks_running, 6);
    assert_int_equal(m.alerts[TOP_REVERTED], 1); /* one container reverted, not its ranks */
    /* a dead rank still wins over the container's revert */
    f->st.jobs[0].ranks[1].exit_code = 1;
    strcpy(f->st.jobs[0].ranks[1].state, "exited");
    top_ct_update(ct, &f->st, "train", 3, 100);
    assert_int_equal(top_rank_state(&f->s, ct, &ct->ranks[1], 100), TOP_FAILED);
    assert_int_equal(top_ct_state(&f->s, ct, 100), TOP_FAILED);
}

/* A rank that has not reported a loss yet (loss null, nothing counted non-finite: right after a
 * switch) is not the non-finite-loss failure: LOSS '-', not degraded, no NaN alert; `drover
 * status` says the same (newcomer pass: NaN there read as divergence). */
/* `top --once` exits as `drover status` does (docs/errors.md, "status and top"): 1 when a
 * container could not be asked, including one that never answered before --timeout (it exited
 * 0, showing it as starting, while status said agent-unreachable and exited 1); 5 when a host
 * key was refused (it exited 1 where status exited 5); a failed gang is an answer: 0. */
static void test_once_exit_agrees_with_status(void **state)
{
    struct fx *f = *state;
    double now = 1000;
    feed_all(f, GOOD, GOOD, now);
    int unanswered = -1;
    assert_int_equal(top_snapshot_exit(&f->s, now, &unanswered), EXIT_OK);
    assert_int_equal(unanswered, 0);
    /* a failed gang is not an unreachable container */
    make_status(&f->st, 0, GOOD, GOOD, GANG_FAILED, 11, 1000, 3.0);
    top_ct_update(&f->s.cts[0], &f->st, "train", 3, now);
    assert_int_equal(top_snapshot_exit(&f->s, now, NULL), EXIT_OK);
    /* a container that never answered */
    f->s.cts[2].seen = false;
    assert_int_equal(top_snapshot_exit(&f->s, now, &unanswered), EXIT_FAIL);
    assert_int_equal(unanswered, 1);
    /* its host down */
    f->s.hosts[1].up = false;
    strcpy(f->s.hosts[1].err, "connect: Connection refused");
    assert_int_equal(top_snapshot_exit(&f->s, now, &unanswered), EXIT_FAIL);
    assert_int_equal(unanswered, 0);
    /* down on a refused host key */
    f->s.hosts[1].key_refused = true;
    assert_int_equal(top_snapshot_exit(&f->s, now, NULL), EXIT_HOSTKEY);
    /* up again: the old refusal no longer counts */
    f->s.hosts[1].up = true;
    f->s.hosts[1].err[0] = '\0';
    f->s.cts[2].seen = true;
    assert_int_equal(top_snapshot_exit(&f->s, now, NULL), EXIT_OK);
}

static void test_no_loss_yet_is_not_nan(void **state)
{
    struct fx *f = *state;
    feed_all(f, GOOD, GOOD, 100);
    struct top_ct *ct = &f->s.cts[1];
    make_status(&f->st, ct->node_rank, GOOD, GOOD, GANG_RUNNING, 11, 1000, NAN);
    for (int k = 0; k < 2; k++)
        f->st.jobs[0].ranks[k].hb.nonfinite = 0;
    top_ct_update(ct, &f->st, "train", 3, 100);
    assert_false(ct->ranks[0].loss_finite);
    assert_false(ct->ranks[0].loss_nan);
    assert_int_equal(top_rank_state(&f->s, ct, &ct->ranks[0], 100), TOP_RUNNING);
    struct top_summary m;
    top_summarize(&f->s, 100, &m);
    assert_int_equal(m.nan_ranks, 0);
    struct top_view v = { .ascii = true, .trend_width = 8 };
    struct top_row rows[32];
    int n = top_build_rows(&f->s, f->inv, &v, 100, rows, 32);
    int seen = 0;
    for (int i = 0; i < n; i++)
        if (rows[i].ct == 1 && (rows[i].level == TOP_L_RANK || rows[i].level == TOP_L_CT)) {
            assert_string_equal(rows[i].cell[TOP_COL_LOSS], "-");
            assert_false(rows[i].attr[TOP_COL_LOSS] & TOP_A_RED);
            seen++;
        }
    assert_int_equal(seen, 3); /* the container's row and its two ranks */
    /* counted non-finite: NaN, red, degraded, alert */
    make_status(&f->st, ct->node_rank, GOOD, GOOD, GANG_RUNNING, 12, 1000, NAN);
    top_ct_update(ct, &f->st, "train", 3, 100);
    assert_true(ct->ranks[0].loss_nan);
    assert_int_equal(top_rank_state(&f->s, ct, &ct->ranks[0], 100), TOP_DEGRADED);
    top_summarize(&f->s, 100, &m);
    assert_int_equal(m.nan_ranks, 2);
}

/* A rank that sent only the heartbeat module's hello (its script is in the rendezvous) said
 * "starting", as one that sent nothing: it says "rendezvous", as `drover status` does; one that
 * sent nothing, or init after the hello, still says starting. */
static void test_hello_only_rank_in_rendezvous(void **state)
{
    struct fx *f = *state;
    feed_all(f, GOOD, GOOD, 100);
    struct top_ct *ct = &f->s.cts[1];
    make_status(&f->st, ct->node_rank, GOOD, GOOD, GANG_RUNNING, 0, 0, NAN);
    struct rank_status *hello = &f->st.jobs[0].ranks[0], *none = &f->st.jobs[0].ranks[1];
    strcpy(hello->state, "starting");
    heartbeat_init(&hello->hb);
    hello->hb.hello = true;
    strcpy(none->state, "starting");
    none->has_hb = false;
    top_ct_update(ct, &f->st, "train", 3, 100);
    assert_int_equal(top_rank_state(&f->s, ct, &ct->ranks[0], 100), TOP_RENDEZVOUS);
    assert_string_equal(top_state_name(TOP_RENDEZVOUS), "rendezvous");
    assert_int_equal(top_rank_state(&f->s, ct, &ct->ranks[1], 100), TOP_STARTING);
    assert_false(top_state_is_alert(TOP_RENDEZVOUS));
    struct top_view v = { .ascii = true, .trend_width = 8 };
    struct top_row rows[32];
    int n = top_build_rows(&f->s, f->inv, &v, 100, rows, 32), seen = 0;
    for (int i = 0; i < n; i++)
        if (rows[i].ct == 1 && rows[i].level == TOP_L_RANK && rows[i].rank == 0) {
            assert_non_null(strstr(rows[i].cell[TOP_COL_STATE], "rendezvous"));
            seen++;
        }
    assert_int_equal(seen, 1);
    /* init after the hello: past the rendezvous, loading (starting) */
    hello->hb.hello = false;
    top_ct_update(ct, &f->st, "train", 3, 101);
    assert_int_equal(top_rank_state(&f->s, ct, &ct->ranks[0], 101), TOP_STARTING);
}

/* A container whose agent is stopped or hung (SIGSTOP): it accepts the watch stream and never
 * sends a document, and no error comes for a minute (the agent CLI's own idle deadline).  `top
 * --once` showed it `starting` with `alerts: none` while `drover status` said agent-unreachable
 * and both exited 1 (the newcomer pass).  Past its first-document deadline (live) or --once's
 * --timeout it is unreachable: the row, the host, the alerts and a `!` line naming it. */
static void test_hung_agent_is_unreachable(void **state)
{
    struct fx *f = *state;
    double now = 100;
    feed_all(f, GOOD, GOOD, now);
    struct top_ct *hung = &f->s.cts[1]; /* h1:102 */
    memset(hung->ranks, 0, sizeof hung->ranks);
    hung->nranks = 0;
    hung->seen = hung->has_job = false;
    hung->asked_mono = now - 2;
    hung->answer_by = hung->asked_mono + top_first_doc_within(2);
    assert_true(top_first_doc_within(2) >= 30); /* a loaded host may be slow to start the agent */
    assert_true(top_first_doc_within(10) > 4 * 10);
    /* asked a moment ago: connecting, no alert yet */
    assert_int_equal(top_ct_state(&f->s, hung, now), TOP_STARTING);
    /* past the deadline it has not answered: unreachable, and said */
    double late = hung->answer_by + 0.5;
    for (int i = 0; i < f->s.ncts; i++)
        if (i != 1)
            f->s.cts[i].doc_mono = late;
    assert_int_equal(top_ct_state(&f->s, hung, late), TOP_UNREACHABLE);
    assert_int_equal(top_host_state(&f->s, 0, late), TOP_UNREACHABLE);
    assert_int_equal(top_ct_state(&f->s, &f->s.cts[0], late), TOP_RUNNING);
    struct top_summary m;
    top_summarize(&f->s, late, &m);
    assert_int_equal(m.alerts[TOP_UNREACHABLE], 1);
    assert_int_equal(m.cts_up, 2);
    char l1[256], l2[256];
    top_header_lines(&f->s, &m, true, l1, sizeof l1, l2, sizeof l2);
    assert_non_null(strstr(l2, "alerts: unreachable 1"));
    struct top_view v = { .ascii = true };
    char *text = NULL;
    assert_int_equal(top_render_text(&f->s, f->inv, &v, late, 132, false, &text), 0);
    if (!strstr(text, "\n! h1:102: its agent sent no status document in 30s: is drover-agent stopped or hung "
                      "there?\n"))
        fail_msg("no '! h1:102: ...' line naming the hung agent in:\n%s", text);
    free(text);
    /* the exit code and the stderr line of --once, as before */
    int unanswered = 0;
    assert_int_equal(top_snapshot_exit(&f->s, late, &unanswered), EXIT_FAIL);
    assert_int_equal(unanswered, 1);
    assert_true(top_ct_report_unanswered(&f->s, 1, late));
    assert_false(top_ct_report_unanswered(&f->s, 0, late));

    /* --once: its --timeout (15 s by default) ends the wait before that deadline; what has not
     * answered by then is unreachable too, also a container never asked (host still connecting) */
    hung->answer_by = now + 30;
    f->s.cts[2].seen = false;
    f->s.cts[2].nranks = 0;
    f->s.cts[2].asked_mono = f->s.cts[2].answer_by = 0;
    assert_int_equal(top_ct_state(&f->s, hung, now + 13), TOP_STARTING);
    assert_int_equal(top_ct_state(&f->s, &f->s.cts[2], now + 13), TOP_STARTING);
    top_snapshot_wait_over(&f->s, now - 2, now + 13);
    assert_int_equal(top_ct_state(&f->s, hung, now + 13), TOP_UNREACHABLE);
    assert_int_equal(top_ct_state(&f->s, &f->s.cts[2], now + 13), TOP_UNREACHABLE);
    assert_true(f->s.cts[0].answer_by == 0); /* a container that answered keeps no deadline */
    /* a document clears it */
    make_status(&f->st, 1, GOOD, GOOD, GANG_RUNNING, 11, 1000, 3.0);
    top_ct_update(hung, &f->st, "train", 3, now + 14);
    assert_int_equal(top_ct_state(&f->s, hung, now + 14), TOP_RUNNING);
}

static void test_stalled_backoff_failed(void **state)
{
    struct fx *f = *state;
    feed_all(f, GOOD, GOOD, 100);
    struct top_ct *ct = &f->s.cts[0];
    /* step 100 ms -> interval 1 s: late past 2 s, stalled past 5 s */
    assert_int_equal(top_hb_lateness(&ct->ranks[0], 1.5), 0);
    assert_int_equal(top_hb_lateness(&ct->ranks[0], 2.5), 1);
    assert_int_equal(top_hb_lateness(&ct->ranks[0], 5.5), 2);
    /* the age grows with the time the next document is overdue (interval 2 s) */
    assert_true(fabs(top_rank_hb_age(&f->s, ct, &ct->ranks[0], 101.5) - 0.5) < 1e-9);
    assert_true(fabs(top_rank_hb_age(&f->s, ct, &ct->ranks[0], 107) - 5.5) < 1e-9);
    assert_int_equal(top_rank_state(&f->s, ct, &ct->ranks[0], 106), TOP_RUNNING);
    /* a late heartbeat alone is not a state: liveness is the agent's word (agent/liveness.h),
     * so status and top agree; the AGE column shows the lateness */
    assert_int_equal(top_rank_state(&f->s, ct, &ct->ranks[0], 107.5), TOP_RUNNING);
    static const struct {
        const char *word;
        enum top_state want;
    } words[] = {{"stalled", TOP_STALLED}, {"silent", TOP_SILENT}, {"checkpointing", TOP_CHECKPOINTING}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        make_status(&f->st, ct->node_rank, GOOD, GOOD, GANG_RUNNING, 12, 1000, 3.0);
        strcpy(f->st.jobs[0].ranks[0].state, words[i].word);
        f->st.jobs[0].ranks[0].state_age_s = 42;
        top_ct_update(ct, &f->st, "train", 2, 108);
        assert_int_equal(top_rank_state(&f->s, ct, &ct->ranks[0], 108), words[i].want);
        assert_true(ct->ranks[0].state_age_s == 42);
        /* the header counts a checkpointing rank as running, a stalled or silent one not
         * (t-70 in CI: 'ranks 2/3 running' while rank 0 wrote its checkpoint) */
        struct top_summary m;
        top_summarize(&f->s, 108, &m);
        int others = 0;
        for (int c = 0; c < f->s.ncts; c++)
            for (int k = 0; k < f->s.cts[c].nranks; k++)
                if (&f->s.cts[c] != ct || k != 0)
                    others += top_rank_state(&f->s, &f->s.cts[c], &f->s.cts[c].ranks[k], 108) == TOP_RUNNING;
        assert_int_equal(m.ranks_running, others + (words[i].want == TOP_CHECKPOINTING));
    }
    make_status(&f->st, ct->node_rank, GOOD, GOOD, GANG_RUNNING, 12, 1000, 3.0);
    top_ct_update(ct, &f->st, "train", 2, 108);
    /* a slow refresh alone never makes a rank late */
    f->s.interval_s = 10;
    assert_int_equal(top_rank_state(&f->s, ct, &ct->ranks[0], 109.9), TOP_RUNNING);
    f->s.interval_s = 2;
    make_status(&f->st, 0, GOOD, GOOD, GANG_BACKOFF, 12, 1000, 3.0);
    top_ct_update(ct, &f->st, "train", 3, 110);
    assert_int_equal(top_ct_state(&f->s, ct, 110), TOP_BACKOFF);
    assert_true(top_state_is_alert(TOP_BACKOFF));
    make_status(&f->st, 0, GOOD, GOOD, GANG_RUNNING, 12, 1000, 3.0);
    strcpy(f->st.jobs[0].ranks[1].state, "killed");
    top_ct_update(ct, &f->st, "train", 3, 110);
    assert_int_equal(top_rank_state(&f->s, ct, &ct->ranks[1], 110), TOP_FAILED);
    assert_int_equal(top_ct_state(&f->s, ct, 110), TOP_FAILED);
    /* the job missing from the document (never deployed there): `drover status`'s word, not
     * "stopped" (top said stopped where status said no-job) */
    make_status(&f->st, 0, GOOD, GOOD, GANG_RUNNING, 12, 1000, 3.0);
    strcpy(f->st.jobs[0].job, "other");
    top_ct_update(ct, &f->st, "train", 3, 111);
    assert_int_equal(top_ct_state(&f->s, ct, 111), TOP_NO_JOB);
    assert_string_equal(top_state_name(top_ct_state(&f->s, ct, 111)), status_job_state_name(NULL));
    assert_string_equal(status_job_state_name(NULL), "no-job");
    assert_false(top_state_is_alert(TOP_NO_JOB));
}

static void test_unreachable_keeps_values_dimmed(void **state)
{
    struct fx *f = *state;
    feed_all(f, GOOD, GOOD, 100);
    double late = 100 + top_stale_after(2) + 0.1;
    assert_int_equal(top_ct_state(&f->s, &f->s.cts[2], 101), TOP_RUNNING);
    /* h2's only container goes quiet (the session looks open): h2 no longer counts as up */
    f->s.cts[0].doc_mono = f->s.cts[1].doc_mono = late;
    assert_int_equal(top_ct_state(&f->s, &f->s.cts[2], late), TOP_UNREACHABLE);
    struct top_summary q;
    top_summarize(&f->s, late, &q);
    assert_int_equal(q.hosts_up, 1);
    assert_int_equal(q.cts_up, 2);
    /* a host error marks its containers at once */
    f->s.hosts[1].up = false;
    strcpy(f->s.hosts[1].err, "connection refused");
    assert_int_equal(top_ct_state(&f->s, &f->s.cts[2], 101), TOP_UNREACHABLE);
    assert_int_equal(top_host_state(&f->s, 1, 101), TOP_UNREACHABLE);
    struct top_view v = { .ascii = true };
    struct top_row rows[32];
    int n = top_build_rows(&f->s, f->inv, &v, 101, rows, 32);
    bool seen = false;
    for (int i = 0; i < n; i++)
        if (rows[i].level == TOP_L_RANK && rows[i].ct == 2) {
            seen = true;
            assert_true(rows[i].stale);
            assert_string_equal(rows[i].cell[TOP_COL_STEP], "10"); /* the last value, kept */
            assert_string_equal(rows[i].cell[TOP_COL_STATE], "unreachable");
        }
    assert_true(seen);
    char why[512];
    assert_string_equal(top_row_problem(&f->s, &rows[n - 1], 101, why, sizeof why),
                        "h2: connection refused");
    /* --once lists the reason under the table */
    char *text = NULL;
    assert_int_equal(top_render_text(&f->s, f->inv, &v, 101, 132, false, &text), 0);
    assert_non_null(strstr(text, "\n! h2: connection refused\n"));
    free(text);
    struct top_summary m;
    top_summarize(&f->s, 101, &m);
    assert_int_equal(m.cts_up, 2);
    assert_int_equal(m.alerts[TOP_UNREACHABLE], 1);
    assert_int_equal(m.ranks_running, 4);
}

/* A job whose good release its agents marked bad (stopped while promoted for non-finite loss,
 * then started again as asked): `drover status` warned under its table, top showed nothing.  It
 * shows the same lines (status_bad_marks_line) under its own table, here with the containers
 * disagreeing: one gives another reason, one does not mark the release at all. */
static void test_bad_release_note(void **state)
{
    struct fx *f = *state;
    feed_all(f, GOOD, GOOD, 100);
    struct top_view v = { .inv_arg = "/t/inv.ini" };
    char notes[4096];
    assert_int_equal(top_notes(&f->s, &v, notes, sizeof notes), 0); /* nothing marked: no line */
    static const char *const why[] = { "stopped while promoted: rank 0 reported 3 consecutive non-finite steps",
                                       "stopped while promoted: rank 3 exited with code 4 (data)", NULL };
    for (int i = 0; i < 3; i++) {
        make_status(&f->st, f->s.cts[i].node_rank, GOOD, GOOD, GANG_RUNNING, 11, 1000, 3.0);
        if (why[i]) {
            f->st.jobs[0].nbad = 1;
            strcpy(f->st.jobs[0].bad[0], GOOD);
            strcpy(f->st.jobs[0].bad_reason[0], why[i]);
        }
        top_ct_update(&f->s.cts[i], &f->st, "train", 3, 101);
    }
    assert_int_equal(top_notes(&f->s, &v, notes, sizeof notes), 1);
    char *text = NULL;
    assert_int_equal(top_render_text(&f->s, f->inv, &v, 101, 132, false, &text), 0);
    static const char want[] = "\n! job 'train': its good release aaaaaaaaaaaa is marked bad by the agents of "
                               "h1:101, h1:102, in 2 of its 3 containers (h1:101: stopped while promoted: rank 0 "
                               "reported 3 consecutive non-finite steps; h1:102: stopped while promoted: rank 3 "
                               "exited with code 4 (data)): a plain rollback never goes to it; `drover -i "
                               "/t/inv.ini rollback --job train` goes to an earlier good release";
    if (!strstr(text, want))
        fail_msg("frame:\n%s", text);
    free(text);
}

/* A release on probation that no drover watches: `drover status` said under its table that it is
 * held (waiting for promote or revert) or orphaned (its drover killed), and when its agents revert
 * it; top said only "probation".  It shows the same line (status_probation_line), held from the
 * controller's history in state_dir, and nothing while a drover holds the job's lease. */
static void test_unwatched_probation_note(void **state)
{
    struct fx *f = *state;
    feed_all(f, GOOD, GOOD, 100);
    char dir[] = "/tmp/drover-test-top-XXXXXX", notes[4096], cmd[128];
    assert_non_null(mkdtemp(dir));
    struct top_view v = { .inv_arg = "/t/inv.ini", .state_dir = dir };
    for (int i = 0; i < 3; i++) {
        make_status(&f->st, f->s.cts[i].node_rank, NEW, GOOD, GANG_RUNNING, 11, 1000, 3.0);
        f->st.jobs[0].probation_left_s = 4410 + i;
        top_ct_update(&f->s.cts[i], &f->st, "train", 3, 101);
    }
    assert_int_equal(top_notes(&f->s, &v, notes, sizeof notes), 1);
    if (!strstr(notes, "job 'train': bbbbbbbbbbbb is on probation with no drover watching it (the deploy that "
                       "started it is gone: its drover killed or cut off); its agents revert it on their own in "
                       "4410 s, about ") ||
        !strstr(notes, "`drover -i /t/inv.ini rollback --job train` reverts it now"))
        fail_msg("notes: %s", notes);
    /* held by its deploy, by this controller's history */
    struct history_entry h = { .time = 1, .ktok_s = -1, .baseline_ktok_s = -1 };
    strcpy(h.job, "train");
    strcpy(h.release, NEW);
    strcpy(h.name, "good2");
    strcpy(h.result, "held");
    assert_int_equal(state_history_append(dir, &h), 0);
    assert_int_equal(top_notes(&f->s, &v, notes, sizeof notes), 1);
    if (!strstr(notes, "job 'train': bbbbbbbbbbbb is held on probation (on_inconclusive = hold), waiting for "
                       "`drover -i /t/inv.ini promote --job train` or `drover -i /t/inv.ini revert --job train`"))
        fail_msg("notes: %s", notes);
    /* a drover that runs holds the lease in one container (this process): it watches */
    make_status(&f->st, f->s.cts[1].node_rank, NEW, GOOD, GANG_RUNNING, 11, 1000, 3.0);
    f->st.jobs[0].probation_left_s = 4411;
    holder_self(f->st.jobs[0].lease_holder, sizeof f->st.jobs[0].lease_holder);
    top_ct_update(&f->s.cts[1], &f->st, "train", 3, 101);
    assert_int_equal(top_notes(&f->s, &v, notes, sizeof notes), 0);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* A container running two jobs is one container in the header ("containers 3/3", as `drover
 * validate` counts them), while each job keeps its own row and its ranks. */
static void test_shared_container_counts_once(void **state)
{
    (void)state;
    static const char text[] = "[host h1]\naddress = 127.0.0.2\n[host h2]\naddress = 127.0.0.3\n"
                               "[job train]\ncontainers = h1:101 h2:201\ncommand = bin/t\n"
                               "[job eval]\ncontainers = h1:101 h1:102\ncommand = bin/e\nmaster_port = 29501\n";
    struct inventory *inv = NULL;
    struct top_snapshot s;
    struct agent_status st;
    char err[512];
    assert_int_equal(inventory_parse(text, strlen(text), "/t/inv.ini", &inv, err, sizeof err), 0);
    assert_int_equal(inventory_count_cts(inv), 3);
    assert_int_equal(top_snapshot_init(&s, inv, 2), 0);
    assert_int_equal(s.ncts, 4);
    for (int h = 0; h < s.nhosts; h++)
        s.hosts[h].up = s.hosts[h].tried = true;
    for (int i = 0; i < s.ncts; i++) {
        make_status(&st, s.cts[i].node_rank, GOOD, GOOD, GANG_RUNNING, 10, 1000, 3.0);
        strcpy(st.jobs[0].job, s.jobs[s.cts[i].job].name);
        top_ct_update(&s.cts[i], &st, s.jobs[s.cts[i].job].name, 3, 100);
    }
    struct top_summary m;
    top_summarize(&s, 100, &m);
    assert_int_equal(m.cts, 3);
    assert_int_equal(m.cts_up, 3);
    assert_int_equal(m.ranks_expected, 4);
    char l1[256], l2[256];
    top_header_lines(&s, &m, true, l1, sizeof l1, l2, sizeof l2);
    assert_non_null(strstr(l1, "containers 3/3"));
    /* h1:101 goes quiet for both its jobs: one container down, not two */
    double late = 100 + top_stale_after(2) + 0.1;
    for (int i = 0; i < s.ncts; i++)
        if (strcmp(s.cts[i].label, "h1:101") != 0)
            s.cts[i].doc_mono = late;
    top_summarize(&s, late, &m);
    assert_int_equal(m.cts, 3);
    assert_int_equal(m.cts_up, 2);
    /* the rows stay per job: h1 shows 101 train, 101 eval, 102 eval */
    struct top_view v = { .ascii = true };
    struct top_row rows[32];
    int n = top_build_rows(&s, inv, &v, late, rows, 32), ct_rows = 0;
    for (int i = 0; i < n; i++)
        ct_rows += rows[i].level == TOP_L_CT;
    assert_int_equal(ct_rows, 4);
    /* h1:101 never answers (its agent is wedged): `top --once` names it once, not per job */
    for (int i = 0; i < s.ncts; i++)
        s.cts[i].seen = strcmp(s.cts[i].label, "h1:101") != 0;
    int named = 0, unanswered = 0;
    for (int i = 0; i < s.ncts; i++)
        named += top_ct_report_unanswered(&s, i, late);
    assert_int_equal(top_snapshot_exit(&s, late, &unanswered), EXIT_FAIL);
    assert_int_equal(unanswered, 2); /* both pairs count for the exit code */
    assert_int_equal(named, 1);
    assert_false(top_ct_report_unanswered(&s, s.ncts, late));
    top_snapshot_done(&s);
    inventory_free(inv);
}

static void test_tree_sort_filter_fold(void **state)
{
    struct fx *f = *state;
    feed_all(f, GOOD, GOOD, 100);
    make_status(&f->st, 1, GOOD, GOOD, GANG_FAILED, 12, 1000, 3.0);
    top_ct_update(&f->s.cts[1], &f->st, "train", 3, 100); /* h1:102 failed */
    struct top_view v = { .ascii = true, .trend_width = 8 };
    struct top_row rows[64];
    int n = top_build_rows(&f->s, f->inv, &v, 100, rows, 64);
    /* h1, 101, 2 ranks, 102, 2 ranks, h2, 201, 2 ranks */
    assert_int_equal(n, 11);
    assert_int_equal(rows[0].level, TOP_L_HOST);
    assert_string_equal(rows[0].cell[TOP_COL_NAME], "- h1");
    assert_int_equal(rows[1].ct, 0);
    assert_int_equal(rows[0].state, TOP_FAILED);
    /* problems first: h1 (failed) first, and within it 102 before 101 */
    v.problems_first = true;
    n = top_build_rows(&f->s, f->inv, &v, 100, rows, 64);
    assert_int_equal(rows[0].host, 0);
    assert_int_equal(rows[1].ct, 1);
    /* filter on a rank: only that rank and its parents */
    strcpy(v.filter, "h2:201/5");
    n = top_build_rows(&f->s, f->inv, &v, 100, rows, 64);
    assert_int_equal(n, 3);
    assert_int_equal(rows[2].level, TOP_L_RANK);
    assert_string_equal(rows[2].cell[TOP_COL_NAME], "      rank 5");
    /* filter on a state word (case-insensitive) */
    strcpy(v.filter, "FAILED");
    n = top_build_rows(&f->s, f->inv, &v, 100, rows, 64);
    assert_int_equal(n, 4); /* h1, 102, its 2 ranks */
    strcpy(v.filter, "no-such-thing");
    assert_int_equal(top_build_rows(&f->s, f->inv, &v, 100, rows, 64), 0);
    /* `top --once --filter no-such-thing` printed an empty table and nothing else: the frame
     * now says the filter hid every row (exit 0 still); a filter that shows something, or
     * none, is no such case */
    assert_true(top_filter_hides_all(&f->s, f->inv, &v, 100));
    strcpy(v.filter, "h2");
    assert_false(top_filter_hides_all(&f->s, f->inv, &v, 100));
    strcpy(v.filter, "train"); /* the job's name */
    assert_false(top_filter_hides_all(&f->s, f->inv, &v, 100));
    v.host_folded[1] = true; /* folded rows still show their parent */
    strcpy(v.filter, "h2:201/5");
    assert_false(top_filter_hides_all(&f->s, f->inv, &v, 100));
    v.host_folded[1] = false;
    v.filter[0] = '\0';
    assert_false(top_filter_hides_all(&f->s, f->inv, &v, 100));
    struct top_snapshot none = f->s; /* nothing to hide: no rows without the filter either */
    none.nhosts = 0;
    none.ncts = 0;
    strcpy(v.filter, "no-such-thing");
    assert_false(top_filter_hides_all(&none, f->inv, &v, 100));
    v.filter[0] = '\0';
    /* fold a host, then a container */
    v.host_folded[0] = true;
    n = top_build_rows(&f->s, f->inv, &v, 100, rows, 64);
    assert_int_equal(n, 5);
    assert_true(rows[0].folded);
    assert_string_equal(rows[0].cell[TOP_COL_NAME], "+ h1");
    v.host_folded[0] = false;
    v.ct_folded[2] = true;
    n = top_build_rows(&f->s, f->inv, &v, 100, rows, 64);
    assert_int_equal(n, 9);
    /* max_rows is respected */
    assert_int_equal(top_build_rows(&f->s, f->inv, &v, 100, rows, 3), 3);
    /* flat: one row per rank, named h1:101/0 */
    v.flat = true;
    v.problems_first = false;
    n = top_build_rows(&f->s, f->inv, &v, 100, rows, 64);
    assert_int_equal(n, 6);
    assert_string_equal(rows[0].cell[TOP_COL_NAME], "h1:101/0");
    assert_int_equal(rows[0].level, TOP_L_RANK);
}

static void test_release_marked_when_off_target(void **state)
{
    struct fx *f = *state;
    feed_all(f, NEW, GOOD, 100);
    struct top_view v = { .ascii = true };
    struct top_row rows[64];
    int n = top_build_rows(&f->s, f->inv, &v, 100, rows, 64);
    assert_true(n > 2);
    assert_string_equal(rows[1].cell[TOP_COL_REL], "bbbbbbbb*");
    assert_true(rows[1].attr[TOP_COL_REL] & TOP_A_YELLOW);
    feed_all(f, GOOD, GOOD, 100);
    n = top_build_rows(&f->s, f->inv, &v, 100, rows, 64);
    assert_string_equal(rows[1].cell[TOP_COL_REL], "aaaaaaaa");
}

static void test_rollback_target(void **state)
{
    struct fx *f = *state;
    bool to_good = true;
    assert_string_equal(top_rollback_target(&f->s, 0, &to_good), ""); /* nothing seen yet */
    assert_false(to_good);
    feed_all(f, NEW, GOOD, 100); /* probation: back to the good one */
    assert_string_equal(top_rollback_target(&f->s, 0, &to_good), GOOD);
    assert_true(to_good);
    feed_all(f, GOOD, GOOD, 100); /* promoted, no previous: nothing */
    assert_string_equal(top_rollback_target(&f->s, 0, &to_good), "");
    make_status(&f->st, 0, GOOD, GOOD, GANG_RUNNING, 11, 1000, 3.0);
    strcpy(f->st.jobs[0].previous, NEW);
    top_ct_update(&f->s.cts[0], &f->st, "train", 3, 101);
    assert_string_equal(top_rollback_target(&f->s, 0, &to_good), NEW);
    assert_false(to_good);
}

static void test_layout(void **state)
{
    (void)state;
    struct top_view v = { 0 };
    int w[TOP_NCOLS];
    top_layout(80, &v, w);
    int total = -1, shown = 0;
    for (int c = 0; c < TOP_NCOLS; c++)
        if (w[c]) {
            total += w[c] + 1;
            shown++;
        }
    assert_true(total <= 80);
    assert_int_equal(w[TOP_COL_MEM], 0);
    assert_int_equal(w[TOP_COL_TEMP], 0);
    assert_true(w[TOP_COL_NAME] >= 16);
    assert_true(w[TOP_COL_STATE] > 0 && w[TOP_COL_KTOK] > 0 && w[TOP_COL_HB] > 0);
    assert_int_equal(v.trend_width, w[TOP_COL_TREND]);
    top_layout(200, &v, w);
    for (int c = 0; c < TOP_NCOLS; c++)
        assert_true(w[c] > 0);
    top_layout(40, &v, w);
    assert_int_equal(w[TOP_COL_REL], 0);
    assert_true(w[TOP_COL_STATE] > 0);
}

/* A rank's state and its age fit the STATE column, at every width that shows it: "checkpointing
 * 42s" was cut to "checkpointi" (the column was 11 wide) */
static void test_state_cell_whole(void **state)
{
    struct fx *f = *state;
    feed_all(f, GOOD, GOOD, 100);
    struct top_ct *ct = &f->s.cts[0];
    static const char *const words[] = { "checkpointing", "stalled", "silent" };
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        make_status(&f->st, ct->node_rank, GOOD, GOOD, GANG_RUNNING, 12, 1000, 3.0);
        strcpy(f->st.jobs[0].ranks[0].state, words[i]);
        f->st.jobs[0].ranks[0].state_age_s = i ? 119 : 42;
        top_ct_update(ct, &f->st, "train", 2, 100);
        char want[64];
        snprintf(want, sizeof want, "%s %ds ", words[i], i ? 119 : 42);
        static const int widths[] = { 80, 132 };
        for (size_t k = 0; k < sizeof widths / sizeof widths[0]; k++) {
            struct top_view v = { .ascii = true, .flat = true };
            char *text = NULL;
            assert_int_equal(top_render_text(&f->s, f->inv, &v, 100, widths[k], false, &text), 0);
            if (!strstr(text, want))
                fail_msg("no '%s' at width %d in:\n%s", want, widths[k], text);
            free(text);
        }
    }
    /* the layout's column is as wide as the longest word and an age */
    struct top_view v = { 0 };
    int w[TOP_NCOLS];
    top_layout(80, &v, w);
    assert_int_equal(w[TOP_COL_STATE], top_state_col_width());
    assert_true(top_state_col_width() >= (int)strlen("checkpointing 119s"));
    assert_true(top_state_col_width() >= (int)strlen("unreachable 119s"));
}

static void test_render_text_color_only_when_asked(void **state)
{
    struct fx *f = *state;
    feed_all(f, GOOD, GOOD, 100);
    make_status(&f->st, 0, GOOD, GOOD, GANG_RUNNING, 11, 1000, NAN);
    top_ct_update(&f->s.cts[0], &f->st, "train", 3, 100);
    struct top_view v = { .ascii = true };
    char *text = NULL;
    assert_int_equal(top_render_text(&f->s, f->inv, &v, 100, 80, false, &text), 0);
    assert_non_null(strstr(text, "NaN"));
    assert_non_null(strstr(text, "KTOK/S"));
    assert_null(strchr(text, '\033'));
    assert_non_null(strstr(text, "alerts: degraded 1 NaN 2"));
    /* no line wider than 80 */
    for (char *l = text; *l;) {
        char *nl = strchr(l, '\n');
        assert_non_null(nl);
        *nl = '\0';
        assert_true(top_str_width(l) <= 80);
        l = nl + 1;
    }
    free(text);
    assert_int_equal(top_render_text(&f->s, f->inv, &v, 100, 132, true, &text), 0);
    assert_non_null(strstr(text, "\033[31m"));
    free(text);
}

static void test_snapshot_copy(void **state)
{
    struct fx *f = *state;
    feed_all(f, GOOD, GOOD, 100);
    struct top_snapshot d = { 0 };
    assert_int_equal(top_snapshot_copy(&d, &f->s), 0);
    assert_int_equal(d.ncts, 3);
    assert_ptr_not_equal(d.cts, f->s.cts);
    assert_int_equal(d.cts[1].ranks[1].step, 10);
    f->s.cts[1].ranks[1].step = 99;
    assert_int_equal(top_snapshot_copy(&d, &f->s), 0); /* reuses its array */
    assert_int_equal(d.cts[1].ranks[1].step, 99);
    top_snapshot_done(&d);
    top_snapshot_done(NULL);
}

static void test_event_parse(void **state)
{
    (void)state;
    struct event e, keep;
    const char *good = "{\"detail\":\"rank 0 exited 1\",\"job\":\"train\",\"kind\":\"crash\","
                       "\"release\":\"71cd8e4f\",\"seq\":7,\"ts\":1764445000.5}";
    assert_int_equal(event_parse(good, strlen(good), &e), 0);
    assert_int_equal(e.seq, 7);
    assert_string_equal(e.kind, "crash");
    assert_string_equal(e.job, "train");
    char b[512];
    assert_non_null(strstr(top_event_format(&e, b, sizeof b), "crash"));
    memset(&keep, 0x5a, sizeof keep);
    e = keep;
    const char *bad[] = {
        "", "not json", "[1,2]", "{\"seq\":1,\"ts\":2}", "{\"seq\":\"1\",\"ts\":2,\"kind\":\"x\"}",
        "{\"seq\":1,\"ts\":2,\"kind\":3}", "{\"seq\":1,\"ts\":2,\"kind\":\"x\",\"job\":[]}",
        "{\"seq\":1,\"seq\":2,\"ts\":2,\"kind\":\"x\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(event_parse(bad[i], strlen(bad[i]), &e), -EINVAL);
        assert_memory_equal(&e, &keep, sizeof e);
    }
    char *big = malloc(EVENT_PARSE_MAX + 2);
    assert_non_null(big);
    memset(big, ' ', EVENT_PARSE_MAX + 1);
    big[EVENT_PARSE_MAX + 1] = '\0';
    assert_int_equal(event_parse(big, EVENT_PARSE_MAX + 1, &e), -E2BIG);
    assert_memory_equal(&e, &keep, sizeof e);
    free(big);
    /* long strings are cut, not overflowed */
    char longer[2048];
    snprintf(longer, sizeof longer, "{\"seq\":1,\"ts\":2,\"kind\":\"%0600d\",\"detail\":\"%0900d\"}", 0, 0);
    assert_int_equal(event_parse(longer, strlen(longer), &e), 0);
    assert_int_equal(strlen(e.kind), sizeof e.kind - 1);
}

static void test_state_names(void **state)
{
    (void)state;
    for (int s = 0; s < TOP_STATE_COUNT; s++)
        assert_string_not_equal(top_state_name((enum top_state)s), "?");
    assert_string_equal(top_state_name(TOP_STATE_COUNT), "?");
    assert_true(top_state_severity(TOP_UNREACHABLE) > top_state_severity(TOP_FAILED));
    assert_true(top_state_severity(TOP_FAILED) > top_state_severity(TOP_STALLED));
    assert_true(top_state_severity(TOP_DEGRADED) > top_state_severity(TOP_PROBATION));
    assert_true(top_state_severity(TOP_PROBATION) > top_state_severity(TOP_RUNNING));
    assert_false(top_state_is_alert(TOP_RUNNING));
    assert_false(top_state_is_alert(TOP_DEGRADED));
}

/* Two jobs on one host, one of them never deployed there (a newcomer's own inventory with extra
 * jobs): the host row said `no-job` (worse than running in the order) while job 'drafter' ran on
 * h1:101.  no-job is a container's word: a host says it only when none of its containers knows
 * its job. */
static void test_host_not_no_job_while_a_job_runs(void **state)
{
    (void)state;
    static const char two[] = "[drover]\nstate_dir = /nonexistent/state\n[host h1]\naddress = 127.0.0.2\n"
                              "[job drafter]\ncontainers = h1:101\ncommand = bin/drover-train\n"
                              "[job extra]\ncontainers = h1:102 h1:101\ncommand = bin/drover-train\nmaster_port = 29600\n";
    struct inventory *inv;
    char err[512];
    assert_int_equal(inventory_parse(two, strlen(two), "/t/inv.ini", &inv, err, sizeof err), 0);
    struct top_snapshot *s = calloc(1, sizeof *s);
    struct agent_status *st = calloc(1, sizeof *st);
    assert_non_null(s);
    assert_non_null(st);
    assert_int_equal(top_snapshot_init(s, inv, 2), 0);
    assert_int_equal(s->ncts, 3);
    s->hosts[0].up = s->hosts[0].tried = true;
    for (int i = 0; i < s->ncts; i++) {
        make_status(st, 0, GOOD, GOOD, GANG_RUNNING, 10, 1000, 3.0);
        strcpy(st->jobs[0].job, "drafter"); /* every agent knows only drafter */
        top_ct_update(&s->cts[i], st, inv->jobs[s->cts[i].job].name, 2, 100);
    }
    int drafter = -1;
    for (int i = 0; i < s->ncts; i++) {
        if (!strcmp(inv->jobs[s->cts[i].job].name, "drafter"))
            drafter = i;
        else
            assert_int_equal(top_ct_state(s, &s->cts[i], 100), TOP_NO_JOB);
    }
    assert_true(drafter >= 0);
    assert_int_equal(top_ct_state(s, &s->cts[drafter], 100), TOP_RUNNING);
    assert_int_equal(top_host_state(s, 0, 100), TOP_RUNNING);
    /* a job that is unwell still shows through */
    make_status(st, 0, GOOD, GOOD, GANG_BACKOFF, 10, 1000, 3.0);
    strcpy(st->jobs[0].job, "drafter");
    top_ct_update(&s->cts[drafter], st, "drafter", 2, 101);
    assert_int_equal(top_host_state(s, 0, 101), TOP_BACKOFF);
    /* no container of the host knows its job: the host says so */
    make_status(st, 0, GOOD, GOOD, GANG_RUNNING, 10, 1000, 3.0);
    strcpy(st->jobs[0].job, "other");
    for (int i = 0; i < s->ncts; i++)
        top_ct_update(&s->cts[i], st, inv->jobs[s->cts[i].job].name, 2, 102);
    assert_int_equal(top_host_state(s, 0, 102), TOP_NO_JOB);
    top_snapshot_done(s);
    free(s);
    free(st);
    inventory_free(inv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fmt_age),
        cmocka_unit_test(test_host_not_no_job_while_a_job_runs),
        cmocka_unit_test(test_fmt_spark),
        cmocka_unit_test(test_fmt_restarts_bytes),
        cmocka_unit_test_setup_teardown(test_running_and_warmup_trend, setup, teardown),
        cmocka_unit_test_setup_teardown(test_probation_and_deploy_phase, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spec_change_on_probation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nan_and_slow_are_degraded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reverted_container_runs_good_ranks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_loss_yet_is_not_nan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hello_only_rank_in_rendezvous, setup, teardown),
        cmocka_unit_test_setup_teardown(test_once_exit_agrees_with_status, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hung_agent_is_unreachable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stalled_backoff_failed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unreachable_keeps_values_dimmed, setup, teardown),
        cmocka_unit_test(test_shared_container_counts_once),
        cmocka_unit_test_setup_teardown(test_tree_sort_filter_fold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_release_marked_when_off_target, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rollback_target, setup, teardown),
        cmocka_unit_test(test_layout),
        cmocka_unit_test_setup_teardown(test_state_cell_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_render_text_color_only_when_asked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_copy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_release_note, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unwatched_probation_note, setup, teardown),
        cmocka_unit_test(test_event_parse),
        cmocka_unit_test(test_state_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
