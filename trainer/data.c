/* trainer/data.c: llm.c token shards and the batch loader (see data.h).  The only file that knows
 * the shard format.  Owns the open shard fd.  Never: log above debug; read past a validated size. */
#include "trainer/data.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

struct shard {
    char *path;
    int64_t ntokens;
};

struct loader {
    struct shard *shards;
    int nshards;
    int B, T, rank, world;
    struct data_pos pos;
    int fd;          /* open shard, or -1 */
    int64_t fd_shard;
    uint16_t *buf;   /* B*T+1 */
};

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int shard_header_parse(const void *buf, size_t len, uint64_t file_size, int64_t *ret_ntokens)
{
    const uint8_t *h = buf;
    if (len < SHARD_HEADER_BYTES)
        return -EINVAL;
    if (le32(h) != SHARD_MAGIC)
        return -EINVAL;
    if (le32(h + 4) != SHARD_VERSION)
        return -EPROTONOSUPPORT;
    int64_t n = (int32_t)le32(h + 8);
    if (n <= 0 || n > SHARD_MAX_TOKENS)
        return -EINVAL;
    if (file_size && file_size != SHARD_HEADER_BYTES + 2 * (uint64_t)n)
        return -EINVAL;
    *ret_ntokens = n;
    return 0;
}

int shard_write(const char *path, const uint16_t *tokens, size_t n)
{
    if (n == 0 || n > INT32_MAX)
        return -EINVAL;
    size_t sz = SHARD_HEADER_BYTES + 2 * n;
    uint8_t *b = calloc(1, sz);
    if (!b)
        return -ENOMEM;
    uint32_t hdr[3] = {SHARD_MAGIC, SHARD_VERSION, (uint32_t)n};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++)
            b[i * 4 + k] = (uint8_t)(hdr[i] >> (8 * k));
    for (size_t i = 0; i < n; i++) {
        b[SHARD_HEADER_BYTES + 2 * i] = (uint8_t)tokens[i];
        b[SHARD_HEADER_BYTES + 2 * i + 1] = (uint8_t)(tokens[i] >> 8);
    }
    int r = fs_write_atomic(path, b, sz, 0644);
    free(b);
    return r;
}

void loader_free(struct loader *l)
{
    if (!l)
        return;
    for (int i = 0; i < l->nshards; i++)
        free(l->shards[i].path);
    free(l->shards);
    if (l->fd >= 0)
        close(l->fd);
    free(l->buf);
    free(l);
}

static int read_header(const char *path, int64_t *ret_ntokens)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    uint8_t h[SHARD_HEADER_BYTES];
    int r = 0;
    if (fstat(fd, &st) < 0)
        r = -errno;
    else if (!S_ISREG(st.st_mode))
        r = -EINVAL;
    else if (pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h)
        r = -EINVAL;
    else
        r = shard_header_parse(h, sizeof h, (uint64_t)st.st_size, ret_ntokens);
    close(fd);
    return r;
}

int loader_open(const char *pattern, int B, int T, int rank, int world, struct loader **ret_l,
                char *errbuf, size_t errsz)
{
    if (B < 1 || T < 1 || world < 1 || rank < 0 || rank >= world || !pattern || !pattern[0]) {
        snprintf(errbuf, errsz, "bad loader arguments");
        return -EINVAL;
    }
    glob_t g;
    int gr = glob(pattern, GLOB_ERR, NULL, &g);
    if (gr == GLOB_NOMATCH || (gr == 0 && g.gl_pathc == 0)) {
        if (gr == 0)
            globfree(&g);
        snprintf(errbuf, errsz, "no data shard at '%s'", pattern);
        return -ENOENT;
    }
    if (gr != 0) {
        snprintf(errbuf, errsz, "cannot list data shards '%s': %s", pattern,
                 gr == GLOB_NOSPACE ? "out of memory"
                                    : "a directory in the path is missing or unreadable");
        return gr == GLOB_NOSPACE ? -ENOMEM : -EIO;
    }
    int r = 0;
    struct loader *l = calloc(1, sizeof *l);
    if (!l) {
        globfree(&g);
        return -ENOMEM;
    }
    l->fd = -1;
    l->fd_shard = -1;
    l->B = B;
    l->T = T;
    l->rank = rank;
    l->world = world;
    if (g.gl_pathc > LOADER_MAX_SHARDS) {
        snprintf(errbuf, errsz, "more than %d shards match '%s'", LOADER_MAX_SHARDS, pattern);
        r = -E2BIG;
        goto fail;
    }
    l->shards = calloc(g.gl_pathc, sizeof *l->shards);
    l->buf = malloc(((size_t)B * T + 1) * sizeof(uint16_t));
    if (!l->shards || !l->buf) {
        r = -ENOMEM;
        goto fail;
    }
    int64_t need = (int64_t)world * B * T + 1;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char *p = g.gl_pathv[i];
        l->shards[i].path = strdup(p);
        if (!l->shards[i].path) {
            r = -ENOMEM;
            goto fail;
        }
        l->nshards++;
        r = read_header(p, &l->shards[i].ntokens);
        if (r < 0) {
            snprintf(errbuf, errsz, "data shard '%s': %s", p,
                     r == -EINVAL ? "not a valid token shard (bad magic, header or size)"
                     : r == -EPROTONOSUPPORT ? "unsupported shard version" : strerror(-r));
            goto fail;
        }
        if (l->shards[i].ntokens < need) {
            snprintf(errbuf, errsz, "data shard '%s' has %lld tokens, a step needs %lld", p,
                     (long long)l->shards[i].ntokens, (long long)need);
            r = -EINVAL;
            goto fail;
        }
    }
    globfree(&g);
    *ret_l = l;
    return 0;
fail:
    globfree(&g);
    loader_free(l);
    return r;
}

int loader_num_shards(const struct loader *l)
{
    return l->nshards;
}

int64_t loader_num_tokens(const struct loader *l)
{
    int64_t n = 0;
    for (int i = 0; i < l->nshards; i++)
        n += l->shards[i].ntokens;
    return n;
}

static bool pos_fits(const struct loader *l, const struct data_pos *p)
{
    int64_t step = (int64_t)l->world * l->B * l->T;
    return p->shard >= 0 && p->shard < l->nshards && p->offset >= 0 &&
           p->offset + step + 1 <= l->shards[p->shard].ntokens;
}

int loader_next(struct loader *l, int vocab, int *inputs, int *targets, char *errbuf, size_t errsz)
{
    const struct shard *s = &l->shards[l->pos.shard];
    if (l->fd_shard != l->pos.shard) {
        if (l->fd >= 0)
            close(l->fd);
        l->fd_shard = -1;
        l->fd = open(s->path, O_RDONLY | O_CLOEXEC);
        if (l->fd < 0) {
            int r = -errno;
            snprintf(errbuf, errsz, "data shard '%s': %s", s->path, strerror(-r));
            return r;
        }
        l->fd_shard = l->pos.shard;
    }
    size_t n = (size_t)l->B * l->T + 1;
    int64_t first = l->pos.offset + (int64_t)l->rank * l->B * l->T;
    ssize_t got = pread(l->fd, l->buf, n * 2, SHARD_HEADER_BYTES + first * 2);
    if (got != (ssize_t)(n * 2)) {
        snprintf(errbuf, errsz, "data shard '%s': short read at token %lld", s->path, (long long)first);
        return -EIO;
    }
    for (size_t i = 0; i < n; i++) {
        const uint8_t *b = (const uint8_t *)&l->buf[i];
        int tok = b[0] | b[1] << 8;
        if (tok >= vocab) {
            snprintf(errbuf, errsz, "data shard '%s': token %d at %lld is outside the vocabulary (%d)",
                     s->path, tok, (long long)(first + (int64_t)i), vocab);
            return -ERANGE;
        }
        if (i < n - 1)
            inputs[i] = tok;
        if (i > 0)
            targets[i - 1] = tok;
    }
    l->pos.offset += (int64_t)l->world * l->B * l->T;
    if (!pos_fits(l, &l->pos)) {
        l->pos.shard = (l->pos.shard + 1) % l->nshards;
        l->pos.offset = 0;
    }
    return 0;
}

void loader_get_pos(const struct loader *l, struct data_pos *ret_pos)
{
    *ret_pos = l->pos;
}

int loader_set_pos(struct loader *l, const struct data_pos *pos)
{
    if (!pos_fits(l, pos))
        return -EINVAL;
    l->pos = *pos;
    return 0;
}
