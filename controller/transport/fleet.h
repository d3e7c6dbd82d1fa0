/* controller/transport/fleet.h: what every verb shares: the inventory, one connection per host opened on
 * first use and reused for all its containers, the agent's status per container, exit codes,
 * (terminal helpers: controller/ui.h, included here for the verbs).  Single-threaded.
 */
#ifndef DROVER_FLEET_H
#define DROVER_FLEET_H

#include <stdbool.h>
#include <stdio.h>

#include "common/status.h"
#include "controller/transport/conn.h"
#include "controller/inventory.h"
#include "controller/ui.h"

/* Exit codes of `drover` (docs/controller.md); never renumbered. */
enum drover_exit {
    EXIT_OK = 0,
    EXIT_FAIL = 1,          /* failed before anything was switched (or a verb's plain failure) */
    EXIT_USAGE = 2,         /* bad command line or inventory */
    EXIT_REVERTED = 3,      /* release failed probation; the last good release is back and healthy */
    EXIT_REVERT_FAILED = 4, /* release failed and the revert failed or did not recover: act now */
    EXIT_HOSTKEY = 5,       /* a host key is unknown or changed: nothing was touched */
    EXIT_NOT_REVERTED = 6,  /* release failed probation, auto_revert off: left running */
    EXIT_HELD = 7,          /* inconclusive or no data, on_inconclusive = hold: left running,
                               unpromoted, for `drover promote` or `drover revert` */
    EXIT_ENV_FAULT = 8,     /* a container's GPU environment is broken: nothing reverted (the
                               release is not to blame); fix it (drover-agent gpu-check) */
};

struct fleet {
    const struct inventory *inv;
    const char *inv_arg;   /* -i as given (NULL: default), for "run: drover -i X trust h1" */
    struct conn *conns[INV_MAX_HOSTS];
    int conn_err[INV_MAX_HOSTS];       /* 0 = not tried / ok; -errno once failed */
    char conn_msg[INV_MAX_HOSTS][CONN_ERR_MAX];
    bool key_refused;                  /* some host key was unknown or changed */
};

void fleet_init(struct fleet *f, const struct inventory *inv, const char *inv_arg);
void fleet_done(struct fleet *f);

/* The connection to host number `host`, opened on first use.  A failure is logged once (with
 * the trust hint for host keys) and remembered; later calls return the same -errno at once. */
int fleet_conn(struct fleet *f, int host, struct conn **ret_conn);

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

#endif
