/* common/specdigest.c: the job spec digest (see specdigest.h).  Pure: no I/O. */
#include "common/specdigest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"

#define SPEC_MAX_HASHED_ENV 256

static const char *const field_names[SPEC_F_COUNT] = {
    [SPEC_F_JOB] = "job",
    [SPEC_F_NNODES] = "nnodes",
    [SPEC_F_NODE_RANK] = "node_rank",
    [SPEC_F_NPROC] = "nproc_per_node",
    [SPEC_F_GPUS] = "gpus",
    [SPEC_F_MASTER_ADDR] = "master_addr",
    [SPEC_F_MASTER_PORT] = "master_port",
    [SPEC_F_ENV] = "env",
    [SPEC_F_COMMAND] = "command",
    [SPEC_F_ARGS] = "arg",
};

const char *spec_field_name(enum spec_field f)
{
    return (unsigned)f < SPEC_F_COUNT ? field_names[f] : NULL;
}

/* One field's bytes go to the whole digest and to the field's own. */
struct feed {
    struct sha256_ctx *all, *one;
    int err;
};

static void feed(struct feed *f, const void *p, size_t n)
{
    if (f->err)
        return;
    int r = sha256_update(f->all, p, n);
    if (r == 0)
        r = sha256_update(f->one, p, n);
    f->err = r;
}

static void feed_num(struct feed *f, long long x, char sep)
{
    char b[32];
    int n = snprintf(b, sizeof b, "%lld%c", x, sep);
    feed(f, b, (size_t)n);
}

static void feed_str(struct feed *f, const char *s)
{
    s = s ? s : "";
    size_t n = strlen(s);
    feed_num(f, (long long)n, ':');
    feed(f, s, n);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int spec_digest_compute(const struct launch_spec *s, struct spec_digest *ret)
{
    if (s->nenv < 0 || s->nargs < 0 || s->nenv > SPEC_MAX_HASHED_ENV ||
        (s->nenv && !s->env) || (s->nargs && !s->args))
        return -EINVAL;
    const char *env[SPEC_MAX_HASHED_ENV];
    for (int i = 0; i < s->nenv; i++)
        env[i] = s->env[i] ? s->env[i] : "";
    qsort(env, (size_t)s->nenv, sizeof env[0], cmp_str); /* a set: its order is not the spec's */
    struct spec_digest d;
    memset(&d, 0, sizeof d);
    struct feed f = { .all = sha256_new() };
    if (!f.all)
        return -ENOMEM;
    static const char head[] = "drover-spec 1\n";
    int r = sha256_update(f.all, head, sizeof head - 1);
    size_t off = 0;
    for (int k = 0; r == 0 && k < SPEC_F_COUNT; k++) {
        f.one = sha256_new();
        if (!f.one) {
            r = -ENOMEM;
            break;
        }
        static const char fhead[] = "drover-spec-field 1\n";
        r = sha256_update(f.one, fhead, sizeof fhead - 1);
        f.err = r;
        feed(&f, field_names[k], strlen(field_names[k]));
        feed(&f, "=", 1);
        switch ((enum spec_field)k) {
        case SPEC_F_JOB: feed_str(&f, s->job); break;
        case SPEC_F_NNODES: feed_num(&f, s->nnodes, ';'); break;
        case SPEC_F_NODE_RANK: feed_num(&f, s->node_rank, ';'); break;
        case SPEC_F_NPROC: feed_num(&f, s->nproc_per_node, ';'); break;
        case SPEC_F_GPUS: feed_str(&f, s->gpus); break;
        case SPEC_F_MASTER_ADDR: feed_str(&f, s->master_addr); break;
        case SPEC_F_MASTER_PORT: feed_num(&f, s->master_port, ';'); break;
        case SPEC_F_ENV:
            feed_num(&f, s->nenv, '#');
            for (int i = 0; i < s->nenv; i++)
                feed_str(&f, env[i]);
            break;
        case SPEC_F_COMMAND: feed_str(&f, s->command); break;
        case SPEC_F_ARGS:
            feed_num(&f, s->nargs, '#');
            for (int i = 0; i < s->nargs; i++)
                feed_str(&f, s->args[i]);
            break;
        case SPEC_F_COUNT: break;
        }
        char hex[SHA256_HEX_LEN + 1];
        r = f.err;
        if (r == 0)
            r = sha256_final_hex(f.one, hex);
        sha256_free(f.one);
        f.one = NULL;
        if (r == 0 && sha256_update(f.all, "\n", 1) < 0)
            r = -EIO;
        if (r == 0)
            off += (size_t)snprintf(d.fields + off, sizeof d.fields - off, "%s%s:%.*s", k ? "," : "",
                                    field_names[k], SPEC_FIELD_DIGEST_LEN, hex);
    }
    if (r == 0)
        r = sha256_final_hex(f.all, d.hex);
    sha256_free(f.all);
    if (r < 0)
        return r;
    *ret = d;
    return 0;
}

static bool is_lower_hex(const char *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((t[i] >= '0' && t[i] <= '9') || (t[i] >= 'a' && t[i] <= 'f')))
            return false;
    return true;
}

bool spec_digest_is_valid(const char *t)
{
    return t && strlen(t) == SPEC_DIGEST_LEN && is_lower_hex(t, SPEC_DIGEST_LEN);
}

/* The next "name:hex" entry of a spec_fields text at *p: its name's length and start, its hex;
 * advances *p past the entry and its comma.  false at the end or on a malformed entry (*bad). */
static bool next_entry(const char **p, const char **ret_name, size_t *ret_len, const char **ret_hex,
                       bool *bad)
{
    const char *s = *p;
    if (!*s)
        return false;
    size_t n = 0;
    while ((s[n] >= 'a' && s[n] <= 'z') || s[n] == '_')
        n++;
    if (n == 0 || n > 32 || s[n] != ':' || strnlen(s + n + 1, SPEC_FIELD_DIGEST_LEN) != SPEC_FIELD_DIGEST_LEN ||
        !is_lower_hex(s + n + 1, SPEC_FIELD_DIGEST_LEN)) {
        *bad = true;
        return false;
    }
    const char *after = s + n + 1 + SPEC_FIELD_DIGEST_LEN;
    if (*after == ',') {
        after++;
        if (!*after) {
            *bad = true; /* a trailing comma */
            return false;
        }
    } else if (*after) {
        *bad = true;
        return false;
    }
    *ret_name = s;
    *ret_len = n;
    *ret_hex = s + n + 1;
    *p = after;
    return true;
}

bool spec_fields_is_valid(const char *t)
{
    if (!t || !*t || strnlen(t, SPEC_FIELDS_MAX) >= SPEC_FIELDS_MAX)
        return false;
    bool bad = false;
    const char *name, *hex;
    size_t len;
    while (next_entry(&t, &name, &len, &hex, &bad))
        ;
    return !bad;
}

/* The digest of field name (len bytes) in text; NULL when absent. */
static const char *field_in(const char *text, const char *name, size_t len)
{
    bool bad = false;
    const char *n, *hex;
    size_t l;
    while (next_entry(&text, &n, &l, &hex, &bad))
        if (l == len && !memcmp(n, name, len))
            return hex;
    return NULL;
}

int spec_fields_diff(const char *a, const char *b, char *out, size_t out_sz)
{
    if (out_sz)
        out[0] = '\0';
    if (!spec_fields_is_valid(a) || !spec_fields_is_valid(b))
        return -EINVAL;
    int n = 0;
    size_t off = 0;
    for (int pass = 0; pass < 2; pass++) {
        /* every field of a that b lacks or has another digest for; then b's fields a lacks */
        const char *t = pass ? b : a, *other = pass ? a : b;
        bool bad = false;
        const char *name, *hex;
        size_t len;
        while (next_entry(&t, &name, &len, &hex, &bad)) {
            const char *o = field_in(other, name, len);
            if (pass ? o != NULL : o && !memcmp(o, hex, SPEC_FIELD_DIGEST_LEN))
                continue;
            n++;
            if (off < out_sz)
                off += (size_t)snprintf(out + off, out_sz - off, "%s%.*s", off ? ", " : "", (int)len, name);
        }
    }
    return n;
}

bool spec_digest_matches(const char *running, const char *asked)
{
    if (!asked || !asked[0])
        return true;
    return running && !strcmp(running, asked);
}
