/* agent/vrecord.c: see vrecord.h.  Owns objects/.verified and objects/.verified.lock; never
 * touches an object file. */
#include "agent/vrecord.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/util.h"

#define VREC_MAGIC "drover-verified-1\n" /* 18 bytes, then a uint64_t count */
#define VREC_MAGIC_LEN 18
#define VREC_MAX (8u << 20) /* objects: 8 Mi records, 704 MiB, far past any release limit */

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int sha_bin(const char *hex, uint8_t out[32])
{
    if (!sha256_is_hex(hex))
        return -EINVAL;
    for (int i = 0; i < 32; i++)
        out[i] = (uint8_t)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
    return 0;
}

static int key_cmp(const void *a, const void *b)
{
    const struct vrec *x = a, *y = b;
    int c = memcmp(x->sha, y->sha, sizeof x->sha);
    if (c)
        return c;
    return x->mode < y->mode ? -1 : x->mode > y->mode;
}

static int64_t ns(struct timespec t)
{
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int rec_path(const struct store *s, char *buf, size_t sz, const char *suffix)
{
    return store_path(s, buf, sz, "objects/.verified%s", suffix);
}

/* Read the file into *ret (sorted as written), or an empty set. */
static int read_file(const struct store *s, struct vrec **ret, size_t *ret_n)
{
    char p[PATH_MAX];
    *ret = NULL;
    *ret_n = 0;
    if (rec_path(s, p, sizeof p, "") < 0)
        return 0;
    int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char head[VREC_MAGIC_LEN];
    uint64_t n = 0;
    struct stat st;
    int r = 0;
    if (fstat(fd, &st) < 0 || read(fd, head, sizeof head) != (ssize_t)sizeof head ||
        memcmp(head, VREC_MAGIC, VREC_MAGIC_LEN) || read(fd, &n, sizeof n) != (ssize_t)sizeof n ||
        n > VREC_MAX || (uint64_t)st.st_size != VREC_MAGIC_LEN + sizeof n + n * sizeof(struct vrec))
        goto out; /* not ours or torn: start over (everything is re-hashed once) */
    struct vrec *v = malloc(n ? n * sizeof *v : 1);
    if (!v) {
        r = -ENOMEM;
        goto out;
    }
    size_t want = n * sizeof *v, got = 0;
    while (got < want) {
        ssize_t k = read(fd, (char *)v + got, want - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    if (got != want) {
        free(v);
        goto out;
    }
    *ret = v;
    *ret_n = n;
out:
    close(fd);
    return r;
}

int vrecord_load(const struct store *s, struct vrecord *r)
{
    memset(r, 0, sizeof *r);
    return read_file(s, &r->v, &r->n);
}

void vrecord_done(struct vrecord *r)
{
    if (!r)
        return;
    free(r->v);
    free(r->up);
    memset(r, 0, sizeof *r);
}

enum vrec_match vrecord_matches(const struct vrecord *r, const char *sha_hex, uint32_t mode, const struct stat *st)
{
    struct vrec key = { .mode = mode };
    if (!r->n || sha_bin(sha_hex, key.sha) < 0)
        return VREC_NO;
    const struct vrec *x = bsearch(&key, r->v, r->n, sizeof *r->v, key_cmp);
    if (!x || !x->ino)
        return VREC_NO;
    if (x->dev != (uint64_t)st->st_dev || x->ino != (uint64_t)st->st_ino || x->size != (uint64_t)st->st_size ||
        x->mtime_ns != ns(st->st_mtim))
        return VREC_NO;
    /* ctime moves with every link and unlink the store makes itself: accepted only with a
     * link count that moved too (vrecord.h says what that leaves uncaught) */
    if (x->ctime_ns == ns(st->st_ctim))
        return VREC_SAME;
    return x->nlink != (uint64_t)st->st_nlink ? VREC_LINKED : VREC_NO;
}

static int queue(struct vrecord *r, const struct vrec *x)
{
    if (r->nup == r->capup) {
        size_t cap = r->capup ? r->capup * 2 : 64;
        struct vrec *nv = realloc(r->up, cap * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        r->up = nv;
        r->capup = cap;
    }
    r->up[r->nup] = *x;
    r->up[r->nup].pad = (uint32_t)r->nup;
    r->nup++;
    return 0;
}

int vrecord_put(struct vrecord *r, const char *sha_hex, uint32_t mode, const struct stat *st)
{
    struct vrec x = { .mode = mode,
                      .dev = (uint64_t)st->st_dev,
                      .ino = (uint64_t)st->st_ino,
                      .size = (uint64_t)st->st_size,
                      .nlink = (uint64_t)st->st_nlink,
                      .mtime_ns = ns(st->st_mtim),
                      .ctime_ns = ns(st->st_ctim) };
    if (sha_bin(sha_hex, x.sha) < 0)
        return -EINVAL;
    return queue(r, &x);
}

int vrecord_forget(struct vrecord *r, const char *sha_hex, uint32_t mode)
{
    struct vrec x = { .mode = mode };
    if (sha_bin(sha_hex, x.sha) < 0)
        return -EINVAL;
    return queue(r, &x);
}

/* Queue order: key, then queue position (kept in pad while queued), so the last wins. */
static int queue_cmp(const void *a, const void *b)
{
    int c = key_cmp(a, b);
    if (c)
        return c;
    const struct vrec *x = a, *y = b;
    return x->pad < y->pad ? -1 : x->pad > y->pad;
}

int vrecord_save(const struct store *s, struct vrecord *r, double lock_timeout_s)
{
    if (!r->nup)
        return 0;
    char lock[PATH_MAX], fin[PATH_MAX], tmp[PATH_MAX];
    int e;
    if ((e = rec_path(s, lock, sizeof lock, ".lock")) < 0 || (e = rec_path(s, fin, sizeof fin, "")) < 0 ||
        (e = store_path(s, tmp, sizeof tmp, "objects/.verified.tmp.%ld", (long)getpid())) < 0)
        return e;
    char err[PATH_MAX + 128];
    int lfd = fs_lock_file(lock, lock_timeout_s, err, sizeof err);
    if (lfd < 0) { /* the queued updates stay in r; a record not saved costs a re-hash */
        log_warn("store: verification record not saved: %s", err);
        return lfd;
    }
    struct vrec *cur = NULL;
    size_t ncur = 0;
    e = read_file(s, &cur, &ncur); /* what others saved since we loaded */
    struct vrec *all = e == 0 ? realloc(cur, (ncur + r->nup) * sizeof *all) : NULL;
    if (!all) {
        free(cur);
        close(lfd);
        return e < 0 ? e : -ENOMEM;
    }
    /* ours: sorted, the last update of each key kept */
    struct vrec *ours = all + ncur;
    size_t nours = 0;
    memcpy(ours, r->up, r->nup * sizeof *ours);
    qsort(ours, r->nup, sizeof *ours, queue_cmp);
    for (size_t i = 0; i < r->nup; i++) {
        if (nours && key_cmp(&ours[nours - 1], &ours[i]) == 0)
            nours--;
        ours[nours] = ours[i];
        ours[nours++].pad = 0;
    }
    qsort(all, ncur, sizeof *all, key_cmp); /* written sorted; cheap to be sure */
    /* two sorted runs, file [0, ncur) and ours: ours replaces the file's on equal keys, and a
     * forgotten record (ino 0) is dropped */
    struct vrec *m = malloc((ncur + nours) ? (ncur + nours) * sizeof *m : 1);
    if (!m) {
        free(all);
        close(lfd);
        return -ENOMEM;
    }
    size_t a = 0, b = 0, k = 0;
    while (a < ncur || b < nours) {
        int c = a >= ncur ? 1 : b >= nours ? -1 : key_cmp(&all[a], &ours[b]);
        if (c < 0) {
            m[k++] = all[a++];
            continue;
        }
        if (c == 0)
            a++;
        if (ours[b].ino)
            m[k++] = ours[b];
        b++;
    }
    free(all);
    uint64_t cnt = k;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    e = fd < 0 ? -errno : 0;
    if (e == 0)
        e = fd_write_all(fd, VREC_MAGIC, VREC_MAGIC_LEN);
    if (e == 0)
        e = fd_write_all(fd, &cnt, sizeof cnt);
    if (e == 0)
        e = fd_write_all(fd, m, k * sizeof *m);
    /* no fsync: a record lost in a crash costs a re-hash, never a wrong answer */
    if (fd >= 0)
        close(fd);
    if (e == 0 && rename(tmp, fin) < 0)
        e = -errno;
    if (e < 0)
        (void)unlink(tmp);
    free(m);
    close(lfd); /* drops the lock */
    if (e == 0)
        r->nup = 0;
    return e;
}
