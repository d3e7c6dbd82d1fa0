/* Unit tests for controller/exitcode.c: drover's exit-code table is docs/errors.md's "drover"
 * table, row for row both ways; every code has a name (the -o json outcome: held and env-fault
 * were "unknown" while the names were a switch of their own in cmd_result.c); the help text
 * names every code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/util.h"
#include "controller/exitcode.h"

static const int codes[] = {
#define CODE(id, c, name, words) c,
    DROVER_EXITS(CODE)
#undef CODE
};
#define NCODES (sizeof codes / sizeof codes[0])

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(drover_exit_name(EXIT_HELD), "held");
    assert_string_equal(drover_exit_name(EXIT_ENV_FAULT), "env-fault");
    assert_string_equal(drover_exit_name(EXIT_REVERT_FAILED), "revert-failed");
    assert_null(drover_exit_name(124));
    for (size_t i = 0; i < NCODES; i++) {
        assert_non_null(drover_exit_name(codes[i]));
        for (size_t j = 0; j < i; j++) /* never two rows for one code, nor one name twice */
            if (codes[i] == codes[j] || !strcmp(drover_exit_name(codes[i]), drover_exit_name(codes[j])))
                fail_msg("exit codes %d and %d collide", codes[i], codes[j]);
    }
}

static void test_docs(void **state)
{
    (void)state;
    char *doc;
    assert_int_equal(fs_read_file("docs/errors.md", 1 << 20, &doc, NULL), 0);
    char *sec = strstr(doc, "\n## drover (");
    assert_non_null(sec);
    char *end = strstr(sec + 1, "\n## ");
    if (end)
        *end = '\0';
    for (size_t i = 0; i < NCODES; i++) {
        char row[64];
        snprintf(row, sizeof row, "\n| %d | %s |", codes[i], drover_exit_name(codes[i]));
        if (!strstr(sec, row))
            fail_msg("docs/errors.md (drover) lacks the row '%s'", row + 1);
    }
    int rows = 0;
    for (char *p = sec; (p = strstr(p, "\n| ")); p++) {
        int code;
        if (sscanf(p, "\n| %d |", &code) != 1)
            continue;
        rows++;
        if (!drover_exit_name(code))
            fail_msg("docs/errors.md (drover) documents exit %d, which exitcode.h does not have", code);
    }
    assert_int_equal(rows, (int)NCODES);
    free(doc);
}

static void test_usage(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    assert_non_null(fp);
    drover_exit_usage(fp);
    fclose(fp);
    for (size_t i = 0; i < NCODES; i++) {
        char sp[16], nl[16];
        snprintf(sp, sizeof sp, " %d %s", codes[i], codes[i] == EXIT_HELD ? "held" : "");
        snprintf(nl, sizeof nl, "\n%d %s", codes[i], codes[i] == EXIT_HELD ? "held" : "");
        if (!strstr(buf, sp) && !strstr(buf, nl))
            fail_msg("drover help does not name exit %d: %s", codes[i], buf);
    }
    for (char *l = buf; *l;) { /* lines fit a terminal */
        char *nl = strchr(l, '\n');
        assert_non_null(nl);
        assert_true(nl - l <= 96);
        l = nl + 1;
    }
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_docs),
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
