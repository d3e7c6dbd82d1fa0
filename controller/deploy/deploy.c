/* controller/deploy/deploy.c: the deploy path of DESIGN.md for one job (a gang switches together):
 * bundle -> stage (one upload per host, content-addressed) -> push + agent verify per container
 * -> preflight -> activate every node -> probation over the live status streams -> promote, or
 * revert to the last good release and confirm it recovers.  Invariant: nothing is stopped or
 * switched until every container holds the verified release (and preflight passed); a failure
 * before that point leaves the running release untouched.
 *
 * A switch is two-phase (switch_cts): the old gang is stopped in every container of the job at
 * once, and the new release starts nowhere until every agent has answered that its old gang is
 * gone (process group and cgroup empty).  A container whose old gang is not gone within the
 * job's switch_deadline aborts the switch: nothing new starts, and the old release is started
 * again wherever it was stopped (never a gang stopped without a replacement).  Every switch gets
 * its own rendezvous generation (agent --rdzv), so no rank of another switch can join the gang.
 */
#include "controller/deploy/deploy.h"
#include "controller/notify.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/agentcli.h"
#include "common/bundle.h"
#include "common/log.h"
#include "common/nvdriver.h"
#include "common/samples.h"
#include "common/sha256.h"
#include "common/util.h"
#include "controller/transport/fanout.h"
#include "controller/transport/pct.h"
#include "controller/deploy/jobspec.h"
#include "common/text.h"
#include "controller/deploy/holder.h"
#include "controller/deploy/probation.h"
#include "controller/cmd.h"
#include "controller/deploy/objsync.h"
#include "controller/transport/send.h"
#include "controller/deploy/state.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

struct deploy {
    struct fleet *f;
    const struct inventory *inv;
    const struct inv_job *job;
    char id[RELEASE_ID_LEN + 1];
    char sid[RELEASE_SHORT_LEN + 1];
    char name[MANIFEST_NAME_MAX];
    char blob[1024];           /* local bundle path */
    char blob_sha[SHA256_HEX_LEN + 1];
    uint64_t blob_size;
    char good[RELEASE_ID_LEN + 1];    /* last good release (from ct 0's agent) */
    char current[RELEASE_ID_LEN + 1]; /* what the job runs now (first container that says) */
    char previous[RELEASE_ID_LEN + 1];
    char key[1024];                   /* baseline key */
    double baseline;                  /* -1 none */
    bool rollback;                    /* an operator's rollback, not a failed deploy */
    char earlier_good[RELEASE_ID_LEN + 1]; /* newest promoted release before good, bad nowhere */
    int nbad;                         /* releases some container marks bad (failed probation) */
    char bad[16][RELEASE_ID_LEN + 1];
    bool leased[INV_MAX_CTS];         /* we hold the job's deploy lease in that container */
    bool lease_status_known[INV_MAX_CTS]; /* its agent took the lease with --status: it knows
                                         release install --lease-release too */
    double lease_renew_at;            /* monotonic: the next renewal while watching */
    double lease_taken_at;            /* monotonic: the last take or renewal that held everywhere */
    bool lease_lost;                  /* a renewal was refused: another operator holds the lease */
    bool switching;                   /* the switch began: things were changed */
    char lease_lost_why[600];         /* "h1:101: job 'J' is being deployed by B (...)" */
    char holder[HOLDER_MAX];          /* who we are, for the leases: user@host/pid-N/boot-B/start-S */
    int ngoods;                       /* promoted releases, newest first (first container's) */
    char goods[STATUS_MAX_MARKS][RELEASE_ID_LEN + 1];
    bool analysis;                    /* deploy --analysis-only: the good release goes back anyway */
    bool no_confirm;                  /* rollback --now: do not watch the release gone back to */
    bool stopped_by_operator;         /* Ctrl-C/SIGTERM during probation: no verdict was reached */
    /* containers found stopped under the gang (`pct exec` there says "not running") during a
     * probation, a recovery or a switch's stop, with pct's words; "" where not */
    char ct_stopped[INV_MAX_CTS][200];
    bool no_bad_mark;                 /* revert_all: the release reached no failing verdict (Ctrl-C,
                                         an analysis that passed): the agents do not mark it bad */
    struct sample_set *base;          /* the baseline's samples; NULL when none are known */
    struct agent_status *st;          /* scratch, large */
    struct relsrc rs, env;            /* the release and its environment (manifests v2) */
    bool has_rs, has_env;
    const char *labels[INV_MAX_CTS];
    bool attention[INV_MAX_CTS];      /* survey: the agent marked the job's environment faulty */
    bool has_gang[INV_MAX_CTS];       /* survey: the job has (or is about to restart) a gang there */
    bool agent_failed;                /* survey: some container was reached, its agent failed */
    char from[INV_MAX_CTS][RELEASE_ID_LEN + 1]; /* survey: the job's current release there */
    char attention_reason[INV_MAX_CTS][256];
    /* survey: how the inventory's job spec differs from the one the job runs (jobspec.h), as
     * the first container that differs says ("" everywhere the same); spec_only: the release
     * is current and good everywhere and only the spec differs; off_good_spec: some container
     * runs its good release with another spec than the good one (a spec change on probation,
     * held, or left running by auto_revert = false) */
    char spec_change[400];
    bool spec_only;
    bool off_good_spec;
    char spec_note[460];              /* deploy: "job spec changed: ..." for its output and history */
    bool spec_unaware[INV_MAX_CTS];   /* activate: that agent refused --spec-digest (older) */
    /* The job's part of each container's status document as it came with the lease (`lease take
     * --status`), for the survey that follows: pre[i] 1 found (pre_js[i]), 2 the agent does not
     * know the job, 0 none came (an older agent, a daemon that did not answer): survey asks. */
    struct job_status *pre_js;        /* [ncts] */
    signed char pre[INV_MAX_CTS];
};

/* Per-container work spread over the job's hosts ([drover] parallel, transport/fanout.h): one
 * worker per host calls fn for that host's containers one after another (one SSH session per
 * host; pct holds a per-container lock), so N hosts cost about one host's time.  fn(cf, i) may
 * touch only container i's entries and its host's connection, and logs nothing: rc[i] (1: not
 * run) and err[i] are read afterwards, in container order, by the caller's thread. */
struct ct_fan {
    struct deploy *d;
    int (*fn)(struct ct_fan *cf, int i);
    const void *arg;           /* fn's input, read-only */
    bool skip[INV_MAX_CTS];    /* in: leave container i out (rc stays 1) */
    bool host_stops;           /* in: a failure skips the rest of its host's containers */
    int hosts[INV_MAX_HOSTS], nhosts;
    int rc[INV_MAX_CTS];
    char err[INV_MAX_CTS][2048];
    struct agent_status *scratch[INV_MAX_HOSTS]; /* per worker, for fn's status documents */
    /* Batch mode (batch_args set): the same agent command in every container of a host at once,
     * through one host exec (objsync_fan_agents), instead of one `pct exec` after another: a
     * host costs one round trip whatever its number of containers.  done(cf, i, r, res, why)
     * reads container i's answer as fn would have (res: its exit status and output), or, with
     * res NULL, the failure of its host's exec: r < 0 and why the connection's reason, or why
     * NULL when the host is unreachable (r from fleet_conn).  A host whose answer cannot be
     * read as a whole (-EBADMSG: a document past the exec's output limit) or whose command
     * line is too long falls back to fn, one container after another.  host_stops is not
     * supported here. */
    const char *const *batch_args;
    double batch_timeout_s;
    const char *batch_what; /* for the debug log: "lease", "status", ... */
    int (*done)(struct ct_fan *cf, int i, int r, struct exec_result *res, const char *why);
};

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
    log_debug("deploy %s: %s in %d container(s) at once: %.2fs", cf->d->inv->hosts[host].name, cf->batch_what,
              n, time_mono() - t0);
    if (r == -EBADMSG || r == -E2BIG) {
        ct_fan_host_one_by_one(cf, host);
        return;
    }
    for (int k = 0; k < n; k++) {
        if (r < 0) {
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
static int ct_fan_run(struct ct_fan *cf)
{
    const struct inv_job *j = cf->d->job;
    bool seen[INV_MAX_HOSTS] = { false };
    cf->nhosts = 0;
    for (int i = 0; i < j->ncts; i++) {
        cf->rc[i] = 1;
        cf->err[i][0] = '\0';
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
static int ct_fan_slot(const struct ct_fan *cf, int i)
{
    for (int k = 0; k < cf->nhosts; k++)
        if (cf->hosts[k] == cf->d->job->cts[i].host)
            return k;
    return 0;
}

const struct inv_job *deploy_pick_job(const struct inventory *inv, const char *name)
{
    if (name) {
        const struct inv_job *j = inventory_find_job(inv, name);
        char why[512];
        if (!j)
            log_error("%s", inventory_no_job(inv, name, why, sizeof why));
        return j;
    }
    if (inv->njobs == 1)
        return &inv->jobs[0];
    if (inv->njobs == 0) {
        log_error("'%s' has no job: add a [job NAME] section with its containers and command "
                  "(docs/config.md)", inv->path);
        return NULL;
    }
    char names[256] = "";
    size_t off = 0;
    for (int k = 0; k < inv->njobs && off < sizeof names; k++)
        off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", k ? ", " : "", inv->jobs[k].name);
    log_error("'%s' has %d jobs (%s): say which with --job NAME", inv->path, inv->njobs, names);
    return NULL;
}

/* history_record's fan-out: `history add` in container i. */
static int history_one(struct ct_fan *cf, int i);

static void history_record(struct deploy *d, const char *result, const char *reason, double ktok)
{
    struct history_entry e = { .time = time_wall(), .ktok_s = ktok, .baseline_ktok_s = d->baseline };
    (void)str_copy(e.job, sizeof e.job, d->job->name);
    (void)str_copy(e.release, sizeof e.release, d->id);
    (void)str_copy(e.name, sizeof e.name, d->name);
    (void)str_copy(e.result, sizeof e.result, result);
    (void)str_copy(e.previous, sizeof e.previous, d->good);
    if (d->spec_note[0])
        snprintf(e.reason, sizeof e.reason, "%s; %s", d->spec_note, reason ? reason : "");
    else
        (void)str_copy(e.reason, sizeof e.reason, reason ? reason : "");
    size_t off = 0;
    for (int i = 0; i < d->job->ncts && off < sizeof e.containers; i++)
        off += (size_t)snprintf(e.containers + off, sizeof e.containers - off, "%s%s", i ? " " : "",
                                d->job->cts[i].label);
    int r = state_history_append(d->inv->state_dir, &e);
    if (r < 0)
        log_warn("cannot append to the history in '%s': %s", d->inv->state_dir, strerror(-r));
    /* ... and in every container of the job: the fleet keeps the history, so another operator's
     * `drover history` shows this record too (agent/history.h) */
    char *line = NULL;
    struct ct_fan *cf = calloc(1, sizeof *cf);
    if (cf && state_history_format(&e, &line) == 0) {
        struct agent_argv a;
        agent_argv_init(&a);
        agent_argv_history_add(&a, d->job->name, line);
        cf->d = d;
        cf->fn = history_one;
        cf->arg = a.argv;
        int missed = ct_fan_run(cf); /* every host at once */
        const char *first = "unreachable";
        for (int i = 0; i < d->job->ncts && missed; i++)
            if (cf->rc[i] < 0 && cf->err[i][0]) {
                first = cf->err[i];
                break;
            }
        if (missed)
            log_warn("history record kept by %d of %d containers (%s); `drover history` elsewhere "
                     "may lack it", d->job->ncts - missed, d->job->ncts, first);
        free(line);
    }
    free(cf);
    notify_history(d->inv, &e); /* detached: returns at once, never changes the verdict */
}

/* Run the agent in ct with args; 0 when it exited 0, else -EIO with "label: reason" in err and
 * (ret_status not NULL) its exit status in *ret_status, or another -errno (not run, no status). */
static int agent_call_status(struct deploy *d, const struct inv_ct *ct, const char *const *args,
                             double timeout_s, int *ret_status, char *err, size_t err_sz)
{
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
        char reason[600];
        bool two = strcmp(args[0], "release") == 0 && args[1];
        snprintf(err, err_sz, "%s: drover-agent %s%s%s failed (exit %d): %s", ct->label, args[0],
                 two ? " " : "", two ? args[1] : "", res.status,
                 exec_result_reason(&res, reason, sizeof reason));
        if (ret_status)
            *ret_status = res.status;
        r = -EIO;
    }
    exec_result_done(&res);
    return r;
}

static int agent_call(struct deploy *d, const struct inv_ct *ct, const char *const *args,
                      double timeout_s, char *err, size_t err_sz)
{
    return agent_call_status(d, ct, args, timeout_s, NULL, err, err_sz);
}

static int history_one(struct ct_fan *cf, int i)
{
    const struct inv_ct *ct = &cf->d->job->cts[i];
    struct conn *c;
    struct exec_result res;
    if (fleet_conn(cf->d->f, ct->host, &c) < 0)
        return -ENOTCONN;
    /* short: a record must not hold up a verdict on a host that stopped answering */
    if (pct_run_agent(c, ct, cf->arg, 15, &res) < 0) {
        snprintf(cf->err[i], sizeof cf->err[i], "%s: %s", ct->label, c->err);
        return -EIO;
    }
    int r = 0;
    if (res.status != 0) {
        char why[600];
        snprintf(cf->err[i], sizeof cf->err[i], "%s: %s", ct->label, exec_result_reason(&res, why, sizeof why));
        r = -EIO;
    }
    exec_result_done(&res);
    return r;
}

static void on_sigint_send(int sig)
{
    (void)sig;
    interrupted = 1;
    send_interrupted = 1;
    exec_interrupted = 1;
}

/* Ctrl-C (SIGINT, SIGTERM) in deploy and rollback, installed with the handler of the phase
 * (NULL: the originals back):
 * - on_sigint_send, between the lease and the switch: the remote command in flight (survey,
 *   verification, GPU check, preflight) is abandoned at once, and the caller gives the lease back
 *   and records the deploy aborted.  It used to kill drover there, leaving the job's deploy
 *   lease held for lease_ttl (5 min): the operator's next deploy was refused as "another
 *   operator", naming this dead drover as the holder.
 * - on_sigint, from the switch on: only noted (interrupted), so the switch completes and nothing
 *   is left without a gang; the probation or the recovery watch then stops deciding (deploy_run:
 *   INTERRUPTED and a revert; confirm_recovery: not confirmed).
 * Installing resets `interrupted`. */
static void interrupt_handlers(void (*fn)(int))
{
    static struct sigaction old_int, old_term;
    static bool installed;
    if (fn) {
        struct sigaction sa = { .sa_handler = fn };
        sigemptyset(&sa.sa_mask);
        interrupted = 0;
        sigaction(SIGINT, &sa, installed ? NULL : &old_int);
        sigaction(SIGTERM, &sa, installed ? NULL : &old_term);
        installed = true;
    } else if (installed) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        installed = false;
    }
}

/* Walk and hash DIR (and the environment first, when there is one) into v2 manifests; the
 * manifest is kept in state_dir/manifests/<id> (the controller's cache). */
static int stage_bundle(struct deploy *d, const char *dir, const char *env_dir)
{
    const struct inventory *inv = d->inv;
    int r = state_init(inv->state_dir);
    if (r < 0) {
        log_error("cannot create state directory '%s': %s", inv->state_dir, strerror(-r));
        return r;
    }
    char mdir[1100];
    snprintf(mdir, sizeof mdir, "%s/manifests", inv->state_dir);
    (void)fs_mkdir_p(mdir, 0700);
    if (env_dir) {
        if ((r = relsrc_load(env_dir, NULL, &d->env)) < 0) {
            release_read_error("environment", env_dir, r);
            return r;
        }
        d->has_env = true;
        fprintf(stderr, "environment %.12s (%s): %zu files, %.2f MiB\n", d->env.id, d->env.m->name,
                d->env.m->nfiles, (double)d->env.m->file_bytes / 1048576.0);
    }
    if ((r = relsrc_load(dir, d->has_env ? d->env.id : NULL, &d->rs)) < 0) {
        release_read_error("release", dir, r);
        return r;
    }
    d->has_rs = true;
    memcpy(d->id, d->rs.id, sizeof d->id);
    (void)str_copy(d->name, sizeof d->name, d->rs.m->name);
    /* The agent would refuse a release without the job's command only after staging, pushing and
     * preflight; catch it here, before anything leaves this machine. */
    const char *need[2] = {d->job->command, d->job->preflight};
    const char *what[2] = {"command", "preflight"};
    for (int i = 0; i < 2; i++) {
        if (!need[i][0] || !strchr(need[i], '/') || !strncmp(need[i], ".drover-env/", 12))
            continue; /* none, looked up in the container's PATH, or in the environment */
        const char *why = manifest2_exec_problem(d->rs.m, need[i]);
        if (why) {
            release_exec_error("release", dir, need[i], why, what[i], d->job->name);
            return -ENOENT;
        }
    }
    char mpath[1200];
    snprintf(mpath, sizeof mpath, "%s/%s", mdir, d->id);
    if ((r = fs_write_atomic(mpath, d->rs.text, d->rs.len, 0600)) < 0)
        log_warn("cannot keep the manifest in '%s': %s", mpath, strerror(-r));
    d->blob_size = d->rs.m->file_bytes;
    ui_short(d->id, d->sid);
    fprintf(stderr, "release %s (%s): %zu files, %.2f MiB\n", d->sid, d->name, d->rs.m->nfiles,
            (double)d->blob_size / 1048576.0);
    return 0;
}

/* Only the objects each host and container lacks travel; every host at once. */
/* stage_only: each container's install gives the deploy lease back (nothing follows it there),
 * where the agent knows how; d->leased says where it is still held. */
static int push_release(struct deploy *d, bool stage_only, char *err, size_t err_sz)
{
    struct sigaction sa = { .sa_handler = on_sigint_send }, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    send_interrupted = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    struct sync_stats st = { 0 };
    double t0 = time_mono();
    int r = 0;
    struct objsync_lease *give = stage_only ? calloc(1, sizeof *give) : NULL;
    for (int i = 0; give && i < d->job->ncts; i++)
        give->may[i] = d->leased[i] && d->lease_status_known[i];
    if (give) {
        give->job = d->job->name;
        give->holder = d->holder;
    }
    if (d->has_env)
        r = objsync_job(d->f, d->job, &d->env, NULL, &st, err, err_sz);
    if (r == 0)
        r = objsync_job(d->f, d->job, &d->rs, give, &st, err, err_sz);
    for (int i = 0; give && i < d->job->ncts; i++)
        if (give->given[i])
            d->leased[i] = false; /* given back by its install */
    free(give);
    if (send_interrupted && r < 0)
        snprintf(err, err_sz, "interrupted by the operator while staging (%.1f MiB stored on hosts)",
                 (double)st.bytes_to_hosts / 1048576.0);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    send_interrupted = 0;
    exec_interrupted = 0;
    if (r == 0)
        fprintf(stderr, "release %s in every container in %.1fs (%zu objects, %.2f MiB sent to hosts)\n", d->sid,
                time_mono() - t0, st.objects_to_hosts, (double)st.bytes_to_hosts / 1048576.0);
    return r;
}

/* preflight_cts's fan-out: container i's preflight. */
struct preflight_arg {
    const char *const *argv;
    double timeout_s;
};

static int preflight_one(struct ct_fan *cf, int i)
{
    const struct preflight_arg *pa = cf->arg;
    const struct inv_ct *ct = &cf->d->job->cts[i];
    int r = agent_call(cf->d, ct, pa->argv, pa->timeout_s, cf->err[i], sizeof cf->err[i]);
    if (r == 0)
        fprintf(stderr, "preflight %s: passed\n", ct->label);
    return r;
}

static int preflight_cts(struct deploy *d, char *err, size_t err_sz)
{
    const struct inv_job *j = d->job;
    if (!j->preflight[0])
        return 0;
    struct agent_argv a;
    agent_argv_init(&a);
    /* --job: the worker environment of rank 0 of this job, its GPUs included */
    agent_argv_preflight(&a, d->id, j->name, j->gpus, j->preflight_timeout_s);
    for (int k = 0; k < j->nenv; k++)
        agent_argv_env(&a, j->env[k]);
    agent_argv_command(&a, j->preflight);
    for (int i = 0; i < j->npreflight_args; i++)
        agent_argv_add(&a, j->preflight_args[i]);
    if (agent_argv_end(&a) < 0) {
        snprintf(err, err_sz, "job '%s': too many preflight arguments", j->name);
        return -E2BIG;
    }
    /* the agent's own limit (its default is 300 s), plus the exec timeout */
    double timeout = d->inv->exec_timeout_s +
                     (j->preflight_timeout_s > 0 ? j->preflight_timeout_s : 300);
    /* every host at once (transport/fanout.h, [drover] parallel), a host's containers one after
     * another: a preflight of minutes (a GPU self-test) costs that once, not once per host.  The
     * failure reported is the first in container order. */
    struct preflight_arg pa = { .argv = a.argv, .timeout_s = timeout };
    struct ct_fan *cf = calloc(1, sizeof *cf);
    if (!cf) {
        snprintf(err, err_sz, "out of memory");
        return -ENOMEM;
    }
    cf->d = d;
    cf->fn = preflight_one;
    cf->arg = &pa;
    cf->host_stops = true; /* not run: an earlier container of its host failed */
    (void)ct_fan_run(cf);
    int r = 0;
    for (int i = 0; i < j->ncts && r == 0; i++)
        if (cf->rc[i] < 0) {
            r = cf->rc[i];
            (void)str_copy(err, err_sz, cf->err[i]);
        }
    free(cf);
    return r;
}

/* After a failed probation: did the agent stop the job on an environment fault (a device or
 * driver failure, STATUS_ATTENTION_PREFIX)?  The verdict may name the rank's exit before the
 * agent has decided, so the containers are asked again for a few seconds while their gangs
 * settle.  true with the agent's reason in why. */
static bool env_fault_seen(struct deploy *d, const char *verdict, char *why, size_t why_sz)
{
    if (strstr(verdict, STATUS_ATTENTION_PREFIX)) {
        if (why != verdict)
            (void)str_copy(why, why_sz, verdict);
        return true;
    }
    if (!strstr(verdict, "exited with code 9 "))
        return false;
    double until = time_mono() + 15;
    do {
        bool settling = false;
        for (int i = 0; i < d->job->ncts; i++) {
            char e[256];
            if (fleet_agent_status(d->f, &d->job->cts[i], d->st, e, sizeof e) < 0)
                continue;
            const struct job_status *js = status_find_job(d->st, d->job->name);
            if (!js)
                continue;
            if (js->state == GANG_FAILED &&
                !strncmp(js->reason, STATUS_ATTENTION_PREFIX, strlen(STATUS_ATTENTION_PREFIX))) {
                snprintf(why, why_sz, "%s: %s", d->job->cts[i].label, js->reason);
                return true;
            }
            settling |= js->state == GANG_STOPPING || js->state == GANG_STARTING ||
                        js->state == GANG_RUNNING;
        }
        if (!settling)
            break;
        usleep(500000);
    } while (time_mono() < until);
    return false;
}

/* The host's NVIDIA kernel module version, read on the host (not in the container, which may
 * show another): "" when the host has none or it cannot be read. */
static void host_driver_version(struct deploy *d, int host, char *out, size_t out_sz)
{
    out[0] = '\0';
    struct conn *c;
    if (fleet_conn(d->f, host, &c) < 0)
        return;
    const char *argv[] = { "cat", "/proc/driver/nvidia/version", NULL };
    struct exec_result res;
    if (conn_run(c, argv, d->inv->exec_timeout_s, &res) < 0)
        return;
    char v[NVDRIVER_VERSION_MAX];
    if (res.status == 0 && res.out && nvdriver_parse_version(res.out, res.out_len, v) == 0)
        (void)str_copy(out, out_sz, v);
    exec_result_done(&res);
}

/* The GPU environment preflight (drover-agent gpu-check) in every container of a job that has
 * GPUs, and in any container the survey found marked for attention; before anything stops.
 * With force, failures are reported and the deploy goes on. */
static int gpu_check_cts(struct deploy *d, bool force, char *err, size_t err_sz)
{
    const struct inv_job *j = d->job;
    for (int i = 0; i < j->ncts; i++) {
        const struct inv_ct *ct = &j->cts[i];
        if (!j->gpus[0] && !j->cuda[0] && j->gpu_mem_gib <= 0 && !d->attention[i])
            continue;
        char drv[64];
        host_driver_version(d, ct->host, drv, sizeof drv);
        struct agent_argv av;
        agent_argv_init(&av);
        agent_argv_gpu_check(&av, j->nproc_per_node, j->gpus, drv, j->cuda,
                             j->gpu_mem_gib * 1073741824.0);
        if (agent_argv_end(&av) < 0) {
            snprintf(err, err_sz, "%s: gpu-check command line too long", ct->label);
            return -E2BIG;
        }
        char e[1200];
        int r = agent_call(d, ct, av.argv, d->inv->exec_timeout_s, e, sizeof e);
        if (r < 0 && !force) {
            snprintf(err, err_sz, "%s%s%s; fix the container's GPU environment, or deploy --force",
                     e, d->attention[i] ? "; it was marked: " : "",
                     d->attention[i] ? d->attention_reason[i] : "");
            return r;
        }
        if (r < 0)
            log_warn("%s (--force: deploying anyway)", e);
        else
            fprintf(stderr, "gpu-check %s: passed%s\n", ct->label,
                    d->attention[i] ? " (its earlier environment fault is fixed)" : "");
    }
    return 0;
}

/* A new rendezvous generation: 16 hex digits, one per switch (agent activate/start --rdzv). */
static void new_rdzv(char out[17])
{
    uint8_t b[8];
    if (getrandom(b, sizeof b, GRND_NONBLOCK) != (ssize_t)sizeof b) {
        /* no entropy yet (early boot): unique enough for "not the previous switch" */
        uint64_t x = (uint64_t)(time_mono() * 1e9) ^ ((uint64_t)getpid() << 40) ^ (uint64_t)(time_wall() * 1e6);
        memcpy(b, &x, sizeof b);
    }
    for (int i = 0; i < 8; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

static double switch_deadline(const struct deploy *d)
{
    double s = d->job->policy.switch_deadline_s;
    return s > 0 ? s : (d->job->grace_s > 0 ? d->job->grace_s : 30) + 60;
}

/* The agents' side of the switch deadline (`stop --restart-after`): counted by each agent from
 * the moment its old gang is gone, so it covers this controller's wait for the slowest container
 * (at most switch_deadline) plus SWITCH_AGENT_MARGIN_S to send the second phase.  An agent that
 * hears nothing by then (this controller died between the phases) starts its old gang again. */
#define SWITCH_AGENT_MARGIN_S 30
static double agent_switch_deadline(const struct deploy *d)
{
    return switch_deadline(d) + SWITCH_AGENT_MARGIN_S;
}

/* said: what `pct exec` into container i wrote on stderr when its command ended.  true when it
 * says the container is not running (pct_ct_problem), kept in d->ct_stopped[i] for the verdict,
 * the revert and its messages. */
static bool ct_stopped_note(struct deploy *d, int i, const char *said)
{
    char why[CONN_STREAM_ERR_MAX + 200];
    if (!said || pct_ct_problem(d->job->cts[i].vmid, said, why, sizeof why) != -EHOSTDOWN)
        return false;
    snprintf(d->ct_stopped[i], sizeof d->ct_stopped[i], "%s", said);
    (void)text_escape_inplace(d->ct_stopped[i], sizeof d->ct_stopped[i]);
    return true;
}

/* The first phase of a switch: stop the job's old gang in every container that has one, all at
 * once, and wait until each agent answers that every process of it is gone (the agent's stop
 * returns only then), at most switch_deadline.  gone[i] says which did; why[i] says why not.
 * Returns how many did not. */
static int stop_old_gangs(struct deploy *d, bool gone[INV_MAX_CTS], char why[][300])
{
    const struct inv_job *j = d->job;
    struct agent_argv a;
    agent_argv_init(&a);
    agent_argv_stop_switch(&a, j->name, agent_switch_deadline(d));
    struct conn_stream *s[INV_MAX_CTS] = { NULL };
    bool said_ok[INV_MAX_CTS] = { false };
    double t0 = time_mono(), limit = switch_deadline(d);
    int pending = 0, n = 0;
    for (int i = 0; i < j->ncts; i++) {
        gone[i] = !d->has_gang[i];
        why[i][0] = '\0';
        if (gone[i])
            continue;
        n++;
        char e[CONN_ERR_MAX] = "";
        int r = fleet_agent_stream(d->f, &j->cts[i], a.argv, 4096, &s[i], e, sizeof e);
        if (r < 0)
            snprintf(why[i], sizeof why[i], "cannot ask its agent to stop the old gang: %s",
                     r == -ENOTCONN ? "host unreachable" : e);
        else
            pending++;
    }
    if (n)
        fprintf(stderr, "switch: stopping the old gang of job '%s' in %d container(s) at once; the "
                "new release starts only once every one is gone (deadline %.0fs; the agents start "
                "it again on their own if nothing follows within %.0fs)\n", j->name, n, limit,
                agent_switch_deadline(d));
    while (pending > 0 && !interrupted && time_mono() - t0 < limit) {
        for (int i = 0; i < j->ncts; i++) {
            if (!s[i])
                continue;
            char *line;
            size_t len;
            int r;
            while ((r = conn_stream_poll(s[i], &line, &len)) == 1)
                if (len >= 2 && !strncmp(line, "ok", 2))
                    said_ok[i] = true; /* "ok: stopped: no process of the gang is left" */
            if (r == -EPIPE || r == -EIO) {
                bool stopped = !said_ok[i] && ct_stopped_note(d, i, conn_stream_err(s[i]));
                conn_stream_free(s[i]);
                s[i] = NULL;
                pending--;
                gone[i] = said_ok[i];
                if (gone[i])
                    fprintf(stderr, "switch: %s: old gang gone after %.1fs\n", j->cts[i].label,
                            time_mono() - t0);
                else if (stopped)
                    snprintf(why[i], sizeof why[i], "container stopped (pct: %s): nothing runs there",
                             d->ct_stopped[i]);
                else
                    snprintf(why[i], sizeof why[i], "its agent did not confirm the stop (%s)",
                             r == -EIO ? "connection lost" : "drover-agent stop failed: see `drover logs`");
            }
        }
        if (pending > 0)
            fleet_wait(d->f, 200);
    }
    int left = 0;
    for (int i = 0; i < j->ncts; i++) {
        if (s[i]) {
            conn_stream_free(s[i]); /* the agent goes on stopping it; it is asked to start it again below */
            s[i] = NULL;
            snprintf(why[i], sizeof why[i], interrupted ? "interrupted while its old gang was stopping"
                     : "its old gang was not gone within the switch deadline of %.0f s (a process that "
                     "ignores SIGTERM until the grace period ends, or one stuck in the kernel)", limit);
        }
        left += !gone[i];
    }
    return left;
}

/* After an aborted switch: start the old release again in every container where the switch
 * stopped it (or was stopping it), with a new rendezvous generation so that it cannot pair with
 * old ranks still on their way out.  Where the old gang is not gone yet the agent starts it once
 * it is (its stop is replaced by the start).  Fills done with what happened. */
static void restart_old_gangs(struct deploy *d, const bool gone[INV_MAX_CTS], char *done, size_t done_sz)
{
    const struct inv_job *j = d->job;
    char tok[17];
    new_rdzv(tok);
    struct agent_argv a;
    agent_argv_init(&a);
    agent_argv_start(&a, j->name, tok);
    size_t off = 0;
    done[0] = '\0';
    for (int i = 0; i < j->ncts; i++) {
        if (!d->has_gang[i])
            continue;
        char e[1024], sid[RELEASE_SHORT_LEN + 1];
        /* a container still stopping answers only once its old gang is gone: the request is
         * queued there, there is no need to wait for it */
        double timeout = gone[i] ? (j->grace_s > 0 ? j->grace_s : 30) + d->inv->exec_timeout_s : 10;
        int r = agent_call(d, &j->cts[i], a.argv, timeout, e, sizeof e);
        const char *what;
        if (r == 0)
            what = "started again";
        else if (r == -ETIMEDOUT && !gone[i])
            what = "starts again once its old gang is gone";
        else {
            log_error("%s", e);
            what = "NOT started again (start it with `drover rollback` or a deploy)";
        }
        fprintf(stderr, "switch aborted: %s: %s %s\n", j->cts[i].label, ui_short(d->from[i], sid), what);
        if (off < done_sz)
            off += (size_t)snprintf(done + off, done_sz - off, "%s%s %s on %s", off ? "; " : "",
                                    ui_short(d->from[i], sid), what, j->cts[i].label);
    }
}

struct activate_arg {
    double probation_deadline;
    const char *rdzv;
};

static int activate_one(struct ct_fan *cf, int i)
{
    struct deploy *d = cf->d;
    const struct activate_arg *aa = cf->arg;
    const struct inv_job *j = d->job;
    const struct inv_policy *pol = &j->policy;
    double probation_deadline = aa->probation_deadline;
    const char *rdzv = aa->rdzv;
    char *err = cf->err[i];
    size_t err_sz = sizeof cf->err[i];
    struct spec_digest sd;
    if (jobspec_digest(j, i, &sd) < 0) {
        snprintf(err, err_sz, "job '%s': cannot compute the job spec digest", j->name);
        return -ENOMEM;
    }
    /* an agent older than the spec digest refuses --spec-digest (usage, exit 2, before anything
     * is stopped): it is activated without, and its spec stays "unknown" until drover install */
    for (int with_digest = 1; with_digest >= 0; with_digest--) {
        struct agent_activate act = {
            .id = d->id, .job = j->name, .nnodes = j->ncts, .node_rank = i,
            .nproc_per_node = j->nproc_per_node, .gpus = j->gpus, .master_addr = j->master_addr,
            .master_port = j->master_port, .grace_s = j->grace_s,
            .probation_deadline_s = probation_deadline,
            /* liveness, judged by the agent always (agent/liveness.h) */
            .first_step_deadline_s = pol->first_step_deadline_s,
            .silence_deadline_s = pol->silence_deadline_s,
            .stall_deadline_s = pol->stall_deadline_s,
            .checkpoint_deadline_s = pol->checkpoint_deadline_s,
            .rdzv = rdzv,
            .spec_digest = with_digest ? sd.hex : NULL, .spec_fields = with_digest ? sd.fields : NULL,
        };
        struct agent_argv a;
        agent_argv_init(&a);
        agent_argv_activate(&a, &act);
        for (int k = 0; k < j->nenv; k++)
            agent_argv_env(&a, j->env[k]);
        agent_argv_command(&a, j->command);
        for (int k = 0; k < j->nargs; k++)
            agent_argv_add(&a, j->args[k]);
        if (agent_argv_end(&a) < 0) {
            snprintf(err, err_sz, "job '%s': too many arguments", j->name);
            return -E2BIG;
        }
        double timeout = (j->grace_s > 0 ? j->grace_s : 60) + d->inv->exec_timeout_s;
        int status = 0;
        int r = agent_call_status(d, &j->cts[i], a.argv, timeout, &status, err, err_sz);
        if (r == -EIO && status == AGENT_EXIT_USAGE && with_digest && strstr(err, "spec-digest")) {
            d->spec_unaware[i] = true;
            continue;
        }
        if (r < 0)
            return r;
        break;
    }
    fprintf(stderr, "activate %s: node %d of %d started %s\n", j->cts[i].label, i, j->ncts, d->sid);
    return 0;
}

/* The second phase: activate the release in every container (its old gang is gone everywhere;
 * the agent's own stop-before-start has nothing left to stop), every host at once.  On failure
 * err names the first failing container in inventory order (the caller reverts). */
static int activate_all(struct deploy *d, double probation_deadline, const char *rdzv, char *err, size_t err_sz)
{
    struct activate_arg aa = { .probation_deadline = probation_deadline, .rdzv = rdzv };
    struct ct_fan *cf = calloc(1, sizeof *cf);
    if (!cf) {
        snprintf(err, err_sz, "out of memory");
        return -ENOMEM;
    }
    cf->d = d;
    cf->fn = activate_one;
    cf->arg = &aa;
    cf->host_stops = true;
    int r = 0;
    if (ct_fan_run(cf) > 0)
        for (int i = 0; i < d->job->ncts && r == 0; i++)
            if (cf->rc[i] < 0) {
                r = cf->rc[i];
                (void)str_copy(err, err_sz, cf->err[i]);
            }
    for (int i = 0; i < d->job->ncts; i++)
        if (d->spec_unaware[i])
            log_warn("%s: its agent is older than job spec digests (activated without one): until "
                     "`drover install` updates it, every deploy of job '%s' relaunches the gang "
                     "there (its job spec is unknown)", d->job->cts[i].label, d->job->name);
    free(cf);
    return r;
}

/* Switch the job to d->id (two-phase, see the top of this file).  -ECANCELED: aborted before
 * anything new started, with the verdict in err (the old release runs again); another -errno:
 * the activation failed part way (the caller reverts). */
static int activate_cts(struct deploy *d, double probation_deadline, char *err, size_t err_sz)
{
    const struct inv_job *j = d->job;
    bool gone[INV_MAX_CTS];
    char why[INV_MAX_CTS][300];
    if (stop_old_gangs(d, gone, why) > 0) {
        char names[1200], done[1500];
        size_t off = 0;
        for (int i = 0; i < j->ncts && off < sizeof names; i++)
            if (!gone[i])
                off += (size_t)snprintf(names + off, sizeof names - off, "%s%s: %s", off ? "; " : "",
                                        j->cts[i].label, why[i]);
        restart_old_gangs(d, gone, done, sizeof done);
        snprintf(err, err_sz, "switch to %s aborted before anything new started: %s.  Nothing of %s "
                 "was started anywhere; %s", d->sid, names, d->sid, done[0] ? done : "nothing was stopped");
        return -ECANCELED;
    }
    char tok[17];
    new_rdzv(tok);
    return activate_all(d, probation_deadline, tok, err, err_sz);
}

static int leases_take(struct deploy *d, double ttl, bool with_status);
static double lease_ttl(const struct deploy *d);

/* Renew the job's deploy lease in every container while a long wait goes on (a probation, a
 * recovery), every third of its TTL.  Losing it (another operator took it over after it expired:
 * this controller was cut off, or stopped, for a whole TTL) sets d->lease_lost: the watch ends
 * and the deploy stops deciding (taken_over()). */
static void leases_renew_due(struct deploy *d, double now)
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

/* Follow one watch stream per container and feed the probation until it decides.  what: the
 * progress line's label ("probation", or "recovery" while a revert is confirmed). */
static enum probation_verdict watch_probation(struct deploy *d, struct probation *p, const char *what)
{
    const struct inv_job *j = d->job;
    struct conn_stream *streams[INV_MAX_CTS] = { NULL };
    double reopen_at[INV_MAX_CTS] = { 0 };
    struct agent_argv wa;
    agent_argv_init(&wa);
    agent_argv_watch(&wa, 1);
    bool tty = isatty(STDERR_FILENO);
    double last_print = 0;
    enum probation_verdict v = PROBATION_PENDING;
    /* After a failure, a short look (settle_until) for a container stopped under the gang: its
     * peers lose a rank and their agents may say so before its own stream says "not running".
     * It ends as soon as every container answered again or was found stopped. */
    double settle_until = 0;
    bool heard[INV_MAX_CTS] = { false };
    d->lease_renew_at = time_mono() + lease_ttl(d) / 3; /* just renewed before the switch */
    while (!interrupted && !d->lease_lost) {
        double now = time_mono();
        leases_renew_due(d, now);
        if (d->lease_lost)
            break;
        for (int i = 0; i < j->ncts; i++) {
            const struct inv_ct *ct = &j->cts[i];
            if (!streams[i] && now >= reopen_at[i]) {
                char err[CONN_ERR_MAX];
                int r = fleet_agent_stream(d->f, ct, wa.argv, STATUS_MAX_BYTES + 16, &streams[i],
                                           err, sizeof err);
                if (r < 0 && r != -ENOTCONN)
                    log_warn("%s: cannot start the status stream: %s", ct->label, err);
                reopen_at[i] = now + 3;
            }
            if (!streams[i])
                continue;
            char *line;
            size_t len;
            int r;
            while ((r = conn_stream_poll(streams[i], &line, &len)) == 1) {
                heard[i] = true;
                if (status_parse(line, len, d->st) == 0)
                    probation_feed(p, i, d->st, time_mono());
                else
                    log_debug("%s: unreadable status line (%zu bytes)", ct->label, len);
            }
            if (r == -EPIPE || r == -EIO) {
                /* pct's own words when it could not even start the watch there: a container
                 * stopped under the gang (pct stop, lxc-stop) fails the probation at once */
                if (ct_stopped_note(d, i, conn_stream_err(streams[i])))
                    probation_ct_stopped(p, i, d->ct_stopped[i]);
                log_debug("%s: status stream ended; reopening", ct->label);
                conn_stream_free(streams[i]);
                streams[i] = NULL;
                if (fleet_session_is_dead(d->f, ct->host)) {
                    /* The session is gone: free every stream on it, then reconnect. */
                    for (int k = 0; k < j->ncts; k++)
                        if (j->cts[k].host == ct->host) {
                            conn_stream_free(streams[k]);
                            streams[k] = NULL;
                        }
                    (void)fleet_drop_if_dead(d->f, ct->host);
                }
            }
        }
        now = time_mono();
        v = probation_check(p, now);
        bool stopped_seen = false;
        for (int i = 0; i < j->ncts; i++)
            stopped_seen = stopped_seen || d->ct_stopped[i][0];
        if (v == PROBATION_FAIL && !stopped_seen && !settle_until) {
            settle_until = now + 5;
            for (int i = 0; i < j->ncts; i++) {
                heard[i] = false;
                if (!streams[i])
                    reopen_at[i] = 0; /* ask again at once: a stopped container says so */
            }
        }
        if (settle_until) {
            bool all = true;
            for (int i = 0; i < j->ncts; i++)
                all = all && heard[i];
            if (stopped_seen || all || now >= settle_until)
                break;
            fleet_wait(d->f, 100);
            continue;
        }
        if (v != PROBATION_PENDING)
            break;
        if (now - last_print >= (tty ? 1 : 10)) {
            char line[512];
            probation_describe(p, now, line, sizeof line);
            fprintf(stderr, tty ? "\r\033[K%s %s" : "%s %s\n", what, line);
            last_print = now;
        }
        fleet_wait(d->f, 200);
    }
    if (tty && last_print > 0)
        fputc('\n', stderr);
    for (int i = 0; i < j->ncts; i++)
        conn_stream_free(streams[i]);
    return v;
}

/* Another operator took over the job's deploy lease while this deploy watched (what): it must
 * not promote or revert on top of them.  Says who, records `aborted`, returns the exit code. */
static int taken_over(struct deploy *d, const char *what)
{
    char msg[1200];
    snprintf(msg, sizeof msg, "the deploy lease of job '%s' was taken over by another operator "
             "during %s (%s): this deploy stops here and decides nothing (no promote, no revert); "
             "the other operator's deploy decides the job now", d->job->name, what, d->lease_lost_why);
    printf("%sTAKEN OVER%s %s (%s) for job '%s': %s\n", ui_red(stdout), ui_reset(stdout), d->sid,
           d->name, d->job->name, msg);
    history_record(d, "aborted", msg, -1);
    return EXIT_TAKEN_OVER;
}

/* After a revert: watch until the good release heartbeats in phase train on every rank. */
static int confirm_recovery(struct deploy *d, const char *good, char *msg, size_t msg_sz)
{
    struct inv_policy pol = d->job->policy;
    if (pol.healthy_deadline_s < 30)
        pol.healthy_deadline_s = 30;
    pol.progress_deadline_s = 2 * pol.healthy_deadline_s + (d->job->grace_s > 0 ? d->job->grace_s : 60);
    struct probation *p;
    int r = probation_new(&pol, d->job->name, good, d->job->ncts, d->labels, d->job->nproc_per_node,
                          -1, true, time_mono(), &p);
    if (r < 0)
        return r;
    interrupted = 0;
    enum probation_verdict v = watch_probation(d, p, "recovery");
    char sid[RELEASE_SHORT_LEN + 1];
    if (d->lease_lost) {
        snprintf(msg, msg_sz, "%s: not confirmed (deploy lease taken over)", ui_short(good, sid));
        r = -EBUSY;
    } else if (v == PROBATION_PASS) {
        long long step, resumed;
        probation_progress(p, &step, &resumed);
        if (resumed >= 0)
            snprintf(msg, msg_sz, "%s is training again at step %lld (resumed from its checkpoint "
                     "at step %lld)", ui_short(good, sid), step, resumed);
        else
            snprintf(msg, msg_sz, "%s is training again at step %lld (started fresh: no checkpoint)",
                     ui_short(good, sid), step);
        r = 0;
    } else if (v == PROBATION_PENDING && interrupted) {
        /* the operator's Ctrl-C while it was watched: no verdict on the recovery, which goes on
         * (it used to be reported as REVERT FAILED, "the job may be down", and recorded so) */
        snprintf(msg, msg_sz, "%s not confirmed (interrupted by the operator while its recovery "
                 "was watched)", ui_short(good, sid));
        r = -EINTR;
    } else {
        snprintf(msg, msg_sz, "%s did not recover: %s", ui_short(good, sid),
                 v == PROBATION_FAIL ? probation_reason(p) : "no verdict");
        r = -EIO;
    }
    probation_free(p);
    return r;
}

struct revert_arg {
    const char *const *argv;
    const bool *gone;  /* phase 1's answer per container */
    double timeout_s;
};

static int revert_one(struct ct_fan *cf, int i)
{
    const struct revert_arg *ra = cf->arg;
    /* where the stop is still going on, the agent queues the revert behind it (it replaces the
     * stop) and answers once the good gang started: no need to wait for that here */
    double t = ra->gone[i] ? ra->timeout_s : 10;
    return agent_call(cf->d, &cf->d->job->cts[i], ra->argv, t, cf->err[i], sizeof cf->err[i]);
}

/* Revert every container to its last good release, two-phase like a deploy's switch: stop the
 * failed release everywhere at once (stop_old_gangs, the agents' switch deadline armed), then
 * `drover-agent revert --rdzv G` everywhere at once (each agent starts the good release with the
 * command it ran with, as generation G).  A container whose old gang is not gone within the
 * switch deadline is named; its revert replaces the stop still in flight there, so the good
 * release starts there once the old gang is gone (the others wait for it in their rendezvous):
 * never a job left stopped.  Returns the exit code. */
static int revert_all(struct deploy *d, const char *reason)
{
    const struct inv_job *j = d->job;
    char sid[RELEASE_SHORT_LEN + 1];
    if (!d->good[0]) {
        /* Nothing to go back to: stop the failed release so it does not burn GPUs. */
        struct agent_argv args;
        agent_argv_init(&args);
        agent_argv_stop(&args, j->name);
        int failed = 0;
        for (int i = 0; i < j->ncts; i++) {
            char err[1024];
            if (agent_call(d, &j->cts[i], args.argv, (j->grace_s > 0 ? j->grace_s : 60) + 60, err,
                           sizeof err) < 0) {
                log_error("%s", err);
                failed++;
            }
        }
        printf("no last good release for job '%s' to return to: %s\n", j->name,
               failed ? "stopping the gang FAILED on some containers" : "stopped the gang");
        history_record(d, failed ? "revert-failed" : "failed", reason, -1);
        return failed ? EXIT_REVERT_FAILED : EXIT_REVERTED;
    }
    d->switching = true;
    fprintf(stderr, "reverting job '%s' to %s on %d containers (two-phase: the failed gang stops "
            "everywhere first)\n", j->name, ui_short(d->good, sid), j->ncts);
    /* phase 1: after an activation every container may have a gang (a stop of a stopped job is
     * answered at once); an operator's Ctrl-C that led here must not cut the stop short */
    interrupted = 0;
    bool gone[INV_MAX_CTS];
    char stalled[INV_MAX_CTS][300];
    for (int i = 0; i < j->ncts; i++)
        d->has_gang[i] = true;
    int left = stop_old_gangs(d, gone, stalled);
    char tok[17];
    new_rdzv(tok);
    char why[300];
    snprintf(why, sizeof why, "drover: %s", reason);
    struct agent_argv args;
    agent_argv_init(&args);
    agent_argv_revert(&args, j->name, why, d->no_bad_mark);
    agent_argv_rdzv(&args, tok);
    struct revert_arg ra = { .argv = args.argv, .gone = gone,
                             .timeout_s = (j->grace_s > 0 ? j->grace_s : 60) + d->inv->exec_timeout_s };
    struct ct_fan *cf = calloc(1, sizeof *cf);
    int failed = 0, stopped = 0;
    if (!cf) {
        log_error("out of memory");
        failed = j->ncts;
    } else {
        /* phase 2, every host at once; not into a container found stopped (nothing to start
         * there: its `pct exec` fails) */
        cf->d = d;
        cf->fn = revert_one;
        cf->arg = &ra;
        for (int i = 0; i < j->ncts; i++)
            cf->skip[i] = d->ct_stopped[i][0] != '\0';
        (void)ct_fan_run(cf);
        for (int i = 0; i < j->ncts; i++) {
            if (cf->skip[i]) {
                fprintf(stderr, "revert: %s: container stopped (pct: %s): the good release was NOT "
                        "started there\n", j->cts[i].label, d->ct_stopped[i]);
                stopped++;
                continue;
            }
            if (!gone[i])
                fprintf(stderr, "revert: %s: %s; %s\n", j->cts[i].label, stalled[i],
                        cf->rc[i] >= 0 || cf->rc[i] == -ETIMEDOUT
                            ? "the good release starts there once the old gang is gone"
                            : "the good release was NOT started there");
            if (cf->rc[i] < 0 && !(cf->rc[i] == -ETIMEDOUT && !gone[i])) {
                log_error("%s", cf->err[i]);
                failed++;
            } else if (cf->rc[i] >= 0) {
                fprintf(stderr, "revert %s: %s started\n", j->cts[i].label, ui_short(d->good, sid));
            }
        }
        free(cf);
    }
    left -= stopped; /* a stopped container has nothing to stop: named above as stopped */
    if (left > 0)
        log_warn("revert of job '%s': %d container(s) did not confirm the stop of %s within the "
                 "switch deadline (named above)", j->name, left, d->sid);
    if (stopped && !failed) {
        /* The gang cannot form without the stopped container: the good release's ranks in the
         * others wait for it in their rendezvous (until first_step_deadline trips), and the
         * stopped container, once started, runs what its agent last had (the failed release).
         * Watching a recovery would only time out; say what to do instead. */
        char names[400] = "", cmds[400] = "";
        size_t nn = 0, nc = 0;
        for (int i = 0; i < j->ncts; i++)
            if (d->ct_stopped[i][0]) {
                nn += (size_t)snprintf(names + nn, nn < sizeof names ? sizeof names - nn : 0, "%s%s (pct: %s)",
                                       nn ? ", " : "", j->cts[i].label, d->ct_stopped[i]);
                nc += (size_t)snprintf(cmds + nc, nc < sizeof cmds ? sizeof cmds - nc : 0, "%s`pct start %d` on %s",
                                       nc ? ", " : "", j->cts[i].vmid, d->inv->hosts[j->cts[i].host].name);
            }
        char msg[1400];
        snprintf(msg, sizeof msg, "%d container(s) stopped: %s; the good release %s was started in the "
                 "other %d, whose ranks wait for the missing ones in their rendezvous: start the "
                 "container (%s), then deploy %s again (`drover deploy DIR --job %s`) to form the "
                 "gang", stopped, names, ui_short(d->good, sid), j->ncts - stopped, cmds,
                 ui_short(d->good, sid), j->name);
        fprintf(stderr, "%s%sREVERT FAILED for job '%s': %s%s\n", ui_bold(stderr), ui_red(stderr),
                j->name, msg, ui_reset(stderr));
        printf("REVERT FAILED for job '%s': %s\n", j->name, msg);
        history_record(d, "revert-failed", msg, -1);
        return EXIT_REVERT_FAILED;
    }
    char msg[700] = "not confirmed (--now): watch it with `drover status`";
    int cr = failed ? -EIO : d->no_confirm ? 0 : confirm_recovery(d, d->good, msg, sizeof msg);
    if (cr == -EINTR) { /* started everywhere, as with --now: only the watching was cut short */
        size_t n = strlen(msg);
        snprintf(msg + n, sizeof msg - n, "; it was started in every container: watch it with "
                 "`drover status`");
        cr = 0;
    }
    bool confirmed = !failed && cr == 0;
    if (d->lease_lost)
        return taken_over(d, "the recovery after its revert");
    if (confirmed) {
        printf("reverted job '%s' to %s: %s\n", j->name, ui_short(d->good, sid), msg);
        history_record(d, d->rollback ? "rollback" : d->analysis ? "analysis" :
                       d->stopped_by_operator ? "aborted" : "reverted", reason, -1);
        return EXIT_REVERTED;
    }
    if (failed)
        snprintf(msg, sizeof msg, "revert failed on %d of %d containers", failed, j->ncts);
    fprintf(stderr, "%s%sREVERT FAILED for job '%s': %s; the job may be down: look with "
            "`drover status` and act now%s\n", ui_bold(stderr), ui_red(stderr), j->name, msg,
            ui_reset(stderr));
    printf("REVERT FAILED for job '%s': %s\n", j->name, msg);
    history_record(d, "revert-failed", reason, -1);
    return EXIT_REVERT_FAILED;
}

static int promote_one(struct ct_fan *cf, int i)
{
    return agent_call(cf->d, &cf->d->job->cts[i], cf->arg, cf->d->inv->exec_timeout_s, cf->err[i],
                      sizeof cf->err[i]);
}

/* Promote everywhere; ss (may be NULL) goes along as the job's new baseline samples. */
static int promote_all(struct deploy *d, double ktok, const struct sample_set *ss)
{
    const struct inv_job *j = d->job;
    char *text = NULL;
    if (ss && samples_format(ss, &text) < 0)
        text = NULL;
    struct agent_argv args;
    agent_argv_init(&args);
    agent_argv_promote(&args, d->id, j->name, ktok);
    if (text)
        agent_argv_samples(&args, text);
    int failed = 0;
    struct ct_fan *cf = calloc(1, sizeof *cf);
    if (!cf) {
        failed = j->ncts;
    } else {
        cf->d = d;
        cf->fn = promote_one;
        cf->arg = args.argv;
        failed = ct_fan_run(cf); /* every host at once */
        for (int i = 0; i < j->ncts; i++)
            if (cf->rc[i] < 0)
                log_error("%s", cf->err[i]);
    }
    free(cf);
    free(text);
    return failed ? -EIO : 0;
}

/* The baseline's samples: the state_dir cache, else what the agent of the first container kept
 * at the last promote (then cached).  NULL when neither has them. */
static struct sample_set *load_base_samples(struct deploy *d)
{
    struct sample_set *ss = malloc(sizeof *ss);
    if (!ss)
        return NULL;
    if (state_samples_get(d->inv->state_dir, d->key, false, ss) == 0)
        return ss;
    const struct inv_ct *ct = &d->job->cts[0];
    struct agent_argv args;
    agent_argv_init(&args);
    agent_argv_baseline(&args, d->job->name);
    struct conn *c;
    struct exec_result res;
    if (fleet_conn(d->f, ct->host, &c) == 0 &&
        pct_run_agent(c, ct, args.argv, d->inv->exec_timeout_s, &res) == 0) {
        int r = res.status == 0 ? samples_parse(res.out, res.out_len, ss) : -ENOENT;
        exec_result_done(&res);
        if (r == 0 && strcmp(ss->containers, d->key) == 0) {
            if (state_samples_set(d->inv->state_dir, d->key, false, ss) < 0)
                log_debug("cannot cache the baseline samples in '%s'", d->inv->state_dir);
            return ss;
        }
    }
    free(ss);
    return NULL;
}

/* After a pass: the window's samples become the baseline, kept by the agents and cached. */
static struct sample_set *pass_samples(struct deploy *d, const struct probation *p)
{
    struct sample_set *ss = calloc(1, sizeof *ss);
    if (!ss || probation_samples(p, ss) < 0) {
        free(ss);
        return NULL;
    }
    (void)str_copy(ss->containers, sizeof ss->containers, d->key);
    ss->time = time_wall();
    return ss;
}

/* Read each container's view of the job; fills d->good from the first container that has one. */
static bool deploy_is_bad(const struct deploy *d, const char *id)
{
    for (int k = 0; k < d->nbad; k++)
        if (!strcmp(d->bad[k], id))
            return true;
    return false;
}

/* survey's fan-out: container i's status document, the job's part kept in arg's slot i
 * (found[i] false: the agent does not know the job). */
struct survey_arg {
    struct job_status *js; /* [ncts] */
    bool found[INV_MAX_CTS];
};

static int survey_keep(struct ct_fan *cf, int i, const struct agent_status *st)
{
    struct survey_arg *sa = (struct survey_arg *)cf->arg;
    const struct job_status *js = status_find_job(st, cf->d->job->name);
    sa->found[i] = js != NULL;
    if (js)
        sa->js[i] = *js;
    return 0;
}

static int survey_one(struct ct_fan *cf, int i)
{
    struct agent_status *st = cf->scratch[ct_fan_slot(cf, i)];
    int r = fleet_agent_status(cf->d->f, &cf->d->job->cts[i], st, cf->err[i], sizeof cf->err[i]);
    return r < 0 ? r : survey_keep(cf, i, st);
}

/* survey_one for an answer of a host's containers asked at once: the same results and messages
 * as fleet_agent_status. */
static int survey_done(struct ct_fan *cf, int i, int r, struct exec_result *res, const char *why)
{
    const struct inv_ct *ct = &cf->d->job->cts[i];
    if (!res) {
        if (why)
            snprintf(cf->err[i], sizeof cf->err[i], "%s", why);
        else
            snprintf(cf->err[i], sizeof cf->err[i], "host unreachable: %s", cf->d->f->conn_msg[ct->host]);
        return r;
    }
    struct agent_status *st = cf->scratch[ct_fan_slot(cf, i)];
    r = fleet_agent_status_read(ct, res, st, cf->err[i], sizeof cf->err[i]);
    return r < 0 ? r : survey_keep(cf, i, st);
}

/* Which release each container runs, asked of every host at once (a host's containers one after
 * another); the answers are then read in inventory order, so "the first container that says"
 * stays the same as when they were asked one by one. */
static int survey(struct deploy *d, bool quiet_errors, bool *ret_all_current, char *err, size_t err_sz)
{
    const struct inv_job *j = d->job;
    bool all_current = true;
    int bad = 0, spec_differs = 0;
    d->spec_change[0] = '\0';
    d->off_good_spec = false;
    bool release_current = true;
    struct ct_fan *cf = calloc(1, sizeof *cf);
    struct survey_arg *sa = calloc(1, sizeof *sa);
    if (sa)
        sa->js = calloc((size_t)j->ncts, sizeof *sa->js);
    bool ok = cf && sa && sa->js, seen[INV_MAX_HOSTS] = { false };
    int nhosts = 0; /* one scratch document per worker (ct_fan_slot) */
    for (int i = 0; i < j->ncts; i++)
        nhosts += !seen[j->cts[i].host], seen[j->cts[i].host] = true;
    for (int k = 0; ok && k < nhosts; k++)
        ok = (cf->scratch[k] = malloc(sizeof *cf->scratch[k])) != NULL;
    if (!ok) {
        snprintf(err, err_sz, "out of memory");
        goto out;
    }
    struct agent_argv sargv;
    agent_argv_init(&sargv);
    agent_argv_status(&sargv);
    (void)agent_argv_end(&sargv);
    cf->d = d;
    cf->fn = survey_one;
    cf->arg = sa;
    cf->done = survey_done;
    cf->batch_args = sargv.argv; /* a host's containers at once */
    cf->batch_timeout_s = FLEET_STATUS_TIMEOUT_S;
    cf->batch_what = "status";
    for (int i = 0; i < j->ncts; i++)
        cf->skip[i] = d->pre[i] != 0; /* answered with the lease */
    (void)ct_fan_run(cf);
    for (int i = 0; i < j->ncts; i++) {
        if (!d->pre[i])
            continue;
        sa->found[i] = d->pre[i] == 1;
        if (sa->found[i])
            sa->js[i] = d->pre_js[i];
        cf->rc[i] = 0;
        d->pre[i] = 0; /* used once: a later survey asks */
    }
    for (int i = 0; i < j->ncts; i++) {
        const struct inv_ct *ct = &j->cts[i];
        const char *e = cf->err[i];
        int r = cf->rc[i];
        if (r < 0) {
            /* -EIO: connected, and `drover-agent status` failed there (missing, not running);
             * any other error is the connection's or the container's (fleet.h) */
            if (r == -EIO && !d->f->conn_err[ct->host])
                d->agent_failed = true;
            if (!bad)
                snprintf(err, err_sz, "%s: %s", ct->label, e);
            if (!quiet_errors)
                log_error("%s: %s", ct->label, e);
            bad++;
            all_current = false;
            continue;
        }
        const struct job_status *js = sa->found[i] ? &sa->js[i] : NULL;
        if (!js || strcmp(js->current, d->id) != 0 || strcmp(js->good, d->id) != 0 ||
            js->state != GANG_RUNNING)
            all_current = release_current = false;
        /* what runs is a (release, spec) pair: the same release with another job spec (or one
         * its agent never recorded) is not current, nor is a spec change not yet promoted */
        struct spec_digest want;
        if (js && js->current[0] && jobspec_digest(j, i, &want) == 0 &&
            (!jobspec_is_current(js, &want) || strcmp(js->good_spec_digest, want.hex) != 0)) {
            all_current = false;
            if (!spec_differs++ &&
                !jobspec_describe_change(j, js, &want, d->spec_change, sizeof d->spec_change)[0])
                snprintf(d->spec_change, sizeof d->spec_change, "not promoted yet");
        }
        if (js && js->current[0] && !strcmp(js->current, js->good) &&
            strcmp(js->spec_digest, js->good_spec_digest) != 0)
            d->off_good_spec = true;
        /* stopped and failed jobs have no gang and start none on their own; every other state
         * has one, or restarts one after its backoff (a stop cancels that) */
        d->has_gang[i] = js && js->state != GANG_STOPPED && js->state != GANG_FAILED;
        (void)str_copy(d->from[i], sizeof d->from[i], js ? js->current : "");
        d->attention[i] = js && js->state == GANG_FAILED &&
                          !strncmp(js->reason, STATUS_ATTENTION_PREFIX, strlen(STATUS_ATTENTION_PREFIX));
        if (d->attention[i])
            (void)str_copy(d->attention_reason[i], sizeof d->attention_reason[i], js->reason);
        if (js && js->good[0] && !d->good[0])
            (void)str_copy(d->good, sizeof d->good, js->good);
        if (js && js->current[0] && !d->current[0])
            (void)str_copy(d->current, sizeof d->current, js->current);
        if (js && js->previous[0] && !d->previous[0])
            (void)str_copy(d->previous, sizeof d->previous, js->previous);
        for (int k = 0; js && k < js->nbad && d->nbad < (int)ARRAY_SIZE(d->bad); k++)
            if (!deploy_is_bad(d, js->bad[k]))
                (void)str_copy(d->bad[d->nbad++], sizeof d->bad[0], js->bad[k]);
        if (js && js->ngoods && !d->ngoods) {
            for (int k = 0; k < js->ngoods; k++)
                (void)str_copy(d->goods[k], sizeof d->goods[0], js->goods[k]);
            d->ngoods = js->ngoods;
        }
    }
    d->spec_only = !bad && release_current && spec_differs > 0;
    d->earlier_good[0] = '\0';
    for (int k = 0; k < d->ngoods && !d->earlier_good[0]; k++)
        if (strcmp(d->goods[k], d->current) != 0 && !deploy_is_bad(d, d->goods[k]))
            (void)str_copy(d->earlier_good, sizeof d->earlier_good, d->goods[k]);
    *ret_all_current = all_current;
out:
    for (int k = 0; cf && k < INV_MAX_HOSTS; k++)
        free(cf->scratch[k]);
    free(cf);
    if (sa)
        free(sa->js);
    free(sa);
    return !ok ? -ENOMEM : bad ? -EIO : 0;
}

/* A release id as JSON: null when there is none. */
static json_t *plan_id(const char *id)
{
    return id && *id ? json_string(id) : json_null();
}

/* Prints the plan; returns the number of containers that could not be reached (a deploy now
 * would fail at staging, so plan says so with its exit status too).  out: when not NULL, the
 * same plan as one JSON object appended to it (docs/protocol.md, "Plan"). */
static int print_plan(struct deploy *d, json_t *out)
{
    int unreachable = 0;
    const struct inv_job *j = d->job;
    char sid[RELEASE_SHORT_LEN + 1], sid2[RELEASE_SHORT_LEN + 1];
    json_t *cts = json_array(), *cmd = json_array();
    json_array_append_new(cmd, json_string(j->command));
    for (int i = 0; i < j->nargs; i++)
        json_array_append_new(cmd, json_string(j->args[i]));
    printf("release %s (%s), %zu files, %.2f MiB\n", d->sid, d->name, d->rs.m->nfiles,
           (double)d->blob_size / 1048576.0);
    printf("job %s: %d node(s) x %d rank(s), command %s", j->name, j->ncts, j->nproc_per_node,
           j->command);
    for (int i = 0; i < j->nargs; i++)
        printf(" %s", j->args[i]);
    printf("\n");
    for (int i = 0; i < j->ncts; i++) {
        const struct inv_ct *ct = &j->cts[i];
        char e[1200];
        if (fleet_agent_status(d->f, ct, d->st, e, sizeof e) < 0) {
            printf("  %-24s unreachable: %s\n", ct->label, e);
            json_array_append_new(cts, json_pack("{s:s,s:i,s:b,s:s}", "container", ct->label,
                                                 "node", i, "reachable", 0, "error", e));
            unreachable++;
            continue;
        }
        const struct job_status *js = status_find_job(d->st, j->name);
        const char *cur = js ? js->current : "";
        /* the same release with another job spec is a deploy too (jobspec.h) */
        struct spec_digest want;
        char change[400] = "", what[460] = "";
        bool have_want = js && js->current[0] && jobspec_digest(j, i, &want) == 0;
        if (have_want)
            (void)jobspec_describe_change(j, js, &want, change, sizeof change);
        bool same = strcmp(cur, d->id) == 0;
        /* "already current" only where the deploy would say "nothing to do": the release AND
         * the spec promoted, not a candidate still on probation (or left by a drover that died) */
        bool settled = same && have_want && jobspec_is_settled(js, d->id, &want) && !change[0];
        if (same && change[0])
            snprintf(what, sizeof what, " (job spec changed: %s)", change);
        else if (same)
            snprintf(what, sizeof what, settled ? " (already current)" : " (current, not promoted yet)");
        json_array_append_new(cts, json_pack("{s:s,s:i,s:b,s:o,s:o,s:s,s:b,s:o}", "container", ct->label,
                                             "node", i, "reachable", 1, "current", plan_id(cur),
                                             "good", plan_id(js ? js->good : ""), "state",
                                             js ? gang_state_name(js->state) : "no job",
                                             "already_current", settled, "spec_change",
                                             change[0] ? json_string(change) : json_null()));
        printf("  %-24s node %d: %s (good %s, %s) -> %s%s\n", ct->label, i, ui_short(cur, sid),
               ui_short(js ? js->good : "", sid2), js ? gang_state_name(js->state) : "no job",
               d->sid, what);
    }
    const struct inv_policy *p = &j->policy;
    printf("probation: healthy_deadline %.0fs, warmup_steps %lld, warmup_time %.0fs, warmup_max "
           "%.0fs, min_healthy_time %.0fs, max_probation_time %.0fs, tolerance %.2f, confidence "
           "%.2f, on_inconclusive %s, progress_deadline %.0fs, auto_revert %s\n",
           p->healthy_deadline_s, (long long)p->warmup_steps, p->warmup_time_s, p->warmup_max_s,
           p->min_healthy_time_s, p->max_probation_time_s, p->tolerance, p->confidence,
           p->on_inconclusive_hold ? "hold" : "revert", p->progress_deadline_s,
           p->auto_revert ? "true" : "false");
    struct sample_set *bs = load_base_samples(d);
    json_t *base = json_null();
    if (bs) {
        printf("baseline: %s, %d samples, median %.1f Ktok/s; fail when the whole interval of the "
               "change lies below -%.0f%%\n", ui_short(bs->release, sid), bs->n,
               probation_median(bs->ktok_s, bs->n), p->tolerance * 100);
        base = json_pack("{s:s,s:i,s:f}", "release", bs->release, "samples", bs->n, "ktok_s",
                         probation_median(bs->ktok_s, bs->n));
    } else if (d->baseline > 0) {
        printf("baseline: %.1f Ktok/s (one number, no samples); tolerance -%.0f%%\n", d->baseline,
               p->tolerance * 100);
        base = json_pack("{s:n,s:i,s:f}", "release", "samples", 0, "ktok_s", d->baseline);
    } else
        printf("baseline: none on these containers yet (throughput rule skipped; this release "
               "sets it)\n");
    free(bs);
    json_t *pol = json_pack("{s:f,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:s,s:f,s:b}", "healthy_deadline_s",
                            p->healthy_deadline_s, "warmup_steps", (json_int_t)p->warmup_steps,
                            "warmup_time_s", p->warmup_time_s, "warmup_max_s", p->warmup_max_s,
                            "min_healthy_time_s", p->min_healthy_time_s, "max_probation_time_s",
                            p->max_probation_time_s, "tolerance", p->tolerance, "confidence",
                            p->confidence, "on_inconclusive", p->on_inconclusive_hold ? "hold" : "revert",
                            "progress_deadline_s", p->progress_deadline_s, "auto_revert",
                            p->auto_revert);
    json_t *plan = json_pack("{s:s,s:s,s:s,s:o,s:I,s:I,s:i,s:i,s:o,s:i,s:o,s:o,s:o}", "job", j->name,
                             "release", d->id, "name", d->name, "env",
                             plan_id(d->has_env ? d->env.id : NULL), "files",
                             (json_int_t)d->rs.m->nfiles, "bytes", (json_int_t)d->blob_size, "nodes",
                             j->ncts, "nproc_per_node", j->nproc_per_node, "command", cmd,
                             "unreachable", unreachable, "containers", cts, "policy", pol,
                             "baseline", base);
    if (out && plan)
        json_array_append_new(out, plan);
    else
        json_decref(plan);
    return unreachable;
}

/* What deploy and rollback share: the job, its labels and baseline key, the scratch status.
 * An exit code on failure (logged), 0 on success; undo with deploy_done(). */
static int deploy_init(struct deploy *d, struct fleet *f, const char *job, bool rollback)
{
    *d = (struct deploy){ .f = f, .inv = f->inv, .baseline = -1, .rollback = rollback };
    d->job = deploy_pick_job(f->inv, job);
    if (!d->job)
        return EXIT_USAGE;
    d->st = malloc(sizeof *d->st);
    d->pre_js = calloc((size_t)d->job->ncts, sizeof *d->pre_js);
    if (!d->st || !d->pre_js)
        return EXIT_FAIL;
    for (int i = 0; i < d->job->ncts; i++)
        d->labels[i] = d->job->cts[i].label;
    inventory_job_key(d->job, d->key, sizeof d->key);
    return 0;
}

/* The job's deploy lease in every container (agent/lease.h): the fleet, not this machine,
 * says who is deploying.  ttl: how long it holds without a renewal.  -EBUSY when another
 * operator holds it somewhere (the agent's line names the holder and its age): the leases taken
 * so far are given back.  An agent without leases (older) is let through with a warning. */
static void leases_release(struct deploy *d);

/* leases_take's and leases_release's fan-out: container i's `lease take`; rc = the agent's exit status (-errno: not
 * asked), err = its reason, or the takeover line when it took over an expired lease. */
static int lease_done(struct ct_fan *cf, int i, int r, struct exec_result *res, const char *why)
{
    (void)why;
    if (!res)
        return why ? -EIO : -ENOTCONN; /* unreachable: the survey says so */
    (void)r;
    int st = res->status;
    char *out = res->out;
    size_t doc = 0, doc_len = 0, lines = res->out_len;
    struct deploy *d = cf->d;
    struct agent_status *sc = cf->scratch[ct_fan_slot(cf, i)];
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
        }
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
    if (pct_run_agent(c, ct, cf->batch_args, cf->batch_timeout_s, &res) < 0)
        return lease_done(cf, i, -EIO, NULL, c->err);
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
                     "taken over (%d container%s)", j->name, dead[first], taken, taken == 1 ? "" : "s");
        if (older)
            snprintf(why, why_sz, "; that drover is no longer running on this host, but %d agent(s) "
                     "are older than lease take --take-over (drover install updates them): the "
                     "lease frees itself after its TTL", older);
    }
out:
    free(dead);
    free(again);
}

/* Take or renew the lease in every container, every host at once.  with_status: the status
 * document comes with it (`lease take --status`) and is kept for the survey that follows
 * (d->pre); an agent older than --status (exit 2, nothing taken) is asked again without. */
static int leases_take(struct deploy *d, double ttl, bool with_status)
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
    if (with_status && cf->batch_timeout_s < FLEET_STATUS_TIMEOUT_S)
        cf->batch_timeout_s = FLEET_STATUS_TIMEOUT_S;
    for (int k = 0; with_status && k < INV_MAX_HOSTS; k++)
        if (!(cf->scratch[k] = malloc(sizeof *cf->scratch[k])))
            break; /* no document kept there: the survey asks */
    for (int i = 0; i < d->job->ncts; i++)
        d->pre[i] = 0;
    double asked = time_mono(); /* no agent's TTL began before this */
    (void)ct_fan_run(cf);
    int older = 0;
    for (int i = 0; with_status && i < d->job->ncts; i++)
        older += cf->rc[i] == AGENT_EXIT_USAGE;
    if (older && (again = calloc(1, sizeof *again))) {
        /* agents older than --status: the plain lease there (the survey asks their status) */
        log_debug("job '%s': %d agent(s) without lease take --status (older than this drover: drover "
                  "install updates them): lease and status asked separately there", d->job->name, older);
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
            log_warn("%s: no deploy lease (%s)%s", ct->label, cf->err[i],
                     st == AGENT_EXIT_USAGE ? "; this agent is older than leases: drover install" : "");
            continue;
        }
        if (busy < 0)
            busy = i;
    }
    /* Ctrl-C while the takes ran: an agent whose answer was abandoned may hold the lease already
     * (`lease take --status` takes it, then asks its daemon): give it back there too */
    for (int i = 0; interrupted && i < d->job->ncts; i++)
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
static void leases_release(struct deploy *d)
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
static double lease_ttl(const struct deploy *d)
{
    return d->job->policy.lease_ttl_s;
}

/* The job's lock (state.h) and its deploy lease in every container: an fd to close, or -1
 * with the error logged. */
static int deploy_lock(struct deploy *d)
{
    int lock = state_lock_job(d->inv->state_dir, d->job->name);
    if (lock == -EBUSY) {
        log_error("another drover is deploying or rolling back job '%s' (lock in '%s')",
                  d->job->name, d->inv->state_dir);
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
    return lock;
}

static void deploy_done(struct deploy *d, int lock)
{
    double t = time_mono();
    leases_release(d);
    log_debug("deploy step: lease given back in %.2fs", time_mono() - t);
    if (lock >= 0)
        close(lock);
    if (d->has_rs)
        relsrc_done(&d->rs);
    if (d->has_env)
        relsrc_done(&d->env);
    free(d->base);
    free(d->st);
    free(d->pre_js);
}

/* Before anything is pushed or stopped: the release this deploy would revert to (the job's good
 * release) must be in every container's store and pass verification there, or a failed deploy
 * would leave the job down (`REVERT FAILED ... not in the store`).  force: go on, saying so. */
/* check_rollback_target's fan-out: 0 verified; -EIO with err = the line to log. */
static int verify_done(struct ct_fan *cf, int i, int r, struct exec_result *res, const char *why)
{
    struct deploy *d = cf->d;
    const struct inv_ct *ct = &d->job->cts[i];
    char sid[RELEASE_SHORT_LEN + 1];
    (void)r;
    if (!res && !why)
        return 0; /* survey already reached every container */
    if (!res) {
        snprintf(cf->err[i], sizeof cf->err[i], "%s: cannot verify the rollback target %s: %s",
                 ct->label, ui_short(d->good, sid), why);
        return -EIO;
    }
    if (res->status == 0)
        return 0;
    char reason[512];
    snprintf(cf->err[i], sizeof cf->err[i], "%s: the rollback target %s %s: %s", ct->label,
             ui_short(d->good, sid),
             res->status == AGENT_EXIT_NO_RELEASE ? "is not in the store" : "fails verification",
             exec_result_reason(res, reason, sizeof reason));
    return -EIO;
}

static int verify_one(struct ct_fan *cf, int i)
{
    struct deploy *d = cf->d;
    const struct inv_ct *ct = &d->job->cts[i];
    struct conn *c;
    int r = fleet_conn(d->f, ct->host, &c);
    if (r < 0)
        return verify_done(cf, i, r, NULL, NULL);
    struct exec_result res;
    if (pct_run_agent(c, ct, cf->batch_args, cf->batch_timeout_s, &res) < 0)
        return verify_done(cf, i, -EIO, NULL, c->err);
    r = verify_done(cf, i, 0, &res, NULL);
    exec_result_done(&res);
    return r;
}

static int check_rollback_target(struct deploy *d, bool force)
{
    if (!d->good[0] || !strcmp(d->good, d->id))
        return 0;
    char sid[RELEASE_SHORT_LEN + 1];
    int bad = 0;
    struct ct_fan *cf = calloc(1, sizeof *cf);
    if (!cf)
        return -ENOMEM;
    const char *argv[] = { "release", "verify", d->good, NULL };
    cf->d = d;
    cf->fn = verify_one;
    cf->done = verify_done;
    cf->batch_args = argv;
    cf->batch_timeout_s = d->inv->exec_timeout_s + 60;
    cf->batch_what = "release verify";
    (void)ct_fan_run(cf); /* every host at once, a host's containers at once */
    for (int i = 0; i < d->job->ncts; i++)
        if (cf->rc[i] < 0) {
            log_error("%s", cf->err[i]);
            bad++;
        }
    free(cf);
    if (!bad)
        return 0;
    if (!force) {
        log_error("deploy refused: if %s failed probation, job '%s' could not go back to its good "
                  "release %s in %d container(s); nothing was pushed or stopped.  Deploy %s again "
                  "to put it back, or deploy with --force to go on without a rollback target there",
                  d->sid, d->job->name, ui_short(d->good, sid), bad, ui_short(d->good, sid));
        return -ENOENT;
    }
    log_warn("--force: deploying %s without a usable rollback target in %d container(s): if it "
             "fails probation, job '%s' stays down there until a good release is deployed",
             d->sid, bad, d->job->name);
    return 0;
}

void deploy_unsurveyed_message(char *buf, size_t sz, const char *err, bool agent_failed, const char *job)
{
    if (agent_failed)
        snprintf(buf, sz, "%s; nothing was pushed or stopped (is the agent installed? drover install "
                 "--job %s)", err, job);
    else
        snprintf(buf, sz, "%s; nothing was pushed or stopped", err);
}

/* The debug log's timing of deploy_run's steps (drover -v): seconds since *t, which restarts. */
static void deploy_step_done(double *t, const char *what)
{
    double now = time_mono();
    log_debug("deploy step: %s in %.2fs", what, now - *t);
    *t = now;
}

int deploy_run(struct fleet *f, const struct deploy_opts *o)
{
    struct deploy d;
    int ret = deploy_init(&d, f, o->job, false);
    if (ret)
        return ret;
    ret = EXIT_FAIL;
    int lock = -1;
    char err[2048] = "";
    if (stage_bundle(&d, o->dir, o->env_dir) < 0)
        goto out;
    /* the release is known to be deployable (its command is in it): now every host of the job
     * at once (cmd_deploy connects nothing first for one job, so a release without its command
     * is named without a connect timeout or a host key refusal before it, and exits 1) */
    bool need[INV_MAX_HOSTS];
    fleet_hosts_of(f->inv, d.job, need);
    (void)fleet_connect_all(f, need);
    char brel[RELEASE_ID_LEN + 1];
    if (state_baseline_get(d.inv->state_dir, d.key, &d.baseline, brel) < 0)
        d.baseline = -1;
    if (o->dry_run) {
        int unreachable = print_plan(&d, o->plan_out);
        ret = f->key_refused ? EXIT_HOSTKEY : unreachable ? EXIT_FAIL : EXIT_OK;
        goto out;
    }
    double tstep = time_mono();
    /* Ctrl-C from the lease on: the lease's call also asks each agent's status (lease take
     * --status), which waits on an agent daemon that does not answer as the survey did */
    interrupt_handlers(on_sigint_send);
    lock = deploy_lock(&d);
    if (lock < 0)
        goto out;
    deploy_step_done(&tstep, "lease taken");
    if (interrupted)
        goto interrupted_before_switch;
    bool all_current = false;
    int sr = survey(&d, true, &all_current, err, sizeof err);
    deploy_step_done(&tstep, "survey");
    if (interrupted)
        goto interrupted_before_switch;
    if (sr < 0) {
        ret = f->key_refused ? EXIT_HOSTKEY : EXIT_FAIL;
        if (!f->key_refused) {
            char msg[2400];
            deploy_unsurveyed_message(msg, sizeof msg, err, d.agent_failed, d.job->name);
            log_error("%s", msg);
        }
        goto out;
    }
    if (all_current) {
        printf("release %s (%s) is already current and promoted with this job spec for job '%s' "
               "on every container; nothing to do\n", d.sid, d.name, d.job->name);
        ret = EXIT_OK;
        goto out;
    }
    if (d.spec_change[0] && (d.spec_only || strncmp(d.spec_change, "unknown", 7) != 0)) {
        /* said at once, and in the history row: a relaunch of the same release is otherwise a
         * puzzle ("why did my gang restart?") */
        snprintf(d.spec_note, sizeof d.spec_note, "job spec changed: %s", d.spec_change);
        printf("release %s (%s), %s%s\n", d.sid, d.name, d.spec_note,
               d.spec_only ? " (the same release: relaunched with the new spec, on probation)" : "");
    }
    int cr = check_rollback_target(&d, o->force);
    deploy_step_done(&tstep, "rollback target checked");
    if (interrupted)
        goto interrupted_before_switch;
    if (cr < 0)
        goto out;
    /* renew: the push may take a while.  Not when the lease was taken moments ago (under a tenth
     * of its TTL): a renewal then would move its expiry by those moments only, and costs a
     * round trip into every container */
    if (time_mono() - d.lease_taken_at >= lease_ttl(&d) / 10) {
        (void)leases_take(&d, lease_ttl(&d), false);
        deploy_step_done(&tstep, "lease renewed");
    }
    if (gpu_check_cts(&d, o->force, err, sizeof err) == 0 &&
        push_release(&d, o->stage_only, err, sizeof err) == 0 && o->stage_only) {
        deploy_step_done(&tstep, "pushed");
        printf("release %s (%s) is verified in every container of job '%s' (staged only: nothing "
               "switched)\n", d.sid, d.name, d.job->name);
        ret = EXIT_OK;
        goto out;
    }
    if (interrupted && !strstr(err, "interrupted by the operator"))
        goto interrupted_before_switch; /* push_release's own line says how far the staging got */
    if (err[0] || preflight_cts(&d, err, sizeof err) < 0 || interrupted) {
        ret = f->key_refused ? EXIT_HOSTKEY : EXIT_FAIL;
        exec_interrupted = 0; /* the lease and the history record below are sent */
        if (interrupted && !strstr(err, "interrupted by the operator"))
            snprintf(err, sizeof err, "interrupted by the operator before the switch (during the preflight)");
        log_error("%s", err);
        fprintf(stderr, "deploy of %s stopped before anything was switched: the running release "
                "keeps running untouched\n", d.sid);
        history_record(&d, "aborted", err, -1);
        goto out;
    }
    const struct inv_policy *pol = &d.job->policy;
    if (o->analysis_only && !d.good[0]) {
        log_error("--analysis-only needs a good release of job '%s' to put back afterwards, and "
                  "there is none: deploy it normally", d.job->name);
        ret = EXIT_USAGE;
        goto out;
    }
    d.analysis = o->analysis_only;
    double pdl = pol->progress_deadline_s + pol->healthy_deadline_s + 120;
    if (leases_take(&d, lease_ttl(&d), false) < 0) { /* renew before anything is stopped */
        log_error("deploy of %s stopped before anything was switched: its deploy lease of job '%s' "
                  "was taken over while it pushed (it expired after %.0f s without renewal)", d.sid,
                  d.job->name, lease_ttl(&d));
        history_record(&d, "aborted", "deploy lease lost before the switch", -1);
        goto out;
    }
    if (pol->on_inconclusive_hold && !d.analysis)
        pdl += pol->hold_time_s; /* a held release waits for the operator this long */
    if (interrupted)
        goto interrupted_before_switch;
    interrupt_handlers(on_sigint);
    char reason[PROBATION_REASON_MAX + 64];
    d.switching = true;
    int ar = activate_cts(&d, pdl, err, sizeof err);
    if (ar == -ECANCELED) {
        /* nothing of the new release ran: no probation, no revert, nothing marked bad */
        printf("%sSWITCH ABORTED%s for job '%s': %s\n", ui_red(stdout), ui_reset(stdout), d.job->name, err);
        history_record(&d, "aborted", err, -1);
        ret = EXIT_FAIL;
        goto restore;
    }
    if (ar < 0) {
        log_error("%s", err);
        snprintf(reason, sizeof reason, "activate failed: %.400s", err);
        goto failed;
    }
    /* healthy_deadline counts from the moment the whole gang runs the new release: each
     * activation waits for its old gang to checkpoint and stop, which may take a while. */
    double t0 = time_mono();
    d.base = load_base_samples(&d);
    char bsid[RELEASE_SHORT_LEN + 1];
    int world = d.job->ncts * d.job->nproc_per_node, base_ranks = d.base ? d.base->ranks : 0;
    if (d.base && !probation_baseline_fits(d.base, world)) {
        /* its one-number median is the same measurement: neither is compared */
        (void)ui_short(d.base->release, bsid);
        free(d.base);
        d.base = NULL;
        d.baseline = -1;
        fprintf(stderr, "probation: the baseline %s was measured with %d ranks and this deploy runs %d "
                "(nproc_per_node changed): its Ktok/s are not comparable, so the throughput rule is "
                "skipped for this deploy, and its samples become the baseline\n", bsid, base_ranks, world);
    } else if (d.base)
        fprintf(stderr, "probation: baseline %s: %d samples (median %.1f Ktok/s); fail when the "
                "whole %.0f%% interval of the change lies below -%.0f%%\n", ui_short(d.base->release, bsid),
                d.base->n, probation_median(d.base->ktok_s, d.base->n), pol->confidence * 100,
                pol->tolerance * 100);
    else if (d.baseline > 0)
        fprintf(stderr, "probation: baseline %.1f Ktok/s (one number, no samples), tolerance "
                "-%.0f%%\n", d.baseline, pol->tolerance * 100);
    else
        fprintf(stderr, "probation: no baseline on these containers yet: the throughput rule is "
                "skipped for this deploy\n");
    struct probation *p;
    if (probation_new(pol, d.job->name, d.id, d.job->ncts, d.labels, d.job->nproc_per_node,
                      d.baseline, false, t0, &p) < 0)
        goto restore;
    if (d.base)
        (void)probation_set_baseline_samples(p, d.base);
    for (int i = 0; i < d.job->ncts; i++) {
        struct spec_digest sd;
        if (!d.spec_unaware[i] && jobspec_digest(d.job, i, &sd) == 0)
            probation_expect_spec(p, i, sd.hex);
    }
    enum probation_verdict v = watch_probation(&d, p, "probation");
    if (d.lease_lost) {
        /* never promote or revert on top of the operator who holds the job now */
        probation_free(p);
        char what[200];
        snprintf(what, sizeof what, "the probation of %s", d.sid);
        ret = taken_over(&d, what);
        goto restore;
    }
    d.stopped_by_operator = interrupted && v == PROBATION_PENDING;
    if (d.stopped_by_operator)
        snprintf(reason, sizeof reason, "interrupted by the operator during probation (no verdict)");
    else
        snprintf(reason, sizeof reason, "%s", probation_reason(p));
    if (probation_note(p)[0] && v == PROBATION_PASS)
        fprintf(stderr, "%s\n", probation_note(p));
    if (d.analysis) {
        printf("verdict for %s (%s), job '%s' (analysis only): %s: %s\n", d.sid, d.name,
               d.job->name, interrupted && v == PROBATION_PENDING ? "interrupted" : probation_verdict_name(v),
               reason);
        probation_free(p);
        d.no_bad_mark = v == PROBATION_PASS || d.stopped_by_operator;
        int r = revert_all(&d, reason);
        if (r == EXIT_REVERTED)
            ret = v == PROBATION_PASS ? EXIT_OK : EXIT_REVERTED;
        else
            ret = r;
        goto restore;
    }
    if (v == PROBATION_PASS) {
        double k = probation_ktok_s(p);
        struct sample_set *ss = pass_samples(&d, p);
        if (promote_all(&d, k, ss) < 0) {
            fprintf(stderr, "%s%spromote failed on some containers: %s passed probation but is not "
                    "marked good everywhere; the agents will revert it at the probation deadline "
                    "(%.0fs). Run the deploy again.%s\n", ui_bold(stderr), ui_red(stderr), d.sid,
                    pdl, ui_reset(stderr));
            history_record(&d, "failed", "promote failed", k);
            ret = EXIT_FAIL;
        } else {
            if (k > 0 && state_baseline_set(d.inv->state_dir, d.key, d.id, k) < 0)
                log_warn("cannot record the baseline in '%s'", d.inv->state_dir);
            if (ss && state_samples_set(d.inv->state_dir, d.key, false, ss) < 0)
                log_warn("cannot cache the baseline samples in '%s'", d.inv->state_dir);
            printf("%spromoted%s %s (%s) for job '%s': %s\n", ui_green(stdout), ui_reset(stdout),
                   d.sid, d.name, d.job->name, reason);
            history_record(&d, "promoted", reason, k);
            ret = EXIT_OK;
            /* Collection after a promote: this job's hosts; every job's ways back are kept. */
            const char *keep[] = { d.id, d.good, d.current, d.previous, d.has_env ? d.env.id : NULL };
            if (objsync_gc_fleet(d.f, keep, ARRAY_SIZE(keep), d.f->inv->keep, true, d.job) < 0)
                log_warn("host store GC after the promote did not run everywhere (drover gc retries)");
        }
        free(ss);
        probation_free(p);
        goto restore;
    }
    if ((v == PROBATION_INCONCLUSIVE || v == PROBATION_NODATA) && pol->on_inconclusive_hold) {
        struct sample_set *ss = pass_samples(&d, p);
        (void)state_samples_drop(d.inv->state_dir, d.key, true);
        if (ss && state_samples_set(d.inv->state_dir, d.key, true, ss) < 0)
            log_warn("cannot keep the held release's samples in '%s'", d.inv->state_dir);
        printf("%sHELD%s %s (%s) for job '%s': %s\n", ui_bold(stdout), ui_reset(stdout), d.sid,
               d.name, d.job->name, reason);
        printf("on_inconclusive = hold: %s keeps running unpromoted; decide with `drover promote "
               "--job %s` or `drover revert --job %s` (the agents revert it on their own in "
               "%.0fs)\n", d.sid, d.job->name, d.job->name, pdl);
        history_record(&d, "held", reason, probation_ktok_s(p));
        free(ss);
        probation_free(p);
        ret = EXIT_HELD;
        goto restore;
    }
    probation_free(p);
failed:
    if (env_fault_seen(&d, reason, reason, sizeof reason)) {
        /* The agent stopped the gang for a device or driver fault: the environment, not the
         * release.  Reverting would blame the release and run the good one on the same broken
         * GPU; the container stays marked until gpu-check passes there. */
        log_error("job '%s' stopped on an environment fault during probation: %s", d.job->name,
                  reason);
        printf("%sENVIRONMENT FAULT%s for job '%s' with %s (%s): %s; not reverted (the release is "
               "not to blame): fix the container's GPU environment (drover-agent gpu-check), then "
               "deploy again\n", ui_red(stdout), ui_reset(stdout), d.job->name, d.sid, d.name,
               reason);
        history_record(&d, "failed", reason, -1);
        ret = EXIT_ENV_FAULT;
        goto restore;
    }
    if (d.stopped_by_operator) {
        /* No verdict: not a probation failure.  The history row says "aborted", and the
         * agents' revert leaves the release unmarked (revert --no-mark): a later rollback or
         * deploy may choose it without --force. */
        printf("%sINTERRUPTED%s %s (%s) for job '%s': %s; putting the good release back\n",
               ui_bold(stdout), ui_reset(stdout), d.sid, d.name, d.job->name, reason);
    } else {
        log_error("release %s failed probation: %s", d.sid, reason);
        printf("%sFAILED%s %s (%s) for job '%s': %s\n", ui_red(stdout), ui_reset(stdout), d.sid,
               d.name, d.job->name, reason);
    }
    if (!pol->auto_revert) {
        printf("auto_revert is off: %s keeps running; `drover rollback --job %s` returns to %s\n",
               d.sid, d.job->name, d.good[0] ? d.good : "(no good release)");
        history_record(&d, d.stopped_by_operator ? "aborted" : "failed", reason, -1);
        ret = EXIT_NOT_REVERTED;
        goto restore;
    }
    d.no_bad_mark = d.stopped_by_operator;
    for (int i = 0; i < d.job->ncts; i++)
        if (d.ct_stopped[i][0]) {
            /* a container stopped under the gang: not the release's failure */
            d.no_bad_mark = true;
            printf("%s was stopped under the gang: %s is not marked bad; the other containers go "
                   "back to the good release\n", d.job->cts[i].label, d.sid);
        }
    ret = revert_all(&d, reason);
restore:
    interrupt_handlers(NULL);
    goto out;
interrupted_before_switch:
    exec_interrupted = 0; /* the lease and the history record below are sent */
    send_interrupted = 0;
    log_error("deploy of %s interrupted by the operator before the switch: nothing was stopped or "
              "switched, the running release keeps running untouched", d.sid);
    history_record(&d, "aborted", "interrupted by the operator before the switch", -1);
    ret = EXIT_FAIL;
out:
    interrupt_handlers(NULL);
    exec_interrupted = 0; /* a second Ctrl-C during the record above: still give the lease back */
    send_interrupted = 0;
    deploy_done(&d, lock);
    return ret;
}

int deploy_rollback(struct fleet *f, const char *job, const char *to, bool force, bool now)
{
    struct deploy d;
    int ret = deploy_init(&d, f, job, true);
    if (ret)
        return ret;
    ret = EXIT_FAIL;
    d.no_confirm = now;
    char err[2048];
    char sid[RELEASE_SHORT_LEN + 1];
    /* Ctrl-C before the switch, from the lease (with its status) on: as in deploy_run, give the
     * lease back and record it */
    interrupt_handlers(on_sigint_send);
    int lock = deploy_lock(&d);
    if (lock < 0)
        goto out;
    if (interrupted)
        goto interrupted_before_switch;
    bool all_current;
    int sr = survey(&d, false, &all_current, err, sizeof err);
    if (interrupted)
        goto interrupted_before_switch;
    if (sr < 0) {
        ret = f->key_refused ? EXIT_HOSTKEY : EXIT_FAIL;
        goto out;
    }
    if (to) { /* a release named by the operator: one of those this job ran */
        const char *known[2 + STATUS_MAX_MARKS + 16];
        int nk = 0, hits = 0;
        known[nk++] = d.previous;
        known[nk++] = d.good;
        for (int k = 0; k < d.ngoods; k++)
            known[nk++] = d.goods[k];
        for (int k = 0; k < d.nbad; k++)
            known[nk++] = d.bad[k];
        char pick[RELEASE_ID_LEN + 1] = "";
        for (int k = 0; k < nk; k++)
            if (known[k][0] && !strncmp(known[k], to, strlen(to)) && strcmp(known[k], pick) != 0) {
                if (pick[0])
                    hits = 2; /* two different releases match */
                else
                    hits = 1;
                (void)str_copy(pick, sizeof pick, known[k]);
            }
        if (strlen(to) < 6 || hits != 1) {
            log_error("--to '%s' names %s of the releases job '%s' ran (good, previous, promoted, "
                      "bad); give at least 6 hex digits of one", to, hits ? "more than one" : "none",
                      d.job->name);
            ret = EXIT_USAGE;
            goto out;
        }
        if (deploy_is_bad(&d, pick) && !force) {
            log_error("release %s failed probation for job '%s' (marked bad); roll back to it only "
                      "with --force", ui_short(pick, sid), d.job->name);
            ret = EXIT_USAGE;
            goto out;
        }
        if (deploy_is_bad(&d, pick))
            log_warn("--force: rolling back to %s, which failed probation for job '%s'",
                     ui_short(pick, sid), d.job->name);
        (void)str_copy(d.earlier_good, sizeof d.earlier_good, pick);
    } else if (d.good[0] && (strcmp(d.current, d.good) != 0 || d.off_good_spec)) {
        /* The job runs something that was never promoted (a release, or the good release with a
         * job spec that was not): the agents go back to the good release with its good spec. */
        (void)str_copy(d.id, sizeof d.id, d.current);
        ui_short(d.id, d.sid);
        (void)str_copy(d.name, sizeof d.name, "rollback");
        if (interrupted)
            goto interrupted_before_switch;
        interrupt_handlers(on_sigint);
        ret = revert_all(&d, "operator rollback");
        ret = ret == EXIT_REVERTED ? EXIT_OK : ret;
        goto out;
    }
    /* The job runs its good release: go back to the newest earlier good one (never a release
     * that failed probation, whatever "previous" is). */
    if (!d.earlier_good[0] || strcmp(d.earlier_good, d.current) == 0) {
        log_error("job '%s' runs its last good release %s and has no earlier good release to roll "
                  "back to%s", d.job->name, ui_short(d.current, sid),
                  d.nbad ? " (releases that failed probation are not rollback targets; name one "
                           "with --to ID --force)" : "");
        goto out;
    }
    (void)str_copy(d.id, sizeof d.id, d.earlier_good);
    ui_short(d.id, d.sid);
    (void)str_copy(d.name, sizeof d.name, "rollback");
    fprintf(stderr, "rolling job '%s' back from %s to the earlier good release %s\n", d.job->name,
            ui_short(d.current, sid), d.sid);
    const struct inv_policy *pol = &d.job->policy;
    double pdl = pol->progress_deadline_s + pol->healthy_deadline_s + 120;
    if (interrupted)
        goto interrupted_before_switch;
    interrupt_handlers(on_sigint);
    d.switching = true;
    int ar = activate_cts(&d, pdl, err, sizeof err);
    if (ar == -ECANCELED) {
        printf("%sROLLBACK ABORTED%s for job '%s': %s\n", ui_red(stdout), ui_reset(stdout), d.job->name, err);
        history_record(&d, "aborted", err, -1);
        ret = EXIT_FAIL;
        goto out;
    }
    if (ar < 0) {
        log_error("%s", err);
        fprintf(stderr, "%s%sROLLBACK FAILED for job '%s': %s; look with `drover status`%s\n",
                ui_bold(stderr), ui_red(stderr), d.job->name, err, ui_reset(stderr));
        history_record(&d, "revert-failed", err, -1);
        ret = EXIT_REVERT_FAILED;
        goto out;
    }
    char msg[700];
    if (now)
        snprintf(msg, sizeof msg, "%s activated without analysis (--now)", d.sid);
    int cr = now ? 0 : confirm_recovery(&d, d.id, msg, sizeof msg);
    if (d.lease_lost) {
        ret = taken_over(&d, "the rollback's confirmation");
        goto out;
    }
    if (cr == -EINTR) {
        /* activated everywhere, not promoted: the agents return to the good release at the
         * probation deadline unless the operator promotes it */
        char gsid[RELEASE_SHORT_LEN + 1];
        size_t n = strlen(msg);
        snprintf(msg + n, sizeof msg - n, ": %s runs unpromoted; `drover promote --job %s` keeps "
                 "it, or the agents return to %s at its probation deadline (%.0f s)", d.sid,
                 d.job->name, d.good[0] ? ui_short(d.good, gsid) : "no release", pdl);
        fprintf(stderr, "%sROLLBACK NOT CONFIRMED%s for job '%s': %s\n", ui_bold(stderr),
                ui_reset(stderr), d.job->name, msg);
        history_record(&d, "aborted", msg, -1);
        ret = EXIT_FAIL;
        goto out;
    }
    if (cr < 0 || promote_all(&d, -1, NULL) < 0) {
        fprintf(stderr, "%s%sROLLBACK FAILED for job '%s': %s%s\n", ui_bold(stderr), ui_red(stderr),
                d.job->name, msg, ui_reset(stderr));
        history_record(&d, "revert-failed", msg, -1);
        ret = EXIT_REVERT_FAILED;
        goto out;
    }
    printf("rolled job '%s' back to %s: %s\n", d.job->name, d.sid, msg);
    /* history: result "rollback" with previous = the release we went back to */
    (void)str_copy(d.good, sizeof d.good, d.id);
    history_record(&d, "rollback", "operator rollback", -1);
    ret = EXIT_OK;
    goto out;
interrupted_before_switch:
    exec_interrupted = 0; /* the lease and the history record below are sent */
    send_interrupted = 0;
    log_error("rollback of job '%s' interrupted by the operator before the switch: nothing was "
              "stopped or switched, the running release keeps running untouched", d.job->name);
    history_record(&d, "aborted", "rollback interrupted by the operator before the switch", -1);
    ret = EXIT_FAIL;
out:
    interrupt_handlers(NULL);
    exec_interrupted = 0; /* a second Ctrl-C during the record above: still give the lease back */
    send_interrupted = 0;
    deploy_done(&d, lock);
    return ret;
}

int deploy_decide_held(struct fleet *f, const char *job, bool promote)
{
    struct deploy d;
    int ret = deploy_init(&d, f, job, false);
    if (ret)
        return ret;
    ret = EXIT_FAIL;
    char err[2048];
    int lock = deploy_lock(&d);
    if (lock < 0)
        goto out;
    bool all_current;
    if (survey(&d, false, &all_current, err, sizeof err) < 0) {
        ret = f->key_refused ? EXIT_HOSTKEY : EXIT_FAIL;
        goto out;
    }
    if (!d.current[0] || (strcmp(d.current, d.good) == 0 && !d.off_good_spec)) {
        log_error("job '%s' runs its good release: nothing is held to %s", d.job->name,
                  promote ? "promote" : "revert");
        goto out;
    }
    (void)str_copy(d.id, sizeof d.id, d.current);
    ui_short(d.id, d.sid);
    (void)str_copy(d.name, sizeof d.name, promote ? "promote" : "revert");
    if (!promote) {
        ret = revert_all(&d, "reverted by the operator (held release)");
        ret = ret == EXIT_REVERTED ? EXIT_OK : ret;
        goto out;
    }
    struct sample_set *ss = malloc(sizeof *ss);
    if (ss && (state_samples_get(d.inv->state_dir, d.key, true, ss) < 0 ||
               strcmp(ss->release, d.id) != 0)) {
        free(ss);
        ss = NULL;
    }
    double k = ss ? probation_median(ss->ktok_s, ss->n) : -1;
    if (promote_all(&d, k, ss) < 0) {
        history_record(&d, "failed", "promote by the operator failed", k);
        free(ss);
        goto out;
    }
    if (ss) {
        if (state_baseline_set(d.inv->state_dir, d.key, d.id, k) < 0 ||
            state_samples_set(d.inv->state_dir, d.key, false, ss) < 0)
            log_warn("cannot record the baseline in '%s'", d.inv->state_dir);
        (void)state_samples_drop(d.inv->state_dir, d.key, true);
    }
    printf("promoted %s for job '%s' by hand%s\n", d.sid, d.job->name,
           ss ? ": its probation samples are the new baseline" : " (no samples kept: the baseline "
                "stays the last measured one)");
    history_record(&d, "promoted", "promoted by the operator (held release)", k);
    free(ss);
    ret = EXIT_OK;
out:
    deploy_done(&d, lock);
    return ret;
}

int deploy_wave(struct fleet *f, const struct deploy_opts *o, const char *const *jobs, int njobs)
{
    const char *moved[INV_MAX_JOBS];
    int nmoved = 0;
    for (int i = 0; i < njobs; i++)
        if (!deploy_pick_job(f->inv, jobs[i]))
            return EXIT_USAGE;
    int canary = inventory_find_job(f->inv, jobs[0])->policy.canary;
    for (int i = 0; i < njobs; i++) {
        struct deploy_opts one = *o;
        one.job = jobs[i];
        if (!o->dry_run)
            fprintf(stderr, "wave: job '%s' (%d of %d%s)\n", jobs[i], i + 1, njobs,
                    i < canary ? ", canary" : "");
        int r = deploy_run(f, &one);
        if (o->dry_run) {
            if (r != EXIT_OK)
                return r;
            continue;
        }
        if (r == EXIT_OK) {
            moved[nmoved++] = jobs[i];
            continue;
        }
        printf("wave stopped at job '%s'%s\n", jobs[i],
               nmoved ? "; rolling back the jobs it already moved" : "");
        int ret = r;
        for (int k = nmoved - 1; k >= 0; k--)
            if (deploy_rollback(f, moved[k], NULL, false, false) != EXIT_OK)
                ret = EXIT_REVERT_FAILED;
        return ret;
    }
    return EXIT_OK;
}
