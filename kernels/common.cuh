// kernels/common.cuh: helpers shared by the kernel files (bf16 conversion, warp reductions,
// launch checking).  Never included from C.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>

#include "kernels/kernels.h"
#include "kernels/knobs.h"

typedef __nv_bfloat16 bf16;

// Set the thread's error text and return -EIO (kernels.c-style error translation, done once here).
int kern_set_error(const char *what, const char *detail);

static inline int kern_check_launch(const char *what)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return kern_set_error(what, cudaGetErrorString(e));
    return 0;
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// 8 bf16 as one 16-byte vector.
struct __align__(16) bf16x8 {
    bf16 v[8];
};

__device__ __forceinline__ bf16x8 load8(const bf16 *p)
{
    return *reinterpret_cast<const bf16x8 *>(p);
}
__device__ __forceinline__ void store8(bf16 *p, bf16x8 x)
{
    *reinterpret_cast<bf16x8 *>(p) = x;
}

static inline unsigned cdiv(size_t a, size_t b)
{
    return (unsigned)((a + b - 1) / b);
}

// D[b,h,t] = sum over the head's channels of dout * out (attention backward's row term).
int attention_dot_launch(float *D, const bf16 *dout, const bf16 *out, int B, int T, int C, int NH,
                         cudaStream_t s);

// kernels/attention_wgmma.cu (sm_90a builds; the stubs of other builds return -EINVAL / 0).
int attention_wg_available(int hs);
void attention_wg_set_variant(const char *v);
int attention_wg_forward(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int C, int NH, cudaStream_t s);
int attention_wg_backward(bf16 *dqkv, const float *D, const bf16 *dout, const float *lse, const bf16 *qkv, int B,
                          int T, int C, int NH, cudaStream_t s, cudaStream_t s2, cudaEvent_t ev0, cudaEvent_t ev1);
// The fused backward (dK, dV and dQ in one kernel, head size 64): workspace bytes (0 where it
// does not apply); 0 done, 1 where the tensor maps cannot be made (run the split kernels), <0 error.
size_t attention_wg_fused_ws_bytes(int B, int T, int C, int NH);
int attention_wg_backward_fused(bf16 *dqkv, const float *D, const bf16 *dout, const float *lse, const bf16 *qkv,
                                void *ws, size_t ws_bytes, int B, int T, int C, int NH, cudaStream_t s);
