/* bench/verdict/matrix.c: prints the verdict matrix (issue 13): each simulated row over SEEDS
 * seeds through the real controller/probation.c, with the verdicts counted, false promotes and
 * false reverts, and the median simulated time to a verdict.  Exit 1 on any wrong verdict.
 *   build/bench-verdict/matrix [SEEDS] [-v]
 */
#include <errno.h>

#include "bench/verdict/sim.h"
#include "common/stats.h"

int main(int argc, char **argv)
{
    int seeds = argc > 1 ? atoi(argv[1]) : 40;
    int verbose = argc > 2 && strcmp(argv[2], "-v") == 0;
    if (seeds < 1 || seeds > 10000)
        seeds = 40;
    int wrong_total = 0;
    printf("%-32s %-7s %5s %5s %5s %5s %5s %6s %6s %7s %7s\n", "row", "expect", "seeds", "pass",
           "fail", "inc", "nodat", "f-prom", "f-rev", "t_med_s", "excl");
    for (int i = 0; i < SIM_NROWS; i++) {
        const struct sim_scenario *sc = &sim_rows[i];
        int cnt[5] = { 0 }, fprom = 0, frev = 0;
        double *tv = calloc((size_t)seeds, sizeof *tv), *ex = calloc((size_t)seeds, sizeof *ex);
        for (int s = 0; s < seeds; s++) {
            struct sim_result res;
            int r = sim_row(sc, (uint64_t)s + 1, &res);
            if (r < 0) {
                fprintf(stderr, "%s seed %d: simulation error %d\n", sc->name, s + 1, r);
                return 2;
            }
            cnt[res.verdict]++;
            tv[s] = res.t_verdict;
            ex[s] = res.excluded;
            if (r == 1) {
                if (res.promoted)
                    fprom++;
                else
                    frev++;
                if (sc->expect == SIM_REVERT && !res.promoted)
                    frev--, fprom++; /* reverted, but without naming the straggler: counted wrong */
            }
            if (verbose || r == 1)
                fprintf(stderr, "%s seed %d: %s at %.0fs: %s\n", sc->name, s + 1,
                        probation_verdict_name(res.verdict), res.t_verdict, res.reason);
        }
        printf("%-32s %-7s %5d %5d %5d %5d %5d %6d %6d %7.0f %7.0f\n", sc->name,
               sc->expect == SIM_PROMOTE ? "promote" : "revert", seeds, cnt[PROBATION_PASS],
               cnt[PROBATION_FAIL], cnt[PROBATION_INCONCLUSIVE], cnt[PROBATION_NODATA], fprom, frev,
               stats_median(tv, seeds), stats_median(ex, seeds));
        wrong_total += fprom + frev;
        free(tv);
        free(ex);
    }
    printf("wrong verdicts: %d\n", wrong_total);
    return wrong_total ? 1 : 0;
}
