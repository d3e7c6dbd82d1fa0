/* agent/gpu.h: per-GPU utilisation, memory and temperature from NVML (dlopen'd). */
#ifndef DROVER_AGENT_GPU_H
#define DROVER_AGENT_GPU_H

#include <errno.h>
#include <stdbool.h>
#include <sys/types.h>

#include "agent/gpumem.h"
#include "common/status.h"

/* The NVML entry points gpu_query() reads, with NVML's own signatures (0 = NVML_SUCCESS);
 * agent/gpu.c fills them from dlopen, the unit tests pass a fake.  uuid is NULL when the NVML
 * lacks nvmlDeviceGetUUID (the figures are still read; the UUID stays unknown). */
struct gpu_nvml_util { unsigned int gpu, memory; };
struct gpu_nvml_mem { unsigned long long total, free, used; };
struct gpu_nvml {
    int (*by_index)(unsigned int index, void **ret_device);           /* nvmlDeviceGetHandleByIndex_v2 */
    int (*util)(void *device, struct gpu_nvml_util *ret);             /* nvmlDeviceGetUtilizationRates */
    int (*mem)(void *device, struct gpu_nvml_mem *ret);               /* nvmlDeviceGetMemoryInfo */
    int (*temp)(void *device, int sensor, unsigned int *ret);         /* nvmlDeviceGetTemperature */
    int (*thresh)(void *device, int kind, unsigned int *ret);         /* ...GetTemperatureThreshold */
    int (*uuid)(void *device, char *buf, unsigned int length);        /* nvmlDeviceGetUUID */
};

/* gpu_query() over table t: ret->valid false (and nothing else set) when the device cannot be
 * read; ret->index = index; ret->uuid only when NVML gave one that gpu_uuid_is_valid() (a
 * failing or garbled answer leaves it "": the label is then absent, never junk).  Pure. */
void gpu_query_with(const struct gpu_nvml *t, int index, struct gpu_status *ret);

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
