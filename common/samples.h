/* common/samples.h: the baseline sample set, version 1 (docs/protocol.md, "Baseline samples").
 *
 * When a release is promoted, the controller hands every agent of the gang the fresh
 * per-interval samples it measured during probation (`drover-agent promote ... --samples JSON`);
 * the agent keeps them with the job (ROOT/jobs/<job>/baseline.json) and prints them back with
 * `drover-agent baseline --job J`, and the controller caches them in its state_dir.  The next
 * release's probation compares its own samples with these (common/stats.h).
 *
 *   {"v":1,"release":"<id>","job":"train","containers":"h1:101,h1:102","time":1795981869.4,
 *    "ranks":4,"warmup_excluded":12,"ktok_s":[96.1,95.8,…],"step_ms":[170.2,171.0,…]}
 *
 * ktok_s: the job's throughput (sum over ranks), one value per fresh interval, each > 0.
 * step_ms: the job's step time for the same intervals (the slowest rank's), same length, 0 where
 * unknown; may be empty.  Only this file (with samples.c) knows the format.
 */
#ifndef DROVER_SAMPLES_H
#define DROVER_SAMPLES_H

#include <stddef.h>

#include "common/manifest.h"

#define SAMPLES_VERSION 1
#define SAMPLES_MAX 512                 /* values per series; the newest are kept */
#define SAMPLES_MAX_BYTES (32u << 10)   /* a formatted set fits one agent command line */
#define SAMPLES_JOB_MAX 32
#define SAMPLES_CONTAINERS_MAX 1024

struct sample_set {
    char release[RELEASE_ID_LEN + 1];     /* the promoted release these were measured on */
    char job[SAMPLES_JOB_MAX];
    char containers[SAMPLES_CONTAINERS_MAX]; /* the container set, "h1:101,h1:102"; "" unknown */
    double time;                          /* epoch seconds of the promotion */
    int ranks;                            /* world size measured */
    int warmup_excluded;                  /* samples dropped as warmup before these */
    int n;
    double ktok_s[SAMPLES_MAX];
    double step_ms[SAMPLES_MAX];          /* 0 = unknown */
};

/* One line of compact JSON without a newline, malloc'd (free()).  -EINVAL for a set that would
 * not parse back (n out of 1..SAMPLES_MAX, a value not finite and > 0, a bad release id),
 * -ENOMEM, -E2BIG over SAMPLES_MAX_BYTES. */
int samples_format(const struct sample_set *s, char **ret_text);

/* Parse a set (at most SAMPLES_MAX_BYTES): -E2BIG over a limit, -EINVAL malformed (version
 * member, types, a release id that is not 64 hex digits, an empty or over-long ktok_s, a value
 * not finite and > 0, step_ms of another length), -EPROTONOSUPPORT another version.  ret_s
 * written only on success. */
int samples_parse(const char *text, size_t len, struct sample_set *ret_s);

#endif
