/* trainer/selftest.h: `drover-train selftest`: a tiny in-memory training run on each backend,
 * reported as one JSON object on stdout.  The CUDA backend adds its checks through
 * selftest_cuda_checks() (a weak default returns -ENOSYS when it is not built).
 */
#ifndef DROVER_TRAINER_SELFTEST_H
#define DROVER_TRAINER_SELFTEST_H

#include <jansson.h>

/* Run the checks for device "cpu", "cuda" or "all" (NULL: cpu); print the
 * report to stdout.  Returns a TX_* exit code (TX_OK when every check passed). */
int selftest_run(const char *device);

/* Hook for the CUDA engineer (trainer/cuda_backend.c or kernels/): append one object per check
 * to the array checks, {"name": "...", "ok": true|false, "detail": "..."}, and return 0 when all
 * passed, -EIO when one failed, -ENOSYS when there is no CUDA backend (the default). */
int selftest_cuda_checks(json_t *checks);

#endif
