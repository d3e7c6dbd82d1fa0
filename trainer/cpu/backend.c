/* trainer/cpu/backend.c: the CPU backend (backend_cpu in backend.h): fp32 parameters, gradients,
 * Adam state and activations in four heap arenas; forward/backward from gpt_tmpl.h; gradient
 * averaging through trainer/dist.h; global-norm clipping and AdamW.
 * Never: touch files, heartbeats or signals; log above debug. */
#include "trainer/backend.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/cpu/ops.h"
#include "trainer/dist.h"

#define REAL float
#define OPS_FN(name) cpu_##name
#define OPS_LINKAGE static
#define GPT_FN(name) cpu_gpt_##name
#include "trainer/cpu/gpt_tmpl.h"

struct cpu_backend {
    struct gpt_config cfg;
    struct backend_opts opts;
    size_t nparams, nacts;
    float *params, *grads, *m, *v; /* nparams each */
    float *acts, *dacts;           /* nacts each */
};

static void cpu_destroy(void *p)
{
    struct cpu_backend *be = p;
    if (!be)
        return;
    free(be->params);
    free(be->grads);
    free(be->m);
    free(be->v);
    free(be->acts);
    free(be->dacts);
    free(be);
}

static int cpu_create(const struct gpt_config *cfg, const struct backend_opts *opts, void **ret_be)
{
    struct gpt_config c = *cfg;
    if (gpt_config_check(&c) < 0 || opts->batch < 1 || opts->seq < 1 || opts->seq > c.seq ||
        opts->world_size < 1 || (opts->world_size > 1 && !opts->dist))
        return -EINVAL;
    struct cpu_backend *be = calloc(1, sizeof *be);
    if (!be)
        return -ENOMEM;
    be->cfg = c;
    be->opts = *opts;
    be->nparams = gpt_num_params(&c);
    be->nacts = gpt_act_total(&c, opts->batch, opts->seq);
    be->params = calloc(be->nparams, sizeof(float));
    be->grads = calloc(be->nparams, sizeof(float));
    be->m = calloc(be->nparams, sizeof(float));
    be->v = calloc(be->nparams, sizeof(float));
    be->acts = calloc(be->nacts, sizeof(float));
    be->dacts = calloc(be->nacts, sizeof(float));
    if (!be->params || !be->grads || !be->m || !be->v || !be->acts || !be->dacts) {
        cpu_destroy(be);
        return -ENOMEM;
    }
    cpu_ops_set_threads(opts->threads);
    *ret_be = be;
    return 0;
}

static int cpu_set_state(void *p, const float *params, const float *m, const float *v)
{
    struct cpu_backend *be = p;
    size_t n = be->nparams * sizeof(float);
    memcpy(be->params, params, n);
    if (m)
        memcpy(be->m, m, n);
    else
        memset(be->m, 0, n);
    if (v)
        memcpy(be->v, v, n);
    else
        memset(be->v, 0, n);
    return 0;
}

static int cpu_get_state(void *p, float *params, float *m, float *v)
{
    struct cpu_backend *be = p;
    size_t n = be->nparams * sizeof(float);
    if (params)
        memcpy(params, be->params, n);
    if (m)
        memcpy(m, be->m, n);
    if (v)
        memcpy(v, be->v, n);
    return 0;
}

static int cpu_check_tokens(const struct cpu_backend *be, const int *inputs, const int *targets)
{
    size_t n = (size_t)be->opts.batch * be->opts.seq;
    for (size_t i = 0; i < n; i++)
        if (inputs[i] < 0 || inputs[i] >= be->cfg.vocab_padded ||
            (targets && (targets[i] < 0 || targets[i] >= be->cfg.vocab)))
            return -EINVAL;
    return 0;
}

static int cpu_forward(void *p, const int *inputs, const int *targets, float *ret_loss)
{
    struct cpu_backend *be = p;
    int r = cpu_check_tokens(be, inputs, targets);
    if (r < 0)
        return r;
    *ret_loss = cpu_gpt_forward(&be->cfg, be->params, be->acts, inputs, targets, be->opts.batch,
                                be->opts.seq);
    return 0;
}

static int cpu_forward_backward(void *p, const int *inputs, const int *targets, float *ret_loss)
{
    struct cpu_backend *be = p;
    if (!targets)
        return -EINVAL;
    float loss;
    int r = cpu_forward(be, inputs, targets, &loss);
    if (r < 0)
        return r;
    cpu_gpt_backward(&be->cfg, be->params, be->grads, be->acts, be->dacts, inputs, targets,
                     be->opts.batch, be->opts.seq);
    *ret_loss = loss;
    return 0;
}

static int cpu_allreduce_grads(void *p)
{
    struct cpu_backend *be = p;
    if (be->opts.world_size <= 1)
        return 0;
    int r = dist_allreduce_sum_f32(be->opts.dist, be->grads, be->nparams);
    if (r < 0)
        return r;
    cpu_scale(be->grads, 1.0f / (float)be->opts.world_size, be->nparams);
    return 0;
}

static int cpu_update(void *p, const struct adamw_hparams *h, float lr, int64_t t,
                      float *ret_grad_norm)
{
    struct cpu_backend *be = p;
    if (t < 1)
        return -EINVAL;
    double norm = sqrt(cpu_sumsq(be->grads, be->nparams));
    *ret_grad_norm = (float)norm;
    if (!isfinite(norm))
        return 0;
    if (h->grad_clip > 0 && norm > h->grad_clip)
        cpu_scale(be->grads, (float)(h->grad_clip / norm), be->nparams);
    size_t sizes[GPT_NPARAM_TENSORS], off = 0;
    gpt_param_sizes(&be->cfg, sizes);
    for (int i = 0; i < GPT_NPARAM_TENSORS; i++) {
        float wd = gpt_param_decays((enum gpt_param)i) ? h->weight_decay : 0.0f;
        cpu_adamw_step(be->params + off, be->grads + off, be->m + off, be->v + off, sizes[i], lr,
                       h->beta1, h->beta2, h->eps, wd, (long)t);
        off += sizes[i];
    }
    return 0;
}

static int64_t cpu_mem_peak(void *p)
{
    struct cpu_backend *be = p;
    return (int64_t)((be->nparams * 4 + be->nacts * 2) * sizeof(float));
}

const struct backend_ops backend_cpu = {
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .set_state = cpu_set_state,
    .get_state = cpu_get_state,
    .forward_backward = cpu_forward_backward,
    .forward = cpu_forward,
    .allreduce_grads = cpu_allreduce_grads,
    .update = cpu_update,
    .mem_peak = cpu_mem_peak,
};

const struct backend_ops *backend_find(const char *name)
{
    if (!strcmp(name, "cpu"))
        return &backend_cpu;
#ifdef DROVER_HAVE_CUDA
    /* weak: a tree with kernels/ but no trainer/cuda_backend.c yet still links */
    extern const struct backend_ops backend_cuda __attribute__((weak));
    if (!strcmp(name, "cuda") && &backend_cuda)
        return &backend_cuda;
#endif
    return NULL;
}
