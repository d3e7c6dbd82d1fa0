/* trainer/exitcode.h: drover-train's exit codes; the table in docs/errors.md is the contract (the
 * agent maps them to restart policy).  Codes are never renumbered or reused. */
#ifndef DROVER_TRAINER_EXITCODE_H
#define DROVER_TRAINER_EXITCODE_H

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

#endif
