/* trainer/config.c: drover-train's INI config (see config.h).  The only file that knows the
 * config keys.  Never: read anything but the config text; log above debug. */
#include "trainer/config.h"

#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ini.h"
#include "common/util.h"

#define CONFIG_MAX_BYTES (64 * 1024)

/* section, key, type, field of struct train_config, string size, min, max */
#define K(sec, key, type, field, size, lo, hi) \
    { sec, key, type, offsetof(struct train_config, field), size, lo, hi, 0, NULL, 0 }
static const struct ini_key keys[] = {
    K("model", "layers", INI_INT, model.layers, 0, 1, GPT_MAX_LAYERS),
    K("model", "heads", INI_INT, model.heads, 0, 1, GPT_MAX_DIM),
    K("model", "dim", INI_INT, model.dim, 0, 1, GPT_MAX_DIM),
    K("model", "vocab", INI_INT, model.vocab, 0, 2, GPT_MAX_VOCAB),
    K("model", "seq", INI_INT, model.seq, 0, 1, GPT_MAX_SEQ),
    K("train", "batch", INI_INT, batch, 0, 1, 1 << 16),
    K("train", "lr", INI_DOUBLE, lr, 0, 0, 10),
    K("train", "min_lr_frac", INI_DOUBLE, min_lr_frac, 0, 0, 1),
    K("train", "warmup_steps", INI_I64, warmup_steps, 0, 0, 1e15),
    K("train", "max_steps", INI_I64, max_steps, 0, 0, 1e15),
    K("train", "weight_decay", INI_DOUBLE, weight_decay, 0, 0, 10),
    K("train", "beta1", INI_DOUBLE, beta1, 0, 0, 0.999999),
    K("train", "beta2", INI_DOUBLE, beta2, 0, 0, 0.999999),
    K("train", "eps", INI_DOUBLE, eps, 0, 1e-30, 1),
    K("train", "grad_clip", INI_DOUBLE, grad_clip, 0, 0, 1e9),
    K("train", "seed", INI_U64, seed, 0, 0, 1.8e19),
    K("train", "checkpoint_every", INI_I64, checkpoint_every, 0, 0, 1e15),
    K("train", "keep_checkpoints", INI_INT, keep_checkpoints, 0, 1, 1000),
    K("train", "log_every", INI_I64, log_every, 0, 0, 1e15),
    K("train", "val_every", INI_I64, val_every, 0, 0, 1e15),
    K("train", "val_batches", INI_INT, val_batches, 0, 1, 100000),
    K("data", "train", INI_STRING, train, TRAIN_CONFIG_PATH_MAX, 0, 0),
    K("data", "val", INI_STRING, val, TRAIN_CONFIG_PATH_MAX, 0, 0),
    K("backend", "device", INI_STRING, device, 16, 0, 0),
    K("backend", "threads", INI_INT, threads, 0, 1, 256),
    K("backend", "dist_timeout", INI_DOUBLE, dist_timeout, 0, 0.1, 86400),
};

struct parse_ctx {
    struct train_config c;
    const char *name;
    char *err;
    size_t errsz;
};

void train_config_defaults(struct train_config *c)
{
    memset(c, 0, sizeof *c);
    c->model = (struct gpt_config){.layers = 2, .heads = 4, .dim = 64, .vocab = 50257, .seq = 64};
    c->batch = 8;
    c->lr = 1e-3;
    c->min_lr_frac = 0.1;
    c->warmup_steps = 10;
    c->max_steps = 0;
    c->weight_decay = 0.0;
    c->beta1 = 0.9;
    c->beta2 = 0.95;
    c->eps = 1e-8;
    c->grad_clip = 1.0;
    c->seed = 1337;
    c->checkpoint_every = 100;
    c->keep_checkpoints = 3;
    c->log_every = 10;
    c->val_every = 0;
    c->val_batches = 4;
    (void)str_copy(c->device, sizeof c->device, "cpu");
    c->threads = 1;
    c->dist_timeout = 60;
}

static bool fail(struct parse_ctx *p, int line, const char *section, const char *key,
                 const char *fmt, const char *value)
{
    char msg[160];
    snprintf(msg, sizeof msg, fmt, value);
    snprintf(p->err, p->errsz, "%s:%d: [%s] %s: %s", p->name, line, section, key, msg);
    return false; /* stops the parse: the first error is the one reported */
}

static bool on_key(void *user, const char *section, const char *name, const char *value, int line)
{
    struct parse_ctx *p = user;
    bool section_known;
    const struct ini_key *k = ini_key_find(keys, ARRAY_SIZE(keys), section, name, &section_known);
    if (!section[0])
        return fail(p, line, section, name, "key outside a section%s", "");
    if (!section_known)
        return fail(p, line, section, name, "unknown section '%s'", section);
    if (!k)
        return fail(p, line, section, name, "unknown key%s", "");
    char why[160];
    if (ini_key_set(k, &p->c, value, why, sizeof why) < 0)
        return fail(p, line, section, name, "%s", why);
    if (!strcmp(name, "device") && strcmp(value, "cpu") && strcmp(value, "cuda"))
        return fail(p, line, section, name, "'%s' is not cpu or cuda", value);
    return true;
}

int train_config_parse(const char *name, const char *text, size_t len,
                       struct train_config *ret_c, char *errbuf, size_t errsz)
{
    if (len > CONFIG_MAX_BYTES) {
        snprintf(errbuf, errsz, "%s: larger than %d bytes", name, CONFIG_MAX_BYTES);
        return -EINVAL;
    }
    if (memchr(text, '\0', len)) {
        snprintf(errbuf, errsz, "%s: contains a NUL byte", name);
        return -EINVAL;
    }
    struct parse_ctx p = {.name = name, .err = errbuf, .errsz = errsz};
    train_config_defaults(&p.c);
    static const struct ini_ops ops = {.key = on_key};
    struct ini_error e;
    /* Debian's libinih cuts lines at INI_MAX_LINE (200) bytes: common/ini.c refuses them. */
    if (ini_read(text, len, INI_MAX_LINE - 2, &ops, &p, &e) < 0) {
        if (e.kind == INI_ERR_LONG)
            snprintf(errbuf, errsz, "%s:%d: line longer than %d bytes", name, e.line, INI_MAX_LINE - 2);
        else if (ini_shape_words(e.kind))
            snprintf(errbuf, errsz, "%s:%d: %s", name, e.line, ini_shape_words(e.kind));
        else if (e.kind == INI_ERR_SYNTAX)
            snprintf(errbuf, errsz, "%s:%d: malformed line (not 'key = value' or '[section]', "
                     "or longer than 200 bytes)", name, e.line);
        return -EINVAL;
    }
    if (gpt_config_check(&p.c.model) < 0) {
        snprintf(errbuf, errsz, "%s: [model] heads (%d) must divide dim (%d)", name,
                 p.c.model.heads, p.c.model.dim);
        return -EINVAL;
    }
    if (p.c.max_steps > 0 && p.c.warmup_steps > p.c.max_steps) {
        snprintf(errbuf, errsz, "%s: [train] warmup_steps (%lld) exceeds max_steps (%lld)", name,
                 (long long)p.c.warmup_steps, (long long)p.c.max_steps);
        return -EINVAL;
    }
    if (!p.c.train[0]) {
        snprintf(errbuf, errsz, "%s: [data] train is missing (a shard path or glob, like "
                 "data/brown/train_*.bin)", name);
        return -EINVAL;
    }
    *ret_c = p.c;
    return 0;
}

int train_config_load(const char *path, struct train_config *ret_c, char *errbuf, size_t errsz)
{
    char *text;
    size_t len;
    int r = fs_read_file(path, CONFIG_MAX_BYTES, &text, &len);
    if (r < 0) {
        snprintf(errbuf, errsz, "%s: %s", path, r == -EFBIG ? "config file too large" : strerror(-r));
        return r == -ENOENT ? -ENOENT : -EINVAL;
    }
    r = train_config_parse(path, text, len, ret_c, errbuf, errsz);
    free(text);
    return r;
}

double train_lr_at(const struct train_config *c, int64_t step)
{
    if (step < c->warmup_steps)
        return c->lr * (double)(step + 1) / (double)c->warmup_steps;
    if (c->max_steps <= 0)
        return c->lr;
    double min_lr = c->lr * c->min_lr_frac;
    double span = (double)(c->max_steps - c->warmup_steps);
    double ratio = span > 0 ? (double)(step - c->warmup_steps) / span : 1.0;
    if (ratio > 1)
        ratio = 1;
    if (ratio < 0)
        ratio = 0;
    return min_lr + 0.5 * (1.0 + cos(M_PI * ratio)) * (c->lr - min_lr);
}
