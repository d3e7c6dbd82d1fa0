/* trainer/cuda_selftest.c: `drover-train selftest`, the GPU preflight the agent runs in the
 * container before it stops the running release (DESIGN.md step 5; cases C08 and C10).
 *
 * Checks in order, stopping at the first failure, one line each on the given stream:
 *   device nodes  /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia<N> open read-write;
 *   driver        cudaDriverGetVersion() >= the CUDA runtime this binary links;
 *   device        at least one GPU visible, name and memory;
 *   libraries     cuBLASLt and NCCL versions and the files they were actually loaded from (dladdr);
 *   step          a tiny model takes a few AdamW steps on the GPU with a finite, falling loss.
 * Each failure names its cause and the fix.  Never: changes device state or writes files.
 */
#ifdef DROVER_HAVE_CUDA

#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* NVIDIA's headers declare f() without (void) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#pragma GCC diagnostic pop

#include <jansson.h>

#include "trainer/backend.h"
#include "trainer/cuda_backend.h"
#include "trainer/selftest.h"

/* Where results go: text lines (cuda_selftest) or the JSON check array (selftest_cuda_checks). */
struct st_out {
    FILE *f;
    json_t *checks;
};

static void st_add(struct st_out *o, const char *name, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void st_add(struct st_out *o, const char *name, bool ok, const char *fmt, ...)
{
    char detail[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (o->f)
        fprintf(o->f, "%s %-16s %s\n", ok ? "ok  " : "FAIL", name, detail);
    if (o->checks) {
        json_t *j = json_pack("{s:s, s:b, s:s}", "name", name, "ok", ok, "detail", detail);
        if (j)
            json_array_append_new(o->checks, j);
    }
}

double cuda_peak_flops(void)
{
    const char *e = getenv("DROVER_PEAK_TFLOPS");
    if (e) {
        char *end = NULL;
        double v = strtod(e, &end);
        if (end != e && v > 0 && v < 1e6)
            return v * 1e12;
    }
    return 989.5e12;
}

static const char *selftest_lib_path(const void *sym)
{
    Dl_info di;
    if (sym && dladdr(sym, &di) && di.dli_fname)
        return di.dli_fname;
    return "(unknown)";
}

static int selftest_node(struct st_out *o, const char *path)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        st_add(o, "cuda.device_node", true, "%s opens read-write", path);
        return 0;
    }
    int e = errno;
    const char *fix;
    switch (e) {
    case ENOENT:
        fix = "the node does not exist in the container: on the host run `nvidia-modprobe -u -c=0` "
              "(nvidia-uvm appears only after something used the driver) and bind it into the "
              "container with an lxc.mount.entry line";
        break;
    case EPERM:
    case EACCES:
        fix = "the container's device cgroup denies it: allow the major with "
              "`lxc.cgroup2.devices.allow: c <major>:* rwm` (the lxc.cgroup.* key is ignored on "
              "cgroup-v2 hosts; take the major from /proc/devices, it can change after a kernel "
              "update)";
        break;
    case ENXIO:
    case ENODEV:
        fix = "no driver behind the node: the major moved or the module is not loaded; compare "
              "/proc/devices on the host with the container's device rules";
        break;
    default:
        fix = "check the host's NVIDIA driver and the container's GPU passthrough lines";
        break;
    }
    st_add(o, "cuda.device_node", false, "%s: %s; fix: %s", path, strerror(e), fix);
    return -ENODEV;
}

static int selftest_step(struct st_out *o, int device)
{
    struct gpt_config cfg = {.layers = 2, .heads = 2, .dim = 128, .vocab = 500, .seq = 64};
    struct backend_opts bo = {.batch = 4, .seq = 64, .threads = 1, .rank = 0, .world_size = 1,
                              .local_rank = device};
    struct adamw_hparams h = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.0f,
                              .grad_clip = 1.0f};
    if (gpt_config_check(&cfg) < 0)
        return -EINVAL;
    size_t n = gpt_num_params(&cfg);
    float *params = malloc(n * sizeof(float));
    int *inp = malloc(sizeof(int) * 4 * 64), *tgt = malloc(sizeof(int) * 4 * 64);
    void *be = NULL;
    int r = -ENOMEM;
    float first = NAN, last = NAN;
    if (!params || !inp || !tgt)
        goto out;
    struct rng rg;
    rng_seed(&rg, 1);
    gpt_params_init(&cfg, params, &rg);
    for (int i = 0; i < 4 * 64; i++) {
        inp[i] = (i * 7) % 97;
        tgt[i] = (i * 7 + 7) % 97;
    }
    r = backend_cuda.create(&cfg, &bo, &be);
    if (r >= 0)
        r = backend_cuda.set_state(be, params, NULL, NULL);
    for (int step = 1; r >= 0 && step <= 8; step++) {
        float loss = NAN, norm = NAN;
        r = backend_cuda.forward_backward(be, inp, tgt, &loss);
        if (r >= 0)
            r = backend_cuda.update(be, &h, 1e-2f, step, &norm);
        if (r >= 0 && (!isfinite(loss) || !isfinite(norm)))
            r = -EIO;
        if (step == 1)
            first = loss;
        last = loss;
    }
out:
    if (be)
        backend_cuda.destroy(be);
    free(params);
    free(inp);
    free(tgt);
    if (r < 0) {
        st_add(o, "cuda.train_step", false,
               "%s (loss %g); fix: see the CUDA error logged above; `compute-sanitizer "
               "drover-train selftest --device cuda` locates a kernel fault",
               strerror(-r), (double)last);
        return r == -ENOMEM ? r : -EIO;
    }
    if (!(last < first)) {
        st_add(o, "cuda.train_step", false,
               "loss did not fall (%.4f -> %.4f); fix: the kernels compute wrong results on this "
               "GPU, run `make gpu-test`",
               (double)first, (double)last);
        return -EIO;
    }
    st_add(o, "cuda.train_step", true, "8 AdamW steps on a 2-layer model, loss %.4f -> %.4f",
           (double)first, (double)last);
    return 0;
}

static int selftest_all(struct st_out *o, int device)
{
    char path[64];
    int r = selftest_node(o, "/dev/nvidiactl");
    if (r == 0)
        r = selftest_node(o, "/dev/nvidia-uvm");
    if (r == 0) {
        int idx = device;
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        if (vis && *vis >= '0' && *vis <= '9')
            idx = atoi(vis); /* the first visible GPU's host index */
        snprintf(path, sizeof path, "/dev/nvidia%d", idx);
        r = selftest_node(o, path);
    }
    if (r < 0)
        return r;

    int drv = 0, rt = 0;
    cudaError_t e = cudaDriverGetVersion(&drv);
    (void)cudaRuntimeGetVersion(&rt);
    if (e != cudaSuccess || drv == 0) {
        st_add(o, "cuda.driver", false,
               "no NVIDIA driver found (%s); fix: install the host driver and pass libcuda.so and "
               "/dev/nvidia* into the container",
               cudaGetErrorString(e));
        return -ENODEV;
    }
    if (drv < rt) {
        st_add(o, "cuda.driver", false,
               "the driver supports CUDA %d.%d but this release links the CUDA %d.%d runtime; "
               "fix: upgrade the host driver to one for CUDA %d.%d or deploy a release built with "
               "CUDA <= %d.%d",
               drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10, rt / 1000, rt % 1000 / 10,
               drv / 1000, drv % 1000 / 10);
        return -ENOEXEC;
    }
    st_add(o, "cuda.driver", true, "driver CUDA %d.%d >= runtime %d.%d (%s)", drv / 1000,
           drv % 1000 / 10, rt / 1000, rt % 1000 / 10,
           selftest_lib_path((const void *)cudaRuntimeGetVersion));

    int n = 0;
    e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        st_add(o, "cuda.device", false,
               "no GPU visible (%s); fix: check CUDA_VISIBLE_DEVICES (\"%s\") and the container's "
               "GPU passthrough (nvidia-uvm node, cgroup rules)",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices", vis ? vis : "");
        return -ENODEV;
    }
    struct cudaDeviceProp prop;
    int dev = device < n ? device : 0;
    e = cudaGetDeviceProperties(&prop, dev);
    if (e == cudaSuccess)
        e = cudaSetDevice(dev);
    void *probe = NULL;
    if (e == cudaSuccess)
        e = cudaMalloc(&probe, 1 << 20);
    if (e != cudaSuccess) {
        st_add(o, "cuda.device", false,
               "device %d: %s; fix: the GPU is visible but unusable from here (device cgroup, "
               "nvidia-uvm node, or a driver/runtime mismatch)",
               dev, cudaGetErrorString(e));
        return -ENODEV;
    }
    (void)cudaFree(probe);
    if (prop.major < 8) {
        st_add(o, "cuda.device", false,
               "device %d (%s) has compute capability %d.%d; fix: the kernels need bf16 tensor "
               "cores, sm_80 or newer (built for CUDA_ARCH sm_90 by default)",
               dev, prop.name, prop.major, prop.minor);
        return -ENODEV;
    }
    st_add(o, "cuda.device", true, "device %d: %s, sm_%d%d, %.1f GiB, %d multiprocessors", dev,
           prop.name, prop.major, prop.minor, (double)prop.totalGlobalMem / (1u << 30),
           prop.multiProcessorCount);

    size_t ltv = cublasLtGetVersion();
    cublasLtHandle_t lt = NULL;
    if (ltv == 0 || cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
        st_add(o, "cuda.cublaslt", false,
               "cannot create a handle (version %zu, %s); fix: install the cuBLAS of the CUDA "
               "%d.%d runtime and pin LD_LIBRARY_PATH/rpath to it",
               ltv, selftest_lib_path((const void *)cublasLtCreate), rt / 1000, rt % 1000 / 10);
        return -ELIBBAD;
    }
    cublasLtDestroy(lt);
    st_add(o, "cuda.cublaslt", true, "cuBLASLt %zu.%zu.%zu (%s)", ltv / 10000, ltv / 100 % 100,
           ltv % 100, selftest_lib_path((const void *)cublasLtCreate));
    int nv = 0;
    if (ncclGetVersion(&nv) != ncclSuccess || nv < 20000) {
        st_add(o, "cuda.nccl", false,
               "version %d from %s; fix: ship libnccl.so.2 >= 2.x with the release and pin the "
               "library path to it",
               nv, selftest_lib_path((const void *)ncclGetVersion));
        return -ELIBBAD;
    }
    st_add(o, "cuda.nccl", true, "NCCL %d.%d.%d (%s)", nv / 10000, nv / 100 % 100, nv % 100,
           selftest_lib_path((const void *)ncclGetVersion));
    return selftest_step(o, dev);
}

int cuda_selftest(FILE *out, int device)
{
    struct st_out o = {.f = out, .checks = NULL};
    return selftest_all(&o, device);
}

int selftest_cuda_checks(json_t *checks)
{
    struct st_out o = {.f = NULL, .checks = checks};
    return selftest_all(&o, 0) < 0 ? -EIO : 0;
}

#else
typedef int cuda_selftest_not_built; /* ISO C wants a declaration in every translation unit */
#endif
