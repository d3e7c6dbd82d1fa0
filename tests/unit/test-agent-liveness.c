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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_first_bad_rank_named),
        cmocka_unit_test(test_zero_turns_rule_off),
        cmocka_unit_test(test_policy_check),
        cmocka_unit_test(test_describe_every_rule),
        cmocka_unit_test(test_bad_lines_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
