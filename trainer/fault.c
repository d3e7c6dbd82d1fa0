/* trainer/fault.c: the test-only fault knobs (fault.h): the parser, and the two step hooks the
 * training loop calls.  The other knobs (checkpoint delays, init failures) act where they apply. */
#include "trainer/fault.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

/* A non-negative number, optionally with a time unit: "50", "50ms", "2s".  *ret_unit_s is the
 * unit in seconds (0 when none was given). */
static int num(const char *v, double *ret, double *ret_unit_s)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || errno || d < 0 || d != d)
        return -EINVAL;
    double unit = 0;
    if (!strcmp(end, "ms"))
        unit = 1e-3;
    else if (!strcmp(end, "s"))
        unit = 1;
    else if (*end)
        return -EINVAL;
    *ret = d;
    *ret_unit_s = unit;
    return 0;
}

int fault_parse(const char *spec, struct train_faults *ret_f)
{
    struct train_faults f = {.crash_at = -1, .crash_after = -1, .hang_at = -1, .nan_at = -1, .exit_immediately = -1,
                             .init_fail_rank = -1};
    if (spec && strlen(spec) > 1024)
        return -EINVAL;
    char buf[1025];
    strcpy(buf, spec ? spec : "");
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return -EINVAL;
        *eq = '\0';
        double v, unit;
        if (num(eq + 1, &v, &unit) < 0)
            return -EINVAL;
        bool is_time = !strcmp(tok, "warmup_slow") || !strcmp(tok, "ckpt_sleep") ||
                       !strcmp(tok, "ckpt_chunk_delay");
        if (unit && !is_time)
            return -EINVAL;
        if (unit) /* convert to the knob's own unit: ms for ckpt_chunk_delay, s otherwise */
            v = !strcmp(tok, "ckpt_chunk_delay") ? v * unit * 1e3 : v * unit;
        if (!strcmp(tok, "slow") && v >= 1)
            f.slow = v;
        else if (!strcmp(tok, "warmup_slow"))
            f.warmup_slow = v;
        else if (!strcmp(tok, "crash_at"))
            f.crash_at = (int64_t)v;
        else if (!strcmp(tok, "crash_after") && v >= 1)
            f.crash_after = (int64_t)v;
        else if (!strcmp(tok, "hang_at"))
            f.hang_at = (int64_t)v;
        else if (!strcmp(tok, "nan_at"))
            f.nan_at = (int64_t)v;
        else if (!strcmp(tok, "exit_immediately") && v <= 255)
            f.exit_immediately = (int)v;
        else if (!strcmp(tok, "init_fail_rank"))
            f.init_fail_rank = (int)v;
        else if (!strcmp(tok, "ckpt_chunk_delay") && v <= 60000)
            f.ckpt_chunk_delay_ms = (int)v;
        else if (!strcmp(tok, "ckpt_sleep") && v <= 3600)
            f.ckpt_sleep = v;
        else
            return -EINVAL;
    }
    *ret_f = f;
    return 0;
}

void fault_step_begin(const struct train_faults *f, int64_t step)
{
    static int64_t first = -1; /* the first step this process runs (after a resume: past it) */
    if (first < 0)
        first = step;
    if (f->crash_at >= 0 && step == f->crash_at) {
        log_error("fault knob crash_at=%lld: aborting", (long long)step);
        abort();
    }
    if (f->crash_after > 0 && step - first + 1 == f->crash_after) {
        log_error("fault knob crash_after=%lld: aborting at step %lld", (long long)f->crash_after,
                  (long long)step);
        abort();
    }
    if (f->hang_at >= 0 && step == f->hang_at) {
        log_error("fault knob hang_at=%lld: hanging", (long long)step);
        for (;;)
            pause();
    }
}

void fault_step_end(const struct train_faults *f, int64_t step, double since_start_s,
                    double elapsed_s, float *loss)
{
    if (f->nan_at >= 0 && step >= f->nan_at)
        *loss = NAN;
    double slow = f->slow;
    if (f->warmup_slow > 0) /* slow (default 2x) only during the first seconds */
        slow = since_start_s < f->warmup_slow ? (slow > 1 ? slow : 2) : 1;
    if (slow > 1 && elapsed_s > 0) {
        double s = elapsed_s * (slow - 1);
        struct timespec ts = { .tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9) };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
}
