// kernels/matmul.cu: the model's matmuls through cuBLASLt (bf16 operands, fp32 accumulation),
// with the bias, GELU and residual fused into the epilogue where cuBLASLt allows it.
// Owns the cuBLASLt handle, its workspace and a small cache of heuristic choices per shape.
// Row-major tensors are handed to column-major cuBLASLt as their transposes (Y^T = W X^T).
// Never: synchronizes (except once per shape when DROVER_BLAS_TUNE asks for timing), logs, or
// picks an algorithm that needs more workspace than it owns.
#include <cublasLt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common.cuh"
#include "kernels/knobs.h"

#define ALGO_CACHE 128
#define LT_WANT 16 /* heuristic results asked for when an index other than the first is wanted */

// The measured choice among the heuristic's results (DROVER_BLAS_PICKS=table): for one GPU
// model, SM count and cuBLASLt version, the index in cublasLtMatmulAlgoGetHeuristic's list
// (asked for LT_WANT results) that ran fastest for a shape of the GPT-2 124M step, timed by
// bench/blas/sweep.sh (docs/benchmarks.md).  The heuristic's list is a function of the shape,
// the device and the library, so the same process or the next one picks the same algorithm
// and rounds the same way (unlike DROVER_BLAS_TUNE's timing at run time).  A shape, device or
// library not in the table gets the heuristic's first choice.
struct blas_pick {
    const char *device; /* cudaDeviceProp.name */
    int sms;            /* multiprocessors */
    int lt_version;     /* cublasLtGetVersion() */
    int m, n, k, ta, tb, epi, dtype, beta, index;
};

// {m, n, k, ta, tb, epilogue, D type, beta != 0} as lt_matmul_bg sees them; measured on one H200
// SXM (driver 580.159.04, CUDA 13.0's cuBLASLt 13.1.0) on 2026-12-03, median of 20 per index,
// two sweeps of 2 and 3 runs (docs/benchmarks.md); a pick is kept where it was faster than
// index 0 in both sweeps and 3% faster over the five runs.
static const struct blas_pick blas_picks[] = {
    /* matmul bwd-in attproj (C->C): 0.072 -> 0.064 ms */
    {"NVIDIA H200", 132, 130100, 768, 32768, 768, 0, 0, 1, 14, 0, 7},
    /* matmul bwd-in fcproj + dgelu: 0.180 -> 0.168 ms */
    {"NVIDIA H200", 132, 130100, 3072, 16384, 768, 0, 0, 192, 14, 0, 4},
    /* matmul bwd-in fcproj + dgelu: 0.339 -> 0.310 ms */
    {"NVIDIA H200", 132, 130100, 3072, 32768, 768, 0, 0, 192, 14, 0, 3},
    /* matmul bwd-w attproj: 0.047 -> 0.044 ms */
    {"NVIDIA H200", 132, 130100, 768, 768, 16384, 0, 1, 1, 0, 1, 1},
    /* matmul bwd-w attproj: 0.073 -> 0.068 ms */
    {"NVIDIA H200", 132, 130100, 768, 768, 32768, 0, 1, 1, 0, 1, 4},
    /* matmul bwd-w fcproj: 0.131 -> 0.125 ms */
    {"NVIDIA H200", 132, 130100, 3072, 768, 16384, 0, 1, 1, 0, 1, 5},
    /* matmul bwd-w qkv: 0.200 -> 0.183 ms */
    {"NVIDIA H200", 132, 130100, 768, 2304, 32768, 0, 1, 1, 0, 1, 2},
    /* matmul fwd classifier (C->Vp): 1.748 -> 1.585 ms */
    {"NVIDIA H200", 132, 130100, 50304, 16384, 768, 1, 0, 1, 14, 0, 6},
    /* matmul fwd classifier (C->Vp): 3.629 -> 3.218 ms */
    {"NVIDIA H200", 132, 130100, 50304, 32768, 768, 1, 0, 1, 14, 0, 6},
    /* matmul fwd fc (C->4C, gelu): 0.298 -> 0.278 ms */
    {"NVIDIA H200", 132, 130100, 3072, 32768, 768, 1, 0, 164, 14, 0, 3},
    /* matmul fwd qkv (C->3C, bias): 0.099 -> 0.095 ms */
    {"NVIDIA H200", 132, 130100, 2304, 16384, 768, 1, 0, 4, 14, 0, 1},
    /* matmul fwd qkv (C->3C, bias): 0.181 -> 0.159 ms */
    {"NVIDIA H200", 132, 130100, 2304, 32768, 768, 1, 0, 4, 14, 0, 7},
    {NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, /* end */
};

struct algo_entry {
    int used;
    int m, n, k, ta, tb, epi, dtype, beta, sms;
    int index; /* in the heuristic's list */
    cublasLtMatmulAlgo_t algo;
};

struct kern_blas {
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_bytes;
    int no_dgelu;  /* set once the DGELU epilogue was refused */
    int no_bgradb; /* set once the BGRADB epilogue was refused */
    int sm_target; /* > 0: CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET (SMs left to a concurrent stream) */
    int tune;      /* > 1: time the heuristic's first `tune` algorithms once per shape (DROVER_BLAS_TUNE) */
    int index;     /* >= 0: DROVER_BLAS_INDEX, the heuristic's result of that index, every shape */
    int table;     /* DROVER_BLAS_PICKS=table asked for (blas_picks[]) */
    int lt_version, sms;
    char device[256];
    int last_index; /* the heuristic index of the last call's algorithm (benchmarks) */
    int last_m, last_n, last_k, last_ta, last_tb, last_epi, last_dtype, last_beta;
    struct algo_entry cache[ALGO_CACHE];
};

static int blas_error(const char *what, cublasStatus_t st)
{
    char d[96];
    snprintf(d, sizeof d, "cuBLASLt status %d", (int)st);
    return kern_set_error(what, d);
}

extern "C" int kern_blas_new(size_t ws_bytes, struct kern_blas **ret_b)
{
    struct kern_blas *b = (struct kern_blas *)calloc(1, sizeof *b);
    if (!b)
        return -ENOMEM;
    cublasStatus_t st = cublasLtCreate(&b->lt);
    if (st != CUBLAS_STATUS_SUCCESS) {
        free(b);
        return blas_error("cublasLtCreate", st);
    }
    if (cudaMalloc(&b->ws, ws_bytes) != cudaSuccess) {
        cublasLtDestroy(b->lt);
        free(b);
        (void)cudaGetLastError();
        return -ENOMEM;
    }
    b->ws_bytes = ws_bytes;
    const char *t = getenv("DROVER_BLAS_TUNE");
    b->tune = t ? atoi(t) : 0;
    if (b->tune > 16)
        b->tune = 16;
    const char *ix = getenv("DROVER_BLAS_INDEX");
    b->index = ix && *ix ? atoi(ix) : -1;
    if (b->index >= LT_WANT)
        b->index = LT_WANT - 1;
    b->table = kern_knob(KNOB_BLAS_PICKS) == 1;
    b->lt_version = (int)cublasLtGetVersion();
    int dev = 0;
    cudaDeviceProp prop;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
        snprintf(b->device, sizeof b->device, "%s", prop.name);
        b->sms = prop.multiProcessorCount;
    }
    (void)cudaGetLastError();
    *ret_b = b;
    return 0;
}

// The table's index for this shape on this device and library, or -1.
static int blas_table_index(const struct kern_blas *b, int m, int n, int k, int ta, int tb, int epi,
                            int dtype, int beta1)
{
    for (const struct blas_pick *p = blas_picks; p->device; p++)
        if (p->m == m && p->n == n && p->k == k && p->ta == ta && p->tb == tb && p->epi == epi &&
            p->dtype == dtype && p->beta == beta1 && p->sms == b->sms &&
            p->lt_version == b->lt_version && !strcmp(p->device, b->device))
            return p->index;
    return -1;
}

extern "C" int kern_blas_describe(const struct kern_blas *b, char *buf, size_t n)
{
    int mine = 0;
    for (const struct blas_pick *p = blas_picks; p->device; p++)
        mine += p->sms == b->sms && p->lt_version == b->lt_version && !strcmp(p->device, b->device);
    if (b->index >= 0)
        return snprintf(buf, n, "cuBLASLt %d on %s (%d SMs), picks: index %d", b->lt_version,
                        b->device, b->sms, b->index);
    if (b->table)
        return snprintf(buf, n, "cuBLASLt %d on %s (%d SMs), picks: table (%d shape%s for this "
                        "device and library, the heuristic's first for the rest)", b->lt_version,
                        b->device, b->sms, mine, mine == 1 ? "" : "s");
    return snprintf(buf, n, "cuBLASLt %d on %s (%d SMs), picks: %s", b->lt_version, b->device,
                    b->sms, b->tune > 1 ? "tune" : "heuristic");
}

extern "C" int kern_blas_last(const struct kern_blas *b, char *buf, size_t n)
{
    return snprintf(buf, n, "{%d,%d,%d,%d,%d,%d,%d,%d} index %d", b->last_m, b->last_n, b->last_k,
                    b->last_ta, b->last_tb, b->last_epi, b->last_dtype, b->last_beta,
                    b->last_index);
}

extern "C" void kern_blas_set_sm_target(struct kern_blas *b, int sms)
{
    b->sm_target = sms > 0 ? sms : 0;
}

extern "C" void kern_blas_free(struct kern_blas *b)
{
    if (!b)
        return;
    cudaFree(b->ws);
    cublasLtDestroy(b->lt);
    free(b);
}

// Opt-in autotuning (DROVER_BLAS_TUNE=k): on a shape's first call, time each of the heuristic's
// first k algorithms on stream s, in place (the real call overwrites D and the GELU aux right
// after; when D is also the accumulated C, the weight gradients, D is saved first and put back):
// one warm-up round over all, then two timed rounds of `reps` calls each (reps makes a round
// ~2 ms), the better round counting; the heuristic's first choice is kept unless another is 3%
// faster.  A first version timed 5 calls once into a separate D and picked worse algorithms for
// some shapes (the weight gradients among them).  Synchronizes s (once per shape), and the
// choice depends on timing, so two processes may pick different algorithms and round
// differently: a run resumed in a new process is then not bit for bit the uninterrupted one
// (hence off by default).  Returns the index in res[] to use.
static int lt_tune(struct kern_blas *b, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                   cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc, cublasLtMatrixLayout_t ld,
                   const cublasLtMatmulHeuristicResult_t *res, int found, void *D, size_t d_bytes,
                   const void *A, const void *B, const void *C, float beta, cudaStream_t s)
{
    float alpha = 1.f, t[16];
    void *save = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    int best = 0, reps = 3;
    if (beta != 0.f && C == D) {
        if (cudaMalloc(&save, d_bytes) != cudaSuccess ||
            cudaMemcpyAsync(save, D, d_bytes, cudaMemcpyDeviceToDevice, s) != cudaSuccess) {
            (void)cudaGetLastError();
            if (save)
                cudaFree(save);
            return 0;
        }
    }
    if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)
        goto out;
    for (int i = 0; i < found; i++)
        t[i] = 1e30f;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < found; i++) {
            if (res[i].state != CUBLAS_STATUS_SUCCESS)
                continue;
            int ok = cudaEventRecord(e0, s) == cudaSuccess, n = round ? reps : 1;
            for (int rep = 0; rep < n && ok; rep++)
                ok = cublasLtMatmul(b->lt, op, &alpha, A, la, B, lb, &beta, C ? C : D, lc, D, ld,
                                    &res[i].algo, b->ws, b->ws_bytes, s) == CUBLAS_STATUS_SUCCESS;
            float ms = 0.f;
            if (!ok || cudaEventRecord(e1, s) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
                cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) {
                (void)cudaGetLastError();
                t[i] = 1e30f;
                continue;
            }
            if (round == 0) { /* warm-up; sets the repetitions from the heuristic's choice */
                if (i == 0 && ms > 0.f)
                    reps = ms > 2.f / 3 ? 3 : ms < 0.1f ? 20 : (int)(2.f / ms) + 1;
                continue;
            }
            if (ms < t[i])
                t[i] = ms;
        }
    }
    for (int i = 1; i < found; i++)
        if (t[i] < 0.97f * t[best])
            best = i;
out:
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    if (save) {
        if (cudaMemcpyAsync(D, save, d_bytes, cudaMemcpyDeviceToDevice, s) != cudaSuccess)
            best = -1; /* D lost: the caller reports it */
        cudaStreamSynchronize(s);
        cudaFree(save);
    }
    (void)cudaGetLastError();
    return best;
}

// D (m x n, col-major, ldd m) = alpha op(A) op(B) + beta C [+ bias(m)] [gelu, aux]
// A is (m x k) after op, B is (k x n) after op.
static int lt_matmul_bg(struct kern_blas *b, void *D, cudaDataType_t dtype, const void *A, int lda,
                        int ta, const void *B, int ldb, int tb, const void *C, float beta,
                        const void *bias, void *aux, int dgelu, float *bgrad, int m, int n, int k,
                        cudaStream_t s);

// dgelu: aux holds the forward's pre-activation and D is multiplied by gelu'(aux) (backward).
static int lt_matmul(struct kern_blas *b, void *D, cudaDataType_t dtype, const void *A, int lda,
                     int ta, const void *B, int ldb, int tb, const void *C, float beta,
                     const void *bias, void *aux, int dgelu, int m, int n, int k, cudaStream_t s)
{
    return lt_matmul_bg(b, D, dtype, A, lda, ta, B, ldb, tb, C, beta, bias, aux, dgelu, NULL, m, n,
                        k, s);
}

// bgrad (fp32, n): the bias gradient of B reduced over k (BGRADB epilogue), written (not added).
static int lt_matmul_bg(struct kern_blas *b, void *D, cudaDataType_t dtype, const void *A, int lda,
                        int ta, const void *B, int ldb, int tb, const void *C, float beta,
                        const void *bias, void *aux, int dgelu, float *bgrad, int m, int n, int k,
                        cudaStream_t s)
{
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL, ld = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasStatus_t st;
    int r = 0;
    float alpha = 1.f;
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    if (bgrad)
        epi = CUBLASLT_EPILOGUE_BGRADB;
    else if (aux && dgelu)
        epi = CUBLASLT_EPILOGUE_DGELU;
    else if (aux)
        epi = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    else if (bias)
        epi = CUBLASLT_EPILOGUE_BIAS;

#define LT(call)                                     \
    do {                                             \
        st = (call);                                 \
        if (st != CUBLAS_STATUS_SUCCESS) {           \
            r = blas_error(#call, st);               \
            goto out;                                \
        }                                            \
    } while (0)

    LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (b->sm_target > 0) {
        int32_t sms = b->sm_target;
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof sms));
    }
    if (bgrad) {
        cudaDataType_t bt = CUDA_R_32F;
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bgrad, sizeof bgrad));
    }
    if (bias) {
        cudaDataType_t bt = CUDA_R_16BF;
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    if (aux) {
        int64_t ldaux = m;
        cudaDataType_t at = CUDA_R_16BF;
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ldaux, sizeof ldaux));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &at, sizeof at));
    }
    LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, ta ? k : m, ta ? m : k, lda));
    LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, tb ? n : k, tb ? k : n, ldb));
    LT(cublasLtMatrixLayoutCreate(&lc, dtype, m, n, m));
    LT(cublasLtMatrixLayoutCreate(&ld, dtype, m, n, m));
    {
        int beta1 = beta != 0.f;
        struct algo_entry *e = NULL;
        unsigned h = (unsigned)(m * 31 + n * 17 + k * 7 + ta * 3 + tb * 5 + (int)epi * 11 +
                                (int)dtype * 13 + beta1 + b->sm_target * 19) % ALGO_CACHE;
        for (int probe = 0; probe < ALGO_CACHE; probe++) {
            struct algo_entry *c = &b->cache[(h + probe) % ALGO_CACHE];
            if (!c->used) {
                e = c;
                break;
            }
            if (c->m == m && c->n == n && c->k == k && c->ta == ta && c->tb == tb &&
                c->epi == (int)epi && c->dtype == (int)dtype && c->beta == beta1 &&
                c->sms == b->sm_target) {
                e = c;
                break;
            }
        }
        cublasLtMatmulAlgo_t algo;
        b->last_m = m, b->last_n = n, b->last_k = k, b->last_ta = ta, b->last_tb = tb;
        b->last_epi = (int)epi, b->last_dtype = (int)dtype, b->last_beta = beta1;
        if (e && e->used) {
            algo = e->algo;
            b->last_index = e->index;
        } else {
            cublasLtMatmulHeuristicResult_t res[LT_WANT];
            int fixed = b->index;
            if (fixed < 0 && b->table && !b->sm_target)
                fixed = blas_table_index(b, m, n, k, ta, tb, (int)epi, (int)dtype, beta1);
            int found = 0, want = fixed > 0 ? LT_WANT : b->tune > 1 && !bgrad ? b->tune : 1;
            LT(cublasLtMatmulPreferenceCreate(&pref));
            LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &b->ws_bytes, sizeof b->ws_bytes));
            LT(cublasLtMatmulAlgoGetHeuristic(b->lt, op, la, lb, lc, ld, pref, want, res, &found));
            if (found == 0) {
                r = kern_set_error("cublasLtMatmulAlgoGetHeuristic", "no algorithm for this shape");
                goto out;
            }
            int pick = 0;
            if (fixed >= 0)
                pick = fixed < found && res[fixed].state == CUBLAS_STATUS_SUCCESS ? fixed : 0;
            else if (found > 1)
                pick = lt_tune(b, op, la, lb, lc, ld, res, found, D,
                               (size_t)m * n * (dtype == CUDA_R_32F ? 4 : 2), A, B, C, beta, s);
            if (pick < 0) {
                r = kern_set_error("DROVER_BLAS_TUNE", "could not restore the accumulated output");
                goto out;
            }
            algo = res[pick].algo;
            b->last_index = pick;
            if (e) {
                e->used = 1;
                e->index = pick;
                e->m = m, e->n = n, e->k = k, e->ta = ta, e->tb = tb, e->epi = (int)epi;
                e->dtype = (int)dtype, e->beta = beta1, e->sms = b->sm_target;
                e->algo = algo;
            }
        }
        LT(cublasLtMatmul(b->lt, op, &alpha, A, la, B, lb, &beta, C ? C : D, lc, D, ld, &algo,
                          b->ws, b->ws_bytes, s));
    }
#undef LT
out:
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (la)
        cublasLtMatrixLayoutDestroy(la);
    if (lb)
        cublasLtMatrixLayoutDestroy(lb);
    if (lc)
        cublasLtMatrixLayoutDestroy(lc);
    if (ld)
        cublasLtMatrixLayoutDestroy(ld);
    if (op)
        cublasLtMatmulDescDestroy(op);
    return r;
}

extern "C" int kern_matmul_forward(struct kern_blas *b, kbf16 *out, kbf16 *gelu_pre,
                                   const kbf16 *inp, const kbf16 *w, const kbf16 *bias,
                                   const kbf16 *residual, int N, int C, int OC, cudaStream_t s)
{
    if (C % 8 || OC % 8 || (gelu_pre && residual))
        return -EINVAL;
    // out^T (OC x N) = W (col view C x OC, transposed) * inp^T (col view C x N)
    return lt_matmul(b, out, CUDA_R_16BF, w, C, 1, inp, C, 0, residual, residual ? 1.f : 0.f,
                     bias, gelu_pre, 0, OC, N, C, s);
}

extern "C" int kern_matmul_backward_input(struct kern_blas *b, kbf16 *dinp, const kbf16 *dout,
                                          const kbf16 *w, int accumulate, int N, int C, int OC,
                                          cudaStream_t s)
{
    if (C % 8 || OC % 8)
        return -EINVAL;
    // dinp^T (C x N) = W (col view C x OC) * dout^T (col view OC x N)
    return lt_matmul(b, dinp, CUDA_R_16BF, w, C, 0, dout, OC, 0, accumulate ? dinp : NULL,
                     accumulate ? 1.f : 0.f, NULL, NULL, 0, C, N, OC, s);
}

extern "C" int kern_matmul_backward_input_dgelu(struct kern_blas *b, kbf16 *dinp, const kbf16 *dout,
                                                const kbf16 *w, const kbf16 *pre, int N, int C,
                                                int OC, cudaStream_t s)
{
    if (C % 8 || OC % 8)
        return -EINVAL;
    if (!b->no_dgelu) {
        int r = lt_matmul(b, dinp, CUDA_R_16BF, w, C, 0, dout, OC, 0, NULL, 0.f, NULL, (void *)pre,
                          1, C, N, OC, s);
        if (r == 0)
            return 0;
        b->no_dgelu = 1; /* this cuBLASLt has no DGELU epilogue for these types: unfused from now */
        (void)cudaGetLastError();
    }
    int r = kern_matmul_backward_input(b, dinp, dout, w, 0, N, C, OC, s);
    if (r < 0)
        return r;
    return kern_gelu_backward_inplace(dinp, pre, (size_t)N * C, s);
}

extern "C" int kern_matmul_backward_weight(struct kern_blas *b, float *dw, const kbf16 *dout,
                                           const kbf16 *inp, int N, int C, int OC, cudaStream_t s)
{
    if (C % 8 || OC % 8)
        return -EINVAL;
    // dw^T (C x OC) += inp^T (col view C x N) * dout (col view OC x N, transposed)
    return lt_matmul(b, dw, CUDA_R_32F, inp, C, 0, dout, OC, 1, dw, 1.f, NULL, NULL, 0, C, OC, N, s);
}

extern "C" int kern_matmul_backward_weight_bias(struct kern_blas *b, float *dw, float *dbias,
                                                float *scratch, const kbf16 *dout, const kbf16 *inp,
                                                int N, int C, int OC, cudaStream_t s)
{
    if (C % 8 || OC % 8)
        return -EINVAL;
    if (!b->no_bgradb) {
        int r = lt_matmul_bg(b, dw, CUDA_R_32F, inp, C, 0, dout, OC, 1, dw, 1.f, NULL, NULL, 0,
                             dbias, C, OC, N, s);
        if (r == 0)
            return 0;
        b->no_bgradb = 1; /* no BGRADB epilogue for these types here: unfused from now on */
        (void)cudaGetLastError();
    }
    int r = kern_matmul_backward_weight(b, dw, dout, inp, N, C, OC, s);
    if (r < 0)
        return r;
    if (cudaMemsetAsync(dbias, 0, (size_t)OC * sizeof(float), s) != cudaSuccess)
        return kern_check_launch("bias gradient memset");
    return kern_bias_backward(dbias, scratch, dout, N, OC, s);
}

// ---- the table's picks against the heuristic's first choice (test_kernels) ----

static __global__ void blas_fill_kernel(void *p, size_t n, int f32, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
        float v = ((h & 0xffff) / 65536.f - 0.5f) * 2.f;
        if (f32)
            ((float *)p)[i] = v;
        else
            ((bf16 *)p)[i] = __float2bfloat16_rn(v);
    }
}

// acc[0] += sum (a - b)^2, acc[1] += sum b^2
static __global__ void blas_diff_kernel(const void *a, const void *b, size_t n, int f32, double *acc)
{
    double d2 = 0, r2 = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float x = f32 ? ((const float *)a)[i] : __bfloat162float(((const bf16 *)a)[i]);
        float y = f32 ? ((const float *)b)[i] : __bfloat162float(((const bf16 *)b)[i]);
        d2 += (double)(x - y) * (x - y);
        r2 += (double)y * y;
    }
    atomicAdd(&acc[0], d2);
    atomicAdd(&acc[1], r2);
}

static void *blas_dev(size_t n, int f32, unsigned seed)
{
    void *p = NULL;
    if (cudaMalloc(&p, n * (f32 ? 4 : 2)) != cudaSuccess)
        return NULL;
    blas_fill_kernel<<<1024, 256>>>(p, n, f32, seed);
    return p;
}

// The relative RMS difference of a and b (n values, f32 or bf16) into *ret_rel; acc: 2 doubles of
// device scratch for the sums.  0, or -EIO with kern_last_error() naming the CUDA call that
// failed: a failure is never read as a difference (an unchecked memset left the previous
// pair's sums in acc; a failed copy read as 1e30, a mismatch).
static int blas_rel(const void *a, const void *b, size_t n, int f32, double *acc, double *ret_rel)
{
    double h[2] = {0, 0};
    cudaError_t e = cudaMemset(acc, 0, 2 * sizeof(double));
    if (e != cudaSuccess)
        return kern_set_error("kern_blas_check_picks: clearing the difference sums", cudaGetErrorString(e));
    blas_diff_kernel<<<1024, 256>>>(a, b, n, f32, acc);
    int r = kern_check_launch("kern_blas_check_picks: blas_diff_kernel");
    if (r < 0)
        return r;
    e = cudaMemcpy(h, acc, sizeof h, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
        return kern_set_error("kern_blas_check_picks: reading the difference sums", cudaGetErrorString(e));
    *ret_rel = h[1] > 0 ? sqrt(h[0] / h[1]) : sqrt(h[0]);
    return 0;
}

extern "C" int kern_blas_check_picks(struct kern_blas *table, struct kern_blas *heuristic,
                                     int *checked, double *worst, char *what, size_t wn)
{
    *checked = 0, *worst = 0;
    if (wn)
        what[0] = 0;
    int r = 0;
    double *acc = NULL;
    if (cudaMalloc(&acc, 2 * sizeof(double)) != cudaSuccess)
        return -ENOMEM;
    for (const struct blas_pick *p = blas_picks; p->device && !r; p++) {
        if (p->sms != table->sms || p->lt_version != table->lt_version ||
            strcmp(p->device, table->device))
            continue;
        int m = p->m, n = p->n, k = p->k, f32 = p->dtype == (int)CUDA_R_32F;
        int gelu = p->epi == (int)CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
            dgelu = p->epi == (int)CUBLASLT_EPILOGUE_DGELU,
            bias = p->epi == (int)CUBLASLT_EPILOGUE_BIAS || gelu;
        if (!gelu && !dgelu && !bias && p->epi != (int)CUBLASLT_EPILOGUE_DEFAULT)
            continue; /* no BGRADB entries in the step's table */
        size_t mn = (size_t)m * n;
        void *A = blas_dev((size_t)m * k, 0, 1), *B = blas_dev((size_t)k * n, 0, 2);
        void *bv = bias ? blas_dev((size_t)m, 0, 3) : NULL;
        void *D1 = blas_dev(mn, f32, 4), *D2 = blas_dev(mn, f32, 4); /* the same C when beta */
        void *X1 = gelu || dgelu ? blas_dev(mn, 0, 5) : NULL;
        void *X2 = gelu || dgelu ? blas_dev(mn, 0, 5) : NULL;
        if (!A || !B || (bias && !bv) || !D1 || !D2 || ((gelu || dgelu) && (!X1 || !X2))) {
            r = -ENOMEM;
        } else {
            int lda = p->ta ? k : m, ldb = p->tb ? n : k;
            cudaDataType_t dt = f32 ? CUDA_R_32F : CUDA_R_16BF;
            float beta = p->beta ? 1.f : 0.f;
            r = lt_matmul_bg(table, D1, dt, A, lda, p->ta, B, ldb, p->tb, p->beta ? D1 : NULL,
                             beta, bv, X1, dgelu, NULL, m, n, k, 0);
            if (!r && table->last_index != p->index)
                r = kern_set_error("kern_blas_check_picks", "the table's index was not used");
            if (!r)
                r = lt_matmul_bg(heuristic, D2, dt, A, lda, p->ta, B, ldb, p->tb,
                                 p->beta ? D2 : NULL, beta, bv, X2, dgelu, NULL, m, n, k, 0);
            double e = 0, e2 = 0;
            if (!r)
                r = blas_rel(D1, D2, mn, f32, acc, &e);
            if (!r && gelu && (r = blas_rel(X1, X2, mn, 0, acc, &e2)) == 0 && e2 > e)
                e = e2;
            if (!r) {
                ++*checked;
                if (e >= *worst) {
                    *worst = e;
                    snprintf(what, wn, "{%d,%d,%d,%d,%d,%d,%d,%d} index %d", m, n, k, p->ta, p->tb,
                             p->epi, p->dtype, p->beta, p->index);
                }
            }
        }
        void *bufs[] = {A, B, bv, D1, D2, X1, X2};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            cudaFree(bufs[i]);
    }
    cudaFree(acc);
    if (!r && cudaDeviceSynchronize() != cudaSuccess)
        r = kern_check_launch("kern_blas_check_picks");
    return r;
}
