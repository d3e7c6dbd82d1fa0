/* Unit tests for common/safefile.c (refusing FIFOs and special files before they can block,
 * temp files at predictable names never written through a planted symlink), fs_write_atomic
 * built on it, and `drover-agent release add` on a FIFO (issue 12: it hung forever). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
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

#include "common/safefile.h"
#include "common/util.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/drover-safefile-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return fs_rm_rf(dir);
}

static void test_open_regular(void **state)
{
    (void)state;
    char fifo[128], reg[128], link[128];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(reg, sizeof reg, "%s/reg", dir);
    snprintf(link, sizeof link, "%s/link", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(fs_write_atomic(reg, "x", 1, 0600), 0);
    assert_int_equal(symlink(reg, link), 0);
    int fd = -7;
    const char *type = NULL;
    /* a FIFO with no writer: refused at once, not a blocked open */
    assert_int_equal(safefile_open_regular(fifo, false, &fd, &type), -EINVAL);
    assert_int_equal(fd, -7);
    assert_string_equal(type, "FIFO");
    assert_int_equal(safefile_open_regular("/dev/null", false, &fd, &type), -EINVAL);
    assert_string_equal(type, "character device");
    assert_int_equal(safefile_open_regular(dir, false, &fd, &type), -EINVAL);
    assert_string_equal(type, "directory");
    assert_int_equal(safefile_open_regular("/nonexistent/x", false, &fd, &type), -ENOENT);
    assert_int_equal(safefile_open_regular(link, true, &fd, &type), -ELOOP);
    assert_int_equal(safefile_open_regular(link, false, &fd, &type), 0);
    close(fd);
    assert_int_equal(safefile_open_regular(reg, true, &fd, &type), 0);
    /* blocking again after the check: a read waits for data like any regular-file read */
    assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    char b;
    assert_int_equal(read(fd, &b, 1), 1);
    close(fd);
}

static void test_create_excl(void **state)
{
    (void)state;
    char victim[128], tmp[128], target[128];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    snprintf(tmp, sizeof tmp, "%s/state.json.tmp.%ld", dir, (long)getpid());
    snprintf(target, sizeof target, "%s/state.json", dir);
    assert_int_equal(fs_write_atomic(victim, "precious", 8, 0600), 0);
    /* someone plants a symlink at the predictable temp name */
    assert_int_equal(symlink(victim, tmp), 0);
    assert_int_equal(fs_write_atomic(target, "{}", 2, 0600), 0);
    char *text;
    size_t len;
    assert_int_equal(fs_read_file(victim, 100, &text, &len), 0);
    assert_string_equal(text, "precious"); /* never written through */
    free(text);
    assert_int_equal(fs_read_file(target, 100, &text, &len), 0);
    assert_string_equal(text, "{}");
    free(text);
    struct stat st;
    assert_int_equal(lstat(tmp, &st), -1);
    /* create_excl: a fresh file, and a second create of a name in use replaces the name only */
    int fd;
    assert_int_equal(symlink(victim, tmp), 0);
    assert_int_equal(safefile_create_excl(tmp, 0600, &fd), 0);
    assert_int_equal(write(fd, "new", 3), 3);
    close(fd);
    assert_int_equal(lstat(tmp, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(fs_read_file(victim, 100, &text, &len), 0);
    assert_string_equal(text, "precious");
    free(text);
    assert_int_equal(safefile_create_excl("/nonexistent-dir/x", 0600, &fd), -ENOENT);
}

static void test_agent_release_add_fifo(void **state)
{
    (void)state;
    char self[PATH_MAX], agent[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(n > 0);
    self[n] = '\0';
    snprintf(agent, sizeof agent, "%s/../drover-agent", dirname(self));
    if (access(agent, X_OK) != 0)
        skip();
    char fifo[128], root[128];
    snprintf(fifo, sizeof fifo, "%s/blob.fifo", dir);
    snprintf(root, sizeof root, "%s/root", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    char id[65];
    memset(id, 'a', 64);
    id[64] = '\0';
    const char *verbs[] = { "add", "install" }; /* release add BLOB, release install MANIFEST */
    for (int v = 0; v < 2; v++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 1);
            dup2(null, 2);
            alarm(60); /* a hang (the bug) ends as SIGALRM, which the test reports */
            execl(agent, agent, "release", verbs[v], fifo, "--id", id, "--root", root, (char *)NULL);
            _exit(127);
        }
        int ws;
        assert_int_equal(waitpid(pid, &ws, 0), pid);
        assert_true(WIFEXITED(ws));
        assert_int_equal(WEXITSTATUS(ws), 5); /* refused: not a regular file */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_regular, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_excl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_release_add_fifo, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
