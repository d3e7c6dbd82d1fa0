/* trainer/dist.c: the TCP star between ranks (see dist.h).  Owns the sockets.  Every read and
 * write is non-blocking under poll() with the operation's deadline.
 * Never: block without a deadline, raise SIGPIPE (MSG_NOSIGNAL), or log above debug. */
#include "trainer/dist.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

#define DIST_MAGIC 0x44525644u /* "DRVD" */
#define DIST_MAX_WORLD 1024
#define DIST_MAX_BYTES ((uint64_t)1 << 34) /* 16 GiB: no sane gradient is bigger */

enum { OP_HELLO = 1, OP_ACK, OP_ALLREDUCE, OP_RESULT, OP_BCAST };

struct frame {
    uint32_t magic, op;
    uint32_t rank, world;
    uint64_t seq, nbytes;
};

struct dist {
    int rank, world;
    uint64_t token; /* hash of the rendezvous token, in the hello's and ack's seq */
    double timeout_s;
    uint64_t seq;
    int *fds; /* rank 0: fds[r] for r >= 1; others: fds[0] to rank 0 */
    const volatile sig_atomic_t *stop; /* during the rendezvous only; NULL after it */
};

/* How often the rendezvous looks at its stop flag when no signal interrupts its poll. */
#define DIST_STOP_POLL_S 0.1

static bool stopped(const struct dist *d)
{
    return d && d->stop && *d->stop;
}

/* d: the rendezvous (its stop flag is looked at), or NULL */
static int wait_fd_stop(const struct dist *d, int fd, short events, double deadline)
{
    for (;;) {
        if (stopped(d))
            return -ECANCELED;
        double left = deadline - time_mono();
        if (left <= 0)
            return -ETIMEDOUT;
        if (d && d->stop && left > DIST_STOP_POLL_S)
            left = DIST_STOP_POLL_S;
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            continue;
        return 0;
    }
}

static int send_all(const struct dist *d, int fd, const void *buf, size_t len, double deadline)
{
    const char *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int r = wait_fd_stop(d, fd, POLLOUT, deadline);
            if (r < 0)
                return r;
            continue;
        }
        return errno == EPIPE ? -ECONNRESET : -errno;
    }
    return 0;
}

static int recv_all(const struct dist *d, int fd, void *buf, size_t len, double deadline)
{
    char *p = buf;
    while (len) {
        ssize_t n = recv(fd, p, len, 0);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0)
            return -ECONNRESET;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int r = wait_fd_stop(d, fd, POLLIN, deadline);
            if (r < 0)
                return r;
            continue;
        }
        return -errno;
    }
    return 0;
}

static int send_frame(const struct dist *d, int fd, const struct frame *f, const void *data,
                      double deadline)
{
    int r = send_all(d, fd, f, sizeof *f, deadline);
    if (r < 0 || !f->nbytes)
        return r;
    return send_all(d, fd, data, f->nbytes, deadline);
}

/* Receive a frame header and check magic, op, seq and size (exactly want_bytes). */
static int recv_frame(const struct dist *d, int fd, uint32_t op, uint64_t seq, uint64_t want_bytes,
                      struct frame *ret, double deadline)
{
    struct frame f;
    int r = recv_all(d, fd, &f, sizeof f, deadline);
    if (r < 0)
        return r;
    if (f.magic != DIST_MAGIC || f.op != op || f.seq != seq || f.nbytes != want_bytes)
        return -EPROTO;
    *ret = f;
    return 0;
}

static void set_sockopts(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static int resolve(const char *addr, int port, bool passive, struct addrinfo **ret)
{
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC,
                             .ai_flags = passive ? AI_PASSIVE : 0};
    int r = getaddrinfo(addr, ps, &hints, ret);
    if (r == EAI_SYSTEM)
        return -errno;
    return r ? -EHOSTUNREACH : 0;
}

static int open_master(struct dist *d, const char *addr, int port, double deadline)
{
    struct addrinfo *ai;
    int r = resolve(addr, port, true, &ai);
    if (r < 0)
        return r;
    int lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (lfd < 0) {
        r = -errno;
        freeaddrinfo(ai);
        return r;
    }
    int one = 1;
    (void)setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    /* The port may still be held by a previous gang for a moment: retry bind until the deadline. */
    while (bind(lfd, ai->ai_addr, ai->ai_addrlen) < 0) {
        if (errno != EADDRINUSE || time_mono() > deadline) {
            r = errno == EADDRINUSE ? -EADDRINUSE : -errno;
            goto out;
        }
        if (stopped(d)) {
            r = -ECANCELED;
            goto out;
        }
        usleep(100 * 1000);
    }
    if (listen(lfd, DIST_MAX_WORLD) < 0) {
        r = -errno;
        goto out;
    }
    for (int have = 1; have < d->world;) {
        r = wait_fd_stop(d, lfd, POLLIN, deadline);
        if (r < 0)
            goto out;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        set_sockopts(fd);
        struct frame f;
        if (recv_frame(d, fd, OP_HELLO, d->token, 0, &f, deadline) < 0 || f.world != (uint32_t)d->world ||
            f.rank < 1 || f.rank >= (uint32_t)d->world || d->fds[f.rank] >= 0) {
            log_debug("dist: refused a peer with a bad hello (or of another gang: rendezvous token)");
            close(fd);
            continue;
        }
        d->fds[f.rank] = fd;
        have++;
    }
    for (int k = 1; k < d->world; k++) {
        struct frame f = {DIST_MAGIC, OP_ACK, 0, (uint32_t)d->world, d->token, 0};
        r = send_frame(d, d->fds[k], &f, NULL, deadline);
        if (r < 0)
            goto out;
    }
    r = 0;
out:
    close(lfd);
    freeaddrinfo(ai);
    return r;
}

static int open_worker(struct dist *d, const char *addr, int port, double deadline)
{
    struct addrinfo *ai;
    int r = resolve(addr, port, false, &ai);
    if (r < 0)
        return r;
    for (;;) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            r = -errno;
            break;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            set_sockopts(fd);
            struct frame f = {DIST_MAGIC, OP_HELLO, (uint32_t)d->rank, (uint32_t)d->world, d->token, 0};
            struct frame ack;
            r = send_frame(d, fd, &f, NULL, deadline);
            if (r >= 0)
                r = recv_frame(d, fd, OP_ACK, d->token, 0, &ack, deadline);
            if (r >= 0) {
                d->fds[0] = fd;
                break;
            }
            /* refused (a rank 0 of another gang, or one that is not ready): try again */
            log_debug("dist: rank 0 at %s:%d refused us (%s); retrying", addr, port, strerror(-r));
            close(fd);
        } else
            close(fd);
        if (time_mono() > deadline) {
            r = -ETIMEDOUT;
            break;
        }
        if (stopped(d)) {
            r = -ECANCELED;
            break;
        }
        usleep(100 * 1000);
    }
    freeaddrinfo(ai);
    return r;
}

static uint64_t rdzv_hash(const char *s)
{
    if (!s || !*s)
        return 0;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h ? h : 1;
}

int dist_open(int rank, int world_size, const char *addr, int port, double timeout_s,
              const volatile sig_atomic_t *stop, struct dist **ret_d)
{
    return dist_open_rdzv(rank, world_size, addr, port, timeout_s, getenv("DROVER_RDZV"), stop, ret_d);
}

int dist_open_rdzv(int rank, int world_size, const char *addr, int port, double timeout_s,
                   const char *rdzv, const volatile sig_atomic_t *stop, struct dist **ret_d)
{
    if (world_size < 2 || world_size > DIST_MAX_WORLD || rank < 0 || rank >= world_size || !addr ||
        port < 1 || port > 65535 || !(timeout_s > 0))
        return -EINVAL;
    struct dist *d = calloc(1, sizeof *d);
    if (!d)
        return -ENOMEM;
    d->fds = malloc(sizeof(int) * (size_t)world_size);
    if (!d->fds) {
        free(d);
        return -ENOMEM;
    }
    for (int i = 0; i < world_size; i++)
        d->fds[i] = -1;
    d->rank = rank;
    d->world = world_size;
    d->token = rdzv_hash(rdzv);
    d->timeout_s = timeout_s;
    d->stop = stop;
    double deadline = time_mono() + timeout_s;
    int r = rank == 0 ? open_master(d, addr, port, deadline) : open_worker(d, addr, port, deadline);
    d->stop = NULL; /* collectives are left at a step boundary (agree_stop), never midway */
    if (r < 0) {
        dist_free(d);
        return r;
    }
    *ret_d = d;
    return 0;
}

void dist_free(struct dist *d)
{
    if (!d)
        return;
    for (int i = 0; i < d->world; i++)
        if (d->fds[i] >= 0)
            close(d->fds[i]);
    free(d->fds);
    free(d);
}

int dist_rank(const struct dist *d)
{
    return d->rank;
}

int dist_world_size(const struct dist *d)
{
    return d->world;
}

int dist_allreduce_sum_f32(struct dist *d, float *buf, size_t n)
{
    uint64_t nb = (uint64_t)n * sizeof(float);
    if (nb > DIST_MAX_BYTES)
        return -E2BIG;
    double deadline = time_mono() + d->timeout_s;
    uint64_t seq = ++d->seq;
    int r;
    if (d->rank != 0) {
        struct frame f = {DIST_MAGIC, OP_ALLREDUCE, (uint32_t)d->rank, (uint32_t)d->world, seq, nb};
        struct frame res;
        r = send_frame(d, d->fds[0], &f, buf, deadline);
        if (r >= 0)
            r = recv_frame(d, d->fds[0], OP_RESULT, seq, nb, &res, deadline);
        if (r >= 0)
            r = recv_all(d, d->fds[0], buf, nb, deadline);
        return r;
    }
    float *tmp = malloc(nb ? nb : 1);
    if (!tmp)
        return -ENOMEM;
    for (int k = 1; k < d->world; k++) {
        struct frame f;
        r = recv_frame(d, d->fds[k], OP_ALLREDUCE, seq, nb, &f, deadline);
        if (r >= 0)
            r = recv_all(d, d->fds[k], tmp, nb, deadline);
        if (r < 0)
            goto out;
        for (size_t i = 0; i < n; i++)
            buf[i] += tmp[i];
    }
    for (int k = 1; k < d->world; k++) {
        struct frame f = {DIST_MAGIC, OP_RESULT, 0, (uint32_t)d->world, seq, nb};
        r = send_frame(d, d->fds[k], &f, buf, deadline);
        if (r < 0)
            goto out;
    }
    r = 0;
out:
    free(tmp);
    return r;
}

int dist_broadcast(struct dist *d, void *buf, size_t len)
{
    if (len > DIST_MAX_BYTES)
        return -E2BIG;
    double deadline = time_mono() + d->timeout_s;
    uint64_t seq = ++d->seq;
    if (d->rank != 0) {
        struct frame f;
        int r = recv_frame(d, d->fds[0], OP_BCAST, seq, len, &f, deadline);
        return r < 0 ? r : recv_all(d, d->fds[0], buf, len, deadline);
    }
    for (int k = 1; k < d->world; k++) {
        struct frame f = {DIST_MAGIC, OP_BCAST, 0, (uint32_t)d->world, seq, len};
        int r = send_frame(d, d->fds[k], &f, buf, deadline);
        if (r < 0)
            return r;
    }
    return 0;
}

int dist_barrier(struct dist *d)
{
    float x = 0;
    return dist_allreduce_sum_f32(d, &x, 1);
}
