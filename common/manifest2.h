/* common/manifest2.h: the release manifest, version 2 (docs/protocol.md, "Manifest v2"): the
 * tree of a release as text, one entry per line, so that a Python environment of 200,000 files
 * parses in a fraction of a second and streams without a JSON DOM:
 *
 *   drover-manifest 2
 *   name v1
 *   env <64 hex>                        (optional: the environment release this one runs with)
 *   d 0755 lib                          directory (every directory is listed, empty or not)
 *   f 0644 1234 <sha256> lib/a.py       regular file: mode, size, content hash
 *   l lib/python3<TAB>python3.11        relative symlink: path, TAB, target
 *
 * Entries are sorted by path (bytewise), so a parent directory always precedes its children.
 * The release id is the SHA-256 of the canonical text (exactly what manifest2_dump writes).
 * Files are stored by content: the object named by sha256 (agent/objstore.c).
 * Only this file knows the format.  Limits: MANIFEST2_MAX_ENTRIES entries, MANIFEST2_MAX_BYTES,
 * paths and targets below MANIFEST2_PATH_MAX bytes; any file size (64-bit).
 */
#ifndef DROVER_MANIFEST2_H
#define DROVER_MANIFEST2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/manifest.h"
#include "common/sha256.h"

#define MANIFEST2_VERSION 2
#define MANIFEST2_MAGIC "drover-manifest 2"
#define MANIFEST2_MAX_ENTRIES 1000000
#define MANIFEST2_MAX_BYTES (256u << 20)
#define MANIFEST2_PATH_MAX 1024
#define MANIFEST2_SYMLINK_DEPTH 40

enum m2_type { M2_DIR = 'd', M2_FILE = 'f', M2_LINK = 'l' };

struct m2_entry {
    char *path;   /* relative, safe (manifest2_path_is_safe) */
    char *target; /* M2_LINK only: relative target; else NULL */
    uint64_t size;
    uint32_t mode; /* 0777 bits (M2_FILE, M2_DIR) */
    char type;     /* enum m2_type */
    char sha256[SHA256_HEX_LEN + 1]; /* M2_FILE only */
    /* M2_FILE from manifest2_from_dir only (0 when parsed): the source file's identity when it
     * was hashed, so a later read of it (the pack writer) can tell it is unchanged without
     * hashing it again */
    uint64_t src_dev, src_ino;
    int64_t src_mtime_ns, src_ctime_ns;
};

struct manifest2 {
    char name[MANIFEST_NAME_MAX];
    char env[RELEASE_ID_LEN + 1]; /* "" or the environment release id */
    size_t n;
    struct m2_entry *e; /* sorted by path */
    char *arena;        /* parsed text the strings point into; NULL: strings strdup'd */
    uint64_t file_bytes; /* sum of file sizes */
    size_t nfiles;
};

/* Walk dir into a manifest: directories, regular files (hashed) and symlinks.  A symlink that is
 * absolute or resolves outside dir is refused with -EINVAL, logging path and target; FIFOs,
 * sockets and devices are refused before anything opens them.  MANIFEST.json and MANIFEST at the
 * top are skipped.  name NULL: manifest2_name_of_dir(dir).  Free with manifest2_free(). */
int manifest2_from_dir(const char *dir, const char *name, struct manifest2 **ret_m);

/* The name a release directory gives its release when none is given: its last path component,
 * trailing slashes ignored ("c_g8", "c_g8/", "c_g8//" and "./c_g8" are all "c_g8"); for ".",
 * ".." or a path ending in "/." the last component of its realpath (the directory they stand
 * for).  Truncated to MANIFEST_NAME_MAX - 1 bytes.  The only place a release name is derived
 * from a path: the name is a line of the manifest, so of the release id. */
void manifest2_name_of_dir(const char *dir, char ret_name[MANIFEST_NAME_MAX]);

/* A file's hash as an earlier walk found it, with the identity its inode had then. */
struct m2_known {
    char *path; /* relative to the release directory */
    uint64_t dev, ino, size;
    int64_t mtime_ns, ctime_ns;
    char sha256[SHA256_HEX_LEN + 1];
};
/* manifest2_from_dir, taking a file's hash from known (sorted by path with strcmp, nknown
 * entries; NULL/0: none) instead of reading it when the file is still the inode recorded there
 * with the same size, mtime and ctime.  *ret_reused (may be NULL): how many were taken so.  The
 * caller decides what it trusts: never record a file whose mtime or ctime is within the
 * timestamp granularity of the moment it was hashed (it could change again unseen). */
int manifest2_from_dir_known(const char *dir, const char *name, const struct m2_known *known, size_t nknown,
                             size_t *ret_reused, struct manifest2 **ret_m);

/* Parse and validate (limits, sorted unique paths, parents listed, symlinks inside).  The text
 * need not be NUL-terminated.  -EINVAL bad document, -E2BIG over a limit, -EPROTONOSUPPORT not
 * version 2. */
int manifest2_parse(const char *text, size_t len, struct manifest2 **ret_m);

/* Bytes of a manifest's head that always hold the lines manifest2_env_of and manifest2_name_of
 * read (the magic, the name and the environment come first, each line bounded). */
#define MANIFEST2_HEAD_MAX 4096

/* The environment a release runs with, from the head of its manifest text (text[0..len): the
 * whole text or only its first lines; not NUL-terminated): 1 with ret_env (RELEASE_ID_LEN + 1)
 * set when the manifest names one, 0 when it names none, -EINVAL when the head is not a
 * version 2 manifest's (or is cut before the line that would name it). */
int manifest2_env_of(const char *text, size_t len, char ret_env[RELEASE_ID_LEN + 1]);

/* The release's name (the "name" line) from the head of its manifest text (text[0..len), as for
 * manifest2_env_of): 0 with ret_name set, -EINVAL when the head is not a version 2 manifest's or
 * is cut before the name line ends, -E2BIG when the name does not fit MANIFEST_NAME_MAX. */
int manifest2_name_of(const char *text, size_t len, char ret_name[MANIFEST_NAME_MAX]);

/* Canonical text (malloc'd, NUL-terminated; *ret_len its length) and its release id. */
int manifest2_dump(const struct manifest2 *m, char **ret_text, size_t *ret_len,
                   char ret_id[RELEASE_ID_LEN + 1]);

/* Check every symlink resolves inside the release (following symlinks of the manifest, at most
 * MANIFEST2_SYMLINK_DEPTH).  0, or -EINVAL with *ret_bad the first offending entry. */
int manifest2_check_links(const struct manifest2 *m, const struct m2_entry **ret_bad);

/* The entry at `path` (relative to the release root; a leading "./" is ignored), or NULL. */
/* The next symlink of m, from index *pos on, whose target stays inside the release but is not
 * in it (dangling: `latest -> ckpt/step-100`, a target the job may create at run time, or one
 * forgotten); *pos moves past it.  NULL when there is none left.  Links into .drover-env are
 * not judged (the environment is another manifest). */
const struct m2_entry *manifest2_dangling_link(const struct manifest2 *m, size_t *pos);
const struct m2_entry *manifest2_find(const struct manifest2 *m, const char *path);
/* Why `path` cannot be run as a job's command from this release: "is missing", "is a directory",
 * "is not executable", "is a symlink whose target is missing", ... or NULL when it can (a file
 * with an x bit, reached through the release's own symlinks; a path into .drover-env is judged
 * in the container). */
const char *manifest2_exec_problem(const struct manifest2 *m, const char *path);
bool manifest2_path_is_safe(const char *path);
void manifest2_free(struct manifest2 *m);

/* Index ranges ("which entries are missing"): lines "START COUNT\n".  format appends to a
 * malloc'd buffer; parse calls cb for each range, refusing ranges past n. */
struct m2_ranges {
    char *text;
    size_t len, cap;
    size_t start, count; /* open range */
};
int m2_ranges_add(struct m2_ranges *r, size_t index);
int m2_ranges_finish(struct m2_ranges *r); /* flushes the open range; text NUL-terminated */
void m2_ranges_done(struct m2_ranges *r);
int m2_ranges_parse(const char *text, size_t len, size_t n,
                    int (*cb)(size_t start, size_t count, void *ctx), void *ctx);

#endif
