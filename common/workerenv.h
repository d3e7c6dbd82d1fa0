/* common/workerenv.h: which extra environment variables a job may give its workers.
 *
 * The agent sets the worker environment itself (docs/protocol.md, "Worker environment"):
 * torchrun's names, PATH, HOME, LANG and every DROVER_* name (except DROVER_TRAIN_*, the
 * trainer's own knobs).  A job's extras (`env = NAME=VALUE` in the inventory, `--env` for the
 * agent) may not replace any of them, and must be on an allow-list.  One list, used by both the agent (agent/spec.c, which
 * enforces it) and the controller (controller/inventory.c, which reports it with the key's
 * line before anything connects).
 */
#ifndef DROVER_WORKERENV_H
#define DROVER_WORKERENV_H

#include <stddef.h>

#define WORKER_ENV_MAX 16        /* extras per job */
#define WORKER_ENV_BYTES 512     /* bytes of one NAME=value, NUL included */

/* 0 when kv is "NAME=value" with NAME = [A-Za-z_][A-Za-z0-9_]*, not reserved and on the
 * allow-list (worker_env_allowed_text()); -EINVAL (bad form, reserved name), -EPERM (not on the
 * allow-list: LD_PRELOAD, LD_LIBRARY_PATH, PYTHONPATH, ...) or -E2BIG (too long) with a reason
 * for people in why. */
int worker_env_check(const char *kv, char *why, size_t whysz);

/* The allow-list for messages and docs (a static string). */
const char *worker_env_allowed_text(void);

#endif
