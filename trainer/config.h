/* trainer/config.h: drover-train's INI configuration (libinih) and the learning-rate schedule.
 *
 * Sections and keys (docs/trainer.md has the reference with defaults):
 *   [model]   layers heads dim vocab seq
 *   [train]   batch lr min_lr_frac warmup_steps max_steps weight_decay beta1 beta2 eps grad_clip
 *             seed checkpoint_every keep_checkpoints log_every val_every val_batches
 *   [data]    train val
 *   [backend] device threads dist_timeout
 * Unknown sections/keys, malformed values and out-of-range values are errors naming the file, the
 * line and the key.  Lines are limited to 200 bytes (Debian's libinih); longer ones are errors.
 * Never: touch anything but the config file.
 */
#ifndef DROVER_TRAINER_CONFIG_H
#define DROVER_TRAINER_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/model.h"

#define TRAIN_CONFIG_PATH_MAX 512

struct train_config {
    struct gpt_config model;   /* checked by train_config_load (vocab_padded set) */
    int batch;                 /* micro-batch B per rank */
    double lr;                 /* peak learning rate */
    double min_lr_frac;        /* final lr = lr * min_lr_frac (cosine floor) */
    int64_t warmup_steps;      /* linear warmup from lr/warmup to lr */
    int64_t max_steps;         /* 0: run until stopped (constant lr after warmup) */
    double weight_decay, beta1, beta2, eps, grad_clip; /* grad_clip <= 0: off */
    uint64_t seed;
    int64_t checkpoint_every;  /* steps; 0: only at exit */
    int keep_checkpoints;      /* newest K of this model shape are kept (>= 1) */
    int64_t log_every;         /* human progress line every N steps (0: never) */
    int64_t val_every;         /* validation loss on [data] val every N steps (0: never) */
    int val_batches;           /* micro-batches per validation (the same ones every time) */
    char train[TRAIN_CONFIG_PATH_MAX]; /* shard path or glob */
    char val[TRAIN_CONFIG_PATH_MAX];   /* optional */
    char device[16];           /* "cpu" or "cuda" */
    int threads;               /* CPU matmul threads */
    double dist_timeout;       /* seconds, bound on every collective and the rendezvous */
};

/* Defaults for every key (a tiny model; train path empty). */
void train_config_defaults(struct train_config *c);

/* Load path on top of defaults.  Returns 0 and fills *ret_c; -ENOENT when the file cannot be
 * opened; -EINVAL for any error in it.  On failure errbuf[errsz] holds one line like
 * "cfg.ini:7: [train] lr: 'abc' is not a number" and *ret_c is untouched. */
int train_config_load(const char *path, struct train_config *ret_c, char *errbuf, size_t errsz);

/* Parse config text (len bytes) as if read from a file called name; same contract.  For tests
 * and the fuzz target. */
int train_config_parse(const char *name, const char *text, size_t len,
                       struct train_config *ret_c, char *errbuf, size_t errsz);

/* Learning rate for 0-based step: linear warmup over warmup_steps, then cosine decay to
 * lr*min_lr_frac at max_steps (constant lr when max_steps is 0). */
double train_lr_at(const struct train_config *c, int64_t step);

#endif
