/* agent/store.c: the release store (see store.h).  Owns releases/, jobs/<job>/current and
 * incoming/.  Invariants: releases/<id> only ever appears by rename of a fully verified and
 * fsynced tree; a `current` link only ever changes by rename; runs/ is never touched here except
 * to create it.  Never starts or stops processes. */
#include "agent/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/objstore.h"
#include "common/bundle.h"
#include "common/manifest.h"
#include "common/sha256.h"
#include "common/log.h"
#include "common/util.h"

int store_path(const struct store *s, char *buf, size_t sz, const char *fmt, ...)
{
    int n = snprintf(buf, sz, "%s/", s->root);
    if (n < 0 || (size_t)n >= sz)
        return -ENAMETOOLONG;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sz - (size_t)n, fmt, ap);
    va_end(ap);
    if (m < 0 || (size_t)m >= sz - (size_t)n)
        return -ENAMETOOLONG;
    return 0;
}

/* A temp entry "<name>.tmp.<pid>[.x]" is stale only when its process is gone (or ".tmp.gc", an
 * interrupted GC): an add or switch running in another process right now is never touched. */
static bool tmp_owner_gone(const char *name)
{
    const char *t = strstr(name, ".tmp.");
    if (!t)
        return false;
    t += 5;
    if (!strcmp(t, "gc"))
        return true;
    char *end;
    long pid = strtol(t, &end, 10);
    if (end == t || pid <= 0 || (*end && *end != '.'))
        return false;
    return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

static void store_clean_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!tmp_owner_gone(de->d_name))
            continue;
        char p[PATH_MAX];
        if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= (int)sizeof p)
            continue;
        log_info("store: removing stale '%s'", p);
        (void)fs_rm_rf(p);
    }
    closedir(d);
}

int store_open(struct store *s, const char *root)
{
    if (!root[0] || str_copy(s->root, sizeof s->root, root) < 0)
        return -ENAMETOOLONG;
    int r = fs_mkdir_p(root, 0700);
    if (r < 0)
        return r;
    static const char *const sub[] = {"releases", "jobs", "incoming", "runs", "objects"};
    char p[PATH_MAX];
    for (size_t i = 0; i < ARRAY_SIZE(sub); i++) {
        if ((r = store_path(s, p, sizeof p, "%s", sub[i])) < 0 || (r = fs_mkdir_p(p, 0700)) < 0)
            return r;
    }
    (void)store_path(s, p, sizeof p, "releases");
    store_clean_tmp(p);
    (void)store_path(s, p, sizeof p, "jobs");
    DIR *d = opendir(p);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            char jp[PATH_MAX];
            if (de->d_name[0] == '.' || store_path(s, jp, sizeof jp, "jobs/%s", de->d_name) < 0)
                continue;
            store_clean_tmp(jp);
        }
        closedir(d);
    }
    return 0;
}

bool store_has_release(const struct store *s, const char *id)
{
    char p[PATH_MAX];
    struct stat st;
    if (!sha256_is_hex(id) || store_path(s, p, sizeof p, "releases/%s", id) < 0)
        return false;
    return lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_hex_prefix(const char *s)
{
    size_t n = strlen(s);
    if (n < 6 || n > RELEASE_ID_LEN)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

int store_resolve(const struct store *s, const char *id_or_prefix, char ret_id[RELEASE_ID_LEN + 1])
{
    if (!is_hex_prefix(id_or_prefix))
        return -EINVAL;
    if (strlen(id_or_prefix) == RELEASE_ID_LEN) {
        if (!store_has_release(s, id_or_prefix))
            return -ENOENT;
        memcpy(ret_id, id_or_prefix, RELEASE_ID_LEN + 1);
        return 0;
    }
    char **ids;
    size_t n;
    int r = store_list(s, &ids, &n);
    if (r < 0)
        return r;
    int found = -1;
    r = -ENOENT;
    for (size_t i = 0; i < n; i++)
        if (!strncmp(ids[i], id_or_prefix, strlen(id_or_prefix))) {
            if (found >= 0) {
                r = -ENOTUNIQ;
                break;
            }
            found = (int)i;
            r = 0;
        }
    if (r == 0)
        memcpy(ret_id, ids[found], RELEASE_ID_LEN + 1);
    store_ids_free(ids, n);
    return r;
}

/* Remove blob if it lies in the store's incoming/ directory, where the controller pushes
 * bundles for the agent to consume.  A file given from anywhere else belongs to whoever passed
 * it, and is never deleted, whether it verified or not. */
void store_consume(const struct store *s, const char *blob)
{
    char inc[PATH_MAX], dir[PATH_MAX], rinc[PATH_MAX], rdir[PATH_MAX];
    if (store_path(s, inc, sizeof inc, "incoming") < 0 || str_copy(dir, sizeof dir, blob) < 0)
        return;
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        dir[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        (void)str_copy(dir, sizeof dir, ".");
    if (!realpath(inc, rinc) || !realpath(dir, rdir) || strcmp(rinc, rdir))
        return;
    (void)unlink(blob);
}

int store_add_release(const struct store *s, const char *blob, const char *id, char *err, size_t errsz)
{
    char final[PATH_MAX], tmp[PATH_MAX];
    if (!sha256_is_hex(id)) {
        snprintf(err, errsz, "release id '%s' is not 64 lowercase hex digits", id);
        return -EINVAL;
    }
    if (store_has_release(s, id)) {
        store_consume(s, blob);
        snprintf(err, errsz, "already present");
        return 1;
    }
    int r;
    if ((r = store_path(s, final, sizeof final, "releases/%s", id)) < 0 ||
        (r = store_path(s, tmp, sizeof tmp, "releases/%s.tmp.%ld", id, (long)getpid())) < 0)
        return r;
    (void)fs_rm_rf(tmp);
    char got[RELEASE_ID_LEN + 1];
    r = bundle_unpack(blob, tmp, id, got, err, errsz);
    if (r < 0) {
        if (r != -ENOENT)
            store_consume(s, blob);
        return r;
    }
    if (rename(tmp, final) < 0) {
        r = -errno;
        (void)fs_rm_rf(tmp);
        if (r == -ENOTEMPTY || r == -EEXIST) { /* another add won the race: same content */
            store_consume(s, blob);
            snprintf(err, errsz, "already present");
            return 1;
        }
        snprintf(err, errsz, "rename into releases/: %s", strerror(-r));
        return r;
    }
    (void)fs_fsync_dir(final);
    (void)fs_fsync_dir(tmp); /* parent of both: releases/ */
    store_consume(s, blob);
    return 0;
}

struct ent {
    char *id;
    double mtime;
};

static int ent_newest_first(const void *a, const void *b)
{
    const struct ent *x = a, *y = b;
    if (x->mtime != y->mtime)
        return x->mtime < y->mtime ? 1 : -1;
    return strcmp(x->id, y->id);
}

int store_list(const struct store *s, char ***ret_ids, size_t *ret_n)
{
    char p[PATH_MAX];
    int r = store_path(s, p, sizeof p, "releases");
    if (r < 0)
        return r;
    DIR *d = opendir(p);
    if (!d)
        return -errno;
    struct ent *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    r = 0;
    while ((de = readdir(d))) {
        struct stat st;
        if (!sha256_is_hex(de->d_name) || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISDIR(st.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            struct ent *nv = realloc(v, cap * sizeof *v);
            if (!nv) {
                r = -ENOMEM;
                break;
            }
            v = nv;
        }
        v[n].id = strdup(de->d_name);
        v[n].mtime = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
        if (!v[n].id) {
            r = -ENOMEM;
            break;
        }
        n++;
    }
    closedir(d);
    char **ids = NULL;
    if (r == 0 && !(ids = calloc(n ? n : 1, sizeof *ids)))
        r = -ENOMEM;
    if (r < 0) {
        for (size_t i = 0; i < n; i++)
            free(v[i].id);
        free(v);
        return r;
    }
    if (n > 1)
        qsort(v, n, sizeof *v, ent_newest_first);
    for (size_t i = 0; i < n; i++)
        ids[i] = v[i].id;
    free(v);
    *ret_ids = ids;
    *ret_n = n;
    return 0;
}

void store_ids_free(char **ids, size_t n)
{
    if (!ids)
        return;
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
}

int store_switch_current(const struct store *s, const char *job, const char *id)
{
    if (!store_has_release(s, id))
        return -ENOENT;
    char dir[PATH_MAX], link[PATH_MAX], tmp[PATH_MAX], target[PATH_MAX];
    int r;
    if ((r = store_path(s, dir, sizeof dir, "jobs/%s", job)) < 0 ||
        (r = store_path(s, link, sizeof link, "jobs/%s/current", job)) < 0 ||
        (r = store_path(s, tmp, sizeof tmp, "jobs/%s/current.tmp.%ld", job, (long)getpid())) < 0)
        return r;
    snprintf(target, sizeof target, "../../releases/%s", id);
    if ((r = fs_mkdir_p(dir, 0700)) < 0)
        return r;
    (void)unlink(tmp);
    if (symlink(target, tmp) < 0)
        return -errno;
    if (rename(tmp, link) < 0) {
        r = -errno;
        (void)unlink(tmp);
        return r;
    }
    return fs_fsync_dir(dir);
}

int store_current(const struct store *s, const char *job, char ret_id[RELEASE_ID_LEN + 1])
{
    char link[PATH_MAX], target[PATH_MAX];
    int r = store_path(s, link, sizeof link, "jobs/%s/current", job);
    if (r < 0)
        return r;
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0) {
        if (errno != ENOENT)
            return -errno;
        ret_id[0] = '\0';
        return 0;
    }
    target[n] = '\0';
    const char *base = strrchr(target, '/');
    base = base ? base + 1 : target;
    if (!sha256_is_hex(base))
        return -EINVAL;
    memcpy(ret_id, base, RELEASE_ID_LEN + 1);
    return 0;
}

static bool id_listed(const char *const *list, size_t n, const char *id)
{
    for (size_t k = 0; k < n; k++)
        if (list[k] && !strcmp(list[k], id))
            return true;
    return false;
}

int store_gc(const struct store *s, size_t keep, const char *const *protect, size_t nprotect,
             const char *const *failed, size_t nfailed)
{
    char **ids;
    size_t n;
    int r = store_list(s, &ids, &n);
    if (r < 0)
        return r;
    /* An environment release stays as long as a release that names it stays. */
    char (*envs)[RELEASE_ID_LEN + 1] = calloc(n ? n : 1, sizeof *envs);
    bool *kept = calloc(n ? n : 1, sizeof *kept);
    if (!envs || !kept) {
        free(envs);
        free(kept);
        store_ids_free(ids, n);
        return -ENOMEM;
    }
    /* The keep newest slots go to releases that did not fail first, newest first, then to
     * failed ones: a run of failed deploys pushed the older good releases out of the store (a
     * rollback --to one promoted 15 min before found it in no container). */
    size_t slots = keep;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n && slots > 0; i++)
            if (!kept[i] && id_listed(failed, nfailed, ids[i]) == (pass == 1)) {
                kept[i] = true;
                slots--;
            }
    for (size_t i = 0; i < n; i++) {
        kept[i] = kept[i] || id_listed(protect, nprotect, ids[i]);
        if (kept[i])
            (void)objstore_release_env(s, ids[i], envs[i]);
    }
    int removed = 0;
    for (size_t i = 0; i < n; i++) {
        bool keep_it = kept[i];
        for (size_t k = 0; k < n && !keep_it; k++)
            keep_it = !strcmp(envs[k], ids[i]);
        if (keep_it)
            continue;
        char p[PATH_MAX], tmp[PATH_MAX];
        if (store_path(s, p, sizeof p, "releases/%s", ids[i]) < 0 ||
            store_path(s, tmp, sizeof tmp, "releases/%s.tmp.gc", ids[i]) < 0)
            continue;
        /* rename first so a half-removed tree never looks like an installed release */
        if (rename(p, tmp) < 0) {
            r = -errno;
            break;
        }
        objstore_rm_tree(s, tmp);
        objstore_forget_release(s, ids[i]);
        log_info("store: removed release %.12s", ids[i]);
        removed++;
    }
    free(envs);
    free(kept);
    store_ids_free(ids, n);
    if (r < 0)
        return r;
    int o = objstore_gc_objects(s); /* objects no remaining release links to */
    if (o > 0)
        log_info("store: removed %d unreferenced objects", o);
    return removed;
}

int store_verify_release(const struct store *s, const char *id, char *err, size_t errsz)
{
    char dir[PATH_MAX], p[PATH_MAX + MANIFEST_PATH_MAX + 2];
    if (!store_has_release(s, id)) {
        snprintf(err, errsz, "release %.12s is not in the store", id);
        return -ENOENT;
    }
    int r = store_path(s, dir, sizeof dir, "releases/%s", id);
    if (r < 0)
        return r;
    char *text = NULL;
    size_t len = 0;
    struct manifest *m = NULL;
    snprintf(p, sizeof p, "%s/MANIFEST.json", dir);
    struct stat mst;
    if (lstat(p, &mst) < 0 && errno == ENOENT)
        return objstore_verify(s, id, err, errsz); /* a v2 release (objects and MANIFEST) */
    if ((r = fs_read_file(p, 2u << 20, &text, &len)) < 0 || (r = manifest_parse(text, len, &m)) < 0) {
        snprintf(err, errsz, "release %.12s: MANIFEST.json unreadable: %s", id, strerror(-r));
        free(text);
        return -EBADMSG;
    }
    char *canon = NULL, got[RELEASE_ID_LEN + 1];
    if ((r = manifest_dump(m, &canon, got)) < 0 || strcmp(got, id) != 0) {
        snprintf(err, errsz, "release %.12s: its MANIFEST.json is not the release's (id %.12s)", id,
                 r < 0 ? "?" : got);
        r = -EBADMSG;
        goto out;
    }
    for (size_t i = 0; i < m->nfiles; i++) {
        const struct manifest_file *f = &m->files[i];
        char hex[SHA256_HEX_LEN + 1];
        uint64_t size = 0;
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, f->path);
        if (lstat(p, &st) < 0 || !S_ISREG(st.st_mode)) {
            snprintf(err, errsz, "release %.12s: '%s' is missing", id, f->path);
            r = -EBADMSG;
            goto out;
        }
        if ((r = sha256_file_hex(p, hex, &size)) < 0 || size != f->size || strcmp(hex, f->sha256) != 0) {
            snprintf(err, errsz, "release %.12s: '%s' does not match its manifest (%s)", id, f->path,
                     r < 0 ? strerror(-r) : size != f->size ? "size" : "sha256");
            r = -EBADMSG;
            goto out;
        }
    }
    r = 0;
out:
    free(canon);
    free(text);
    manifest_free(m);
    return r;
}
