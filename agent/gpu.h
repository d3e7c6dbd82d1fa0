/* agent/gpu.h: per-GPU utilisation, memory and temperature from NVML (dlopen'd). */
#ifndef DROVER_AGENT_GPU_H
#define DROVER_AGENT_GPU_H

#include <errno.h>

#include "common/status.h"

/* Load NVML once; -ENOENT when the library or a driver is absent (then every query is invalid). */
int gpu_open(void);
/* Figures for the device with this NVML index (the CUDA_VISIBLE_DEVICES entry of the rank);
 * ret->valid false when unknown.  Never fails. */
void gpu_query(int index, struct gpu_status *ret);

#endif
