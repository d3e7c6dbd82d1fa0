/* agent/objstore.c: see objstore.h.  Owns objects/ and the v2 releases it assembles.  Never
 * writes an object it has not verified against the manifest, never follows a symlink when
 * creating a file (O_EXCL | O_NOFOLLOW), never opens a FIFO or device from a pack (a pack member
 * is only ever a regular file), and never removes a temp entry whose owner is still alive. */
#include "agent/objstore.h"
#include "agent/agent.h"
#include "agent/lease.h"
#include "agent/vrecord.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/pack.h"
#include "common/sha256.h"
#include "common/util.h"

#define OBJ_CHUNK (256u << 10)

double objstore_gc_grace_s = OBJSTORE_GC_GRACE_S;

static void reason(char *err, size_t errsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reason(char *err, size_t errsz, const char *fmt, ...)
{
    if (!err || !errsz)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errsz, fmt, ap);
    va_end(ap);
}

static uint32_t obj_mode(uint32_t manifest_mode)
{
    return (manifest_mode & 0555) | 0444;
}

static int obj_path(const struct store *s, char *buf, size_t sz, const char *sha, uint32_t mode)
{
    return store_path(s, buf, sz, "objects/%s.%04o", sha, mode);
}

/* An existing variant of object sha: the exact mode first, then the common ones. */
static bool obj_find(const struct store *s, const char *sha, uint32_t mode, char *buf, size_t sz)
{
    static const uint32_t common[] = { 0444, 0555 };
    struct stat st;
    if (obj_path(s, buf, sz, sha, mode) == 0 && lstat(buf, &st) == 0 && S_ISREG(st.st_mode))
        return true;
    for (size_t i = 0; i < ARRAY_SIZE(common); i++)
        if (common[i] != mode && obj_path(s, buf, sz, sha, common[i]) == 0 && lstat(buf, &st) == 0 &&
            S_ISREG(st.st_mode))
            return true;
    return false;
}

/* "<anything>.<pid>" whose process is gone (or ".gc" leftovers of an interrupted GC). */
static bool tmp_is_stale(const char *name)
{
    const char *t = strstr(name, ".tmp");
    if (!t)
        return false;
    const char *dot = strrchr(name, '.');
    if (!strcmp(dot, ".gc"))
        return true;
    if (!str_is_digits(dot + 1, 10))
        return false;
    long pid = strtol(dot + 1, NULL, 10);
    return pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/* What removing path frees, roughly: the blocks of its regular files that no other name links
 * (a temp object is linked nowhere else; a half-built release's files are links to objects that
 * stay).  nftw's callback has no argument: the sum is file-scope (the agent is single-threaded). */
static uint64_t tree_bytes_sum;

static int tree_bytes_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)path;
    (void)ftw;
    if (flag == FTW_F && S_ISREG(st->st_mode) && st->st_nlink == 1)
        tree_bytes_sum += (uint64_t)st->st_blocks * 512u;
    return 0;
}

static uint64_t tree_bytes(const char *path)
{
    tree_bytes_sum = 0;
    (void)nftw(path, tree_bytes_one, 16, FTW_PHYS); /* a walk that fails: what it counted */
    return tree_bytes_sum;
}

/* incoming/'s manifests and packs (regular files): the ones a `release missing -` kept, or a
 * pack pushed, for the `release install` that follows. */
static bool incoming_file(int dfd, const char *name, struct stat *st)
{
    return fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st->st_mode) &&
           (strstr(name, ".manifest") || strstr(name, ".pack"));
}

/* any_age: incoming/'s manifests and packs go whatever their age (the caller made sure no
 * deploy holds a lease here, so no install is about to read them). */
static void clean_dir(const struct store *s, const char *sub, bool any_age, struct objstore_cleaned *ret)
{
    char p[PATH_MAX];
    if (store_path(s, p, sizeof p, "%s", sub) < 0)
        return;
    DIR *d = opendir(p);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        struct stat st;
        /* incoming/: a manifest or pack whose deploy died before `release install` */
        bool old_incoming = !strcmp(sub, "incoming") && incoming_file(dirfd(d), de->d_name, &st) &&
                            (any_age || time(NULL) - st.st_mtime > OBJSTORE_INCOMING_MAX_AGE_S);
        if (!tmp_is_stale(de->d_name) && !old_incoming)
            continue;
        char q[PATH_MAX];
        if (store_path(s, q, sizeof q, "%s/%s", sub, de->d_name) < 0)
            continue;
        uint64_t bytes = ret ? tree_bytes(q) : 0;
        log_info("store: removing stale '%s'", q);
        if (fs_rm_rf(q) == 0 && ret) {
            ret->entries++;
            ret->bytes += bytes;
        }
    }
    closedir(d);
}

static void clean_all(const struct store *s, bool any_age, struct objstore_cleaned *ret)
{
    char p[PATH_MAX];
    if (store_path(s, p, sizeof p, "objects") == 0)
        (void)fs_mkdir_p(p, 0700);
    clean_dir(s, "objects", false, ret);
    clean_dir(s, "releases", false, ret);
    clean_dir(s, "incoming", any_age, ret);
}

void objstore_clean_stale(const struct store *s, struct objstore_cleaned *ret)
{
    clean_all(s, false, ret);
}

void objstore_clean_gc(const struct store *s, struct objstore_cleaned *ret, bool *ret_incoming_kept)
{
    bool held = lease_any_held(s->root);
    clean_all(s, !held, ret);
    if (ret_incoming_kept) {
        *ret_incoming_kept = false;
        char p[PATH_MAX];
        DIR *d = held && store_path(s, p, sizeof p, "incoming") == 0 ? opendir(p) : NULL;
        struct dirent *de;
        struct stat st;
        while (d && (de = readdir(d)) && !*ret_incoming_kept)
            *ret_incoming_kept = incoming_file(dirfd(d), de->d_name, &st);
        if (d)
            closedir(d);
    }
}

/* Is releases/<id> complete and matching m?  Type, size and link target of every entry, and
 * the MANIFEST text.  Contents are not rehashed: objects were verified when they arrived and are
 * read-only. */
static bool release_intact(const struct store *s, const struct manifest2 *m, const char *id,
                           const char *text, size_t len, const char **ret_bad)
{
    char p[PATH_MAX];
    if (store_path(s, p, sizeof p, "releases/%s", id) < 0)
        return false;
    int dfd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return false;
    bool ok = false;
    char *have = NULL;
    size_t hlen = 0;
    char mp[PATH_MAX];
    if (store_path(s, mp, sizeof mp, "releases/%s/MANIFEST", id) < 0 ||
        fs_read_file(mp, MANIFEST2_MAX_BYTES, &have, &hlen) < 0 || hlen != len || memcmp(have, text, len))
        goto out;
    for (size_t i = 0; i < m->n; i++) {
        const struct m2_entry *e = &m->e[i];
        struct stat st;
        if (ret_bad)
            *ret_bad = e->path;
        if (fstatat(dfd, e->path, &st, AT_SYMLINK_NOFOLLOW) < 0)
            goto out;
        if (e->type == M2_DIR && !S_ISDIR(st.st_mode))
            goto out;
        if (e->type == M2_FILE && (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != e->size))
            goto out;
        if (e->type == M2_LINK) {
            char t[MANIFEST2_PATH_MAX];
            ssize_t n = S_ISLNK(st.st_mode) ? readlinkat(dfd, e->path, t, sizeof t - 1) : -1;
            if (n < 0)
                goto out;
            t[n] = '\0';
            if (strcmp(t, e->target))
                goto out;
        }
    }
    ok = true;
    if (ret_bad)
        *ret_bad = NULL;
out:
    free(have);
    close(dfd);
    return ok;
}

static int damaged_path(const struct store *s, char *buf, size_t sz, const char *id)
{
    return store_path(s, buf, sz, "releases/.damaged.%s", id);
}

/* Marked damaged by a verify that failed: not present until installed again. */
static bool is_damaged(const struct store *s, const char *id)
{
    char p[PATH_MAX];
    struct stat st;
    return damaged_path(s, p, sizeof p, id) == 0 && lstat(p, &st) == 0;
}

static void mark_damaged(const struct store *s, const char *id, const char *why)
{
    char p[PATH_MAX];
    if (damaged_path(s, p, sizeof p, id) == 0)
        (void)fs_write_atomic(p, why, strlen(why), 0600);
}

void objstore_forget_release(const struct store *s, const char *id)
{
    char p[PATH_MAX];
    if (damaged_path(s, p, sizeof p, id) == 0)
        (void)unlink(p);
}

/* The objects of m's files whose content no longer matches their name, removed, so that they
 * count as missing and the controller sends them again: a release file is a hardlink to its
 * object, so a worker that writes into its release directory writes into the object, and a
 * rebuild from that object would link the same damage again ("deploy it again" could never
 * work).  Bounded: an object of the wrong size goes at once; one whose inode is still the one
 * recorded when it was last hashed (vrecord.h) is not read; only the others are hashed.  Called
 * for a release found damaged only, never for every deploy.  Each removed object is written to
 * resend as "resend <sha256>\n" (may be NULL).  Returns how many were removed. */
static int drop_bad_objects(const struct store *s, const struct manifest2 *m, FILE *resend)
{
    static const uint32_t common[] = { 0444, 0555 };
    struct vrecord vr = { 0 };
    int n = 0;
    if (vrecord_load(s, &vr) < 0)
        return 0;
    for (size_t i = 0; i < m->n; i++) {
        const struct m2_entry *e = &m->e[i];
        if (e->type != M2_FILE)
            continue;
        uint32_t modes[3] = { obj_mode(e->mode), common[0], common[1] };
        for (size_t k = 0; k < ARRAY_SIZE(modes); k++) {
            char op[PATH_MAX];
            struct stat st;
            if ((k && modes[k] == modes[0]) || obj_path(s, op, sizeof op, e->sha256, modes[k]) < 0 ||
                lstat(op, &st) < 0 || !S_ISREG(st.st_mode))
                continue;
            bool bad = (uint64_t)st.st_size != e->size;
            enum vrec_match vm = bad ? VREC_NO : vrecord_matches(&vr, e->sha256, modes[k], &st);
            if (vm == VREC_LINKED)
                (void)vrecord_put(&vr, e->sha256, modes[k], &st);
            if (!bad && vm == VREC_NO) {
                int fd = open(op, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                char hex[SHA256_HEX_LEN + 1];
                uint64_t size = 0;
                int h = fd < 0 ? -errno : fstat(fd, &st) < 0 ? -errno : sha256_fd_hex(fd, hex, &size);
                if (fd >= 0)
                    close(fd);
                if (h == -ENOENT)
                    continue;
                bad = h < 0 || size != e->size || strcmp(hex, e->sha256);
                if (!bad)
                    (void)vrecord_put(&vr, e->sha256, modes[k], &st);
            }
            if (!bad || unlink(op) < 0)
                continue;
            log_warn("store: removed object %.12s (file '%s'): its content no longer matches its name; it is "
                     "sent again", e->sha256, e->path);
            (void)vrecord_forget(&vr, e->sha256, modes[k]);
            if (resend)
                fprintf(resend, "resend %s\n", e->sha256);
            n++;
        }
    }
    (void)vrecord_save(s, &vr, AGENT_LOCK_TIMEOUT_S);
    vrecord_done(&vr);
    return n;
}

bool objstore_have(const struct store *s, const char *id)
{
    char p[PATH_MAX], got[RELEASE_ID_LEN + 1], env[RELEASE_ID_LEN + 1];
    char *text = NULL;
    size_t len = 0;
    /* a release whose environment was found damaged is not present either: the controller
     * then sends both again (the environment first) */
    if (!sha256_is_hex(id) || !store_has_release(s, id) || is_damaged(s, id) ||
        (objstore_release_env(s, id, env) == 0 && env[0] && is_damaged(s, env)) ||
        store_path(s, p, sizeof p, "releases/%s/MANIFEST", id) < 0 ||
        fs_read_file(p, MANIFEST2_MAX_BYTES, &text, &len) < 0)
        return false;
    bool ok = sha256_buf_hex(text, len, got) == 0 && !strcmp(got, id);
    free(text);
    return ok;
}

static int verify_one(const struct store *s, const char *id, const char *what, struct objstore_vstats *vs,
                      char *err, size_t errsz);

/* Is id present by objstore_have's record and is its own tree still what its manifest says, by
 * the cheap verify (verify_one: a stat per entry, a re-hash only where vrecord.h says the inode
 * changed)?  1 present and intact; 0 not present; -EBADMSG found damaged: marked and its changed
 * objects removed (verify_one), so that the answer asks for them and the install that follows
 * rebuilds it in this same deploy, instead of an activation-time verify failing the deploy;
 * other -errno: the verify could not run.  Its environment is not walked: the controller asks
 * about it first, on its own. */
static int have_intact(const struct store *s, const char *id, struct objstore_vstats *vs)
{
    char err[512] = "";
    if (!objstore_have(s, id))
        return 0;
    int r = verify_one(s, id, "release", vs, err, sizeof err);
    if (r == -ENOENT) /* removed since objstore_have looked (GC) */
        return 0;
    if (r == -EBADMSG)
        log_warn("store: release %.12s, recorded as installed, failed its verify; what changed is asked for "
                 "again and the install that follows rebuilds it (%s)", id, err);
    return r < 0 ? r : 1;
}

bool objstore_have_intact(const struct store *s, const char *id)
{
    return have_intact(s, id, NULL) == 1;
}

int objstore_missing(const struct store *s, const struct manifest2 *m, const char *id, struct objstore_vstats *vs,
                     struct m2_ranges *ret, bool *ret_present)
{
    char *text;
    size_t len;
    char got[RELEASE_ID_LEN + 1];
    int r = manifest2_dump(m, &text, &len, got);
    if (r < 0)
        return r;
    free(text);
    /* The record of a verified install, then the cheap re-verify of its tree: a file of it
     * changed on disk is found here, where the controller can still send it, and not by the
     * verify before activation, which could only fail the deploy. */
    int h = strcmp(got, id) ? 0 : have_intact(s, id, vs);
    if (h < 0 && h != -EBADMSG)
        return h;
    bool present = h == 1;
    /* A release found damaged before (or whose environment was): the objects that changed with it
     * go first, so that they are asked for instead of being linked again (have_intact did so for
     * one it found damaged just now). */
    if (!present && h != -EBADMSG && (is_damaged(s, got) || store_has_release(s, got)))
        (void)drop_bad_objects(s, m, NULL);
    struct m2_ranges rg = { 0 };
    if (!present)
        for (size_t i = 0; i < m->n && r == 0; i++) {
            char p[PATH_MAX];
            const struct m2_entry *e = &m->e[i];
            if (e->type == M2_FILE && !obj_find(s, e->sha256, obj_mode(e->mode), p, sizeof p))
                r = m2_ranges_add(&rg, i);
        }
    if (r == 0)
        r = m2_ranges_finish(&rg);
    if (r < 0) {
        m2_ranges_done(&rg);
        return r;
    }
    *ret = rg;
    *ret_present = present;
    return 0;
}

struct want {
    const char *sha;
    uint64_t size;
    uint32_t mode;
    const char *path;
    bool staged; /* written and verified under its temp name, renamed at commit */
};

static int want_cmp(const void *a, const void *b)
{
    return strcmp(((const struct want *)a)->sha, ((const struct want *)b)->sha);
}

static int staged_path(const struct store *s, char *buf, size_t sz, const char *sha)
{
    return store_path(s, buf, sz, "objects/.tmp.%s.%ld", sha, (long)getpid());
}

/* Write one object from the reader into objects/.tmp.<sha>.<pid>, verifying size and SHA-256
 * as it streams; it is renamed into objects/ by commit_staged, after one syncfs for the whole
 * pack (an fsync per object cost a disk flush per file: 200,000 of them for a venv). */
static int ingest_one(const struct store *s, struct pack_reader *pr, const struct want *w, char *buf,
                      bool *ret_corrupt)
{
    char tmp[PATH_MAX];
    int r;
    if ((r = staged_path(s, tmp, sizeof tmp, w->sha)) < 0)
        return r;
    (void)unlink(tmp); /* ours (same pid) from an earlier member of this very pack */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    struct sha256_ctx *h = sha256_new();
    uint64_t done = 0;
    r = h ? 0 : -ENOMEM;
    while (r == 0) {
        ssize_t n = pack_reader_read(pr, buf, OBJ_CHUNK);
        if (n < 0) {
            r = (int)n;
            break;
        }
        if (n == 0)
            break;
        if ((uint64_t)n > w->size - done) { /* never more than the manifest declares */
            r = -EBADMSG;
            break;
        }
        done += (uint64_t)n;
        if ((r = sha256_update(h, buf, (size_t)n)) == 0)
            r = fd_write_all(fd, buf, (size_t)n);
    }
    char hex[SHA256_HEX_LEN + 1];
    if (r == 0 && (r = sha256_final_hex(h, hex)) == 0 && (done != w->size || strcmp(hex, w->sha))) {
        *ret_corrupt = true;
        r = -EBADMSG;
    }
    if (r == 0 && fchmod(fd, obj_mode(w->mode)) < 0)
        r = -errno;
    sha256_free(h);
    close(fd);
    if (r < 0)
        (void)unlink(tmp);
    return r;
}

/* The staged objects of wv: their data made durable at once (syncfs), then each renamed to
 * objects/<sha>.<mode> and recorded as verified (hashed just now; its inode after the rename,
 * which moves ctime).  An object appears under its name only with its bytes on disk. */
static int commit_staged(const struct store *s, struct want *wv, size_t nw, size_t nstaged)
{
    if (!nstaged)
        return 0;
    char od[PATH_MAX], tmp[PATH_MAX], fin[PATH_MAX];
    int r = store_path(s, od, sizeof od, "objects");
    if (r < 0)
        return r;
    int dfd = open(od, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -errno;
    if (syncfs(dfd) < 0)
        r = -errno;
    close(dfd);
    struct vrecord vr = { 0 };
    for (size_t i = 0; i < nw; i++) {
        struct want *w = &wv[i];
        if (!w->staged)
            continue;
        w->staged = false;
        struct stat st;
        if (staged_path(s, tmp, sizeof tmp, w->sha) < 0 || obj_path(s, fin, sizeof fin, w->sha, obj_mode(w->mode)) < 0)
            continue;
        if (r < 0 || rename(tmp, fin) < 0) {
            r = r < 0 ? r : -errno;
            (void)unlink(tmp);
            continue;
        }
        if (lstat(fin, &st) == 0)
            (void)vrecord_put(&vr, w->sha, obj_mode(w->mode), &st);
    }
    (void)vrecord_save(s, &vr, AGENT_LOCK_TIMEOUT_S);
    vrecord_done(&vr);
    if (r == 0)
        r = fs_fsync_dir(od);
    return r;
}

static int ingest_pack(const struct store *s, const struct manifest2 *m, const char *pack, FILE *corrupt,
                       char *err, size_t errsz)
{
    size_t nstaged = 0;
    struct want *wv = calloc(m->nfiles ? m->nfiles : 1, sizeof *wv);
    char *buf = malloc(OBJ_CHUNK);
    struct pack_reader *pr = NULL;
    int r = wv && buf ? 0 : -ENOMEM;
    size_t nw = 0;
    for (size_t i = 0; r == 0 && i < m->n; i++)
        if (m->e[i].type == M2_FILE)
            wv[nw++] = (struct want){ m->e[i].sha256, m->e[i].size, m->e[i].mode, m->e[i].path, false };
    if (r == 0)
        qsort(wv, nw, sizeof *wv, want_cmp);
    if (r == 0 && (r = pack_reader_open(pack, &pr)) < 0)
        reason(err, errsz, "cannot read pack '%s': %s", pack, strerror(-r));
    int bad = 0;
    size_t added = 0;
    while (r == 0) {
        char sha[SHA256_HEX_LEN + 1];
        uint64_t size;
        int n = pack_reader_next(pr, sha, &size);
        if (n == 0)
            break;
        if (n < 0) {
            reason(err, errsz, "pack '%s' is damaged (not a tar of objects)", pack);
            r = n;
            break;
        }
        struct want key = { .sha = sha }, *w = bsearch(&key, wv, nw, sizeof *wv, want_cmp);
        char p[PATH_MAX];
        if (!w || w->size != size) {
            /* Not ours, or not the size the manifest declares: never written. */
            if (corrupt)
                fprintf(corrupt, "corrupt %s\n", sha);
            reason(err, errsz, "pack object %.12s: %s", sha, w ? "size differs from the manifest" : "not in the manifest");
            bad++;
            continue;
        }
        if (w->staged || obj_find(s, w->sha, obj_mode(w->mode), p, sizeof p))
            continue; /* have it; the reader skips the data */
        bool is_corrupt = false;
        int e = ingest_one(s, pr, w, buf, &is_corrupt);
        if (is_corrupt) {
            if (corrupt)
                fprintf(corrupt, "corrupt %s\n", sha);
            reason(err, errsz, "object %.12s (file '%s') does not match its sha256", sha, w->path);
            bad++;
            continue;
        }
        if (e < 0) {
            reason(err, errsz, "cannot store object for '%s': %s", w->path, strerror(-e));
            r = e;
            break;
        }
        w->staged = true;
        nstaged++;
        added++;
    }
    /* also after a failure: what arrived intact is kept (a retry sends only the rest) */
    int c = commit_staged(s, wv, nw, nstaged);
    if (r == 0 && c < 0) {
        reason(err, errsz, "cannot store objects: %s", strerror(-c));
        r = c;
    }
    if (r == 0 && bad)
        r = -EBADMSG;
    if (r == 0)
        log_debug("store: %zu objects added from '%s'", added, pack);
    pack_reader_free(pr);
    free(buf);
    free(wv);
    return r;
}

/* Copy object src into a new object file for another mode (modes differ, so no hardlink). */
static int obj_copy(const struct store *s, const char *src, const char *sha, uint32_t mode, const char *dst)
{
    char tmp[PATH_MAX];
    int r = store_path(s, tmp, sizeof tmp, "objects/.tmp.%s.%ld", sha, (long)getpid());
    if (r < 0)
        return r;
    int in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0)
        return -errno;
    (void)unlink(tmp);
    int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0) {
        r = -errno;
        close(in);
        return r;
    }
    char *buf = malloc(OBJ_CHUNK);
    r = buf ? 0 : -ENOMEM;
    while (r == 0) {
        ssize_t n = read(in, buf, OBJ_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            r = n < 0 ? -errno : 0;
            break;
        }
        r = fd_write_all(out, buf, (size_t)n);
    }
    free(buf);
    if (r == 0 && (fchmod(out, mode) < 0 || fsync(out) < 0))
        r = -errno;
    close(in);
    close(out);
    if (r == 0 && rename(tmp, dst) < 0)
        r = -errno;
    if (r < 0)
        (void)unlink(tmp);
    return r;
}

static int place_file(const struct store *s, int dfd, const struct m2_entry *e, struct vrecord *vr, char *err,
                      size_t errsz)
{
    char want[PATH_MAX], have[PATH_MAX];
    uint32_t mode = obj_mode(e->mode);
    int r = obj_path(s, want, sizeof want, e->sha256, mode);
    if (r < 0)
        return r;
    if (!obj_find(s, e->sha256, mode, have, sizeof have)) {
        reason(err, errsz, "object %.12s for '%s' is not in the store (send it in the pack)", e->sha256, e->path);
        return -ENOENT;
    }
    if (strcmp(want, have) && (r = obj_copy(s, have, e->sha256, mode, want)) < 0) {
        reason(err, errsz, "cannot make object for '%s': %s", e->path, strerror(-r));
        return r;
    }
    /* The link moves the object's ctime and link count: a recorded object stays recorded. */
    struct stat st;
    bool recorded = lstat(want, &st) == 0 && vrecord_matches(vr, e->sha256, mode, &st) != VREC_NO;
    if (linkat(AT_FDCWD, want, dfd, e->path, 0) == 0) {
        if (recorded && lstat(want, &st) == 0)
            (void)vrecord_put(vr, e->sha256, mode, &st);
        return 0;
    }
    if (errno != EMLINK) {
        r = -errno;
        reason(err, errsz, "cannot link '%s': %s", e->path, strerror(-r));
        return r;
    }
    /* The filesystem's link limit (ext4: 65000) for a very common object: a private copy. */
    char tmpname[PATH_MAX];
    if (store_path(s, tmpname, sizeof tmpname, "objects/.tmp.%s.copy.%ld", e->sha256, (long)getpid()) < 0)
        return -ENAMETOOLONG;
    if ((r = obj_copy(s, want, e->sha256, mode, tmpname)) < 0)
        return r;
    r = linkat(AT_FDCWD, tmpname, dfd, e->path, 0) < 0 ? -errno : 0;
    (void)unlink(tmpname);
    return r;
}

/* Puts the assembled tree tmp in place of the damaged fin, which stays where it is until then:
 * a job's `current` link never points at nothing, whether the rebuild fails or the agent is
 * killed during it.  RENAME_EXCHANGE swaps them in one step; where the filesystem has no
 * exchange (EINVAL), the damaged tree is renamed away and the new one in, two renames apart.
 * The damaged tree, at tmp afterwards (or old), is removed as a release is. */
static int replace_release(const struct store *s, const char *tmp, const char *fin, char *err, size_t errsz)
{
    int r = renameat2(AT_FDCWD, tmp, AT_FDCWD, fin, RENAME_EXCHANGE) < 0 ? -errno : 0;
    if (r == 0) {
        objstore_rm_tree(s, tmp);
        return 0;
    }
    if (r == -ENOENT) /* fin went meanwhile (a gc): a plain rename */
        return rename(tmp, fin) < 0 ? -errno : 0;
    if (r == -EINVAL || r == -ENOSYS) {
        char old[PATH_MAX]; /* "<id>.old.tmp.<pid>": stale by its pid if the agent dies here */
        int n = (int)(strrchr(tmp, '/') - tmp) + 1 + RELEASE_ID_LEN;
        if (snprintf(old, sizeof old, "%.*s.old%s", n, tmp, tmp + n) >= (int)sizeof old)
            return -ENAMETOOLONG;
        if (rename(fin, old) < 0 || rename(tmp, fin) < 0)
            r = -errno;
        else
            r = 0;
        objstore_rm_tree(s, old);
        if (r == 0)
            return 0;
    }
    reason(err, errsz, "cannot put the rebuilt release in place of the damaged one: %s", strerror(-r));
    return r;
}

static int assemble(const struct store *s, const struct manifest2 *m, const char *id, const char *text,
                    size_t len, bool replace, FILE *resend, char *err, size_t errsz)
{
    char tmp[PATH_MAX], fin[PATH_MAX], rel[PATH_MAX];
    int r;
    if ((r = store_path(s, tmp, sizeof tmp, "releases/%s.tmp.%ld", id, (long)getpid())) < 0 ||
        (r = store_path(s, fin, sizeof fin, "releases/%s", id)) < 0 ||
        (r = store_path(s, rel, sizeof rel, "releases")) < 0)
        return r;
    (void)fs_rm_rf(tmp); /* ours: same pid */
    if (mkdir(tmp, 0755) < 0)
        return -errno;
    struct vrecord vr = { 0 };
    int dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0 || (r = vrecord_load(s, &vr)) < 0) {
        r = dfd < 0 ? -errno : r;
        if (dfd >= 0)
            close(dfd);
        goto fail;
    }
    for (size_t i = 0; i < m->n && r == 0; i++) {
        const struct m2_entry *e = &m->e[i];
        if (e->type == M2_DIR) {
            if (mkdirat(dfd, e->path, 0700) < 0)
                r = -errno;
        } else if (e->type == M2_LINK) {
            if (symlinkat(e->target, dfd, e->path) < 0)
                r = -errno;
        } else {
            r = place_file(s, dfd, e, &vr, err, errsz);
            continue;
        }
        if (r < 0)
            reason(err, errsz, "cannot create '%s': %s", e->path, strerror(-r));
    }
    if (r == 0 && m->env[0]) {
        char target[RELEASE_ID_LEN + 8];
        snprintf(target, sizeof target, "../%s", m->env);
        if (symlinkat(target, dfd, OBJSTORE_ENV_LINK) < 0) {
            r = -errno;
            reason(err, errsz, "cannot link the environment: %s", strerror(-r));
        }
    }
    if (r == 0) {
        int mf = openat(dfd, "MANIFEST", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
        if (mf < 0 || fd_write_all(mf, text, len) < 0)
            r = -EIO;
        if (mf >= 0)
            close(mf);
    }
    /* Directory modes last (children first), so a read-only directory is filled before. */
    for (size_t i = m->n; r == 0 && i-- > 0;)
        if (m->e[i].type == M2_DIR && fchmodat(dfd, m->e[i].path, m->e[i].mode, 0) < 0)
            r = -errno;
    if (r == 0 && syncfs(dfd) < 0)
        r = -errno;
    close(dfd);
    (void)vrecord_save(s, &vr, AGENT_LOCK_TIMEOUT_S);
    vrecord_done(&vr);
    if (r < 0)
        goto fail;
    /* Completeness against the manifest before the rename: what appears under releases/<id>
     * is exactly what the manifest lists. */
    char tname[RELEASE_ID_LEN + 32];
    snprintf(tname, sizeof tname, "%s.tmp.%ld", id, (long)getpid());
    if (!release_intact(s, m, tname, text, len, NULL)) {
        /* An object it links was changed in place (written through another release's file):
         * removed, so that the next ask sends it again, never linked again. */
        int nbad = drop_bad_objects(s, m, resend);
        if (nbad)
            reason(err, errsz, "assembled release %.12s does not match its manifest: %d %s no longer "
                   "matched %s sha256 and %s removed from the store, to be sent again", id, nbad,
                   nbad == 1 ? "object" : "objects", nbad == 1 ? "its" : "their", nbad == 1 ? "was" : "were");
        else
            reason(err, errsz, "assembled release %.12s does not match its manifest", id);
        r = nbad ? -ESTALE : -EIO;
        goto fail;
    }
    if (replace) {
        if ((r = replace_release(s, tmp, fin, err, errsz)) < 0)
            goto fail;
        (void)fs_fsync_dir(rel);
        return 0;
    }
    if (rename(tmp, fin) < 0) {
        r = -errno;
        (void)fs_rm_rf(tmp);
        if (r == -EEXIST || r == -ENOTEMPTY)
            return 1; /* another add won: same content */
        reason(err, errsz, "rename into releases/: %s", strerror(-r));
        return r;
    }
    (void)fs_fsync_dir(rel);
    return 0;
fail:
    (void)fs_rm_rf(tmp);
    return r;
}

void objstore_rm_tree(const struct store *s, const char *dir)
{
    char mp[PATH_MAX], op[PATH_MAX];
    char *text = NULL;
    size_t len = 0;
    struct manifest2 *m = NULL;
    struct vrecord vr = { 0 };
    bool *kept = NULL;
    if (snprintf(mp, sizeof mp, "%s/MANIFEST", dir) < (int)sizeof mp &&
        fs_read_file(mp, MANIFEST2_MAX_BYTES, &text, &len) == 0 && manifest2_parse(text, len, &m) == 0 &&
        vrecord_load(s, &vr) == 0 && (kept = calloc(m->n ? m->n : 1, sizeof *kept))) {
        for (size_t i = 0; i < m->n; i++) {
            struct stat st;
            const struct m2_entry *e = &m->e[i];
            kept[i] = e->type == M2_FILE && obj_path(s, op, sizeof op, e->sha256, obj_mode(e->mode)) == 0 &&
                      lstat(op, &st) == 0 && vrecord_matches(&vr, e->sha256, obj_mode(e->mode), &st) != VREC_NO;
        }
    }
    (void)fs_rm_rf(dir);
    /* Every unlink moved the ctime and link count of the objects it shared: a recorded object
     * stays recorded (otherwise a GC then an install, -1 then +1 link, would look like a write). */
    for (size_t i = 0; kept && i < m->n; i++) {
        struct stat st;
        const struct m2_entry *e = &m->e[i];
        if (kept[i] && obj_path(s, op, sizeof op, e->sha256, obj_mode(e->mode)) == 0 && lstat(op, &st) == 0)
            (void)vrecord_put(&vr, e->sha256, obj_mode(e->mode), &st);
    }
    (void)vrecord_save(s, &vr, AGENT_LOCK_TIMEOUT_S);
    vrecord_done(&vr);
    free(kept);
    manifest2_free(m);
    free(text);
}

int objstore_add(const struct store *s, const char *text, size_t len, const char *id, const char *pack,
                 FILE *corrupt, char *err, size_t errsz)
{
    struct manifest2 *m = NULL;
    char got[RELEASE_ID_LEN + 1];
    int r = manifest2_parse(text, len, &m);
    if (r < 0) {
        reason(err, errsz, "manifest is not a valid v2 manifest (%s)", strerror(-r));
        return r == -E2BIG ? r : -EINVAL;
    }
    if ((r = sha256_buf_hex(text, len, got)) < 0)
        goto out;
    if (strcmp(got, id)) {
        reason(err, errsz, "manifest has id %.12s, not %.12s", got, id);
        r = -EBADMSG;
        goto out;
    }
    if (manifest2_find(m, OBJSTORE_ENV_LINK)) {
        reason(err, errsz, "a release may not hold '%s' (the environment link)", OBJSTORE_ENV_LINK);
        r = -EINVAL;
        goto out;
    }
    if (m->env[0] && !store_has_release(s, m->env)) {
        reason(err, errsz, "environment release %.12s is not in the store (add it first)", m->env);
        r = -EINVAL;
        goto out;
    }
    objstore_clean_stale(s, NULL);
    bool replace = store_has_release(s, id);
    if (replace) {
        if (!is_damaged(s, id) && release_intact(s, m, id, text, len, NULL)) {
            r = 1;
            goto out;
        }
        /* Damaged (someone wrote into it, a disk error): rebuilt from objects, never kept.  It
         * stays in place, marked (not present to anyone), until the rebuilt tree replaces it. */
        log_warn("store: release %.12s is damaged; rebuilding it", id);
        if (!is_damaged(s, id))
            mark_damaged(s, id, "its tree did not match its manifest at install; being rebuilt");
    }
    if (pack && (r = ingest_pack(s, m, pack, corrupt, err, errsz)) < 0)
        goto out;
    r = assemble(s, m, id, text, len, replace, corrupt, err, errsz);
    if (r >= 0)
        objstore_forget_release(s, id); /* a damaged mark, from a verify that failed */
out:
    manifest2_free(m);
    return r;
}

int objstore_gc_objects(const struct store *s)
{
    char p[PATH_MAX];
    int r = store_path(s, p, sizeof p, "objects");
    if (r < 0)
        return r;
    DIR *d = opendir(p);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    int n = 0;
    struct dirent *de;
    /* CLOCK_REALTIME at full precision, not time(NULL): the kernel may stamp ctime from the
     * fine clock while time() reads the coarse one a tick behind, so at a second boundary a
     * just-unlinked object looked one second younger than now (age -1 < grace 0: kept). */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct vrecord vr = { 0 };
    while ((de = readdir(d))) {
        struct stat st;
        /* ctime changes with every link and rename: an object that arrived or lost its last
         * release less than OBJSTORE_GC_GRACE_S ago may be about to be linked by an install
         * running right now (objects arrive before the release is assembled). */
        if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
            (double)(now.tv_sec - st.st_ctim.tv_sec) + (now.tv_nsec - st.st_ctim.tv_nsec) * 1e-9 < objstore_gc_grace_s)
            continue;
        if (unlinkat(dirfd(d), de->d_name, 0) == 0) {
            n++;
            char sha[SHA256_HEX_LEN + 1];
            unsigned mode;
            if (sscanf(de->d_name, "%64[0-9a-f].%o", sha, &mode) == 2)
                (void)vrecord_forget(&vr, sha, mode);
        }
    }
    closedir(d);
    (void)vrecord_save(s, &vr, AGENT_LOCK_TIMEOUT_S);
    vrecord_done(&vr);
    return n;
}

int objstore_release_env(const struct store *s, const char *id, char ret_env[RELEASE_ID_LEN + 1])
{
    char p[PATH_MAX], t[128];
    int r = store_path(s, p, sizeof p, "releases/%s/" OBJSTORE_ENV_LINK, id);
    if (r < 0)
        return r;
    ssize_t n = readlink(p, t, sizeof t - 1);
    if (n < 0) {
        if (errno != ENOENT)
            return -errno;
        ret_env[0] = '\0';
        return 0;
    }
    t[n] = '\0';
    if (strncmp(t, "../", 3) || !sha256_is_hex(t + 3))
        return -EINVAL;
    memcpy(ret_env, t + 3, RELEASE_ID_LEN + 1);
    return 0;
}

int objstore_release_name(const struct store *s, const char *id, char ret_name[MANIFEST_NAME_MAX])
{
    char p[PATH_MAX], head[MANIFEST2_HEAD_MAX];
    int r = store_path(s, p, sizeof p, "releases/%s/MANIFEST", id);
    if (r < 0)
        return r;
    int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, head, sizeof head);
    r = n < 0 ? -errno : 0;
    close(fd);
    return r < 0 ? r : manifest2_name_of(head, (size_t)n, ret_name);
}

/* Hash entry e of the release open at dfd; *ret_st gets its inode as hashed. */
static int hash_entry(int dfd, const struct m2_entry *e, struct stat *ret_st, bool *ret_ok)
{
    int fd = openat(dfd, e->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char hex[SHA256_HEX_LEN + 1];
    uint64_t size = 0;
    int r = fstat(fd, ret_st) < 0 ? -errno : sha256_fd_hex(fd, hex, &size);
    close(fd);
    if (r == 0)
        *ret_ok = size == e->size && !strcmp(hex, e->sha256);
    return r;
}

/* A file of release id found changed: its record goes, and its object too when it is the very
 * inode (a hardlink: the object is as corrupt as the entry), so `release missing` asks for it
 * and the next install re-sends and rebuilds. */
static void drop_corrupt(const struct store *s, struct vrecord *vr, const struct m2_entry *e, const struct stat *est)
{
    char op[PATH_MAX];
    struct stat ost;
    uint32_t mode = obj_mode(e->mode);
    (void)vrecord_forget(vr, e->sha256, mode);
    if (obj_path(s, op, sizeof op, e->sha256, mode) == 0 && lstat(op, &ost) == 0 && est &&
        ost.st_dev == est->st_dev && ost.st_ino == est->st_ino) {
        log_debug("store: removing object %.12s: its content no longer matches its name", e->sha256);
        (void)unlink(op);
    }
}

/* Verify one release (not the environment it names).  what: "release" or "environment". */
static int verify_one(const struct store *s, const char *id, const char *what, struct objstore_vstats *vs,
                      char *err, size_t errsz)
{
    char p[PATH_MAX], *text = NULL;
    size_t len = 0;
    struct manifest2 *m = NULL;
    struct vrecord vr = { 0 };
    char got[RELEASE_ID_LEN + 1];
    int dfd = -1;
    const char *bad = NULL;
    if (!store_has_release(s, id)) {
        reason(err, errsz, "%s %.12s is not in the store", what, id);
        return -ENOENT;
    }
    int r = store_path(s, p, sizeof p, "releases/%s/MANIFEST", id);
    if (r == 0 && ((r = fs_read_file(p, MANIFEST2_MAX_BYTES, &text, &len)) < 0 ||
                   (r = manifest2_parse(text, len, &m)) < 0)) {
        reason(err, errsz, "%s %.12s: MANIFEST unreadable: %s", what, id, strerror(-r));
        r = -EBADMSG;
        goto out;
    }
    if (r < 0)
        goto out;
    if ((r = sha256_buf_hex(text, len, got)) < 0 || strcmp(got, id)) {
        reason(err, errsz, "%s %.12s: its MANIFEST is not the release's", what, id);
        r = -EBADMSG;
        goto out;
    }
    if (!release_intact(s, m, id, text, len, &bad)) {
        if (bad)
            reason(err, errsz, "%s %.12s: '%s' is missing or not what the manifest says (type, size or "
                   "link target); the release is marked damaged: deploy it again and drover rebuilds it",
                   what, id, bad);
        else
            reason(err, errsz, "%s %.12s: its tree does not match its MANIFEST; the release is marked damaged: "
                   "deploy it again and drover rebuilds it", what, id);
        mark_damaged(s, id, err);
        r = -EBADMSG;
        goto out;
    }
    if ((r = vrecord_load(s, &vr)) < 0 || (r = store_path(s, p, sizeof p, "releases/%s", id)) < 0)
        goto out;
    if ((dfd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        r = -errno;
        goto out;
    }
    /* The contents, file by file: an entry whose inode is still the one recorded when it was
     * last hashed is not read again (vrecord.h: the rule and what it leaves uncaught). */
    for (size_t i = 0; i < m->n; i++) {
        const struct m2_entry *e = &m->e[i];
        if (e->type != M2_FILE)
            continue;
        struct stat st;
        enum vrec_match vm = fstatat(dfd, e->path, &st, AT_SYMLINK_NOFOLLOW) == 0
                                 ? vrecord_matches(&vr, e->sha256, obj_mode(e->mode), &st)
                                 : VREC_NO;
        if (vm != VREC_NO) {
            if (vm == VREC_LINKED)
                (void)vrecord_put(&vr, e->sha256, obj_mode(e->mode), &st);
            if (vs)
                vs->stat_only++;
            continue;
        }
        bool ok = false;
        int h = hash_entry(dfd, e, &st, &ok);
        if (vs) {
            vs->hashed++;
            vs->bytes_hashed += e->size;
        }
        if (h == 0 && ok) {
            (void)vrecord_put(&vr, e->sha256, obj_mode(e->mode), &st);
            continue;
        }
        drop_corrupt(s, &vr, e, h == 0 ? &st : NULL);
        if (h < 0)
            reason(err, errsz, "%s %.12s: cannot read '%s': %s; the release is marked damaged: deploy it again "
                   "and drover sends that file again", what, id, e->path, strerror(-h));
        else
            reason(err, errsz, "%s %.12s: '%s' does not match its manifest (its content changed after it was "
                   "installed); the release is marked damaged: deploy it again and drover sends that file again",
                   what, id, e->path);
        mark_damaged(s, id, err);
        r = -EBADMSG;
        goto out;
    }
    r = 0;
out:
    (void)vrecord_save(s, &vr, AGENT_LOCK_TIMEOUT_S); /* what was hashed (and found right or wrong) is remembered */
    vrecord_done(&vr);
    if (r == -EBADMSG && m)
        (void)drop_bad_objects(s, m, NULL); /* a changed object is sent again, never relinked */
    if (dfd >= 0)
        close(dfd);
    manifest2_free(m);
    free(text);
    return r;
}

int objstore_verify_stats(const struct store *s, const char *id, struct objstore_vstats *vs, char *err,
                          size_t errsz)
{
    char env[RELEASE_ID_LEN + 1];
    int r = verify_one(s, id, "release", vs, err, errsz);
    if (r < 0)
        return r;
    /* The environment it runs with is part of what is reactivated. */
    if ((r = objstore_release_env(s, id, env)) < 0) {
        reason(err, errsz, "release %.12s: its environment link is not one drover made", id);
        return -EBADMSG;
    }
    if (!env[0])
        return 0;
    char e2[512];
    r = verify_one(s, env, "environment", vs, e2, sizeof e2);
    if (r < 0) {
        reason(err, errsz, "release %.12s: %s", id, e2);
        return r == -ENOENT ? -EBADMSG : r;
    }
    return 0;
}

int objstore_verify(const struct store *s, const char *id, char *err, size_t errsz)
{
    return objstore_verify_stats(s, id, NULL, err, errsz);
}
