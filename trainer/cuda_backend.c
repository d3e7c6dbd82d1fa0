/* trainer/cuda_backend.c: the CUDA backend of drover-train (struct backend_ops backend_cuda).
 *
 * Owns the device state of one rank: four arenas (fp32 master parameters + their bf16 copy,
 * fp32 gradients, fp32 Adam m and v, bf16 activations with their fp32 statistics), the cuBLASLt
 * handle, one stream and, with WORLD_SIZE > 1, the NCCL communicator.  Parameters, gradients and
 * Adam state use the fp32 layout of trainer/model.h, so get_state()/set_state() copy them
 * verbatim and checkpoints are the same as the CPU backend's.
 * Invariants: every kernel is deterministic (fixed reduction orders, no float atomics), so the
 * same state and batch give bit-identical losses on the same GPU and software.
 * Never: touches files, heartbeats or signals; calls exit(); leaves a CUDA error unreported
 * (each enters once through cu_fail(), logged with what failed and returned as -EIO).
 */
#ifdef DROVER_HAVE_CUDA

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* NVIDIA's headers declare f() without (void) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime_api.h>
#include <nccl.h>
#pragma GCC diagnostic pop

#include "common/log.h"
#include "kernels/kernels.h"
#include "kernels/knobs.h"
#include "trainer/backend.h"
#include "trainer/cuda_backend.h"
#include "trainer/dist.h"
#include "trainer/tokbucket.h"

#define CUBLAS_WORKSPACE_BYTES (32u << 20)

struct layer_acts {
    kbf16 *ln1, *qkv, *atty, *res1, *ln2, *fch_pre, *fch, *res2;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd, *lse;
};

struct cuda_be {
    struct gpt_config cfg;
    struct backend_opts opts;
    int B, T, C, L, NH, V, Vp, N;
    size_t nparams;
    size_t off[GPT_NPARAM_TENSORS], size[GPT_NPARAM_TENSORS];
    int device;
    cudaStream_t stream, stream2; /* stream2: attention dQ, overlapping dK/dV */
    cudaEvent_t ev_fork, ev_join;
    cudaEvent_t ev_loss, ev_norm; /* the host waits for these, not for the whole stream */
    int64_t steps;                /* forward_backward calls, for the memory sampling */
    struct kern_blas *blas;
    ncclComm_t comm;
    /* data parallel (docs/cuda.md): dp_overlap reduces the gradients in buckets on comm_stream
     * while the backward runs on; dp_gather also gathers every rank's tokens and embedding
     * gradient rows so that wte (reduced early, after the classifier) and wpe need no reduction
     * after the backward */
    bool dp_overlap, dp_gather;
    int W;                      /* world size */
    cudaStream_t comm_stream;
    cudaEvent_t ev_bucket;      /* compute -> comm: a bucket's gradients are complete */
    cudaEvent_t ev_comm_done;   /* comm -> compute: the step's last collective */
    cudaEvent_t ev_inp;         /* every rank's tokens are in h_inp_all */
    int *d_inp_all, *h_inp_all; /* W*N tokens, rank-major (h_inp_all pinned) */
    int dp_ctas;                /* > 0: NCCL limited to this many CTAs, matmuls of the
                                   backward tuned for the SMs left (DROVER_DP_CTAS) */
    int sm_count;
    /* DROVER_DP_TIMING=1: per-step events, averages logged by destroy() */
    cudaEvent_t tev[4];         /* forward start, backward start, layers done, comm done */
    double tsum[3];
    int tn;

    /* arenas */
    void *arena_params, *arena_grads, *arena_opt, *arena_acts;
    float *params, *grads, *m, *v;
    kbf16 *pbf;

    /* activations */
    kbf16 *encoded, *lnf, *logits;
    float *lnf_mean, *lnf_rstd;
    struct layer_acts *layer; /* L entries pointing into arena_acts */
    /* backward scratch */
    kbf16 *dres, *dln, *dqkv, *datt, *dfch;
    float *colsum, *att_scratch, *losses, *norm_partial, *scalars; /* scalars: norm, scale, loss */
    /* the token region, one block of ints: inputs (N), targets (N), the number of distinct
     * inputs (1, padded to 4), the wte-gradient buckets: uniq (NB), start (NB + 1), pos (NB) */
    int *d_tok, *d_inp, *d_tgt, *d_nu, *d_uniq, *d_start, *d_pos;
    size_t tok_ints;
    float *h_scalars; /* pinned host copy of scalars: [0] norm, [2] loss sum */
    /* DROVER_STEP (docs/cuda.md), one GPU only: staged or graph uploads the token region from
     * pinned h_tok (buckets built on the host before the step) in one copy on copy_stream, which
     * overlaps the previous update; graph also replays the forward and the backward as two CUDA
     * graphs captured on the second step */
    enum cuda_step_mode step_mode;
    cudaStream_t copy_stream;
    cudaEvent_t ev_tok_free;  /* compute stream: every enqueued reader of the token region */
    cudaEvent_t ev_tok_ready; /* copy_stream: the region holds the next batch, h_tok is free */
    int *h_tok;               /* pinned, the region's layout */
    cudaGraph_t graph_f, graph_b;
    cudaGraphExec_t gexec_f, gexec_b;
    /* host scratch for the wte-gradient buckets (W*N positions with dp_gather, else N) */
    int *h_uniq, *h_start, *h_pos, *h_count;

    int64_t mem_peak;
};

/* ---- error entry ---- */

static int cu_fail(cudaError_t e, const char *what, const char *file, int line)
{
    log_error("CUDA: %s failed: %s (%s:%d)", what, cudaGetErrorString(e), file, line);
    return -EIO;
}
#define CU(call)                                                   \
    do {                                                           \
        cudaError_t e_ = (call);                                   \
        if (e_ != cudaSuccess)                                     \
            return cu_fail(e_, #call, __FILE__, __LINE__);         \
    } while (0)
#define KERN(call)                                                 \
    do {                                                           \
        int r_ = (call);                                           \
        if (r_ < 0) {                                              \
            log_error("CUDA kernel: %s failed: %s", #call,         \
                      r_ == -EINVAL ? "unsupported shape" : kern_last_error()); \
            return r_;                                             \
        }                                                          \
    } while (0)
#define NCCL(call)                                                 \
    do {                                                           \
        ncclResult_t n_ = (call);                                  \
        if (n_ != ncclSuccess) {                                   \
            log_error("NCCL: %s failed: %s", #call, ncclGetErrorString(n_)); \
            return n_ == ncclSystemError || n_ == ncclRemoteError ? -ECONNRESET : -EIO; \
        }                                                          \
    } while (0)

/* ---- DROVER_STEP ---- */

int cuda_step_mode_parse(const char *s, enum cuda_step_mode *ret_mode)
{
    int i = kern_knob_parse(KNOB_STEP, s); /* the names in enum order, default graph */
    if (i < 0)
        return -EINVAL;
    *ret_mode = (enum cuda_step_mode)i;
    return 0;
}

const char *cuda_step_mode_name(enum cuda_step_mode m)
{
    return (unsigned)m <= CUDA_STEP_GRAPH ? kern_knob_defs[KNOB_STEP].values[m] : "?";
}

/* ---- bump allocation inside an arena ---- */

struct carve {
    char *base;
    size_t used;
};

static void *carve_take(struct carve *c, size_t bytes)
{
    void *p = c->base ? c->base + c->used : NULL;
    c->used += (bytes + 255) & ~(size_t)255;
    return p;
}

/* Lay out the activation arena; with base NULL only computes its size. */
static size_t cuda_layout_acts(struct cuda_be *be, char *base)
{
    struct carve c = {base, 0};
    size_t N = (size_t)be->N, C = (size_t)be->C;
    size_t bf = sizeof(kbf16);
    be->encoded = carve_take(&c, N * C * bf);
    for (int l = 0; l < be->L; l++) {
        struct layer_acts *a = &be->layer[l];
        a->ln1 = carve_take(&c, N * C * bf);
        a->qkv = carve_take(&c, N * 3 * C * bf);
        a->atty = carve_take(&c, N * C * bf);
        a->res1 = carve_take(&c, N * C * bf);
        a->ln2 = carve_take(&c, N * C * bf);
        a->fch_pre = carve_take(&c, N * 4 * C * bf);
        a->fch = carve_take(&c, N * 4 * C * bf);
        a->res2 = carve_take(&c, N * C * bf);
        a->ln1_mean = carve_take(&c, N * sizeof(float));
        a->ln1_rstd = carve_take(&c, N * sizeof(float));
        a->ln2_mean = carve_take(&c, N * sizeof(float));
        a->ln2_rstd = carve_take(&c, N * sizeof(float));
        a->lse = carve_take(&c, N * be->NH * sizeof(float));
    }
    be->lnf = carve_take(&c, N * C * bf);
    be->lnf_mean = carve_take(&c, N * sizeof(float));
    be->lnf_rstd = carve_take(&c, N * sizeof(float));
    be->logits = carve_take(&c, N * (size_t)be->Vp * bf);
    be->dres = carve_take(&c, N * C * bf);
    be->dln = carve_take(&c, N * C * bf);
    be->dqkv = carve_take(&c, N * 3 * C * bf);
    be->datt = carve_take(&c, N * C * bf);
    be->dfch = carve_take(&c, N * 4 * C * bf);
    size_t cs = kern_colsum_scratch_floats(4 * be->C);
    be->colsum = carve_take(&c, cs * sizeof(float));
    be->att_scratch = carve_take(&c, N * be->NH * sizeof(float));
    be->losses = carve_take(&c, N * sizeof(float));
    be->norm_partial = carve_take(&c, kern_sumsq_partials() * sizeof(float));
    be->scalars = carve_take(&c, 4 * sizeof(float));
    size_t NB = be->dp_gather ? N * (size_t)be->W : N; /* positions the wte buckets index */
    be->tok_ints = 2 * N + 4 + NB + (NB + 1) + NB;
    be->d_tok = carve_take(&c, be->tok_ints * sizeof(int));
    if (be->d_tok) {
        be->d_inp = be->d_tok;
        be->d_tgt = be->d_inp + N;
        be->d_nu = be->d_tgt + N;
        be->d_uniq = be->d_nu + 4;
        be->d_start = be->d_uniq + NB;
        be->d_pos = be->d_start + NB + 1;
    }
    if (be->dp_gather)
        be->d_inp_all = carve_take(&c, NB * sizeof(int));
    return c.used;
}

static void cuda_destroy(void *p)
{
    struct cuda_be *be = p;
    if (!be)
        return;
    if (be->stream)
        (void)cudaStreamSynchronize(be->stream);
    if (be->comm_stream)
        (void)cudaStreamSynchronize(be->comm_stream);
    if (be->tn > 0)
        log_info("cuda backend: rank %d, %d steps: forward %.2f ms, backward to layer 0 %.2f ms, "
                 "gradient reduction after it %.2f ms (mean)", be->opts.rank, be->tn,
                 be->tsum[0] / be->tn, be->tsum[1] / be->tn, be->tsum[2] / be->tn);
    for (int i = 0; i < 4; i++)
        if (be->tev[i])
            (void)cudaEventDestroy(be->tev[i]);
    if (be->copy_stream)
        (void)cudaStreamSynchronize(be->copy_stream);
    if (be->gexec_f)
        (void)cudaGraphExecDestroy(be->gexec_f);
    if (be->gexec_b)
        (void)cudaGraphExecDestroy(be->gexec_b);
    if (be->graph_f)
        (void)cudaGraphDestroy(be->graph_f);
    if (be->graph_b)
        (void)cudaGraphDestroy(be->graph_b);
    if (be->ev_tok_free)
        (void)cudaEventDestroy(be->ev_tok_free);
    if (be->ev_tok_ready)
        (void)cudaEventDestroy(be->ev_tok_ready);
    if (be->copy_stream)
        (void)cudaStreamDestroy(be->copy_stream);
    if (be->h_tok)
        (void)cudaFreeHost(be->h_tok);
    if (be->comm)
        (void)ncclCommDestroy(be->comm);
    kern_blas_free(be->blas);
    (void)cudaFree(be->arena_params);
    (void)cudaFree(be->arena_grads);
    (void)cudaFree(be->arena_opt);
    (void)cudaFree(be->arena_acts);
    if (be->ev_fork)
        (void)cudaEventDestroy(be->ev_fork);
    if (be->ev_join)
        (void)cudaEventDestroy(be->ev_join);
    if (be->ev_loss)
        (void)cudaEventDestroy(be->ev_loss);
    if (be->ev_norm)
        (void)cudaEventDestroy(be->ev_norm);
    if (be->ev_bucket)
        (void)cudaEventDestroy(be->ev_bucket);
    if (be->ev_comm_done)
        (void)cudaEventDestroy(be->ev_comm_done);
    if (be->ev_inp)
        (void)cudaEventDestroy(be->ev_inp);
    if (be->comm_stream)
        (void)cudaStreamDestroy(be->comm_stream);
    if (be->h_inp_all)
        (void)cudaFreeHost(be->h_inp_all);
    if (be->stream2)
        (void)cudaStreamDestroy(be->stream2);
    if (be->stream)
        (void)cudaStreamDestroy(be->stream);
    if (be->h_scalars)
        (void)cudaFreeHost(be->h_scalars);
    free(be->layer);
    free(be->h_uniq);
    free(be->h_start);
    free(be->h_pos);
    free(be->h_count);
    free(be);
}

static int cuda_pick_device(const struct backend_opts *o, int *ret_dev)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorNotPermitted) {
        log_error("CUDA: no usable GPU: %s (run `drover-train selftest --device cuda` for the "
                  "cause and the fix)", cudaGetErrorString(e));
        return -ENODEV;
    }
    if (e != cudaSuccess)
        return cu_fail(e, "cudaGetDeviceCount", __FILE__, __LINE__);
    if (n <= 0) {
        log_error("CUDA: no GPU visible (check CUDA_VISIBLE_DEVICES and /dev/nvidia*)");
        return -ENODEV;
    }
    /* the agent may give each rank exactly one GPU through CUDA_VISIBLE_DEVICES */
    *ret_dev = n == 1 ? 0 : o->local_rank % n;
    return 0;
}

static int cuda_init_nccl(struct cuda_be *be)
{
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (!be->opts.dist) {
        log_error("NCCL: world size %d but no rendezvous (MASTER_ADDR/MASTER_PORT) was set up",
                  be->opts.world_size);
        return -EINVAL;
    }
    if (be->opts.rank == 0)
        NCCL(ncclGetUniqueId(&id));
    int r = dist_broadcast(be->opts.dist, &id, sizeof id);
    if (r < 0) {
        log_error("NCCL: sharing the unique id over the rendezvous socket failed: %s", strerror(-r));
        return r;
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    if (be->dp_ctas > 0)
        cfg.maxCTAs = be->dp_ctas;
    NCCL(ncclCommInitRankConfig(&be->comm, be->opts.world_size, id, be->opts.rank, &cfg));
    return 0;
}

static int cuda_create_inner(struct cuda_be *be)
{
    CU(cudaSetDevice(be->device));
    CU(cudaStreamCreateWithFlags(&be->stream, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&be->stream2, cudaStreamNonBlocking));
    CU(cudaEventCreateWithFlags(&be->ev_fork, cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&be->ev_join, cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&be->ev_loss, cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&be->ev_norm, cudaEventDisableTiming));
    CU(cudaMallocHost((void **)&be->h_scalars, 4 * sizeof(float)));
    if (getenv("DROVER_DP_TIMING") && be->W > 1)
        for (int i = 0; i < 4; i++)
            CU(cudaEventCreate(&be->tev[i]));
    CU(cudaDeviceGetAttribute(&be->sm_count, cudaDevAttrMultiProcessorCount, be->device));
    if (be->dp_overlap) {
        int lo = 0, hi = 0;
        CU(cudaDeviceGetStreamPriorityRange(&lo, &hi));
        /* DROVER_DP_PRIO=1: the collectives' CTAs go before the backward's queued blocks */
        const char *pr = getenv("DROVER_DP_PRIO");
        CU(cudaStreamCreateWithPriority(&be->comm_stream, cudaStreamNonBlocking,
                                        pr && atoi(pr) > 0 ? hi : lo));
        CU(cudaEventCreateWithFlags(&be->ev_bucket, cudaEventDisableTiming));
        CU(cudaEventCreateWithFlags(&be->ev_comm_done, cudaEventDisableTiming));
        CU(cudaEventCreateWithFlags(&be->ev_inp, cudaEventDisableTiming));
    }
    if (be->dp_gather)
        CU(cudaMallocHost((void **)&be->h_inp_all, (size_t)be->W * be->N * sizeof(int)));
    if (be->step_mode != CUDA_STEP_PLAIN) {
        CU(cudaStreamCreateWithFlags(&be->copy_stream, cudaStreamNonBlocking));
        CU(cudaEventCreateWithFlags(&be->ev_tok_free, cudaEventDisableTiming));
        CU(cudaEventCreateWithFlags(&be->ev_tok_ready, cudaEventDisableTiming));
    }
    int r = kern_blas_new(CUBLAS_WORKSPACE_BYTES, &be->blas);
    if (r < 0) {
        log_error("cuBLASLt: handle creation failed: %s", kern_last_error());
        return r;
    }
    if (be->opts.rank == 0) {
        char what[400];
        kern_blas_describe(be->blas, what, sizeof what);
        log_info("cuda backend: matmuls: %s", what);
    }
    size_t np = be->nparams;
    CU(cudaMalloc(&be->arena_params, np * (sizeof(float) + sizeof(kbf16)) + 256));
    be->params = be->arena_params;
    be->pbf = (kbf16 *)((char *)be->arena_params + ((np * sizeof(float) + 255) & ~(size_t)255));
    CU(cudaMalloc(&be->arena_grads, np * sizeof(float)));
    be->grads = be->arena_grads;
    CU(cudaMalloc(&be->arena_opt, 2 * np * sizeof(float)));
    be->m = be->arena_opt;
    be->v = be->m + np;
    size_t acts = cuda_layout_acts(be, NULL);
    CU(cudaMalloc(&be->arena_acts, acts));
    (void)cuda_layout_acts(be, be->arena_acts);
    if (be->step_mode != CUDA_STEP_PLAIN)
        CU(cudaMallocHost((void **)&be->h_tok, be->tok_ints * sizeof(int)));
    CU(cudaMemsetAsync(be->arena_params, 0, np * (sizeof(float) + sizeof(kbf16)), be->stream));
    CU(cudaMemsetAsync(be->arena_grads, 0, np * sizeof(float), be->stream));
    CU(cudaMemsetAsync(be->arena_opt, 0, 2 * np * sizeof(float), be->stream));
    CU(cudaStreamSynchronize(be->stream));
    if (be->opts.world_size > 1) {
        r = cuda_init_nccl(be);
        if (r < 0)
            return r;
    }
    log_debug("cuda backend: device %d, %zu params, activations %.1f MiB, step %s, data parallel %s",
              be->device, np, (double)acts / (1 << 20), cuda_step_mode_name(be->step_mode),
              be->W == 1 ? "off" : be->dp_gather ? "overlapped, embedding rows gathered"
                                 : be->dp_overlap ? "overlapped" : "one all-reduce");
    return 0;
}

static int cuda_create(const struct gpt_config *cfg, const struct backend_opts *opts, void **ret_be)
{
    struct gpt_config c = *cfg;
    int r = gpt_config_check(&c);
    if (r < 0)
        return r;
    if (opts->batch <= 0 || opts->seq <= 0 || opts->seq > c.seq || opts->world_size < 1 ||
        opts->rank < 0 || opts->rank >= opts->world_size)
        return -EINVAL;
    int hs = c.dim / c.heads;
    if (c.dim % 8 || (hs != 16 && hs != 32 && hs != 64 && hs != 128)) {
        log_error("cuda backend: width %d with %d heads (head size %d) is not supported: width "
                  "must be a multiple of 8 and the head size 16, 32, 64 or 128",
                  c.dim, c.heads, hs);
        return -EINVAL;
    }
    /* every implementation switch at once: a misspelt one would otherwise run the default */
    char kerr[256];
    if (kern_knobs_check(kerr, sizeof kerr) < 0) {
        log_error("cuda backend: %s", kerr);
        return -EINVAL;
    }
    enum cuda_step_mode sm;
    cuda_step_mode_parse(getenv("DROVER_STEP"), &sm);
    struct cuda_be *be = calloc(1, sizeof *be);
    if (!be)
        return -ENOMEM;
    be->cfg = c;
    be->opts = *opts;
    be->B = opts->batch;
    be->T = opts->seq;
    be->C = c.dim;
    be->L = c.layers;
    be->NH = c.heads;
    be->V = c.vocab;
    be->Vp = c.vocab_padded;
    be->N = be->B * be->T;
    be->nparams = gpt_num_params(&c);
    be->W = opts->world_size;
    if (be->W > 1) {
        /* DROVER_DP: unset or "flat" (the default): one all-reduce after the backward;
         * "bucket": per half-layer buckets all-reduced on comm_stream during the backward;
         * "overlap": buckets, wte reduced right after the classifier and the embedding rows
         * gathered.  Overlapping measured slower on two H200s (docs/benchmarks.md): NCCL's
         * kernels slow the backward by more than the all-reduce they hide. */
        int dp = kern_knob(KNOB_DP); /* 0 flat, 1 bucket, 2 overlap (knobs.h) */
        be->dp_overlap = dp > 0;
        /* the gathered gradient rows (W*N*C bf16) live in the logits buffer (N*Vp bf16), dead
         * by then */
        be->dp_gather = dp == 2 &&
                        (size_t)be->W * (size_t)c.dim <= (size_t)c.vocab_padded;
        const char *ct = getenv("DROVER_DP_CTAS");
        be->dp_ctas = be->dp_overlap && ct ? atoi(ct) : 0;
    }
    /* data parallel keeps the plain step (its collectives and token gather are not captured) */
    be->step_mode = be->W > 1 ? CUDA_STEP_PLAIN : sm;
    gpt_param_sizes(&c, be->size);
    for (int i = 0; i < GPT_NPARAM_TENSORS; i++)
        be->off[i] = gpt_param_offset(&c, (enum gpt_param)i);
    be->mem_peak = -1;
    be->layer = calloc((size_t)be->L, sizeof *be->layer);
    size_t NB = (size_t)be->N * (be->dp_gather ? (size_t)be->W : 1);
    be->h_uniq = malloc(NB * sizeof(int));
    be->h_start = malloc((NB + 1) * sizeof(int));
    be->h_pos = malloc(NB * sizeof(int));
    be->h_count = calloc((size_t)be->Vp, sizeof(int));
    if (!be->layer || !be->h_uniq || !be->h_start || !be->h_pos || !be->h_count) {
        cuda_destroy(be);
        return -ENOMEM;
    }
    r = cuda_pick_device(opts, &be->device);
    if (r >= 0)
        r = cuda_create_inner(be);
    if (r < 0) {
        cuda_destroy(be);
        return r == -ENOMEM ? r : (r == -ENODEV || r == -EINVAL ? r : -EIO);
    }
    *ret_be = be;
    return 0;
}

static int cuda_set_state(void *p, const float *params, const float *m, const float *v)
{
    struct cuda_be *be = p;
    size_t bytes = be->nparams * sizeof(float);
    CU(cudaSetDevice(be->device));
    CU(cudaMemcpyAsync(be->params, params, bytes, cudaMemcpyHostToDevice, be->stream));
    KERN(kern_f32_to_bf16(be->pbf, be->params, be->nparams, be->stream));
    if (m)
        CU(cudaMemcpyAsync(be->m, m, bytes, cudaMemcpyHostToDevice, be->stream));
    else
        CU(cudaMemsetAsync(be->m, 0, bytes, be->stream));
    if (v)
        CU(cudaMemcpyAsync(be->v, v, bytes, cudaMemcpyHostToDevice, be->stream));
    else
        CU(cudaMemsetAsync(be->v, 0, bytes, be->stream));
    CU(cudaStreamSynchronize(be->stream));
    return 0;
}

static int cuda_get_state(void *p, float *params, float *m, float *v)
{
    struct cuda_be *be = p;
    size_t bytes = be->nparams * sizeof(float);
    CU(cudaSetDevice(be->device));
    CU(cudaMemcpyAsync(params, be->params, bytes, cudaMemcpyDeviceToHost, be->stream));
    if (m)
        CU(cudaMemcpyAsync(m, be->m, bytes, cudaMemcpyDeviceToHost, be->stream));
    if (v)
        CU(cudaMemcpyAsync(v, be->v, bytes, cudaMemcpyDeviceToHost, be->stream));
    CU(cudaStreamSynchronize(be->stream));
    return 0;
}

static int cuda_check_tokens(const struct cuda_be *be, const int *inputs, const int *targets)
{
    for (int i = 0; i < be->N; i++)
        if (inputs[i] < 0 || inputs[i] >= be->Vp || targets[i] < 0 || targets[i] >= be->V)
            return -EINVAL;
    return 0;
}

#define PW(name) (be->pbf + be->off[name])
#define PL(name, l) (be->pbf + be->off[name] + (size_t)(l) * (be->size[name] / be->L))
#define GL(name, l) (be->grads + be->off[name] + (size_t)(l) * (be->size[name] / be->L))

/* ---- data parallel: gradient buckets reduced on comm_stream during the backward ----
 * A bucket is a list of tensors, whole (layer < 0) or one layer's slice.  The compute stream
 * records ev_bucket once the bucket's gradients are complete (nothing later in the step writes
 * them), comm_stream waits for it and all-reduces (average) every slice in place, in one NCCL
 * group.  Every rank issues the same collectives in the same order; for two ranks an element's
 * average (a + b) / 2 does not depend on how the array is cut, so the bits equal one all-reduce
 * of the whole array. */
static int dp_bucket(struct cuda_be *be, const enum gpt_param *list, int n, int layer)
{
    CU(cudaEventRecord(be->ev_bucket, be->stream));
    CU(cudaStreamWaitEvent(be->comm_stream, be->ev_bucket, 0));
    NCCL(ncclGroupStart());
    for (int i = 0; i < n; i++) {
        size_t cnt = layer < 0 ? be->size[list[i]] : be->size[list[i]] / (size_t)be->L;
        float *g = be->grads + be->off[list[i]] + (layer < 0 ? 0 : (size_t)layer * cnt);
        NCCL(ncclAllReduce(g, g, cnt, ncclFloat, ncclAvg, be->comm, be->comm_stream));
    }
    NCCL(ncclGroupEnd());
    return 0;
}

static const enum gpt_param dp_mlp[] = {GPT_FCPROJW, GPT_FCPROJB, GPT_FCW, GPT_FCB, GPT_LN2W,
                                        GPT_LN2B};
static const enum gpt_param dp_att[] = {GPT_ATTPROJW, GPT_ATTPROJB, GPT_QKVW, GPT_QKVB, GPT_LN1W,
                                        GPT_LN1B};

/* dp_gather: every rank's tokens to every host, started on comm_stream behind the upload (the
 * host waits for it only when it builds the wte buckets, after enqueuing the layers) */
static int dp_gather_tokens(struct cuda_be *be)
{
    size_t N = (size_t)be->N;
    CU(cudaEventRecord(be->ev_bucket, be->stream));
    CU(cudaStreamWaitEvent(be->comm_stream, be->ev_bucket, 0));
    NCCL(ncclAllGather(be->d_inp, be->d_inp_all, N, ncclInt32, be->comm, be->comm_stream));
    CU(cudaMemcpyAsync(be->h_inp_all, be->d_inp_all, (size_t)be->W * N * sizeof(int),
                       cudaMemcpyDeviceToHost, be->comm_stream));
    CU(cudaEventRecord(be->ev_inp, be->comm_stream));
    return 0;
}

/* The forward's kernels from the tokens in d_inp/d_tgt to the loss sum in h_scalars[2] (landed
 * once the stream has passed them); with train, the classifier also leaves dlogits (scaled by
 * 1/N) in be->logits.  Only stream work: a CUDA graph captures it. */
static int cuda_enqueue_forward(struct cuda_be *be, bool train)
{
    int N = be->N, C = be->C, B = be->B, T = be->T, NH = be->NH;
    cudaStream_t s = be->stream;
    KERN(kern_encoder_forward(be->encoded, be->d_inp, PW(GPT_WTE), PW(GPT_WPE), B, T, C, s));
    for (int l = 0; l < be->L; l++) {
        struct layer_acts *a = &be->layer[l];
        const kbf16 *x = l == 0 ? be->encoded : be->layer[l - 1].res2;
        KERN(kern_layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, x, PL(GPT_LN1W, l),
                                    PL(GPT_LN1B, l), N, C, s));
        KERN(kern_matmul_forward(be->blas, a->qkv, NULL, a->ln1, PL(GPT_QKVW, l), PL(GPT_QKVB, l),
                                 NULL, N, C, 3 * C, s));
        KERN(kern_attention_forward(a->atty, a->lse, a->qkv, B, T, C, NH, s));
        KERN(kern_matmul_forward(be->blas, a->res1, NULL, a->atty, PL(GPT_ATTPROJW, l),
                                 PL(GPT_ATTPROJB, l), x, N, C, C, s));
        KERN(kern_layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res1, PL(GPT_LN2W, l),
                                    PL(GPT_LN2B, l), N, C, s));
        KERN(kern_matmul_forward(be->blas, a->fch, a->fch_pre, a->ln2, PL(GPT_FCW, l),
                                 PL(GPT_FCB, l), NULL, N, C, 4 * C, s));
        KERN(kern_matmul_forward(be->blas, a->res2, NULL, a->fch, PL(GPT_FCPROJW, l),
                                 PL(GPT_FCPROJB, l), a->res1, N, 4 * C, C, s));
    }
    KERN(kern_layernorm_forward(be->lnf, be->lnf_mean, be->lnf_rstd, be->layer[be->L - 1].res2,
                                PW(GPT_LNFW), PW(GPT_LNFB), N, C, s));
    KERN(kern_matmul_forward(be->blas, be->logits, NULL, be->lnf, PW(GPT_WTE), NULL, NULL, N, C,
                             be->Vp, s));
    KERN(kern_classifier_forward_backward(be->logits, be->losses, be->d_tgt,
                                          train ? 1.0f / (float)N : 0.0f, N, be->V, be->Vp, s));
    KERN(kern_sum(be->scalars + 2, be->losses, (size_t)N, s));
    CU(cudaMemcpyAsync(be->h_scalars + 2, be->scalars + 2, sizeof(float), cudaMemcpyDeviceToHost,
                       s));
    return 0;
}

/* Forward pass, plain: the tokens copied from pageable memory on the compute stream. */
static int cuda_run_forward(struct cuda_be *be, const int *inputs, const int *targets, bool train)
{
    int r = cuda_check_tokens(be, inputs, targets);
    if (r < 0)
        return r;
    int N = be->N;
    cudaStream_t s = be->stream;
    CU(cudaSetDevice(be->device));
    if (train && be->tev[0])
        CU(cudaEventRecord(be->tev[0], s));
    CU(cudaMemcpyAsync(be->d_inp, inputs, (size_t)N * sizeof(int), cudaMemcpyHostToDevice, s));
    CU(cudaMemcpyAsync(be->d_tgt, targets, (size_t)N * sizeof(int), cudaMemcpyHostToDevice, s));
    if (train && be->dp_gather && (r = dp_gather_tokens(be)) < 0)
        return r;
    if ((r = cuda_enqueue_forward(be, train)) < 0)
        return r;
    /* the loss lands in h_scalars[2] once ev_loss has completed */
    CU(cudaEventRecord(be->ev_loss, s));
    return 0;
}

/* staged / graph: the next batch into pinned h_tok (with buckets: the wte-gradient buckets too)
 * and one copy of the token region on copy_stream, once every enqueued reader of the region is
 * past (ev_tok_free); the compute stream waits for the copy.  The previous step's update still
 * runs meanwhile. */
static int cuda_stage_tokens(struct cuda_be *be, const int *inputs, const int *targets,
                             bool buckets)
{
    int r = cuda_check_tokens(be, inputs, targets);
    if (r < 0)
        return r;
    size_t N = (size_t)be->N;
    int *h = be->h_tok, nu = 0;
    CU(cudaSetDevice(be->device));
    CU(cudaEventSynchronize(be->ev_tok_ready)); /* the last copy has read h_tok (long done) */
    memcpy(h, inputs, N * sizeof(int));
    memcpy(h + N, targets, N * sizeof(int));
    if (buckets) {
        int *uniq = h + 2 * N + 4, *start = uniq + N;
        if ((r = tokbucket_build(inputs, be->N, be->Vp, be->h_count, uniq, start, start + N + 1,
                                 &nu)) < 0)
            return r;
    }
    h[2 * N] = nu;
    size_t n = buckets ? be->tok_ints : 2 * N + 4;
    CU(cudaStreamWaitEvent(be->copy_stream, be->ev_tok_free, 0));
    CU(cudaMemcpyAsync(be->d_tok, h, n * sizeof(int), cudaMemcpyHostToDevice, be->copy_stream));
    CU(cudaEventRecord(be->ev_tok_ready, be->copy_stream));
    CU(cudaStreamWaitEvent(be->stream, be->ev_tok_ready, 0));
    return 0;
}

/* Bucket the positions of each input token (counting sort: ascending positions per token);
 * inputs holds N positions (N = be->N, or W*N gathered ones). */
static int cuda_upload_buckets(struct cuda_be *be, const int *inputs, int N, int *ret_nuniq)
{
    int nu = 0;
    int r = tokbucket_build(inputs, N, be->Vp, be->h_count, be->h_uniq, be->h_start, be->h_pos,
                            &nu);
    if (r < 0)
        return r;
    cudaStream_t s = be->stream;
    CU(cudaMemcpyAsync(be->d_uniq, be->h_uniq, (size_t)nu * sizeof(int), cudaMemcpyHostToDevice, s));
    CU(cudaMemcpyAsync(be->d_start, be->h_start, (size_t)(nu + 1) * sizeof(int),
                       cudaMemcpyHostToDevice, s));
    CU(cudaMemcpyAsync(be->d_pos, be->h_pos, (size_t)N * sizeof(int), cudaMemcpyHostToDevice, s));
    *ret_nuniq = nu;
    return 0;
}

/* The backward; inputs NULL: staged, the buckets already in the token region (one GPU; only
 * stream work, so a CUDA graph captures it). */
static int cuda_run_backward(struct cuda_be *be, const int *inputs)
{
    int N = be->N, C = be->C, B = be->B, T = be->T, NH = be->NH;
    cudaStream_t s = be->stream;
    struct kern_blas *bl = be->blas;
    bool ov = be->dp_overlap;
    int r;
    /* the previous step's collectives have been waited for by its update; wait again in case
     * forward_backward ran without one */
    if (ov)
        CU(cudaStreamWaitEvent(s, be->ev_comm_done, 0));
    if (be->tev[1])
        CU(cudaEventRecord(be->tev[1], s));
    /* the backward's matmuls leave the collectives their SMs */
    if (be->dp_ctas > 0)
        kern_blas_set_sm_target(bl, be->sm_count - be->dp_ctas);
    /* zeroed: weight and bias gradients accumulate onto it */
    CU(cudaMemsetAsync(be->grads, 0, be->nparams * sizeof(float), s));
    /* classifier: logits now hold dlogits */
    KERN(kern_matmul_backward_input(bl, be->dln, be->logits, PW(GPT_WTE), 0, N, C, be->Vp, s));
    KERN(kern_matmul_backward_weight(bl, be->grads + be->off[GPT_WTE], be->logits, be->lnf, N, C,
                                     be->Vp, s));
    CU(cudaMemsetAsync(be->dres, 0, (size_t)N * C * sizeof(kbf16), s));
    KERN(kern_layernorm_backward(be->dres, be->grads + be->off[GPT_LNFW],
                                 be->grads + be->off[GPT_LNFB], be->colsum, be->dln,
                                 be->layer[be->L - 1].res2, PW(GPT_LNFW), be->lnf_mean,
                                 be->lnf_rstd, N, C, s));
    if (ov) {
        /* with dp_gather wte holds only the classifier's part now, the encoder's is added
         * (already averaged) after its reduction */
        static const enum gpt_param head[] = {GPT_LNFW, GPT_LNFB, GPT_WTE};
        if ((r = dp_bucket(be, head, be->dp_gather ? 3 : 2, -1)) < 0)
            return r;
    }
    for (int l = be->L - 1; l >= 0; l--) {
        struct layer_acts *a = &be->layer[l];
        const kbf16 *x = l == 0 ? be->encoded : be->layer[l - 1].res2;
        /* res2 = res1 + fch @ fcprojw^T + fcprojb; dres is d(res2) */
        /* dfch = d(fch) * gelu'(fch_pre), the GELU backward fused into the matmul epilogue */
        KERN(kern_matmul_backward_input_dgelu(bl, be->dfch, be->dres, PL(GPT_FCPROJW, l),
                                              a->fch_pre, N, 4 * C, C, s));
        /* the BGRADB epilogue (kern_matmul_backward_weight_bias) measured slower here:
           +2.7 ms of matmul for 1.1 ms of bias kernels per B=32 step on an H200 */
        KERN(kern_matmul_backward_weight(bl, GL(GPT_FCPROJW, l), be->dres, a->fch, N, 4 * C, C, s));
        /* fcprojb's gradient, the column sums of dres, comes with ln2's backward below (dres
         * is not written before it) */
        KERN(kern_matmul_backward_input(bl, be->dln, be->dfch, PL(GPT_FCW, l), 0, N, C, 4 * C, s));
        KERN(kern_matmul_backward_weight(bl, GL(GPT_FCW, l), be->dfch, a->ln2, N, C, 4 * C, s));
        KERN(kern_bias_backward(GL(GPT_FCB, l), be->colsum, be->dfch, N, 4 * C, s));
        KERN(kern_layernorm_backward_bias(be->dres, GL(GPT_LN2W, l), GL(GPT_LN2B, l),
                                          GL(GPT_FCPROJB, l), be->colsum, be->dln, a->res1,
                                          PL(GPT_LN2W, l), a->ln2_mean, a->ln2_rstd, N, C, s));
        if (ov && (r = dp_bucket(be, dp_mlp, 6, l)) < 0)
            return r;
        /* res1 = x + atty @ attprojw^T + attprojb; dres is now d(res1) */
        KERN(kern_matmul_backward_input(bl, be->datt, be->dres, PL(GPT_ATTPROJW, l), 0, N, C, C, s));
        KERN(kern_matmul_backward_weight(bl, GL(GPT_ATTPROJW, l), be->dres, a->atty, N, C, C, s));
        /* attprojb's gradient comes with ln1's backward, as fcprojb's with ln2's */
        /* the fused backward (DROVER_ATTN_BWD=fused) sums dQ in fp32 in the logits buffer,
         * dead from the classifier's weight gradient to the next forward (dp_gather writes it
         * only after the last layer) */
        KERN(kern_attention_backward3(be->dqkv, be->att_scratch, be->logits,
                                      (size_t)N * be->Vp * sizeof(kbf16), be->datt, a->atty,
                                      a->lse, a->qkv, B, T, C, NH, s, be->stream2, be->ev_fork,
                                      be->ev_join));
        KERN(kern_matmul_backward_input(bl, be->dln, be->dqkv, PL(GPT_QKVW, l), 0, N, C, 3 * C, s));
        KERN(kern_matmul_backward_weight(bl, GL(GPT_QKVW, l), be->dqkv, a->ln1, N, C, 3 * C, s));
        KERN(kern_bias_backward(GL(GPT_QKVB, l), be->colsum, be->dqkv, N, 3 * C, s));
        KERN(kern_layernorm_backward_bias(be->dres, GL(GPT_LN1W, l), GL(GPT_LN1B, l),
                                          GL(GPT_ATTPROJB, l), be->colsum, be->dln, x,
                                          PL(GPT_LN1W, l), a->ln1_mean, a->ln1_rstd, N, C, s));
        if (ov && (r = dp_bucket(be, dp_att, 6, l)) < 0)
            return r;
    }
    if (be->dp_ctas > 0)
        kern_blas_set_sm_target(bl, 0);
    if (be->tev[2])
        CU(cudaEventRecord(be->tev[2], s));
    int nu = 0;
    float *dwte = be->grads + be->off[GPT_WTE], *dwpe = be->grads + be->off[GPT_WPE];
    if (be->dp_gather) {
        /* every rank's d(encoded) rows into the logits buffer (dead since the classifier), after
         * the layer buckets on comm_stream; then each rank adds the same averaged embedding
         * gradients onto the reduced classifier part of wte */
        kbf16 *all = be->logits;
        CU(cudaEventRecord(be->ev_bucket, s));
        CU(cudaStreamWaitEvent(be->comm_stream, be->ev_bucket, 0));
        NCCL(ncclAllGather(be->dres, all, (size_t)N * C, ncclBfloat16, be->comm,
                           be->comm_stream));
        CU(cudaEventRecord(be->ev_comm_done, be->comm_stream));
        CU(cudaEventSynchronize(be->ev_inp)); /* long done: gathered at the forward's start */
        if ((r = cuda_upload_buckets(be, be->h_inp_all, be->W * N, &nu)) < 0)
            return r;
        CU(cudaStreamWaitEvent(s, be->ev_comm_done, 0));
        KERN(kern_encoder_backward_scaled(dwte, dwpe, all, be->d_uniq, be->d_start, be->d_pos,
                                          nu, be->W * B, T, C, 1.0f / (float)be->W, s));
        return 0;
    }
    if (!inputs) {
        KERN(kern_encoder_backward_dev(dwte, dwpe, be->dres, be->d_uniq, be->d_start, be->d_pos,
                                       be->d_nu, N < be->Vp ? N : be->Vp, B, T, C, s));
        return 0;
    }
    if ((r = cuda_upload_buckets(be, inputs, N, &nu)) < 0)
        return r;
    KERN(kern_encoder_backward(dwte, dwpe, be->dres, be->d_uniq, be->d_start, be->d_pos, nu, B, T,
                               C, s));
    if (ov) {
        static const enum gpt_param tail[] = {GPT_WTE, GPT_WPE};
        if ((r = dp_bucket(be, tail, 2, -1)) < 0)
            return r;
        CU(cudaEventRecord(be->ev_comm_done, be->comm_stream));
    }
    /* no synchronization: the backward runs on while the host returns and enqueues the update
     * (stream order); the pageable token copies above were staged before they returned */
    return 0;
}

static void cuda_note_memory(struct cuda_be *be)
{
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess && (int64_t)(tot - fr) > be->mem_peak)
        be->mem_peak = (int64_t)(tot - fr);
}

static int cuda_forward(void *p, const int *inputs, const int *targets, float *ret_loss)
{
    struct cuda_be *be = p;
    int r;
    if (be->step_mode == CUDA_STEP_PLAIN) {
        r = cuda_run_forward(be, inputs, targets, false);
    } else if ((r = cuda_stage_tokens(be, inputs, targets, false)) >= 0 &&
               (r = cuda_enqueue_forward(be, false)) >= 0) {
        CU(cudaEventRecord(be->ev_tok_free, be->stream));
    }
    if (r < 0)
        return r;
    CU(cudaStreamSynchronize(be->stream));
    *ret_loss = be->h_scalars[2] / (float)be->N;
    return 0;
}

/* graph: capture the forward and the backward (stream work only, no host waits) as two graphs.
 * Run after a step enqueued directly, so that cuBLASLt's algorithm cache is filled (and any
 * DROVER_BLAS_TUNE timing done) outside the capture: the graphs then hold the same kernels with
 * the same arguments as the direct step. */
static int cuda_capture_step(struct cuda_be *be)
{
    cudaStream_t s = be->stream;
    for (int part = 0; part < 2; part++) {
        cudaGraph_t g = NULL;
        CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        int r = part == 0 ? cuda_enqueue_forward(be, true) : cuda_run_backward(be, NULL);
        cudaError_t e = cudaStreamEndCapture(s, &g);
        if (r >= 0 && e != cudaSuccess)
            r = cu_fail(e, "cudaStreamEndCapture", __FILE__, __LINE__);
        cudaGraphExec_t x = NULL;
        if (r >= 0 && (e = cudaGraphInstantiate(&x, g, 0)) != cudaSuccess)
            r = cu_fail(e, "cudaGraphInstantiate", __FILE__, __LINE__);
        if (r < 0) {
            if (g)
                (void)cudaGraphDestroy(g);
            (void)cudaGetLastError();
            return r;
        }
        *(part == 0 ? &be->graph_f : &be->graph_b) = g;
        *(part == 0 ? &be->gexec_f : &be->gexec_b) = x;
    }
    size_t nf = 0, nb = 0;
    (void)cudaGraphGetNodes(be->graph_f, NULL, &nf);
    (void)cudaGraphGetNodes(be->graph_b, NULL, &nb);
    log_debug("cuda backend: step captured as CUDA graphs (forward %zu nodes, backward %zu)", nf,
              nb);
    return 0;
}

/* staged / graph: the step after the tokens are staged */
static int cuda_step_staged(struct cuda_be *be, const int *inputs, const int *targets)
{
    cudaStream_t s = be->stream;
    int r = cuda_stage_tokens(be, inputs, targets, true);
    if (r < 0)
        return r;
    if (be->step_mode == CUDA_STEP_GRAPH && !be->gexec_b && be->steps > 0 &&
        (r = cuda_capture_step(be)) < 0) {
        log_warn("cuda backend: capturing the step as a CUDA graph failed; launching its kernels "
                 "one by one from now on (DROVER_STEP=staged)");
        be->step_mode = CUDA_STEP_STAGED;
    }
    if (be->gexec_b) {
        CU(cudaGraphLaunch(be->gexec_f, s));
        CU(cudaEventRecord(be->ev_loss, s));
        CU(cudaGraphLaunch(be->gexec_b, s));
    } else {
        if ((r = cuda_enqueue_forward(be, true)) < 0)
            return r;
        CU(cudaEventRecord(be->ev_loss, s));
        if ((r = cuda_run_backward(be, NULL)) < 0)
            return r;
    }
    CU(cudaEventRecord(be->ev_tok_free, s));
    return 0;
}

static int cuda_forward_backward(void *p, const int *inputs, const int *targets, float *ret_loss)
{
    struct cuda_be *be = p;
    int r;
    if (be->step_mode != CUDA_STEP_PLAIN) {
        r = cuda_step_staged(be, inputs, targets);
    } else if ((r = cuda_run_forward(be, inputs, targets, true)) >= 0) {
        r = cuda_run_backward(be, inputs);
    }
    if (r < 0)
        return r;
    CU(cudaEventSynchronize(be->ev_loss));
    /* every buffer is allocated up front, so the footprint is known after the first step;
     * cudaMemGetInfo is not free, sample it rarely */
    if (be->steps++ % 64 == 0) {
        CU(cudaStreamSynchronize(be->stream));
        cuda_note_memory(be);
    }
    *ret_loss = be->h_scalars[2] / (float)be->N;
    return 0;
}

static int cuda_allreduce_grads(void *p)
{
    struct cuda_be *be = p;
    if (be->opts.world_size <= 1)
        return 0;
    CU(cudaSetDevice(be->device));
    if (be->dp_overlap) {
        /* reduced in buckets during the backward: the update only waits for the last one */
        CU(cudaStreamWaitEvent(be->stream, be->ev_comm_done, 0));
        return 0;
    }
    /* stream-ordered after the backward and before the update: no host wait here */
    NCCL(ncclAllReduce(be->grads, be->grads, be->nparams, ncclFloat, ncclAvg, be->comm, be->stream));
    return 0;
}

static int cuda_update(void *p, const struct adamw_hparams *h, float lr, int64_t t,
                       float *ret_grad_norm)
{
    struct cuda_be *be = p;
    cudaStream_t s = be->stream;
    CU(cudaSetDevice(be->device));
    if (be->dp_overlap) /* whether or not allreduce_grads ran */
        CU(cudaStreamWaitEvent(s, be->ev_comm_done, 0));
    if (be->tev[3])
        CU(cudaEventRecord(be->tev[3], s));
    KERN(kern_grad_norm(be->scalars, be->norm_partial, be->grads, be->nparams, h->grad_clip, 1.0f,
                        s));
    CU(cudaMemcpyAsync(be->h_scalars, be->scalars, sizeof(float), cudaMemcpyDeviceToHost, s));
    CU(cudaEventRecord(be->ev_norm, s));
    /* the AdamW kernels read the norm on the device and leave everything untouched when it is
     * not finite; the host waits only for the norm, so they overlap the return to the training
     * loop and the next step's uploads (stream order keeps the next forward behind them) */
    for (int i = 0; i < GPT_NPARAM_TENSORS; i++) {
        float wd = gpt_param_decays((enum gpt_param)i) ? h->weight_decay : 0.0f;
        size_t o = be->off[i];
        KERN(kern_adamw(be->params + o, be->pbf + o, be->grads + o, be->m + o, be->v + o,
                        be->scalars, be->size[i], lr, h->beta1, h->beta2, h->eps, wd, (long)t, s));
    }
    CU(cudaEventSynchronize(be->ev_norm));
    *ret_grad_norm = be->h_scalars[0];
    if (be->tev[3]) {
        float ms[3] = {0, 0, 0};
        CU(cudaEventElapsedTime(&ms[0], be->tev[0], be->tev[1]));
        CU(cudaEventElapsedTime(&ms[1], be->tev[1], be->tev[2]));
        CU(cudaEventElapsedTime(&ms[2], be->tev[2], be->tev[3]));
        if (be->steps > 3) /* past the warm-up */
            for (int i = 0; i < 3; i++)
                be->tsum[i] += ms[i];
        be->tn += be->steps > 3;
    }
    return 0;
}

static int64_t cuda_mem_peak(void *p)
{
    const struct cuda_be *be = p;
    return be->mem_peak;
}

static double cuda_peak(void *p)
{
    (void)p;
    return cuda_peak_flops();
}

const struct backend_ops backend_cuda = {
    .name = "cuda",
    .create = cuda_create,
    .destroy = cuda_destroy,
    .set_state = cuda_set_state,
    .get_state = cuda_get_state,
    .forward_backward = cuda_forward_backward,
    .forward = cuda_forward,
    .allreduce_grads = cuda_allreduce_grads,
    .update = cuda_update,
    .mem_peak = cuda_mem_peak,
    .peak_flops = cuda_peak,
};

#else
typedef int cuda_backend_not_built; /* ISO C wants a declaration in every translation unit */
#endif
