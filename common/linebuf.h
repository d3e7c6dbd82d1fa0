/* common/linebuf.h: one bounded line reader for every byte stream we split into lines (the
 * controller's agent streams, conn.c; heartbeat pipes, agent/supervise.c; control socket
 * requests, agent/daemon.c, and replies, agent/rpc.c).
 *
 * The caller owns the storage and does the reading: linebuf_room() says where and how much to
 * read, linebuf_added() takes what was read, linebuf_next() hands out complete lines.  A line
 * longer than max bytes (newline excluded) is never handed out: its bytes are dropped as they
 * come, it is counted once in `overlong` as soon as it is known to be too long, and
 * linebuf_next() returns -E2BIG once, where it ends.  Memory stays bounded by the storage.
 * No I/O, no allocation, not thread-safe (one reader per linebuf).
 */
#ifndef DROVER_LINEBUF_H
#define DROVER_LINEBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct linebuf {
    char *buf;         /* caller's storage, cap bytes */
    size_t cap;        /* >= max + 1 */
    size_t max;        /* longest line handed out, newline excluded */
    size_t len;        /* bytes held */
    size_t consumed;   /* bytes of the line handed out last, dropped on the next call */
    bool skipping;     /* inside an over-long line: dropping up to its newline */
    uint64_t overlong; /* over-long lines seen */
};

/* Use buf[cap] for lines of at most max bytes.  -EINVAL when cap < max + 1. */
int linebuf_init(struct linebuf *lb, char *buf, size_t cap, size_t max);

/* Where to read next; *ret_room > 0 always (a full buffer without a newline is over-long and
 * dropped here, counted in overlong). */
char *linebuf_room(struct linebuf *lb, size_t *ret_room);
/* n bytes were read into the room. */
void linebuf_added(struct linebuf *lb, size_t n);

/* The next complete line: 1 with *ret_line (NUL where its newline was, valid until the next
 * call) and *ret_len (newline excluded); 0 when no complete line is held; -E2BIG when an
 * over-long line ended here (skipped). */
int linebuf_next(struct linebuf *lb, char **ret_line, size_t *ret_len);

/* After EOF: the bytes left without a newline as a line (1, NUL-terminated), 0 when none,
 * -E2BIG when they belong to an over-long line.  Leaves the buffer empty. */
int linebuf_rest(struct linebuf *lb, char **ret_line, size_t *ret_len);

#endif
