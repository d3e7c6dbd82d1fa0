/* agent/rpc.h: the control socket protocol between `drover-agent <verb>` and the daemon.
 *
 * Unix stream socket (default /run/drover/agent.sock, mode 0600, root only).  The client sends
 * one request, a JSON object on one line of at most RPC_MAX_BYTES, and reads reply lines until
 * the daemon closes:
 *   {"v":1,"op":"activate","job":"train","release":"<id>","spec":{…agent.h spec…},"probation_s":600}
 *   {"v":1,"op":"promote","job":"train","release":"<id>","ktok_s":412.3}
 *   {"v":1,"op":"revert","job":"train","reason":"…","rdzv":"<generation>","no_start":true}
 *     (rdzv, no_mark and no_start optional)
 *   {"v":1,"op":"stop","job":"train","restart_after_s":S}   (restart_after_s optional: a switch)
 *   {"v":1,"op":"start","job":"train","rdzv":"<generation>"}   (rdzv optional)
 *   {"v":1,"op":"lease-takeover","job":"train","reason":"deploy lease taken over by …"}
 *     (from `lease take`, which changed the lease itself: the daemon only journals it)
 *   {"v":1,"op":"status"}   {"v":1,"op":"watch","interval_s":2,"count":0}
 * Replies: {"ok":true,…} or {"ok":false,"code":<agent_exit>,"error":"<one line>"}; status and
 * watch reply with status documents (common/status.h), one per line.  Only rpc.c knows this.
 */
#ifndef DROVER_AGENT_RPC_H
#define DROVER_AGENT_RPC_H

#include <stddef.h>
#include <stdint.h>

#include "agent/agent.h"

#define RPC_VERSION 1
#define RPC_MAX_BYTES (64u << 10)
#define RPC_REPLY_MAX STATUS_MAX_BYTES

enum rpc_op { RPC_STATUS, RPC_WATCH, RPC_ACTIVATE, RPC_PROMOTE, RPC_REVERT, RPC_STOP, RPC_START,
              RPC_LEASE_TAKEOVER };

struct rpc_request {
    enum rpc_op op;
    char job[JOB_NAME_MAX];
    char release[RELEASE_ID_LEN + 1];
    struct job_spec spec;      /* activate only; owned, spec_done() via rpc_request_done() */
    double probation_s;        /* activate: 0 none */
    double ktok_s;             /* promote */
    char spec_digest[SPEC_DIGEST_LEN + 1]; /* promote: the pair's job spec digest, "" any */
    char reason[256];          /* revert */
    bool no_mark;              /* revert: leave the current release unmarked (no verdict) */
    bool no_start;             /* revert: make the good release current, leave the job stopped */
    char rdzv[SPEC_RDZV_MAX];  /* start, revert: the new rendezvous generation, "" = keep */
    double restart_after_s;    /* stop: a switch's stop, its switch deadline (0: a plain stop) */
    double interval_s;         /* watch: 0.05 .. 3600 */
    int64_t count;             /* watch: 0 forever */
};

void rpc_request_init(struct rpc_request *q);
void rpc_request_done(struct rpc_request *q);
const char *rpc_op_name(enum rpc_op op);

/* Parse one request (len bytes, no NUL needed).  -E2BIG over RPC_MAX_BYTES, -EINVAL malformed
 * (unknown op, missing job, bad id or spec), -EPROTONOSUPPORT other version.  ret written only
 * on success; release with rpc_request_done(). */
int rpc_parse_request(const char *text, size_t len, struct rpc_request *ret);
/* One line of compact JSON without the newline; malloc'd. */
int rpc_format_request(const struct rpc_request *q, char **ret_text);

/* Client: connect to sock, send text + '\n', then call on_line for every reply line (without the
 * newline) until the daemon closes or on_line returns < 0 (that value is returned).
 * -ENOENT/-ECONNREFUSED when no daemon listens; -E2BIG for a reply line over RPC_REPLY_MAX. */
int rpc_call(const char *sock, const char *text, double idle_s,
             int (*on_line)(const char *line, size_t len, void *ud), void *ud);

/* rpc_call's idle deadline for a request (idle_s: -ETIMEDOUT once nothing arrived for that
 * long), so that a daemon that is stopped (SIGSTOP) or wedged is named instead of waited on
 * forever.  The daemon answers status, promote and lease-takeover at once and a watch every
 * interval_s.  It answers activate, revert, stop and start once the job's gang is gone and the
 * next one started, which its job machine bounds by the gang's grace (SIGTERM -> SIGKILL) and the
 * GPU-memory wait (GPUMEM_DEADLINE_S): those get that bound plus RPC_STATUS_IDLE_S, so the
 * deadline never fires on a healthy slow stop.  grace_s: the grace of the gang the verb may stop
 * (state_job_grace), < 0 when not known (SPEC_GRACE_MAX_S is assumed); other ops ignore it. */
double rpc_idle_deadline(enum rpc_op op, double interval_s, double grace_s);
#define RPC_STATUS_IDLE_S 60.0
#define RPC_JOURNAL_IDLE_S 10.0

#endif
