/* agent/store.h: the release store under the agent root (default /var/lib/drover):
 *   releases/<id>/          immutable, unpacked and verified bundle, with MANIFEST.json
 *   jobs/<job>/current      symlink -> ../../releases/<id>, switched atomically per job
 *   incoming/               blobs pushed by the controller (removed after `release add`)
 *   runs/<job>/checkpoints  the worker's; never touched by switches, rollbacks or GC
 *   runs/<job>/logs         rank<N>.log
 * Release ids are 64 lowercase hex digits (the manifest hash), so they are safe path parts.
 */
#ifndef DROVER_AGENT_STORE_H
#define DROVER_AGENT_STORE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/manifest.h"

struct store {
    char root[PATH_MAX - 512]; /* leaves room for every path built under it */
};

/* Create the layout under root (mode 0700 for the root) and remove stale *.tmp* entries left
 * in releases/ and jobs/<job>/ by an interrupted add or switch. */
int store_open(struct store *s, const char *root);

/* Build root-relative paths; -ENAMETOOLONG if they do not fit. */
int store_path(const struct store *s, char *buf, size_t sz, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Resolve a full id or a unique prefix (at least 6 hex digits) of an installed release.
 * -ENOENT none, -EINVAL not hex / too short, -ENOTUNIQ ambiguous. */
int store_resolve(const struct store *s, const char *id_or_prefix, char ret_id[RELEASE_ID_LEN + 1]);
bool store_has_release(const struct store *s, const char *id);

/* Verify blob against id and install it as releases/<id> (unpacked into releases/<id>.tmp.<pid>,
 * fsynced, renamed).  Returns 0 installed, 1 already present (blob not read).  A blob in the
 * store's incoming/ directory (where the controller pushes it) is removed in both cases and after
 * a verification failure; a blob anywhere else is never removed.  Errors as bundle_unpack, with a
 * one-line reason in err. */
/* Remove path if it lies in the store's incoming/ directory (what the controller pushed); a
 * file anywhere else belongs to whoever named it and is never removed. */
void store_consume(const struct store *s, const char *path);

int store_add_release(const struct store *s, const char *blob, const char *id, char *err, size_t errsz);

/* Release ids in the store, newest install first; *ret_ids malloc'd array of malloc'd strings;
 * free with store_ids_free(). */
int store_list(const struct store *s, char ***ret_ids, size_t *ret_n);
void store_ids_free(char **ids, size_t n);

/* Point jobs/<job>/current at releases/<id> atomically (symlink to a temp name, rename, fsync
 * the directory).  The release must exist.  store_current reads it back ("" if unset). */
/* Re-verify an installed release against its MANIFEST.json: the manifest's id is the release
 * id, every file is there as a regular file with its size and SHA-256 (a release is checked
 * again before it is reactivated: disks rot, people edit).  -ENOENT not in the store,
 * -EBADMSG failed (reason in err). */
int store_verify_release(const struct store *s, const char *id, char *err, size_t errsz);
int store_switch_current(const struct store *s, const char *job, const char *id);
int store_current(const struct store *s, const char *job, char ret_id[RELEASE_ID_LEN + 1]);

/* Remove releases beyond the keep newest, never one named in protect[nprotect] (current,
 * previous and good of every job) nor the environment of one kept.  The keep newest are counted
 * over the releases not named in failed[nfailed] (marked bad) first, then over the failed ones:
 * failed releases go first, so newer failed deploys never push older good releases out.  NULL
 * entries in either list are skipped.  Returns the number removed. */
int store_gc(const struct store *s, size_t keep, const char *const *protect, size_t nprotect,
             const char *const *failed, size_t nfailed);

#endif
