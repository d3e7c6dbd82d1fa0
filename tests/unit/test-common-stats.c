/* Unit tests for common/stats.c (rank statistics of probation verdicts) and common/samples.c
 * (the baseline sample set wire format): values against brute-force computations, interval
 * coverage over seeded draws, and every error path (ret_ untouched). */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/samples.h"
#include "common/stats.h"

#define ID "3f2a9c1b7d6e3f2a9c1b7d6e3f2a9c1b7d6e3f2a9c1b7d6e3f2a9c1b7d6e3f2a"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* xorshift64* and Box-Muller: the same draws on every machine. */
static uint64_t rng_state;
static double uniform(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return ((rng_state * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
}
static double gauss(void)
{
    double u = uniform(), v = uniform();
    return sqrt(-2 * log(u + 1e-300)) * cos(2 * M_PI * v);
}

static void test_median_and_quantile(void **state)
{
    (void)state;
    double v[] = { 5, 1, 3, 2 };
    assert_true(stats_median(v, 3) == 3);
    assert_true(stats_median(v, 4) == 2.5);
    assert_true(isnan(stats_median(v, 0)));
    assert_true(fabs(stats_normal_quantile(0.975) - 1.959964) < 1e-5);
    assert_true(fabs(stats_normal_quantile(0.5)) < 1e-9);
    assert_true(isnan(stats_normal_quantile(1)));
    assert_true(isnan(stats_normal_quantile(0)));
}

/* U, the shift and the interval's ends against sorting every pairwise difference. */
static void test_mann_whitney_brute_force(void **state)
{
    (void)state;
    rng_state = 42;
    for (int trial = 0; trial < 20; trial++) {
        int n = 3 + trial * 3, m = 40 - trial;
        double x[80], y[80];
        for (int i = 0; i < n; i++)
            x[i] = round(gauss() * 4) / 4 + 0.5; /* quarter steps: ties happen */
        for (int j = 0; j < m; j++)
            y[j] = round(gauss() * 4) / 4;
        struct stats_shift s;
        assert_int_equal(stats_mann_whitney(x, n, y, m, 0.95, &s), 0);
        double *d = malloc((size_t)(n * m) * sizeof *d), u = 0;
        int k = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < m; j++) {
                d[k++] = x[i] - y[j];
                u += x[i] > y[j] ? 1 : x[i] == y[j] ? 0.5 : 0;
            }
        qsort(d, (size_t)k, sizeof *d, cmp);
        double med = k % 2 ? d[k / 2] : (d[k / 2 - 1] + d[k / 2]) / 2;
        assert_true(s.u == u);
        assert_true(s.shift == med);
        assert_int_equal(s.n, n);
        assert_int_equal(s.m, m);
        double z = 1.959964, c = floor(k / 2.0 - z * sqrt((double)k * (n + m + 1) / 12.0));
        int ci = c < 1 ? 1 : (int)c;
        assert_true(s.lo == d[ci - 1]);
        assert_true(s.hi == d[k - ci]);
        assert_true(s.lo <= s.shift && s.shift <= s.hi);
        assert_true(s.p >= 0 && s.p <= 1);
        free(d);
    }
}

static void test_mann_whitney_cases(void **state)
{
    (void)state;
    double x[10], y[10];
    for (int i = 0; i < 10; i++) {
        x[i] = i + 6;
        y[i] = i + 1;
    }
    struct stats_shift s;
    assert_int_equal(stats_mann_whitney(x, 10, y, 10, 0.95, &s), 0);
    assert_true(s.shift == 5);
    assert_true(s.lo <= 5 && s.hi >= 5 && s.lo > 0);
    assert_true(s.p < 0.01);
    /* identical constant samples: no shift, an interval of width 0, p = 1 */
    double c[5] = { 7, 7, 7, 7, 7 };
    assert_int_equal(stats_mann_whitney(c, 5, c, 5, 0.95, &s), 0);
    assert_true(s.shift == 0 && s.lo == 0 && s.hi == 0 && s.p == 1);
    /* one sample each: the interval is the only difference there is */
    assert_int_equal(stats_mann_whitney(x, 1, y, 1, 0.95, &s), 0);
    assert_true(s.lo == 5 && s.hi == 5);
}

/* Over seeded draws, the 95% interval covers the true shift about 95% of the time, and a
 * wider one (99%) at least as often. */
static void test_mann_whitney_coverage(void **state)
{
    (void)state;
    rng_state = 7;
    int covered95 = 0, covered99 = 0, trials = 400;
    for (int t = 0; t < trials; t++) {
        double x[30], y[60];
        for (int i = 0; i < 30; i++)
            x[i] = -0.15 + 0.05 * gauss();
        for (int j = 0; j < 60; j++)
            y[j] = 0.05 * gauss();
        struct stats_shift s;
        assert_int_equal(stats_mann_whitney(x, 30, y, 60, 0.95, &s), 0);
        covered95 += s.lo <= -0.15 && -0.15 <= s.hi;
        assert_int_equal(stats_mann_whitney(x, 30, y, 60, 0.99, &s), 0);
        covered99 += s.lo <= -0.15 && -0.15 <= s.hi;
    }
    assert_true(covered95 >= trials * 0.92 && covered95 <= trials * 0.985);
    assert_true(covered99 >= covered95);
}

static void test_sign_interval(void **state)
{
    (void)state;
    double x[9] = { 9, 1, 8, 2, 7, 3, 6, 4, 5 };
    struct stats_shift s;
    assert_int_equal(stats_sign_interval(x, 9, 5, 0.95, &s), 0);
    assert_true(s.shift == 0);
    /* n = 9: k = floor(4.5 - 1.96 * 1.5) = 1: the whole range */
    assert_true(s.lo == -4 && s.hi == 4);
    assert_true(s.u == -1 && s.m == 0);
    assert_int_equal(stats_sign_interval(x, 9, 100, 0.95, &s), 0);
    assert_true(s.shift == -95 && s.hi < 0);
}

static void test_errors(void **state)
{
    (void)state;
    double x[3] = { 1, 2, 3 }, bad[2] = { 1, NAN };
    struct stats_shift s = { .n = 99 };
    assert_int_equal(stats_mann_whitney(x, 0, x, 3, 0.95, &s), -EINVAL);
    assert_int_equal(stats_mann_whitney(x, 3, x, 0, 0.95, &s), -EINVAL);
    assert_int_equal(stats_mann_whitney(x, 3, x, 3, 0.4, &s), -EINVAL);
    assert_int_equal(stats_mann_whitney(x, 3, x, 3, 1, &s), -EINVAL);
    assert_int_equal(stats_mann_whitney(bad, 2, x, 3, 0.95, &s), -EINVAL);
    assert_int_equal(stats_mann_whitney(x, STATS_MAX_SAMPLES + 1, x, 3, 0.95, &s), -EINVAL);
    assert_int_equal(stats_sign_interval(x, 0, 1, 0.95, &s), -EINVAL);
    assert_int_equal(stats_sign_interval(x, 3, NAN, 0.95, &s), -EINVAL);
    assert_int_equal(stats_sign_interval(bad, 2, 1, 0.95, &s), -EINVAL);
    assert_int_equal(s.n, 99);
}

static struct sample_set *sample_set(int n)
{
    struct sample_set *s = calloc(1, sizeof *s);
    strcpy(s->release, ID);
    strcpy(s->job, "train");
    strcpy(s->containers, "train@h1:101,h1:102");
    s->time = 1795981869.5;
    s->ranks = 4;
    s->warmup_excluded = 12;
    s->n = n;
    for (int i = 0; i < n; i++) {
        s->ktok_s[i] = 96.0 + i % 7 * 0.25;
        s->step_ms[i] = 170 + i % 3;
    }
    return s;
}

static void test_samples_roundtrip(void **state)
{
    (void)state;
    struct sample_set *s = sample_set(SAMPLES_MAX), *back = calloc(1, sizeof *back);
    char *text;
    assert_int_equal(samples_format(s, &text), 0);
    assert_true(strlen(text) <= SAMPLES_MAX_BYTES);
    assert_int_equal(samples_parse(text, strlen(text), back), 0);
    assert_string_equal(back->release, ID);
    assert_string_equal(back->job, "train");
    assert_string_equal(back->containers, "train@h1:101,h1:102");
    assert_int_equal(back->n, SAMPLES_MAX);
    assert_int_equal(back->ranks, 4);
    assert_int_equal(back->warmup_excluded, 12);
    for (int i = 0; i < back->n; i++) {
        assert_true(fabs(back->ktok_s[i] - s->ktok_s[i]) < 1e-3);
        assert_true(fabs(back->step_ms[i] - s->step_ms[i]) < 1e-3);
    }
    free(text);
    /* without step times the member is left out and reads back as zeros */
    s->n = 3;
    memset(s->step_ms, 0, sizeof s->step_ms);
    assert_int_equal(samples_format(s, &text), 0);
    assert_null(strstr(text, "step_ms"));
    assert_int_equal(samples_parse(text, strlen(text), back), 0);
    assert_int_equal(back->n, 3);
    assert_true(back->step_ms[2] == 0);
    free(text);
    /* sets that would not parse back are refused */
    text = (char *)0x1;
    s->n = 0;
    assert_int_equal(samples_format(s, &text), -EINVAL);
    s->n = 3;
    s->ktok_s[1] = 0;
    assert_int_equal(samples_format(s, &text), -EINVAL);
    s->ktok_s[1] = 1;
    strcpy(s->release, "short");
    assert_int_equal(samples_format(s, &text), -EINVAL);
    assert_ptr_equal(text, (char *)0x1);
    free(s);
    free(back);
}

static void test_samples_parse_errors(void **state)
{
    (void)state;
    struct sample_set *s = calloc(1, sizeof *s);
    s->n = 77;
    static const struct {
        const char *text;
        int err;
    } cases[] = {
        { "{\"v\":1,\"release\":\"" ID "\",\"ktok_s\":[1,2]}", 0 },
        { "{\"v\":2,\"release\":\"" ID "\",\"ktok_s\":[1,2]}", -EPROTONOSUPPORT },
        { "{\"release\":\"" ID "\",\"ktok_s\":[1,2]}", -EINVAL },
        { "{\"v\":1,\"ktok_s\":[1,2]}", -EINVAL },
        { "{\"v\":1,\"release\":\"abc\",\"ktok_s\":[1,2]}", -EINVAL },
        { "{\"v\":1,\"release\":\"" ID "\"}", -EINVAL },
        { "{\"v\":1,\"release\":\"" ID "\",\"ktok_s\":[]}", -EINVAL },
        { "{\"v\":1,\"release\":\"" ID "\",\"ktok_s\":[1,0]}", -EINVAL },
        { "{\"v\":1,\"release\":\"" ID "\",\"ktok_s\":[1,-2]}", -EINVAL },
        { "{\"v\":1,\"release\":\"" ID "\",\"ktok_s\":[1,\"2\"]}", -EINVAL },
        { "{\"v\":1,\"release\":\"" ID "\",\"ktok_s\":[1,2],\"step_ms\":[1]}", -EINVAL },
        { "{\"v\":1,\"release\":\"" ID "\",\"ktok_s\":[1,2],\"step_ms\":[0,3]}", 0 },
        { "{\"v\":1,\"release\":\"" ID "\",\"ktok_s\":[1,2],\"ranks\":-1}", -EINVAL },
        { "{\"v\":1,\"release\":\"" ID "\",\"ktok_s\":[1,2],\"job\":7}", -EINVAL },
        { "{\"v\":1,\"v\":1,\"release\":\"" ID "\",\"ktok_s\":[1]}", -EINVAL },
        { "[1,2]", -EINVAL },
        { "{\"v\":1,\"release\":\"" ID "\",\"ktok_s\":7}", -EINVAL },
        { "{\"v\":1,\"release\":\"" ID "\",\"ktok_s\":[1,2],\"step_ms\":\"1,2\"}", -EINVAL },
        { "{\"v\":1,\"release\":\"" ID "\",\"ktok_s\":[1,2],\"step_ms\":null}", -EINVAL },
        { "{\"v\":1,\"release\":\"" ID "\",\"ktok_s\":[1,2],\"step_ms\":[1,-1]}", -EINVAL },
        { "{\"v\":1,\"release\":\"" ID "\",\"ktok_s\":[1,2e12]}", -EINVAL },
        { "{\"v\":1,\"release\":\"" ID "\",\"ktok_s\":[1,2],\"time\":-1}", -EINVAL },
        { "{\"v\":1,\"release\":\"" ID "\",\"ktok_s\":[1,2],\"warmup_excluded\":1.5}", -EINVAL },
        { "{\"v\":1,\"release\":\"ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789\",\"ktok_s\":[1]}", -EINVAL },
        { "{\"v\":1,\"release\":\"" ID "\",\"ktok_s\":[1,2],\"step_ms\":[]}", -EINVAL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int r = samples_parse(cases[i].text, strlen(cases[i].text), s);
        if (r != cases[i].err)
            fail_msg("case %zu: %d, want %d: %s", i, r, cases[i].err, cases[i].text);
        if (r < 0)
            assert_int_equal(s->n, 77); /* untouched */
        else
            s->n = 77;
    }
    /* too many values, too many bytes */
    char *big = malloc(SAMPLES_MAX_BYTES * 2);
    int off = sprintf(big, "{\"v\":1,\"release\":\"" ID "\",\"ktok_s\":[1");
    for (int i = 0; i < SAMPLES_MAX; i++)
        off += sprintf(big + off, ",1");
    off += sprintf(big + off, "]}");
    assert_int_equal(samples_parse(big, (size_t)off, s), -E2BIG);
    assert_int_equal(samples_parse(big, SAMPLES_MAX_BYTES + 1, s), -E2BIG);
    free(big);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_median_and_quantile),
        cmocka_unit_test(test_mann_whitney_brute_force),
        cmocka_unit_test(test_mann_whitney_cases),
        cmocka_unit_test(test_mann_whitney_coverage),
        cmocka_unit_test(test_sign_interval),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_samples_roundtrip),
        cmocka_unit_test(test_samples_parse_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
