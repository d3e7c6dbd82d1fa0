/* trainer/fault.h: test-only fault knobs from DROVER_TRAIN_FAULT (alias TRAINER_FAULT), a comma
 * list of key=value (docs/trainer.md), and the hooks that act on the step knobs.  Never set in production; parsing is strict so a typo in a
 * test fails loudly. */
#ifndef DROVER_TRAINER_FAULT_H
#define DROVER_TRAINER_FAULT_H

#include <stdint.h>

struct train_faults {
    double slow;             /* >= 1: stretch each step to slow x its time by sleeping; 0 off */
    double warmup_slow;      /* > 0: slow (default 2) applies only this many seconds from start */
    int64_t crash_at;        /* abort() when starting this step (1-based count); -1 off */
    int64_t crash_after;     /* abort() when starting this process's N-th step (a resumed run
                                counts from its first step); -1 off */
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

/* The training loop's two hooks (trainer/train.c), so that its step holds no test scaffolding.
 * Before step `step` (1-based) starts: crash_at (crash_after: the process's N-th step, counted
 * from the first step it is called with) aborts, hang_at blocks forever.  Returns at
 * once when no knob applies. */
void fault_step_begin(const struct train_faults *f, int64_t step);
/* After step's forward+backward and gradient averaging, elapsed_s into the step and
 * since_start_s into the run: nan_at makes *loss NaN (the step then counts as non-finite and
 * skips its update); slow (warmup_slow: only early on) sleeps to stretch the step. */
void fault_step_end(const struct train_faults *f, int64_t step, double since_start_s,
                    double elapsed_s, float *loss);

#endif
