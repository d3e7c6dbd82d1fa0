/* agent/gpucheck.c: see gpucheck.h.  Reads files, /proc and (for memory) NVML; changes nothing;
 * no logging (the verb reports). */
#include "agent/gpucheck.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "agent/gpu.h"
#include "common/nvdriver.h"
#include "common/util.h"

void gpucheck_paths_default(struct gpucheck_paths *p)
{
    const char *libs = getenv("DROVER_GPU_LIB_DIRS"), *dev = getenv("DROVER_GPU_DEV_DIR");
    p->use_loader = !(libs && *libs); /* stub directories in tests: nothing else is searched */
    (void)str_copy(p->lib_dirs, sizeof p->lib_dirs,
                   libs && *libs ? libs
                                 : "/usr/lib/x86_64-linux-gnu:/usr/lib64:/usr/lib:/lib/x86_64-linux-gnu:"
                                   "/usr/local/nvidia/lib64:/usr/lib/aarch64-linux-gnu");
    (void)str_copy(p->dev_dir, sizeof p->dev_dir, dev && *dev ? dev : "/dev");
}

int gpucheck_lib_version(const struct gpucheck_paths *p, const char *soname,
                         char ret[GPUCHECK_VERSION_MAX], char *ret_path, size_t path_sz)
{
    char dirs[sizeof p->lib_dirs];
    (void)str_copy(dirs, sizeof dirs, p->lib_dirs);
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char path[PATH_MAX], real[PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", d, soname) >= sizeof path)
            continue;
        if (!realpath(path, real))
            continue;
        /* "libnvidia-ml.so.575.51.02": the version follows ".so." */
        const char *base = strrchr(real, '/');
        base = base ? base + 1 : real;
        const char *so = strstr(base, ".so.");
        if (ret_path)
            (void)str_copy(ret_path, path_sz, real);
        if (!so || !nvdriver_is_version(so + 4))
            return -EINVAL;
        (void)str_copy(ret, GPUCHECK_VERSION_MAX, so + 4);
        return 0;
    }
    if (p->use_loader) {
        /* Not in the usual directories: ask the dynamic loader, which knows ld.so.conf's
         * (loading the library runs no driver code; nothing is initialised). */
        void *h = dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
        struct link_map *lm = NULL;
        char real[PATH_MAX];
        int r = -ENOENT;
        if (h && dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && realpath(lm->l_name, real)) {
            const char *base = strrchr(real, '/');
            base = base ? base + 1 : real;
            const char *so = strstr(base, ".so.");
            if (ret_path)
                (void)str_copy(ret_path, path_sz, real);
            r = so && nvdriver_is_version(so + 4) ? 0 : -EINVAL;
            if (r == 0)
                (void)str_copy(ret, GPUCHECK_VERSION_MAX, so + 4);
        }
        if (h)
            dlclose(h);
        return r;
    }
    return -ENOENT;
}

/* "570.124.06" -> "570.124" for people (the form); the comparison uses all parts. */
static const char *short_version(const char *v, char *buf, size_t sz)
{
    (void)str_copy(buf, sz, v);
    char *dot = strchr(buf, '.');
    if (dot && (dot = strchr(dot + 1, '.')))
        *dot = '\0';
    return buf;
}

int gpucheck_driver(const struct gpucheck_paths *p, const char *host_version, char *why, size_t why_sz)
{
    char ml[GPUCHECK_VERSION_MAX], cu[GPUCHECK_VERSION_MAX], mlp[PATH_MAX] = "", cup[PATH_MAX] = "";
    int rml = gpucheck_lib_version(p, "libnvidia-ml.so.1", ml, mlp, sizeof mlp);
    int rcu = gpucheck_lib_version(p, "libcuda.so.1", cu, cup, sizeof cup);
    if (rml == -ENOENT && rcu == -ENOENT) {
        snprintf(why, why_sz, "no NVIDIA user-space driver in the container (libnvidia-ml.so.1 and "
                 "libcuda.so.1 not found in %s): install the host's driver version%s%s in the "
                 "container without its kernel module (NVIDIA .run with --no-kernel-module, or the "
                 "distribution's packages of that version)", p->lib_dirs,
                 host_version && *host_version ? " " : "", host_version ? host_version : "");
        return -EIO;
    }
    if (rml == -EINVAL || rcu == -EINVAL) {
        snprintf(why, why_sz, "cannot tell the container's driver version: %s carries no version in "
                 "its name", rml == -EINVAL ? mlp : cup);
        return -EIO;
    }
    if (rml == 0 && rcu == 0 && strcmp(ml, cu) != 0) {
        snprintf(why, why_sz, "the container's driver libraries disagree: %s is %s, %s is %s: a "
                 "half-finished driver install; reinstall one version", mlp, ml, cup, cu);
        return -EIO;
    }
    const char *cont = rml == 0 ? ml : cu;
    if (!host_version || !*host_version) {
        snprintf(why, why_sz, "container driver %s; host kernel module version not given: driver "
                 "match not checked", cont);
        return 0;
    }
    if (strcmp(host_version, cont) != 0) {
        char hs[GPUCHECK_VERSION_MAX], cs[GPUCHECK_VERSION_MAX];
        if (!strcmp(short_version(host_version, hs, sizeof hs), short_version(cont, cs, sizeof cs))) {
            (void)str_copy(hs, sizeof hs, host_version); /* differ only in the last part: show all */
            (void)str_copy(cs, sizeof cs, cont);
        }
        snprintf(why, why_sz, "driver mismatch: host %s, container %s: the container's user-space "
                 "driver (%s) must be the host kernel module's version %s; install %s in the "
                 "container without its kernel module (NVIDIA .run with --no-kernel-module, or the "
                 "distribution's packages of that version), or bind-mount the host's libraries",
                 hs, cs, rml == 0 ? mlp : cup, host_version, host_version);
        return -EIO;
    }
    snprintf(why, why_sz, "driver %s on host and in the container", cont);
    return 0;
}

/* Minimum Linux driver for each CUDA toolkit (NVIDIA's CUDA release notes, table 3). */
static const struct { int drv_major, drv_minor; const char *cuda; } cuda_table[] = {
    {580, 65, "13.0"}, {575, 51, "12.9"}, {570, 26, "12.8"}, {565, 57, "12.7"}, {560, 28, "12.6"},
    {555, 42, "12.5"}, {550, 54, "12.4"}, {545, 23, "12.3"}, {535, 54, "12.2"}, {530, 30, "12.1"},
    {525, 60, "12.0"}, {520, 61, "11.8"}, {515, 43, "11.7"}, {510, 39, "11.6"}, {495, 29, "11.5"},
    {470, 42, "11.4"}, {465, 19, "11.3"}, {460, 27, "11.2"}, {455, 23, "11.1"}, {450, 36, "11.0"},
};

int gpucheck_cuda_for_driver(const char *driver_version, char ret[GPUCHECK_VERSION_MAX])
{
    int maj = 0, min = 0;
    if (sscanf(driver_version, "%d.%d", &maj, &min) < 1)
        return -EINVAL;
    for (size_t i = 0; i < ARRAY_SIZE(cuda_table); i++)
        if (maj > cuda_table[i].drv_major ||
            (maj == cuda_table[i].drv_major && min >= cuda_table[i].drv_minor)) {
            (void)str_copy(ret, GPUCHECK_VERSION_MAX, cuda_table[i].cuda);
            return 0;
        }
    return -ENOENT;
}

static int version_cmp(const char *a, const char *b)
{
    while (*a || *b) {
        long x = strtol(a, (char **)&a, 10), y = strtol(b, (char **)&b, 10);
        if (x != y)
            return x < y ? -1 : 1;
        if (*a == '.')
            a++;
        if (*b == '.')
            b++;
        if (!*a && !*b)
            break;
    }
    return 0;
}

int gpucheck_cuda(const struct gpucheck_paths *p, const char *need_cuda, char *why, size_t why_sz)
{
    if (!need_cuda || !*need_cuda) {
        snprintf(why, why_sz, "the release's CUDA version is not given: not checked");
        return 0;
    }
    char drv[GPUCHECK_VERSION_MAX], max[GPUCHECK_VERSION_MAX];
    int r = gpucheck_lib_version(p, "libcuda.so.1", drv, NULL, 0);
    if (r < 0) {
        snprintf(why, why_sz, "the release needs CUDA %s but the container has no usable "
                 "libcuda.so.1 (searched %s): install the NVIDIA user-space driver", need_cuda,
                 p->lib_dirs);
        return -EIO;
    }
    if (gpucheck_cuda_for_driver(drv, max) < 0 || version_cmp(max, need_cuda) < 0) {
        snprintf(why, why_sz, "CUDA mismatch: the release's runtime needs CUDA %s, the driver %s "
                 "supports CUDA %s at most: upgrade the host's driver (and the container's "
                 "libraries with it), or build the release for CUDA %s", need_cuda, drv,
                 gpucheck_cuda_for_driver(drv, max) < 0 ? "below 11.0" : max,
                 gpucheck_cuda_for_driver(drv, max) < 0 ? "11.0" : max);
        return -EIO;
    }
    snprintf(why, why_sz, "driver %s supports CUDA %s >= %s", drv, max, need_cuda);
    return 0;
}

/* index number i of the job's GPU list ("" = i itself), -1 past the end */
static int gpu_at(const char *gpus, int i)
{
    if (!gpus || !*gpus)
        return i;
    const char *q = gpus;
    for (int k = 0; k < i; k++) {
        q = strchr(q, ',');
        if (!q)
            return -1;
        q++;
    }
    return atoi(q);
}

static int check_node(const char *path, char *why, size_t why_sz)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        snprintf(why, why_sz, "%s is missing in the container: pass the GPU through (for LXC: "
                 "lxc.mount.entry = %s %s none bind,optional,create=file and "
                 "lxc.cgroup2.devices.allow = c 195:* rwm, and nvidia-uvm's major too)", path,
                 path, path + 1);
        return -EIO;
    }
    if (!S_ISCHR(st.st_mode)) {
        snprintf(why, why_sz, "%s is not a character device: the device node is broken (a file "
                 "or directory left by a bind mount of a missing node); remove it and pass the "
                 "GPU through again", path);
        return -EIO;
    }
    int fd = open(path, O_RDWR | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == EPERM || e == EACCES)
            snprintf(why, why_sz, "%s cannot be opened (%s): the container's device cgroup does "
                     "not allow it: add lxc.cgroup2.devices.allow = c %u:* rwm to the container's "
                     "config and restart it", path, strerror(e), major(st.st_rdev));
        else
            snprintf(why, why_sz, "%s cannot be opened: %s (is the host's driver loaded? "
                     "nvidia-smi on the host)", path, strerror(e));
        return -EIO;
    }
    close(fd);
    return 0;
}

int gpucheck_devices(const struct gpucheck_paths *p, const char *gpus, int nproc, char *why,
                     size_t why_sz)
{
    char path[512];
    const char *common[] = { "nvidiactl", "nvidia-uvm" };
    for (size_t i = 0; i < ARRAY_SIZE(common); i++) {
        snprintf(path, sizeof path, "%s/%s", p->dev_dir, common[i]);
        if (check_node(path, why, why_sz) < 0)
            return -EIO;
    }
    for (int i = 0; i < nproc; i++) {
        int g = gpu_at(gpus, i);
        if (g < 0)
            break;
        snprintf(path, sizeof path, "%s/nvidia%d", p->dev_dir, g);
        if (check_node(path, why, why_sz) < 0)
            return -EIO;
    }
    snprintf(why, why_sz, "device nodes present and openable");
    return 0;
}

int gpucheck_memory(const char *gpus, int nproc, uint64_t need_bytes, char *why, size_t why_sz)
{
    if (!need_bytes) {
        snprintf(why, why_sz, "no memory requirement given: not checked");
        return 0;
    }
    if (gpu_open() < 0) {
        snprintf(why, why_sz, "NVML not available: free GPU memory not checked");
        return 0;
    }
    for (int i = 0; i < nproc; i++) {
        int g = gpu_at(gpus, i);
        if (g < 0)
            break;
        struct gpu_status gs;
        gpu_query(g, &gs);
        if (!gs.valid)
            continue;
        uint64_t free_b = gs.mem_total > gs.mem_used ? (uint64_t)(gs.mem_total - gs.mem_used) : 0;
        if (free_b >= need_bytes)
            continue;
        pid_t pids[8];
        int n = gpu_find_holders(pids, 8, NULL, NULL);
        char holders[400] = "";
        size_t off = 0;
        for (int k = 0; k < n && k < 8; k++) {
            char cp[64], comm[32] = "?";
            snprintf(cp, sizeof cp, "/proc/%d/comm", (int)pids[k]);
            FILE *f = fopen(cp, "re");
            if (f) {
                if (fgets(comm, sizeof comm, f))
                    comm[strcspn(comm, "\n")] = '\0';
                fclose(f);
            }
            int w = snprintf(holders + off, sizeof holders - off, "%s%d (%s)", k ? ", " : "",
                             (int)pids[k], comm);
            if (w < 0 || (size_t)w >= sizeof holders - off)
                break;
            off += (size_t)w;
        }
        snprintf(why, why_sz, "GPU %d has %.1f GiB free, the job needs %.1f GiB: %s%s", g,
                 (double)free_b / 1073741824.0, (double)need_bytes / 1073741824.0,
                 n ? "held by pid " : "held by processes outside this container (nvidia-smi on the host names them)",
                 holders);
        return -EIO;
    }
    snprintf(why, why_sz, "enough free GPU memory");
    return 0;
}
