/* trainer/model.c: the parameter layout arithmetic, the shape fingerprint, splitmix64 and the
 * initialisation (see model.h).  Owns no memory.  Never: I/O, logging above debug. */
#include "trainer/model.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static const char *const param_names[GPT_NPARAM_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb",
};

int gpt_config_check(struct gpt_config *c)
{
    if (c->layers < 1 || c->layers > GPT_MAX_LAYERS || c->dim < 1 || c->dim > GPT_MAX_DIM ||
        c->heads < 1 || c->dim % c->heads || c->seq < 1 || c->seq > GPT_MAX_SEQ || c->vocab < 2 ||
        c->vocab > GPT_MAX_VOCAB)
        return -EINVAL;
    c->vocab_padded = (c->vocab + GPT_VOCAB_ALIGN - 1) / GPT_VOCAB_ALIGN * GPT_VOCAB_ALIGN;
    return 0;
}

void gpt_param_sizes(const struct gpt_config *c, size_t s[GPT_NPARAM_TENSORS])
{
    size_t L = (size_t)c->layers, C = (size_t)c->dim;
    s[GPT_WTE] = (size_t)c->vocab_padded * C;
    s[GPT_WPE] = (size_t)c->seq * C;
    s[GPT_LN1W] = L * C;
    s[GPT_LN1B] = L * C;
    s[GPT_QKVW] = L * 3 * C * C;
    s[GPT_QKVB] = L * 3 * C;
    s[GPT_ATTPROJW] = L * C * C;
    s[GPT_ATTPROJB] = L * C;
    s[GPT_LN2W] = L * C;
    s[GPT_LN2B] = L * C;
    s[GPT_FCW] = L * 4 * C * C;
    s[GPT_FCB] = L * 4 * C;
    s[GPT_FCPROJW] = L * C * 4 * C;
    s[GPT_FCPROJB] = L * C;
    s[GPT_LNFW] = C;
    s[GPT_LNFB] = C;
}

size_t gpt_num_params(const struct gpt_config *c)
{
    size_t s[GPT_NPARAM_TENSORS], n = 0;
    gpt_param_sizes(c, s);
    for (int i = 0; i < GPT_NPARAM_TENSORS; i++)
        n += s[i];
    return n;
}

size_t gpt_param_offset(const struct gpt_config *c, enum gpt_param p)
{
    size_t s[GPT_NPARAM_TENSORS], off = 0;
    gpt_param_sizes(c, s);
    for (int i = 0; i < (int)p && i < GPT_NPARAM_TENSORS; i++)
        off += s[i];
    return off;
}

const char *gpt_param_name(enum gpt_param p)
{
    return (unsigned)p < GPT_NPARAM_TENSORS ? param_names[p] : "?";
}

bool gpt_param_decays(enum gpt_param p)
{
    return p == GPT_WTE || p == GPT_WPE || p == GPT_QKVW || p == GPT_ATTPROJW || p == GPT_FCW ||
           p == GPT_FCPROJW;
}

/* FNV-1a 64 over the five shape numbers as little-endian int32, independent of struct padding. */
uint64_t gpt_config_fingerprint(const struct gpt_config *c)
{
    int32_t v[5] = {c->layers, c->heads, c->dim, c->vocab, c->seq};
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < 4; k++) {
            h ^= (uint8_t)((uint32_t)v[i] >> (8 * k));
            h *= 0x100000001b3ULL;
        }
    return h;
}

void rng_seed(struct rng *r, uint64_t seed)
{
    r->s = seed;
}

uint64_t rng_next_u64(struct rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

float rng_uniform(struct rng *r)
{
    return (float)(rng_next_u64(r) >> 40) / 16777216.0f;
}

float rng_normal(struct rng *r, float mean, float std)
{
    double u1 = ((double)(rng_next_u64(r) >> 11) + 1.0) / 9007199254740993.0; /* (0,1] */
    double u2 = (double)(rng_next_u64(r) >> 11) / 9007199254740992.0;
    double z = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
    return (float)(mean + std * z);
}

void gpt_params_init(const struct gpt_config *c, float *params, struct rng *r)
{
    size_t s[GPT_NPARAM_TENSORS];
    gpt_param_sizes(c, s);
    float proj_std = 0.02f / sqrtf(2.0f * (float)c->layers);
    float *p = params;
    for (int t = 0; t < GPT_NPARAM_TENSORS; t++) {
        bool is_ln_w = t == GPT_LN1W || t == GPT_LN2W || t == GPT_LNFW;
        bool is_bias = t == GPT_LN1B || t == GPT_LN2B || t == GPT_LNFB || t == GPT_QKVB ||
                       t == GPT_ATTPROJB || t == GPT_FCB || t == GPT_FCPROJB;
        float std = (t == GPT_ATTPROJW || t == GPT_FCPROJW) ? proj_std : 0.02f;
        for (size_t i = 0; i < s[t]; i++)
            p[i] = is_ln_w ? 1.0f : is_bias ? 0.0f : rng_normal(r, 0.0f, std);
        p += s[t];
    }
}

double gpt_flops_per_token(const struct gpt_config *cfg, int seq)
{
    struct gpt_config c = *cfg;
    if (gpt_config_check(&c) < 0)
        return 0;
    /* forward+backward: 6 FLOPs per parameter per token (wte once, wpe included: llm.c's and
     * bench/torch_gpt2.py's count) plus causal attention's 6*L*T*C */
    return 6.0 * (double)gpt_num_params(&c) + 6.0 * c.layers * (double)seq * c.dim;
}
