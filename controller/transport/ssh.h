/* controller/transport/ssh.h: libssh sessions to Proxmox hosts.  Host keys are checked against the
 * inventory's known_hosts file before anything else happens; exec channels run without a pty so
 * stdout, stderr and the exit status come back separately; files go by SFTP in chunks of at most
 * SSH_SFTP_CHUNK bytes.  Errors from libssh are translated here, once, to -errno, with libssh's
 * own words kept in the caller's err buffer.  Not thread-safe: one thread per session.
 */
#ifndef DROVER_SSH_H
#define DROVER_SSH_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "controller/transport/exec.h"

#define SSH_SFTP_CHUNK (64u << 10) /* libssh 0.10 drops the channel on single writes >~200 kB */
#define SSH_FP_MAX 128

struct ssh_params {
    const char *name;        /* inventory host name, for messages */
    const char *address;
    int port;
    const char *user;
    const char *known_hosts; /* path; the only file consulted for host keys */
    const char *identity;    /* private key path; NULL or "" = libssh's defaults (agent, ~/.ssh) */
    double connect_timeout_s;
    const char *trust_cmd;   /* shown in refusals, e.g. "drover -i lab.ini trust h1" */
    const char *ssh_config;  /* OpenSSH client config to apply (address is its Host); NULL/"" none */
    bool port_set, user_set; /* port/user written in the inventory: they win over ssh_config */
};

/* What a host resolves to after ssh_config (for drover validate and tests). */
struct ssh_target {
    char host[256];
    int port;
    char user[64];
    char proxy[512]; /* ProxyCommand (libssh turns ProxyJump into one); "" none */
};

/* Apply p (and its ssh_config) to a fresh session and read back the target, connecting nowhere.
 * -EINVAL when the config cannot be applied (message in err). */
int ssh_resolve(const struct ssh_params *p, struct ssh_target *ret, char *err, size_t err_sz);

/* libssh 0.10 does not run ProxyJump itself: its config parser turns `ProxyJump [user@]host[:port]`
 * into the ProxyCommand `ssh [-l user] [-p port] -W '[%h]:%p' host`, i.e. OpenSSH's ssh binary
 * carries the first hop.  That ssh would read ~/.ssh/config and ~/.ssh/known_hosts and might ask
 * about an unknown key.  Given such a command (proxy) and the host's params, writes to out the
 * same command with `-F SSH_CONFIG` (the jump host's alias resolves in the file the inventory
 * names), `-i IDENTITY` (the inventory's key, when set), and the jump host's key checked
 * against the inventory's known_hosts only, without asking: BatchMode, StrictHostKeyChecking
 * yes, UserKnownHostsFile, GlobalKnownHostsFile /dev/null; with log_path, `-E LOG_PATH` (libssh
 * sends the proxy's stderr to /dev/null: ssh's own reason, "Host key verification failed.", is
 * read back from there into the connect error).  Returns 1 when rewritten, 0 when
 * proxy is not libssh's ProxyJump form (a user's own ProxyCommand: out untouched), -EINVAL
 * when a path holds a quote or '%' (libssh expands %-escapes), -ENAMETOOLONG. */
int ssh_proxyjump_command(const char *proxy, const struct ssh_params *p, const char *log_path, char *out,
                          size_t out_sz);

struct ssh_conn; /* one session; free with ssh_conn_free() */
struct ssh_stream;

/* Connect, verify the host key, authenticate.  Errors (message in err):
 * -ENOKEY unknown host key (or no known_hosts file: err names the file, and trust_cmd creates
 * it; or a known_hosts line for the host that libssh cannot read: err names FILE:LINE),
 * -EKEYREJECTED changed key,
 * -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH, -EACCES authentication refused, -EIO other. */
int ssh_conn_open(const struct ssh_params *p, struct ssh_conn **ret_conn, char *err, size_t err_sz);
void ssh_conn_free(struct ssh_conn *c);

/* `drover trust`: connect, fetch the host key, and append it to known_hosts unless it is
 * already there.  expect_fp non-NULL ("SHA256:..."): only a key with exactly that fingerprint
 * is accepted; another is -EKEYREJECTED with both fingerprints in err and nothing written
 * (-EINVAL when expect_fp is not a fingerprint).  A changed key is replaced only with
 * replace=true (the host's old plain-text lines are removed first); otherwise -EKEYREJECTED
 * naming the old and the new fingerprint.  ret_fp gets "SHA256:..." and ret_state 0 = added,
 * 1 = already trusted, 2 = replaced.  Creates known_hosts' directory (0700) if needed.
 * -EBADMSG, nothing written, err naming FILE:LINE: known_hosts has a line for this host that
 * libssh cannot read (libssh then ignores the whole file for the host, the added key too). */
int ssh_trust_host(const struct ssh_params *p, bool replace, const char *expect_fp,
                   char ret_fp[SSH_FP_MAX], int *ret_state, char *err, size_t err_sz);

/* true when fp reads "SHA256:" and 43 base64 characters. */
bool ssh_fingerprint_is_valid(const char *fp);


/* Set from a signal handler (the operator's Ctrl-C): ssh_exec and conn_run's local commands stop
 * waiting at once and return -EINTR ("interrupted").  Cleared by whoever set it. */
extern volatile sig_atomic_t exec_interrupted;

/* Run one shell command line (see quote.h) on an exec channel; waits up to timeout_s.
 * 0 with *ret filled (whatever the exit status), -ETIMEDOUT, -EIO (channel failure), -EINTR
 * (exec_interrupted). */
int ssh_exec(struct ssh_conn *c, const char *cmdline, double timeout_s, struct exec_result *ret,
             char *err, size_t err_sz);

/* ssh_exec for the follow-up that ends what a deadline or a Ctrl-C gave up on: exec_interrupted
 * does not stop it, and no blocking libssh call in it (opening the channel) waits longer than
 * timeout_s.  -ENOTCONN at once when the session has already dropped (the host gone). */
int ssh_exec_cleanup(struct ssh_conn *c, const char *cmdline, double timeout_s, struct exec_result *ret,
                     char *err, size_t err_sz);

/* Long-lived channel read without blocking (the live status stream). */
int ssh_stream_open(struct ssh_conn *c, const char *cmdline, struct ssh_stream **ret_s, char *err,
                    size_t err_sz);
/* Read what stdout has into buf; returns bytes (0 = nothing now), -EPIPE at end of stream, -EIO
 * on error.  What stderr has goes to err_buf (err_sz > 0), *ret_err_n bytes.  Never blocks. */
int ssh_stream_read(struct ssh_stream *s, char *buf, size_t buf_sz, char *err_buf, size_t err_sz,
                    size_t *ret_err_n);
int ssh_conn_fd(struct ssh_conn *c);
/* Let libssh read what the session's socket holds now and dispatch it (channel data into its
 * channel, a keepalive answered, the close of a channel already freed dropped); never blocks.
 * A socket poll() calls readable stays readable until this or a channel read on the same
 * session takes the bytes.  1 when something was taken (or the peer closed), 0 when nothing
 * was, -ENOMEM. */
int ssh_conn_drain(struct ssh_conn *c);
/* The libssh session (an ssh_session) for controller/send.c's streaming channel; borrowed. */
void *ssh_conn_session(struct ssh_conn *c);
/* How long one of libssh's blocking calls on this session (opening a channel, say) may wait:
 * s seconds (rounded up), or with s <= 0 the session's own limit again (connect_timeout). */
void ssh_conn_block_limit(struct ssh_conn *c, double s);
/* false once the session has dropped (peer gone, socket error): reconnect. */
bool ssh_conn_is_alive(struct ssh_conn *c);
void ssh_stream_free(struct ssh_stream *s);

/* Upload local_path to remote_path by SFTP: write "<remote_path>.part.<pid>" (0600) in
 * SSH_SFTP_CHUNK pieces, then rename over remote_path.  idle_timeout_s bounds each blocking
 * wait.  progress_label non-NULL and stderr a TTY: a progress line on stderr.
 * -ENOENT (remote dir missing), -EACCES, -EIO (SFTP "Failure": often a full disk; SFTP v3 does
 * not say), -ECONNRESET, or -errno reading local_path.  Timeouts surface as -EIO or -ECONNRESET. */
int ssh_upload(struct ssh_conn *c, const char *local_path, const char *remote_path,
               double idle_timeout_s, const char *progress_label, char *err, size_t err_sz);

/* Size of a remote file through SFTP stat; -ENOENT if absent. */
int ssh_remote_size(struct ssh_conn *c, const char *path, uint64_t *ret_size);

#endif
