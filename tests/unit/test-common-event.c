/* Unit tests for common/event.c, the event journal line: the writer's line reads back through
 * the reader, "v" is written and checked, limits hold and ret_ is untouched on failure.  (The
 * reader's refusals of malformed lines are in test-controller-top.c, test_event_parse.) */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/event.h"

static void test_roundtrip(void **state)
{
    (void)state;
    char line[EVENT_LINE_MAX];
    int n = event_format(41, 1764552000.25, "train", "crash", "71cd8e4f", "rank 0 exited 1", line,
                         sizeof line);
    assert_true(n > 0);
    assert_int_equal((size_t)n, strlen(line));
    assert_non_null(strstr(line, "\"v\":1"));
    struct event e;
    assert_int_equal(event_parse(line, (size_t)n, &e), 0);
    assert_int_equal(e.seq, 41);
    assert_true(e.ts == 1764552000.25);
    assert_string_equal(e.job, "train");
    assert_string_equal(e.kind, "crash");
    assert_string_equal(e.release, "71cd8e4f");
    assert_string_equal(e.detail, "rank 0 exited 1");
    /* NULL fields are written as "" */
    n = event_format(1, 2, NULL, "start", NULL, NULL, line, sizeof line);
    assert_true(n > 0);
    assert_int_equal(event_parse(line, (size_t)n, &e), 0);
    assert_string_equal(e.job, "");
    assert_string_equal(e.release, "");
}

static void test_versions(void **state)
{
    (void)state;
    struct event e, keep;
    memset(&keep, 0x5a, sizeof keep);
    e = keep;
    const char *v0 = "{\"seq\":3,\"ts\":2,\"kind\":\"x\"}"; /* before v1: no "v" */
    assert_int_equal(event_parse(v0, strlen(v0), &e), 0);
    assert_int_equal(e.seq, 3);
    e = keep;
    const char *v2 = "{\"seq\":3,\"ts\":2,\"kind\":\"x\",\"v\":2}";
    assert_int_equal(event_parse(v2, strlen(v2), &e), -EPROTONOSUPPORT);
    assert_memory_equal(&e, &keep, sizeof e);
    const char *vs = "{\"seq\":3,\"ts\":2,\"kind\":\"x\",\"v\":\"1\"}";
    assert_int_equal(event_parse(vs, strlen(vs), &e), -EINVAL);
    assert_memory_equal(&e, &keep, sizeof e);
}

static void test_limits(void **state)
{
    (void)state;
    char detail[EVENT_LINE_MAX];
    memset(detail, 'd', sizeof detail - 1);
    detail[sizeof detail - 1] = '\0';
    char line[EVENT_LINE_MAX * 2];
    memset(line, 0x5a, sizeof line);
    assert_int_equal(event_format(1, 2, "j", "k", "", detail, line, sizeof line), -E2BIG);
    assert_int_equal((unsigned char)line[0], 0x5a); /* nothing written */
    char small[16];
    assert_int_equal(event_format(1, 2, "j", "k", "", "", small, sizeof small), -E2BIG);
    /* the longest detail that still fits is written whole */
    detail[EVENT_LINE_MAX - 200] = '\0';
    int n = event_format(1, 2, "j", "k", "", detail, line, sizeof line);
    assert_true(n > 0 && n < EVENT_LINE_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
