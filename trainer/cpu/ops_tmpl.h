/* trainer/cpu/ops_tmpl.h: bodies of the CPU reference operators, written once for any real type.
 *
 * Include after defining REAL (float or double), OPS_FN(name) (the function name for op `name`)
 * and OPS_LINKAGE (empty or static).  trainer/cpu/ops.c instantiates it for float as cpu_<op>
 * (the declarations in ops.h); tests/unit/test-trainer-gradcheck.c for double as static
 * functions.  Define OPS_THREADED to split matmul rows over cpu_ops_get_threads() pthreads.
 * Sums always run in a fixed order so results do not depend on the thread count.
 * Never: allocate on the heap, log, or keep state.
 */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#ifndef REAL
#error "define REAL before including ops_tmpl.h"
#endif

/* The matmul row kernels are built twice on x86-64 (AVX2 and baseline SSE2), picked at load time.
 * No FMA target: a fused multiply-add rounds differently, and the two clones must give the same
 * bits (every lane sums the same elements in the same order). */
#if defined(__x86_64__) && defined(OPS_THREADED)
#define OPS_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define OPS_CLONES
#endif

#define OPS_GELU_SCALE 0.7978845608028654 /* sqrt(2/pi) */
/* math in the precision of REAL (expf for float, exp for double) */
#define OPS_EXP(x) _Generic((x), float: expf, default: exp)(x)
#define OPS_LOG(x) _Generic((x), float: logf, default: log)(x)
#define OPS_TANH(x) _Generic((x), float: tanhf, default: tanh)(x)
#define OPS_COSH(x) _Generic((x), float: coshf, default: cosh)(x)
#define OPS_SQRT(x) _Generic((x), float: sqrtf, default: sqrt)(x)

OPS_LINKAGE void OPS_FN(encoder_forward)(REAL *out, const int *inp, const REAL *wte,
                                         const REAL *wpe, int B, int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            REAL *o = out + ((size_t)b * T + t) * C;
            const REAL *we = wte + (size_t)inp[b * T + t] * C;
            const REAL *pe = wpe + (size_t)t * C;
            for (int i = 0; i < C; i++)
                o[i] = we[i] + pe[i];
        }
}

OPS_LINKAGE void OPS_FN(encoder_backward)(REAL *dwte, REAL *dwpe, const REAL *dout,
                                          const int *inp, int B, int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const REAL *d = dout + ((size_t)b * T + t) * C;
            REAL *dwe = dwte + (size_t)inp[b * T + t] * C;
            REAL *dpe = dwpe + (size_t)t * C;
            for (int i = 0; i < C; i++) {
                dwe[i] += d[i];
                dpe[i] += d[i];
            }
        }
}

OPS_LINKAGE void OPS_FN(layernorm_forward)(REAL *out, REAL *mean, REAL *rstd, const REAL *inp,
                                           const REAL *weight, const REAL *bias, int B, int T,
                                           int C)
{
    const REAL eps = (REAL)1e-5;
    for (size_t bt = 0; bt < (size_t)B * T; bt++) {
        const REAL *x = inp + bt * C;
        REAL m = 0;
        for (int i = 0; i < C; i++)
            m += x[i];
        m /= C;
        REAL var = 0;
        for (int i = 0; i < C; i++) {
            REAL d = x[i] - m;
            var += d * d;
        }
        var /= C;
        REAL s = (REAL)1 / OPS_SQRT(var + eps);
        REAL *o = out + bt * C;
        for (int i = 0; i < C; i++)
            o[i] = s * (x[i] - m) * weight[i] + bias[i];
        mean[bt] = m;
        rstd[bt] = s;
    }
}

OPS_LINKAGE void OPS_FN(layernorm_backward)(REAL *dinp, REAL *dweight, REAL *dbias,
                                            const REAL *dout, const REAL *inp, const REAL *weight,
                                            const REAL *mean, const REAL *rstd, int B, int T,
                                            int C)
{
    for (size_t bt = 0; bt < (size_t)B * T; bt++) {
        const REAL *d = dout + bt * C;
        const REAL *x = inp + bt * C;
        REAL *dx = dinp + bt * C;
        REAL m = mean[bt], s = rstd[bt];
        REAL dnorm_mean = 0, dnorm_norm_mean = 0;
        for (int i = 0; i < C; i++) {
            REAL n = (x[i] - m) * s;
            REAL dn = weight[i] * d[i];
            dnorm_mean += dn;
            dnorm_norm_mean += dn * n;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        for (int i = 0; i < C; i++) {
            REAL n = (x[i] - m) * s;
            REAL dn = weight[i] * d[i];
            dbias[i] += d[i];
            dweight[i] += n * d[i];
            dx[i] += (dn - dnorm_mean - n * dnorm_norm_mean) * s;
        }
    }
}

/* ---- matmul: rows of the output are independent, so threads split them ---- */

struct OPS_FN(mm_args) {
    REAL *out, *dinp, *dweight, *dbias;
    const REAL *inp, *weight, *bias, *dout;
    int BT, C, OC;
};

/* Dot product with 8 interleaved partial sums combined in a fixed order: vectorisable and
 * deterministic. */
static inline REAL OPS_FN(dot)(const REAL *restrict a, const REAL *restrict b, int n)
{
    REAL acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += a[i + k] * b[i + k];
    REAL s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

OPS_CLONES static void OPS_FN(mm_fwd_rows)(const struct OPS_FN(mm_args) *a, int r0, int r1)
{
    const int C = a->C, OC = a->OC;
    const REAL *restrict bias = a->bias;
    for (int bt = r0; bt < r1; bt++) {
        const REAL *restrict x = a->inp + (size_t)bt * C;
        REAL *restrict o = a->out + (size_t)bt * OC;
        for (int oc = 0; oc < OC; oc++) {
            REAL v = OPS_FN(dot)(x, a->weight + (size_t)oc * C, C);
            o[oc] = bias ? v + bias[oc] : v;
        }
    }
}

/* dinp rows r0..r1 (over BT) */
OPS_CLONES static void OPS_FN(mm_bwd_dinp_rows)(const struct OPS_FN(mm_args) *a, int r0, int r1)
{
    const int C = a->C, OC = a->OC;
    for (int bt = r0; bt < r1; bt++) {
        REAL *restrict dx = a->dinp + (size_t)bt * C;
        const REAL *restrict d = a->dout + (size_t)bt * OC;
        int oc = 0;
        /* dx[i] gets the terms in oc order, four per pass over dx */
        for (; oc + 4 <= OC; oc += 4) {
            const REAL *restrict w0 = a->weight + (size_t)oc * C;
            const REAL *restrict w1 = w0 + C, *restrict w2 = w1 + C, *restrict w3 = w2 + C;
            REAL g0 = d[oc], g1 = d[oc + 1], g2 = d[oc + 2], g3 = d[oc + 3];
            for (int i = 0; i < C; i++)
                dx[i] = (((dx[i] + g0 * w0[i]) + g1 * w1[i]) + g2 * w2[i]) + g3 * w3[i];
        }
        for (; oc < OC; oc++) {
            const REAL *restrict w = a->weight + (size_t)oc * C;
            REAL g = d[oc];
            for (int i = 0; i < C; i++)
                dx[i] += g * w[i];
        }
    }
}

/* dweight / dbias rows r0..r1 (over OC) */
OPS_CLONES static void OPS_FN(mm_bwd_dw_rows)(const struct OPS_FN(mm_args) *a, int r0, int r1)
{
    const int C = a->C, OC = a->OC, BT = a->BT;
    const REAL *restrict dout = a->dout;
    for (int oc = r0; oc < r1; oc++) {
        REAL *restrict dw = a->dweight + (size_t)oc * C;
        REAL db = 0;
        int bt = 0;
        /* dw[i] gets the terms in bt order, four per pass over dw */
        for (; bt + 4 <= BT; bt += 4) {
            REAL g0 = dout[(size_t)bt * OC + oc], g1 = dout[(size_t)(bt + 1) * OC + oc];
            REAL g2 = dout[(size_t)(bt + 2) * OC + oc], g3 = dout[(size_t)(bt + 3) * OC + oc];
            const REAL *restrict x0 = a->inp + (size_t)bt * C;
            const REAL *restrict x1 = x0 + C, *restrict x2 = x1 + C, *restrict x3 = x2 + C;
            db = (((db + g0) + g1) + g2) + g3;
            for (int i = 0; i < C; i++)
                dw[i] = (((dw[i] + g0 * x0[i]) + g1 * x1[i]) + g2 * x2[i]) + g3 * x3[i];
        }
        for (; bt < BT; bt++) {
            REAL g = dout[(size_t)bt * OC + oc];
            const REAL *restrict x = a->inp + (size_t)bt * C;
            db += g;
            for (int i = 0; i < C; i++)
                dw[i] += g * x[i];
        }
        if (a->dbias)
            a->dbias[oc] += db;
    }
}

#ifdef OPS_THREADED
#include <pthread.h>

typedef void (*OPS_FN(rows_fn))(const struct OPS_FN(mm_args) *, int, int);
struct OPS_FN(job) {
    OPS_FN(rows_fn) fn;
    const struct OPS_FN(mm_args) *a;
    int r0, r1;
};
static void *OPS_FN(job_run)(void *p)
{
    struct OPS_FN(job) *j = p;
    j->fn(j->a, j->r0, j->r1);
    return NULL;
}
/* Run fn over rows [0, n) on up to cpu_ops_get_threads() threads (the caller is one of them);
 * work below ~1 MFLOP stays on the calling thread, as does everything if thread creation fails. */
static void OPS_FN(parallel_rows)(OPS_FN(rows_fn) fn, const struct OPS_FN(mm_args) *a, int n,
                                  double flops)
{
    int nt = cpu_ops_get_threads();
    if (nt > 16)
        nt = 16;
    if (nt > n)
        nt = n;
    if (nt <= 1 || flops < 1e6) {
        fn(a, 0, n);
        return;
    }
    pthread_t th[16];
    struct OPS_FN(job) jobs[16];
    bool started[16] = {false};
    for (int k = 0; k < nt; k++) {
        jobs[k] = (struct OPS_FN(job)){fn, a, (int)((long)n * k / nt), (int)((long)n * (k + 1) / nt)};
        if (k > 0)
            started[k] = pthread_create(&th[k], NULL, OPS_FN(job_run), &jobs[k]) == 0;
    }
    fn(a, jobs[0].r0, jobs[0].r1);
    for (int k = 1; k < nt; k++) {
        if (started[k])
            (void)pthread_join(th[k], NULL);
        else
            fn(a, jobs[k].r0, jobs[k].r1);
    }
}
#endif

OPS_LINKAGE void OPS_FN(matmul_forward)(REAL *out, const REAL *inp, const REAL *weight,
                                        const REAL *bias, int B, int T, int C, int OC)
{
    struct OPS_FN(mm_args) a = {.out = out, .inp = inp, .weight = weight, .bias = bias,
                                .BT = B * T, .C = C, .OC = OC};
#ifdef OPS_THREADED
    OPS_FN(parallel_rows)(OPS_FN(mm_fwd_rows), &a, a.BT, 2.0 * a.BT * C * OC);
#else
    OPS_FN(mm_fwd_rows)(&a, 0, a.BT);
#endif
}

OPS_LINKAGE void OPS_FN(matmul_backward)(REAL *dinp, REAL *dweight, REAL *dbias,
                                         const REAL *dout, const REAL *inp, const REAL *weight,
                                         int B, int T, int C, int OC)
{
    struct OPS_FN(mm_args) a = {.dinp = dinp, .dweight = dweight, .dbias = dbias, .inp = inp,
                                .weight = weight, .dout = dout, .BT = B * T, .C = C, .OC = OC};
#ifdef OPS_THREADED
    OPS_FN(parallel_rows)(OPS_FN(mm_bwd_dinp_rows), &a, a.BT, 2.0 * a.BT * C * OC);
    OPS_FN(parallel_rows)(OPS_FN(mm_bwd_dw_rows), &a, OC, 2.0 * a.BT * C * OC);
#else
    OPS_FN(mm_bwd_dinp_rows)(&a, 0, a.BT);
    OPS_FN(mm_bwd_dw_rows)(&a, 0, OC);
#endif
}

OPS_LINKAGE void OPS_FN(attention_forward)(REAL *out, REAL *preatt, REAL *att, const REAL *inp,
                                           int B, int T, int C, int NH)
{
    int C3 = 3 * C, hs = C / NH;
    REAL scale = (REAL)(1.0 / sqrt((double)hs));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const REAL *q = inp + ((size_t)b * T + t) * C3 + h * hs;
                REAL *pre = preatt + (((size_t)b * NH + h) * T + t) * T;
                REAL *a = att + (((size_t)b * NH + h) * T + t) * T;
                REAL maxv = (REAL)-1e30;
                for (int t2 = 0; t2 <= t; t2++) {
                    const REAL *k = inp + ((size_t)b * T + t2) * C3 + h * hs + C;
                    REAL v = OPS_FN(dot)(q, k, hs) * scale;
                    pre[t2] = v;
                    if (v > maxv)
                        maxv = v;
                }
                REAL sum = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    REAL e = OPS_EXP(pre[t2] - maxv);
                    a[t2] = e;
                    sum += e;
                }
                REAL inv = sum == 0 ? 0 : (REAL)1 / sum;
                for (int t2 = 0; t2 < T; t2++)
                    a[t2] = t2 <= t ? a[t2] * inv : 0;
                for (int t2 = t + 1; t2 < T; t2++)
                    pre[t2] = 0;
                REAL *o = out + ((size_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++)
                    o[i] = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const REAL *v = inp + ((size_t)b * T + t2) * C3 + h * hs + 2 * C;
                    REAL w = a[t2];
                    for (int i = 0; i < hs; i++)
                        o[i] += w * v[i];
                }
            }
}

OPS_LINKAGE void OPS_FN(attention_backward)(REAL *dinp, REAL *dpreatt, REAL *datt,
                                            const REAL *dout, const REAL *inp, const REAL *att,
                                            int B, int T, int C, int NH)
{
    int C3 = 3 * C, hs = C / NH;
    REAL scale = (REAL)(1.0 / sqrt((double)hs));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const REAL *a = att + (((size_t)b * NH + h) * T + t) * T;
                REAL *da = datt + (((size_t)b * NH + h) * T + t) * T;
                REAL *dpre = dpreatt + (((size_t)b * NH + h) * T + t) * T;
                const REAL *q = inp + ((size_t)b * T + t) * C3 + h * hs;
                REAL *dq = dinp + ((size_t)b * T + t) * C3 + h * hs;
                const REAL *d = dout + ((size_t)b * T + t) * C + h * hs;
                /* out = sum att * v */
                for (int t2 = 0; t2 <= t; t2++) {
                    const REAL *v = inp + ((size_t)b * T + t2) * C3 + h * hs + 2 * C;
                    REAL *dv = dinp + ((size_t)b * T + t2) * C3 + h * hs + 2 * C;
                    da[t2] += OPS_FN(dot)(v, d, hs);
                    for (int i = 0; i < hs; i++)
                        dv[i] += a[t2] * d[i];
                }
                /* softmax: dpre = a * (da - sum(a * da)) */
                REAL s = 0;
                for (int t2 = 0; t2 <= t; t2++)
                    s += a[t2] * da[t2];
                for (int t2 = 0; t2 <= t; t2++)
                    dpre[t2] += a[t2] * (da[t2] - s);
                /* pre = q . k * scale */
                for (int t2 = 0; t2 <= t; t2++) {
                    const REAL *k = inp + ((size_t)b * T + t2) * C3 + h * hs + C;
                    REAL *dk = dinp + ((size_t)b * T + t2) * C3 + h * hs + C;
                    REAL g = dpre[t2] * scale;
                    for (int i = 0; i < hs; i++) {
                        dq[i] += k[i] * g;
                        dk[i] += q[i] * g;
                    }
                }
            }
}

OPS_LINKAGE void OPS_FN(gelu_forward)(REAL *out, const REAL *inp, size_t N)
{
    for (size_t i = 0; i < N; i++) {
        REAL x = inp[i];
        REAL cube = (REAL)0.044715 * x * x * x;
        out[i] = (REAL)0.5 * x * ((REAL)1 + OPS_TANH((REAL)OPS_GELU_SCALE * (x + cube)));
    }
}

OPS_LINKAGE void OPS_FN(gelu_backward)(REAL *dinp, const REAL *inp, const REAL *dout, size_t N)
{
    for (size_t i = 0; i < N; i++) {
        REAL x = inp[i];
        REAL cube = (REAL)0.044715 * x * x * x;
        REAL arg = (REAL)OPS_GELU_SCALE * (x + cube);
        REAL th = OPS_TANH(arg);
        REAL ch = OPS_COSH(arg);
        REAL sech2 = (REAL)1 / (ch * ch);
        REAL g = (REAL)0.5 * ((REAL)1 + th) +
                 x * (REAL)0.5 * sech2 * (REAL)OPS_GELU_SCALE * ((REAL)1 + (REAL)3 * (REAL)0.044715 * x * x);
        dinp[i] += g * dout[i];
    }
}

OPS_LINKAGE void OPS_FN(residual_forward)(REAL *out, const REAL *inp1, const REAL *inp2, size_t N)
{
    for (size_t i = 0; i < N; i++)
        out[i] = inp1[i] + inp2[i];
}

OPS_LINKAGE void OPS_FN(residual_backward)(REAL *dinp1, REAL *dinp2, const REAL *dout, size_t N)
{
    for (size_t i = 0; i < N; i++) {
        dinp1[i] += dout[i];
        dinp2[i] += dout[i];
    }
}

OPS_LINKAGE void OPS_FN(softmax_forward)(REAL *probs, const REAL *logits, int B, int T, int V,
                                         int Vp)
{
    for (size_t bt = 0; bt < (size_t)B * T; bt++) {
        const REAL *l = logits + bt * Vp;
        REAL *p = probs + bt * Vp;
        REAL maxv = (REAL)-1e30;
        for (int i = 0; i < V; i++)
            if (l[i] > maxv)
                maxv = l[i];
        REAL sum = 0;
        for (int i = 0; i < V; i++) {
            p[i] = OPS_EXP(l[i] - maxv);
            sum += p[i];
        }
        for (int i = 0; i < V; i++)
            p[i] /= sum;
        for (int i = V; i < Vp; i++)
            p[i] = 0;
    }
}

OPS_LINKAGE void OPS_FN(crossentropy_forward)(REAL *losses, const REAL *probs, const int *targets,
                                              int B, int T, int Vp)
{
    for (size_t bt = 0; bt < (size_t)B * T; bt++)
        losses[bt] = -OPS_LOG(probs[bt * Vp + targets[bt]]);
}

OPS_LINKAGE void OPS_FN(crossentropy_softmax_backward)(REAL *dlogits, const REAL *dlosses,
                                                       const REAL *probs, const int *targets,
                                                       int B, int T, int V, int Vp)
{
    for (size_t bt = 0; bt < (size_t)B * T; bt++) {
        REAL *dl = dlogits + bt * Vp;
        const REAL *p = probs + bt * Vp;
        REAL g = dlosses[bt];
        int ix = targets[bt];
        for (int i = 0; i < V; i++)
            dl[i] += (p[i] - (i == ix ? (REAL)1 : (REAL)0)) * g;
    }
}
