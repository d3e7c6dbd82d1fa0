/* controller/send.h: stream bytes into a command on a host (its stdin) near the wire's limit,
 * with an idle-progress deadline instead of a fixed total.  Over SSH this is one exec channel
 * written without blocking (no per-write round trip as SFTP has in libssh 0.10: the SSH window
 * keeps megabytes in flight); for a local host the bytes go through a temp file.
 */
#ifndef DROVER_SEND_H
#define DROVER_SEND_H

#include <signal.h>
#include <stdint.h>

#include "controller/transport/conn.h"

/* Set from a SIGINT/SIGTERM handler: transfers stop at once with -EINTR. */
extern volatile sig_atomic_t send_interrupted;

/* What the producer calls to send; returns 0 or -errno (-ETIMEDOUT when the peer took nothing
 * for idle_s seconds: the message in c->err names host and bytes done). */
typedef int (*send_write_fn)(void *wctx, const void *buf, size_t len);
typedef int (*send_produce_fn)(void *ctx, send_write_fn write, void *wctx);

struct send_opts {
    double idle_s;       /* no byte accepted for this long: give up */
    double finish_s;     /* after the last byte: how long the command may take to exit */
    const char *label;   /* progress label ("stage h1"), NULL: none */
    uint64_t total;      /* expected bytes, for the progress line's ETA (0: unknown) */
};

/* Run argv on c's host with produce's bytes on its stdin; 0 with *ret (the command's exit
 * status and output) or -errno with c->err set.  *ret_sent: bytes accepted (also on failure).
 * After -ETIMEDOUT or -EIO over SSH the session may be wedged: the caller drops the connection. */
int conn_send(struct conn *c, const char *const *argv, const struct send_opts *o,
              send_produce_fn produce, void *ctx, struct exec_result *ret, uint64_t *ret_sent);

/* Progress line on stderr when it is a TTY: "label: 12.0/100.0 MiB 40.1 MiB/s ETA 2s". */
struct progress {
    const char *label;
    uint64_t total, done;
    double t0, last;
    bool tty;
};
void progress_init(struct progress *p, const char *label, uint64_t total);
void progress_add(struct progress *p, uint64_t n);
void progress_end(struct progress *p);

#endif
