/* common/trainexit.c: drover-train's exit code table (see trainexit.h).  Pure data. */
#include "common/trainexit.h"

const struct train_exit_info train_exit_table[] = {
    { TX_OK, "ok", TRAIN_RETRY_NA, "finished" },
    { TX_FAILURE, "failure", TRAIN_RETRY_MAYBE, "failure" },
    { TX_USAGE, "usage", TRAIN_RETRY_NO, "usage error" },
    { TX_CONFIG, "config", TRAIN_RETRY_NO, "config error" },
    { TX_DATA, "data", TRAIN_RETRY_NO, "data error" },
    { TX_CHECKPOINT, "checkpoint", TRAIN_RETRY_MAYBE, "checkpoint error" },
    { TX_DISK_FULL, "disk_full", TRAIN_RETRY_NO, "disk full" },
    { TX_DIVERGED, "diverged", TRAIN_RETRY_NO, "diverged: non-finite loss" },
    { TX_PEER_LOST, "peer_lost", TRAIN_RETRY_YES, "peer lost" },
    { TX_DEVICE, "device", TRAIN_RETRY_MAYBE, "device error" },
    { TX_NOMEM, "nomem", TRAIN_RETRY_NO, "out of memory" },
    { TX_SELFTEST, "selftest", TRAIN_RETRY_NO, "selftest failed" },
    { TX_CUDA, "cuda", TRAIN_RETRY_MAYBE, "CUDA error" },
    { TX_NCCL, "nccl", TRAIN_RETRY_MAYBE, "NCCL error" },
    { TX_CUBLAS, "cublas", TRAIN_RETRY_MAYBE, "cuBLAS error" },
};
const size_t train_exit_count = sizeof train_exit_table / sizeof train_exit_table[0];

const struct train_exit_info *train_exit_info(int code)
{
    for (size_t i = 0; i < train_exit_count; i++)
        if (train_exit_table[i].code == code)
            return &train_exit_table[i];
    return 0;
}

bool train_exit_is_nonretryable(int code)
{
    const struct train_exit_info *x = train_exit_info(code);
    return x && x->retry == TRAIN_RETRY_NO;
}

const char *train_retry_word(enum train_retry r)
{
    switch (r) {
    case TRAIN_RETRY_NO: return "no";
    case TRAIN_RETRY_MAYBE: return "maybe";
    case TRAIN_RETRY_YES: return "yes";
    case TRAIN_RETRY_NA: break;
    }
    return "—";
}
