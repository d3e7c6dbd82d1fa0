/* controller/ui.c: ui_plural(), the noun that goes with a count in the verbs' messages ("reverting
 * job 'train' to ... on 1 containers" said so for a one-container job). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "controller/ui.h"

static void test_plural(void **state)
{
    (void)state;
    assert_string_equal(ui_plural(1, "container", "containers"), "container");
    assert_string_equal(ui_plural(0, "container", "containers"), "containers");
    assert_string_equal(ui_plural(2, "container", "containers"), "containers");
    assert_string_equal(ui_plural(-1, "rank", "ranks"), "ranks");
    char m[128];
    for (int n = 1; n <= 2; n++) {
        snprintf(m, sizeof m, "revert failed on %d of %d %s", 1, n, ui_plural(n, "container", "containers"));
        assert_string_equal(m, n == 1 ? "revert failed on 1 of 1 container" : "revert failed on 1 of 2 containers");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plural),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
