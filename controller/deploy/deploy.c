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
#include "controller/deploy/deploy_int.h"
#include "controller/notify.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/agentcli.h"
#include "common/bundle.h"
#include "common/log.h"
#include "common/nvdriver.h"
#include "common/samples.h"
#include "common/sha256.h"
#include "common/trainexit.h"
#include "common/util.h"
#include "controller/transport/fanout.h"
#include "controller/transport/pct.h"
#include "controller/deploy/jobspec.h"
#include "common/text.h"
#include "controller/deploy/holder.h"
#include "controller/deploy/probation.h"
#include "controller/deploy/revertplan.h"
#include "controller/cmd.h"
#include "controller/deploy/objsync.h"
#include "controller/transport/send.h"
#include "controller/deploy/state.h"
#include "controller/deploy/stopstart.h"

volatile sig_atomic_t deploy_interrupted, deploy_revert_interrupted;
/* set while revert_all runs: a Ctrl-C there is noted and said, never obeyed (it was silent) */
static volatile sig_atomic_t revert_in_flight;

void on_sigint(int sig)
{
    (void)sig;
    deploy_interrupted = 1;
    if (revert_in_flight) {
        deploy_revert_interrupted = 1; /* kept for the watch that follows, as said below */
        static const char m[] = "drover: interrupt noted: the revert under way goes on (stopping it would "
                                "leave the job without a gang); only the watch of its recovery ends\n";
        ssize_t r = write(STDERR_FILENO, m, sizeof m - 1); /* async-signal-safe */
        (void)r;
    }
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
        char why[512];
        log_error("%s", inventory_no_jobs(inv, why, sizeof why));
        return NULL;
    }
    char names[256] = "";
    size_t off = 0;
    for (int k = 0; k < inv->njobs && off < sizeof names; k++)
        off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", k ? ", " : "", inv->jobs[k].name);
    log_error("'%s' has %d jobs (%s): say which with --job NAME", inv->path, inv->njobs, names);
    return NULL;
}

/* history_record's fan-out: `history add` in container i, with the deploy lease given back in the
 * same call where give[i] (given[i] set where the agent said it did). */
struct history_arg {
    const char *const *argv, *const *argv_lease;
    const bool *give;
    bool *given;
};
static int history_one(struct ct_fan *cf, int i);

/* The record e (its job, previous and containers filled in here), in state_dir and every
 * container of the job; final: this run's outcome, whose record may give the lease back. */
static void history_put(struct deploy *d, struct history_entry *e, bool final);

void history_record(struct deploy *d, const char *result, enum history_reason code, const char *reason,
                    double ktok)
{
    struct history_entry e = { .time = time_wall(), .ktok_s = ktok, .baseline_ktok_s = d->baseline };
    (void)str_copy(e.release, sizeof e.release, d->id);
    if (d->rb_revert) { /* the release it went (or tried to go) back to first, as for any record */
        (void)str_copy(e.release, sizeof e.release, d->good);
        (void)str_copy(e.previous, sizeof e.previous, d->id);
    }
    (void)str_copy(e.name, sizeof e.name, d->name);
    (void)str_copy(e.result, sizeof e.result, result);
    e.reason_code = code;
    /* cut at a word, never inside a `command` (common/text.h), marked with an ellipsis */
    char *full = NULL;
    if (d->spec_note[0] && asprintf(&full, "%s; %s", d->spec_note, reason ? reason : "") < 0)
        full = NULL;
    (void)text_cut_words(full ? full : reason ? reason : "", NULL, e.reason, sizeof e.reason);
    free(full);
    history_put(d, &e, true);
}

bool history_tells_run(const struct history_entry *h, size_t n, const char *job, const struct job_status *js,
                       double now)
{
    /* the run's start on the wall clock, where the agent's figures date it: no restart since its
     * activation, so the generation's age is the run's (a few seconds' slack for clock skew
     * between this machine and the containers, whose records merge here) */
    double since = js->restarts == 0 && js->age_s >= 0 ? now - js->age_s - 5 : 0;
    double last_other = 0, last_own = -1;
    for (size_t k = 0; k < n; k++) {
        if (strcmp(h[k].job, job) != 0)
            continue;
        if (!strcmp(h[k].release, js->current))
            last_own = h[k].time > last_own ? h[k].time : last_own;
        else if (h[k].time > last_other)
            last_other = h[k].time;
    }
    return last_own >= since && last_own >= last_other;
}

void history_record_abandoned(struct deploy *d)
{
    const char *seen[INV_MAX_CTS];
    int nseen = 0;
    for (int i = 0; i < d->job->ncts; i++) {
        const struct job_status *js = d->sv_found[i] && d->sv_js ? &d->sv_js[i] : NULL;
        if (!js || !js->current[0] || !strcmp(js->current, js->good) || !strcmp(js->current, d->id))
            continue;
        bool again = false;
        for (int k = 0; k < nseen && !again; k++)
            again = !strcmp(seen[k], js->current);
        if (again)
            continue;
        seen[nseen++] = js->current;
        struct history_entry *h = NULL;
        size_t n = 0;
        survey_history_of(d, js->current, &h, &n);
        bool told = history_tells_run(h, n, d->job->name, js, time_wall());
        free(h);
        if (told)
            continue;
        struct history_entry e = { .time = time_wall(), .ktok_s = -1, .baseline_ktok_s = -1 };
        char sid[RELEASE_SHORT_LEN + 1];
        (void)str_copy(e.release, sizeof e.release, js->current);
        if (state_release_name(d->inv->state_dir, js->current, e.name) < 0)
            e.name[0] = '\0';
        (void)str_copy(e.result, sizeof e.result, "aborted");
        snprintf(e.reason, sizeof e.reason, "never decided: the deploy that started it ended without "
                 "a verdict or a record (its drover was killed or cut off during probation); "
                 "replaced by %s (%s)", d->sid, d->name);
        log_warn("job '%s': %s ran unpromoted with no record of how its deploy ended (that drover "
                 "died?): recorded as aborted, replaced by %s", d->job->name, ui_short(js->current, sid),
                 d->sid);
        history_put(d, &e, false);
    }
}

static void history_put(struct deploy *d, struct history_entry *ep, bool final)
{
    struct history_entry e = *ep;
    (void)str_copy(e.job, sizeof e.job, d->job->name);
    if (!e.previous[0]) /* the good release the job ran before, unless the record names it */
        (void)str_copy(e.previous, sizeof e.previous, d->good);
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
    if (cf && history_entry_format(&e, &line) == 0) {
        struct agent_argv a, al;
        agent_argv_init(&a);
        agent_argv_history_add(&a, d->job->name, line);
        agent_argv_init(&al);
        agent_argv_history_add(&al, d->job->name, line);
        agent_argv_history_lease_release(&al, d->holder);
        /* the outcome is final (the last promote, revert or restart is done): where the agent
         * knows how (it took the lease with --status), the record gives the lease back, and the
         * lease-release round of deploy_done() is left with nothing to do there */
        bool give[INV_MAX_CTS] = { false }, given[INV_MAX_CTS] = { false };
        for (int i = 0; final && d->lease_with_record && agent_argv_end(&al) == 0 && i < d->job->ncts; i++)
            give[i] = d->leased[i] && d->lease_status_known[i];
        struct history_arg ha = { a.argv, al.argv, give, given };
        cf->d = d;
        cf->fn = history_one;
        cf->arg = &ha;
        int missed = ct_fan_run(cf); /* every host at once */
        for (int i = 0; i < d->job->ncts; i++)
            if (given[i])
                d->leased[i] = false;
        const char *first = "unreachable";
        for (int i = 0; i < d->job->ncts && missed; i++)
            if (cf->rc[i] < 0 && cf->err[i][0]) {
                first = cf->err[i];
                break;
            }
        if (missed)
            log_warn("history record kept by %d of %d %s (%s); `drover history` elsewhere "
                     "may lack it", d->job->ncts - missed, d->job->ncts,
                     text_plural(d->job->ncts, "container", "containers"), first);
        free(line);
    }
    free(cf);
    notify_history(d->inv, &e); /* detached: returns at once, never changes the verdict */
}

static int history_one(struct ct_fan *cf, int i)
{
    const struct history_arg *ha = cf->arg;
    const struct inv_ct *ct = &cf->d->job->cts[i];
    struct conn *c;
    struct exec_result res;
    if (fleet_conn(cf->d->f, ct->host, &c) < 0)
        return -ENOTCONN;
    /* short: a record must not hold up a verdict on a host that stopped answering */
    if (pct_run_agent(c, ct, ha->give[i] ? ha->argv_lease : ha->argv, HISTORY_ADD_TIMEOUT_S, &res) < 0) {
        snprintf(cf->err[i], sizeof cf->err[i], "%s: %s", ct->label, c->err);
        return -EIO;
    }
    if (ha->give[i] && res.status == AGENT_EXIT_USAGE) {
        /* an agent that refuses the flag kept nothing: the record alone (the lease goes back
         * in deploy_done's round) */
        exec_result_done(&res);
        if (pct_run_agent(c, ct, ha->argv, HISTORY_ADD_TIMEOUT_S, &res) < 0) {
            snprintf(cf->err[i], sizeof cf->err[i], "%s: %s", ct->label, c->err);
            return -EIO;
        }
    } else if (ha->give[i] && res.status == 0 && memmem(res.out, res.out_len, "' given back\n", 13)) {
        ha->given[i] = true;
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

void on_sigint_send(int sig)
{
    (void)sig;
    deploy_interrupted = 1;
    send_interrupted = 1;
    exec_interrupted = 1;
}

/* Ctrl-C (SIGINT, SIGTERM) in deploy and rollback, installed with the handler of the phase
 * (NULL: the originals back; SIGHUP is ignored meanwhile):
 * - on_sigint_send, between the lease and the switch: the remote command in flight (survey,
 *   verification, GPU check, preflight) is abandoned at once, and the caller gives the lease back
 *   and records the deploy aborted.  It used to kill drover there, leaving the job's deploy
 *   lease held for lease_ttl (5 min): the operator's next deploy was refused as "another
 *   operator", naming this dead drover as the holder.
 * - on_sigint, from the switch on: only noted (interrupted), so the switch completes and nothing
 *   is left without a gang; the probation or the recovery watch then stops deciding (deploy_run:
 *   INTERRUPTED and a revert; confirm_recovery: not confirmed).
 * Installing resets `deploy_interrupted`. */
void interrupt_handlers(void (*fn)(int))
{
    static struct sigaction old_int, old_term, old_hup;
    static bool installed;
    if (fn) {
        struct sigaction sa = { .sa_handler = fn }, ign = { .sa_handler = SIG_IGN };
        sigemptyset(&sa.sa_mask);
        sigemptyset(&ign.sa_mask);
        deploy_interrupted = 0;
        sigaction(SIGINT, &sa, installed ? NULL : &old_int);
        sigaction(SIGTERM, &sa, installed ? NULL : &old_term);
        /* the terminal or the SSH session to the jump host gone: no operator asked anything, so
         * the deploy runs on to its verdict and records it (its lines are lost; `drover history`
         * has the outcome).  SIGHUP used to kill it, leaving the candidate unwatched */
        sigaction(SIGHUP, &ign, installed ? NULL : &old_hup);
        installed = true;
    } else if (installed) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        sigaction(SIGHUP, &old_hup, NULL);
        installed = false;
    }
}

/* Walk and hash DIR (and the environment first, when there is one) into v2 manifests; the
 * manifest is kept in state_dir/manifests/<id> (the controller's cache).  0, or the exit code:
 * a directory that cannot be read as a release, or without the job's command, is bad input
 * found here, exit 2 as a release directory that does not exist (docs/errors.md) while no host
 * was contacted yet (one job: cmd_deploy connects nothing first); it was 1, the code of a
 * deploy that failed.  A wave's jobs were all checked before any host was contacted
 * (wave_check_local): found here only if the directory changed since, 1. */
static int stage_bundle(struct deploy *d, const char *dir, const char *env_dir, bool say)
{
    const struct inventory *inv = d->inv;
    bool untouched = !fleet_contacted(d->f);
    int bad = untouched ? EXIT_USAGE : EXIT_FAIL;
    int r = state_init(inv->state_dir);
    if (r < 0) {
        log_error("cannot create state directory '%s': %s", inv->state_dir, strerror(-r));
        return EXIT_FAIL;
    }
    char mdir[1100];
    snprintf(mdir, sizeof mdir, "%s/manifests", inv->state_dir);
    (void)fs_mkdir_p(mdir, 0700);
    if (env_dir) {
        if ((r = relsrc_load(env_dir, NULL, &d->env)) < 0) {
            bool input = release_read_is_bad_input(r);
            release_read_error("environment", env_dir, r, untouched && input);
            return input ? bad : EXIT_FAIL;
        }
        d->has_env = true;
        d->env.kind = "environment";
        fprintf(stderr, "environment %.12s (%s): %zu %s, %.2f MiB\n", d->env.id, d->env.m->name,
                d->env.m->nfiles, text_plural(d->env.m->nfiles, "file", "files"),
                (double)d->env.m->file_bytes / 1048576.0);
    }
    if ((r = relsrc_load(dir, d->has_env ? d->env.id : NULL, &d->rs)) < 0) {
        bool input = release_read_is_bad_input(r);
        release_read_error("release", dir, r, untouched && input);
        return input ? bad : EXIT_FAIL;
    }
    d->has_rs = true;
    memcpy(d->id, d->rs.id, sizeof d->id);
    (void)str_copy(d->name, sizeof d->name, d->rs.m->name);
    /* The agent would refuse a release without the job's command only after staging, pushing and
     * preflight; catch it here, before anything leaves this machine (validate's rule) */
    if (release_job_problems(d->rs.m, dir, d->has_env ? d->env.m : NULL, env_dir, d->job, untouched))
        return bad;
    char mpath[1200];
    snprintf(mpath, sizeof mpath, "%s/%s", mdir, d->id);
    if ((r = fs_write_atomic(mpath, d->rs.text, d->rs.len, 0600)) < 0)
        log_warn("cannot keep the manifest in '%s': %s", mpath, strerror(-r));
    d->blob_size = d->rs.m->file_bytes;
    ui_short(d->id, d->sid);
    if (say) /* a dry run's plan says it on stdout: not twice */
        fprintf(stderr, "release %s (%s): %zu %s, %.2f MiB\n", d->sid, d->name, d->rs.m->nfiles,
                text_plural(d->rs.m->nfiles, "file", "files"), (double)d->blob_size / 1048576.0);
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
    if (send_interrupted && r < 0) /* "(0.0 MiB stored on hosts)" read as if nothing had been sent */
        objsync_interrupted_msg(&st, err, err_sz);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    send_interrupted = 0;
    exec_interrupted = 0;
    if (r == 0 && st.objects_to_hosts)
        fprintf(stderr, "release %s in every container in %.1fs (%zu %s, %.2f MiB sent to hosts)\n", d->sid,
                time_mono() - t0, st.objects_to_hosts, text_plural(st.objects_to_hosts, "object", "objects"),
                (double)st.bytes_to_hosts / 1048576.0);
    else if (r == 0) /* "(0 objects, 0.00 MiB sent to hosts)" */
        fprintf(stderr, "release %s in every container in %.1fs (nothing had to be sent to the hosts)\n", d->sid,
                time_mono() - t0);
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
 * driver failure: reason code STATUS_RC_ENVIRONMENT)?  agent_code: the code of the agent's
 * reason the verdict quotes (probation_agent_code); exit_code: the exit code of the rank the
 * verdict names (probation_exit_code).  The verdict may name a rank's drover-train exit 9
 * (TX_DEVICE) before the agent has decided, so the containers are asked again for a few seconds
 * while their gangs settle.  true with the agent's reason in why. */
static bool env_fault_seen(struct deploy *d, enum status_reason agent_code, int exit_code,
                           const char *verdict, char *why, size_t why_sz)
{
    if (agent_code == STATUS_RC_ENVIRONMENT) {
        if (why != verdict)
            (void)str_copy(why, why_sz, verdict);
        return true;
    }
    if (exit_code != TX_DEVICE)
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
            if (js->state == GANG_FAILED && js->reason_code == STATUS_RC_ENVIRONMENT) {
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

/* The GPU environment preflight (deploy_int.h): in every container of a job that has GPUs, and
 * in any container the survey found marked for attention; before anything stops. */
int gpu_check_cts(struct deploy *d, bool force, char *err, size_t err_sz)
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
        /* e and what is said after it (the mark: up to 255 bytes, the advice) fit a 2048-byte
         * err and log line: a gpu-check reason of realistic length (the lab's two faults with
         * the default library path: 650 bytes) is quoted whole, a longer one cut at a word */
        char e[1600];
        int r = agent_call(d, ct, av.argv, d->inv->exec_timeout_s, e, sizeof e);
        if (deploy_interrupted) /* a check cut short is not judged, nor forced past */
            return -EINTR;
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
void new_rdzv(char out[17])
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

/* stop_old_gangs' progress lines on stderr */
static void old_gangs_asked(struct deploy *d, const struct agent_fan_ct c[])
{
    const struct inv_job *j = d->job;
    int n = 0;
    for (int i = 0; i < j->ncts; i++)
        n += d->has_gang[i];
    if (n)
        fprintf(stderr, "switch: stopping the old gang of job '%s' in %d %s at once; the "
                "new release starts only once every one is gone (deadline %.0fs; the agents start "
                "it again on their own if nothing follows within %.0fs)\n", j->name, n,
                text_plural(n, "container", "containers"), switch_deadline(d), agent_switch_deadline(d));
    (void)c;
}

static void old_gang_ended(struct deploy *d, int i, const struct agent_fan_ct *c)
{
    double grace;
    char w[600];
    if (c->ok[0]) /* "ok: stopped: no process of the gang is left" */
        fprintf(stderr, "switch: %s: old gang gone after %.1fs\n", d->job->cts[i].label, c->took);
    if (c->ok[0] && agent_stop_was_sigkilled(c->ok, &grace))
        log_warn("switch: %s", deploy_sigkilled_message(w, sizeof w, d->job->cts[i].label, d->job->name, grace));
}

const char *deploy_sigkilled_message(char *buf, size_t sz, const char *label, const char *job, double grace_s)
{
    char g[32] = "its grace";
    if (grace_s >= 0)
        snprintf(g, sizeof g, "its grace of %.0f s", grace_s);
    snprintf(buf, sz, "%s: a rank of job '%s' ignored SIGTERM for %s and was SIGKILLed: a checkpoint it "
             "writes on SIGTERM may not have been written (`drover logs --job %s` shows its last lines; "
             "raise the job's grace, or make the trainer checkpoint on SIGTERM within it)", label, job, g, job);
    return buf;
}

/* every OLD_GANG_TICK_S while an old gang is stopping: which containers it is still waiting on,
 * so the wait (up to the switch deadline, 90 s by default) is not silent */
#define OLD_GANG_TICK_S 15.0
/* how long an aborted switch waits for the start it queued behind a stop still in flight */
#define RESTART_QUEUED_S 10.0
static void old_gangs_waiting(struct deploy *d, const struct agent_fan_ct c[], double elapsed, double limit)
{
    char line[1400], what[INV_NAME_MAX + 40];
    snprintf(what, sizeof what, "the old gang of job '%s'", d->job->name);
    if (agent_fan_waiting(line, sizeof line, what, d->job, c, elapsed, limit))
        fprintf(stderr, "switch: %s\n", line);
}

/* why[i].head of a container whose wait stop_old_gangs cut short for the operator's Ctrl-C */
#define INTERRUPTED_STOPPING "interrupted while the old gang was stopping"

/* An agent's stop answers only once the gang is gone, so a stop still unanswered at the switch
 * deadline says nothing of why: a process that will not die, or a host (its sshd) or an agent
 * that answers nothing at all (SIGSTOP, hung).  The containers ask[i] are asked `status` then,
 * all at once, for at most FLEET_STATUS_TIMEOUT_S (exec_timeout when shorter; *ret_limit): an
 * agent that answers it is alive and still stopping.  Fills ret[i] as agent_fan_run does. */
static void stop_probe(struct deploy *d, const bool ask[INV_MAX_CTS], struct agent_fan_ct ret[INV_MAX_CTS],
                       double *ret_limit)
{
    bool skip[INV_MAX_CTS];
    int n = 0;
    for (int i = 0; i < d->job->ncts; i++) {
        skip[i] = !ask[i];
        n += ask[i];
        ret[i] = (struct agent_fan_ct){ .took = -1 };
    }
    double limit = FLEET_STATUS_TIMEOUT_S;
    if (d->inv->exec_timeout_s > 0 && d->inv->exec_timeout_s < limit)
        limit = d->inv->exec_timeout_s;
    *ret_limit = limit;
    if (!n)
        return;
    struct agent_argv a;
    agent_argv_init(&a);
    agent_argv_status(&a);
    (void)agent_fan_run(d, agent_argv_end(&a) == 0 ? a.argv : NULL, skip, limit, ret, NULL);
}

/* why[i] of a container whose stop was not answered within the switch deadline limit, from
 * what its status probe p found (stop_probe, within probe_s); d->no_answer[i] where neither
 * its host nor its agent answered. */
static void stop_unanswered(struct deploy *d, int i, const struct agent_fan_ct *p, double limit, double probe_s,
                            struct deploy_ct_said *why)
{
    char *na = d->no_answer[i];
    if (!p->asked) { /* the host's sshd: not even a channel for the status */
        snprintf(why->head, sizeof why->head, "no answer");
        snprintf(why->tail, sizeof why->tail, " from the host within the switch deadline of %.0f s, nor when "
                 "asked for a status after it (%.160s): is the host up, and its sshd answering?", limit,
                 p->err[0] ? p->err : "host unreachable");
        snprintf(na, sizeof d->no_answer[i], "its host did not answer within the switch deadline of %.0f s",
                 limit);
    } else if (!p->ended || p->lost) {
        snprintf(why->head, sizeof why->head, "no answer");
        snprintf(why->tail, sizeof why->tail, " from drover-agent within the switch deadline of %.0f s, nor to "
                 "a status asked after it within %.0f s: is drover-agent there stopped or hung, or the host "
                 "no longer answering? `drover status --job %s` shows it", limit, probe_s, d->job->name);
        snprintf(na, sizeof d->no_answer[i], "its drover-agent did not answer within the switch deadline of "
                 "%.0f s, nor to a status asked after it within %.0f s", limit, probe_s);
    } else if (agent_said_no_daemon(p->err)) {
        snprintf(why->head, sizeof why->head, "drover-agent");
        snprintf(why->tail, sizeof why->tail, " did not answer within the switch deadline of %.0f s and is not "
                 "running now (%.160s): `drover install --job %s` starts it", limit, p->err, d->job->name);
        snprintf(na, sizeof d->no_answer[i], "its drover-agent did not answer within the switch deadline of "
                 "%.0f s and is not running now", limit);
    } else { /* the agent answered its status: alive, still stopping the gang */
        snprintf(why->head, sizeof why->head, "the old gang");
        snprintf(why->tail, sizeof why->tail, " was not gone within the switch deadline of %.0f s (a "
                 "process that ignores SIGTERM until the grace period ends, or one stuck in the kernel)", limit);
    }
}

/* The first phase of a switch: stop the job's old gang in every container that has one, all at
 * once, and wait until each agent answers that every process of it is gone (the agent's stop
 * returns only then), at most switch_deadline (agent_fan_run).  gone[i] says which did; why[i]
 * says why not, worded for one container or several (deploy_ct_said: the verdict says each
 * reason once, with the containers it applies to); unasked[i] that its agent was never asked
 * (its host could not be reached): its old gang runs on there, untouched.  A stop unanswered at
 * the deadline is told apart (stop_probe): an agent still stopping a process that will not die,
 * or a host or agent that answers nothing (d->no_answer).  Returns how many did not. */
static int stop_old_gangs(struct deploy *d, bool gone[INV_MAX_CTS], struct deploy_ct_said why[INV_MAX_CTS],
                          bool unasked[INV_MAX_CTS])
{
    const struct inv_job *j = d->job;
    struct agent_argv a;
    agent_argv_init(&a);
    agent_argv_stop_switch(&a, j->name, agent_switch_deadline(d));
    double limit = switch_deadline(d);
    bool skip[INV_MAX_CTS];
    for (int i = 0; i < j->ncts; i++)
        skip[i] = !d->has_gang[i];
    struct agent_fan_ct c[INV_MAX_CTS];
    static const struct agent_fan_hooks hooks = { .asked = old_gangs_asked, .ended = old_gang_ended,
                                                  .tick = old_gangs_waiting, .tick_s = OLD_GANG_TICK_S };
    (void)agent_fan_run(d, a.argv, skip, limit, c, &hooks);
    bool ask[INV_MAX_CTS];
    for (int i = 0; i < j->ncts; i++)
        ask[i] = !skip[i] && c[i].asked && !c[i].ended && !deploy_interrupted;
    struct agent_fan_ct probe[INV_MAX_CTS];
    double probe_s = 0;
    stop_probe(d, ask, probe, &probe_s);
    int left = 0;
    for (int i = 0; i < j->ncts; i++) {
        gone[i] = skip[i] || c[i].ok[0];
        why[i].head[0] = why[i].tail[0] = '\0';
        unasked[i] = !skip[i] && !c[i].asked;
        if (skip[i])
            continue;
        d->no_answer[i][0] = '\0';
        if (!c[i].asked) {
            snprintf(why[i].head, sizeof why[i].head, "cannot ask drover-agent");
            snprintf(why[i].tail, sizeof why[i].tail, " to stop the old gang: %.300s", c[i].err);
        } else if (!c[i].ended && deploy_interrupted) {
            /* the agent goes on stopping it; it is asked to start it again below */
            gone[i] = false;
            snprintf(why[i].head, sizeof why[i].head, "%s", INTERRUPTED_STOPPING);
        } else if (!c[i].ended) {
            gone[i] = false;
            stop_unanswered(d, i, &probe[i], limit, probe_s, &why[i]);
        } else if (!gone[i] && ct_stopped_note(d, i, c[i].err)) {
            snprintf(why[i].head, sizeof why[i].head, "nothing runs");
            snprintf(why[i].tail, sizeof why[i].tail, ": container stopped (pct: %.300s)", d->ct_stopped[i]);
        } else if (!gone[i]) {
            /* the agent's own words when it said why (busy: going back by itself, say) */
            snprintf(why[i].head, sizeof why[i].head, "drover-agent");
            snprintf(why[i].tail, sizeof why[i].tail, " did not confirm the stop (%.200s)",
                     c[i].lost ? "connection lost" : c[i].err[0] ? c[i].err
                     : "drover-agent stop failed: see `drover logs`");
        }
        left += !gone[i];
    }
    return left;
}

/* After an aborted switch: start the old release again in every container where the switch
 * stopped it (or was stopping it), with a new rendezvous generation so that it cannot pair with
 * old ranks still on their way out.  Where the old gang is not gone yet the agent starts it once
 * it is (its stop is replaced by the start).  Every container is asked at once (agent_fan_run):
 * one after another, a Ctrl-C while three old gangs stopped kept the operator ~30 s.  Fills
 * done[i] with what happened in container i (said once for all the containers it applies to:
 * deploy_switch_aborted_message). */
static void restart_old_gangs(struct deploy *d, const bool gone[INV_MAX_CTS], const bool unasked[INV_MAX_CTS],
                              struct deploy_ct_said done[INV_MAX_CTS])
{
    const struct inv_job *j = d->job;
    /* A container whose agent was never asked still runs its old gang, as the generation all
     * of them ran: the others must start as that one again to pair with it (their agents keep
     * it when no --rdzv is given).  A new generation there split the gang for good. */
    bool keep_generation = false;
    for (int i = 0; i < j->ncts; i++)
        keep_generation |= d->has_gang[i] && unasked[i];
    char tok[17];
    new_rdzv(tok);
    struct agent_argv a;
    agent_argv_init(&a);
    agent_argv_start(&a, j->name, keep_generation ? NULL : tok);
    bool skip[INV_MAX_CTS];
    double lim[INV_MAX_CTS], limit = 0;
    for (int i = 0; i < j->ncts; i++) {
        skip[i] = !d->has_gang[i] || unasked[i];
        /* a container still stopping answers only once its old gang is gone: the request is
         * queued there, there is no need to wait for it */
        lim[i] = gone[i] ? (j->grace_s > 0 ? j->grace_s : 30) + d->inv->exec_timeout_s : RESTART_QUEUED_S;
        if (!skip[i] && lim[i] > limit)
            limit = lim[i];
    }
    struct agent_fan_ct c[INV_MAX_CTS];
    const struct agent_fan_hooks hooks = { .ct_limit = lim };
    /* the operator's Ctrl-C that aborted the switch must not cut the asking short; a second
     * one does (the agents go on with what they were asked) */
    const bool was = deploy_interrupted;
    deploy_interrupted = 0;
    (void)agent_fan_run(d, agent_argv_end(&a) == 0 ? a.argv : NULL, skip, limit, c, &hooks);
    if (was)
        deploy_interrupted = 1;
    for (int i = 0; i < j->ncts; i++) {
        done[i].head[0] = done[i].tail[0] = '\0';
        if (!d->has_gang[i])
            continue;
        char sid[RELEASE_SHORT_LEN + 1];
        (void)ui_short(d->from[i], sid);
        if (unasked[i]) {
            /* never stopped: nothing to start, and a start would only wait for the same host */
            const char *what = " (host unreachable): its old gang runs on there, and the others start "
                               "again as its generation";
            fprintf(stderr, "switch aborted: %s: %s was never asked to stop%s\n", j->cts[i].label, sid, what);
            snprintf(done[i].head, sizeof done[i].head, "%s was never asked to stop", sid);
            snprintf(done[i].tail, sizeof done[i].tail, "%s", what);
            continue;
        }
        const char *what;
        char more[400] = "";
        if (c[i].ok[0])
            what = "started again";
        else if (c[i].asked && !c[i].ended && !gone[i])
            what = "starts again once the old gang is gone";
        else {
            if (!c[i].asked)
                log_error("%s: cannot ask drover-agent to start %s again: %s", j->cts[i].label, sid, c[i].err);
            else if (!c[i].ended)
                log_error("%s: drover-agent start --job %s gave no answer within %.0f s", j->cts[i].label,
                          j->name, lim[i]);
            else
                log_error("%s: drover-agent start --job %s failed: %s", j->cts[i].label, j->name,
                          c[i].lost ? "connection lost" : c[i].err[0] ? c[i].err : "no reason given");
            what = "NOT started again";
            /* `drover start` starts the job's current release, the old one here, with the others
             * as one generation (it stops them first); a rollback went to the release before it */
            if (agent_said_no_daemon(c[i].err))
                snprintf(more, sizeof more, " (its drover-agent is not running: `drover install --job "
                         "%s` starts it, then `drover start --job %s` brings the gang up as one)",
                         j->name, j->name);
            else
                snprintf(more, sizeof more, " (`drover start --job %s` starts it with the others, as "
                         "one gang)", j->name);
        }
        fprintf(stderr, "switch aborted: %s: %s %s%s\n", j->cts[i].label, sid, what, more);
        snprintf(done[i].head, sizeof done[i].head, "%s %s", sid, what);
        snprintf(done[i].tail, sizeof done[i].tail, "%s", more);
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
    if (d->recorded[i]) {
        /* a rollback to an earlier promoted pair whose spec the inventory no longer holds: the
         * agent starts the spec it recorded for it (rbtarget.h; only agents that said
         * recorded-spec are asked) */
        struct agent_argv a;
        agent_argv_init(&a);
        agent_argv_activate_recorded(&a, d->id, j->name, d->want_spec[i], probation_deadline, rdzv);
        if (agent_argv_end(&a) < 0) {
            snprintf(err, err_sz, "job '%s': too many arguments", j->name);
            return -E2BIG;
        }
        double timeout = (j->grace_s > 0 ? j->grace_s : 60) + d->inv->exec_timeout_s;
        int r = agent_call(d, &j->cts[i], a.argv, timeout, err, err_sz);
        if (r < 0)
            return r;
        char dsid[RELEASE_SHORT_LEN + 1];
        fprintf(stderr, "activate %s: node %d of %d started %s with its recorded job spec %.12s\n",
                j->cts[i].label, i, j->ncts, d->sid, ui_short(d->want_spec[i], dsid));
        return 0;
    }
    /* an agent older than the spec digest refuses --spec-digest (usage, exit 2, before anything
     * is stopped): it is activated without, and its spec stays "unknown" until drover install */
    d->want_spec[i][0] = '\0';
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
        if (with_digest)
            (void)str_copy(d->want_spec[i], sizeof d->want_spec[i], sd.hex);
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
int activate_cts(struct deploy *d, double probation_deadline, char *err, size_t err_sz)
{
    const struct inv_job *j = d->job;
    bool gone[INV_MAX_CTS], unasked[INV_MAX_CTS];
    struct deploy_ct_said why[INV_MAX_CTS], done[INV_MAX_CTS];
    /* Nothing is stopped while a container cannot be reached: its gang would run on, the others'
     * would stop, and the new release could not start there (fleet_conn remembers a host that
     * failed; its error was said when it failed). */
    char down[1000];
    size_t dn = 0;
    down[0] = '\0';
    for (int i = 0; i < j->ncts; i++) {
        struct conn *c;
        if (fleet_conn(d->f, j->cts[i].host, &c) < 0 && dn < sizeof down)
            dn += (size_t)snprintf(down + dn, sizeof down - dn, "%s%s", dn ? ", " : "", j->cts[i].label);
    }
    if (dn) {
        snprintf(err, err_sz, "switch to %s not started: %s cannot be reached; nothing was stopped, "
                 "the old release runs on everywhere.  Deploy again once the host answers", d->sid, down);
        return -ECANCELED;
    }
    if (stop_old_gangs(d, gone, why, unasked) > 0) {
        if (deploy_interrupted) /* said at once: the restarts below may wait up to 10 s */
            fprintf(stderr, "switch: interrupted by the operator: the switch to %s is aborted, nothing of "
                    "it starts; the old release is asked to start again in every container where its "
                    "gang was stopped (at most %.0f s where one is still stopping)\n", d->sid,
                    RESTART_QUEUED_S);
        restart_old_gangs(d, gone, unasked, done);
        const char *labels[INV_MAX_CTS];
        for (int i = 0; i < j->ncts; i++) {
            labels[i] = j->cts[i].label;
            if (gone[i]) /* a reason only where the old gang is not known gone */
                why[i].head[0] = '\0';
        }
        deploy_switch_aborted_message(err, err_sz, d->sid, labels, j->ncts, why, done);
        return -ECANCELED;
    }
    char tok[17];
    new_rdzv(tok);
    d->probation_deadline_at = (double)time(NULL) + probation_deadline;
    int r = activate_all(d, probation_deadline, tok, err, err_sz);
    if (r < 0) {
        int nstopped = 0;
        for (int i = 0; i < j->ncts; i++)
            nstopped += d->has_gang[i];
        deploy_activate_failed_message(err, err_sz, nstopped);
    }
    return r;
}

/* After a failed verdict, how long watch_probation looks again for a container stopped under
 * the gang or one that answers nothing (every stream reopened; a live agent says something
 * every second) */
#define WATCH_SETTLE_S 5.0

/* Follow one watch stream per container and feed the probation until it decides.  what: the
 * progress line's label ("probation", or "recovery" while a revert is confirmed).  Sets
 * d->watch_silent. */
enum probation_verdict watch_probation(struct deploy *d, struct probation *p, const char *what)
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
    bool heard[INV_MAX_CTS] = { false }, looked = false;
    for (int i = 0; i < j->ncts; i++)
        d->watch_silent[i] = false;
    d->lease_renew_at = time_mono() + lease_ttl(d) / 3; /* just renewed before the switch */
    while (!deploy_interrupted && !d->lease_lost) {
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
                 * stopped under the gang (pct stop, lxc-stop) fails the probation at once.  The
                 * agent CLI's when no daemon listens there (killed, crashed): its container
                 * sends nothing more, and the verdict on that silence is its agent's */
                const char *said = conn_stream_err(streams[i]);
                if (ct_stopped_note(d, i, said))
                    probation_ct_stopped(p, i, d->ct_stopped[i]);
                else if (agent_said_no_daemon(said))
                    probation_agent_gone(p, i, said);
                log_debug("%s: status stream ended; reopening", ct->label);
                (void)pct_streams_free(&streams[i], 1);
                if (fleet_session_is_dead(d->f, ct->host)) {
                    /* The session is gone: free every stream on it (no follow-up: the host
                     * does not answer), then reconnect. */
                    for (int k = 0; k < j->ncts; k++)
                        if (j->cts[k].host == ct->host)
                            (void)pct_streams_free(&streams[k], 1);
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
            settle_until = now + WATCH_SETTLE_S;
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
            /* the whole look, none stopped, not all heard: the silent ones answer nothing */
            looked = !stopped_seen && !all && now >= settle_until;
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
    /* given up: what is left of each watch in its container is ended (one follow-up per host) */
    (void)pct_streams_free(streams, j->ncts);
    for (int i = 0; i < j->ncts; i++) {
        /* silent through the whole last look: its host or agent answers nothing */
        d->watch_silent[i] = looked && !heard[i] && !d->ct_stopped[i][0];
    }
    return v;
}

/* Another operator took over the job's deploy lease while this deploy watched (what): it must
 * not promote or revert on top of them.  Says who, records `aborted`, returns the exit code. */
int taken_over(struct deploy *d, const char *what)
{
    char msg[1200];
    snprintf(msg, sizeof msg, "the deploy lease of job '%s' was taken over by another operator "
             "during %s (%s): this deploy stops here and decides nothing (no promote, no revert); "
             "the other operator's deploy decides the job now", d->job->name, what, d->lease_lost_why);
    printf("%sTAKEN OVER%s %s (%s) for job '%s': %s\n", ui_red(stdout), ui_reset(stdout), d->sid,
           d->name, d->job->name, msg);
    history_record(d, "aborted", HISTORY_RC_NONE, msg, -1);
    return EXIT_TAKEN_OVER;
}

/* After a revert: watch until the good release heartbeats in phase train on every rank. */
/* The ranks per container of the pair a revert or rollback went back to: it may run another
 * nproc_per_node than the inventory's (the revert of a failed nproc_per_node change, a rollback
 * to the spec promoted before one), so the first container's agent is asked (its status reports
 * the current spec's nproc); the inventory's when it cannot say. */
static int recovered_nproc(struct deploy *d, const char *release)
{
    char e[1200];
    const struct inv_job *j = d->job;
    if (fleet_agent_status(d->f, &j->cts[0], d->st, e, sizeof e) < 0)
        return j->nproc_per_node;
    const struct job_status *js = status_find_job(d->st, j->name);
    if (!js || strcmp(js->current, release) != 0 || js->nproc <= 0 || js->nproc > STATUS_MAX_RANKS)
        return j->nproc_per_node;
    if (js->nproc != j->nproc_per_node)
        fprintf(stderr, "recovery: %s runs %d %s per container there (the inventory says %d)\n",
                j->cts[0].label, js->nproc, text_plural(js->nproc, "rank", "ranks"), j->nproc_per_node);
    return js->nproc;
}

int confirm_recovery(struct deploy *d, const char *good, char *msg, size_t msg_sz)
{
    struct inv_policy pol = d->job->policy;
    if (pol.healthy_deadline_s < 30)
        pol.healthy_deadline_s = 30;
    pol.progress_deadline_s = 2 * pol.healthy_deadline_s + (d->job->grace_s > 0 ? d->job->grace_s : 60);
    int nproc = recovered_nproc(d, good);
    struct probation *p;
    int r = probation_new(&pol, d->job->name, good, d->job->ncts, d->labels, nproc, -1, true,
                          time_mono(), &p);
    if (r < 0)
        return r;
    /* a Ctrl-C during the revert before it said "only the watch of its recovery ends": that
     * watch ends at once (the interrupt was reset here, and the watch ran on to its verdict) */
    deploy_interrupted = deploy_revert_interrupted;
    deploy_revert_interrupted = 0;
    enum probation_verdict v = watch_probation(d, p, "recovery");
    d->recovery_went_back = v == PROBATION_FAIL && probation_agent_went_back(p);
    char sid[RELEASE_SHORT_LEN + 1];
    if (d->lease_lost) {
        snprintf(msg, msg_sz, "%s: not confirmed (deploy lease taken over)", ui_short(good, sid));
        r = -EBUSY;
    } else if (v == PROBATION_PASS) {
        long long step, resumed;
        probation_progress(p, &step, &resumed);
        if (resumed >= 0)
            snprintf(msg, msg_sz, "%s is training again at step %lld (resumed from the job's newest checkpoint, "
                     "step %lld)", ui_short(good, sid), step, resumed);
        else
            snprintf(msg, msg_sz, "%s is training again at step %lld (started fresh: no checkpoint)",
                     ui_short(good, sid), step);
        r = 0;
    } else if (v == PROBATION_PENDING && deploy_interrupted) {
        /* the operator's Ctrl-C while it was watched: no verdict on the recovery, which goes on
         * (it used to be reported as REVERT FAILED, "the job may be down", and recorded so) */
        snprintf(msg, msg_sz, "%s not confirmed (interrupted by the operator while its recovery "
                 "was watched)", ui_short(good, sid));
        r = -EINTR;
    } else {
        char mute[700];
        const char *saw = v == PROBATION_FAIL ? probation_reason(p) : "no verdict";
        int n = deploy_silent_cts(mute, sizeof mute, d->labels, d->job->ncts, d->no_answer, d->watch_silent);
        if (n)
            /* the verdict's rank (waiting at the rendezvous for the silent one) is no cause */
            snprintf(msg, msg_sz, "%s did not recover: %s: check that %s up and that drover-agent there is "
                     "not stopped or hung; the ranks in the other containers only wait for %s at their "
                     "rendezvous (the watch saw: %s)", ui_short(good, sid), mute,
                     n > 1 ? "their hosts are" : "its host is", n > 1 ? "theirs" : "its ranks", saw);
        else
            snprintf(msg, msg_sz, "%s did not recover: %s", ui_short(good, sid), saw);
        r = -EIO;
    }
    probation_free(p);
    return r;
}

int deploy_silent_cts(char *buf, size_t sz, const char *const labels[], int n, const char (*no_answer)[200],
                      const bool silent[])
{
    size_t off = 0;
    int k = 0;
    if (sz)
        buf[0] = '\0';
    for (int i = 0; i < n && i < INV_MAX_CTS && off < sz; i++) {
        if (!no_answer[i][0] && !silent[i])
            continue;
        char said[300];
        snprintf(said, sizeof said, "%s%s%s", no_answer[i],
                 no_answer[i][0] && silent[i] ? ", and " : "",
                 silent[i] ? "it sent no status while the recovery was watched" : "");
        off += (size_t)snprintf(buf + off, sz - off, "%s%s answered nothing (%s)", k ? "; " : "", labels[i], said);
        k++;
    }
    return k;
}

struct revert_arg {
    const char *const *argv;
    /* where no_start[i]: argv_no_start (`revert --no-start`: a deploy onto a stopped job, its
     * agent knowing the option), which leaves the job stopped on the good release */
    const char *const *argv_no_start;
    const bool *no_start;
    const bool *gone;  /* phase 1's answer per container */
    double timeout_s;
    bool *already;     /* out: the agent answered that its gang of the good release runs */
    bool *no_agent;    /* out: no agent daemon runs there (AGENT_EXIT_NO_DAEMON, its words) */
};

bool deploy_call_found_no_agent(int r, int status, const char *err)
{
    return r == -EIO && status == AGENT_EXIT_NO_DAEMON && agent_said_no_daemon(err);
}

bool deploy_revert_leaves_stopped(const struct deploy *d, int i)
{
    return d->leave_stopped && (d->features[i] & STATUS_FEAT_REVERT_NO_START);
}

static int revert_one(struct ct_fan *cf, int i)
{
    const struct revert_arg *ra = cf->arg;
    /* where the stop is still going on, the agent queues the revert behind it (it replaces the
     * stop) and answers once the good gang started: no need to wait for that here */
    double t = ra->gone[i] ? ra->timeout_s : 10;
    char out[300];
    int status = 0;
    int r = agent_call_full(cf->d, &cf->d->job->cts[i], ra->no_start[i] ? ra->argv_no_start : ra->argv,
                            t, &status, out, sizeof out, cf->err[i], sizeof cf->err[i]);
    ra->already[i] = r == 0 && strstr(out, AGENT_REVERT_ALREADY) != NULL;
    /* the host answered, pct ran the agent CLI, and it found no daemon (killed, crashed): not a
     * host to wait for, an agent to start again */
    ra->no_agent[i] = deploy_call_found_no_agent(r, status, cf->err[i]);
    return r;
}

/* A fresh look at every container before a revert: has every agent gone back to the good
 * release by itself, with its gang starting or running (revertplan.h)?  back[i]: container i
 * has (false where not known). */
static bool job_back_everywhere(struct deploy *d, bool back[INV_MAX_CTS])
{
    const struct inv_job *j = d->job;
    struct job_status *seen = calloc((size_t)j->ncts, sizeof *seen);
    const struct job_status *js[INV_MAX_CTS];
    bool stopped[INV_MAX_CTS], found[INV_MAX_CTS];
    for (int i = 0; i < j->ncts; i++)
        back[i] = false;
    for (int i = 0; i < j->ncts; i++)
        stopped[i] = d->ct_stopped[i][0] != '\0';
    /* every container at once: a revert must not wait for one status after another */
    if (!seen || survey_job_status(d, stopped, seen, found) < 0) {
        free(seen);
        return false; /* not known: not back, the two-phase revert decides */
    }
    for (int i = 0; i < j->ncts; i++)
        js[i] = found[i] ? &seen[i] : NULL;
    bool all = revertplan_all_back(js, stopped, j->ncts, d->good, back);
    free(seen);
    return all;
}

/* Revert every container to its last good release, two-phase like a deploy's switch: stop the
 * failed release everywhere at once (stop_old_gangs, the agents' switch deadline armed), then
 * `drover-agent revert --rdzv G` everywhere at once (each agent starts the good release with the
 * command it ran with, as generation G).  A container whose old gang is not gone within the
 * switch deadline is named; its revert replaces the stop still in flight there, so the good
 * release starts there once the old gang is gone (the others wait for it in their rendezvous):
 * never a job left stopped, unless the deploy began on a stopped job (d->leave_stopped: then
 * each agent is asked `revert --no-start`, which makes the good release current and starts
 * nothing, and revert_left_stopped says so).  Returns the exit code. */
static int revert_all_run(struct deploy *d, enum history_reason code, const char *reason);

/* The end of a revert of a deploy onto a stopped job (d->leave_stopped), the good release
 * current again everywhere, as the operator had left the job: stopped (the failed deploy had
 * started it).  Where the agent reverted with --no-start (left_stopped[i]) nothing was started.
 * An agent older than that option (no STATUS_FEAT_REVERT_NO_START) started the good release, so
 * it is stopped again there: here, before the record, which gives the lease back (a stop after
 * it would run unleased).  No recovery is watched: nothing is meant to run.  Says the outcome
 * on stdout; EXIT_REVERTED (the revert itself reached every container, also where the stop did
 * not: said so). */
static int revert_left_stopped(struct deploy *d, enum history_reason code, const char *reason,
                               const bool left_stopped[])
{
    const struct inv_job *j = d->job;
    char sid[RELEASE_SHORT_LEN + 1];
    bool skip[INV_MAX_CTS], any = false;
    for (int i = 0; i < j->ncts; i++) {
        skip[i] = left_stopped[i];
        any |= !skip[i];
    }
    struct agent_fan_ct c[INV_MAX_CTS];
    if (any) {
        fprintf(stderr, "revert: job '%s' was stopped before the deploy: stopping %s again where its "
                "agent started it (an agent older than revert --no-start)\n", j->name,
                ui_short(d->good, sid));
        struct agent_argv a;
        agent_argv_init(&a);
        agent_argv_stop(&a, j->name);
        (void)agent_fan_run(d, agent_argv_end(&a) == 0 ? a.argv : NULL, skip,
                            (j->grace_s > 0 ? j->grace_s : 60) + d->inv->exec_timeout_s, c, NULL);
    }
    char running[900] = "";
    size_t off = 0;
    for (int i = 0; i < j->ncts; i++) {
        if (skip[i])
            continue;
        enum stopstart_outcome o = stopstart_judge(false, c[i].asked, c[i].ok[0] ? c[i].ok : NULL,
                                                   c[i].ended && !c[i].lost, false);
        if (stopstart_is_ok(false, o))
            continue;
        const char *why = c[i].err[0] ? c[i].err : stopstart_word(false, o);
        log_error("revert: %s: stopping %s again: %s", j->cts[i].label, ui_short(d->good, sid), why);
        if (off < sizeof running)
            off += (size_t)snprintf(running + off, sizeof running - off, "%s%s (%s)", off ? ", " : "",
                                    j->cts[i].label, stopstart_word(false, o));
    }
    char line[1400];
    deploy_left_stopped_message(line, sizeof line, j->name, ui_short(d->good, sid), running);
    printf("%s\n", line);
    history_record(d, d->stopped_by_operator ? "aborted" : "reverted", code, reason, -1);
    return EXIT_REVERTED;
}

int revert_all(struct deploy *d, enum history_reason code, const char *reason)
{
    deploy_revert_interrupted = 0;
    revert_in_flight = 1;
    int r = revert_all_run(d, code, reason);
    revert_in_flight = 0;
    return r;
}

static int revert_all_run(struct deploy *d, enum history_reason code, const char *reason)
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
        history_record(d, failed ? "revert-failed" : "failed", code, reason, -1);
        return failed ? EXIT_REVERT_FAILED : EXIT_REVERTED;
    }
    d->switching = true;
    /* an operator's Ctrl-C that led here must not cut the look or the stop short */
    deploy_interrupted = 0;
    bool gone[INV_MAX_CTS], already[INV_MAX_CTS] = { false }, back[INV_MAX_CTS];
    bool no_agent[INV_MAX_CTS] = { false };
    bool unasked[INV_MAX_CTS] = { false }, unreach[INV_MAX_CTS] = { false };
    struct deploy_ct_said stalled[INV_MAX_CTS];
    int left = 0;
    /* Every agent went back to the good release by itself and its gang starts or runs there
     * (revertplan.h): that gang is the job's, stopping it to start it again only loses steps.
     * Each agent is still asked to revert, without a new rendezvous generation: it answers
     * "already on the good release" and leaves the gang; one whose gang ended since this look
     * starts the good release again with the generation the others run, so it rejoins them. */
    bool kept = job_back_everywhere(d, back);
    /* A container that cannot be reached keeps what runs there: its agent goes back by itself
     * (at the latest once its probation deadline passes) as the generation the good release
     * ran.  The others must revert as that one too, or the gang is split for good; and a gang
     * already back elsewhere is left running, it is the one that container will join. */
    char down[600] = "";
    size_t dn = 0;
    bool keep_generation = false;
    for (int i = 0; i < j->ncts; i++) {
        struct conn *c;
        unreach[i] = !kept && !d->ct_stopped[i][0] && fleet_conn(d->f, j->cts[i].host, &c) < 0;
        if (unreach[i] && dn < sizeof down)
            dn += (size_t)snprintf(down + dn, sizeof down - dn, "%s%s", dn ? ", " : "", j->cts[i].label);
        keep_generation |= unreach[i];
    }
    if (kept) {
        char where[48] = "in its container"; /* "in all 1 container" */
        if (j->ncts > 1)
            snprintf(where, sizeof where, "in all %d containers", j->ncts);
        if (d->leave_stopped) /* revert --no-start stops that gang: the job was stopped before */
            fprintf(stderr, "revert: job '%s' is already on %s %s, its gang starting or running; the "
                    "job was stopped before the deploy, so %s asked to stop it there and leave the "
                    "job stopped\n", j->name, ui_short(d->good, sid), where,
                    j->ncts > 1 ? "each agent is" : "its agent is");
        else if (!strcmp(d->id, d->good)) /* the release deployed was the good one: no agent went back */
            fprintf(stderr, "revert: job '%s' runs its good release %s %s, the release this deploy started: "
                    "there is nothing older to go back to; nothing is stopped; %s asked to confirm, then the "
                    "recovery is watched\n", j->name, ui_short(d->good, sid), where,
                    j->ncts > 1 ? "each agent is" : "its agent is");
        else
            fprintf(stderr, "revert: job '%s' is already back on %s %s (%s went back to it by itself, "
                    "its gang starting or running): nothing is stopped; %s asked to confirm, then the "
                    "recovery is watched\n", j->name, ui_short(d->good, sid), where,
                    j->ncts > 1 ? "each agent" : "its agent", j->ncts > 1 ? "each agent is" : "it is");
        for (int i = 0; i < j->ncts; i++) {
            gone[i] = true;
            stalled[i].head[0] = stalled[i].tail[0] = '\0';
        }
    } else {
        /* Not back everywhere (perhaps in some containers): the gang cannot form without the
         * others, so the full two-phase revert loses nothing and gives every rank one new
         * generation.  Phase 1: after an activation every container may have a gang (a stop of
         * a stopped job is answered at once). */
        fprintf(stderr, "reverting job '%s' to %s on %d %s (two-phase: the failed gang stops "
                "everywhere first)\n", j->name, ui_short(d->good, sid), j->ncts,
                text_plural(j->ncts, "container", "containers"));
        if (keep_generation)
            fprintf(stderr, "revert: %s cannot be reached: the good release keeps the rendezvous "
                    "generation it ran, which the agent there starts it as when it goes back by "
                    "itself (at the latest once its probation deadline passes); a gang already "
                    "back on it is left running\n", down);
        for (int i = 0; i < j->ncts; i++)
            d->has_gang[i] = !unreach[i] && !(keep_generation && back[i]);
        left = stop_old_gangs(d, gone, stalled, unasked);
        for (int i = 0; i < j->ncts; i++) {
            if (unreach[i]) {
                gone[i] = false;
                snprintf(stalled[i].head, sizeof stalled[i].head, "cannot be reached");
                stalled[i].tail[0] = '\0';
            }
            keep_generation |= unasked[i]; /* lost since: its gang runs on as the old generation */
        }
    }
    char tok[17];
    new_rdzv(tok);
    /* the agent keeps it as the release's bad mark: cut to fit there, at a word (it was cut
     * mid-word: "No module nam") */
    char *full = NULL, why[STATUS_BAD_REASON_MAX];
    if (asprintf(&full, "drover: %s", reason) < 0)
        full = NULL;
    (void)text_cut_words(full ? full : reason, NULL, why, sizeof why);
    free(full);
    struct agent_argv args, args_ns;
    agent_argv_init(&args);
    agent_argv_revert(&args, j->name, why, d->no_bad_mark);
    if (!kept && !keep_generation)
        agent_argv_rdzv(&args, tok);
    /* a deploy onto a stopped job: the job stays stopped, nothing of the good release starts
     * (it used to be started, then stopped again by revert_left_stopped) */
    agent_argv_init(&args_ns);
    agent_argv_revert(&args_ns, j->name, why, d->no_bad_mark);
    agent_argv_revert_no_start(&args_ns);
    if (!kept && !keep_generation)
        agent_argv_rdzv(&args_ns, tok);
    bool no_start[INV_MAX_CTS];
    for (int i = 0; i < j->ncts; i++)
        no_start[i] = deploy_revert_leaves_stopped(d, i);
    struct revert_arg ra = { .argv = args.argv, .argv_no_start = args_ns.argv, .no_start = no_start,
                             .gone = gone, .already = already, .no_agent = no_agent,
                             .timeout_s = (j->grace_s > 0 ? j->grace_s : 60) + d->inv->exec_timeout_s };
    struct ct_fan *cf = calloc(1, sizeof *cf);
    int failed = 0, stopped = 0;
    char unreached[600] = "";
    char agentless[sizeof unreached] = ""; /* the same size: filled by one snprintf below */
    size_t un = 0, an = 0;
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
            cf->skip[i] = d->ct_stopped[i][0] != '\0' || unreach[i];
        (void)ct_fan_run(cf);
        for (int i = 0; i < j->ncts; i++) {
            if (cf->rc[i] == -ETIMEDOUT && !d->no_answer[i][0]) /* named if its recovery fails */
                snprintf(d->no_answer[i], sizeof d->no_answer[i], "its drover-agent did not answer the revert");
            if (unreach[i]) {
                fprintf(stderr, "revert: %s: cannot be reached: NOT asked; its agent goes back by "
                        "itself, as the generation the others run\n", j->cts[i].label);
                failed++;
                un += (size_t)snprintf(unreached + un, un < sizeof unreached ? sizeof unreached - un : 0, "%s%s",
                                       un ? ", " : "", j->cts[i].label);
                continue;
            }
            if (cf->skip[i]) {
                fprintf(stderr, "revert: %s: container stopped (pct: %s): the good release was NOT "
                        "started there\n", j->cts[i].label, d->ct_stopped[i]);
                stopped++;
                continue;
            }
            if (!gone[i])
                fprintf(stderr, "revert: %s: %s%s; %s\n", j->cts[i].label, stalled[i].head, stalled[i].tail,
                        cf->rc[i] >= 0 || cf->rc[i] == -ETIMEDOUT
                            ? "the good release starts there once the old gang is gone"
                            : "the good release was NOT started there");
            if (cf->rc[i] < 0 && !(cf->rc[i] == -ETIMEDOUT && !gone[i])) {
                log_error("%s", cf->err[i]);
                failed++;
                /* the host answers where no agent runs: the agent is what is missing */
                char *l = no_agent[i] ? agentless : unreached;
                size_t *ln = no_agent[i] ? &an : &un;
                size_t room = *ln < sizeof unreached ? sizeof unreached - *ln : 0;
                *ln += (size_t)snprintf(l + *ln, room, "%s%s", *ln ? ", " : "", j->cts[i].label);
            } else if (cf->rc[i] >= 0 && already[i]) {
                fprintf(stderr, "revert %s: already on %s, its gang left running\n", j->cts[i].label,
                        ui_short(d->good, sid));
            } else if (cf->rc[i] >= 0 && no_start[i]) {
                fprintf(stderr, "revert %s: %s is current again, left stopped (nothing started)\n",
                        j->cts[i].label, ui_short(d->good, sid));
            } else if (cf->rc[i] >= 0) {
                fprintf(stderr, "revert %s: %s started%s\n", j->cts[i].label, ui_short(d->good, sid),
                        kept ? " again (its gang had ended since the look)" : "");
            }
        }
        free(cf);
    }
    left -= stopped; /* a stopped container has nothing to stop: named above as stopped */
    int cut = 0; /* of those, the ones whose wait the operator's Ctrl-C ended: nothing timed out */
    for (int i = 0; i < j->ncts; i++)
        cut += !gone[i] && !unreach[i] && !strcmp(stalled[i].head, INTERRUPTED_STOPPING);
    if (left > 0) {
        char w[400];
        deploy_revert_unstopped_message(w, sizeof w, j->name, left, cut, d->sid);
        log_warn("%s", w);
    }
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
        char msg[1400], gname[MANIFEST_NAME_MAX];
        if (state_release_name(d->inv->state_dir, d->good, gname) < 0)
            gname[0] = '\0';
        deploy_stopped_cts_message(msg, sizeof msg, j->name, stopped, j->ncts, names, cmds, ui_short(d->good, sid),
                                   gname);
        deploy_say_revert_failed(stdout, stderr, j->name, msg);
        history_record(d, "revert-failed", code, msg, -1);
        return EXIT_REVERT_FAILED;
    }
    if (!failed && d->leave_stopped)
        return revert_left_stopped(d, code, reason, no_start);
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
                       d->stopped_by_operator ? "aborted" : "reverted", code, reason, -1);
        return EXIT_REVERTED;
    }
    char said[1800];
    if (failed) {
        char what[120];
        snprintf(what, sizeof what, "revert failed on %d of %d %s", failed, j->ncts,
                 text_plural(j->ncts, "container", "containers"));
        deploy_revert_failed_message(said, sizeof said, what,
                                     unreached[0] || agentless[0] ? unreached : "some containers",
                                     agentless, d->sid, d->probation_deadline_at, j->name);
    } else {
        deploy_revert_unconfirmed_message(said, sizeof said, msg, j->name);
    }
    deploy_say_revert_failed(stdout, stderr, j->name, said); /* the same facts on both */
    history_record(d, "revert-failed", code, reason, -1);
    return EXIT_REVERT_FAILED;
}

struct promote_arg {
    double ktok;
    const char *samples; /* NULL none */
};

/* Promote d->id in container i: with the spec digest this switch launched there, so that the
 * agent promotes exactly the pair that was judged (another that runs there now is refused).
 * An agent that did not say promote-spec is not given it (it would refuse the option). */
static int promote_one(struct ct_fan *cf, int i)
{
    struct deploy *d = cf->d;
    const struct promote_arg *pa = cf->arg;
    struct agent_argv args;
    agent_argv_init(&args);
    agent_argv_promote(&args, &(struct agent_promote){
        .id = d->id, .job = d->job->name, .ktok_s = pa->ktok,
        .spec_digest = d->features[i] & STATUS_FEAT_PROMOTE_SPEC ? d->want_spec[i] : NULL });
    if (pa->samples)
        agent_argv_samples(&args, pa->samples);
    if (agent_argv_end(&args) < 0) {
        snprintf(cf->err[i], sizeof cf->err[i], "%s: promote: too many arguments", d->job->cts[i].label);
        return -E2BIG;
    }
    return agent_call(d, &d->job->cts[i], args.argv, d->inv->exec_timeout_s, cf->err[i],
                      sizeof cf->err[i]);
}

int promote_all(struct deploy *d, double ktok, const struct sample_set *ss)
{
    return promote_cts(d, ktok, ss, NULL);
}

int promote_cts(struct deploy *d, double ktok, const struct sample_set *ss, const bool *skip)
{
    const struct inv_job *j = d->job;
    char *text = NULL;
    if (ss && samples_format(ss, &text) < 0)
        text = NULL;
    struct promote_arg pa = { .ktok = ktok, .samples = text };
    int failed = 0;
    struct ct_fan *cf = calloc(1, sizeof *cf);
    if (!cf) {
        failed = j->ncts;
    } else {
        cf->d = d;
        cf->fn = promote_one;
        cf->arg = &pa;
        for (int i = 0; skip && i < j->ncts; i++)
            cf->skip[i] = skip[i];
        failed = ct_fan_run(cf); /* every host at once */
        for (int i = 0; i < j->ncts; i++)
            if (cf->rc[i] < 0)
                log_error("%s", cf->err[i]);
    }
    free(cf);
    free(text);
    return failed ? -EIO : 0;
}

/* The baseline's samples: what the agent of the first container kept at the last promote or
 * rebaseline (then cached), else the state_dir cache.  The agents' copy comes first: it is the
 * one every operator's promote writes, and a cache that came first judged a deploy against this
 * machine's last promote, not another operator's since (nor their rebaseline).  NULL when
 * neither has them. */
struct sample_set *load_base_samples(struct deploy *d)
{
    struct sample_set *ss = malloc(sizeof *ss), *cached = malloc(sizeof *cached);
    if (!ss || !cached) {
        free(ss);
        free(cached);
        return NULL;
    }
    bool have_cache = state_samples_get(d->inv->state_dir, d->key, false, cached) == 0;
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
            if ((!have_cache || strcmp(cached->release, ss->release) != 0 || cached->time != ss->time) &&
                state_samples_set(d->inv->state_dir, d->key, false, ss) < 0)
                log_debug("cannot cache the baseline samples in '%s'", d->inv->state_dir);
            free(cached);
            return ss;
        }
    }
    free(ss);
    if (have_cache)
        return cached; /* the agent is older than `baseline`, or did not answer */
    free(cached);
    return NULL;
}

/* Does this deploy start the job's good pair again in every container: its good release with the
 * job spec it was promoted with (a stopped or failed job started by a deploy of its good release,
 * a deploy after REVERT FAILED)?  A throughput verdict on it could only revert it to itself. */
static bool deploys_good_pair(const struct deploy *d)
{
    if (!d->sv_js)
        return false;
    for (int i = 0; i < d->job->ncts; i++) {
        struct spec_digest want;
        if (!d->sv_found[i] || jobspec_digest(d->job, i, &want) < 0 ||
            !jobspec_is_good_pair(&d->sv_js[i], d->id, &want))
            return false;
    }
    return true;
}

enum tput_rule deploy_tput_rule(const struct deploy *d, const struct sample_set *base, bool good_pair)
{
    const int world = d->job->ncts * d->job->nproc_per_node;
    if (base && !probation_baseline_fits(base, world))
        return TPUT_RANKS_CHANGED; /* its one-number median is the same measurement */
    const double k = base ? probation_median(base->ktok_s, base->n) : d->baseline;
    if (base || k > 0)
        return good_pair && k > 0 ? TPUT_GOOD_PAIR : TPUT_JUDGED;
    return TPUT_NO_BASELINE;
}

/* After a pass: the window's samples become the baseline, kept by the agents and cached. */
struct sample_set *pass_samples(struct deploy *d, const struct probation *p)
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

/* What deploy and rollback share: the job, its labels and baseline key, the scratch status.
 * An exit code on failure (logged), 0 on success; undo with deploy_done(). */
int deploy_init(struct deploy *d, struct fleet *f, const char *job, bool rollback)
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

void deploy_done(struct deploy *d, int lock)
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
    free(d->sv_js);
}

void deploy_nothing_held_message(char *buf, size_t sz, const char *job, bool runs_nothing, bool promote)
{
    const char *verb = promote ? "promote" : "revert";
    if (runs_nothing)
        snprintf(buf, sz, "job '%s' runs no release in any of its containers (never deployed there): "
                 "nothing is held to %s; deploy one with `drover deploy DIR --job %s`", job, verb, job);
    else
        snprintf(buf, sz, "job '%s' runs its good release: nothing is held to %s", job, verb);
}

void deploy_stopped_held_message(char *buf, size_t sz, const char *job, const char *where, bool promote)
{
    snprintf(buf, sz, "job '%s' is stopped in %s (`drover stop --job %s`, or its gang ended): nothing runs to "
             "%s; `drover start --job %s` runs it again", job, where, job, promote ? "promote" : "revert", job);
}

void deploy_unsurveyed_message(char *buf, size_t sz, const char *err, bool agent_failed, const char *job)
{
    if (agent_failed)
        snprintf(buf, sz, "%s; nothing was pushed or stopped (is the agent installed? drover install "
                 "--job %s)", err, job);
    else
        snprintf(buf, sz, "%s; nothing was pushed or stopped", err);
}

/* The containers named with one text of a deploy_ct_said list, then "and N more" */
#define SAID_NAMED_MAX 4

/* Append the distinct texts of said[0..n) to buf[sz] at *off, each once with its containers:
 * "HEAD on a, b and c TAIL", joined by "; ".  Returns how many texts. */
static int said_grouped(char *buf, size_t sz, size_t *off, const char *const labels[], int n,
                        const struct deploy_ct_said said[])
{
    bool done[INV_MAX_CTS] = { false };
    int texts = 0;
    for (int i = 0; i < n && i < INV_MAX_CTS; i++) {
        if (done[i] || !said[i].head[0])
            continue;
        const char *names[INV_MAX_CTS];
        int k = 0;
        for (int m = i; m < n && m < INV_MAX_CTS; m++)
            if (!done[m] && !strcmp(said[m].head, said[i].head) && !strcmp(said[m].tail, said[i].tail)) {
                done[m] = true;
                names[k++] = labels[m];
            }
        if (*off < sz)
            *off += (size_t)snprintf(buf + *off, sz - *off, "%s%s on ", texts ? "; " : "", said[i].head);
        text_join_names(names, k, SAID_NAMED_MAX, buf, sz, off);
        if (*off < sz)
            *off += (size_t)snprintf(buf + *off, sz - *off, "%s", said[i].tail);
        texts++;
    }
    return texts;
}

const char *deploy_own_baseline_note(char *buf, size_t sz, const char *sid, const char *base_sid, const char *job,
                                     double k, double base_k, double tolerance)
{
    double change = (k / base_k - 1) * 100;
    bool same = !strcmp(sid, base_sid);
    int n = same ? snprintf(buf, sz, "%s ran at %.1f Ktok/s, %+.1f%% against its own baseline of %.1f Ktok/s "
                            "(kept)", sid, k, change, base_k)
                 : snprintf(buf, sz, "%s ran at %.1f Ktok/s, %+.1f%% against the job's baseline of %.1f "
                            "Ktok/s (measured on %s, kept)", sid, k, change, base_k, base_sid);
    if (n < 0 || (size_t)n >= sz || change >= -tolerance * 100)
        return buf;
    if (same)
        snprintf(buf + n, sz - (size_t)n, ": the release is the same, so the cause lies outside it (the "
                 "hosts, the GPUs, the data, other load): look with `drover top`, and if this is the "
                 "rate to expect from now on, `drover rebaseline --job %s`", job);
    else
        snprintf(buf + n, sz - (size_t)n, ": if this is the rate to expect of it, `drover rebaseline "
                 "--job %s` makes it the baseline", job);
    return buf;
}

void deploy_switch_aborted_message(char *buf, size_t sz, const char *sid, const char *const labels[], int n,
                                   const struct deploy_ct_said why[], const struct deploy_ct_said done[])
{
    if (!sz)
        return;
    size_t off = 0;
    buf[0] = '\0';
    off += (size_t)snprintf(buf, sz, "switch to %s aborted before anything new started: ", sid);
    said_grouped(buf, sz, &off, labels, n, why);
    if (off < sz)
        off += (size_t)snprintf(buf + off, sz - off, ".  Nothing of %s was started anywhere; ", sid);
    if (!said_grouped(buf, sz, &off, labels, n, done) && off < sz)
        snprintf(buf + off, sz - off, "nothing was stopped");
}

void deploy_activate_failed_message(char *err, size_t sz, int nstopped)
{
    static const char said[] = "; nothing was stopped";
    if (!sz || nstopped <= 0)
        return;
    for (char *p; (p = strstr(err, said));)
        memmove(p, p + strlen(said), strlen(p + strlen(said)) + 1);
    size_t n = strlen(err);
    snprintf(err + n, sz - n, "; the switch had stopped the old gang in %d %s before", nstopped,
             text_plural(nstopped, "container", "containers"));
}

void deploy_aborted_message(char *buf, size_t sz, const char *sid, const char *job, const char *const labels[],
                            const bool marked[], const bool has_gang[], int ncts, bool gpu_refused)
{
    char where[512] = "";
    size_t off = 0;
    int nmarked = 0, others = 0, others_run = 0;
    for (int i = 0; i < ncts; i++) {
        if (!marked[i]) {
            others++;
            others_run += has_gang[i];
            continue;
        }
        if (off + 1 < sizeof where) {
            int w = snprintf(where + off, sizeof where - off, "%s%s", nmarked ? ", " : "", labels[i]);
            /* a list too long for the line ends in ", ..." (the containers are in drover status) */
            if (w < 0 || (size_t)w >= sizeof where - off) {
                where[off] = '\0';
                snprintf(where + off, sizeof where - off, ", ...");
                off = sizeof where;
            } else {
                off += (size_t)w;
            }
        }
        nmarked++;
    }
    if (!nmarked && others_run == others) {
        snprintf(buf, sz, "deploy of %s stopped before anything was switched: the running release keeps "
                 "running untouched", sid);
        return;
    }
    if (!nmarked) { /* stopped (`drover stop`, or its gang ended) somewhere: the deploy did not start it */
        char stopped[512] = "";
        size_t so = 0;
        for (int i = 0; others_run && i < ncts && so < sizeof stopped; i++)
            if (!has_gang[i])
                so += (size_t)snprintf(stopped + so, sizeof stopped - so, "%s%s", so ? ", " : " in ", labels[i]);
        snprintf(buf, sz, "deploy of %s stopped before anything was switched: %snothing was started: job "
                 "'%s' stays stopped%s", sid, others_run ? "the running release keeps running untouched "
                 "where it runs; " : "", job, stopped);
        return;
    }
    /* the marked containers' job failed (environment fault) and the agent did not restart it:
     * nothing of it runs there, and a deploy that stopped does not change that */
    char rest[160] = "";
    if (others_run)
        snprintf(rest, sizeof rest, "; the running release keeps running untouched in the other %d %s", others,
                 text_plural(others, "container", "containers"));
    else if (others)
        snprintf(rest, sizeof rest, "; nothing runs in the other %d %s either", others,
                 text_plural(others, "container", "containers"));
    snprintf(buf, sz, "deploy of %s stopped before anything was switched: job '%s' stays stopped (failed: "
             "environment fault) in %s%s%s", sid, job, where, rest,
             gpu_refused ? "; fix the GPU environment there (`drover-agent gpu-check` in the container says "
                           "what is wrong, and passes once it is fixed), then deploy again; or deploy --force "
                           "to start it there anyway" : "");
}

void deploy_revert_failed_message(char *buf, size_t sz, const char *what, const char *unreached,
                                  const char *no_agent, const char *sid, double deadline_at,
                                  const char *job)
{
    char when[64] = "";
    if (deadline_at > 0) {
        time_t t = (time_t)deadline_at;
        struct tm tm;
        if (gmtime_r(&t, &tm))
            strftime(when, sizeof when, " (about %H:%M:%S UTC)", &tm);
    }
    char far[900] = "", near[900] = "";
    if (unreached && unreached[0])
        snprintf(far, sizeof far, "; the revert did not reach %s (or was refused there: why is "
                 "said above), which may still run the failed release %s: the agent there reverts "
                 "it to the good release on its own at its probation deadline%s (a gang the "
                 "revert's stop already ended there stays stopped), and `drover rollback --job %s` "
                 "does it now once the host answers", unreached, sid, when, job);
    /* the host answers but no agent runs there: nothing reverts on its own until one is started
     * again, and the one started takes the job up where the dead one left it (agent/daemon.c:
     * the gang re-adopted, or launched again if it ended; the probation deadline kept) */
    if (no_agent && no_agent[0])
        snprintf(near, sizeof near, "; the drover-agent in %s is not running, so nothing there "
                 "reverts the failed release %s (its gang may run on there, unwatched): `drover "
                 "install --job %s` starts the agent again: it takes the job up where it was "
                 "left, on %s (that gang, or a new one if it ended), keeping its probation "
                 "deadline%s, and once that has passed reverts to the good release by itself, "
                 "marking %s bad there; then `drover rollback --job %s` puts the good release back "
                 "in every container as one gang",
                 no_agent, sid, job, sid, when, sid, job);
    snprintf(buf, sz, "%s%s%s; `drover status --job %s` shows what runs where", what, far, near,
             job);
}

void deploy_left_stopped_message(char *buf, size_t sz, const char *job, const char *good, const char *running)
{
    if (running && running[0])
        snprintf(buf, sz, "reverted job '%s' to %s; the job was stopped before the deploy, but stopping "
                 "it again did not succeed in %s, where %s may run: `drover stop --job %s` stops it",
                 job, good, running, good, job);
    else
        snprintf(buf, sz, "reverted job '%s' to %s; the job was stopped before the deploy, so it is left "
                 "stopped: `drover start --job %s` runs it", job, good, job);
}

void deploy_stopped_cts_message(char *buf, size_t sz, const char *job, int stopped, int ncts, const char *names,
                                const char *cmds, const char *good, const char *good_name)
{
    char named[MANIFEST_NAME_MAX + 4] = "";
    if (good_name && good_name[0])
        snprintf(named, sizeof named, " (%s)", good_name);
    snprintf(buf, sz, "%d %s stopped: %s; the good release %s%s was started in the other %d, whose ranks "
             "wait for the missing ones in their rendezvous: start the %s (%s), then deploy %s%s again "
             "from its release directory (`drover deploy DIR --job %s`) to form the gang", stopped,
             text_plural(stopped, "container", "containers"), names, good, named, ncts - stopped,
             text_plural(stopped, "container", "containers"), cmds, good, named, job);
}

void deploy_revert_unstopped_message(char *buf, size_t sz, const char *job, int left, int cut, const char *sid)
{
    if (cut > left)
        cut = left;
    if (cut == left)
        snprintf(buf, sz, "revert of job '%s': interrupted by the operator before %d %s confirmed the stop of "
                 "%s (named above); nothing timed out, the agents go on stopping it", job, left,
                 text_plural(left, "container", "containers"), sid);
    else if (cut > 0)
        snprintf(buf, sz, "revert of job '%s': %d %s did not confirm the stop of %s within the switch deadline, "
                 "and the operator interrupted the wait for %d more (named above)", job, left - cut,
                 text_plural(left - cut, "container", "containers"), sid, cut);
    else
        snprintf(buf, sz, "revert of job '%s': %d %s did not confirm the stop of %s within the switch deadline "
                 "(named above)", job, left, text_plural(left, "container", "containers"), sid);
}

void deploy_revert_unconfirmed_message(char *buf, size_t sz, const char *why, const char *job)
{
    snprintf(buf, sz, "%s; the job may be down: look with `drover status --job %s` and act now", why, job);
}

void deploy_promote_failed_message(char *buf, size_t sz, const char *sid, const char *job, double pdl)
{
    /* `drover promote` promotes where the release is still held (rollback.c's held_plan) and
     * leaves the containers where it worked: it said only "Run the deploy again", a whole new
     * probation for a release that passed one */
    snprintf(buf, sz, "promote failed on some containers: %s passed probation but is not marked good "
             "everywhere; the agents will revert it at the probation deadline (%.0fs).  `drover promote "
             "--job %s` finishes the promote where it is still held; or run the deploy again", sid, pdl, job);
}

void deploy_rollback_failed_message(char *buf, size_t sz, enum rollback_failure kind, const char *why,
                                    const char *job, const char *target, const char *good, double deadline_at)
{
    char when[64] = "";
    if (deadline_at > 0) {
        time_t t = (time_t)deadline_at;
        struct tm tm;
        if (gmtime_r(&t, &tm))
            strftime(when, sizeof when, kind == RBF_ACTIVATE ? ", about %H:%M:%S UTC" : " (about %H:%M:%S UTC)", &tm);
    }
    const char *g = good && good[0] ? good : "the good release";
    if (kind == RBF_PROMOTE) {
        /* promoted where it worked: those containers call target good, the others good, and a
         * plain rollback is refused until they agree */
        snprintf(buf, sz, "%s, but its promote failed in some containers (named above): there %s runs "
                 "unpromoted and its agents return to %s by themselves at its probation deadline%s.  "
                 "`drover promote --job %s` finishes the promote: it promotes %s where it is "
                 "still held and leaves the containers where it worked; or `drover rollback --job %s --to %s` "
                 "puts %s back in every container now and watches it (a plain rollback is refused where the "
                 "containers now disagree on the good release)", why, target, g, when, job, target, job, g, g);
        return;
    }
    if (kind == RBF_ACTIVATE && good && good[0]) {
        /* the rollback reverts at once (rollback.c): the revert's own verdict follows, REVERT
         * FAILED with what to do when it fails.  It said "run `drover rollback`" and left the
         * gang split until the agents' deadlines */
        snprintf(buf, sz, "%s; %s was activated in some containers only (the gang is split): putting %s "
                 "back in every container now, as one gang, as a failed deploy's revert does (the "
                 "revert's outcome follows); do not `drover promote --job %s` (%s never ran as one gang)",
                 why, target, good, job, target);
        return;
    }
    if (kind == RBF_ACTIVATE) {
        /* no good release to put back: nothing reverts it as one gang */
        snprintf(buf, sz, "%s; %s was activated in some containers only (the gang is split), and job '%s' "
                 "has no good release to put back: where %s was activated it runs unpromoted, on its "
                 "agents' probation (until its deadline%s); `drover deploy DIR --job %s` runs one gang "
                 "again; do not `drover promote --job %s` (%s never ran as one gang)", why, target, job,
                 target, when, job, job, target);
        return;
    }
    snprintf(buf, sz, "%s; %s runs unpromoted in every container, on its agents' probation: they return "
             "to %s by themselves when it fails there, or at its deadline%s.  `drover rollback --job %s` "
             "puts %s back in every container now, as one gang, and watches its recovery; do not `drover "
             "promote --job %s` (%s did not recover: promoted, it would run as the good release with no "
             "probation watching it)", why, target, g, when, job, g, job, target);
}

/* Do a and b write to one file: one terminal, `2>&1`, or -o json's stdout onto stderr? */
static bool streams_share_file(FILE *a, FILE *b)
{
    struct stat sa, sb;
    return a == b || (fstat(fileno(a), &sa) == 0 && fstat(fileno(b), &sb) == 0 && sa.st_dev == sb.st_dev &&
                      sa.st_ino == sb.st_ino);
}

void deploy_say_revert_failed(FILE *out, FILE *err, const char *job, const char *said)
{
    /* the verdict on out, as every verdict (bold red on a TTY); on err as well only where that is
     * another file: a terminal showed the whole paragraph twice */
    fprintf(out, "%s%sREVERT FAILED for job '%s': %s%s\n", ui_bold(out), ui_red(out), job, said, ui_reset(out));
    fflush(out);
    if (!streams_share_file(out, err))
        fprintf(err, "%s%sREVERT FAILED for job '%s': %s%s\n", ui_bold(err), ui_red(err), job, said,
                ui_reset(err));
}

/* The debug log's timing of deploy_run's steps (drover -v): seconds since *t, which restarts. */
static void deploy_step_done(double *t, const char *what)
{
    double now = time_mono();
    log_debug("deploy step: %s in %.2fs", what, now - *t);
    *t = now;
}

/* A change of the job spec alone needs, in every container, an agent that keeps a spec per
 * (release, spec): an older one keeps one per release, so a failed change could not be reverted
 * there (its revert would start the new spec again).  Such containers are named and the deploy
 * refused (-EPERM), unless force (then said and gone on with). */
static int spec_only_unrevertible(struct deploy *d, bool force)
{
    char names[600] = "";
    size_t off = 0;
    int n = 0;
    for (int i = 0; i < d->job->ncts; i++)
        if (!jobspec_revertible_here(d->sv_found[i] ? &d->sv_js[i] : NULL, d->features[i])) {
            n++;
            if (off < sizeof names)
                off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", off ? ", " : "",
                                        d->job->cts[i].label);
        }
    if (!n)
        return 0;
    if (force) {
        log_warn("--force: deploying a change of only the job spec of job '%s' (%s) where the "
                 "agent keeps one spec per release (%s): if it fails there, the revert starts the "
                 "new spec again", d->job->name, d->spec_change, names);
        return 0;
    }
    log_error("%s: the agent is older than job spec digests and keeps one job spec per release, so "
              "this change of only the job spec of job '%s' (%s) could not be reverted there (a "
              "failed one would start the new spec again); update the agent first (`drover install "
              "--job %s --restart-agent`: the gang keeps running), or deploy with --force to go on "
              "without that way back; nothing was changed", names, d->job->name, d->spec_change,
              d->job->name);
    return -EPERM;
}

void stopped_start_init(struct stopped_start *s)
{
    memset(s, 0, sizeof *s);
    s->same = true;
}

bool stopped_start_add(struct stopped_start *s, const char *label, const struct job_status *js,
                       const char *release)
{
    if (!js || js->state != GANG_STOPPED || !js->current[0])
        return false;
    s->same = s->same && !strcmp(js->current, release);
    if (s->off < sizeof s->who)
        s->off += (size_t)snprintf(s->who + s->off, sizeof s->who - s->off, "%s%s", s->n ? ", " : "",
                                   label);
    s->n++;
    return true;
}

const char *stopped_start_message(const struct stopped_start *s, bool would, const char *job,
                                  const char *sid, const char *name, char *buf, size_t sz)
{
    if (!s->n) {
        if (sz)
            buf[0] = '\0';
        return buf;
    }
    snprintf(buf, sz, "job '%s' is stopped in %s (`drover stop`, or its gang ended): %s, with "
             "release %s (%s) on probation%s%s%s", job, s->who,
             would ? "a deploy would start it" : "this deploy starts it", sid, name,
             s->same ? "; `drover start --job " : "", s->same ? job : "",
             s->same ? "` starts the release it ran without a deploy" : "");
    return buf;
}

bool deploy_job_is_stopped(const struct deploy *d)
{
    bool stopped = false;
    for (int i = 0; d->sv_js && i < d->job->ncts; i++) {
        if (d->has_gang[i])
            return false;
        stopped = stopped || (d->sv_found[i] && d->sv_js[i].state == GANG_STOPPED && d->sv_js[i].current[0]);
    }
    return stopped;
}

/* A deploy onto a job that is stopped starts it: said at once, naming the containers, so the
 * start is no surprise (it used to go by without a word).  From the survey (d->sv_js).  On
 * stderr with the other progress lines: on stdout (buffered in a pipe) it came out after the
 * verdict in `drover deploy ... 2>&1 | tee`, and stdout is for results (docs/controller.md). */
static void say_stopped_job_starts(const struct deploy *d)
{
    struct stopped_start s;
    stopped_start_init(&s);
    for (int i = 0; d->sv_js && i < d->job->ncts; i++)
        (void)stopped_start_add(&s, d->job->cts[i].label, d->sv_found[i] ? &d->sv_js[i] : NULL, d->id);
    char line[1600];
    if (s.n)
        fprintf(stderr, "%s\n", stopped_start_message(&s, false, d->job->name, d->sid, d->name, line, sizeof line));
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
    char dw[1200]; /* healthy_deadline under a raised first_step_deadline: said, never refused */
    if (inventory_deadline_warning(d.job, dw, sizeof dw))
        log_warn("%s", dw);
    int sb = stage_bundle(&d, o->dir, o->env_dir, !o->dry_run);
    if (sb) {
        ret = sb;
        goto out;
    }
    /* the release is known to be deployable (its command is in it): now every host of the job
     * at once (cmd_deploy connects nothing first for one job, so a release without its command
     * is named without a connect timeout or a host key refusal before it, and exits 2) */
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
    lock = deploy_lock(&d, "deploy");
    if (lock < 0)
        goto out;
    d.lease_with_record = true; /* each outcome's record is the last call into a container */
    deploy_step_done(&tstep, "lease taken");
    if (deploy_interrupted)
        goto interrupted_before_switch;
    bool all_current = false;
    int sr = survey(&d, true, &all_current, err, sizeof err);
    deploy_step_done(&tstep, "survey");
    if (deploy_interrupted)
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
        if (o->unchanged_out)
            json_array_append_new(o->unchanged_out, json_string(d.job->name));
        ret = EXIT_OK;
        goto out;
    }
    say_stopped_job_starts(&d);
    d.leave_stopped = deploy_job_is_stopped(&d); /* a revert leaves it so */
    if (d.spec_change[0] && (d.spec_only || strncmp(d.spec_change, "unknown", 7) != 0)) {
        /* said at once, and in the history row: a relaunch of the same release is otherwise a
         * puzzle ("why did my gang restart?"); on stderr, a progress line (see above) */
        snprintf(d.spec_note, sizeof d.spec_note, "job spec changed: %s", d.spec_change);
        fprintf(stderr, "release %s (%s), %s%s\n", d.sid, d.name, d.spec_note,
               d.spec_only ? " (the same release: relaunched with the new spec, on probation)" : "");
    }
    warn_failed_before(&d); /* a second full probation of a release that failed one: said */
    if (d.spec_only && spec_only_unrevertible(&d, o->force) < 0)
        goto out; /* refused before anything was tried: no history row */
    int cr = check_rollback_target(&d, o->force);
    deploy_step_done(&tstep, "rollback target checked");
    if (deploy_interrupted)
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
    int gr = gpu_check_cts(&d, o->force, err, sizeof err);
    int pr = gr == 0 ? push_release(&d, o->stage_only, err, sizeof err) : 0;
    if (gr == 0 && pr == 0 && o->stage_only) {
        deploy_step_done(&tstep, "pushed");
        printf("release %s (%s) is verified in every container of job '%s' (staged only: nothing "
               "switched)\n", d.sid, d.name, d.job->name);
        ret = EXIT_OK;
        goto out;
    }
    if (deploy_interrupted && !strstr(err, "interrupted by the operator"))
        goto interrupted_before_switch; /* push_release's own line says how far the staging got */
    /* a failed push stops here whatever it said: below, only err[0] is asked, and a push that
     * failed without words must not go on to the preflight and the switch */
    if (pr < 0 && !err[0])
        snprintf(err, sizeof err, "staging release %s failed: %s", d.sid, strerror(-pr));
    if (err[0] || preflight_cts(&d, err, sizeof err) < 0 || deploy_interrupted) {
        ret = f->key_refused ? EXIT_HOSTKEY : EXIT_FAIL;
        exec_interrupted = 0; /* the lease and the history record below are sent */
        if (deploy_interrupted && !strstr(err, "interrupted by the operator"))
            snprintf(err, sizeof err, "interrupted by the operator before the switch (during the preflight)");
        log_error("%s", err);
        char closing[1024];
        deploy_aborted_message(closing, sizeof closing, d.sid, d.job->name, d.labels, d.attention, d.has_gang,
                               d.job->ncts, gr < 0);
        fprintf(stderr, "%s\n", closing);
        history_record(&d, "aborted", HISTORY_RC_NONE, err, -1);
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
        history_record(&d, "aborted", HISTORY_RC_NONE, "deploy lease lost before the switch", -1);
        goto out;
    }
    if (pol->on_inconclusive_hold && !d.analysis)
        pdl += pol->hold_time_s; /* a held release waits for the operator this long */
    if (deploy_interrupted)
        goto interrupted_before_switch;
    interrupt_handlers(on_sigint);
    char reason[PROBATION_REASON_MAX + 64];
    enum status_reason agent_code = STATUS_RC_NONE; /* of the agent's reason the verdict quotes */
    int exit_code = -1;                             /* of the rank the verdict names */
    int gone_ct = -1;                               /* the container whose agent is not running */
    enum history_reason hcode = HISTORY_RC_NONE;    /* of the record of a failure */
    d.switching = true;
    int ar = activate_cts(&d, pdl, err, sizeof err);
    if (ar == -ECANCELED) {
        /* nothing of the new release ran: no probation, no revert, nothing marked bad */
        printf("%sSWITCH ABORTED%s for job '%s': %s\n", ui_red(stdout), ui_reset(stdout), d.job->name, err);
        history_record(&d, "aborted", HISTORY_RC_NONE, err, -1);
        ret = EXIT_FAIL;
        goto restore;
    }
    /* what the switch replaced: a release whose deploy's drover died during its probation left
     * no record of it anywhere (t-34) */
    history_record_abandoned(&d);
    if (ar < 0) { /* said once, by the FAILED verdict below (it was said three times) */
        snprintf(reason, sizeof reason, "activate failed: %.760s", err);
        goto failed;
    }
    /* healthy_deadline counts from the moment the whole gang runs the new release: each
     * activation waits for its old gang to checkpoint and stop, which may take a while. */
    double t0 = time_mono();
    d.base = load_base_samples(&d);
    char bsid[RELEASE_SHORT_LEN + 1];
    int world = d.job->ncts * d.job->nproc_per_node, base_ranks = d.base ? d.base->ranks : 0;
    /* The good pair again: a throughput "regression" could only revert it to itself.  Judged, a
     * slower host "failed" the good release, reverted it to itself (exit 3) and recorded it
     * failed (a later `rollback --to` it was refused).  The rule is skipped, the baseline kept
     * and the rate said against it; a baseline of other ranks is replaced as for any deploy. */
    const double base_k = d.base ? probation_median(d.base->ktok_s, d.base->n) : d.baseline;
    const enum tput_rule rule = deploy_tput_rule(&d, d.base, deploys_good_pair(&d));
    const bool keep_base = rule == TPUT_GOOD_PAIR;
    char base_sid[RELEASE_SHORT_LEN + 1] = "";
    if (keep_base)
        (void)ui_short(d.base ? d.base->release : brel, base_sid);
    if (keep_base) {
        fprintf(stderr, "probation: %s is the good release of job '%s' with the job spec it was promoted with: "
                "the throughput rule is skipped (a regression could only revert it to itself), and the "
                "baseline (%s, median %.1f Ktok/s) stays; `drover rebaseline --job %s` measures the good "
                "release again\n", d.sid, d.job->name, base_sid, base_k, d.job->name);
    } else if (rule == TPUT_RANKS_CHANGED) {
        /* its one-number median is the same measurement: neither is compared */
        (void)ui_short(d.base->release, bsid);
        free(d.base);
        d.base = NULL;
        d.baseline = -1;
        fprintf(stderr, "probation: the baseline %s was measured with %d %s and this deploy runs %d "
                "(nproc_per_node changed): its Ktok/s are not comparable, so the throughput rule is "
                "skipped for this deploy, and its samples become the baseline\n", bsid, base_ranks,
                text_plural(base_ranks, "rank", "ranks"), world);
    } else if (d.base)
        fprintf(stderr, "probation: baseline %s: %d %s (median %.1f Ktok/s); fail when the "
                "whole %.0f%% interval of the change lies below -%.0f%%\n", ui_short(d.base->release, bsid),
                d.base->n, text_plural(d.base->n, "sample", "samples"), probation_median(d.base->ktok_s, d.base->n), pol->confidence * 100,
                pol->tolerance * 100);
    else if (d.baseline > 0)
        fprintf(stderr, "probation: baseline %.1f Ktok/s (one number, no samples), tolerance "
                "-%.0f%%\n", d.baseline, pol->tolerance * 100);
    else
        fprintf(stderr, "probation: no baseline on these containers yet: the throughput rule is "
                "skipped for this deploy\n");
    struct probation *p;
    if (probation_new(pol, d.job->name, d.id, d.job->ncts, d.labels, d.job->nproc_per_node,
                      keep_base ? -1 : d.baseline, false, t0, &p) < 0)
        goto restore;
    if (keep_base)
        probation_unjudged(p, "the good release again");
    else if (rule == TPUT_RANKS_CHANGED) { /* a baseline there is: its note must not say none */
        char why[64];
        snprintf(why, sizeof why, "the baseline ran %d %s, this deploy %d", base_ranks,
                 text_plural(base_ranks, "rank", "ranks"), world);
        probation_rebase(p, why);
    } else if (d.base)
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
    d.stopped_by_operator = deploy_interrupted && v == PROBATION_PENDING;
    if (d.stopped_by_operator)
        snprintf(reason, sizeof reason, "interrupted by the operator during probation (no verdict)");
    else
        snprintf(reason, sizeof reason, "%s", probation_reason(p));
    agent_code = probation_agent_code(p);
    exit_code = probation_exit_code(p);
    gone_ct = probation_agent_gone_ct(p);
    hcode = probation_agent_went_back(p) ? HISTORY_RC_AGENT_REVERT : HISTORY_RC_NONE;
    if (probation_note(p)[0] && v == PROBATION_PASS)
        fprintf(stderr, "%s\n", probation_note(p));
    if (d.analysis) {
        printf("verdict for %s (%s), job '%s' (analysis only): %s: %s\n", d.sid, d.name,
               d.job->name, deploy_interrupted && v == PROBATION_PENDING ? "interrupted" : probation_verdict_name(v),
               reason);
        probation_free(p);
        d.no_bad_mark = v == PROBATION_PASS || d.stopped_by_operator;
        int r = revert_all(&d, hcode, reason);
        if (r == EXIT_REVERTED)
            ret = v == PROBATION_PASS ? EXIT_OK : EXIT_REVERTED;
        else
            ret = r;
        goto restore;
    }
    if (v == PROBATION_PASS) {
        double k = probation_ktok_s(p);
        /* the good pair again: promoted as a rollback is (no figures), so the agents keep the
         * baseline they have (a set of another release is refused by the agent: --samples must
         * be the promoted release's; t-36 found it) */
        struct sample_set *ss = keep_base ? NULL : pass_samples(&d, p);
        if (promote_all(&d, keep_base ? -1 : k, ss) < 0) {
            char said[600];
            deploy_promote_failed_message(said, sizeof said, d.sid, d.job->name, pdl);
            fprintf(stderr, "%s%s%s%s\n", ui_bold(stderr), ui_red(stderr), said, ui_reset(stderr));
            history_record(&d, "failed", HISTORY_RC_PROMOTE_FAILED, "promote failed", k);
            ret = EXIT_FAIL;
        } else {
            if (!keep_base && k > 0 && state_baseline_set(d.inv->state_dir, d.key, d.id, k) < 0)
                log_warn("cannot record the baseline in '%s'", d.inv->state_dir);
            if (ss && state_samples_set(d.inv->state_dir, d.key, false, ss) < 0)
                log_warn("cannot cache the baseline samples in '%s'", d.inv->state_dir);
            printf("%spromoted%s %s (%s) for job '%s': %s\n", ui_green(stdout), ui_reset(stdout),
                   d.sid, d.name, d.job->name, reason);
            if (keep_base && k > 0) {
                char own[500];
                printf("%s\n", deploy_own_baseline_note(own, sizeof own, d.sid, base_sid, d.job->name, k,
                                                        base_k, pol->tolerance));
            }
            history_record(&d, "promoted", HISTORY_RC_NONE, reason, k);
            ret = EXIT_OK;
            /* Collection after a promote: this job's hosts; every job's ways back are kept. */
            const char *keep[] = { d.id, d.good, d.current, d.previous, d.has_env ? d.env.id : NULL };
            (void)objsync_gc_fleet(d.f, keep, ARRAY_SIZE(keep), d.f->inv->keep, true, d.job); /* warns where it skipped */
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
        history_record(&d, "held", HISTORY_RC_NONE, reason, probation_ktok_s(p));
        free(ss);
        probation_free(p);
        ret = EXIT_HELD;
        goto restore;
    }
    probation_free(p);
failed:
    if (env_fault_seen(&d, agent_code, exit_code, reason, reason, sizeof reason)) {
        /* The agent stopped the gang for a device or driver fault: the environment, not the
         * release.  Reverting would blame the release and run the good one on the same broken
         * GPU; the container stays marked until gpu-check passes there.  Said once, on stdout
         * as every verdict (the same reason was also said as an error on stderr). */
        printf("%sENVIRONMENT FAULT%s for job '%s' with %s (%s): %s; not reverted (the release is "
               "not to blame): fix the container's GPU environment (drover-agent gpu-check), then "
               "deploy again\n", ui_red(stdout), ui_reset(stdout), d.job->name, d.sid, d.name,
               reason);
        history_record(&d, "failed", HISTORY_RC_ENVIRONMENT, reason, -1);
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
        /* The verdict is said once, on stdout, as promoted and HELD are (-o json: on stderr, and
         * the document's "error" is the record's reason).  It was also said as `drover: error:
         * release ... failed probation: <reason>` just before, the same reason twice. */
        printf("%sFAILED%s %s (%s) for job '%s': %s\n", ui_red(stdout), ui_reset(stdout), d.sid,
               d.name, d.job->name, reason);
    }
    if (!pol->auto_revert) {
        printf("auto_revert is off: %s keeps running; `drover rollback --job %s` returns to %s\n",
               d.sid, d.job->name, d.good[0] ? d.good : "(no good release)");
        history_record(&d, d.stopped_by_operator ? "aborted" : "failed", hcode, reason, -1);
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
    if (gone_ct >= 0) {
        /* its agent died (kill -9, a crash) or answers nothing (stopped, frozen, its host
         * gone): the silence is the agent's, not the release's */
        d.no_bad_mark = true;
        printf("the drover-agent in %s is not running or not answering: %s is not marked bad; it is "
               "reverted wherever an agent answers\n", d.job->cts[gone_ct].label, d.sid);
    }
    /* no verdict on the release (its agents leave it unmarked): recorded so, or this very record
     * ("revert-failed", as the revert cannot reach the agent) made a later plan, deploy and
     * rollback --to count it as a failed probation, against the words above */
    if (d.no_bad_mark && !d.stopped_by_operator && hcode == HISTORY_RC_NONE)
        hcode = HISTORY_RC_UNDECIDED;
    ret = revert_all(&d, hcode, reason);
restore:
    interrupt_handlers(NULL);
    goto out;
interrupted_before_switch:
    exec_interrupted = 0; /* the lease and the history record below are sent */
    send_interrupted = 0;
    if (deploy_job_is_stopped(&d))
        log_error("deploy of %s interrupted by the operator before the switch: nothing was started: job "
                  "'%s' stays stopped", d.sid, d.job->name);
    else
        log_error("deploy of %s interrupted by the operator before the switch: nothing was stopped or "
                  "switched, the running release keeps running untouched", d.sid);
    history_record(&d, "aborted", HISTORY_RC_NONE, "interrupted by the operator before the switch", -1);
    ret = EXIT_FAIL;
out:
    interrupt_handlers(NULL);
    exec_interrupted = 0; /* a second Ctrl-C during the record above: still give the lease back */
    send_interrupted = 0;
    deploy_done(&d, lock);
    return ret;
}

/* A wave's local checks, of every job before any host is contacted: the release (and --env)
 * directory read as stage_bundle reads it (the hash cache then spares the jobs' own walks), and
 * each job's command and preflight in it.  Bad input anywhere exits 2 before the first job is
 * deployed, each problem named with its job (a later job's missing command used to be found
 * only once the jobs before it were deployed, and the wave then rolled them back).  0, or the
 * exit code. */
static int wave_check_local(struct fleet *f, const struct deploy_opts *o, const char *const *jobs, int njobs)
{
    bool untouched = !fleet_contacted(f);
    int bad = untouched ? EXIT_USAGE : EXIT_FAIL, ret = 0, r;
    struct relsrc env = { 0 }, rs = { 0 };
    bool has_env = false, has_rs = false;
    if (o->env_dir) {
        if ((r = relsrc_load(o->env_dir, NULL, &env)) < 0) {
            bool input = release_read_is_bad_input(r);
            release_read_error("environment", o->env_dir, r, untouched && input);
            return input ? bad : EXIT_FAIL;
        }
        has_env = true;
    }
    if ((r = relsrc_load(o->dir, has_env ? env.id : NULL, &rs)) < 0) {
        bool input = release_read_is_bad_input(r);
        release_read_error("release", o->dir, r, untouched && input);
        ret = input ? bad : EXIT_FAIL;
        goto out;
    }
    has_rs = true;
    for (int i = 0; i < njobs; i++) /* every job: all of the wave's problems at once */
        if (release_job_problems(rs.m, o->dir, has_env ? env.m : NULL, o->env_dir,
                                 inventory_find_job(f->inv, jobs[i]), untouched))
            ret = bad;
out:
    if (has_rs)
        relsrc_done(&rs);
    if (has_env)
        relsrc_done(&env);
    return ret;
}

int deploy_wave(struct fleet *f, const struct deploy_opts *o, const char *const *jobs, int njobs)
{
    const char *moved[INV_MAX_JOBS];
    int nmoved = 0;
    for (int i = 0; i < njobs; i++)
        if (!deploy_pick_job(f->inv, jobs[i]))
            return EXIT_USAGE;
    int lr = wave_check_local(f, o, jobs, njobs);
    if (lr)
        return lr;
    /* then every host of these jobs at once: a dead host costs one connect timeout, not one each */
    bool need[INV_MAX_HOSTS] = { false };
    fleet_hosts_of_jobs(f->inv, jobs, njobs, need);
    (void)fleet_connect_all(f, need);
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
            if (deploy_rollback(f, moved[k], NULL, false, false, false) != EXIT_OK)
                ret = EXIT_REVERT_FAILED;
        return ret;
    }
    return EXIT_OK;
}

