// kernels/elementwise.cu: the memory-bound kernels of the GPT-2 step: embeddings, LayerNorm,
// GELU backward, bias gradients, the fused classifier + cross-entropy, gradient norm and AdamW.
// Invariant: every reduction runs in a fixed order (no floating-point atomics), so a step is
// bit-for-bit reproducible on the same GPU and launch shapes.  Never allocates or synchronizes.
#include <math.h>
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

extern "C" int kern_layernorm_forward(kbf16 *out, float *mean, float *rstd, const kbf16 *inp,
                                      const kbf16 *weight, const kbf16 *bias, int N, int C,
                                      cudaStream_t s)
{
    if (C % 8)
        return -EINVAL;
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

extern "C" int kern_layernorm_backward(kbf16 *dinp, float *dweight, float *dbias, float *scratch,
                                       const kbf16 *dout, const kbf16 *inp, const kbf16 *weight,
                                       const float *mean, const float *rstd, int N, int C,
                                       cudaStream_t s)
{
    if (C % 8)
        return -EINVAL;
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

extern "C" int kern_bias_backward(float *dbias, float *scratch, const kbf16 *dout, int N, int OC,
                                  cudaStream_t s)
{
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

extern "C" int kern_classifier_forward_backward(kbf16 *logits, float *losses, const int *targets,
                                                float dloss, int N, int V, int Vp, cudaStream_t s)
{
    if (Vp % 8 || V > Vp)
        return -EINVAL;
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

extern "C" int kern_adamw(float *p, kbf16 *pbf, const float *g, float *m, float *v,
                          const float *norm_scale, size_t n, float lr, float beta1, float beta2,
                          float eps, float weight_decay, long t, cudaStream_t s)
{
    if (n == 0)
        return 0;
    float bc1 = 1.f - powf(beta1, (float)t), bc2 = 1.f - powf(beta2, (float)t);
    adamw_kernel<<<cdiv(n, 256), 256, 0, s>>>(p, (bf16 *)pbf, g, m, v, norm_scale, n, lr, beta1, beta2,
                                              eps, weight_decay, bc1, bc2);
    return kern_check_launch("adamw");
}
