/* controller/transport/fleet.h: what every verb shares: the inventory, one connection per host opened on
 * first use and reused for all its containers, the agent's status per container (exit codes:
 * controller/exitcode.h; terminal helpers: controller/ui.h; both included here for the verbs).
 * Single-threaded.
 */
#ifndef DROVER_FLEET_H
#define DROVER_FLEET_H

#include <stdbool.h>
#include <stdio.h>

#include "common/status.h"
#include "controller/transport/conn.h"
#include "controller/exitcode.h"
#include "controller/inventory.h"
#include "controller/ui.h"

struct fleet {
    const struct inventory *inv;
    const char *inv_arg;   /* -i as given (NULL: default), for "run: drover -i X trust h1" */
    struct conn *conns[INV_MAX_HOSTS];
    int conn_err[INV_MAX_HOSTS];       /* 0 = not tried / ok; -errno once failed */
    char conn_msg[INV_MAX_HOSTS][CONN_ERR_MAX];
    bool key_refused;                  /* some host key was unknown or changed */
    bool args_only;                    /* the verb is only to check its arguments (controller/cli.c):
                                          return EXIT_OK once they parse, before any host or the
                                          (empty) inventory is used */
    /* Set by a verb given -o json while args_only (cmd_result_want()): an inventory that then
     * fails to load still gets the verb's JSON document (controller/cli.c), naming these jobs. */
    const char *json_kind;             /* NULL: no -o json */
    const char *json_jobs[INV_MAX_JOBS];
    int json_njobs;
};

void fleet_init(struct fleet *f, const struct inventory *inv, const char *inv_arg);
void fleet_done(struct fleet *f);

/* The connection to host number `host`, opened on first use.  A failure is logged once (with
 * the trust hint for host keys) and remembered; later calls return the same -errno at once. */
int fleet_conn(struct fleet *f, int host, struct conn **ret_conn);

/* Whether any host was contacted yet (a connection opened, or tried and failed): a verb that
 * refuses its input before then says "nothing was contacted" (docs/errors.md, exit 2). */
bool fleet_contacted(const struct fleet *f);

/* After a failure on host's connection: if its SSH session is dead, free it (the caller must
 * have freed every stream on it) so the next fleet_conn() reconnects.  true when dropped. */
bool fleet_drop_if_dead(struct fleet *f, int host);

/* Open a stream of the agent command args in ct (`watch --json`) on host's connection (opened
 * on first use).  -ENOTCONN when the host is unreachable (already reported by fleet_conn), or
 * the stream's -errno with a message in err. */
int fleet_agent_stream(struct fleet *f, const struct inv_ct *ct, const char *const *args,
                       size_t line_max, struct conn_stream **ret_s, char *err, size_t err_sz);
/* host's SSH session is open but no longer answers: free its streams, then fleet_drop_if_dead(). */
bool fleet_session_is_dead(struct fleet *f, int host);
/* Wait until any open connection has data or ms passed. */
void fleet_wait(struct fleet *f, int ms);

/* `drover-agent status --json` in ct, parsed.  -errno with a message in err: -EHOSTDOWN when
 * the container is stopped, -EIO when the agent does not answer, or the connection's error. */
int fleet_agent_status(struct fleet *f, const struct inv_ct *ct, struct agent_status *ret_st,
                       char *err, size_t err_sz);
/* How long one container's `status` may take (seconds). */
#define FLEET_STATUS_TIMEOUT_S 15
/* fleet_agent_status's reading of an answer res got some other way (a host's containers asked
 * at once): the same results and messages. */
int fleet_agent_status_read(const struct inv_ct *ct, const struct exec_result *res, struct agent_status *ret_st,
                            char *err, size_t err_sz);

#endif
