/* agent/supervise.c: worker gangs (see supervise.h); the rules live in jobmachine.c.
 *
 * Invariants: every fd the agent opens is O_CLOEXEC, so a worker inherits exactly stdin
 * (/dev/null), stdout/stderr (its rank log) and its heartbeat pipe; a gang counts as gone only
 * when every rank was reaped and kill(-pgid, 0) finds nobody, so the next gang never overlaps
 * the old one on the GPUs.  Must never block on a worker: heartbeat pipes are non-blocking.
 */
#include "agent/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

void gang_init(struct gang *g)
{
    memset(g, 0, sizeof *g);
    g->first_exit = -1;
    g->diverged = -1;
    g->hung = -1;
    for (int i = 0; i < STATUS_MAX_RANKS; i++) {
        g->ranks[i].hb_fd = -1;
        g->ranks[i].log_fd = -1;
    }
}

static int release_dir(const struct store *s, const char *id, char *buf, size_t sz)
{
    return store_path(s, buf, sz, "releases/%s", id);
}

int gang_check_exec(const struct store *s, const struct job_spec *spec, char *err, size_t errsz)
{
    char dir[PATH_MAX], exe[PATH_MAX];
    struct stat st;
    if (!store_has_release(s, spec->release)) {
        snprintf(err, errsz, "release %.12s is not in the store", spec->release);
        return -ENOENT;
    }
    if (spec->argc <= 0) {
        snprintf(err, errsz, "no command given");
        return -EINVAL;
    }
    int r = release_dir(s, spec->release, dir, sizeof dir);
    if (r < 0)
        return r;
    const char *a0 = spec->argv[0];
    bool found = false;
    if (strchr(a0, '/')) {
        if (snprintf(exe, sizeof exe, "%s/%s", a0[0] == '/' ? "" : dir, a0) >= (int)sizeof exe)
            return -ENAMETOOLONG;
        found = stat(exe, &st) == 0;
    } else {
        const char *path = getenv("PATH");
        char buf[4096];
        (void)str_copy(buf, sizeof buf, path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
        char *save = NULL;
        for (char *d = strtok_r(buf, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
            snprintf(exe, sizeof exe, "%s/%s", d, a0);
            found = stat(exe, &st) == 0 && S_ISREG(st.st_mode);
        }
    }
    if (!found) {
        snprintf(err, errsz, "command '%s' not found in release %.12s", a0, spec->release);
        return -ENOENT;
    }
    if (!S_ISREG(st.st_mode) || access(exe, X_OK) < 0) {
        snprintf(err, errsz, "command '%s' in release %.12s is not executable", a0, spec->release);
        return -EACCES;
    }
    return 0;
}

static int env_add(struct gang_env *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int env_add(struct gang_env *e, const char *fmt, ...)
{
    if (e->n >= GANG_ENV_MAX)
        return -E2BIG;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e->storage[e->n], sizeof e->storage[0], fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof e->storage[0])
        return -ENAMETOOLONG;
    e->envp[e->n] = e->storage[e->n];
    e->n++;
    e->envp[e->n] = NULL;
    return 0;
}

int gang_build_env(struct gang_env *e, const struct store *s, const char *job,
                   const struct job_spec *spec, const char *resume, int local_rank, int hb_fd)
{
    memset(e->envp, 0, sizeof e->envp);
    e->n = 0;
    char run[PATH_MAX];
    int r = store_path(s, run, sizeof run, "runs/%s", job);
    if (r < 0)
        return r;
    /* A clean environment: nothing inherited from pct exec / ssh (cases-field C05). */
    const char *path = getenv("PATH");
    if ((r = env_add(e, "PATH=%s", path && *path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")) < 0 ||
        (r = env_add(e, "HOME=/root")) < 0 || (r = env_add(e, "LANG=C.UTF-8")) < 0 ||
        (r = env_add(e, "RANK=%d", spec->node_rank * spec->nproc + local_rank)) < 0 ||
        (r = env_add(e, "WORLD_SIZE=%d", spec->nnodes * spec->nproc)) < 0 ||
        (r = env_add(e, "LOCAL_RANK=%d", local_rank)) < 0 ||
        (r = env_add(e, "LOCAL_WORLD_SIZE=%d", spec->nproc)) < 0 ||
        (r = env_add(e, "GROUP_RANK=%d", spec->node_rank)) < 0 ||
        (r = env_add(e, "MASTER_ADDR=%s", spec->master_addr)) < 0 ||
        (r = env_add(e, "MASTER_PORT=%d", spec->master_port)) < 0 ||
        (r = env_add(e, "DROVER_HEARTBEAT_FD=%d", hb_fd)) < 0 ||
        (r = env_add(e, "DROVER_RELEASE=%s", spec->release)) < 0 ||
        (r = env_add(e, "DROVER_JOB=%s", job)) < 0 || (r = env_add(e, "DROVER_RUN_DIR=%s", run)) < 0)
        return r;
    if (resume && (r = env_add(e, "DROVER_RESUME_RELEASES=%s", resume)) < 0)
        return r;
    if (spec->gpus[0]) {
        char gpu[16];
        if ((r = spec_gpu_at(spec, local_rank, gpu, sizeof gpu)) < 0)
            return r;
        if ((r = env_add(e, "CUDA_VISIBLE_DEVICES=%s", gpu)) < 0)
            return r;
    }
    for (int i = 0; i < spec->nenv; i++)
        if ((r = env_add(e, "%s", spec->env[i])) < 0)
            return r;
    return 0;
}

static int open_rank_log(const struct store *s, const char *job, int rank)
{
    char p[PATH_MAX], old[PATH_MAX + 8];
    if (store_path(s, p, sizeof p, "runs/%s/logs/rank%d.log", job, rank) < 0)
        return -ENAMETOOLONG;
    struct stat st;
    if (stat(p, &st) == 0 && (uint64_t)st.st_size > RANK_LOG_MAX / 2) {
        snprintf(old, sizeof old, "%s.1", p);
        (void)rename(p, old);
    }
    int fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    return fd < 0 ? -errno : fd;
}

/* The child between fork and exec: async-signal-safe calls only. */
static void __attribute__((noreturn))
rank_exec(const char *dir, const struct job_spec *spec, char **envp, pid_t pgid, int log_fd,
          int hb_w, int err_w)
{
    sigset_t none;
    sigemptyset(&none);
    for (int sig = 1; sig < NSIG; sig++)
        signal(sig, SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int e = 0;
    /* move our fds out of the way of 0..3, then place them: 0 /dev/null, 1+2 log, 3 heartbeat */
    err_w = fcntl(err_w, F_DUPFD_CLOEXEC, 10);
    hb_w = fcntl(hb_w, F_DUPFD_CLOEXEC, 10);
    log_fd = fcntl(log_fd, F_DUPFD_CLOEXEC, 10);
    if (err_w < 0 || hb_w < 0 || log_fd < 0)
        e = errno;
    if (!e && setpgid(0, pgid) < 0)
        e = errno;
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (!e && (devnull < 0 || dup2(devnull, 0) < 0 || dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0 ||
               dup2(hb_w, GANG_HEARTBEAT_FD) < 0)) /* dup2 clears close-on-exec on the copies */
        e = errno;
    if (!e && chdir(dir) < 0)
        e = errno;
    if (!e) {
        execvpe(spec->argv[0], spec->argv, envp);
        e = errno;
    }
    (void)!write(err_w, &e, sizeof e);
    _exit(127);
}

static void gang_kill_now(struct gang *g)
{
    if (g->pgid > 0)
        (void)kill(-g->pgid, SIGKILL);
    for (int i = 0; i < g->nranks; i++) {
        struct rank_proc *rp = &g->ranks[i];
        if (rp->pid > 0 && rp->alive) {
            (void)kill(rp->pid, SIGKILL);
            (void)waitpid(rp->pid, NULL, 0);
            rp->alive = false;
        }
    }
}

int gang_start(struct gang *g, const struct store *s, const char *job, const struct job_spec *spec,
               const char *resume, int generation, char *err, size_t errsz)
{
    char dir[PATH_MAX], p[PATH_MAX];
    int r;
    gang_init(g);
    if ((r = release_dir(s, spec->release, dir, sizeof dir)) < 0)
        return r;
    static const char *const sub[] = {"checkpoints", "logs"};
    for (size_t i = 0; i < ARRAY_SIZE(sub); i++)
        if ((r = store_path(s, p, sizeof p, "runs/%s/%s", job, sub[i])) < 0 ||
            (r = fs_mkdir_p(p, 0750)) < 0) {
            snprintf(err, errsz, "cannot create '%s': %s", p, strerror(-r));
            return r;
        }
    (void)str_copy(g->job, sizeof g->job, job);
    (void)str_copy(g->release, sizeof g->release, spec->release);
    g->generation = generation;
    g->grace_s = spec->grace_s;
    g->live = spec->live;
    g->started_mono = time_mono();
    struct gang_env *env = malloc(sizeof *env);
    if (!env)
        return -ENOMEM;
    for (int lr = 0; lr < spec->nproc; lr++) {
        struct rank_proc *rp = &g->ranks[lr];
        rp->local_rank = lr;
        rp->rank = spec->node_rank * spec->nproc + lr;
        rp->exit_code = -1;
        rp->hb_fd = rp->log_fd = -1;
        (void)linebuf_init(&rp->hb_lb, rp->hb_buf, sizeof rp->hb_buf, sizeof rp->hb_buf - 1);
        int hb[2] = {-1, -1}, ep[2] = {-1, -1};
        if (pipe2(hb, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0) {
            r = -errno;
            snprintf(err, errsz, "pipe: %s", strerror(errno));
            goto fail_fds;
        }
        if ((rp->log_fd = open_rank_log(s, job, rp->rank)) < 0) {
            r = rp->log_fd;
            rp->log_fd = -1;
            snprintf(err, errsz, "cannot open rank %d log: %s", rp->rank, strerror(-r));
            goto fail_fds;
        }
        if ((r = gang_build_env(env, s, job, spec, resume, lr, GANG_HEARTBEAT_FD)) < 0) {
            snprintf(err, errsz, "worker environment too large");
            goto fail_fds;
        }
        pid_t pid = fork();
        if (pid < 0) {
            r = -errno;
            snprintf(err, errsz, "fork: %s", strerror(errno));
            goto fail_fds;
        }
        if (pid == 0)
            rank_exec(dir, spec, env->envp, g->pgid, rp->log_fd, hb[1], ep[1]);
        if (g->pgid == 0)
            g->pgid = pid;
        (void)setpgid(pid, g->pgid); /* also in the child: whichever runs first wins */
        rp->pid = pid;
        rp->alive = true;
        g->nranks = lr + 1;
        close(hb[1]);
        close(ep[1]);
        hb[1] = ep[1] = -1;
        int e = 0;
        ssize_t n;
        while ((n = read(ep[0], &e, sizeof e)) < 0 && errno == EINTR)
            ;
        close(ep[0]);
        ep[0] = -1;
        (void)fcntl(hb[0], F_SETFL, O_NONBLOCK);
        rp->hb_fd = hb[0];
        if (n == (ssize_t)sizeof e) {
            r = -e;
            snprintf(err, errsz, "cannot execute '%s' (rank %d): %s", spec->argv[0], rp->rank,
                     strerror(e));
            goto fail;
        }
        continue;
    fail_fds:
        for (int k = 0; k < 2; k++) {
            if (hb[k] >= 0)
                close(hb[k]);
            if (ep[k] >= 0)
                close(ep[k]);
        }
        goto fail;
    }
    free(env);
    log_info("job '%s': gang %d of release %.12s started (%d ranks, pgid %d)", job, generation,
             spec->release, g->nranks, (int)g->pgid);
    return 0;
fail:
    free(env);
    gang_kill_now(g);
    gang_clear(g);
    return r;
}

void gang_stop(struct gang *g)
{
    if (g->pgid <= 0 || g->stopping)
        return;
    g->stopping = true;
    g->kill_at = time_mono() + g->grace_s;
    if (kill(-g->pgid, SIGTERM) < 0 && errno != ESRCH)
        log_warn("job '%s': SIGTERM to process group %d: %s", g->job, (int)g->pgid, strerror(errno));
    log_info("job '%s': stopping gang %d (SIGTERM, SIGKILL in %g s)", g->job, g->generation,
             g->grace_s);
}

void gang_tick(struct gang *g, double now)
{
    if (g->pgid <= 0)
        return;
    if (g->stopping && !g->killed && now >= g->kill_at) {
        g->killed = true;
        log_warn("job '%s': gang %d still running %g s after SIGTERM: SIGKILL", g->job,
                 g->generation, g->grace_s);
        (void)kill(-g->pgid, SIGKILL);
    }
    for (int i = 0; i < g->nranks; i++) {
        struct stat st;
        int fd = g->ranks[i].log_fd;
        if (fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_size > RANK_LOG_MAX)
            (void)ftruncate(fd, 0); /* O_APPEND writers continue at the new end */
    }
}

int gang_note_exit(struct gang *g, pid_t pid, int wstatus)
{
    for (int i = 0; i < g->nranks; i++) {
        struct rank_proc *rp = &g->ranks[i];
        if (rp->pid != pid || !rp->alive)
            continue;
        if (rp->hb_fd >= 0)
            (void)gang_read_heartbeats(g, i, time_mono());
        rp->alive = false;
        if (WIFEXITED(wstatus)) {
            rp->exit_code = WEXITSTATUS(wstatus);
            rp->exit_signal = 0;
        } else if (WIFSIGNALED(wstatus)) {
            rp->exit_code = -1;
            rp->exit_signal = WTERMSIG(wstatus);
        }
        if (!g->stopping && g->first_exit < 0)
            g->first_exit = i;
        return i;
    }
    return -1;
}

int gang_alive(const struct gang *g)
{
    int n = 0;
    for (int i = 0; i < g->nranks; i++)
        n += g->ranks[i].alive;
    return n;
}

bool gang_is_gone(const struct gang *g)
{
    if (g->pgid <= 0)
        return true;
    if (gang_alive(g) > 0)
        return false;
    return kill(-g->pgid, 0) < 0 && errno == ESRCH;
}

void gang_clear(struct gang *g)
{
    for (int i = 0; i < STATUS_MAX_RANKS; i++) {
        if (g->ranks[i].hb_fd >= 0)
            close(g->ranks[i].hb_fd);
        if (g->ranks[i].log_fd >= 0)
            close(g->ranks[i].log_fd);
    }
    gang_init(g);
}

static void hb_take_line(struct gang *g, struct rank_proc *rp, const char *line, size_t len, double now)
{
    struct heartbeat hb;
    int r = heartbeat_parse(line, len, &hb);
    if (r < 0) {
        rp->hb_bad++;
        if (rp->hb_bad <= 3 || rp->hb_bad % 1000 == 0)
            log_warn("job '%s' rank %d: bad heartbeat line (%s), %llu so far", g->job, rp->rank,
                     strerror(-r), (unsigned long long)rp->hb_bad);
        return;
    }
    /* A foreign worker may leave out "release" (the gang's is meant) and "nonfinite" (then the
     * agent counts consecutive steps whose loss was null/NaN itself: a non-finite loss is a
     * failure, never a line to drop). */
    if (!hb.release[0])
        (void)str_copy(hb.release, sizeof hb.release, g->release);
    if (hb.phase == HB_PHASE_TRAIN && hb.has_loss && !hb.loss_finite) {
        int prev = rp->has_hb ? rp->hb.nonfinite : 0;
        bool advanced = !rp->has_hb || hb.step > rp->hb.step;
        int counted = advanced ? prev + 1 : (prev > 0 ? prev : 1);
        if (hb.nonfinite < counted)
            hb.nonfinite = counted;
    }
    if (!rp->has_hb || hb.step != rp->hb.step)
        rp->step_mono = now;
    if (!rp->has_hb || hb.phase != rp->hb.phase)
        rp->phase_mono = now;
    rp->hb = hb;
    rp->has_hb = true;
    rp->hb_mono = now;
    rp->hb_lines++;
    if (hb.nonfinite >= HB_DIVERGED_STEPS && g->diverged < 0 && !g->stopping)
        g->diverged = (int)(rp - g->ranks);
}

int gang_read_heartbeats(struct gang *g, int idx, double now)
{
    struct rank_proc *rp = &g->ranks[idx];
    int accepted = 0;
    while (rp->hb_fd >= 0) {
        size_t room;
        char *at = linebuf_room(&rp->hb_lb, &room);
        ssize_t n = read(rp->hb_fd, at, room);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                break;
            n = 0;
        }
        if (n == 0) {
            close(rp->hb_fd);
            rp->hb_fd = -1;
            break;
        }
        linebuf_added(&rp->hb_lb, (size_t)n);
        uint64_t overlong = rp->hb_lb.overlong;
        char *line;
        size_t len;
        int r;
        while ((r = linebuf_next(&rp->hb_lb, &line, &len)) != 0) {
            if (r < 0)
                continue; /* the end of an over-long line, counted when it was found */
            uint64_t before = rp->hb_lines;
            hb_take_line(g, rp, line, len, now);
            accepted += rp->hb_lines > before;
        }
        uint64_t k = rp->hb_lb.overlong;
        if (k != overlong && (k <= 3 || k % 1000 == 0))
            log_warn("job '%s' rank %d: heartbeat line over %d bytes dropped (%llu so far)", g->job,
                     rp->rank, HEARTBEAT_LINE_MAX, (unsigned long long)k);
    }
    return accepted;
}

bool gang_all_training(const struct gang *g)
{
    if (g->nranks == 0)
        return false;
    for (int i = 0; i < g->nranks; i++) {
        const struct rank_proc *rp = &g->ranks[i];
        if (!rp->alive || !rp->has_hb ||
            (rp->hb.phase != HB_PHASE_TRAIN && rp->hb.phase != HB_PHASE_CHECKPOINT))
            return false;
    }
    return true;
}

static void liveness_fact(const struct rank_proc *rp, struct liveness_rank *lr)
{
    lr->rank = rp->rank;
    lr->alive = rp->alive;
    lr->has_hb = rp->has_hb;
    lr->phase = rp->hb.phase;
    lr->step = rp->hb.step;
    lr->hb_mono = rp->hb_mono;
    lr->step_mono = rp->step_mono;
    lr->phase_mono = rp->phase_mono;
}

bool gang_judge_liveness(struct gang *g, double now)
{
    if (g->pgid <= 0 || g->stopping || g->first_exit >= 0 || g->diverged >= 0 || g->hung >= 0)
        return false;
    struct liveness_rank lr[STATUS_MAX_RANKS];
    for (int i = 0; i < g->nranks; i++)
        liveness_fact(&g->ranks[i], &lr[i]);
    struct liveness_verdict v;
    if (!liveness_judge(&g->live, lr, g->nranks, g->started_mono, now, &v))
        return false;
    for (int i = 0; i < g->nranks; i++)
        if (g->ranks[i].rank == v.rank)
            g->hung = i;
    (void)liveness_describe(&v, g->hung_why, sizeof g->hung_why);
    return true;
}

void gang_fill_status(const struct gang *g, struct job_status *js, double now)
{
    js->nranks = g->nranks;
    for (int i = 0; i < g->nranks; i++) {
        const struct rank_proc *rp = &g->ranks[i];
        struct rank_status *rs = &js->ranks[i];
        memset(rs, 0, sizeof *rs);
        rs->rank = rp->rank;
        rs->local_rank = rp->local_rank;
        rs->pid = rp->alive ? rp->pid : 0;
        struct liveness_rank lr;
        liveness_fact(rp, &lr);
        double state_age = 0;
        const char *st = rp->alive ? liveness_rank_word(&g->live, &lr, now, &state_age)
                                   : (rp->exit_signal ? "killed" : "exited");
        rs->state_age_s = state_age;
        (void)str_copy(rs->state, sizeof rs->state, st);
        rs->hb_age_s = rp->has_hb ? now - rp->hb_mono : -1;
        rs->exit_code = rp->alive ? -1 : rp->exit_code;
        rs->exit_signal = rp->alive ? 0 : rp->exit_signal;
        rs->has_hb = rp->has_hb;
        if (rp->has_hb)
            rs->hb = rp->hb;
        else
            heartbeat_init(&rs->hb);
    }
}
