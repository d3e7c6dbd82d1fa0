/* tests/unit/test-trainer-knobs.c: kernels/knobs.h, the one table of the environment variables
 * that choose a kernel or step implementation.  A misspelt value used to run the default
 * silently (DROVER_CLS=v3 timed the v2 classifier under another name); now drover-train refuses
 * to start on it, naming the variable, its value and what it accepts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/knobs.h"

static void clear_env(void)
{
    for (int k = 0; k < KNOB_COUNT; k++)
        unsetenv(kern_knob_defs[k].name);
    unsetenv("DROVER_WG_VARIANT");
    for (size_t i = 0; i < sizeof kern_uint_knobs / sizeof kern_uint_knobs[0]; i++)
        unsetenv(kern_uint_knobs[i].name);
}

/* every name selects its own index, unset and empty the default, anything else -EINVAL */
static void test_each_knob(void **state)
{
    (void)state;
    clear_env();
    for (int k = 0; k < KNOB_COUNT; k++) {
        const struct kern_knob_def *d = &kern_knob_defs[k];
        int n = 0;
        while (d->values[n])
            n++;
        assert_true(n >= 2 && n <= KERN_KNOB_MAXV);
        assert_true(d->dflt >= 0 && d->dflt < n);
        assert_int_equal(kern_knob_parse((enum kern_knob)k, NULL), d->dflt);
        assert_int_equal(kern_knob_parse((enum kern_knob)k, ""), d->dflt);
        assert_int_equal(kern_knob((enum kern_knob)k), d->dflt);
        for (int i = 0; i < n; i++) {
            assert_int_equal(kern_knob_parse((enum kern_knob)k, d->values[i]), i);
            setenv(d->name, d->values[i], 1);
            assert_int_equal(kern_knob((enum kern_knob)k), i);
        }
        assert_int_equal(kern_knob_parse((enum kern_knob)k, "no-such"), -EINVAL);
        setenv(d->name, "no-such", 1);
        assert_int_equal(kern_knob((enum kern_knob)k), d->dflt); /* the kernels' fallback */
        unsetenv(d->name);
    }
    /* the defaults the kernels and docs/cuda.md name */
    assert_string_equal(kern_knob_defs[KNOB_CLS].values[kern_knob_defs[KNOB_CLS].dflt], "v2");
    assert_string_equal(kern_knob_defs[KNOB_STEP].values[kern_knob_defs[KNOB_STEP].dflt], "graph");
    assert_string_equal(kern_knob_defs[KNOB_LN_BWD].values[kern_knob_defs[KNOB_LN_BWD].dflt], "v2");
    assert_string_equal(kern_knob_defs[KNOB_DP].values[kern_knob_defs[KNOB_DP].dflt], "flat");
    assert_string_equal(kern_knob_defs[KNOB_BLAS_PICKS].values[kern_knob_defs[KNOB_BLAS_PICKS].dflt],
                        "table");
}

static void test_check_names_the_bad_one(void **state)
{
    (void)state;
    char err[256];
    clear_env();
    assert_int_equal(kern_knobs_check(err, sizeof err), 0);
    setenv("DROVER_CLS", "old", 1);
    setenv("DROVER_STEP", "plain", 1);
    setenv("DROVER_WG_VARIANT", "77,96,96", 1);
    setenv("DROVER_BLAS_TUNE", "8", 1);
    assert_int_equal(kern_knobs_check(err, sizeof err), 0);

    setenv("DROVER_CLS", "v3", 1);
    assert_int_equal(kern_knobs_check(err, sizeof err), -EINVAL);
    assert_string_equal(err, "DROVER_CLS='v3' is not one of old, smem, v2, v2r; unset it for the "
                             "default, v2");
    setenv("DROVER_CLS", "v2", 1);

    setenv("DROVER_WG_VARIANT", "77;96;96", 1);
    assert_int_equal(kern_knobs_check(err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "DROVER_WG_VARIANT='77;96;96'"));
    setenv("DROVER_WG_VARIANT", "96", 1);

    setenv("DROVER_BLAS_TUNE", "lots", 1);
    assert_int_equal(kern_knobs_check(err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "DROVER_BLAS_TUNE='lots'"));
    assert_non_null(strstr(err, "0 to 16"));
    unsetenv("DROVER_BLAS_TUNE");

    /* the heuristic index has 16 results to choose from (matmul.cu's LT_WANT) */
    setenv("DROVER_BLAS_INDEX", "15", 1);
    assert_int_equal(kern_knobs_check(err, sizeof err), 0);
    setenv("DROVER_BLAS_INDEX", "16", 1);
    assert_int_equal(kern_knobs_check(err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "DROVER_BLAS_INDEX='16'"));
    unsetenv("DROVER_BLAS_INDEX");
    setenv("DROVER_BLAS_PICKS", "tabel", 1);
    assert_int_equal(kern_knobs_check(err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "DROVER_BLAS_PICKS='tabel' is not one of heuristic, table"));
    unsetenv("DROVER_BLAS_PICKS");

    /* a short buffer is cut, never overrun */
    setenv("DROVER_STEP", "graphs", 1);
    char small[16];
    memset(small, 'x', sizeof small);
    assert_int_equal(kern_knobs_check(small, 12), -EINVAL);
    assert_int_equal(strlen(small), 11);
    assert_int_equal(small[12], 'x');
    clear_env();
}

static void test_wg_variant_forms(void **state)
{
    (void)state;
    const char *good[] = {NULL, "", "0", "96", "127", "77,96,96", "13,13,96", "-,-,96", "13,-,-"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        assert_true(kern_wg_variant_valid(good[i]));
    const char *bad[] = {"128", "77,96", "1,2,3,4", "-", "77;96;96", "abc", "7 7", "77,96,",
                         ",96,96", "+5", "-5", "13,13,96x", " 96", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (kern_wg_variant_valid(bad[i]))
            fail_msg("'%s' accepted", bad[i]);
    }
}

static void test_uint_knobs(void **state)
{
    (void)state;
    assert_true(kern_uint_valid(NULL, 3));
    assert_true(kern_uint_valid("0", 3));
    assert_true(kern_uint_valid("3", 3));
    assert_false(kern_uint_valid("4", 3));
    assert_false(kern_uint_valid("-1", 3));
    assert_false(kern_uint_valid("2x", 3));
    assert_false(kern_uint_valid(" 2", 3));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_knob),
        cmocka_unit_test(test_check_names_the_bad_one),
        cmocka_unit_test(test_wg_variant_forms),
        cmocka_unit_test(test_uint_knobs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
