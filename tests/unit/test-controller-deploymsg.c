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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hint_only_for_agent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
