/* Supervision tests with small shell-script workers in a temp root: the gang module directly
 * (environment, a rank crash stops the gang, SIGTERM -> SIGKILL escalation, overlong heartbeat
 * lines, the store read-only to workers) and the real daemon (daemon_run in a child process)
 * over its control socket (crash loop of an unpromoted release reverts to the good one; an
 * activate whose command cannot run leaves the old gang alone; stop). */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/daemon.h"
#include "agent/rpc.h"
#include "agent/state.h"
#include "agent/store.h"
#include "agent/supervise.h"
#include "common/bundle.h"
#include "common/log.h"
#include "common/util.h"

static char tmpd[64];
static struct store store;

/* The wall clock as this process (and the daemon it forks) sees it: clock_gettime is defined
 * here, so it interposes on libc's for every caller in the test binary, and CLOCK_REALTIME gets
 * *wall_offset seconds added.  The offset lives in a shared page, so stepping it in the test
 * steps the forked daemon's wall clock too, without touching the machine's clock. */
static volatile double *wall_offset;

int clock_gettime(clockid_t clk, struct timespec *ts)
{
    int r = (int)syscall(SYS_clock_gettime, clk, ts);
    if (r == 0 && clk == CLOCK_REALTIME && wall_offset && *wall_offset != 0) {
        double t = (double)ts->tv_sec + (double)ts->tv_nsec * 1e-9 + *wall_offset;
        ts->tv_sec = (time_t)t;
        ts->tv_nsec = (long)((t - (double)ts->tv_sec) * 1e9);
    }
    return r;
}

/* fsync of a file whose path ends with fsync_enospc_suffix ("" none) fails with ENOSPC, as it
 * does on a full disk (ext4's delayed allocation reports it there, not at write).  Defined here,
 * it interposes on libc's for the gang code, and a forked holder inherits the suffix. */
static char fsync_enospc_suffix[64];

int fsync(int fd)
{
    if (fsync_enospc_suffix[0]) {
        char link[64], path[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, path, sizeof path - 1);
        size_t sl = strlen(fsync_enospc_suffix);
        if (n >= (ssize_t)sl && !memcmp(path + n - sl, fsync_enospc_suffix, sl)) {
            errno = ENOSPC;
            return -1;
        }
    }
    return (int)syscall(SYS_fsync, fd);
}

/* unshare(CLONE_NEWNS) fails with EPERM while unshare_eperm is set, as it does in a container
 * without CAP_SYS_ADMIN; defined here, it interposes on libc's for the gang's holders. */
static bool unshare_eperm;

int unshare(int flags)
{
    if (unshare_eperm && (flags & CLONE_NEWNS)) {
        errno = EPERM;
        return -1;
    }
    return (int)syscall(SYS_unshare, flags);
}

/* mount --make-rslave / fails with EACCES while rslave_eacces is set, as LXC's AppArmor profiles
 * (Proxmox's default) refuse it; defined here, it interposes on libc's for the gang's holders. */
static bool rslave_eacces;

int mount(const char *source, const char *target, const char *fstype, unsigned long flags, const void *data)
{
    if (rslave_eacces && (flags & MS_SLAVE)) {
        errno = EACCES;
        return -1;
    }
    return (int)syscall(SYS_mount, source, target, fstype, flags, data);
}

static int setup(void **state)
{
    (void)state;
    strcpy(tmpd, "/tmp/drover-sup-test.XXXXXX");
    if (!mkdtemp(tmpd))
        return -1;
    char root[300];
    snprintf(root, sizeof root, "%s/root", tmpd);
    return store_open(&store, root);
}

static void daemon_end_all(void);

/* Also after a failed assertion (cmocka runs it after every test): a daemon child left alive
 * kept running after the suite, with its gangs. */
static int teardown(void **state)
{
    (void)state;
    daemon_end_all();
    return fs_rm_rf(tmpd);
}

/* Install a release whose bin/w.sh is script; returns its id. */
static void install(const char *name, const char *script, char id[RELEASE_ID_LEN + 1])
{
    char dir[400], file[450], blob[450], err[256];
    snprintf(dir, sizeof dir, "%s/src-%s/bin", tmpd, name);
    assert_int_equal(fs_mkdir_p(dir, 0755), 0);
    snprintf(file, sizeof file, "%s/w.sh", dir);
    assert_int_equal(fs_write_atomic(file, script, strlen(script), 0755), 0);
    snprintf(dir, sizeof dir, "%s/src-%s", tmpd, name);
    snprintf(blob, sizeof blob, "%s/%s.tar.zst", tmpd, name);
    assert_int_equal(bundle_pack(dir, name, blob, id, NULL), 0);
    assert_true(store_add_release(&store, blob, id, err, sizeof err) >= 0);
}

static void spec_for(struct job_spec *s, const char *id, int nproc)
{
    spec_init(s);
    (void)str_copy(s->release, sizeof s->release, id);
    char *argv[] = {"bin/w.sh"};
    assert_int_equal(spec_set_argv(s, 1, argv), 0);
    s->nproc = nproc;
    s->grace_s = 0.5;
}

/* Drive the gang like the daemon does until pred or timeout; returns pred's final value. */
static bool pump(struct gang *g, double timeout, bool (*pred)(struct gang *))
{
    double until = time_mono() + timeout;
    while (time_mono() < until) {
        int ws;
        pid_t pid;
        while ((pid = waitpid(-1, &ws, WNOHANG)) > 0) {
            int k = gang_note_exit(g, pid, ws);
            if (k >= 0 && g->first_exit == k)
                gang_stop(g);
        }
        for (int i = 0; i < g->nranks; i++)
            (void)gang_read_heartbeats(g, i, time_mono());
        gang_tick(g, time_mono());
        if (pred(g))
            return true;
        usleep(10000);
    }
    return pred(g);
}

static bool is_gone(struct gang *g) { return gang_is_gone(g); }

/* True once no process of group pgid is left, zombies included.  gang_is_gone counts a zombie as
 * gone, and a worker's own child (the script's sleep) that died on the same SIGTERM may still be
 * waiting for this process (the subreaper) to reap it when pump returns: kill(-pgid, 0) succeeds
 * on a zombie.  Reap until the group is empty or timeout; CI's ASan run once read it too early. */
static bool group_reaped(pid_t pgid, double timeout)
{
    double until = time_mono() + timeout;
    for (;;) {
        int ws;
        while (waitpid(-1, &ws, WNOHANG) > 0) {
        }
        if (kill(-pgid, 0) == -1 && errno == ESRCH)
            return true;
        if (time_mono() >= until)
            return false;
        usleep(10000);
    }
}
static bool has_hb0(struct gang *g) { return g->ranks[0].has_hb; }

static void test_gang_env(void **state)
{
    (void)state;
    char id[RELEASE_ID_LEN + 1], err[256];
    /* each rank records its environment, heartbeats, then waits for the other rank before
     * exiting (the first exit stops the gang) */
    install("env", "#!/bin/sh\n"
                   "echo '{\"v\":1,\"rank\":'$RANK',\"step\":1,\"phase\":\"done\"}' >&$DROVER_HEARTBEAT_FD\n"
                   "env > \"$DROVER_RUN_DIR/env.tmp.$RANK\"\n"
                   "mv \"$DROVER_RUN_DIR/env.tmp.$RANK\" \"$DROVER_RUN_DIR/env.$RANK\"\n"
                   "i=0; while [ ! -e \"$DROVER_RUN_DIR/env.4\" -o ! -e \"$DROVER_RUN_DIR/env.5\" ] && [ $i -lt 100 ];"
                   " do sleep 0.02; i=$((i+1)); done\n",
            id);
    struct job_spec s;
    spec_for(&s, id, 2);
    s.nnodes = 3;
    s.node_rank = 2;
    strcpy(s.gpus, "4,5");
    strcpy(s.master_addr, "10.1.2.3");
    s.master_port = 29555;
    assert_int_equal(spec_add_env(&s, "NCCL_DEBUG=INFO"), 0);
    setenv("DROVER_TEST_CANARY", "leak", 1);
    struct gang g;
    assert_int_equal(gang_start(&g, &store, "train", &s, NULL, 1, err, sizeof err), 0);
    assert_true(pump(&g, 30, is_gone));
    for (int lr = 0; lr < 2; lr++) {
        char p[512], *raw, *text;
        snprintf(p, sizeof p, "%s/root/runs/train/env.%d", tmpd, 4 + lr);
        assert_int_equal(fs_read_file(p, 1 << 16, &raw, NULL), 0);
        assert_true(asprintf(&text, "\n%s", raw) > 0); /* every variable now starts after a newline */
        free(raw);
        char want[128];
        snprintf(want, sizeof want, "\nRANK=%d\n", 4 + lr);
        assert_non_null(strstr(text, want));
        assert_non_null(strstr(text, "WORLD_SIZE=6\n"));
        snprintf(want, sizeof want, "LOCAL_RANK=%d\n", lr);
        assert_non_null(strstr(text, want));
        assert_non_null(strstr(text, "LOCAL_WORLD_SIZE=2\n"));
        assert_non_null(strstr(text, "GROUP_RANK=2\n"));
        assert_non_null(strstr(text, "MASTER_ADDR=10.1.2.3\n"));
        assert_non_null(strstr(text, "MASTER_PORT=29555\n"));
        snprintf(want, sizeof want, "CUDA_VISIBLE_DEVICES=%d\n", 4 + lr);
        assert_non_null(strstr(text, want));
        assert_non_null(strstr(text, "DROVER_HEARTBEAT_FD=3\n"));
        assert_non_null(strstr(text, "DROVER_JOB=train\n"));
        snprintf(want, sizeof want, "DROVER_RELEASE=%s\n", id);
        assert_non_null(strstr(text, want));
        assert_non_null(strstr(text, "DROVER_RUN_DIR="));
        assert_non_null(strstr(text, "\nNCCL_DEBUG=INFO\n")); /* --env extras */
        assert_null(strstr(text, "DROVER_TEST_CANARY")); /* nothing leaks from the agent's env */
        free(text);
        assert_true(g.ranks[lr].has_hb);
        assert_int_equal(g.ranks[lr].hb.rank, 4 + lr);
    }
    assert_true(g.first_exit >= 0);
    assert_int_equal(g.ranks[g.first_exit].exit_code, 0);
    gang_clear(&g);
    spec_done(&s);
}

static void test_gang_rank_crash_stops_gang(void **state)
{
    (void)state;
    char id[RELEASE_ID_LEN + 1], err[256];
    install("crash", "#!/bin/sh\nif [ \"$RANK\" = 1 ]; then echo worker-line; sleep 0.2; exit 3; fi\n"
                     "while :; do sleep 0.05; done\n",
            id);
    struct job_spec s;
    spec_for(&s, id, 3);
    struct gang g;
    assert_int_equal(gang_start(&g, &store, "train", &s, NULL, 1, err, sizeof err), 0);
    pid_t pgid = g.pgid;
    double t0 = time_mono();
    assert_true(pump(&g, 30, is_gone));
    assert_true(time_mono() - t0 < 20); /* stopped on the crash, not at pump's 30 s limit */
    assert_int_equal(g.first_exit, 1);
    assert_int_equal(g.ranks[1].exit_code, 3);
    assert_int_equal(g.ranks[0].exit_signal, SIGTERM); /* the others were stopped, not left hanging */
    assert_int_equal(g.ranks[2].exit_signal, SIGTERM);
    assert_true(group_reaped(pgid, 10)); /* nothing of the gang left, not even a zombie */
    /* the rank's log says which release started and how the rank ended, around the worker's
     * own lines: `drover logs` after a revert showed an old release's traceback as if it were
     * the current one's */
    char p[512], log[2048] = "", want[160];
    snprintf(p, sizeof p, "%s/root/runs/train/logs/rank1.log", tmpd);
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    size_t n = fread(log, 1, sizeof log - 1, f);
    fclose(f);
    log[n] = '\0';
    snprintf(want, sizeof want, ": job 'train' gang 1: rank 1 starts release %.12s ---\nworker-line\n", id);
    if (strncmp(log, "--- drover-agent ", 17) != 0 || !strstr(log, want))
        fail_msg("rank1.log: '%s'", log);
    if (!strstr(log, "worker-line\n--- drover-agent ") ||
        !strstr(log, ": job 'train' gang 1: rank 1 exited with code 3 ---\n"))
        fail_msg("rank1.log: '%s'", log);
    snprintf(p, sizeof p, "%s/root/runs/train/logs/rank0.log", tmpd);
    f = fopen(p, "r");
    assert_non_null(f);
    n = fread(log, 1, sizeof log - 1, f);
    fclose(f);
    log[n] = '\0';
    if (!strstr(log, ": job 'train' gang 1: rank 0 killed by signal 15 ---\n"))
        fail_msg("rank0.log: '%s'", log);
    gang_clear(&g);
    spec_done(&s);
}

/* Reap the gang's holders, without stopping it, until every rank is gone (30 s at most). */
static void reap_until_gone(struct gang *g)
{
    int ws;
    pid_t pid;
    for (double until = time_mono() + 30; !gang_is_gone(g) && time_mono() < until; usleep(10000)) {
        while ((pid = waitpid(-1, &ws, WNOHANG)) > 0)
            (void)gang_note_exit(g, pid, ws);
        gang_tick(g, time_mono());
    }
    assert_true(gang_is_gone(g));
}

/* Reaped in the same pass, a rank that only lost its peer (exit 8, peer_lost) must not be the
 * gang's cause over the rank that died: waitpid's order is not the order they ended in, and the
 * casualty's exit named the wrong rank (and, in a PyTorch gang over gloo, the wrong story).
 * Once the machine was told, the cause stays what it was told. */
static void test_gang_peer_effect_gives_way(void **state)
{
    (void)state;
    char id[RELEASE_ID_LEN + 1], err[256];
    install("peerlost", "#!/bin/sh\nif [ \"$RANK\" = 1 ]; then sleep 0.2; exit 3; fi\nexit 8\n", id);
    struct job_spec s;
    spec_for(&s, id, 2);
    struct gang g;
    assert_int_equal(gang_start(&g, &store, "train", &s, NULL, 1, err, sizeof err), 0);
    usleep(1500000); /* both ranks have ended (on a loaded machine, perhaps not: reap on) */
    int ws;
    pid_t pid;
    reap_until_gone(&g);
    assert_int_equal(g.ranks[0].exit_code, 8);
    assert_int_equal(g.ranks[1].exit_code, 3);
    assert_int_equal(g.first_exit, 1);
    gang_clear(&g);
    spec_done(&s);
    /* told first: the peer's exit stays the cause (the daemon already fed it to the machine);
     * rank 1 fails 3 s later, long after the first exit was seen */
    install("peerlost2", "#!/bin/sh\nif [ \"$RANK\" = 1 ]; then sleep 3; exit 3; fi\nexit 8\n", id);
    spec_for(&s, id, 2);
    assert_int_equal(gang_start(&g, &store, "train", &s, NULL, 2, err, sizeof err), 0);
    for (double until = time_mono() + 30; g.first_exit < 0 && time_mono() < until;) {
        while ((pid = waitpid(-1, &ws, WNOHANG)) > 0)
            (void)gang_note_exit(&g, pid, ws);
        gang_tick(&g, time_mono());
        usleep(10000);
    }
    assert_int_equal(g.first_exit, 0);
    g.first_told = true;
    assert_true(pump(&g, 30, is_gone));
    assert_int_equal(g.first_exit, 0);
    gang_clear(&g);
    spec_done(&s);
    /* a peer_stopped exit (12) does not give way to an exit 0: that would read "completed" */
    install("peerstop0", "#!/bin/sh\nif [ \"$RANK\" = 1 ]; then sleep 0.2; exit 0; fi\nexit 12\n", id);
    spec_for(&s, id, 2);
    assert_int_equal(gang_start(&g, &store, "train", &s, NULL, 3, err, sizeof err), 0);
    usleep(1500000);
    reap_until_gone(&g);
    assert_int_equal(g.first_exit, 0);
    assert_int_equal(g.ranks[0].exit_code, 12);
    gang_clear(&g);
    spec_done(&s);
}

/* Reap and tick like the daemon until the first exit may be told (gang_settle_first_exit). */
static bool settle_until(struct gang *g, double timeout)
{
    double until = time_mono() + timeout;
    while (time_mono() < until) {
        int ws;
        pid_t pid;
        while ((pid = waitpid(-1, &ws, WNOHANG)) > 0)
            (void)gang_note_exit(g, pid, ws);
        for (int i = 0; i < g->nranks; i++)
            (void)gang_read_heartbeats(g, i, time_mono());
        gang_tick(g, time_mono());
        if ((g->first_exit >= 0 || g->hung >= 0) && gang_settle_first_exit(g, time_mono()))
            return true;
        usleep(10000);
    }
    return false;
}

/* A rank frozen after promotion (kill -STOP) stays alive and silent; its peer's distributed
 * timeout fires first and it exits 8 (peer_lost).  The gang's cause was that peer's exit (a
 * rank-exit crash); it is the frozen rank's hang, named with its silence and its stop. */
static void test_gang_peer_lost_names_frozen_rank(void **state)
{
    (void)state;
    char id[RELEASE_ID_LEN + 1], err[256];
    install("frozen",
            "#!/bin/sh\n"
            "echo '{\"v\":1,\"rank\":'$RANK',\"step\":3,\"phase\":\"train\"}' >&3\n"
            "if [ \"$RANK\" = 1 ]; then kill -STOP $$; sleep 30; exit 0; fi\n"
            "sleep 0.6\n"
            "echo '{\"v\":1,\"rank\":0,\"step\":3,\"phase\":\"done\",\"error\":\"peer lost\"}' >&3\n"
            "exit 8\n",
            id);
    struct job_spec s;
    spec_for(&s, id, 2);
    s.live.silence_s = 0.8; /* half: 0.4, less than rank 1's silence at rank 0's exit */
    struct gang g;
    assert_int_equal(gang_start(&g, &store, "train", &s, NULL, 1, err, sizeof err), 0);
    assert_true(settle_until(&g, 30));
    assert_int_equal(g.first_exit, -1);
    assert_int_equal(g.hung, 1);
    assert_true(g.first_told);
    assert_true(g.hung_limit_s == 0.8);
    if (!strstr(g.hung_why, "rank 1 silent for ") ||
        !strstr(g.hung_why, " s while its peers lost it (rank 0 exited 8) (stopped by a signal)"))
        fail_msg("'%s'", g.hung_why);
    assert_false(gang_judge_liveness(&g, time_mono())); /* judged once */
    gang_stop(&g);
    assert_true(pump(&g, 30, is_gone));
    assert_int_equal(g.first_exit, -1); /* the stop's exits are not the cause */
    gang_clear(&g);
    spec_done(&s);
    /* ranks blocked in the same collective (a rank in another container died) exit 8 moments
     * apart: the first one's exit stays the cause, after a short wait for the second */
    install("bothlost",
            "#!/bin/sh\n"
            "echo '{\"v\":1,\"rank\":'$RANK',\"step\":3,\"phase\":\"train\"}' >&3\n"
            "sleep 0.6\n"
            "if [ \"$RANK\" = 1 ]; then sleep 0.5; fi\n"
            "exit 8\n",
            id);
    spec_for(&s, id, 2);
    s.live.silence_s = 0.8;
    assert_int_equal(gang_start(&g, &store, "train", &s, NULL, 2, err, sizeof err), 0);
    assert_true(settle_until(&g, 30));
    assert_int_equal(g.hung, -1);
    assert_int_equal(g.first_exit, 0);
    assert_int_equal(g.ranks[0].exit_code, 8);
    assert_false(g.ranks[1].alive); /* it waited for rank 1 to exit too */
    assert_true(pump(&g, 30, is_gone));
    gang_clear(&g);
    spec_done(&s);
}

/* A worker's exit code must survive its holder failing to write the exit file (the store's
 * disk full: on the lab a PyTorch rank that died on ENOSPC in torch.save was journalled
 * "completed (rank 0 exited with code 0)" and never restarted).  A directory in the way of
 * the holder's temp file makes that write fail here. */
static void test_gang_exit_code_without_exit_file(void **state)
{
    (void)state;
    char id[RELEASE_ID_LEN + 1], err[256];
    install("noexitfile", "#!/bin/sh\nmkdir \"$DROVER_RUN_DIR/gang/g1/rank0.exit.tmp\"\nexit 3\n", id);
    struct job_spec s;
    spec_for(&s, id, 1);
    struct gang g;
    assert_int_equal(gang_start(&g, &store, "train", &s, NULL, 1, err, sizeof err), 0);
    assert_true(pump(&g, 30, is_gone));
    assert_int_equal(g.first_exit, 0);
    assert_int_equal(g.ranks[0].exit_code, 3); /* not 0: that would read as "completed" */
    assert_int_equal(g.ranks[0].exit_signal, 0);
    gang_clear(&g);
    spec_done(&s);
    /* killed by a signal: the same signal, not a clean exit */
    install("noexitfile9", "#!/bin/sh\nmkdir \"$DROVER_RUN_DIR/gang/g2/rank0.exit.tmp\"\nkill -9 $$\n", id);
    spec_for(&s, id, 1);
    assert_int_equal(gang_start(&g, &store, "train", &s, NULL, 2, err, sizeof err), 0);
    assert_true(pump(&g, 30, is_gone));
    assert_int_equal(g.first_exit, 0);
    assert_int_equal(g.ranks[0].exit_signal, SIGKILL);
    gang_clear(&g);
    spec_done(&s);
}

static void test_gang_sigterm_then_sigkill(void **state)
{
    (void)state;
    char id[RELEASE_ID_LEN + 1], err[256];
    install("stubborn", "#!/bin/sh\ntrap '' TERM\nwhile :; do sleep 0.05; done\n", id);
    struct job_spec s;
    spec_for(&s, id, 2);
    s.grace_s = 0.3;
    struct gang g;
    assert_int_equal(gang_start(&g, &store, "train", &s, NULL, 1, err, sizeof err), 0);
    usleep(100000);
    double t0 = time_mono();
    gang_stop(&g);
    assert_true(pump(&g, 30, is_gone));
    double took = time_mono() - t0;
    assert_true(took >= 0.3 && took < 20); /* SIGKILL after the 0.3 s grace, long before pump's limit */
    assert_true(g.killed);
    assert_int_equal(g.ranks[0].exit_signal, SIGKILL);
    assert_int_equal(g.ranks[1].exit_signal, SIGKILL);
    assert_int_equal(g.first_exit, -1); /* a requested stop is not a crash */
    gang_clear(&g);
    spec_done(&s);
}

static void test_gang_exec_failure(void **state)
{
    (void)state;
    char id[RELEASE_ID_LEN + 1], err[256];
    install("noexec", "#!/nonexistent/interpreter\n", id);
    struct job_spec s;
    spec_for(&s, id, 2);
    assert_int_equal(gang_check_exec(&store, &s, err, sizeof err), 0); /* file is there and +x */
    struct gang g;
    assert_int_equal(gang_start(&g, &store, "train", &s, NULL, 1, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "cannot execute"));
    /* the script is there: the message names its missing interpreter, not the script */
    assert_non_null(strstr(err, "its interpreter '/nonexistent/interpreter' (from its #! line) "
                                "is not in the container"));
    assert_null(strstr(err, "No such file"));
    assert_int_equal(g.pgid, 0);
    char *argv[] = {"bin/missing"};
    assert_int_equal(spec_set_argv(&s, 1, argv), 0);
    assert_int_equal(gang_check_exec(&store, &s, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "bin/missing"));
    spec_done(&s);
}

/* A holder that cannot write its pid file (the container's disk is full) says why: the gang's
 * start names the file and the disk, not "the holder did not report its worker". */
static void test_gang_pid_file_disk_full(void **state)
{
    (void)state;
    char id[RELEASE_ID_LEN + 1], err[512];
    install("sleeper", "#!/bin/sh\nexec sleep 30\n", id);
    struct job_spec s;
    spec_for(&s, id, 2);
    struct gang g;
    (void)str_copy(fsync_enospc_suffix, sizeof fsync_enospc_suffix, "/rank0.pid.tmp");
    int r = gang_start(&g, &store, "train", &s, NULL, 1, err, sizeof err);
    fsync_enospc_suffix[0] = '\0';
    assert_int_equal(r, -ENOSPC);
    assert_non_null(strstr(err, "rank 0: could not write "));
    assert_non_null(strstr(err, "/runs/train/gang/g1/rank0.pid: No space left on device (the "
                                "container's disk is full: free space, then drover start)"));
    assert_null(strstr(err, "did not report"));
    assert_int_equal(g.pgid, 0); /* the worker that started was killed, the gang cleared */
    assert_int_equal(g.nranks, 0);
    spec_done(&s);
}

/* A script whose #! interpreter is missing fails its exec with ENOENT, which names the script;
 * gang_exec_error_reason() (preflight and gang start) names the interpreter instead. */
static void test_gang_exec_error_reason(void **state)
{
    (void)state;
    char dir[128], p[192], why[384];
    snprintf(dir, sizeof dir, "%s/reason", tmpd);
    assert_int_equal(fs_mkdir_p(dir, 0755), 0);
    struct {
        const char *script, *want;
        int e;
    } cases[] = {
        {"#!/usr/bin/nonexistent-env python3\nprint(1)\n",
         "its interpreter '/usr/bin/nonexistent-env' (from its #! line) is not in the container",
         ENOENT},
        {"#!   /no/such/sh\n", "its interpreter '/no/such/sh' (from its #! line) is not in the container",
         ENOENT},
        {"#!/bin/sh\r\necho hi\r\n",
         "its interpreter '/bin/sh\\r' (from its #! line) is not in the container: the line ends "
         "in a carriage return (DOS line endings)",
         ENOENT},
        {"#!\n", "its #! line names no interpreter", ENOEXEC},
        {"#!./w.py\n", "its interpreter './w.py' (from its #! line) is not executable", EACCES},
        {"#!/bin/sh -e\n", "its interpreter '/bin/sh' (from its #! line) cannot be executed: Exec format error",
         ENOEXEC},
        {"#!/bin/sh\n", "Operation not permitted", EPERM}, /* not an error a #! line causes */
        {"no #! line\n", "No such file or directory", ENOENT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(p, sizeof p, "%s/w.py", dir);
        assert_int_equal(fs_write_atomic(p, cases[i].script, strlen(cases[i].script), 0755), 0);
        if (strstr(cases[i].script, "./w.py"))
            assert_int_equal(chmod(p, 0644), 0);
        assert_ptr_equal(gang_exec_error_reason(dir, "./w.py", cases[i].e, why, sizeof why), why);
        assert_string_equal(why, cases[i].want);
    }
    /* a command that is not there at all keeps the plain errno */
    assert_string_equal(gang_exec_error_reason(dir, "bin/gone", ENOENT, why, sizeof why),
                        "No such file or directory");
    /* a bare name is looked up through PATH, as execvpe does */
    snprintf(p, sizeof p, "%s/w-on-path", dir);
    assert_int_equal(fs_write_atomic(p, "#!/no/such/python\n", 18, 0755), 0);
    const char *path = getenv("PATH");
    char *saved = path ? strdup(path) : NULL;
    assert_int_equal(setenv("PATH", dir, 1), 0);
    (void)gang_exec_error_reason("/nonexistent", "w-on-path", ENOENT, why, sizeof why);
    if (saved)
        (void)setenv("PATH", saved, 1);
    else
        (void)unsetenv("PATH");
    free(saved);
    assert_string_equal(why, "its interpreter '/no/such/python' (from its #! line) is not in the container");
    /* a short buffer is cut, never overrun */
    char small[8];
    (void)gang_exec_error_reason(dir, "./w-on-path", ENOENT, small, sizeof small);
    assert_int_equal(strlen(small), sizeof small - 1);
}

/* A minimal ELF file: header, one PT_INTERP program header naming interp (NULL: none). */
static void write_elf(const char *path, unsigned char cls, unsigned machine, const char *interp)
{
    unsigned char b[512] = { 0 };
    size_t len;
    memcpy(b, ELFMAG, SELFMAG);
    b[EI_CLASS] = cls;
    b[EI_DATA] = ELFDATA2LSB;
    b[EI_VERSION] = EV_CURRENT;
    size_t il = interp ? strlen(interp) + 1 : 0;
    if (cls == ELFCLASS64) {
        Elf64_Ehdr *h = (Elf64_Ehdr *)b;
        h->e_type = ET_EXEC, h->e_machine = (Elf64_Half)machine, h->e_version = EV_CURRENT;
        h->e_phoff = sizeof *h, h->e_phentsize = sizeof(Elf64_Phdr), h->e_phnum = interp ? 1 : 0;
        Elf64_Phdr *ph = (Elf64_Phdr *)(b + sizeof *h);
        ph->p_type = PT_INTERP, ph->p_offset = sizeof *h + sizeof *ph, ph->p_filesz = il;
        len = sizeof *h + sizeof *ph;
    } else {
        Elf32_Ehdr *h = (Elf32_Ehdr *)b;
        h->e_type = ET_EXEC, h->e_machine = (Elf32_Half)machine, h->e_version = EV_CURRENT;
        h->e_phoff = sizeof *h, h->e_phentsize = sizeof(Elf32_Phdr), h->e_phnum = interp ? 1 : 0;
        Elf32_Phdr *ph = (Elf32_Phdr *)(b + sizeof *h);
        ph->p_type = PT_INTERP, ph->p_offset = sizeof *h + sizeof *ph, ph->p_filesz = (Elf32_Word)il;
        len = sizeof *h + sizeof *ph;
    }
    if (interp)
        memcpy(b + len, interp, il);
    assert_int_equal(fs_write_atomic(path, b, len + il, 0755), 0);
}

/* An ELF program the kernel refuses: its errno (ENOENT, "No such file or directory") named the
 * program, which is there, when its dynamic loader is missing (an Alpine/musl build, a 32-bit
 * one); ENOEXEC ("Exec format error") did not say the architecture was another. */
static void test_gang_exec_error_reason_elf(void **state)
{
    (void)state;
#if defined(__x86_64__)
    const unsigned native = EM_X86_64, foreign = EM_AARCH64;
    const char *native_name = "x86-64", *foreign_name = "aarch64 (arm64)";
#elif defined(__aarch64__)
    const unsigned native = EM_AARCH64, foreign = EM_X86_64;
    const char *native_name = "aarch64 (arm64)", *foreign_name = "x86-64";
#endif
#if !defined(__x86_64__) && !defined(__aarch64__)
    skip();
#else
    char dir[128], p[192], why[512], want[512];
    snprintf(dir, sizeof dir, "%s/elf", tmpd);
    assert_int_equal(fs_mkdir_p(dir, 0755), 0);
    snprintf(p, sizeof p, "%s/w", dir);

    write_elf(p, ELFCLASS64, native, "/lib/ld-musl-x86_64.so.1-not-here");
    assert_string_equal(gang_exec_error_reason(dir, "./w", ENOENT, why, sizeof why),
                        "its dynamic loader '/lib/ld-musl-x86_64.so.1-not-here' (the ELF interpreter it "
                        "names) is not in the container: it was built for another system (a "
                        "musl/Alpine build on glibc, a 32-bit one, another distribution); build it "
                        "where it runs, or link it statically");
    write_elf(p, ELFCLASS32, EM_386, "/lib/ld-linux.so.2-not-here");
    assert_non_null(strstr(gang_exec_error_reason(dir, "./w", ENOENT, why, sizeof why),
                           "its dynamic loader '/lib/ld-linux.so.2-not-here'"));
    /* the loader is there: the kernel's word stands (the loader says the rest itself) */
    write_elf(p, ELFCLASS64, native, "/bin/sh");
    assert_string_equal(gang_exec_error_reason(dir, "./w", ENOENT, why, sizeof why),
                        "No such file or directory");
    /* a static program (no PT_INTERP): nothing to add */
    write_elf(p, ELFCLASS64, native, NULL);
    assert_string_equal(gang_exec_error_reason(dir, "./w", ENOENT, why, sizeof why),
                        "No such file or directory");
    /* another architecture */
    write_elf(p, ELFCLASS64, foreign, "/lib/ld-linux-aarch64.so.1");
    snprintf(want, sizeof want, "it is a program for %s; this container runs %s: ship its %s build",
             foreign_name, native_name, native_name);
    assert_string_equal(gang_exec_error_reason(dir, "./w", ENOEXEC, why, sizeof why), want);
    write_elf(p, ELFCLASS64, 0xbeef, NULL);
    assert_non_null(strstr(gang_exec_error_reason(dir, "./w", ENOEXEC, why, sizeof why),
                           "a program for ELF machine 48879;"));
    /* a truncated header is not read past */
    assert_int_equal(fs_write_atomic(p, ELFMAG "\2", SELFMAG + 1, 0755), 0);
    assert_string_equal(gang_exec_error_reason(dir, "./w", ENOEXEC, why, sizeof why), "Exec format error");
#endif
}

/* Issue 12: an error heartbeat written just before exit must reach the exit's judgement even
 * when the loop never read the pipe while the worker lived: gang_note_exit drains it first. */
static void test_gang_last_heartbeat_before_exit(void **state)
{
    (void)state;
    char id[RELEASE_ID_LEN + 1], err[256];
    install("lastword", "#!/bin/sh\n"
                        "echo '{\"v\":1,\"rank\":0,\"step\":0,\"phase\":\"done\",\"error\":\"no shard /data/x\"}' >&3\n"
                        "exit 4\n",
            id);
    struct job_spec s;
    spec_for(&s, id, 1);
    struct gang g;
    assert_int_equal(gang_start(&g, &store, "train", &s, NULL, 1, err, sizeof err), 0);
    /* nobody reads the heartbeat FIFO while the worker lives; only the exit is looked for */
    for (int i = 0; i < 500 && g.ranks[0].alive; i++) {
        assert_false(g.ranks[0].has_hb);
        usleep(10000);
        gang_tick(&g, time_mono());
    }
    assert_false(g.ranks[0].alive);
    assert_int_equal(g.ranks[0].exit_code, 4);
    assert_true(g.ranks[0].has_hb);
    assert_string_equal(g.ranks[0].hb.error, "no shard /data/x");
    gang_clear(&g);
    spec_done(&s);
}

/* Can this process make a mount namespace of its own (root with CAP_SYS_ADMIN)?  Asked in a
 * child, so the test's own namespace stays as it is. */
static bool can_unshare_mounts(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(syscall(SYS_unshare, CLONE_NEWNS) == 0 &&
                      mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) == 0
                  ? 0
                  : 1);
    int ws = 0;
    return pid > 0 && waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
}

/* The worker of release "rw": appends to its release's config.json and creates a file in its
 * release dir (its cwd), each result in $DROVER_RUN_DIR, then writes a checkpoint there. */
static void install_release_writer(char id[RELEASE_ID_LEN + 1])
{
    char dir[300], p[350];
    snprintf(dir, sizeof dir, "%s/src-rw", tmpd);
    assert_int_equal(fs_mkdir_p(dir, 0755), 0);
    snprintf(p, sizeof p, "%s/config.json", dir);
    assert_int_equal(fs_write_atomic(p, "{\"lr\": 1}\n", 11, 0644), 0);
    install("rw", "#!/bin/sh\n"
                  "d=\"$DROVER_RUN_DIR\"\n"
                  "echo '{}' 2>\"$d/append.err\" >>config.json; echo $? >\"$d/append.rc\"\n"
                  "true 2>\"$d/create.err\" >new.txt; echo $? >\"$d/create.rc\"\n"
                  "echo step1 >\"$d/checkpoints/ck\"\n",
            id);
}

static char *run_file(const char *name)
{
    char p[512], *text = NULL;
    snprintf(p, sizeof p, "%s/root/runs/train/%s", tmpd, name);
    assert_int_equal(fs_read_file(p, 4096, &text, NULL), 0);
    return text;
}

/* Start release "rw"'s writer (install_release_writer) as a one-rank gang, with *fault (an
 * interposed failure: unshare_eperm, rslave_eacces; NULL none) set while it starts, and wait for
 * it to end with 0.  Its results are run_file()'s. */
static void writer_gang_run(char id[RELEASE_ID_LEN + 1], bool *fault)
{
    char err[256];
    install_release_writer(id);
    struct job_spec s;
    spec_for(&s, id, 1);
    struct gang g;
    if (fault)
        *fault = true;
    int r = gang_start(&g, &store, "train", &s, NULL, 1, err, sizeof err);
    if (fault)
        *fault = false;
    assert_int_equal(r, 0);
    assert_true(pump(&g, 30, is_gone));
    assert_int_equal(g.ranks[0].exit_code, 0);
    gang_clear(&g);
    spec_done(&s);
}

/* Workers run as root in their release dir: a PyTorch script that appended to its config.json
 * there got through the 0444 mode and changed the object hardlinked into every release holding
 * it, the last good one included, so the rollback found it damaged.  The store's releases and
 * objects are read-only to the worker (EROFS, loudly), its run dir is not, and no mount of the
 * worker's leaks into the agent's namespace. */
static void test_gang_release_read_only(void **state)
{
    (void)state;
    if (!can_unshare_mounts())
        skip();
    char id[RELEASE_ID_LEN + 1], p[512], *text;
    writer_gang_run(id, NULL);
    text = run_file("append.rc");
    assert_string_not_equal(text, "0\n");
    free(text);
    text = run_file("append.err");
    if (!strstr(text, "Read-only file system"))
        fail_msg("append.err: '%s'", text);
    free(text);
    text = run_file("create.rc");
    assert_string_not_equal(text, "0\n");
    free(text);
    text = run_file("create.err");
    if (!strstr(text, "Read-only file system"))
        fail_msg("create.err: '%s'", text);
    free(text);
    snprintf(p, sizeof p, "%s/root/releases/%s/config.json", tmpd, id);
    assert_int_equal(fs_read_file(p, 4096, &text, NULL), 0);
    assert_string_equal(text, "{\"lr\": 1}\n"); /* and so its object, and every release's */
    free(text);
    snprintf(p, sizeof p, "%s/root/releases/%s/new.txt", tmpd, id);
    assert_int_equal(access(p, F_OK), -1);
    text = run_file("checkpoints/ck"); /* the run dir stays writable */
    assert_string_equal(text, "step1\n");
    free(text);
    assert_int_equal(fs_read_file("/proc/self/mountinfo", 1 << 20, &text, NULL), 0);
    assert_null(strstr(text, tmpd));
    free(text);
}

/* Which mount a path lies on, and whether it propagates: the last line whose mount point is the
 * path or above it, component-wise; escaped mount points never match. */
static void test_mount_is_shared(void **state)
{
    (void)state;
    const char *mi = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
                     "23 22 8:2 / /var/lib rw,relatime - ext4 /dev/sdb rw\n"
                     "24 22 0:23 / /var/lib/drover\\040x rw shared:4 - tmpfs t rw\n"
                     "25 22 0:24 / /srv rw master:3 - tmpfs t rw\n"
                     "26 22 0:25 / /data rw,nosuid shared:5 master:3 - tmpfs t rw\n";
    assert_int_equal(gang_mount_is_shared(mi, "/var/lib/drover/releases"), 0);
    assert_int_equal(gang_mount_is_shared(mi, "/var/lib"), 0);
    assert_int_equal(gang_mount_is_shared(mi, "/var/libx/releases"), 1); /* only / covers it */
    assert_int_equal(gang_mount_is_shared(mi, "/srv/x"), 0);              /* a slave only */
    assert_int_equal(gang_mount_is_shared(mi, "/data"), 1);
    assert_int_equal(gang_mount_is_shared(mi, "/"), 1);
    assert_int_equal(gang_mount_is_shared("", "/x"), -EINVAL);
    /* a mount stacked later on the same point hides the one below */
    char stacked[600];
    snprintf(stacked, sizeof stacked, "%s27 22 0:26 / /var/lib rw shared:9 - tmpfs t rw\n", mi);
    assert_int_equal(gang_mount_is_shared(stacked, "/var/lib/drover/releases"), 1);
}

/* LXC's AppArmor profiles (container-base: Proxmox's containers) refuse `mount --make-rslave /`:
 * every gang there ran with the store writable.  Where the mounts the store lies on do not
 * propagate, the binds cannot leave the holder's namespace either, and the store is read-only
 * all the same; where they do (a shared mount), the gang runs writable, as before, saying so. */
static void test_gang_release_read_only_without_rslave(void **state)
{
    (void)state;
    if (!can_unshare_mounts())
        skip();
    char id[RELEASE_ID_LEN + 1], rel[400], obj[400], *text, *mi;
    snprintf(rel, sizeof rel, "%s/root/releases", tmpd);
    snprintf(obj, sizeof obj, "%s/root/objects", tmpd);
    assert_int_equal(fs_read_file("/proc/self/mountinfo", 1 << 22, &mi, NULL), 0);
    bool shared = gang_mount_is_shared(mi, rel) != 0 || gang_mount_is_shared(mi, obj) != 0;
    free(mi);
    writer_gang_run(id, &rslave_eacces);
    text = run_file(shared ? "append.rc" : "append.err");
    if (shared ? strcmp(text, "0\n") != 0 : !strstr(text, "Read-only file system"))
        fail_msg("store %s: '%s'", shared ? "on a shared mount: writable expected" : "not shared: read-only expected",
                 text);
    free(text);
    if (shared) {
        text = run_file("logs/rank0.log");
        if (!strstr(text, "(mount --make-rslave /: Permission denied)"))
            fail_msg("rank0.log: '%s'", text);
        free(text);
    }
    assert_int_equal(fs_read_file("/proc/self/mountinfo", 1 << 20, &text, NULL), 0);
    assert_null(strstr(text, tmpd)); /* nothing of the holder's reached this namespace */
    free(text);
}

/* `AGENT --root ROOT preflight ID --job train -- CMD...`, stdin and stdout /dev/null, stderr into
 * errpath (NULL: inherited); its exit status. */
static int preflight_run(const char *agent, const char *root, const char *id, const char *const *cmd,
                         const char *errpath)
{
    const char *argv[16] = {"drover-agent", "--root", root, "preflight", id, "--job", "train", "--"};
    int n = 8;
    for (int i = 0; cmd[i] && n < 15; i++)
        argv[n++] = cmd[i];
    argv[n] = NULL;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        (void)dup2(null, STDIN_FILENO);
        (void)dup2(null, STDOUT_FILENO);
        if (errpath)
            (void)dup2(open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644), STDERR_FILENO);
        execv(agent, (char *const *)argv);
        _exit(126);
    }
    int ws;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws));
    return WEXITSTATUS(ws);
}

/* The agent binary next to this test's build directory (BUILD/tests/test-X, BUILD/drover-agent)
 * in agent[PATH_MAX]: false when there is none. */
static bool agent_path(char *agent)
{
    ssize_t n = readlink("/proc/self/exe", agent, PATH_MAX - 32);
    assert_true(n > 0);
    agent[n] = '\0';
    for (int up = 0; up < 2; up++)
        *strrchr(agent, '/') = '\0';
    strcat(agent, "/drover-agent");
    return access(agent, X_OK) == 0;
}

/* `drover-agent preflight` runs the worker's own code (`train.py --check`) in its release
 * directory too: the same read-only store (it was writable to it after the gangs' was not).
 * The agent binary next to this test's build directory (BUILD/tests/test-X, BUILD/drover-agent). */
static void test_preflight_release_read_only(void **state)
{
    (void)state;
    if (!can_unshare_mounts())
        skip();
    char id[RELEASE_ID_LEN + 1], agent[PATH_MAX], root[300], p[512], *text;
    if (!agent_path(agent))
        skip(); /* the test binary alone, without its build directory */
    install_release_writer(id);
    snprintf(root, sizeof root, "%s/root", tmpd);
    const char *writer[] = {"bin/w.sh", NULL};
    assert_int_equal(preflight_run(agent, root, id, writer, NULL), 0);
    text = run_file("append.err");
    if (!strstr(text, "Read-only file system"))
        fail_msg("preflight: append.err: '%s'", text);
    free(text);
    snprintf(p, sizeof p, "%s/root/releases/%s/config.json", tmpd, id);
    assert_int_equal(fs_read_file(p, 4096, &text, NULL), 0);
    assert_string_equal(text, "{\"lr\": 1}\n");
    free(text);
    text = run_file("checkpoints/ck");
    assert_string_equal(text, "step1\n");
    free(text);

    /* exit 127 from the command itself: the dynamic loader's too (an environment built on
     * another machine: "error while loading shared libraries: libz.so.1"), which was told only
     * "a command it runs was not found" */
    snprintf(p, sizeof p, "%s/preflight.err", tmpd);
    const char *exit127[] = {"/bin/sh", "-c", "exit 127", NULL};
    assert_int_equal(preflight_run(agent, root, id, exit127, p), 127);
    assert_int_equal(fs_read_file(p, 4096, &text, NULL), 0);
    if (!strstr(text, "preflight: '/bin/sh' exited with 127 (a command it runs, or a shared library it needs, "
                      "was not found: its own words are above)"))
        fail_msg("preflight's exit 127: '%s'", text);
    free(text);
}

/* How many processes have `marker` in their command line; with kill, SIGKILL them too (what a
 * failed test leaves behind must not run on). */
static int marked_procs(const char *marker, bool kill_them)
{
    DIR *d = opendir("/proc");
    assert_non_null(d);
    struct dirent *de;
    int found = 0;
    while ((de = readdir(d))) {
        char *end, path[300], buf[512];
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 0)
            continue;
        snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
            continue;
        for (ssize_t i = 0; i < n; i++)
            if (!buf[i])
                buf[i] = ' ';
        buf[n] = '\0';
        if (strstr(buf, marker)) {
            found++;
            if (kill_them)
                (void)kill((pid_t)pid, SIGKILL);
        }
    }
    closedir(d);
    return found;
}

/* `AGENT --root ROOT preflight ID --job train --timeout 2 --cgroup MODE -- /bin/sh -c SCRIPT`
 * with stdout a pipe read to its end, as the SSH channel is: its exit status (-1: not ended in
 * 20 s) and the seconds until stdout's end (-1: none in 20 s), stderr into errpath. */
static int preflight_run_piped(const char *agent, const char *root, const char *id, const char *mode,
                               const char *script, const char *errpath, double *ret_eof_s)
{
    int out[2];
    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    double t0 = time_mono();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        const char *argv[] = {"drover-agent", "--root", root, "preflight", id, "--job", "train",
                              "--timeout", "2", "--cgroup", mode, "--", "/bin/sh", "-c", script, NULL};
        int null = open("/dev/null", O_RDWR);
        (void)dup2(null, STDIN_FILENO);
        (void)dup2(out[1], STDOUT_FILENO);
        (void)dup2(open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644), STDERR_FILENO);
        execv(agent, (char *const *)argv);
        _exit(126);
    }
    close(out[1]);
    (void)fcntl(out[0], F_SETFL, O_NONBLOCK);
    *ret_eof_s = -1;
    int ws = 0, st = -1;
    bool reaped = false;
    while (time_mono() - t0 < 20 && (*ret_eof_s < 0 || !reaped)) {
        char buf[256];
        ssize_t n = read(out[0], buf, sizeof buf);
        if (n == 0 && *ret_eof_s < 0)
            *ret_eof_s = time_mono() - t0;
        if (!reaped && waitpid(pid, &ws, WNOHANG) == pid) {
            reaped = true;
            st = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
        }
        usleep(20000);
    }
    close(out[0]);
    if (!reaped) {
        (void)kill(pid, SIGKILL);
        (void)waitpid(pid, &ws, 0);
    }
    return st;
}

/* A preflight's child that called setsid() left the process group the timeout killed, kept
 * the channel's stdout open, and ran on: drover waited for the channel to its own deadline and
 * blamed the agent.  Now the whole tree ends, at the timeout and when the command exits on its
 * own leaving processes behind, by its cgroup (mode auto) or as our descendants (mode none). */
static void preflight_setsid_child(const char *mode)
{
    char id[RELEASE_ID_LEN + 1], agent[PATH_MAX], root[300], errp[512], marker[64], script[512];
    char *text;
    double eof_s;
    if (!agent_path(agent))
        skip();
    install_release_writer(id);
    snprintf(root, sizeof root, "%s/root", tmpd);
    snprintf(errp, sizeof errp, "%s/preflight.err", tmpd);
    snprintf(marker, sizeof marker, "1000.%d", (int)getpid()); /* a sleep of its own */

    /* past its timeout: exit 124 as before, and nothing of it left */
    snprintf(script, sizeof script, "setsid sh -c 'sleep %s; true' </dev/null & sleep 30", marker);
    int st = preflight_run_piped(agent, root, id, mode, script, errp, &eof_s);
    int left = marked_procs(marker, true);
    assert_int_equal(fs_read_file(errp, 4096, &text, NULL), 0);
    if (st != 124 || eof_s < 0 || eof_s > 10 || left)
        fail_msg("timeout (--cgroup %s): exit %d, stdout's end after %.1f s, %d left; stderr '%s'",
                 mode, st, eof_s, left, text);
    if (!strstr(text, "preflight: '/bin/sh' did not finish within 2 s"))
        fail_msg("timeout: stderr '%s'", text);
    free(text);

    /* exits 0 at once, leaving the setsid child: still 0, promptly, the child stopped */
    snprintf(script, sizeof script, "setsid sh -c 'sleep %s; true' </dev/null & exit 0", marker);
    st = preflight_run_piped(agent, root, id, mode, script, errp, &eof_s);
    left = marked_procs(marker, true);
    assert_int_equal(fs_read_file(errp, 4096, &text, NULL), 0);
    if (st != 0 || eof_s < 0 || eof_s > 5 || left)
        fail_msg("exit 0 (--cgroup %s): exit %d, stdout's end after %.1f s, %d left; stderr '%s'",
                 mode, st, eof_s, left, text);
    if (!strstr(text, "preflight: '/bin/sh' left ") || !strstr(text, " running: stopped"))
        fail_msg("exit 0: stderr '%s'", text);
    free(text);
}

static void test_preflight_setsid_child(void **state)
{
    (void)state;
    preflight_setsid_child("auto");
}

static void test_preflight_setsid_child_no_cgroup(void **state)
{
    (void)state;
    preflight_setsid_child("none");
}

/* Where no mount namespace can be made (a container without the capability) the gang starts
 * anyway, as before, and says so in the rank's log. */
static void test_gang_release_read_only_fallback(void **state)
{
    (void)state;
    char id[RELEASE_ID_LEN + 1], *text;
    writer_gang_run(id, &unshare_eperm);
    text = run_file("append.rc");
    assert_string_equal(text, "0\n");
    free(text);
    text = run_file("checkpoints/ck");
    assert_string_equal(text, "step1\n");
    free(text);
    text = run_file("logs/rank0.log");
    if (!strstr(text, ": the release directory is writable (unshare(CLONE_NEWNS): Operation not "
                      "permitted) ---\n"))
        fail_msg("rank0.log: '%s'", text);
    free(text);
}

/* A Python worker's lines as json.dumps writes them: no release, NaN tokens, no nonfinite count.
 * The agent fills in the gang's release and counts consecutive non-finite steps itself, so the
 * gang diverges after HB_DIVERGED_STEPS of them instead of the lines being dropped. */
static bool diverged(struct gang *g) { return g->diverged >= 0; }
static void test_gang_python_nan_heartbeats(void **state)
{
    (void)state;
    char id[RELEASE_ID_LEN + 1], err[256];
    install("pynan", "#!/bin/sh\n"
                     "echo '{\"v\": 1, \"rank\": 0, \"step\": 1, \"loss\": 2.5, \"phase\": \"train\"}' >&3\n"
                     "for i in 2 3 3 4; do echo '{\"v\": 1, \"rank\": 0, \"step\": '$i', \"loss\": NaN, \"tok_s\": Infinity, \"phase\": \"train\"}' >&3; done\n"
                     "sleep 5\n",
            id);
    struct job_spec s;
    spec_for(&s, id, 1);
    struct gang g;
    assert_int_equal(gang_start(&g, &store, "train", &s, NULL, 1, err, sizeof err), 0);
    assert_true(pump(&g, 30, diverged));
    assert_int_equal(g.ranks[0].hb_bad, 0);
    assert_int_equal(g.ranks[0].hb.step, 4);
    assert_int_equal(g.ranks[0].hb.nonfinite, 3); /* steps 2, 3, 4: the repeated 3 counts once */
    assert_false(g.ranks[0].hb.loss_finite);
    assert_string_equal(g.ranks[0].hb.release, id);
    gang_stop(&g);
    assert_true(pump(&g, 30, is_gone));
    gang_clear(&g);
    spec_done(&s);
}

/* Liveness judged on the agent's clock: a rank that stops beating is silent, one that beats
 * without advancing is stalled, a long checkpoint phase is neither; the verdict names the rank. */
static bool judged(struct gang *g) { return gang_judge_liveness(g, time_mono()); }
static void test_gang_liveness(void **state)
{
    (void)state;
    static const struct {
        const char *name, *script, *says;
        double limit; /* the deadline that trips: the machine widens the hang window by it */
    } cases[] = {
        {"silent", "echo '{\"v\":1,\"rank\":0,\"step\":1,\"phase\":\"train\"}' >&3; sleep 10\n", "rank 0 silent", 0.6},
        {"stalled", "while :; do echo '{\"v\":1,\"rank\":0,\"step\":5,\"phase\":\"train\"}' >&3; sleep 0.05; done\n",
         "rank 0 stalled: step 5", 0.7},
        {"nostep", "echo '{\"v\":1,\"rank\":0,\"step\":0,\"phase\":\"init\"}' >&3; sleep 10\n", "never reached its first step", 0.8},
        /* the Python module's hello (Heartbeat()) and no hb.init(): in the rendezvous, not "sent none" */
        {"hello", "echo '{\"v\":1,\"kind\":\"hello\",\"rank\":0,\"step\":0,\"phase\":\"init\"}' >&3; sleep 10\n",
         "it created Heartbeat() but never called hb.init()", 0.8},
        /* hello, then init: past the rendezvous, still in phase init */
        {"helloinit", "echo '{\"v\":1,\"kind\":\"hello\",\"rank\":0,\"step\":0}' >&3;"
                      " echo '{\"v\":1,\"rank\":0,\"step\":0,\"phase\":\"init\"}' >&3; sleep 10\n",
         "never reached its first step: still in phase init", 0.8},
        {"ckpt", "echo '{\"v\":1,\"rank\":0,\"step\":3,\"phase\":\"train\"}' >&3;"
                 " echo '{\"v\":1,\"rank\":0,\"step\":3,\"phase\":\"checkpoint\"}' >&3; sleep 10\n", "checkpointing for", 5.0},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char id[RELEASE_ID_LEN + 1], err[256], script[512];
        snprintf(script, sizeof script, "#!/bin/sh\n%s", cases[i].script);
        install(cases[i].name, script, id);
        struct job_spec s;
        spec_for(&s, id, 1);
        s.live.first_step_s = 0.8;
        s.live.silence_s = 0.6;
        s.live.stall_s = 0.7;
        s.live.checkpoint_s = 5.0; /* longer than the silence deadline: 0.9 s of quiet is fine,
                                    * with room for a loaded machine's late wake-up */
        struct gang g;
        assert_int_equal(gang_start(&g, &store, "train", &s, NULL, 1, err, sizeof err), 0);
        assert_true(pump(&g, 30, has_hb0));
        if (!strcmp(cases[i].name, "ckpt")) {
            usleep(900000); /* past the silence deadline, inside the checkpoint one */
            for (int k = 0; k < 3; k++)
                (void)gang_read_heartbeats(&g, 0, time_mono());
            assert_false(gang_judge_liveness(&g, time_mono()));
            struct job_status js;
            gang_fill_status(&g, &js, time_mono());
            assert_string_equal(js.ranks[0].state, "checkpointing");
            assert_true(js.ranks[0].state_age_s > 0.5);
        }
        assert_true(pump(&g, 30, judged));
        if (!strstr(g.hung_why, cases[i].says))
            fail_msg("%s: '%s'", cases[i].name, g.hung_why);
        assert_int_equal(g.hung, 0);
        assert_true(g.hung_limit_s == cases[i].limit);
        assert_false(gang_judge_liveness(&g, time_mono())); /* once */
        gang_stop(&g);
        assert_true(pump(&g, 30, is_gone));
        gang_clear(&g);
        spec_done(&s);
    }
}

/* drover-train itself (BUILD/drover-train, next to this test's build directory), as rank 0 of
 * two whose peer never comes: its hello is its first line, before the rendezvous, so the agent
 * reads it as a rank that started and waits for a peer (the hello-only verdict, "kind":"hello"
 * in the status document: `drover status` says "rendezvous"), not one still in phase init (its
 * init line used to come before the rendezvous) nor one that sent none.  Nothing is counted as
 * a bad line, and the stop ends it in the rendezvous. */
static void test_gang_drover_train_hello(void **state)
{
    (void)state;
    char train[PATH_MAX], cfg[400], script[PATH_MAX + 800], id[RELEASE_ID_LEN + 1], err[256];
    ssize_t n = readlink("/proc/self/exe", train, PATH_MAX - 32);
    assert_true(n > 0);
    train[n] = '\0';
    for (int up = 0; up < 2; up++)
        *strrchr(train, '/') = '\0';
    strcat(train, "/drover-train");
    if (access(train, X_OK) != 0)
        skip();
    snprintf(cfg, sizeof cfg, "%s/train.ini", tmpd);
    static const char ini[] = "[model]\nlayers = 1\nheads = 2\ndim = 16\nvocab = 64\nseq = 16\n"
                              "[train]\nbatch = 2\nmax_steps = 0\n[data]\ntrain = /nonexistent/train.bin\n";
    assert_int_equal(fs_write_atomic(cfg, ini, strlen(ini), 0644), 0);
    snprintf(script, sizeof script, "#!/bin/sh\nexport WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d\n"
             "exec '%s' train --config '%s' --checkpoint-dir '%s/ck' --device cpu\n",
             31000 + (int)(getpid() % 20000), train, cfg, tmpd);
    install("dtrain", script, id);
    struct job_spec s;
    spec_for(&s, id, 1);
    s.live.first_step_s = 1.5;
    struct gang g;
    assert_int_equal(gang_start(&g, &store, "train", &s, NULL, 1, err, sizeof err), 0);
    assert_true(pump(&g, 30, has_hb0));
    struct job_status js;
    gang_fill_status(&g, &js, time_mono());
    assert_true(js.ranks[0].has_hb && js.ranks[0].hb.hello);
    assert_true(pump(&g, 30, judged));
    if (!strstr(g.hung_why, "never called hb.init(): " HB_HELLO_ONLY_HINT))
        fail_msg("verdict: '%s'", g.hung_why);
    assert_int_equal(g.ranks[0].hb_bad, 0);
    assert_int_equal(g.ranks[0].hb.phase, HB_PHASE_INIT);
    gang_stop(&g);
    assert_true(pump(&g, 30, is_gone));
    gang_clear(&g);
    spec_done(&s);
}

static bool proc_dead(pid_t pid)
{
    char p[64], buf[256];
    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(p, "re");
    if (!f)
        return true;
    bool dead = !fgets(buf, sizeof buf, f) || strstr(buf, ") Z ") || strstr(buf, ") X ");
    fclose(f);
    return dead;
}

/* Issue 11: a gang is one cgroup: a stop reaches a child that left the process group (setsid),
 * and the gang counts as gone only once that child is gone too. */
static void setsid_stop(enum gang_cgroup_mode mode)
{
    gang_set_cgroup_mode(mode);
    char id[RELEASE_ID_LEN + 1], err[256];
    install("escape", "#!/bin/sh\n"
                      "setsid sh -c 'echo $$ > \"$DROVER_RUN_DIR/escapee.pid\"; trap \"\" TERM; exec sleep 1000' &\n"
                      "while :; do sleep 0.05; done\n",
            id);
    struct job_spec s;
    spec_for(&s, id, 1);
    s.grace_s = 0.3;
    struct gang g;
    assert_int_equal(gang_start(&g, &store, "train", &s, NULL, 1, err, sizeof err), 0);
    if (!g.cgroup[0]) { /* no cgroup of this kind we may write to: nothing to test here */
        gang_stop(&g);
        assert_true(pump(&g, 30, is_gone));
        gang_clear(&g);
        spec_done(&s);
        gang_set_cgroup_mode(GANG_CGROUP_AUTO);
        skip();
    }
    if (mode == GANG_CGROUP_V1) /* v1's freezer hierarchy: the stop freezes, kills, thaws */
        assert_non_null(strstr(g.cgroup, "/freezer/"));
    char p[400];
    snprintf(p, sizeof p, "%s/root/runs/train/escapee.pid", tmpd);
    long esc = 0;
    for (int i = 0; i < 3000 && esc <= 0; i++) {
        FILE *f = fopen(p, "re");
        if (f) {
            if (fscanf(f, "%ld", &esc) != 1)
                esc = 0;
            fclose(f);
        }
        usleep(10000);
    }
    assert_true(esc > 0);
    assert_int_not_equal(getpgid((pid_t)esc), g.pgid); /* it did leave the process group */
    gang_stop(&g);
    assert_true(pump(&g, 30, is_gone));
    assert_true(proc_dead((pid_t)esc));
    gang_clear(&g);
    spec_done(&s);
    gang_set_cgroup_mode(GANG_CGROUP_AUTO);
}

static void test_gang_stop_reaches_setsid_child(void **state)
{
    (void)state;
    setsid_stop(GANG_CGROUP_AUTO);
}

/* The same where only cgroup v1 is mounted (drover-agent daemon --cgroup v1): before the freezer
 * fallback such a gang had no cgroup and the setsid child outlived every stop. */
static void test_gang_stop_reaches_setsid_child_v1(void **state)
{
    (void)state;
    setsid_stop(GANG_CGROUP_V1);
}

static void test_gang_cgroup_mode_parse(void **state)
{
    (void)state;
    enum gang_cgroup_mode m = GANG_CGROUP_NONE;
    assert_int_equal(gang_cgroup_mode_parse("auto", &m), 0);
    assert_int_equal(m, GANG_CGROUP_AUTO);
    assert_int_equal(gang_cgroup_mode_parse("v1", &m), 0);
    assert_int_equal(m, GANG_CGROUP_V1);
    assert_int_equal(gang_cgroup_mode_parse("v2", &m), 0);
    assert_int_equal(m, GANG_CGROUP_V2);
    assert_int_equal(gang_cgroup_mode_parse("none", &m), 0);
    assert_int_equal(m, GANG_CGROUP_NONE);
    assert_int_equal(gang_cgroup_mode_parse("v3", &m), -EINVAL);
    assert_int_equal(gang_cgroup_mode_parse("", &m), -EINVAL);
    assert_int_equal(gang_cgroup_mode_parse("V1", &m), -EINVAL);
    assert_int_equal(m, GANG_CGROUP_NONE); /* untouched on error */
}

static void test_gang_overlong_heartbeat(void **state)
{
    (void)state;
    char id[RELEASE_ID_LEN + 1], err[256];
    /* a 3000-byte line, a garbage line, then a good one */
    install("long", "#!/bin/sh\nx=$(printf '%03000d' 0)\n"
                    "{ echo \"{\\\"v\\\":1,\\\"rank\\\":0,\\\"step\\\":1,\\\"pad\\\":\\\"$x\\\"}\"; echo 'not json';"
                    " echo '{\"v\":1,\"rank\":0,\"step\":7,\"phase\":\"train\"}'; } >&3\nsleep 5\n",
            id);
    struct job_spec s;
    spec_for(&s, id, 1);
    struct gang g;
    assert_int_equal(gang_start(&g, &store, "train", &s, NULL, 1, err, sizeof err), 0);
    assert_true(pump(&g, 30, has_hb0));
    assert_int_equal(g.ranks[0].hb.step, 7);
    assert_int_equal(g.ranks[0].hb_lb.overlong, 1);
    assert_int_equal(g.ranks[0].hb_bad, 1);
    assert_int_equal(g.ranks[0].hb_lines, 1);
    assert_true(gang_all_training(&g));
    gang_stop(&g);
    assert_true(pump(&g, 30, is_gone));
    gang_clear(&g);
    spec_done(&s);
}

/* ---- the daemon ---- */

static pid_t daemon_pid = -1; /* -1: none running */
static char sock[108];

static void daemon_up(void)
{
    snprintf(sock, sizeof sock, "%s/s", tmpd);
    (void)unlink(sock); /* left by a daemon that was killed */
    daemon_pid = fork();
    assert_true(daemon_pid >= 0);
    if (daemon_pid == 0) {
        /* A forked child keeps every fd this test got from whatever ran it (a lock of the
         * caller's on fd 9, such as /work/bin/integrate's flock held across make unit: a leaked
         * daemon held it, and the next integrate waited for it forever).  A real daemon starts
         * from systemd or --detach with none of them: close them. */
        (void)close_range(3, ~0u, 0);
        static struct daemon_opts o;
        daemon_opts_default(&o);
        snprintf(o.root, sizeof o.root, "%s/root", tmpd);
        snprintf(o.socket, sizeof o.socket, "%s", sock);
        snprintf(o.pidfile, sizeof o.pidfile, "%s/pid", tmpd);
        o.policy.backoff_initial_s = 0.05;
        o.policy.backoff_max_s = 0.2;
        log_set_level(LOG_LVL_WARN);
        _exit(daemon_run(&o));
    }
    struct stat st;
    for (int i = 0; i < 3000 && stat(sock, &st) < 0; i++)
        usleep(1000);
    assert_int_equal(stat(sock, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    /* The socket file appears only once it accepts: it was bound in place before listen(), and a
     * client that found it (these tests, the controller right after an install) was refused now
     * and then under load (ECONNREFUSED: "no daemon listening") */
    int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(c >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    (void)str_copy(sa.sun_path, sizeof sa.sun_path, sock);
    if (connect(c, (struct sockaddr *)&sa, sizeof sa) < 0)
        fail_msg("connect to the daemon's socket as soon as it appeared: %s", strerror(errno));
    close(c);
}

/* SIGTERM the daemon; its gangs keep running (the next agent re-adopts them). */
static void daemon_leave(void)
{
    pid_t pid = daemon_pid;
    kill(pid, SIGTERM);
    int ws;
    pid_t w = waitpid(pid, &ws, 0);
    if (w == pid)
        daemon_pid = -1; /* reaped: teardown has nothing to end */
    assert_int_equal(w, pid);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}

/* End the gangs the daemons left (from its state.json); no assertions: teardown uses it. */
static void gangs_end(void)
{
    char p[300];
    snprintf(p, sizeof p, "%s/root/state.json", tmpd);
    struct agent_state *st = malloc(sizeof *st);
    if (st && state_load(p, st) == 0) {
        for (int i = 0; i < st->njobs; i++) {
            if (st->jobs[i].gang_pgid <= 0)
                continue;
            (void)kill(-(pid_t)st->jobs[i].gang_pgid, SIGKILL);
            /* and its cgroup, once empty */
            char cgf[400], cg[4096] = "";
            snprintf(cgf, sizeof cgf, "%s/root/runs/%s/gang/g%d/cgroup", tmpd, st->jobs[i].job,
                     st->jobs[i].generation);
            FILE *f = fopen(cgf, "re");
            if (f) {
                if (!fgets(cg, sizeof cg, f))
                    cg[0] = '\0';
                fclose(f);
            }
            for (int k = 0; cg[0] && k < 100 && rmdir(cg) < 0 && errno == EBUSY; k++)
                usleep(10000);
        }
        state_done(st);
    }
    free(st);
}

/* ... and end the gangs it left, so no test leaves processes behind. */
static void daemon_down(void)
{
    daemon_leave();
    gangs_end();
}

/* Whatever a test left, on every path: the daemon (SIGKILL, reaped) and its gangs. */
static void daemon_end_all(void)
{
    if (daemon_pid > 0) {
        (void)kill(daemon_pid, SIGKILL);
        int ws;
        (void)waitpid(daemon_pid, &ws, 0);
        daemon_pid = -1;
    }
    gangs_end();
}

struct collect {
    char *last;
};

static int collect_line(const char *line, size_t len, void *ud)
{
    struct collect *c = ud;
    free(c->last);
    c->last = strndup(line, len);
    return 0;
}

/* Send a request; returns the last reply line (caller frees). */
static char *call(struct rpc_request *q)
{
    char *text;
    assert_int_equal(rpc_format_request(q, &text), 0);
    struct collect c = {0};
    assert_int_equal(rpc_call(sock, text, rpc_idle_deadline(q->op, q->interval_s, -1), collect_line, &c), 0);
    free(text);
    assert_non_null(c.last);
    return c.last;
}

static bool reply_ok(const char *line)
{
    json_error_t e;
    json_t *o = json_loads(line, 0, &e);
    bool ok = o && json_is_true(json_object_get(o, "ok"));
    json_decref(o);
    return ok;
}

static void get_status(struct agent_status *st)
{
    struct rpc_request q;
    rpc_request_init(&q);
    q.op = RPC_STATUS;
    char *line = call(&q);
    assert_int_equal(status_parse(line, strlen(line), st), 0);
    free(line);
}

/* The controller's promote of id (job train), which must be accepted. */
static void promote_ok(const char *id)
{
    struct rpc_request q;
    rpc_request_init(&q);
    q.op = RPC_PROMOTE;
    strcpy(q.job, "train");
    strcpy(q.release, id);
    char *r = call(&q);
    assert_true(reply_ok(r));
    free(r);
    rpc_request_done(&q);
}

static char *activate(const char *id, int nproc)
{
    struct rpc_request q;
    rpc_request_init(&q);
    q.op = RPC_ACTIVATE;
    strcpy(q.job, "train");
    strcpy(q.release, id);
    spec_for(&q.spec, id, nproc);
    char *r = call(&q);
    rpc_request_done(&q);
    return r;
}

static const struct job_status *wait_state(struct agent_status *st, enum gang_state want, double timeout)
{
    double until = time_mono() + timeout;
    for (;;) {
        get_status(st);
        const struct job_status *j = status_find_job(st, "train");
        if ((j && j->state == want) || time_mono() > until)
            return j;
        usleep(50000);
    }
}

static const char good_sh[] = "#!/bin/sh\ntrap 'exit 0' TERM\ni=0\nwhile :; do i=$((i+1));"
                              " echo '{\"v\":1,\"rank\":'$RANK',\"step\":'$i',\"phase\":\"train\"}' >&3;"
                              " sleep 0.05; done\n";

/* The daemon child holds no fd it did not open: a lock its caller held on an inherited fd (as
 * /work/bin/integrate's flock across make unit) is free again once the caller lets go, even
 * while a daemon runs (a leaked daemon once held integrate's lock for good). */
static void test_daemon_holds_no_inherited_fd(void **state)
{
    (void)state;
    char lock[300];
    snprintf(lock, sizeof lock, "%s/caller.lock", tmpd);
    int fd = open(lock, O_RDWR | O_CREAT, 0600); /* no O_CLOEXEC: as a shell's `exec 9>lock` */
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    daemon_up();
    assert_int_equal(close(fd), 0); /* the caller is done with it */
    int again = open(lock, O_RDWR | O_CLOEXEC);
    assert_true(again >= 0);
    int r = flock(again, LOCK_EX | LOCK_NB); /* EWOULDBLOCK while the daemon holds a copy */
    (void)close(again);
    assert_int_equal(r, 0);
    daemon_down();
}

static void test_daemon_crash_loop_reverts_to_good(void **state)
{
    (void)state;
    char good[RELEASE_ID_LEN + 1], bad[RELEASE_ID_LEN + 1];
    install("good", good_sh, good);
    install("bad", "#!/bin/sh\nexit 1\n", bad);
    daemon_up();
    char *r = activate(good, 2);
    assert_true(reply_ok(r));
    free(r);
    struct agent_status *st = malloc(sizeof *st);
    const struct job_status *j = wait_state(st, GANG_RUNNING, 30);
    assert_non_null(j);
    assert_int_equal(j->state, GANG_RUNNING);
    assert_int_equal(j->nranks, 2);
    assert_true(j->ranks[0].hb_age_s >= 0);

    struct rpc_request q;
    promote_ok(good);

    /* an activate whose command cannot run: refused, the good gang keeps its pids */
    get_status(st);
    int64_t pid0 = status_find_job(st, "train")->ranks[0].pid;
    rpc_request_init(&q);
    q.op = RPC_ACTIVATE;
    strcpy(q.job, "train");
    strcpy(q.release, bad);
    spec_for(&q.spec, bad, 2);
    char *argv[] = {"bin/nothere"};
    assert_int_equal(spec_set_argv(&q.spec, 1, argv), 0);
    r = call(&q);
    assert_false(reply_ok(r));
    assert_non_null(strstr(r, "bin/nothere"));
    free(r);
    rpc_request_done(&q);
    get_status(st);
    assert_int_equal(status_find_job(st, "train")->ranks[0].pid, pid0);
    assert_string_equal(status_find_job(st, "train")->current, good);

    /* the bad release crash-loops and the agent goes back to good on its own */
    r = activate(bad, 2);
    assert_true(reply_ok(r));
    free(r);
    j = wait_state(st, GANG_REVERTED, 30);
    assert_non_null(j);
    assert_int_equal(j->state, GANG_REVERTED);
    assert_string_equal(j->current, good);
    assert_string_equal(j->previous, bad);
    assert_non_null(strstr(j->reason, "crash loop"));
    /* and the good gang runs again */
    double until = time_mono() + 30;
    while (time_mono() < until) {
        get_status(st);
        j = status_find_job(st, "train");
        if (j->nranks == 2 && j->ranks[0].has_hb && j->ranks[0].pid > 0)
            break;
        usleep(50000);
    }
    assert_true(j->ranks[0].has_hb);
    assert_string_equal(j->release, good);

    /* stop: every process gone */
    rpc_request_init(&q);
    q.op = RPC_STOP;
    strcpy(q.job, "train");
    int64_t p = j->ranks[0].pid;
    r = call(&q);
    assert_true(reply_ok(r));
    free(r);
    assert_int_equal(kill((pid_t)p, 0), -1);
    get_status(st);
    assert_int_equal(status_find_job(st, "train")->state, GANG_STOPPED);
    free(st);
    daemon_down();

    /* the journal has the story */
    char ev[400], *text;
    snprintf(ev, sizeof ev, "%s/root/events.jsonl", tmpd);
    assert_int_equal(fs_read_file(ev, 1 << 20, &text, NULL), 0);
    assert_non_null(strstr(text, "\"kind\":\"promote\""));
    assert_non_null(strstr(text, "\"kind\":\"crash\""));
    assert_non_null(strstr(text, "\"kind\":\"revert\""));
    assert_non_null(strstr(text, "\"kind\":\"stop\""));
    free(text);
    /* state.json knows good and current after the daemon is gone */
    struct agent_state as;
    snprintf(ev, sizeof ev, "%s/root/state.json", tmpd);
    assert_int_equal(state_load(ev, &as), 0);
    assert_string_equal(state_find_job(&as, "train")->good, good);
    state_done(&as);
}

static int count_line(const char *line, size_t len, void *ud)
{
    (void)line;
    (void)len;
    ++*(int *)ud;
    return 0;
}

/* The controller is gone mid-probation: the agent reverts on its own.  Also: watch --count. */
static void test_daemon_probation_deadline(void **state)
{
    (void)state;
    char good[RELEASE_ID_LEN + 1], next[RELEASE_ID_LEN + 1];
    install("good", good_sh, good);
    install("next", "#!/bin/sh\n# another healthy release\ntrap 'exit 0' TERM\nwhile :; do sleep 0.05; done\n", next);
    daemon_up();
    char *r = activate(good, 1);
    assert_true(reply_ok(r));
    free(r);
    struct rpc_request q;
    promote_ok(good);
    rpc_request_init(&q);
    q.op = RPC_ACTIVATE;
    strcpy(q.job, "train");
    strcpy(q.release, next);
    spec_for(&q.spec, next, 1);
    q.probation_s = 0.5;
    r = call(&q);
    assert_true(reply_ok(r));
    free(r);
    rpc_request_done(&q);
    struct agent_status *st = malloc(sizeof *st);
    get_status(st);
    assert_string_equal(status_find_job(st, "train")->current, next);
    const struct job_status *j = wait_state(st, GANG_REVERTED, 30);
    assert_int_equal(j->state, GANG_REVERTED);
    assert_string_equal(j->current, good);
    assert_non_null(strstr(j->reason, "probation"));
    free(st);

    rpc_request_init(&q);
    q.op = RPC_WATCH;
    q.interval_s = 0.05;
    q.count = 3;
    char *text;
    assert_int_equal(rpc_format_request(&q, &text), 0);
    int lines = 0;
    assert_int_equal(rpc_call(sock, text, 0, count_line, &lines), 0);
    free(text);
    assert_int_equal(lines, 3);
    daemon_down();
}

/* A worker that keeps running with a non-finite loss (a foreign worker that does not exit on
 * NaN): the agent stops it and, the release never having been promoted, reverts to good. */
static void test_daemon_nonfinite_heartbeats_revert(void **state)
{
    (void)state;
    char good[RELEASE_ID_LEN + 1], nan[RELEASE_ID_LEN + 1];
    install("good", good_sh, good);
    install("nan", "#!/bin/sh\ntrap 'exit 0' TERM\ni=0\nwhile :; do i=$((i+1));"
                   " echo '{\"v\":1,\"rank\":'$RANK',\"step\":'$i',\"loss\":null,\"nonfinite\":'$i',\"phase\":\"train\"}' >&3;"
                   " sleep 0.05; done\n",
            nan);
    daemon_up();
    char *r = activate(good, 1);
    assert_true(reply_ok(r));
    free(r);
    promote_ok(good);
    r = activate(nan, 1);
    assert_true(reply_ok(r));
    free(r);
    struct agent_status *st = malloc(sizeof *st);
    const struct job_status *j = wait_state(st, GANG_REVERTED, 30);
    assert_int_equal(j->state, GANG_REVERTED);
    assert_string_equal(j->current, good);
    assert_non_null(strstr(j->reason, "non-finite"));
    free(st);
    daemon_down();
}

static int64_t rank_step(const struct job_status *j, int k)
{
    return j->ranks[k].has_hb ? j->ranks[k].hb.step : -1;
}

/* Issue 11: stopping or killing the agent leaves its gangs running; the next agent re-adopts
 * them (same pids, same generation, heartbeats continue, nothing relaunched), three times in a
 * row; a worker killed while no agent runs is seen by the next agent. */
static void test_daemon_restart_readopts(void **state)
{
    (void)state;
    char good[RELEASE_ID_LEN + 1];
    install("good", good_sh, good);
    daemon_up();
    char *r = activate(good, 2);
    assert_true(reply_ok(r));
    free(r);
    struct agent_status *st = malloc(sizeof *st);
    const struct job_status *j = wait_state(st, GANG_RUNNING, 30);
    assert_int_equal(j->state, GANG_RUNNING);
    pid_t pid0 = (pid_t)j->ranks[0].pid, pid1 = (pid_t)j->ranks[1].pid;
    int64_t step = rank_step(j, 0);
    for (int round = 0; round < 3; round++) {
        if (round == 1) {
            kill(daemon_pid, SIGKILL); /* a crash: no goodbye at all */
            int ws;
            assert_int_equal(waitpid(daemon_pid, &ws, 0), daemon_pid);
            daemon_pid = -1;
        } else {
            daemon_leave();
        }
        assert_int_equal(kill(pid0, 0), 0); /* the gang outlives the agent */
        assert_int_equal(kill(pid1, 0), 0);
        usleep(300000); /* heartbeats written now wait in the FIFOs */
        daemon_up();
        get_status(st);
        j = status_find_job(st, "train");
        assert_non_null(j);
        assert_int_equal(j->state, GANG_RUNNING);
        assert_int_equal(j->generation, 1);
        assert_int_equal(j->ranks[0].pid, pid0);
        assert_int_equal(j->ranks[1].pid, pid1);
        for (int i = 0; i < 600 && rank_step(j, 0) <= step; i++) {
            usleep(50000);
            get_status(st);
            j = status_find_job(st, "train");
        }
        assert_true(rank_step(j, 0) > step); /* the steps go on */
        step = rank_step(j, 0);
    }
    /* a worker killed while no agent runs: the next one sees it and restarts the gang */
    daemon_leave();
    assert_int_equal(kill(pid1, SIGKILL), 0);
    usleep(200000);
    daemon_up();
    for (int i = 0; i < 600; i++) {
        get_status(st);
        j = status_find_job(st, "train");
        if (j->generation == 2 && j->state == GANG_RUNNING)
            break;
        usleep(50000);
    }
    assert_int_equal(j->generation, 2);
    assert_int_equal(j->state, GANG_RUNNING);
    assert_int_not_equal(j->ranks[0].pid, pid0);
    free(st);
    daemon_down();
    /* the journal says what happened */
    char p[300], line[1024];
    snprintf(p, sizeof p, "%s/root/events.jsonl", tmpd);
    FILE *f = fopen(p, "re");
    assert_non_null(f);
    int adopts = 0, crash = 0;
    while (fgets(line, sizeof line, f)) {
        adopts += strstr(line, "\"kind\":\"adopt\"") != NULL;
        crash += strstr(line, "\"kind\":\"crash\"") && strstr(line, "signal 9");
    }
    fclose(f);
    assert_int_equal(adopts, 4);
    assert_int_equal(crash, 1);
}

/* Issue 11: no wall clock in any deadline.  The wall clock is stepped an hour forward during a
 * probation that the controller then ends with a promote (with a wall-clock deadline this rolled
 * back a healthy release), then an hour back during one that the controller never ends (the
 * deadline must still expire on time, not an hour late). */
static void test_daemon_probation_ignores_wall_clock_steps(void **state)
{
    (void)state;
    char good[RELEASE_ID_LEN + 1], next[RELEASE_ID_LEN + 1], third[RELEASE_ID_LEN + 1];
    install("good", good_sh, good);
    install("next", "#!/bin/sh\n# healthy too\ntrap 'exit 0' TERM\nwhile :; do sleep 0.05; done\n", next);
    install("third", "#!/bin/sh\n# and this one\ntrap 'exit 0' TERM\nwhile :; do sleep 0.05; done\n", third);
    wall_offset = mmap(NULL, sizeof *wall_offset, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(wall_offset != MAP_FAILED);
    *wall_offset = 0;
    daemon_up();
    char *r = activate(good, 1);
    assert_true(reply_ok(r));
    free(r);
    promote_ok(good);
    struct rpc_request a;
    rpc_request_init(&a);
    a.op = RPC_ACTIVATE;
    strcpy(a.job, "train");
    strcpy(a.release, next);
    spec_for(&a.spec, next, 1);
    a.probation_s = 3;
    r = call(&a);
    assert_true(reply_ok(r));
    free(r);
    rpc_request_done(&a);
    *wall_offset = 3600; /* +1 h */
    struct timespec real;
    assert_int_equal(syscall(SYS_clock_gettime, CLOCK_REALTIME, &real), 0);
    assert_true(time_wall() - (double)real.tv_sec > 3500); /* the step reaches common/util.c */
    usleep(500000);      /* several ticks of the daemon with the stepped clock */
    struct agent_status *st = malloc(sizeof *st);
    get_status(st);
    const struct job_status *j = status_find_job(st, "train");
    assert_string_equal(j->current, next); /* not reverted */
    promote_ok(next); /* the controller's verdict stands: promoted */
    get_status(st);
    j = status_find_job(st, "train");
    assert_string_equal(j->good, next);

    rpc_request_init(&a);
    a.op = RPC_ACTIVATE;
    strcpy(a.job, "train");
    strcpy(a.release, third);
    spec_for(&a.spec, third, 1);
    a.probation_s = 1;
    r = call(&a);
    assert_true(reply_ok(r));
    free(r);
    rpc_request_done(&a);
    *wall_offset = -3600; /* -1 h: a wall-clock deadline would now be an hour away */
    j = wait_state(st, GANG_REVERTED, 30);
    assert_int_equal(j->state, GANG_REVERTED);
    assert_string_equal(j->current, next);
    assert_non_null(strstr(j->reason, "probation"));
    free(st);
    daemon_down();
    *wall_offset = 0;
}

/* The daemon's side of test_gang_peer_lost_names_frozen_rank: a rank frozen (kill -STOP) while
 * its peer exits 8 is the gang's cause, judged as a hang (reason code liveness), not a rank exit
 * of the peer.  On probation without a good release: failed, naming the frozen rank. */
static void test_daemon_peer_lost_names_frozen_rank(void **state)
{
    (void)state;
    char id[RELEASE_ID_LEN + 1];
    install("frozen",
            "#!/bin/sh\n"
            "echo '{\"v\":1,\"rank\":'$RANK',\"step\":3,\"phase\":\"train\"}' >&3\n"
            "if [ \"$RANK\" = 1 ]; then kill -STOP $$; sleep 30; exit 0; fi\n"
            "sleep 1\n"
            "exit 8\n",
            id);
    daemon_up();
    struct rpc_request q;
    rpc_request_init(&q);
    q.op = RPC_ACTIVATE;
    strcpy(q.job, "train");
    strcpy(q.release, id);
    spec_for(&q.spec, id, 2);
    q.spec.live.silence_s = 1.2; /* half: 0.6, less than rank 1's silence at rank 0's exit */
    char *r = call(&q);
    rpc_request_done(&q);
    assert_true(reply_ok(r));
    free(r);
    struct agent_status *st = malloc(sizeof *st);
    const struct job_status *j = wait_state(st, GANG_FAILED, 30);
    assert_non_null(j);
    assert_int_equal(j->state, GANG_FAILED);
    assert_int_equal(j->reason_code, STATUS_RC_LIVENESS);
    if (!strstr(j->reason, "rank 1 silent for ") ||
        !strstr(j->reason, "while its peers lost it (rank 0 exited 8) (stopped by a signal)"))
        fail_msg("'%s'", j->reason);
    free(st);
    daemon_down();
}

static void test_daemon_no_good_release_fails(void **state)
{
    (void)state;
    char bad[RELEASE_ID_LEN + 1];
    install("bad", "#!/bin/sh\nexit 7\n", bad); /* diverged, non-retryable: no restart of the same release */
    daemon_up();
    char *r = activate(bad, 1);
    assert_true(reply_ok(r));
    free(r);
    struct agent_status *st = malloc(sizeof *st);
    const struct job_status *j = wait_state(st, GANG_FAILED, 30);
    assert_non_null(j);
    assert_int_equal(j->state, GANG_FAILED);
    assert_int_equal(j->restarts, 0);
    assert_non_null(strstr(j->reason, "no good release"));
    free(st);
    /* a second daemon is refused */
    static struct daemon_opts o;
    daemon_opts_default(&o);
    snprintf(o.root, sizeof o.root, "%s/root", tmpd);
    snprintf(o.socket, sizeof o.socket, "%s/s2", tmpd);
    snprintf(o.pidfile, sizeof o.pidfile, "%s/pid", tmpd);
    assert_int_equal(daemon_run(&o), AGENT_EXIT_BUSY);
    daemon_down();
}

/* Lines in tmpd's file name (0 when it does not exist). */
static int count_lines(const char *name)
{
    char p[300], *text = NULL;
    size_t len = 0;
    snprintf(p, sizeof p, "%s/%s", tmpd, name);
    if (fs_read_file(p, 1 << 20, &text, &len) < 0)
        return 0;
    int n = 0;
    for (size_t i = 0; i < len; i++)
        n += text[i] == '\n';
    free(text);
    return n;
}

static char *job_request(enum rpc_op op, bool no_start, double restart_after_s)
{
    struct rpc_request q;
    rpc_request_init(&q);
    q.op = op;
    strcpy(q.job, "train");
    strcpy(q.reason, "drover: probation failed");
    q.no_start = no_start;
    q.restart_after_s = restart_after_s;
    return call(&q);
}

/* `drover stop`, then a deploy of a release that fails: the controller's revert of that
 * deploy asks `revert --no-start`.  The good release becomes current and no worker of it ever
 * starts, not on the revert and not when the agent restarts; the job is recorded stopped, and
 * a start runs the good release.  It used to start the good gang (every rank of it exec'd),
 * which the controller then stopped again: it ran for seconds on GPUs the operator had freed. */
static void test_daemon_revert_no_start_starts_nothing(void **state)
{
    (void)state;
    char good[RELEASE_ID_LEN + 1], bad[RELEASE_ID_LEN + 1], script[600];
    /* each rank of the good release that starts says so, before anything else */
    snprintf(script, sizeof script, "#!/bin/sh\necho $RANK >>'%s/good-starts'\n%s", tmpd,
             good_sh + strlen("#!/bin/sh\n"));
    install("good", script, good);
    snprintf(script, sizeof script, "%s# the failing release\n", good_sh);
    install("bad", script, bad);
    daemon_up();
    char *r = activate(good, 2);
    assert_true(reply_ok(r));
    free(r);
    struct agent_status *st = malloc(sizeof *st);
    assert_non_null(wait_state(st, GANG_RUNNING, 30));
    promote_ok(good);
    /* drover stop; the deploy of bad starts it; the revert's phase 1 stops it (a switch's stop) */
    r = job_request(RPC_STOP, false, 0);
    assert_true(reply_ok(r));
    free(r);
    r = activate(bad, 2);
    assert_true(reply_ok(r));
    free(r);
    r = job_request(RPC_STOP, false, 30);
    assert_true(reply_ok(r));
    free(r);
    int starts = count_lines("good-starts");
    assert_int_equal(starts, 2); /* its two ranks, once */

    r = job_request(RPC_REVERT, true, 0);
    if (!reply_ok(r))
        fail_msg("revert --no-start: %s", r);
    usleep(1500 * 1000); /* a gang started by the revert would have exec'd by now */
    assert_int_equal(count_lines("good-starts"), starts);
    assert_non_null(strstr(r, "left stopped"));
    free(r);
    get_status(st);
    const struct job_status *j = status_find_job(st, "train");
    assert_int_equal(j->state, GANG_STOPPED);
    assert_string_equal(j->current, good);
    assert_string_equal(j->good, good);
    assert_non_null(strstr(j->reason, "left stopped"));

    /* an agent restart starts nothing: the job is stopped as `stop` leaves it */
    daemon_leave();
    daemon_up();
    usleep(1500 * 1000);
    assert_int_equal(count_lines("good-starts"), starts);
    get_status(st);
    j = status_find_job(st, "train");
    assert_int_equal(j->state, GANG_STOPPED);
    assert_string_equal(j->current, good);

    /* `drover start` runs the good release */
    r = job_request(RPC_START, false, 0);
    assert_true(reply_ok(r));
    free(r);
    j = wait_state(st, GANG_RUNNING, 30);
    assert_int_equal(j->state, GANG_RUNNING);
    assert_string_equal(j->release, good);
    assert_int_equal(count_lines("good-starts"), starts + 2);
    free(st);
    daemon_down();
}

int main(void)
{
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1); /* reap the workers' own children like the daemon */
    log_set_level(LOG_LVL_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gang_env, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_rank_crash_stops_gang, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_sigterm_then_sigkill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_exit_code_without_exit_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_peer_lost_names_frozen_rank, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_peer_effect_gives_way, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_exec_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_exec_error_reason, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_pid_file_disk_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_exec_error_reason_elf, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_overlong_heartbeat, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_last_heartbeat_before_exit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_release_read_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_release_read_only_fallback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preflight_release_read_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preflight_setsid_child, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preflight_setsid_child_no_cgroup, setup, teardown),
        cmocka_unit_test(test_mount_is_shared),
        cmocka_unit_test_setup_teardown(test_gang_release_read_only_without_rslave, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_stop_reaches_setsid_child, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_stop_reaches_setsid_child_v1, setup, teardown),
        cmocka_unit_test(test_gang_cgroup_mode_parse),
        cmocka_unit_test_setup_teardown(test_gang_python_nan_heartbeats, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_liveness, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_drover_train_hello, setup, teardown),
        cmocka_unit_test_setup_teardown(test_daemon_holds_no_inherited_fd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_daemon_crash_loop_reverts_to_good, setup, teardown),
        cmocka_unit_test_setup_teardown(test_daemon_probation_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_daemon_nonfinite_heartbeats_revert, setup, teardown),
        cmocka_unit_test_setup_teardown(test_daemon_restart_readopts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_daemon_probation_ignores_wall_clock_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_daemon_peer_lost_names_frozen_rank, setup, teardown),
        cmocka_unit_test_setup_teardown(test_daemon_no_good_release_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_daemon_revert_no_start_starts_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
