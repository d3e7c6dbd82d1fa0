/* bench/train/trace.c: where a training step's time goes on the GPU, without Nsight: CUPTI's
 * activity records (kernels, copies, memsets) over `steps` steps of the CUDA backend after 5
 * warm-up steps, GPT-2 124M, random tokens, the step mode from DROVER_STEP.
 *
 *   trace [B] [steps]      defaults 32 10
 *
 * Prints one JSON line: wall ms per step (host clock around the traced steps), the GPU's busy
 * time per step (the union of every activity's interval, so the dQ kernel overlapping dK/dV counts
 * once), the sum of kernel durations per step, idle = window - busy split by gap length, and the
 * activity count; then the ten longest gaps with what ran before and after them, and the kernels
 * by total time.  CUPTI adds a little to each launch, so compare modes within one call.
 * Test code: exits on any error.
 */
#include <cupti.h>
#include <time.h>

#include "tests/gpu/gpu_util.h"
#include "trainer/backend.h"
#include "trainer/cuda_backend.h"

struct act {
    uint64_t t0, t1;
    char name[48];
};

static struct act *acts;
static size_t nact, cap;
static uint64_t t_from = UINT64_MAX; /* records of the warm-up are dropped */

static void add_act(uint64_t t0, uint64_t t1, const char *name)
{
    if (t1 <= t0 || t0 < t_from)
        return;
    if (nact == cap) {
        cap = cap ? 2 * cap : 65536;
        acts = realloc(acts, cap * sizeof *acts);
        if (!acts)
            exit(2);
    }
    acts[nact].t0 = t0;
    acts[nact].t1 = t1;
    snprintf(acts[nact].name, sizeof acts[nact].name, "%s", name ? name : "?");
    nact++;
}

static void CUPTIAPI buf_request(uint8_t **buf, size_t *size, size_t *max_records)
{
    *size = 64u << 20; /* one buffer holds the whole run: no request while it is traced */
    *buf = aligned_alloc(8, *size);
    *max_records = 0;
    if (!*buf)
        exit(2);
}

static void CUPTIAPI buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                                  size_t valid)
{
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *rec = NULL;
    while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const void *)rec;
            add_act(k->start, k->end, k->name);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6 *m = (const void *)rec;
            char nm[48];
            snprintf(nm, sizeof nm, "memcpy kind %u src %u %llu B", m->copyKind, m->srcKind,
                     (unsigned long long)m->bytes);
            add_act(m->start, m->end, nm);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const CUpti_ActivityMemset4 *m = (const void *)rec;
            char nm[48];
            snprintf(nm, sizeof nm, "memset %llu B", (unsigned long long)m->bytes);
            add_act(m->start, m->end, nm);
        }
    }
    free(buf);
}

#define CP(call)                                                                   \
    do {                                                                           \
        CUptiResult r_ = (call);                                                   \
        if (r_ != CUPTI_SUCCESS) {                                                 \
            const char *s_ = NULL;                                                 \
            cuptiGetResultString(r_, &s_);                                         \
            fprintf(stderr, "%s: %s\n", #call, s_ ? s_ : "?");                     \
            exit(2);                                                               \
        }                                                                          \
    } while (0)

static int cmp_t0(const void *a, const void *b)
{
    const struct act *x = a, *y = b;
    return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

struct gap {
    uint64_t len;
    size_t before, after; /* indices into acts */
};

static int cmp_gap(const void *a, const void *b)
{
    const struct gap *x = a, *y = b;
    return x->len > y->len ? -1 : x->len < y->len;
}

struct kstat {
    char name[48];
    double ms;
    int n;
};

static int cmp_kstat(const void *a, const void *b)
{
    const struct kstat *x = a, *y = b;
    return x->ms > y->ms ? -1 : x->ms < y->ms;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int B = argc > 1 ? atoi(argv[1]) : 32, steps = argc > 2 ? atoi(argv[2]) : 10, warm = 5;
    struct gpt_config cfg = {.layers = 12, .heads = 12, .dim = 768, .vocab = 50304, .seq = 1024};
    if (gpt_config_check(&cfg) < 0 || B <= 0 || steps <= 0)
        return 2;
    int T = cfg.seq;
    size_t n = gpt_num_params(&cfg), bt = (size_t)B * T;
    float *params = malloc(n * 4);
    struct rng r;
    rng_seed(&r, 0);
    gpt_params_init(&cfg, params, &r);
    struct backend_opts o = {.batch = B, .seq = T, .threads = 1, .world_size = 1};
    void *be = NULL;
    if (backend_cuda.create(&cfg, &o, &be) < 0 || backend_cuda.set_state(be, params, NULL, NULL) < 0)
        return 2;
    int *inp = malloc(sizeof(int) * bt * (warm + steps)), *tgt = malloc(sizeof(int) * bt * (warm + steps));
    for (size_t i = 0; i < bt * (warm + steps); i++) {
        inp[i] = (int)(rng_next_u64(&r) % 50257);
        tgt[i] = (int)(rng_next_u64(&r) % 50257);
    }
    struct adamw_hparams h = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                              .grad_clip = 1.0f};
    float loss = 0, norm = 0;
    double t0 = 0;
    /* on from the start, so that the graph's capture and launches are seen the same way */
    CP(cuptiActivityRegisterCallbacks(buf_request, buf_complete));
    CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
    for (int s = 0; s < warm + steps; s++) {
        if (s == warm) { /* no flush here: a new buffer's request stalled the next step ~10 ms */
            CK(cudaDeviceSynchronize());
            CP(cuptiGetTimestamp(&t_from));
            t0 = now_s();
        }
        if (backend_cuda.forward_backward(be, inp + bt * s, tgt + bt * s, &loss) < 0 ||
            backend_cuda.allreduce_grads(be) < 0 ||
            backend_cuda.update(be, &h, 6e-4f, s + 1, &norm) < 0)
            return 2;
    }
    CK(cudaDeviceSynchronize());
    double wall = now_s() - t0;
    CP(cuptiActivityFlushAll(1));
    CP(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CP(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY));
    CP(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET));
    if (nact == 0)
        return 2;
    qsort(acts, nact, sizeof *acts, cmp_t0);
    /* union of intervals; the gaps between its segments */
    struct gap *gaps = malloc(nact * sizeof *gaps);
    size_t ng = 0, last = 0;
    uint64_t busy = 0, seg0 = acts[0].t0, seg1 = acts[0].t1;
    double ksum = 0;
    static const double edges[] = {2e3, 5e3, 20e3, 100e3, 1e12}; /* ns */
    double gap_ns[5] = {0}, gap_n[5] = {0};
    for (size_t i = 0; i < nact; i++) {
        if (strncmp(acts[i].name, "mem", 3))
            ksum += (double)(acts[i].t1 - acts[i].t0);
        if (acts[i].t0 > seg1) {
            busy += seg1 - seg0;
            uint64_t g = acts[i].t0 - seg1;
            gaps[ng++] = (struct gap){g, last, i};
            for (int b = 0; b < 5; b++)
                if ((double)g < edges[b]) {
                    gap_ns[b] += (double)g;
                    gap_n[b]++;
                    break;
                }
            seg0 = acts[i].t0;
        }
        if (acts[i].t1 >= seg1) {
            seg1 = acts[i].t1;
            last = i;
        }
    }
    busy += seg1 - seg0;
    double window = (double)(seg1 - acts[0].t0);
    /* per step, from one encoder_forward kernel to the next: duration and idle time */
    {
        uint64_t *b = malloc(nact * sizeof *b);
        size_t nb = 0;
        for (size_t i = 0; i < nact; i++)
            if (strstr(acts[i].name, "encoder_forward"))
                b[nb++] = acts[i].t0;
        double *idle = calloc(nb + 1, sizeof(double));
        for (size_t g = 0; g < ng; g++) {
            uint64_t at = acts[gaps[g].after].t0;
            size_t k = 0;
            while (k < nb && b[k] < at)
                k++;
            idle[k] += (double)gaps[g].len; /* k: the step the gap ends in (0: before the first) */
        }
        printf("  steps (encoder_forward to encoder_forward), ms, idle ms in ():");
        for (size_t k = 1; k < nb; k++)
            printf(" %.2f (%.2f)", (double)(b[k] - b[k - 1]) / 1e6, idle[k] / 1e6);
        printf("\n");
        free(b);
        free(idle);
    }
    const char *mode = getenv("DROVER_STEP");
    printf("{\"trace\": \"%s\", \"B\": %d, \"steps\": %d, \"wall_ms\": %.3f, \"window_ms\": %.3f, "
           "\"busy_ms\": %.3f, \"kernel_sum_ms\": %.3f, \"idle_ms\": %.3f, \"activities\": %.1f, "
           "\"idle_gaps_ms\": {\"<2us\": [%.0f, %.3f], \"2-5us\": [%.0f, %.3f], \"5-20us\": [%.0f, %.3f], "
           "\"20-100us\": [%.0f, %.3f], \">100us\": [%.0f, %.3f]}, \"loss\": %.4f}\n",
           mode && *mode ? mode : "default", B, steps, wall / steps * 1e3, window / steps / 1e6,
           (double)busy / steps / 1e6, ksum / steps / 1e6, (window - (double)busy) / steps / 1e6,
           (double)nact / steps, gap_n[0] / steps, gap_ns[0] / steps / 1e6, gap_n[1] / steps,
           gap_ns[1] / steps / 1e6, gap_n[2] / steps, gap_ns[2] / steps / 1e6, gap_n[3] / steps,
           gap_ns[3] / steps / 1e6, gap_n[4] / steps, gap_ns[4] / steps / 1e6, loss);
    qsort(gaps, ng, sizeof *gaps, cmp_gap);
    for (size_t i = 0; i < ng && i < 10; i++)
        printf("  gap %8.1f us at %7.2f ms  after %-48s before %s\n", (double)gaps[i].len / 1e3,
               (double)(acts[gaps[i].after].t0 - t_from) / 1e6, acts[gaps[i].before].name,
               acts[gaps[i].after].name);
    struct kstat *ks = calloc(nact, sizeof *ks);
    size_t nk = 0;
    for (size_t i = 0; i < nact; i++) {
        size_t j = 0;
        while (j < nk && strcmp(ks[j].name, acts[i].name))
            j++;
        if (j == nk)
            snprintf(ks[nk++].name, sizeof ks[0].name, "%s", acts[i].name);
        ks[j].ms += (double)(acts[i].t1 - acts[i].t0) / 1e6 / steps;
        ks[j].n++;
    }
    qsort(ks, nk, sizeof *ks, cmp_kstat);
    for (size_t i = 0; i < nk && i < 40; i++)
        printf("  %8.3f ms/step  x%-4.0f %s\n", ks[i].ms, (double)ks[i].n / steps, ks[i].name);
    backend_cuda.destroy(be);
    return 0;
}
