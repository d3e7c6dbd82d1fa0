/* common/manifest.h: the release manifest, version 1 (docs/protocol.md, "Manifest").
 *
 * MANIFEST.json lists every file of a release with its SHA-256, size and mode:
 *   {"v":1,"name":"v1","files":[{"path":"bin/drover-train","sha256":"…","size":123,"mode":"0755"},…]}
 * Canonical form: compact JSON, keys sorted, files sorted by path (bytewise).  The release id is
 * the SHA-256 of the canonical form, so the same content is the same release whatever its name.
 * Only this file knows the format.  Limits: MANIFEST_MAX_FILES files, MANIFEST_MAX_BYTES bytes,
 * paths relative, at most MANIFEST_PATH_MAX-1 bytes, no "..", ".", empty or absolute components.
 */
#ifndef DROVER_MANIFEST_H
#define DROVER_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "common/sha256.h"

#define MANIFEST_VERSION 1
#define MANIFEST_MAX_FILES 4096
#define MANIFEST_MAX_BYTES (2u << 20)
#define MANIFEST_PATH_MAX 256
#define MANIFEST_NAME_MAX 64
#define RELEASE_ID_LEN SHA256_HEX_LEN /* char id[RELEASE_ID_LEN + 1] */
#define RELEASE_SHORT_LEN 12          /* how ids are shown to people */

struct manifest_file {
    char path[MANIFEST_PATH_MAX];
    char sha256[SHA256_HEX_LEN + 1];
    uint64_t size;
    uint32_t mode; /* permission bits only (07777 masked to 0777 | setgid off: we keep 0777) */
};

struct manifest {
    char name[MANIFEST_NAME_MAX]; /* label people gave the release ("v1"); not part of identity rules */
    size_t nfiles;
    struct manifest_file *files; /* owned; sorted by path */
};

/* Build a manifest by walking dir with the v2 walker (manifest2_from_dir, so MANIFEST.json and
 * MANIFEST at the top are skipped) and keeping its regular files: symlinks and special files are
 * refused with -EINVAL, a path of MANIFEST_PATH_MAX bytes or more with -ENAMETOOLONG, more than
 * MANIFEST_MAX_FILES files with -E2BIG, each logged as an error naming the path.  name may be
 * NULL (then manifest2_name_of_dir(dir)).  Caller frees with manifest_free(). */
int manifest_from_dir(const char *dir, const char *name, struct manifest **ret_m);

/* Parse and validate a manifest document (limits above).  -EINVAL bad document, -E2BIG over a
 * limit, -EPROTONOSUPPORT other version. */
int manifest_parse(const char *text, size_t len, struct manifest **ret_m);

/* Canonical JSON text (malloc'd, NUL-terminated, caller frees) and its release id. */
int manifest_dump(const struct manifest *m, char **ret_text, char ret_id[RELEASE_ID_LEN + 1]);

/* true (1) when path is an acceptable relative release path: manifest2_path_is_safe() (one rule
 * for both versions) and shorter than MANIFEST_PATH_MAX. */
int manifest_path_is_safe(const char *path);

/* Find a file by path; NULL if absent.  Borrowed pointer into m. */
const struct manifest_file *manifest_find(const struct manifest *m, const char *path);

void manifest_free(struct manifest *m);

/* A release id as people see it: its first RELEASE_SHORT_LEN characters into buf, or `none`
 * ("-", "none") when id is NULL or "".  Returns buf. */
const char *release_short(const char *id, const char *none, char buf[RELEASE_SHORT_LEN + 1]);

#endif
