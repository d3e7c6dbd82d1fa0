/* controller/transport/pct.h: everything the controller does to a container goes through here: commands
 * in the container (`pct exec <vmid> --keep-env 0 -- ...`), files into it (`pct push ...
 * --perms`), and the agent CLI of docs/protocol.md.  For a HOST:local:/ROOT node there is no
 * container: the agent runs on the host itself with --root ROOT and files are copied with
 * `install`.  PCT.md's quirks are handled here: push's exit status proves nothing (callers
 * verify through the agent or sha256sum), and pct never creates parent directories.
 */
#ifndef DROVER_PCT_H
#define DROVER_PCT_H

#include "common/agentcli.h"
#include "controller/transport/conn.h"
#include "controller/inventory.h"

#define PCT_ARGV_MAX 160
#define PCT_CALL_ENV "DROVER_CALL" /* marks every process of one container call (pct_end_calls) */
#define PCT_CALL_MAX CONN_CALL_MAX  /* a call's token, NUL included */
#define PCT_MARK_MAX 64            /* "DROVER_CALL=TOKEN", NUL included */
#define PCT_END_TIMEOUT_S 10.0     /* the follow-up that ends a call: its own short deadline */
#define PCT_AGENT_ROOT AGENT_DEFAULT_ROOT /* the agent's default --root inside a container */

/* Run a plain command inside the container (argv NULL-terminated).  For a local root it runs
 * on the host.  Same returns as conn_run().  It runs marked as a call of its own: after a
 * timeout or an interrupt, what is left of it in the container is ended (pct_end_calls, at most
 * PCT_END_TIMEOUT_S more) and c->err says so ("; drover ended it there (SIGTERM, then SIGKILL)")
 * or says that it could not ("; drover could not end it there (WHY): it may still be running"). */
int pct_run(struct conn *c, const struct inv_ct *ct, const char *const *argv, double timeout_s,
            struct exec_result *ret);

/* Run `drover-agent <agent_args...>` in the container (agent path from the inventory; a local
 * root gets the global options --root ROOT --socket ROOT/agent.sock before the verb).  Same
 * returns as conn_run(), except that a timeout's c->err names the step, not the command line
 * (pct_agent_timeout_msg; the command line goes to the debug log).  Ended after a timeout or an
 * interrupt as pct_run's command is. */
int pct_run_agent(struct conn *c, const struct inv_ct *ct, const char *const *agent_args,
                  double timeout_s, struct exec_result *ret);

/* What a container's agent command agent_args (verb first) that got no answer within timeout_s
 * says, into buf: the step ("activate", "release install"), the deadline and what to look at,
 * never the `pct exec ...` line.  Without the container's label: the callers put it first. */
void pct_agent_timeout_msg(const char *const *agent_args, double timeout_s, char *buf, size_t sz);

/* The agent command as a stream (`watch --json`, `stop`/`start` read as they answer), marked as a
 * call of its own as pct_run_agent's is.  Free with pct_streams_free. */
int pct_stream_agent(struct conn *c, const struct inv_ct *ct, const char *const *agent_args,
                     size_t line_max, struct conn_stream **ret_s);

/* A plain command in the container as a stream, read line by line (`tail -F` for drover logs),
 * marked as a call.  Free with pct_streams_free. */
int pct_stream(struct conn *c, const struct inv_ct *ct, const char *const *argv, size_t line_max,
               struct conn_stream **ret_s);

/* Close the streams ss[0..n) (NULL entries skipped; each set to NULL).  A stream whose command
 * had not ended on its own is a call given up (its deadline, a Ctrl-C, or the caller done with
 * it): what is left of it in its container is ended as pct_run's call after a deadline is, with
 * one pct_end_calls per host for all of that host's streams.  Returns how many could not be
 * ended (the host not answering, pct exec failing: they may still be running; the debug log
 * says which).  Not stopped by exec_interrupted; at most PCT_END_TIMEOUT_S per host. */
int pct_streams_free(struct conn_stream **ss, int n);

/* Copy host_path (a file on the host) to ct_path in the container with mode perms ("0600").
 * -EIO when pct reports an error (message in c->err).  Exit 0 proves nothing: verify. */
int pct_push(struct conn *c, const struct inv_ct *ct, const char *host_path, const char *ct_path,
             const char *perms);

/* pct_push with its own time limit (large packs: scaled by size). */
int pct_push_timeout(struct conn *c, const struct inv_ct *ct, const char *host_path, const char *ct_path,
                     const char *perms, double timeout_s);

/* The agent's store root in the container ("/var/lib/drover" or the local root). */
const char *pct_agent_root(const struct inv_ct *ct);

/* sha256sum of a file in the container into ret_hex; -ENOENT if the file is not there. */
int pct_sha256(struct conn *c, const struct inv_ct *ct, const char *path, char ret_hex[65]);

/* What pct's own error (reason: a failed pct call's stderr) says about the container itself:
 * -ENODEV "no container VMID on this host (Configuration file ... does not exist): check the
 * vmid in the inventory ...", -EHOSTDOWN "container VMID is stopped (...); start it with: pct
 * start VMID", each written to out; 0 when it says neither (the command itself failed). */
int pct_ct_problem(int vmid, const char *reason, char *out, size_t sz);

/* A new token for one call (unique to this drover process and call), into ret_token. */
void pct_call_new(char ret_token[PCT_CALL_MAX]);
/* "DROVER_CALL=TOKEN", the argument pct_agent_call_argv marks a call with. */
void pct_call_mark(const char *token, char ret_mark[PCT_MARK_MAX]);

/* End what is left in containers cts[0..n) (all on c's host; one may come more than once) of the
 * calls marked with tokens[0..n) (tokens[k] in cts[k]): one host exec (conn_run_cleanup: a
 * Ctrl-C does not stop it; deadline timeout_s) that runs in each at once a /proc scan for the
 * mark (environment or command line) and SIGTERM + SIGCONT, then SIGKILL after 2 s, to what
 * carries it.  ret_ended[k]: how many processes there were in cts[k] (0: nothing was left), or
 * -EIO when pct exec failed there.  -errno (c->err set), ret_ended untouched, when the host exec
 * itself failed (-ETIMEDOUT; -ENOTCONN at once, nothing tried, when the host is known not to
 * answer: conn_run_cleanup). */
int pct_end_calls(struct conn *c, const struct inv_ct *const *cts, int n, const char *const *tokens,
                  double timeout_s, int *ret_ended);

/* Why pct_end_calls could not end a call, for messages: r its return, count the container's
 * ret_ended, err c->err after it (NULL: none).  "the host is not answering" for -ETIMEDOUT,
 * -EIO (no channel) and -ENOTCONN (nothing was tried: conn_run_cleanup). */
const char *pct_end_why(int r, int count, const char *err);

/* Build the argv pct_run_agent would run (for tests and --dry-run).  argv_out has room for
 * PCT_ARGV_MAX pointers; strings point into agent_args, ct, inv or vmid_buf[16]. */
int pct_agent_argv(const struct inventory *inv, const struct inv_ct *ct,
                   const char *const *agent_args, const char **argv_out, char vmid_buf[16]);
/* pct_agent_argv with the command marked (mark: pct_call_mark's, NULL none): `env MARK` before
 * the agent, in the container (or on the host for a local root). */
int pct_agent_call_argv(const struct inventory *inv, const struct inv_ct *ct, const char *const *agent_args,
                        const char *mark, const char **argv_out, char vmid_buf[16]);

#endif
