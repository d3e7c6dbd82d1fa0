/* controller/top/top_poll.c: the dashboard's data feed.  One thread per host owns that host's one
 * connection (libssh sessions are not thread-safe; each stays in its thread) and one long-lived
 * `drover-agent watch --json --interval N` channel per container multiplexed on it; a small
 * thread reads the controller's state dir (targets, baselines, deploy locks) and keeps the fleet
 * trend.  Everything is published into one snapshot under one mutex, held only to copy.
 * A host that stops answering is detected by the age of its data, its session is dropped and
 * reopened in its own thread: nothing here can block the screen.
 * Must never change the fleet (it runs only `watch` and `events`) and never log: the screen is
 * the terminal while it runs.
 */
#include "controller/top/top.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "common/agentcli.h"
#include "common/util.h"
#include "controller/cmd.h"
#include "controller/transport/pct.h"
#include "controller/deploy/state.h"

#define EV_TEXT_MAX 16384
#define EV_SHOW 40 /* newest events shown */

struct slot {
    const struct inv_ct *ct;
    int idx[INV_MAX_JOBS]; /* snapshot cts[] of this container, one per job */
    int nidx;
    struct conn_stream *s;
    struct conn_stream *next; /* the same stream at a new interval, until its first document */
    bool restart;             /* the interval changed: replace s by next */
    double reopen_at;
    double opened_at;
    double last_doc;
    bool got_since_open; /* the current stream sent a document */
};

struct host_ctx {
    struct top_poll *p;
    int host;
    pthread_t th;
    bool running;
};

struct top_poll {
    const struct inventory *inv;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct top_snapshot snap; /* under mu */
    double interval_s;        /* under mu */
    int interval_gen;         /* under mu */
    int seq;                  /* under mu: bumps on each publish */
    bool stop;                /* under mu */
    int alive;                /* under mu: threads still running */
    /* events request, under mu */
    int ev_ct;
    int ev_state; /* 0 idle, 1 wanted, 2 ready, <0 -errno */
    char ev_text[EV_TEXT_MAX];
    char ev_err[TOP_ERR_MAX];
    struct host_ctx hosts[INV_MAX_HOSTS];
    pthread_t state_th;
};

static bool should_stop(struct top_poll *p)
{
    pthread_mutex_lock(&p->mu);
    bool s = p->stop;
    pthread_mutex_unlock(&p->mu);
    return s;
}

static void publish_locked(struct top_poll *p)
{
    p->seq++;
    pthread_cond_broadcast(&p->cv);
}

static void sleep_ms(int ms)
{
    struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static void set_host(struct top_poll *p, int h, bool up, const char *err, bool key_refused,
                     struct slot *slots, int nslots)
{
    pthread_mutex_lock(&p->mu);
    struct top_host *th = &p->snap.hosts[h];
    th->tried = true;
    th->up = up;
    th->key_refused = key_refused;
    if (up)
        th->ok_mono = time_mono();
    (void)str_copy(th->err, sizeof th->err, err ? err : "");
    if (!up)
        for (int i = 0; i < nslots; i++)
            for (int k = 0; k < slots[i].nidx; k++) {
                struct top_ct *tc = &p->snap.cts[slots[i].idx[k]];
                snprintf(tc->err, TOP_ERR_MAX, "host unreachable: %s", err ? err : "?");
                tc->asked_mono = tc->answer_by = 0; /* asked again on the next session */
            }
    publish_locked(p);
    pthread_mutex_unlock(&p->mu);
}

/* Its watch stream was opened at `now`: a container never seen that sends nothing within
 * top_first_doc_within() counts as unreachable (a stopped or hung agent takes the stream and
 * says nothing; top_model.c).  The first ask on a session sets the deadline; reopening the
 * stream does not push it back. */
static void set_ct_asked(struct top_poll *p, struct slot *sl, double now, double interval)
{
    pthread_mutex_lock(&p->mu);
    for (int k = 0; k < sl->nidx; k++) {
        struct top_ct *tc = &p->snap.cts[sl->idx[k]];
        if (tc->asked_mono > 0)
            continue;
        tc->asked_mono = now;
        tc->answer_by = now + top_first_doc_within(interval);
    }
    pthread_mutex_unlock(&p->mu);
}

static void set_ct_err(struct top_poll *p, struct slot *sl, const char *err)
{
    pthread_mutex_lock(&p->mu);
    for (int k = 0; k < sl->nidx; k++)
        (void)str_copy(p->snap.cts[sl->idx[k]].err, TOP_ERR_MAX, err);
    publish_locked(p);
    pthread_mutex_unlock(&p->mu);
}

/* A watch stream that ended before its first document: what pct or the agent said on stderr.
 * pct's own errors name the container's problem (no such vmid, stopped) as `drover status`
 * does; it used to be one guess for all ("container stopped, or agent not installed"). */
static void set_stream_err(struct top_poll *p, struct slot *sl, const char *said)
{
    char why[TOP_ERR_MAX];
    if (pct_ct_problem(sl->ct->vmid, said, why, sizeof why) != 0)
        set_ct_err(p, sl, why);
    else if (said[0]) {
        snprintf(why, sizeof why, "drover-agent watch ended without a status document: %s", said);
        set_ct_err(p, sl, why);
    } else
        set_ct_err(p, sl, "drover-agent watch ended without a status document "
                          "(container stopped, or agent not installed or not running?)");
}

static void close_streams(struct slot *slots, int n)
{
    struct conn_stream *ss[2 * TOP_MAX_CTS];
    int m = 0;
    for (int i = 0; i < n && i < TOP_MAX_CTS; i++) {
        ss[m++] = slots[i].s;
        ss[m++] = slots[i].next;
    }
    (void)pct_streams_free(ss, m); /* ended in their containers too: one follow-up for the host */
    for (int i = 0; i < n; i++) {
        slots[i].s = slots[i].next = NULL;
        slots[i].restart = false;
        slots[i].reopen_at = 0;
    }
}

/* Read every complete line of stream s; true when a status document parsed (the newest in st). */
static bool read_docs(struct conn_stream *s, struct agent_status *st, int *ret_r)
{
    char *line;
    size_t len;
    int r;
    bool got = false;
    while ((r = conn_stream_poll(s, &line, &len)) == 1)
        if (status_parse(line, len, st) == 0)
            got = true;
    *ret_r = r;
    return got;
}

static void publish_doc(struct top_poll *p, int h, struct slot *sl, const struct agent_status *st,
                        double now)
{
    sl->last_doc = now;
    pthread_mutex_lock(&p->mu);
    for (int k = 0; k < sl->nidx; k++) {
        struct top_ct *tc = &p->snap.cts[sl->idx[k]];
        const struct top_job *tj = &p->snap.jobs[tc->job];
        top_ct_update(tc, st, tj->name, tj->warmup_steps, now);
    }
    p->snap.hosts[h].ok_mono = now;
    publish_locked(p);
    pthread_mutex_unlock(&p->mu);
}

/* Serve a pending events request for one of our containers. */
static void serve_events(struct top_poll *p, struct conn *c, struct slot *slots, int nslots)
{
    pthread_mutex_lock(&p->mu);
    int want = p->ev_state == 1 ? p->ev_ct : -1;
    pthread_mutex_unlock(&p->mu);
    if (want < 0)
        return;
    const struct inv_ct *ct = NULL;
    for (int i = 0; i < nslots && !ct; i++)
        for (int k = 0; k < slots[i].nidx; k++)
            if (slots[i].idx[k] == want)
                ct = slots[i].ct;
    if (!ct)
        return; /* another host's */
    char *text = malloc(EV_TEXT_MAX);
    char err[TOP_ERR_MAX] = "";
    int state = 2;
    if (!text) {
        state = -ENOMEM;
        goto done;
    }
    text[0] = '\0';
    if (!c) {
        state = -EHOSTUNREACH;
        snprintf(err, sizeof err, "host not connected");
        goto done;
    }
    struct agent_argv a;
    agent_argv_init(&a);
    agent_argv_events(&a);
    struct exec_result res;
    int r = pct_run_agent(c, ct, a.argv, 10, &res);
    if (r < 0) {
        state = r;
        (void)str_copy(err, sizeof err, c->err);
        goto done;
    }
    if (res.status != 0) {
        char why[200];
        snprintf(err, sizeof err, "drover-agent events failed: %s", exec_result_reason(&res, why, sizeof why));
        state = -EIO;
        exec_result_done(&res);
        goto done;
    }
    /* keep the newest EV_SHOW lines, newest first */
    const char *lines[EV_SHOW];
    size_t lens[EV_SHOW];
    int n = 0, first = 0;
    for (char *l = res.out; l && *l;) {
        char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        lines[(first + n) % EV_SHOW] = l;
        lens[(first + n) % EV_SHOW] = len;
        if (n < EV_SHOW)
            n++;
        else
            first = (first + 1) % EV_SHOW;
        l = nl ? nl + 1 : NULL;
    }
    size_t used = 0;
    for (int i = n - 1; i >= 0; i--) {
        struct event e;
        char line[512];
        int k = (first + i) % EV_SHOW;
        if (event_parse(lines[k], lens[k], &e) < 0)
            continue;
        top_event_format(&e, line, sizeof line);
        int w = snprintf(text + used, EV_TEXT_MAX - used, "%s\n", line);
        if (w < 0 || (size_t)w >= EV_TEXT_MAX - used)
            break;
        used += (size_t)w;
    }
    if (!used)
        snprintf(text, EV_TEXT_MAX, "(no events)\n");
    exec_result_done(&res);
done:
    pthread_mutex_lock(&p->mu);
    if (p->ev_state == 1 && p->ev_ct == want) {
        p->ev_state = state;
        if (text)
            (void)str_copy(p->ev_text, sizeof p->ev_text, text);
        (void)str_copy(p->ev_err, sizeof p->ev_err, err);
        publish_locked(p);
    }
    pthread_mutex_unlock(&p->mu);
    free(text);
}

static void *host_main(void *arg)
{
    struct host_ctx *hc = arg;
    struct top_poll *p = hc->p;
    const struct inventory *inv = p->inv;
    int h = hc->host;
    struct slot *slots = calloc(TOP_MAX_CTS, sizeof *slots);
    struct agent_status *st = malloc(sizeof *st);
    struct conn *c = NULL;
    int nslots = 0;
    if (!slots || !st)
        goto out;
    /* this host's containers, each once (a container may serve several jobs) */
    int ci = 0;
    for (int j = 0; j < inv->njobs; j++)
        for (int i = 0; i < inv->jobs[j].ncts; i++, ci++) {
            const struct inv_ct *ct = &inv->jobs[j].cts[i];
            if (ct->host != h)
                continue;
            int s = 0;
            for (; s < nslots; s++)
                if (slots[s].ct->vmid == ct->vmid && strcmp(slots[s].ct->root, ct->root) == 0)
                    break;
            if (s == nslots) {
                if (nslots == TOP_MAX_CTS)
                    continue;
                slots[nslots++].ct = ct;
            }
            if (slots[s].nidx < INV_MAX_JOBS)
                slots[s].idx[slots[s].nidx++] = ci;
        }
    char trust[300];
    snprintf(trust, sizeof trust, "drover trust %s", inv->hosts[h].name);
    double retry_at = 0, backoff = 1;
    int gen = -1;
    while (!should_stop(p)) {
        double now = time_mono();
        pthread_mutex_lock(&p->mu);
        double interval = p->interval_s;
        int cur_gen = p->interval_gen;
        pthread_mutex_unlock(&p->mu);
        if (cur_gen != gen) {
            /* a new interval: streams are replaced one at a time, each old one kept until its
             * replacement sent a document (no gap, and never twice the channels at once) */
            for (int i = 0; i < nslots; i++)
                slots[i].restart = slots[i].s != NULL;
            gen = cur_gen;
        }
        if (!c) {
            serve_events(p, NULL, slots, nslots);
            if (now < retry_at) {
                sleep_ms(100);
                continue;
            }
            char err[CONN_ERR_MAX];
            int r = conn_open(inv, h, trust, &c, err, sizeof err);
            if (r < 0) {
                c = NULL;
                set_host(p, h, false, err, r == -ENOKEY || r == -EKEYREJECTED, slots, nslots);
                retry_at = time_mono() + backoff;
                backoff = backoff * 2 > 30 ? 30 : backoff * 2;
                continue;
            }
            now = time_mono();
            for (int i = 0; i < nslots; i++)
                slots[i].last_doc = slots[i].opened_at = now;
            set_host(p, h, true, NULL, false, slots, nslots);
        }
        struct agent_argv wa;
        agent_argv_init(&wa);
        agent_argv_watch(&wa, interval);
        const char *const *wargs = wa.argv;
        bool session_dead = false;
        bool switching = false;
        for (int i = 0; i < nslots; i++)
            switching = switching || slots[i].next;
        for (int i = 0; i < nslots && !session_dead; i++) {
            struct slot *sl = &slots[i];
            if (!sl->s && now >= sl->reopen_at) {
                int r = pct_stream_agent(c, sl->ct, wargs, STATUS_MAX_BYTES + 16, &sl->s);
                if (r < 0) {
                    sl->s = NULL;
                    sl->reopen_at = now + 2;
                    set_ct_err(p, sl, c->err);
                    continue; /* a hung session is caught below, by the age of its data */
                }
                sl->opened_at = now;
                sl->got_since_open = false;
                set_ct_asked(p, sl, now, interval);
            }
            if (!sl->s) {
                sl->restart = false; /* it reopens at the new interval anyway */
                continue;
            }
            int r;
            if (read_docs(sl->s, st, &r)) {
                now = time_mono();
                backoff = 1;
                sl->got_since_open = true;
                publish_doc(p, h, sl, st, now);
            }
            if (sl->restart && !sl->next && !switching && now >= sl->reopen_at) {
                if (pct_stream_agent(c, sl->ct, wargs, STATUS_MAX_BYTES + 16, &sl->next) < 0) {
                    sl->next = NULL;
                    sl->reopen_at = now + 2; /* keep the old stream meanwhile */
                } else
                    switching = true;
            }
            if (sl->next) {
                int rn;
                if (read_docs(sl->next, st, &rn)) {
                    now = time_mono();
                    publish_doc(p, h, sl, st, now);
                    (void)pct_streams_free(&sl->s, 1);
                    sl->s = sl->next;
                    sl->next = NULL;
                    sl->restart = false;
                    sl->opened_at = now;
                    sl->got_since_open = true;
                    continue;
                }
                if (rn == -EPIPE || rn == -EIO) {
                    (void)pct_streams_free(&sl->next, 1);
                    sl->reopen_at = now + 2;
                }
            }
            if (r == -EPIPE || r == -EIO) {
                if (!sl->got_since_open)
                    set_stream_err(p, sl, conn_stream_err(sl->s));
                (void)pct_streams_free(&sl->s, 1);
                sl->reopen_at = now + 1;
                if (r == -EIO && c->ssh)
                    session_dead = true;
            }
        }
        /* no data from any container for a long time: the session is hung; start over.  A
         * stream that has not sent its first document yet gets longer (a loaded host may take
         * a while to start the agent; piling new sessions on it would only make it slower). */
        double quiet = 1e9, hung_after = 4 * interval + 6;
        bool all_quiet = nslots > 0;
        for (int i = 0; i < nslots; i++) {
            double q = now - slots[i].last_doc;
            double limit = slots[i].last_doc > slots[i].opened_at ? hung_after
                                                                  : top_first_doc_within(interval);
            if (q < quiet)
                quiet = q;
            if (q <= limit)
                all_quiet = false;
        }
        if (all_quiet)
            session_dead = true;
        if (session_dead) {
            char err[TOP_ERR_MAX];
            snprintf(err, sizeof err, "no answer for %.0fs", quiet < 1e8 ? quiet : 0);
            c->silent = true; /* its streams are not followed up there: it would not answer */
            close_streams(slots, nslots);
            conn_free(c);
            c = NULL;
            set_host(p, h, false, err, false, slots, nslots);
            retry_at = time_mono() + backoff;
            backoff = backoff * 2 > 30 ? 30 : backoff * 2;
            continue;
        }
        serve_events(p, c, slots, nslots);
        struct conn *cs[1] = { c };
        conn_wait(cs, 1, 200);
    }
out:
    if (slots)
        close_streams(slots, nslots);
    conn_free(c);
    free(slots);
    free(st);
    pthread_mutex_lock(&p->mu);
    p->alive--;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void *state_main(void *arg)
{
    struct top_poll *p = arg;
    const struct inventory *inv = p->inv;
    double next = 0;
    while (!should_stop(p)) {
        double now = time_mono();
        pthread_mutex_lock(&p->mu);
        double interval = p->interval_s;
        pthread_mutex_unlock(&p->mu);
        if (now < next) {
            sleep_ms(100);
            continue;
        }
        next = now + interval;
        struct top_job jobs[INV_MAX_JOBS];
        for (int j = 0; j < inv->njobs; j++) {
            const struct inv_job *ij = &inv->jobs[j];
            struct top_job *tj = &jobs[j];
            cmd_job_target(inv, ij->name, tj->target);
            char key[2048], rel[RELEASE_ID_LEN + 1];
            inventory_job_key(ij, key, sizeof key);
            if (state_baseline_get(inv->state_dir, key, &tj->baseline_ktok, rel) < 0)
                tj->baseline_ktok = 0;
            /* read, never taken: a deploy starting at the same moment is not refused because of us */
            tj->deploying = state_lock_in_use(inv->state_dir, ij->name, NULL) > 0;
        }
        pthread_mutex_lock(&p->mu);
        double total = 0;
        bool any = false;
        for (int j = 0; j < inv->njobs; j++) {
            struct top_job *tj = &p->snap.jobs[j];
            (void)str_copy(tj->target, sizeof tj->target, jobs[j].target);
            tj->baseline_ktok = jobs[j].baseline_ktok;
            tj->deploying = jobs[j].deploying;
        }
        now = time_mono();
        for (int i = 0; i < p->snap.ncts; i++) {
            const struct top_ct *ct = &p->snap.cts[i];
            if (!ct->seen || top_ct_is_stale(&p->snap, ct, now))
                continue;
            for (int k = 0; k < ct->nranks; k++)
                if (ct->ranks[k].has_hb && ct->ranks[k].phase == HB_PHASE_TRAIN) {
                    total += ct->ranks[k].ktok;
                    any = true;
                }
        }
        if (any)
            top_trend_push(p->snap.trend, &p->snap.ntrend, (float)total);
        publish_locked(p);
        pthread_mutex_unlock(&p->mu);
    }
    pthread_mutex_lock(&p->mu);
    p->alive--;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int top_poll_start(const struct inventory *inv, double interval_s, struct top_poll **ret_p)
{
    struct top_poll *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->inv = inv;
    p->interval_s = interval_s;
    p->ev_ct = -1;
    int r = top_snapshot_init(&p->snap, inv, interval_s);
    if (r < 0) {
        free(p);
        return r;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1u << 20);
    pthread_mutex_lock(&p->mu);
    r = pthread_create(&p->state_th, &attr, state_main, p);
    if (r == 0)
        p->alive++;
    for (int h = 0; r == 0 && h < inv->nhosts; h++) {
        p->hosts[h] = (struct host_ctx){ .p = p, .host = h };
        r = pthread_create(&p->hosts[h].th, &attr, host_main, &p->hosts[h]);
        if (r == 0) {
            p->hosts[h].running = true;
            p->alive++;
        }
    }
    pthread_mutex_unlock(&p->mu);
    pthread_attr_destroy(&attr);
    if (r != 0) {
        top_poll_stop(p, 5);
        return -r;
    }
    *ret_p = p;
    return 0;
}

void top_poll_stop(struct top_poll *p, double wait_s)
{
    if (!p)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)wait_s;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    int rc = 0;
    while (p->alive > 0 && rc == 0)
        rc = pthread_cond_timedwait(&p->cv, &p->mu, &ts);
    bool all_done = p->alive == 0;
    pthread_mutex_unlock(&p->mu);
    if (!all_done) {
        /* a thread is stuck in a host's connect or write: leave it, and its memory, to exit() */
        for (int h = 0; h < INV_MAX_HOSTS; h++)
            if (p->hosts[h].running)
                pthread_detach(p->hosts[h].th);
        pthread_detach(p->state_th);
        return;
    }
    pthread_join(p->state_th, NULL);
    for (int h = 0; h < INV_MAX_HOSTS; h++)
        if (p->hosts[h].running)
            pthread_join(p->hosts[h].th, NULL);
    top_snapshot_done(&p->snap);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

void top_poll_set_interval(struct top_poll *p, double interval_s)
{
    pthread_mutex_lock(&p->mu);
    if (p->interval_s != interval_s) {
        p->interval_s = interval_s;
        p->snap.interval_s = interval_s;
        p->interval_gen++;
    }
    pthread_mutex_unlock(&p->mu);
}

int top_poll_snapshot(struct top_poll *p, struct top_snapshot *dst)
{
    pthread_mutex_lock(&p->mu);
    int r = top_snapshot_copy(dst, &p->snap);
    pthread_mutex_unlock(&p->mu);
    return r;
}

void top_poll_request_events(struct top_poll *p, int ct)
{
    pthread_mutex_lock(&p->mu);
    p->ev_ct = ct;
    p->ev_state = 1;
    p->ev_text[0] = '\0';
    p->ev_err[0] = '\0';
    pthread_mutex_unlock(&p->mu);
}

int top_poll_events(struct top_poll *p, char *text, size_t text_sz, char *err, size_t err_sz)
{
    pthread_mutex_lock(&p->mu);
    int st = p->ev_state;
    if (st == 2)
        (void)str_copy(text, text_sz, p->ev_text);
    else if (st < 0)
        (void)str_copy(err, err_sz, p->ev_err[0] ? p->ev_err : strerror(-st));
    pthread_mutex_unlock(&p->mu);
    return st == 2 ? 1 : st < 0 ? st : 0;
}

int top_poll_seq(struct top_poll *p)
{
    pthread_mutex_lock(&p->mu);
    int seq = p->seq;
    pthread_mutex_unlock(&p->mu);
    return seq;
}

void top_poll_wait(struct top_poll *p, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->mu);
    int seq = p->seq, rc = 0;
    while (p->seq == seq && rc == 0)
        rc = pthread_cond_timedwait(&p->cv, &p->mu, &ts);
    pthread_mutex_unlock(&p->mu);
}
