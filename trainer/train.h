/* trainer/train.h: `drover-train train`: the shared training loop (any backend), with data,
 * schedule, checkpoints, heartbeats, signals, data parallelism and the fault knobs.
 * Program code: logs its failures once and returns an exit code from trainer/exitcode.h. */
#ifndef DROVER_TRAINER_TRAIN_H
#define DROVER_TRAINER_TRAIN_H

#include <stdint.h>

struct train_args {
    const char *config;   /* INI file (required) */
    const char *ckpt_dir; /* NULL: $DROVER_RUN_DIR/checkpoints, else ./checkpoints */
    int64_t max_steps;    /* stop after this step (the LR schedule still uses the config's
                             max_steps, so a run can be split exactly); -1: no extra limit */
    const char *device;   /* NULL: from the config */
};

/* Run training to completion or until SIGTERM/SIGINT.  Returns a TX_* exit code. */
int train_run(const struct train_args *a);

#endif
