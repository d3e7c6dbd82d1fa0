/* common/manifest.c: see manifest.h; the only file that knows MANIFEST.json.
 * Never trusts a document: every path is checked for safety and every limit enforced before
 * anything else looks at it. */
#include "common/manifest.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/jsonfield.h"
#include "common/log.h"
#include "common/util.h"

void manifest_free(struct manifest *m)
{
    if (!m)
        return;
    free(m->files);
    free(m);
}

int manifest_path_is_safe(const char *path)
{
    size_t n = strlen(path);
    if (n == 0 || n >= MANIFEST_PATH_MAX || path[0] == '/')
        return 0;
    const char *p = path;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return 0;
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f || p[i] == '\\')
                return 0;
        if (!e)
            break;
        p = e + 1;
        if (!*p)
            return 0; /* trailing slash */
    }
    return 1;
}

static int file_cmp(const void *a, const void *b)
{
    return strcmp(((const struct manifest_file *)a)->path, ((const struct manifest_file *)b)->path);
}

const struct manifest_file *manifest_find(const struct manifest *m, const char *path)
{
    struct manifest_file key;
    if (str_copy(key.path, sizeof key.path, path) < 0)
        return NULL;
    return bsearch(&key, m->files, m->nfiles, sizeof *m->files, file_cmp);
}

struct walk {
    struct manifest_file *files;
    size_t n, cap;
};

static int walk_dir(const char *root, const char *rel, struct walk *w)
{
    char abs[PATH_MAX];
    if (snprintf(abs, sizeof abs, "%s%s%s", root, *rel ? "/" : "", rel) >= (int)sizeof abs)
        return -ENAMETOOLONG;
    DIR *d = opendir(abs);
    if (!d)
        return -errno;
    int r = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char crel[MANIFEST_PATH_MAX], cabs[PATH_MAX];
        if (snprintf(crel, sizeof crel, "%s%s%s", rel, *rel ? "/" : "", de->d_name) >= (int)sizeof crel ||
            snprintf(cabs, sizeof cabs, "%s/%s", root, crel) >= (int)sizeof cabs) {
            r = -ENAMETOOLONG;
            break;
        }
        if (!*rel && !strcmp(de->d_name, "MANIFEST.json"))
            continue; /* the manifest does not list itself */
        struct stat st;
        if (lstat(cabs, &st) < 0) {
            r = -errno;
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            if ((r = walk_dir(root, crel, w)) < 0)
                break;
            continue;
        }
        if (!S_ISREG(st.st_mode) || !manifest_path_is_safe(crel)) {
            log_error("release file '%s' %s", cabs,
                      S_ISLNK(st.st_mode)  ? "is a symlink"
                      : !S_ISREG(st.st_mode) ? "is not a regular file (a FIFO, socket or device)"
                                             : "has a name with a control character or a backslash");
            r = -EINVAL;
            break;
        }
        if (w->n == MANIFEST_MAX_FILES) {
            r = -E2BIG;
            break;
        }
        if (w->n == w->cap) {
            size_t nc = w->cap ? w->cap * 2 : 64;
            void *nf = realloc(w->files, nc * sizeof *w->files);
            if (!nf) {
                r = -ENOMEM;
                break;
            }
            w->files = nf;
            w->cap = nc;
        }
        struct manifest_file *f = &w->files[w->n];
        memset(f, 0, sizeof *f);
        (void)str_copy(f->path, sizeof f->path, crel);
        f->mode = st.st_mode & 0777;
        if ((r = sha256_file_hex(cabs, f->sha256, &f->size)) < 0)
            break;
        w->n++;
    }
    closedir(d);
    return r;
}

int manifest_from_dir(const char *dir, const char *name, struct manifest **ret_m)
{
    struct walk w = {0};
    int r = walk_dir(dir, "", &w);
    if (r < 0) {
        free(w.files);
        return r;
    }
    struct manifest *m = calloc(1, sizeof *m);
    if (!m) {
        free(w.files);
        return -ENOMEM;
    }
    if (!name) {
        const char *s = strrchr(dir, '/');
        name = s && s[1] ? s + 1 : dir;
    }
    (void)str_copy(m->name, sizeof m->name, name);
    m->files = w.files;
    m->nfiles = w.n;
    qsort(m->files, m->nfiles, sizeof *m->files, file_cmp);
    *ret_m = m;
    return 0;
}

int manifest_dump(const struct manifest *m, char **ret_text, char ret_id[RELEASE_ID_LEN + 1])
{
    json_t *o = json_object(), *files = json_array();
    if (!o || !files) {
        json_decref(o);
        json_decref(files);
        return -ENOMEM;
    }
    json_object_set_new(o, "v", json_integer(MANIFEST_VERSION));
    json_object_set_new(o, "name", json_string(m->name));
    for (size_t i = 0; i < m->nfiles; i++) {
        const struct manifest_file *f = &m->files[i];
        char mode[8];
        snprintf(mode, sizeof mode, "%04o", f->mode & 0777);
        json_array_append_new(files, json_pack("{s:s,s:s,s:I,s:s}", "path", f->path, "sha256", f->sha256,
                                               "size", (json_int_t)f->size, "mode", mode));
    }
    json_object_set_new(o, "files", files);
    char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    if (!text)
        return -ENOMEM;
    char id[RELEASE_ID_LEN + 1];
    int r = sha256_buf_hex(text, strlen(text), id);
    if (r < 0) {
        free(text);
        return r;
    }
    *ret_text = text;
    memcpy(ret_id, id, sizeof id);
    return 0;
}

static int parse_mode(const char *s, uint32_t *ret)
{
    if (!*s || strlen(s) > 4)
        return -EINVAL;
    uint32_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '7')
            return -EINVAL;
        v = v * 8 + (uint32_t)(*s - '0');
    }
    if (v & ~0777u)
        return -EINVAL;
    *ret = v;
    return 0;
}

int manifest_parse(const char *text, size_t len, struct manifest **ret_m)
{
    json_t *o;
    int r = jf_load(text, len, MANIFEST_MAX_BYTES, MANIFEST_VERSION, &o);
    if (r < 0)
        return r;
    r = -EINVAL;
    struct manifest *m = NULL;
    json_t *files = json_object_get(o, "files"), *name = json_object_get(o, "name");
    if (!json_is_array(files) || (name && !json_is_string(name)))
        goto out;
    size_t n = json_array_size(files);
    if (n > MANIFEST_MAX_FILES) {
        r = -E2BIG;
        goto out;
    }
    m = calloc(1, sizeof *m);
    if (!m || (n && !(m->files = calloc(n, sizeof *m->files)))) {
        r = -ENOMEM;
        goto out;
    }
    if (name && str_copy(m->name, sizeof m->name, json_string_value(name)) < 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        json_t *f = json_array_get(files, i);
        const char *path = NULL, *sha = NULL, *mode = NULL;
        json_int_t size = -1;
        if (json_unpack(f, "{s:s,s:s,s:I,s:s}", "path", &path, "sha256", &sha, "size", &size, "mode", &mode) < 0)
            goto out;
        struct manifest_file *mf = &m->files[i];
        if (!manifest_path_is_safe(path) || !sha256_is_hex(sha) || size < 0 || parse_mode(mode, &mf->mode) < 0)
            goto out;
        (void)str_copy(mf->path, sizeof mf->path, path);
        memcpy(mf->sha256, sha, SHA256_HEX_LEN + 1);
        mf->size = (uint64_t)size;
    }
    m->nfiles = n;
    qsort(m->files, n, sizeof *m->files, file_cmp);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(m->files[i - 1].path, m->files[i].path))
            goto out; /* duplicate path */
    /* A file may not also be a directory prefix of another ("a" and "a/b"). */
    for (size_t i = 0; i + 1 < n; i++) {
        size_t l = strlen(m->files[i].path);
        if (!strncmp(m->files[i].path, m->files[i + 1].path, l) && m->files[i + 1].path[l] == '/')
            goto out;
    }
    *ret_m = m;
    m = NULL;
    r = 0;
out:
    manifest_free(m);
    json_decref(o);
    return r;
}

const char *release_short(const char *id, const char *none, char buf[RELEASE_SHORT_LEN + 1])
{
    snprintf(buf, RELEASE_SHORT_LEN + 1, "%.*s", RELEASE_SHORT_LEN, id && *id ? id : none);
    return buf;
}
