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

/* How a training step reaches the GPU, from DROVER_STEP (docs/cuda.md), one GPU only (data
 * parallel runs plain).  The same kernels and arguments in every mode: the same bits.
 *   plain   tokens copied from pageable memory at the forward's start, the wte-gradient buckets
 *           built and copied from pageable memory during the backward, every kernel launched
 *           one by one;
 *   staged  tokens and buckets built on the host before the step and uploaded in one copy
 *           from pinned memory on a copy stream that overlaps the previous step's update;
 *   graph   staged, and the forward and the backward captured once (second step) as two CUDA
 *           graphs that each step replays (two launches instead of ~400). */
enum cuda_step_mode { CUDA_STEP_PLAIN, CUDA_STEP_STAGED, CUDA_STEP_GRAPH };
#define CUDA_STEP_DEFAULT CUDA_STEP_GRAPH
/* s NULL or "": CUDA_STEP_DEFAULT; else "plain", "staged" or "graph".  Returns 0, or -EINVAL
 * for anything else (*ret_mode untouched).  Built with the CUDA backend only. */
int cuda_step_mode_parse(const char *s, enum cuda_step_mode *ret_mode);
/* "plain", "staged", "graph" ("?" for anything else). */
const char *cuda_step_mode_name(enum cuda_step_mode m);

#endif
