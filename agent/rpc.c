/* agent/rpc.c: control socket requests (see rpc.h): parse/format and the client side.
 * The daemon's side of the socket (accept, buffers, replies) lives in daemon.c. */
#include "agent/rpc.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent/gpumem.h"
#include "common/jsonfield.h"
#include "common/linebuf.h"
#include "common/text.h"
#include "common/util.h"

static const char *const op_names[] = {"status", "watch", "activate", "promote", "revert", "stop", "start", "lease-takeover"};

const char *rpc_op_name(enum rpc_op op)
{
    return (unsigned)op < ARRAY_SIZE(op_names) ? op_names[op] : "?";
}

void rpc_request_init(struct rpc_request *q)
{
    memset(q, 0, sizeof *q);
    spec_init(&q->spec);
    q->interval_s = 1;
}

void rpc_request_done(struct rpc_request *q)
{
    if (q)
        spec_done(&q->spec);
}

int rpc_parse_request(const char *text, size_t len, struct rpc_request *ret)
{
    if (len > RPC_MAX_BYTES)
        return -E2BIG;
    json_error_t jerr;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!o)
        return -EINVAL;
    struct rpc_request q;
    rpc_request_init(&q);
    int r = -EINVAL;
    json_t *v = json_object_get(o, "v"), *op = json_object_get(o, "op");
    json_t *job = json_object_get(o, "job"), *rel = json_object_get(o, "release");
    json_t *reason = json_object_get(o, "reason"), *count = json_object_get(o, "count");
    if (!json_is_object(o) || !json_is_integer(v) || !json_is_string(op))
        goto out;
    if (json_integer_value(v) != RPC_VERSION) {
        r = -EPROTONOSUPPORT;
        goto out;
    }
    size_t i;
    for (i = 0; i < ARRAY_SIZE(op_names); i++)
        if (!strcmp(json_string_value(op), op_names[i]))
            break;
    if (i == ARRAY_SIZE(op_names))
        goto out;
    q.op = (enum rpc_op)i;
    if (job) {
        if (!json_is_string(job) || !job_name_is_valid(json_string_value(job)))
            goto out;
        (void)str_copy(q.job, sizeof q.job, json_string_value(job));
    }
    if (rel) {
        if (!json_is_string(rel) || !sha256_is_hex(json_string_value(rel)))
            goto out;
        (void)str_copy(q.release, sizeof q.release, json_string_value(rel));
    }
    if (reason) {
        if (!json_is_string(reason))
            goto out;
        (void)str_copy(q.reason, sizeof q.reason, json_string_value(reason));
    }
    json_t *no_mark = json_object_get(o, "no_mark");
    if (no_mark) {
        if (!json_is_boolean(no_mark))
            goto out;
        q.no_mark = json_is_true(no_mark);
    }
    json_t *no_start = json_object_get(o, "no_start");
    if (no_start) {
        if (!json_is_boolean(no_start))
            goto out;
        q.no_start = json_is_true(no_start);
    }
    if (jf_str(o, "rdzv", q.rdzv, sizeof q.rdzv, false) < 0 || (q.rdzv[0] && !spec_rdzv_ok(q.rdzv)))
        goto out;
    /* promote: the pair's digest (optional: an older client sends none) */
    if (jf_str(o, "spec_digest", q.spec_digest, sizeof q.spec_digest, false) < 0 ||
        (q.spec_digest[0] && !spec_digest_is_valid(q.spec_digest)))
        goto out;
    if (jf_num_in(o, "probation_s", 0, 86400 * 30, &q.probation_s) < 0 ||
        jf_num_in(o, "ktok_s", 0, 1e12, &q.ktok_s) < 0 ||
        jf_num_in(o, "restart_after_s", 0, 86400, &q.restart_after_s) < 0 ||
        jf_num_in(o, "interval_s", 0.05, 3600, &q.interval_s) < 0)
        goto out;
    if (count) {
        if (!json_is_integer(count) || json_integer_value(count) < 0)
            goto out;
        q.count = json_integer_value(count);
    }
    bool needs_job = q.op != RPC_STATUS && q.op != RPC_WATCH;
    if (needs_job && !q.job[0])
        goto out;
    if ((q.op == RPC_ACTIVATE || q.op == RPC_PROMOTE) && !q.release[0])
        goto out;
    if (q.op == RPC_ACTIVATE) {
        struct job_spec s;
        json_t *spec = json_object_get(o, "spec");
        if (!spec || (r = spec_from_json(spec, &s)) < 0) {
            r = r == -E2BIG ? r : -EINVAL;
            goto out;
        }
        if (r > 0) { /* a request must not name what the allow-list refuses */
            spec_done(&s);
            r = -EPERM;
            goto out;
        }
        spec_done(&q.spec);
        q.spec = s;
        (void)str_copy(q.spec.release, sizeof q.spec.release, q.release);
        q.spec.promoted = false;
        if (spec_validate(&q.spec, NULL, 0) < 0) {
            r = -EINVAL;
            goto out;
        }
    }
    *ret = q;
    json_decref(o);
    return 0;
out:
    rpc_request_done(&q);
    json_decref(o);
    return r;
}

int rpc_format_request(const struct rpc_request *q, char **ret_text)
{
    json_t *o = json_pack("{s:i,s:s}", "v", RPC_VERSION, "op", rpc_op_name(q->op));
    if (!o)
        return -ENOMEM;
    /* Every set is checked: a value jansson refuses must fail the request, not vanish from it. */
    char reason[4 * sizeof q->reason];
    int bad = 0;
    if (q->job[0])
        bad |= json_object_set_new(o, "job", json_string(q->job));
    if (q->release[0])
        bad |= json_object_set_new(o, "release", json_string(q->release));
    switch (q->op) {
    case RPC_ACTIVATE:
        bad |= json_object_set_new(o, "spec", spec_to_json(&q->spec));
        bad |= json_object_set_new(o, "probation_s", json_real(q->probation_s));
        break;
    case RPC_PROMOTE:
        bad |= json_object_set_new(o, "ktok_s", json_real(q->ktok_s));
        if (q->spec_digest[0])
            bad |= json_object_set_new(o, "spec_digest", json_string(q->spec_digest));
        break;
    case RPC_REVERT:
    case RPC_LEASE_TAKEOVER:
        /* an operator's reason may be cut mid-character or not be UTF-8: escaped, not lost */
        bad |= json_object_set_new(o, "reason",
                                   json_string(text_json_safe(q->reason, reason, sizeof reason)));
        if (q->op == RPC_REVERT && q->no_mark)
            bad |= json_object_set_new(o, "no_mark", json_true());
        if (q->op == RPC_REVERT && q->no_start)
            bad |= json_object_set_new(o, "no_start", json_true());
        if (q->op == RPC_REVERT && q->rdzv[0])
            bad |= json_object_set_new(o, "rdzv", json_string(q->rdzv));
        break;
    case RPC_STOP:
        if (q->restart_after_s > 0)
            bad |= json_object_set_new(o, "restart_after_s", json_real(q->restart_after_s));
        break;
    case RPC_START:
        if (q->rdzv[0])
            bad |= json_object_set_new(o, "rdzv", json_string(q->rdzv));
        break;
    case RPC_WATCH:
        bad |= json_object_set_new(o, "interval_s", json_real(q->interval_s));
        bad |= json_object_set_new(o, "count", json_integer(q->count));
        break;
    default:
        break;
    }
    if (bad) {
        json_decref(o);
        return -EILSEQ;
    }
    char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    if (!text)
        return -ENOMEM;
    *ret_text = text;
    return 0;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

double rpc_idle_deadline(enum rpc_op op, double interval_s, double grace_s)
{
    switch (op) {
    case RPC_STATUS:
    case RPC_PROMOTE:
        return RPC_STATUS_IDLE_S;
    case RPC_WATCH:
        return (interval_s > 0 ? interval_s : 1) + RPC_STATUS_IDLE_S;
    case RPC_LEASE_TAKEOVER:
        return RPC_JOURNAL_IDLE_S;
    case RPC_ACTIVATE:
    case RPC_REVERT:
    case RPC_STOP:
    case RPC_START:
        if (!(grace_s >= 0 && grace_s <= SPEC_GRACE_MAX_S))
            grace_s = SPEC_GRACE_MAX_S;
        return grace_s + GPUMEM_DEADLINE_S + RPC_STATUS_IDLE_S;
    }
    return RPC_STATUS_IDLE_S;
}

int rpc_call(const char *sock, const char *text, double idle_s,
             int (*on_line)(const char *line, size_t len, void *ud), void *ud)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (str_copy(sa.sun_path, sizeof sa.sun_path, sock) < 0)
        return -ENAMETOOLONG;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int r = 0;
    char *buf = NULL;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        r = -errno;
        goto out;
    }
    /* MSG_NOSIGNAL: a daemon that refuses us (too many clients) closes at once; that must be an
     * error we can report, not a SIGPIPE that kills the CLI without a word.  Its one-line answer
     * may still be readable after a failed write, so read on and let it speak. */
    int wr = send_all(fd, text, strlen(text));
    if (wr == 0)
        wr = send_all(fd, "\n", 1);
    if (wr < 0 && wr != -EPIPE && wr != -ECONNRESET) {
        r = wr;
        goto out;
    }
    (void)shutdown(fd, SHUT_WR);
    buf = malloc(RPC_REPLY_MAX + 1);
    if (!buf) {
        r = -ENOMEM;
        goto out;
    }
    struct linebuf lb;
    (void)linebuf_init(&lb, buf, RPC_REPLY_MAX + 1, RPC_REPLY_MAX);
    char *line;
    size_t len;
    int k;
    for (;;) {
        size_t room;
        char *at = linebuf_room(&lb, &room);
        if (idle_s > 0) { /* monotonic: the idle deadline restarts with every read that got bytes */
            int pr;
            double until = time_mono() + idle_s;
            do {
                double left = until - time_mono();
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                pr = left > 0 ? poll(&pfd, 1, (int)(left * 1000) + 1) : 0;
            } while (pr < 0 && errno == EINTR);
            if (pr == 0) {
                r = -ETIMEDOUT;
                goto out;
            }
        }
        ssize_t n = read(fd, at, room);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            r = -errno;
            if (r == -ECONNRESET && wr < 0)
                r = wr; /* refused before it read our request, and nothing to say */
            goto out;
        }
        if (n == 0)
            break;
        linebuf_added(&lb, (size_t)n);
        while ((k = linebuf_next(&lb, &line, &len)) > 0)
            if ((r = on_line(line, len, ud)) < 0)
                goto out;
        if (k < 0 || lb.overlong) { /* a reply line over RPC_REPLY_MAX: give up */
            r = -E2BIG;
            goto out;
        }
    }
    k = linebuf_rest(&lb, &line, &len);
    if (k < 0)
        r = k;
    else if (k > 0) {
        r = on_line(line, len, ud);
        if (r > 0)
            r = 0;
    }
out:
    free(buf);
    close(fd);
    return r < 0 ? r : 0;
}
