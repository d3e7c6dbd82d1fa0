/* common/workerenv.c: see workerenv.h. */
#include "common/workerenv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"

static const char *const reserved_env[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
    "MASTER_PORT", "CUDA_VISIBLE_DEVICES", "PATH", "HOME", "LANG",
};

/* What a job may add to its workers' environment: an allow-list, not a deny-list, so that no
 * loader or shell hook (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, BASH_ENV, ENV, GCONV_PATH,
 * MALLOC_*, ...) can be slipped into a worker (issue 12).  PYTHONPATH is allowed on purpose:
 * PyTorch releases need it, and it only reaches the Python the release itself runs.
 * docs/agent.md lists the same. */
static const char *const allowed_prefix[] = {
    "DROVER_TRAIN_", "NCCL_", "CUDA_", "CUBLAS_", "CUBLASLT_", "CUDNN_", "TORCH_", "PYTORCH_",
    "OMP_", "MKL_", "OPENBLAS_", "HF_", "WANDB_", "TOKENIZERS_",
};
static const char *const allowed_name[] = {
    "TZ", "LC_ALL", "TMPDIR", "PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONHASHSEED",
    "PYTHONFAULTHANDLER", "PYTHONDONTWRITEBYTECODE",
};

static bool name_is_allowed(const char *name, size_t len)
{
    for (size_t i = 0; i < ARRAY_SIZE(allowed_name); i++)
        if (strlen(allowed_name[i]) == len && !strncmp(name, allowed_name[i], len))
            return true;
    for (size_t i = 0; i < ARRAY_SIZE(allowed_prefix); i++) {
        size_t pl = strlen(allowed_prefix[i]);
        if (len > pl && !strncmp(name, allowed_prefix[i], pl))
            return true;
    }
    return false;
}

const char *worker_env_allowed_text(void)
{
    return "DROVER_TRAIN_*, NCCL_*, CUDA_* (not CUDA_VISIBLE_DEVICES), CUBLAS_*, CUBLASLT_*, "
           "CUDNN_*, TORCH_*, PYTORCH_*, OMP_*, MKL_*, OPENBLAS_*, HF_*, WANDB_*, TOKENIZERS_*, "
           "TZ, LC_ALL, TMPDIR, PYTHONPATH, PYTHONUNBUFFERED, PYTHONHASHSEED, "
           "PYTHONFAULTHANDLER, PYTHONDONTWRITEBYTECODE";
}

int worker_env_check(const char *kv, char *why, size_t whysz)
{
    const char *eq = strchr(kv, '=');
    size_t klen = eq ? (size_t)(eq - kv) : 0;
    if (!eq || klen == 0) {
        snprintf(why, whysz, "'%s' is not NAME=VALUE", kv);
        return -EINVAL;
    }
    bool ok = !(kv[0] >= '0' && kv[0] <= '9');
    for (size_t i = 0; i < klen && ok; i++) {
        char c = kv[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    }
    if (!ok) {
        snprintf(why, whysz, "'%.*s' is not a variable name (letters, digits, _; not starting with a digit)",
                 (int)klen, kv);
        return -EINVAL;
    }
    if (!strncmp(kv, "DROVER_", 7) && strncmp(kv, "DROVER_TRAIN_", 13) != 0) {
        /* DROVER_HEARTBEAT_FD etc. are the agent's; the trainer's own knobs are not */
        snprintf(why, whysz, "%.*s is set by the agent (DROVER_* names other than DROVER_TRAIN_* are reserved)",
                 (int)klen, kv);
        return -EINVAL;
    }
    for (size_t i = 0; i < ARRAY_SIZE(reserved_env); i++)
        if (strlen(reserved_env[i]) == klen && !strncmp(kv, reserved_env[i], klen)) {
            snprintf(why, whysz, "%s is set by the agent for every worker (docs/protocol.md, \"Worker environment\")",
                     reserved_env[i]);
            return -EINVAL;
        }
    if (!name_is_allowed(kv, klen)) {
        snprintf(why, whysz, "%.*s is not allowed: the worker environment is an allow-list (%s)",
                 (int)klen, kv, worker_env_allowed_text());
        return -EPERM;
    }
    if (strlen(kv) >= WORKER_ENV_BYTES) {
        snprintf(why, whysz, "%.*s: NAME=VALUE is over %d bytes", (int)klen, kv, WORKER_ENV_BYTES - 1);
        return -E2BIG;
    }
    return 0;
}
