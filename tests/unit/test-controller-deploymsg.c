/* Unit tests for deploy_unsurveyed_message() (controller/deploy/deploy.c): a host that cannot be
 * reached is not a missing agent; the "is the agent installed?" hint said so for a timeout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "controller/deploy/deploy.h"

static void test_hint_only_for_agent(void **state)
{
    (void)state;
    char m[512];
    deploy_unsurveyed_message(m, sizeof m, "h1:101: host unreachable: Timeout connecting to 127.0.0.1",
                              false, "train");
    assert_string_equal(m, "h1:101: host unreachable: Timeout connecting to 127.0.0.1; nothing was pushed or stopped");
    assert_null(strstr(m, "install"));
    deploy_unsurveyed_message(m, sizeof m, "h1:101: drover-agent status failed (exit 127): not found", true,
                              "train");
    assert_non_null(strstr(m, "; nothing was pushed or stopped (is the agent installed? drover install --job train)"));
}

/* REVERT FAILED with a host unreachable: the job is often up, running the failed release where
 * the revert did not reach; "the job may be down ... act now" was wrong then.  The message says
 * where, that the agent there reverts on its own at its probation deadline, and the command. */
static void test_revert_failed_unreached(void **state)
{
    (void)state;
    char m[1024];
    deploy_revert_failed_message(m, sizeof m, "revert failed on 1 of 2 containers", "h1:101", "7b7db40c6a7a",
                                 1796296320 /* 2026-12-03 11:12:00 UTC */, "train");
    assert_non_null(strstr(m, "revert failed on 1 of 2 containers; the revert did not reach h1:101 (or was "
                              "refused there: why is said above), which may still run the failed release "
                              "7b7db40c6a7a"));
    assert_non_null(strstr(m, "reverts it to the good release on its own at its probation deadline (about "
                              "11:12:00 UTC)"));
    assert_non_null(strstr(m, "`drover rollback --job train` does it now once the host answers"));
    assert_non_null(strstr(m, "stays stopped")); /* a gang phase 1 stopped: nothing restarts it */
    assert_null(strstr(m, "may be down"));
    assert_null(strstr(m, "act now"));
    /* deadline not known: said without a time */
    deploy_revert_failed_message(m, sizeof m, "revert failed on 1 of 2 containers", "h1:101", "7b7db40c6a7a", 0,
                                 "train");
    assert_non_null(strstr(m, "at its probation deadline (a gang"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hint_only_for_agent),
        cmocka_unit_test(test_revert_failed_unreached),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
