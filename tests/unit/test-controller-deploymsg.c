/* Unit tests for deploy_unsurveyed_message() (controller/deploy/deploy.c): a host that cannot be
 * reached is not a missing agent; the "is the agent installed?" hint said so for a timeout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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

/* REVERT FAILED when every container took the revert but no recovery was confirmed: stdout said
 * only the watching's finding and left out "the job may be down ... act now", which stderr had;
 * a script reading stdout did not learn that the job may be down.  Both now say the same. */
static void test_revert_failed_same_on_both(void **state)
{
    (void)state;
    char said[600];
    deploy_revert_unconfirmed_message(said, sizeof said, "no rank heartbeated within 120s", "train");
    assert_string_equal(said, "no rank heartbeated within 120s; the job may be down: look with `drover status "
                              "--job train` and act now");
    FILE *out = tmpfile(), *err = tmpfile();
    assert_non_null(out);
    assert_non_null(err);
    deploy_say_revert_failed(out, err, "train", said); /* not a TTY: no colour */
    char o[1024] = "", e[1024] = "";
    rewind(out);
    rewind(err);
    assert_non_null(fgets(o, sizeof o, out));
    assert_non_null(fgets(e, sizeof e, err));
    assert_string_equal(o, e);
    assert_non_null(strstr(o, "REVERT FAILED for job 'train': no rank heartbeated within 120s; the job may be "
                              "down"));
    fclose(out);
    fclose(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hint_only_for_agent),
        cmocka_unit_test(test_revert_failed_unreached),
        cmocka_unit_test(test_revert_failed_same_on_both),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
