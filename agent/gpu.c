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

/* nvml.h's constants we use (stable ABI); the entry points: struct gpu_nvml in gpu.h. */
#define NVML_TEMPERATURE_GPU 0
#define NVML_TEMPERATURE_THRESHOLD_SLOWDOWN 1

static struct {
    bool tried, ok;
    void *lib;
    int (*init)(void);
    struct gpu_nvml q;
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
    *(void **)&nv.q.by_index = dlsym(nv.lib, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&nv.q.util = dlsym(nv.lib, "nvmlDeviceGetUtilizationRates");
    *(void **)&nv.q.mem = dlsym(nv.lib, "nvmlDeviceGetMemoryInfo");
    *(void **)&nv.q.temp = dlsym(nv.lib, "nvmlDeviceGetTemperature");
    *(void **)&nv.q.thresh = dlsym(nv.lib, "nvmlDeviceGetTemperatureThreshold");
    *(void **)&nv.q.uuid = dlsym(nv.lib, "nvmlDeviceGetUUID"); /* optional */
    if (!nv.init || !nv.q.by_index || !nv.q.util || !nv.q.mem || !nv.q.temp || !nv.q.thresh || nv.init() != 0) {
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
    nv.table.by_index = nv.q.by_index;
    return 0;
}

const struct gpumem_nvml *gpu_nvml(void)
{
    return gpu_open() == 0 && nv.table.compute_procs ? &nv.table : NULL;
}

void gpu_query_with(const struct gpu_nvml *t, int index, struct gpu_status *ret)
{
    memset(ret, 0, sizeof *ret);
    ret->index = index;
    void *d;
    struct gpu_nvml_util u;
    struct gpu_nvml_mem m;
    unsigned int temp = 0, slow = 0;
    if (index < 0 || t->by_index((unsigned)index, &d) != 0 || t->util(d, &u) != 0 || t->mem(d, &m) != 0)
        return;
    (void)t->temp(d, NVML_TEMPERATURE_GPU, &temp);
    if (t->thresh(d, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &slow) != 0)
        slow = 0;
    ret->valid = true;
    ret->util = u.gpu;
    ret->mem_used = (int64_t)m.used;
    ret->mem_total = (int64_t)m.total;
    ret->temp = temp;
    ret->slowdown_temp = slow;
    /* the device's identity, for joining with dcgm-exporter's UUID label; NUL-terminated by
     * us, whatever NVML wrote */
    char id[GPU_UUID_MAX];
    memset(id, 0, sizeof id);
    if (t->uuid && t->uuid(d, id, sizeof id - 1) == 0 && gpu_uuid_is_valid(id))
        memcpy(ret->uuid, id, sizeof id);
}

void gpu_query(int index, struct gpu_status *ret)
{
    if (index < 0 || gpu_open() < 0) {
        memset(ret, 0, sizeof *ret);
        ret->index = index;
        return;
    }
    gpu_query_with(&nv.q, index, ret);
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
