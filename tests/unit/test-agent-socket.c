/* The agent's control socket under hostile or careless clients (issue 12): connections that
 * never send a request are answered and dropped, a full socket answers with a clear error that
 * the CLI's rpc_call reads without dying by SIGPIPE, and watchers that never read do not keep
 * the daemon from answering others.  And `drover-agent lease take ... --status` (the deploy's
 * lease and survey in one call) run as the built binary against that daemon: the document comes
 * after the lease's line, and only when the lease was taken; `release install --lease-release`
 * gives the lease back only after an install that succeeded.  The real daemon runs in a child
 * process. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/daemon.h"
#include "agent/gpumem.h"
#include "agent/rpc.h"
#include "agent/state.h"
#include "common/agentcli.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/status.h"
#include "common/util.h"

static char tmpd[64], sock[108];
static pid_t daemon_pid = -1;

static int setup(void **state)
{
    (void)state;
    strcpy(tmpd, "/tmp/drover-sock-test.XXXXXX");
    if (!mkdtemp(tmpd))
        return -1;
    snprintf(sock, sizeof sock, "%s/s", tmpd);
    daemon_pid = fork();
    if (daemon_pid < 0)
        return -1;
    if (daemon_pid == 0) {
        (void)close_range(3, ~0u, 0); /* no fd of whatever ran the tests (test-agent-supervise) */
        static struct daemon_opts o;
        daemon_opts_default(&o);
        snprintf(o.root, sizeof o.root, "%s/root", tmpd);
        snprintf(o.socket, sizeof o.socket, "%s", sock);
        snprintf(o.pidfile, sizeof o.pidfile, "%s/pid", tmpd);
        log_set_level(LOG_LVL_WARN);
        _exit(daemon_run(&o));
    }
    struct stat st;
    for (int i = 0; i < 500 && stat(sock, &st) < 0; i++)
        usleep(10000);
    return stat(sock, &st);
}

static int teardown(void **state)
{
    (void)state;
    if (daemon_pid > 0) {
        kill(daemon_pid, SIGTERM);
        int ws;
        (void)waitpid(daemon_pid, &ws, 0);
    }
    return fs_rm_rf(tmpd);
}

static int raw_connect(void)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

struct collect {
    char *last;
    int lines;
};

static int collect_line(const char *line, size_t len, void *ud)
{
    struct collect *c = ud;
    free(c->last);
    c->last = strndup(line, len);
    c->lines++;
    return 0;
}

/* status over rpc_call with idle deadline idle_s: rpc_call's result, the last line in c */
static int status_call(double idle_s, struct collect *c)
{
    struct rpc_request q;
    rpc_request_init(&q);
    q.op = RPC_STATUS;
    char *text;
    assert_int_equal(rpc_format_request(&q, &text), 0);
    int r = rpc_call(sock, text, idle_s, collect_line, c);
    free(text);
    return r;
}

/* status as the CLI asks it; returns the last line (caller frees) */
static char *status_line(void)
{
    struct collect c = {0};
    assert_int_equal(status_call(rpc_idle_deadline(RPC_STATUS, 0, -1), &c), 0);
    assert_non_null(c.last);
    return c.last;
}

static bool is_status_doc(const char *line)
{
    json_error_t e;
    json_t *o = json_loads(line, 0, &e);
    bool ok = o && json_object_get(o, "jobs") != NULL;
    json_decref(o);
    return ok;
}

/* Read fd until EOF or max_s; true on EOF (the daemon closed it). */
static bool reads_to_eof(int fd, double max_s, char *last, size_t last_sz)
{
    double until = time_mono() + max_s;
    size_t len = 0;
    last[0] = '\0';
    while (time_mono() < until) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 200) <= 0)
            continue;
        char b[65536];
        ssize_t n = read(fd, b, sizeof b);
        if (n == 0)
            return true;
        if (n < 0)
            return errno == ECONNRESET;
        size_t k = (size_t)n < last_sz - 1 - len ? (size_t)n : last_sz - 1 - len;
        memcpy(last + len, b, k);
        len += k;
        last[len] = '\0';
    }
    return false;
}

/* A call against the SIGSTOPped daemon with a 0.5 s deadline returned r after took seconds: it
 * gave up in time; the daemon, continued, answers status again. */
static void gave_up_then_answers(int r, double took)
{
    assert_int_equal(kill(daemon_pid, SIGCONT), 0);
    assert_int_equal(r, -ETIMEDOUT);
    assert_true(took >= 0.45 && took < 5);
    char *again = status_line();
    assert_true(is_status_doc(again));
    free(again);
}

/* A daemon that is stopped (SIGSTOP) or wedged accepts the connection (the kernel's backlog)
 * and never answers: the CLI used to wait on it forever; it now gives up after the request's
 * idle deadline, and the same socket answers once the daemon runs again. */
static void test_stopped_daemon(void **state)
{
    (void)state;
    assert_true(rpc_idle_deadline(RPC_STATUS, 0, -1) > 0);
    assert_true(rpc_idle_deadline(RPC_WATCH, 30, -1) >= 30 + rpc_idle_deadline(RPC_STATUS, 0, -1));
    assert_true(rpc_idle_deadline(RPC_LEASE_TAKEOVER, 0, -1) > 0);
    char *first = status_line();
    free(first);
    assert_int_equal(kill(daemon_pid, SIGSTOP), 0);
    struct collect c = {0};
    double t0 = time_mono();
    int r = status_call(0.5, &c);
    double took = time_mono() - t0;
    free(c.last);
    gave_up_then_answers(r, took);
}

/* The job verbs too (activate, revert, stop, start: they had no deadline and waited on a stopped
 * daemon forever): their deadline is the longest the job machine may take before it answers (the
 * current gang's grace, read from state.json, and the GPU-memory wait) plus the status one, so
 * it never fires on a healthy slow stop; a stop against the stopped daemon gives up as status
 * does. */
static void test_stopped_daemon_job_verbs(void **state)
{
    (void)state;
    static const enum rpc_op waits[] = { RPC_ACTIVATE, RPC_REVERT, RPC_STOP, RPC_START };
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++) {
        double known = rpc_idle_deadline(waits[i], 0, 30), unknown = rpc_idle_deadline(waits[i], 0, -1);
        assert_true(known >= 30 + GPUMEM_DEADLINE_S + rpc_idle_deadline(RPC_STATUS, 0, -1));
        assert_true(unknown >= SPEC_GRACE_MAX_S + GPUMEM_DEADLINE_S + rpc_idle_deadline(RPC_STATUS, 0, -1));
        assert_true(rpc_idle_deadline(waits[i], 0, 1e9) == unknown); /* out of range: not trusted */
    }
    assert_true(rpc_idle_deadline(RPC_PROMOTE, 0, -1) > 0); /* answered at once */

    /* the grace the CLI passes: the job's current release's, from the daemon's state.json */
    char path[128];
    snprintf(path, sizeof path, "%s/grace-state.json", tmpd);
    double g = -5;
    assert_int_equal(state_job_grace(path, "train", &g), -ENOENT); /* no state yet */
    struct agent_state *st = calloc(1, sizeof *st);
    assert_non_null(st);
    state_init(st);
    struct job_rec *j;
    assert_int_equal(state_add_job(st, "train", &j), 0);
    struct job_spec sp;
    spec_init(&sp);
    memset(sp.release, 'a', RELEASE_ID_LEN);
    sp.release[RELEASE_ID_LEN] = '\0';
    char *argv[] = { "bin/t" };
    assert_int_equal(spec_set_argv(&sp, 1, argv), 0);
    sp.grace_s = 7;
    assert_int_equal(state_put_spec(j, &sp, NULL), 0);
    memcpy(j->current, sp.release, sizeof j->current);
    assert_int_equal(state_save(path, st), 0);
    spec_done(&sp);
    state_done(st);
    free(st);
    assert_int_equal(state_job_grace(path, "other", &g), -ENOENT);
    assert_true(g == -5); /* untouched on failure */
    assert_int_equal(state_job_grace(path, "train", &g), 0);
    assert_true(g == 7);

    /* a stop against the stopped daemon: -ETIMEDOUT after its idle deadline (0.5 s here) */
    struct rpc_request q;
    rpc_request_init(&q);
    q.op = RPC_STOP;
    (void)str_copy(q.job, sizeof q.job, "train");
    char *text;
    assert_int_equal(rpc_format_request(&q, &text), 0);
    assert_int_equal(kill(daemon_pid, SIGSTOP), 0);
    struct collect c = {0};
    double t0 = time_mono();
    int r = rpc_call(sock, text, 0.5, collect_line, &c);
    double took = time_mono() - t0;
    free(c.last);
    free(text);
    gave_up_then_answers(r, took);
}

static void test_idle_and_full(void **state)
{
    (void)state;
    /* 64 connections that never say anything fill the socket */
    int idle[64];
    for (int i = 0; i < 64; i++)
        idle[i] = raw_connect();
    sleep(2); /* let the daemon accept them all (one per loop turn; the machine may be busy) */
    /* the 65th is still served: the longest-idle connection makes room (SIGPIPE is left at its
     * default here on purpose: rpc_call must not die by it either way) */
    char *line = status_line();
    assert_true(is_status_doc(line));
    free(line);
    /* every idle one is answered and dropped, not kept forever: one to make room, the others
     * after the request timeout */
    int full = 0, timed_out = 0;
    for (int i = 0; i < 64; i++) {
        char got[512];
        assert_true(reads_to_eof(idle[i], 30, got, sizeof got));
        full += strstr(got, "control socket is full") != NULL;
        timed_out += strstr(got, "no request within") != NULL;
        close(idle[i]);
    }
    assert_int_equal(full, 1);
    assert_int_equal(full + timed_out, 64);
    line = status_line();
    assert_true(is_status_doc(line));
    free(line);
}

static void test_full_of_watchers(void **state)
{
    (void)state;
    /* 64 live watchers: nothing to evict; the next client gets a clear refusal (code 7) */
    int w[64];
    const char req[] = "{\"v\":1,\"op\":\"watch\",\"interval_s\":1,\"count\":0}\n";
    for (int i = 0; i < 64; i++) {
        w[i] = raw_connect();
        assert_int_equal(write(w[i], req, sizeof req - 1), (ssize_t)(sizeof req - 1));
    }
    sleep(2); /* accepted and their requests read: none is idle */
    char *line = status_line();
    assert_non_null(strstr(line, "\"code\":7"));
    assert_non_null(strstr(line, "control socket is full"));
    free(line);
    for (int i = 0; i < 64; i++)
        close(w[i]);
}

/* true once the daemon has closed fd, without reading from it */
static bool hung_up(int fd, double max_s)
{
    double until = time_mono() + max_s;
    while (time_mono() < until) {
        struct pollfd p = {.fd = fd, .events = POLLRDHUP};
        if (poll(&p, 1, 200) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
            return true;
    }
    return false;
}

static void test_watchers_that_never_read(void **state)
{
    (void)state;
    /* eight watchers ask for a document every 50 ms and never read one */
    int w[8];
    const char req[] = "{\"v\":1,\"op\":\"watch\",\"interval_s\":0.05,\"count\":0}\n";
    for (int i = 0; i < 8; i++) {
        w[i] = raw_connect();
        int rcv = 4096;
        (void)setsockopt(w[i], SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
        assert_int_equal(write(w[i], req, sizeof req - 1), (ssize_t)(sizeof req - 1));
    }
    /* others are still answered, every time */
    for (int k = 0; k < 20; k++) {
        char *line = status_line();
        assert_true(is_status_doc(line));
        free(line);
        usleep(50000);
    }
    /* a watcher whose documents pile up unread is eventually dropped */
    for (int i = 0; i < 8; i++) {
        assert_true(hung_up(w[i], 120));
        close(w[i]);
    }
    char *line = status_line();
    assert_true(is_status_doc(line));
    free(line);
}

/* Run the built drover-agent (next to this test's binary) with argv; its exit status, stdout
 * and stderr (each at most 64 KiB).  Skips the test when the binary is not built. */
static int run_agent(const char *const *args, char **ret_out, char **ret_err)
{
    char self[PATH_MAX], agent[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(n > 0);
    self[n] = '\0';
    snprintf(agent, sizeof agent, "%s/../drover-agent", dirname(self));
    if (access(agent, X_OK) != 0)
        skip();
    char root[128];
    snprintf(root, sizeof root, "%s/root", tmpd);
    const char *argv[32] = { agent, "--root", root, "--socket", sock };
    int k = 5;
    for (int i = 0; args[i] && k < 31; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    int po[2], pe[2];
    assert_int_equal(pipe(po), 0);
    assert_int_equal(pipe(pe), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]);
        close(pe[0]);
        alarm(30);
        execv(agent, (char *const *)argv);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    char *bufs[2];
    int fds[2] = { po[0], pe[0] };
    for (int b = 0; b < 2; b++) {
        bufs[b] = calloc(1, 65536 + 1);
        assert_non_null(bufs[b]);
    }
    size_t len[2] = { 0, 0 };
    /* both pipes at once: a child blocked on a full one would never exit */
    for (int open_fds = 2; open_fds > 0;) {
        struct pollfd p[2] = { { .fd = fds[0], .events = POLLIN }, { .fd = fds[1], .events = POLLIN } };
        assert_true(poll(p, 2, 30000) > 0);
        for (int b = 0; b < 2; b++) {
            if (fds[b] < 0 || !(p[b].revents & (POLLIN | POLLHUP)))
                continue;
            ssize_t r = read(fds[b], bufs[b] + len[b], 65536 - len[b]);
            if (r <= 0) {
                close(fds[b]);
                fds[b] = -1;
                open_fds--;
            } else {
                len[b] += (size_t)r;
            }
        }
    }
    int ws;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws));
    *ret_out = bufs[0];
    *ret_err = bufs[1];
    return WEXITSTATUS(ws);
}

static void test_lease_take_status(void **state)
{
    (void)state;
    char *out, *err;
    size_t off, len;
    struct agent_status *st = malloc(sizeof *st);
    assert_non_null(st);
    /* taken: the lease's line, then the daemon's status document as the last line */
    const char *take[] = { "lease", "take", "train", "alice@h/pid-1", "300", "--status", NULL };
    assert_int_equal(run_agent(take, &out, &err), AGENT_EXIT_OK);
    assert_non_null(strstr(out, "lease of job 'train' taken by alice@h/pid-1"));
    assert_int_equal(status_after_lease(out, strlen(out), &off, &len), 0);
    assert_true(off > 0);
    assert_int_equal(status_parse(out + off, len, st), 0);
    assert_true(st->agent_pid > 0);
    free(out);
    free(err);
    /* renewed by the same holder: the document again */
    assert_int_equal(run_agent(take, &out, &err), AGENT_EXIT_OK);
    assert_non_null(strstr(out, "renewed"));
    assert_int_equal(status_after_lease(out, strlen(out), &off, &len), 0);
    free(out);
    free(err);
    /* refused (another holder): exit 7 naming the holder, and no document */
    const char *other[] = { "lease", "take", "train", "bob@h/pid-2", "300", "--status", NULL };
    assert_int_equal(run_agent(other, &out, &err), AGENT_EXIT_BUSY);
    assert_non_null(strstr(err, "alice@h/pid-1"));
    assert_int_equal(status_after_lease(out, strlen(out), &off, &len), -ENOENT);
    free(out);
    free(err);
    /* --status belongs to take only */
    const char *rel_status[] = { "lease", "release", "train", "alice@h/pid-1", "--status", NULL };
    assert_int_equal(run_agent(rel_status, &out, &err), AGENT_EXIT_USAGE);
    free(out);
    free(err);
    const char *rel[] = { "lease", "release", "train", "alice@h/pid-1", NULL };
    assert_int_equal(run_agent(rel, &out, &err), AGENT_EXIT_OK);
    free(out);
    free(err);
    /* no daemon answering: the lease is still taken (exit 0), the document left out and why
     * said on stderr; the controller then asks `status`, which reports the daemon missing */
    kill(daemon_pid, SIGTERM);
    int ws;
    (void)waitpid(daemon_pid, &ws, 0);
    daemon_pid = -1;
    assert_int_equal(run_agent(other, &out, &err), AGENT_EXIT_OK);
    assert_non_null(strstr(out, "lease of job 'train' taken by bob@h/pid-2"));
    assert_int_equal(status_after_lease(out, strlen(out), &off, &len), -ENOENT);
    assert_non_null(strstr(err, "no drover-agent daemon"));
    free(out);
    free(err);
    free(st);
}

/* `release install ... --job J --lease-release HOLDER` (deploy --stage-only's last call into a
 * container): the lease goes back only after an install that succeeded, and only HOLDER's. */
static void test_install_lease_release(void **state)
{
    (void)state;
    char *out, *err, man[128], id[RELEASE_ID_LEN + 1];
    static const char text[] = "drover-manifest 2\nname t\nd 0755 bin\n";
    snprintf(man, sizeof man, "%s/m", tmpd);
    assert_int_equal(fs_write_atomic(man, text, sizeof text - 1, 0600), 0);
    assert_int_equal(sha256_buf_hex(text, sizeof text - 1, id), 0);
    char lease[256];
    snprintf(lease, sizeof lease, "%s/root/leases/train.json", tmpd);
    const char *take[] = { "lease", "take", "train", "alice@h/pid-1", "300", NULL };
    assert_int_equal(run_agent(take, &out, &err), AGENT_EXIT_OK);
    free(out);
    free(err);
    /* another holder's name: installed, the lease left alone (and said why) */
    const char *bob[] = { "release", "install", man, "--id", id, "--job", "train", "--lease-release", "bob@h/pid-2", NULL };
    assert_int_equal(run_agent(bob, &out, &err), AGENT_EXIT_OK);
    assert_null(strstr(out, "given back"));
    assert_non_null(strstr(err, "alice@h/pid-1"));
    assert_int_equal(access(lease, F_OK), 0);
    free(out);
    free(err);
    /* a failed install gives nothing back */
    const char *bad[] = { "release", "install", man, "--id", "0000000000000000000000000000000000000000000000000000000000000000",
                          "--job", "train", "--lease-release", "alice@h/pid-1", NULL };
    assert_int_not_equal(run_agent(bad, &out, &err), AGENT_EXIT_OK);
    assert_null(strstr(out, "given back"));
    assert_int_equal(access(lease, F_OK), 0);
    free(out);
    free(err);
    /* the holder's: installed (again: present), then the lease given back */
    const char *alice[] = { "release", "install", man, "--id", id, "--job", "train", "--lease-release", "alice@h/pid-1", NULL };
    assert_int_equal(run_agent(alice, &out, &err), AGENT_EXIT_OK);
    assert_non_null(strstr(out, "lease of job 'train' given back\n"));
    assert_int_equal(access(lease, F_OK), -1);
    free(out);
    free(err);
    /* only with install, and only with --job */
    const char *nojob[] = { "release", "install", man, "--id", id, "--lease-release", "alice@h/pid-1", NULL };
    assert_int_equal(run_agent(nojob, &out, &err), AGENT_EXIT_USAGE);
    free(out);
    free(err);
    const char *missing[] = { "release", "missing", man, "--job", "train", "--lease-release", "alice@h/pid-1", NULL };
    assert_int_equal(run_agent(missing, &out, &err), AGENT_EXIT_USAGE);
    free(out);
    free(err);
}

/* `history add JOB LINE --lease-release HOLDER` (a deploy's record of its outcome, its last call
 * into a container): the lease goes back only once the record is kept, and only HOLDER's. */
static void test_history_lease_release(void **state)
{
    (void)state;
    char *out, *err, lease[256], line[256];
    snprintf(lease, sizeof lease, "%s/root/leases/train.json", tmpd);
    snprintf(line, sizeof line, "{\"v\":1,\"time\":1795981869.5,\"job\":\"train\",\"release\":\"%064d\","
             "\"result\":\"promoted\"}", 0);
    const char *take[] = { "lease", "take", "train", "alice@h/pid-1", "300", NULL };
    assert_int_equal(run_agent(take, &out, &err), AGENT_EXIT_OK);
    free(out);
    free(err);
    /* another holder's name: recorded, the lease left alone (and said why) */
    const char *bob[] = { "history", "add", "train", line, "--lease-release", "bob@h/pid-2", NULL };
    assert_int_equal(run_agent(bob, &out, &err), AGENT_EXIT_OK);
    assert_null(strstr(out, "given back"));
    assert_non_null(strstr(err, "alice@h/pid-1"));
    assert_int_equal(access(lease, F_OK), 0);
    free(out);
    free(err);
    /* a record refused (another job's) gives nothing back */
    const char *bad[] = { "history", "add", "train", "{\"v\":1,\"time\":1,\"job\":\"other\"}", "--lease-release",
                          "alice@h/pid-1", NULL };
    assert_int_equal(run_agent(bad, &out, &err), AGENT_EXIT_USAGE);
    assert_null(strstr(out, "given back"));
    assert_int_equal(access(lease, F_OK), 0);
    free(out);
    free(err);
    /* the holder's: recorded, then the lease given back */
    const char *alice[] = { "history", "add", "train", line, "--lease-release", "alice@h/pid-1", NULL };
    assert_int_equal(run_agent(alice, &out, &err), AGENT_EXIT_OK);
    assert_non_null(strstr(out, "lease of job 'train' given back\n"));
    assert_int_equal(access(lease, F_OK), -1);
    free(out);
    free(err);
    /* both records kept (the one of bob's call and alice's) */
    const char *list[] = { "history", "list", "train", NULL };
    assert_int_equal(run_agent(list, &out, &err), AGENT_EXIT_OK);
    char *second = strstr(out, "\"promoted\"");
    assert_non_null(second);
    assert_non_null(strstr(second + 1, "\"promoted\""));
    free(out);
    free(err);
    /* only with add */
    const char *lst[] = { "history", "list", "train", "--lease-release", "alice@h/pid-1", NULL };
    assert_int_equal(run_agent(lst, &out, &err), AGENT_EXIT_USAGE);
    free(out);
    free(err);
}

int main(void)
{
    log_set_level(LOG_LVL_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stopped_daemon, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stopped_daemon_job_verbs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_and_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_of_watchers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watchers_that_never_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lease_take_status, setup, teardown),
        cmocka_unit_test_setup_teardown(test_install_lease_release, setup, teardown),
        cmocka_unit_test_setup_teardown(test_history_lease_release, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
