/* common/util.h: small helpers every part needs: bounded string copy, monotonic time,
 * whole-file reads with a size limit, atomic file replacement, directory creation.
 *
 * Error convention (docs/architecture.md, "Errors"): fallible functions return int, >= 0 on
 * success and -errno on failure; ret_* outputs are written only on success.
 */
#ifndef DROVER_UTIL_H
#define DROVER_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Copy src into dst[dstsz] always NUL-terminated.  Returns 0, or -ENAMETOOLONG when src did not
 * fit (dst then holds the truncated prefix). */
int str_copy(char *dst, size_t dstsz, const char *src);

/* Optimal string alignment distance (Levenshtein with adjacent transpositions, each edit 1)
 * between a and b, both at most 63 bytes (longer: 99, i.e. never near). */
int str_edit_distance(const char *a, const char *b);

/* The candidate nearest to a mistyped word ("containres" -> "containers"): at most 1 edit away
 * for words of up to 4 characters, 2 beyond; NULL when none is that near. */
const char *str_nearest(const char *word, const char *const *cands, size_t n);

/* true when s is all decimal digits (1..max_len of them). */
bool str_is_digits(const char *s, size_t max_len);

/* Seconds since an arbitrary point, CLOCK_MONOTONIC; for ages and timeouts. */
double time_mono(void);
/* Seconds since the epoch, CLOCK_REALTIME; for records people read. */
double time_wall(void);

/* Read a whole file of at most max bytes into a malloc'd, NUL-terminated buffer.
 * Returns 0 and *ret_data (free()) / *ret_len; -EFBIG if longer than max; -errno otherwise. */
int fs_read_file(const char *path, size_t max, char **ret_data, size_t *ret_len);

/* Replace path atomically with data: write "<path>.tmp.<pid>", fsync, rename, fsync the directory.
 * On failure the old file is untouched and the temp file removed. */
int fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode);

/* fsync the directory holding path (or path itself when it is a directory). */
int fs_fsync_dir(const char *dir);

/* mkdir -p with mode for the created components.  0 when it already exists as a directory. */
int fs_mkdir_p(const char *path, mode_t mode);

/* rm -rf path; 0 if it did not exist.  Does not follow symlinks. */
int fs_rm_rf(const char *path);

/* Write all of buf to fd, retrying on EINTR and short writes. */
int fd_write_all(int fd, const void *buf, size_t len);

/* Whether nobody reads fd any more: a pipe whose read end is closed, a socket whose peer hung up,
 * a terminal hung up (poll's POLLERR or POLLHUP, never waiting).  A file, /dev/null, a live reader
 * or a closed fd: false.  How a verb that runs long on the controller's behalf (the agent's
 * preflight) notices that the SSH channel it was started on is gone. */
bool fd_reader_gone(int fd);

#endif
