/* trainer/backend.h: the seam between the shared training loop and a compute backend.
 *
 * Shared (trainer/train.c and friends): config, data loader, LR schedule, checkpoints, heartbeat,
 * signals, fault knobs, the CPU TCP gradient allreduce (trainer/dist.h).  Backend-specific (this
 * table): forward+backward on one micro-batch, gradient averaging over ranks, gradient clipping +
 * AdamW update, and reading/writing the fp32 master parameters and Adam state in the layout of
 * trainer/model.h.  A backend never touches files, heartbeats or signals.
 *
 * Backends: backend_cpu (trainer/cpu/backend.c, always built) and backend_cuda
 * (trainer/cuda_backend.c, built when DROVER_HAVE_CUDA is defined).
 * Error convention: int >= 0 ok, -errno on failure (-ENOMEM, -EINVAL, -EIO for a device error,
 * -ETIMEDOUT / -ECONNRESET when a peer is lost during an allreduce).  A backend may log at debug;
 * CUDA/NCCL/cuBLAS check macros may exit with a code from docs/errors.md (STYLE.md allows it).
 */
#ifndef DROVER_TRAINER_BACKEND_H
#define DROVER_TRAINER_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/model.h"

struct dist; /* trainer/dist.h: TCP rendezvous/allreduce between ranks; NULL when world_size 1 */

struct backend_opts {
    int batch;       /* B, micro-batch per rank */
    int seq;         /* T used for training (== cfg->seq) */
    int threads;     /* CPU threads for matmuls (cpu backend) */
    int rank;        /* RANK */
    int world_size;  /* WORLD_SIZE */
    int local_rank;  /* LOCAL_RANK: device index for the cuda backend */
    struct dist *dist; /* borrowed; NULL when world_size == 1.  The CUDA backend may use
                          dist_broadcast() to share its ncclUniqueId from rank 0. */
};

struct adamw_hparams {
    float beta1, beta2, eps;
    float weight_decay; /* applied only where gpt_param_decays() */
    float grad_clip;    /* clip the global L2 norm of the averaged gradient to this; <= 0: off */
};

struct backend_ops {
    const char *name; /* "cpu" or "cuda": heartbeat "backend" and checkpoint backend field */

    /* Allocate everything for cfg (checked) and opts (copied); parameters and Adam state are
     * zero until set_state().  *ret_be is the backend's handle, freed with destroy(). */
    int (*create)(const struct gpt_config *cfg, const struct backend_opts *opts, void **ret_be);
    /* Accepts NULL. */
    void (*destroy)(void *be);

    /* Load fp32 master params and Adam m, v (each gpt_num_params() floats, model.h layout).  m
     * and v may be NULL: zero them.  Host pointers, copied. */
    int (*set_state)(void *be, const float *params, const float *m, const float *v);
    /* Copy the state out to host arrays of gpt_num_params() floats (m, v may be NULL). */
    int (*get_state)(void *be, float *params, float *m, float *v);

    /* Forward and backward on one micro-batch: inputs, targets (B,T) token ids (inputs < Vp,
     * targets < V).  Gradients are overwritten (not accumulated across calls).  *ret_loss is the
     * mean cross-entropy over B*T (may be non-finite: the caller decides). */
    int (*forward_backward)(void *be, const int *inputs, const int *targets, float *ret_loss);

    /* Loss only, no gradients (validation, selftest).  May be NULL. */
    int (*forward)(void *be, const int *inputs, const int *targets, float *ret_loss);

    /* Average the gradients over all ranks (sum / world_size); no-op when world_size == 1.
     * The cpu backend uses dist_allreduce_sum_f32; cuda uses NCCL. */
    int (*allreduce_grads)(void *be);

    /* Global L2 norm of the (averaged) gradient -> *ret_grad_norm.  If it is not finite, leave
     * the parameters and Adam state untouched and return 0 (the caller counts a non-finite step).
     * Otherwise clip to h->grad_clip and apply one AdamW step with learning rate lr and 1-based
     * step count t (bias correction). */
    int (*update)(void *be, const struct adamw_hparams *h, float lr, int64_t t,
                  float *ret_grad_norm);

    /* Optional extras for heartbeats; may be NULL.  Peak device memory bytes, -1 unknown. */
    int64_t (*mem_peak)(void *be);
    /* The device's peak FLOP/s, the MFU denominator (with gpt_flops_per_token()); NULL for a
     * backend that reports no MFU (cpu).  A backend with it also reports mem_peak in heartbeats. */
    double (*peak_flops)(void *be);
};

extern const struct backend_ops backend_cpu;
#ifdef DROVER_HAVE_CUDA
extern const struct backend_ops backend_cuda;
#endif

/* The backend called name ("cpu", "cuda"), or NULL when unknown or not built in. */
const struct backend_ops *backend_find(const char *name);

#endif
