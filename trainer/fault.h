/* trainer/fault.h: test-only fault knobs from DROVER_TRAIN_FAULT (alias TRAINER_FAULT), a comma
 * list of key=value (docs/trainer.md).  Never set in production; parsing is strict so a typo in a
 * test fails loudly. */
#ifndef DROVER_TRAINER_FAULT_H
#define DROVER_TRAINER_FAULT_H

#include <stdint.h>

struct train_faults {
    double slow;             /* >= 1: stretch each step to slow x its time by sleeping; 0 off */
    double warmup_slow;      /* > 0: slow (default 2) applies only this many seconds from start */
    int64_t crash_at;        /* abort() when starting this step (1-based count); -1 off */
    int64_t hang_at;         /* block forever (ignoring SIGTERM) at this step; -1 off */
    int64_t nan_at;          /* from this step on the loss is NaN; -1 off */
    int exit_immediately;    /* exit with this code right after start; -1 off */
    int init_fail_rank;      /* this rank exits with TX_DEVICE during init; -1 off */
    int ckpt_chunk_delay_ms; /* sleep per MiB while writing checkpoints */
    double ckpt_sleep;       /* seconds to sleep inside phase checkpoint before writing */
};

/* Parse spec (may be NULL or empty: all off).  -EINVAL for an unknown key or bad value;
 * *ret_f written only on success. */
int fault_parse(const char *spec, struct train_faults *ret_f);

#endif
