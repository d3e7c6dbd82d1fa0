/* controller/transport/conn.c: host connections: SSH (through ssh.c, argv quoted once by quote.c) or this
 * machine (argv spawned directly, no shell).  Owns the choice between the two; never knows
 * about pct or the agent.  A local command is the leader of a process group of its own, so
 * that a deadline or a Ctrl-C ends it with everything it started (end_group), not only the
 * pid drover spawned: its background children were left running.
 */
#include "controller/transport/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/linebuf.h"
#include "common/safefile.h"
#include "common/text.h"
#include "common/util.h"
#include "controller/transport/quote.h"

extern char **environ;

struct conn_stream {
    struct conn *c;
    struct ssh_stream *ssh;
    pid_t pid;
    int fd;
    int efd;         /* local: the command's stderr */
    int in_fd;       /* local: the command's stdin, kept open and never written (as over SSH, where
                        the channel's stdin stays open while the stream runs) */
    char *buf;       /* storage of lb: line_max + 64 KiB */
    struct linebuf lb;
    bool eof;
    char err[CONN_STREAM_ERR_MAX]; /* stderr's tail, NUL-terminated */
    size_t err_len;
    const struct inv_ct *ct;  /* conn_stream_set_call's: the call its command was marked as */
    char call[CONN_CALL_MAX]; /* "" none */
};

int conn_open(const struct inventory *inv, int host, const char *trust_cmd, struct conn **ret_conn,
              char *err, size_t err_sz)
{
    struct conn *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->inv = inv;
    c->host = host;
    c->h = &inv->hosts[host];
    if (!c->h->local) {
        struct ssh_params p = {
            .name = c->h->name,
            .address = c->h->address,
            .port = c->h->port,
            .user = c->h->user,
            .known_hosts = inv->known_hosts,
            .identity = inv->identity,
            .connect_timeout_s = inv->connect_timeout_s,
            .trust_cmd = trust_cmd,
            .ssh_config = inv->ssh_config,
            .port_set = c->h->port_set,
            .user_set = c->h->user_set,
        };
        int r = ssh_conn_open(&p, &c->ssh, err, err_sz);
        if (r < 0) {
            free(c);
            return r;
        }
    }
    *ret_conn = c;
    return 0;
}

void conn_free(struct conn *c)
{
    if (!c)
        return;
    ssh_conn_free(c->ssh);
    free(c);
}

/* How long a local command's process group has, after SIGTERM, before SIGKILL. */
#define CONN_END_GRACE_S 2.0

/* The local commands running now (their leaders' pids, 0 a free slot), for exit_signal: read in
 * a signal handler, written by any thread (top's pollers), so atomics only.  A leader leaves
 * when it is reaped: until then its pid (and group id) cannot be another's. */
#define CONN_LIVE_MAX 256
static pid_t live_groups[CONN_LIVE_MAX];

static void live_add(pid_t pid)
{
    for (int i = 0; i < CONN_LIVE_MAX; i++) {
        pid_t free_slot = 0;
        if (__atomic_compare_exchange_n(&live_groups[i], &free_slot, pid, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST))
            return;
    }
    log_debug("more than %d local commands at once: pid %d is not ended with drover", CONN_LIVE_MAX, (int)pid);
}

static void live_del(pid_t pid)
{
    for (int i = 0; i < CONN_LIVE_MAX; i++) {
        pid_t was = pid;
        if (__atomic_compare_exchange_n(&live_groups[i], &was, 0, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            return;
    }
}

/* SIGINT or SIGTERM with no handler of a verb's: every local command's group gets SIGTERM and
 * SIGCONT (as end_group's first step; drover does not stay for the SIGKILL), then drover dies
 * of the signal as it would have.  Async-signal-safe: kill, sigaction, raise. */
static void exit_signal(int sig)
{
    int e = errno;
    for (int i = 0; i < CONN_LIVE_MAX; i++) {
        pid_t pid = __atomic_load_n(&live_groups[i], __ATOMIC_SEQ_CST);
        if (pid > 0) {
            (void)kill(-pid, SIGTERM);
            (void)kill(-pid, SIGCONT);
        }
    }
    struct sigaction dfl = { .sa_handler = SIG_DFL };
    sigemptyset(&dfl.sa_mask);
    (void)sigaction(sig, &dfl, NULL);
    errno = e;
    (void)raise(sig); /* delivered when this handler returns: the signal's own death */
}

void conn_exit_signals_init(void)
{
    struct sigaction sa = { .sa_handler = exit_signal };
    sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGINT, &sa, NULL);
    (void)sigaction(SIGTERM, &sa, NULL);
}

static int spawn_local(const char *const *argv, int in_fd, int out_fd, int err_fd, pid_t *ret_pid)
{
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    /* a group of its own (pgid = its pid): end_group reaches its children too.  Ctrl-C at the
     * terminal no longer reaches it directly: drover's handler sets exec_interrupted, and the
     * wait ends the group */
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (in_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
    else
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (out_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    else
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (err_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
    else
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int r = posix_spawnp(&pid, argv[0], &fa, &at, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (r != 0)
        return -r;
    live_add(pid);
    *ret_pid = pid;
    return 0;
}

/* Reap the leader pid without blocking, once: *reaped, *st. */
static void reap_leader(pid_t pid, bool *reaped, int *st)
{
    if (*reaped)
        return;
    pid_t w;
    while ((w = waitpid(pid, st, WNOHANG)) < 0 && errno == EINTR)
        ;
    if (w == pid || (w < 0 && errno == ECHILD)) {
        *reaped = true;
        live_del(pid);
    }
}

/* Wait up to s for process group pid to be empty (its leader reaped as it goes). */
static bool group_gone_within(pid_t pid, double s, bool *reaped, int *st)
{
    double end = time_mono() + s;
    for (;;) {
        reap_leader(pid, reaped, st);
        /* a zombie leader still counts as a member: reaped first, then asked */
        if (*reaped && kill(-pid, 0) < 0 && errno == ESRCH)
            return true;
        if (time_mono() >= end)
            return false;
        usleep(20 * 1000);
    }
}

/* End a local command spawned by spawn_local (leader of process group pid) and everything in
 * its group: SIGTERM and SIGCONT (a stopped process keeps a TERM pending until it is continued),
 * up to grace_s for the group to go, then SIGKILL to what is left and up to a second more.  The
 * leader is reaped here when it can be (*reaped, *st its wait status).  1: something was ended;
 * 0: nothing of it was left; -EBUSY: something of the group was still there after SIGKILL (a
 * process in uninterruptible sleep).  Bounded: never waits more than grace_s + 1 s. */
static int end_group(pid_t pid, double grace_s, bool *reaped, int *st)
{
    reap_leader(pid, reaped, st);
    if (*reaped && kill(-pid, 0) < 0 && errno == ESRCH)
        return 0;
    (void)kill(-pid, SIGTERM);
    (void)kill(-pid, SIGCONT);
    if (group_gone_within(pid, grace_s, reaped, st))
        return 1;
    (void)kill(-pid, SIGKILL);
    return group_gone_within(pid, 1.0, reaped, st) ? 1 : -EBUSY;
}

const char *conn_ended_words(int ended)
{
    return ended > 0 ? "; drover ended it and what it started (SIGTERM, then SIGKILL)"
           : ended < 0 ? "; drover could not end it: part of it was still there after SIGKILL"
                       : "";
}

void conn_unsay_ended(char *msg, int ended)
{
    const char *w = conn_ended_words(ended);
    size_t ml = strlen(msg), wl = strlen(w);
    if (wl && ml >= wl && !strcmp(msg + ml - wl, w))
        msg[ml - wl] = '\0';
}

/* argv joined with spaces and escaped, cut to fit: for messages only.  A shell script
 * (`sh -c SCRIPT ...`) is one of drover's own, which the operator never wrote and which names no
 * step: shown as `sh -c ...` (callers that know the step say it instead). */
static void command_shown(const char *const *argv, char *buf, size_t buf_sz)
{
    char line[512];
    size_t off = 0;
    line[0] = '\0';
    if (argv[0] && argv[1] && !strcmp(argv[1], "-c") && (!strcmp(argv[0], "sh") || !strcmp(argv[0], "bash"))) {
        snprintf(line, sizeof line, "%s -c ...", argv[0]);
        text_escape(line, strlen(line), buf, buf_sz);
        return;
    }
    for (int i = 0; argv[i] && off + 1 < sizeof line; i++) {
        if (!strcmp(argv[i], "env") && argv[i + 1] && strchr(argv[i + 1], '=')) {
            i++; /* `env NAME=VALUE CMD`: CMD is what the operator knows (pct.c's call mark) */
            continue;
        }
        int w = snprintf(line + off, sizeof line - off, "%s%s", off ? " " : "", argv[i]);
        if (w < 0)
            break;
        off += (size_t)w;
    }
    if (off >= sizeof line)
        off = sizeof line - 1;
    text_escape(line, off, buf, buf_sz);
}

/* interruptible: exec_interrupted ends the wait (conn_run_cleanup's follow-up is not). */
static int run_local(struct conn *c, const char *const *argv, double timeout_s, bool interruptible,
                     struct exec_result *ret)
{
    int po[2], pe[2];
    if (pipe2(po, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(pe, O_CLOEXEC) < 0) {
        int e = errno;
        close(po[0]);
        close(po[1]);
        return -e;
    }
    pid_t pid;
    int r = spawn_local(argv, -1, po[1], pe[1], &pid);
    close(po[1]);
    close(pe[1]);
    if (r < 0) {
        close(po[0]);
        close(pe[0]);
        snprintf(c->err, sizeof c->err, "cannot run '%s': %s", argv[0], strerror(-r));
        return r;
    }
    struct exec_result res = { .status = -1 };
    struct pollfd pfd[2] = { { .fd = po[0], .events = POLLIN }, { .fd = pe[0], .events = POLLIN } };
    double deadline = time_mono() + timeout_s;
    int open_fds = 2;
    char buf[16384];
    r = 0;
    while (open_fds > 0) {
        double left = deadline - time_mono();
        if (left <= 0) {
            r = -ETIMEDOUT;
            break;
        }
        if (exec_interrupted && interruptible) {
            r = -EINTR;
            break;
        }
        int pr = poll(pfd, 2, left > 1 ? 100 : (int)(left * 1000) + 1);
        if (pr < 0 && errno != EINTR) {
            r = -errno;
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = read(pfd[i].fd, buf, sizeof buf);
            if (n <= 0) {
                pfd[i].fd = -1;
                open_fds--;
                continue;
            }
            r = i == 0 ? exec_result_add_out(&res, buf, (size_t)n)
                       : exec_result_add_err(&res, buf, (size_t)n);
            if (r < 0)
                break;
        }
        if (r < 0)
            break;
    }
    close(po[0]);
    close(pe[0]);
    int st = 0;
    bool reaped = false;
    if (r == -ETIMEDOUT || r == -EINTR) {
        /* the whole group: the pid alone left its background children (and a stopped one
         * kept SIGTERM pending for good) */
        c->ended = end_group(pid, CONN_END_GRACE_S, &reaped, &st);
        char shown[200];
        command_shown(argv, shown, sizeof shown);
        if (r == -ETIMEDOUT)
            snprintf(c->err, sizeof c->err, "host '%s' (local): '%s' timed out after %.0fs%s", c->h->name, shown,
                     timeout_s, conn_ended_words(c->ended));
        else
            snprintf(c->err, sizeof c->err, "host '%s' (local): interrupted%s", c->h->name, conn_ended_words(c->ended));
    } else {
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        reaped = true;
        live_del(pid);
    }
    if (r < 0) {
        exec_result_done(&res);
        return r;
    }
    int status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
    if (exec_result_finish(&res, status) < 0) {
        exec_result_done(&res);
        return -ENOMEM;
    }
    *ret = res;
    return 0;
}

/* conn_run and conn_run_cleanup: the same command line, over SSH or locally; a cleanup call is
 * not cut short by the operator's interrupt (it ends what an interrupted call left). */
static int run_cmd(struct conn *c, const char *const *argv, double timeout_s, bool cleanup,
                   struct exec_result *ret)
{
    c->ended = c->ssh ? -ENOSYS : 0;
    if (!c->ssh)
        return run_local(c, argv, timeout_s, !cleanup, ret);
    if (cleanup && (c->silent || !ssh_conn_is_alive(c->ssh))) {
        /* a dead session, or a host that let the last follow-up wait for nothing: each stalled
         * call would add up to timeout_s more for no answer */
        c->silent = true;
        snprintf(c->err, sizeof c->err, "host '%s' is not answering", c->h->name);
        return -ENOTCONN;
    }
    char *line;
    int r = quote_argv(argv, &line);
    if (r < 0) {
        snprintf(c->err, sizeof c->err, "command line for '%s' too long", argv[0]);
        return r;
    }
    r = cleanup ? ssh_exec_cleanup(c->ssh, line, timeout_s, ret, c->err, sizeof c->err)
                : ssh_exec(c->ssh, line, timeout_s, ret, c->err, sizeof c->err);
    free(line);
    if (cleanup && (r == -ETIMEDOUT || r == -ENOTCONN || r == -EIO)) { /* no answer, or no channel */
        c->silent = true;
        snprintf(c->err, sizeof c->err, "host '%s' is not answering", c->h->name);
    } else if (!cleanup && r >= 0) {
        c->silent = false; /* it answered again (a blip): its stalled calls get their follow-up */
    }
    if (r == -ETIMEDOUT && !cleanup) { /* ssh_exec quoted the whole line: a script's text says nothing useful */
        char shown[200];
        command_shown(argv, shown, sizeof shown);
        snprintf(c->err, sizeof c->err, "host '%s': '%s' timed out after %.0fs", c->h->name, shown, timeout_s);
    }
    return r;
}

int conn_run(struct conn *c, const char *const *argv, double timeout_s, struct exec_result *ret)
{
    return run_cmd(c, argv, timeout_s, false, ret);
}

int conn_run_cleanup(struct conn *c, const char *const *argv, double timeout_s, struct exec_result *ret)
{
    return run_cmd(c, argv, timeout_s, true, ret);
}

int conn_stream_open(struct conn *c, const char *const *argv, size_t line_max,
                     struct conn_stream **ret_s)
{
    struct conn_stream *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->c = c;
    s->fd = s->efd = s->in_fd = -1;
    s->pid = -1;
    s->buf = malloc(line_max + 65536);
    int r = -ENOMEM;
    if (!s->buf)
        goto fail;
    (void)linebuf_init(&s->lb, s->buf, line_max + 65536, line_max);
    if (c->ssh) {
        char *line;
        r = quote_argv(argv, &line);
        if (r < 0)
            goto fail;
        r = ssh_stream_open(c->ssh, line, &s->ssh, c->err, sizeof c->err);
        free(line);
        if (r < 0)
            goto fail;
    } else {
        int p[2], pe[2], pi[2];
        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
            r = -errno;
            goto fail;
        }
        if (pipe2(pe, O_CLOEXEC | O_NONBLOCK) < 0) {
            r = -errno;
            close(p[0]);
            close(p[1]);
            goto fail;
        }
        if (pipe2(pi, O_CLOEXEC) < 0) {
            r = -errno;
            close(p[0]);
            close(p[1]);
            close(pe[0]);
            close(pe[1]);
            goto fail;
        }
        r = spawn_local(argv, pi[0], p[1], pe[1], &s->pid);
        close(pi[0]);
        s->in_fd = pi[1];
        close(p[1]);
        close(pe[1]);
        s->fd = p[0];
        s->efd = pe[0];
        if (r < 0) {
            snprintf(c->err, sizeof c->err, "cannot run '%s': %s", argv[0], strerror(-r));
            goto fail;
        }
    }
    *ret_s = s;
    return 0;
fail:
    conn_stream_free(s);
    return r;
}

/* Keep the last CONN_STREAM_ERR_MAX - 1 bytes of the command's stderr. */
static void stream_err_add(struct conn_stream *s, const char *b, size_t n)
{
    const size_t cap = sizeof s->err - 1;
    if (n >= cap) {
        b += n - cap;
        n = cap;
    }
    if (s->err_len + n > cap) {
        size_t drop = s->err_len + n - cap;
        memmove(s->err, s->err + drop, s->err_len - drop);
        s->err_len -= drop;
    }
    memcpy(s->err + s->err_len, b, n);
    s->err_len += n;
    s->err[s->err_len] = '\0';
}

const char *conn_stream_err(struct conn_stream *s)
{
    /* the last non-empty line */
    size_t end = s->err_len;
    while (end > 0 && (s->err[end - 1] == '\n' || s->err[end - 1] == '\r' || s->err[end - 1] == ' '))
        end--;
    s->err[end] = '\0';
    s->err_len = end;
    char *nl = strrchr(s->err, '\n');
    return nl ? nl + 1 : s->err;
}

int conn_stream_poll(struct conn_stream *s, char **ret_line, size_t *ret_len)
{
    char eb[CONN_STREAM_ERR_MAX];
    for (;;) {
        int r = linebuf_next(&s->lb, ret_line, ret_len); /* over-long lines: -E2BIG, skipped */
        if (r != 0)
            return r;
        if (s->eof)
            return -EPIPE;
        size_t room;
        char *at = linebuf_room(&s->lb, &room);
        int n;
        if (s->ssh) {
            size_t en = 0;
            n = ssh_stream_read(s->ssh, at, room, eb, sizeof eb, &en);
            stream_err_add(s, eb, en);
            if (n == -EPIPE) {
                s->eof = true;
                continue;
            }
        } else {
            ssize_t ek;
            while (s->efd >= 0 && (ek = read(s->efd, eb, sizeof eb)) > 0)
                stream_err_add(s, eb, (size_t)ek);
            ssize_t k = read(s->fd, at, room);
            if (k <= 0 && s->efd >= 0) /* the command may have written its error just before it ended */
                while ((ek = read(s->efd, eb, sizeof eb)) > 0)
                    stream_err_add(s, eb, (size_t)ek);
            if (k < 0 && (errno == EAGAIN || errno == EINTR))
                n = 0;
            else if (k <= 0) {
                s->eof = true;
                continue;
            } else
                n = (int)k;
        }
        if (n < 0)
            return n;
        if (n == 0)
            return 0;
        linebuf_added(&s->lb, (size_t)n);
    }
}

void conn_stream_set_call(struct conn_stream *s, const struct inv_ct *ct, const char *token)
{
    s->ct = ct;
    (void)str_copy(s->call, sizeof s->call, token);
}

const char *conn_stream_call(const struct conn_stream *s, struct conn **ret_c, const struct inv_ct **ret_ct)
{
    if (!s->call[0] || s->eof)
        return NULL;
    *ret_c = s->c;
    *ret_ct = s->ct;
    return s->call;
}

void conn_stream_free(struct conn_stream *s)
{
    if (!s)
        return;
    ssh_stream_free(s->ssh);
    if (s->in_fd >= 0) /* first: the command's EOF on stdin, as a closed channel gives it */
        close(s->in_fd);
    if (s->fd >= 0)
        close(s->fd);
    if (s->efd >= 0)
        close(s->efd);
    if (s->pid > 0) { /* its group: `tail -F` behind a shell, say, is not left */
        int st;
        bool reaped = false;
        (void)end_group(s->pid, 1.0, &reaped, &st);
    }
    free(s->buf);
    free(s);
}

void conn_wait(struct conn **conns, int nconns, int ms)
{
    struct pollfd pfd[INV_MAX_HOSTS];
    struct ssh_conn *sc[INV_MAX_HOSTS];
    int n = 0;
    for (int i = 0; i < nconns && n < INV_MAX_HOSTS; i++)
        if (conns[i] && conns[i]->ssh) {
            sc[n] = conns[i]->ssh;
            pfd[n++] = (struct pollfd){ .fd = ssh_conn_fd(conns[i]->ssh), .events = POLLIN };
        }
    if (!n) {
        usleep((useconds_t)ms * 1000);
        return;
    }
    /* A socket is readable until libssh takes its bytes, and the caller's channel reads take
     * them only for sessions that still have a stream of the caller's: the close of a freed
     * channel or a keepalive on another host's session kept poll() answering at once, and the
     * caller's loop spun a core for its whole limit.  Whatever woke the poll is handed to libssh
     * here; a socket it takes nothing from is not watched again in this wait. */
    double end = time_mono() + ms / 1000.0;
    for (;;) {
        double left = end - time_mono();
        if (left <= 0)
            return;
        int r = poll(pfd, (nfds_t)n, (int)(left * 1000) + 1);
        if (r <= 0) /* the time is up, or a signal: the caller looks at its flags */
            return;
        bool taken = false;
        for (int i = 0; i < n; i++) {
            if (!pfd[i].revents)
                continue;
            if (ssh_conn_drain(sc[i]) > 0)
                taken = true;
            else
                pfd[i].fd = -1;
        }
        if (taken) /* maybe a caller's channel got data: it reads, then waits again */
            return;
    }
}

static int copy_local(const char *src, const char *dst, char *err, size_t err_sz)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s.part.%d", dst, (int)getpid());
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        int e = errno;
        snprintf(err, err_sz, "cannot open '%s': %s", src, strerror(e));
        return -e;
    }
    int out, ce = safefile_create_excl(tmp, 0600, &out);
    if (ce < 0) {
        close(in);
        snprintf(err, err_sz, "cannot create '%.900s': %s", tmp, strerror(-ce));
        return ce;
    }
    char buf[65536];
    int r = 0;
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            r = -errno;
            break;
        }
        if (n == 0)
            break;
        r = fd_write_all(out, buf, (size_t)n);
        if (r < 0)
            break;
    }
    if (r == 0 && fsync(out) < 0)
        r = -errno;
    close(in);
    if (close(out) < 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, dst) < 0)
        r = -errno;
    if (r < 0) {
        (void)unlink(tmp);
        snprintf(err, err_sz, "cannot copy '%s' to '%s': %s", src, dst, strerror(-r));
    }
    return r;
}

int conn_upload(struct conn *c, const char *local_path, const char *remote_path, const char *label)
{
    if (!c->ssh)
        return copy_local(local_path, remote_path, c->err, sizeof c->err);
    return ssh_upload(c->ssh, local_path, remote_path, 30, label, c->err, sizeof c->err);
}
