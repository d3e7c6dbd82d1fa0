/* common/pack.c: see pack.h; the only file that knows the pack layout (a pax tar of objects). */
#include "common/pack.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"

struct pack_writer {
    struct archive *a;
    struct archive_entry *e;
    pack_write_fn fn;
    void *ctx;
    int err; /* first error of fn */
    bool src_failed; /* the last add failed on its source file */
    char *buf;
};

static la_ssize_t pw_write(struct archive *a, void *ud, const void *buf, size_t len)
{
    struct pack_writer *w = ud;
    int r = w->fn(w->ctx, buf, len);
    if (r < 0) {
        w->err = r;
        archive_set_error(a, -r, "pack: write: %s", strerror(-r));
        return -1;
    }
    return (la_ssize_t)len;
}

int pack_writer_new(pack_write_fn fn, void *ctx, struct pack_writer **ret_w)
{
    struct pack_writer *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->fn = fn;
    w->ctx = ctx;
    w->a = archive_write_new();
    w->e = archive_entry_new();
    w->buf = malloc(PACK_BLOCK);
    if (!w->a || !w->e || !w->buf || archive_write_set_format_pax_restricted(w->a) != ARCHIVE_OK ||
        archive_write_set_bytes_per_block(w->a, PACK_BLOCK) != ARCHIVE_OK ||
        archive_write_open(w->a, w, NULL, pw_write, NULL) != ARCHIVE_OK) {
        pack_writer_free(w);
        return -ENOMEM;
    }
    *ret_w = w;
    return 0;
}

static int64_t ts_ns(struct timespec t)
{
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static bool seen_same(const struct pack_seen *seen, int fd, uint64_t size)
{
    struct stat st;
    return seen && seen->ino && fstat(fd, &st) == 0 && (uint64_t)st.st_dev == seen->dev &&
           (uint64_t)st.st_ino == seen->ino && (uint64_t)st.st_size == size && ts_ns(st.st_mtim) == seen->mtime_ns &&
           ts_ns(st.st_ctim) == seen->ctime_ns;
}

int pack_writer_add(struct pack_writer *w, const char *sha, const char *src_path, uint64_t size)
{
    return pack_writer_add_seen(w, sha, src_path, size, NULL);
}

int pack_writer_add_seen(struct pack_writer *w, const char *sha, const char *src_path, uint64_t size,
                         const struct pack_seen *seen)
{
    w->src_failed = false;
    int fd = open(src_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        w->src_failed = true;
        return -errno;
    }
    int r = 0;
    bool trust = seen_same(seen, fd, size);
    struct sha256_ctx *h = trust ? NULL : sha256_new();
    if (!trust && !h) {
        close(fd);
        return -ENOMEM;
    }
    archive_entry_clear(w->e);
    archive_entry_set_pathname(w->e, sha);
    archive_entry_set_filetype(w->e, AE_IFREG);
    archive_entry_set_perm(w->e, 0444);
    archive_entry_set_size(w->e, (la_int64_t)size);
    if (archive_write_header(w->a, w->e) != ARCHIVE_OK) {
        r = w->err ? w->err : -EIO;
        goto out;
    }
    uint64_t done = 0;
    while (done < size) {
        size_t want = size - done < PACK_BLOCK ? (size_t)(size - done) : PACK_BLOCK;
        ssize_t n = read(fd, w->buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            r = -errno;
            w->src_failed = true;
            goto out;
        }
        if (n == 0) {
            r = -ESTALE; /* shorter than the manifest says */
            goto out;
        }
        done += (uint64_t)n;
        if (h && (r = sha256_update(h, w->buf, (size_t)n)) < 0)
            goto out;
        if (archive_write_data(w->a, w->buf, (size_t)n) != n) {
            r = w->err ? w->err : -EIO;
            goto out;
        }
    }
    char hex[SHA256_HEX_LEN + 1];
    char extra;
    if (trust) { /* still the inode the walk hashed, and nothing moved while it was read */
        if (!seen_same(seen, fd, size) || read(fd, &extra, 1) > 0)
            r = -ESTALE;
        goto out;
    }
    if ((r = sha256_final_hex(h, hex)) < 0)
        goto out;
    if (strcmp(hex, sha) != 0 || read(fd, &extra, 1) > 0)
        r = -ESTALE;
out:
    if (r == -ESTALE)
        w->src_failed = true; /* not the size or hash the manifest gives: the file's doing */
    sha256_free(h);
    close(fd);
    return r;
}

bool pack_writer_failed_reading(const struct pack_writer *w)
{
    return w->src_failed;
}

int pack_writer_finish(struct pack_writer *w)
{
    int r = archive_write_close(w->a) == ARCHIVE_OK ? 0 : (w->err ? w->err : -EIO);
    pack_writer_free(w);
    return r;
}

void pack_writer_free(struct pack_writer *w)
{
    if (!w)
        return;
    if (w->a)
        archive_write_free(w->a); /* closes if needed; after a failed write it only frees */
    archive_entry_free(w->e);
    free(w->buf);
    free(w);
}

#define PACK_READ_BLOCK (1u << 20)

struct pack_reader {
    struct archive *a;
};

int pack_reader_open(const char *path, struct pack_reader **ret_r)
{
    struct pack_reader *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->a = archive_read_new();
    if (!r->a || archive_read_support_format_tar(r->a) != ARCHIVE_OK) {
        pack_reader_free(r);
        return -ENOMEM;
    }
    /* "-": the pack streams in on stdin (`tar -c ... | pct exec ... release install M -`).  A
     * pipe's default 64 KiB means a wake-up of writer and reader per 64 KiB: 1 MiB (the
     * unprivileged maximum, /proc/sys/fs/pipe-max-size) and 1 MiB reads cut that 16-fold. */
    bool in = !strcmp(path, "-");
    if (in)
        (void)fcntl(STDIN_FILENO, F_SETPIPE_SZ, PACK_READ_BLOCK); /* not a pipe: EBADF, fine */
    int st = in ? archive_read_open_fd(r->a, STDIN_FILENO, PACK_READ_BLOCK)
                : archive_read_open_filename(r->a, path, PACK_READ_BLOCK);
    if (st != ARCHIVE_OK) {
        int e = archive_errno(r->a);
        log_debug("pack: open '%s': %s", path, archive_error_string(r->a));
        pack_reader_free(r);
        return e > 0 ? -e : -EBADMSG;
    }
    *ret_r = r;
    return 0;
}

int pack_reader_next(struct pack_reader *r, char ret_sha[SHA256_HEX_LEN + 1], uint64_t *ret_size)
{
    struct archive_entry *e;
    int s = archive_read_next_header(r->a, &e);
    if (s == ARCHIVE_EOF)
        return 0;
    if (s != ARCHIVE_OK && s != ARCHIVE_WARN)
        return -EBADMSG;
    const char *name = archive_entry_pathname(e);
    if (!name || !sha256_is_hex(name) || archive_entry_filetype(e) != AE_IFREG ||
        archive_entry_size(e) < 0 || !archive_entry_size_is_set(e))
        return -EBADMSG;
    memcpy(ret_sha, name, SHA256_HEX_LEN + 1);
    *ret_size = (uint64_t)archive_entry_size(e);
    return 1;
}

ssize_t pack_reader_read(struct pack_reader *r, void *buf, size_t len)
{
    la_ssize_t n = archive_read_data(r->a, buf, len);
    if (n < 0)
        return -EBADMSG;
    return (ssize_t)n;
}

void pack_reader_free(struct pack_reader *r)
{
    if (!r)
        return;
    if (r->a)
        archive_read_free(r->a);
    free(r);
}
