/* common/safefile.h: opening files whose names someone else could have prepared.
 *
 * Two rules (issue 12): a path a verb is given is opened only if it is a regular file, and the
 * check cannot hang (a FIFO blocks open(2) and read(2) forever; a device may do anything); a
 * temp file at a predictable name ("<path>.tmp.<pid>", "<name>.part.<pid>") is created with
 * O_EXCL|O_NOFOLLOW, so a symlink or file planted there is never written through.
 */
#ifndef DROVER_SAFEFILE_H
#define DROVER_SAFEFILE_H

#include <stdbool.h>
#include <sys/types.h>

/* Open path read-only (O_CLOEXEC|O_NOCTTY, O_NONBLOCK during the open so a FIFO cannot block
 * it, cleared afterwards) and make sure it is a regular file.  0 and *ret_fd; -EINVAL when it
 * is something else (*ret_type, may be NULL, then names it: "FIFO", "directory", ...);
 * -errno from open(2).  With nofollow a final symlink is refused too (-ELOOP). */
int safefile_open_regular(const char *path, bool nofollow, int *ret_fd, const char **ret_type);

/* "regular file", "directory", "FIFO", "socket", "character device", "block device",
 * "symlink" or "special file", for messages. */
const char *safefile_type_name(mode_t mode);

/* Create path for writing with O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC.  Something already there
 * (a stale temp file of a dead process that had our pid, or a planted symlink) is unlinked
 * (the name, never what a symlink points to) and the create tried once more.  0 and *ret_fd,
 * or -errno. */
int safefile_create_excl(const char *path, mode_t mode, int *ret_fd);

#endif
