/* bench/train/bench.c: drover-train's CUDA backend throughput on GPT-2 shapes.
 *
 *   bench [B] [steps] [layers heads dim vocab seq]     defaults: 32 30, GPT-2 124M (12 12 768 50304 1024)
 *     one JSON line like bench/torch_gpt2.py's: Ktok/s, TFLOP/s (6N + 6LTC per token), MFU, peak memory
 *   bench kernels [B]
 *     per-kernel times on the same shapes (CUDA events, median of 20) against their floor
 *     (max of FLOPs / 790 TFLOP/s and bytes / 4.3 TB/s, the rates measured on this H200 kind)
 * Random tokens: throughput does not depend on the data.  Test code: exits on any error.
 */
#include <time.h>

#include "tests/gpu/gpu_util.h"
#include "trainer/backend.h"
#include "trainer/cuda_backend.h"
#include "trainer/dist.h"

#define PEAK_MM 790e12
#define PEAK_BW 4.3e12

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int bench_train(int B, int steps, struct gpt_config cfg)
{
    if (gpt_config_check(&cfg) < 0 || steps < 1)
        return 2;
    int T = cfg.seq, warm = 5;
    size_t n = gpt_num_params(&cfg);
    float *params = malloc(n * 4);
    struct rng r;
    rng_seed(&r, 0);
    gpt_params_init(&cfg, params, &r);
    /* data parallel when started with torchrun's environment (WORLD_SIZE > 1) */
    int rank = getenv("RANK") ? atoi(getenv("RANK")) : 0;
    int world = getenv("WORLD_SIZE") ? atoi(getenv("WORLD_SIZE")) : 1;
    struct dist *d = NULL;
    if (world > 1 && dist_open(rank, world, getenv("MASTER_ADDR"), atoi(getenv("MASTER_PORT")), 120, NULL, &d) < 0)
        return 2;
    struct backend_opts o = {.batch = B, .seq = T, .threads = 1, .rank = rank, .world_size = world,
                             .local_rank = rank, .dist = d};
    void *be = NULL;
    if (backend_cuda.create(&cfg, &o, &be) < 0 || backend_cuda.set_state(be, params, NULL, NULL) < 0)
        return 2;
    /* every batch drawn before timing, as torch_gpt2.py does (its tokens live on the GPU) */
    size_t bt = (size_t)B * T;
    int *inp = malloc(sizeof(int) * bt * (warm + steps)), *tgt = malloc(sizeof(int) * bt * (warm + steps));
    for (size_t i = 0; i < bt * (warm + steps); i++) {
        inp[i] = (int)(rng_next_u64(&r) % 50257 % (uint64_t)cfg.vocab);
        tgt[i] = (int)(rng_next_u64(&r) % 50257 % (uint64_t)cfg.vocab);
    }
    struct adamw_hparams h = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                              .grad_clip = 1.0f};
    double t0 = 0, *ts = malloc(sizeof(double) * (size_t)(steps + 1));
    float loss = 0, norm = 0;
    for (int s = 0; s < warm + steps; s++) {
        if (s == warm)
            ts[0] = t0 = now_s();
        if (backend_cuda.forward_backward(be, inp + bt * s, tgt + bt * s, &loss) < 0 ||
            backend_cuda.allreduce_grads(be) < 0 ||
            backend_cuda.update(be, &h, 6e-4f, s + 1, &norm) < 0)
            return 2;
        if (s >= warm)
            ts[s - warm + 1] = now_s();
    }
    double dt = now_s() - t0;
    /* the host's time from one update's return to the next: the GPU's step in steady state; a
     * maximum far above the median is a stall (the GPU ran dry) */
    char list[4096];
    size_t used = 0;
    for (int i = 0; i < steps; i++) {
        ts[i] = (ts[i + 1] - ts[i]) * 1e3;
        if (used < sizeof list - 16)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%.2f", i ? ", " : "", ts[i]);
    }
    qsort(ts, (size_t)steps, sizeof(double), cmp_d);
    double tok_s = (double)steps * B * T / dt * world; /* whole gang */
    double fpt = gpt_flops_per_token(&cfg, T);
    if (rank != 0)
        goto done;
    printf("{\"system\": \"drover\", \"gpus\": %d, \"B\": %d, \"T\": %d, \"layers\": %d, \"dim\": %d, \"params\": %zu, "
           "\"ktok_s\": %.1f, \"tflops\": %.1f, \"mfu\": %.3f, \"mem_peak_gib\": %.2f, "
           "\"step_ms\": %.2f, \"step_ms_median\": %.2f, \"step_ms_min\": %.2f, \"step_ms_max\": %.2f, "
           "\"loss\": %.4f, \"attn\": \"%s\", \"step\": \"%s\", \"steps_ms\": [%s]}\n",
           world, B, T, cfg.layers, cfg.dim, n, tok_s / 1e3, tok_s * fpt / 1e12,
           tok_s * fpt / cuda_peak_flops() / world, (double)backend_cuda.mem_peak(be) / (1u << 30),
           dt / steps * 1e3, ts[steps / 2], ts[0], ts[steps - 1], loss,
           kern_attention_impl(cfg.dim / cfg.heads),
           getenv("DROVER_STEP") && *getenv("DROVER_STEP") ? getenv("DROVER_STEP") : "default", list);
    fflush(stdout);
done:
    free(ts);
    backend_cuda.destroy(be);
    dist_free(d);
    free(params);
    free(inp);
    free(tgt);
    return 0;
}

/* ---- per-kernel timing ---- */

static cudaEvent_t ev0, ev1;

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

#define TIME(label, flops, bytes, count, call)                                                   \
    do {                                                                                         \
        float ms[20];                                                                            \
        const char *only_ = getenv("BENCH_ONLY"); /* label prefix, e.g. "attention" (profiling) */ \
        if (only_ && strncmp(label, only_, strlen(only_)))                                       \
            break;                                                                               \
        KK(call);                                                                                \
        for (int i_ = 0; i_ < 20; i_++) {                                                        \
            CK(cudaEventRecord(ev0, 0));                                                         \
            KK(call);                                                                            \
            CK(cudaEventRecord(ev1, 0));                                                         \
            CK(cudaEventSynchronize(ev1));                                                       \
            CK(cudaEventElapsedTime(&ms[i_], ev0, ev1));                                         \
        }                                                                                        \
        qsort(ms, 20, sizeof(float), cmp_f);                                                     \
        double fl_ = (flops) / PEAK_MM * 1e3, by_ = (bytes) / PEAK_BW * 1e3;                    \
        double floor_ = fl_ > by_ ? fl_ : by_;                                                   \
        printf("%-34s %8.3f ms  floor %7.3f ms (%s)  x%-3d per step -> %7.2f ms/step, %5.1f%% of floor\n", \
               label, ms[10], floor_, fl_ > by_ ? "math" : "bytes", count, ms[10] * (count),      \
               100.0 * floor_ / ms[10]);                                                         \
        total += ms[10] * (count);                                                               \
        total_floor += floor_ * (count);                                                         \
        if (getenv("BENCH_BLAS") && !strncmp(label, "matmul", 6)) { /* bench/blas/sweep.sh */   \
            char key_[160];                                                                      \
            kern_blas_last(bl, key_, sizeof key_);                                               \
            printf("  blas %s %.4f ms\n", key_, ms[10]);                                         \
        }                                                                                        \
    } while (0)

static int bench_kernels(int B)
{
    int T = 1024, C = 768, NH = 12, L = 12, V = 50257, Vp = 50304;
    size_t N = (size_t)B * T;
    double total = 0, total_floor = 0;
    struct rng r;
    rng_seed(&r, 1);
    CK(cudaEventCreate(&ev0));
    CK(cudaEventCreate(&ev1));
    struct kern_blas *bl;
    KK(kern_blas_new(32u << 20, &bl));
    /* random device tensors, generated on the device from a random fp32 buffer */
    size_t big = N * (size_t)Vp;
    float *f = malloc(1u << 24);
    for (size_t i = 0; i < (1u << 22); i++)
        f[i] = rng_normal(&r, 0, 1);
    float *df = dev_f32(f, 1u << 22);
    kbf16 *logits = dev_poisoned(big * 2), *x = dev_poisoned(N * 4 * C * 2), *y = dev_poisoned(N * 4 * C * 2);
    kbf16 *qkv = dev_poisoned(N * 3 * C * 2), *w = dev_poisoned((size_t)Vp * C * 2), *pre = dev_poisoned(N * 4 * C * 2);
    kbf16 *bias = dev_poisoned(4 * C * 2);
    for (size_t off = 0; off < big; off += 1u << 22)
        KK(kern_f32_to_bf16(logits + off, df, big - off < (1u << 22) ? big - off : 1u << 22, 0));
    for (size_t off = 0; off < N * 4 * C; off += 1u << 22) {
        size_t k = N * 4 * C - off < (1u << 22) ? N * 4 * C - off : 1u << 22;
        KK(kern_f32_to_bf16(x + off, df, k, 0));
        KK(kern_f32_to_bf16(y + off, df, k, 0));
        KK(kern_f32_to_bf16(pre + off, df, k, 0));
    }
    for (size_t off = 0; off < N * 3 * C; off += 1u << 22)
        KK(kern_f32_to_bf16(qkv + off, df, N * 3 * C - off < (1u << 22) ? N * 3 * C - off : 1u << 22, 0));
    for (size_t off = 0; off < (size_t)Vp * C; off += 1u << 22)
        KK(kern_f32_to_bf16(w + off, df, (size_t)Vp * C - off < (1u << 22) ? (size_t)Vp * C - off : 1u << 22, 0));
    KK(kern_f32_to_bf16(bias, df, 4 * C, 0));
    float *gw = dev_poisoned((size_t)Vp * C * 4), *mean = dev_poisoned(N * 4), *rstd = dev_poisoned(N * 4);
    float *lse = dev_poisoned(N * NH * 4), *scratch = dev_poisoned(kern_colsum_scratch_floats(4 * C) * 4 + N * NH * 4);
    float *losses = dev_poisoned(N * 4);
    int *tgt;
    CK(cudaMalloc((void **)&tgt, N * 4));
    int *ht = malloc(N * 4);
    for (size_t i = 0; i < N; i++)
        ht[i] = (int)(rng_next_u64(&r) % (uint64_t)V);
    CK(cudaMemcpy(tgt, ht, N * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(gw, 0, (size_t)Vp * C * 4));
    double bf = 2.0;
    printf("per-kernel times, GPT-2 124M shapes, B=%d T=%d (median of 20)\n", B, T);
    {
        char d[400];
        kern_blas_describe(bl, d, sizeof d);
        printf("matmuls: %s\n", d);
    }
    TIME("matmul fwd qkv (C->3C, bias)", 2.0 * N * C * 3 * C, bf * (N * C + 3.0 * C * C + N * 3 * C), L,
         kern_matmul_forward(bl, qkv, NULL, x, w, bias, NULL, (int)N, C, 3 * C, 0));
    TIME("matmul fwd attproj (C->C, +res)", 2.0 * N * C * C, bf * (3.0 * N * C + C * C), L,
         kern_matmul_forward(bl, y, NULL, x, w, bias, x, (int)N, C, C, 0));
    TIME("matmul fwd fc (C->4C, gelu)", 2.0 * N * C * 4 * C, bf * (N * C + 4.0 * C * C + 8.0 * N * C), L,
         kern_matmul_forward(bl, y, pre, x, w, bias, NULL, (int)N, C, 4 * C, 0));
    TIME("matmul fwd fcproj (4C->C, +res)", 2.0 * N * C * 4 * C, bf * (6.0 * N * C + 4.0 * C * C), L,
         kern_matmul_forward(bl, qkv, NULL, pre, w, bias, x, (int)N, 4 * C, C, 0));
    TIME("matmul fwd classifier (C->Vp)", 2.0 * N * C * Vp, bf * (N * C + (double)Vp * C + (double)N * Vp), 1,
         kern_matmul_forward(bl, logits, NULL, x, w, NULL, NULL, (int)N, C, Vp, 0));
    TIME("matmul bwd-in classifier", 2.0 * N * C * Vp, bf * (N * C + (double)Vp * C + (double)N * Vp), 1,
         kern_matmul_backward_input(bl, x, logits, w, 0, (int)N, C, Vp, 0));
    TIME("matmul bwd-w classifier", 2.0 * N * C * Vp, bf * (N * C + (double)N * Vp) + 8.0 * Vp * C, 1,
         kern_matmul_backward_weight(bl, gw, logits, x, (int)N, C, Vp, 0));
    TIME("matmul bwd-in fc (4C->C)", 2.0 * N * C * 4 * C, bf * (5.0 * N * C + 4.0 * C * C), L,
         kern_matmul_backward_input(bl, x, y, w, 0, (int)N, C, 4 * C, 0));
    TIME("matmul bwd-w fc", 2.0 * N * C * 4 * C, bf * 5.0 * N * C + 8.0 * 4 * C * C, L,
         kern_matmul_backward_weight(bl, gw, y, x, (int)N, C, 4 * C, 0));
    TIME("  (same + bias epilogue; not used)", 2.0 * N * C * 4 * C, bf * 5.0 * N * C + 8.0 * 4 * C * C, 0,
         kern_matmul_backward_weight_bias(bl, gw, gw + (size_t)Vp * C - 4 * C, scratch, y, x, (int)N, C, 4 * C, 0));
    TIME("matmul bwd-in fcproj + dgelu", 2.0 * N * C * 4 * C, bf * (9.0 * N * C + 4.0 * C * C), L,
         kern_matmul_backward_input_dgelu(bl, y, x, w, pre, (int)N, 4 * C, C, 0));
    TIME("matmul bwd-w fcproj", 2.0 * N * C * 4 * C, bf * 5.0 * N * C + 8.0 * 4 * C * C, L,
         kern_matmul_backward_weight(bl, gw, x, y, (int)N, 4 * C, C, 0));
    TIME("matmul bwd-in qkv (3C->C)", 2.0 * N * C * 3 * C, bf * (4.0 * N * C + 3.0 * C * C), L,
         kern_matmul_backward_input(bl, x, qkv, w, 0, (int)N, C, 3 * C, 0));
    TIME("matmul bwd-w qkv", 2.0 * N * C * 3 * C, bf * 4.0 * N * C + 8.0 * 3 * C * C, L,
         kern_matmul_backward_weight(bl, gw, qkv, x, (int)N, C, 3 * C, 0));
    TIME("matmul bwd-in attproj (C->C)", 2.0 * N * C * C, bf * (2.0 * N * C + C * C), L,
         kern_matmul_backward_input(bl, x, y, w, 0, (int)N, C, C, 0));
    TIME("matmul bwd-w attproj", 2.0 * N * C * C, bf * 2.0 * N * C + 8.0 * C * C, L,
         kern_matmul_backward_weight(bl, gw, y, x, (int)N, C, C, 0));
    double attf = 2.0 * 2.0 * N * T * C / 2; /* causal: QK^T and PV over half the scores */
    /* both implementations, the wgmma one in each kernel variant; what the step uses counts */
    int use_wg = !strcmp(kern_attention_impl(C / NH), "wgmma");
    kern_attention_set_impl(0);
    TIME("attention fwd (mma.sync)", attf, bf * 4.0 * N * C, use_wg ? 0 : L,
         kern_attention_forward(y, lse, qkv, B, T, C, NH, 0));
    TIME("attention bwd (mma.sync dkv + dq)", 2.5 * attf, bf * 8.0 * N * C, use_wg ? 0 : L,
         kern_attention_backward(pre, scratch, y, y, lse, qkv, B, T, C, NH, 0));
    kern_attention_set_impl(1);
    if (!strcmp(kern_attention_impl(C / NH), "wgmma")) {
        char lab[64], v[16];
        int nvar = getenv("BENCH_VARIANTS") && !atoi(getenv("BENCH_VARIANTS")) ? 0 : 8; /* 0: defaults only */
        for (int fv = -1; fv < nvar; fv++) { /* -1: the default (DROVER_WG_VARIANT or built in) */
            snprintf(v, sizeof v, "%d", fv);
            kern_attention_set_variant(fv < 0 ? NULL : v);
            snprintf(lab, sizeof lab, "attention fwd (wgmma %s)", fv < 0 ? "default" : v);
            TIME(lab, attf, bf * 4.0 * N * C, fv < 0 && use_wg ? L : 0,
                 kern_attention_forward(y, lse, qkv, B, T, C, NH, 0));
        }
        kern_attention_set_variant(NULL);
        /* the step's backward: the split kernels, or the fused one with DROVER_ATTN_BWD=fused */
        int fused = kern_attention_set_bwd(-1);
        size_t wsb = kern_attention_backward_ws_bytes(B, T, C, NH);
        TIME("attention bwd (wgmma default)", 2.5 * attf, bf * 8.0 * N * C, use_wg && !wsb ? L : 0,
             kern_attention_backward(pre, scratch, y, y, lse, qkv, B, T, C, NH, 0));
        kern_attention_set_bwd(1);
        wsb = kern_attention_backward_ws_bytes(B, T, C, NH);
        if (wsb) {
            void *ws = NULL;
            CK(cudaMalloc(&ws, wsb));
            TIME("attention bwd (wgmma fused)", 2.5 * attf, bf * 8.0 * N * C, use_wg && fused ? L : 0,
                 kern_attention_backward3(pre, scratch, ws, wsb, y, y, lse, qkv, B, T, C, NH, 0, NULL, NULL, NULL));
            CK(cudaFree(ws));
        }
        kern_attention_set_bwd(-1);
        for (int q = 0; q < nvar; q++)
            for (int k = 0; k < nvar; k++) { /* dQ variant q, dK/dV variant k, one stream */
                snprintf(v, sizeof v, "0,%d,%d", q, k);
                kern_attention_set_variant(v);
                snprintf(lab, sizeof lab, "attention bwd (wgmma dq %d dkv %d)", q, k);
                TIME(lab, 2.5 * attf, bf * 8.0 * N * C, 0,
                     kern_attention_backward(pre, scratch, y, y, lse, qkv, B, T, C, NH, 0));
            }
        kern_attention_set_variant(NULL);
        TIME("attention D (rowsum dout*out)", 0, bf * 2.0 * N * C + 4.0 * N * NH, 0,
             kern_attention_dot(scratch, y, y, B, T, C, NH, 1, 0));
        TIME("  attention D (DROVER_ATTN_DOT=old)", 0, bf * 2.0 * N * C + 4.0 * N * NH, 0,
             kern_attention_dot(scratch, y, y, B, T, C, NH, 0, 0));
        /* BENCH_WG="F,Q,K ...": each listed variant (kernels/attention_wgmma.cu's bits): the forward,
         * the backward on one stream, then its dQ kernel and its dK/dV kernel alone (not counted;
         * floors of their 3 and 4 products) */
        const char *wl = getenv("BENCH_WG");
        if (wl) {
            char list[256];
            snprintf(list, sizeof list, "%s", wl);
            char *sp = NULL;
            for (char *tok = strtok_r(list, " ", &sp); tok; tok = strtok_r(NULL, " ", &sp)) {
                int fv, q, k;
                if (sscanf(tok, "%d,%d,%d", &fv, &q, &k) != 3)
                    continue;
                snprintf(v, sizeof v, "%d,%d,%d", fv, q, k);
                kern_attention_set_variant(v);
                snprintf(lab, sizeof lab, "attention fwd (wgmma %s)", v);
                TIME(lab, attf, bf * 4.0 * N * C, 0, kern_attention_forward(y, lse, qkv, B, T, C, NH, 0));
                snprintf(lab, sizeof lab, "attention bwd (wgmma %s)", v);
                TIME(lab, 2.5 * attf, bf * 8.0 * N * C, 0,
                     kern_attention_backward(pre, scratch, y, y, lse, qkv, B, T, C, NH, 0));
                snprintf(v, sizeof v, "%d,%d,-", fv, q);
                kern_attention_set_variant(v);
                snprintf(lab, sizeof lab, "attention  dq alone (wgmma %d)", q);
                TIME(lab, 1.5 * attf, bf * 6.0 * N * C, 0,
                     kern_attention_backward(pre, scratch, y, y, lse, qkv, B, T, C, NH, 0));
                snprintf(v, sizeof v, "%d,-,%d", fv, k);
                kern_attention_set_variant(v);
                snprintf(lab, sizeof lab, "attention  dkv alone (wgmma %d)", k);
                TIME(lab, 2.0 * attf, bf * 6.0 * N * C, 0,
                     kern_attention_backward(pre, scratch, y, y, lse, qkv, B, T, C, NH, 0));
            }
            kern_attention_set_variant(NULL);
        }
    }
    kern_attention_set_impl(-1);
    TIME("layernorm fwd", 0, bf * 2.0 * N * C, 2 * L + 1,
         kern_layernorm_forward(y, mean, rstd, x, bias, bias, (int)N, C, 0));
    kern_rowkernels_set_impl(0, 1); /* the other kernels, for comparison (not counted) */
    TIME("  layernorm fwd (old: DROVER_LN=old)", 0, bf * 2.0 * N * C, 0,
         kern_layernorm_forward(y, mean, rstd, x, bias, bias, (int)N, C, 0));
    TIME("  classifier + ce (DROVER_CLS=smem)", 0, bf * 2.0 * N * Vp, 0,
         kern_classifier_forward_backward(logits, losses, tgt, 1.0f / (float)N, (int)N, V, Vp, 0));
    kern_rowkernels_set_impl(0, 0);
    TIME("  classifier + ce (old: DROVER_CLS=old)", 0, bf * 2.0 * N * Vp, 0,
         kern_classifier_forward_backward(logits, losses, tgt, 1.0f / (float)N, (int)N, V, Vp, 0));
    kern_rowkernels_set_impl(0, 3);
    TIME("  classifier + ce (DROVER_CLS=v2r)", 0, bf * 2.0 * N * Vp, 0,
         kern_classifier_forward_backward(logits, losses, tgt, 1.0f / (float)N, (int)N, V, Vp, 0));
    kern_rowkernels_set_impl(-1, -1);
    /* in the step, ln1 and ln2's backward also sum the attproj/fcproj bias gradient (one more
     * read of dinp) unless DROVER_LN_BIAS=0, which runs the C-column bias kernel instead */
    kern_lnbias_set_impl(-1);
    const char *lb = getenv("DROVER_LN_BIAS");
    int fused = !(lb && !strcmp(lb, "0"));
    TIME("layernorm bwd (dinp + dw/db)", 0, bf * 4.0 * N * C, fused ? 1 : 2 * L + 1,
         kern_layernorm_backward(y, gw, gw + C, scratch, x, x, bias, mean, rstd, (int)N, C, 0));
    TIME("layernorm bwd + attproj/fcproj bias", 0, bf * 5.0 * N * C, fused ? 2 * L : 0,
         kern_layernorm_backward_bias(y, gw, gw + C, gw + 2 * C, scratch, x, x, bias, mean, rstd,
                                      (int)N, C, 0));
    TIME("bias bwd (C columns)", 0, bf * 1.0 * N * C, fused ? 0 : 2 * L,
         kern_bias_backward(gw, scratch, pre, (int)N, C, 0));
    TIME("bias bwd (3C columns)", 0, bf * 3.0 * N * C, L,
         kern_bias_backward(gw, scratch, pre, (int)N, 3 * C, 0));
    kern_lnbwd_set_impl(0);
    TIME("  layernorm bwd (old: DROVER_LN_BWD=old)", 0, bf * 4.0 * N * C, 0,
         kern_layernorm_backward(y, gw, gw + C, scratch, x, x, bias, mean, rstd, (int)N, C, 0));
    kern_lnbwd_set_impl(2);
    TIME("  layernorm bwd (reg3: DROVER_LN_BWD=reg3)", 0, bf * 4.0 * N * C, 0,
         kern_layernorm_backward(y, gw, gw + C, scratch, x, x, bias, mean, rstd, (int)N, C, 0));
    kern_lnbwd_set_impl(1); /* without the next row's prefetch (same bits; not counted) */
    TIME("  layernorm bwd (reg: DROVER_LN_BWD=reg)", 0, bf * 4.0 * N * C, 0,
         kern_layernorm_backward(y, gw, gw + C, scratch, x, x, bias, mean, rstd, (int)N, C, 0));
    TIME("  layernorm bwd + bias (reg: DROVER_LN_BWD=reg)", 0, bf * 5.0 * N * C, 0,
         kern_layernorm_backward_bias(y, gw, gw + C, gw + 2 * C, scratch, x, x, bias, mean, rstd,
                                      (int)N, C, 0));
    kern_lnbwd_set_impl(-1);
    TIME("bias bwd (4C columns)", 0, bf * 4.0 * N * C, L,
         kern_bias_backward(gw, scratch, pre, (int)N, 4 * C, 0));
    kern_bias_set_impl(0); /* the earlier kernel: 128 row groups (not counted) */
    TIME("  bias bwd (3C, old: DROVER_BIAS=old)", 0, bf * 3.0 * N * C, 0,
         kern_bias_backward(gw, scratch, pre, (int)N, 3 * C, 0));
    TIME("  bias bwd (4C, old: DROVER_BIAS=old)", 0, bf * 4.0 * N * C, 0,
         kern_bias_backward(gw, scratch, pre, (int)N, 4 * C, 0));
    kern_bias_set_impl(-1);
    TIME("gelu bwd (unfused; not in the step)", 0, bf * 3.0 * 4 * N * C, 0, kern_gelu_backward_inplace(pre, x, N * 4 * C, 0));
    TIME("classifier + cross-entropy", 0, bf * 2.0 * N * Vp, 1,
         kern_classifier_forward_backward(logits, losses, tgt, 1.0f / (float)N, (int)N, V, Vp, 0));
    size_t np = 124475904;
    float *p = dev_poisoned(np * 4 * 4);
    CK(cudaMemset(p, 0, np * 4 * 4));
    kbf16 *pb = dev_poisoned(np * 2);
    float *sc = dev_poisoned(64 * 4);
    TIME("grad norm", 0, 4.0 * np, 1, kern_grad_norm(sc, scratch, p + np, np, 1.0f, 1.0f, 0));
    TIME("adamw (all params)", 0, 4.0 * 7 * np + 2.0 * np, 1,
         kern_adamw(p, pb, p + np, p + 2 * np, p + 3 * np, sc, np, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 5, 0));
    kern_adamw_set_impl(0);
    TIME("  adamw (old: DROVER_ADAMW=old)", 0, 4.0 * 7 * np + 2.0 * np, 0,
         kern_adamw(p, pb, p + np, p + 2 * np, p + 3 * np, sc, np, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 5, 0));
    kern_adamw_set_impl(-1);
    printf("sum of kernels %.2f ms/step (floor %.2f ms) -> %.1f Ktok/s if nothing else ran\n", total,
           total_floor, N / total);
    kern_blas_free(bl);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "kernels"))
        return bench_kernels(argc > 2 ? atoi(argv[2]) : 16);
    struct gpt_config cfg = {.layers = 12, .heads = 12, .dim = 768, .vocab = 50304, .seq = 1024};
    int B = argc > 1 ? atoi(argv[1]) : 32, steps = argc > 2 ? atoi(argv[2]) : 30;
    if (argc > 7) {
        cfg.layers = atoi(argv[3]);
        cfg.heads = atoi(argv[4]);
        cfg.dim = atoi(argv[5]);
        cfg.vocab = atoi(argv[6]);
        cfg.seq = atoi(argv[7]);
    }
    return bench_train(B, steps, cfg);
}
