/* Unit tests for controller/deploy/pastfail.c: the decision a deploy makes before staging, from
 * the job's history, that its release failed probation there before (the newcomer pass: a
 * release that had failed was deployed again with no word and a full probation), and the
 * warning's words (release, when, why). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/status.h"
#include "controller/deploy/pastfail.h"

#define REL "3f2a9c1b7d6e0000000000000000000000000000000000000000000000000000"
#define OTHER "aaaaaaaaaaaa0000000000000000000000000000000000000000000000000000"

/* 2026-12-02 14:03:11 UTC */
#define T0 1796220191.0

static struct history_entry rec_code(double t, const char *job, const char *id, const char *name,
                                     const char *result, enum history_reason code, const char *reason)
{
    struct history_entry e = { .time = t, .ktok_s = -1, .baseline_ktok_s = -1, .reason_code = code };
    snprintf(e.job, sizeof e.job, "%s", job);
    snprintf(e.release, sizeof e.release, "%s", id);
    snprintf(e.name, sizeof e.name, "%s", name);
    snprintf(e.result, sizeof e.result, "%s", result);
    snprintf(e.reason, sizeof e.reason, "%s", reason);
    return e;
}

static struct history_entry rec(double t, const char *job, const char *id, const char *name,
                                const char *result, const char *reason)
{
    return rec_code(t, job, id, name, result, HISTORY_RC_NONE, reason);
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
    h[1] = rec_code(T0 + 60, "train", REL, "v2", "failed", HISTORY_RC_PROMOTE_FAILED, "promote failed");
    assert_null(pastfail_find(h, 2, "train", REL));
    h[1] = rec_code(T0 + 60, "train", REL, "promote", "failed", HISTORY_RC_PROMOTE_FAILED,
                    "promote by the operator failed");
    assert_null(pastfail_find(h, 2, "train", REL));
    /* the code decides, not the words: a promote failure said otherwise, and a failure that
     * quotes the words */
    h[1] = rec_code(T0 + 60, "train", REL, "v2", "failed", HISTORY_RC_PROMOTE_FAILED, "h1:101 unreachable");
    assert_null(pastfail_find(h, 2, "train", REL));
    h[1] = rec(T0 + 60, "train", REL, "v2", "failed", "rank 0 said: promote failed");
    assert_ptr_equal(pastfail_find(h, 2, "train", REL), &h[1]);
}

static void test_not_the_release_s_failure_is_skipped(void **state)
{
    (void)state;
    struct history_entry h[] = {
        rec(T0, "train", REL, "v2", "promoted", "ok"),
        /* a rollback that failed on its way back to this release */
        rec(T0 + 10, "train", REL, "rollback", "revert-failed", "revert failed on 1 of 2 containers"),
        /* the GPU, not the release */
        rec_code(T0 + 20, "train", REL, "v2", "failed", HISTORY_RC_ENVIRONMENT,
                 "h1:101: " STATUS_ATTENTION_PREFIX " Xid 79"),
        rec(T0 + 30, "train", REL, "v2", "analysis", "throughput regression"),
        rec(T0 + 40, "train", REL, "rollback", "rollback", "operator rollback"),
    };
    assert_null(pastfail_find(h, 5, "train", REL));
    h[0] = rec(T0, "train", REL, "v2", "reverted", "loss not finite at step 12");
    assert_ptr_equal(pastfail_find(h, 5, "train", REL), &h[0]);
}

/* Records as history.jsonl and the agents keep them: an older drover's (no reason_code) are
 * decided on their words, as before the code existed; a newer one's on the code alone. */
static void test_records_with_and_without_code(void **state)
{
    (void)state;
    static const char text[] =
        /* older drover: the promote failure and the environment fault said in words only */
        "{\"v\":1,\"time\":1,\"job\":\"train\",\"release\":\"" REL "\",\"name\":\"v2\","
        "\"result\":\"reverted\",\"reason\":\"throughput regression\"}\n"
        "{\"v\":1,\"time\":2,\"job\":\"train\",\"release\":\"" REL "\",\"name\":\"v2\","
        "\"result\":\"failed\",\"reason\":\"promote failed\"}\n"
        "{\"v\":1,\"time\":3,\"job\":\"train\",\"release\":\"" OTHER "\",\"name\":\"v3\","
        "\"result\":\"failed\",\"reason\":\"h1:101: " STATUS_ATTENTION_PREFIX " Xid 79\"}\n"
        /* this drover: the code, "" included, is what counts */
        "{\"v\":1,\"time\":4,\"job\":\"train\",\"release\":\"" OTHER "\",\"name\":\"v3\","
        "\"result\":\"failed\",\"reason_code\":\"\",\"reason\":\"rank 0: promote failed\"}\n";
    struct history_entry *h = NULL;
    size_t n = 0;
    size_t skipped = 99;
    assert_int_equal(state_history_parse_lines(text, "train", &h, &n, &skipped), 0);
    assert_int_equal(n, 4);
    assert_int_equal(skipped, 0);
    assert_int_equal(h[0].reason_code, HISTORY_RC_NONE);
    assert_int_equal(h[1].reason_code, HISTORY_RC_PROMOTE_FAILED);
    assert_int_equal(h[2].reason_code, HISTORY_RC_ENVIRONMENT);
    assert_int_equal(h[3].reason_code, HISTORY_RC_NONE);
    assert_null(pastfail_find(h, 2, "train", REL));  /* its promote failed: passed */
    assert_null(pastfail_find(h, 3, "train", OTHER)); /* the GPU's fault */
    assert_ptr_equal(pastfail_find(h, 4, "train", OTHER), &h[3]);
    free(h);

    /* written and read back: the code travels; an unknown name reads as other */
    struct history_entry e = rec_code(T0, "train", REL, "v2", "failed", HISTORY_RC_PROMOTE_FAILED, "x");
    char *line = NULL;
    assert_int_equal(history_entry_format(&e, &line), 0);
    assert_non_null(strstr(line, "\"reason_code\":\"promote-failed\""));
    struct history_entry back;
    assert_int_equal(history_entry_parse(line, strlen(line), &back), 0);
    assert_int_equal(back.reason_code, HISTORY_RC_PROMOTE_FAILED);
    free(line);
    static const char newer[] = "{\"job\":\"train\",\"result\":\"failed\",\"reason_code\":\"quota\"}";
    assert_int_equal(history_entry_parse(newer, strlen(newer), &back), 0);
    assert_int_equal(back.reason_code, HISTORY_RC_OTHER);
    for (int c = 0; c < HISTORY_RC_COUNT; c++)
        assert_int_equal(history_reason_from_name(history_reason_name((enum history_reason)c)), c);
}

/* `drover promote --job J` after a rollback interrupted while its recovery was watched (ROLLBACK
 * NOT CONFIRMED) recorded "promoted by the operator (held release)": nothing was held.  The
 * words come from the release's newest record, for each way it comes to run unpromoted. */
static void test_unpromoted_why(void **state)
{
    (void)state;
    assert_string_equal(pastfail_unpromoted_why(NULL, 0, "train", REL), "unpromoted, not held");
    struct history_entry h[] = {
        rec(T0, "train", REL, "v1", "promoted", "throughput +0.4%"),
        rec(T0 + 60, "train", OTHER, "v2", "promoted", "throughput +0.1%"),
        /* ROLLBACK NOT CONFIRMED: REL runs unpromoted again */
        rec(T0 + 120, "train", REL, "rollback", "aborted", "REL not confirmed (interrupted by the operator)"),
        rec(T0 + 130, "eval", REL, "v9", "held", "another job's"),
    };
    assert_string_equal(pastfail_unpromoted_why(h, 4, "train", REL), "a rollback to it, not confirmed");
    /* held on an inconclusive verdict: what the words always said */
    h[2] = rec(T0 + 120, "train", REL, "v1", "held", "inconclusive after 300s");
    assert_string_equal(pastfail_unpromoted_why(h, 4, "train", REL), "held release");
    /* ... a failed try of the operator's promote since is skipped: still held */
    struct history_entry again[] = {
        h[2], rec_code(T0 + 200, "train", REL, "promote", "failed", HISTORY_RC_PROMOTE_FAILED,
                       "promote by the operator failed"),
    };
    assert_string_equal(pastfail_unpromoted_why(again, 2, "train", REL), "held release");
    /* auto_revert off: failed and left running; a deploy's promote that failed after a pass */
    h[2] = rec(T0 + 120, "train", REL, "v1", "failed", "rank 0 exited 1");
    assert_string_equal(pastfail_unpromoted_why(h, 4, "train", REL), "failed probation, left running (auto_revert off)");
    h[2] = rec_code(T0 + 120, "train", REL, "v1", "failed", HISTORY_RC_PROMOTE_FAILED, "promote failed");
    assert_string_equal(pastfail_unpromoted_why(h, 4, "train", REL), "it passed probation, its promote failed");
    /* a deploy that decided nothing (its lease taken over), or no record of it: not held */
    h[2] = rec(T0 + 120, "train", REL, "v1", "aborted", "deploy lease taken over");
    assert_string_equal(pastfail_unpromoted_why(h, 4, "train", REL), "unpromoted, not held");
    assert_string_equal(pastfail_unpromoted_why(h, 4, "train", "ffff"), "unpromoted, not held");
}

/* `drover revert --job J` after a rollback to X that was not confirmed recorded X `reverted`
 * (code ""), so a later deploy of X warned that it "failed probation before": it never had, the
 * operator had only reverted by hand.  The record's code comes from X's newest record
 * (pastfail_hand_revert_code): operator-revert, which pastfail_find does not count, where X's
 * probation never failed; "" (counted, as before) for a held release or a failure left running. */
static void test_hand_revert_of_unfailed_release(void **state)
{
    (void)state;
    struct history_entry h[] = {
        rec(T0, "train", OTHER, "v1", "promoted", "throughput +0.4%"),
        /* v2's analysis passed: the good release went back, v2 never failed */
        rec(T0 + 60, "train", REL, "v2", "analysis", "pass"),
        /* drover rollback --to v2: ROLLBACK NOT CONFIRMED, v2 left running unpromoted */
        rec(T0 + 120, "train", REL, "rollback", "aborted", "v2 not confirmed (interrupted by the operator)"),
        { .time = 0 }, /* drover revert --job train: written below */
    };
    enum history_reason code = pastfail_hand_revert_code(h, 3, "train", REL);
    assert_int_equal(code, HISTORY_RC_OPERATOR_REVERT);
    h[3] = rec_code(T0 + 180, "train", REL, "revert", "reverted", code,
                    "reverted by the operator (a rollback to it, not confirmed)");
    assert_null(pastfail_find(h, 4, "train", REL));
    /* ... as history.jsonl and the agents keep it: the code survives the round trip */
    char *line = NULL;
    assert_int_equal(history_entry_format(&h[3], &line), 0);
    assert_non_null(strstr(line, "\"reason_code\":\"operator-revert\""));
    struct history_entry back;
    assert_int_equal(history_entry_parse(line, strlen(line), &back), 0);
    free(line);
    assert_int_equal(back.reason_code, HISTORY_RC_OPERATOR_REVERT);
    assert_string_equal(back.result, "reverted");
    assert_string_equal(back.reason, "reverted by the operator (a rollback to it, not confirmed)");
    h[3] = back;
    assert_null(pastfail_find(h, 4, "train", REL));
    /* an earlier real failure of it is still said: the hand revert hides nothing */
    h[1] = rec(T0 + 60, "train", REL, "v2", "reverted", "throughput regression");
    assert_ptr_equal(pastfail_find(h, 4, "train", REL), &h[1]);

    /* passed probation, its promote failed; no record at all: no verdict either */
    struct history_entry pf = rec_code(T0, "train", REL, "v2", "failed", HISTORY_RC_PROMOTE_FAILED, "promote failed");
    assert_int_equal(pastfail_hand_revert_code(&pf, 1, "train", REL), HISTORY_RC_OPERATOR_REVERT);
    assert_int_equal(pastfail_hand_revert_code(NULL, 0, "train", REL), HISTORY_RC_OPERATOR_REVERT);
    /* held (the operator decides the inconclusive probation) and failed, left running: counted */
    struct history_entry held = rec(T0, "train", REL, "v2", "held", "inconclusive after 300s");
    assert_int_equal(pastfail_hand_revert_code(&held, 1, "train", REL), HISTORY_RC_NONE);
    struct history_entry left = rec(T0, "train", REL, "v2", "failed", "rank 0 exited 1");
    assert_int_equal(pastfail_hand_revert_code(&left, 1, "train", REL), HISTORY_RC_NONE);
}

/* `drover rollback --to PREFIX` of a release that failed probation, without --force, was refused
 * only after every container was surveyed, with exit 2 (the usage-error code).  The controller's
 * own history decides before any host is contacted: the one release the prefix names, its
 * failure, its name, and the refusal's words (release, why, --force). */
/* The newcomer's lab: rel1 (REL) promoted twice, OTHER promoted with an inflated throughput,
 * then rel1 deployed again and reverted.  Its newest verdict is that failure, so both a plain
 * rollback (which skips it, saying so) and --to (refused) call it bad, until it is promoted or a
 * confirmed rollback goes to it again. */
static void test_failed_after_promoted_is_bad_now(void **state)
{
    (void)state;
    struct history_entry h[] = {
        rec(T0 - 300, "train", REL, "rel1", "promoted", ""),
        rec(T0 - 200, "train", REL, "rel1", "promoted", ""),
        rec(T0 - 100, "train", OTHER, "rel2", "promoted", ""),
        rec(T0, "train", REL, "rel1", "reverted", "throughput regression: -70.3%"),
        rec(T0 + 10, "train", REL, "rel1", "promoted", ""),
        rec(T0 + 20, "train", REL, "rollback", "rollback", "operator rollback"),
    };
    const struct history_entry *e = pastfail_find_now(h, 4, "train", REL);
    assert_ptr_equal(e, &h[3]);
    assert_ptr_equal(pastfail_find_prefix(h, 4, "train", "3F2A9C"), e);
    assert_null(pastfail_find_now(h, 4, "train", OTHER));
    assert_null(pastfail_find_now(h, 5, "train", REL)); /* promoted again */
    struct history_entry h2[] = { h[0], h[1], h[2], h[3], h[5] };
    assert_null(pastfail_find_now(h2, 5, "train", REL)); /* a confirmed rollback went to it */
    char buf[1400];
    pastfail_rollback_skip(e, "rel1", "train", REL, buf, sizeof buf);
    assert_string_equal(buf, "skipping 3f2a9c1b7d6e (rel1): it failed probation for job 'train' at "
                             "2026-12-02 14:03:11 UTC after it was promoted (reverted: throughput "
                             "regression: -70.3%); it is no rollback target until it is promoted "
                             "again (drover rollback --job train --to 3f2a9c1b7d6e --force goes to it)");
    pastfail_rollback_skip(NULL, "", "train", REL, buf, sizeof buf);
    /* only the agents' bad marks know it: a failed probation, or a stop while promoted */
    assert_non_null(strstr(buf, "skipping 3f2a9c1b7d6e: it is marked bad for job 'train' by its agents (a "
                                "failed probation after it was promoted, or a stop while it ran promoted"));
    /* the agent's own record of a stop while promoted: when and why, in those words */
    struct history_entry st = rec(T0, "train", REL, "nanp", "failed", "drover-agent rank 1 reported 3 "
                                  "consecutive non-finite steps (non-retryable) on a promoted release: stopped");
    st.reason_code = HISTORY_RC_AGENT_STOPPED;
    pastfail_rollback_skip(&st, "nanp", "train", REL, buf, sizeof buf);
    assert_string_equal(buf, "skipping 3f2a9c1b7d6e (nanp): its agent stopped it for job 'train' at "
                             "2026-12-02 14:03:11 UTC while it ran as the promoted release (failed: "
                             "drover-agent rank 1 reported 3 consecutive non-finite steps (non-retryable) "
                             "on a promoted release: stopped); it is no rollback target until it is "
                             "promoted again (drover rollback --job train --to 3f2a9c1b7d6e --force goes to it)");
    struct history_entry h3[] = { h[0], st };
    assert_ptr_equal(pastfail_find_now(h3, 2, "train", REL), &h3[1]); /* a failure, as a probation's */
    assert_true(pastfail_start_warning(h3, 2, "train", REL, buf, sizeof buf));
    assert_non_null(strstr(buf, "which its agent stopped while it ran as the promoted release at 2026-12-02 "
                                "14:03:11 UTC: drover-agent rank 1"));
    pastfail_message(&st, "nanp", buf, sizeof buf);
    assert_non_null(strstr(buf, "release 3f2a9c1b7d6e (nanp) was stopped by its agent for job 'train' at "
                                "2026-12-02 14:03:11 UTC while it ran as the promoted release: drover-agent"));
}

/* A failed job spec change of the good release (its record's previous is the release itself)
 * is the spec's failure: the release stays a rollback target and no deploy warns of it.  It was
 * counted: a plain rollback to the good release's earlier spec said "no earlier good release"
 * (e2e t-22). */
static void test_failed_spec_change_is_not_a_release_failure(void **state)
{
    (void)state;
    struct history_entry h[] = {
        rec(T0 - 100, "train", REL, "v1", "promoted", ""),
        rec(T0, "train", REL, "v1", "reverted", "rank 0 exited 1"),
    };
    snprintf(h[0].previous, sizeof h[0].previous, "%s", OTHER);
    snprintf(h[1].previous, sizeof h[1].previous, "%s", REL); /* deployed onto itself */
    assert_null(pastfail_find_now(h, 2, "train", REL));
    assert_null(pastfail_find(h, 2, "train", REL));
    snprintf(h[1].previous, sizeof h[1].previous, "%s", OTHER); /* another good release then */
    assert_ptr_equal(pastfail_find_now(h, 2, "train", REL), &h[1]);
}

static void test_rollback_refusal_from_history(void **state)
{
    (void)state;
    struct history_entry h[] = {
        rec(T0 - 60, "train", OTHER, "v1", "promoted", "throughput +0.4%"),
        rec(T0, "train", REL, "v2b", "reverted", "rank 0 exited 4 (data)"),
        rec(T0 + 10, "train", REL, "rollback", "aborted", "rollback interrupted"),
        rec(T0 + 20, "eval", "3f2a9c1b7d6effff000000000000000000000000000000000000000000000000", "e1",
            "reverted", "another job's"),
    };
    assert_ptr_equal(pastfail_find_prefix(h, 4, "train", "3f2a9c"), &h[1]);
    assert_ptr_equal(pastfail_find_prefix(h, 4, "train", "3F2A9C1B7D6E"), &h[1]); /* as --to takes it */
    assert_null(pastfail_find_prefix(h, 4, "train", "aaaaaa"));                     /* promoted */
    assert_null(pastfail_find_prefix(h, 4, "train", "bbbbbb"));                     /* none */
    assert_null(pastfail_find_prefix(NULL, 0, "train", "3f2a9c"));
    assert_string_equal(pastfail_release_name(h, 4, "train", REL), "v2b"); /* not "rollback" */
    assert_string_equal(pastfail_release_name(h, 4, "train", "ffff"), "");

    char m[1400];
    assert_string_equal(pastfail_rollback_refusal(&h[1], "v2b", "train", REL, false, m, sizeof m),
                        "rollback of job 'train' refused, nothing was contacted, nothing changed: "
                        "release 3f2a9c1b7d6e (v2b) failed probation for job 'train': reverted at "
                        "2026-12-02 14:03:11 UTC: rank 0 exited 4 (data); roll back to it only with "
                        "--force (drover rollback --job train --to 3f2a9c1b7d6e --force)");
    /* only the agents' bad marks know it */
    assert_string_equal(pastfail_rollback_refusal(NULL, "", "train", REL, true, m, sizeof m),
                        "rollback of job 'train' refused, nothing changed: release 3f2a9c1b7d6e is "
                        "marked bad for job 'train' by its agents (a failed probation, or a stop while "
                        "it ran promoted for a failure not retried: `drover history --job train` says "
                        "when and why); roll back to it only with --force (drover rollback --job train "
                        "--to 3f2a9c1b7d6e --force)");
    char small[32];
    assert_int_equal(strlen(pastfail_rollback_refusal(&h[1], "v2b", "train", REL, true, small, sizeof small)),
                     sizeof small - 1);

    /* several releases of the job begin with the prefix: the survey names them */
    struct history_entry two[] = {
        h[1], rec(T0 + 30, "train", "3f2a9c0000000000000000000000000000000000000000000000000000000000", "v3",
                  "reverted", "loss not finite"),
    };
    assert_null(pastfail_find_prefix(two, 2, "train", "3f2a9c"));
    assert_ptr_equal(pastfail_find_prefix(two, 2, "train", "3f2a9c1"), &two[0]);
    /* a confirmed rollback to it since (--force): good again, no refusal; an aborted one is not */
    struct history_entry back[] = {
        h[1], rec(T0 + 10, "train", REL, "rollback", "aborted", "rollback interrupted"),
    };
    assert_ptr_equal(pastfail_find_prefix(back, 2, "train", "3f2a9c"), &back[0]);
    back[1] = rec(T0 + 10, "train", REL, "rollback", "rollback", "operator rollback");
    assert_null(pastfail_find_prefix(back, 2, "train", "3f2a9c"));
    /* promoted since: no refusal */
    h[2] = rec(T0 + 10, "train", REL, "v2b", "promoted", "throughput +0.1%");
    assert_null(pastfail_find_prefix(h, 4, "train", "3f2a9c"));
}

/* An old-layout line of job train (no "layout": a drover before HISTORY_LAYOUT), parsed. */
static struct history_entry old_line(double t, const char *id, const char *name, const char *result,
                                     const char *previous, const char *reason)
{
    char line[1200];
    snprintf(line, sizeof line, "{\"v\":1,\"time\":%.1f,\"job\":\"train\",\"release\":\"%s\","
             "\"name\":\"%s\",\"result\":\"%s\",\"previous\":\"%s\",\"reason\":\"%s\","
             "\"reason_code\":\"\",\"containers\":\"h1:101\"}", t, id, name, result, previous, reason);
    struct history_entry e;
    assert_int_equal(history_entry_parse(line, strlen(line), &e), 0);
    return e;
}

/* Records written before HISTORY_LAYOUT are read by its rule: a rollback of a release never
 * promoted (REL, failed with auto_revert off, left running) back to the good one (OTHER) named
 * REL as release, so `drover history` showed REL as where it went and pastfail_find_now took
 * that "rollback" record for a rollback to REL that made it good again: a later deploy of REL
 * gave no "failed probation before" warning.  It is turned round as it is read; the other old
 * rollback records (to an earlier good release: its target in both fields; a failed one: its
 * target as release) already read so and are kept as written, as is every new record. */
static void test_old_rollback_records_read_target_first(void **state)
{
    (void)state;
    struct history_entry h[4];
    h[0] = old_line(T0, REL, "v2", "failed", OTHER, "crash-loop: rank 0 exited with code 1");
    h[1] = old_line(T0 + 60, REL, "rollback", "rollback", OTHER, "operator rollback");
    assert_string_equal(h[1].release, OTHER);
    assert_string_equal(h[1].previous, REL);
    const struct history_entry *e = pastfail_find_now(h, 2, "train", REL);
    assert_ptr_equal(e, &h[0]);
    /* a rollback to an earlier good release: both name it */
    h[2] = old_line(T0 + 120, REL, "rollback", "rollback", REL, "operator rollback");
    assert_string_equal(h[2].release, REL);
    assert_string_equal(h[2].previous, REL);
    /* a failed rollback to REL from OTHER: as written */
    h[3] = old_line(T0 + 180, REL, "rollback", "revert-failed", OTHER, "3f2a9c1b7d6e did not recover: hung");
    assert_string_equal(h[3].release, REL);
    assert_string_equal(h[3].previous, OTHER);
    /* a record written now carries the layout and reads back as written */
    struct history_entry now = rec(T0 + 240, "train", OTHER, "rollback", "rollback", "operator rollback");
    snprintf(now.previous, sizeof now.previous, "%s", REL);
    char *line = NULL;
    assert_int_equal(history_entry_format(&now, &line), 0);
    assert_non_null(strstr(line, "\"layout\":2"));
    struct history_entry back;
    assert_int_equal(history_entry_parse(line, strlen(line), &back), 0);
    free(line);
    assert_string_equal(back.release, OTHER);
    assert_string_equal(back.previous, REL);
}

/* *e written as its history line (which must carry "reason_code":"<code>") and read back into *e:
 * the code a record is decided on survives the round trip */
static void round_trip(struct history_entry *e, const char *code)
{
    char *line = NULL, want[64];
    assert_int_equal(history_entry_format(e, &line), 0);
    snprintf(want, sizeof want, "\"reason_code\":\"%s\"", code);
    assert_non_null(strstr(line, want));
    struct history_entry back;
    assert_int_equal(history_entry_parse(line, strlen(line), &back), 0);
    free(line);
    assert_int_equal(back.reason_code, e->reason_code);
    *e = back;
}

/* `drover deploy v5`, its agent killed -9 in a container during probation: FAILED, "v5 is not
 * marked bad", REVERT FAILED (the revert cannot reach that agent).  The deploy's record,
 * "revert-failed", was counted as a failed probation: plan warned, `rollback --to` asked for
 * --force, against the words.  Such a record carries reason code undecided, which no check
 * counts, and survives the round trip; `drover rollback` of that release left running (then)
 * reverts it without marking it bad (pastfail_hand_revert_code: no verdict). */
static void test_undecided_probation_is_no_failure(void **state)
{
    (void)state;
    struct history_entry h[] = {
        rec(T0, "train", OTHER, "v4", "promoted", "throughput +0.4%"),
        rec_code(T0 + 60, "train", REL, "v5", "revert-failed", HISTORY_RC_UNDECIDED,
                 "no status from h1:101 for 60s (healthy_deadline 60s): its drover-agent is not running"),
    };
    round_trip(&h[1], "undecided");
    assert_null(pastfail_find(h, 2, "train", REL));
    assert_null(pastfail_find_now(h, 2, "train", REL));
    assert_null(pastfail_find_prefix(h, 2, "train", "3f2a9c"));
    assert_int_equal(pastfail_hand_revert_code(h, 2, "train", REL), HISTORY_RC_OPERATOR_REVERT);
    /* a stopped container's, recorded "reverted": not counted either */
    h[1].result[0] = '\0';
    strcpy(h[1].result, "reverted");
    assert_null(pastfail_find(h, 2, "train", REL));
}

/* A promoted release its agent stopped once its restart budget was spent on hangs (nc4 finding
 * 2): the agent's record (failed, agent-stopped-hung) round-trips, is no failure (not marked bad,
 * a hang can be the infrastructure's: a rollback to it is neither refused nor skipped), but
 * pastfail_hang_stop finds it, until a promote or a confirmed rollback to it, and the warning
 * says when and why.  It used to leave no record at all, and a rollback to it said nothing. */
static void test_hang_stop_while_promoted_warns(void **state)
{
    (void)state;
    struct history_entry h[] = {
        rec(T0 - 600, "train", REL, "hang", "promoted", "throughput +1.0%"),
        rec_code(T0, "train", REL, "hang", "failed", HISTORY_RC_AGENT_STOPPED_HUNG,
                 "drover-agent rank 0 hung (liveness deadline) on a promoted release, 4 times in 360 s "
                 "(restart budget 3): stopped"),
        rec(T0 + 60, "train", OTHER, "rollback", "rollback", "operator rollback"),
        rec(T0 + 120, "train", REL, "rollback", "rollback", "operator rollback"),
    };
    snprintf(h[1].by, sizeof h[1].by, "%s", HISTORY_BY_AGENT);
    round_trip(&h[1], "agent-stopped-hung");
    /* no failure: neither refused (--to) nor skipped (plain rollback) */
    assert_null(pastfail_find(h, 3, "train", REL));
    assert_null(pastfail_find_now(h, 3, "train", REL));
    assert_null(pastfail_find_prefix(h, 3, "train", "3f2a9c"));
    /* but warned of, after the rollback away from it too */
    const struct history_entry *e = pastfail_hang_stop(h, 3, "train", REL);
    assert_ptr_equal(e, &h[1]);
    assert_null(pastfail_hang_stop(h, 3, "train", OTHER));
    char buf[1400];
    pastfail_hang_warning(e, "hang", "rolling back to", buf, sizeof buf);
    assert_string_equal(buf, "rolling back to 3f2a9c1b7d6e (hang), which its agent stopped for job 'train' "
                             "at 2026-12-02 14:03:11 UTC while it ran as the promoted release: drover-agent "
                             "rank 0 hung (liveness deadline) on a promoted release, 4 times in 360 s "
                             "(restart budget 3): stopped; it is not marked bad (a hang loop can be the "
                             "infrastructure's: a peer host down, the network), but watch it (drover "
                             "status --job train)");
    /* a confirmed rollback to it (or a promote) since: it ran as good after the stop */
    assert_null(pastfail_hang_stop(h, 4, "train", REL));
    /* the merge keeps the agent's record next to a drover's `promoted` of the same release */
    struct history_entry *v = calloc(1, sizeof *v);
    assert_non_null(v);
    v[0] = h[0];
    v[0].time = T0 - 60;
    size_t n = 1;
    assert_int_equal(state_history_merge(&v, &n, &h[1], 1, "h1:101") >= 0, 1);
    assert_int_equal(n, 2);
    assert_ptr_equal(pastfail_hang_stop(v, n, "train", REL), &v[1]);
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_history_no_warning),
        cmocka_unit_test(test_reverted_is_named_with_when_and_why),
        cmocka_unit_test(test_failures_of_each_kind),
        cmocka_unit_test(test_passed_since_is_no_warning),
        cmocka_unit_test(test_not_the_release_s_failure_is_skipped),
        cmocka_unit_test(test_records_with_and_without_code),
        cmocka_unit_test(test_unpromoted_why),
        cmocka_unit_test(test_hand_revert_of_unfailed_release),
        cmocka_unit_test(test_rollback_refusal_from_history),
        cmocka_unit_test(test_failed_after_promoted_is_bad_now),
        cmocka_unit_test(test_failed_spec_change_is_not_a_release_failure),
        cmocka_unit_test(test_old_rollback_records_read_target_first),
        cmocka_unit_test(test_undecided_probation_is_no_failure),
        cmocka_unit_test(test_hang_stop_while_promoted_warns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
