/* The environment variables that choose a kernel or a step implementation: one table, read by
 * the kernels and the CUDA backend (kern_knob) and checked whole by drover-train before its
 * first launch (kern_knobs_check).  Before this table each site compared its own strings and
 * took a misspelt value (DROVER_CLS=v3, DROVER_WG_VARIANT=77;96) silently as the default; a
 * benchmark or a bisection then measured something other than what it named.
 *
 * Plain C, header only, no CUDA: the .cu files, trainer/ and the unit tests include it.
 * The values and defaults are documented in docs/cuda.md ("Implementation switches"). */
#ifndef DROVER_KERNELS_KNOBS_H
#define DROVER_KERNELS_KNOBS_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kern_knob {
    KNOB_ATTN,      /* attention: mma.sync or wgmma */
    KNOB_ATTN_BWD,  /* attention backward: dQ and dK/dV kernels, or one fused kernel */
    KNOB_ATTN_DOT,  /* the backward's D = rowsum(dout * out) */
    KNOB_LN,        /* LayerNorm forward */
    KNOB_LN_BWD,    /* LayerNorm backward */
    KNOB_LN_BIAS,   /* LayerNorm backward fused with the previous layer's bias gradient */
    KNOB_BIAS,      /* bias gradient */
    KNOB_CLS,       /* classifier + cross-entropy */
    KNOB_ADAMW,     /* AdamW update */
    KNOB_STEP,      /* the CUDA step: launches one by one, staged, or CUDA graphs */
    KNOB_DP,        /* data-parallel gradient all-reduce */
    KNOB_BLAS_PICKS, /* cuBLASLt algorithms: the heuristic's first, or the measured table */
    KNOB_COUNT
};

#define KERN_KNOB_MAXV 5

/* values[i] selects implementation i; a NULL-terminated list of at most KERN_KNOB_MAXV. */
struct kern_knob_def {
    const char *name;
    const char *values[KERN_KNOB_MAXV + 1];
    int dflt;
};

/* In enum order (C++ has no array designators). */
static const struct kern_knob_def kern_knob_defs[KNOB_COUNT] = {
    {"DROVER_ATTN", {"mma", "wgmma", NULL}, 1},
    {"DROVER_ATTN_BWD", {"split", "fused", NULL}, 0},
    {"DROVER_ATTN_DOT", {"old", "v2", NULL}, 1},
    {"DROVER_LN", {"old", "reg", NULL}, 1},
    {"DROVER_LN_BWD", {"old", "reg", "reg3", "v2", NULL}, 3},
    {"DROVER_LN_BIAS", {"0", "1", NULL}, 1},
    {"DROVER_BIAS", {"old", "v2", NULL}, 1},
    {"DROVER_CLS", {"old", "smem", "v2", "v2r", NULL}, 2},
    {"DROVER_ADAMW", {"old", "vec", NULL}, 1},
    {"DROVER_STEP", {"plain", "staged", "graph", NULL}, 2},
    {"DROVER_DP", {"flat", "bucket", "overlap", NULL}, 0},
    {"DROVER_BLAS_PICKS", {"heuristic", "table", NULL}, 1},
};

/* The index of s among k's values; unset or empty: the default; unknown: -EINVAL. */
static inline int kern_knob_parse(enum kern_knob k, const char *s)
{
    const struct kern_knob_def *d = &kern_knob_defs[k];
    if (!s || !*s)
        return d->dflt;
    for (int i = 0; d->values[i]; i++)
        if (!strcmp(s, d->values[i]))
            return i;
    return -EINVAL;
}

/* The implementation the environment selects for k.  An unknown value gives the default here:
 * drover-train refuses to start on one (kern_knobs_check), and the benchmarks check too. */
static inline int kern_knob(enum kern_knob k)
{
    int v = kern_knob_parse(k, getenv(kern_knob_defs[k].name));
    return v < 0 ? kern_knob_defs[k].dflt : v;
}

/* DROVER_WG_VARIANT: one number for all three kernels, or "F,Q,K" where a field is a number
 * or "-" (leave that kernel out; benchmarks only); numbers 0..127 (the bits in kernels.h). */
static inline int kern_wg_variant_valid(const char *s)
{
    if (!s || !*s)
        return 1;
    int fields = 0, skips = 0;
    for (;;) {
        if (*s == '-') {
            s++;
            skips++;
        } else {
            if (*s < '0' || *s > '9')
                return 0;
            char *end;
            if (strtol(s, &end, 10) > 127)
                return 0;
            s = end;
        }
        fields++;
        if (!*s)
            break;
        if (*s != ',')
            return 0;
        s++;
    }
    return fields == 3 || (fields == 1 && !skips);
}

/* A non-negative integer knob no larger than max (DROVER_BLAS_TUNE, DROVER_WG_DESC, ...). */
static inline int kern_uint_valid(const char *s, long max)
{
    if (!s || !*s)
        return 1;
    char *end;
    long v = strtol(s, &end, 10);
    return end != s && !*end && *s >= '0' && *s <= '9' && v >= 0 && v <= max;
}

static const struct {
    const char *name;
    long max;
} kern_uint_knobs[] = {
    {"DROVER_BLAS_TUNE", 16}, {"DROVER_BLAS_INDEX", 15}, {"DROVER_WG_DESC", 3}, {"DROVER_DP_CTAS", 1024}, {"DROVER_DP_PRIO", 1},
};

/* Every knob in the environment: 0, or -EINVAL with err naming the variable, its value and
 * what it accepts (the first bad one). */
static inline int kern_knobs_check(char *err, size_t n)
{
    for (int k = 0; k < KNOB_COUNT; k++) {
        const struct kern_knob_def *d = &kern_knob_defs[k];
        const char *s = getenv(d->name);
        if (kern_knob_parse((enum kern_knob)k, s) >= 0)
            continue;
        size_t o = (size_t)snprintf(err, n, "%s='%s' is not one of", d->name, s);
        for (int i = 0; d->values[i] && o < n; i++)
            o += (size_t)snprintf(err + o, n - o, "%s %s", i ? "," : "", d->values[i]);
        if (o < n)
            snprintf(err + o, n - o, "; unset it for the default, %s", d->values[d->dflt]);
        return -EINVAL;
    }
    const char *wg = getenv("DROVER_WG_VARIANT");
    if (!kern_wg_variant_valid(wg)) {
        snprintf(err, n,
                 "DROVER_WG_VARIANT='%s' is not a number 0..127 or three of them as F,Q,K "
                 "(forward, dQ, dK/dV; a field may be '-'); unset it for the built-in default",
                 wg);
        return -EINVAL;
    }
    for (size_t i = 0; i < sizeof kern_uint_knobs / sizeof kern_uint_knobs[0]; i++) {
        const char *s = getenv(kern_uint_knobs[i].name);
        if (!kern_uint_valid(s, kern_uint_knobs[i].max)) {
            snprintf(err, n, "%s='%s' is not a whole number from 0 to %ld; unset it for the default",
                     kern_uint_knobs[i].name, s, kern_uint_knobs[i].max);
            return -EINVAL;
        }
    }
    return 0;
}

#endif
