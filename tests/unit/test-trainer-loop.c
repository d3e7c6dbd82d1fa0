/* tests/unit/test-trainer-loop.c: the training loop as the agent sees it, in forked children:
 * SIGTERM finishes the step, checkpoints and exits 0 with a done heartbeat; nan_at diverges with
 * exit 7 and no checkpoint after the first non-finite step; two ranks over TCP stay in lockstep,
 * only rank 0 checkpoints, and a killed peer gives exit 8, a stopped one exit 12 (peer_stopped)
 * with the stop's checkpoint; a bad config is exit 3 with a done
 * heartbeat carrying the error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/heartbeat.h"
#include "common/log.h"
#include "common/util.h"
#include "trainer/backend.h"
#include "trainer/ckpt.h"
#include "trainer/data.h"
#include "trainer/exitcode.h"
#include "trainer/train.h"

static char dir[64];
static char cfg[160], shard[160];

static int setup(void **state)
{
    (void)state;
    log_set_level(LOG_LVL_ERR);
    strcpy(dir, "/tmp/drover-test-loop.XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(shard, sizeof shard, "%s/train.bin", dir);
    uint16_t tok[20000];
    for (int i = 0; i < 20000; i++)
        tok[i] = (uint16_t)((i * 7 + i / 13) % 64);
    if (shard_write(shard, tok, 20000) < 0)
        return -1;
    snprintf(cfg, sizeof cfg, "%s/cfg.ini", dir);
    char text[512];
    snprintf(text, sizeof text,
             "[model]\nlayers = 1\nheads = 2\ndim = 16\nvocab = 64\nseq = 16\n"
             "[train]\nbatch = 2\nlr = 0.003\nwarmup_steps = 2\nmax_steps = 0\n"
             "checkpoint_every = 5\nlog_every = 0\n[data]\ntrain = %s\n", shard);
    return fs_write_atomic(cfg, text, strlen(text), 0644);
}

static int teardown(void **state)
{
    (void)state;
    return fs_rm_rf(dir);
}

static const char *spawn_device; /* NULL: the config's */

/* Fork a child running train_run with env "K=V" pairs; heartbeats come back on *ret_hb_fd. */
static pid_t spawn(const char *config, const char *ck, int64_t max_steps, const char *const *env,
                   int *ret_hb_fd)
{
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = dup(p[1]); /* without CLOEXEC, like the agent's pipe */
        char s[16];
        snprintf(s, sizeof s, "%d", fd);
        setenv("DROVER_HEARTBEAT_FD", s, 1);
        setenv("DROVER_RELEASE", "rel-test", 1);
        unsetenv("DROVER_TRAIN_FAULT");
        for (int i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        struct train_args a = {.config = config, .ckpt_dir = ck, .max_steps = max_steps,
                               .device = spawn_device};
        _exit(train_run(&a));
    }
    close(p[1]);
    *ret_hb_fd = p[0];
    return pid;
}

struct beats {
    struct heartbeat last, last_train;
    int ntrain;
    bool saw_done, saw_ckpt_phase;
    char buf[1 << 14]; /* bytes read but not yet parsed, per pipe */
    size_t have;
};

/* Read heartbeats until n train lines were seen, or (phase >= 0) a line in that phase at that
 * step arrived; n < 0 and phase < 0: until EOF. */
static void read_beats_until(int fd, struct beats *b, int n, int phase, int64_t step)
{
    char *buf = b->buf;
    size_t have = b->have;
    for (;;) {
        char *nl;
        while ((nl = memchr(buf, '\n', have))) {
            struct heartbeat h;
            assert_int_equal(heartbeat_parse(buf, (size_t)(nl - buf), &h), 0);
            b->last = h;
            if (h.phase == HB_PHASE_TRAIN) {
                b->ntrain++;
                b->last_train = h;
            }
            b->saw_done |= h.phase == HB_PHASE_DONE;
            b->saw_ckpt_phase |= h.phase == HB_PHASE_CHECKPOINT;
            size_t used = (size_t)(nl - buf) + 1;
            memmove(buf, nl + 1, have - used);
            have -= used;
            if ((n >= 0 && b->ntrain >= n) || (phase >= 0 && (int)h.phase == phase && h.step == step)) {
                b->have = have;
                return;
            }
        }
        ssize_t r = read(fd, buf + have, sizeof b->buf - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            b->have = 0;
            return;
        }
        have += (size_t)r;
    }
}

static void read_beats(int fd, struct beats *b, int n)
{
    read_beats_until(fd, b, n, -1, 0);
}

static int wait_code(pid_t pid)
{
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int64_t newest_ckpt_step(const char *ck)
{
    struct gpt_config c = {.layers = 1, .heads = 2, .dim = 16, .vocab = 64, .seq = 16};
    assert_int_equal(gpt_config_check(&c), 0);
    size_t n = gpt_num_params(&c);
    float *p = malloc(n * 12);
    assert_non_null(p);
    struct ckpt_meta m;
    int r = ckpt_load_latest(ck, &c, NULL, &m, p, p + n, p + 2 * n, NULL);
    free(p);
    assert_true(r >= 0);
    return r ? m.step : -1;
}

static void test_sigterm_checkpoints_and_exits_0(void **state)
{
    (void)state;
    char ck[160];
    snprintf(ck, sizeof ck, "%s/ck-term", dir);
    int fd;
    pid_t pid = spawn(cfg, ck, -1, NULL, &fd);
    static struct beats b;
    memset(&b, 0, sizeof b);
    read_beats(fd, &b, 7);
    assert_int_equal(kill(pid, SIGTERM), 0);
    read_beats(fd, &b, -1);
    close(fd);
    assert_int_equal(wait_code(pid), TX_OK);
    assert_true(b.saw_done);
    assert_true(b.saw_ckpt_phase);
    assert_int_equal(b.last.phase, HB_PHASE_DONE);
    assert_string_equal(b.last.release, "rel-test");
    assert_string_equal(b.last.backend, "cpu");
    assert_true(b.last.step >= 7);
    assert_int_equal(b.last.ckpt_step, b.last.step);
    assert_int_equal(newest_ckpt_step(ck), b.last.step);
    assert_true(b.last_train.tok_s > 0);

    /* the next process resumes there */
    pid = spawn(cfg, ck, b.last.step + 2, NULL, &fd);
    static struct beats b2;
    memset(&b2, 0, sizeof b2);
    read_beats(fd, &b2, -1);
    close(fd);
    assert_int_equal(wait_code(pid), TX_OK);
    assert_int_equal(b2.last.resumed_from, b.last.step);
    assert_int_equal(b2.ntrain, 2);
    assert_int_equal(b2.last.step, b.last.step + 2);
}

static void test_nan_diverges_without_checkpoint(void **state)
{
    (void)state;
    char ck[160];
    snprintf(ck, sizeof ck, "%s/ck-nan", dir);
    static const char *env[] = {"DROVER_TRAIN_FAULT=nan_at=8", NULL};
    int fd;
    pid_t pid = spawn(cfg, ck, -1, env, &fd);
    static struct beats b;
    memset(&b, 0, sizeof b);
    read_beats(fd, &b, -1);
    close(fd);
    assert_int_equal(wait_code(pid), TX_DIVERGED);
    assert_true(b.saw_done);
    assert_int_equal(b.last.nonfinite, 3);
    assert_false(b.last.loss_finite);
    assert_int_equal(b.last.step, 10);
    assert_non_null(strstr(b.last.error, "diverged"));
    assert_int_equal(newest_ckpt_step(ck), 5); /* step 10's checkpoint was never written */
}

/* Two ranks run to their end: every heartbeat read into b0, b1, both exit 0. */
static void finish_pair(pid_t p0, int f0, pid_t p1, int f1, struct beats *b0, struct beats *b1)
{
    memset(b0, 0, sizeof *b0);
    memset(b1, 0, sizeof *b1);
    read_beats(f0, b0, -1);
    read_beats(f1, b1, -1);
    close(f0);
    close(f1);
    assert_int_equal(wait_code(p0), TX_OK);
    assert_int_equal(wait_code(p1), TX_OK);
}

static void test_two_ranks_and_a_lost_peer(void **state)
{
    (void)state;
    char ck[160], port[32];
    snprintf(ck, sizeof ck, "%s/ck-dp", dir);
    snprintf(port, sizeof port, "MASTER_PORT=%d", 30000 + (int)(getpid() % 20000));
    const char *e0[] = {"WORLD_SIZE=2", "RANK=0", "MASTER_ADDR=127.0.0.1", port, NULL};
    const char *e1[] = {"WORLD_SIZE=2", "RANK=1", "MASTER_ADDR=127.0.0.1", port, NULL};
    int f0, f1;
    pid_t p0 = spawn(cfg, ck, 6, e0, &f0);
    pid_t p1 = spawn(cfg, ck, 6, e1, &f1);
    static struct beats b0, b1;
    finish_pair(p0, f0, p1, f1, &b0, &b1);
    assert_int_equal(b0.last.step, 6);
    assert_int_equal(b1.last.step, 6);
    assert_int_equal(b1.last.rank, 1);
    assert_int_equal(b0.last.ckpt_step, 6);
    assert_int_equal(b1.last.ckpt_step, -1); /* only rank 0 writes */
    assert_true(b0.last_train.loss != b1.last_train.loss); /* different data per rank */

    /* kill rank 1 mid-run: rank 0 exits with peer lost instead of hanging */
    snprintf(port, sizeof port, "MASTER_PORT=%d", 30001 + (int)(getpid() % 20000));
    p0 = spawn(cfg, ck, -1, e0, &f0);
    p1 = spawn(cfg, ck, -1, e1, &f1);
    memset(&b0, 0, sizeof b0);
    memset(&b1, 0, sizeof b1);
    read_beats(f1, &b1, 3);
    assert_int_equal(kill(p1, SIGKILL), 0);
    double t0 = time_mono();
    read_beats(f0, &b0, -1);
    close(f0);
    close(f1);
    assert_int_equal(wait_code(p0), TX_PEER_LOST);
    wait_code(p1);
    assert_true(time_mono() - t0 < 30);
    assert_true(b0.saw_done);
    assert_true(b0.last.error[0] != '\0');
}

/* One rank of two is stopped (SIGTERM: its agent stopping its part of a gang spread over
 * containers): both stop after the same step with the stop's checkpoint, the stopped rank exits
 * 0 and the other 12, peer_stopped (exiting 0 made its own agent record the job completed and
 * leave it down).  Either way round: rank 0 is the one that checkpoints. */
static void test_peer_stopped(void **state)
{
    (void)state;
    for (int stopped = 0; stopped < 2; stopped++) {
        char ck[160], port[32];
        snprintf(ck, sizeof ck, "%s/ck-peer%d", dir, stopped);
        snprintf(port, sizeof port, "MASTER_PORT=%d", 30002 + stopped + (int)(getpid() % 20000));
        const char *e0[] = {"WORLD_SIZE=2", "RANK=0", "MASTER_ADDR=127.0.0.1", port, NULL};
        const char *e1[] = {"WORLD_SIZE=2", "RANK=1", "MASTER_ADDR=127.0.0.1", port, NULL};
        int f[2];
        pid_t p[2];
        p[0] = spawn(cfg, ck, -1, e0, &f[0]);
        p[1] = spawn(cfg, ck, -1, e1, &f[1]);
        static struct beats b[2];
        memset(b, 0, sizeof b);
        read_beats(f[stopped], &b[stopped], 4);
        assert_int_equal(kill(p[stopped], SIGTERM), 0);
        read_beats(f[0], &b[0], -1);
        read_beats(f[1], &b[1], -1);
        close(f[0]);
        close(f[1]);
        assert_int_equal(wait_code(p[stopped]), TX_OK);
        assert_int_equal(wait_code(p[1 - stopped]), TX_PEER_STOPPED);
        assert_true(b[0].saw_done && b[1].saw_done);
        assert_int_equal(b[0].last.step, b[1].last.step); /* the same step */
        assert_true(b[0].last.step >= 4);
        assert_int_equal(b[0].last.ckpt_step, b[0].last.step); /* the stop's checkpoint */
        assert_int_equal(newest_ckpt_step(ck), b[0].last.step);
        assert_int_equal(b[1 - stopped].last.error[0], '\0'); /* not a failure */
    }
}

static int count_tmp(const char *ck)
{
    char pat[256];
    snprintf(pat, sizeof pat, "%s/.ckpt-*.tmp.*", ck);
    glob_t g;
    int n = glob(pat, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
    if (n)
        globfree(&g);
    return n;
}

/* cases-field C18: SIGKILL in the middle of a save leaves only a temp file; the restart resumes
 * from the previous checkpoint and its next save removes the stale temp file. */
static void test_kill_during_save(void **state)
{
    (void)state;
    char ck[160];
    snprintf(ck, sizeof ck, "%s/ck-kill", dir);
    static const char *env[] = {"DROVER_TRAIN_FAULT=ckpt_chunk_delay=400ms", NULL};
    int fd;
    pid_t pid = spawn(cfg, ck, -1, env, &fd);
    static struct beats b;
    memset(&b, 0, sizeof b);
    /* the first save (step 5) is slow but completes; wait for step 10's save to begin */
    read_beats_until(fd, &b, -1, HB_PHASE_CHECKPOINT, 10);
    assert_int_equal(b.last.phase, HB_PHASE_CHECKPOINT);
    assert_int_equal(b.last.step, 10);
    usleep(300 * 1000); /* inside the save: header and parameters written, not renamed */
    assert_int_equal(kill(pid, SIGKILL), 0);
    close(fd);
    assert_int_equal(wait_code(pid), 128 + SIGKILL);
    assert_int_equal(count_tmp(ck), 1);
    assert_int_equal(newest_ckpt_step(ck), 5);

    pid = spawn(cfg, ck, 15, NULL, &fd);
    static struct beats b2;
    memset(&b2, 0, sizeof b2);
    read_beats(fd, &b2, -1);
    close(fd);
    assert_int_equal(wait_code(pid), TX_OK);
    assert_int_equal(b2.last.resumed_from, 5);
    assert_int_equal(newest_ckpt_step(ck), 15);
    assert_int_equal(count_tmp(ck), 0);
}

/* The child ends with code and a done heartbeat whose error holds words. */
static void expect_done(pid_t pid, int fd, int code, const char *words)
{
    static struct beats b;
    memset(&b, 0, sizeof b);
    read_beats(fd, &b, -1);
    close(fd);
    assert_int_equal(wait_code(pid), code);
    assert_int_equal(b.last.phase, HB_PHASE_DONE);
    if (!strstr(b.last.error, words))
        fail_msg("done heartbeat's error '%s' lacks '%s'", b.last.error, words);
}

static void test_bad_config_reports_done(void **state)
{
    (void)state;
    char bad[160];
    snprintf(bad, sizeof bad, "%s/bad.ini", dir);
    const char *t = "[train]\nlr = fast\n";
    assert_int_equal(fs_write_atomic(bad, t, strlen(t), 0644), 0);
    int fd;
    pid_t pid = spawn(bad, NULL, -1, NULL, &fd);
    expect_done(pid, fd, TX_CONFIG, "config");
}

/* One heartbeat line as written, without its newline, into line[sz]. */
static void read_line(int fd, char *line, size_t sz)
{
    size_t n = 0;
    while (n + 1 < sz) {
        ssize_t r = read(fd, line + n, 1);
        if (r < 0 && errno == EINTR)
            continue;
        assert_int_equal(r, 1);
        if (line[n] == '\n')
            break;
        n++;
    }
    line[n] = '\0';
}

/* drover-train's first line is the hello (docs/protocol.md), before the rendezvous: a rank
 * waiting there for a peer sends nothing else, so the agent and the controller say "waiting for
 * a peer" of it, not "it sent none" (no hello) or "still in phase init" (its init used to come
 * before the rendezvous).  Its phase init follows once the gang has met.  The hello is also a v1
 * init heartbeat (step 0, phase init), which an agent that does not know "kind" reads as one. */
static void test_hello_first_then_init_after_rendezvous(void **state)
{
    (void)state;
    char ck[160], port[32], line[HEARTBEAT_LINE_MAX + 1];
    snprintf(ck, sizeof ck, "%s/ck-hello", dir);
    snprintf(port, sizeof port, "MASTER_PORT=%d", 30010 + (int)(getpid() % 20000));
    const char *e0[] = {"WORLD_SIZE=2", "RANK=0", "MASTER_ADDR=127.0.0.1", port, NULL};
    const char *e1[] = {"WORLD_SIZE=2", "RANK=1", "MASTER_ADDR=127.0.0.1", port, NULL};
    int f0, f1;
    pid_t p1 = spawn(cfg, ck, 2, e1, &f1); /* alone: its peer, rank 0, is not there yet */
    read_line(f1, line, sizeof line);
    struct heartbeat h;
    assert_int_equal(heartbeat_parse(line, strlen(line), &h), 0);
    if (!h.hello)
        fail_msg("first line is not the hello: %s", line);
    assert_int_equal(h.rank, 1);
    assert_int_equal(h.step, 0);
    assert_int_equal(h.phase, HB_PHASE_INIT);
    assert_string_equal(h.release, "rel-test");
    assert_non_null(strstr(line, "\"phase\":\"init\"")); /* what an older agent reads */
    /* in the rendezvous: nothing more until the gang meets */
    struct pollfd pf = {.fd = f1, .events = POLLIN};
    assert_int_equal(poll(&pf, 1, 1000), 0);
    pid_t p0 = spawn(cfg, ck, 2, e0, &f0);
    read_line(f0, line, sizeof line);
    assert_int_equal(heartbeat_parse(line, strlen(line), &h), 0);
    assert_true(h.hello && h.rank == 0);
    for (int r = 0; r < 2; r++) { /* then init, not another hello; training follows */
        read_line(r ? f1 : f0, line, sizeof line);
        assert_int_equal(heartbeat_parse(line, strlen(line), &h), 0);
        if (h.hello || h.phase != HB_PHASE_INIT)
            fail_msg("rank %d's line after the hello: %s", r, line);
        assert_string_equal(h.backend, "cpu");
    }
    static struct beats b0, b1;
    finish_pair(p0, f0, p1, f1, &b0, &b1);
    assert_int_equal(b0.ntrain, 2);
    assert_int_equal(b1.ntrain, 2);
    assert_false(b0.last.hello || b1.last.hello);
}

#ifdef DROVER_HAVE_CUDA
/* A misspelt implementation switch is a configuration error before any device call (so this
 * runs without a GPU): exit 3 (not retried by the agent), and the done heartbeat says which
 * variable.  It used to run the default kernel silently. */
static void test_bad_kernel_switch_is_config(void **state)
{
    (void)state;
    static const char *const env[] = {"DROVER_CLS=v3", NULL};
    /* the reference links the CUDA backend in, as -Wl,-u,backend_cuda does for drover-train */
    assert_ptr_equal(backend_find("cuda"), &backend_cuda);
    /* a shape the CUDA kernels run (head size 16): the loop config's head size 8 is refused
     * first, which once made this test pass without reaching the switch check */
    char c16[160];
    snprintf(c16, sizeof c16, "%s/cfg16.ini", dir);
    char text[512];
    snprintf(text, sizeof text,
             "[model]\nlayers = 1\nheads = 1\ndim = 16\nvocab = 64\nseq = 16\n"
             "[train]\nbatch = 2\nmax_steps = 0\n[data]\ntrain = %s\n", shard);
    assert_int_equal(fs_write_atomic(c16, text, strlen(text), 0644), 0);
    int fd;
    spawn_device = "cuda";
    pid_t pid = spawn(c16, NULL, 1, env, &fd);
    spawn_device = NULL;
    expect_done(pid, fd, TX_CONFIG, "DROVER_CLS='v3' is not one of old, smem, v2, v2r");
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigterm_checkpoints_and_exits_0),
        cmocka_unit_test(test_nan_diverges_without_checkpoint),
        cmocka_unit_test(test_two_ranks_and_a_lost_peer),
        cmocka_unit_test(test_peer_stopped),
        cmocka_unit_test(test_kill_during_save),
        cmocka_unit_test(test_bad_config_reports_done),
        cmocka_unit_test(test_hello_first_then_init_after_rendezvous),
#ifdef DROVER_HAVE_CUDA
        cmocka_unit_test(test_bad_kernel_switch_is_config),
#endif
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
