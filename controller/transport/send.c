/* controller/send.c: see send.h.  Owns the streaming exec channel; never blocks longer than
 * the idle deadline on a peer that stopped reading (libssh's blocking writes and its SFTP reply
 * loop can wait forever on a stopped sshd whose TCP connection stays up). */
#include "controller/transport/send.h"

#include <errno.h>
#include <libssh/libssh.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "controller/transport/quote.h"

#define SEND_ARGV_MAX 64

volatile sig_atomic_t send_interrupted;

void progress_init(struct progress *p, const char *label, uint64_t total)
{
    *p = (struct progress){ .label = label, .total = total, .t0 = time_mono(), .tty = label && isatty(STDERR_FILENO) };
}

void progress_add(struct progress *p, uint64_t n)
{
    p->done += n;
    double now = time_mono();
    if (!p->tty || now - p->last < 0.5)
        return;
    p->last = now;
    double el = now - p->t0, rate = el > 0 ? (double)p->done / el : 0;
    char eta[32] = "";
    if (p->total > p->done && rate > 0)
        snprintf(eta, sizeof eta, " ETA %.0fs", (double)(p->total - p->done) / rate);
    fprintf(stderr, "\r\033[K%s: %.1f/%.1f MiB %.1f MiB/s%s", p->label, (double)p->done / 1048576.0,
            (double)p->total / 1048576.0, rate / 1048576.0, eta);
}

void progress_end(struct progress *p)
{
    if (p->tty && p->last > 0)
        fputs("\r\033[K", stderr);
}

struct sx {
    struct conn *c;
    ssh_session ss;
    ssh_channel ch;
    const struct send_opts *o;
    struct progress pg;
    double last_progress;
    uint64_t sent;
    char out[1u << 20], err[16384]; /* stdout: the host's answer (ranges), bounded */
    size_t out_len, err_len;
};

static void sx_drain(struct sx *x)
{
    char junk[4096];
    for (int is_err = 0; is_err < 2; is_err++) {
        int n;
        while ((n = ssh_channel_read_nonblocking(x->ch, junk, sizeof junk, is_err)) > 0) {
            char *dst = is_err ? x->err : x->out;
            size_t *len = is_err ? &x->err_len : &x->out_len, cap = is_err ? sizeof x->err : sizeof x->out;
            size_t k = (size_t)n < cap - 1 - *len ? (size_t)n : cap - 1 - *len;
            memcpy(dst + *len, junk, k);
            *len += k;
            dst[*len] = '\0';
            x->last_progress = time_mono();
        }
    }
}

/* Until the peer sends something, or libssh's buffered output can move.  POLLOUT only while
 * libssh holds unsent bytes: the socket is writable nearly always, and waiting on it otherwise
 * spun this thread (one per host) at full CPU for as long as a host took to answer -- the
 * whole of a `release install`, on the cores the hosts' sshds and lxc-attach need. */
static void sx_wait(struct sx *x, int ms)
{
    short ev = POLLIN | ((ssh_get_poll_flags(x->ss) & SSH_WRITE_PENDING) ? POLLOUT : 0);
    struct pollfd pfd = { .fd = ssh_get_fd(x->ss), .events = ev };
    if (pfd.fd >= 0)
        (void)poll(&pfd, 1, ms);
    else
        usleep((useconds_t)ms * 1000);
}

static int sx_write(void *wctx, const void *buf, size_t len)
{
    struct sx *x = wctx;
    const char *p = buf;
    while (len) {
        uint32_t chunk = len > (32u << 10) ? (32u << 10) : (uint32_t)len;
        int n = ssh_channel_write(x->ch, p, chunk);
        if (n == SSH_ERROR || ssh_channel_is_closed(x->ch)) {
            snprintf(x->c->err, sizeof x->c->err, "host '%s': the channel failed after %.1f MiB: %.200s%s%.400s",
                     x->c->h->name, (double)x->sent / 1048576.0, ssh_get_error(x->ss), x->err_len ? ": " : "", x->err);
            return -EIO;
        }
        double now = time_mono();
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            x->sent += (uint64_t)n;
            x->last_progress = now;
            progress_add(&x->pg, (uint64_t)n);
            continue;
        }
        sx_drain(x);
        if (send_interrupted) {
            snprintf(x->c->err, sizeof x->c->err, "host '%s': interrupted after %.1f MiB", x->c->h->name,
                     (double)x->sent / 1048576.0);
            return -EINTR;
        }
        if (now - x->last_progress > x->o->idle_s) {
            snprintf(x->c->err, sizeof x->c->err,
                     "host '%s' stopped taking data: nothing for %.0fs after %.1f MiB of %.1f MiB (idle deadline)",
                     x->c->h->name, x->o->idle_s, (double)x->sent / 1048576.0, (double)x->o->total / 1048576.0);
            return -ETIMEDOUT;
        }
        sx_wait(x, 50);
    }
    return 0;
}

static int send_ssh(struct conn *c, const char *line, const struct send_opts *o, send_produce_fn produce,
                    void *ctx, struct exec_result *ret, uint64_t *ret_sent)
{
    struct sx *x = calloc(1, sizeof *x);
    if (!x)
        return -ENOMEM;
    x->c = c;
    x->o = o;
    x->ss = ssh_conn_session(c->ssh);
    int r = -EIO;
    x->ch = ssh_channel_new(x->ss);
    /* a session whose sshd stopped answering between two transfers (a release's packs, say)
     * must not hold the next one's channel for connect_timeout: the idle deadline bounds the
     * opening as it bounds the data */
    ssh_conn_block_limit(c->ssh, o->idle_s);
    double t0 = time_mono();
    bool opened = x->ch && ssh_channel_open_session(x->ch) == SSH_OK &&
                  ssh_channel_request_exec(x->ch, line) == SSH_OK;
    ssh_conn_block_limit(c->ssh, 0);
    if (!opened) {
        if (time_mono() - t0 >= o->idle_s - 0.5) {
            snprintf(c->err, sizeof c->err,
                     "host '%s' stopped taking data: a new transfer got no answer for %.0fs, with %.1f MiB "
                     "to send (idle deadline)", c->h->name, o->idle_s, (double)o->total / 1048576.0);
            r = -ETIMEDOUT;
        } else {
            snprintf(c->err, sizeof c->err, "host '%s': cannot start a transfer: %s", c->h->name,
                     ssh_get_error(x->ss));
        }
        goto out;
    }
    log_debug("host '%s': send into %s", c->h->name, line);
    ssh_set_blocking(x->ss, 0);
    progress_init(&x->pg, o->label, o->total);
    x->last_progress = time_mono();
    r = produce(ctx, sx_write, x);
    if (r < 0 && !c->err[0]) /* the producer's own failure (a file it reads): never an empty error */
        snprintf(c->err, sizeof c->err, "host '%s': the transfer stopped after %.1f MiB: %s", c->h->name,
                 (double)x->sent / 1048576.0, strerror(-r));
    if (r == 0) {
        (void)ssh_channel_send_eof(x->ch);
        double limit = o->finish_s > o->idle_s ? o->finish_s : o->idle_s;
        for (;;) {
            sx_drain(x);
            if (ssh_channel_is_eof(x->ch) || ssh_channel_is_closed(x->ch))
                break;
            if (send_interrupted) {
                snprintf(c->err, sizeof c->err, "host '%s': interrupted", c->h->name);
                r = -EINTR;
                break;
            }
            if (time_mono() - x->last_progress > limit) {
                snprintf(c->err, sizeof c->err, "host '%s': no answer for %.0fs after all %.1f MiB were sent",
                         c->h->name, limit, (double)x->sent / 1048576.0);
                r = -ETIMEDOUT;
                break;
            }
            sx_wait(x, 50);
        }
    }
    progress_end(&x->pg);
    if (r == 0) {
        ssh_set_blocking(x->ss, 1);
        struct exec_result res = { .status = ssh_channel_get_exit_status(x->ch) };
        res.out = strdup(x->out);
        res.err = strdup(x->err);
        if (!res.out || !res.err) {
            exec_result_done(&res);
            r = -ENOMEM;
            goto out;
        }
        res.out_len = x->out_len;
        res.err_len = x->err_len;
        while (res.err_len && (res.err[res.err_len - 1] == '\n'))
            res.err[--res.err_len] = '\0';
        *ret = res;
    }
out:
    *ret_sent = x->sent;
    if (x->ch) {
        if (r < 0 && ssh_channel_is_open(x->ch))
            (void)ssh_channel_request_send_signal(x->ch, "TERM");
        if (r == 0)
            (void)ssh_channel_close(x->ch);
        ssh_channel_free(x->ch);
    }
    /* A session that stalled or failed is dropped by the caller: left non-blocking, so that
     * freeing it cannot wait on the stalled peer.  Any other outcome keeps it usable. */
    if (r != -ETIMEDOUT && r != -EIO && r != -EINTR)
        ssh_set_blocking(x->ss, 1);
    free(x);
    return r;
}

struct fx {
    FILE *f;
    uint64_t sent;
    struct progress pg;
};

static int fx_write(void *wctx, const void *buf, size_t len)
{
    struct fx *x = wctx;
    if (fwrite(buf, 1, len, x->f) != len)
        return -errno ? -errno : -EIO;
    x->sent += len;
    progress_add(&x->pg, len);
    return 0;
}

/* A local host: the bytes go through a temp file that the command reads as its stdin. */
static int send_local(struct conn *c, const char *const *argv, const struct send_opts *o,
                      send_produce_fn produce, void *ctx, struct exec_result *ret, uint64_t *ret_sent)
{
    char tmp[] = "/tmp/drover-send.XXXXXX";
    int fd = mkstemp(tmp);
    if (fd < 0)
        return -errno;
    struct fx x = { .f = fdopen(fd, "w") };
    if (!x.f) {
        close(fd);
        (void)unlink(tmp);
        return -ENOMEM;
    }
    progress_init(&x.pg, o->label, o->total);
    int r = produce(ctx, fx_write, &x);
    if (fclose(x.f) != 0 && r == 0)
        r = -EIO;
    progress_end(&x.pg);
    *ret_sent = x.sent;
    if (r == 0) {
        const char *av[SEND_ARGV_MAX];
        size_t n = 0;
        av[n++] = "sh";
        av[n++] = "-c";
        av[n++] = "f=$1; shift; exec \"$@\" <\"$f\"";
        av[n++] = "sh";
        av[n++] = tmp;
        for (size_t i = 0; argv[i] && n + 1 < SEND_ARGV_MAX; i++)
            av[n++] = argv[i];
        av[n] = NULL;
        r = conn_run(c, av, o->finish_s + o->idle_s, ret);
    } else if (!c->err[0]) {
        snprintf(c->err, sizeof c->err, "%s", strerror(-r));
    }
    (void)unlink(tmp);
    return r;
}

int conn_send(struct conn *c, const char *const *argv, const struct send_opts *o, send_produce_fn produce,
              void *ctx, struct exec_result *ret, uint64_t *ret_sent)
{
    c->err[0] = '\0';
    *ret_sent = 0;
    if (!c->ssh)
        return send_local(c, argv, o, produce, ctx, ret, ret_sent);
    char *line;
    int r = quote_argv(argv, &line);
    if (r < 0)
        return r;
    r = send_ssh(c, line, o, produce, ctx, ret, ret_sent);
    free(line);
    return r;
}
