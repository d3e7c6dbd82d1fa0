// kernels/elementwise.cu: the memory-bound kernels of the GPT-2 step: embeddings, LayerNorm,
// GELU backward, bias gradients, the fused classifier + cross-entropy, gradient norm and AdamW.
// Invariant: every reduction runs in a fixed order (no floating-point atomics), so a step is
// bit-for-bit reproducible on the same GPU and launch shapes.  Never allocates or synchronizes.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common.cuh"

static __thread char kern_errbuf[256];

int kern_set_error(const char *what, const char *detail)
{
    snprintf(kern_errbuf, sizeof kern_errbuf, "%s: %s", what, detail);
    return -EIO;
}

extern "C" const char *kern_last_error(void)
{
    return kern_errbuf;
}

// ---------------------------------------------------------------- implementation choice
// The LayerNorm forward with its row in registers is the default (DROVER_LN=old: the earlier
// kernel, the same bits).  The classifier v2 (its row staged by per-thread cp.async) is the
// default: 1.59 against 2.58 ms at B=32 on the H200 (docs/benchmarks.md); DROVER_CLS=old
// selects the earlier kernel, smem and v2r the other variants (both slower than v2).
static int ln_impl = -1, cls_impl = -1;

extern "C" void kern_rowkernels_set_impl(int ln, int cls)
{
    if (ln < 0)
        ln = kern_knob(KNOB_LN);
    if (cls < 0) /* DROVER_CLS names 0.. (kernels.h, knobs.h) */
        cls = kern_knob(KNOB_CLS);
    ln_impl = ln;
    cls_impl = cls;
}

static void rowkernels_init(void)
{
    if (ln_impl < 0 || cls_impl < 0)
        kern_rowkernels_set_impl(ln_impl, cls_impl);
}

// ---------------------------------------------------------------- conversion
static __global__ void f32_to_bf16_kernel(bf16 *out, const float *in, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16_rn(in[i]);
}

static __global__ void bf16_to_f32_kernel(float *out, const bf16 *in, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __bfloat162float(in[i]);
}

static unsigned grid_for(size_t n, unsigned block)
{
    size_t g = (n + block - 1) / block;
    if (g > 65535u * 8u)
        g = 65535u * 8u;
    return g ? (unsigned)g : 1u;
}

extern "C" int kern_f32_to_bf16(kbf16 *out, const float *in, size_t n, cudaStream_t s)
{
    f32_to_bf16_kernel<<<grid_for(n, 256), 256, 0, s>>>((bf16 *)out, in, n);
    return kern_check_launch("f32_to_bf16");
}

extern "C" int kern_bf16_to_f32(float *out, const kbf16 *in, size_t n, cudaStream_t s)
{
    bf16_to_f32_kernel<<<grid_for(n, 256), 256, 0, s>>>(out, (const bf16 *)in, n);
    return kern_check_launch("bf16_to_f32");
}

// ---------------------------------------------------------------- embeddings
// out (N,C): one thread per 8 channels.
static __global__ void encoder_forward_kernel(bf16 *out, const int *inp, const bf16 *wte,
                                       const bf16 *wpe, int N, int T, int C)
{
    size_t i = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * 8;
    if (i >= (size_t)N * C)
        return;
    int row = (int)(i / C), c = (int)(i % C);
    int t = row % T;
    bf16x8 a = load8(wte + (size_t)inp[row] * C + c), b = load8(wpe + (size_t)t * C + c), o;
#pragma unroll
    for (int k = 0; k < 8; k++)
        o.v[k] = __float2bfloat16_rn(__bfloat162float(a.v[k]) + __bfloat162float(b.v[k]));
    store8(out + i, o);
}

extern "C" int kern_encoder_forward(kbf16 *out, const int *inp, const kbf16 *wte, const kbf16 *wpe,
                                    int B, int T, int C, cudaStream_t s)
{
    if (C % 8)
        return -EINVAL;
    size_t n8 = (size_t)B * T * C / 8;
    encoder_forward_kernel<<<cdiv(n8, 256), 256, 0, s>>>((bf16 *)out, inp, (const bf16 *)wte,
                                                         (const bf16 *)wpe, B * T, T, C);
    return kern_check_launch("encoder_forward");
}

// dwpe[t,c] += scale * sum_b dout[b,t,c]  (scale 1: the sum itself, bit for bit)
static __global__ void wpe_backward_kernel(float *dwpe, const bf16 *dout, int B, int T, int C,
                                           float scale)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= T * C)
        return;
    float acc = 0.f;
    for (int b = 0; b < B; b++)
        acc += __bfloat162float(dout[(size_t)b * T * C + i]);
    dwpe[i] += acc * scale;
}

// one block per distinct token: dwte[tok] += sum of its positions' rows, in ascending order.
static __global__ void wte_backward_kernel(float *dwte, const bf16 *dout, const int *uniq_tok,
                                   const int *start, const int *pos, int C, float scale)
{
    int u = blockIdx.x;
    int s0 = start[u], s1 = start[u + 1];
    float *dst = dwte + (size_t)uniq_tok[u] * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = 0.f;
        for (int k = s0; k < s1; k++)
            acc += __bfloat162float(dout[(size_t)pos[k] * C + c]);
        dst[c] += acc * scale;
    }
}

extern "C" int kern_encoder_backward_scaled(float *dwte, float *dwpe, const kbf16 *dout,
                                            const int *uniq_tok, const int *start, const int *pos,
                                            int nuniq, int B, int T, int C, float scale,
                                            cudaStream_t s)
{
    wpe_backward_kernel<<<cdiv((size_t)T * C, 256), 256, 0, s>>>(dwpe, (const bf16 *)dout, B, T, C,
                                                                 scale);
    int r = kern_check_launch("wpe_backward");
    if (r < 0 || nuniq == 0)
        return r;
    wte_backward_kernel<<<nuniq, 256, 0, s>>>(dwte, (const bf16 *)dout, uniq_tok, start, pos, C,
                                              scale);
    return kern_check_launch("wte_backward");
}

// The same per token as wte_backward_kernel (so the same bits), with the number of tokens read
// from the device and a fixed grid striding over them: a launch that a CUDA graph can replay.
static __global__ void wte_backward_dev_kernel(float *dwte, const bf16 *dout, const int *uniq_tok,
                                               const int *start, const int *pos,
                                               const int *nuniq, int C)
{
    int nu = *nuniq;
    for (int u = blockIdx.x; u < nu; u += gridDim.x) {
        int s0 = start[u], s1 = start[u + 1];
        float *dst = dwte + (size_t)uniq_tok[u] * C;
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            float acc = 0.f;
            for (int k = s0; k < s1; k++)
                acc += __bfloat162float(dout[(size_t)pos[k] * C + c]);
            dst[c] += acc; // scale 1: as fma(acc, 1, dst), one rounding
        }
    }
}

extern "C" int kern_encoder_backward_dev(float *dwte, float *dwpe, const kbf16 *dout,
                                         const int *uniq_tok, const int *start, const int *pos,
                                         const int *nuniq, int max_uniq, int B, int T, int C,
                                         cudaStream_t s)
{
    wpe_backward_kernel<<<cdiv((size_t)T * C, 256), 256, 0, s>>>(dwpe, (const bf16 *)dout, B, T, C,
                                                                 1.0f);
    int r = kern_check_launch("wpe_backward");
    if (r < 0 || max_uniq <= 0)
        return r;
    wte_backward_dev_kernel<<<max_uniq < 4096 ? max_uniq : 4096, 256, 0, s>>>(
        dwte, (const bf16 *)dout, uniq_tok, start, pos, nuniq, C);
    return kern_check_launch("wte_backward");
}

extern "C" int kern_encoder_backward(float *dwte, float *dwpe, const kbf16 *dout,
                                     const int *uniq_tok, const int *start, const int *pos,
                                     int nuniq, int B, int T, int C, cudaStream_t s)
{
    return kern_encoder_backward_scaled(dwte, dwpe, dout, uniq_tok, start, pos, nuniq, B, T, C,
                                        1.0f, s);
}

// ---------------------------------------------------------------- LayerNorm
// One warp per row; the row is read from global (L1) three times.
static __global__ void layernorm_forward_kernel(bf16 *out, float *mean, float *rstd, const bf16 *inp,
                                         const bf16 *w, const bf16 *bias, int N, int C)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N)
        return;
    const bf16 *x = inp + (size_t)row * C;
    float sum = 0.f;
    for (int c = lane * 8; c < C; c += 256) {
        bf16x8 v = load8(x + c);
#pragma unroll
        for (int k = 0; k < 8; k++)
            sum += __bfloat162float(v.v[k]);
    }
    float m = warp_sum(sum) / C;
    float var = 0.f;
    for (int c = lane * 8; c < C; c += 256) {
        bf16x8 v = load8(x + c);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            float d = __bfloat162float(v.v[k]) - m;
            var += d * d;
        }
    }
    float rs = rsqrtf(warp_sum(var) / C + 1e-5f);
    bf16 *o = out + (size_t)row * C;
    for (int c = lane * 8; c < C; c += 256) {
        bf16x8 v = load8(x + c), ww = load8(w + c), bb = load8(bias + c), r;
#pragma unroll
        for (int k = 0; k < 8; k++)
            r.v[k] = __float2bfloat16_rn((__bfloat162float(v.v[k]) - m) * rs *
                                             __bfloat162float(ww.v[k]) +
                                         __bfloat162float(bb.v[k]));
        store8(o + c, r);
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = rs;
    }
}

// The same with the row held in registers (NCH 16-byte vectors per lane): one read from DRAM.
// The sums run in the old kernel's order, so the bits are the old kernel's.
template <int NCH>
static __global__ void __launch_bounds__(256) layernorm_forward_reg_kernel(
    bf16 *out, float *mean, float *rstd, const bf16 *inp, const bf16 *w, const bf16 *bias, int N, int C)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N)
        return;
    const bf16 *x = inp + (size_t)row * C;
    bf16x8 v[NCH];
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < NCH; i++) {
        int c = lane * 8 + 256 * i;
        if (c < C) {
            v[i] = load8(x + c);
#pragma unroll
            for (int k = 0; k < 8; k++)
                sum += __bfloat162float(v[i].v[k]);
        }
    }
    float m = warp_sum(sum) / C;
    float var = 0.f;
#pragma unroll
    for (int i = 0; i < NCH; i++) {
        int c = lane * 8 + 256 * i;
        if (c < C) {
#pragma unroll
            for (int k = 0; k < 8; k++) {
                float d = __bfloat162float(v[i].v[k]) - m;
                var += d * d;
            }
        }
    }
    float rs = rsqrtf(warp_sum(var) / C + 1e-5f);
    bf16 *o = out + (size_t)row * C;
#pragma unroll
    for (int i = 0; i < NCH; i++) {
        int c = lane * 8 + 256 * i;
        if (c < C) {
            bf16x8 ww = load8(w + c), bb = load8(bias + c), r;
#pragma unroll
            for (int k = 0; k < 8; k++)
                r.v[k] = __float2bfloat16_rn((__bfloat162float(v[i].v[k]) - m) * rs *
                                                 __bfloat162float(ww.v[k]) +
                                             __bfloat162float(bb.v[k]));
            store8(o + c, r);
        }
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = rs;
    }
}

extern "C" int kern_layernorm_forward(kbf16 *out, float *mean, float *rstd, const kbf16 *inp,
                                      const kbf16 *weight, const kbf16 *bias, int N, int C,
                                      cudaStream_t s)
{
    if (C % 8)
        return -EINVAL;
    rowkernels_init();
#define LNF_REG(n)                                                                                 \
    layernorm_forward_reg_kernel<n><<<cdiv(N, 8), 256, 0, s>>>((bf16 *)out, mean, rstd,          \
                                                               (const bf16 *)inp,                 \
                                                               (const bf16 *)weight,              \
                                                               (const bf16 *)bias, N, C);         \
    return kern_check_launch("layernorm_forward")
    if (ln_impl == 1) {
        switch ((C + 255) / 256) {
        case 1: LNF_REG(1);
        case 2: LNF_REG(2);
        case 3: LNF_REG(3);
        case 4: LNF_REG(4);
        default: break;
        }
    }
#undef LNF_REG
    layernorm_forward_kernel<<<cdiv(N, 8), 256, 0, s>>>((bf16 *)out, mean, rstd, (const bf16 *)inp,
                                                        (const bf16 *)weight, (const bf16 *)bias,
                                                        N, C);
    return kern_check_launch("layernorm_forward");
}

// dinp += (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)) * rstd, dnorm = dout * w.  Warp/row.
static __global__ void layernorm_backward_dinp_kernel(bf16 *dinp, const bf16 *dout, const bf16 *inp,
                                               const bf16 *w, const float *mean,
                                               const float *rstd, int N, int C)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N)
        return;
    const bf16 *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
    float m = mean[row], rs = rstd[row];
    float a = 0.f, b = 0.f;
    for (int c = lane * 8; c < C; c += 256) {
        bf16x8 xv = load8(x + c), dv = load8(dy + c), wv = load8(w + c);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            float xh = (__bfloat162float(xv.v[k]) - m) * rs;
            float dn = __bfloat162float(dv.v[k]) * __bfloat162float(wv.v[k]);
            a += dn;
            b += dn * xh;
        }
    }
    a = warp_sum(a) / C;
    b = warp_sum(b) / C;
    bf16 *dx = dinp + (size_t)row * C;
    for (int c = lane * 8; c < C; c += 256) {
        bf16x8 xv = load8(x + c), dv = load8(dy + c), wv = load8(w + c), ov = load8(dx + c);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            float xh = (__bfloat162float(xv.v[k]) - m) * rs;
            float dn = __bfloat162float(dv.v[k]) * __bfloat162float(wv.v[k]);
            ov.v[k] = __float2bfloat16_rn(__bfloat162float(ov.v[k]) + (dn - a - xh * b) * rs);
        }
        store8(dx + c, ov);
    }
}

// Column sums in two passes: COLSUM_RG row groups write partials, then one thread per column
// adds them in order.  LN: also sum dout * xhat (dweight).
#define COLSUM_RG 64
template <bool LN>
static __global__ void colsum_partial_kernel(float *part_w, float *part_b, const bf16 *dout,
                                      const bf16 *inp, const float *mean, const float *rstd,
                                      int N, int C)
{
    __shared__ float sw[8][64], sb[8][64];
    int c = blockIdx.x * 64 + threadIdx.x * 2;
    float aw0 = 0.f, aw1 = 0.f, ab0 = 0.f, ab1 = 0.f;
    if (c < C) {
        for (int r = blockIdx.y * 8 + threadIdx.y; r < N; r += gridDim.y * 8) {
            __nv_bfloat162 d = *reinterpret_cast<const __nv_bfloat162 *>(dout + (size_t)r * C + c);
            float d0 = __low2float(d), d1 = __high2float(d);
            ab0 += d0;
            ab1 += d1;
            if (LN) {
                __nv_bfloat162 x = *reinterpret_cast<const __nv_bfloat162 *>(inp + (size_t)r * C + c);
                float m = mean[r], rs = rstd[r];
                aw0 += d0 * (__low2float(x) - m) * rs;
                aw1 += d1 * (__high2float(x) - m) * rs;
            }
        }
    }
    sw[threadIdx.y][threadIdx.x * 2] = aw0;
    sw[threadIdx.y][threadIdx.x * 2 + 1] = aw1;
    sb[threadIdx.y][threadIdx.x * 2] = ab0;
    sb[threadIdx.y][threadIdx.x * 2 + 1] = ab1;
    __syncthreads();
    if (threadIdx.y == 0) {
        for (int k = 0; k < 2; k++) {
            int cc = c + k;
            if (cc >= C)
                continue;
            float w = 0.f, b = 0.f;
            for (int y = 0; y < 8; y++) {
                w += sw[y][threadIdx.x * 2 + k];
                b += sb[y][threadIdx.x * 2 + k];
            }
            part_b[(size_t)blockIdx.y * C + cc] = b;
            if (LN)
                part_w[(size_t)blockIdx.y * C + cc] = w;
        }
    }
}

static __global__ void colsum_final_kernel(float *dw, float *db, const float *part_w,
                                    const float *part_b, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    float w = 0.f, b = 0.f;
    for (int g = 0; g < COLSUM_RG; g++) {
        b += part_b[(size_t)g * C + c];
        if (dw)
            w += part_w[(size_t)g * C + c];
    }
    db[c] += b;
    if (dw)
        dw[c] += w;
}

extern "C" size_t kern_colsum_scratch_floats(int C)
{
    return (size_t)2 * (COLSUM_RG > 396 ? COLSUM_RG : 396) * C; /* 396: LNB_GRID below */
}

// Fused LayerNorm backward: one warp per row as above, and the same warp accumulates dweight and
// dbias for its rows in registers (lane owns columns lane*8 + 256*i); the 8 warps of a block
// reduce through shared memory in warp order and the block writes one partial row; a final kernel
// adds the LNB_GRID partials in order.  One pass over dout and inp instead of two.
#define LNB_GRID 396
template <int NCH>
static __global__ void __launch_bounds__(256) layernorm_backward_fused_kernel(
    bf16 *dinp, float *part_w, float *part_b, const bf16 *dout, const bf16 *inp, const bf16 *w,
    const float *mean, const float *rstd, int N, int C)
{
    __shared__ float red[8][256 * NCH];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float aw[NCH][8], ab[NCH][8]; // the only per-lane state kept across rows (few registers)
#pragma unroll
    for (int i = 0; i < NCH; i++)
#pragma unroll
        for (int k = 0; k < 8; k++)
            aw[i][k] = ab[i][k] = 0.f;
    for (int row = blockIdx.x * 8 + warp; row < N; row += gridDim.x * 8) {
        const bf16 *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
        float m = mean[row], rs = rstd[row];
        float a = 0.f, b = 0.f;
#pragma unroll
        for (int i = 0; i < NCH; i++) {
            int c = lane * 8 + 256 * i;
            if (c < C) {
                bf16x8 xv = load8(x + c), dvv = load8(dy + c), wv = load8(w + c);
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    float xh = (__bfloat162float(xv.v[k]) - m) * rs;
                    float dn = __bfloat162float(dvv.v[k]) * __bfloat162float(wv.v[k]);
                    a += dn;
                    b += dn * xh;
                }
            }
        }
        a = warp_sum(a) / C;
        b = warp_sum(b) / C;
        bf16 *dx = dinp + (size_t)row * C;
#pragma unroll
        for (int i = 0; i < NCH; i++) {
            int c = lane * 8 + 256 * i;
            if (c < C) { // second read of the row: L1 hits
                bf16x8 xv = load8(x + c), dvv = load8(dy + c), wv = load8(w + c), ov = load8(dx + c);
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    float xh = (__bfloat162float(xv.v[k]) - m) * rs;
                    float d = __bfloat162float(dvv.v[k]);
                    float dn = d * __bfloat162float(wv.v[k]);
                    ov.v[k] = __float2bfloat16_rn(__bfloat162float(ov.v[k]) + (dn - a - xh * b) * rs);
                    aw[i][k] += d * xh;
                    ab[i][k] += d;
                }
                store8(dx + c, ov);
            }
        }
    }
    // block reduction, dweight then dbias, in warp order
    for (int pass = 0; pass < 2; pass++) {
        __syncthreads();
#pragma unroll
        for (int i = 0; i < NCH; i++)
#pragma unroll
            for (int k = 0; k < 8; k++)
                red[warp][lane * 8 + 256 * i + k] = pass ? ab[i][k] : aw[i][k];
        __syncthreads();
        float *dst = (pass ? part_b : part_w) + (size_t)blockIdx.x * C;
        for (int c = threadIdx.x; c < C; c += 256) {
            float acc = 0.f;
            for (int y = 0; y < 8; y++)
                acc += red[y][c];
            dst[c] = acc;
        }
    }
}

static __global__ void lnb_final_kernel(float *dw, float *db, const float *part_w, const float *part_b,
                                 int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    float w = 0.f, b = 0.f;
    for (int g = 0; g < LNB_GRID; g++) {
        w += part_w[(size_t)g * C + c];
        b += part_b[(size_t)g * C + c];
    }
    dw[c] += w;
    db[c] += b;
}

template <int NCH>
static int layernorm_backward_fused(bf16 *dinp, float *dweight, float *dbias, float *scratch,
                                    const bf16 *dout, const bf16 *inp, const bf16 *w,
                                    const float *mean, const float *rstd, int N, int C,
                                    cudaStream_t s)
{
    float *pw = scratch, *pb = scratch + (size_t)LNB_GRID * C;
    layernorm_backward_fused_kernel<NCH><<<LNB_GRID, 256, 0, s>>>(dinp, pw, pb, dout, inp, w, mean,
                                                                  rstd, N, C);
    lnb_final_kernel<<<cdiv(C, 256), 256, 0, s>>>(dweight, dbias, pw, pb, C);
    return kern_check_launch("layernorm_backward_fused");
}

// The LayerNorm backward with the row in registers (the default; DROVER_LN_BWD=old selects the
// kernel above).  Each lane keeps weight for its columns (lane*8 + 256*i) in registers across rows
// and loads x, dout and dinp of a row in one go (16-byte loads, x and dout evict-first), so a row
// is read from DRAM once with no dependent second read; dinp's arithmetic is the kernel above's
// in the same order.  Each warp adds its rows' dweight/dbias terms to its own shared-memory row
// (in registers they spilled); 132 * MINB blocks of 8 warps, MINB per SM (__launch_bounds__(256,
// MINB): 2, the default, fits in 128 registers; 3, DROVER_LN_BWD=reg3, spills a little at 80),
// write one partial row each; lnr_final_kernel adds them in a fixed order with 16 row groups per
// column (the one-thread-per-column loop above reads its 396 partials in a row).
__device__ __forceinline__ bf16x8 load8_cs(const bf16 *p)
{
    uint4 u = __ldcs(reinterpret_cast<const uint4 *>(p));
    return *reinterpret_cast<bf16x8 *>(&u);
}

// v2's prefetch: one 16-byte cp.async into shared memory (L2 only: x and dout are read once).
__device__ __forceinline__ void lnb_cp_async16(void *smem, const void *gmem)
{
    unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(gmem) : "memory");
}

// BIAS: a third per-warp row in shared memory sums dinp as it is on entry (the gradient of the
// residual sum, whose column sums are the preceding linear layer's bias gradient): the separate
// bias kernel's read of it saved (kern_layernorm_backward_bias).
// PF (v2, DROVER_LN_BWD=v2): the warp's next row of x and dout is copied by cp.async into a
// per-warp shared-memory row (each lane copies and later reads only its own 16-byte slots, so no
// barrier) as soon as this row's two sums are reduced, so two thirds of the next row's bytes are
// in flight while this row updates dinp and the sums; dinp is still loaded at the row's start.
// The copy is issued after the reductions, which consumed the lane's reads of those slots.  The
// same arithmetic in the same order as PF off: the same bits.
template <int NCH, int MINB, bool BIAS, bool PF = false>
static __global__ void __launch_bounds__(256, MINB) layernorm_backward_reg_kernel(
    bf16 *dinp, float *part_w, float *part_b, float *part_o, const bf16 *dout, const bf16 *inp,
    const bf16 *w, const float *mean, const float *rstd, int N, int C)
{
    // [2 or 3][8 warps][256 * NCH] floats: dweight, dbias (and dinp-on-entry) sums
    extern __shared__ float4 lnr_smem[];
    float *acc_w = reinterpret_cast<float *>(lnr_smem), *acc_b = acc_w + 8 * 256 * NCH;
    float *acc_o = acc_b + 8 * 256 * NCH;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float *aw = acc_w + warp * 256 * NCH, *ab = acc_b + warp * 256 * NCH;
    float *ao = acc_o + warp * 256 * NCH;
    // PF: [8 warps][x, dout][256 * NCH] bf16 after the sums
    bf16 *px = reinterpret_cast<bf16 *>(acc_w + (BIAS ? 3 : 2) * 8 * 256 * NCH) + warp * 2 * 256 * NCH;
    bf16 *pd = px + 256 * NCH;
    if (PF && blockIdx.x * 8 + warp < N) {
        int row = blockIdx.x * 8 + warp;
#pragma unroll
        for (int i = 0; i < NCH; i++) {
            int c = lane * 8 + 256 * i;
            if (c < C) {
                lnb_cp_async16(px + c, inp + (size_t)row * C + c);
                lnb_cp_async16(pd + c, dout + (size_t)row * C + c);
            }
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    }
    bf16x8 wv[NCH];
#pragma unroll
    for (int i = 0; i < NCH; i++) {
        int c = lane * 8 + 256 * i;
        if (c < C)
            wv[i] = load8(w + c);
#pragma unroll
        for (int k = 0; k < 8; k += 4) {
            *reinterpret_cast<float4 *>(aw + c + k) = *reinterpret_cast<float4 *>(ab + c + k) =
                make_float4(0.f, 0.f, 0.f, 0.f);
            if (BIAS)
                *reinterpret_cast<float4 *>(ao + c + k) = make_float4(0.f, 0.f, 0.f, 0.f);
        }
    }
    for (int row = blockIdx.x * 8 + warp; row < N; row += gridDim.x * 8) {
        const bf16 *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
        bf16 *dx = dinp + (size_t)row * C;
        float m = mean[row], rs = rstd[row];
        bf16x8 xv[NCH], dv[NCH], ov[NCH];
        if (PF)
            asm volatile("cp.async.wait_all;\n" ::: "memory");
#pragma unroll
        for (int i = 0; i < NCH; i++) {
            int c = lane * 8 + 256 * i;
            if (c < C) {
                xv[i] = PF ? load8(px + c) : load8_cs(x + c);
                dv[i] = PF ? load8(pd + c) : load8_cs(dy + c);
                ov[i] = load8(dx + c);
            }
        }
        float a = 0.f, b = 0.f;
#pragma unroll
        for (int i = 0; i < NCH; i++) {
            int c = lane * 8 + 256 * i;
            if (c < C) {
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    float xh = (__bfloat162float(xv[i].v[k]) - m) * rs;
                    float dn = __bfloat162float(dv[i].v[k]) * __bfloat162float(wv[i].v[k]);
                    a += dn;
                    b += dn * xh;
                }
            }
        }
        a = warp_sum(a) / C;
        b = warp_sum(b) / C;
        if (PF && row + gridDim.x * 8 < N) { /* the next row; xv, dv are in registers now */
            size_t next = (size_t)(row + gridDim.x * 8) * C;
#pragma unroll
            for (int i = 0; i < NCH; i++) {
                int c = lane * 8 + 256 * i;
                if (c < C) {
                    lnb_cp_async16(px + c, inp + next + c);
                    lnb_cp_async16(pd + c, dout + next + c);
                }
            }
            asm volatile("cp.async.commit_group;\n" ::: "memory");
        }
#pragma unroll
        for (int i = 0; i < NCH; i++) {
            int c = lane * 8 + 256 * i;
            if (c < C) {
                if (BIAS) { // before ov is overwritten; its own short live range
                    float so[8];
                    *reinterpret_cast<float4 *>(so) = *reinterpret_cast<float4 *>(ao + c);
                    *reinterpret_cast<float4 *>(so + 4) = *reinterpret_cast<float4 *>(ao + c + 4);
#pragma unroll
                    for (int k = 0; k < 8; k++)
                        so[k] += __bfloat162float(ov[i].v[k]);
                    *reinterpret_cast<float4 *>(ao + c) = *reinterpret_cast<float4 *>(so);
                    *reinterpret_cast<float4 *>(ao + c + 4) = *reinterpret_cast<float4 *>(so + 4);
                }
                float sw[8], sb[8];
                *reinterpret_cast<float4 *>(sw) = *reinterpret_cast<float4 *>(aw + c);
                *reinterpret_cast<float4 *>(sw + 4) = *reinterpret_cast<float4 *>(aw + c + 4);
                *reinterpret_cast<float4 *>(sb) = *reinterpret_cast<float4 *>(ab + c);
                *reinterpret_cast<float4 *>(sb + 4) = *reinterpret_cast<float4 *>(ab + c + 4);
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    float xh = (__bfloat162float(xv[i].v[k]) - m) * rs;
                    float d = __bfloat162float(dv[i].v[k]);
                    float dn = d * __bfloat162float(wv[i].v[k]);
                    ov[i].v[k] = __float2bfloat16_rn(__bfloat162float(ov[i].v[k]) + (dn - a - xh * b) * rs);
                    sw[k] += d * xh;
                    sb[k] += d;
                }
                store8(dx + c, ov[i]);
                *reinterpret_cast<float4 *>(aw + c) = *reinterpret_cast<float4 *>(sw);
                *reinterpret_cast<float4 *>(aw + c + 4) = *reinterpret_cast<float4 *>(sw + 4);
                *reinterpret_cast<float4 *>(ab + c) = *reinterpret_cast<float4 *>(sb);
                *reinterpret_cast<float4 *>(ab + c + 4) = *reinterpret_cast<float4 *>(sb + 4);
            }
        }
    }
    // block reduction in warp order (as the kernel above): one partial row of each per block
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += 256) {
        float tw = 0.f, tb = 0.f, to = 0.f;
        for (int y = 0; y < 8; y++) {
            tw += acc_w[y * 256 * NCH + c];
            tb += acc_b[y * 256 * NCH + c];
            if (BIAS)
                to += acc_o[y * 256 * NCH + c];
        }
        part_w[(size_t)blockIdx.x * C + c] = tw;
        part_b[(size_t)blockIdx.x * C + c] = tb;
        if (BIAS)
            part_o[(size_t)blockIdx.x * C + c] = to;
    }
}

// dw (blockIdx.y 0), db (1) or do_ (2) += the G partial rows: thread (x, y) adds rows y, y+16,
// ... of column blockIdx.x*32 + x in order, then y = 0 adds the 16 sums in order.
static __global__ void lnr_final_kernel(float *dw, float *db, float *do_, const float *part_w,
                                        const float *part_b, const float *part_o, int G, int C)
{
    __shared__ float s[16][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    const float *p = blockIdx.y == 2 ? part_o : blockIdx.y ? part_b : part_w;
    float acc = 0.f;
    if (c < C)
#pragma unroll 4
        for (int g = threadIdx.y; g < G; g += 16)
            acc += p[(size_t)g * C + c];
    s[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float t = 0.f;
        for (int y = 0; y < 16; y++)
            t += s[y][threadIdx.x];
        (blockIdx.y == 2 ? do_ : blockIdx.y ? db : dw)[c] += t;
    }
}

// dbias2 non-NULL (MINB 2 only: 3 * 264 partial rows fill kern_colsum_scratch_floats(C)): the
// BIAS kernel, dbias2 += the column sums of dinp on entry.  PF: v2's prefetch (12 KiB more
// shared memory per 256 columns: 96 KiB at C=768 with BIAS, still two blocks per SM).
template <int NCH, int MINB, bool PF = false>
static int layernorm_backward_reg(bf16 *dinp, float *dweight, float *dbias, float *dbias2,
                                  float *scratch, const bf16 *dout, const bf16 *inp, const bf16 *w,
                                  const float *mean, const float *rstd, int N, int C, cudaStream_t s)
{
    const int G = 132 * MINB; /* an H200's SMs; a fixed grid keeps the sums' order fixed; <= 396 */
    float *pw = scratch, *pb = scratch + (size_t)G * C, *po = pb + (size_t)G * C;
    const int nsum = dbias2 ? 3 : 2;
    const int smem = nsum * 8 * 256 * NCH * (int)sizeof(float) /* 64 KiB at NCH 4, 2 sums */
                     + (PF ? 8 * 2 * 256 * NCH * (int)sizeof(bf16) : 0);
    auto kern = dbias2 ? layernorm_backward_reg_kernel<NCH, MINB, true, PF>
                       : layernorm_backward_reg_kernel<NCH, MINB, false, PF>;
    if (smem > 48 * 1024) { /* widths over 768; set each time: the attribute is per device */
        cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess)
            return kern_set_error("layernorm_backward_reg smem", cudaGetErrorString(e));
    }
    kern<<<G, 256, smem, s>>>(dinp, pw, pb, po, dout, inp, w, mean, rstd, N, C);
    lnr_final_kernel<<<dim3(cdiv(C, 32), nsum), dim3(32, 16), 0, s>>>(dweight, dbias, dbias2, pw,
                                                                      pb, po, G, C);
    return kern_check_launch("layernorm_backward_reg");
}

static int lnb_impl = -1;

extern "C" void kern_lnbwd_set_impl(int reg)
{
    lnb_impl = reg >= 0 ? reg : kern_knob(KNOB_LN_BWD); /* v2 by default (docs/benchmarks.md) */
}

extern "C" int kern_layernorm_backward(kbf16 *dinp, float *dweight, float *dbias, float *scratch,
                                       const kbf16 *dout, const kbf16 *inp, const kbf16 *weight,
                                       const float *mean, const float *rstd, int N, int C,
                                       cudaStream_t s)
{
    if (C % 8)
        return -EINVAL;
    if (lnb_impl < 0)
        kern_lnbwd_set_impl(-1);
#define LNB_REG(n)                                                                                 \
    return lnb_impl == 2 ? layernorm_backward_reg<n, 3>((bf16 *)dinp, dweight, dbias, NULL, scratch, \
                                                        (const bf16 *)dout, (const bf16 *)inp,       \
                                                        (const bf16 *)weight, mean, rstd, N, C, s)   \
         : lnb_impl == 3 ? layernorm_backward_reg<n, 2, (n <= 3)>(                                 \
                               (bf16 *)dinp, dweight, dbias, NULL, scratch, (const bf16 *)dout,     \
                               (const bf16 *)inp, (const bf16 *)weight, mean, rstd, N, C, s)        \
                         : layernorm_backward_reg<n, 2>((bf16 *)dinp, dweight, dbias, NULL, scratch, \
                                     (const bf16 *)dout, (const bf16 *)inp, (const bf16 *)weight,   \
                                     mean, rstd, N, C, s)
    if (lnb_impl >= 1) {
        switch ((C + 255) / 256) {
        case 1: LNB_REG(1);
        case 2: LNB_REG(2);
        case 3: LNB_REG(3);
        case 4: LNB_REG(4);
        default: break;
        }
    }
#undef LNB_REG
    switch ((C + 255) / 256) { /* registers hold the row: widths up to 1024 take the fused path */
    case 1:
        return layernorm_backward_fused<1>((bf16 *)dinp, dweight, dbias, scratch, (const bf16 *)dout,
                                           (const bf16 *)inp, (const bf16 *)weight, mean, rstd, N, C, s);
    case 2:
        return layernorm_backward_fused<2>((bf16 *)dinp, dweight, dbias, scratch, (const bf16 *)dout,
                                           (const bf16 *)inp, (const bf16 *)weight, mean, rstd, N, C, s);
    case 3:
        return layernorm_backward_fused<3>((bf16 *)dinp, dweight, dbias, scratch, (const bf16 *)dout,
                                           (const bf16 *)inp, (const bf16 *)weight, mean, rstd, N, C, s);
    case 4:
        return layernorm_backward_fused<4>((bf16 *)dinp, dweight, dbias, scratch, (const bf16 *)dout,
                                           (const bf16 *)inp, (const bf16 *)weight, mean, rstd, N, C, s);
    default:
        break;
    }
    layernorm_backward_dinp_kernel<<<cdiv(N, 8), 256, 0, s>>>(
        (bf16 *)dinp, (const bf16 *)dout, (const bf16 *)inp, (const bf16 *)weight, mean, rstd, N, C);
    int r = kern_check_launch("layernorm_backward");
    if (r < 0)
        return r;
    float *pw = scratch, *pb = scratch + (size_t)COLSUM_RG * C;
    colsum_partial_kernel<true><<<dim3(cdiv(C, 64), COLSUM_RG), dim3(32, 8), 0, s>>>(
        pw, pb, (const bf16 *)dout, (const bf16 *)inp, mean, rstd, N, C);
    colsum_final_kernel<<<cdiv(C, 256), 256, 0, s>>>(dweight, dbias, pw, pb, C);
    return kern_check_launch("layernorm_backward_weights");
}

// Bias gradient: each thread sums 8 adjacent columns (one 16-byte load per row) over its rows;
// BIAS_RG row groups write partials, added in order by colsum_final_kernel's loop (BIAS_RG rows).
#define BIAS_RG 128
static __global__ void bias_partial_kernel(float *part, const bf16 *dout, int N, int OC)
{
    __shared__ float sb[8][256];
    int c = blockIdx.x * 256 + threadIdx.x * 8;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (c < OC) {
        for (int r = blockIdx.y * 8 + threadIdx.y; r < N; r += gridDim.y * 8) {
            bf16x8 d = load8(dout + (size_t)r * OC + c);
#pragma unroll
            for (int k = 0; k < 8; k++)
                acc[k] += __bfloat162float(d.v[k]);
        }
    }
#pragma unroll
    for (int k = 0; k < 8; k++)
        sb[threadIdx.y][threadIdx.x * 8 + k] = acc[k];
    __syncthreads();
    int t = threadIdx.y * 32 + threadIdx.x; // 256 threads, one column each
    int cc = blockIdx.x * 256 + t;
    if (cc < OC) {
        float b = 0.f;
        for (int y = 0; y < 8; y++)
            b += sb[y][t];
        part[(size_t)blockIdx.y * OC + cc] = b;
    }
}

static __global__ void bias_final_kernel(float *db, const float *part, int OC)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= OC)
        return;
    float b = 0.f;
    for (int g = 0; g < BIAS_RG; g++)
        b += part[(size_t)g * OC + c];
    db[c] += b;
}

// v2 (DROVER_BIAS=v2): the same 256-column tiles (a lane sums 8 adjacent columns), but the grid
// is one wave on an H200 (BIAS2_BLOCKS_PER_SM blocks on each of 132 SMs: the row groups G are
// what the column tiles leave of that, fixed by OC and N, so the order is fixed), each lane
// issues BIAS2_UNROLL independent 16-byte loads before it adds them, in row order, to fp32
// registers, and the G partial rows (58 at 3C, 44 at 4C, instead of 128) are added by
// lnr_final_kernel (16 row groups per column, then in order).  Summed in another order than
// bias_partial_kernel: not its bits, the same bits run to run.
// part: (G, OC) fp32 scratch; dout: (N, OC) bf16, OC % 8 == 0.
#define BIAS2_BLOCKS_PER_SM 4
#define BIAS2_UNROLL 4
static __global__ void __launch_bounds__(256, BIAS2_BLOCKS_PER_SM)
    bias_partial_v2_kernel(float *part, const bf16 *dout, int N, int OC)
{
    __shared__ float sb[8][256];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int c = blockIdx.x * 256 + lane * 8;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (c < OC) {
        const int step = gridDim.y * 8;
        int r = blockIdx.y * 8 + warp;
        for (; r + (BIAS2_UNROLL - 1) * step < N; r += BIAS2_UNROLL * step) {
            bf16x8 d[BIAS2_UNROLL];
#pragma unroll
            for (int u = 0; u < BIAS2_UNROLL; u++)
                d[u] = load8_cs(dout + (size_t)(r + u * step) * OC + c);
#pragma unroll
            for (int u = 0; u < BIAS2_UNROLL; u++)
#pragma unroll
                for (int k = 0; k < 8; k++)
                    acc[k] += __bfloat162float(d[u].v[k]);
        }
        for (; r < N; r += step) {
            bf16x8 d = load8_cs(dout + (size_t)r * OC + c);
#pragma unroll
            for (int k = 0; k < 8; k++)
                acc[k] += __bfloat162float(d.v[k]);
        }
    }
#pragma unroll
    for (int k = 0; k < 8; k++)
        sb[warp][lane * 8 + k] = acc[k];
    __syncthreads();
    int cc = blockIdx.x * 256 + threadIdx.x; // one column per thread, warps added in order
    if (cc < OC) {
        float b = 0.f;
        for (int y = 0; y < 8; y++)
            b += sb[y][threadIdx.x];
        part[(size_t)blockIdx.y * OC + cc] = b;
    }
}

static int bias_impl = -1;

extern "C" void kern_bias_set_impl(int impl)
{
    bias_impl = impl >= 0 ? impl : kern_knob(KNOB_BIAS); /* v2 by default */
}

extern "C" int kern_bias_backward(float *dbias, float *scratch, const kbf16 *dout, int N, int OC,
                                  cudaStream_t s)
{
    if (bias_impl < 0)
        kern_bias_set_impl(-1);
    if (OC % 8 == 0 && bias_impl == 1) {
        int tiles = (int)cdiv(OC, 256), g = 132 * BIAS2_BLOCKS_PER_SM / tiles;
        int gmax = (int)cdiv(N, 8 * BIAS2_UNROLL); /* small N: no row groups without rows */
        g = g < gmax ? g : gmax;
        g = g > 0 ? g : 1; /* <= 528 partial rows: inside kern_colsum_scratch_floats(OC) */
        bias_partial_v2_kernel<<<dim3(tiles, g), 256, 0, s>>>(scratch, (const bf16 *)dout, N, OC);
        lnr_final_kernel<<<dim3(cdiv(OC, 32), 1), dim3(32, 16), 0, s>>>(dbias, NULL, NULL, scratch,
                                                                        NULL, NULL, g, OC);
        return kern_check_launch("bias_backward_v2");
    }
    if (OC % 8 == 0) {
        bias_partial_kernel<<<dim3(cdiv(OC, 256), BIAS_RG), dim3(32, 8), 0, s>>>(
            scratch, (const bf16 *)dout, N, OC);
        bias_final_kernel<<<cdiv(OC, 256), 256, 0, s>>>(dbias, scratch, OC);
        return kern_check_launch("bias_backward");
    }
    if (OC % 2)
        return -EINVAL;
    float *pw = scratch, *pb = scratch + (size_t)COLSUM_RG * OC;
    colsum_partial_kernel<false><<<dim3(cdiv(OC, 64), COLSUM_RG), dim3(32, 8), 0, s>>>(
        pw, pb, (const bf16 *)dout, nullptr, nullptr, nullptr, N, OC);
    colsum_final_kernel<<<cdiv(OC, 256), 256, 0, s>>>(nullptr, dbias, pw, pb, OC);
    return kern_check_launch("bias_backward");
}

// LayerNorm backward + the preceding layer's bias gradient: the reg kernel with its third
// column sum where it runs (widths up to 1024, DROVER_LN_BWD unset or v2), else the two launches.
static int lnbias_fused = -1;

extern "C" void kern_lnbias_set_impl(int fused)
{
    lnbias_fused = fused >= 0 ? fused : kern_knob(KNOB_LN_BIAS);
}

extern "C" int kern_layernorm_backward_bias(kbf16 *dinp, float *dweight, float *dbias,
                                            float *dbias2, float *scratch, const kbf16 *dout,
                                            const kbf16 *inp, const kbf16 *weight,
                                            const float *mean, const float *rstd, int N, int C,
                                            cudaStream_t s)
{
    if (C % 8)
        return -EINVAL;
    if (lnbias_fused < 0)
        kern_lnbias_set_impl(-1);
    if (lnb_impl < 0)
        kern_lnbwd_set_impl(-1);
    if (lnbias_fused && (lnb_impl == 1 || lnb_impl == 3)) { /* 3: v2, its prefetch to C=768 */
#define LNB_BIAS(n)                                                                                \
    return lnb_impl == 3 ? layernorm_backward_reg<n, 2, (n <= 3)>(                                 \
                               (bf16 *)dinp, dweight, dbias, dbias2, scratch, (const bf16 *)dout,   \
                               (const bf16 *)inp, (const bf16 *)weight, mean, rstd, N, C, s)        \
                         : layernorm_backward_reg<n, 2>((bf16 *)dinp, dweight, dbias, dbias2,       \
                                                        scratch, (const bf16 *)dout,               \
                                                        (const bf16 *)inp, (const bf16 *)weight,   \
                                                        mean, rstd, N, C, s)
        switch ((C + 255) / 256) {
        case 1: LNB_BIAS(1);
        case 2: LNB_BIAS(2);
        case 3: LNB_BIAS(3);
        case 4: LNB_BIAS(4);
        default: break;
        }
#undef LNB_BIAS
    }
    int r = kern_bias_backward(dbias2, scratch, dinp, N, C, s); /* reads dinp before the += */
    if (r < 0)
        return r;
    return kern_layernorm_backward(dinp, dweight, dbias, scratch, dout, inp, weight, mean, rstd, N,
                                   C, s);
}

// ---------------------------------------------------------------- GELU backward
static __global__ void gelu_backward_kernel(bf16 *d, const bf16 *pre, size_t n8)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n8)
        return;
    const float k = 0.7978845608028654f; // sqrt(2/pi)
    bf16x8 dv = load8(d + i * 8), xv = load8(pre + i * 8);
#pragma unroll
    for (int j = 0; j < 8; j++) {
        float x = __bfloat162float(xv.v[j]);
        float cube = 0.044715f * x * x * x;
        float th = tanhf(k * (x + cube));
        float sech2 = 1.f - th * th;
        float g = 0.5f * (1.f + th) + 0.5f * x * sech2 * k * (1.f + 3.f * 0.044715f * x * x);
        dv.v[j] = __float2bfloat16_rn(__bfloat162float(dv.v[j]) * g);
    }
    store8(d + i * 8, dv);
}

extern "C" int kern_gelu_backward_inplace(kbf16 *dinout, const kbf16 *pre, size_t n,
                                          cudaStream_t s)
{
    if (n % 8)
        return -EINVAL;
    gelu_backward_kernel<<<cdiv(n / 8, 256), 256, 0, s>>>((bf16 *)dinout, (const bf16 *)pre, n / 8);
    return kern_check_launch("gelu_backward");
}

// ---------------------------------------------------------------- classifier + cross-entropy
// One block per row.  Pass 1: online max / sum of exp over the first V logits.  Pass 2 (when
// dloss != 0): overwrite the row with the logits' gradient.  Only per-thread scalars in fp32.
#define CLS_THREADS 512
static __global__ void __launch_bounds__(CLS_THREADS) classifier_kernel(bf16 *logits, float *losses,
                                                                 const int *targets, float dloss,
                                                                 int V, int Vp)
{
    __shared__ float sm[CLS_THREADS / 32], ss[CLS_THREADS / 32];
    __shared__ float s_lse;
    int row = blockIdx.x;
    bf16 *x = logits + (size_t)row * Vp;
    int tgt = targets[row];
    float tlogit = __bfloat162float(x[tgt]);
    float m = -INFINITY, sum = 0.f;
    for (int v0 = threadIdx.x * 8; v0 < V; v0 += CLS_THREADS * 8) {
        bf16x8 xv = load8(x + v0);
        float lm = m;
#pragma unroll
        for (int k = 0; k < 8; k++)
            if (v0 + k < V)
                lm = fmaxf(lm, __bfloat162float(xv.v[k]));
        sum *= __expf(m - lm);
#pragma unroll
        for (int k = 0; k < 8; k++)
            if (v0 + k < V)
                sum += __expf(__bfloat162float(xv.v[k]) - lm);
        m = lm;
    }
    // combine (m, sum) over the warp, then the block
    for (int o = 16; o > 0; o >>= 1) {
        float om = __shfl_xor_sync(0xffffffffu, m, o), os = __shfl_xor_sync(0xffffffffu, sum, o);
        float nm = fmaxf(m, om);
        sum = (m == -INFINITY ? 0.f : sum * __expf(m - nm)) + (om == -INFINITY ? 0.f : os * __expf(om - nm));
        m = nm;
    }
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) {
        sm[w] = m;
        ss[w] = sum;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float M = -INFINITY, S = 0.f;
        for (int i = 0; i < CLS_THREADS / 32; i++)
            M = fmaxf(M, sm[i]);
        for (int i = 0; i < CLS_THREADS / 32; i++)
            S += sm[i] == -INFINITY ? 0.f : ss[i] * __expf(sm[i] - M);
        s_lse = M + logf(S);
        losses[row] = s_lse - tlogit;
    }
    __syncthreads();
    if (dloss == 0.f)
        return;
    float lse = s_lse;
    for (int v0 = threadIdx.x * 8; v0 < Vp; v0 += CLS_THREADS * 8) {
        bf16x8 xv = load8(x + v0), o;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int v = v0 + k;
            float g = 0.f;
            if (v < V)
                g = (__expf(__bfloat162float(xv.v[k]) - lse) - (v == tgt ? 1.f : 0.f)) * dloss;
            o.v[k] = __float2bfloat16_rn(g);
        }
        store8(x + v0, o);
    }
}

// The same contract with the row staged in shared memory (Vp * 2 bytes, cp.async): read from
// DRAM once, written once, and two blocks per SM so that one block's loads overlap the other's
// stores (the kernel above reads each row twice, the second time partly from DRAM).  Max, then
// sum of exp, each a fixed-order block reduction (deterministic).  A first version held the row
// in registers (1024 threads x 7 vectors, one block per SM): 4.3 ms at B=32, slower than the
// kernel above (2.6 ms).
#define CLSS_THREADS 512
template <int NT>
__device__ __forceinline__ float block_reduce_fixed(float v, float *sh, bool is_max)
{
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    v = is_max ? warp_max(v) : warp_sum(v);
    __syncthreads(); // sh may still be read by the previous reduction
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    float r = is_max ? -INFINITY : 0.f;
    for (int i = 0; i < NT / 32; i++) // every thread, same order: the same bits everywhere
        r = is_max ? fmaxf(r, sh[i]) : r + sh[i];
    return r;
}

__device__ __forceinline__ float ex2_approx(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// Two floats -> a bf16 pair (lo in the low half), round to nearest even.
__device__ __forceinline__ unsigned f_to_bf2(float lo, float hi)
{
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

__device__ __forceinline__ unsigned bf2_max(unsigned a, unsigned b)
{
    unsigned r;
    asm("max.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

// bf16 pair -> two floats: the bf16 bits are the float's top half.
__device__ __forceinline__ void bf2_to_f(unsigned u, float *lo, float *hi)
{
    *lo = __uint_as_float(u << 16);
    *hi = __uint_as_float(u & 0xffff0000u);
}

static __global__ void __launch_bounds__(CLSS_THREADS, 2)
    classifier_smem_kernel(bf16 *logits, float *losses, const int *targets, float dloss, int V, int Vp)
{
    extern __shared__ __align__(16) unsigned char cls_smem[];
    __shared__ float sh[CLSS_THREADS / 32];
    bf16 *rs = reinterpret_cast<bf16 *>(cls_smem);
    const uint4 *rv = reinterpret_cast<const uint4 *>(cls_smem);
    int row = blockIdx.x, nvec = Vp / 8, nfull = V / 8; // vectors [0, nfull) lie wholly below V
    bf16 *x = logits + (size_t)row * Vp;
    for (int i = threadIdx.x; i < nvec; i += CLSS_THREADS) {
        unsigned sa = (unsigned)__cvta_generic_to_shared(rs + i * 8);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(x + i * 8));
    }
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_all;\n" ::);
    __syncthreads();
    // max: on bf16 pairs (exact), the partial vector element by element
    unsigned m2 = 0xff80ff80u; // two bf16 -inf
    for (int i = threadIdx.x; i < nfull; i += CLSS_THREADS) {
        uint4 u = rv[i];
        m2 = bf2_max(bf2_max(m2, u.x), bf2_max(u.y, bf2_max(u.z, u.w)));
    }
    float m, mh;
    bf2_to_f(m2, &m, &mh);
    m = fmaxf(m, mh);
    if (threadIdx.x == 0)
        for (int v = nfull * 8; v < V; v++)
            m = fmaxf(m, __bfloat162float(rs[v]));
    float M = block_reduce_fixed<CLSS_THREADS>(m, sh, true);
    const float L2E = 1.4426950408889634f;
    float nml = -M * L2E, sum = 0.f;
    for (int i = threadIdx.x; i < nfull; i += CLSS_THREADS) {
        uint4 u = rv[i];
        unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            float lo, hi;
            bf2_to_f(w[k], &lo, &hi);
            sum += ex2_approx(fmaf(lo, L2E, nml)) + ex2_approx(fmaf(hi, L2E, nml));
        }
    }
    if (threadIdx.x == 0)
        for (int v = nfull * 8; v < V; v++)
            sum += ex2_approx(fmaf(__bfloat162float(rs[v]), L2E, nml));
    float S = block_reduce_fixed<CLSS_THREADS>(sum, sh, false);
    float lse = M + logf(S);
    int tgt = targets[row];
    if (threadIdx.x == 0)
        losses[row] = lse - __bfloat162float(rs[tgt]);
    if (dloss == 0.f)
        return;
    float nl = -lse * L2E;
    for (int i = threadIdx.x; i < nvec; i += CLSS_THREADS) {
        uint4 u = rv[i], o;
        unsigned w[4] = {u.x, u.y, u.z, u.w}, ow[4];
        if (i < nfull) {
#pragma unroll
            for (int k = 0; k < 4; k++) {
                float lo, hi;
                bf2_to_f(w[k], &lo, &hi);
                ow[k] = f_to_bf2(ex2_approx(fmaf(lo, L2E, nl)) * dloss,
                                 ex2_approx(fmaf(hi, L2E, nl)) * dloss);
            }
        } else { // the vector holding V (if V % 8) and the padding: zeros beyond V
#pragma unroll
            for (int k = 0; k < 4; k++) {
                float lo, hi;
                bf2_to_f(w[k], &lo, &hi);
                int v = i * 8 + 2 * k;
                ow[k] = f_to_bf2(v < V ? ex2_approx(fmaf(lo, L2E, nl)) * dloss : 0.f,
                                 v + 1 < V ? ex2_approx(fmaf(hi, L2E, nl)) * dloss : 0.f);
            }
        }
        if (i == tgt / 8) { // the target's -1, from the same float as the others
            int k = tgt % 8;
#pragma unroll
            for (int j = 0; j < 4; j++) { // unrolled selects keep w and ow in registers
                if (j != k / 2)
                    continue;
                float lo, hi;
                bf2_to_f(w[j], &lo, &hi);
                float p = ex2_approx(fmaf(k % 2 ? hi : lo, L2E, nl));
                unsigned gb = f_to_bf2((p - 1.f) * dloss, 0.f) & 0xffffu;
                ow[j] = k % 2 ? (ow[j] & 0xffffu) | (gb << 16) : (ow[j] & 0xffff0000u) | gb;
            }
        }
        o.x = ow[0], o.y = ow[1], o.z = ow[2], o.w = ow[3];
        *reinterpret_cast<uint4 *>(x + i * 8) = o;
    }
}

// ---- v2 (DROVER_CLS=v2, v2r): memory-level parallelism, one online pass, one exp per element
// per pass.  The default kernel above does one 16-byte load per thread and then a dependent max /
// exp update, so few bytes are in flight per SM; these keep 13-16 loads (v2) or 4 loads (v2r) in
// flight per thread before the first is used.  Both: per-thread online (max, sum) updated once per
// vector of 8 (the max in bf16x2, exact; exp as ex2.approx of one fma: 2 + 1/8 exps per element
// in all), one fixed-order block reduction (bitwise reproducible), the gradient from the same
// ex2/fma form with the target's -1 taken from the same float as the others.
//   v2:  the row staged in shared memory by cp.async (each thread copies and then reads only its
//        own vectors, so pass 1 needs no barrier and consumes vector j while j+1..j+15 are in
//        flight); the gradient from shared memory: one DRAM read, one write.  Two blocks per SM
//        (Vp * 2 bytes each).
//   v2r: the row in registers, four loads issued before use; pass 2 re-reads the row (L2 for the
//        most part: shared memory is reserved so that only two blocks, 264 rows, are in flight).
#define CLS2_THREADS 512
#define CLS2_DEPTH   16 /* cp.async vectors in flight per thread (v2) */
#define CLS_L2E      1.4426950408889634f

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem)
{
    unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(gmem) : "memory");
}

__device__ __forceinline__ void cp_async_commit(void)
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void cp_async_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); // no shared load hoisted above
}

// Online update of (m, s) with 8 logits, s = sum of 2^(x*L2E - m*L2E).  At least one of the 8
// must be a real logit (not -inf) while m is still -inf, as in the default kernel.
__device__ __forceinline__ void cls_online8(uint4 u, float &m, float &s)
{
    float a, b;
    bf2_to_f(bf2_max(bf2_max(u.x, u.y), bf2_max(u.z, u.w)), &a, &b);
    float nm = fmaxf(m, fmaxf(a, b));
    float nml = -nm * CLS_L2E, e[8];
    s *= ex2_approx((m - nm) * CLS_L2E); // m -inf: s is 0 and stays 0
    unsigned w[4] = { u.x, u.y, u.z, u.w };
#pragma unroll
    for (int k = 0; k < 4; k++) {
        float lo, hi;
        bf2_to_f(w[k], &lo, &hi);
        e[2 * k] = ex2_approx(fmaf(lo, CLS_L2E, nml));
        e[2 * k + 1] = ex2_approx(fmaf(hi, CLS_L2E, nml));
    }
    s += ((e[0] + e[1]) + (e[2] + e[3])) + ((e[4] + e[5]) + (e[6] + e[7]));
    m = nm;
}

// The vector starting at v0 < V with V inside it: logits v >= V become bf16 -inf (exp 0).
__device__ __forceinline__ uint4 cls_mask_tail(uint4 u, int v0, int V)
{
    unsigned w[4] = { u.x, u.y, u.z, u.w };
#pragma unroll
    for (int k = 0; k < 4; k++) {
        if (v0 + 2 * k >= V)
            w[k] = 0xff80ff80u;
        else if (v0 + 2 * k + 1 >= V)
            w[k] = (w[k] & 0xffffu) | 0xff800000u;
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// Gradient of 8 logits all below V, the target not among them: 2^(x*L2E - lse*L2E) * dloss.
__device__ __forceinline__ uint4 cls_grad8(uint4 u, float nl, float dloss)
{
    unsigned w[4] = { u.x, u.y, u.z, u.w };
#pragma unroll
    for (int k = 0; k < 4; k++) {
        float lo, hi;
        bf2_to_f(w[k], &lo, &hi);
        w[k] = f_to_bf2(ex2_approx(fmaf(lo, CLS_L2E, nl)) * dloss,
                        ex2_approx(fmaf(hi, CLS_L2E, nl)) * dloss);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// The same for the vector holding the target or V or the padding: (p - 1) * dloss at the
// target (p from the same fma/ex2 as the others), 0 at v >= V.
__device__ __noinline__ uint4 cls_grad8_edge(uint4 u, float nl, float dloss, int v0, int V, int tgt)
{
    unsigned w[4] = { u.x, u.y, u.z, u.w };
#pragma unroll
    for (int k = 0; k < 4; k++) {
        float lo, hi;
        bf2_to_f(w[k], &lo, &hi);
        int v = v0 + 2 * k;
        float glo = ex2_approx(fmaf(lo, CLS_L2E, nl)), ghi = ex2_approx(fmaf(hi, CLS_L2E, nl));
        glo = v < V ? (glo - (v == tgt ? 1.f : 0.f)) * dloss : 0.f;
        ghi = v + 1 < V ? (ghi - (v + 1 == tgt ? 1.f : 0.f)) * dloss : 0.f;
        w[k] = f_to_bf2(glo, ghi);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// Block-wide lse from each thread's (m, s): the max, then each s rescaled to it and summed, both
// in a fixed order (the same bits on every thread and every run).
template <int NT> __device__ __forceinline__ float cls_block_lse(float m, float s, float *sh)
{
    float M = block_reduce_fixed<NT>(m, sh, true);
    float sc = m == -INFINITY ? 0.f : s * ex2_approx((m - M) * CLS_L2E);
    float S = block_reduce_fixed<NT>(sc, sh, false);
    return M + logf(S);
}

// logits: (N,Vp) bf16, row blockIdx.x, in: logits, out: dlogits (dloss != 0); losses: (N) fp32;
// targets: (N) int32 < V.  Dynamic shared memory: Vp * 2 bytes.  Tolerance as the default kernel.
static __global__ void __launch_bounds__(CLS2_THREADS, 2)
    classifier_v2_kernel(bf16 *logits, float *losses, const int *targets, float dloss, int V,
                         int Vp)
{
    extern __shared__ __align__(16) unsigned char cls_smem[];
    __shared__ float sh[CLS2_THREADS / 32];
    uint4 *rv = reinterpret_cast<uint4 *>(cls_smem);
    const int row = blockIdx.x, tid = threadIdx.x, nvec = Vp / 8, nfull = V / 8;
    bf16 *x = logits + (size_t)row * Vp;
    const uint4 *xg = reinterpret_cast<const uint4 *>(x);
#pragma unroll
    for (int j = 0; j < CLS2_DEPTH; j++) { // one commit group per vector, empty ones included
        int i = tid + j * CLS2_THREADS;
        if (i < nvec)
            cp_async16(rv + i, xg + i);
        cp_async_commit();
    }
    int tgt = targets[row];
    float m = -INFINITY, s = 0.f;
    for (int i = tid; i < nvec; i += CLS2_THREADS) {
        cp_async_wait<CLS2_DEPTH - 1>(); // this thread's vector i has landed
        uint4 u = rv[i];
        int in = i + CLS2_DEPTH * CLS2_THREADS;
        if (in < nvec)
            cp_async16(rv + in, xg + in);
        cp_async_commit();
        if (i < nfull)
            cls_online8(u, m, s);
        else if (i * 8 < V)
            cls_online8(cls_mask_tail(u, i * 8, V), m, s);
    }
    float lse = cls_block_lse<CLS2_THREADS>(m, s, sh); // its barriers publish every thread's copies
    if (tid == 0)
        losses[row] = lse - __bfloat162float(reinterpret_cast<const bf16 *>(cls_smem)[tgt]);
    if (dloss == 0.f)
        return;
    const float nl = -lse * CLS_L2E;
    const int ti = tgt / 8;
    uint4 *xo = reinterpret_cast<uint4 *>(x);
#pragma unroll 4
    for (int i = tid; i < nvec; i += CLS2_THREADS) {
        uint4 u = rv[i];
        xo[i] = i < nfull && i != ti ? cls_grad8(u, nl, dloss)
                                     : cls_grad8_edge(u, nl, dloss, i * 8, V, tgt);
    }
}

#define CLS2R_UNROLL 4
// The same contract, the row in registers (see above).  Dynamic shared memory: none needed; the
// launcher reserves some to hold two blocks per SM.
static __global__ void __launch_bounds__(CLS2_THREADS, 2)
    classifier_v2r_kernel(bf16 *logits, float *losses, const int *targets, float dloss, int V,
                          int Vp)
{
    __shared__ float sh[CLS2_THREADS / 32];
    const int row = blockIdx.x, tid = threadIdx.x, nvec = Vp / 8, nfull = V / 8;
    bf16 *x = logits + (size_t)row * Vp;
    const uint4 *xg = reinterpret_cast<const uint4 *>(x);
    int tgt = targets[row];
    float tlogit = __bfloat162float(x[tgt]);
    float m = -INFINITY, s = 0.f;
    for (int i0 = tid; i0 < nvec; i0 += CLS2R_UNROLL * CLS2_THREADS) {
        uint4 u[CLS2R_UNROLL];
#pragma unroll
        for (int k = 0; k < CLS2R_UNROLL; k++) { // all loads first
            int i = i0 + k * CLS2_THREADS;
            u[k] = i < nvec ? __ldcg(xg + i) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int k = 0; k < CLS2R_UNROLL; k++) {
            int i = i0 + k * CLS2_THREADS;
            if (i < nfull)
                cls_online8(u[k], m, s);
            else if (i < nvec && i * 8 < V)
                cls_online8(cls_mask_tail(u[k], i * 8, V), m, s);
        }
    }
    float lse = cls_block_lse<CLS2_THREADS>(m, s, sh); // every read of the row is done past here
    if (tid == 0)
        losses[row] = lse - tlogit;
    if (dloss == 0.f)
        return;
    const float nl = -lse * CLS_L2E;
    const int ti = tgt / 8;
    uint4 *xo = reinterpret_cast<uint4 *>(x);
    for (int i0 = tid; i0 < nvec; i0 += CLS2R_UNROLL * CLS2_THREADS) {
        uint4 u[CLS2R_UNROLL];
#pragma unroll
        for (int k = 0; k < CLS2R_UNROLL; k++) {
            int i = i0 + k * CLS2_THREADS;
            u[k] = i < nvec ? __ldcg(xg + i) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int k = 0; k < CLS2R_UNROLL; k++) {
            int i = i0 + k * CLS2_THREADS;
            if (i < nvec)
                xo[i] = i < nfull && i != ti ? cls_grad8(u[k], nl, dloss)
                                             : cls_grad8_edge(u[k], nl, dloss, i * 8, V, tgt);
        }
    }
}

extern "C" int kern_classifier_forward_backward(kbf16 *logits, float *losses, const int *targets,
                                                float dloss, int N, int V, int Vp, cudaStream_t s)
{
    if (Vp % 8 || V > Vp)
        return -EINVAL;
    rowkernels_init();
    if (cls_impl == 1) {
        static int smem_set; /* dynamic shared memory allowed so far (cudaFuncSetAttribute) */
        int bytes = Vp * 2;
        if (bytes > smem_set && bytes > 48 * 1024) {
            if (cudaFuncSetAttribute(classifier_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     bytes) == cudaSuccess)
                smem_set = bytes;
            else
                (void)cudaGetLastError(); /* too wide for shared memory: the kernel below */
        }
        if (bytes <= 48 * 1024 || bytes <= smem_set) {
            classifier_smem_kernel<<<N, CLSS_THREADS, bytes, s>>>((bf16 *)logits, losses, targets,
                                                                 dloss, V, Vp);
            return kern_check_launch("classifier");
        }
    }
    if (cls_impl == 2 || cls_impl == 3) {
        /* v2: the row, Vp * 2 bytes (two rows per SM at GPT-2's Vp); v2r: 96 KiB of unused shared
         * memory, so that at most two blocks run per SM whatever the register count and the 264
         * rows in flight stay in L2 until pass 2 re-reads them.  Set on every call: the attributes
         * are per device.  A failure (too wide for shared memory): v2 falls back to the default
         * kernel, v2r runs without the reservation. */
        const void *kern = cls_impl == 2 ? (const void *)classifier_v2_kernel
                                         : (const void *)classifier_v2r_kernel;
        int bytes = cls_impl == 2 ? Vp * 2 : 96 * 1024;
        if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) !=
                cudaSuccess ||
            cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared) != cudaSuccess) {
            (void)cudaGetLastError();
            bytes = cls_impl == 2 ? -1 : 0;
        }
        if (cls_impl == 3) {
            classifier_v2r_kernel<<<N, CLS2_THREADS, bytes, s>>>((bf16 *)logits, losses, targets,
                                                                 dloss, V, Vp);
            return kern_check_launch("classifier");
        }
        if (bytes >= 0) {
            classifier_v2_kernel<<<N, CLS2_THREADS, bytes, s>>>((bf16 *)logits, losses, targets,
                                                                dloss, V, Vp);
            return kern_check_launch("classifier");
        }
    }
    classifier_kernel<<<N, CLS_THREADS, 0, s>>>((bf16 *)logits, losses, targets, dloss, V, Vp);
    return kern_check_launch("classifier");
}

// ---------------------------------------------------------------- reductions
static __global__ void sum_kernel(float *out, const float *in, size_t n)
{
    __shared__ float sh[1024];
    float acc = 0.f;
    for (size_t i = threadIdx.x; i < n; i += 1024)
        acc += in[i];
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int st = 512; st > 0; st >>= 1) {
        if ((int)threadIdx.x < st)
            sh[threadIdx.x] += sh[threadIdx.x + st];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        out[0] = sh[0];
}

extern "C" int kern_sum(float *out, const float *in, size_t n, cudaStream_t s)
{
    sum_kernel<<<1, 1024, 0, s>>>(out, in, n);
    return kern_check_launch("sum");
}

#define SUMSQ_BLOCKS 1024
extern "C" size_t kern_sumsq_partials(void)
{
    return SUMSQ_BLOCKS;
}

static __global__ void sumsq_kernel(float *partial, const float *g, size_t n)
{
    __shared__ float sh[256];
    float acc = 0.f;
    for (size_t i = blockIdx.x * (size_t)256 + threadIdx.x; i < n; i += (size_t)SUMSQ_BLOCKS * 256)
        acc += g[i] * g[i];
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int st = 128; st > 0; st >>= 1) {
        if ((int)threadIdx.x < st)
            sh[threadIdx.x] += sh[threadIdx.x + st];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        partial[blockIdx.x] = sh[0];
}

static __global__ void norm_final_kernel(float *out, const float *partial, float clip, float gscale)
{
    if (threadIdx.x != 0)
        return;
    double acc = 0.0;
    for (int i = 0; i < SUMSQ_BLOCKS; i++)
        acc += partial[i];
    float norm = (float)sqrt(acc);
    float sc = 1.f;
    if (clip > 0.f && norm > clip)
        sc = (float)(clip / sqrt(acc)); // as the CPU backend: scale by clip / norm
    out[0] = norm;
    out[1] = sc * gscale;
}

extern "C" int kern_grad_norm(float *out, float *partial, const float *g, size_t n, float clip,
                              float grad_scale, cudaStream_t s)
{
    sumsq_kernel<<<SUMSQ_BLOCKS, 256, 0, s>>>(partial, g, n);
    norm_final_kernel<<<1, 32, 0, s>>>(out, partial, clip, grad_scale);
    return kern_check_launch("grad_norm");
}

// ---------------------------------------------------------------- AdamW
static __global__ void adamw_kernel(float *p, bf16 *pbf, const float *g, float *m, float *v,
                             const float *norm_scale, size_t n, float lr, float b1, float b2,
                             float eps, float wd, float bc1, float bc2)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n || !isfinite(norm_scale[0]))
        return;
    float gr = g[i] * norm_scale[1];
    float mm = b1 * m[i] + (1.f - b1) * gr;
    float vv = b2 * v[i] + (1.f - b2) * gr * gr;
    float mh = mm / bc1, vh = vv / bc2;
    float pp = p[i];
    pp -= lr * (mh / (sqrtf(vh) + eps) + wd * pp);
    m[i] = mm;
    v[i] = vv;
    p[i] = pp;
    pbf[i] = __float2bfloat16_rn(pp);
}

// The same four elements per thread with 16-byte loads (8-byte bf16 store): the same
// arithmetic per element, so the same bits.  For n % 4 == 0 and 16-byte aligned arrays.
static __global__ void adamw4_kernel(float *p, bf16 *pbf, const float *g, float *m, float *v,
                                     const float *norm_scale, size_t n4, float lr, float b1, float b2,
                                     float eps, float wd, float bc1, float bc2)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n4 || !isfinite(norm_scale[0]))
        return;
    float sc = norm_scale[1];
    float4 g4 = reinterpret_cast<const float4 *>(g)[i], m4 = reinterpret_cast<float4 *>(m)[i];
    float4 v4 = reinterpret_cast<float4 *>(v)[i], p4 = reinterpret_cast<float4 *>(p)[i];
    float gg[4] = {g4.x, g4.y, g4.z, g4.w}, mm[4] = {m4.x, m4.y, m4.z, m4.w};
    float vv[4] = {v4.x, v4.y, v4.z, v4.w}, pp[4] = {p4.x, p4.y, p4.z, p4.w};
#pragma unroll
    for (int k = 0; k < 4; k++) {
        float gr = gg[k] * sc;
        mm[k] = b1 * mm[k] + (1.f - b1) * gr;
        vv[k] = b2 * vv[k] + (1.f - b2) * gr * gr;
        float mh = mm[k] / bc1, vh = vv[k] / bc2;
        pp[k] -= lr * (mh / (sqrtf(vh) + eps) + wd * pp[k]);
    }
    reinterpret_cast<float4 *>(m)[i] = make_float4(mm[0], mm[1], mm[2], mm[3]);
    reinterpret_cast<float4 *>(v)[i] = make_float4(vv[0], vv[1], vv[2], vv[3]);
    reinterpret_cast<float4 *>(p)[i] = make_float4(pp[0], pp[1], pp[2], pp[3]);
    __nv_bfloat162 lo = __floats2bfloat162_rn(pp[0], pp[1]), hi = __floats2bfloat162_rn(pp[2], pp[3]);
    uint2 o = make_uint2(*reinterpret_cast<unsigned *>(&lo), *reinterpret_cast<unsigned *>(&hi));
    reinterpret_cast<uint2 *>(pbf)[i] = o;
}

static int adamw_vec = -1;

extern "C" void kern_adamw_set_impl(int vec)
{
    adamw_vec = vec >= 0 ? vec : kern_knob(KNOB_ADAMW);
}

extern "C" int kern_adamw(float *p, kbf16 *pbf, const float *g, float *m, float *v,
                          const float *norm_scale, size_t n, float lr, float beta1, float beta2,
                          float eps, float weight_decay, long t, cudaStream_t s)
{
    if (n == 0)
        return 0;
    float bc1 = 1.f - powf(beta1, (float)t), bc2 = 1.f - powf(beta2, (float)t);
    if (adamw_vec < 0)
        kern_adamw_set_impl(-1);
    if (adamw_vec && n % 4 == 0 && !(((uintptr_t)p | (uintptr_t)g | (uintptr_t)m | (uintptr_t)v) & 15) &&
        !((uintptr_t)pbf & 7)) {
        adamw4_kernel<<<cdiv(n / 4, 256), 256, 0, s>>>(p, (bf16 *)pbf, g, m, v, norm_scale, n / 4, lr,
                                                      beta1, beta2, eps, weight_decay, bc1, bc2);
        return kern_check_launch("adamw");
    }
    adamw_kernel<<<cdiv(n, 256), 256, 0, s>>>(p, (bf16 *)pbf, g, m, v, norm_scale, n, lr, beta1, beta2,
                                              eps, weight_decay, bc1, bc2);
    return kern_check_launch("adamw");
}
