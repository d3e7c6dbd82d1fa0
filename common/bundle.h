/* common/bundle.h: a release bundle is a reproducible tar.zst (libarchive) of a release directory
 * with MANIFEST.json as its first entry (docs/protocol.md, "Bundle").
 *
 * Packing is deterministic: entries sorted by path, mtime 0, uid/gid 0, modes from the manifest,
 * so the same directory gives byte-identical bundles.  Unpacking trusts nothing: every entry must
 * be a regular file or directory named in (or implied by) the manifest, with a safe relative path,
 * and each file's SHA-256 and size must match the manifest before the unpack counts as done.
 * Only this file knows the bundle layout.
 */
#ifndef DROVER_BUNDLE_H
#define DROVER_BUNDLE_H

#include "common/manifest.h"

#define BUNDLE_MAX_BYTES (8ull << 30)   /* largest bundle accepted */
#define BUNDLE_MAX_FILE_BYTES (4ull << 30)

/* Pack dir into out_path (written atomically: temp, fsync, rename).  name as for
 * manifest_from_dir.  On success writes the release id and, if ret_m is not NULL, the manifest
 * (caller frees).  Errors: -errno, -EINVAL for unsupported file types in dir. */
int bundle_pack(const char *dir, const char *name, const char *out_path,
                char ret_id[RELEASE_ID_LEN + 1], struct manifest **ret_m);

/* Verify and unpack blob into dest_dir, which must not exist; the caller renames it into place.
 * expected_id: the release id the blob must carry (NULL: accept any, report it).  Files are
 * written with the manifest's modes and fsynced, the directory tree too.  On any failure
 * dest_dir is removed.  Errors: -EBADMSG checksum/size/manifest mismatch or release id
 * mismatch, -EINVAL unsafe or unexpected entry, -E2BIG over a limit, -errno otherwise.
 * errbuf (may be NULL) receives a one-line human reason naming the file. */
int bundle_unpack(const char *blob, const char *dest_dir, const char *expected_id,
                  char ret_id[RELEASE_ID_LEN + 1], char *errbuf, size_t errbuf_sz);

#endif
