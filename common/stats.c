/* common/stats.c: rank statistics for probation verdicts (see stats.h).  Textbook forms:
 * Hollander & Wolfe, "Nonparametric Statistical Methods", ch. 4 (Mann-Whitney-Wilcoxon, the
 * Hodges-Lehmann estimator, Moses' interval) and ch. 3 (the sign test's interval).
 */
#include "common/stats.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double stats_median(const double *v, int n)
{
    if (n <= 0)
        return NAN;
    double *c = malloc((size_t)n * sizeof *c);
    if (!c)
        return NAN;
    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    double m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
    free(c);
    return m;
}

static double normal_cdf(double z)
{
    return 0.5 * erfc(-z / M_SQRT2);
}

double stats_normal_quantile(double p)
{
    if (!(p > 0 && p < 1))
        return NAN;
    double lo = -40, hi = 40;
    for (int i = 0; i < 200 && hi - lo > 1e-12; i++) {
        double mid = (lo + hi) / 2;
        if (normal_cdf(mid) < p)
            lo = mid;
        else
            hi = mid;
    }
    return (lo + hi) / 2;
}

/* The k-th smallest (0-based) of a[0..n), reordering a: selection with a three-way partition
 * (many equal differences are common: tied samples), expected O(n). */
static double select_kth(double *a, size_t n, size_t k)
{
    size_t l = 0, r = n; /* the answer lies in a[l..r) */
    while (r - l > 1) {
        double pivot = a[l + (r - l) / 2];
        /* a[l..lt) < pivot, a[lt..i) == pivot, a[gt..r) > pivot */
        size_t lt = l, i = l, gt = r;
        while (i < gt) {
            double v = a[i];
            if (v < pivot) {
                a[i++] = a[lt];
                a[lt++] = v;
            } else if (v > pivot) {
                a[i] = a[--gt];
                a[gt] = v;
            } else {
                i++;
            }
        }
        if (k < lt)
            r = lt;
        else if (k >= gt)
            l = gt;
        else
            return pivot;
    }
    return a[k];
}

static bool all_finite(const double *v, int n)
{
    for (int i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return false;
    return true;
}

/* 1-based rank of an interval's lower end among ordered values (differences, or the sample),
 * given that the count of them below the true value is about normal(mean, sd): the usual
 * large-sample form max(1, floor(mean - z * sd)). */
static size_t interval_rank(double mean, double sd, double z)
{
    double c = floor(mean - z * sd);
    return c < 1 ? 1 : (size_t)c;
}

int stats_mann_whitney(const double *x, int n, const double *y, int m, double confidence,
                       struct stats_shift *ret)
{
    if (!x || !y || n < 1 || m < 1 || n > STATS_MAX_SAMPLES || m > STATS_MAX_SAMPLES ||
        !(confidence > 0.5 && confidence < 1) || !all_finite(x, n) || !all_finite(y, m))
        return -EINVAL;
    size_t nm = (size_t)n * (size_t)m;
    double *d = malloc(nm * sizeof *d);
    if (!d)
        return -ENOMEM;
    /* U by counting pairs: exact with ties, and the pairwise differences are needed anyway. */
    double u = 0;
    size_t k = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) {
            double diff = x[i] - y[j];
            d[k++] = diff;
            u += diff > 0 ? 1.0 : diff == 0 ? 0.5 : 0.0;
        }
    /* Tie correction of U's variance needs the tie groups of the pooled sample. */
    int N = n + m;
    double *pool = malloc((size_t)N * sizeof *pool);
    if (!pool) {
        free(d);
        return -ENOMEM;
    }
    memcpy(pool, x, (size_t)n * sizeof *pool);
    memcpy(pool + n, y, (size_t)m * sizeof *pool);
    qsort(pool, (size_t)N, sizeof *pool, cmp_double);
    double ties = 0;
    for (int i = 0; i < N;) {
        int j = i;
        while (j < N && pool[j] == pool[i])
            j++;
        double t = j - i;
        ties += t * t * t - t;
        i = j;
    }
    free(pool);
    double mean = (double)nm / 2;
    double var = (double)nm / 12.0 * ((N + 1) - (N > 1 ? ties / ((double)N * (N - 1)) : 0));
    double p = 1;
    if (var > 0) {
        double z = (fabs(u - mean) - 0.5) / sqrt(var);
        p = z > 0 ? erfc(z / M_SQRT2) : 1;
    }
    double zq = stats_normal_quantile(0.5 + confidence / 2);
    size_t c = interval_rank(mean, sqrt((double)nm * (N + 1) / 12.0), zq);
    if (c > (nm + 1) / 2)
        c = (nm + 1) / 2;
    double med = select_kth(d, nm, nm / 2);
    if (nm % 2 == 0)
        med = (med + select_kth(d, nm, nm / 2 - 1)) / 2;
    double lo = select_kth(d, nm, c - 1);
    double hi = select_kth(d, nm, nm - c);
    free(d);
    *ret = (struct stats_shift){ .n = n, .m = m, .shift = med, .lo = lo, .hi = hi, .u = u, .p = p };
    return 0;
}

int stats_sign_interval(const double *x, int n, double ref, double confidence,
                        struct stats_shift *ret)
{
    if (!x || n < 1 || n > STATS_MAX_SAMPLES || !isfinite(ref) ||
        !(confidence > 0.5 && confidence < 1) || !all_finite(x, n))
        return -EINVAL;
    double *c = malloc((size_t)n * sizeof *c);
    if (!c)
        return -ENOMEM;
    memcpy(c, x, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    int above = 0, below = 0;
    for (int i = 0; i < n; i++) {
        above += c[i] > ref;
        below += c[i] < ref;
    }
    double zq = stats_normal_quantile(0.5 + confidence / 2);
    size_t k = interval_rank(n / 2.0, sqrt((double)n) / 2, zq);
    if (k > (size_t)(n + 1) / 2)
        k = (size_t)(n + 1) / 2;
    double med = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
    int s = above + below;
    double p = 1;
    if (s > 0) {
        double z = (fabs(above - s / 2.0) - 0.5) / (sqrt((double)s) / 2);
        p = z > 0 ? erfc(z / M_SQRT2) : 1;
    }
    *ret = (struct stats_shift){ .n = n, .m = 0, .shift = med - ref, .lo = c[k - 1] - ref,
                                 .hi = c[n - k] - ref, .u = -1, .p = p };
    free(c);
    return 0;
}
