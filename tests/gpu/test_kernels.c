/* tests/gpu/test_kernels.c: each CUDA kernel against the CPU reference (trainer/cpu/ops.h).
 *
 * Fresh random inputs on every run (seed from the clock unless given as argv[1]), rounded to
 * bf16 first so the reference sees what the GPU sees; outputs poisoned with NaN before each
 * launch so an unwritten element fails; ||gpu - cpu|| / ||cpu|| against the tolerance stated on
 * each launcher in kernels/kernels.h.  One line per check, then a summary; exit 1 on any failure.
 */
#include <time.h>

#include "tests/gpu/gpu_util.h"
#include "trainer/cpu/ops.h"

static int failures;

static void check(const char *name, double err, double tol)
{
    int ok = err <= tol;
    printf("%-44s rel_err %.3e  tol %.0e  %s\n", name, err, tol, ok ? "ok" : "FAIL");
    if (!ok)
        failures++;
}

static void test_encoder(struct rng *r)
{
    int B = 4, T = 64, C = 256, Vp = 512;
    size_t N = (size_t)B * T;
    float *wte = rand_bf16_exact(r, (size_t)Vp * C, 1), *wpe = rand_bf16_exact(r, (size_t)T * C, 1);
    int *tok = malloc(N * sizeof(int));
    for (size_t i = 0; i < N; i++)
        tok[i] = (int)(rng_next_u64(r) % 40); /* few distinct tokens: buckets with many rows */
    float *ref = malloc(N * C * 4);
    cpu_encoder_forward(ref, tok, wte, wpe, B, T, C);
    kbf16 *dwte_b = dev_bf16(wte, (size_t)Vp * C), *dwpe_b = dev_bf16(wpe, (size_t)T * C);
    int *dtok;
    CK(cudaMalloc((void **)&dtok, N * sizeof(int)));
    CK(cudaMemcpy(dtok, tok, N * sizeof(int), cudaMemcpyHostToDevice));
    kbf16 *out = dev_poisoned(N * C * 2);
    KK(kern_encoder_forward(out, dtok, dwte_b, dwpe_b, B, T, C, 0));
    float *got = host_from_bf16(out, N * C);
    check("encoder_forward (B4 T64 C256)", rel_err(got, ref, N * C), 1e-2);

    /* backward: gradients start non-zero (kernels accumulate) */
    float *dout = rand_bf16_exact(r, N * C, 1);
    float *gw = rand_f32(r, (size_t)Vp * C, 1), *gp = rand_f32(r, (size_t)T * C, 1);
    float *d_gw = dev_f32(gw, (size_t)Vp * C), *d_gp = dev_f32(gp, (size_t)T * C);
    cpu_encoder_backward(gw, gp, dout, tok, B, T, C);
    /* CSR buckets by token, positions ascending */
    int *uniq = malloc(N * sizeof(int)), *start = malloc((N + 1) * sizeof(int)), *pos = malloc(N * sizeof(int));
    int nu = 0, k = 0;
    for (int t = 0; t < Vp; t++) {
        int s0 = k;
        for (size_t i = 0; i < N; i++)
            if (tok[i] == t)
                pos[k++] = (int)i;
        if (k > s0) {
            uniq[nu] = t;
            start[nu++] = s0;
        }
    }
    start[nu] = k;
    int *du, *ds, *dp;
    CK(cudaMalloc((void **)&du, N * 4));
    CK(cudaMalloc((void **)&ds, (N + 1) * 4));
    CK(cudaMalloc((void **)&dp, N * 4));
    CK(cudaMemcpy(du, uniq, (size_t)nu * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(ds, start, (size_t)(nu + 1) * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dp, pos, N * 4, cudaMemcpyHostToDevice));
    kbf16 *d_dout = dev_bf16(dout, N * C);
    KK(kern_encoder_backward(d_gw, d_gp, d_dout, du, ds, dp, nu, B, T, C, 0));
    float *g1 = host_from_f32(d_gw, (size_t)Vp * C), *g2 = host_from_f32(d_gp, (size_t)T * C);
    check("encoder_backward dwte (fp32 sums)", rel_err(g1, gw, (size_t)Vp * C), 1e-5);
    check("encoder_backward dwpe (fp32 sums)", rel_err(g2, gp, (size_t)T * C), 1e-5);

    /* the scaled form (data parallel: every rank's gathered rows, scale 1/world) */
    float *w0 = rand_f32(r, (size_t)Vp * C, 1), *p0 = rand_f32(r, (size_t)T * C, 1);
    float *cw = calloc((size_t)Vp * C, 4), *cp = calloc((size_t)T * C, 4);
    cpu_encoder_backward(cw, cp, dout, tok, B, T, C);
    float *d_w0 = dev_f32(w0, (size_t)Vp * C), *d_p0 = dev_f32(p0, (size_t)T * C);
    KK(kern_encoder_backward_scaled(d_w0, d_p0, d_dout, du, ds, dp, nu, B, T, C, 0.5f, 0));
    for (size_t i = 0; i < (size_t)Vp * C; i++)
        w0[i] += 0.5f * cw[i];
    for (size_t i = 0; i < (size_t)T * C; i++)
        p0[i] += 0.5f * cp[i];
    float *g3 = host_from_f32(d_w0, (size_t)Vp * C), *g4 = host_from_f32(d_p0, (size_t)T * C);
    check("encoder_backward_scaled 0.5 dwte", rel_err(g3, w0, (size_t)Vp * C), 1e-5);
    check("encoder_backward_scaled 0.5 dwpe", rel_err(g4, p0, (size_t)T * C), 1e-5);

    /* the token count read on the device (DROVER_STEP=staged/graph): kern_encoder_backward's
     * bits, with a grid of max_uniq (>= nu) blocks and with fewer blocks than tokens */
    int *dnu;
    CK(cudaMalloc((void **)&dnu, sizeof(int)));
    CK(cudaMemcpy(dnu, &nu, sizeof(int), cudaMemcpyHostToDevice));
    for (int g = 0; g < 2; g++) {
        float *d_w1 = dev_f32(w0, (size_t)Vp * C), *d_p1 = dev_f32(p0, (size_t)T * C);
        float *d_w2 = dev_f32(w0, (size_t)Vp * C), *d_p2 = dev_f32(p0, (size_t)T * C);
        KK(kern_encoder_backward(d_w1, d_p1, d_dout, du, ds, dp, nu, B, T, C, 0));
        KK(kern_encoder_backward_dev(d_w2, d_p2, d_dout, du, ds, dp, dnu, g ? 3 : (int)N, B, T, C,
                                     0));
        float *a1 = host_from_f32(d_w1, (size_t)Vp * C), *a2 = host_from_f32(d_w2, (size_t)Vp * C);
        float *b1 = host_from_f32(d_p1, (size_t)T * C), *b2 = host_from_f32(d_p2, (size_t)T * C);
        size_t same = 0;
        for (size_t i = 0; i < (size_t)Vp * C; i++)
            same += !memcmp(&a1[i], &a2[i], 4);
        for (size_t i = 0; i < (size_t)T * C; i++)
            same += !memcmp(&b1[i], &b2[i], 4);
        size_t all = (size_t)Vp * C + (size_t)T * C;
        printf("encoder_backward_dev (%s grid): %zu of %zu the same bits\n", g ? "3-block" : "full",
               same, all);
        check(g ? "encoder_backward_dev = encoder_backward (3 blocks)"
                : "encoder_backward_dev = encoder_backward (bits)", (double)(all - same), 0);
        free(a1);
        free(a2);
        free(b1);
        free(b2);
        CK(cudaFree(d_w1));
        CK(cudaFree(d_p1));
        CK(cudaFree(d_w2));
        CK(cudaFree(d_p2));
    }
    CK(cudaFree(dnu));
}

static void test_layernorm(struct rng *r, int C)
{
    int B = 8, T = 64;
    char name[80];
    size_t N = (size_t)B * T;
    float *x = rand_bf16_exact(r, N * C, 1), *w = rand_bf16_exact(r, C, 1), *b = rand_bf16_exact(r, C, 1);
    float *ref = malloc(N * C * 4), *mean = malloc(N * 4), *rstd = malloc(N * 4);
    for (size_t i = 0; i < N * C; i++)
        x[i] = bf2f(f2bf(x[i] * 3.0f + 1.5f)); /* non-zero mean */
    cpu_layernorm_forward(ref, mean, rstd, x, w, b, B, T, C);
    kbf16 *dx = dev_bf16(x, N * C), *dw = dev_bf16(w, C), *db = dev_bf16(b, C);
    kbf16 *out = dev_poisoned(N * C * 2);
    float *dmean = dev_poisoned(N * 4), *drstd = dev_poisoned(N * 4);
    KK(kern_layernorm_forward(out, dmean, drstd, dx, dw, db, (int)N, C, 0));
    float *got = host_from_bf16(out, N * C);
    snprintf(name, sizeof name, "layernorm_forward out (N512 C%d)", C);
    check(name, rel_err(got, ref, N * C), 1e-2);
    float *gm = host_from_f32(dmean, N), *gr = host_from_f32(drstd, N);
    check("layernorm_forward mean", rel_err(gm, mean, N), 1e-5);
    check("layernorm_forward rstd", rel_err(gr, rstd, N), 1e-5);

    float *dout = rand_bf16_exact(r, N * C, 1);
    float *dinp = rand_bf16_exact(r, N * C, 1);
    float *gw = rand_f32(r, C, 1), *gb = rand_f32(r, C, 1);
    float *dinp0 = malloc(N * C * 4), *gw0 = malloc(C * 4), *gb0 = malloc(C * 4); /* inputs kept */
    memcpy(dinp0, dinp, N * C * 4);
    memcpy(gw0, gw, C * 4);
    memcpy(gb0, gb, C * 4);
    kbf16 *d_dinp = dev_bf16(dinp, N * C), *d_dout = dev_bf16(dout, N * C);
    float *d_gw = dev_f32(gw, C), *d_gb = dev_f32(gb, C);
    float *scratch = dev_poisoned(kern_colsum_scratch_floats(C) * 4);
    /* the GPU uses its own mean/rstd (checked above) */
    KK(kern_layernorm_backward(d_dinp, d_gw, d_gb, scratch, d_dout, dx, dw, dmean, drstd, (int)N, C, 0));
    cpu_layernorm_backward(dinp, gw, gb, dout, x, w, mean, rstd, B, T, C);
    float *g1 = host_from_bf16(d_dinp, N * C), *g2 = host_from_f32(d_gw, C), *g3 = host_from_f32(d_gb, C);
    snprintf(name, sizeof name, "layernorm_backward dinp (+=, bf16, C%d)", C);
    check(name, rel_err(g1, dinp, N * C), 1e-2);
    check("layernorm_backward dweight", rel_err(g2, gw, C), 1e-3);
    check("layernorm_backward dbias", rel_err(g3, gb, C), 1e-3);

    /* both backward kernels on the same inputs (widths <= 1024; wider ones have one path):
       dinp the same bits, dweight and dbias summed in another order */
    if (C <= 1024) {
        float *gd[4], *gww[4], *gbb[4];
        for (int k = 0; k < 4; k++) { /* old, reg (default), reg3, v2 */
            kbf16 *e_dinp = dev_bf16(dinp0, N * C);
            float *e_gw = dev_f32(gw0, C), *e_gb = dev_f32(gb0, C);
            kern_lnbwd_set_impl(k); /* 0 old, 1 reg, 2 reg3, 3 v2 */
            KK(kern_layernorm_backward(e_dinp, e_gw, e_gb, scratch, d_dout, dx, dw, dmean, drstd,
                                       (int)N, C, 0));
            gd[k] = host_from_bf16(e_dinp, N * C);
            gww[k] = host_from_f32(e_gw, C);
            gbb[k] = host_from_f32(e_gb, C);
        }
        kern_lnbwd_set_impl(-1);
        for (int k = 1; k < 4; k++) {
            const char *v = k == 1 ? "reg" : k == 2 ? "reg3" : "v2";
            size_t same = 0;
            for (size_t i = 0; i < N * C; i++)
                same += gd[0][i] == gd[k][i];
            snprintf(name, sizeof name, "layernorm_backward %s dinp vs CPU (C%d)", v, C);
            check(name, rel_err(gd[k], dinp, N * C), 1e-2);
            snprintf(name, sizeof name, "layernorm_backward %s dweight vs CPU", v);
            check(name, rel_err(gww[k], gw, C), 1e-3);
            snprintf(name, sizeof name, "layernorm_backward %s dbias vs CPU", v);
            check(name, rel_err(gbb[k], gb, C), 1e-3);
            printf("layernorm_backward %s vs old: dinp %zu of %zu the same bits\n", v, same, N * C);
            snprintf(name, sizeof name, "layernorm_backward %s vs old dinp", v);
            check(name, rel_err(gd[k], gd[0], N * C), 1e-3);
            snprintf(name, sizeof name, "layernorm_backward %s vs old dweight", v);
            check(name, rel_err(gww[k], gww[0], C), 1e-5);
            snprintf(name, sizeof name, "layernorm_backward %s vs old dbias", v);
            check(name, rel_err(gbb[k], gbb[0], C), 1e-5);
        }
    }

    /* with the preceding bias gradient (column sums of dinp on entry), fused (default) and as
     * two launches (DROVER_LN_BIAS=0): dinp, dweight, dbias the bits of kern_layernorm_backward,
     * dbias2 against a double-precision sum and kern_bias_backward */
    {
        double *cs = calloc(C, sizeof(double));
        float *bias0 = rand_f32(r, C, 1), *ref2 = malloc(C * 4);
        for (size_t i = 0; i < N * C; i++)
            cs[i % C] += dinp0[i];
        for (int c = 0; c < C; c++)
            ref2[c] = (float)(bias0[c] + cs[c]);
        kbf16 *p_dinp = dev_bf16(dinp0, N * C);
        float *p_gw = dev_f32(gw0, C), *p_gb = dev_f32(gb0, C);
        KK(kern_layernorm_backward(p_dinp, p_gw, p_gb, scratch, d_dout, dx, dw, dmean, drstd,
                                   (int)N, C, 0));
        float *pd = host_from_bf16(p_dinp, N * C), *pw = host_from_f32(p_gw, C);
        float *pb = host_from_f32(p_gb, C);
        float *sep = NULL;
        for (int k = 0; k < 2; k++) { /* 1 fused, 0 two launches */
            kbf16 *q_dinp = dev_bf16(dinp0, N * C);
            float *q_gw = dev_f32(gw0, C), *q_gb = dev_f32(gb0, C), *q_b2 = dev_f32(bias0, C);
            kern_lnbias_set_impl(1 - k);
            KK(kern_layernorm_backward_bias(q_dinp, q_gw, q_gb, q_b2, scratch, d_dout, dx, dw,
                                            dmean, drstd, (int)N, C, 0));
            float *qd = host_from_bf16(q_dinp, N * C), *qw = host_from_f32(q_gw, C);
            float *qb = host_from_f32(q_gb, C), *q2 = host_from_f32(q_b2, C);
            const char *v = k ? "two launches" : "fused";
            size_t diff = 0;
            for (size_t i = 0; i < N * C; i++)
                diff += memcmp(&qd[i], &pd[i], 4) != 0;
            diff += memcmp(qw, pw, C * 4) != 0;
            diff += memcmp(qb, pb, C * 4) != 0;
            snprintf(name, sizeof name, "layernorm_backward_bias %s (C%d): dinp dw db bits", v, C);
            check(name, (double)diff, 0);
            snprintf(name, sizeof name, "layernorm_backward_bias %s dbias2 vs sum", v);
            check(name, rel_err(q2, ref2, C), 1e-4);
            if (k == 1)
                sep = q2;
            else
                free(q2);
            free(qd);
            free(qw);
            free(qb);
        }
        kern_lnbias_set_impl(-1);
        /* the separate kernel on the original dinp gives the two-launch path's dbias2 bits */
        kbf16 *o_dinp = dev_bf16(dinp0, N * C);
        float *o_b = dev_f32(bias0, C);
        KK(kern_bias_backward(o_b, scratch, o_dinp, (int)N, C, 0));
        float *ob = host_from_f32(o_b, C);
        snprintf(name, sizeof name, "layernorm_backward_bias two launches = bias_backward bits");
        check(name, memcmp(ob, sep, C * 4) ? 1 : 0, 0);
        free(ob);
        free(sep);
        free(cs);
        free(ref2);
        free(pd);
        free(pw);
        free(pb);
    }
}

/* LayerNorm backward v2 (the default: the next row of x and dout prefetched into shared
 * memory), alone and with the bias sum, bit for bit against the earlier default (reg): the
 * 264-block grid's warps get several rows only at this N. */
static void test_layernorm_v2(struct rng *r, int N, int C)
{
    char name[80];
    size_t n = (size_t)N * C;
    float *x = rand_bf16_exact(r, n, 1), *w = rand_bf16_exact(r, C, 1), *b = rand_bf16_exact(r, C, 1);
    for (size_t i = 0; i < n; i++)
        x[i] = bf2f(f2bf(x[i] * 3.0f + 1.5f)); /* non-zero mean */
    kbf16 *dx = dev_bf16(x, n), *dw = dev_bf16(w, C), *db = dev_bf16(b, C);
    size_t diff = 0;
    float *dout = rand_bf16_exact(r, n, 1), *dinp = rand_bf16_exact(r, n, 1), *g0 = rand_f32(r, 3 * C, 1);
    kbf16 *d_dout = dev_bf16(dout, n), *d_y = dev_poisoned(n * 2);
    float *dm = dev_poisoned((size_t)N * 4), *dr = dev_poisoned((size_t)N * 4);
    float *scratch = dev_poisoned(kern_colsum_scratch_floats(C) * 4);
    KK(kern_layernorm_forward(d_y, dm, dr, dx, dw, db, N, C, 0)); /* the default's mean, rstd */
    kern_lnbias_set_impl(1);
    for (int bias = 0; bias < 2; bias++) {
        float *hd[2], *hg[2];
        for (int k = 0; k < 2; k++) { /* 0: the default (reg), 1: v2 */
            kbf16 *e_dinp = dev_bf16(dinp, n);
            float *e_g = dev_f32(g0, 3 * C);
            kern_lnbwd_set_impl(k ? 3 : 1);
            if (bias)
                KK(kern_layernorm_backward_bias(e_dinp, e_g, e_g + C, e_g + 2 * C, scratch, d_dout,
                                                dx, dw, dm, dr, N, C, 0));
            else
                KK(kern_layernorm_backward(e_dinp, e_g, e_g + C, scratch, d_dout, dx, dw, dm, dr,
                                           N, C, 0));
            hd[k] = host_from_bf16(e_dinp, n);
            hg[k] = host_from_f32(e_g, 3 * C);
            CK(cudaFree(e_dinp));
            CK(cudaFree(e_g));
        }
        diff = 0;
        for (size_t i = 0; i < n; i++)
            diff += memcmp(&hd[0][i], &hd[1][i], 4) != 0;
        diff += memcmp(hg[0], hg[1], (size_t)3 * C * 4) != 0;
        snprintf(name, sizeof name, "layernorm_backward%s v2 = default bits (C%d)", bias ? "_bias" : "", C);
        check(name, (double)diff, 0);
        for (int k = 0; k < 2; k++) {
            free(hd[k]);
            free(hg[k]);
        }
    }
    kern_lnbwd_set_impl(-1);
    kern_lnbias_set_impl(-1);
    CK(cudaFree(d_dout));
    CK(cudaFree(d_y));
    CK(cudaFree(dm));
    CK(cudaFree(dr));
    CK(cudaFree(scratch));
    free(dout);
    free(dinp);
    free(g0);
    CK(cudaFree(dx));
    CK(cudaFree(dw));
    CK(cudaFree(db));
    free(x);
    free(w);
    free(b);
}

/* Bias gradient v2 (the default: one wave, four loads in flight per lane): dbias += against a
 * double-precision column sum (kern_bias_backward's tolerance) and repeat identical; then the
 * earlier kernel (DROVER_BIAS=old) against the same sum. */
static void test_bias_v2(struct rng *r, int N, int OC)
{
    char name[80];
    size_t n = (size_t)N * OC;
    float *dout = rand_bf16_exact(r, n, 1), *bias0 = rand_f32(r, OC, 1), *ref = malloc(OC * 4);
    double *cs = calloc(OC, sizeof(double));
    for (size_t i = 0; i < n; i++)
        cs[i % OC] += dout[i];
    for (int c = 0; c < OC; c++)
        ref[c] = (float)(bias0[c] + cs[c]);
    kbf16 *d_dout = dev_bf16(dout, n);
    float *scratch = dev_poisoned(kern_colsum_scratch_floats(OC) * 4), *got[2];
    kern_bias_set_impl(1);
    for (int k = 0; k < 2; k++) {
        float *d_db = dev_f32(bias0, OC);
        KK(kern_bias_backward(d_db, scratch, d_dout, N, OC, 0));
        got[k] = host_from_f32(d_db, OC);
        CK(cudaFree(d_db));
    }
    kern_bias_set_impl(-1);
    snprintf(name, sizeof name, "bias_backward v2 (+=, N%d OC%d)", N, OC);
    check(name, rel_err(got[0], ref, OC), 1e-4);
    check("bias_backward v2 repeat identical", memcmp(got[0], got[1], OC * 4) ? 1.0 : 0.0, 0);
    free(got[0]);
    free(got[1]);
    /* the earlier kernel (DROVER_BIAS=old), no longer the default */
    kern_bias_set_impl(0);
    float *d_db0 = dev_f32(bias0, OC);
    KK(kern_bias_backward(d_db0, scratch, d_dout, N, OC, 0));
    float *g0 = host_from_f32(d_db0, OC);
    kern_bias_set_impl(-1);
    snprintf(name, sizeof name, "bias_backward old (+=, N%d OC%d)", N, OC);
    check(name, rel_err(g0, ref, OC), 1e-4);
    free(g0);
    CK(cudaFree(d_db0));
    CK(cudaFree(d_dout));
    CK(cudaFree(scratch));
    free(dout);
    free(bias0);
    free(ref);
    free(cs);
}

/* DROVER_BLAS_PICKS=table's algorithms at the step's shapes against the heuristic's first
 * choice (the CPU reference would take minutes at those sizes; test_matmul checks the
 * heuristic's choice against it): the same sums in another order, so within bf16 rounding. */
static void test_blas_picks(void)
{
    struct kern_blas *t, *h;
    char *saved = getenv("DROVER_BLAS_PICKS") ? strdup(getenv("DROVER_BLAS_PICKS")) : NULL;
    setenv("DROVER_BLAS_PICKS", "table", 1);
    KK(kern_blas_new(32u << 20, &t));
    setenv("DROVER_BLAS_PICKS", "heuristic", 1);
    KK(kern_blas_new(32u << 20, &h));
    if (saved)
        setenv("DROVER_BLAS_PICKS", saved, 1);
    else
        unsetenv("DROVER_BLAS_PICKS");
    free(saved);
    int n = 0;
    double worst = 0;
    char what[128], name[256];
    KK(kern_blas_check_picks(t, h, &n, &worst, what, sizeof what));
    if (n) {
        snprintf(name, sizeof name,
                 "matmul table picks: %d shapes against the heuristic's first (worst %s)", n, what);
        check(name, worst, 1e-2);
    } else {
        printf("matmul table picks: none for this device and cuBLASLt (skipped)\n");
    }
    kern_blas_free(t);
    kern_blas_free(h);
}

static void test_matmul(struct rng *r, struct kern_blas *bl)
{
    int B = 4, T = 64, C = 384, OC = 1536;
    size_t N = (size_t)B * T;
    float *x = rand_bf16_exact(r, N * C, 1), *w = rand_bf16_exact(r, (size_t)OC * C, 0.05f);
    float *bias = rand_bf16_exact(r, OC, 0.5f), *res = rand_bf16_exact(r, N * OC, 1);
    float *ref = malloc(N * OC * 4), *ref2 = malloc(N * OC * 4);
    kbf16 *dx = dev_bf16(x, N * C), *dw = dev_bf16(w, (size_t)OC * C), *db = dev_bf16(bias, OC);
    kbf16 *dres = dev_bf16(res, N * OC);
    cpu_matmul_forward(ref, x, w, bias, B, T, C, OC);

    kbf16 *out = dev_poisoned(N * OC * 2);
    KK(kern_matmul_forward(bl, out, NULL, dx, dw, db, NULL, (int)N, C, OC, 0));
    float *got = host_from_bf16(out, N * OC);
    check("matmul_forward +bias (N256 C384 OC1536)", rel_err(got, ref, N * OC), 1e-2);

    for (size_t i = 0; i < N * OC; i++)
        ref2[i] = ref[i] + res[i];
    CK(cudaMemset(out, 0xff, N * OC * 2));
    KK(kern_matmul_forward(bl, out, NULL, dx, dw, db, dres, (int)N, C, OC, 0));
    free(got);
    got = host_from_bf16(out, N * OC);
    check("matmul_forward +bias +residual", rel_err(got, ref2, N * OC), 1e-2);

    kbf16 *pre = dev_poisoned(N * OC * 2);
    CK(cudaMemset(out, 0xff, N * OC * 2));
    KK(kern_matmul_forward(bl, out, pre, dx, dw, db, NULL, (int)N, C, OC, 0));
    cpu_gelu_forward(ref2, ref, N * OC);
    float *gpre = host_from_bf16(pre, N * OC);
    free(got);
    got = host_from_bf16(out, N * OC);
    check("matmul_forward +bias, gelu epilogue: pre", rel_err(gpre, ref, N * OC), 1e-2);
    check("matmul_forward +bias, gelu epilogue: out", rel_err(got, ref2, N * OC), 1e-2);

    /* gelu backward on the saved pre-activation */
    float *dh = rand_bf16_exact(r, N * OC, 1), *dpre = calloc(N * OC, 4);
    kbf16 *ddh = dev_bf16(dh, N * OC);
    KK(kern_gelu_backward_inplace(ddh, pre, N * OC, 0));
    cpu_gelu_backward(dpre, gpre, dh, N * OC);
    float *gg = host_from_bf16(ddh, N * OC);
    check("gelu_backward", rel_err(gg, dpre, N * OC), 1e-2);

    /* backward: dinp (overwrite), dweight (+=), dbias (+=) */
    float *dout = rand_bf16_exact(r, N * OC, 1);
    float *rdinp = calloc(N * C, 4), *rdw = rand_f32(r, (size_t)OC * C, 1), *rdb = rand_f32(r, OC, 1);
    float *d_dw = dev_f32(rdw, (size_t)OC * C), *d_db = dev_f32(rdb, OC);
    kbf16 *d_dout = dev_bf16(dout, N * OC), *d_dinp = dev_poisoned(N * C * 2);
    float *scratch = dev_poisoned(kern_colsum_scratch_floats(OC) * 4);
    KK(kern_matmul_backward_input(bl, d_dinp, d_dout, dw, 0, (int)N, C, OC, 0));
    KK(kern_matmul_backward_weight(bl, d_dw, d_dout, dx, (int)N, C, OC, 0));
    KK(kern_bias_backward(d_db, scratch, d_dout, (int)N, OC, 0));
    cpu_matmul_backward(rdinp, rdw, rdb, dout, x, w, B, T, C, OC);
    float *g1 = host_from_bf16(d_dinp, N * C), *g2 = host_from_f32(d_dw, (size_t)OC * C), *g3 = host_from_f32(d_db, OC);
    check("matmul_backward dinp", rel_err(g1, rdinp, N * C), 1e-2);
    /* dinp with the GELU backward in the epilogue: (dout @ w) * gelu'(pre), pre (N,C) */
    float *pre2 = rand_bf16_exact(r, N * C, 1), *ref3 = calloc(N * C, 4);
    kbf16 *d_pre2 = dev_bf16(pre2, N * C), *d_dg = dev_poisoned(N * C * 2);
    KK(kern_matmul_backward_input_dgelu(bl, d_dg, d_dout, dw, d_pre2, (int)N, C, OC, 0));
    cpu_gelu_backward(ref3, pre2, rdinp, N * C);
    float *g4 = host_from_bf16(d_dg, N * C);
    check("matmul_backward dinp + dgelu epilogue", rel_err(g4, ref3, N * C), 1e-2);
    check("matmul_backward dweight (+=, fp32 out)", rel_err(g2, rdw, (size_t)OC * C), 1e-2);
    check("bias_backward (+=)", rel_err(g3, rdb, OC), 1e-4);
    /* weight gradient with the bias gradient from the epilogue (dbias written) */
    float *rdw2 = rand_f32(r, (size_t)OC * C, 1), *rdb2 = calloc(OC, 4), *junk = calloc(N * C, 4);
    float *d_dw2 = dev_f32(rdw2, (size_t)OC * C), *d_db2 = dev_poisoned(OC * 4);
    KK(kern_matmul_backward_weight_bias(bl, d_dw2, d_db2, scratch, d_dout, dx, (int)N, C, OC, 0));
    cpu_matmul_backward(junk, rdw2, rdb2, dout, x, w, B, T, C, OC);
    float *g5 = host_from_f32(d_dw2, (size_t)OC * C), *g6 = host_from_f32(d_db2, OC);
    check("matmul_backward dweight (bias epilogue)", rel_err(g5, rdw2, (size_t)OC * C), 1e-2);
    check("matmul_backward dbias (bias epilogue)", rel_err(g6, rdb2, OC), 1e-4);
}

typedef int (*attn_fwd_fn)(kbf16 *, float *, const kbf16 *, int, int, int, int, cudaStream_t);
typedef int (*attn_bwd_fn)(kbf16 *, float *, const kbf16 *, const kbf16 *, const float *,
                           const kbf16 *, int, int, int, int, cudaStream_t);

static int attn_fused_only; /* `test_kernels SEED attention-fused`: the fused backward's checks only */

static void test_attention(struct rng *r, int B, int T, int C, int NH)
{
    size_t N = (size_t)B * T;
    char name[96];
    float *qkv = rand_bf16_exact(r, N * 3 * C, 1);
    float *ref = malloc(N * C * 4);
    size_t tt = (size_t)B * NH * T * T;
    float *preatt = calloc(tt, 4), *att = calloc(tt, 4);
    cpu_attention_forward(ref, preatt, att, qkv, B, T, C, NH);
    float *dout = rand_bf16_exact(r, N * C, 1);
    float *dinp = calloc(N * 3 * C, 4), *dpre = calloc(tt, 4), *datt = calloc(tt, 4);
    cpu_attention_backward(dinp, dpre, datt, dout, qkv, att, B, T, C, NH);
    kbf16 *dqkv_in = dev_bf16(qkv, N * 3 * C), *d_dout = dev_bf16(dout, N * C);
    /* the launcher with each implementation it can select (kern_attention_set_impl: mma.sync,
     * wgmma where built and the head size allows), then the first WMMA version */
    /* wgmma in each kernel variant (kern_attention_set_variant) */
    /* 13: longest-first grid; 24: ping-pong, longest-first; 37: dK/dV three warpgroups; 56:
     * three warpgroups in ping-pong (dK/dV), ping-pong (forward, dQ), longest-first */
    /* 13,13,64..104: dK/dV with the TMA producer warpgroup (1 warpgroup, 2 blocks per SM; 2
     * warpgroups; pipelined; three warpgroups; three, longest-first) */
    /* 64,64,96 .. 80,80,96: the forward and dQ with the TMA producer warpgroup too (each of
     * their configurations once: one warpgroup at two blocks per SM, pipelined; two, pipelined,
     * longest-first; the forward's two at two blocks per SM; three; one at four (forward) and
     * three (dQ) blocks per SM) */
    enum { NI = 27 };
    const char *which[NI] = {"mma",   "wgmma", "wgmma", "wgmma", "wgmma", "wgmma", "wgmma", "wgmma", "wgmma",
                             "wgmma", "wgmma", "wgmma", "wgmma", "wgmma", "wgmma", "wgmma", "wgmma", "wgmma",
                             "wgmma", "wgmma", "wgmma", "wgmma", "wgmma", "wgmma", "wgmma", "wgmma", "wmma ref"};
    const char *variant[NI] = {NULL,       "0",        "1",        "2",        "3",         "4",
                               "5",        "6",        "7",        "13",       "24",        "37",
                               "56",       "13,13,64", "13,13,65", "13,13,66", "13,13,67",  "13,13,96",
                               "13,13,104", "64,64,96", "66,66,96", "73,73,96", "75,75,96", "77,96,96",
                               "96,104,104", "80,80,96", NULL};
    attn_fwd_fn fwd[NI];
    attn_bwd_fn bwd[NI];
    for (int k = 0; k < NI; k++) {
        fwd[k] = k == NI - 1 ? kern_attention_forward_ref : kern_attention_forward;
        bwd[k] = k == NI - 1 ? kern_attention_backward_ref : kern_attention_backward;
    }
    for (int k = 0; k < NI && !attn_fused_only; k++) {
        if (k < NI - 1) {
            kern_attention_set_impl(k > 0);
            kern_attention_set_variant(variant[k]);
            if (strcmp(kern_attention_impl(C / NH), which[k]))
                continue; /* wgmma not built or head size 128: the mma line covers it */
        }
        kbf16 *out = dev_poisoned(N * C * 2);
        float *lse = dev_poisoned((size_t)B * NH * T * 4);
        KK(fwd[k](out, lse, dqkv_in, B, T, C, NH, 0));
        float *got = host_from_bf16(out, N * C);
        snprintf(name, sizeof name, "attention_forward %s%s (B%d T%d C%d NH%d)", which[k],
                 variant[k] ? variant[k] : "", B, T, C, NH);
        check(name, rel_err(got, ref, N * C), 1e-2);
        kbf16 *d_dqkv = dev_poisoned(N * 3 * C * 2);
        float *scratch = dev_poisoned((size_t)B * NH * T * 4);
        KK(bwd[k](d_dqkv, scratch, d_dout, out, lse, dqkv_in, B, T, C, NH, 0));
        float *g = host_from_bf16(d_dqkv, N * 3 * C);
        snprintf(name, sizeof name, "attention_backward %s%s dqkv (B%d T%d C%d NH%d)", which[k],
                 variant[k] ? variant[k] : "", B, T, C, NH);
        check(name, rel_err(g, dinp, N * 3 * C), 2e-2);
        if (k < NI - 1) { /* deterministic: a second backward gives the same bits */
            KK(bwd[k](d_dqkv, scratch, d_dout, out, lse, dqkv_in, B, T, C, NH, 0));
            float *g2 = host_from_bf16(d_dqkv, N * 3 * C);
            snprintf(name, sizeof name, "attention_backward %s%s repeat identical", which[k],
                     variant[k] ? variant[k] : "");
            check(name, memcmp(g, g2, N * 3 * C * sizeof(float)) ? 1.0 : 0.0, 0);
            free(g2);
        }
        free(got);
        free(g);
        CK(cudaFree(out));
        CK(cudaFree(lse));
        CK(cudaFree(d_dqkv));
        CK(cudaFree(scratch));
    }
    /* the fused backward (kern_attention_backward3 with a workspace; head size 64 on wgmma):
     * against the reference; a second run into a freshly poisoned workspace bit-identical (the
     * counters are reset and every part is written before it is read); dK and dV the bits of the
     * split kernels' two-warpgroup dK/dV (13,13,65: the same products in the same order); too
     * small a workspace runs the split kernels, bit for bit */
    kern_attention_set_impl(1);
    kern_attention_set_variant(NULL);
    kern_attention_set_bwd(1);
    size_t wsb = kern_attention_backward_ws_bytes(B, T, C, NH);
    if (wsb) {
        kbf16 *out = dev_poisoned(N * C * 2);
        float *lse = dev_poisoned((size_t)B * NH * T * 4);
        KK(kern_attention_forward(out, lse, dqkv_in, B, T, C, NH, 0));
        void *ws = dev_poisoned(wsb);
        kbf16 *d_dqkv = dev_poisoned(N * 3 * C * 2);
        float *scratch = dev_poisoned((size_t)B * NH * T * 4);
        KK(kern_attention_backward3(d_dqkv, scratch, ws, wsb, d_dout, out, lse, dqkv_in, B, T, C, NH, 0,
                                    NULL, NULL, NULL));
        float *g = host_from_bf16(d_dqkv, N * 3 * C);
        snprintf(name, sizeof name, "attention_backward wgmma fused dqkv (B%d T%d C%d NH%d)", B, T, C, NH);
        check(name, rel_err(g, dinp, N * 3 * C), 2e-2);
        CK(cudaFree(ws));
        ws = dev_poisoned(wsb);
        KK(kern_attention_backward3(d_dqkv, scratch, ws, wsb, d_dout, out, lse, dqkv_in, B, T, C, NH, 0,
                                    NULL, NULL, NULL));
        float *g2 = host_from_bf16(d_dqkv, N * 3 * C);
        check("attention_backward wgmma fused repeat identical",
              memcmp(g, g2, N * 3 * C * sizeof(float)) ? 1.0 : 0.0, 0);
        kern_attention_set_variant("13,13,65");
        KK(kern_attention_backward(d_dqkv, scratch, d_dout, out, lse, dqkv_in, B, T, C, NH, 0));
        float *g3 = host_from_bf16(d_dqkv, N * 3 * C);
        int same = 1;
        for (size_t row = 0; row < N; row++) /* columns C..3C: dK, dV */
            same &= !memcmp(g + row * 3 * C + C, g3 + row * 3 * C + C, 2 * C * sizeof(float));
        check("attention_backward wgmma fused dK dV = split 13,13,65 bits", same ? 0.0 : 1.0, 0);
        kern_attention_set_variant(NULL);
        KK(kern_attention_backward3(d_dqkv, scratch, ws, wsb - 1, d_dout, out, lse, dqkv_in, B, T, C, NH, 0,
                                    NULL, NULL, NULL));
        float *g4 = host_from_bf16(d_dqkv, N * 3 * C);
        KK(kern_attention_backward(d_dqkv, scratch, d_dout, out, lse, dqkv_in, B, T, C, NH, 0));
        free(g3);
        g3 = host_from_bf16(d_dqkv, N * 3 * C);
        check("attention_backward workspace too small = split bits",
              memcmp(g3, g4, N * 3 * C * sizeof(float)) ? 1.0 : 0.0, 0);
        free(g);
        free(g2);
        free(g3);
        free(g4);
        CK(cudaFree(ws));
        CK(cudaFree(out));
        CK(cudaFree(lse));
        CK(cudaFree(d_dqkv));
        CK(cudaFree(scratch));
    }
    kern_attention_set_bwd(-1);
    /* D = rowsum(dout * out): the 8-threads-per-row kernel (head size 64) gives the warp
     * kernel's bits */
    {
        kbf16 *o = dev_bf16(ref, N * C);
        float *d0 = dev_poisoned((size_t)B * NH * T * 4), *d1 = dev_poisoned((size_t)B * NH * T * 4);
        KK(kern_attention_dot(d0, d_dout, o, B, T, C, NH, 0, 0));
        KK(kern_attention_dot(d1, d_dout, o, B, T, C, NH, 1, 0));
        float *h0 = malloc((size_t)B * NH * T * 4), *h1 = malloc((size_t)B * NH * T * 4);
        CK(cudaMemcpy(h0, d0, (size_t)B * NH * T * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(h1, d1, (size_t)B * NH * T * 4, cudaMemcpyDeviceToHost));
        snprintf(name, sizeof name, "attention_dot new = old bits (B%d T%d C%d NH%d)", B, T, C, NH);
        check(name, memcmp(h0, h1, (size_t)B * NH * T * 4) ? 1.0 : 0.0, 0);
        free(h0);
        free(h1);
        CK(cudaFree(o));
        CK(cudaFree(d0));
        CK(cudaFree(d1));
    }
    free(qkv); free(ref); free(preatt); free(att); free(dout); free(dinp); free(dpre); free(datt);
    CK(cudaFree(dqkv_in));
    CK(cudaFree(d_dout));
    kern_attention_set_impl(-1);
    kern_attention_set_variant(NULL);
}

static void test_attention_all(struct rng *r)
{
    test_attention(r, 2, 200, 128, 2);  /* hs 64, ragged T */
    test_attention(r, 2, 256, 128, 4);  /* hs 32 */
    test_attention(r, 1, 130, 256, 2);  /* hs 128 */
    test_attention(r, 1, 1024, 768, 12); /* GPT-2 small shape */
    test_attention(r, 1, 64, 128, 2);    /* one tile */
    test_attention(r, 2, 100, 32, 2);    /* hs 16 (the selftest's tiny model) */
    test_attention(r, 3, 17, 64, 1);     /* shorter than a tile */
    test_attention(r, 2, 320, 192, 3);   /* hs 64, odd tile count (a half-empty 128-row block) */
}

static void test_classifier(struct rng *r, int B, int T, int V, int Vp)
{
    size_t N = (size_t)B * T;
    char name[96];
    float *logits = rand_bf16_exact(r, N * Vp, 2);
    int *tgt = malloc(N * sizeof(int));
    for (size_t i = 0; i < N; i++)
        tgt[i] = (int)(rng_next_u64(r) % (uint64_t)V);
    tgt[0] = V - 1; /* the target in the vector that holds V (when V % 8), and in the first */
    tgt[N - 1] = 0;
    float *probs = malloc(N * Vp * 4), *losses = malloc(N * 4), *dl = calloc(N * Vp, 4), *dlosses = malloc(N * 4);
    cpu_softmax_forward(probs, logits, B, T, V, Vp);
    cpu_crossentropy_forward(losses, probs, tgt, B, T, Vp);
    for (size_t i = 0; i < N; i++)
        dlosses[i] = 1.0f / (float)N;
    cpu_crossentropy_softmax_backward(dl, dlosses, probs, tgt, B, T, V, Vp);
    kbf16 *d_log = dev_bf16(logits, N * Vp);
    int *d_tgt;
    CK(cudaMalloc((void **)&d_tgt, N * 4));
    CK(cudaMemcpy(d_tgt, tgt, N * 4, cudaMemcpyHostToDevice));
    float *d_loss = dev_poisoned(N * 4);
    KK(kern_classifier_forward_backward(d_log, d_loss, d_tgt, 1.0f / (float)N, (int)N, V, Vp, 0));
    float *gl = host_from_f32(d_loss, N), *gd = host_from_bf16(d_log, N * Vp);
    snprintf(name, sizeof name, "classifier losses (N%zu V%d Vp%d)", N, V, Vp);
    check(name, rel_err(gl, losses, N), 1e-3);
    snprintf(name, sizeof name, "classifier dlogits (padding must be 0; V%d)", V);
    check(name, rel_err(gd, dl, N * Vp), 1e-2);
    /* the same logits again: the same bits (fixed-order reductions); dloss 0: losses only */
    kbf16 *d_log2 = dev_bf16(logits, N * Vp), *d_log3 = dev_bf16(logits, N * Vp);
    float *d_loss2 = dev_poisoned(N * 4), *d_loss3 = dev_poisoned(N * 4);
    KK(kern_classifier_forward_backward(d_log2, d_loss2, d_tgt, 1.0f / (float)N, (int)N, V, Vp, 0));
    KK(kern_classifier_forward_backward(d_log3, d_loss3, d_tgt, 0.0f, (int)N, V, Vp, 0));
    float *gl2 = host_from_f32(d_loss2, N), *gd2 = host_from_bf16(d_log2, N * Vp);
    float *gl3 = host_from_f32(d_loss3, N), *gd3 = host_from_bf16(d_log3, N * Vp);
    check("classifier repeat identical", memcmp(gl, gl2, N * 4) || memcmp(gd, gd2, N * Vp * 4) ? 1.0 : 0.0, 0);
    check("classifier dloss 0: same losses, logits kept",
          memcmp(gl, gl3, N * 4) || memcmp(gd3, logits, N * Vp * 4) ? 1.0 : 0.0, 0);
    float *d_sum = dev_poisoned(4);
    KK(kern_sum(d_sum, d_loss, N, 0));
    float *gs = host_from_f32(d_sum, 1);
    double s = 0;
    for (size_t i = 0; i < N; i++)
        s += losses[i];
    float sf = (float)s;
    check("sum of losses", rel_err(gs, &sf, 1), 1e-5);
}

static void test_optimizer(struct rng *r, size_t n)
{
    float *p = rand_f32(r, n, 1), *g = rand_f32(r, n, 0.1f), *m = rand_f32(r, n, 0.01f), *v = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        v[i] = fabsf(rng_normal(r, 0, 0.01f));
    float *dp = dev_f32(p, n), *dg = dev_f32(g, n), *dm = dev_f32(m, n), *dv = dev_f32(v, n);
    kbf16 *pbf = dev_poisoned(n * 2);
    float *out = dev_poisoned(8), *part = dev_poisoned(kern_sumsq_partials() * 4);
    double norm = sqrt(cpu_sumsq(g, n));
    float clip = (float)(norm / 2);
    KK(kern_grad_norm(out, part, dg, n, clip, 1.0f, 0));
    float *gn = host_from_f32(out, 2);
    float rn = (float)norm, rs = (float)(clip / norm);
    check("grad_norm norm", rel_err(gn, &rn, 1), 1e-5);
    check("grad_norm clip scale", rel_err(gn + 1, &rs, 1), 1e-5);
    cpu_scale(g, rs, n);
    cpu_adamw_step(p, g, m, v, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 7);
    KK(kern_adamw(dp, pbf, dg, dm, dv, out, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 7, 0));
    float *gp = host_from_f32(dp, n), *gm = host_from_f32(dm, n), *gv = host_from_f32(dv, n);
    float *gb = host_from_bf16(pbf, n);
    check("adamw params", rel_err(gp, p, n), 1e-5);
    check("adamw m", rel_err(gm, m, n), 1e-5);
    check("adamw v", rel_err(gv, v, n), 1e-5);
    check("adamw bf16 copy", rel_err(gb, p, n), 1e-2);
    /* a non-finite norm leaves everything untouched */
    float bad[2] = {NAN, 1.0f};
    CK(cudaMemcpy(out, bad, sizeof bad, cudaMemcpyHostToDevice));
    KK(kern_adamw(dp, pbf, dg, dm, dv, out, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 8, 0));
    float *gp2 = host_from_f32(dp, n), *gm2 = host_from_f32(dm, n);
    check("adamw with a non-finite norm changes nothing", rel_err(gp2, gp, n) + rel_err(gm2, gm, n), 0);
}

int main(int argc, char **argv)
{
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : (uint64_t)time(NULL);
    printf("test_kernels: seed %llu\n", (unsigned long long)seed);
    struct rng r;
    rng_seed(&r, seed);
    /* attention only (tests/gpu/run.sh probes); attention-fused: only the fused backward's checks
     * (short enough for compute-sanitizer) */
    attn_fused_only = argc > 2 && !strcmp(argv[2], "attention-fused");
    if (argc > 2 && (!strcmp(argv[2], "attention") || attn_fused_only)) {
        test_attention_all(&r);
        CK(cudaDeviceSynchronize());
        printf("test_kernels attention: %s (%d failed)\n", failures ? "FAIL" : "PASS", failures);
        return failures ? 1 : 0;
    }
    struct kern_blas *bl;
    KK(kern_blas_new(32u << 20, &bl));
    test_encoder(&r);
    test_layernorm(&r, 768);
    test_layernorm(&r, 96);
    test_layernorm(&r, 2048); /* wider than the fused kernel: two-pass path */
    printf("-- LayerNorm backward v2 against reg, bias gradient v2 and old\n");
    test_layernorm_v2(&r, 3 * 3168 + 5, 768); /* warps with several rows, the last fewer */
    test_layernorm_v2(&r, 3168 + 1, 96);      /* narrower than a warp's vectors */
    test_bias_v2(&r, 8192 + 37, 2304);         /* the 3C and 4C widths of the step */
    test_bias_v2(&r, 4096 + 5, 3072);
    test_bias_v2(&r, 517, 776);                /* a part-filled last column tile, few rows */
    test_matmul(&r, bl);
    test_blas_picks();
    test_attention_all(&r);
    test_classifier(&r, 4, 32, 1000, 1024);
    test_classifier(&r, 2, 16, 50257, 50304); /* GPT-2's vocabulary */
    /* the other row kernels: the earlier LayerNorm forward, the shared-memory classifier */
    printf("-- the other row kernels (DROVER_LN=old DROVER_CLS=smem)\n");
    kern_rowkernels_set_impl(0, 1);
    test_layernorm(&r, 768);
    test_classifier(&r, 4, 32, 1000, 1024);
    test_classifier(&r, 2, 16, 50257, 50304);
    test_classifier(&r, 1, 8, 70001, 70008);   /* 137 KiB of shared memory */
    test_classifier(&r, 1, 4, 150001, 150008); /* too wide for shared memory: the earlier kernel */
    /* each classifier by name: v2 (the default; the row in shared memory), the earlier
     * default, v2r (the row in registers) */
    static const int clss[] = {2, 0, 3};
    for (int ci = 0; ci < 3; ci++) {
        int cls = clss[ci];
        printf("-- classifier DROVER_CLS=%s\n", cls == 2 ? "v2" : cls ? "v2r" : "old");
        kern_rowkernels_set_impl(-1, cls);
        test_classifier(&r, 4, 32, 1000, 1024);    /* fewer vectors than threads, 3 padding vectors */
        test_classifier(&r, 2, 16, 50257, 50304);  /* GPT-2's vocabulary */
        test_classifier(&r, 2, 8, 4096, 4096);     /* no tail, no padding */
        test_classifier(&r, 1, 8, 70001, 70008);   /* v2: more vectors than its loads in flight */
        test_classifier(&r, 1, 4, 150001, 150008); /* v2: too wide for shared memory (the default) */
    }
    kern_rowkernels_set_impl(-1, -1);
    test_optimizer(&r, 300007); /* odd: the one-element AdamW kernel */
    test_optimizer(&r, 300008); /* four elements per thread */
    kern_adamw_set_impl(0);
    test_optimizer(&r, 300008); /* DROVER_ADAMW=old: one */
    kern_adamw_set_impl(-1);
    kern_blas_free(bl);
    CK(cudaDeviceSynchronize());
    printf("test_kernels: %s (%d failed)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
