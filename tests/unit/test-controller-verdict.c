/* The verdict matrix (issue 13) as a unit test: every simulated row of bench/verdict/sim.h over
 * 20 seeds through the real controller/probation.c (status documents through status_format and
 * status_parse), and not one wrong verdict: a row that must promote is promoted every time, a
 * row that must revert never is, and the straggler row names the slow rank.  The figures (time
 * to verdict, counts over more seeds) are bench/verdict's, in docs/benchmarks.md. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "bench/verdict/sim.h"

#define SEEDS 20

static void test_matrix(void **state)
{
    (void)state;
    int wrong = 0;
    for (int i = 0; i < SIM_NROWS; i++)
        for (int s = 1; s <= SEEDS; s++) {
            struct sim_result res;
            int r = sim_row(&sim_rows[i], (uint64_t)s, &res);
            assert_true(r >= 0);
            if (r == 1) {
                print_message("wrong verdict: %s, seed %d: %s: %s\n", sim_rows[i].name, s,
                              probation_verdict_name(res.verdict), res.reason);
                wrong++;
            }
        }
    assert_int_equal(wrong, 0);
}

/* The verdict texts an operator reads: the test, the change with its interval, the threshold,
 * the sample counts, the warmup excluded, the straggler's rank and container. */
static void test_verdict_texts(void **state)
{
    (void)state;
    struct sim_result res;
    assert_int_equal(sim_row(&sim_rows[1], 1, &res), 0); /* 15% slower */
    assert_int_equal(res.verdict, PROBATION_FAIL);
    assert_non_null(strstr(res.reason, "throughput regression: -"));
    assert_non_null(strstr(res.reason, "beyond tolerance -10.0% (Mann-Whitney U, 95% interval of "
                                       "the Hodges-Lehmann shift;"));
    assert_non_null(strstr(res.reason, "baseline samples"));
    assert_non_null(strstr(res.reason, "warmup samples excluded"));
    assert_int_equal(sim_row(&sim_rows[0], 1, &res), 0); /* healthy */
    assert_int_equal(res.verdict, PROBATION_PASS);
    assert_non_null(strstr(res.reason, "within tolerance -10.0%"));
    assert_int_equal(sim_row(&sim_rows[3], 1, &res), 0); /* compile: warmup counted */
    assert_true(res.excluded >= 10);
    assert_int_equal(sim_row(&sim_rows[9], 1, &res), 0); /* straggler */
    assert_int_equal(res.straggler, 5);
    assert_non_null(strstr(res.reason, "straggler: rank 5 (h1:101) runs -"));
    assert_int_equal(sim_row(&sim_rows[10], 1, &res), 0); /* no samples */
    assert_int_equal(res.verdict, PROBATION_NODATA);
    assert_non_null(strstr(res.reason, "no data: "));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix),
        cmocka_unit_test(test_verdict_texts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
