/* Unit tests for controller/deploy/objsync.c's fan-out answer (one host shell runs an agent
 * command in each container of the host at once and prints, per container, a header and its
 * output): answers in any order, empty outputs, and every malformed form refused -- a missing
 * or repeated container, lengths past the end, a stray line, a status out of range. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "controller/deploy/objsync.h"

static int parse(const char *text, int n, struct fan_res *fr)
{
    return objsync_fan_parse(text, strlen(text), n, fr);
}

static void test_fan_parse_ok(void **state)
{
    (void)state;
    struct fan_res fr[3];
    const char *t = "@@fan 1 3 0 4\nerr\n@@fan 0 0 8 0\npresent\n@@fan 2 0 4 2\n0 2\nx\n";
    assert_int_equal(parse(t, 3, fr), 0);
    assert_int_equal(fr[0].status, 0);
    assert_int_equal(fr[0].out_len, 8);
    assert_memory_equal(fr[0].out, "present\n", 8);
    assert_int_equal(fr[0].err_len, 0);
    assert_int_equal(fr[1].status, 3);
    assert_int_equal(fr[1].out_len, 0);
    assert_memory_equal(fr[1].err, "err\n", 4);
    assert_memory_equal(fr[2].out, "0 2\n", 4);
    assert_memory_equal(fr[2].err, "x\n", 2);
    /* an output holding something that looks like a header is data, not a header */
    t = "@@fan 0 0 14 0\n@@fan 1 0 0 0\n@@fan 1 0 0 0\n";
    assert_int_equal(parse(t, 2, fr), 0);
    assert_int_equal(fr[0].out_len, 14);
    assert_int_equal(fr[1].status, 0);
}

static void test_fan_parse_refused(void **state)
{
    (void)state;
    struct fan_res fr[2];
    assert_int_equal(parse("", 1, fr), -EBADMSG);                                  /* no answer */
    assert_int_equal(parse("@@fan 0 0 0 0\n", 2, fr), -EBADMSG);                    /* one missing */
    assert_int_equal(parse("@@fan 0 0 0 0\n@@fan 0 0 0 0\n", 2, fr), -EBADMSG);     /* repeated */
    assert_int_equal(parse("@@fan 2 0 0 0\n", 2, fr), -EBADMSG);                    /* out of range */
    assert_int_equal(parse("@@fan -1 0 0 0\n", 2, fr), -EBADMSG);
    assert_int_equal(parse("@@fan 0 0 9 0\nshort\n", 1, fr), -EBADMSG);             /* past the end */
    assert_int_equal(parse("@@fan 0 0 0 99999999999999999999\n", 1, fr), -EBADMSG);
    assert_int_equal(parse("@@fan 0 300 0 0\n", 1, fr), -EBADMSG);                  /* status */
    assert_int_equal(parse("@@fan 0 0 0 0\nstray\n", 1, fr), -EBADMSG);             /* stray line */
    assert_int_equal(parse("@@fan 0 0 0 0 extra\n", 1, fr), -EBADMSG);
    assert_int_equal(parse("@@fan 0 0 0 0", 1, fr), -EBADMSG);                      /* no newline */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fan_parse_ok),
        cmocka_unit_test(test_fan_parse_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
