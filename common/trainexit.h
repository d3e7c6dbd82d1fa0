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

enum train_exit {
    TX_OK = 0,          /* finished, or stopped cleanly after SIGTERM/SIGINT with a checkpoint */
    TX_FAILURE = 1,     /* unexpected internal error */
    TX_USAGE = 2,       /* bad command line or fault knob */
    TX_CONFIG = 3,      /* config file missing or invalid */
    TX_DATA = 4,        /* data shard missing, invalid, or token outside the vocabulary */
    TX_CHECKPOINT = 5,  /* checkpoint could not be written or read (other than disk full) */
    TX_DISK_FULL = 6,   /* ENOSPC / EDQUOT while writing a checkpoint or shard */
    TX_DIVERGED = 7,    /* 3 consecutive non-finite steps; no checkpoint written */
    TX_PEER_LOST = 8,   /* another rank died or went silent past the deadline */
    TX_DEVICE = 9,      /* backend/device could not start (no GPU, driver, library) */
    TX_NOMEM = 10,      /* out of host or device memory */
    TX_SELFTEST = 11,   /* selftest found a problem */
    /* 20..29 are reserved for the CUDA backend's check macros (docs/errors.md) */
    TX_CUDA = 20,
    TX_NCCL = 21,
    TX_CUBLAS = 22,
};

/* docs/errors.md's "retry helps?" column. */
enum train_retry {
    TRAIN_RETRY_NA = 0, /* "—": not a failure */
    TRAIN_RETRY_NO,     /* restarting the same release cannot fix it: never retried blindly */
    TRAIN_RETRY_MAYBE,
    TRAIN_RETRY_YES,
};

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
/* docs/errors.md's word for a retry value: "—", "no", "maybe", "yes". */
const char *train_retry_word(enum train_retry r);

#endif
