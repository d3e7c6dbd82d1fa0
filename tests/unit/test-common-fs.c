/* Unit tests for common/fs.c: fs_lock_file() never waits past its deadline.  A second open file
 * description of the lock file (as another process's would be) holds the flock; the timeout
 * fires within its bound and the error names the lock file and its holder (this process, read
 * from /proc/locks); once released the lock is taken at once. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/fs.h"
#include "common/util.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/drover-fs-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return fs_rm_rf(dir);
}

static void test_lock_timeout(void **state)
{
    (void)state;
    char path[128], err[512] = "";
    snprintf(path, sizeof path, "%s/job.lock", dir);
    /* free: taken at once, the file created */
    double t0 = time_mono();
    int fd = fs_lock_file(path, 5, err, sizeof err);
    assert_true(fd >= 0);
    assert_true(time_mono() - t0 < 0.5);
    close(fd);

    int holder = open(path, O_RDWR | O_CLOEXEC);
    assert_true(holder >= 0);
    assert_int_equal(flock(holder, LOCK_EX | LOCK_NB), 0);
    assert_int_equal(fs_lock_holder(path), getpid());

    /* held: -ETIMEDOUT after the deadline, not before, and not much after */
    t0 = time_mono();
    assert_int_equal(fs_lock_file(path, 0.3, err, sizeof err), -ETIMEDOUT);
    double took = time_mono() - t0;
    assert_true(took >= 0.3);
    assert_true(took < 0.3 + 0.25);
    assert_non_null(strstr(err, path));
    char pid[64];
    snprintf(pid, sizeof pid, "by pid %d (", (int)getpid());
    assert_non_null(strstr(err, pid));
    assert_non_null(strstr(err, "test-common-fs"));
    /* timeout 0: one try; err may be NULL */
    t0 = time_mono();
    assert_int_equal(fs_lock_file(path, 0, NULL, 0), -ETIMEDOUT);
    assert_true(time_mono() - t0 < 0.1);

    /* released while waiting is not needed: released before, taken at once */
    close(holder);
    assert_int_equal(fs_lock_holder(path), 0);
    fd = fs_lock_file(path, 0.3, err, sizeof err);
    assert_true(fd >= 0);
    close(fd);
}

static void test_lock_refused(void **state)
{
    (void)state;
    char path[128], link[128], err[512] = "";
    /* a symlink is never followed (O_NOFOLLOW), a missing directory is named */
    snprintf(path, sizeof path, "%s/target", dir);
    snprintf(link, sizeof link, "%s/link.lock", dir);
    assert_int_equal(symlink(path, link), 0);
    assert_int_equal(fs_lock_file(link, 1, err, sizeof err), -ELOOP);
    assert_non_null(strstr(err, link));
    snprintf(path, sizeof path, "%s/no/such.lock", dir);
    assert_int_equal(fs_lock_file(path, 1, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, path));
}

/* The agent's preflight stops its command when the SSH channel it runs on is gone: that is seen
 * as its stdout's reader gone.  A live reader, a file, /dev/null and a closed fd are not. */
static void test_fd_reader_gone(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    assert_false(fd_reader_gone(p[1]));
    assert_false(fd_reader_gone(p[0])); /* the read end, its writer alive */
    close(p[0]);
    assert_true(fd_reader_gone(p[1]));
    close(p[1]);
    assert_false(fd_reader_gone(p[1])); /* closed: POLLNVAL, not a caller that went away */

    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_false(fd_reader_gone(sv[0]));
    close(sv[1]);
    assert_true(fd_reader_gone(sv[0]));
    close(sv[0]);

    int null = open("/dev/null", O_WRONLY);
    assert_true(null >= 0);
    assert_false(fd_reader_gone(null));
    close(null);
    char path[128];
    snprintf(path, sizeof path, "%s/plain", dir);
    int f = open(path, O_WRONLY | O_CREAT, 0600);
    assert_true(f >= 0);
    assert_false(fd_reader_gone(f));
    close(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lock_timeout),
        cmocka_unit_test(test_lock_refused),
        cmocka_unit_test(test_fd_reader_gone),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
