/* Unit tests for agent/liveness.c: every rule from a table of rank facts, policy and now. */
#include <setjmp.h>
#include <stdarg.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "agent/liveness.h"
#include "common/util.h"

#define TR HB_PHASE_TRAIN
#define CK HB_PHASE_CHECKPOINT
#define IN HB_PHASE_INIT
#define DN HB_PHASE_DONE

/* policy in the table: first_step 100, silence 10, stall 30, checkpoint 60; gang started at 0 */
struct row {
    const char *name;
    bool alive, has_hb;
    enum hb_phase phase;
    double hb, step_at, phase_at, now;
    enum liveness_rule want;
    double want_age;
    const char *word;
};

static const struct row rows[] = {
    /* name                         alive has_hb phase hb   step  phase now   verdict          age  word */
    {"fresh, no heartbeat",          true, false, IN,  0,   0,    0,    50,   LIVE_OK,         0,   "starting"},
    {"no heartbeat past first_step", true, false, IN,  0,   0,    0,    101,  LIVE_FIRST_STEP, 101, "starting"},
    {"init beats past first_step",   true, true,  IN,  100, 0,    0,    101,  LIVE_FIRST_STEP, 101, "starting"},
    {"init exactly at the deadline", true, true,  IN,  99,  0,    0,    100,  LIVE_OK,         0,   "starting"},
    {"training, fresh",              true, true,  TR,  200, 200,  150,  201,  LIVE_OK,         0,   "running"},
    {"train silent past silence",    true, true,  TR,  200, 200,  150,  210.5,LIVE_SILENT,     10.5,"silent"},
    {"train half silent: word only", true, true,  TR,  200, 200,  150,  205,  LIVE_OK,         0,   "silent"},
    {"beats flow, step stuck",       true, true,  TR,  300, 260,  150,  291,  LIVE_STALLED,    31,  "stalled"},
    {"half stalled: word only",      true, true,  TR,  300, 280,  150,  296,  LIVE_OK,         0,   "stalled"},
    {"stall clock from train entry", true, true,  TR,  300, 100,  280,  300,  LIVE_OK,         0,   "stalled"},
    {"checkpoint past silence",      true, true,  CK,  200, 200,  200,  250,  LIVE_OK,         0,   "checkpointing"},
    {"checkpoint past its deadline", true, true,  CK,  200, 200,  200,  261,  LIVE_CHECKPOINT, 61,  "checkpointing"},
    {"done is judged by the exit",   true, true,  DN,  0,   0,    0,    9999, LIVE_OK,         0,   "running"},
    {"exited rank is not judged",    false,false, IN,  0,   0,    0,    9999, LIVE_OK,         0,   "starting"},
};

static void policy(struct liveness_policy *p)
{
    p->first_step_s = 100;
    p->silence_s = 10;
    p->stall_s = 30;
    p->checkpoint_s = 60;
}

static void fill(struct liveness_rank *r, const struct row *t, int rank)
{
    memset(r, 0, sizeof *r);
    r->rank = rank;
    r->alive = t->alive;
    r->has_hb = t->has_hb;
    r->phase = t->phase;
    r->step = 42;
    r->hb_mono = t->hb;
    r->step_mono = t->step_at;
    r->phase_mono = t->phase_at;
}

static void test_table(void **state)
{
    (void)state;
    struct liveness_policy p;
    policy(&p);
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        const struct row *t = &rows[i];
        struct liveness_rank r;
        fill(&r, t, 3);
        struct liveness_verdict v = {.rule = LIVE_OK};
        bool trip = liveness_judge(&p, &r, 1, 0, t->now, &v);
        if (trip != (t->want != LIVE_OK) || (trip && (v.rule != t->want || v.rank != 3 || v.age_s != t->want_age)))
            fail_msg("row '%s': trip %d rule %d age %.1f", t->name, trip, v.rule, v.age_s);
        double age;
        if (t->alive && strcmp(liveness_rank_word(&p, &r, t->now, &age), t->word) != 0)
            fail_msg("row '%s': word %s, want %s", t->name, liveness_rank_word(&p, &r, t->now, &age), t->word);
    }
}

static void test_first_bad_rank_named(void **state)
{
    (void)state;
    struct liveness_policy p;
    policy(&p);
    struct liveness_rank r[3];
    fill(&r[0], &rows[4], 0);  /* training, fresh at 291 */
    r[0].hb_mono = r[0].step_mono = 290;
    fill(&r[1], &rows[7], 1);  /* stalled */
    fill(&r[2], &rows[5], 2);  /* silent */
    struct liveness_verdict v;
    /* at 291: rank 1 stalled (31 s), rank 2 silent (91 s): the first in rank order is named */
    assert_true(liveness_judge(&p, r, 3, 0, 291, &v));
    assert_int_equal(v.rank, 1);
    assert_int_equal(v.rule, LIVE_STALLED);
    assert_int_equal(v.step, 42);
    assert_int_equal(v.phase, HB_PHASE_TRAIN);
    char line[200];
    assert_true(liveness_describe(&v, "train", line, sizeof line) > 0);
    assert_non_null(strstr(line, "rank 1 stalled"));
    assert_non_null(strstr(line, "step 42"));
    assert_non_null(strstr(line, "stall_deadline 30 s"));
}

static void test_zero_turns_rule_off(void **state)
{
    (void)state;
    struct liveness_policy p = {0};
    struct liveness_rank r;
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        fill(&r, &rows[i], 0);
        struct liveness_verdict v;
        assert_false(liveness_judge(&p, &r, 1, 0, 1e6, &v));
    }
}

static void test_policy_check(void **state)
{
    (void)state;
    struct liveness_policy p;
    liveness_policy_default(&p);
    assert_int_equal(liveness_policy_check(&p), 0);
    assert_true(p.checkpoint_s > p.silence_s); /* a checkpoint may be longer than a silence */
    p.stall_s = -1;
    assert_int_equal(liveness_policy_check(&p), -EINVAL);
    p.stall_s = LIVENESS_MAX_S * 2;
    assert_int_equal(liveness_policy_check(&p), -EINVAL);
}

static void test_describe_every_rule(void **state)
{
    (void)state;
    const enum liveness_rule rules[] = {LIVE_FIRST_STEP, LIVE_CHECKPOINT, LIVE_SILENT, LIVE_STALLED};
    const char *want[] = {"never reached its first step", "checkpointing for 61 s", "silent: no heartbeat for 61 s",
                          "stalled: step 7"};
    for (size_t i = 0; i < ARRAY_SIZE(rules); i++) {
        struct liveness_verdict v = {.rule = rules[i], .rank = 2, .phase = HB_PHASE_TRAIN, .step = 7,
                                     .age_s = 61, .limit_s = 60, .has_hb = true};
        char line[200];
        assert_true(liveness_describe(&v, "train", line, sizeof line) > 0);
        if (!strstr(line, want[i]) || !strstr(line, liveness_rule_name(rules[i])))
            fail_msg("rule %d: '%s'", rules[i], line);
    }
    /* no heartbeat and no other line either: most often a worker that never reports (a PyTorch
     * script without drover_heartbeat, which trains and prints its steps) */
    struct liveness_verdict none = {.rule = LIVE_FIRST_STEP, .rank = 0, .age_s = 80, .limit_s = 80};
    char line[256];
    assert_true(liveness_describe(&none, "train", line, sizeof line) > 0);
    assert_string_equal(line, "rank 0 never reached its first step: no heartbeat after 80 s (first_step_deadline 80 s); "
                              "it sent none: does the worker use drover_heartbeat (docs/pytorch.md, docs/protocol.md)?");
}

/* A rendezvous that waits for a peer: the ranks created Heartbeat() (a hello line) first, and
 * only those that got past init_process_group sent init.  The verdict used to name rank 0 with
 * "it sent none: does the worker use drover_heartbeat?"; it now names the least advanced rank,
 * says its module started, and lists who sent init. */
static void test_hello_names_missing_peer(void **state)
{
    (void)state;
    struct liveness_policy p;
    liveness_policy_default(&p);
    p.first_step_s = 20;
    struct liveness_rank r[3] = {
        {.rank = 0, .alive = true, .has_hb = true, .phase = HB_PHASE_INIT}, /* init: arrived */
        {.rank = 1, .alive = true, .has_hb = true, .hello = true, .phase = HB_PHASE_INIT},
        {.rank = 2, .alive = true, .has_hb = true, .phase = HB_PHASE_INIT},
    };
    struct liveness_verdict v;
    assert_true(liveness_judge(&p, r, 3, 0, 21, &v));
    assert_int_equal(v.rule, LIVE_FIRST_STEP);
    assert_int_equal(v.rank, 1);
    assert_true(v.hello);
    char line[256];
    assert_true(liveness_describe(&v, "train", line, sizeof line) > 0);
    assert_string_equal(line, "rank 1 never reached its first step after 21 s (first_step_deadline 20 s): it "
                              "created Heartbeat() but never called hb.init(): waiting for a peer in "
                              "init_process_group or a first collective? (ranks here past init: 0, 2; not: 1)");
    assert_null(strstr(line, "does the worker use drover_heartbeat"));
    /* a rank that sent nothing at all is named before one that sent a hello */
    r[2].has_hb = false;
    assert_true(liveness_judge(&p, r, 3, 0, 21, &v));
    assert_int_equal(v.rank, 2);
    assert_false(v.hello);
    /* every rank in the rendezvous: the first, none past init */
    r[0].hello = r[2].has_hb = r[2].hello = true;
    assert_true(liveness_judge(&p, r, 3, 0, 21, &v));
    assert_int_equal(v.rank, 0);
    assert_true(liveness_describe(&v, "train", line, sizeof line) > 0);
    assert_non_null(strstr(line, "(ranks here past init: none; not: 0, 1, 2)"));
    /* an init heartbeat only: "still in phase init", as before */
    struct liveness_rank one = {.rank = 0, .alive = true, .has_hb = true, .phase = HB_PHASE_INIT};
    assert_true(liveness_judge(&p, &one, 1, 0, 21, &v));
    assert_false(v.hello);
    assert_true(liveness_describe(&v, "train", line, sizeof line) > 0);
    assert_non_null(strstr(line, "still in phase init after 21 s"));
}

/* A worker whose lines on the heartbeat pipe are not heartbeats (a wrong field, not JSON, one
 * over HEARTBEAT_LINE_MAX) used to be told "no heartbeat", as if it wrote nothing: the verdict
 * now says how many lines it dropped, when no train heartbeat ever came (first_step_deadline). */
static void test_bad_lines_named(void **state)
{
    (void)state;
    struct liveness_policy p;
    liveness_policy_default(&p);
    p.first_step_s = 20;
    struct liveness_rank r = {.rank = 0, .alive = true, .bad_lines = 40};
    struct liveness_verdict v;
    assert_true(liveness_judge(&p, &r, 1, 0, 21, &v));
    assert_int_equal(v.rule, LIVE_FIRST_STEP);
    char line[400];
    assert_true(liveness_describe(&v, "train", line, sizeof line) > 0);
    /* the agent's log is in the container: the verdict names the command that shows it */
    if (!strstr(line, "no heartbeat after 21 s (first_step_deadline 20 s); it wrote 40 lines that "
                      "are not heartbeats (`drover logs --job train --agent` says why)"))
        fail_msg("'%s'", line);
    v.bad_lines = 1;
    assert_true(liveness_describe(&v, "train", line, sizeof line) > 0);
    if (!strstr(line, "it wrote 1 line that is not a heartbeat (`drover logs --job train --agent` says why)"))
        fail_msg("'%s'", line);
    assert_true(liveness_describe(&v, NULL, line, sizeof line) > 0); /* no job: still the command */
    if (!strstr(line, "it wrote 1 line that is not a heartbeat (`drover logs --agent` says why)"))
        fail_msg("'%s'", line);
    v.rule = LIVE_STALLED; /* heartbeats flowed: dropped lines are not the story */
    assert_true(liveness_describe(&v, "train", line, sizeof line) > 0);
    assert_null(strstr(line, "not a heartbeat"));
    v.rule = LIVE_SILENT;
    assert_true(liveness_describe(&v, "train", line, sizeof line) > 0);
    assert_null(strstr(line, "not a heartbeat"));
    v.rule = LIVE_FIRST_STEP;
    v.bad_lines = 0;
    assert_true(liveness_describe(&v, "train", line, sizeof line) > 0);
    assert_null(strstr(line, "it wrote"));
    char small[30]; /* truncated, never overrun */
    v.bad_lines = 5;
    assert_true(liveness_describe(&v, "train", small, sizeof small) > 0);
    assert_int_equal(strlen(small), sizeof small - 1);
}

/* A rank frozen after promotion (kill -STOP, a stuck worker) stays alive and silent; its peers'
 * distributed timeout (60 s) fires long before the silence deadline (120 s) and they exit 8
 * (peer_lost).  The agent blamed the first peer that exited (a rank-exit crash) and never named
 * the frozen rank.  Rank 0 exits 8 at 100 in each row; the row is rank 1; silence deadline 120
 * (half: 60), settle LIVENESS_PEER_LOST_SETTLE_S (10). */
struct lost_row {
    const char *name;
    int code, sig;          /* rank 0's exit */
    bool alive;
    enum hb_phase phase;
    double hb;              /* rank 1's last heartbeat */
    char ps;                /* its /proc state */
    double now;
    enum liveness_blame want;
    double want_age;
};

static const struct lost_row lost_rows[] = {
    /* name                                  code sig alive  phase hb    ps   now    want               age */
    {"stopped, silent 65 s: at once",        8,   0,  true,  TR,   35,   'T', 100,   LIVE_BLAME_SILENT, 65},
    {"traced, silent 65 s: at once",         8,   0,  true,  TR,   35,   't', 100,   LIVE_BLAME_SILENT, 65},
    {"stuck (running), silent: settle first",8,   0,  true,  TR,   35,   'R', 100,   LIVE_BLAME_WAIT,   0},
    {"stuck, still silent after the settle", 8,   0,  true,  TR,   35,   'S', 110,   LIVE_BLAME_SILENT, 75},
    {"no proc state read: settle first",     8,   0,  true,  TR,   35,   0,   109.9, LIVE_BLAME_WAIT,   0},
    {"blocked like the peer: it exits too",  8,   0,  false, TR,   40,   0,   100.5, LIVE_BLAME_NONE,   0},
    {"heartbeat after the exit: not stuck",  8,   0,  true,  TR,   100.5,'S', 110,   LIVE_BLAME_NONE,   0},
    {"silent 20 s only, settled",            8,   0,  true,  TR,   90,   'S', 110,   LIVE_BLAME_NONE,   0},
    {"stopped, silent 10 s: settle first",   8,   0,  true,  TR,   90,   'T', 100,   LIVE_BLAME_WAIT,   0},
    {"stopped, silent 20 s after settle",    8,   0,  true,  TR,   90,   'T', 110,   LIVE_BLAME_NONE,   0},
    {"checkpointing may be silent",          8,   0,  true,  CK,   35,   'T', 110,   LIVE_BLAME_NONE,   0},
    {"init is the first-step rule's",        8,   0,  true,  IN,   35,   'T', 110,   LIVE_BLAME_NONE,   0},
    {"done: judged by its exit",             8,   0,  true,  DN,   35,   'T', 110,   LIVE_BLAME_NONE,   0},
    {"exit 12 (peer stopped): unchanged",    12,  0,  true,  TR,   35,   'T', 110,   LIVE_BLAME_NONE,   0},
    {"exit 1: the rank's own failure",       1,   0,  true,  TR,   35,   'T', 110,   LIVE_BLAME_NONE,   0},
    {"killed by a signal: its own",          -1,  9,  true,  TR,   35,   'T', 110,   LIVE_BLAME_NONE,   0},
};

static void test_blame_peer_lost_table(void **state)
{
    (void)state;
    struct liveness_policy p;
    liveness_policy_default(&p);
    assert_true(p.silence_s == 120);
    for (size_t i = 0; i < ARRAY_SIZE(lost_rows); i++) {
        const struct lost_row *t = &lost_rows[i];
        struct liveness_rank r[2] = {
            {.rank = 4, .alive = false, .has_hb = true, .phase = DN, .hb_mono = 100},
            {.rank = 5, .alive = t->alive, .has_hb = true, .phase = t->phase, .step = 42,
             .hb_mono = t->hb, .proc_state = t->ps},
        };
        struct liveness_verdict v = {.rule = LIVE_OK, .rank = -7};
        enum liveness_blame b = liveness_blame_peer_lost(&p, r, 2, 0, t->code, t->sig, 100, t->now, &v);
        if (b != t->want)
            fail_msg("row '%s': blame %d, want %d", t->name, b, t->want);
        if (b != LIVE_BLAME_SILENT) {
            if (v.rank != -7)
                fail_msg("row '%s': verdict written", t->name);
            continue;
        }
        if (v.rule != LIVE_PEER_LOST || v.rank != 5 || v.peer_rank != 4 || v.peer_code != 8 ||
            v.age_s != t->want_age || v.limit_s != 120 || v.step != 42 ||
            v.stopped != (t->ps == 'T' || t->ps == 't'))
            fail_msg("row '%s': rule %d rank %d peer %d code %d age %.1f limit %.1f", t->name,
                     v.rule, v.rank, v.peer_rank, v.peer_code, v.age_s, v.limit_s);
    }
}

/* One rank per container: no other rank here to blame.  No silence deadline: off.  An exit
 * index out of range names nobody. */
static void test_blame_peer_lost_unchanged(void **state)
{
    (void)state;
    struct liveness_policy p;
    liveness_policy_default(&p);
    struct liveness_rank r[2] = {
        {.rank = 0, .alive = false, .has_hb = true, .phase = DN, .hb_mono = 100},
        {.rank = 1, .alive = true, .has_hb = true, .phase = TR, .hb_mono = 10, .proc_state = 'T'},
    };
    struct liveness_verdict v;
    assert_int_equal(liveness_blame_peer_lost(&p, r, 1, 0, 8, 0, 100, 200, &v), LIVE_BLAME_NONE);
    assert_int_equal(liveness_blame_peer_lost(&p, r, 2, 2, 8, 0, 100, 200, &v), LIVE_BLAME_NONE);
    assert_int_equal(liveness_blame_peer_lost(&p, r, 2, -1, 8, 0, 100, 200, &v), LIVE_BLAME_NONE);
    /* the exiting rank itself is never its own culprit */
    assert_int_equal(liveness_blame_peer_lost(&p, r, 2, 1, 8, 0, 100, 200, &v), LIVE_BLAME_NONE);
    p.silence_s = 0;
    assert_int_equal(liveness_blame_peer_lost(&p, r, 2, 0, 8, 0, 100, 200, &v), LIVE_BLAME_NONE);
}

/* Of several silent ranks, the one stopped by a signal, then the one silent longest; a rank
 * still heartbeating is never named over them. */
static void test_blame_peer_lost_picks(void **state)
{
    (void)state;
    struct liveness_policy p;
    liveness_policy_default(&p);
    struct liveness_rank r[4] = {
        {.rank = 8, .alive = true, .has_hb = true, .phase = TR, .hb_mono = 20, .proc_state = 'S'},
        {.rank = 9, .alive = false, .has_hb = true, .phase = DN, .hb_mono = 100},
        {.rank = 10, .alive = true, .has_hb = true, .phase = TR, .hb_mono = 30, .proc_state = 'T'},
        {.rank = 11, .alive = true, .has_hb = true, .phase = TR, .hb_mono = 109, .proc_state = 'R'},
    };
    struct liveness_verdict v;
    /* at the exit: only the stopped one may be named yet */
    assert_int_equal(liveness_blame_peer_lost(&p, r, 4, 1, 8, 0, 100, 100, &v), LIVE_BLAME_SILENT);
    assert_int_equal(v.rank, 10);
    assert_true(v.stopped);
    /* settled: still the stopped one, though rank 8 is silent longer */
    assert_int_equal(liveness_blame_peer_lost(&p, r, 4, 1, 8, 0, 100, 110, &v), LIVE_BLAME_SILENT);
    assert_int_equal(v.rank, 10);
    r[2].proc_state = 'S';
    assert_int_equal(liveness_blame_peer_lost(&p, r, 4, 1, 8, 0, 100, 110, &v), LIVE_BLAME_SILENT);
    assert_int_equal(v.rank, 8);
    assert_true(v.age_s == 90);
    assert_false(v.stopped);
    char line[200];
    assert_true(liveness_describe(&v, "train", line, sizeof line) > 0);
    assert_string_equal(line, "rank 8 silent for 90 s while its peers lost it (rank 9 exited 8)");
    v.stopped = true;
    assert_true(liveness_describe(&v, "train", line, sizeof line) > 0);
    assert_string_equal(line, "rank 8 silent for 90 s while its peers lost it (rank 9 exited 8) "
                              "(stopped by a signal)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_first_bad_rank_named),
        cmocka_unit_test(test_zero_turns_rule_off),
        cmocka_unit_test(test_policy_check),
        cmocka_unit_test(test_describe_every_rule),
        cmocka_unit_test(test_bad_lines_named),
        cmocka_unit_test(test_hello_names_missing_peer),
        cmocka_unit_test(test_blame_peer_lost_table),
        cmocka_unit_test(test_blame_peer_lost_unchanged),
        cmocka_unit_test(test_blame_peer_lost_picks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
