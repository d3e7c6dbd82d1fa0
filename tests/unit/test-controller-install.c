/* Unit tests for controller/cmd_install.c's install_diagnose(): what `drover-agent --version`
 * run in a container says is missing there (a shared library and its Debian package, a glibc
 * too old, no glibc loader at all), as `drover install` reports it (docs/operations.md). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "controller/cmd.h"

struct diag {
    char missing[128];
    const char *pkg;
    char why[512];
};

static void run(const char *err, int status, struct diag *d)
{
    install_diagnose(err, status, d->missing, sizeof d->missing, &d->pkg, d->why, sizeof d->why);
}

static void test_missing_library(void **state)
{
    (void)state;
    struct diag d;
    run("/usr/local/sbin/drover-agent.new: error while loading shared libraries: libjansson.so.4: "
        "cannot open shared object file: No such file or directory\n", 127, &d);
    assert_string_equal(d.missing, "libjansson.so.4");
    assert_string_equal(d.pkg, "libjansson4");
    assert_non_null(strstr(d.why, "lacks libjansson.so.4 (Debian package libjansson4"));
    assert_non_null(strstr(d.why, "STATIC_LIBS=0"));
}

static void test_missing_libc_part(void **state)
{
    (void)state;
    struct diag d;
    run("x: error while loading shared libraries: libm.so.6: cannot open shared object file", 127, &d);
    assert_string_equal(d.missing, "libm.so.6");
    assert_string_equal(d.pkg, "libc6");
    assert_null(strstr(d.why, "STATIC_LIBS"));
}

static void test_old_glibc(void **state)
{
    (void)state;
    struct diag d;
    run("/usr/local/sbin/drover-agent.new: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' "
        "not found (required by /usr/local/sbin/drover-agent.new)\n", 1, &d);
    assert_string_equal(d.missing, "GLIBC_2.34");
    assert_string_equal(d.pkg, "libc6");
    assert_non_null(strstr(d.why, "older"));
}

static void test_no_loader(void **state)
{
    (void)state;
    struct diag d;
    run("sh: /usr/local/sbin/drover-agent.new: not found\n", 127, &d);
    assert_string_equal(d.missing, "ld-linux-x86-64.so.2");
    assert_string_equal(d.pkg, "libc6");
    assert_non_null(strstr(d.why, "no glibc loader"));
}

static void test_other_failure(void **state)
{
    (void)state;
    struct diag d;
    run("drover-agent: something else\n", 3, &d);
    assert_string_equal(d.missing, "");
    assert_null(d.pkg);
    assert_non_null(strstr(d.why, "exit 3"));
    run(NULL, 1, &d);
    assert_string_equal(d.missing, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_library), cmocka_unit_test(test_missing_libc_part),
        cmocka_unit_test(test_old_glibc),       cmocka_unit_test(test_no_loader),
        cmocka_unit_test(test_other_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
