/* common/fs.h: file locks with deadlines (house rule: nothing waits forever).
 *
 * Every lock drover takes on a file goes through fs_lock_file(): an flock(LOCK_EX) polled with
 * LOCK_NB against CLOCK_MONOTONIC, so a process that died holding nothing is never waited on
 * and a live one that holds the lock too long is named instead of waited on forever.
 *
 * Error convention (docs/architecture.md, "Errors"): >= 0 success, -errno failure.
 */
#ifndef DROVER_FS_H
#define DROVER_FS_H

#include <stddef.h>

/* Open path (created 0600 when missing; O_NOFOLLOW, O_CLOEXEC) and take an exclusive flock on
 * it, waiting at most timeout_s seconds (0: one try).  Returns the fd, which holds the lock until
 * it is closed (the caller owns it).  -ETIMEDOUT when the lock stayed held: err (when not NULL)
 * then says "lock 'PATH' still held after N s (by pid P (COMM))", the holder when /proc/locks
 * names one; other failures -errno with err naming the path.  Thread-safe; not async-signal-safe. */
int fs_lock_file(const char *path, double timeout_s, char *err, size_t errsz);

/* The pid holding an flock on path, from /proc/locks (0: none visible; never takes the lock). */
int fs_lock_holder(const char *path);

#endif
