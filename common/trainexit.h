/* common/trainexit.h: drover-train's exit codes, the contract between the trainer (which exits
 * with them), the agent (whose restart policy reads `retry`: agent/jobmachine.c) and the
 * controller (whose verdicts name an exit with `text`: controller/deploy/probation.c).
 * docs/errors.md, "drover-train", shows the same table; tests/unit/test-common-trainexit.c
 * fails when the two disagree.  Codes are never renumbered or reused.
 */
#ifndef DROVER_TRAINEXIT_H
#define DROVER_TRAINEXIT_H

#include <stdbool.h>
#include <stddef.h>

/* docs/errors.md's "retry helps?" column. */
enum train_retry {
    TRAIN_RETRY_NA = 0, /* "—": not a failure */
    TRAIN_RETRY_NO,     /* restarting the same release cannot fix it: never retried blindly */
    TRAIN_RETRY_MAYBE,
    TRAIN_RETRY_YES,
};

/* The table, one row per code: enum name, code, docs/errors.md's name, retry, text for people.
 * The enum and train_exit_table[] are both generated from it, so a new code is one new row
 * (and a row in docs/errors.md, or test-common-trainexit fails). */
#define TRAIN_EXITS(X)                                                                  \
    /* finished, or stopped cleanly after SIGTERM/SIGINT with a checkpoint */         \
    X(TX_OK, 0, "ok", TRAIN_RETRY_NA, "finished")                                      \
    /* unexpected internal error */                                                    \
    X(TX_FAILURE, 1, "failure", TRAIN_RETRY_MAYBE, "failure")                          \
    /* bad command line or fault knob */                                               \
    X(TX_USAGE, 2, "usage", TRAIN_RETRY_NO, "usage error")                             \
    /* config file missing or invalid */                                               \
    X(TX_CONFIG, 3, "config", TRAIN_RETRY_NO, "config error")                          \
    /* data shard missing, invalid, or token outside the vocabulary */                 \
    X(TX_DATA, 4, "data", TRAIN_RETRY_NO, "data error")                                \
    /* checkpoint could not be written or read (other than disk full) */               \
    X(TX_CHECKPOINT, 5, "checkpoint", TRAIN_RETRY_MAYBE, "checkpoint error")           \
    /* ENOSPC / EDQUOT while writing a checkpoint or shard */                          \
    X(TX_DISK_FULL, 6, "disk_full", TRAIN_RETRY_NO, "disk full")                       \
    /* 3 consecutive non-finite steps; no checkpoint written */                        \
    X(TX_DIVERGED, 7, "diverged", TRAIN_RETRY_NO, "diverged: non-finite loss")         \
    /* another rank died or went silent past the deadline */                           \
    X(TX_PEER_LOST, 8, "peer_lost", TRAIN_RETRY_YES, "peer lost")                      \
    /* backend/device could not start (no GPU, driver, library) */                     \
    X(TX_DEVICE, 9, "device", TRAIN_RETRY_MAYBE, "device error")                       \
    /* out of host or device memory */                                                 \
    X(TX_NOMEM, 10, "nomem", TRAIN_RETRY_NO, "out of memory")                          \
    /* selftest found a problem */                                                     \
    X(TX_SELFTEST, 11, "selftest", TRAIN_RETRY_NO, "selftest failed")                  \
    /* checkpointed and stopped because another rank was stopped, not this one */      \
    X(TX_PEER_STOPPED, 12, "peer_stopped", TRAIN_RETRY_YES,                            \
      "stopped because another rank was stopped")                                      \
    /* 20..29 are reserved for the CUDA backend's check macros (docs/errors.md) */     \
    X(TX_CUDA, 20, "cuda", TRAIN_RETRY_MAYBE, "CUDA error")                            \
    X(TX_NCCL, 21, "nccl", TRAIN_RETRY_MAYBE, "NCCL error")                            \
    X(TX_CUBLAS, 22, "cublas", TRAIN_RETRY_MAYBE, "cuBLAS error")

/* Exit 127 is no drover-train code: it is a shell's, env's ("#!/usr/bin/env python" without
 * python on PATH) or the dynamic loader's ("error while loading shared libraries: libz.so.1")
 * "not found".  One wording wherever it is named: the agent's preflight (which adds ": its own
 * words are above") and a rank's exit in the agent's reason and the controller's verdict. */
#define TRAIN_EXIT_NOT_FOUND 127
#define TRAIN_EXIT_NOT_FOUND_TEXT "a command it runs, or a shared library it needs, was not found"

#define TRAIN_EXIT_ENUM(id, code, name, retry, text) id = code,
enum train_exit { TRAIN_EXITS(TRAIN_EXIT_ENUM) };
#undef TRAIN_EXIT_ENUM

struct train_exit_info {
    int code;
    const char *name;        /* docs/errors.md's name column: "disk_full" */
    enum train_retry retry;
    const char *text;        /* for people, in verdicts: "disk full" */
};

/* The table, ordered by code; train_exit_count entries. */
extern const struct train_exit_info train_exit_table[];
extern const size_t train_exit_count;

/* The row of code; NULL for a code drover-train never exits with (a foreign worker's). */
const struct train_exit_info *train_exit_info(int code);
/* true for a drover-train code whose retry is "no" (usage, config, data, disk full, diverged,
 * nomem, selftest): the agent does not restart the same release for it. */
bool train_exit_is_nonretryable(int code);
/* true for peer_lost (8) and peer_stopped (12): the rank ended because of a rank elsewhere (it
 * died, went silent, or was stopped), so its exit names no cause of its own.  A verdict looks
 * for the cause in the other containers (controller/deploy/probation.c). */
bool train_exit_is_peer_effect(int code);
/* docs/errors.md's word for a retry value: "—", "no", "maybe", "yes". */
const char *train_retry_word(enum train_retry r);

#endif
