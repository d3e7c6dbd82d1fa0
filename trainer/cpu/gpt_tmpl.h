/* trainer/cpu/gpt_tmpl.h: the GPT-2 forward and backward pass on the CPU, written once for any
 * real type, composed from the operators of ops_tmpl.h in llm.c's order.
 *
 * Include after ops_tmpl.h with REAL, OPS_FN (the ops' names), GPT_FN(name) and OPS_LINKAGE
 * defined.  trainer/cpu/backend.c instantiates it for float (cpu_gpt_*); the gradient-check unit
 * test for double.  Parameters follow trainer/model.h; activations follow enum gpt_act below, one
 * contiguous array sized by gpt_act_sizes().  Never: allocate, log.
 */
#ifndef DROVER_TRAINER_GPT_ACTS
#define DROVER_TRAINER_GPT_ACTS
#include "trainer/model.h"

enum gpt_act {
    GA_ENCODED = 0, /* (B,T,C) */
    GA_LN1,         /* (L,B,T,C) */
    GA_LN1_MEAN,    /* (L,B,T) */
    GA_LN1_RSTD,    /* (L,B,T) */
    GA_QKV,         /* (L,B,T,3C) */
    GA_ATTY,        /* (L,B,T,C) */
    GA_PREATT,      /* (L,B,NH,T,T) */
    GA_ATT,         /* (L,B,NH,T,T) */
    GA_ATTPROJ,     /* (L,B,T,C) */
    GA_RES2,        /* (L,B,T,C) */
    GA_LN2,         /* (L,B,T,C) */
    GA_LN2_MEAN,    /* (L,B,T) */
    GA_LN2_RSTD,    /* (L,B,T) */
    GA_FCH,         /* (L,B,T,4C) */
    GA_FCH_GELU,    /* (L,B,T,4C) */
    GA_FCPROJ,      /* (L,B,T,C) */
    GA_RES3,        /* (L,B,T,C) */
    GA_LNF,         /* (B,T,C) */
    GA_LNF_MEAN,    /* (B,T) */
    GA_LNF_RSTD,    /* (B,T) */
    GA_LOGITS,      /* (B,T,Vp) */
    GA_PROBS,       /* (B,T,Vp) */
    GA_LOSSES,      /* (B,T) */
    GA_N
};

/* Element counts of the activations for micro-batch B and sequence T (T <= c->seq). */
static inline void gpt_act_sizes(const struct gpt_config *c, int B, int T, size_t s[GA_N])
{
    size_t L = (size_t)c->layers, C = (size_t)c->dim, NH = (size_t)c->heads;
    size_t BT = (size_t)B * (size_t)T;
    s[GA_ENCODED] = BT * C;
    s[GA_LN1] = L * BT * C;
    s[GA_LN1_MEAN] = L * BT;
    s[GA_LN1_RSTD] = L * BT;
    s[GA_QKV] = L * BT * 3 * C;
    s[GA_ATTY] = L * BT * C;
    s[GA_PREATT] = L * BT * NH * (size_t)T;
    s[GA_ATT] = L * BT * NH * (size_t)T;
    s[GA_ATTPROJ] = L * BT * C;
    s[GA_RES2] = L * BT * C;
    s[GA_LN2] = L * BT * C;
    s[GA_LN2_MEAN] = L * BT;
    s[GA_LN2_RSTD] = L * BT;
    s[GA_FCH] = L * BT * 4 * C;
    s[GA_FCH_GELU] = L * BT * 4 * C;
    s[GA_FCPROJ] = L * BT * C;
    s[GA_RES3] = L * BT * C;
    s[GA_LNF] = BT * C;
    s[GA_LNF_MEAN] = BT;
    s[GA_LNF_RSTD] = BT;
    s[GA_LOGITS] = BT * (size_t)c->vocab_padded;
    s[GA_PROBS] = BT * (size_t)c->vocab_padded;
    s[GA_LOSSES] = BT;
}

static inline size_t gpt_act_total(const struct gpt_config *c, int B, int T)
{
    size_t s[GA_N], n = 0;
    gpt_act_sizes(c, B, T, s);
    for (int i = 0; i < GA_N; i++)
        n += s[i];
    return n;
}
#endif /* DROVER_TRAINER_GPT_ACTS */

static void GPT_FN(point_params)(const struct gpt_config *c, REAL *base, REAL *p[GPT_NPARAM_TENSORS])
{
    size_t s[GPT_NPARAM_TENSORS];
    gpt_param_sizes(c, s);
    for (int i = 0; i < GPT_NPARAM_TENSORS; i++) {
        p[i] = base;
        base += s[i];
    }
}

static void GPT_FN(point_acts)(const struct gpt_config *c, int B, int T, REAL *base, REAL *a[GA_N])
{
    size_t s[GA_N];
    gpt_act_sizes(c, B, T, s);
    for (int i = 0; i < GA_N; i++) {
        a[i] = base;
        base += s[i];
    }
}

/* Forward pass.  params: gpt_num_params(c); acts: gpt_act_total(c,B,T) scratch, filled.
 * inputs (B,T) < Vp; targets (B,T) < V or NULL (then returns 0 and no loss is computed).
 * Returns the mean loss over B*T. */
OPS_LINKAGE REAL GPT_FN(forward)(const struct gpt_config *c, const REAL *params, REAL *acts,
                                 const int *inputs, const int *targets, int B, int T)
{
    REAL *p[GPT_NPARAM_TENSORS], *a[GA_N];
    GPT_FN(point_params)(c, (REAL *)params, p);
    GPT_FN(point_acts)(c, B, T, acts, a);
    int L = c->layers, C = c->dim, NH = c->heads, V = c->vocab, Vp = c->vocab_padded;
    size_t BT = (size_t)B * T, BTC = BT * C, attsz = BT * NH * (size_t)T;

    OPS_FN(encoder_forward)(a[GA_ENCODED], inputs, p[GPT_WTE], p[GPT_WPE], B, T, C);
    for (int l = 0; l < L; l++) {
        const REAL *res = l == 0 ? a[GA_ENCODED] : a[GA_RES3] + (size_t)(l - 1) * BTC;
        REAL *ln1 = a[GA_LN1] + l * BTC, *ln1m = a[GA_LN1_MEAN] + l * BT, *ln1r = a[GA_LN1_RSTD] + l * BT;
        REAL *qkv = a[GA_QKV] + l * BTC * 3, *atty = a[GA_ATTY] + l * BTC;
        REAL *preatt = a[GA_PREATT] + l * attsz, *att = a[GA_ATT] + l * attsz;
        REAL *attproj = a[GA_ATTPROJ] + l * BTC, *res2 = a[GA_RES2] + l * BTC;
        REAL *ln2 = a[GA_LN2] + l * BTC, *ln2m = a[GA_LN2_MEAN] + l * BT, *ln2r = a[GA_LN2_RSTD] + l * BT;
        REAL *fch = a[GA_FCH] + l * BTC * 4, *fchg = a[GA_FCH_GELU] + l * BTC * 4;
        REAL *fcproj = a[GA_FCPROJ] + l * BTC, *res3 = a[GA_RES3] + l * BTC;
        size_t lC = (size_t)l * C;

        OPS_FN(layernorm_forward)(ln1, ln1m, ln1r, res, p[GPT_LN1W] + lC, p[GPT_LN1B] + lC, B, T, C);
        OPS_FN(matmul_forward)(qkv, ln1, p[GPT_QKVW] + lC * 3 * C, p[GPT_QKVB] + lC * 3, B, T, C, 3 * C);
        OPS_FN(attention_forward)(atty, preatt, att, qkv, B, T, C, NH);
        OPS_FN(matmul_forward)(attproj, atty, p[GPT_ATTPROJW] + lC * C, p[GPT_ATTPROJB] + lC, B, T, C, C);
        OPS_FN(residual_forward)(res2, res, attproj, BTC);
        OPS_FN(layernorm_forward)(ln2, ln2m, ln2r, res2, p[GPT_LN2W] + lC, p[GPT_LN2B] + lC, B, T, C);
        OPS_FN(matmul_forward)(fch, ln2, p[GPT_FCW] + lC * 4 * C, p[GPT_FCB] + lC * 4, B, T, C, 4 * C);
        OPS_FN(gelu_forward)(fchg, fch, BTC * 4);
        OPS_FN(matmul_forward)(fcproj, fchg, p[GPT_FCPROJW] + lC * 4 * C, p[GPT_FCPROJB] + lC, B, T, 4 * C, C);
        OPS_FN(residual_forward)(res3, res2, fcproj, BTC);
    }
    const REAL *res = a[GA_RES3] + (size_t)(L - 1) * BTC;
    OPS_FN(layernorm_forward)(a[GA_LNF], a[GA_LNF_MEAN], a[GA_LNF_RSTD], res, p[GPT_LNFW], p[GPT_LNFB], B, T, C);
    OPS_FN(matmul_forward)(a[GA_LOGITS], a[GA_LNF], p[GPT_WTE], NULL, B, T, C, Vp);
    OPS_FN(softmax_forward)(a[GA_PROBS], a[GA_LOGITS], B, T, V, Vp);
    if (!targets)
        return 0;
    OPS_FN(crossentropy_forward)(a[GA_LOSSES], a[GA_PROBS], targets, B, T, Vp);
    REAL sum = 0;
    for (size_t i = 0; i < BT; i++)
        sum += a[GA_LOSSES][i];
    return sum / (REAL)BT;
}

/* Backward pass after forward() with the same inputs and targets.  grads (gpt_num_params) and
 * dacts (gpt_act_total) are zeroed here and then filled with d(mean loss)/d(param). */
OPS_LINKAGE void GPT_FN(backward)(const struct gpt_config *c, const REAL *params, REAL *grads,
                                  const REAL *acts, REAL *dacts, const int *inputs,
                                  const int *targets, int B, int T)
{
    REAL *p[GPT_NPARAM_TENSORS], *g[GPT_NPARAM_TENSORS], *a[GA_N], *d[GA_N];
    memset(grads, 0, gpt_num_params(c) * sizeof(REAL));
    memset(dacts, 0, gpt_act_total(c, B, T) * sizeof(REAL));
    GPT_FN(point_params)(c, (REAL *)params, p);
    GPT_FN(point_params)(c, grads, g);
    GPT_FN(point_acts)(c, B, T, (REAL *)acts, a);
    GPT_FN(point_acts)(c, B, T, dacts, d);
    int L = c->layers, C = c->dim, NH = c->heads, V = c->vocab, Vp = c->vocab_padded;
    size_t BT = (size_t)B * T, BTC = BT * C, attsz = BT * NH * (size_t)T;

    REAL dl = (REAL)1 / (REAL)BT;
    for (size_t i = 0; i < BT; i++)
        d[GA_LOSSES][i] = dl;
    OPS_FN(crossentropy_softmax_backward)(d[GA_LOGITS], d[GA_LOSSES], a[GA_PROBS], targets, B, T, V, Vp);
    OPS_FN(matmul_backward)(d[GA_LNF], g[GPT_WTE], NULL, d[GA_LOGITS], a[GA_LNF], p[GPT_WTE], B, T, C, Vp);
    const REAL *res = a[GA_RES3] + (size_t)(L - 1) * BTC;
    REAL *dres = d[GA_RES3] + (size_t)(L - 1) * BTC;
    OPS_FN(layernorm_backward)(dres, g[GPT_LNFW], g[GPT_LNFB], d[GA_LNF], res, p[GPT_LNFW], a[GA_LNF_MEAN], a[GA_LNF_RSTD], B, T, C);

    for (int l = L - 1; l >= 0; l--) {
        res = l == 0 ? a[GA_ENCODED] : a[GA_RES3] + (size_t)(l - 1) * BTC;
        dres = l == 0 ? d[GA_ENCODED] : d[GA_RES3] + (size_t)(l - 1) * BTC;
        size_t lC = (size_t)l * C;
        const REAL *ln1 = a[GA_LN1] + l * BTC, *ln1m = a[GA_LN1_MEAN] + l * BT, *ln1r = a[GA_LN1_RSTD] + l * BT;
        const REAL *qkv = a[GA_QKV] + l * BTC * 3, *atty = a[GA_ATTY] + l * BTC, *att = a[GA_ATT] + l * attsz;
        const REAL *res2 = a[GA_RES2] + l * BTC;
        const REAL *ln2 = a[GA_LN2] + l * BTC, *ln2m = a[GA_LN2_MEAN] + l * BT, *ln2r = a[GA_LN2_RSTD] + l * BT;
        const REAL *fch = a[GA_FCH] + l * BTC * 4, *fchg = a[GA_FCH_GELU] + l * BTC * 4;
        REAL *dln1 = d[GA_LN1] + l * BTC, *dqkv = d[GA_QKV] + l * BTC * 3, *datty = d[GA_ATTY] + l * BTC;
        REAL *dpreatt = d[GA_PREATT] + l * attsz, *datt = d[GA_ATT] + l * attsz;
        REAL *dattproj = d[GA_ATTPROJ] + l * BTC, *dres2 = d[GA_RES2] + l * BTC, *dln2 = d[GA_LN2] + l * BTC;
        REAL *dfch = d[GA_FCH] + l * BTC * 4, *dfchg = d[GA_FCH_GELU] + l * BTC * 4;
        REAL *dfcproj = d[GA_FCPROJ] + l * BTC, *dres3 = d[GA_RES3] + l * BTC;

        OPS_FN(residual_backward)(dres2, dfcproj, dres3, BTC);
        OPS_FN(matmul_backward)(dfchg, g[GPT_FCPROJW] + lC * 4 * C, g[GPT_FCPROJB] + lC, dfcproj, fchg, p[GPT_FCPROJW] + lC * 4 * C, B, T, 4 * C, C);
        OPS_FN(gelu_backward)(dfch, fch, dfchg, BTC * 4);
        OPS_FN(matmul_backward)(dln2, g[GPT_FCW] + lC * 4 * C, g[GPT_FCB] + lC * 4, dfch, ln2, p[GPT_FCW] + lC * 4 * C, B, T, C, 4 * C);
        OPS_FN(layernorm_backward)(dres2, g[GPT_LN2W] + lC, g[GPT_LN2B] + lC, dln2, res2, p[GPT_LN2W] + lC, ln2m, ln2r, B, T, C);
        OPS_FN(residual_backward)(dres, dattproj, dres2, BTC);
        OPS_FN(matmul_backward)(datty, g[GPT_ATTPROJW] + lC * C, g[GPT_ATTPROJB] + lC, dattproj, atty, p[GPT_ATTPROJW] + lC * C, B, T, C, C);
        OPS_FN(attention_backward)(dqkv, dpreatt, datt, datty, qkv, att, B, T, C, NH);
        OPS_FN(matmul_backward)(dln1, g[GPT_QKVW] + lC * 3 * C, g[GPT_QKVB] + lC * 3, dqkv, ln1, p[GPT_QKVW] + lC * 3 * C, B, T, C, 3 * C);
        OPS_FN(layernorm_backward)(dres, g[GPT_LN1W] + lC, g[GPT_LN1B] + lC, dln1, res, p[GPT_LN1W] + lC, ln1m, ln1r, B, T, C);
    }
    OPS_FN(encoder_backward)(g[GPT_WTE], g[GPT_WPE], d[GA_ENCODED], inputs, B, T, C);
}
