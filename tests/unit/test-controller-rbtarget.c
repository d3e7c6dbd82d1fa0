/* controller/deploy/rbtarget.c: where `drover rollback` takes a job, from every container's view:
 * the earlier promoted (release, spec) pair (the same release with its earlier spec after a
 * promoted change of the spec alone), never the first answering container's idea of "current". */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "controller/deploy/rbtarget.h"

#define A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define C "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
#define AA1 "aaaaaaaaaaaaaaaa111111111111111111111111111111111111111111111111" /* shares A's first 16 digits */
#define D1 "1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "2222222222222222222222222222222222222222222222222222222222222222"

static const char *const labels[] = { "h1:101", "h1:102", "h2:201" };

/* js runs (cur, cur_dg), good (good, good_dg); goods: pairs "release digest" newest first */
static void job(struct job_status *js, const char *cur, const char *cur_dg, const char *good,
                const char *good_dg, int ngoods, const char *const *goods, const char *const *goods_dg)
{
    memset(js, 0, sizeof *js);
    strcpy(js->job, "train");
    strcpy(js->current, cur);
    strcpy(js->spec_digest, cur_dg);
    strcpy(js->good, good);
    strcpy(js->good_spec_digest, good_dg);
    js->ngoods = ngoods;
    for (int k = 0; k < ngoods; k++) {
        strcpy(js->goods[k], goods[k]);
        strcpy(js->goods_spec[k], goods_dg[k]);
    }
}

static void cts_of(struct rb_ct *cts, struct job_status *js, int n, const char *want)
{
    for (int i = 0; i < n; i++)
        cts[i] = (struct rb_ct){ .label = labels[i], .js = &js[i], .want = want };
}

/* nproc_per_node 1 -> 2 promoted (D1 -> D2, the same release A): rollback goes to A with D1,
 * started from each agent's record, not to the earlier release B under the inventory's D2 */
static void test_spec_only_goes_to_earlier_spec(void **state)
{
    (void)state;
    struct job_status js[3];
    struct rb_ct cts[3];
    struct rb_target t;
    const char *goods[] = { A, A, B }, *dg[] = { D2, D1, D1 };
    for (int i = 0; i < 3; i++)
        job(&js[i], A, D2, A, D2, 3, goods, dg);
    cts_of(cts, js, 3, D2);
    assert_int_equal(rbtarget_decide("train", cts, 3, NULL, &t), 0);
    assert_int_equal(t.kind, RB_EARLIER);
    assert_string_equal(t.release, A);
    assert_true(t.spec_only);
    assert_int_equal(t.nrecorded, 3);
    for (int i = 0; i < 3; i++) {
        assert_true(t.recorded[i]);
        assert_string_equal(t.digest[i], D1);
    }
    /* the operator put D1 back into the inventory: the same pair, with the inventory's spec */
    cts_of(cts, js, 3, D1);
    assert_int_equal(rbtarget_decide("train", cts, 3, NULL, &t), 0);
    assert_int_equal(t.kind, RB_EARLIER);
    assert_string_equal(t.release, A);
    assert_int_equal(t.nrecorded, 0);
    assert_string_equal(t.digest[0], "");
}

/* A release promoted once that failed a later probation (the newcomer's lab: rel1 promoted,
 * the inflated B promoted, rel1 deployed again and reverted): a plain rollback passes it over
 * and says so, whether an agent marks it bad or only the controller's history knows (an agent
 * older than that mark).  It went back to it, while --to refused it. */
static void test_failed_after_promoted_is_skipped(void **state)
{
    (void)state;
    struct job_status js[2];
    struct rb_ct cts[2];
    struct rb_target t;
    const char *goods[] = { B, A, A, C }, *dg[] = { D1, D1, D1, D1 };
    for (int i = 0; i < 2; i++)
        job(&js[i], B, D1, B, D1, 4, goods, dg);
    cts_of(cts, js, 2, D1);
    const char *skip[] = { A };
    assert_int_equal(rbtarget_decide_skip("train", cts, 2, NULL, skip, 1, &t), 0);
    assert_int_equal(t.kind, RB_EARLIER);
    assert_string_equal(t.release, C);
    assert_int_equal(t.nskipped, 1);
    assert_string_equal(t.skipped[0], A);
    /* marked bad by one agent, no history: the same */
    strcpy(js[1].bad[0], A);
    js[1].nbad = 1;
    assert_int_equal(rbtarget_decide("train", cts, 2, NULL, &t), 0);
    assert_int_equal(t.kind, RB_EARLIER);
    assert_string_equal(t.release, C);
    assert_int_equal(t.nskipped, 1);
    /* nothing older than A: nothing to roll back to, A still named as skipped */
    js[1].nbad = 0;
    for (int i = 0; i < 2; i++)
        job(&js[i], B, D1, B, D1, 3, goods, dg);
    assert_int_equal(rbtarget_decide_skip("train", cts, 2, NULL, skip, 1, &t), 0);
    assert_int_equal(t.kind, RB_NONE);
    assert_int_equal(t.nskipped, 1);
    /* --to is not this rule's path (refused before, from the history and the marks) */
    assert_int_equal(rbtarget_decide_skip("train", cts, 2, A, skip, 1, &t), 0);
    assert_int_equal(t.kind, RB_EARLIER);
    assert_string_equal(t.release, A);
}

/* An agent older than the pairs (goods_spec all ""): the earlier release with the inventory's
 * spec, as rollback did before; a release some container marks bad is never the target. */
static void test_older_agents_and_bad_marks(void **state)
{
    (void)state;
    struct job_status js[2];
    struct rb_ct cts[2];
    struct rb_target t;
    const char *goods[] = { A, B, C }, *dg[] = { "", "", "" };
    for (int i = 0; i < 2; i++)
        job(&js[i], A, "", A, "", 3, goods, dg);
    cts_of(cts, js, 2, D2);
    assert_int_equal(rbtarget_decide("train", cts, 2, NULL, &t), 0);
    assert_int_equal(t.kind, RB_EARLIER);
    assert_string_equal(t.release, B);
    assert_false(t.spec_only);
    assert_int_equal(t.nrecorded, 0);
    js[1].nbad = 1;
    strcpy(js[1].bad[0], B);
    assert_int_equal(rbtarget_decide("train", cts, 2, NULL, &t), 0);
    assert_int_equal(t.kind, RB_EARLIER);
    assert_string_equal(t.release, C);
    js[1].ngoods = js[0].ngoods = 2; /* A, B(bad): nothing earlier */
    assert_int_equal(rbtarget_decide("train", cts, 2, NULL, &t), 0);
    assert_int_equal(t.kind, RB_NONE);
}

/* h1:101 was stopped while the others were deployed and promoted B: it still runs (and calls
 * good) A.  Taking "current" from the first container that answers rolled the job back from A
 * to A's predecessor; now the disagreement is named and nothing is switched.  --to names where
 * every container goes. */
static void test_containers_disagree(void **state)
{
    (void)state;
    struct job_status js[3];
    struct rb_ct cts[3];
    struct rb_target t;
    const char *old_goods[] = { A, C }, *new_goods[] = { B, A, C }, *dg[] = { "", "", "" };
    job(&js[0], A, "", A, "", 2, old_goods, dg);
    job(&js[1], B, "", B, "", 3, new_goods, dg);
    job(&js[2], B, "", B, "", 3, new_goods, dg);
    cts_of(cts, js, 3, D1);
    assert_int_equal(rbtarget_decide("train", cts, 3, NULL, &t), 0);
    assert_int_equal(t.kind, RB_REFUSED);
    assert_non_null(strstr(t.why, "disagree on its good release"));
    assert_non_null(strstr(t.why, "h1:101 runs aaaaaaaaaaaa, good aaaaaaaaaaaa"));
    assert_non_null(strstr(t.why, "h2:201 runs bbbbbbbbbbbb, good bbbbbbbbbbbb"));
    assert_non_null(strstr(t.why, "--to ID"));
    assert_int_equal(rbtarget_decide("train", cts, 3, A, &t), 0);
    assert_int_equal(t.kind, RB_EARLIER);
    assert_string_equal(t.release, A);
    assert_false(t.spec_only);
    /* h1:101, left on A with the spec promoted last (D1), keeps it; it once ran A with D2.  The
     * first version sent it to (A, D2), "the newest pair other than what runs" (t-23 in suite
     * order, after t-22's spec change) */
    const char *old_pairs[] = { A, A, C }, *old_dg[] = { D1, D2, D1 };
    const char *new_pairs[] = { B, A, A }, *new_dg[] = { D1, D1, D2 };
    job(&js[0], A, D1, A, D1, 3, old_pairs, old_dg);
    job(&js[1], B, D1, B, D1, 3, new_pairs, new_dg);
    job(&js[2], B, D1, B, D1, 3, new_pairs, new_dg);
    assert_int_equal(rbtarget_decide("train", cts, 3, A, &t), 0);
    assert_int_equal(t.kind, RB_EARLIER);
    assert_false(t.spec_only);
    assert_int_equal(t.nrecorded, 0); /* (A, D1) everywhere: the inventory's spec */
    cts_of(cts, js, 3, D2); /* the inventory asks for D2 now: each goes to (A, D1) by its record */
    assert_int_equal(rbtarget_decide("train", cts, 3, A, &t), 0);
    assert_int_equal(t.nrecorded, 3);
    assert_string_equal(t.digest[0], D1);
    cts_of(cts, js, 3, D1);
    job(&js[0], A, "", A, "", 2, old_goods, dg);
    job(&js[1], B, "", B, "", 3, new_goods, dg);
    job(&js[2], B, "", B, "", 3, new_goods, dg);
    /* the same good release, but their promoted histories lead elsewhere */
    const char *other[] = { B, C };
    job(&js[0], B, "", B, "", 2, other, dg);
    assert_int_equal(rbtarget_decide("train", cts, 3, NULL, &t), 0);
    assert_int_equal(t.kind, RB_REFUSED);
    assert_non_null(strstr(t.why, "different releases"));
    /* an agent that does not know the job */
    cts[2].js = NULL;
    assert_int_equal(rbtarget_decide("train", cts, 3, NULL, &t), 0);
    assert_int_equal(t.kind, RB_REFUSED);
    assert_non_null(strstr(t.why, "h2:201 does not know job 'train'"));
    assert_int_equal(rbtarget_decide("train", cts, 0, NULL, &t), -EINVAL);
}

/* One container runs a release that was never promoted (a drover that died during probation, a
 * container that came back with the failed release): every one goes back to the good pair. */
static void test_unpromoted_anywhere_reverts(void **state)
{
    (void)state;
    struct job_status js[3];
    struct rb_ct cts[3];
    struct rb_target t;
    const char *goods[] = { A, B }, *dg[] = { D1, D1 };
    for (int i = 0; i < 3; i++)
        job(&js[i], A, D1, A, D1, 2, goods, dg);
    job(&js[2], C, D1, A, D1, 2, goods, dg);
    cts_of(cts, js, 3, D1);
    assert_int_equal(rbtarget_decide("train", cts, 3, NULL, &t), 0);
    assert_int_equal(t.kind, RB_REVERT);
    assert_string_equal(t.current, C);
    assert_string_equal(t.good, A);
    /* the good release with an unpromoted spec (a spec change on probation) too */
    job(&js[2], A, D2, A, D1, 2, goods, dg);
    assert_int_equal(rbtarget_decide("train", cts, 3, NULL, &t), 0);
    assert_int_equal(t.kind, RB_REVERT);
}

/* --to ID: the newest promoted pair of ID other than what runs, with its recorded spec; a release
 * never promoted here (previous, or bad with --force) with the inventory's */
static void test_to(void **state)
{
    (void)state;
    struct job_status js[2];
    struct rb_ct cts[2];
    struct rb_target t;
    const char *goods[] = { A, B, A }, *dg[] = { D2, D1, D1 };
    for (int i = 0; i < 2; i++)
        job(&js[i], A, D2, A, D2, 3, goods, dg);
    cts_of(cts, js, 2, D2);
    assert_int_equal(rbtarget_decide("train", cts, 2, A, &t), 0);
    assert_int_equal(t.kind, RB_EARLIER);
    assert_true(t.spec_only);
    assert_true(t.recorded[1]);
    assert_string_equal(t.digest[1], D1);
    assert_int_equal(rbtarget_decide("train", cts, 2, B, &t), 0);
    assert_false(t.spec_only);
    assert_true(t.recorded[0]); /* B was promoted with D1: as it ran then */
    assert_int_equal(rbtarget_decide("train", cts, 2, C, &t), 0);
    assert_int_equal(t.nrecorded, 0); /* never promoted here: the inventory's spec */
    assert_string_equal(t.release, C);
}

/* --to the release every container runs, with the inventory's spec, and no other spec of it
 * promoted (the lab after one deploy: `rollback --job train --to <good>`): nothing to go to.
 * It used to restart every gang as it was, saying "with the job spec it was promoted with
 * before" though there was none. */
static void test_to_what_runs_already(void **state)
{
    (void)state;
    struct job_status js[3];
    struct rb_ct cts[3];
    struct rb_target t;
    const char *goods[] = { A, B }, *dg[] = { D1, D1 };
    for (int i = 0; i < 3; i++)
        job(&js[i], A, D1, A, D1, 2, goods, dg);
    cts_of(cts, js, 3, D1);
    assert_int_equal(rbtarget_decide("train", cts, 3, A, &t), 0);
    assert_int_equal(t.kind, RB_NONE);
    assert_int_equal(t.nrecorded, 0);
    assert_non_null(strstr(t.why, "already runs aaaaaaaaaaaa"));
    assert_non_null(strstr(t.why, "--to ID"));
    /* the other release is still a target */
    assert_int_equal(rbtarget_decide("train", cts, 3, B, &t), 0);
    assert_int_equal(t.kind, RB_EARLIER);
    assert_string_equal(t.release, B);
    /* the inventory asks for another spec (D2): a relaunch with it, as before */
    cts_of(cts, js, 3, D2);
    assert_int_equal(rbtarget_decide("train", cts, 3, A, &t), 0);
    assert_int_equal(t.kind, RB_EARLIER);
    assert_true(t.spec_only);
    /* one container left on another release: the others stay, it comes to A */
    cts_of(cts, js, 3, D1);
    job(&js[2], B, D1, A, D1, 2, goods, dg);
    assert_int_equal(rbtarget_decide("train", cts, 3, A, &t), 0);
    assert_int_equal(t.kind, RB_EARLIER);
    assert_false(t.spec_only);
}

/* rollback --to PREFIX: `--to deadbeef` (8 digits, no such release) said "give at least 6 hex
 * digits of one" and exit 2.  The prefix's form is one question (checked before any host), what
 * it matches another: none, one (a release listed by several containers counts once), several. */
static void test_to_prefix(void **state)
{
    (void)state;
    assert_true(rbtarget_prefix_ok("deadbe"));
    assert_true(rbtarget_prefix_ok("DEADBEEF"));
    assert_true(rbtarget_prefix_ok(A));
    assert_false(rbtarget_prefix_ok("deadb"));  /* 5 */
    assert_false(rbtarget_prefix_ok(""));
    assert_false(rbtarget_prefix_ok("v1-release"));
    assert_false(rbtarget_prefix_ok("aaaaaa "));
    assert_false(rbtarget_prefix_ok(A "a")); /* 65 */
    const char *const known[] = { A, "", B, A, AA1, B };
    const char *hits[4] = { NULL };
    int n = (int)(sizeof known / sizeof known[0]);
    assert_int_equal(rbtarget_match_prefix(known, n, "deadbeef", hits, 4), 0);
    assert_null(hits[0]);
    assert_int_equal(rbtarget_match_prefix(known, n, "bbbbbb", hits, 4), 1); /* B twice: one release */
    assert_string_equal(hits[0], B);
    assert_int_equal(rbtarget_match_prefix(known, n, "BBBBBBBB", hits, 4), 1); /* any case */
    assert_string_equal(hits[0], B);
    assert_int_equal(rbtarget_match_prefix(known, n, "aaaaaaaa", hits, 4), 2); /* A, and the other */
    assert_string_equal(hits[0], A);
    assert_int_equal(strncmp(hits[1], AA1, 17), 0);
    assert_int_equal(rbtarget_match_prefix(known, n, "aaaaaaaa", hits, 1), 2); /* counted past max */
    assert_int_equal(rbtarget_match_prefix(known, n, "aaaaaaaaaaaaaaaaa", hits, 4), 1);
    assert_string_equal(hits[0], A);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_only_goes_to_earlier_spec),
        cmocka_unit_test(test_older_agents_and_bad_marks),
        cmocka_unit_test(test_failed_after_promoted_is_skipped),
        cmocka_unit_test(test_containers_disagree),
        cmocka_unit_test(test_unpromoted_anywhere_reverts),
        cmocka_unit_test(test_to),
        cmocka_unit_test(test_to_what_runs_already),
        cmocka_unit_test(test_to_prefix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
