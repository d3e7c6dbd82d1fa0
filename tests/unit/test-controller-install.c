/* Unit tests for controller/cmd_install.c's install_diagnose(): what `drover-agent --version`
 * run in a container says is missing there (a shared library and its Debian package, a glibc
 * too old, no glibc loader at all), as `drover install` reports it (docs/operations.md). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "common/util.h"
#include "controller/cmd.h"
#include "tests/unit/capture.h"

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

/* `drover install --agent-binary build/drover-train` (tab completion one entry too far): its
 * --version ran, exit 0, so it replaced the agent in every container, none of which could start
 * it.  Now the version line must be drover-agent's, and nothing is replaced. */
static void test_wrong_binary_refused(void **state)
{
    (void)state;
    assert_true(install_is_agent_version("drover-agent 1a2b3c\n", 20));
    assert_false(install_is_agent_version("drover-train 1a2b3c\n", 20));
    assert_false(install_is_agent_version("drover-agent", 12));
    assert_false(install_is_agent_version(NULL, 0));

    char dir[] = "/tmp/drover-unit-install-XXXXXX", text[600], err[256], p[256], out[300], errf[300];
    assert_non_null(mkdtemp(dir));
    snprintf(p, sizeof p, "%s/root", dir);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(text, sizeof text, "[host h1]\nlocal = true\nagent_path = %s/root/drover-agent\n"
             "[job mini]\ncontainers = h1:local:%s/root\ncommand = bin/x\n", dir, dir);
    struct inventory *inv = NULL;
    assert_int_equal(inventory_parse(text, strlen(text), "t.ini", &inv, err, sizeof err), 0);
    snprintf(p, sizeof p, "%s/drover-train", dir);
    capture_put(p, "#!/bin/sh\necho 'drover-train 1a2b3c'\n", 0755);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(errf, sizeof errf, "%s/err", dir);
    char *argv[] = { "install", "--agent-binary", p, "--job", "mini", NULL };
    optind = 0;
    assert_int_equal(capture_verb(cmd_install, inv, argv, 5, out, errf), 1);
    char *e = capture_slurp(errf);
    assert_non_null(strstr(e, "the binary given is not drover-agent: its --version says "
                              "'drover-train 1a2b3c'"));
    assert_non_null(strstr(e, "nothing was replaced"));
    free(e);
    snprintf(p, sizeof p, "%s/root/drover-agent", dir);
    struct stat st;
    assert_int_equal(stat(p, &st), -1); /* no agent put in place */
    inventory_free(inv);
    assert_int_equal(fs_rm_rf(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_library), cmocka_unit_test(test_missing_libc_part),
        cmocka_unit_test(test_old_glibc),       cmocka_unit_test(test_no_loader),
        cmocka_unit_test(test_other_failure),   cmocka_unit_test(test_wrong_binary_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
