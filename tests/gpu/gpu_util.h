/* tests/gpu/gpu_util.h: helpers shared by the GPU tests and the trainer benchmark: bf16 on the
 * host, random tensors, device buffers that are poisoned before each run, relative errors.
 * Test code: a failed CUDA call aborts the test program with file:line.
 */
#ifndef DROVER_TESTS_GPU_UTIL_H
#define DROVER_TESTS_GPU_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/kernels.h"
#include "trainer/model.h"

#define CK(call)                                                                        \
    do {                                                                                \
        cudaError_t e_ = (call);                                                        \
        if (e_ != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,               \
                    cudaGetErrorString(e_));                                            \
            exit(2);                                                                    \
        }                                                                               \
    } while (0)
#define KK(call)                                                                        \
    do {                                                                                \
        int r_ = (call);                                                                \
        if (r_ < 0) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %d %s\n", __FILE__, __LINE__, #call, r_,        \
                    kern_last_error());                                                 \
            exit(2);                                                                    \
        }                                                                               \
    } while (0)

static inline uint16_t f2bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float bf2f(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* n normal(0, std) floats, already rounded to bf16 precision (so the CPU reference sees exactly
 * what the GPU sees). */
static inline float *rand_bf16_exact(struct rng *r, size_t n, float std)
{
    float *x = malloc(n * sizeof(float));
    if (!x)
        exit(2);
    for (size_t i = 0; i < n; i++)
        x[i] = bf2f(f2bf(rng_normal(r, 0.0f, std)));
    return x;
}

static inline float *rand_f32(struct rng *r, size_t n, float std)
{
    float *x = malloc(n * sizeof(float));
    if (!x)
        exit(2);
    for (size_t i = 0; i < n; i++)
        x[i] = rng_normal(r, 0.0f, std);
    return x;
}

/* Device copy of host floats as bf16. */
static inline kbf16 *dev_bf16(const float *x, size_t n)
{
    uint16_t *h = malloc(n * 2);
    kbf16 *d;
    for (size_t i = 0; i < n; i++)
        h[i] = f2bf(x[i]);
    CK(cudaMalloc((void **)&d, n * 2 + 16));
    CK(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

static inline float *dev_f32(const float *x, size_t n)
{
    float *d;
    CK(cudaMalloc((void **)&d, n * 4 + 16));
    CK(cudaMemcpy(d, x, n * 4, cudaMemcpyHostToDevice));
    return d;
}

/* Uninitialised device buffer of bytes, poisoned with 0xFF (NaN in bf16 and fp32). */
static inline void *dev_poisoned(size_t bytes)
{
    void *d;
    CK(cudaMalloc(&d, bytes + 16));
    CK(cudaMemset(d, 0xff, bytes + 16));
    return d;
}

static inline float *host_from_bf16(const kbf16 *d, size_t n)
{
    uint16_t *h = malloc(n * 2);
    float *f = malloc(n * sizeof(float));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h, d, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        f[i] = bf2f(h[i]);
    free(h);
    return f;
}

static inline float *host_from_f32(const float *d, size_t n)
{
    float *f = malloc(n * sizeof(float));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(f, d, n * 4, cudaMemcpyDeviceToHost));
    return f;
}

/* ||a - b|| / ||b||, computed in double; +inf when any element of a is not finite. */
static inline double rel_err(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]))
            return INFINITY;
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    if (den == 0)
        return num == 0 ? 0 : INFINITY;
    return sqrt(num / den);
}

#endif
