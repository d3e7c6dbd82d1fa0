/* controller/transport/conn.h: one connection per inventory host, the same interface whether the host is
 * reached over SSH (ssh.c) or is this machine (`local = true`: commands are spawned directly).
 * Everything above this layer passes argv arrays; only here do they become a shell line
 * (quote.c, for SSH) or an execvp (local).  Not thread-safe; one owner per conn.
 */
#ifndef DROVER_CONN_H
#define DROVER_CONN_H

#include <stdbool.h>
#include <stddef.h>

#include "controller/inventory.h"
#include "controller/transport/ssh.h"

#define CONN_ERR_MAX 1024
#define CONN_CALL_MAX 48 /* a call's token (pct.c), NUL included */

struct conn {
    const struct inventory *inv;
    int host;                /* index into inv->hosts */
    const struct inv_host *h;
    struct ssh_conn *ssh;    /* NULL for a local host */
    char err[CONN_ERR_MAX];  /* message of the last failure on this conn */
    /* After conn_run gave -ETIMEDOUT or -EINTR: 1 drover ended the command (a local host: its
     * process group, SIGTERM then SIGKILL), 0 nothing of it was left, -EBUSY part of it was
     * still there after SIGKILL; -ENOSYS over SSH, where closing the channel reaches only the
     * host's shell (pct.c ends what ran in a container: pct_end_calls). */
    int ended;
    /* The host is known not to answer (a follow-up got no answer, or the caller saw it silent):
     * conn_run_cleanup tries nothing more on this conn (-ENOTCONN at once), until a call on it
     * is answered again (conn_run over SSH).  A new conn starts false. */
    bool silent;
};

struct conn_stream;
#define CONN_STREAM_ERR_MAX 512

/* For drover's main, before any command runs: SIGINT and SIGTERM, where no verb has put a
 * handler of its own, first end every local command still running (its process group: SIGTERM
 * and SIGCONT), then kill drover as they would have.  A local command leads a group of its own,
 * out of reach of the terminal's Ctrl-C: without this a verb with no handler left it running to
 * its end.  A verb's own handler (deploy's, logs -f's) sets its flags instead, and the waits end
 * the groups (exec_interrupted, conn_stream_free); deploy puts this one back after. */
void conn_exit_signals_init(void);

/* Open host number `host` of inv.  trust_cmd: what to tell the operator to run for an unknown
 * key.  Errors as ssh_conn_open (message in err).  Free with conn_free(). */
int conn_open(const struct inventory *inv, int host, const char *trust_cmd, struct conn **ret_conn,
              char *err, size_t err_sz);
void conn_free(struct conn *c);

/* Run argv (NULL-terminated) on the host and wait at most timeout_s.  0 with *ret (any exit
 * status; free with exec_result_done), or -errno with c->err set (-ETIMEDOUT, -EINTR, -EIO,
 * -ENOENT when a local program cannot be started).  On a local host a timeout or an interrupt
 * ends the command's whole process group before it returns (c->ended says how it went; at most
 * 3 s more). */
int conn_run(struct conn *c, const char *const *argv, double timeout_s, struct exec_result *ret);

/* What c->ended says, as conn_run appends it to a local command's timeout or interrupt ("; drover
 * ended it and what it started (SIGTERM, then SIGKILL)"; "" when nothing was left). */
const char *conn_ended_words(int ended);
/* Take conn_ended_words(ended) off the end of msg, where it is (the caller says the outcome
 * itself, once, with what it ended elsewhere). */
void conn_unsay_ended(char *msg, int ended);

/* conn_run for the follow-up that ends what a deadline or a Ctrl-C gave up on (pct_end_calls):
 * exec_interrupted does not stop it, and over SSH nothing in it waits longer than timeout_s.
 * -ENOTCONN at once, nothing tried, with c->err "host 'H' is not answering", when the session
 * has dropped or c->silent is set; a follow-up that got no answer or no channel (-ETIMEDOUT,
 * -EIO) sets c->silent, so that the next one on this conn does not wait again. */
int conn_run_cleanup(struct conn *c, const char *const *argv, double timeout_s, struct exec_result *ret);

/* Start argv as a long-lived stream whose stdout is read line by line without blocking. */
int conn_stream_open(struct conn *c, const char *const *argv, size_t line_max,
                     struct conn_stream **ret_s);
/* 1: a complete line (without '\n') in *ret_line and *ret_len, valid until the next call;
 * 0: nothing complete yet; -EPIPE: the stream ended; -E2BIG: a line over line_max was dropped
 * (the next call continues after it); -EIO. */
int conn_stream_poll(struct conn_stream *s, char **ret_line, size_t *ret_len);
/* The last line the stream's command wrote to stderr (at most CONN_STREAM_ERR_MAX - 1 bytes of
 * its tail, trimmed), "" when none: why a stream ended without a line (pct's own error, say). */
const char *conn_stream_err(struct conn_stream *s);
/* Keep with s the call its command was marked as (pct.c: token, in container ct; ct borrowed,
 * token copied), for whoever ends what is left of it when the stream is given up. */
void conn_stream_set_call(struct conn_stream *s, const struct inv_ct *ct, const char *token);
/* That call's token, with the stream's conn and container; NULL when none was set or the
 * command has ended on its own (conn_stream_poll gave -EPIPE): then nothing of it is waited for. */
const char *conn_stream_call(const struct conn_stream *s, struct conn **ret_c, const struct inv_ct **ret_ct);
/* Close s (NULL: nothing): the channel, or a local command's whole process group.  Over SSH
 * that reaches only the host's shell: streams of container calls are freed with
 * pct_streams_free, which ends them in their containers too. */
void conn_stream_free(struct conn_stream *s);

/* Copy a local file to remote_path on the host (SFTP for SSH hosts, a local copy otherwise),
 * through a temp name and a rename.  label: progress label (NULL = none). */
int conn_upload(struct conn *c, const char *local_path, const char *remote_path, const char *label);

/* Wait until any stream may have data (SSH socket or pipes), at most ms. */
void conn_wait(struct conn **conns, int nconns, int ms);

#endif
