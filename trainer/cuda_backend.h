/* trainer/cuda_backend.h: what the CUDA backend offers beyond struct backend_ops (backend.h):
 * the peak FLOP/s used for MFU (also backend_cuda.peak_flops) and the preflight self-test behind `drover-train selftest`.
 * Declared whether or not the backend is built; the definitions exist only with DROVER_HAVE_CUDA.
 */
#ifndef DROVER_TRAINER_CUDA_BACKEND_H
#define DROVER_TRAINER_CUDA_BACKEND_H

#include <stdio.h>

#include "trainer/model.h"

/* Dense bf16 peak of the device in FLOP/s used as the MFU denominator: 989.5e12 (H100/H200 SXM
 * datasheet) unless DROVER_PEAK_TFLOPS is set in the environment. */
double cuda_peak_flops(void);

/* The preflight the agent runs before switching a release: GPU device nodes openable, driver
 * new enough for the CUDA runtime linked, a device visible, cuBLASLt and NCCL loaded (versions
 * and the paths they were loaded from), and a few tiny training steps with a finite, falling
 * loss.  One line per check on out ("ok   ..." / "FAIL ... cause ... fix: ..."), the first
 * failure ends it.  device: index among the visible GPUs.  Returns 0 when all pass, -ENODEV (no
 * driver / GPU / device node), -ENOEXEC (driver older than the runtime), -ELIBBAD (a library
 * missing or broken), -EIO (the training step failed or gave a non-finite loss). */
int cuda_selftest(FILE *out, int device);

#endif
