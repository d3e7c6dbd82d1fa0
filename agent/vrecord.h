/* agent/vrecord.h: the verification record of the agent's object store, ROOT/objects/.verified.
 *
 * Re-verifying a release before it is reactivated must be cheap for a multi-GB environment, so
 * an object is hashed in full once (when it arrives, or at the first verify) and its inode's stat
 * identity is recorded: (dev, ino, size, mtime, ctime, nlink), keyed by (sha256, mode), i.e. by
 * the object file objects/<sha256>.<mode> every release hardlinks.  A later verify stats each
 * entry and re-hashes only those whose identity differs.  A write changes mtime and ctime; a
 * file replaced (sed -i, cp, an editor) has another inode; a chmod changes ctime.  The one
 * change we accept without re-hashing is a new ctime that comes with a different link count:
 * the store itself links objects into new releases and unlinks them in GC, which bumps ctime
 * on every shared object (a new environment sharing 99% of its files with the old one would
 * otherwise make the old one's next verify re-hash gigabytes).
 *
 * What it does not catch: bytes that rot on disk under an unchanged inode (only a full re-hash
 * does: remove objects/.verified), and someone with root in the container who rewrites a file,
 * restores its mtime and changes its link count (or edits this record).  It guards against
 * accidents, not against the container's root.
 *
 * The file is a sorted array of fixed records behind a header; it is read whole (88 bytes per
 * object: 17 MiB for 200,000 objects), and rewritten by tmp + rename under an flock of
 * objects/.verified.lock, merging what another process wrote meanwhile.  Losing a record (a
 * crash, a race) costs a re-hash, never a wrong answer.  Not thread-safe; no logging.
 */
#ifndef DROVER_AGENT_VRECORD_H
#define DROVER_AGENT_VRECORD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "agent/store.h"

struct vrec {
    uint8_t sha[32];
    uint32_t mode; /* the object file's mode (0444, 0555) */
    uint32_t pad;
    uint64_t dev, ino, size, nlink;
    int64_t mtime_ns, ctime_ns;
};

/* A record set: the loaded file (sorted, v[0..n)) plus updates queued for vrecord_save. */
struct vrecord {
    struct vrec *v;
    size_t n;
    struct vrec *up;
    size_t nup, capup;
};

/* Load ROOT/objects/.verified into r (an absent or unreadable file loads empty: everything is
 * re-hashed).  0 or -ENOMEM.  Free with vrecord_done (accepts a zeroed struct). */
int vrecord_load(const struct store *s, struct vrecord *r);
void vrecord_done(struct vrecord *r);

/* Does st (an lstat of an entry of object sha/mode) match its record, by the rule above?
 * VREC_NO, VREC_SAME (identical), VREC_LINKED (only ctime and link count moved: the caller
 * records the new identity with vrecord_put, so that the next ctime change needs its own
 * link count change to pass). */
enum vrec_match { VREC_NO, VREC_SAME, VREC_LINKED };
enum vrec_match vrecord_matches(const struct vrecord *r, const char *sha_hex, uint32_t mode, const struct stat *st);

/* Queue "sha/mode was hashed and found right; this is its inode now".  0 or -ENOMEM/-EINVAL. */
int vrecord_put(struct vrecord *r, const char *sha_hex, uint32_t mode, const struct stat *st);

/* Forget sha/mode (its object was found corrupt): queued as a record with ino 0. */
int vrecord_forget(struct vrecord *r, const char *sha_hex, uint32_t mode);

/* Merge the queued updates into the file (re-read under objects/.verified.lock, waited for at
 * most lock_timeout_s: a holder stuck longer gets -ETIMEDOUT and a warning naming it, and the
 * updates stay queued).  0 or -errno. */
int vrecord_save(const struct store *s, struct vrecord *r, double lock_timeout_s);

#endif
