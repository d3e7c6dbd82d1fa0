/* /proc/<pid>/stat as the agent (gang liveness, adoption after a restart) and the controller (a
 * dead deploy lease holder) read it: one parser, fields counted from the last ')'. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/procstat.h"

static void test_parse(void **state)
{
    (void)state;
    struct proc_stat ps;
    /* a comm with spaces and parentheses */
    const char *text = "4242 (we (b) ird) S 1 4243 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10\n";
    assert_int_equal(proc_stat_parse(text, &ps), 0);
    assert_int_equal(ps.state, 'S');
    assert_int_equal(ps.ppid, 1);
    assert_int_equal(ps.pgrp, 4243);
    assert_true(ps.start == 987654);

    struct proc_stat untouched = {.state = 'q', .pgrp = 7, .start = 1};
    static const char *const bad[] = {
        "", "no parenthesis", "4242 (x) S 1 2 3",
        "1 (x) SS 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 5",   /* state of two letters */
        "1 (x) S z 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 5",    /* ppid not a number */
        "1 (x) S 1 z 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 5",    /* pgrp not a number */
        "1 (x) S 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 -5",   /* negative start */
        "1 (x) S 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 5x",   /* trailing junk */
        "1 (x) S 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 99999999999999999999999", /* overflow */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ps = untouched;
        if (proc_stat_parse(bad[i], &ps) != -EINVAL)
            fail_msg("'%s' parsed", bad[i]);
        assert_memory_equal(&ps, &untouched, sizeof ps);
    }
}

/* Real processes: this one, a live child (its own group), the child as a zombie, then reaped. */
static void test_read(void **state)
{
    (void)state;
    struct proc_stat me, ps;
    assert_int_equal(proc_stat_read(getpid(), &me), 0);
    assert_int_equal(me.pgrp, (long)getpgrp());
    assert_int_equal(me.ppid, (long)getppid());
    assert_true(me.start > 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        setpgid(0, 0);
        pause();
        _exit(0);
    }
    for (int i = 0; i < 500; i++) { /* until the child has its own group */
        assert_int_equal(proc_stat_read(child, &ps), 0);
        if (ps.pgrp == child)
            break;
        usleep(10000);
    }
    assert_int_equal(ps.pgrp, child);
    assert_true(ps.start >= me.start);
    assert_int_equal(kill(child, SIGKILL), 0);
    for (int i = 0; i < 500; i++) {
        if (proc_stat_read(child, &ps) == 0 && ps.state == 'Z')
            break;
        usleep(10000);
    }
    assert_int_equal(ps.state, 'Z');
    assert_int_equal(waitpid(child, NULL, 0), child);
    assert_int_equal(proc_stat_read(child, &ps), -ESRCH);
    assert_int_equal(proc_stat_read(0, &ps), -ESRCH);
    assert_int_equal(proc_stat_read(-1, &ps), -ESRCH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
