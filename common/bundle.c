/* common/bundle.c: the release bundle (tar.zst through libarchive); see bundle.h.
 *
 * Owns the bundle layout: MANIFEST.json first, then regular files sorted by path with mtime 0,
 * uid/gid 0, empty owner names and the manifest's modes.  Unpacking trusts nothing in the blob:
 * only regular files named by the manifest and directories implied by it are written, each with
 * O_EXCL|O_NOFOLLOW under a fresh directory, sizes and SHA-256 are checked while streaming, and
 * any failure removes the partial tree.  This file must never create links or device nodes, and
 * never write outside dest_dir.  Library code: logs at debug at most.
 */
#include "common/bundle.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
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

#define BUNDLE_MANIFEST_NAME "MANIFEST.json"
#define BUNDLE_CHUNK (64u << 10)

static void bundle_reason(char *errbuf, size_t errbuf_sz, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void bundle_reason(char *errbuf, size_t errbuf_sz, const char *fmt, ...)
{
    if (!errbuf || errbuf_sz == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, errbuf_sz, fmt, ap);
    va_end(ap);
}

/* ---- pack ---- */

static void bundle_entry_fill(struct archive_entry *e, const char *path, uint64_t size, uint32_t mode)
{
    archive_entry_clear(e);
    archive_entry_set_pathname(e, path);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, mode & 0777);
    archive_entry_set_size(e, (la_int64_t)size);
    archive_entry_set_mtime(e, 0, 0);
    archive_entry_set_uid(e, 0);
    archive_entry_set_gid(e, 0);
    archive_entry_set_uname(e, "");
    archive_entry_set_gname(e, "");
}

/* Copy one file into the archive, hashing as it goes so a file changed since the manifest was
 * built is caught (-ESTALE) rather than shipped with a wrong checksum. */
static int bundle_write_file(struct archive *a, struct archive_entry *e, const char *dir,
                             const struct manifest_file *f)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, f->path) >= (int)sizeof path)
        return -ENAMETOOLONG;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    bundle_entry_fill(e, f->path, f->size, f->mode);
    int r = 0;
    struct sha256_ctx *h = sha256_new();
    char *buf = malloc(BUNDLE_CHUNK);
    if (!h || !buf) {
        r = -ENOMEM;
        goto out;
    }
    if (archive_write_header(a, e) != ARCHIVE_OK) {
        log_debug("bundle: write header '%s': %s", f->path, archive_error_string(a));
        r = -EIO;
        goto out;
    }
    uint64_t done = 0;
    for (;;) {
        ssize_t n = read(fd, buf, BUNDLE_CHUNK);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            r = -errno;
            goto out;
        }
        if (n == 0)
            break;
        if (done + (uint64_t)n > f->size) {
            r = -ESTALE;
            goto out;
        }
        done += (uint64_t)n;
        if ((r = sha256_update(h, buf, (size_t)n)) < 0)
            goto out;
        if (archive_write_data(a, buf, (size_t)n) != n) {
            log_debug("bundle: write '%s': %s", f->path, archive_error_string(a));
            r = -EIO;
            goto out;
        }
    }
    char hex[SHA256_HEX_LEN + 1];
    if ((r = sha256_final_hex(h, hex)) < 0)
        goto out;
    if (done != f->size || strcmp(hex, f->sha256) != 0)
        r = -ESTALE;
out:
    free(buf);
    sha256_free(h);
    close(fd);
    return r;
}

int bundle_pack(const char *dir, const char *name, const char *out_path,
                char ret_id[RELEASE_ID_LEN + 1], struct manifest **ret_m)
{
    struct manifest *m = NULL;
    char *text = NULL;
    char id[RELEASE_ID_LEN + 1];
    char tmp[PATH_MAX] = "";
    struct archive *a = NULL;
    struct archive_entry *e = NULL;
    int fd = -1;
    int r = manifest_from_dir(dir, name, &m);
    if (r < 0)
        return r;
    if ((r = manifest_dump(m, &text, id)) < 0)
        goto out;
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out_path, (long)getpid()) >= (int)sizeof tmp) {
        r = -ENAMETOOLONG;
        goto out;
    }
    if ((r = safefile_create_excl(tmp, 0644, &fd)) < 0) {
        fd = -1;
        goto out;
    }
    a = archive_write_new();
    e = archive_entry_new();
    if (!a || !e) {
        r = -ENOMEM;
        goto out;
    }
    if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
        archive_write_add_filter_zstd(a) != ARCHIVE_OK ||
        archive_write_set_filter_option(a, "zstd", "compression-level", "3") != ARCHIVE_OK ||
        archive_write_open_fd(a, fd) != ARCHIVE_OK) {
        log_debug("bundle: archive setup: %s", archive_error_string(a));
        r = -EIO;
        goto out;
    }
    size_t tlen = strlen(text);
    bundle_entry_fill(e, BUNDLE_MANIFEST_NAME, tlen, 0644);
    if (archive_write_header(a, e) != ARCHIVE_OK ||
        archive_write_data(a, text, tlen) != (la_ssize_t)tlen) {
        log_debug("bundle: write manifest: %s", archive_error_string(a));
        r = -EIO;
        goto out;
    }
    for (size_t i = 0; i < m->nfiles; i++) {
        if (!strcmp(m->files[i].path, BUNDLE_MANIFEST_NAME)) {
            r = -EINVAL; /* would collide with the bundle's own manifest */
            goto out;
        }
        if ((r = bundle_write_file(a, e, dir, &m->files[i])) < 0)
            goto out;
    }
    if (archive_write_close(a) != ARCHIVE_OK) {
        log_debug("bundle: close: %s", archive_error_string(a));
        r = -EIO;
        goto out;
    }
    if (fsync(fd) < 0) {
        r = -errno;
        goto out;
    }
    if (close(fd) < 0) {
        fd = -1;
        r = -errno;
        goto out;
    }
    fd = -1;
    if (rename(tmp, out_path) < 0) {
        r = -errno;
        goto out;
    }
    (void)fs_fsync_dir(out_path);
    memcpy(ret_id, id, sizeof id);
    if (ret_m) {
        *ret_m = m;
        m = NULL;
    }
    r = 0;
out:
    if (a)
        archive_write_free(a);
    archive_entry_free(e);
    if (fd >= 0)
        close(fd);
    if (r < 0 && tmp[0])
        (void)unlink(tmp);
    free(text);
    manifest_free(m);
    return r;
}

/* ---- unpack ---- */

struct unpack {
    const char *dest;
    struct archive *a;
    struct manifest *m;
    bool *seen;         /* per manifest file */
    uint64_t total;     /* bytes written so far */
    char *buf;
    char *errbuf;
    size_t errbuf_sz;
};

/* true when path names a directory above some manifest file ("implied" directories). */
static bool bundle_dir_is_implied(const struct manifest *m, const char *path)
{
    size_t n = strlen(path);
    for (size_t i = 0; i < m->nfiles; i++)
        if (!strncmp(m->files[i].path, path, n) && m->files[i].path[n] == '/')
            return true;
    return false;
}

static int bundle_mkdirs_for(const char *dest, const char *rel)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dest, rel) >= (int)sizeof path)
        return -ENAMETOOLONG;
    char *slash = strrchr(path, '/');
    *slash = '\0';
    return fs_mkdir_p(path, 0755);
}

static int bundle_extract_file(struct unpack *u, const struct manifest_file *f, int64_t hdr_size)
{
    if (hdr_size >= 0 && (uint64_t)hdr_size != f->size) {
        bundle_reason(u->errbuf, u->errbuf_sz,
                      "file '%s': size mismatch (manifest %llu, bundle %lld)", f->path,
                      (unsigned long long)f->size, (long long)hdr_size);
        return -EBADMSG;
    }
    if (f->size > BUNDLE_MAX_FILE_BYTES || u->total + f->size > BUNDLE_MAX_BYTES) {
        bundle_reason(u->errbuf, u->errbuf_sz, "file '%s': over the size limit", f->path);
        return -E2BIG;
    }
    int r = bundle_mkdirs_for(u->dest, f->path);
    if (r < 0) {
        bundle_reason(u->errbuf, u->errbuf_sz, "file '%s': cannot create its directory: %s",
                      f->path, strerror(-r));
        return r;
    }
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", u->dest, f->path) >= (int)sizeof path)
        return -ENAMETOOLONG;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        r = -errno;
        bundle_reason(u->errbuf, u->errbuf_sz, "file '%s': %s", f->path, strerror(errno));
        return r;
    }
    struct sha256_ctx *h = sha256_new();
    if (!h) {
        close(fd);
        return -ENOMEM;
    }
    uint64_t done = 0;
    for (;;) {
        la_ssize_t n = archive_read_data(u->a, u->buf, BUNDLE_CHUNK);
        if (n < 0) {
            bundle_reason(u->errbuf, u->errbuf_sz, "file '%s': corrupt bundle: %s", f->path,
                          archive_error_string(u->a));
            r = -EBADMSG;
            goto out;
        }
        if (n == 0)
            break;
        if (done + (uint64_t)n > f->size) {
            bundle_reason(u->errbuf, u->errbuf_sz,
                          "file '%s': size mismatch (manifest %llu, bundle larger)", f->path,
                          (unsigned long long)f->size);
            r = -EBADMSG;
            goto out;
        }
        done += (uint64_t)n;
        if ((r = sha256_update(h, u->buf, (size_t)n)) < 0 ||
            (r = fd_write_all(fd, u->buf, (size_t)n)) < 0) {
            bundle_reason(u->errbuf, u->errbuf_sz, "file '%s': write: %s", f->path, strerror(-r));
            goto out;
        }
    }
    if (done != f->size) {
        bundle_reason(u->errbuf, u->errbuf_sz, "file '%s': size mismatch (manifest %llu, got %llu)",
                      f->path, (unsigned long long)f->size, (unsigned long long)done);
        r = -EBADMSG;
        goto out;
    }
    char hex[SHA256_HEX_LEN + 1];
    if ((r = sha256_final_hex(h, hex)) < 0)
        goto out;
    if (strcmp(hex, f->sha256) != 0) {
        bundle_reason(u->errbuf, u->errbuf_sz, "file '%s': sha256 mismatch (manifest %.12s…, got %.12s…)",
                      f->path, f->sha256, hex);
        r = -EBADMSG;
        goto out;
    }
    if (fchmod(fd, f->mode & 0777) < 0 || fsync(fd) < 0) {
        r = -errno;
        bundle_reason(u->errbuf, u->errbuf_sz, "file '%s': %s", f->path, strerror(errno));
        goto out;
    }
    u->total += done;
    r = 0;
out:
    sha256_free(h);
    if (close(fd) < 0 && r == 0)
        r = -errno;
    return r;
}

static int bundle_fsync_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (type != FTW_D && type != FTW_DP)
        return 0;
    return fs_fsync_dir(path) < 0 ? -1 : 0;
}

static int bundle_read_manifest(struct unpack *u, struct archive_entry *e, char **ret_text,
                                size_t *ret_len)
{
    if (strcmp(archive_entry_pathname(e) ? archive_entry_pathname(e) : "", BUNDLE_MANIFEST_NAME) ||
        archive_entry_filetype(e) != AE_IFREG) {
        bundle_reason(u->errbuf, u->errbuf_sz, "bundle does not start with %s", BUNDLE_MANIFEST_NAME);
        return -EBADMSG;
    }
    if (archive_entry_size_is_set(e) && archive_entry_size(e) > (la_int64_t)MANIFEST_MAX_BYTES) {
        bundle_reason(u->errbuf, u->errbuf_sz, "%s over %u bytes", BUNDLE_MANIFEST_NAME,
                      MANIFEST_MAX_BYTES);
        return -E2BIG;
    }
    size_t cap = MANIFEST_MAX_BYTES + 1, len = 0;
    char *text = malloc(cap + 1);
    if (!text)
        return -ENOMEM;
    for (;;) {
        la_ssize_t n = archive_read_data(u->a, text + len, cap - len);
        if (n < 0) {
            bundle_reason(u->errbuf, u->errbuf_sz, "corrupt bundle: %s", archive_error_string(u->a));
            free(text);
            return -EBADMSG;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > MANIFEST_MAX_BYTES) {
            bundle_reason(u->errbuf, u->errbuf_sz, "%s over %u bytes", BUNDLE_MANIFEST_NAME,
                          MANIFEST_MAX_BYTES);
            free(text);
            return -E2BIG;
        }
    }
    text[len] = '\0';
    *ret_text = text;
    *ret_len = len;
    return 0;
}

static int bundle_unpack_entries(struct unpack *u, const char *expected_id,
                                 char ret_id[RELEASE_ID_LEN + 1])
{
    struct archive_entry *e;
    int ar = archive_read_next_header(u->a, &e);
    if (ar != ARCHIVE_OK) {
        bundle_reason(u->errbuf, u->errbuf_sz, "not a readable tar.zst bundle: %s",
                      ar == ARCHIVE_EOF ? "empty" : archive_error_string(u->a));
        return -EBADMSG;
    }
    char *text = NULL, *canon = NULL;
    size_t tlen = 0;
    char id[RELEASE_ID_LEN + 1];
    int r = bundle_read_manifest(u, e, &text, &tlen);
    if (r < 0)
        return r;
    r = manifest_parse(text, tlen, &u->m);
    free(text);
    if (r < 0) {
        bundle_reason(u->errbuf, u->errbuf_sz, "%s invalid: %s", BUNDLE_MANIFEST_NAME, strerror(-r));
        return r == -E2BIG ? r : -EBADMSG;
    }
    if ((r = manifest_dump(u->m, &canon, id)) < 0)
        return r;
    if (expected_id && strcmp(expected_id, id) != 0) {
        bundle_reason(u->errbuf, u->errbuf_sz, "release id mismatch (expected %.12s…, bundle is %.12s…)",
                      expected_id, id);
        free(canon);
        return -EBADMSG;
    }
    u->seen = calloc(u->m->nfiles ? u->m->nfiles : 1, sizeof *u->seen);
    if (!u->seen) {
        free(canon);
        return -ENOMEM;
    }
    for (;;) {
        ar = archive_read_next_header(u->a, &e);
        if (ar == ARCHIVE_EOF)
            break;
        if (ar != ARCHIVE_OK) {
            bundle_reason(u->errbuf, u->errbuf_sz, "corrupt bundle: %s", archive_error_string(u->a));
            r = -EBADMSG;
            goto out;
        }
        char path[MANIFEST_PATH_MAX + 1];
        const char *raw = archive_entry_pathname(e);
        if (!raw || str_copy(path, sizeof path, raw) < 0) {
            bundle_reason(u->errbuf, u->errbuf_sz, "entry with an empty or overlong path");
            r = -EINVAL;
            goto out;
        }
        size_t plen = strlen(path);
        mode_t type = archive_entry_filetype(e);
        if (type == AE_IFDIR && plen > 1 && path[plen - 1] == '/')
            path[--plen] = '\0';
        if (!manifest_path_is_safe(path) || !strcmp(path, BUNDLE_MANIFEST_NAME)) {
            bundle_reason(u->errbuf, u->errbuf_sz, "entry '%s': unsafe path", raw);
            r = -EINVAL;
            goto out;
        }
        if (archive_entry_hardlink(e) || archive_entry_symlink(e) ||
            (type != AE_IFREG && type != AE_IFDIR)) {
            bundle_reason(u->errbuf, u->errbuf_sz, "entry '%s': not a regular file or directory",
                          path);
            r = -EINVAL;
            goto out;
        }
        if (type == AE_IFDIR) {
            if (!bundle_dir_is_implied(u->m, path)) {
                bundle_reason(u->errbuf, u->errbuf_sz, "entry '%s': directory not in the manifest",
                              path);
                r = -EINVAL;
                goto out;
            }
            continue; /* created with the files under it */
        }
        const struct manifest_file *f = manifest_find(u->m, path);
        if (!f) {
            bundle_reason(u->errbuf, u->errbuf_sz, "entry '%s': not in the manifest", path);
            r = -EINVAL;
            goto out;
        }
        size_t idx = (size_t)(f - u->m->files);
        if (u->seen[idx]) {
            bundle_reason(u->errbuf, u->errbuf_sz, "entry '%s': appears twice", path);
            r = -EINVAL;
            goto out;
        }
        u->seen[idx] = true;
        int64_t hsz = archive_entry_size_is_set(e) ? (int64_t)archive_entry_size(e) : -1;
        if ((r = bundle_extract_file(u, f, hsz)) < 0)
            goto out;
    }
    for (size_t i = 0; i < u->m->nfiles; i++)
        if (!u->seen[i]) {
            bundle_reason(u->errbuf, u->errbuf_sz, "file '%s': in the manifest but not in the bundle",
                          u->m->files[i].path);
            r = -EBADMSG;
            goto out;
        }
    char mpath[PATH_MAX];
    if (snprintf(mpath, sizeof mpath, "%s/%s", u->dest, BUNDLE_MANIFEST_NAME) >= (int)sizeof mpath) {
        r = -ENAMETOOLONG;
        goto out;
    }
    if ((r = fs_write_atomic(mpath, canon, strlen(canon), 0644)) < 0) {
        bundle_reason(u->errbuf, u->errbuf_sz, "write %s: %s", BUNDLE_MANIFEST_NAME, strerror(-r));
        goto out;
    }
    if (nftw(u->dest, bundle_fsync_one, 16, FTW_PHYS) != 0) {
        r = errno ? -errno : -EIO;
        bundle_reason(u->errbuf, u->errbuf_sz, "fsync: %s", strerror(-r));
        goto out;
    }
    memcpy(ret_id, id, sizeof id);
    r = 0;
out:
    free(canon);
    return r;
}

int bundle_unpack(const char *blob, const char *dest_dir, const char *expected_id,
                  char ret_id[RELEASE_ID_LEN + 1], char *errbuf, size_t errbuf_sz)
{
    struct unpack u = {.dest = dest_dir, .errbuf = errbuf, .errbuf_sz = errbuf_sz};
    struct stat st;
    bundle_reason(errbuf, errbuf_sz, "unknown error");
    int fd = open(blob, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int r = -errno;
        bundle_reason(errbuf, errbuf_sz, "cannot open '%s': %s", blob, strerror(errno));
        return r;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        bundle_reason(errbuf, errbuf_sz, "'%s' is not a regular file", blob);
        return -EINVAL;
    }
    if ((uint64_t)st.st_size > BUNDLE_MAX_BYTES) {
        close(fd);
        bundle_reason(errbuf, errbuf_sz, "'%s' is over the bundle size limit", blob);
        return -E2BIG;
    }
    if (mkdir(dest_dir, 0755) < 0) {
        int r = -errno;
        close(fd);
        bundle_reason(errbuf, errbuf_sz, "cannot create '%s': %s", dest_dir, strerror(-r));
        return r;
    }
    int r = -ENOMEM;
    u.a = archive_read_new();
    u.buf = malloc(BUNDLE_CHUNK);
    if (!u.a || !u.buf)
        goto out;
    if (archive_read_support_filter_zstd(u.a) != ARCHIVE_OK ||
        archive_read_support_format_tar(u.a) != ARCHIVE_OK ||
        archive_read_open_fd(u.a, fd, BUNDLE_CHUNK) != ARCHIVE_OK) {
        bundle_reason(errbuf, errbuf_sz, "not a readable tar.zst bundle: %s",
                      archive_error_string(u.a) ? archive_error_string(u.a) : "?");
        r = -EBADMSG;
        goto out;
    }
    r = bundle_unpack_entries(&u, expected_id, ret_id);
out:
    if (u.a)
        archive_read_free(u.a);
    close(fd);
    free(u.buf);
    free(u.seen);
    manifest_free(u.m);
    if (r < 0)
        (void)fs_rm_rf(dest_dir);
    else
        bundle_reason(errbuf, errbuf_sz, "ok");
    return r;
}
