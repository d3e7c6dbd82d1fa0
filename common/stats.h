/* common/stats.h: the nonparametric statistics behind probation verdicts (docs/controller.md,
 * "Probation"): medians, the Mann-Whitney U test with the Hodges-Lehmann shift estimate and its
 * distribution-free (Moses) confidence interval, and the one-sample sign-test interval for a
 * median.  Pure functions: no I/O, no allocation that outlives a call, no global state, safe
 * from any thread.
 *
 * Why rank statistics: per-interval throughput samples are skewed (evaluation steps, checkpoint
 * writes, a noisy neighbour) and carry outliers; a rank test makes no normality assumption and
 * one slow step moves it by one rank, not by its size.  Samples are treated as independent;
 * callers take one sample per fresh step so neighbouring samples do not repeat a measurement.
 */
#ifndef DROVER_STATS_H
#define DROVER_STATS_H

#include <stddef.h>

/* Samples each side of a two-sample comparison: the Hodges-Lehmann estimate looks at every
 * pair, n * m of them, so both sides are capped (callers keep the newest). */
#define STATS_MAX_SAMPLES 1024

struct stats_shift {
    int n, m;        /* samples of x (candidate) and y (baseline); m = 0 for the one-sample form */
    double shift;    /* Hodges-Lehmann: median of x_i - y_j (one-sample: median of x - ref) */
    double lo, hi;   /* confidence interval for the shift at the requested confidence */
    double u;        /* Mann-Whitney U of x (pairs with x_i > y_j, ties counting half); -1 one-sample */
    double p;        /* two-sided p-value of "no shift" (normal approximation, tie-corrected) */
};

/* Median of n values (sorts a copy on the stack or heap).  NaN when n <= 0 or on ENOMEM. */
double stats_median(const double *v, int n);

/* The standard normal quantile: z with P(Z <= z) = p, for 0 < p < 1 (NaN outside). */
double stats_normal_quantile(double p);

/* Mann-Whitney U test of x against y and the Hodges-Lehmann shift of x relative to y with its
 * Moses confidence interval at `confidence` (0.5 < confidence < 1).  Needs n >= 1 and m >= 1
 * (-EINVAL; also for n or m over STATS_MAX_SAMPLES or a non-finite value), -ENOMEM.  With few
 * samples the interval is the whole range of differences: it never claims more than the data
 * shows.  ret written only on success. */
int stats_mann_whitney(const double *x, int n, const double *y, int m, double confidence,
                       struct stats_shift *ret);

/* One sample against a reference value (a baseline recorded as one number): the shift is
 * median(x) - ref and the interval comes from the sign test's order statistics.  Same errors. */
int stats_sign_interval(const double *x, int n, double ref, double confidence,
                        struct stats_shift *ret);

#endif
