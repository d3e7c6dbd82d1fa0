/* common/manifest2.c: see manifest2.h; the only file that knows the v2 manifest text.
 * Never trusts a document: paths, limits, order, parents and symlink targets are all checked
 * before anyone else looks at it. */
#include "common/manifest2.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

void manifest2_free(struct manifest2 *m)
{
    if (!m)
        return;
    if (!m->arena)
        for (size_t i = 0; i < m->n; i++) {
            free(m->e[i].path);
            free(m->e[i].target);
        }
    free(m->arena);
    free(m->e);
    free(m);
}

bool manifest2_path_is_safe(const char *path)
{
    size_t n = strlen(path);
    if (n == 0 || n >= MANIFEST2_PATH_MAX || path[0] == '/')
        return false;
    const char *p = path;
    for (;;) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 0 || len > 255 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f || p[i] == '\\')
                return false;
        if (!e)
            return true;
        p = e + 1;
    }
}

static bool target_is_plain(const char *t)
{
    size_t n = strlen(t);
    if (n == 0 || n >= MANIFEST2_PATH_MAX || t[0] == '/')
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f || t[i] == '\\')
            return false;
    return true;
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const struct m2_entry *)a)->path, ((const struct m2_entry *)b)->path);
}

/* "./launch.sh" names the same file as "launch.sh" (the agent runs a job's command from the
 * release directory, and docs/pytorch.md writes `command = ./launch.sh`) */
static const char *skip_dot_slash(const char *path)
{
    while (path[0] == '.' && path[1] == '/') {
        path += 2;
        while (*path == '/')
            path++;
    }
    return path;
}

const struct m2_entry *manifest2_find(const struct manifest2 *m, const char *path)
{
    path = skip_dot_slash(path);
    struct m2_entry key = { .path = (char *)path };
    return bsearch(&key, m->e, m->n, sizeof *m->e, entry_cmp);
}

static int resolve(const struct manifest2 *m, char *buf, size_t *blen, const char *target, int *depth);

const char *manifest2_exec_problem(const struct manifest2 *m, const char *path)
{
    path = skip_dot_slash(path); /* or "./launch.sh", missing, "is a symlink" to "launch.sh" */
    const struct m2_entry *f = manifest2_find(m, path);
    bool via_link = f && f->type == M2_LINK;
    if (!f || via_link) {
        /* through the release's own symlinks (the path itself, or a directory on the way) to
         * what exec would run; into the environment (.drover-env, not in this manifest) is
         * judged in the container */
        char buf[MANIFEST2_PATH_MAX * 2 + 2] = "";
        size_t blen = 0;
        int depth = 0;
        if (resolve(m, buf, &blen, path, &depth) < 0)
            return via_link ? "is a symlink that loops or leads out of the release" : "is missing";
        if (!strcmp(buf, ".drover-env") || !strncmp(buf, ".drover-env/", 12))
            return NULL;
        via_link = via_link || strcmp(buf, path) != 0;
        f = manifest2_find(m, buf);
        if (!f)
            return via_link ? "is a symlink whose target is missing" : "is missing";
    }
    if (f->type == M2_DIR)
        return via_link ? "is a symlink to a directory" : "is a directory";
    if (f->type == M2_FILE && !(f->mode & 0111))
        return "is not executable";
    return NULL;
}

/* Resolve `target` (relative to the directory of `from`) inside the release, following the
 * manifest's own symlinks.  Components are pushed on a stack of lengths into buf; ".." above the
 * root fails.  depth counts symlinks followed. */
static int resolve(const struct manifest2 *m, char *buf, size_t *blen, const char *target, int *depth)
{
    const char *p = target;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 0 || (len == 1 && p[0] == '.')) {
            /* nothing */
        } else if (len == 2 && p[0] == '.' && p[1] == '.') {
            if (*blen == 0)
                return -EINVAL; /* above the release root */
            while (*blen > 0 && buf[*blen - 1] != '/')
                (*blen)--;
            if (*blen > 0)
                (*blen)--; /* the slash */
            buf[*blen] = '\0';
        } else {
            if (*blen + 1 + len + 1 > MANIFEST2_PATH_MAX * 2)
                return -EINVAL;
            size_t save = *blen;
            if (*blen)
                buf[(*blen)++] = '/';
            memcpy(buf + *blen, p, len);
            *blen += len;
            buf[*blen] = '\0';
            const struct m2_entry *l = manifest2_find(m, buf);
            if (l && l->type == M2_LINK) {
                if (++*depth > MANIFEST2_SYMLINK_DEPTH)
                    return -EINVAL;
                *blen = save; /* the link's directory */
                buf[*blen] = '\0';
                int r = resolve(m, buf, blen, l->target, depth);
                if (r < 0)
                    return r;
            }
        }
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

int manifest2_check_links(const struct manifest2 *m, const struct m2_entry **ret_bad)
{
    char buf[MANIFEST2_PATH_MAX * 2 + 2];
    for (size_t i = 0; i < m->n; i++) {
        const struct m2_entry *l = &m->e[i];
        if (l->type != M2_LINK)
            continue;
        int r = -EINVAL;
        if (target_is_plain(l->target)) {
            const char *slash = strrchr(l->path, '/');
            size_t blen = slash ? (size_t)(slash - l->path) : 0;
            memcpy(buf, l->path, blen);
            buf[blen] = '\0';
            int depth = 0;
            r = resolve(m, buf, &blen, l->target, &depth);
        }
        if (r < 0) {
            if (ret_bad)
                *ret_bad = l;
            return -EINVAL;
        }
    }
    return 0;
}

const struct m2_entry *manifest2_dangling_link(const struct manifest2 *m, size_t *pos)
{
    char buf[MANIFEST2_PATH_MAX * 2 + 2];
    for (; *pos < m->n; (*pos)++) {
        const struct m2_entry *l = &m->e[*pos];
        if (l->type != M2_LINK || !target_is_plain(l->target))
            continue;
        const char *slash = strrchr(l->path, '/');
        size_t blen = slash ? (size_t)(slash - l->path) : 0;
        memcpy(buf, l->path, blen);
        buf[blen] = '\0';
        int depth = 0;
        if (resolve(m, buf, &blen, l->target, &depth) < 0)
            continue; /* manifest2_check_links refuses it */
        if (!buf[0] || !strcmp(buf, ".drover-env") || !strncmp(buf, ".drover-env/", 12) || manifest2_find(m, buf))
            continue; /* the release root, the environment (judged in the container), or there */
        (*pos)++;
        return l;
    }
    return NULL;
}

struct walk {
    struct m2_entry *e;
    size_t n, cap;
    const struct m2_known *known; /* sorted by path; may be NULL */
    size_t nknown, reused;
};

static int known_cmp(const void *a, const void *b)
{
    return strcmp(((const struct m2_known *)a)->path, ((const struct m2_known *)b)->path);
}

/* The hash an earlier walk recorded for rel, when the file is still that inode, unchanged. */
static const struct m2_known *known_for(const struct walk *w, const char *rel, const struct m2_entry *e)
{
    if (!w->nknown)
        return NULL;
    struct m2_known key = { .path = (char *)rel };
    const struct m2_known *k = bsearch(&key, w->known, w->nknown, sizeof *w->known, known_cmp);
    if (!k || !e->src_ino || k->dev != e->src_dev || k->ino != e->src_ino || k->mtime_ns != e->src_mtime_ns ||
        k->ctime_ns != e->src_ctime_ns || !sha256_is_hex(k->sha256))
        return NULL;
    return k;
}

static int walk_push(struct walk *w, struct m2_entry **ret)
{
    if (w->n == MANIFEST2_MAX_ENTRIES)
        return -E2BIG;
    if (w->n == w->cap) {
        size_t nc = w->cap ? w->cap * 2 : 256;
        void *ne = realloc(w->e, nc * sizeof *w->e);
        if (!ne)
            return -ENOMEM;
        w->e = ne;
        w->cap = nc;
    }
    *ret = &w->e[w->n];
    memset(*ret, 0, sizeof **ret);
    return 0;
}

/* Names at the top of a release that drover owns in the container: MANIFEST (MANIFEST.json in
 * v1) is the release's manifest and .drover-env the link to its environment.  1: drover's own
 * manifest, skipped (a release directory copied out of a container); -EINVAL: a file of the
 * user's by that name, which would be dropped or refused after the push; 0: not reserved. */
static int top_reserved(const char *root, int dfd, const char *name)
{
    const char *magic = NULL;
    if (!strcmp(name, "MANIFEST"))
        magic = MANIFEST2_MAGIC "\n";
    else if (!strcmp(name, "MANIFEST.json"))
        magic = "{\"v\":1,";
    else if (strcmp(name, ".drover-env") != 0)
        return 0;
    if (magic) {
        char head[32] = "";
        int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        struct stat st;
        if (fd >= 0) {
            if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
                (void)!read(fd, head, sizeof head - 1);
            close(fd);
        }
        if (!strncmp(head, magic, strlen(magic)))
            return 1;
        log_error("release file '%s/%s': a release may not hold %s at its top, the name of "
                  "drover's manifest of the release in each container: rename it or move it "
                  "into a subdirectory", root, name, name);
    } else
        log_error("release file '%s/%s': a release may not hold .drover-env at its top, the "
                  "link to the environment deployed with the release: deploy an environment "
                  "with `--env DIR` (docs/pytorch.md, section 3), or rename it", root, name);
    return -EINVAL;
}

/* A file or subdirectory of the release that cannot be read (not readable by the user running
 * drover, gone while walked): named here, since the caller names only the release directory.
 * r: -errno; returned as it is. */
static int walk_unreadable(const char *path, bool dir, int r)
{
    log_error("release %s '%s' cannot be read (%s): make it readable by the user who runs drover, "
              "or take it out of the release", dir ? "directory" : "file", path, strerror(-r));
    return r;
}

static int walk_dir(const char *root, const char *rel, struct walk *w)
{
    char abs[PATH_MAX];
    if (snprintf(abs, sizeof abs, "%s%s%s", root, *rel ? "/" : "", rel) >= (int)sizeof abs)
        return -ENAMETOOLONG;
    DIR *d = opendir(abs);
    if (!d) /* the release directory itself: the caller names it */
        return *rel ? walk_unreadable(abs, true, -errno) : -errno;
    int r = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (!*rel && (r = top_reserved(root, dirfd(d), de->d_name)) != 0) {
            if (r > 0) {
                r = 0;
                continue; /* drover's own manifest does not list itself */
            }
            break;
        }
        char crel[MANIFEST2_PATH_MAX], cabs[PATH_MAX];
        if (snprintf(crel, sizeof crel, "%s%s%s", rel, *rel ? "/" : "", de->d_name) >= (int)sizeof crel ||
            snprintf(cabs, sizeof cabs, "%s/%s", root, crel) >= (int)sizeof cabs) {
            log_error("release path '%s/%s' is too long (limit %d bytes)", rel, de->d_name, MANIFEST2_PATH_MAX - 1);
            r = -ENAMETOOLONG;
            break;
        }
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            r = walk_unreadable(cabs, false, -errno);
            break;
        }
        if (!manifest2_path_is_safe(crel)) {
            log_error("release file '%s' has a name with a control character or a backslash", cabs);
            r = -EINVAL;
            break;
        }
        if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
            log_error("release file '%s' is not a regular file, directory or symlink (a FIFO, socket or device)", cabs);
            r = -EINVAL;
            break;
        }
        struct m2_entry *e;
        if ((r = walk_push(w, &e)) < 0)
            break;
        if (!(e->path = strdup(crel))) {
            r = -ENOMEM;
            break;
        }
        w->n++;
        if (S_ISDIR(st.st_mode)) {
            e->type = M2_DIR;
            e->mode = st.st_mode & 0777;
            if ((r = walk_dir(root, crel, w)) < 0)
                break;
        } else if (S_ISLNK(st.st_mode)) {
            char t[MANIFEST2_PATH_MAX];
            ssize_t n = readlinkat(dirfd(d), de->d_name, t, sizeof t - 1);
            if (n < 0) {
                r = walk_unreadable(cabs, false, -errno);
                break;
            }
            t[n] = '\0';
            e->type = M2_LINK;
            if (!(e->target = strdup(t))) {
                r = -ENOMEM;
                break;
            }
        } else {
            e->type = M2_FILE;
            e->mode = st.st_mode & 0777;
            /* the identity before the hash: a change during or after it shows as another one */
            e->src_dev = (uint64_t)st.st_dev;
            e->src_ino = (uint64_t)st.st_ino;
            e->src_mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
            e->src_ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
            const struct m2_known *k = known_for(w, crel, e);
            if (k && k->size == (uint64_t)st.st_size) {
                memcpy(e->sha256, k->sha256, sizeof e->sha256);
                e->size = k->size;
                w->reused++;
                continue;
            }
            if ((r = sha256_file_hex(cabs, e->sha256, &e->size)) < 0) {
                (void)walk_unreadable(cabs, false, r);
                break;
            }
            if ((uint64_t)st.st_size != e->size)
                e->src_ino = 0; /* it changed while hashed: never trusted later */
        }
    }
    closedir(d);
    return r;
}

static void fill_totals(struct manifest2 *m)
{
    m->nfiles = 0;
    m->file_bytes = 0;
    for (size_t i = 0; i < m->n; i++)
        if (m->e[i].type == M2_FILE) {
            m->nfiles++;
            m->file_bytes += m->e[i].size;
        }
}

/* A venv (pyvenv.cfg at its top) whose bin/ holds the refused link: `python3 -m venv` without
 * --copies (or `uv venv`) links bin/python to /usr/bin or ~/.pyenv. */
static bool is_venv_bin_link(const char *dir, const char *path)
{
    char cfg[PATH_MAX];
    if (strncmp(path, "bin/", 4) != 0 || (size_t)snprintf(cfg, sizeof cfg, "%s/pyvenv.cfg", dir) >= sizeof cfg)
        return false;
    return access(cfg, F_OK) == 0;
}

void manifest2_name_of_dir(const char *dir, char ret_name[MANIFEST_NAME_MAX])
{
    char buf[PATH_MAX], real[PATH_MAX];
    if (str_copy(buf, sizeof buf, dir) < 0)
        buf[0] = '\0';
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = '\0';
    const char *slash = strrchr(buf, '/');
    const char *base = slash && slash[1] ? slash + 1 : buf;
    /* "." and ".." say where, not what: the directory they stand for is named */
    if ((!strcmp(base, ".") || !strcmp(base, "..") || !base[0]) && realpath(dir, real)) {
        slash = strrchr(real, '/');
        base = slash && slash[1] ? slash + 1 : real;
    }
    (void)str_copy(ret_name, MANIFEST_NAME_MAX, base);
}

int manifest2_from_dir(const char *dir, const char *name, struct manifest2 **ret_m)
{
    return manifest2_from_dir_known(dir, name, NULL, 0, NULL, ret_m);
}

int manifest2_from_dir_known(const char *dir, const char *name, const struct m2_known *known, size_t nknown,
                             size_t *ret_reused, struct manifest2 **ret_m)
{
    struct manifest2 *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    struct walk w = { .known = known, .nknown = nknown };
    int r = walk_dir(dir, "", &w);
    m->e = w.e;
    m->n = w.n;
    if (r < 0) {
        if (r == -E2BIG)
            log_error("release directory '%s' has more than %d entries", dir, MANIFEST2_MAX_ENTRIES);
        manifest2_free(m);
        return r;
    }
    if (name)
        (void)str_copy(m->name, sizeof m->name, name);
    else
        manifest2_name_of_dir(dir, m->name);
    for (char *p = m->name; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '_';
    qsort(m->e, m->n, sizeof *m->e, entry_cmp);
    const struct m2_entry *bad = NULL;
    if (manifest2_check_links(m, &bad) < 0) {
        log_error("release symlink '%s/%s' -> '%s' points outside the release or loops (only relative "
                  "targets that stay inside the release directory are allowed)", dir, bad->path, bad->target);
        if (is_venv_bin_link(dir, bad->path))
            log_error("'%s' is a Python venv whose %s links to an interpreter outside it: build the "
                      "environment with copies, `python3 -m venv --copies %s` (then install into it "
                      "with pip, or `uv pip install -p %s/bin/python ...`; docs/pytorch.md, section 3)",
                      dir, bad->path, dir, dir);
        manifest2_free(m);
        return -EINVAL;
    }
    fill_totals(m);
    if (ret_reused)
        *ret_reused = w.reused;
    *ret_m = m;
    return 0;
}

struct sbuf {
    char *p;
    size_t len, cap;
};

static int sb_add(struct sbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->len + n + 1)
            nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np)
            return -ENOMEM;
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

static int sb_str(struct sbuf *b, const char *s)
{
    return sb_add(b, s, strlen(s));
}

int manifest2_dump(const struct manifest2 *m, char **ret_text, size_t *ret_len,
                   char ret_id[RELEASE_ID_LEN + 1])
{
    struct sbuf b = { 0 };
    char line[256];
    int r = sb_str(&b, MANIFEST2_MAGIC "\nname ");
    if (r == 0)
        r = sb_str(&b, m->name);
    if (r == 0)
        r = sb_str(&b, "\n");
    if (r == 0 && m->env[0]) {
        snprintf(line, sizeof line, "env %s\n", m->env);
        r = sb_str(&b, line);
    }
    for (size_t i = 0; i < m->n && r == 0; i++) {
        const struct m2_entry *e = &m->e[i];
        switch (e->type) {
        case M2_DIR:
            snprintf(line, sizeof line, "d %04o ", e->mode & 0777);
            break;
        case M2_FILE:
            snprintf(line, sizeof line, "f %04o %llu %s ", e->mode & 0777, (unsigned long long)e->size,
                     e->sha256);
            break;
        default:
            snprintf(line, sizeof line, "l ");
        }
        r = sb_str(&b, line);
        if (r == 0)
            r = sb_str(&b, e->path);
        if (r == 0 && e->type == M2_LINK && (r = sb_str(&b, "\t")) == 0)
            r = sb_str(&b, e->target);
        if (r == 0)
            r = sb_str(&b, "\n");
    }
    char id[RELEASE_ID_LEN + 1];
    if (r == 0)
        r = sha256_buf_hex(b.p, b.len, id);
    if (r < 0) {
        free(b.p);
        return r;
    }
    *ret_text = b.p;
    if (ret_len)
        *ret_len = b.len;
    memcpy(ret_id, id, sizeof id);
    return 0;
}

static int parse_mode(const char *s, size_t n, uint32_t *ret)
{
    if (n != 4 || s[0] != '0')
        return -EINVAL;
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '7')
            return -EINVAL;
        v = v * 8 + (uint32_t)(s[i] - '0');
    }
    *ret = v & 0777;
    return 0;
}

static int parse_u64(const char *s, size_t n, uint64_t *ret)
{
    if (n == 0 || n > 19 || (n > 1 && s[0] == '0'))
        return -EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *ret = v;
    return 0;
}

/* Cut the next space-terminated field off *p (the arena is writable); NULL if none. */
static char *field(char **p)
{
    char *s = *p, *e = strchr(s, ' ');
    if (!e)
        return NULL;
    *e = '\0';
    *p = e + 1;
    return s;
}

/* The head of a manifest text as manifest2_env_of() and manifest2_name_of() read it: the magic
 * line, then "name <name>\n".  0 with the name's bytes in [*ret_name, *ret_name_end) and the
 * rest of the text after that line at *ret_after; -EINVAL when it is not such a head (or is cut
 * before the name line ends). */
static int m2_head(const char *text, size_t len, const char **ret_name, const char **ret_name_end,
                   const char **ret_after)
{
    size_t ml = strlen(MANIFEST2_MAGIC);
    if (len < ml + 1 || memcmp(text, MANIFEST2_MAGIC, ml) || text[ml] != '\n')
        return -EINVAL;
    const char *p = text + ml + 1, *end = text + len;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl || nl - p < 5 || memcmp(p, "name ", 5))
        return -EINVAL;
    *ret_name = p + 5;
    *ret_name_end = nl;
    *ret_after = nl + 1;
    return 0;
}

int manifest2_env_of(const char *text, size_t len, char ret_env[RELEASE_ID_LEN + 1])
{
    const char *name, *name_end, *p, *end = text + len;
    if (m2_head(text, len, &name, &name_end, &p) < 0)
        return -EINVAL;
    /* the line after the name: "env <id>", the first entry, or none (empty) */
    if (p == end)
        return 0;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl)
        return -EINVAL;
    if (nl - p != 4 + RELEASE_ID_LEN || memcmp(p, "env ", 4))
        return 0;
    char id[RELEASE_ID_LEN + 1];
    memcpy(id, p + 4, RELEASE_ID_LEN);
    id[RELEASE_ID_LEN] = '\0';
    if (!sha256_is_hex(id))
        return -EINVAL;
    memcpy(ret_env, id, sizeof id);
    return 1;
}

int manifest2_name_of(const char *text, size_t len, char ret_name[MANIFEST_NAME_MAX])
{
    const char *name, *name_end, *after;
    if (m2_head(text, len, &name, &name_end, &after) < 0 || memchr(name, '\0', (size_t)(name_end - name)))
        return -EINVAL;
    size_t n = (size_t)(name_end - name);
    if (n >= MANIFEST_NAME_MAX)
        return -E2BIG;
    memcpy(ret_name, name, n);
    ret_name[n] = '\0';
    return 0;
}

int manifest2_parse(const char *text, size_t len, struct manifest2 **ret_m)
{
    if (len > MANIFEST2_MAX_BYTES)
        return -E2BIG;
    size_t ml = strlen(MANIFEST2_MAGIC);
    if (len < ml + 1 || memcmp(text, MANIFEST2_MAGIC, ml) || text[ml] != '\n')
        return len >= 16 && !memcmp(text, "drover-manifest ", 16) ? -EPROTONOSUPPORT : -EINVAL;
    if (memchr(text, '\0', len))
        return -EINVAL;
    if (text[len - 1] != '\n')
        return -EINVAL;
    struct manifest2 *m = calloc(1, sizeof *m);
    if (!m || !(m->arena = malloc(len + 1))) {
        free(m);
        return -ENOMEM;
    }
    memcpy(m->arena, text, len);
    m->arena[len] = '\0';
    size_t nlines = 0;
    for (size_t i = 0; i < len; i++)
        nlines += text[i] == '\n';
    int r = -E2BIG;
    if (nlines > MANIFEST2_MAX_ENTRIES + 3)
        goto fail;
    r = -ENOMEM;
    if (!(m->e = calloc(nlines ? nlines : 1, sizeof *m->e)))
        goto fail;
    r = -EINVAL;
    char *p = m->arena + ml + 1;
    int hdr = 0; /* 0: expect name, 1: env or entries, 2: entries */
    while (*p) {
        char *nl = strchr(p, '\n');
        *nl = '\0';
        char *line = p;
        p = nl + 1;
        if (hdr == 0) {
            if (strncmp(line, "name ", 5) || str_copy(m->name, sizeof m->name, line + 5) < 0)
                goto fail;
            hdr = 1;
            continue;
        }
        if (hdr == 1) {
            hdr = 2;
            if (!strncmp(line, "env ", 4)) {
                if (!sha256_is_hex(line + 4))
                    goto fail;
                memcpy(m->env, line + 4, RELEASE_ID_LEN + 1);
                continue;
            }
        }
        if (!line[0] || line[1] != ' ')
            goto fail;
        struct m2_entry *e = &m->e[m->n];
        e->type = line[0];
        char *q = line + 2, *f;
        switch (e->type) {
        case M2_DIR:
            if (!(f = field(&q)) || parse_mode(f, strlen(f), &e->mode) < 0)
                goto fail;
            e->path = q;
            break;
        case M2_FILE:
            if (!(f = field(&q)) || parse_mode(f, strlen(f), &e->mode) < 0 || !(f = field(&q)) ||
                parse_u64(f, strlen(f), &e->size) < 0 || !(f = field(&q)) || !sha256_is_hex(f))
                goto fail;
            memcpy(e->sha256, f, SHA256_HEX_LEN + 1);
            e->path = q;
            break;
        case M2_LINK: {
            char *tab = strchr(q, '\t');
            if (!tab)
                goto fail;
            *tab = '\0';
            e->path = q;
            e->target = tab + 1;
            if (!target_is_plain(e->target))
                goto fail;
            break;
        }
        default:
            goto fail;
        }
        if (!manifest2_path_is_safe(e->path))
            goto fail;
        if (m->n && strcmp(m->e[m->n - 1].path, e->path) >= 0)
            goto fail; /* canonical: strictly sorted, no duplicates */
        m->n++;
    }
    if (hdr == 0)
        goto fail;
    /* Every parent is a listed directory (so assembly can create the tree in order). */
    for (size_t i = 0; i < m->n; i++) {
        const char *slash = strrchr(m->e[i].path, '/');
        if (!slash)
            continue;
        char parent[MANIFEST2_PATH_MAX];
        memcpy(parent, m->e[i].path, (size_t)(slash - m->e[i].path));
        parent[slash - m->e[i].path] = '\0';
        const struct m2_entry *d = manifest2_find(m, parent);
        if (!d || d->type != M2_DIR)
            goto fail;
    }
    if (manifest2_check_links(m, NULL) < 0)
        goto fail;
    fill_totals(m);
    *ret_m = m;
    return 0;
fail:
    m->n = 0; /* strings live in the arena */
    manifest2_free(m);
    return r;
}

static int ranges_flush(struct m2_ranges *r)
{
    if (!r->count)
        return 0;
    char line[64];
    int n = snprintf(line, sizeof line, "%zu %zu\n", r->start, r->count);
    struct sbuf b = { r->text, r->len, r->cap };
    int e = sb_add(&b, line, (size_t)n);
    r->text = b.p;
    r->len = b.len;
    r->cap = b.cap;
    r->count = 0;
    return e;
}

int m2_ranges_add(struct m2_ranges *r, size_t index)
{
    if (r->count && index == r->start + r->count) {
        r->count++;
        return 0;
    }
    int e = ranges_flush(r);
    if (e < 0)
        return e;
    r->start = index;
    r->count = 1;
    return 0;
}

int m2_ranges_finish(struct m2_ranges *r)
{
    int e = ranges_flush(r);
    if (e == 0 && !r->text) {
        struct sbuf b = { 0 };
        e = sb_add(&b, "", 0);
        r->text = b.p;
        r->len = b.len;
        r->cap = b.cap;
    }
    return e;
}

void m2_ranges_done(struct m2_ranges *r)
{
    free(r->text);
    memset(r, 0, sizeof *r);
}

int m2_ranges_parse(const char *text, size_t len, size_t n,
                    int (*cb)(size_t start, size_t count, void *ctx), void *ctx)
{
    size_t i = 0;
    while (i < len) {
        uint64_t v[2];
        for (int k = 0; k < 2; k++) {
            size_t s = i;
            while (i < len && text[i] >= '0' && text[i] <= '9')
                i++;
            if (parse_u64(text + s, i - s, &v[k]) < 0 || i >= len || text[i] != (k ? '\n' : ' '))
                return -EINVAL;
            i++;
        }
        if (v[1] == 0 || v[0] >= n || v[1] > n - v[0])
            return -EINVAL;
        int r = cb((size_t)v[0], (size_t)v[1], ctx);
        if (r < 0)
            return r;
    }
    return 0;
}
