/* agent/gpu.c: GPU figures for the status document through NVML, loaded with
 * dlopen("libnvidia-ml.so.1") so the agent runs (with gpu null) where there is no driver.
 * Read-only: never changes a device setting. */
#include "agent/gpu.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdbool.h>
#include <string.h>

#include "common/log.h"

/* The few NVML types and entry points we use (nvml.h, stable ABI). */
typedef void *nvml_device_t;
struct nvml_util { unsigned int gpu, memory; };
struct nvml_mem { unsigned long long total, free, used; };
#define NVML_TEMPERATURE_GPU 0
#define NVML_TEMPERATURE_THRESHOLD_SLOWDOWN 1

static struct {
    bool tried, ok;
    void *lib;
    int (*init)(void);
    int (*by_index)(unsigned int, nvml_device_t *);
    int (*util)(nvml_device_t, struct nvml_util *);
    int (*mem)(nvml_device_t, struct nvml_mem *);
    int (*temp)(nvml_device_t, int, unsigned int *);
    int (*thresh)(nvml_device_t, int, unsigned int *);
    struct gpumem_nvml table; /* for gpumem_decide; compute_procs NULL when absent */
} nv;

int gpu_open(void)
{
    if (nv.tried)
        return nv.ok ? 0 : -ENOENT;
    nv.tried = true;
    nv.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!nv.lib) {
        log_debug("gpu: NVML not available: %s", dlerror());
        return -ENOENT;
    }
    *(void **)&nv.init = dlsym(nv.lib, "nvmlInit_v2");
    *(void **)&nv.by_index = dlsym(nv.lib, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&nv.util = dlsym(nv.lib, "nvmlDeviceGetUtilizationRates");
    *(void **)&nv.mem = dlsym(nv.lib, "nvmlDeviceGetMemoryInfo");
    *(void **)&nv.temp = dlsym(nv.lib, "nvmlDeviceGetTemperature");
    *(void **)&nv.thresh = dlsym(nv.lib, "nvmlDeviceGetTemperatureThreshold");
    if (!nv.init || !nv.by_index || !nv.util || !nv.mem || !nv.temp || !nv.thresh || nv.init() != 0) {
        log_warn("gpu: NVML found but unusable; GPU figures will be null");
        dlclose(nv.lib);
        nv.lib = NULL;
        return -ENOENT;
    }
    nv.ok = true;
    /* nvmlProcessInfo_v2_t and _v3_t share one layout (struct gpumem_proc) */
    *(void **)&nv.table.compute_procs = dlsym(nv.lib, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (!nv.table.compute_procs)
        *(void **)&nv.table.compute_procs = dlsym(nv.lib, "nvmlDeviceGetComputeRunningProcesses_v2");
    nv.table.by_index = nv.by_index;
    return 0;
}

const struct gpumem_nvml *gpu_nvml(void)
{
    return gpu_open() == 0 && nv.table.compute_procs ? &nv.table : NULL;
}

void gpu_query(int index, struct gpu_status *ret)
{
    memset(ret, 0, sizeof *ret);
    if (index < 0 || gpu_open() < 0)
        return;
    nvml_device_t d;
    struct nvml_util u;
    struct nvml_mem m;
    unsigned int t = 0, slow = 0;
    if (nv.by_index((unsigned)index, &d) != 0 || nv.util(d, &u) != 0 || nv.mem(d, &m) != 0)
        return;
    (void)nv.temp(d, NVML_TEMPERATURE_GPU, &t);
    if (nv.thresh(d, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &slow) != 0)
        slow = 0;
    ret->valid = true;
    ret->util = u.gpu;
    ret->mem_used = (int64_t)m.used;
    ret->mem_total = (int64_t)m.total;
    ret->temp = t;
    ret->slowdown_temp = slow;
}

static bool fd_is_gpu(const char *target)
{
    /* /dev/nvidia0, /dev/nvidia1, ...: the per-GPU nodes, not nvidiactl / nvidia-uvm */
    if (strncmp(target, "/dev/nvidia", 11) != 0)
        return false;
    const char *p = target + 11;
    if (*p < '0' || *p > '9')
        return false;
    while (*p >= '0' && *p <= '9')
        p++;
    return *p == '\0';
}

int gpu_find_holders(pid_t *ret_pids, int max, bool (*skip)(pid_t pid, void *ud), void *ud)
{
    DIR *proc = opendir("/proc");
    if (!proc)
        return 0;
    int n = 0;
    pid_t self = getpid();
    struct dirent *de;
    while ((de = readdir(proc))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 0 || pid == self || (skip && skip((pid_t)pid, ud)))
            continue;
        char dir[64];
        snprintf(dir, sizeof dir, "/proc/%ld/fd", pid);
        DIR *fds = opendir(dir);
        if (!fds)
            continue;
        struct dirent *fe;
        bool holds = false;
        while (!holds && (fe = readdir(fds))) {
            char link[64 + sizeof fe->d_name], target[64];
            if (fe->d_name[0] == '.')
                continue;
            snprintf(link, sizeof link, "%s/%s", dir, fe->d_name);
            ssize_t len = readlink(link, target, sizeof target - 1);
            if (len <= 0)
                continue;
            target[len] = '\0';
            holds = fd_is_gpu(target);
        }
        closedir(fds);
        if (holds) {
            if (n < max)
                ret_pids[n] = (pid_t)pid;
            n++;
        }
    }
    closedir(proc);
    return n;
}
