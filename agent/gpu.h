/* agent/gpu.h: per-GPU utilisation, memory and temperature from NVML (dlopen'd). */
#ifndef DROVER_AGENT_GPU_H
#define DROVER_AGENT_GPU_H

#include <errno.h>
#include <stdbool.h>
#include <sys/types.h>

#include "agent/gpumem.h"
#include "common/status.h"

/* Load NVML once; -ENOENT when the library or a driver is absent (then every query is invalid). */
int gpu_open(void);
/* Figures for the device with this NVML index (the CUDA_VISIBLE_DEVICES entry of the rank);
 * ret->valid false when unknown.  Never fails. */
void gpu_query(int index, struct gpu_status *ret);

/* NVML's entry points for agent/gpumem.h; NULL when NVML or its process listing
 * (nvmlDeviceGetComputeRunningProcesses_v3 or _v2) is absent.  Static storage. */
const struct gpumem_nvml *gpu_nvml(void);

/* Processes holding a GPU device node (/dev/nvidia<N>) open, skipping those for which skip(pid,
 * ud) is true (our own live gangs).  Up to max pids into ret_pids; returns how many were found
 * (may exceed max).  Reads /proc only; on machines without GPUs returns 0.  Cases-field C13:
 * a killed trainer's child can keep GPU memory, invisible to nvidia-smi in the container. */
int gpu_find_holders(pid_t *ret_pids, int max, bool (*skip)(pid_t pid, void *ud), void *ud);

#endif
