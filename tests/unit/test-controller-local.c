/* Unit tests for the controller pieces that need no SSH: known_hosts filtering, local host
 * connections (exec with separate stdout/stderr and exit status, timeouts, streams, copies),
 * argv building for pct and local roots, and the state directory (history, baselines, locks). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <dirent.h>

#include "common/util.h"
#include "controller/cmd.h"
#include "controller/transport/conn.h"
#include "controller/transport/fleet.h"
#include "controller/transport/knownhosts.h"
#include "controller/transport/pct.h"
#include "controller/deploy/state.h"

static void test_knownhosts_remove(void **state)
{
    (void)state;
    const char *kh = "# comment\n"
                     "[127.0.0.2]:2222 ssh-ed25519 AAAAold\n"
                     "127.0.0.2 ssh-ed25519 AAAAport22\n"
                     "other,[127.0.0.2]:2222 ssh-rsa AAAAold2\n"
                     "[127.0.0.22]:2222 ssh-ed25519 AAAAkeep\n"
                     "@revoked [127.0.0.2]:2222 ssh-ed25519 AAAArev\n"
                     "|1|abc=|def= ssh-ed25519 AAAAhashed\n"
                     "\n"
                     "[127.0.0.2]:2222 ssh-ed25519 AAAAnonl";
    char pat[64];
    assert_int_equal(knownhosts_pattern("127.0.0.2", 2222, pat, sizeof pat), 0);
    assert_string_equal(pat, "[127.0.0.2]:2222");
    char *out;
    int removed = -1;
    assert_int_equal(knownhosts_remove(kh, strlen(kh), pat, &out, &removed), 0);
    assert_int_equal(removed, 3);
    assert_null(strstr(out, "AAAAold"));
    assert_null(strstr(out, "AAAAnonl"));
    assert_non_null(strstr(out, "AAAAport22"));
    assert_non_null(strstr(out, "AAAAkeep"));
    assert_non_null(strstr(out, "AAAArev"));
    assert_non_null(strstr(out, "AAAAhashed"));
    assert_non_null(strstr(out, "# comment\n"));
    free(out);
    assert_int_equal(knownhosts_pattern("127.0.0.2", 22, pat, sizeof pat), 0);
    assert_string_equal(pat, "127.0.0.2");
    char tiny[4];
    assert_int_equal(knownhosts_pattern("127.0.0.2", 22, tiny, sizeof tiny), -ENAMETOOLONG);
    out = (char *)0x1;
    assert_int_equal(knownhosts_remove(kh, KNOWNHOSTS_MAX_BYTES + 1, pat, &out, &removed), -E2BIG);
    assert_ptr_equal(out, (char *)0x1);
}

static struct inventory *local_inv(void)
{
    const char *text = "[drover]\nexec_timeout = 5s\n[host me]\nlocal = true\n"
                       "[host far]\naddress = 10.1.1.1\n"
                       "[job j]\ncontainers = me:local:/tmp/drover-unit-root far:101\ncommand = bin/x\n";
    struct inventory *inv;
    char err[256];
    assert_int_equal(inventory_parse(text, strlen(text), "t.ini", &inv, err, sizeof err), 0);
    return inv;
}

static void test_local_exec(void **state)
{
    (void)state;
    struct inventory *inv = local_inv();
    struct conn *c;
    char err[256];
    assert_int_equal(conn_open(inv, 0, "drover trust me", &c, err, sizeof err), 0);
    assert_null(c->ssh);
    struct exec_result res;
    const char *argv[] = { "sh", "-c", "echo out; echo err >&2; exit 7", NULL };
    assert_int_equal(conn_run(c, argv, 5, &res), 0);
    assert_int_equal(res.status, 7);
    assert_string_equal(res.out, "out\n");
    assert_string_equal(res.err, "err");
    char reason[64];
    assert_string_equal(exec_result_reason(&res, reason, sizeof reason), "err");
    exec_result_done(&res);
    const char *multi[] = { "sh", "-c", "printf 'a\\nb\\n\\nc\\nd\\n' >&2; exit 1", NULL };
    assert_int_equal(conn_run(c, multi, 5, &res), 0);
    assert_string_equal(exec_result_reason(&res, reason, sizeof reason), "b | c | d");
    exec_result_done(&res);
    /* a worker's Python error (a preflight's syntax error, an exception): the file and line
     * lead, the "^^^" marker lines and the indentation go; before, the reason was
     * "               ^ | SyntaxError: invalid syntax | preflight: ... exited with 1" */
    char py[600];
    struct exec_result pr = { .status = 1 };
    pr.err = (char *)"Traceback (most recent call last):\n"
                     "  File \"/r/train.py\", line 400, in <module>\n    main()\n"
                     "  File \"/r/train.py\", line 12\n"
                     "    def broken(:\n"
                     "               ^\n"
                     "SyntaxError: invalid syntax\n"
                     "preflight: './launch.sh' exited with 1";
    pr.err_len = strlen(pr.err);
    assert_string_equal(exec_result_reason(&pr, py, sizeof py),
                        "File \"/r/train.py\", line 12 | def broken(: | SyntaxError: invalid syntax | "
                        "preflight: './launch.sh' exited with 1");
    pr.err = (char *)"  File \"/r/train.py\", line 373, in train\n"
                     "    raise RuntimeError('boom')\n"
                     "    ^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
                     "RuntimeError: boom\n";
    pr.err_len = strlen(pr.err);
    assert_string_equal(exec_result_reason(&pr, py, sizeof py),
                        "File \"/r/train.py\", line 373, in train | raise RuntimeError('boom') | RuntimeError: boom");
    /* not Python: the last three lines, as before; a line above that is not a location stays out */
    pr.err = (char *)"x\nFile not found\n  one\n\n two\nthree\n";
    pr.err_len = strlen(pr.err);
    assert_string_equal(exec_result_reason(&pr, py, sizeof py), "one | two | three");
    /* killed by a signal: 128 + N */
    const char *kill9[] = { "sh", "-c", "kill -9 $$", NULL };
    assert_int_equal(conn_run(c, kill9, 5, &res), 0);
    assert_int_equal(res.status, 137);
    exec_result_done(&res);
    /* timeout */
    const char *slow[] = { "sleep", "5", NULL };
    double t0 = time_mono();
    assert_int_equal(conn_run(c, slow, 0.3, &res), -ETIMEDOUT);
    assert_true(time_mono() - t0 < 3);
    assert_non_null(strstr(c->err, "timed out"));
    /* the timeout names the host and the command */
    assert_non_null(strstr(c->err, "host 'me' (local): 'sleep 5' timed out after"));
    /* ... but never the text of one of drover's shell scripts (a deploy quoted `sh -c 'mkdir -p
     * "$1" && cd "$1" || exit 1; mode=$2; ...'` when an agent stopped answering) */
    const char *script[] = { "sh", "-c", "mkdir -p \"$1\" && sleep 5", "sh", "/tmp", NULL };
    assert_int_equal(conn_run(c, script, 0.3, &res), -ETIMEDOUT);
    assert_non_null(strstr(c->err, "host 'me' (local): 'sh -c ...' timed out after"));
    assert_null(strstr(c->err, "mkdir"));
    /* a command that never stops printing is still bounded by the deadline */
    const char *chatty[] = { "yes", NULL };
    assert_int_equal(conn_run(c, chatty, 0.3, &res), -ETIMEDOUT);
    assert_non_null(strstr(c->err, "'yes' timed out"));
    /* stdin is at EOF: a command that reads it ends at once */
    const char *reader[] = { "cat", NULL };
    assert_int_equal(conn_run(c, reader, 30, &res), 0);
    assert_int_equal(res.status, 0);
    assert_string_equal(res.out, "");
    exec_result_done(&res);
    /* missing program */
    const char *nope[] = { "/nonexistent/prog", NULL };
    int r = conn_run(c, nope, 2, &res);
    if (r == 0) { /* posix_spawn may report it as exit 127 */
        assert_int_equal(res.status, 127);
        exec_result_done(&res);
    } else {
        assert_int_equal(r, -ENOENT);
    }
    exec_result_done(NULL);
    conn_free(c);
    conn_free(NULL);
    inventory_free(inv);
}

static void test_local_stream(void **state)
{
    (void)state;
    struct inventory *inv = local_inv();
    struct conn *c;
    char err[256];
    assert_int_equal(conn_open(inv, 0, NULL, &c, err, sizeof err), 0);
    struct conn_stream *s;
    /* stderr: what is kept is the tail's last line (pct's error when a stream ends at once) */
    const char *argv[] = { "sh", "-c",
                           "echo one; echo 0123456789012345678901234567890123456789; echo two; "
                           "i=0; while [ $i -lt 100 ]; do echo noise$i-0123456789 >&2; i=$((i+1)); done; "
                           "echo \"Configuration file 'nodes/h/lxc/999.conf' does not exist\" >&2",
                           NULL };
    assert_int_equal(conn_stream_open(c, argv, 16, &s), 0);
    char *line;
    size_t len;
    int got = 0, toolong = 0;
    char lines[2][16] = { "", "" };
    double t0 = time_mono();
    for (;;) {
        int r = conn_stream_poll(s, &line, &len);
        if (r == 1) {
            assert_true(got < 2);
            snprintf(lines[got++], 16, "%s", line);
        } else if (r == -E2BIG) {
            toolong++;
        } else if (r == -EPIPE) {
            break;
        } else {
            assert_int_equal(r, 0);
            usleep(10000);
        }
        assert_true(time_mono() - t0 < 5);
    }
    assert_int_equal(got, 2);
    assert_int_equal(toolong, 1);
    assert_string_equal(lines[0], "one");
    assert_string_equal(lines[1], "two");
    assert_string_equal(conn_stream_err(s), "Configuration file 'nodes/h/lxc/999.conf' does not exist");
    conn_stream_free(s);
    conn_stream_free(NULL);
    /* copies go through a temp name and a rename */
    char src[] = "/tmp/drover-unit-src-XXXXXX";
    int fd = mkstemp(src);
    assert_true(fd >= 0);
    assert_int_equal(fd_write_all(fd, "hello", 5), 0);
    close(fd);
    char dst[64];
    snprintf(dst, sizeof dst, "%s.dst", src);
    assert_int_equal(conn_upload(c, src, dst, NULL), 0);
    char *data;
    size_t n;
    assert_int_equal(fs_read_file(dst, 100, &data, &n), 0);
    assert_int_equal(n, 5);
    free(data);
    assert_true(conn_upload(c, src, "/nonexistent-dir/x", NULL) < 0);
    assert_non_null(strstr(c->err, "/nonexistent-dir/x"));
    unlink(src);
    unlink(dst);
    conn_free(c);
    inventory_free(inv);
}

static void test_agent_argv(void **state)
{
    (void)state;
    struct inventory *inv = local_inv();
    const struct inv_job *j = &inv->jobs[0];
    const char *argv[PCT_ARGV_MAX];
    char vmid[16];
    const char *args[] = { "preflight", "abc", "--", "bin/x", "--flag", NULL };
    /* local root: no pct, --root and --socket as global options before the verb */
    assert_int_equal(pct_agent_argv(inv, &j->cts[0], args, argv, vmid), 0);
    const char *want_local[] = { "/usr/local/bin/drover-agent", "--root", "/tmp/drover-unit-root",
                                 "--socket", "/tmp/drover-unit-root/agent.sock", "preflight", "abc",
                                 "--", "bin/x", "--flag", NULL };
    for (int i = 0; want_local[i]; i++)
        assert_string_equal(argv[i], want_local[i]);
    /* container: pct exec with --keep-env 0 */
    assert_int_equal(pct_agent_argv(inv, &j->cts[1], args, argv, vmid), 0);
    const char *want_ct[] = { "pct", "exec", "101", "--keep-env", "0", "--",
                              "/usr/local/bin/drover-agent", "preflight", "abc", "--", "bin/x", "--flag", NULL };
    for (int i = 0; want_ct[i]; i++)
        assert_string_equal(argv[i], want_ct[i]);
    assert_null(argv[12]);
    const char *st[] = { "status", "--json", NULL };
    assert_int_equal(pct_agent_argv(inv, &j->cts[0], st, argv, vmid), 0);
    assert_string_equal(argv[5], "status");
    assert_null(argv[7]);
    assert_string_equal(pct_agent_root(&j->cts[1]), "/var/lib/drover");
    assert_string_equal(pct_agent_root(&j->cts[0]), "/tmp/drover-unit-root");
    inventory_free(inv);
}

/* A container's agent command past its deadline names the step, the deadline and what to look
 * at, not the command line: a stalled `activate` used to say "h1:101: host 'h1': 'pct exec 101
 * --keep-env 0 -- /usr/local/bin/drover-agent activate 3f2a... --job train ...' timed out after 30s". */
static void test_agent_timeout(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-unit-XXXXXX", agent[64], text[400];
    assert_non_null(mkdtemp(dir));
    snprintf(agent, sizeof agent, "%s/agent", dir);
    FILE *fp = fopen(agent, "w");
    assert_non_null(fp);
    fputs("#!/bin/sh\nexec sleep 5\n", fp); /* an agent that never answers */
    fclose(fp);
    assert_int_equal(chmod(agent, 0755), 0);
    snprintf(text, sizeof text, "[host me]\nlocal = true\nagent_path = %s\n"
             "[job train]\ncontainers = me:local:%s\ncommand = bin/x\n", agent, dir);
    struct inventory *inv;
    char err[256];
    assert_int_equal(inventory_parse(text, strlen(text), "t.ini", &inv, err, sizeof err), 0);
    struct conn *c;
    assert_int_equal(conn_open(inv, 0, "drover trust me", &c, err, sizeof err), 0);
    struct exec_result res = { .status = -7 };
    const char *act[] = { "activate", "3f2a9c1b7d6e", "--job", "train", "--", "bin/x", NULL };
    assert_int_equal(pct_run_agent(c, &inv->jobs[0].cts[0], act, 0.6, &res), -ETIMEDOUT);
    assert_int_equal(res.status, -7); /* untouched */
    assert_string_equal(c->err, "step 'activate' got no answer from the agent within 1s: is drover-agent "
                                "stopped or hung there, or the host no longer answering? `drover status "
                                "--job train` shows it (drover -v logs the command); drover ended it there "
                                "(SIGTERM, then SIGKILL)");
    assert_null(strstr(c->err, agent));
    assert_null(strstr(c->err, "timed out"));
    conn_free(c);
    /* a verb with a second word is named by both; no --job: the hint names none */
    char m[400];
    const char *have[] = { "release", "have", "3f2a9c1b7d6e", NULL };
    pct_agent_timeout_msg(have, 30, m, sizeof m);
    assert_non_null(strstr(m, "step 'release have' got no answer from the agent within 30s"));
    assert_non_null(strstr(m, "`drover status` shows it"));
    /* `drover status` is where it came from: not sent back to itself (the newcomer pass) */
    const char *status[] = { "status", "--json", NULL };
    pct_agent_timeout_msg(status, 15, m, sizeof m);
    assert_string_equal(m, "step 'status' got no answer from the agent within 15s: is drover-agent stopped or hung "
                           "there, or the host no longer answering? (drover -v logs the command)");
    const char *stop[] = { "stop", "--job", "train", NULL };
    pct_agent_timeout_msg(stop, 10, m, sizeof m);
    assert_non_null(strstr(m, "step 'stop' got no answer from the agent within 10s"));
    /* cut to fit, NUL-terminated */
    char small[16];
    pct_agent_timeout_msg(stop, 10, small, sizeof small);
    assert_int_equal(strlen(small), sizeof small - 1);
    (void)unlink(agent);
    (void)rmdir(dir);
    inventory_free(inv);
}

/* The pid written in file path (0 when none yet). */
static long pid_in(const char *path)
{
    FILE *fp = fopen(path, "r");
    long pid = 0;
    if (fp) {
        if (fscanf(fp, "%ld", &pid) != 1)
            pid = 0;
        fclose(fp);
    }
    return pid;
}

/* true when process pid is gone (or a zombie about to be reaped) within s seconds; a process
 * still there is killed, so that a failing test leaves nothing behind. */
static bool gone_within(long pid, double s)
{
    double end = time_mono() + s;
    for (;;) {
        char p[64], st[512] = "";
        snprintf(p, sizeof p, "/proc/%ld/stat", pid);
        FILE *fp = fopen(p, "r");
        if (!fp)
            return true;
        size_t n = fread(st, 1, sizeof st - 1, fp);
        st[n] = '\0';
        fclose(fp);
        const char *e = strrchr(st, ')');
        if (e && e[1] == ' ' && (e[2] == 'Z' || e[2] == 'X'))
            return true;
        if (time_mono() > end) {
            (void)kill((pid_t)pid, SIGKILL);
            return false;
        }
        usleep(50 * 1000);
    }
}

/* The operator's Ctrl-C, as drover's handler gives it, after arg (a double *) seconds. */
static void *interrupt_later(void *arg)
{
    usleep((useconds_t)(*(double *)arg * 1e6));
    exec_interrupted = 1;
    return NULL;
}

/* A local command past its deadline, or interrupted, is ended with what it started: its
 * process group.  Before, only the pid drover spawned was signalled (SIGKILL on a deadline,
 * SIGTERM on a Ctrl-C): a background child ran on, and a stopped one stayed stopped for good. */
static void test_local_group_ended(void **state)
{
    (void)state;
    struct inventory *inv = local_inv();
    struct conn *c;
    char err[256], dir[] = "/tmp/drover-unit-grp-XXXXXX", script[600], p[600];
    assert_non_null(mkdtemp(dir));
    assert_int_equal(conn_open(inv, 0, NULL, &c, err, sizeof err), 0);
    struct exec_result res = { .status = -7 };
    snprintf(script, sizeof script, "sleep 60 & echo $! >'%s/bg'; wait", dir);
    const char *bg[] = { "sh", "-c", script, NULL };
    assert_int_equal(conn_run(c, bg, 0.5, &res), -ETIMEDOUT);
    snprintf(p, sizeof p, "%s/bg", dir);
    long pid = pid_in(p);
    assert_true(pid > 0);
    if (!gone_within(pid, 3))
        fail_msg("the background child %ld of a command past its deadline was left running: %s", pid, c->err);
    assert_non_null(strstr(c->err, "timed out after"));
    assert_non_null(strstr(c->err, "drover ended it"));
    /* Ctrl-C: a child that stopped itself (SIGSTOP keeps a TERM pending) */
    snprintf(script, sizeof script, "sh -c 'echo $$ >\"%s/st\"; kill -STOP $$' & wait", dir);
    const char *st[] = { "sh", "-c", script, NULL };
    double after = 0.5;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, interrupt_later, &after), 0);
    int r = conn_run(c, st, 10, &res);
    pthread_join(th, NULL);
    exec_interrupted = 0;
    assert_int_equal(r, -EINTR);
    snprintf(p, sizeof p, "%s/st", dir);
    pid = pid_in(p);
    assert_true(pid > 0);
    if (!gone_within(pid, 3))
        fail_msg("the stopped child %ld of an interrupted command was left: %s", pid, c->err);
    assert_int_equal(res.status, -7); /* untouched */
    conn_free(c);
    inventory_free(inv);
    assert_int_equal(fs_rm_rf(dir), 0);
}

/* A container call past its deadline, or interrupted, is ended in the container.  pct here is a
 * stand-in that runs the command in a session of its own, out of reach of the host side's
 * signals, as lxc-attach's child in the container is: before, the agent there (stopped: it
 * never answers) was left for good, whatever drover did to the host's side. */
static void test_container_call_ended(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-unit-ctcall-XXXXXX", p[600], text[1200], script[600];
    assert_non_null(mkdtemp(dir));
    snprintf(p, sizeof p, "%s/pct", dir);
    FILE *fp = fopen(p, "w");
    assert_non_null(fp);
    fputs("#!/bin/sh\n[ \"$1\" = exec ] && [ \"$5\" = -- ] || exit 2\nshift 5\nsetsid \"$@\" &\nwait\n", fp);
    fclose(fp);
    assert_int_equal(chmod(p, 0755), 0);
    snprintf(p, sizeof p, "%s/agent", dir);
    fp = fopen(p, "w");
    assert_non_null(fp);
    fprintf(fp, "#!/bin/sh\necho $$ >'%s/pid'\nkill -STOP $$\necho answered\n", dir);
    fclose(fp);
    assert_int_equal(chmod(p, 0755), 0);
    char *path = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin"), newpath[4096];
    snprintf(newpath, sizeof newpath, "%s:%s", dir, path);
    setenv("PATH", newpath, 1);
    snprintf(text, sizeof text, "[drover]\nagent_path = %s/agent\n[host me]\nlocal = true\n"
             "[job train]\ncontainers = me:101\ncommand = bin/x\n", dir);
    struct inventory *inv;
    char err[256];
    assert_int_equal(inventory_parse(text, strlen(text), "t.ini", &inv, err, sizeof err), 0);
    struct conn *c;
    assert_int_equal(conn_open(inv, 0, NULL, &c, err, sizeof err), 0);
    const struct inv_ct *ct = &inv->jobs[0].cts[0];
    struct exec_result res = { .status = -7 };
    const char *have[] = { "release", "have", "3f2a9c1b7d6e", NULL };
    assert_int_equal(pct_run_agent(c, ct, have, 0.6, &res), -ETIMEDOUT);
    snprintf(p, sizeof p, "%s/pid", dir);
    long pid = pid_in(p);
    assert_true(pid > 0);
    if (!gone_within(pid, 3))
        fail_msg("the stalled agent %ld was left in its container: %s", pid, c->err);
    assert_non_null(strstr(c->err, "step 'release have' got no answer from the agent within 1s"));
    assert_non_null(strstr(c->err, "; drover ended it there (SIGTERM, then SIGKILL)"));
    /* a plain command, interrupted by the operator */
    snprintf(script, sizeof script, "echo $$ >'%s/pid2'; kill -STOP $$", dir);
    const char *cmd[] = { "sh", "-c", script, NULL };
    double after = 0.5;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, interrupt_later, &after), 0);
    int r = pct_run(c, ct, cmd, 10, &res);
    pthread_join(th, NULL);
    exec_interrupted = 0;
    assert_int_equal(r, -EINTR);
    snprintf(p, sizeof p, "%s/pid2", dir);
    pid = pid_in(p);
    assert_true(pid > 0);
    if (!gone_within(pid, 3))
        fail_msg("the interrupted command %ld was left in its container: %s", pid, c->err);
    assert_non_null(strstr(c->err, "drover ended it there"));
    /* said once: the host's process group (pct's side) and the container's are one call; this
     * local host said "drover ended it and what it started" and "drover ended it there" */
    const char *e1 = strstr(c->err, "drover ended");
    if (!e1 || strstr(e1 + 1, "drover ended"))
        fail_msg("the end of one call said twice: %s", c->err);
    assert_int_equal(res.status, -7); /* untouched */
    setenv("PATH", path, 1);
    free(path);
    conn_free(c);
    inventory_free(inv);
    assert_int_equal(fs_rm_rf(dir), 0);
}

/* Processes whose command line holds needle, now (this test's own excepted). */
static int procs_with(const char *needle)
{
    int n = 0;
    DIR *d = opendir("/proc");
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d))) {
        int pid = atoi(de->d_name);
        if (pid <= 1 || pid == getpid())
            continue;
        char p[64], cl[4096], st[512] = "";
        snprintf(p, sizeof p, "/proc/%d/cmdline", pid);
        FILE *fp = fopen(p, "r");
        if (!fp)
            continue;
        size_t k = fread(cl, 1, sizeof cl - 1, fp);
        fclose(fp);
        for (size_t i = 0; i < k; i++)
            if (!cl[i])
                cl[i] = ' ';
        cl[k] = '\0';
        snprintf(p, sizeof p, "/proc/%d/stat", pid);
        if ((fp = fopen(p, "r"))) {
            size_t m = fread(st, 1, sizeof st - 1, fp);
            st[m] = '\0';
            fclose(fp);
        }
        const char *e = strrchr(st, ')');
        if (e && e[1] == ' ' && (e[2] == 'Z' || e[2] == 'X'))
            continue;
        if (strstr(cl, needle))
            n++;
    }
    closedir(d);
    return n;
}

static char follow_needle[600];
/* The operator's Ctrl-C to `drover logs -f` once its `tail -F` runs in the container. */
static void *interrupt_follow(void *arg)
{
    (void)arg;
    char tail[700];
    snprintf(tail, sizeof tail, "tail -n 100 -F %s", follow_needle);
    for (int i = 0; i < 200 && procs_with(tail) == 0; i++)
        usleep(50 * 1000);
    usleep(300 * 1000);
    (void)kill(getpid(), SIGINT);
    return NULL;
}

/* `drover logs -f` ended by Ctrl-C leaves no `tail` or reader in the container.  pct here is a
 * stand-in that runs the command in a session of its own whose stdin stays open and whose
 * output goes through a relay of its own (lxc-attach's child in the container hears nothing of
 * the host's side going: neither stdin's EOF nor a broken pipe), with the container's
 * /var/lib/drover under the test's directory: before, the follower and its stdin watcher ran on
 * there once drover had closed the stream (streams were not marked as calls). */
static void test_logs_follow_interrupted_ends_readers(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-unit-follow-XXXXXX", p[600], text[1200];
    assert_non_null(mkdtemp(dir));
    snprintf(p, sizeof p, "%s/fifo", dir);
    assert_int_equal(mkfifo(p, 0600), 0);
    snprintf(p, sizeof p, "%s/pct", dir);
    FILE *fp = fopen(p, "w");
    assert_non_null(fp);
    fprintf(fp, "#!/bin/sh\n[ \"$1\" = exec ] && [ \"$5\" = -- ] || exit 2\nshift 5\n"
                "for a; do set -- \"$@\" \"$(printf '%%s' \"$a\" | sed 's|/var/lib/drover|%s/root|g')\"; shift; done\n"
                "setsid sh -c '\"$@\" | cat' sh \"$@\" 0<>'%s/fifo' &\nwait\n", dir, dir);
    fclose(fp);
    assert_int_equal(chmod(p, 0755), 0);
    snprintf(p, sizeof p, "%s/root/runs/train/logs", dir);
    assert_int_equal(fs_mkdir_p(p, 0755), 0);
    snprintf(follow_needle, sizeof follow_needle, "%s/root/runs/train/logs/rank0.log", dir);
    fp = fopen(follow_needle, "w");
    assert_non_null(fp);
    fputs("step 1\n", fp);
    fclose(fp);
    char *path = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin"), newpath[4096];
    snprintf(newpath, sizeof newpath, "%s:%s", dir, path);
    setenv("PATH", newpath, 1);
    snprintf(text, sizeof text, "[host me]\nlocal = true\n[job train]\ncontainers = me:101\ncommand = bin/x\n");
    struct inventory *inv;
    char err[256];
    assert_int_equal(inventory_parse(text, strlen(text), "t.ini", &inv, err, sizeof err), 0);
    struct fleet f;
    fleet_init(&f, inv, NULL);
    char *av[] = { "logs", "--job", "train", "-f", NULL };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, interrupt_follow, NULL), 0);
    int code = cmd_logs(&f, 4, av);
    pthread_join(th, NULL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    int left = 0;
    for (int i = 0; i < 30 && (left = procs_with(follow_needle)) > 0; i++)
        usleep(100 * 1000);
    if (left > 0) {
        char cmd[800];
        snprintf(cmd, sizeof cmd, "pkill -KILL -f '%s'", follow_needle); /* not left by a failing test */
        (void)!system(cmd);
        fail_msg("logs -f ended by Ctrl-C left %d reader%s of the log in the container (exit %d)", left,
                 left == 1 ? "" : "s", code);
    }
    fleet_done(&f);
    setenv("PATH", path, 1);
    free(path);
    inventory_free(inv);
    assert_int_equal(fs_rm_rf(dir), 0);
}

/* A verb with no SIGINT handler of its own: drover dies of the Ctrl-C, and its local command,
 * which leads a process group of its own out of the terminal's reach, went on to its end.  Here
 * a child stands for drover (main's setup), runs `sleep` as a local command and gets SIGINT. */
static void test_local_child_ended_at_exit_signal(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-unit-exitsig-XXXXXX", p[128], script[600];
    assert_non_null(mkdtemp(dir));
    snprintf(p, sizeof p, "%s/pid", dir);
    snprintf(script, sizeof script, "echo $$ >'%s.part' && mv '%s.part' '%s' && exec sleep 60", p, p, p);
    pid_t kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) {
        conn_exit_signals_init();
        struct inventory *inv = local_inv();
        struct conn *c;
        char err[256];
        if (conn_open(inv, 0, NULL, &c, err, sizeof err) < 0)
            _exit(3);
        const char *argv[] = { "sh", "-c", script, NULL };
        struct exec_result res;
        (void)conn_run(c, argv, 30, &res);
        _exit(4); /* not reached: the SIGINT ends it */
    }
    long pid = 0;
    for (int i = 0; i < 100 && (pid = pid_in(p)) <= 0; i++)
        usleep(50 * 1000);
    assert_true(pid > 0);
    assert_int_equal(kill(kid, SIGINT), 0);
    int st;
    assert_int_equal(waitpid(kid, &st, 0), kid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT); /* died of it, as before */
    if (!gone_within(pid, 3))
        fail_msg("drover's local command %ld ran on after drover died of SIGINT", pid);
    assert_int_equal(fs_rm_rf(dir), 0);
}

static void test_state_dir(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-unit-state-XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(state_init(dir), 0);
    struct history_entry *h = (struct history_entry *)0x1;
    size_t n = 99;
    size_t skipped = 99;
    assert_int_equal(state_history_read(dir, NULL, &h, &n, &skipped), 0);
    assert_int_equal(n, 0);
    assert_int_equal(skipped, 0);
    struct history_entry e = { .time = 1e9, .ktok_s = 96.5, .baseline_ktok_s = -1 };
    strcpy(e.job, "train");
    strcpy(e.release, "abc");
    strcpy(e.result, "promoted");
    strcpy(e.reason, "quote \" and newline \n inside");
    assert_int_equal(state_history_append(dir, &e), 0);
    strcpy(e.job, "other");
    assert_int_equal(state_history_append(dir, &e), 0);
    /* a torn line must not break reading */
    char p[256];
    snprintf(p, sizeof p, "%s/history.jsonl", dir);
    FILE *fp = fopen(p, "a");
    fputs("{\"job\":\"train\",\"rele", fp);
    fclose(fp);
    /* ... it is counted, and said once per file, however often it is read and however many
     * lines are bad (here a torn line and, after a good one, a hand edit) */
    char errp[300];
    snprintf(errp, sizeof errp, "%s/stderr", dir);
    fflush(stderr);
    int save_err = dup(STDERR_FILENO), fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(save_err >= 0 && fe >= 0);
    dup2(fe, STDERR_FILENO);
    close(fe);
    assert_int_equal(state_history_read(dir, "train", &h, &n, &skipped), 0);
    assert_int_equal(skipped, 1);
    free(h);
    fp = fopen(p, "a");
    fputs("\n{\"v\":1,\"job\":\"train\",\"time\":2e9}\nnot json\n", fp);
    fclose(fp);
    assert_int_equal(state_history_read(dir, "other", &h, &n, &skipped), 0);
    assert_int_equal(skipped, 2); /* every job's lines count */
    assert_int_equal(n, 1);
    free(h);
    assert_int_equal(state_history_read(dir, "train", &h, &n, NULL), 0);
    assert_int_equal(n, 2);
    free(h);
    fflush(stderr);
    dup2(save_err, STDERR_FILENO);
    close(save_err);
    char *said;
    size_t said_len;
    assert_int_equal(fs_read_file(errp, 1 << 16, &said, &said_len), 0);
    const char *w = strstr(said, "1 unreadable line skipped (the first at line 3)");
    assert_non_null(w);
    assert_null(strstr(w + strlen("1 unreadable"), "unreadable")); /* once */
    free(said);
    (void)unlink(errp);
    /* the torn line is one record no more: cut it, as the next append would have */
    {
        char *text;
        size_t tl;
        assert_int_equal(fs_read_file(p, 1 << 16, &text, &tl), 0);
        char *torn = strstr(text, "{\"job\":\"train\",\"rele");
        assert_non_null(torn);
        *torn = '\0';
        assert_int_equal(fs_write_atomic(p, text, strlen(text), 0600), 0);
        free(text);
    }
    assert_int_equal(state_history_read(dir, "train", &h, &n, &skipped), 0);
    assert_int_equal(n, 1);
    assert_string_equal(h[0].reason, "quote \" and newline \n inside");
    assert_true(h[0].ktok_s == 96.5);
    assert_true(h[0].baseline_ktok_s == -1);
    /* the fleet's history (issue 11): the same record from an agent is not added twice; a
     * record only an agent has (another operator's) is merged in time order */
    char *line = NULL;
    assert_int_equal(history_entry_format(&h[0], &line), 0);
    assert_null(strchr(line, '\n'));
    struct history_entry from_agent[2];
    assert_int_equal(history_entry_parse(line, strlen(line), &from_agent[0]), 0);
    free(line);
    assert_int_equal(history_entry_parse("[1]", 3, &from_agent[1]), -EINVAL);
    from_agent[1] = from_agent[0];
    from_agent[1].time = 5e8; /* older, another operator's */
    strcpy(from_agent[1].result, "reverted");
    assert_int_equal(state_history_merge(&h, &n, from_agent, 2, "h1:101"), 1);
    assert_int_equal(n, 2);
    assert_string_equal(h[0].result, "reverted");
    assert_string_equal(h[1].result, "promoted");
    assert_int_equal(state_history_merge(&h, &n, from_agent, 2, "h1:101"), 0); /* again: nothing new */
    assert_int_equal(n, 2);
    free(h);
    double k = -5;
    char rel[RELEASE_ID_LEN + 1];
    assert_int_equal(state_baseline_get(dir, "train@h1:101", &k, rel), -ENOENT);
    assert_true(k == -5);
    assert_int_equal(state_baseline_set(dir, "train@h1:101", "abc", 96.5), 0);
    assert_int_equal(state_baseline_get(dir, "train@h1:101", &k, rel), 0);
    assert_true(k == 96.5);
    assert_string_equal(rel, "abc");
    assert_int_equal(state_baseline_get(dir, "train@h1:102", &k, rel), -ENOENT);
    char fresh[1100];
    snprintf(fresh, sizeof fresh, "%s/not-yet", dir); /* rollback before any deploy made it */
    int l0 = state_lock_job(fresh, "train");
    assert_true(l0 >= 0);
    assert_int_equal(state_lock_job(fresh, "train"), -EBUSY);
    close(l0);
    long holder = -7;
    assert_int_equal(state_lock_holder(dir, "train", &holder), -ENOENT);
    assert_true(holder == -7); /* untouched on failure */
    int l1 = state_lock_job(dir, "train");
    assert_true(l1 >= 0);
    assert_int_equal(state_lock_job(dir, "train"), -EBUSY);
    /* the refusal can name the holder: its pid is in the lock file */
    assert_int_equal(state_lock_holder(dir, "train", &holder), 0);
    assert_true(holder == (long)getpid());
    /* who holds it, seen without taking it (status -o json, top): this process, since now */
    struct state_lock_use u = { .holder_pid = -7 };
    assert_int_equal(state_lock_in_use(dir, "train", &u), 1);
    assert_true(u.holder_pid == (long)getpid());
    assert_true(u.since > time_wall() - 60 && u.since <= time_wall() + 1);
    char want_lock[1100];
    snprintf(want_lock, sizeof want_lock, "%s/lock-train", dir);
    assert_string_equal(u.lock, want_lock);
    assert_int_equal(state_lock_in_use(dir, "train", NULL), 1);
    assert_int_equal(state_lock_job(dir, "train"), -EBUSY); /* looking did not take it */
    close(l1);
    u.holder_pid = -7;
    assert_int_equal(state_lock_in_use(dir, "train", &u), 0); /* released: the file stays */
    assert_true(u.holder_pid == -7);                         /* untouched */
    assert_int_equal(state_lock_in_use(dir, "eval", &u), 0);  /* no lock file */
    int l2 = state_lock_job(dir, "train");
    assert_true(l2 >= 0);
    assert_int_equal(state_lock_in_use(dir, "train", &u), 1);
    close(l2);
    assert_int_equal(fs_rm_rf(dir), 0);
}

/* `drover history` names the release of a rollback, promote, revert, stop, start or rebaseline
 * record (written under the verb's name): from the manifest cache, else from another record of
 * the same release id, else "-" */
/* An agent's own record of a revert it decided alone (no drover there): each agent of the gang
 * writes one, and `drover history` shows one row naming every container; where a drover's
 * verdict of that probation is there too, that verdict alone. */
static void test_history_agent_records(void **state)
{
    (void)state;
    struct history_entry a = { .time = 1000, .ktok_s = -1, .baseline_ktok_s = -1,
                               .reason_code = HISTORY_RC_AGENT_REVERT };
    strcpy(a.job, "train");
    memset(a.release, 'b', RELEASE_ID_LEN);
    memset(a.previous, 'a', RELEASE_ID_LEN);
    strcpy(a.name, "v7");
    strcpy(a.result, "reverted");
    strcpy(a.reason, "drover-agent reverted on its own from bbbbbbbbbbbb: release bbbbbbbbbbbb not "
                     "promoted before its probation deadline");
    strcpy(a.by, HISTORY_BY_AGENT);
    /* the record as the agent writes it and drover reads it back: "by" kept, no container */
    char *line = NULL;
    assert_int_equal(history_entry_format(&a, &line), 0);
    assert_non_null(strstr(line, "\"by\":\"agent\""));
    struct history_entry back;
    assert_int_equal(history_entry_parse(line, strlen(line), &back), 0);
    free(line);
    assert_string_equal(back.by, HISTORY_BY_AGENT);
    assert_string_equal(back.containers, "");
    json_t *o = history_entry_json(&back);
    assert_string_equal(json_string_value(json_object_get(o, "by")), "agent");
    json_decref(o);

    struct history_entry *h = NULL;
    size_t n = 0;
    assert_int_equal(state_history_merge(&h, &n, &back, 1, "h1:101"), 1);
    assert_string_equal(h[0].containers, "h1:101");
    /* the gang's two other agents, seconds apart: folded into the first's row */
    struct history_entry b = back, c = back;
    b.time = 1003;
    c.time = 1004.5;
    assert_int_equal(state_history_merge(&h, &n, &b, 1, "h1:102"), 0);
    assert_int_equal(state_history_merge(&h, &n, &c, 1, "h2:201"), 0);
    assert_int_equal(n, 1);
    assert_string_equal(h[0].containers, "h1:101 h1:102 h2:201");
    /* read again (another `drover history`): nothing doubles */
    assert_int_equal(state_history_merge(&h, &n, &b, 1, "h1:102"), 0);
    assert_string_equal(h[0].containers, "h1:101 h1:102 h2:201");
    /* the same release reverted by the agents again a day later: a row of its own */
    struct history_entry later = back;
    later.time = 1000 + 86400;
    assert_int_equal(state_history_merge(&h, &n, &later, 1, "h1:101"), 1);
    assert_int_equal(n, 2);
    /* a drover's own record is never folded, and gets no container from where it was read */
    struct history_entry d = back;
    d.by[0] = '\0';
    d.time = 2000;
    strcpy(d.result, "promoted");
    strcpy(d.containers, "h1:101 h1:102");
    assert_int_equal(state_history_merge(&h, &n, &d, 1, "h2:201"), 1);
    assert_int_equal(n, 3);
    assert_string_equal(h[1].containers, "h1:101 h1:102");
    free(h);

    /* a drover watched that probation and recorded its verdict (the agents went back during it):
     * its row alone, whichever is read first */
    struct history_entry v = back;
    v.by[0] = '\0';
    v.time = 1010;
    strcpy(v.result, "failed");
    strcpy(v.containers, "h1:101 h1:102 h2:201");
    h = NULL;
    n = 0;
    assert_int_equal(state_history_merge(&h, &n, &back, 1, "h1:101"), 1);
    assert_int_equal(state_history_merge(&h, &n, &v, 1, "h1:101"), 0); /* one in, one out */
    assert_int_equal(n, 1);
    assert_string_equal(h[0].by, "");
    assert_string_equal(h[0].result, "failed");
    assert_int_equal(state_history_merge(&h, &n, &b, 1, "h1:102"), 0);
    assert_int_equal(n, 1);
    free(h);
    /* ... also where its verdict named another cause first (no agent-revert code) */
    v.reason_code = HISTORY_RC_NONE;
    h = NULL;
    n = 0;
    assert_int_equal(state_history_merge(&h, &n, &v, 1, NULL), 1);
    assert_int_equal(state_history_merge(&h, &n, &back, 1, "h1:101"), 0);
    assert_int_equal(n, 1);
    free(h);
    /* ... but a held release the agents reverted at its deadline is theirs to tell: a drover's
     * "held" is no verdict of how it ended */
    strcpy(v.result, "held");
    v.reason_code = HISTORY_RC_NONE;
    h = NULL;
    n = 0;
    assert_int_equal(state_history_merge(&h, &n, &v, 1, NULL), 1);
    assert_int_equal(state_history_merge(&h, &n, &back, 1, "h1:101"), 1);
    assert_int_equal(n, 2);
    free(h);
    /* ... and the agent's stop of the promoted release (agent-stopped: NaN minutes after the
     * drover promoted it) is no outcome that "promoted" tells: both rows.  It was dropped, and
     * rollback could not say when and why it skipped that release */
    strcpy(v.result, "promoted");
    struct history_entry stop = back;
    stop.time = 1300;
    strcpy(stop.result, "failed");
    stop.previous[0] = '\0';
    stop.reason_code = HISTORY_RC_AGENT_STOPPED;
    h = NULL;
    n = 0;
    assert_int_equal(state_history_merge(&h, &n, &v, 1, NULL), 1);
    assert_int_equal(state_history_merge(&h, &n, &stop, 1, "h1:101"), 1);
    assert_int_equal(n, 2);
    assert_string_equal(h[1].result, "failed");
    assert_string_equal(h[1].containers, "h1:101");
    free(h);
}

static void test_history_release_name(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-unit-names-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cached[RELEASE_ID_LEN + 1], recorded[RELEASE_ID_LEN + 1], unknown[RELEASE_ID_LEN + 1];
    memset(cached, 'a', RELEASE_ID_LEN);
    memset(recorded, 'b', RELEASE_ID_LEN);
    memset(unknown, 'c', RELEASE_ID_LEN);
    cached[RELEASE_ID_LEN] = recorded[RELEASE_ID_LEN] = unknown[RELEASE_ID_LEN] = '\0';
    char p[1200], name[MANIFEST_NAME_MAX] = "untouched";
    snprintf(p, sizeof p, "%s/manifests", dir);
    assert_int_equal(fs_mkdir_p(p, 0700), 0);
    snprintf(p, sizeof p, "%s/manifests/%s", dir, cached);
    const char *m = "drover-manifest 2\nname v7\nd 0755 lib\n";
    assert_int_equal(fs_write_atomic(p, m, strlen(m), 0600), 0);
    assert_int_equal(state_release_name(dir, cached, name), 0);
    assert_string_equal(name, "v7");
    strcpy(name, "untouched");
    assert_int_equal(state_release_name(dir, recorded, name), -ENOENT);
    assert_int_equal(state_release_name(dir, "../../etc/passwd", name), -EINVAL); /* never a path */
    assert_string_equal(name, "untouched");

    struct history_entry h[6] = { 0 };
    const char *rows[6][3] = {
        { recorded, "v3", "promoted" },        /* a deploy: its own name */
        { cached, "rollback", "rollback" },    /* from the cache */
        { recorded, "revert", "reverted" },    /* from the deploy's record of the same id */
        { recorded, "stop", "stopped" },
        { unknown, "rebaseline", "rebaselined" }, /* nowhere: "-" */
        { unknown, "", "aborted" },
    };
    for (int i = 0; i < 6; i++) {
        h[i].time = 1e9 + i;
        strcpy(h[i].job, "train");
        strcpy(h[i].release, rows[i][0]);
        strcpy(h[i].name, rows[i][1]);
        strcpy(h[i].result, rows[i][2]);
    }
    const char *want[6] = { "v3", "v7", "v3", "v3", "-", "-" };
    for (size_t i = 0; i < 6; i++) {
        state_history_release_name(dir, h, 6, i, name);
        assert_string_equal(name, want[i]);
    }
    /* what an agent printed: its unreadable lines are counted for `drover history` to say so
     * once; another job's lines and empty lines are not unreadable */
    const char *listed = "garbage\n\n{\"job\":\"eval\",\"time\":1}\n{\"job\":\"train\",\"time\":2}\n[1]";
    struct history_entry *more = NULL;
    size_t nmore = 9, skipped = 9;
    assert_int_equal(state_history_parse_lines(listed, "train", &more, &nmore, &skipped), 0);
    assert_int_equal(nmore, 1);
    assert_int_equal(skipped, 2);
    free(more);
    assert_int_equal(state_history_parse_lines(NULL, "train", &more, &nmore, &skipped), 0);
    assert_true(nmore == 0 && skipped == 0 && !more);
    assert_true(history_name_is_verb("start") && history_name_is_verb("rebaseline"));
    assert_false(history_name_is_verb("v3") || history_name_is_verb(""));
    assert_int_equal(fs_rm_rf(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_knownhosts_remove),
        cmocka_unit_test(test_local_exec),
        cmocka_unit_test(test_history_agent_records),
        cmocka_unit_test(test_local_stream),
        cmocka_unit_test(test_agent_argv),
        cmocka_unit_test(test_agent_timeout),
        cmocka_unit_test(test_local_group_ended),
        cmocka_unit_test(test_container_call_ended),
        cmocka_unit_test(test_logs_follow_interrupted_ends_readers),
        cmocka_unit_test(test_local_child_ended_at_exit_signal),
        cmocka_unit_test(test_state_dir),
        cmocka_unit_test(test_history_release_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
