/* agent/objstore.h: releases assembled from a content-addressed object store (manifest v2,
 * common/manifest2.h; packs, common/pack.h) under the agent root:
 *   objects/<sha256>.<mode>   one verified object, read-only (mode = manifest mode & 0555),
 *                             hardlinked into every release that holds that content
 *   releases/<id>/            dirs, hardlinks to objects, relative symlinks, MANIFEST (v2 text);
 *                             a release naming an environment gets `.drover-env` ->
 *                             ../<env id> (the env release must be in the store first)
 * A release appears only by rename of a complete tree built under releases/<id>.tmp.<pid>.
 * Temp names carry the pid of the process that made them; cleanup removes only those whose
 * process is gone, so concurrent adds never touch each other's work.  An object's link count
 * is its reference count: GC removes objects no release links to.
 */
#ifndef DROVER_AGENT_OBJSTORE_H
#define DROVER_AGENT_OBJSTORE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "agent/store.h"
#include "common/manifest2.h"

#define OBJSTORE_ENV_LINK ".drover-env"

#define OBJSTORE_INCOMING_MAX_AGE_S (6 * 3600)

/* What a cleanup removed: entries, and the bytes that freed (the blocks of files no other name
 * links). */
struct objstore_cleaned {
    size_t entries;
    uint64_t bytes;
};

/* Remove temp files and dirs (releases/, objects/, incoming/) whose creating process is gone
 * (an install interrupted by Ctrl-C leaves objects/.tmp.<sha>.<pid>, as large as the file it
 * was storing), and manifests and packs left in incoming/ for OBJSTORE_INCOMING_MAX_AGE_S by a
 * deploy that died between `release missing` and `release install`.  Adds what it removed to
 * *ret (may be NULL). */
void objstore_clean_stale(const struct store *s, struct objstore_cleaned *ret);

/* `release clean` (what `drover gc` asks each container): objstore_clean_stale, and incoming/'s
 * manifests and packs whatever their age when no job's deploy lease is held in this container
 * (lease_any_held: a deploy holds it from before its first `release missing` to after its
 * install, so no install is about to read them).  Never an entry whose owner process lives.
 * *ret_incoming_kept (may be NULL): manifests or packs stayed because a lease is held. */
void objstore_clean_gc(const struct store *s, struct objstore_cleaned *ret, bool *ret_incoming_kept);

/* Is release id installed: releases/<id> is there, its MANIFEST hashes to id, and neither it
 * nor its environment was marked damaged by a verify?  The record of a verified install (a release appears only by rename after its check); no entry is
 * walked and no content rehashed (that is objstore_verify). */
bool objstore_have(const struct store *s, const char *id);

/* What a verify read: entries only stat-ed (their inode as recorded, vrecord.h), entries hashed. */
struct objstore_vstats {
    size_t stat_only, hashed;
    uint64_t bytes_hashed;
};

/* objstore_have, and then its own tree checked by the cheap verify (objstore_verify's, without
 * its environment: a stat per entry, a file read only where its inode changed since it was last
 * hashed).  False for a release found damaged, which is then marked and its changed objects
 * removed as objstore_verify does, so that the `release missing` that follows asks for them.
 * `release have`: a stat per file (about 0.8 s for 200,000), never a full re-hash. */
bool objstore_have_intact(const struct store *s, const char *id);

/* Which files of m have no object in the store: ranges of entry indexes (m2_ranges format) into
 * ret (caller frees with m2_ranges_done).  *ret_present: the release is installed by
 * objstore_have's record and its tree passes the cheap verify of objstore_have_intact (then ret
 * is empty; vs, may be NULL, counts what that verify stat-ed and hashed).  A release found
 * damaged -- by that verify (marked so, as objstore_verify marks it), by an earlier one, or its
 * environment marked -- is not present: its objects whose content no longer matches their name
 * are removed first (only those whose inode changed since they were hashed are read), so that
 * they are among the ranges asked for and the install that follows rebuilds it.  0 or -errno
 * (ret untouched). */
int objstore_missing(const struct store *s, const struct manifest2 *m, const char *id, struct objstore_vstats *vs,
                     struct m2_ranges *ret, bool *ret_present);

/* Install release `id` described by manifest text: objects from pack (may be NULL) are
 * verified (size bounded by the manifest, SHA-256) and stored, then the release is assembled
 * and renamed into place.  A present release is checked (every entry there, files linked with
 * the right size) and rebuilt if damaged.  Returns 0 installed, 1 already present.  Each corrupt
 * object is written to `corrupt` as "corrupt <sha256>\n" (may be NULL) and the add fails with
 * -EBADMSG; -ENOENT (objects missing: reason names one), -EINVAL (manifest, env missing),
 * -ESTALE (an object it links had been changed in place, e.g. written through a release file:
 * such objects are removed and each written to `corrupt` as "resend <sha256>\n", so that the
 * caller sends them and installs again), or -errno.  err gets a one-line reason. */
int objstore_add(const struct store *s, const char *manifest_text, size_t len, const char *id,
                 const char *pack, FILE *corrupt, char *err, size_t errsz);

#define OBJSTORE_GC_GRACE_S 600
extern double objstore_gc_grace_s; /* tests set 0 */

/* Remove objects that no release links to (link count 1) and that did not change in the last
 * OBJSTORE_GC_GRACE_S seconds (an install may be about to link them).  Returns how many. */
int objstore_gc_objects(const struct store *s);

/* `release verify` of a v2 release, run before any reactivation (activate, revert, restart):
 * its MANIFEST is the release's, every entry is there, and every file's content hashes to the
 * manifest's; then the same for the environment it names.  Cheap when nothing changed: a file
 * whose inode matches the verification record (agent/vrecord.h) is stat-ed, not read; others
 * are hashed and recorded.  A mismatch marks the release (or its environment) damaged, so that
 * `release have` says absent and the next install rebuilds it, and removes the objects of the
 * release whose content no longer matches their name (a write into a release file is a write
 * into its object), so that `release missing` asks for them again.  0, -ENOENT (not
 * in the store) or -EBADMSG, with a reason in err that names the path and what to do. */
int objstore_verify(const struct store *s, const char *id, char *err, size_t errsz);
/* The same, counting into vs (may be NULL) what was only stat-ed and what was hashed. */
int objstore_verify_stats(const struct store *s, const char *id, struct objstore_vstats *vs, char *err,
                          size_t errsz);

/* Remove a release tree dir (already renamed out of releases/<id>), keeping the verification
 * record of the objects it shared current: their ctime and link count move with the unlinks. */
void objstore_rm_tree(const struct store *s, const char *dir);

/* Drop release id's damaged mark (it was removed or rebuilt). */
void objstore_forget_release(const struct store *s, const char *id);

/* The env release named by installed release id's manifest into ret_env ("" if none). */
int objstore_release_env(const struct store *s, const char *id, char ret_env[RELEASE_ID_LEN + 1]);

/* Installed release id's name (its manifest's "name" line) into ret_name; -errno, -EINVAL when
 * its MANIFEST is not a version 2 manifest's head. */
int objstore_release_name(const struct store *s, const char *id, char ret_name[MANIFEST_NAME_MAX]);

#endif
