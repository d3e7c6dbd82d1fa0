/* agent/gpumem.h: has the old gang's GPU memory been released?  The rule the daemon applies
 * between "the gang's process group and cgroup are empty" and starting the next gang.
 *
 * Pure apart from the NVML calls, which go through a small table of NVML's own entry points
 * (agent/gpu.c fills it from dlopen("libnvidia-ml.so.1"); the unit tests pass a fake), so the
 * decision is tested without a GPU.  Without NVML there is nothing to ask: only the cgroup is
 * waited for (GPUMEM_NO_NVML), and the daemon says so once.
 */
#ifndef DROVER_AGENT_GPUMEM_H
#define DROVER_AGENT_GPUMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* nvmlProcessInfo_v2_t / _v3_t (nvml.h, stable ABI): what a compute process holds on a GPU. */
struct gpumem_proc {
    unsigned int pid;
    unsigned long long used;   /* bytes; GPUMEM_USED_UNKNOWN when NVML cannot say */
    unsigned int gpu_instance, compute_instance;
};
#define GPUMEM_USED_UNKNOWN 0xffffffffffffffffULL /* NVML_VALUE_NOT_AVAILABLE */
#define GPUMEM_NVML_INSUFFICIENT_SIZE 7          /* NVML_ERROR_INSUFFICIENT_SIZE */
#define GPUMEM_MAX_PROCS 64
/* How long the daemon waits for the memory after the gang's processes are gone. */
#define GPUMEM_DEADLINE_S 30.0

/* The NVML entry points used, with NVML's signatures (0 = NVML_SUCCESS). */
struct gpumem_nvml {
    int (*by_index)(unsigned int index, void **ret_device);           /* nvmlDeviceGetHandleByIndex_v2 */
    int (*compute_procs)(void *device, unsigned int *inout_count,
                         struct gpumem_proc *procs);                   /* ...GetComputeRunningProcesses_v3 */
};

enum gpumem_verdict {
    GPUMEM_NO_NVML, /* nothing to ask: go (only the cgroup was waited for) */
    GPUMEM_FREE,    /* no process outside our live gangs holds memory on these GPUs: go */
    GPUMEM_HELD,    /* some does, and the deadline has not passed: ask again later */
    GPUMEM_TIMEOUT, /* some still does at the deadline: go, and journal who holds what */
};
const char *gpumem_verdict_name(enum gpumem_verdict v);

/* Decide for the GPUs gpus[0..ngpus) (NVML indices) after waited_s seconds of waiting.
 * nv NULL: GPUMEM_NO_NVML.  Processes for which ours(pid, ud) is true (another live gang of this
 * agent) are not counted.  A GPU NVML cannot answer for is not waited for (said in why).  why
 * gets one line naming the GPU, pid and memory of each holder ("GPU 1: pid 4242 holds 812 MiB"). */
enum gpumem_verdict gpumem_decide(const struct gpumem_nvml *nv, const unsigned int *gpus, int ngpus,
                                  bool (*ours)(pid_t pid, void *ud), void *ud, double waited_s,
                                  double deadline_s, char *why, size_t why_sz);

#endif
