/* trainer/cpu/ops.c: the fp32 instance of the CPU reference operators (bodies in ops_tmpl.h),
 * the matmul thread count, and the optimizer helpers.  Owns nothing but the thread count.
 * Never: allocate or log. */
#include "trainer/cpu/ops.h"

/* The hot loops need the vectoriser at its full cost model (-O2 only vectorises loops whose trip
 * count is a known multiple of the vector width).  No -ffast-math: sums keep their order. */
#if defined(__GNUC__) && !defined(__clang__) /* clang has no optimize pragma (and vectorises at -O2) */
#pragma GCC optimize("O3")
#endif

#include <math.h>

static int ops_threads = 1;

void cpu_ops_set_threads(int n)
{
    ops_threads = n < 1 ? 1 : n;
}

int cpu_ops_get_threads(void)
{
    return ops_threads;
}

#define REAL float
#define OPS_FN(name) cpu_##name
#define OPS_LINKAGE
#define OPS_THREADED 1
#include "trainer/cpu/ops_tmpl.h"

void cpu_adamw_step(float *params, const float *grads, float *m, float *v, size_t n, float lr,
                    float beta1, float beta2, float eps, float weight_decay, long t)
{
    float c1 = 1.0f - powf(beta1, (float)t);
    float c2 = 1.0f - powf(beta2, (float)t);
    for (size_t i = 0; i < n; i++) {
        float g = grads[i];
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / c1;
        float vhat = vi / c2;
        params[i] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * params[i]);
    }
}

double cpu_sumsq(const float *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    return s;
}

void cpu_scale(float *x, float s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] *= s;
}
