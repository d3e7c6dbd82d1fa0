/* common/manifest.c: see manifest.h; the only file that knows MANIFEST.json.
 * Never trusts a document: every path is checked for safety and every limit enforced before
 * anything else looks at it. */
#include "common/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/jsonfield.h"
#include "common/log.h"
#include "common/manifest2.h"
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
    /* One path rule for both manifest versions (manifest2_path_is_safe), under v1's shorter limit. */
    return strnlen(path, MANIFEST_PATH_MAX) < MANIFEST_PATH_MAX && manifest2_path_is_safe(path);
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

/* One directory walker for both versions: v2's (manifest2_from_dir: FIFOs, sockets and devices
 * refused before anything opens them, unsafe names refused, files hashed), then what v1 cannot
 * hold is refused here: symlinks, paths of MANIFEST_PATH_MAX bytes or more, more than
 * MANIFEST_MAX_FILES files.  Directories are implied by the files' paths in v1. */
int manifest_from_dir(const char *dir, const char *name, struct manifest **ret_m)
{
    struct manifest2 *m2;
    int r = manifest2_from_dir(dir, name, &m2);
    if (r < 0)
        return r;
    struct manifest *m = NULL;
    if (m2->nfiles > MANIFEST_MAX_FILES) {
        log_error("release directory '%s' has more than %d files (a v1 manifest's limit)", dir, MANIFEST_MAX_FILES);
        r = -E2BIG;
        goto out;
    }
    m = calloc(1, sizeof *m);
    if (!m || (m2->nfiles && !(m->files = calloc(m2->nfiles, sizeof *m->files)))) {
        r = -ENOMEM;
        goto out;
    }
    (void)str_copy(m->name, sizeof m->name, m2->name);
    for (size_t i = 0; i < m2->n; i++) {
        const struct m2_entry *e = &m2->e[i];
        if (e->type == M2_DIR)
            continue;
        if (e->type == M2_LINK) {
            log_error("release file '%s/%s' is a symlink", dir, e->path);
            r = -EINVAL;
            goto out;
        }
        struct manifest_file *f = &m->files[m->nfiles];
        if (str_copy(f->path, sizeof f->path, e->path) < 0) {
            log_error("release path '%s' is too long (limit %d bytes)", e->path, MANIFEST_PATH_MAX - 1);
            r = -ENAMETOOLONG;
            goto out;
        }
        memcpy(f->sha256, e->sha256, sizeof f->sha256);
        f->size = e->size;
        f->mode = e->mode;
        m->nfiles++;
    }
    /* m2's entries are sorted by path with strcmp, and so are these */
    *ret_m = m;
    m = NULL;
    r = 0;
out:
    manifest_free(m);
    manifest2_free(m2);
    return r;
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
