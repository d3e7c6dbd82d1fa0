/* trainer/fault.c: parser of the test-only fault knobs (fault.h).  Never: act on a knob itself. */
#include "trainer/fault.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int num(const char *v, double *ret)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end || errno || d < 0)
        return -EINVAL;
    *ret = d;
    return 0;
}

int fault_parse(const char *spec, struct train_faults *ret_f)
{
    struct train_faults f = {.crash_at = -1, .hang_at = -1, .nan_at = -1, .exit_immediately = -1,
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
        double v;
        if (num(eq + 1, &v) < 0)
            return -EINVAL;
        if (!strcmp(tok, "slow") && v >= 1)
            f.slow = v;
        else if (!strcmp(tok, "warmup_slow"))
            f.warmup_slow = v;
        else if (!strcmp(tok, "crash_at"))
            f.crash_at = (int64_t)v;
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
