/* Unit tests for controller/verbs.c: --help is found wherever it is (but not after "--"), every
 * verb has its usage, and the completion scripts name every verb and its options. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "controller/verbs.h"

static void test_wants_help(void **state)
{
    (void)state;
    char *a[] = { "deploy", "rel", "--help", NULL };
    assert_true(verb_wants_help(3, a));
    char *b[] = { "deploy", "-h", NULL };
    assert_true(verb_wants_help(2, b));
    char *c[] = { "deploy", "rel", "--job", "train", NULL };
    assert_false(verb_wants_help(4, c));
    char *d[] = { "deploy", "--", "--help", NULL };
    assert_false(verb_wants_help(3, d));
    char *e[] = { "--help", NULL }; /* argv[0] is the verb, never an option */
    assert_false(verb_wants_help(1, e));
}

static void test_table(void **state)
{
    (void)state;
    assert_true(verbs_n >= 12);
    for (size_t i = 0; i < verbs_n; i++) {
        assert_non_null(verbs[i].args);
        assert_non_null(verbs[i].summary);
        assert_non_null(verbs[i].opts);
        assert_true(strlen(verbs[i].summary) > 0);
        assert_false(verbs[i].run && verbs[i].run_plain);
        assert_ptr_equal(verb_find(verbs[i].name), &verbs[i]);
    }
    assert_null(verb_find("deploi"));
    assert_non_null(verb_find("logs"));
    assert_non_null(verb_find("events"));
    assert_non_null(verb_find("validate"));
}

static char *script(const char *shell)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    assert_non_null(fp);
    assert_int_equal(verbs_completion(shell, fp), 0);
    fclose(fp);
    return buf;
}

static void test_completion(void **state)
{
    (void)state;
    const char *shells[] = { "bash", "zsh" };
    for (int s = 0; s < 2; s++) {
        char *t = script(shells[s]);
        for (size_t i = 0; i < verbs_n; i++) {
            char want[64];
            snprintf(want, sizeof want, "%s", verbs[i].name);
            assert_non_null(strstr(t, want));
        }
        assert_non_null(strstr(t, "--all-jobs"));
        assert_non_null(strstr(t, "--follow"));
        free(t);
    }
    FILE *fp = fopen("/dev/null", "w");
    assert_int_equal(verbs_completion("fish", fp), -EINVAL);
    fclose(fp);
}

static void test_help_text(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    verb_help(verb_find("deploy"), fp);
    fclose(fp);
    assert_non_null(strstr(buf, "usage: drover [-i INVENTORY] deploy DIR"));
    assert_non_null(strstr(buf, "-o json"));
    free(buf);
}

/* -i after the verb used to be left to the verb (and the default inventory read instead) */
static void test_inventory_after_verb(void **state)
{
    (void)state;
    char *a1[] = { "status", "-i", "x.ini", "-o", "json", NULL };
    int n = 5;
    const char *inv = NULL;
    assert_true(verbs_take_inventory_arg(&n, a1, &inv));
    assert_string_equal(inv, "x.ini");
    assert_int_equal(n, 3);
    assert_string_equal(a1[1], "-o");
    assert_string_equal(a1[2], "json");
    assert_null(a1[3]);
    char *a2[] = { "deploy", "rel", "--inventory=y.ini", "--job", "j", "-i", "z.ini", "--reason",
                   "-interrupted", NULL };
    n = 9;
    assert_true(verbs_take_inventory_arg(&n, a2, &inv));
    assert_string_equal(inv, "z.ini"); /* the last one wins */
    assert_int_equal(n, 6);
    assert_string_equal(a2[1], "rel");
    assert_string_equal(a2[3], "j");
    assert_string_equal(a2[5], "-interrupted"); /* a value, not -i */
    char *a3[] = { "logs", "--", "-i", "kept", NULL };
    n = 4;
    inv = NULL;
    assert_true(verbs_take_inventory_arg(&n, a3, &inv));
    assert_null(inv); /* after "--" nothing is taken */
    assert_int_equal(n, 4);
    assert_string_equal(a3[2], "-i");
    char *a4[] = { "status", "-i", NULL };
    n = 2;
    assert_false(verbs_take_inventory_arg(&n, a4, &inv));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wants_help),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_completion),
        cmocka_unit_test(test_help_text),
        cmocka_unit_test(test_inventory_after_verb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
