/* controller/deploy/revertplan.c: before a revert, is every container already back on the good
 * release by itself (its agent's own revert), so that the controller leaves the gangs running?
 * The demo's v2 (a shard that does not exist): all three agents went back to v1 on their own,
 * and the controller's two-phase revert stopped the v1 gang and "reverted" v1 to itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "controller/deploy/revertplan.h"

#define GOOD "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define BAD "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define D1 "1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "2222222222222222222222222222222222222222222222222222222222222222"

/* the job in one container: runs cur with spec dg, its gang in state st */
static void job(struct job_status *js, const char *cur, const char *dg, enum gang_state st)
{
    memset(js, 0, sizeof *js);
    strcpy(js->job, "train");
    strcpy(js->current, cur);
    strcpy(js->release, cur);
    strcpy(js->spec_digest, dg);
    strcpy(js->good, GOOD);
    strcpy(js->good_spec_digest, D1);
    js->state = st;
}

/* the demo: every agent reverted on its own, the good gang starting or training */
static void test_all_went_back_by_themselves(void **state)
{
    (void)state;
    struct job_status js[3];
    const struct job_status *p[3] = { &js[0], &js[1], &js[2] };
    bool back[3];
    job(&js[0], GOOD, D1, GANG_REVERTED);
    job(&js[1], GOOD, D1, GANG_RUNNING);
    job(&js[2], GOOD, D1, GANG_STARTING);
    assert_true(revertplan_all_back(p, NULL, 3, GOOD, back));
    for (int i = 0; i < 3; i++)
        assert_true(back[i]);
    /* an older agent that says no spec digests: current and good are what it knows */
    for (int i = 0; i < 3; i++)
        js[i].spec_digest[0] = js[i].good_spec_digest[0] = '\0';
    assert_true(revertplan_all_back(p, NULL, 3, GOOD, back));
}

/* one container still on the failed release: the gang cannot form without it, so the full
 * two-phase revert (new generation everywhere) is kept */
static void test_one_still_on_the_failed_release(void **state)
{
    (void)state;
    struct job_status js[3];
    const struct job_status *p[3] = { &js[0], &js[1], &js[2] };
    bool back[3];
    job(&js[0], GOOD, D1, GANG_REVERTED);
    job(&js[1], BAD, D2, GANG_BACKOFF);
    job(&js[2], GOOD, D1, GANG_REVERTED);
    assert_false(revertplan_all_back(p, NULL, 3, GOOD, back));
    assert_true(back[0]);
    assert_false(back[1]);
    assert_true(back[2]);
    /* the agent switched current to good but its processes are still the failed release's */
    job(&js[1], GOOD, D1, GANG_STARTING);
    strcpy(js[1].release, BAD);
    assert_false(revertplan_all_back(p, NULL, 3, GOOD, back));
    assert_false(back[1]);
}

/* back on good, but no gang of it starting or running: the revert must start it (an agent that
 * went back by itself and whose gang then failed to start, or is stopping, or backing off) */
static void test_gang_not_running_is_not_back(void **state)
{
    (void)state;
    static const enum gang_state not_live[] = { GANG_STOPPED, GANG_STOPPING, GANG_BACKOFF, GANG_FAILED };
    struct job_status js;
    for (size_t k = 0; k < sizeof not_live / sizeof not_live[0]; k++) {
        job(&js, GOOD, D1, not_live[k]);
        assert_false(revertplan_is_back(&js, GOOD));
    }
    job(&js, GOOD, D1, GANG_RUNNING);
    assert_true(revertplan_is_back(&js, GOOD));
}

/* the good release with another spec than its good one (a failed change of the spec alone), a
 * controller whose good release is another, an agent that does not know the job, a container
 * found stopped, no good release: never back */
static void test_not_back(void **state)
{
    (void)state;
    struct job_status js[2];
    const struct job_status *p[2] = { &js[0], &js[1] };
    bool back[2], stopped[2] = { false, false };
    job(&js[0], GOOD, D2, GANG_RUNNING);
    assert_false(revertplan_is_back(&js[0], GOOD));
    job(&js[0], GOOD, D1, GANG_RUNNING);
    assert_false(revertplan_is_back(&js[0], BAD));
    assert_false(revertplan_is_back(NULL, GOOD));
    assert_false(revertplan_is_back(&js[0], ""));
    job(&js[1], GOOD, D1, GANG_RUNNING);
    assert_true(revertplan_all_back(p, stopped, 2, GOOD, back));
    stopped[1] = true;
    assert_false(revertplan_all_back(p, stopped, 2, GOOD, back));
    assert_true(back[0]);
    assert_false(back[1]);
    p[1] = NULL;
    assert_false(revertplan_all_back(p, NULL, 2, GOOD, back));
    assert_false(revertplan_all_back(p, NULL, 0, GOOD, back));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_went_back_by_themselves),
        cmocka_unit_test(test_one_still_on_the_failed_release),
        cmocka_unit_test(test_gang_not_running_is_not_back),
        cmocka_unit_test(test_not_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
