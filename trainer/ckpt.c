/* trainer/ckpt.c: checkpoint format v1 (see ckpt.h and docs/protocol.md).  The only file that
 * knows the layout.  Owns its temp files: removes them on every failure path.
 * Never: overwrite or delete a checkpoint of another model shape; leave a half-written file under
 * a final name. */
#include "trainer/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/safefile.h"
#include "common/sha256.h"
#include "common/util.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint v1 is little-endian; add byte swapping for this host"
#endif

#define CKPT_MAGIC "DRVRCKPT"
#define CKPT_CHUNK (1 << 20)
#define CKPT_MAX_FILES 10000

static int chunk_delay_ms;

void ckpt_set_chunk_delay_ms(int ms)
{
    chunk_delay_ms = ms < 0 ? 0 : ms;
}

/* header field offsets (docs/protocol.md) */
enum {
    H_MAGIC = 0, H_VERSION = 8, H_HDRSIZE = 12, H_LAYERS = 16, H_HEADS = 20, H_DIM = 24,
    H_VOCAB = 28, H_VOCABP = 32, H_SEQ = 36, H_FP = 40, H_STEP = 48, H_SHARD = 56, H_OFFSET = 64,
    H_RNG = 72, H_NPARAMS = 80, H_WORLD = 88, H_BATCH = 92, H_LOSS = 96, H_RELEASE = 104,
    H_BACKEND = 176, H_TOKENS = 192, H_END = 200
};

static void put(uint8_t *h, size_t off, const void *v, size_t n)
{
    memcpy(h + off, v, n);
}
static void get(const uint8_t *h, size_t off, void *v, size_t n)
{
    memcpy(v, h + off, n);
}

static void header_encode(const struct ckpt_meta *m, uint8_t h[CKPT_HEADER_BYTES])
{
    memset(h, 0, CKPT_HEADER_BYTES);
    memcpy(h + H_MAGIC, CKPT_MAGIC, 8);
    uint32_t ver = CKPT_VERSION, hs = CKPT_HEADER_BYTES;
    put(h, H_VERSION, &ver, 4);
    put(h, H_HDRSIZE, &hs, 4);
    int32_t shape[6] = {m->model.layers, m->model.heads, m->model.dim, m->model.vocab,
                        m->model.vocab_padded, m->model.seq};
    put(h, H_LAYERS, shape, sizeof shape);
    uint64_t fp = gpt_config_fingerprint(&m->model), np = gpt_num_params(&m->model);
    put(h, H_FP, &fp, 8);
    put(h, H_STEP, &m->step, 8);
    put(h, H_SHARD, &m->pos.shard, 8);
    put(h, H_OFFSET, &m->pos.offset, 8);
    put(h, H_RNG, &m->rng_state, 8);
    put(h, H_NPARAMS, &np, 8);
    int32_t ws = m->world_size, b = m->batch;
    put(h, H_WORLD, &ws, 4);
    put(h, H_BATCH, &b, 4);
    put(h, H_LOSS, &m->loss, 8);
    memcpy(h + H_RELEASE, m->release, strnlen(m->release, sizeof m->release - 1));
    memcpy(h + H_BACKEND, m->backend, strnlen(m->backend, sizeof m->backend - 1));
    put(h, H_TOKENS, &m->tokens, 8);
}

/* -EBADMSG: not a v1 checkpoint header; -ESTALE: valid but another shape/version. */
static int header_decode(const uint8_t h[CKPT_HEADER_BYTES], const struct gpt_config *model,
                         struct ckpt_meta *ret)
{
    if (memcmp(h + H_MAGIC, CKPT_MAGIC, 8))
        return -EBADMSG;
    uint32_t ver, hs;
    get(h, H_VERSION, &ver, 4);
    get(h, H_HDRSIZE, &hs, 4);
    if (ver != CKPT_VERSION)
        return -ESTALE;
    if (hs != CKPT_HEADER_BYTES)
        return -EBADMSG;
    struct ckpt_meta m;
    memset(&m, 0, sizeof m);
    int32_t shape[6];
    get(h, H_LAYERS, shape, sizeof shape);
    m.model = (struct gpt_config){shape[0], shape[1], shape[2], shape[3], shape[4], shape[5]};
    if (m.model.layers != model->layers || m.model.heads != model->heads ||
        m.model.dim != model->dim || m.model.vocab != model->vocab ||
        m.model.vocab_padded != model->vocab_padded || m.model.seq != model->seq)
        return -ESTALE;
    uint64_t fp, np;
    get(h, H_FP, &fp, 8);
    get(h, H_NPARAMS, &np, 8);
    if (fp != gpt_config_fingerprint(model) || np != gpt_num_params(model))
        return -EBADMSG;
    get(h, H_STEP, &m.step, 8);
    get(h, H_SHARD, &m.pos.shard, 8);
    get(h, H_OFFSET, &m.pos.offset, 8);
    get(h, H_RNG, &m.rng_state, 8);
    int32_t ws, b;
    get(h, H_WORLD, &ws, 4);
    get(h, H_BATCH, &b, 4);
    m.world_size = ws;
    m.batch = b;
    get(h, H_LOSS, &m.loss, 8);
    memcpy(m.release, h + H_RELEASE, sizeof m.release - 1);
    memcpy(m.backend, h + H_BACKEND, sizeof m.backend - 1);
    get(h, H_TOKENS, &m.tokens, 8);
    if (m.step < 0 || m.pos.shard < 0 || m.pos.offset < 0)
        return -EBADMSG;
    *ret = m;
    return 0;
}

static int write_hashed(int fd, struct sha256_ctx *sc, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        size_t n = len < CKPT_CHUNK ? len : CKPT_CHUNK;
        int r = sha256_update(sc, p, n);
        if (r < 0)
            return r;
        r = fd_write_all(fd, p, n);
        if (r < 0)
            return r;
        if (chunk_delay_ms)
            usleep((useconds_t)chunk_delay_ms * 1000);
        p += n;
        len -= n;
    }
    return 0;
}

int ckpt_write(const char *dir, const struct ckpt_meta *meta, const float *params, const float *m,
               const float *v, char *ret_path)
{
    char path[CKPT_PATH_MAX], tmp[CKPT_PATH_MAX];
    uint64_t fp = gpt_config_fingerprint(&meta->model);
    int r = fs_mkdir_p(dir, 0755);
    if (r < 0)
        return r;
    if (snprintf(path, sizeof path, "%s/ckpt-%016" PRIx64 "-%012" PRId64 ".bin", dir, fp, meta->step) >= (int)sizeof path ||
        snprintf(tmp, sizeof tmp, "%s/.ckpt-%016" PRIx64 "-%012" PRId64 ".tmp.%d", dir, fp, meta->step, (int)getpid()) >= (int)sizeof tmp)
        return -ENAMETOOLONG;
    int fd;
    if ((r = safefile_create_excl(tmp, 0644, &fd)) < 0)
        return r;
    struct sha256_ctx *sc = sha256_new();
    if (!sc) {
        r = -ENOMEM;
        goto fail;
    }
    uint8_t h[CKPT_HEADER_BYTES];
    header_encode(meta, h);
    size_t nb = gpt_num_params(&meta->model) * sizeof(float);
    char hex[SHA256_HEX_LEN + 1];
    if ((r = write_hashed(fd, sc, h, sizeof h)) < 0 || (r = write_hashed(fd, sc, params, nb)) < 0 ||
        (r = write_hashed(fd, sc, m, nb)) < 0 || (r = write_hashed(fd, sc, v, nb)) < 0 ||
        (r = sha256_final_hex(sc, hex)) < 0 || (r = fd_write_all(fd, hex, CKPT_FOOTER_BYTES)) < 0)
        goto fail;
    if (fsync(fd) < 0) {
        r = -errno;
        goto fail;
    }
    if (close(fd) < 0) {
        fd = -1;
        r = -errno;
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) < 0) {
        r = -errno;
        goto fail;
    }
    sha256_free(sc);
    r = fs_fsync_dir(dir);
    if (r < 0)
        return r;
    if (ret_path)
        (void)str_copy(ret_path, CKPT_PATH_MAX, path);
    return 0;
fail:
    sha256_free(sc);
    if (fd >= 0)
        close(fd);
    (void)unlink(tmp);
    return r;
}

static int read_hashed(int fd, struct sha256_ctx *sc, void *data, size_t len)
{
    char *p = data;
    while (len) {
        size_t want = len < CKPT_CHUNK ? len : CKPT_CHUNK;
        ssize_t n = read(fd, p, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EBADMSG;
        int r = sha256_update(sc, p, (size_t)n);
        if (r < 0)
            return r;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int ckpt_read(const char *path, const struct gpt_config *model, struct ckpt_meta *ret_meta,
              float *params, float *m, float *v)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r;
    struct sha256_ctx *sc = NULL;
    struct stat st;
    size_t nb = gpt_num_params(model) * sizeof(float);
    if (fstat(fd, &st) < 0) {
        r = -errno;
        goto out;
    }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != CKPT_HEADER_BYTES + 3 * (uint64_t)nb + CKPT_FOOTER_BYTES) {
        r = -EBADMSG;
        /* a file of another shape has another size: tell the caller which it is */
        uint8_t h[CKPT_HEADER_BYTES];
        struct ckpt_meta tmp;
        if (pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h && header_decode(h, model, &tmp) == -ESTALE)
            r = -ESTALE;
        goto out;
    }
    sc = sha256_new();
    if (!sc) {
        r = -ENOMEM;
        goto out;
    }
    uint8_t h[CKPT_HEADER_BYTES];
    struct ckpt_meta meta;
    if ((r = read_hashed(fd, sc, h, sizeof h)) < 0)
        goto out;
    if ((r = header_decode(h, model, &meta)) < 0)
        goto out;
    if ((r = read_hashed(fd, sc, params, nb)) < 0 || (r = read_hashed(fd, sc, m, nb)) < 0 ||
        (r = read_hashed(fd, sc, v, nb)) < 0)
        goto out;
    char hex[SHA256_HEX_LEN + 1], foot[CKPT_FOOTER_BYTES];
    if ((r = sha256_final_hex(sc, hex)) < 0)
        goto out;
    if (read(fd, foot, sizeof foot) != (ssize_t)sizeof foot || memcmp(foot, hex, CKPT_FOOTER_BYTES)) {
        r = -EBADMSG;
        goto out;
    }
    *ret_meta = meta;
    r = 0;
out:
    sha256_free(sc);
    close(fd);
    return r;
}

struct entry {
    int64_t step;
    char name[96];
};

static int cmp_desc(const void *a, const void *b)
{
    int64_t x = ((const struct entry *)a)->step, y = ((const struct entry *)b)->step;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* List ckpt-<fp>-<step>.bin names (want_tmp false) or .ckpt-<fp>-*.tmp.* (true), newest first.
 * *ret_n entries in a malloc'd *ret (free()).  A missing dir is 0 entries. */
static int list_dir(const char *dir, uint64_t fp, bool want_tmp, struct entry **ret, int *ret_n)
{
    char prefix[40];
    snprintf(prefix, sizeof prefix, "%sckpt-%016" PRIx64 "-", want_tmp ? "." : "", fp);
    size_t pl = strlen(prefix);
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) {
            *ret = NULL;
            *ret_n = 0;
            return 0;
        }
        return -errno;
    }
    struct entry *e = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < CKPT_MAX_FILES) {
        if (strncmp(de->d_name, prefix, pl) || strlen(de->d_name) >= sizeof e->name)
            continue;
        const char *s = de->d_name + pl;
        char *end;
        errno = 0;
        long long step = strtoll(s, &end, 10);
        if (errno || end != s + 12 || step < 0)
            continue;
        if (want_tmp ? strncmp(end, ".tmp.", 5) : strcmp(end, ".bin"))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            struct entry *ne = realloc(e, sizeof *e * (size_t)cap);
            if (!ne) {
                free(e);
                closedir(d);
                return -ENOMEM;
            }
            e = ne;
        }
        e[n].step = step;
        (void)str_copy(e[n].name, sizeof e[n].name, de->d_name);
        n++;
    }
    closedir(d);
    if (n)
        qsort(e, (size_t)n, sizeof *e, cmp_desc);
    *ret = e;
    *ret_n = n;
    return 0;
}

bool ckpt_release_trusted(const char *list, const char *release)
{
    if (!list)
        return true;
    size_t n = strlen(release);
    if (n == 0)
        return false;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !memcmp(p, release, n))
            return true;
        p += len;
        if (*p == ',')
            p++;
    }
    return false;
}

/* The writer's release of a checkpoint file, from its header alone; -EBADMSG if unreadable. */
static int header_release(const char *path, const struct gpt_config *model, char *out, size_t outsz)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    uint8_t h[CKPT_HEADER_BYTES];
    struct ckpt_meta meta;
    int r = pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h ? header_decode(h, model, &meta) : -EBADMSG;
    close(fd);
    if (r == 0)
        (void)str_copy(out, outsz, meta.release);
    return r;
}

int ckpt_load_latest(const char *dir, const struct gpt_config *model, const char *trusted,
                     struct ckpt_meta *ret_meta, float *params, float *m, float *v, char *ret_path)
{
    struct entry *e;
    int n;
    int r = list_dir(dir, gpt_config_fingerprint(model), false, &e, &n);
    if (r < 0)
        return r;
    int found = 0;
    for (int i = 0; i < n && !found; i++) {
        char path[CKPT_PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, e[i].name) >= (int)sizeof path)
            continue;
        char writer[72];
        if (trusted && (header_release(path, model, writer, sizeof writer) < 0 ||
                        !ckpt_release_trusted(trusted, writer))) {
            log_info("checkpoint '%s' skipped: written by a release this one does not resume from", path);
            continue;
        }
        struct ckpt_meta meta;
        r = ckpt_read(path, model, &meta, params, m, v);
        if (r < 0) {
            log_warn("checkpoint '%s' is unusable (%s); trying an older one", path,
                     r == -EBADMSG ? "corrupt or truncated" : r == -ESTALE ? "another model or version" : strerror(-r));
            continue;
        }
        *ret_meta = meta;
        if (ret_path)
            (void)str_copy(ret_path, CKPT_PATH_MAX, path);
        found = 1;
    }
    free(e);
    return found;
}

int ckpt_prune(const char *dir, const struct gpt_config *model, int keep, const char *own, const char *trusted)
{
    uint64_t fp = gpt_config_fingerprint(model);
    struct entry *e;
    int n, deleted = 0;
    int r = list_dir(dir, fp, false, &e, &n);
    if (r < 0)
        return r;
    int kept = 0;
    for (int i = 0; i < n; i++) {
        char path[CKPT_PATH_MAX], writer[72];
        if (snprintf(path, sizeof path, "%s/%s", dir, e[i].name) >= (int)sizeof path)
            continue;
        if (own && *own) {
            if (header_release(path, model, writer, sizeof writer) < 0)
                continue; /* unreadable: not known to be a failed release's */
            if (strcmp(writer, own)) {
                /* another release's: kept while a release of the job may resume from it */
                if (trusted && *trusted && writer[0] && !ckpt_release_trusted(trusted, writer) &&
                    unlink(path) == 0)
                    deleted++;
                continue;
            }
        }
        if (kept++ < (keep < 1 ? 1 : keep))
            continue;
        if (unlink(path) == 0)
            deleted++;
    }
    free(e);
    r = list_dir(dir, fp, true, &e, &n);
    if (r < 0)
        return r;
    for (int i = 0; i < n; i++) {
        char path[CKPT_PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, e[i].name) < (int)sizeof path && unlink(path) == 0)
            deleted++;
    }
    free(e);
    return deleted;
}
