/* controller/deploy/fan.c: per-container work spread over the job's hosts (struct ct_fan): one
 * worker per host, a host's containers one after another or in one batched host exec; one agent
 * command in every container at once, one stream each, until a deadline (agent_fan_run: the
 * switch's stop phase, `drover stop|start`); and one agent call in one container.
 */
#include "controller/deploy/deploy_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/text.h"
#include "common/util.h"
#include "controller/cmd.h"
#include "controller/deploy/jobspec.h"
#include "controller/deploy/state.h"
#include "controller/transport/fanout.h"

static void ct_fan_host_one_by_one(struct ct_fan *cf, int host)
{
    const struct inv_job *j = cf->d->job;
    for (int i = 0; i < j->ncts; i++) {
        if (j->cts[i].host != host || cf->skip[i])
            continue;
        cf->rc[i] = cf->fn(cf, i);
        if (cf->rc[i] < 0 && cf->host_stops)
            return;
    }
}

static void ct_fan_host_batch(struct ct_fan *cf, int host)
{
    const struct inv_job *j = cf->d->job;
    int cts[INV_MAX_CTS], n = 0;
    for (int i = 0; i < j->ncts; i++)
        if (j->cts[i].host == host && !cf->skip[i])
            cts[n++] = i;
    if (!n)
        return;
    struct conn *c;
    int r = fleet_conn(cf->d->f, host, &c);
    if (r < 0) {
        for (int k = 0; k < n; k++)
            cf->rc[cts[k]] = cf->done(cf, cts[k], r, NULL, NULL);
        return;
    }
    struct agent_argv *av = calloc((size_t)n, sizeof *av);
    struct fan_res fr[INV_MAX_CTS];
    struct exec_result res = { 0 };
    char why[1024] = "";
    if (!av) {
        ct_fan_host_one_by_one(cf, host);
        return;
    }
    for (int k = 0; k < n; k++) {
        agent_argv_init(&av[k]);
        for (size_t a = 0; cf->batch_args[a]; a++)
            agent_argv_add(&av[k], cf->batch_args[a]);
    }
    double t0 = time_mono();
    r = objsync_fan_agents(cf->d->f, j, host, cts, n, av, cf->batch_timeout_s, cf->batch_what, &res, fr, why,
                           sizeof why);
    free(av);
    log_debug("deploy %s: %s in %d %s at once: %.2fs", cf->d->inv->hosts[host].name, cf->batch_what,
              n, text_plural(n, "container", "containers"), time_mono() - t0);
    if (r == -EBADMSG || r == -E2BIG) {
        ct_fan_host_one_by_one(cf, host);
        return;
    }
    for (int k = 0; k < n; k++) {
        if (r < 0) {
            /* objsync_stall_msg: the step and the containers; an unwritable store: the host */
            cf->named[cts[k]] = r == -ETIMEDOUT || r == -EROFS;
            cf->rc[cts[k]] = cf->done(cf, cts[k], r, NULL, why);
            continue;
        }
        /* the answer as conn_run gives it: NUL-terminated, stderr's trailing newline cut */
        struct exec_result one = { .status = fr[k].status };
        size_t el = fr[k].err_len;
        while (el && fr[k].err[el - 1] == '\n')
            el--;
        one.out = strndup(fr[k].out, fr[k].out_len);
        one.out_len = fr[k].out_len;
        one.err = strndup(fr[k].err, el);
        one.err_len = el;
        if (!one.out || !one.err)
            cf->rc[cts[k]] = cf->done(cf, cts[k], -ENOMEM, NULL, "out of memory");
        else
            cf->rc[cts[k]] = cf->done(cf, cts[k], 0, &one, NULL);
        exec_result_done(&one);
    }
    exec_result_done(&res);
}

static void ct_fan_host(int k, void *ctx)
{
    struct ct_fan *cf = ctx;
    if (cf->batch_args)
        ct_fan_host_batch(cf, cf->hosts[k]);
    else
        ct_fan_host_one_by_one(cf, cf->hosts[k]);
}

/* Run cf->fn for every container of the job (cf->d, fn, arg, skip, host_stops set by the
 * caller; cf zeroed otherwise).  Returns the number of containers whose fn failed. */
int ct_fan_run(struct ct_fan *cf)
{
    const struct inv_job *j = cf->d->job;
    bool seen[INV_MAX_HOSTS] = { false };
    cf->nhosts = 0;
    for (int i = 0; i < j->ncts; i++) {
        cf->rc[i] = 1;
        cf->err[i][0] = '\0';
        cf->named[i] = false;
        if (!seen[j->cts[i].host])
            cf->hosts[cf->nhosts++] = j->cts[i].host;
        seen[j->cts[i].host] = true;
    }
    fanout_run(cf->nhosts, cf->d->inv->parallel > 0 ? cf->d->inv->parallel : 1, ct_fan_host, cf);
    int failed = 0;
    for (int i = 0; i < j->ncts; i++)
        failed += cf->rc[i] < 0;
    return failed;
}

/* Thread index for cf->scratch: the position of container i's host in cf->hosts. */
int ct_fan_slot(const struct ct_fan *cf, int i)
{
    for (int k = 0; k < cf->nhosts; k++)
        if (cf->hosts[k] == cf->d->job->cts[i].host)
            return k;
    return 0;
}

const char *ct_fan_said(const struct ct_fan *cf, int i, char *buf, size_t sz)
{
    if (cf->named[i])
        for (int k = 0; k < i; k++)
            if (cf->named[k] && cf->rc[k] < 0 && !strcmp(cf->err[k], cf->err[i]))
                return NULL;
    if (cf->named[i])
        snprintf(buf, sz, "%s", cf->err[i]);
    else
        snprintf(buf, sz, "%s: %s", cf->d->job->cts[i].label, cf->err[i]);
    return buf;
}

int agent_call_full(struct deploy *d, const struct inv_ct *ct, const char *const *args,
                           double timeout_s, int *ret_status, char *out, size_t out_sz, char *err,
                           size_t err_sz)
{
    if (out && out_sz)
        out[0] = '\0';
    struct conn *c;
    int r = fleet_conn(d->f, ct->host, &c);
    if (r < 0) {
        snprintf(err, err_sz, "%s: host unreachable", ct->label);
        return r;
    }
    struct exec_result res;
    r = pct_run_agent(c, ct, args, timeout_s, &res);
    if (r == -EIO && fleet_drop_if_dead(d->f, ct->host) && fleet_conn(d->f, ct->host, &c) == 0)
        r = pct_run_agent(c, ct, args, timeout_s, &res); /* once, on a fresh session */
    if (r < 0) {
        snprintf(err, err_sz, "%s: %s", ct->label, c->err);
        return r;
    }
    if (res.status != 0) {
        /* the reason gets what err has left after the prefix, not a fixed cap of its own: a
         * gpu-check's faults are long (up to 3 lines of 1023 bytes reach the reason; in the
         * lab two of them made 650 bytes, cut mid-word by the 600 this was).  When it does
         * not fit, the cut is before a whole word, marked, and says where all of it is */
        char reason[4096];
        bool two = strcmp(args[0], "release") == 0 && args[1];
        int n = snprintf(err, err_sz, "%s: drover-agent %s%s%s failed (exit %d): ", ct->label, args[0],
                         two ? " " : "", two ? args[1] : "", res.status);
        if (n >= 0 && (size_t)n < err_sz)
            text_cut_words(exec_result_reason(&res, reason, sizeof reason),
                           strcmp(args[0], "gpu-check") == 0 ? " (all of it: `drover-agent gpu-check` in the "
                                                               "container)" : NULL,
                           err + n, err_sz - (size_t)n);
        if (ret_status)
            *ret_status = res.status;
        r = -EIO;
    } else if (out && out_sz && res.out) {
        snprintf(out, out_sz, "%.*s", (int)strcspn(res.out, "\n"), res.out); /* its first line */
    }
    exec_result_done(&res);
    return r;
}

int agent_call_status(struct deploy *d, const struct inv_ct *ct, const char *const *args,
                             double timeout_s, int *ret_status, char *err, size_t err_sz)
{
    return agent_call_full(d, ct, args, timeout_s, ret_status, NULL, 0, err, err_sz);
}

int agent_call_out(struct deploy *d, const struct inv_ct *ct, const char *const *args, double timeout_s,
                   char *out, size_t out_sz, char *err, size_t err_sz)
{
    return agent_call_full(d, ct, args, timeout_s, NULL, out, out_sz, err, err_sz);
}

int agent_call(struct deploy *d, const struct inv_ct *ct, const char *const *args,
                      double timeout_s, char *err, size_t err_sz)
{
    return agent_call_status(d, ct, args, timeout_s, NULL, err, err_sz);
}

void agent_fan_line(struct agent_fan_ct *c, const char *line, size_t len)
{
    if (len >= 2 && !strncmp(line, "ok", 2)) /* "ok: stopped: no process of the gang is left" */
        snprintf(c->ok, sizeof c->ok, "%.*s", (int)(len < sizeof c->ok - 1 ? len : sizeof c->ok - 1), line);
}

bool agent_fan_end(struct agent_fan_ct *c, int r, const char *err, double took)
{
    if (r != -EPIPE && r != -EIO)
        return false;
    c->ended = true;
    c->lost = r == -EIO;
    snprintf(c->err, sizeof c->err, "%s", err ? err : "");
    c->took = took;
    return true;
}

bool agent_fan_tick_due(double elapsed, double *next, double every)
{
    if (*next < 0 || every <= 0 || elapsed < *next)
        return false;
    while (*next <= elapsed)
        *next += every;
    return true;
}

int agent_fan_waiting(char *buf, size_t buf_sz, const char *what, const struct inv_job *j,
                      const struct agent_fan_ct ret[], double elapsed, double limit)
{
    char on[1024] = "";
    size_t off = 0;
    int n = 0;
    for (int i = 0; i < j->ncts; i++) {
        if (!ret[i].asked || ret[i].ended)
            continue;
        if (off < sizeof on)
            off += (size_t)snprintf(on + off, sizeof on - off, "%s%s", n ? ", " : "", j->cts[i].label);
        n++;
    }
    if (!n) {
        buf[0] = '\0';
        return 0;
    }
    snprintf(buf, buf_sz, "still waiting for %s to stop on %s (%.0f s of %.0f s)", what, on, elapsed, limit);
    return n;
}

int agent_fan_run(struct deploy *d, const char *const *argv, const bool *skip, double limit,
                  struct agent_fan_ct ret[], const struct agent_fan_hooks *hooks)
{
    const struct inv_job *j = d->job;
    struct conn_stream *s[INV_MAX_CTS] = { NULL };
    int pending = 0, cut = 0;
    double t0 = time_mono();
    for (int i = 0; i < j->ncts; i++) {
        struct agent_fan_ct *c = &ret[i];
        *c = (struct agent_fan_ct){ .took = -1 };
        if (skip && skip[i])
            continue;
        char e[CONN_ERR_MAX] = "";
        int r = argv ? fleet_agent_stream(d->f, &j->cts[i], argv, 4096, &s[i], e, sizeof e) : -ENOMEM;
        if (r < 0) {
            snprintf(c->err, sizeof c->err, "%s", r == -ENOTCONN ? "host unreachable" : e);
            continue;
        }
        c->asked = true;
        pending++;
    }
    if (hooks && hooks->asked)
        hooks->asked(d, ret);
    double next_tick = hooks && hooks->tick && hooks->tick_s > 0 ? hooks->tick_s : -1;
    while (pending > 0 && !deploy_interrupted && time_mono() - t0 < limit) {
        for (int i = 0; i < j->ncts; i++) {
            if (!s[i])
                continue;
            char *line;
            size_t len;
            int r;
            while ((r = conn_stream_poll(s[i], &line, &len)) == 1)
                agent_fan_line(&ret[i], line, len);
            if (!agent_fan_end(&ret[i], r, conn_stream_err(s[i]), time_mono() - t0)) {
                if (hooks && hooks->ct_limit && time_mono() - t0 >= hooks->ct_limit[i]) {
                    /* its own limit: the agent goes on with the request on its own; its CLI,
                     * which waited for the answer there, is ended */
                    (void)pct_streams_free(&s[i], 1);
                    pending--;
                    cut++;
                }
                continue;
            }
            (void)pct_streams_free(&s[i], 1);
            pending--;
            if (hooks && hooks->ended)
                hooks->ended(d, i, &ret[i]);
        }
        double el = time_mono() - t0;
        if (pending > 0 && el < limit && agent_fan_tick_due(el, &next_tick, hooks ? hooks->tick_s : 0))
            hooks->tick(d, ret, el, limit);
        if (pending > 0)
            fleet_wait(d->f, 200);
    }
    int left = cut;
    for (int i = 0; i < j->ncts; i++)
        left += s[i] != NULL;
    /* no answer in time, or a Ctrl-C: the agent goes on with the request on its own; the CLIs
     * that waited for its answer are ended in their containers (one follow-up per host) */
    (void)pct_streams_free(s, j->ncts);
    return left;
}
