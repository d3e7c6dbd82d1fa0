/* agent/gpucheck.h: the GPU environment preflight (issue 12), run by `drover-agent gpu-check`
 * before anything stops: a release must not be blamed (rolled back) for a container whose GPU
 * environment is broken, and a broken environment must be found before the old gang is stopped.
 *
 * Checks, each with a message that names the fault and the fix:
 *   driver  the host's NVIDIA kernel module version (read on the host by the controller from
 *           /proc/driver/nvidia/version, passed in) against the container's user-space driver
 *           (the files libnvidia-ml.so.1 and libcuda.so.1 resolve to):
 *           "driver mismatch: host 570.124, container 575.51: ..."
 *   cuda    the CUDA version the release's runtime needs against what the driver supports
 *   devices /dev/nvidia<N> for every GPU of the job, /dev/nvidiactl and /dev/nvidia-uvm: present,
 *           character devices, and openable (a cgroup device rule refuses the open with EPERM)
 *   memory  free memory of every GPU of the job (NVML) against what the job needs, naming the
 *           processes that hold GPU nodes
 * Paths are configurable (struct gpucheck_paths; DROVER_GPU_LIB_DIRS and DROVER_GPU_DEV_DIR in
 * the environment) so that every check runs against stub files on a machine without a GPU.
 * Never changes anything.
 */
#ifndef DROVER_AGENT_GPUCHECK_H
#define DROVER_AGENT_GPUCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GPUCHECK_VERSION_MAX 32 /* = NVDRIVER_VERSION_MAX (common/nvdriver.h) */

struct gpucheck_paths {
    char lib_dirs[1024]; /* colon-separated directories searched for the driver's libraries */
    char dev_dir[256];   /* where the device nodes are ("/dev") */
    bool use_loader;     /* also ask the dynamic loader when lib_dirs do not have it */
};

/* Defaults (the usual library directories of Debian/Ubuntu/RHEL and the NVIDIA .run installer,
 * "/dev"), overridden by DROVER_GPU_LIB_DIRS / DROVER_GPU_DEV_DIR when set. */
void gpucheck_paths_default(struct gpucheck_paths *p);

/* The version of the user-space library soname ("libnvidia-ml.so.1") found in p->lib_dirs:
 * the file it resolves to is "libnvidia-ml.so.575.51.02" -> "575.51.02".  ret_path gets the
 * resolved file.  0; -ENOENT not found; -EINVAL found but its name carries no version. */
int gpucheck_lib_version(const struct gpucheck_paths *p, const char *soname,
                         char ret[GPUCHECK_VERSION_MAX], char *ret_path, size_t path_sz);

/* Highest CUDA version ("12.8") a driver of this version supports, from NVIDIA's table of
 * minimum driver versions; -ENOENT for a driver older than CUDA 11.0's. */
int gpucheck_cuda_for_driver(const char *driver_version, char ret[GPUCHECK_VERSION_MAX]);

/* Each check: 0 passed (why may hold a note, e.g. "skipped: ..."), -EIO failed with the fault
 * and the fix in why.  gpus: the job's comma-separated GPU indices ("" = 0..nproc-1). */
int gpucheck_driver(const struct gpucheck_paths *p, const char *host_version, char *why, size_t why_sz);
int gpucheck_cuda(const struct gpucheck_paths *p, const char *need_cuda, char *why, size_t why_sz);
int gpucheck_devices(const struct gpucheck_paths *p, const char *gpus, int nproc, char *why,
                     size_t why_sz);
/* need_bytes 0: skipped.  Without NVML: skipped with a note. */
int gpucheck_memory(const char *gpus, int nproc, uint64_t need_bytes, char *why, size_t why_sz);

#endif
