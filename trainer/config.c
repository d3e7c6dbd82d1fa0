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

#include "common/util.h"

#define CONFIG_MAX_BYTES (64 * 1024)

enum ktype { K_INT, K_I64, K_U64, K_DBL, K_STR };

struct key {
    const char *section, *name;
    enum ktype type;
    size_t off, size; /* size: string buffer size */
    double min, max;  /* numeric bounds, inclusive */
};

#define OFF(f) offsetof(struct train_config, f)
static const struct key keys[] = {
    {"model", "layers", K_INT, OFF(model.layers), 0, 1, GPT_MAX_LAYERS},
    {"model", "heads", K_INT, OFF(model.heads), 0, 1, GPT_MAX_DIM},
    {"model", "dim", K_INT, OFF(model.dim), 0, 1, GPT_MAX_DIM},
    {"model", "vocab", K_INT, OFF(model.vocab), 0, 2, GPT_MAX_VOCAB},
    {"model", "seq", K_INT, OFF(model.seq), 0, 1, GPT_MAX_SEQ},
    {"train", "batch", K_INT, OFF(batch), 0, 1, 1 << 16},
    {"train", "lr", K_DBL, OFF(lr), 0, 0, 10},
    {"train", "min_lr_frac", K_DBL, OFF(min_lr_frac), 0, 0, 1},
    {"train", "warmup_steps", K_I64, OFF(warmup_steps), 0, 0, 1e15},
    {"train", "max_steps", K_I64, OFF(max_steps), 0, 0, 1e15},
    {"train", "weight_decay", K_DBL, OFF(weight_decay), 0, 0, 10},
    {"train", "beta1", K_DBL, OFF(beta1), 0, 0, 0.999999},
    {"train", "beta2", K_DBL, OFF(beta2), 0, 0, 0.999999},
    {"train", "eps", K_DBL, OFF(eps), 0, 1e-30, 1},
    {"train", "grad_clip", K_DBL, OFF(grad_clip), 0, 0, 1e9},
    {"train", "seed", K_U64, OFF(seed), 0, 0, 1.8e19},
    {"train", "checkpoint_every", K_I64, OFF(checkpoint_every), 0, 0, 1e15},
    {"train", "keep_checkpoints", K_INT, OFF(keep_checkpoints), 0, 1, 1000},
    {"train", "log_every", K_I64, OFF(log_every), 0, 0, 1e15},
    {"train", "val_every", K_I64, OFF(val_every), 0, 0, 1e15},
    {"train", "val_batches", K_INT, OFF(val_batches), 0, 1, 100000},
    {"data", "train", K_STR, OFF(train), TRAIN_CONFIG_PATH_MAX, 0, 0},
    {"data", "val", K_STR, OFF(val), TRAIN_CONFIG_PATH_MAX, 0, 0},
    {"backend", "device", K_STR, OFF(device), 16, 0, 0},
    {"backend", "threads", K_INT, OFF(threads), 0, 1, 256},
    {"backend", "dist_timeout", K_DBL, OFF(dist_timeout), 0, 0.1, 86400},
};

struct parse_ctx {
    struct train_config c;
    const char *name;
    const char *pos; /* reader position in the text */
    int line;        /* 1-based number of the line the reader handed out last */
    char *err;
    size_t errsz;
    bool failed;
    int fail_line;
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

static int fail(struct parse_ctx *p, int line, const char *section, const char *key,
                const char *fmt, const char *value)
{
    if (!p->failed) {
        char msg[160];
        snprintf(msg, sizeof msg, fmt, value);
        snprintf(p->err, p->errsz, "%s:%d: [%s] %s: %s", p->name, line, section, key, msg);
        p->failed = true;
        p->fail_line = line;
    }
    return 0; /* makes ini_parse report this line */
}

/* ini_reader over the NUL-terminated text: one line per call, counting lines, because Debian's
 * libinih has no line numbers in the handler. */
static char *reader(char *str, int num, void *stream)
{
    struct parse_ctx *p = stream;
    if (!*p->pos || num < 2)
        return NULL;
    const char *nl = strchr(p->pos, '\n');
    size_t n = nl ? (size_t)(nl - p->pos) + 1 : strlen(p->pos);
    if (n > (size_t)num - 1)
        n = (size_t)num - 1; /* cannot happen: lines were length-checked */
    memcpy(str, p->pos, n);
    str[n] = '\0';
    p->pos += n;
    p->line++;
    return str;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
    struct parse_ctx *p = user;
    int line = p->line;
    if (p->failed)
        return 0;
    const struct key *k = NULL;
    bool section_known = false;
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
        if (strcmp(keys[i].section, section))
            continue;
        section_known = true;
        if (!strcmp(keys[i].name, name))
            k = &keys[i];
    }
    if (!section[0])
        return fail(p, line, section, name, "key outside a section%s", "");
    if (!section_known)
        return fail(p, line, section, name, "unknown section '%s'", section);
    if (!k)
        return fail(p, line, section, name, "unknown key%s", "");
    char *dst = (char *)&p->c + k->off;
    char *end = NULL;
    errno = 0;
    switch (k->type) {
    case K_STR:
        if (!value[0])
            return fail(p, line, section, name, "empty value%s", "");
        if (str_copy(dst, k->size, value) < 0)
            return fail(p, line, section, name, "value too long: '%.60s'", value);
        if (!strcmp(name, "device") && strcmp(value, "cpu") && strcmp(value, "cuda"))
            return fail(p, line, section, name, "'%s' is not cpu or cuda", value);
        return 1;
    case K_DBL: {
        double v = strtod(value, &end);
        if (end == value || *end || errno || !isfinite(v))
            return fail(p, line, section, name, "'%s' is not a number", value);
        if (v < k->min || v > k->max)
            return fail(p, line, section, name, "'%s' is out of range", value);
        *(double *)dst = v;
        return 1;
    }
    case K_INT:
    case K_I64:
    case K_U64: {
        if (value[0] == '-' && k->type == K_U64)
            return fail(p, line, section, name, "'%s' is not a non-negative integer", value);
        unsigned long long u = 0;
        long long s = 0;
        if (k->type == K_U64)
            u = strtoull(value, &end, 10);
        else
            s = strtoll(value, &end, 10);
        if (end == value || *end || errno)
            return fail(p, line, section, name, "'%s' is not an integer", value);
        if (k->type != K_U64 && ((double)s < k->min || (double)s > k->max))
            return fail(p, line, section, name, "'%s' is out of range", value);
        if (k->type == K_INT)
            *(int *)dst = (int)s;
        else if (k->type == K_I64)
            *(int64_t *)dst = s;
        else
            *(uint64_t *)dst = u;
        return 1;
    }
    }
    return 0;
}

int train_config_parse(const char *name, const char *text, size_t len,
                       struct train_config *ret_c, char *errbuf, size_t errsz)
{
    if (len > CONFIG_MAX_BYTES) {
        snprintf(errbuf, errsz, "%s: larger than %d bytes", name, CONFIG_MAX_BYTES);
        return -EINVAL;
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, text, len);
    copy[len] = '\0';
    if (strlen(copy) != len) {
        free(copy);
        snprintf(errbuf, errsz, "%s: contains a NUL byte", name);
        return -EINVAL;
    }
    /* Debian's libinih cuts lines at INI_MAX_LINE (200) bytes: refuse them ourselves first. */
    int lineno = 1;
    for (const char *l = copy; *l; lineno++) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        if (n + 2 > INI_MAX_LINE) {
            snprintf(errbuf, errsz, "%s:%d: line longer than %d bytes", name, lineno, INI_MAX_LINE - 2);
            free(copy);
            return -EINVAL;
        }
        l += nl ? n + 1 : n;
    }
    struct parse_ctx p = {.name = name, .err = errbuf, .errsz = errsz, .pos = copy};
    train_config_defaults(&p.c);
    int r = ini_parse_stream(reader, &p, handler, &p);
    free(copy);
    if (r != 0) {
        if (!p.failed || (r > 0 && r < p.fail_line))
            snprintf(errbuf, errsz, "%s:%d: malformed line (not 'key = value' or '[section]', "
                     "or longer than 200 bytes)", name, r);
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
