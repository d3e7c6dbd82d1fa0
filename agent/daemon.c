/* agent/daemon.c: the drover-agent daemon (see daemon.h).
 *
 * One thread, one poll loop: the control socket, a signalfd (SIGCHLD, SIGTERM, SIGINT, SIGHUP),
 * every rank's heartbeat pipe and the clients; a 100 ms tick drives SIGKILL escalation, backoff,
 * probation deadlines, the watch stream and the systemd watchdog.  Per job at most one
 * operation is in flight (activate/revert/stop/restart), and the next gang of a job starts only
 * after the old one is gone (gang_is_gone).  Every change of a job is saved to state.json and
 * journalled in events.jsonl before a client hears about it.
 * Must never: stop a job's gang before the new release and its command were checked; roll back
 * a promoted release; talk to anything outside the container.
 */
#include "agent/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/gpu.h"
#include "agent/history.h"
#include "agent/jobmachine.h"
#include "agent/lease.h"
#include "agent/notify.h"
#include "agent/objstore.h"
#include "agent/rpc.h"
#include "agent/state.h"
#include "common/histrec.h"
#include "common/linebuf.h"
#include "common/log.h"
#include "common/procstat.h"
#include "common/status.h"
#include "common/text.h"
#include "common/util.h"

#ifndef DROVER_VERSION
#define DROVER_VERSION "unknown"
#endif

#define TICK_MS 100
#define MAX_CLIENTS 64
/* The control socket must stay usable whatever its clients do (issue 12: 64 idle connections
 * locked out `status`; a watcher that did not read stalled the loop up to 2 s per document).
 * Sockets are non-blocking; answers are queued per client and sent as the peer reads. */
#define CLIENT_REQUEST_TIMEOUT_S 5.0  /* a connection must send its request line within this */
#define CLIENT_STALL_S 10.0           /* queued output that does not move for this long: dropped */
#define CLIENT_OUT_MAX (2u * STATUS_MAX_BYTES + 4096)

struct client {
    int fd;
    char *in;          /* RPC_MAX_BYTES + 1: storage of lb */
    struct linebuf lb; /* the request line */
    bool watching;
    double interval, next_at;
    int64_t remaining; /* watch lines left; -1 forever */
    bool waiting;      /* a job operation will answer */
    bool eof;          /* the client closed its side: stop polling it for input */
    double opened_at;  /* monotonic; for the request timeout */
    char *out;         /* queued output [outoff, outlen) */
    size_t outlen, outoff;
    double moved_at;   /* last time queued output was empty or drained a little */
    bool close_after;  /* close once the queued output is sent */
};

struct jobrt {
    struct gang gang;
    struct jm_rt m;   /* the job machine's runtime half (agent/jobmachine.h) */
    int waiter;       /* client index waiting for the operation; -1 none */
    bool gpu_waiting; /* the gang's processes are gone; its GPU memory is waited for */
    bool gpu_said;    /* ... and the log said so */
    double gpu_since, gpu_next; /* monotonic: the wait's start, the next NVML look */
};

struct daemon {
    const struct daemon_opts *o;
    struct store store;
    struct agent_state st;
    struct events ev;
    char state_path[PATH_MAX];
    struct jobrt rt[STATUS_MAX_JOBS];
    struct client cl[MAX_CLIENTS];
    int listen_fd, sig_fd;
    double started_mono;
    double watchdog_s, watchdog_next;
    bool quit;         /* SIGTERM/SIGINT seen: stopping every gang, then exit */
};

void daemon_opts_default(struct daemon_opts *o)
{
    memset(o, 0, sizeof *o);
    (void)str_copy(o->root, sizeof o->root, AGENT_DEFAULT_ROOT);
    (void)str_copy(o->socket, sizeof o->socket, AGENT_DEFAULT_SOCKET);
    (void)str_copy(o->pidfile, sizeof o->pidfile, AGENT_DEFAULT_PIDFILE);
    o->keep_releases = 5;
    crash_policy_default(&o->policy);
}

/* ---- persistence ---- */

static uint64_t proc_starttime(pid_t pid);

/* The kernel's boot id: CLOCK_MONOTONIC values are comparable between processes while it
 * stays the same. */
static int boot_id(char *buf, size_t sz)
{
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sz - 1);
    close(fd);
    if (n <= 0)
        return -EIO;
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

static void daemon_save(struct daemon *d)
{
    double now = time_mono();
    char boot[40] = "";
    (void)boot_id(boot, sizeof boot);
    uint64_t init = proc_starttime(1);
    for (int i = 0; i < d->st.njobs; i++) {
        struct job_rec *j = &d->st.jobs[i];
        struct gang *g = &d->rt[i].gang;
        j->probation_left_s = j->probation_deadline > 0 ? (j->probation_deadline > now ? j->probation_deadline - now : 0) : 0;
        j->switch_left_s = j->switch_deadline > 0 ? (j->switch_deadline > now ? j->switch_deadline - now : 0) : 0;
        (void)str_copy(j->boot_id, sizeof j->boot_id, boot);
        j->init_start = init;
        j->gang_pgid = g->pgid;
        j->npids = 0;
        for (int k = 0; k < g->nranks; k++) { /* by local rank, for the next agent's adoption */
            j->pids[j->npids] = g->ranks[k].pid;
            j->holders[j->npids++] = g->ranks[k].holder;
        }
    }
    int r = state_save(d->state_path, &d->st);
    if (r < 0)
        log_error("cannot save '%s': %s", d->state_path, strerror(-r));
}

static void daemon_event(struct daemon *d, const struct job_rec *j, const char *kind,
                         const char *release, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void daemon_event(struct daemon *d, const struct job_rec *j, const char *kind,
                         const char *release, const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    int64_t r = events_append(&d->ev, j ? j->job : "", kind, release, detail);
    if (r < 0)
        log_error("cannot append to the event journal: %s", strerror((int)-r));
    if (j)
        log_info("event %s job '%s' release %.12s: %s", kind, j->job, release ? release : "", detail);
    else
        log_info("event %s: %s", kind, detail);
}

/* JM_FX_HISTORY: the agent went back from release e->release on its own: its record in the job's
 * history, so that `drover history` shows the release and why it ended even when no drover was
 * there to decide (killed during probation, a held release's hold time over, a crash loop
 * after the drover left): reason code agent-revert, by agent; the drover reading it names the
 * container. */
static void daemon_history_own(struct daemon *d, const struct job_rec *j, const struct jm_effect *e)
{
    /* JM_HISTORY_STOPPED: the promoted release stopped for a failure not retried and marked bad
     * (failed, agent-stopped), JM_HISTORY_STOPPED_HUNG: stopped after its restart budget was
     * spent on hangs, not marked (failed, agent-stopped-hung; no other release was put in place: previous is left empty, since
     * previous == release reads as a spec change, histrec.h) */
    bool stopped = e->code == JM_HISTORY_STOPPED || e->code == JM_HISTORY_STOPPED_HUNG;
    struct history_entry h = { .time = time_wall(), .ktok_s = -1, .baseline_ktok_s = -1,
                               .reason_code = e->code == JM_HISTORY_STOPPED_HUNG ? HISTORY_RC_AGENT_STOPPED_HUNG
                                              : stopped ? HISTORY_RC_AGENT_STOPPED : HISTORY_RC_AGENT_REVERT };
    (void)str_copy(h.job, sizeof h.job, j->job);
    (void)str_copy(h.release, sizeof h.release, e->release);
    if (objstore_release_name(&d->store, e->release, h.name) < 0)
        h.name[0] = '\0';
    (void)str_copy(h.result, sizeof h.result, stopped ? "failed" : "reverted");
    if (!stopped)
        (void)str_copy(h.previous, sizeof h.previous, j->good);
    (void)str_copy(h.by, sizeof h.by, HISTORY_BY_AGENT);
    char full[sizeof h.reason + JM_TEXT_MAX];
    if (snprintf(full, sizeof full, "drover-agent %s", e->text) >= (int)sizeof h.reason)
        log_debug("job '%s': the history record's reason is cut to %zu bytes", j->job, sizeof h.reason - 1);
    (void)text_cut_words(full, NULL, h.reason, sizeof h.reason); /* at a word, never inside a `command` */
    char *line = NULL;
    int r = history_entry_format(&h, &line);
    if (r == 0)
        r = history_add(d->o->root, j->job, line);
    free(line);
    if (r < 0)
        log_warn("job '%s': cannot record the %s %.12s in its history: %s", j->job,
                 stopped ? "stop of" : "revert from", e->release, strerror(-r));
}

/* ---- clients ---- */

static void client_close(struct daemon *d, int ci)
{
    struct client *c = &d->cl[ci];
    if (c->fd >= 0)
        close(c->fd);
    free(c->in);
    free(c->out);
    memset(c, 0, sizeof *c);
    c->fd = -1;
    for (int i = 0; i < STATUS_MAX_JOBS; i++)
        if (d->rt[i].waiter == ci)
            d->rt[i].waiter = -1;
}

static bool client_has_output(const struct client *c)
{
    return c->outoff < c->outlen;
}

/* Send what the socket takes now, never blocking.  -EPIPE (client closed) when the peer is gone
 * or the client was closed after its last answer; 0 otherwise. */
static int client_flush(struct daemon *d, int ci)
{
    struct client *c = &d->cl[ci];
    while (client_has_output(c)) {
        ssize_t w = send(c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0; /* the peer reads slowly: the rest goes when poll says POLLOUT */
        if (w <= 0) {
            client_close(d, ci);
            return -EPIPE;
        }
        c->outoff += (size_t)w;
        c->moved_at = time_mono();
    }
    c->outoff = c->outlen = 0;
    if (c->close_after) {
        client_close(d, ci);
        return -EPIPE;
    }
    return 0;
}

/* Queue line + '\n' and send what the socket takes.  A client whose queue would pass
 * CLIENT_OUT_MAX is closed (-ENOBUFS).  -EPIPE when the client is gone. */
static int client_send(struct daemon *d, int ci, const char *line)
{
    struct client *c = &d->cl[ci];
    size_t n = strlen(line);
    if (c->outoff > 0) { /* compact */
        memmove(c->out, c->out + c->outoff, c->outlen - c->outoff);
        c->outlen -= c->outoff;
        c->outoff = 0;
    }
    if (c->outlen + n + 1 > CLIENT_OUT_MAX) {
        log_debug("client %d: %zu bytes unread, dropped", ci, c->outlen);
        client_close(d, ci);
        return -ENOBUFS;
    }
    char *nb = realloc(c->out, c->outlen + n + 1);
    if (!nb) {
        client_close(d, ci);
        return -ENOMEM;
    }
    c->out = nb;
    if (c->outlen == 0)
        c->moved_at = time_mono();
    memcpy(c->out + c->outlen, line, n);
    c->out[c->outlen + n] = '\n';
    c->outlen += n + 1;
    return client_flush(d, ci);
}

/* Queue the final answer and close once it is sent. */
static void client_reply(struct daemon *d, int ci, json_t *o)
{
    char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    if (!text) {
        client_close(d, ci);
        return;
    }
    d->cl[ci].close_after = true;
    (void)client_send(d, ci, text);
    free(text);
}

static void client_error(struct daemon *d, int ci, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void client_error(struct daemon *d, int ci, int code, const char *fmt, ...)
{
    if (ci < 0 || d->cl[ci].fd < 0)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    client_reply(d, ci, json_pack("{s:b,s:i,s:s}", "ok", 0, "code", code, "error", msg));
}

/* ---- status ---- */

static int gpu_index_of(const struct job_spec *s, int local_rank)
{
    if (!s || !s->gpus[0])
        return local_rank; /* no list: NVML index = local rank, a best guess for the figures */
    char gpu[16];
    return spec_gpu_at(s, local_rank, gpu, sizeof gpu) == 0 ? atoi(gpu) : -1;
}

static char *daemon_status_text(struct daemon *d)
{
    struct agent_status *as = calloc(1, sizeof *as);
    if (!as)
        return NULL;
    double now = time_mono();
    if (gethostname(as->host, sizeof as->host - 1) < 0)
        (void)str_copy(as->host, sizeof as->host, "?");
    as->agent_pid = getpid();
    (void)str_copy(as->agent_version, sizeof as->agent_version, DROVER_VERSION);
    as->uptime_s = now - d->started_mono;
    as->wall = time_wall(); /* for the controller's skew check only */
    as->seq = d->ev.seq;
    as->features = STATUS_FEATURES_ALL;
    as->njobs = d->st.njobs;
    for (int i = 0; i < d->st.njobs; i++) {
        struct job_rec *j = &d->st.jobs[i];
        struct job_status *js = &as->jobs[i];
        const struct gang *g = &d->rt[i].gang;
        (void)str_copy(js->job, sizeof js->job, j->job);
        memcpy(js->current, j->current, sizeof js->current);
        memcpy(js->previous, j->previous, sizeof js->previous);
        memcpy(js->good, j->good, sizeof js->good);
        js->state = j->state;
        (void)str_copy(js->release, sizeof js->release, g->pgid ? g->release : "");
        js->generation = j->generation;
        js->restarts = j->restarts;
        (void)str_copy(js->last_restart_reason, sizeof js->last_restart_reason, j->last_restart_reason);
        js->peer_exit = jm_peer_exit(j, &d->rt[i].m);
        js->age_s = g->pgid ? now - g->started_mono : 0;
        /* when the agent reverts an unpromoted current on its own, and who holds the job now:
         * `drover status` notes a probation no drover watches (held, or its drover died) */
        js->probation_left_s = j->probation_deadline > 0 ? j->probation_deadline - now : -1;
        lease_peek(d->o->root, j->job, now, js->lease_holder, sizeof js->lease_holder, &js->lease_left_s);
        const struct job_spec *s = !g->pgid || !strcmp(g->release, j->current)
                                       ? state_current_spec(j) : state_find_spec(j, g->release, NULL);
        /* what the job runs is (current, spec): the controller's survey compares both */
        memcpy(js->spec_digest, j->current_digest, sizeof js->spec_digest);
        memcpy(js->good_spec_digest, j->good_digest, sizeof js->good_spec_digest);
        const struct job_spec *cs = state_current_spec(j);
        if (cs)
            memcpy(js->spec_fields, cs->digest_fields, sizeof js->spec_fields);
        if (s) {
            /* the gang's generation: the token its DROVER_RDZV carries (supervise.c) */
            (void)str_copy(js->rdzv, sizeof js->rdzv, s->rdzv);
            js->world_size = s->nnodes * s->nproc;
            js->node_rank = s->node_rank;
            js->nproc = s->nproc;
        }
        (void)str_copy(js->reason, sizeof js->reason, j->reason);
        js->reason_code = j->reason_code;
        for (int k = 0; k < j->nbad && js->nbad < STATUS_MAX_MARKS; k++) {
            (void)str_copy(js->bad_reason[js->nbad], sizeof js->bad_reason[0], j->bad[k].reason);
            (void)str_copy(js->bad[js->nbad++], sizeof js->bad[0], j->bad[k].release);
        }
        for (int k = 0; k < j->ngoods && js->ngoods < STATUS_MAX_MARKS; k++) {
            /* the pair's digest only while its spec is recorded: a rollback can start only that */
            if (state_find_spec(j, j->goods[k], j->goods_digest[k]))
                (void)str_copy(js->goods_spec[js->ngoods], sizeof js->goods_spec[0], j->goods_digest[k]);
            (void)str_copy(js->goods[js->ngoods++], sizeof js->goods[0], j->goods[k]);
        }
        gang_fill_status(g, js, now);
        for (int k = 0; k < js->nranks; k++)
            if (g->ranks[k].alive)
                gpu_query(gpu_index_of(s, k), &js->ranks[k].gpu);
    }
    char *text = NULL;
    int r = status_format(as, &text);
    free(as);
    if (r < 0)
        log_error("status_format: %s", strerror(-r));
    return text;
}

/* ---- applying the job machine's effects ---- */

static struct job_spec *current_spec(struct job_rec *j) { return state_current_spec(j); }

static void daemon_gc(struct daemon *d)
{
    const char *protect[STATUS_MAX_JOBS * (3 + STATE_MAX_GOODS)];
    const char *failed[STATUS_MAX_JOBS * STATE_MAX_BAD];
    size_t n = 0, nf = 0;
    for (int i = 0; i < d->st.njobs; i++) {
        protect[n++] = d->st.jobs[i].current;
        protect[n++] = d->st.jobs[i].previous;
        protect[n++] = d->st.jobs[i].good;
        for (int k = 0; k < d->st.jobs[i].ngoods; k++) /* rollback targets */
            protect[n++] = d->st.jobs[i].goods[k];
        for (int k = 0; k < d->st.jobs[i].nbad; k++) /* the first to go beyond protect */
            failed[nf++] = d->st.jobs[i].bad[k].release;
    }
    /* a release marked bad by one job but current or good of another is protected: the
     * protect list wins */
    int r = store_gc(&d->store, (size_t)d->o->keep_releases, protect, n, failed, nf);
    if (r < 0)
        log_warn("release GC: %s", strerror(-r));
}


static bool pid_in_our_gangs(pid_t pid, void *ud)
{
    struct daemon *d = ud;
    pid_t pg = getpgid(pid);
    for (int i = 0; i < d->st.njobs; i++)
        if (d->rt[i].gang.pgid > 0 && pg == d->rt[i].gang.pgid)
            return true;
    return false;
}

/* Before a gang starts: anything else still holding a GPU node (a child of an old worker that
 * left the process group) is reported, not killed: it may belong to something we do not own. */
static void daemon_report_gpu_holders(struct daemon *d, const struct job_rec *j)
{
    pid_t pids[8];
    int n = gpu_find_holders(pids, (int)ARRAY_SIZE(pids), pid_in_our_gangs, d);
    if (n <= 0)
        return;
    char list[200] = "";
    size_t len = 0;
    for (int k = 0; k < n && k < (int)ARRAY_SIZE(pids); k++) {
        char comm[32] = "?", p[48];
        snprintf(p, sizeof p, "/proc/%d/comm", (int)pids[k]);
        FILE *f = fopen(p, "re");
        if (f) {
            if (fgets(comm, sizeof comm, f))
                comm[strcspn(comm, "\n")] = '\0';
            fclose(f);
        }
        int w = snprintf(list + len, sizeof list - len, "%s%d (%s)", k ? ", " : "", (int)pids[k], comm);
        if (w < 0 || (size_t)w >= sizeof list - len)
            break;
        len += (size_t)w;
    }
    daemon_event(d, j, "lingering", j->current, "%d process(es) outside any gang hold a GPU: %s", n, list);
}

static void job_feed(struct daemon *d, int i, const struct jm_event *ev, int ci);

/* JM_FX_START_GANG: start generation gen of j's current release, then tell the machine. */
static void job_start_gang(struct daemon *d, int i, int gen, double now)
{
    struct job_rec *j = &d->st.jobs[i];
    struct jobrt *rt = &d->rt[i];
    struct job_spec *s = current_spec(j);
    char err[512] = "no command recorded for the current release";
    int r = -ENOENT;
    enum jm_start why = rt->m.starting;
    /* An installed release is re-verified before it is reactivated (a revert, a restart after a
     * crash, a start asked for, a resume after the agent's own restart): a stat per file and a
     * read only of what changed (agent/vrecord.h).  An activate was verified at its request. */
    if (s && why != JM_START_ACTIVATE && (r = store_verify_release(&d->store, j->current, err, sizeof err)) < 0)
        s = NULL;
    else if (s) {
        daemon_report_gpu_holders(d, j);
        char resume[(RELEASE_ID_LEN + 1) * (STATE_MAX_SPECS + 2)];
        state_resume_list(j, resume, sizeof resume);
        r = gang_check_exec(&d->store, s, err, sizeof err);
        if (r == 0)
            r = gang_start(&rt->gang, &d->store, j->job, s, resume, gen, err, sizeof err);
    }
    struct jm_event ev = {.kind = r < 0 ? JM_EV_START_FAILED : JM_EV_START_OK, .now = now, .text = err};
    if (r == 0)
        j->gang_starttime = proc_starttime(rt->gang.pgid);
    job_feed(d, i, &ev, -1);
}

static json_t *job_reply(struct daemon *d, int i, const char *msg)
{
    struct job_rec *j = &d->st.jobs[i];
    json_t *pids = json_array();
    const struct gang *g = &d->rt[i].gang;
    for (int k = 0; k < g->nranks; k++)
        if (g->ranks[k].alive)
            json_array_append_new(pids, json_integer(g->ranks[k].pid));
    return json_pack("{s:b,s:s,s:s,s:s,s:s,s:i,s:o,s:s}", "ok", 1, "job", j->job, "release", j->current,
                     "good", j->good, "state", gang_state_name(j->state), "generation", j->generation,
                     "pids", pids, "detail", msg ? msg : "");
}

/* Answer the client waiting on job i (if still connected). */
static void job_answer(struct daemon *d, int i, int code, const char *msg)
{
    int ci = d->rt[i].waiter;
    d->rt[i].waiter = -1;
    if (ci < 0 || d->cl[ci].fd < 0)
        return;
    if (code)
        client_error(d, ci, code, "%s", msg);
    else
        client_reply(d, ci, job_reply(d, i, msg));
}

/* Feed one event to job i's machine and apply its effects in order.  ci: the client whose
 * request this is (-1 none). */
static void job_feed(struct daemon *d, int i, const struct jm_event *ev, int ci)
{
    struct job_rec *j = &d->st.jobs[i];
    struct jobrt *rt = &d->rt[i];
    struct jm_effects *fx = malloc(sizeof *fx);
    if (!fx) {
        log_error("job '%s': out of memory", j->job);
        return;
    }
    fx->n = 0;
    jm_step(&d->o->policy, j, &rt->m, ev, fx);
    for (int k = 0; k < fx->n; k++) {
        const struct jm_effect *e = &fx->fx[k];
        switch (e->kind) {
        case JM_FX_STOP_GANG:
            gang_stop(&rt->gang);
            break;
        case JM_FX_CLEAR_GANG:
            gang_clear(&rt->gang);
            break;
        case JM_FX_SWITCH: {
            int r = store_switch_current(&d->store, j->job, e->release);
            if (r < 0)
                log_error("job '%s': switching current to %.12s: %s", j->job, e->release, strerror(-r));
            break;
        }
        case JM_FX_START_GANG:
            job_start_gang(d, i, e->code, ev->now);
            break;
        case JM_FX_EVENT:
            daemon_event(d, j, e->what, e->release, "%s", e->text);
            break;
        case JM_FX_REPLY:
            if (ci < 0 || d->cl[ci].fd < 0)
                break;
            if (e->code)
                client_error(d, ci, e->code, "%s", e->text);
            else
                client_reply(d, ci, job_reply(d, i, e->text));
            break;
        case JM_FX_WAIT:
            if (ci >= 0 && d->cl[ci].fd >= 0) {
                rt->waiter = ci;
                d->cl[ci].waiting = true;
            }
            break;
        case JM_FX_ANSWER:
            job_answer(d, i, e->code, e->text);
            break;
        case JM_FX_SAVE:
            daemon_save(d);
            break;
        case JM_FX_GC:
            daemon_gc(d);
            break;
        case JM_FX_HISTORY:
            daemon_history_own(d, j, e);
            break;
        }
    }
    free(fx);
}

/* ---- requests ---- */

static int find_job(struct daemon *d, const char *job)
{
    for (int i = 0; i < d->st.njobs; i++)
        if (!strcmp(d->st.jobs[i].job, job))
            return i;
    return -1;
}

static void handle_request(struct daemon *d, int ci, struct rpc_request *q)
{
    struct client *c = &d->cl[ci];
    char err[512];
    if (q->op == RPC_STATUS || q->op == RPC_WATCH) {
        c->watching = true;
        c->interval = q->op == RPC_WATCH ? q->interval_s : 0;
        c->remaining = q->op == RPC_STATUS ? 1 : (q->count > 0 ? q->count : -1);
        c->next_at = 0; /* first document now */
        return;
    }
    if (d->quit) {
        client_error(d, ci, AGENT_EXIT_BUSY, "the agent is shutting down");
        return;
    }
    if (q->op == RPC_LEASE_TAKEOVER) {
        /* `lease take` took over an expired lease (agent/lease.c); the journal is ours to write */
        log_warn("job '%s': %s", q->job, q->reason);
        int64_t r = events_append(&d->ev, q->job, "lease-takeover", "", q->reason);
        if (r < 0)
            log_error("cannot journal the lease takeover: %s", strerror((int)-r));
        client_reply(d, ci, json_pack("{s:b,s:s}", "ok", 1, "detail", "journalled"));
        return;
    }
    int i = find_job(d, q->job);
    struct jm_event ev = {.now = time_mono()};
    switch (q->op) {
    case RPC_ACTIVATE:
        /* checked before anything is stopped */
        if (!store_has_release(&d->store, q->release)) {
            client_error(d, ci, AGENT_EXIT_NO_RELEASE, "release %.12s is not in the store", q->release);
            return;
        }
        if (store_verify_release(&d->store, q->release, err, sizeof err) < 0) {
            client_error(d, ci, AGENT_EXIT_BUNDLE, "%s; nothing was stopped", err);
            return;
        }
        if (gang_check_exec(&d->store, &q->spec, err, sizeof err) < 0) {
            client_error(d, ci, AGENT_EXIT_EXEC, "%s", err);
            return;
        }
        if (i < 0) {
            struct job_rec *nj;
            int r = state_add_job(&d->st, q->job, &nj);
            if (r < 0) {
                client_error(d, ci, AGENT_EXIT_FAIL, "cannot add job '%s': %s", q->job,
                             r == -ENOSPC ? "too many jobs" : strerror(-r));
                return;
            }
            i = find_job(d, q->job);
            d->rt[i].waiter = -1;
        }
        ev.kind = JM_EV_ACTIVATE;
        ev.spec = &q->spec;
        ev.value = q->probation_s;
        break;
    case RPC_PROMOTE:
        ev.kind = JM_EV_PROMOTE;
        ev.release = q->release;
        ev.value = q->ktok_s;
        ev.spec_digest = q->spec_digest;
        break;
    case RPC_REVERT:
        /* the good release is checked before the current gang is stopped for it */
        if (i >= 0 && d->st.jobs[i].good[0] &&
            store_verify_release(&d->store, d->st.jobs[i].good, err, sizeof err) < 0) {
            client_error(d, ci, AGENT_EXIT_BUNDLE, "cannot revert to the good release: %s; nothing was stopped", err);
            return;
        }
        ev.kind = JM_EV_REVERT;
        ev.text = q->reason;
        ev.value = q->no_mark ? 1 : 0;
        ev.no_start = q->no_start;
        ev.rdzv = q->rdzv;
        break;
    case RPC_STOP:
        ev.kind = JM_EV_STOP;
        ev.value = q->restart_after_s; /* a switch's stop: its switch deadline */
        break;
    case RPC_START:
        ev.kind = JM_EV_START;
        ev.text = q->rdzv;
        break;
    default:
        client_error(d, ci, AGENT_EXIT_USAGE, "unsupported request");
        return;
    }
    if (i < 0) {
        client_error(d, ci, AGENT_EXIT_FAIL, AGENT_NO_JOB "%s' on this agent", q->job);
        return;
    }
    job_feed(d, i, &ev, ci);
}

static void client_readable(struct daemon *d, int ci)
{
    struct client *c = &d->cl[ci];
    if (c->watching || c->waiting || c->close_after) { /* only EOF is expected now */
        char b[256];
        ssize_t n = recv(c->fd, b, sizeof b, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            c->eof = true; /* half-closed after its request: answers still go out */
        return;
    }
    size_t room;
    char *at = linebuf_room(&c->lb, &room);
    ssize_t n = recv(c->fd, at, room, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0 && c->lb.len == 0) {
        client_close(d, ci);
        return;
    }
    if (n > 0)
        linebuf_added(&c->lb, (size_t)n);
    char *line = NULL;
    size_t len = 0;
    int r = linebuf_next(&c->lb, &line, &len);
    if (r == 0 && n > 0 && !c->lb.overlong)
        return; /* wait for the rest */
    if (r == 0 && !c->lb.overlong)
        r = linebuf_rest(&c->lb, &line, &len); /* the client closed after a line without newline */
    if (r < 0 || c->lb.overlong) {
        client_error(d, ci, AGENT_EXIT_USAGE, "request over %u bytes", RPC_MAX_BYTES);
        return;
    }
    struct rpc_request q;
    r = rpc_parse_request(line, len, &q);
    if (r < 0) {
        client_error(d, ci, AGENT_EXIT_USAGE, "bad request: %s", strerror(-r));
        return;
    }
    handle_request(d, ci, &q);
    rpc_request_done(&q);
}

static void daemon_accept(struct daemon *d)
{
    int fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return;
    int ci = -1;
    for (int i = 0; i < MAX_CLIENTS && ci < 0; i++)
        if (d->cl[i].fd < 0)
            ci = i;
    if (ci < 0) {
        /* Full: the connection that has been idle longest without a request makes room; a
         * flood of silent connections cannot lock operators out. */
        double oldest = 0;
        for (int i = 0; i < MAX_CLIENTS; i++) {
            struct client *c = &d->cl[i];
            if (!c->watching && !c->waiting && !c->close_after && c->lb.len == 0 &&
                (ci < 0 || c->opened_at < oldest)) {
                ci = i;
                oldest = c->opened_at;
            }
        }
        if (ci >= 0)
            client_error(d, ci, AGENT_EXIT_BUSY, "dropped: the control socket is full and this "
                         "connection sent no request");
        if (ci >= 0 && d->cl[ci].fd >= 0)
            client_close(d, ci);
    }
    if (ci < 0) {
        /* Every slot is busy for real: said at once.  The request is read (and discarded) first
         * and our side shut down before closing, so the peer reads this line instead of a
         * reset; the CLI exits 7 with these words instead of hanging or dying by SIGPIPE. */
        char busy[160];
        int n = snprintf(busy, sizeof busy,
                         "{\"code\":%d,\"error\":\"the agent's control socket is full (%d "
                         "connections busy): try again\",\"ok\":false}\n", AGENT_EXIT_BUSY, MAX_CLIENTS);
        (void)!send(fd, busy, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)shutdown(fd, SHUT_WR);
        char junk[4096];
        for (int k = 0; k < 16 && recv(fd, junk, sizeof junk, MSG_DONTWAIT) > 0; k++)
            ;
        close(fd);
        return;
    }
    d->cl[ci].fd = fd;
    d->cl[ci].opened_at = time_mono();
    d->cl[ci].in = malloc(RPC_MAX_BYTES + 1);
    if (!d->cl[ci].in)
        client_close(d, ci);
    else
        (void)linebuf_init(&d->cl[ci].lb, d->cl[ci].in, RPC_MAX_BYTES + 1, RPC_MAX_BYTES);
}

/* Drop connections that never sent a request, and queues that do not move. */
static void clients_expire(struct daemon *d, double now)
{
    for (int ci = 0; ci < MAX_CLIENTS; ci++) {
        struct client *c = &d->cl[ci];
        if (c->fd < 0)
            continue;
        if (client_has_output(c) && now - c->moved_at > CLIENT_STALL_S) {
            log_debug("client %d: output not read for %.0fs, dropped", ci, CLIENT_STALL_S);
            client_close(d, ci);
        } else if (!c->watching && !c->waiting && !c->close_after &&
                   now - c->opened_at > CLIENT_REQUEST_TIMEOUT_S) {
            client_error(d, ci, AGENT_EXIT_USAGE, "no request within %.0fs", CLIENT_REQUEST_TIMEOUT_S);
        }
    }
}

/* ---- children and ticks ---- */

static void daemon_reap(struct daemon *d)
{
    int ws;
    pid_t pid;
    /* holders of our gangs, and workers whose holder died first (we are their subreaper) */
    while ((pid = waitpid(-1, &ws, WNOHANG)) > 0)
        for (int i = 0; i < d->st.njobs; i++)
            if (gang_note_exit(&d->rt[i].gang, pid, ws) >= 0)
                break;
}

/* A rank exited on its own (found by gang_note_exit or gang_tick): tell the machine once. */
static void job_first_exit(struct daemon *d, int i, double now)
{
    struct gang *g = &d->rt[i].gang;
    if (g->first_exit < 0 || g->first_told)
        return;
    /* a peer's exit 8 may hide a rank here frozen (gang_settle_first_exit): wait for it, or
     * judge the gang hung on it (the machine journals and logs the `hung` event) */
    if (!gang_settle_first_exit(g, now))
        return;
    if (g->first_exit < 0 && g->hung >= 0) {
        struct jm_event ev = {.kind = JM_EV_HUNG, .now = now, .rank = g->ranks[g->hung].rank,
                              .text = g->hung_why};
        job_feed(d, i, &ev, -1);
        return;
    }
    g->first_told = true;
    const struct rank_proc *rp = &g->ranks[g->first_exit];
    log_info("job '%s' rank %d (pid %d) %s %d", d->st.jobs[i].job, rp->rank, (int)rp->pid,
             rp->exit_signal ? "killed by signal" : "exited with",
             rp->exit_signal ? rp->exit_signal : rp->exit_code);
    struct jm_event ev = {.kind = JM_EV_RANK_EXIT, .now = now, .rank = rp->rank,
                          .code = rp->exit_code, .sig = rp->exit_signal};
    job_feed(d, i, &ev, -1);
}

/* The gang of job i has no process left: is its GPU memory released too (agent/gpumem.h)?  Asks
 * NVML every 0.5 s for at most GPUMEM_DEADLINE_S; past that the next gang starts anyway and a
 * `gpu-memory-held` event names who holds what.  Without NVML only the cgroup is waited for. */
static bool job_gpu_released(struct daemon *d, int i, double now)
{
    static bool said_no_nvml;
    struct jobrt *rt = &d->rt[i];
    struct job_rec *j = &d->st.jobs[i];
    if (rt->m.quit)
        return true;
    if (!rt->gpu_waiting) {
        rt->gpu_waiting = true;
        rt->gpu_said = false;
        rt->gpu_since = now;
        rt->gpu_next = now;
    }
    if (now < rt->gpu_next)
        return false;
    /* the gang's GPUs: its --gpus entries, else the local ranks (as the status figures) */
    const struct job_spec *s = state_current_spec(j);
    unsigned int gpus[STATUS_MAX_RANKS];
    int n = 0, nproc = s ? s->nproc : rt->gang.nranks;
    for (int k = 0; k < nproc && n < STATUS_MAX_RANKS; k++) {
        char g[16];
        if (s && s->gpus[0]) {
            if (spec_gpu_at(s, k, g, sizeof g) == 0)
                gpus[n++] = (unsigned int)strtoul(g, NULL, 10);
        } else {
            gpus[n++] = (unsigned int)k;
        }
    }
    char why[600];
    double waited = now - rt->gpu_since;
    enum gpumem_verdict v = gpumem_decide(gpu_nvml(), gpus, n, pid_in_our_gangs, d, waited,
                                          GPUMEM_DEADLINE_S, why, sizeof why);
    switch (v) {
    case GPUMEM_HELD:
        if (!rt->gpu_said)
            log_info("job '%s': the gang's processes are gone; waiting up to %.0f s for its GPU "
                     "memory: %s", j->job, GPUMEM_DEADLINE_S, why);
        rt->gpu_said = true;
        rt->gpu_next = now + 0.5;
        return false;
    case GPUMEM_TIMEOUT:
        daemon_event(d, j, "gpu-memory-held", j->current, "%.0f s after the gang's processes were gone: "
                     "%s; the next gang starts anyway", waited, why);
        break;
    case GPUMEM_FREE:
        if (rt->gpu_said)
            log_info("job '%s': GPU memory released after %.1f s", j->job, waited);
        if (why[0])
            log_warn("job '%s': %s", j->job, why);
        break;
    case GPUMEM_NO_NVML:
        if (!said_no_nvml)
            log_info("gpu: no NVML (libnvidia-ml.so.1 with a process listing): a gang counts as gone "
                     "once its process group and cgroup are empty; its GPU memory is not waited for");
        said_no_nvml = true;
        break;
    }
    rt->gpu_waiting = false;
    return true;
}

/* The gang of job i is gone: what ended it, for the machine. */
static void job_gang_gone(struct daemon *d, int i, double now)
{
    struct gang *g = &d->rt[i].gang;
    struct jm_event ev = {.kind = JM_EV_GANG_GONE, .now = now, .rank = -1, .text = "",
                          .sigkilled = g->killed, .grace_s = g->grace_s};
    int fe = g->first_exit >= 0 ? g->first_exit : g->diverged >= 0 ? g->diverged : g->hung;
    if (fe >= 0) {
        const struct rank_proc *rp = &g->ranks[fe];
        ev.rank = rp->rank;
        ev.code = rp->exit_code;
        ev.sig = rp->exit_signal;
        if (g->first_exit < 0) { /* we stopped it: non-finite loss or a liveness deadline */
            ev.code = g->diverged >= 0 ? JM_EXIT_DIVERGED : JM_EXIT_HUNG;
            ev.sig = 0;
        }
        if (rp->has_hb)
            ev.text = rp->hb.error;
        if (g->first_exit < 0 && g->diverged < 0) {
            ev.text = g->hung_why;
            ev.hang_limit_s = g->hung_limit_s;
        }
    }
    job_feed(d, i, &ev, -1);
}

static void daemon_tick(struct daemon *d)
{
    double now = time_mono();
    for (int i = 0; i < d->st.njobs; i++) {
        struct gang *g = &d->rt[i].gang;
        if (g->pgid > 0) {
            gang_tick(g, now);
            job_first_exit(d, i, now);
            if (gang_is_gone(g)) {
                if (!job_gpu_released(d, i, now))
                    continue; /* no process left; its GPU memory not yet released */
                for (int k = 0; k < g->nranks; k++) /* whatever the last ranks wrote */
                    (void)gang_read_heartbeats(g, k, now);
                job_gang_gone(d, i, now);
                continue;
            }
            if (g->diverged >= 0 && !g->stopping && g->first_exit < 0) {
                struct jm_event ev = {.kind = JM_EV_DIVERGED, .now = now, .rank = g->ranks[g->diverged].rank};
                job_feed(d, i, &ev, -1);
                continue;
            }
            if (gang_judge_liveness(g, now)) { /* always, not only in probation */
                struct jm_event ev = {.kind = JM_EV_HUNG, .now = now, .rank = g->ranks[g->hung].rank,
                                      .text = g->hung_why};
                job_feed(d, i, &ev, -1);
                continue;
            }
            if (d->st.jobs[i].state == GANG_STARTING && gang_all_training(g)) {
                struct jm_event ev = {.kind = JM_EV_TRAINING, .now = now};
                job_feed(d, i, &ev, -1);
            }
        }
        struct jm_event ev = {.kind = JM_EV_TICK, .now = now};
        job_feed(d, i, &ev, -1);
    }
    char *doc = NULL;
    for (int ci = 0; ci < MAX_CLIENTS; ci++) {
        struct client *c = &d->cl[ci];
        if (c->fd < 0 || !c->watching || now < c->next_at)
            continue;
        if (client_has_output(c)) {
            /* the previous document is still unread: skip this one rather than queue more */
            c->next_at = now + c->interval;
            continue;
        }
        if (!doc && !(doc = daemon_status_text(d)))
            break;
        if (c->remaining > 0 && --c->remaining == 0)
            c->close_after = true;
        if (client_send(d, ci, doc) < 0)
            continue;
        c->next_at = now + c->interval;
    }
    free(doc);
    clients_expire(d, now);
    if (d->watchdog_s > 0 && now >= d->watchdog_next) {
        (void)notify_send("WATCHDOG=1");
        d->watchdog_next = now + d->watchdog_s;
    }
}

/* ---- start-up ---- */


static uint64_t proc_starttime(pid_t pid)
{
    struct proc_stat ps;
    return proc_stat_read(pid, &ps) == 0 ? ps.start : 0;
}

/* The gang of job j an earlier agent left: re-adopt it (its holders kept heartbeats and exit
 * statuses), so nothing is relaunched and no step is lost.  Returns true when adopted.  A gang
 * without holders (started by an agent before holders existed: its heartbeat pipes died with
 * that agent) is stopped cleanly instead and relaunched by daemon_resume_jobs. */
static bool daemon_adopt_gang(struct daemon *d, int i)
{
    struct job_rec *j = &d->st.jobs[i];
    pid_t pg = (pid_t)j->gang_pgid;
    if (pg <= 0)
        return false;
    uint64_t st = proc_starttime(pg);
    bool alive = kill(-pg, 0) == 0;
    bool same = j->gang_starttime == 0 || st == 0 || st == j->gang_starttime;
    struct job_spec *s = current_spec(j);
    bool has_holders = j->npids > 0 && j->holders[0] > 0;
    if (s && has_holders && (!alive || same) &&
        gang_adopt(&d->rt[i].gang, &d->store, j->job, s, j->generation, pg, j->holders, j->pids,
                   j->npids) == 0) {
        log_notice("job '%s': re-adopted gang %d (pgid %d, %d %s)", j->job, j->generation, (int)pg,
                   j->npids, text_plural(j->npids, "rank", "ranks"));
        return true;
    }
    if (alive && same) {
        double grace = s ? s->grace_s : 30;
        log_notice("job '%s': stopping the gang left by the previous agent (pgid %d)", j->job, (int)pg);
        (void)kill(-pg, SIGTERM);
        double until = time_mono() + grace;
        while (kill(-pg, 0) == 0 && time_mono() < until) {
            (void)waitpid(-1, NULL, WNOHANG);
            usleep(50000);
        }
        if (kill(-pg, 0) == 0) {
            (void)kill(-pg, SIGKILL);
            for (int k = 0; k < 100 && kill(-pg, 0) == 0; k++) {
                (void)waitpid(-1, NULL, WNOHANG);
                usleep(20000);
            }
        }
        daemon_event(d, j, "orphans-stopped", j->current, "gang of pgid %d from the previous agent stopped", (int)pg);
    }
    j->gang_pgid = 0;
    j->gang_starttime = 0;
    j->npids = 0;
    return false;
}

/* Every job's gang is adopted before any job is fed its event: feeding one saves the state, and
 * daemon_save writes each job's gang_pgid, pids and holders from its runtime gang, so a job not
 * yet adopted would lose its record there and its running gang be left behind, orphaned, while
 * a second one was launched. */
static void daemon_resume_jobs(struct daemon *d)
{
    double now = time_mono();
    char boot[40] = "";
    bool adopted[STATUS_MAX_JOBS] = {false}, rebooted[STATUS_MAX_JOBS] = {false};
    (void)boot_id(boot, sizeof boot);
    uint64_t init = proc_starttime(1);
    for (int i = 0; i < d->st.njobs; i++) {
        struct job_rec *j = &d->st.jobs[i];
        /* the probation deadline: as saved within this boot, else the time left at the save */
        if (j->probation_deadline > 0 || j->probation_left_s > 0) {
            if (!boot[0] || strcmp(boot, j->boot_id) != 0 || j->probation_deadline <= 0)
                j->probation_deadline = now + j->probation_left_s;
        }
        /* the switch deadline the same way (a controller that died between a switch's phases) */
        if (j->switch_deadline > 0 || j->switch_left_s > 0) {
            if (!boot[0] || strcmp(boot, j->boot_id) != 0 || j->switch_deadline <= 0)
                j->switch_deadline = now + j->switch_left_s;
        }
        rebooted[i] = state_job_saved_in_other_boot(j, boot, init);
        if (rebooted[i] && j->gang_pgid > 0) {
            /* no process of that boot is left: its pgid and pids are another boot's (adopting them
             * read the gang as SIGKILLed, or signalled a stranger's process group) */
            log_notice("job '%s': the container restarted since the last agent saved its state (another "
                       "boot, or another start of its init): gang %d ended with it", j->job, j->generation);
            j->gang_pgid = 0;
            j->gang_starttime = 0;
            j->npids = 0;
        }
        adopted[i] = daemon_adopt_gang(d, i);
    }
    for (int i = 0; i < d->st.njobs; i++) {
        struct job_rec *j = &d->st.jobs[i];
        char pids[128] = "";
        for (int k = 0, len = 0; adopted[i] && k < j->npids && len < (int)sizeof pids - 16; k++)
            len += snprintf(pids + len, sizeof pids - (size_t)len, "%spid %lld", k ? ", " : "",
                            (long long)j->pids[k]);
        struct jm_event ev = {.kind = adopted[i] ? JM_EV_ADOPT : JM_EV_AGENT_START, .now = now, .text = pids,
                              .rebooted = rebooted[i]};
        job_feed(d, i, &ev, -1);
    }
    daemon_save(d);
}

static int daemon_listen(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (str_copy(sa.sun_path, sizeof sa.sun_path, path) < 0)
        return -ENAMETOOLONG;
    char dir[sizeof sa.sun_path];
    (void)str_copy(dir, sizeof dir, path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        int r = fs_mkdir_p(dir, 0755);
        if (r < 0)
            return r;
    }
    /* Bound and listening under a temporary name, then renamed over the path: a client (the
     * controller right after `drover install`, a test waiting for the file) that finds the path
     * finds a socket that accepts.  Bound at the path itself, it was there before listen(), and a
     * connect in between was refused: "no daemon listening" from a daemon that was starting.  A
     * path too long for the suffix is bound in place, as before. */
    struct sockaddr_un tmp = {.sun_family = AF_UNIX};
    bool renamed = snprintf(tmp.sun_path, sizeof tmp.sun_path, "%s.%ld", path, (long)getpid()) <
                   (int)sizeof tmp.sun_path;
    const char *at = renamed ? tmp.sun_path : path;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    (void)unlink(at); /* we hold the pidfile lock: a socket file left here is stale */
    mode_t old = umask(0177);
    int r = bind(fd, (struct sockaddr *)(renamed ? &tmp : &sa), sizeof sa);
    umask(old);
    if (r < 0 || chmod(at, 0600) < 0 || listen(fd, 16) < 0 || (renamed && rename(at, path) < 0)) {
        r = -errno;
        close(fd);
        if (renamed)
            (void)unlink(at);
        return r;
    }
    return fd;
}

static int pidfile_lock(const char *path, int *ret_fd)
{
    char dir[PATH_MAX];
    (void)str_copy(dir, sizeof dir, path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        (void)fs_mkdir_p(dir, 0755);
    }
    /* O_NOFOLLOW|O_NONBLOCK: a symlink or FIFO planted at the pidfile's name is refused, and
     * cannot block the start */
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    struct stat pst;
    if (fstat(fd, &pst) < 0 || !S_ISREG(pst.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int r = errno == EWOULDBLOCK ? -EBUSY : -errno;
        close(fd);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

static void pidfile_write(int fd)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) == 0)
        (void)pwrite(fd, buf, (size_t)n, 0);
}

/* Shutdown (SIGTERM: systemctl restart, an upgrade): the gangs keep running; their holders keep
 * heartbeats and exit statuses until the next agent re-adopts them (daemon_adopt_gangs). */
static void daemon_stop_all(struct daemon *d)
{
    for (int i = 0; i < d->st.njobs; i++) {
        struct jm_event ev = {.kind = JM_EV_SHUTDOWN, .now = time_mono()};
        job_feed(d, i, &ev, -1);
        if (d->rt[i].waiter >= 0)
            job_answer(d, i, AGENT_EXIT_BUSY, "the agent is shutting down");
    }
}

static void daemon_loop(struct daemon *d)
{
    struct pollfd pfd[2 + MAX_CLIENTS + STATUS_MAX_JOBS * STATUS_MAX_RANKS];
    int who[ARRAY_SIZE(pfd)]; /* >= 0 client index; < 0: -(1 + job*RANKS + rank) */
    while (!d->quit) {
        int n = 0;
        pfd[n++] = (struct pollfd){.fd = d->listen_fd, .events = POLLIN};
        pfd[n++] = (struct pollfd){.fd = d->sig_fd, .events = POLLIN};
        for (int ci = 0; ci < MAX_CLIENTS; ci++) {
            struct client *c = &d->cl[ci];
            short ev = (short)((c->eof ? 0 : POLLIN) | (client_has_output(c) ? POLLOUT : 0));
            if (c->fd >= 0 && ev) {
                who[n] = ci;
                pfd[n++] = (struct pollfd){.fd = c->fd, .events = ev};
            }
        }
        for (int i = 0; i < d->st.njobs; i++)
            for (int k = 0; k < d->rt[i].gang.nranks; k++)
                if (d->rt[i].gang.ranks[k].hb_fd >= 0) {
                    who[n] = -(1 + i * STATUS_MAX_RANKS + k);
                    pfd[n++] = (struct pollfd){.fd = d->rt[i].gang.ranks[k].hb_fd, .events = POLLIN};
                }
        int r = poll(pfd, (nfds_t)n, TICK_MS);
        if (r < 0 && errno != EINTR) {
            log_error("poll: %s", strerror(errno));
            break;
        }
        if (r > 0 && (pfd[1].revents & POLLIN)) {
            struct signalfd_siginfo si;
            while (read(d->sig_fd, &si, sizeof si) == (ssize_t)sizeof si) {
                if ((si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) && !d->quit) {
                    log_notice("signal %d: exiting; the gangs keep running and the next agent "
                               "re-adopts them", (int)si.ssi_signo);
                    d->quit = true;
                    daemon_stop_all(d);
                }
            }
            daemon_reap(d);
        }
        double now = time_mono();
        for (int p = 2; r > 0 && p < n; p++) {
            if (!pfd[p].revents)
                continue;
            if (who[p] >= 0) {
                if (d->cl[who[p]].fd == pfd[p].fd && (pfd[p].revents & POLLOUT))
                    (void)client_flush(d, who[p]);
                if (d->cl[who[p]].fd == pfd[p].fd && (pfd[p].revents & ~POLLOUT))
                    client_readable(d, who[p]);
            } else {
                int x = -who[p] - 1, i = x / STATUS_MAX_RANKS, k = x % STATUS_MAX_RANKS;
                if (d->rt[i].gang.ranks[k].hb_fd == pfd[p].fd)
                    (void)gang_read_heartbeats(&d->rt[i].gang, k, now);
            }
        }
        if (r > 0 && (pfd[0].revents & POLLIN))
            daemon_accept(d);
        daemon_reap(d); /* a SIGCHLD may have raced the signalfd read */
        daemon_tick(d);
    }
}

/* Fork into the background.  stdin/stdout go to /dev/null and stderr (the log, with no journal
 * under a container's plain init) to ROOT/agent.log: a detached daemon must not hold the caller's
 * descriptors, or the `pct exec` / SSH channel that started it never sees end-of-file. */
static int daemon_detach(const char *root, int *ret_ready_fd)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid > 0) { /* the caller: wait until the daemon says it listens */
        close(p[1]);
        char c = 0;
        ssize_t n;
        while ((n = read(p[0], &c, 1)) < 0 && errno == EINTR)
            ;
        _exit(n == 1 && c == 'R' ? AGENT_EXIT_OK : (n == 1 ? c - '0' : AGENT_EXIT_FAIL));
    }
    close(p[0]);
    if (setsid() < 0)
        return -errno;
    pid = fork();
    if (pid < 0)
        return -errno;
    if (pid > 0)
        _exit(0);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        close(null);
    }
    char logp[PATH_MAX];
    int logfd = -1;
    if (fs_mkdir_p(root, 0755) == 0 && snprintf(logp, sizeof logp, "%s/agent.log", root) < (int)sizeof logp)
        logfd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0640);
    if (logfd >= 0) {
        dup2(logfd, 2);
        close(logfd);
    }
    if (chdir("/") < 0)
        return -errno;
    *ret_ready_fd = p[1];
    return 0;
}

static void ready_say(int fd, char c)
{
    if (fd >= 0) {
        (void)!write(fd, &c, 1);
        close(fd);
    }
}

int daemon_run(const struct daemon_opts *o)
{
    static struct daemon dd;
    struct daemon *d = &dd;
    memset(d, 0, sizeof *d);
    d->o = o;
    gang_set_cgroup_mode(o->cgroup);
    d->listen_fd = d->sig_fd = -1;
    for (int i = 0; i < MAX_CLIENTS; i++)
        d->cl[i].fd = -1;
    for (int i = 0; i < STATUS_MAX_JOBS; i++) {
        gang_init(&d->rt[i].gang);
        jm_rt_init(&d->rt[i].m);
        d->rt[i].waiter = -1;
    }
    int pid_fd = -1, ready_fd = -1, r;
    if ((r = pidfile_lock(o->pidfile, &pid_fd)) < 0) {
        if (r == -EBUSY) {
            log_error("another drover-agent daemon holds '%s'", o->pidfile);
            return AGENT_EXIT_BUSY;
        }
        log_error("cannot open pidfile '%s': %s", o->pidfile, strerror(-r));
        return AGENT_EXIT_FAIL;
    }
    if (o->detach && (r = daemon_detach(o->root, &ready_fd)) < 0) {
        log_error("cannot detach: %s", strerror(-r));
        return AGENT_EXIT_FAIL;
    }
    pidfile_write(pid_fd);
    int code = AGENT_EXIT_FAIL;
    if ((r = store_open(&d->store, o->root)) < 0) {
        log_error("cannot open the store at '%s': %s", o->root, strerror(-r));
        goto out;
    }
    (void)store_path(&d->store, d->state_path, sizeof d->state_path, "state.json");
    if ((r = state_load(d->state_path, &d->st)) < 0) {
        log_error("cannot load '%s': %s", d->state_path, strerror(-r));
        goto out;
    }
    char evp[PATH_MAX];
    (void)store_path(&d->store, evp, sizeof evp, "events.jsonl");
    if ((r = events_open(evp, &d->ev)) < 0) {
        log_error("cannot open '%s': %s", evp, strerror(-r));
        goto out;
    }
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    d->sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (d->sig_fd < 0) {
        log_error("signalfd: %s", strerror(errno));
        goto out;
    }
    /* grandchildren of workers come back to us, so the process group can be fully reaped */
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1);
    d->started_mono = time_mono();
    if ((d->listen_fd = daemon_listen(o->socket)) < 0) {
        log_error("cannot listen on '%s': %s", o->socket, strerror(-d->listen_fd));
        goto out;
    }
    daemon_event(d, NULL, "agent-start", "", "pid %ld version %s", (long)getpid(), DROVER_VERSION);
    daemon_resume_jobs(d);
    d->watchdog_s = notify_watchdog_interval();
    (void)notify_send("READY=1\nSTATUS=supervising");
    ready_say(ready_fd, 'R');
    ready_fd = -1;
    log_info("drover-agent %s listening on '%s', store '%s'", DROVER_VERSION, o->socket, o->root);
    daemon_loop(d);
    (void)notify_send("STOPPING=1");
    daemon_save(d);
    code = AGENT_EXIT_OK;
out:
    ready_say(ready_fd, (char)('0' + code));
    for (int ci = 0; ci < MAX_CLIENTS; ci++)
        if (d->cl[ci].fd >= 0)
            client_close(d, ci);
    if (d->listen_fd >= 0) {
        close(d->listen_fd);
        (void)unlink(o->socket);
    }
    for (int i = 0; i < STATUS_MAX_JOBS; i++) {
        for (int k = 0; k < STATUS_MAX_RANKS; k++) { /* workers keep running; drop our ends */
            if (d->rt[i].gang.ranks[k].hb_fd >= 0)
                close(d->rt[i].gang.ranks[k].hb_fd);
            if (d->rt[i].gang.ranks[k].log_fd >= 0)
                close(d->rt[i].gang.ranks[k].log_fd);
        }
        jm_rt_done(&d->rt[i].m);
    }
    if (d->sig_fd >= 0)
        close(d->sig_fd);
    events_close(&d->ev);
    state_done(&d->st);
    if (pid_fd >= 0) {
        (void)unlink(o->pidfile);
        close(pid_fd);
    }
    return code;
}
