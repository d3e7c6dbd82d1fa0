/* Unit tests for common/jsonfield.c: each reader writes its output only on success, enforces its
 * bounds and tells an absent member from a bad one. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/jsonfield.h"

static json_t *doc(const char *text)
{
    json_t *o = json_loads(text, 0, NULL);
    assert_non_null(o);
    return o;
}

static void test_num_array(void **state)
{
    (void)state;
    json_t *o = doc("{\"a\":[1,2.5,0],\"s\":\"x\",\"mixed\":[1,\"2\"],\"big\":[1,2,3,4],\"neg\":[3,-1],\"e\":[]}");
    double out[3] = { 7, 7, 7 };
    size_t n = 99;
    assert_int_equal(jf_num_array(o, "a", 0, 10, 3, true, out, &n), 0);
    assert_int_equal(n, 3);
    assert_true(out[0] == 1 && out[1] == 2.5 && out[2] == 0);
    /* failures leave out and n alone */
    double keep[4] = { 7, 7, 7, 7 };
    n = 99;
    assert_int_equal(jf_num_array(o, "a", 0.5, 10, 3, true, keep, &n), -EINVAL); /* 0 below lo */
    assert_int_equal(jf_num_array(o, "a", 0, 2, 3, true, keep, &n), -EINVAL);    /* 2.5 above hi */
    assert_int_equal(jf_num_array(o, "s", 0, 10, 3, true, keep, &n), -EINVAL);
    assert_int_equal(jf_num_array(o, "mixed", 0, 10, 3, true, keep, &n), -EINVAL);
    assert_int_equal(jf_num_array(o, "big", 0, 10, 3, true, keep, &n), -E2BIG);
    assert_int_equal(jf_num_array(o, "neg", 0, 10, 3, true, keep, &n), -EINVAL);
    assert_int_equal(jf_num_array(o, "missing", 0, 10, 3, true, keep, &n), -EINVAL);
    assert_int_equal(n, 99);
    assert_true(keep[0] == 7 && keep[1] == 7);
    /* absent and optional: 0, untouched; empty: 0 values */
    assert_int_equal(jf_num_array(o, "missing", 0, 10, 3, false, keep, &n), 0);
    assert_int_equal(n, 99);
    assert_int_equal(jf_num_array(o, "e", 0, 10, 3, true, keep, &n), 0);
    assert_int_equal(n, 0);
    json_decref(o);
}

static void test_array(void **state)
{
    (void)state;
    json_t *o = doc("{\"a\":[1,2,3],\"s\":\"x\",\"o\":{}}");
    json_t *keep = (json_t *)0x1, *a = keep;
    assert_int_equal(jf_array(o, "a", 3, &a), 0);
    assert_int_equal(json_array_size(a), 3);
    a = keep;
    assert_int_equal(jf_array(o, "a", 2, &a), -E2BIG);
    assert_ptr_equal(a, keep);
    assert_int_equal(jf_array(o, "s", 9, &a), -EINVAL);
    assert_int_equal(jf_array(o, "o", 9, &a), -EINVAL);
    assert_ptr_equal(a, keep);
    assert_int_equal(jf_array(o, "missing", 9, &a), 0);
    assert_null(a);
    size_t i, rounds = 0;
    json_t *v;
    json_array_foreach(a, i, v) /* an absent array runs no round */
        rounds++;
    assert_int_equal(rounds, 0);
    json_decref(o);
}

static void test_scalars(void **state)
{
    (void)state;
    json_t *o = doc("{\"i\":5,\"f\":1.5,\"s\":\"abc\",\"n\":null}");
    int v = 42;
    assert_int_equal(jf_i32(o, "i", 0, 4, &v), -EINVAL);
    assert_int_equal(v, 42);
    assert_int_equal(jf_i32(o, "f", 0, 10, &v), -EINVAL);
    assert_int_equal(jf_i32(o, "i", 0, 10, &v), 0);
    assert_int_equal(v, 5);
    double d = 3;
    assert_int_equal(jf_num_in(o, "f", 2, 3, &d), -EINVAL);
    assert_true(d == 3);
    assert_int_equal(jf_num_in(o, "n", 0, 10, &d), 0); /* null is absent */
    assert_true(d == 3);
    char buf[3] = "zz";
    assert_int_equal(jf_str(o, "s", buf, sizeof buf, false), -EINVAL);
    assert_string_equal(buf, "zz");
    assert_int_equal(jf_str(o, "s", buf, sizeof buf, true), 0);
    assert_string_equal(buf, "ab");
    json_decref(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_num_array),
        cmocka_unit_test(test_array),
        cmocka_unit_test(test_scalars),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
