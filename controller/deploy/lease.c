/* controller/deploy/lease.c: the job's local lock and its deploy lease in every container
 * (agent/lease.h): taking it (over a dead local holder too), renewing it while a probation is
 * watched, and giving it back.
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
#include "controller/deploy/objsync.h"
#include "controller/deploy/state.h"
#include "controller/deploy/stopstart.h"
#include "controller/transport/fanout.h"

/* Renew the job's deploy lease in every container while a long wait goes on (a probation, a
 * recovery), every third of its TTL.  Losing it (another operator took it over after it expired:
 * this controller was cut off, or stopped, for a whole TTL) sets d->lease_lost: the watch ends
 * and the deploy stops deciding (taken_over()). */
void leases_renew_due(struct deploy *d, double now)
{
    double ttl = lease_ttl(d);
    if (now < d->lease_renew_at)
        return;
    d->lease_renew_at = now + ttl / 3;
    if (leases_take(d, ttl, false) == -EBUSY)
        d->lease_lost = true; /* the watch ends: this deploy decides nothing any more */
    else
        log_debug("job '%s': deploy lease renewed for %.0f s", d->job->name, ttl);
}

/* leases_take's and leases_release's fan-out: container i's `lease take`; rc = the agent's exit status (-errno: not
 * asked), err = its reason, or the takeover line when it took over an expired lease. */
static int lease_done(struct ct_fan *cf, int i, int r, struct exec_result *res, const char *why)
{
    struct deploy *d = cf->d;
    struct agent_status *sc = cf->scratch[ct_fan_slot(cf, i)];
    if (!res) {
        /* no answer within the take's deadline (why names the step, the containers and that
         * deadline): the survey says so without asking again */
        if (sc && r == -ETIMEDOUT && why)
            (void)str_copy(d->lease_mute[i], sizeof d->lease_mute[i], why);
        return why ? -EIO : -ENOTCONN; /* unreachable: the survey says so */
    }
    int st = res->status;
    char *out = res->out;
    size_t doc = 0, doc_len = 0, lines = res->out_len;
    /* lease take --status: the status document after the lease's lines, kept for the survey;
     * anything unreadable is simply asked again there */
    if (st == 0 && sc)
        d->lease_status_known[i] = true; /* it parsed --status: an agent of that version or later */
    if (st == 0 && sc && status_after_lease(out, res->out_len, &doc, &doc_len) == 0) {
        lines = doc;
        if (status_parse(out + doc, doc_len, sc) == 0) {
            const struct job_status *js = status_find_job(sc, d->job->name);
            if (js)
                d->pre_js[i] = *js;
            d->pre[i] = js ? 1 : 2;
            d->pre_features[i] = sc->features;
        }
    }
    /* taken, but its daemon sent nothing for the agent's own status deadline (stopped, hung):
     * said as a stalled step, with that deadline (read from the agent's words), not this
     * controller's (which did not fire) nor the survey's (which would only wait again) */
    const char *wedged = st == 0 && sc && !d->pre[i] && res->err ? strstr(res->err, AGENT_WEDGED_SAID) : NULL;
    double waited = 0;
    if (wedged && agent_said_wedged(res->err) &&
        sscanf(wedged + strlen(AGENT_WEDGED_SAID), "%lf", &waited) == 1 && waited > 0) {
        const char *label = d->job->cts[i].label;
        objsync_stall_msg("lease status", &label, 1, waited, d->job->name, d->lease_mute[i],
                          sizeof d->lease_mute[i]);
        size_t n = strlen(d->lease_mute[i]);
        snprintf(d->lease_mute[i] + n, sizeof d->lease_mute[i] - n, " (the lease was taken there; %.0f s is "
                 "the agent's own deadline for a status, and its daemon sent nothing)", waited);
        d->lease_wedged_s[i] = waited;
    }
    /* an expired lease of another holder (a controller that died) taken over: said by the
     * caller, journalled by the agent (event lease-takeover) */
    const char *over = st == 0 && out ? memmem(out, lines, "deploy lease taken over by", 26) : NULL;
    if (over)
        snprintf(cf->err[i], sizeof cf->err[i], "%.*s", (int)strcspn(over, "\n"), over);
    else if (st != 0)
        exec_result_reason(res, cf->err[i], sizeof cf->err[i]);
    return st;
}

static int lease_one(struct ct_fan *cf, int i)
{
    const struct inv_ct *ct = &cf->d->job->cts[i];
    struct conn *c;
    int r = fleet_conn(cf->d->f, ct->host, &c);
    if (r < 0)
        return lease_done(cf, i, r, NULL, NULL);
    struct exec_result res;
    if ((r = pct_run_agent(c, ct, cf->batch_args, cf->batch_timeout_s, &res)) < 0) {
        char why[CONN_ERR_MAX + 100];
        snprintf(why, sizeof why, "%s: %s", ct->label, c->err); /* the step and its deadline */
        return lease_done(cf, i, r, NULL, why);
    }
    int st = lease_done(cf, i, 0, &res, NULL);
    exec_result_done(&res);
    return st;
}

/* leases_take's and leases_release's fan-out, every host at once, a host's containers at once. */
static void lease_fan_init(struct ct_fan *cf, struct deploy *d, const char *const *argv)
{
    cf->d = d;
    cf->fn = lease_one;
    cf->done = lease_done;
    cf->batch_args = argv;
    cf->batch_timeout_s = d->inv->exec_timeout_s;
    cf->batch_what = "lease";
}

/* Refusals of the first take (cf: its answers) by a drover of this machine that is no longer
 * running (killed -9, its terminal closed during a probation; holder.h judges it): taken over at
 * once (`lease take --take-over HOLDER`) instead of after lease_ttl, and said once per holder.
 * Only when every refusal is such a holder: one live operator anywhere and nothing is taken over
 * (the deploy is refused as before, the others' leases given back).  The containers taken over
 * get rc 0 in cf, as a take; a takeover refused leaves its container's first answer, and
 * why_sz's text says why when an agent is too old to be asked. */
static void leases_take_over_dead(struct deploy *d, struct ct_fan *cf, double ttl, char *why, size_t why_sz)
{
    const struct inv_job *j = d->job;
    char(*dead)[HOLDER_MAX] = calloc(INV_MAX_CTS, HOLDER_MAX);
    struct ct_fan *again = calloc(1, sizeof *again);
    int n = 0;
    bool all = dead && again;
    for (int i = 0; all && i < j->ncts; i++) {
        if (cf->rc[i] != AGENT_EXIT_BUSY)
            continue;
        all = agent_lease_holder_of(cf->err[i], dead[i], HOLDER_MAX) == 0 &&
              holder_fate_here(dead[i], d->holder) == HOLDER_GONE;
        n++;
    }
    if (!all || !n)
        goto out;
    bool done[INV_MAX_CTS] = { false };
    for (int first = 0; first < j->ncts; first++) {
        if (cf->rc[first] != AGENT_EXIT_BUSY || done[first])
            continue;
        /* every container refused by this holder at once (usually the one dead drover) */
        struct agent_argv a;
        agent_argv_init(&a);
        if (cf->scratch[0])
            agent_argv_lease_status(&a, j->name, d->holder, ttl);
        else
            agent_argv_lease(&a, j->name, d->holder, ttl);
        agent_argv_lease_take_over(&a, dead[first]);
        if (agent_argv_end(&a) < 0)
            break;
        memset(again, 0, sizeof *again);
        lease_fan_init(again, d, a.argv);
        again->batch_timeout_s = cf->batch_timeout_s;
        for (int k = 0; k < INV_MAX_HOSTS; k++)
            again->scratch[k] = cf->scratch[k]; /* lent: the status documents land in d->pre */
        for (int i = 0; i < j->ncts; i++) {
            again->skip[i] = done[i] || cf->rc[i] != AGENT_EXIT_BUSY || strcmp(dead[i], dead[first]) != 0;
            done[i] = done[i] || !again->skip[i];
        }
        (void)ct_fan_run(again);
        int taken = 0, older = 0;
        for (int i = 0; i < j->ncts; i++) {
            if (again->skip[i])
                continue;
            if (again->rc[i] == 0) {
                cf->rc[i] = 0;
                cf->err[i][0] = '\0'; /* the agent's takeover line: said once below, for all */
                taken++;
            } else if (again->rc[i] == AGENT_EXIT_USAGE) {
                older++; /* an agent older than --take-over: its refusal stands */
            } else if (again->rc[i] == AGENT_EXIT_BUSY || again->rc[i] < 0) {
                memcpy(cf->err[i], again->err[i], sizeof cf->err[i]); /* another took it meanwhile */
            }
        }
        if (taken)
            log_warn("job '%s': deploy lease held by %s, which is no longer running on this host: "
                     "taken over (%d %s)", j->name, dead[first], taken,
                     text_plural(taken, "container", "containers"));
        if (older)
            snprintf(why, why_sz, "; that drover is no longer running on this host, but %d %s "
                     "older than lease take --take-over (drover install updates them): the "
                     "lease frees itself after its TTL", older, text_plural(older, "agent is", "agents are"));
    }
out:
    free(dead);
    free(again);
}

double lease_take_timeout(double exec_timeout_s, bool with_status)
{
    return with_status && exec_timeout_s < FLEET_STATUS_TIMEOUT_S ? FLEET_STATUS_TIMEOUT_S : exec_timeout_s;
}

/* Take or renew the lease in every container, every host at once.  with_status: the status
 * document comes with it (`lease take --status`) and is kept for the survey that follows
 * (d->pre); an agent older than --status (exit 2, nothing taken) is asked again without. */
int leases_take(struct deploy *d, double ttl, bool with_status)
{
    if (!d->holder[0])
        holder_self(d->holder, sizeof d->holder); /* user@host/pid-N/boot-B/start-S (holder.h) */
    struct agent_argv a, plain;
    agent_argv_init(&a);
    agent_argv_init(&plain);
    agent_argv_lease(&plain, d->job->name, d->holder, ttl);
    if (with_status)
        agent_argv_lease_status(&a, d->job->name, d->holder, ttl);
    else
        agent_argv_lease(&a, d->job->name, d->holder, ttl);
    struct ct_fan *cf = calloc(1, sizeof *cf), *again = NULL;
    if (agent_argv_end(&a) < 0 || agent_argv_end(&plain) < 0 || !cf) {
        free(cf);
        return 0; /* cannot even ask: let the deploy go on as with an agent without leases */
    }
    lease_fan_init(cf, d, a.argv);
    cf->batch_timeout_s = lease_take_timeout(d->inv->exec_timeout_s, with_status);
    for (int k = 0; with_status && k < INV_MAX_HOSTS; k++)
        if (!(cf->scratch[k] = malloc(sizeof *cf->scratch[k])))
            break; /* no document kept there: the survey asks */
    for (int i = 0; i < d->job->ncts; i++) {
        d->pre[i] = 0;
        d->lease_failed[i][0] = '\0';
        if (with_status) {
            d->lease_mute[i][0] = '\0';
            d->lease_wedged_s[i] = 0;
        }
    }
    double asked = time_mono(); /* no agent's TTL began before this */
    (void)ct_fan_run(cf);
    int older = 0;
    for (int i = 0; with_status && i < d->job->ncts; i++)
        older += cf->rc[i] == AGENT_EXIT_USAGE;
    if (older && (again = calloc(1, sizeof *again))) {
        /* agents older than --status: the plain lease there (the survey asks their status) */
        log_debug("job '%s': %d %s without lease take --status (older than this drover: drover "
                  "install updates them): lease and status asked separately there", d->job->name, older,
                  text_plural(older, "agent", "agents"));
        lease_fan_init(again, d, plain.argv);
        for (int i = 0; i < d->job->ncts; i++)
            again->skip[i] = cf->rc[i] != AGENT_EXIT_USAGE;
        (void)ct_fan_run(again);
        for (int i = 0; i < d->job->ncts; i++)
            if (!again->skip[i]) {
                cf->rc[i] = again->rc[i];
                memcpy(cf->err[i], again->err[i], sizeof cf->err[i]);
            }
        free(again);
    }
    char dead_why[200] = "";
    if (with_status && !d->switching) /* the first take only: a renewal refused stays refused */
        leases_take_over_dead(d, cf, ttl, dead_why, sizeof dead_why);
    for (int k = 0; k < INV_MAX_HOSTS; k++)
        free(cf->scratch[k]);
    int busy = -1;
    for (int i = 0; i < d->job->ncts; i++) {
        const struct inv_ct *ct = &d->job->cts[i];
        int st = cf->rc[i];
        if (st < 0)
            continue;
        if (st == 0) {
            d->leased[i] = true;
            if (cf->err[i][0])
                log_warn("%s: %s", ct->label, cf->err[i]);
            continue;
        }
        char ctwhy[8];
        if (st != AGENT_EXIT_BUSY && pct_ct_problem(ct->vmid, cf->err[i], ctwhy, sizeof ctwhy) < 0)
            continue; /* the container is stopped or not there: the survey says so, once */
        if (st != AGENT_EXIT_BUSY) { /* only a holder refuses; anything else must not block */
            /* an agent with leases that ran and could not take it (its file cannot be written:
             * a full disk, a read-only store); a missing agent (127) or another failure is the
             * survey's to say (`is the agent installed? drover install`) */
            if (st == AGENT_EXIT_DISK_FULL || st == AGENT_EXIT_FAIL)
                (void)str_copy(d->lease_failed[i], sizeof d->lease_failed[i],
                               cf->err[i][0] ? cf->err[i] : "lease take failed");
            log_warn("%s: no deploy lease (%s)%s", ct->label, cf->err[i],
                     st == AGENT_EXIT_USAGE ? "; this agent is older than leases: drover install" : "");
            continue;
        }
        if (busy < 0)
            busy = i;
    }
    /* Ctrl-C while the takes ran: an agent whose answer was abandoned may hold the lease already
     * (`lease take --status` takes it, then asks its daemon): give it back there too */
    for (int i = 0; deploy_interrupted && i < d->job->ncts; i++)
        if (cf->rc[i] < 0)
            d->leased[i] = true;
    if (busy < 0)
        d->lease_taken_at = asked;
    if (busy >= 0) {
        snprintf(d->lease_lost_why, sizeof d->lease_lost_why, "%s: %s%s", d->job->cts[busy].label,
                 cf->err[busy], dead_why);
        if (!d->switching)
            log_error("%s; nothing was changed", d->lease_lost_why);
        free(cf);
        leases_release(d);
        return -EBUSY;
    }
    free(cf);
    return 0;
}

/* Give the lease back wherever we hold it, every host at once. */
void leases_release(struct deploy *d)
{
    struct agent_argv a;
    agent_argv_init(&a);
    agent_argv_lease(&a, d->job->name, d->holder, 0);
    struct ct_fan *cf = calloc(1, sizeof *cf);
    if (agent_argv_end(&a) == 0 && cf) {
        lease_fan_init(cf, d, a.argv);
        for (int i = 0; i < d->job->ncts; i++)
            cf->skip[i] = !d->leased[i];
        (void)ct_fan_run(cf);
    }
    free(cf);
    for (int i = 0; i < d->job->ncts; i++)
        d->leased[i] = false;
}

/* How long a lease holds without renewal ([policy] lease_ttl): the deploy renews it before the
 * push, before the switch and every third of it while it watches a probation, so a controller
 * that died frees the job after this long, however long its probation was to be. */
double lease_ttl(const struct deploy *d)
{
    return d->job->policy.lease_ttl_s;
}

/* The job's lock (state.h) and its deploy lease in every container: an fd to close, or -errno
 * with the error logged.  verb ("deploy", "rollback", ...): a container whose agent could not
 * take the lease refuses it (leases_failed_refuse); NULL: the caller decides (start/stop). */
int deploy_lock(struct deploy *d, const char *verb)
{
    int lock = state_lock_job(d->inv->state_dir, d->job->name);
    if (lock == -EBUSY) {
        long pid = 0;
        char who[48] = "";
        if (state_lock_holder(d->inv->state_dir, d->job->name, &pid) == 0)
            snprintf(who, sizeof who, " (pid %ld)", pid);
        log_error("another drover%s is deploying or rolling back job '%s' (lock in '%s'): wait "
                  "until it ends (it decides the job), then run this again",
                  who, d->job->name, d->inv->state_dir);
        return lock;
    }
    if (lock < 0) { /* not another drover: say what is wrong with the state directory */
        log_error("cannot lock job '%s' in state directory '%s': %s", d->job->name, d->inv->state_dir,
                  strerror(-lock));
        return lock;
    }
    if (leases_take(d, lease_ttl(d), true) < 0) {
        log_error("another operator is deploying or rolling back job '%s' (deploy lease)", d->job->name);
        close(lock);
        return -EBUSY;
    }
    if (verb && leases_failed_refuse(d, verb)) {
        leases_release(d);
        close(lock);
        return -EIO;
    }
    return lock;
}

/* A container whose agent has leases but could not take this one (its disk full: the lease file
 * cannot be written) would have its old gang stopped, then its new one fail to start there (the
 * same full disk), with the job down everywhere: refused before anything is pushed or stopped,
 * every such container named with its agent's words.  true when refused (said). */
bool leases_failed_refuse(const struct deploy *d, const char *verb)
{
    char msg[2400];
    size_t off = 0;
    int n = 0;
    msg[0] = '\0';
    for (int i = 0; i < d->job->ncts && off < sizeof msg; i++) {
        if (!d->lease_failed[i][0])
            continue;
        char words[900];
        if (!stopstart_lease_said(d->lease_failed[i], "run the command again", words, sizeof words))
            off += (size_t)snprintf(msg + off, sizeof msg - off, "%s%s: no deploy lease here: %s (once "
                                    "`drover-agent lease take` works there, run the command again)",
                                    n ? "; " : "", d->job->cts[i].label, words);
        else
            off += (size_t)snprintf(msg + off, sizeof msg - off, "%s%s: no deploy lease here: %s",
                                    n ? "; " : "", d->job->cts[i].label, words);
        n++;
    }
    if (!n)
        return false;
    log_error("%s of job '%s' refused, nothing changed: %s", verb, d->job->name, msg);
    return true;
}
