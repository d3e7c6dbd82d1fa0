/* controller/transport/fleet.c: per-run connection cache, agent status queries, exit codes
 * (terminal helpers are controller/ui.c).  Logs each host failure once; never retries a host that refused its key.
 */
#include "controller/transport/fleet.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/agentcli.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/transport/pct.h"

void fleet_init(struct fleet *f, const struct inventory *inv, const char *inv_arg)
{
    memset(f, 0, sizeof *f);
    f->inv = inv;
    f->inv_arg = inv_arg;
}

void fleet_done(struct fleet *f)
{
    for (int i = 0; i < INV_MAX_HOSTS; i++) {
        conn_free(f->conns[i]);
        f->conns[i] = NULL;
    }
}

bool fleet_contacted(const struct fleet *f)
{
    for (int i = 0; i < INV_MAX_HOSTS; i++)
        if (f->conns[i] || f->conn_err[i])
            return true;
    return false;
}

int fleet_conn(struct fleet *f, int host, struct conn **ret_conn)
{
    if (f->conns[host]) {
        *ret_conn = f->conns[host];
        return 0;
    }
    if (f->conn_err[host] < 0)
        return f->conn_err[host];
    char trust[600];
    snprintf(trust, sizeof trust, "drover%s%s trust %s", f->inv_arg ? " -i " : "",
             f->inv_arg ? f->inv_arg : "", f->inv->hosts[host].name);
    int r = conn_open(f->inv, host, trust, &f->conns[host], f->conn_msg[host],
                      sizeof f->conn_msg[host]);
    if (r < 0) {
        f->conn_err[host] = r;
        if (r == -ENOKEY || r == -EKEYREJECTED)
            f->key_refused = true;
        log_error("%s", f->conn_msg[host]);
        return r;
    }
    *ret_conn = f->conns[host];
    return 0;
}

bool fleet_drop_if_dead(struct fleet *f, int host)
{
    struct conn *c = f->conns[host];
    if (!c || !c->ssh || ssh_conn_is_alive(c->ssh))
        return false;
    log_warn("host '%s': SSH session dropped; reconnecting", f->inv->hosts[host].name);
    conn_free(c);
    f->conns[host] = NULL;
    return true;
}

int fleet_agent_stream(struct fleet *f, const struct inv_ct *ct, const char *const *args,
                       size_t line_max, struct conn_stream **ret_s, char *err, size_t err_sz)
{
    struct conn *c;
    if (fleet_conn(f, ct->host, &c) < 0)
        return -ENOTCONN;
    int r = pct_stream_agent(c, ct, args, line_max, ret_s);
    if (r < 0)
        snprintf(err, err_sz, "%s", c->err);
    return r;
}

bool fleet_session_is_dead(struct fleet *f, int host)
{
    struct conn *c = f->conns[host];
    return c && c->ssh && !ssh_conn_is_alive(c->ssh);
}

void fleet_wait(struct fleet *f, int ms)
{
    struct conn *conns[INV_MAX_HOSTS];
    int n = 0;
    for (int h = 0; h < INV_MAX_HOSTS; h++)
        if (f->conns[h])
            conns[n++] = f->conns[h];
    conn_wait(conns, n, ms);
}

int fleet_agent_status(struct fleet *f, const struct inv_ct *ct, struct agent_status *ret_st,
                       char *err, size_t err_sz)
{
    struct conn *c;
    int r = fleet_conn(f, ct->host, &c);
    if (r < 0) {
        snprintf(err, err_sz, "host unreachable: %s", f->conn_msg[ct->host]);
        return r;
    }
    struct agent_argv a;
    agent_argv_init(&a);
    agent_argv_status(&a);
    struct exec_result res;
    r = pct_run_agent(c, ct, a.argv, FLEET_STATUS_TIMEOUT_S, &res);
    if (r < 0) {
        snprintf(err, err_sz, "%s", c->err);
        return r;
    }
    r = fleet_agent_status_read(ct, &res, ret_st, err, err_sz);
    exec_result_done(&res);
    return r;
}

int fleet_agent_status_read(const struct inv_ct *ct, const struct exec_result *res, struct agent_status *ret_st,
                            char *err, size_t err_sz)
{
    char reason[512];
    if (res->status != 0) {
        exec_result_reason(res, reason, sizeof reason);
        int pr = pct_ct_problem(ct->vmid, reason, err, err_sz); /* stopped, or no such vmid */
        if (pr < 0)
            return pr;
        snprintf(err, err_sz, "drover-agent status failed (exit %d): %s", res->status, reason);
        return -EIO;
    }
    int r = status_parse(res->out ? res->out : "", res->out_len, ret_st);
    if (r < 0)
        snprintf(err, err_sz, "drover-agent status printed a document drover cannot read: %s",
                 strerror(-r));
    return r;
}
