// kernels/attention_mma.cu: causal multi-head attention, fused flash-style (FlashAttention-2
// order), on bf16 tensor cores through mma.sync.m16n8k16 with register-resident accumulators.
// Forward: one block per (64-query tile, batch*head), 4 warps of 16 query rows; key/value tiles
// of 64 stream through shared memory with cp.async, double-buffered; scores, probabilities and
// the output stay in registers (online softmax in the exp2 domain, fp32).  Backward: a dK/dV
// kernel (one block per key tile, walking the query tiles at and after it) and a dQ kernel (one
// block per query tile, walking the key tiles up to it), both recomputing P from the saved
// log-sum-exp; no atomics, so the gradients are deterministic.
// Fragment layouts are PTX's for m16n8k16 (A row-major 16x16, B col-major 16x8, C 16x8; lane =
// 4*g + t holds rows g and g+8, columns 2t and 2t+1).
// Never: writes a T x T tensor to device memory; reads qkv rows at or beyond T (zero-filled).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common.cuh"

#define AM_THREADS 128
#define LOG2E_F 1.4426950408889634f

static __device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

static __device__ __forceinline__ void ldsm_x4(uint32_t *r, const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}

static __device__ __forceinline__ void ldsm_x4_t(uint32_t *r, const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}

static __device__ __forceinline__ void mma16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 2^x on the special-function unit (2 ulp; -inf -> +0).
static __device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

static __device__ __forceinline__ void cp_async16(void *dst, const void *src, bool pred)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(pred ? 16 : 0));
}
static __device__ __forceinline__ void cp_async_commit(void)
{
    asm volatile("cp.async.commit_group;\n" ::);
}
static __device__ __forceinline__ void cp_async_wait_all(void)
{
    asm volatile("cp.async.wait_group 0;\n" ::);
}

// 64 x HS tile (rows row0.. of a tensor with row stride `stride`) -> shared, ld HS+8; rows >= T
// are zero-filled.
template <int HS>
static __device__ __forceinline__ void tile_async(bf16 *dst, const bf16 *src, int stride, int row0, int T)
{
    constexpr int VPR = HS / 8;
    for (int i = threadIdx.x; i < 64 * VPR; i += AM_THREADS) {
        int r = i / VPR, c = (i % VPR) * 8;
        bool ok = row0 + r < T;
        cp_async16(dst + r * (HS + 8) + c, ok ? src + (size_t)(row0 + r) * stride + c : src, ok);
    }
}

// A fragments (16 rows from r0, all HS columns) of a row-major shared tile, ld HS+8.
template <int HS>
static __device__ __forceinline__ void load_a_frags(uint32_t (*fa)[4], const bf16 *tile, int r0)
{
    int lane = threadIdx.x & 31;
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++)
        ldsm_x4(fa[kk], tile + (r0 + (lane & 15)) * (HS + 8) + kk * 16 + (lane >> 4) * 8);
}

// acc[8][4] (16 x 64) = A (16 x HS, fragments fa) * B^T, B a 64 x HS row-major shared tile.
template <int HS>
static __device__ __forceinline__ void mm_abt(float (*acc)[4], const uint32_t (*fa)[4], const bf16 *btile)
{
    int lane = threadIdx.x & 31;
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            acc[n][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) {
#pragma unroll
        for (int np = 0; np < 4; np++) {
            uint32_t b[4];
            ldsm_x4(b, btile + (np * 16 + (lane & 7) + ((lane >> 4) & 1) * 8) * (HS + 8) + kk * 16 +
                           ((lane >> 3) & 1) * 8);
            mma16816(acc[2 * np], fa[kk], b[0], b[1]);
            mma16816(acc[2 * np + 1], fa[kk], b[2], b[3]);
        }
    }
}

// acc[HS/8][4] (16 x HS) += P (16 x 64, from C-layout registers p[8][4]) * B, B a 64 x HS
// row-major shared tile (k = its rows).
template <int HS>
static __device__ __forceinline__ void mm_pb(float (*acc)[4], const float (*p)[4], const bf16 *btile)
{
    int lane = threadIdx.x & 31;
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        uint32_t a[4];
        a[0] = pack_bf16(p[2 * kk][0], p[2 * kk][1]);
        a[1] = pack_bf16(p[2 * kk][2], p[2 * kk][3]);
        a[2] = pack_bf16(p[2 * kk + 1][0], p[2 * kk + 1][1]);
        a[3] = pack_bf16(p[2 * kk + 1][2], p[2 * kk + 1][3]);
#pragma unroll
        for (int dp = 0; dp < HS / 16; dp++) {
            uint32_t b[4];
            ldsm_x4_t(b, btile + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * (HS + 8) + dp * 16 +
                             (lane >> 4) * 8);
            mma16816(acc[2 * dp], a, b[0], b[1]);
            mma16816(acc[2 * dp + 1], a, b[2], b[3]);
        }
    }
}

// Store a warp's 16 x HS accumulator rows (row0 + g, row0 + g + 8) as bf16.
template <int HS>
static __device__ __forceinline__ void store_acc(bf16 *dst, int stride, int row0, int T, const float (*acc)[4],
                                          float mul0, float mul1)
{
    int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int n = 0; n < HS / 8; n++) {
        if (row0 + g < T)
            *reinterpret_cast<__nv_bfloat162 *>(dst + (size_t)(row0 + g) * stride + n * 8 + 2 * t) =
                __floats2bfloat162_rn(acc[n][0] * mul0, acc[n][1] * mul0);
        if (row0 + g + 8 < T)
            *reinterpret_cast<__nv_bfloat162 *>(dst + (size_t)(row0 + g + 8) * stride + n * 8 + 2 * t) =
                __floats2bfloat162_rn(acc[n][2] * mul1, acc[n][3] * mul1);
    }
}

template <int HS>
static __global__ void __launch_bounds__(AM_THREADS, HS <= 64 ? 4 : 2) am_forward_kernel(bf16 *out, float *lse, const bf16 *qkv,
                                                                int T, int C, int NH, float scale_log2)
{
    extern __shared__ __align__(128) unsigned char smem_raw[];
    constexpr int TILE = 64 * (HS + 8);
    bf16 *sq = reinterpret_cast<bf16 *>(smem_raw);
    bf16 *sk = sq + TILE; // two buffers
    bf16 *sv = sk + 2 * TILE;
    int nt = (T + 63) / 64;
    int qt = nt - 1 - blockIdx.x;
    int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    int w = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int q0 = qt * 64;
    const bf16 *base = qkv + (size_t)b * T * 3 * C + h * HS;
    tile_async<HS>(sq, base, 3 * C, q0, T);
    tile_async<HS>(sk, base + C, 3 * C, 0, T);
    tile_async<HS>(sv, base + 2 * C, 3 * C, 0, T);
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();
    uint32_t qf[HS / 16][4];
    load_a_frags<HS>(qf, sq, w * 16);
    float o[HS / 8][4];
#pragma unroll
    for (int n = 0; n < HS / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            o[n][e] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    int qrow0 = q0 + w * 16 + g; // and qrow0 + 8
    for (int j = 0; j <= qt; j++) {
        int buf = j & 1;
        if (j < qt) {
            tile_async<HS>(sk + (buf ^ 1) * TILE, base + C, 3 * C, (j + 1) * 64, T);
            tile_async<HS>(sv + (buf ^ 1) * TILE, base + 2 * C, 3 * C, (j + 1) * 64, T);
            cp_async_commit();
        }
        float s[8][4];
        mm_abt<HS>(s, qf, sk + buf * TILE);
        // causal mask only on the diagonal tile (every key of an earlier tile precedes the rows)
        if (j == qt) {
#pragma unroll
            for (int n = 0; n < 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (j * 64 + n * 8 + 2 * t + (e & 1) > qrow0 + (e >> 1) * 8)
                        s[n][e] = -INFINITY;
        }
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
        float alpha[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            float mnew = fmaxf(m[r], mx[r] * scale_log2); // m is in scaled log2 units
            alpha[r] = ex2(m[r] - mnew);
            m[r] = mnew;
            l[r] *= alpha[r];
        }
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float p = ex2(fmaf(s[n][e], scale_log2, -m[e >> 1]));
                s[n][e] = p;
                l[e >> 1] += p;
            }
#pragma unroll
        for (int n = 0; n < HS / 8; n++) {
            o[n][0] *= alpha[0];
            o[n][1] *= alpha[0];
            o[n][2] *= alpha[1];
            o[n][3] *= alpha[1];
        }
        mm_pb<HS>(o, s, sv + buf * TILE);
        cp_async_wait_all();
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
    store_acc<HS>(out + (size_t)b * T * C + h * HS, C, q0 + w * 16, T, o, 1.f / l[0], 1.f / l[1]);
    if (t == 0) {
        if (qrow0 < T)
            lse[(size_t)bh * T + qrow0] = m[0] / LOG2E_F + logf(l[0]);
        if (qrow0 + 8 < T)
            lse[(size_t)bh * T + qrow0 + 8] = m[1] / LOG2E_F + logf(l[1]);
    }
}

// dK, dV of one 64-key tile; warp w owns keys 16w..16w+15.
template <int HS>
static __global__ void __launch_bounds__(AM_THREADS) am_backward_dkv_kernel(bf16 *dqkv, const bf16 *dout,
                                                                     const float *lse, const float *D,
                                                                     const bf16 *qkv, int T, int C,
                                                                     int NH, float scale)
{
    extern __shared__ __align__(128) unsigned char smem_raw[];
    constexpr int TILE = 64 * (HS + 8);
    bf16 *sk = reinterpret_cast<bf16 *>(smem_raw);
    bf16 *sv = sk + TILE;
    bf16 *sq = sv + TILE;      // two buffers
    bf16 *sdo = sq + 2 * TILE; // two buffers
    float *slse = reinterpret_cast<float *>(sdo + 2 * TILE); // [2][64]
    float *sd = slse + 128;                                   // [2][64]
    int nt = (T + 63) / 64;
    int kt = blockIdx.x;
    int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    int w = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const bf16 *base = qkv + (size_t)b * T * 3 * C + h * HS;
    const bf16 *dbase = dout + (size_t)b * T * C + h * HS;
    tile_async<HS>(sk, base + C, 3 * C, kt * 64, T);
    tile_async<HS>(sv, base + 2 * C, 3 * C, kt * 64, T);
    tile_async<HS>(sq, base, 3 * C, kt * 64, T);
    tile_async<HS>(sdo, dbase, C, kt * 64, T);
    cp_async_commit();
    if (threadIdx.x < 64) {
        int q = kt * 64 + threadIdx.x;
        slse[threadIdx.x] = q < T ? lse[(size_t)bh * T + q] * LOG2E_F : INFINITY;
        sd[threadIdx.x] = q < T ? D[(size_t)bh * T + q] : 0.f;
    }
    cp_async_wait_all();
    __syncthreads();
    uint32_t kf[HS / 16][4], vf[HS / 16][4];
    load_a_frags<HS>(kf, sk, w * 16);
    load_a_frags<HS>(vf, sv, w * 16);
    float dk[HS / 8][4], dv[HS / 8][4];
#pragma unroll
    for (int n = 0; n < HS / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            dk[n][e] = dv[n][e] = 0.f;
    int key0 = kt * 64 + w * 16 + g; // and key0 + 8
    for (int i = kt; i < nt; i++) {
        int buf = (i - kt) & 1;
        if (i + 1 < nt) {
            tile_async<HS>(sq + (buf ^ 1) * TILE, base, 3 * C, (i + 1) * 64, T);
            tile_async<HS>(sdo + (buf ^ 1) * TILE, dbase, C, (i + 1) * 64, T);
            cp_async_commit();
            if (threadIdx.x < 64) {
                int q = (i + 1) * 64 + threadIdx.x;
                slse[(buf ^ 1) * 64 + threadIdx.x] = q < T ? lse[(size_t)bh * T + q] * LOG2E_F : INFINITY;
                sd[(buf ^ 1) * 64 + threadIdx.x] = q < T ? D[(size_t)bh * T + q] : 0.f;
            }
        }
        const bf16 *cq = sq + buf * TILE, *cdo = sdo + buf * TILE;
        const float *cl = slse + buf * 64, *cd = sd + buf * 64;
        float st[8][4], dpt[8][4];
        mm_abt<HS>(st, kf, cq);  // S^T = K Q^T   (16 keys x 64 queries)
        mm_abt<HS>(dpt, vf, cdo); // dP^T = V dO^T
        bool diag = i == kt;
        float sl2 = scale * LOG2E_F;
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int ql = n * 8 + 2 * t + (e & 1);
                float p = ex2(fmaf(st[n][e], sl2, -cl[ql])); // cl: lse in log2 units
                if (diag && i * 64 + ql < key0 + (e >> 1) * 8)
                    p = 0.f;
                st[n][e] = p;
                dpt[n][e] = p * (dpt[n][e] - cd[ql]) * scale;
            }
        mm_pb<HS>(dv, st, cdo); // dV += P^T dO
        mm_pb<HS>(dk, dpt, cq); // dK += dS^T Q
        cp_async_wait_all();
        __syncthreads();
    }
    bf16 *dst = dqkv + (size_t)b * T * 3 * C + h * HS;
    store_acc<HS>(dst + C, 3 * C, kt * 64 + w * 16, T, dk, 1.f, 1.f);
    store_acc<HS>(dst + 2 * C, 3 * C, kt * 64 + w * 16, T, dv, 1.f, 1.f);
}

// dQ of one 64-query tile; warp w owns queries 16w..16w+15.
template <int HS>
static __global__ void __launch_bounds__(AM_THREADS) am_backward_dq_kernel(bf16 *dqkv, const bf16 *dout,
                                                                    const float *lse, const float *D,
                                                                    const bf16 *qkv, int T, int C,
                                                                    int NH, float scale)
{
    extern __shared__ __align__(128) unsigned char smem_raw[];
    constexpr int TILE = 64 * (HS + 8);
    bf16 *sq = reinterpret_cast<bf16 *>(smem_raw);
    bf16 *sdo = sq + TILE;
    bf16 *sk = sdo + TILE;    // two buffers
    bf16 *sv = sk + 2 * TILE; // two buffers
    int nt = (T + 63) / 64;
    int qt = nt - 1 - blockIdx.x;
    int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    int w = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const bf16 *base = qkv + (size_t)b * T * 3 * C + h * HS;
    const bf16 *dbase = dout + (size_t)b * T * C + h * HS;
    tile_async<HS>(sq, base, 3 * C, qt * 64, T);
    tile_async<HS>(sdo, dbase, C, qt * 64, T);
    tile_async<HS>(sk, base + C, 3 * C, 0, T);
    tile_async<HS>(sv, base + 2 * C, 3 * C, 0, T);
    cp_async_commit();
    int qrow0 = qt * 64 + w * 16 + g;
    float lr[2], dr[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        int q = qrow0 + r * 8;
        lr[r] = q < T ? lse[(size_t)bh * T + q] * LOG2E_F : INFINITY; // log2 units
        dr[r] = q < T ? D[(size_t)bh * T + q] : 0.f;
    }
    cp_async_wait_all();
    __syncthreads();
    uint32_t qf[HS / 16][4], df[HS / 16][4];
    load_a_frags<HS>(qf, sq, w * 16);
    load_a_frags<HS>(df, sdo, w * 16);
    float dq[HS / 8][4];
#pragma unroll
    for (int n = 0; n < HS / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            dq[n][e] = 0.f;
    for (int j = 0; j <= qt; j++) {
        int buf = j & 1;
        if (j < qt) {
            tile_async<HS>(sk + (buf ^ 1) * TILE, base + C, 3 * C, (j + 1) * 64, T);
            tile_async<HS>(sv + (buf ^ 1) * TILE, base + 2 * C, 3 * C, (j + 1) * 64, T);
            cp_async_commit();
        }
        const bf16 *ck = sk + buf * TILE, *cv = sv + buf * TILE;
        float s[8][4], dp[8][4];
        mm_abt<HS>(s, qf, ck);  // S = Q K^T
        mm_abt<HS>(dp, df, cv); // dP = dO V^T
        bool diag = j == qt;
        float sl2 = scale * LOG2E_F;
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int r = e >> 1;
                float p = ex2(fmaf(s[n][e], sl2, -lr[r]));
                if (diag && j * 64 + n * 8 + 2 * t + (e & 1) > qrow0 + r * 8)
                    p = 0.f;
                s[n][e] = p * (dp[n][e] - dr[r]) * scale;
            }
        mm_pb<HS>(dq, s, ck); // dQ += dS K
        cp_async_wait_all();
        __syncthreads();
    }
    store_acc<HS>(dqkv + (size_t)b * T * 3 * C + h * HS, 3 * C, qt * 64 + w * 16, T, dq, 1.f, 1.f);
}

template <int HS>
static int am_forward(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int C, int NH, cudaStream_t s)
{
    size_t sz = sizeof(bf16) * 5 * 64 * (HS + 8);
    cudaFuncSetAttribute(am_forward_kernel<HS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sz);
    dim3 grid((T + 63) / 64, B * NH);
    am_forward_kernel<HS><<<grid, AM_THREADS, sz, s>>>(out, lse, qkv, T, C, NH, LOG2E_F / sqrtf((float)HS));
    return kern_check_launch("attention_forward");
}

template <int HS>
static int am_backward(bf16 *dqkv, const float *D, const bf16 *dout, const float *lse, const bf16 *qkv,
                       int B, int T, int C, int NH, cudaStream_t s, cudaStream_t s2, cudaEvent_t ev0,
                       cudaEvent_t ev1)
{
    size_t sz_kv = sizeof(bf16) * 6 * 64 * (HS + 8) + sizeof(float) * 256;
    size_t sz_q = sizeof(bf16) * 6 * 64 * (HS + 8);
    cudaFuncSetAttribute(am_backward_dkv_kernel<HS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sz_kv);
    cudaFuncSetAttribute(am_backward_dq_kernel<HS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sz_q);
    dim3 grid((T + 63) / 64, B * NH);
    float scale = 1.f / sqrtf((float)HS);
    // dQ and dK/dV write disjoint parts of dqkv: with a second stream they overlap each other's tail
    cudaStream_t sq = s;
    if (s2 && ev0 && ev1) {
        if (cudaEventRecord(ev0, s) != cudaSuccess || cudaStreamWaitEvent(s2, ev0, 0) != cudaSuccess)
            return kern_check_launch("attention_backward streams");
        sq = s2;
    }
    am_backward_dq_kernel<HS><<<grid, AM_THREADS, sz_q, sq>>>(dqkv, dout, lse, D, qkv, T, C, NH, scale);
    int r = kern_check_launch("attention_backward_dq");
    if (r < 0)
        return r;
    am_backward_dkv_kernel<HS><<<grid, AM_THREADS, sz_kv, s>>>(dqkv, dout, lse, D, qkv, T, C, NH, scale);
    r = kern_check_launch("attention_backward_dkv");
    if (r < 0 || sq == s)
        return r;
    if (cudaEventRecord(ev1, s2) != cudaSuccess || cudaStreamWaitEvent(s, ev1, 0) != cudaSuccess)
        return kern_check_launch("attention_backward streams");
    return 0;
}

static int attn_impl = -1; // 0 mma.sync, 1 wgmma (default) where built and the head size allows

extern "C" int kern_attention_set_impl(int impl)
{
    if (impl < 0) {
        impl = kern_knob(KNOB_ATTN); // wgmma measured faster on the H200 (docs/cuda.md)
    }
    attn_impl = impl;
    return attn_impl;
}

static bool use_wgmma(int hs)
{
    if (attn_impl < 0)
        kern_attention_set_impl(-1);
    return attn_impl == 1 && attention_wg_available(hs);
}

extern "C" void kern_attention_set_variant(const char *v)
{
    attention_wg_set_variant(v);
}

extern "C" const char *kern_attention_impl(int hs)
{
    return use_wgmma(hs) ? "wgmma" : "mma";
}

extern "C" int kern_attention_forward(kbf16 *out, float *lse, const kbf16 *qkv, int B, int T, int C,
                                      int NH, cudaStream_t s)
{
    if (NH <= 0 || C % NH)
        return -EINVAL;
    if (use_wgmma(C / NH))
        return attention_wg_forward((bf16 *)out, lse, (const bf16 *)qkv, B, T, C, NH, s);
    switch (C / NH) {
    case 16:
        return am_forward<16>((bf16 *)out, lse, (const bf16 *)qkv, B, T, C, NH, s);
    case 32:
        return am_forward<32>((bf16 *)out, lse, (const bf16 *)qkv, B, T, C, NH, s);
    case 64:
        return am_forward<64>((bf16 *)out, lse, (const bf16 *)qkv, B, T, C, NH, s);
    case 128:
        return am_forward<128>((bf16 *)out, lse, (const bf16 *)qkv, B, T, C, NH, s);
    default:
        return -EINVAL;
    }
}

extern "C" int kern_attention_backward2(kbf16 *dqkv, float *scratch, const kbf16 *dout,
                                        const kbf16 *out, const float *lse, const kbf16 *qkv, int B,
                                        int T, int C, int NH, cudaStream_t s, cudaStream_t s2,
                                        cudaEvent_t ev0, cudaEvent_t ev1)
{
    if (NH <= 0 || C % NH)
        return -EINVAL;
    int r = attention_dot_launch(scratch, (const bf16 *)dout, (const bf16 *)out, B, T, C, NH, s);
    if (r < 0)
        return r;
    bf16 *dq = (bf16 *)dqkv;
    const bf16 *o = (const bf16 *)dout, *q = (const bf16 *)qkv;
    if (use_wgmma(C / NH))
        return attention_wg_backward(dq, scratch, o, lse, q, B, T, C, NH, s, s2, ev0, ev1);
    switch (C / NH) {
    case 16:
        return am_backward<16>(dq, scratch, o, lse, q, B, T, C, NH, s, s2, ev0, ev1);
    case 32:
        return am_backward<32>(dq, scratch, o, lse, q, B, T, C, NH, s, s2, ev0, ev1);
    case 64:
        return am_backward<64>(dq, scratch, o, lse, q, B, T, C, NH, s, s2, ev0, ev1);
    case 128:
        return am_backward<128>(dq, scratch, o, lse, q, B, T, C, NH, s, s2, ev0, ev1);
    default:
        return -EINVAL;
    }
}

static int attn_bwd = -1; // 0 the dQ and dK/dV kernels, 1 the fused kernel where it applies

extern "C" int kern_attention_set_bwd(int fused)
{
    attn_bwd = fused < 0 ? kern_knob(KNOB_ATTN_BWD) : fused;
    return attn_bwd;
}

extern "C" size_t kern_attention_backward_ws_bytes(int B, int T, int C, int NH)
{
    if (attn_bwd < 0)
        kern_attention_set_bwd(-1);
    if (attn_bwd != 1 || NH <= 0 || C % NH || !use_wgmma(C / NH))
        return 0;
    return attention_wg_fused_ws_bytes(B, T, C, NH);
}

extern "C" int kern_attention_backward3(kbf16 *dqkv, float *scratch, void *ws, size_t ws_bytes,
                                        const kbf16 *dout, const kbf16 *out, const float *lse,
                                        const kbf16 *qkv, int B, int T, int C, int NH, cudaStream_t s,
                                        cudaStream_t s2, cudaEvent_t ev0, cudaEvent_t ev1)
{
    size_t need = kern_attention_backward_ws_bytes(B, T, C, NH);
    if (!need || !ws || ws_bytes < need || ((uintptr_t)ws & 15))
        return kern_attention_backward2(dqkv, scratch, dout, out, lse, qkv, B, T, C, NH, s, s2, ev0, ev1);
    int r = attention_dot_launch(scratch, (const bf16 *)dout, (const bf16 *)out, B, T, C, NH, s);
    if (r < 0)
        return r;
    r = attention_wg_backward_fused((bf16 *)dqkv, scratch, (const bf16 *)dout, lse, (const bf16 *)qkv, ws,
                                    ws_bytes, B, T, C, NH, s);
    if (r > 0) // no tensor maps: the split kernels (D is computed)
        r = attention_wg_backward((bf16 *)dqkv, scratch, (const bf16 *)dout, lse, (const bf16 *)qkv, B, T, C,
                                  NH, s, s2, ev0, ev1);
    return r;
}

extern "C" int kern_attention_backward(kbf16 *dqkv, float *scratch, const kbf16 *dout, const kbf16 *out,
                                       const float *lse, const kbf16 *qkv, int B, int T, int C, int NH,
                                       cudaStream_t s)
{
    return kern_attention_backward2(dqkv, scratch, dout, out, lse, qkv, B, T, C, NH, s, NULL, NULL, NULL);
}
