/* Unit tests for controller/deploy/pastfail.c: the decision a deploy makes before staging, from
 * the job's history, that its release failed probation there before (the newcomer pass: a
 * release that had failed was deployed again with no word and a full probation), and the
 * warning's words (release, when, why). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/status.h"
#include "controller/deploy/pastfail.h"

#define REL "3f2a9c1b7d6e0000000000000000000000000000000000000000000000000000"
#define OTHER "aaaaaaaaaaaa0000000000000000000000000000000000000000000000000000"

/* 2026-12-02 14:03:11 UTC */
#define T0 1796220191.0

static struct history_entry rec(double t, const char *job, const char *id, const char *name,
                                const char *result, const char *reason)
{
    struct history_entry e = { .time = t, .ktok_s = -1, .baseline_ktok_s = -1 };
    snprintf(e.job, sizeof e.job, "%s", job);
    snprintf(e.release, sizeof e.release, "%s", id);
    snprintf(e.name, sizeof e.name, "%s", name);
    snprintf(e.result, sizeof e.result, "%s", result);
    snprintf(e.reason, sizeof e.reason, "%s", reason);
    return e;
}

static void test_no_history_no_warning(void **state)
{
    (void)state;
    assert_null(pastfail_find(NULL, 0, "train", REL));
    struct history_entry h[] = {
        rec(T0, "train", OTHER, "v1", "reverted", "throughput regression"), /* another release */
        rec(T0 + 1, "eval", REL, "v2", "reverted", "throughput regression"), /* another job */
        rec(T0 + 2, "train", REL, "v2", "aborted", "interrupted by the operator before the switch"),
    };
    assert_null(pastfail_find(h, 3, "train", REL));
}

static void test_reverted_is_named_with_when_and_why(void **state)
{
    (void)state;
    struct history_entry h[] = {
        rec(T0 - 100, "train", REL, "v2", "reverted", "an older failure"),
        rec(T0, "train", REL, "v2", "reverted", "throughput regression: -15.2% [-16.4%, -13.9%]"),
        rec(T0 + 5, "train", REL, "v2", "aborted", "deploy lease lost before the switch"),
    };
    const struct history_entry *e = pastfail_find(h, 3, "train", REL);
    assert_ptr_equal(e, &h[1]); /* the newest outcome; an abort is none */
    char m[1024];
    assert_string_equal(pastfail_message(e, "v2", m, sizeof m),
                        "release 3f2a9c1b7d6e (v2) failed probation for job 'train' before: reverted "
                        "at 2026-12-02 14:03:11 UTC: throughput regression: -15.2% [-16.4%, -13.9%]; "
                        "deploying it again runs a full probation");
    /* bounded */
    char small[40];
    assert_int_equal(strlen(pastfail_message(e, "v2", small, sizeof small)), sizeof small - 1);
}

static void test_failures_of_each_kind(void **state)
{
    (void)state;
    static const char *const results[] = { "reverted", "revert-failed", "failed" };
    for (size_t i = 0; i < 3; i++) {
        struct history_entry h = rec(T0, "train", REL, "v2", results[i], "rank 0 exited 1");
        assert_ptr_equal(pastfail_find(&h, 1, "train", REL), &h);
    }
    /* the operator reverted it after an inconclusive probation held it */
    struct history_entry held[] = {
        rec(T0, "train", REL, "v2", "held", "inconclusive after 300s"),
        rec(T0 + 60, "train", REL, "revert", "reverted", "reverted by the operator (held release)"),
    };
    assert_ptr_equal(pastfail_find(held, 2, "train", REL), &held[1]);
}

static void test_passed_since_is_no_warning(void **state)
{
    (void)state;
    struct history_entry h[] = {
        rec(T0, "train", REL, "v2", "reverted", "throughput regression"),
        rec(T0 + 60, "train", REL, "v2", "promoted", "throughput +0.4%"),
    };
    assert_null(pastfail_find(h, 2, "train", REL));
    /* held: waiting for the operator, not failed */
    h[1] = rec(T0 + 60, "train", REL, "v2", "held", "inconclusive after 300s");
    assert_null(pastfail_find(h, 2, "train", REL));
    /* passed its probation; only the promote call failed */
    h[1] = rec(T0 + 60, "train", REL, "v2", "failed", "promote failed");
    assert_null(pastfail_find(h, 2, "train", REL));
    h[1] = rec(T0 + 60, "train", REL, "promote", "failed", "promote by the operator failed");
    assert_null(pastfail_find(h, 2, "train", REL));
}

static void test_not_the_release_s_failure_is_skipped(void **state)
{
    (void)state;
    struct history_entry h[] = {
        rec(T0, "train", REL, "v2", "promoted", "ok"),
        /* a rollback that failed on its way back to this release */
        rec(T0 + 10, "train", REL, "rollback", "revert-failed", "revert failed on 1 of 2 containers"),
        /* the GPU, not the release */
        rec(T0 + 20, "train", REL, "v2", "failed", "h1:101: " STATUS_ATTENTION_PREFIX " Xid 79"),
        rec(T0 + 30, "train", REL, "v2", "analysis", "throughput regression"),
        rec(T0 + 40, "train", REL, "rollback", "rollback", "operator rollback"),
    };
    assert_null(pastfail_find(h, 5, "train", REL));
    h[0] = rec(T0, "train", REL, "v2", "reverted", "loss not finite at step 12");
    assert_ptr_equal(pastfail_find(h, 5, "train", REL), &h[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_history_no_warning),
        cmocka_unit_test(test_reverted_is_named_with_when_and_why),
        cmocka_unit_test(test_failures_of_each_kind),
        cmocka_unit_test(test_passed_since_is_no_warning),
        cmocka_unit_test(test_not_the_release_s_failure_is_skipped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
