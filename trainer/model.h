/* trainer/model.h: the GPT-2 model's shape (struct gpt_config), its parameter layout, the
 * initialisation and the trainer's random number generator.
 *
 * FIXED CONTRACT shared by the CPU backend, the CUDA backend and the checkpoint format: the
 * parameters are ONE contiguous fp32 array, tensors in llm.c order, each row-major (out,in) so a
 * linear layer is y = x W^T + b:
 *
 *   idx name      shape         idx name      shape
 *   0   wte       (Vp, C)       8   ln2w      (L, C)
 *   1   wpe       (T, C)        9   ln2b      (L, C)
 *   2   ln1w      (L, C)        10  fcw       (L, 4C, C)
 *   3   ln1b      (L, C)        11  fcb       (L, 4C)
 *   4   qkvw      (L, 3C, C)    12  fcprojw   (L, C, 4C)
 *   5   qkvb      (L, 3C)       13  fcprojb   (L, C)
 *   6   attprojw  (L, C, C)     14  lnfw      (C)
 *   7   attprojb  (L, C)        15  lnfb      (C)
 *
 * Vp = vocab rounded up to a multiple of 64; rows V..Vp-1 of wte are padding (initialised like
 * the others, their logits are ignored by the loss and never receive a gradient from it).
 * qkvw rows are [q(C) k(C) v(C)], heads split each of them into NH slices of C/NH.
 * Adam m and v have exactly the same layout.  This header never changes the order.
 * Never: no I/O, no allocation except in gpt_params_new-style helpers the caller frees.
 */
#ifndef DROVER_TRAINER_MODEL_H
#define DROVER_TRAINER_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GPT_VOCAB_ALIGN 64
/* Upper bounds enforced by gpt_config_check(): keep sizes well inside size_t / int math. */
#define GPT_MAX_LAYERS 256
#define GPT_MAX_DIM 16384
#define GPT_MAX_SEQ 65536
#define GPT_MAX_VOCAB 65536 /* tokens are uint16 in shards */

struct gpt_config {
    int layers;       /* L */
    int heads;        /* NH, divides dim */
    int dim;          /* C, channels */
    int vocab;        /* V, real vocabulary (loss over 0..V-1) */
    int vocab_padded; /* Vp, set by gpt_config_check() */
    int seq;          /* T, maximum (and training) sequence length */
};

enum gpt_param {
    GPT_WTE = 0, GPT_WPE, GPT_LN1W, GPT_LN1B, GPT_QKVW, GPT_QKVB, GPT_ATTPROJW, GPT_ATTPROJB,
    GPT_LN2W, GPT_LN2B, GPT_FCW, GPT_FCB, GPT_FCPROJW, GPT_FCPROJB, GPT_LNFW, GPT_LNFB,
    GPT_NPARAM_TENSORS /* 16 */
};

/* Validate the shape (all positive, heads divides dim, bounds above) and set vocab_padded.
 * Returns 0 or -EINVAL. */
int gpt_config_check(struct gpt_config *c);

/* Element counts of the 16 tensors in layout order (c must have passed gpt_config_check). */
void gpt_param_sizes(const struct gpt_config *c, size_t ret_sizes[GPT_NPARAM_TENSORS]);
/* Total element count of the parameter array (sum of gpt_param_sizes). */
size_t gpt_num_params(const struct gpt_config *c);
/* Element offset of tensor p inside the parameter array. */
size_t gpt_param_offset(const struct gpt_config *c, enum gpt_param p);
/* Name of tensor p ("wte", ...). */
const char *gpt_param_name(enum gpt_param p);
/* true for the tensors AdamW applies weight decay to: the 2-D matrices wte, wpe, qkvw,
 * attprojw, fcw, fcprojw.  Biases and LayerNorm parameters are never decayed. */
bool gpt_param_decays(enum gpt_param p);

/* 64-bit fingerprint of the shape (L, NH, C, V, T), stable across builds and machines; goes into
 * checkpoint file names as 16 hex digits so an incompatible model never resumes from them. */
uint64_t gpt_config_fingerprint(const struct gpt_config *c);

/* ---- random numbers ----
 * splitmix64 (Steele, Lea, Flood 2014): state is one uint64, advanced by 0x9E3779B97F4A7C15 per
 * draw and mixed; the whole state is struct rng.s, saved verbatim in checkpoints.  Normal draws
 * use Box-Muller on two uniforms and discard the second value (so the state alone is the state). */
struct rng {
    uint64_t s;
};
void rng_seed(struct rng *r, uint64_t seed);
uint64_t rng_next_u64(struct rng *r);
/* Uniform in [0, 1) with 24 bits. */
float rng_uniform(struct rng *r);
/* Normal(mean, std) as float. */
float rng_normal(struct rng *r, float mean, float std);

/* Initialise params[gpt_num_params(c)]: weights normal(0, 0.02), attprojw and fcprojw normal(0,
 * 0.02/sqrt(2L)), biases 0, LayerNorm weights 1.  Draws in layout order, element by element, from
 * r, so the same seed gives the same model on every backend (the CUDA backend initialises on the
 * host with this function and uploads). */
void gpt_params_init(const struct gpt_config *c, float *params, struct rng *r);

/* Training (forward+backward) FLOPs per token for MFU, the one formula (docs/cuda.md):
 * 6 * N + 6 * L * T * C, N = gpt_num_params(cfg) (tied wte counted once, wpe included), T = seq
 * (llm.c's count; causal attention's forward+backward is 6 L T C).  0 for an invalid cfg. */
double gpt_flops_per_token(const struct gpt_config *cfg, int seq);

#endif
