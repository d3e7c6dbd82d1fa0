/* controller/transport/pct.c: container operations over a host connection: pct exec / pct push for
 * HOST:VMID nodes, plain commands with --root for HOST:local:/ROOT nodes.  It never writes into
 * a container's rootfs from the host side, and never trusts pct push's exit status alone.
 */
#include "controller/transport/pct.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/agentcli.h"
#include "common/log.h"
#include "common/util.h"

const char *pct_agent_root(const struct inv_ct *ct)
{
    return ct->root[0] ? ct->root : PCT_AGENT_ROOT;
}

static int wrap_exec(const struct inv_ct *ct, const char *const *argv, const char **out,
                     char vmid_buf[16])
{
    size_t n = 0;
    if (ct->vmid >= 0) {
        snprintf(vmid_buf, 16, "%d", ct->vmid);
        out[n++] = "pct";
        out[n++] = "exec";
        out[n++] = vmid_buf;
        out[n++] = "--keep-env"; /* never leak the host's environment (cases-field C05) */
        out[n++] = "0";
        out[n++] = "--";
    }
    for (size_t i = 0; argv[i]; i++) {
        if (n + 1 >= PCT_ARGV_MAX)
            return -E2BIG;
        out[n++] = argv[i];
    }
    out[n] = NULL;
    return 0;
}

int pct_agent_argv(const struct inventory *inv, const struct inv_ct *ct,
                   const char *const *agent_args, const char **argv_out, char vmid_buf[16])
{
    struct agent_argv inner;
    agent_argv_init(&inner);
    const struct inv_host *h = &inv->hosts[ct->host];
    agent_argv_add(&inner, ct->root[0] && h->agent_path[0] ? h->agent_path : inv->agent_path);
    /* Global options, before the verb: several local roots on one machine each get their own
     * store and their own control socket. */
    if (ct->root[0])
        agent_argv_globals(&inner, ct->root, ct->socket);
    for (size_t i = 0; agent_args[i]; i++)
        agent_argv_add(&inner, agent_args[i]);
    if (agent_argv_end(&inner) < 0)
        return -E2BIG;
    return wrap_exec(ct, inner.argv, argv_out, vmid_buf);
}

int pct_run(struct conn *c, const struct inv_ct *ct, const char *const *argv, double timeout_s,
            struct exec_result *ret)
{
    const char *full[PCT_ARGV_MAX];
    char vmid[16];
    if (wrap_exec(ct, argv, full, vmid) < 0) {
        snprintf(c->err, sizeof c->err, "too many arguments");
        return -E2BIG;
    }
    return conn_run(c, full, timeout_s, ret);
}

int pct_run_agent(struct conn *c, const struct inv_ct *ct, const char *const *agent_args,
                  double timeout_s, struct exec_result *ret)
{
    const char *full[PCT_ARGV_MAX];
    char vmid[16];
    if (pct_agent_argv(c->inv, ct, agent_args, full, vmid) < 0) {
        snprintf(c->err, sizeof c->err, "too many arguments");
        return -E2BIG;
    }
    int r = conn_run(c, full, timeout_s, ret);
    if (r == -ETIMEDOUT) { /* conn_run quoted the command line: say the step instead */
        log_debug("%s: %s", ct->label, c->err);
        pct_agent_timeout_msg(agent_args, timeout_s, c->err, sizeof c->err);
    }
    return r;
}

void pct_agent_timeout_msg(const char *const *agent_args, double timeout_s, char *buf, size_t sz)
{
    const char *verb = agent_args && agent_args[0] ? agent_args[0] : "?", *sub = "", *job = NULL;
    /* the verbs with a second word (release have, lease take, history add) are named by both */
    int v = agent_args && agent_args[0] ? agent_verb_parse(agent_args[0]) : -EINVAL;
    if (v >= 0 && agent_verb_has_sub((enum agent_verb)v) && agent_args[1] && agent_args[1][0] != '-')
        sub = agent_args[1];
    for (size_t i = 0; agent_args && agent_args[i]; i++)
        if (!strcmp(agent_args[i], "--job") && agent_args[i + 1]) {
            job = agent_args[i + 1];
            break;
        }
    char see[320] = ""; /* not for `status` itself: it was what got no answer */
    if (strcmp(verb, "status") != 0)
        snprintf(see, sizeof see, " `drover status%s%s` shows it", job ? " --job " : "", job ? job : "");
    snprintf(buf, sz, "step '%s%s%s' got no answer from the agent within %.0fs: is drover-agent stopped or "
             "hung there, or the host no longer answering?%s (drover -v logs the command)", verb,
             sub[0] ? " " : "", sub, timeout_s, see);
}

int pct_stream_agent(struct conn *c, const struct inv_ct *ct, const char *const *agent_args,
                     size_t line_max, struct conn_stream **ret_s)
{
    const char *full[PCT_ARGV_MAX];
    char vmid[16];
    if (pct_agent_argv(c->inv, ct, agent_args, full, vmid) < 0) {
        snprintf(c->err, sizeof c->err, "too many arguments");
        return -E2BIG;
    }
    return conn_stream_open(c, full, line_max, ret_s);
}

int pct_push(struct conn *c, const struct inv_ct *ct, const char *host_path, const char *ct_path,
             const char *perms)
{
    return pct_push_timeout(c, ct, host_path, ct_path, perms, c->inv->exec_timeout_s);
}

int pct_push_timeout(struct conn *c, const struct inv_ct *ct, const char *host_path, const char *ct_path,
                     const char *perms, double timeout_s)
{
    struct exec_result res;
    int r;
    if (ct->vmid >= 0) {
        char vmid[16];
        snprintf(vmid, sizeof vmid, "%d", ct->vmid);
        const char *argv[] = { "pct", "push", vmid, host_path, ct_path, "--perms", perms, NULL };
        r = conn_run(c, argv, timeout_s, &res);
    } else {
        const char *argv[] = { "install", "-m", perms, host_path, ct_path, NULL };
        r = conn_run(c, argv, timeout_s, &res);
    }
    if (r < 0)
        return r;
    char reason[512];
    /* pct push prints copy errors but still exits 0: any stderr counts as a failure here too. */
    if (res.status != 0 || res.err_len) {
        snprintf(c->err, sizeof c->err, "push of '%s' to '%s' failed: %s", host_path, ct_path,
                 exec_result_reason(&res, reason, sizeof reason));
        r = -EIO;
    }
    exec_result_done(&res);
    return r;
}

int pct_sha256(struct conn *c, const struct inv_ct *ct, const char *path, char ret_hex[65])
{
    const char *argv[] = { "sha256sum", path, NULL };
    struct exec_result res;
    int r = pct_run(c, ct, argv, c->inv->exec_timeout_s, &res);
    if (r < 0)
        return r;
    if (res.status != 0 || res.out_len < 64) {
        exec_result_done(&res);
        return -ENOENT;
    }
    for (int i = 0; i < 64; i++)
        if (!isxdigit((unsigned char)res.out[i])) {
            exec_result_done(&res);
            return -EBADMSG;
        }
    memcpy(ret_hex, res.out, 64);
    ret_hex[64] = '\0';
    exec_result_done(&res);
    return 0;
}

int pct_stream(struct conn *c, const struct inv_ct *ct, const char *const *argv, size_t line_max,
               struct conn_stream **ret_s)
{
    const char *full[PCT_ARGV_MAX];
    char vmid[16];
    if (wrap_exec(ct, argv, full, vmid) < 0) {
        snprintf(c->err, sizeof c->err, "too many arguments");
        return -E2BIG;
    }
    return conn_stream_open(c, full, line_max, ret_s);
}

int pct_ct_problem(int vmid, const char *reason, char *out, size_t sz)
{
    if (vmid < 0 || !reason)
        return 0;
    /* PVE: "Configuration file 'nodes/pve1/lxc/103.conf' does not exist" (a vmid of no
     * container, or of another node's) */
    if (strstr(reason, "Configuration file") && strstr(reason, "does not exist")) {
        snprintf(out, sz, "no container %d on this host (%s): check the vmid in the inventory's "
                          "containers (`pct list` on the host lists them)", vmid, reason);
        return -ENODEV;
    }
    if (strstr(reason, "not running")) {
        snprintf(out, sz, "container %d is stopped (%s); start it with: pct start %d", vmid, reason, vmid);
        return -EHOSTDOWN;
    }
    return 0;
}
