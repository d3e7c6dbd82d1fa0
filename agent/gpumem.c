/* agent/gpumem.c: see gpumem.h.  No clock, no I/O of its own: NVML through the table. */
#include "agent/gpumem.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *gpumem_verdict_name(enum gpumem_verdict v)
{
    static const char *const names[] = {"no-nvml", "free", "held", "timeout"};
    return (unsigned)v < sizeof names / sizeof names[0] ? names[v] : "?";
}

/* Append "; " (after the first) and one holder's line to why; cut at why_sz. */
static void say(char *why, size_t why_sz, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void say(char *why, size_t why_sz, size_t *off, const char *fmt, ...)
{
    if (*off + 3 >= why_sz)
        return;
    if (*off) {
        memcpy(why + *off, "; ", 3);
        *off += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(why + *off, why_sz - *off, fmt, ap);
    va_end(ap);
    if (n > 0)
        *off += (size_t)n < why_sz - *off ? (size_t)n : why_sz - *off - 1;
}

enum gpumem_verdict gpumem_decide(const struct gpumem_nvml *nv, const unsigned int *gpus, int ngpus,
                                  bool (*ours)(pid_t pid, void *ud), void *ud, double waited_s,
                                  double deadline_s, char *why, size_t why_sz)
{
    size_t off = 0;
    if (why_sz)
        why[0] = '\0';
    if (!nv || !nv->by_index || !nv->compute_procs)
        return GPUMEM_NO_NVML;
    int held = 0;
    for (int g = 0; g < ngpus; g++) {
        void *dev = NULL;
        struct gpumem_proc procs[GPUMEM_MAX_PROCS];
        unsigned int n = GPUMEM_MAX_PROCS;
        int r = nv->by_index(gpus[g], &dev);
        if (r == 0)
            r = nv->compute_procs(dev, &n, procs);
        if (r == GPUMEM_NVML_INSUFFICIENT_SIZE) { /* more holders than we list: held for sure */
            say(why, why_sz, &off, "GPU %u: more than %d processes hold memory", gpus[g], GPUMEM_MAX_PROCS);
            held++;
            continue;
        }
        if (r != 0) {
            say(why, why_sz, &off, "GPU %u: NVML error %d, not waited for", gpus[g], r);
            continue;
        }
        if (n > GPUMEM_MAX_PROCS)
            n = GPUMEM_MAX_PROCS;
        for (unsigned int k = 0; k < n; k++) {
            if (ours && ours((pid_t)procs[k].pid, ud))
                continue;
            if (procs[k].used == 0)
                continue; /* a context without memory holds nothing the next gang needs */
            held++;
            if (procs[k].used == GPUMEM_USED_UNKNOWN)
                say(why, why_sz, &off, "GPU %u: pid %u holds memory (amount unknown)", gpus[g], procs[k].pid);
            else
                say(why, why_sz, &off, "GPU %u: pid %u holds %llu MiB", gpus[g], procs[k].pid,
                    (procs[k].used + (1ULL << 20) - 1) >> 20);
        }
    }
    if (!held)
        return GPUMEM_FREE;
    return waited_s >= deadline_s ? GPUMEM_TIMEOUT : GPUMEM_HELD;
}
