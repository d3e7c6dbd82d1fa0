/* The deploy lease's holder (controller/deploy/holder.c): this drover's name, parsing the names
 * of this and older drovers, and the decision that lets a drover take over at once the lease of a
 * drover of this machine that is gone (killed -9 during a probation), never a live one's, another
 * host's or another boot's. */
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
#include "controller/deploy/holder.h"

static void test_holder_self(void **state)
{
    (void)state;
    char self[HOLDER_MAX];
    holder_self(self, sizeof self);
    struct holder h;
    assert_int_equal(holder_parse(self, &h), 0);
    assert_int_equal(h.pid, (long)getpid());
    assert_int_equal(strlen(h.boot), 8);
    assert_true(h.has_start);
    assert_non_null(strstr(self, "/boot-"));
    assert_non_null(strstr(self, "/start-"));
    assert_int_equal(holder_fate_here(self, self), HOLDER_RUNS); /* ourselves */
    /* a small buffer: the older form, still parsed */
    char small[24];
    holder_self(small, sizeof small);
    assert_true(strlen(small) < sizeof small);
    if (strcmp(small, "?") != 0) {
        assert_int_equal(holder_parse(small, &h), 0);
        assert_int_equal(h.pid, (long)getpid());
        assert_false(h.has_start);
    }
}

static void test_holder_parse(void **state)
{
    (void)state;
    struct holder h;
    assert_int_equal(holder_parse("alice@h1/pid-7", &h), 0); /* an older drover's */
    assert_string_equal(h.host, "h1");
    assert_int_equal(h.pid, 7);
    assert_string_equal(h.boot, "");
    assert_false(h.has_start);
    assert_int_equal(holder_parse("alice@h1/pid-7/boot-0a1b2c3d/start-123456", &h), 0);
    assert_string_equal(h.boot, "0a1b2c3d");
    assert_true(h.has_start && h.start == 123456);
    memset(&h, 0x5a, sizeof h);
    struct holder untouched = h;
    static const char *bad[] = {
        "", "alice", "alice@h1", "h1/pid-7", "@h1/pid-7", "alice@/pid-7", "alice@h1/pid-",
        "alice@h1/pid-0", "alice@h1/pid--7", "alice@h1/pid-7x", "alice@h1/pid-7/",
        "alice@h1/pid-7/boot-XYZ/start-1", "alice@h1/pid-7/boot-0a1b2c3d", "alice@h1/pid-7/boot-0a1b2c3d/start-",
        "alice@h1/pid-7/boot-0a1b2c3d/start-1x", "alice@h1/pid-7/boot-0a1b2c3d/start--1", "alice@h1/ppid-7",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (holder_parse(bad[i], &h) != -EINVAL)
            fail_msg("'%s' parsed", bad[i]);
    assert_memory_equal(&h, &untouched, sizeof h);
}

/* The decision, from explicit facts: what each holder's own machine can tell. */
static void test_holder_judge(void **state)
{
    (void)state;
    struct holder me, h;
    assert_int_equal(holder_parse("bob@ops1/pid-500/boot-0a1b2c3d/start-9000", &me), 0);
    static const struct {
        const char *holder;
        int probe;
        unsigned long long start;
        bool has_start;
        enum holder_fate want;
    } rows[] = {
        /* this drover's form, this host and boot */
        {"alice@ops1/pid-77/boot-0a1b2c3d/start-800", -ESRCH, 0, false, HOLDER_GONE},  /* killed -9 */
        {"alice@ops1/pid-77/boot-0a1b2c3d/start-800", 0, 800, true, HOLDER_RUNS},      /* alive: refused */
        {"alice@ops1/pid-77/boot-0a1b2c3d/start-800", 0, 801, true, HOLDER_GONE},      /* pid reused */
        {"alice@ops1/pid-77/boot-0a1b2c3d/start-800", 0, 0, false, HOLDER_RUNS},       /* start unread */
        {"alice@ops1/pid-77/boot-0a1b2c3d/start-800", -EACCES, 0, false, HOLDER_UNKNOWN},
        {"alice@ops1/pid-77/boot-ffffffff/start-800", -ESRCH, 0, false, HOLDER_UNKNOWN}, /* other boot */
        {"alice@ops2/pid-77/boot-0a1b2c3d/start-800", -ESRCH, 0, false, HOLDER_UNKNOWN}, /* other host */
        /* an older drover's form: the pid alone */
        {"alice@ops1/pid-77", -ESRCH, 0, false, HOLDER_GONE},
        {"alice@ops1/pid-77", 0, 801, true, HOLDER_RUNS},
        {"alice@ops2/pid-77", -ESRCH, 0, false, HOLDER_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        assert_int_equal(holder_parse(rows[i].holder, &h), 0);
        if (holder_judge(&h, &me, rows[i].probe, rows[i].start, rows[i].has_start) != rows[i].want)
            fail_msg("row %zu (%s): wrong fate", i, rows[i].holder);
    }
    /* a controller that cannot read its own boot id judges no holder that names one */
    assert_int_equal(holder_parse("bob@ops1/pid-500", &me), 0);
    assert_int_equal(holder_parse("alice@ops1/pid-77/boot-0a1b2c3d/start-800", &h), 0);
    assert_int_equal(holder_judge(&h, &me, -ESRCH, 0, false), HOLDER_UNKNOWN);
}

/* The same against real processes of this machine: a child that exited (reaped, and a zombie),
 * a live child, and a live child under a start time that is not its own (a reused pid). */
static void test_holder_fate_here(void **state)
{
    (void)state;
    char self[HOLDER_MAX], other[HOLDER_MAX + 32];
    holder_self(self, sizeof self);
    struct holder me;
    assert_int_equal(holder_parse(self, &me), 0);
    const char *tail = strstr(self, "/pid-");
    int ulen_host = (int)(tail - self);
    struct proc_stat ps;
    pid_t live = fork();
    assert_true(live >= 0);
    if (live == 0) {
        pause();
        _exit(0);
    }
    assert_int_equal(proc_stat_read(live, &ps), 0);
    unsigned long long start = ps.start;
    snprintf(other, sizeof other, "%.*s/pid-%d/boot-%s/start-%llu", ulen_host, self, (int)live, me.boot, start);
    assert_int_equal(holder_fate_here(other, self), HOLDER_RUNS);
    snprintf(other, sizeof other, "%.*s/pid-%d/boot-%s/start-%llu", ulen_host, self, (int)live, me.boot, start + 1);
    assert_int_equal(holder_fate_here(other, self), HOLDER_GONE);
    snprintf(other, sizeof other, "%.*s/pid-%d", ulen_host, self, (int)live);
    assert_int_equal(holder_fate_here(other, self), HOLDER_RUNS);
    snprintf(other, sizeof other, "someone@elsewhere.example/pid-%d", (int)live);
    assert_int_equal(holder_fate_here(other, self), HOLDER_UNKNOWN);
    /* killed -9: a zombie until reaped, then no process at all; gone both times */
    assert_int_equal(kill(live, SIGKILL), 0);
    for (int i = 0; i < 500; i++) {
        if (proc_stat_read(live, &ps) == 0 && ps.state == 'Z')
            break;
        usleep(10000);
    }
    snprintf(other, sizeof other, "%.*s/pid-%d/boot-%s/start-1", ulen_host, self, (int)live, me.boot);
    assert_int_equal(holder_fate_here(other, self), HOLDER_GONE);
    snprintf(other, sizeof other, "%.*s/pid-%d", ulen_host, self, (int)live);
    assert_int_equal(holder_fate_here(other, self), HOLDER_GONE);
    assert_int_equal(waitpid(live, NULL, 0), live);
    assert_int_equal(holder_fate_here(other, self), HOLDER_GONE);
    assert_int_equal(holder_fate_here("not a holder", self), HOLDER_UNKNOWN);
}

/* Two drovers on one machine in different PID namespaces (containers; with --network host they
 * keep the host's name, and the kernel's boot id is the same): the second found the first's
 * live pid missing from its own /proc and took its lease over mid-probation, and both
 * "promoted" (lab: unshare -pf --mount-proc drover deploy ...).  The boot tag tells them apart. */
static void test_holder_boot_tag_pidns(void **state)
{
    (void)state;
    char a[9], b[9], c[9], again[9];
    holder_boot_tag("0a1b2c3d", HOLDER_INIT_PIDNS, a);
    assert_string_equal(a, "0a1b2c3d"); /* the init namespace: the boot id as before */
    holder_boot_tag("0a1b2c3d", 0, a);
    assert_string_equal(a, "0a1b2c3d"); /* unknown: as before */
    holder_boot_tag("0a1b2c3d", 4026532290ULL, b);
    holder_boot_tag("0a1b2c3d", 4026532291ULL, c);
    holder_boot_tag("0a1b2c3d", 4026532290ULL, again);
    assert_int_equal(strlen(b), 8);
    assert_int_equal(strspn(b, "0123456789abcdef"), 8);
    assert_string_not_equal(b, "0a1b2c3d");
    assert_string_not_equal(b, c);
    assert_string_equal(b, again); /* every drover of that namespace says the same */
    holder_boot_tag("", 4026532290ULL, a);
    assert_string_equal(a, "");
    /* judged from a container: the init namespace's dead-looking holder is another "boot" */
    struct holder h, me;
    char text[HOLDER_MAX];
    snprintf(text, sizeof text, "bob@ops1/pid-500/boot-%s/start-9000", b);
    assert_int_equal(holder_parse(text, &me), 0);
    assert_int_equal(holder_parse("alice@ops1/pid-77/boot-0a1b2c3d/start-800", &h), 0);
    assert_int_equal(holder_judge(&h, &me, -ESRCH, 0, false), HOLDER_UNKNOWN);
    /* and a holder of the same container namespace is judged as before */
    snprintf(text, sizeof text, "alice@ops1/pid-77/boot-%s/start-800", b);
    assert_int_equal(holder_parse(text, &h), 0);
    assert_int_equal(holder_judge(&h, &me, -ESRCH, 0, false), HOLDER_GONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_holder_self),       cmocka_unit_test(test_holder_parse),
        cmocka_unit_test(test_holder_judge),
        cmocka_unit_test(test_holder_boot_tag_pidns),
        cmocka_unit_test(test_holder_fate_here),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
