/* common/pack.h: a pack of objects, v1 (docs/protocol.md, "Pack"): a POSIX (pax) tar whose
 * members are regular files named by the 64-hex SHA-256 of their content, nothing else.  It is
 * what the controller streams into a host's object store and what `pct push` carries into a
 * container in one piece.  A host builds one with plain `tar --format=posix` (hosts run no drover
 * code), so the format is exactly "tar of objects"; readers trust nothing: names must be 64 hex
 * digits, entries regular files, sizes are checked by the caller against the manifest before a
 * byte is written (the manifest bounds what a pack may expand to).
 * Only this file knows the format.
 */
#ifndef DROVER_PACK_H
#define DROVER_PACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/sha256.h"

#define PACK_BLOCK (64u << 10)

/* Writer: bytes go to write_fn (returns 0 or -errno), which may block (it is the network). */
struct pack_writer;
typedef int (*pack_write_fn)(void *ctx, const void *buf, size_t len);
int pack_writer_new(pack_write_fn fn, void *ctx, struct pack_writer **ret_w);
/* Append the object `sha` read from src_path, which must have `size` bytes and that hash:
 * -ESTALE when the file changed since the manifest was built (nothing wrong is sent unnoticed:
 * the reader would refuse it anyway). */
int pack_writer_add(struct pack_writer *w, const char *sha, const char *src_path, uint64_t size);
/* What the manifest walk saw of the file when it hashed it (ino 0: nothing). */
struct pack_seen {
    uint64_t dev, ino;
    int64_t mtime_ns, ctime_ns;
};
/* pack_writer_add, without hashing the file again when its inode still has the identity seen
 * (device, inode, size, mtime, ctime) before and after it is read: the controller hashed every
 * file once for the manifest, and re-hashing it for each host's pack cost one SHA-256 of the
 * release per host on the controller.  A file whose identity moved is hashed as before
 * (-ESTALE when it no longer matches sha). */
int pack_writer_add_seen(struct pack_writer *w, const char *sha, const char *src_path, uint64_t size,
                         const struct pack_seen *seen);
/* Whether the last add failed on its source file (it could not be opened or read, or no longer
 * has the size and hash given: -ESTALE), not on the writer's sink: a local file problem, which
 * resending does not mend. */
bool pack_writer_failed_reading(const struct pack_writer *w);
/* Finish the archive (the tar trailer) and free w; -errno if a write failed.  pack_writer_free
 * without finishing abandons it. */
int pack_writer_finish(struct pack_writer *w);
void pack_writer_free(struct pack_writer *w);

/* Reader over a pack file ("-": stdin, a stream: members are read in order, never seeked).
 * next: 1 with the object's name and declared size, 0 at the end, -EBADMSG for a member that is not a regular file named by 64 hex digits or a broken archive. */
struct pack_reader;
int pack_reader_open(const char *path, struct pack_reader **ret_r);
int pack_reader_next(struct pack_reader *r, char ret_sha[SHA256_HEX_LEN + 1], uint64_t *ret_size);
/* Read up to len bytes of the current member; 0 at its end. */
ssize_t pack_reader_read(struct pack_reader *r, void *buf, size_t len);
void pack_reader_free(struct pack_reader *r);

#endif
