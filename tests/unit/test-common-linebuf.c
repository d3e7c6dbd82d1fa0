/* Unit tests for common/linebuf.c, the one bounded line reader: lines split across reads,
 * several lines in one read, an over-long line skipped and counted once (whether it ends in
 * the same read or many reads later), the line of exactly max bytes, and the tail at EOF. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/linebuf.h"

/* Feed text in chunks of at most chunk bytes; collect lines joined by '|', -E2BIG as "!". */
static void feed(struct linebuf *lb, const char *text, size_t chunk, char *out, size_t out_sz)
{
    size_t off = 0, total = strlen(text), o = 0;
    out[0] = '\0';
    while (off < total) {
        size_t room;
        char *at = linebuf_room(lb, &room);
        assert_true(room > 0);
        size_t n = total - off < chunk ? total - off : chunk;
        if (n > room)
            n = room;
        memcpy(at, text + off, n);
        off += n;
        linebuf_added(lb, n);
        char *line;
        size_t len;
        int r;
        while ((r = linebuf_next(lb, &line, &len)) != 0) {
            if (r < 0)
                o += (size_t)snprintf(out + o, out_sz - o, "!|");
            else {
                assert_int_equal(strlen(line), len);
                o += (size_t)snprintf(out + o, out_sz - o, "%s|", line);
            }
        }
    }
}

static void test_split_and_join(void **state)
{
    (void)state;
    char storage[16], out[256];
    struct linebuf lb;
    for (size_t chunk = 1; chunk <= 20; chunk++) {
        assert_int_equal(linebuf_init(&lb, storage, sizeof storage, 8), 0);
        feed(&lb, "a\nbb\n\nccc\n", chunk, out, sizeof out);
        assert_string_equal(out, "a|bb||ccc|");
        assert_int_equal(lb.overlong, 0);
    }
}

static void test_overlong(void **state)
{
    (void)state;
    char storage[9], out[256];
    struct linebuf lb;
    for (size_t chunk = 1; chunk <= 40; chunk++) {
        assert_int_equal(linebuf_init(&lb, storage, sizeof storage, 8), 0);
        /* 8 bytes is the longest line; 9 and 30 are over-long; lines after them still come */
        feed(&lb, "12345678\n123456789\nok\n012345678901234567890123456789\nend\n", chunk, out,
             sizeof out);
        assert_string_equal(out, "12345678|!|ok|!|end|");
        assert_int_equal(lb.overlong, 2);
    }
}

static void test_rest(void **state)
{
    (void)state;
    char storage[9], out[64];
    struct linebuf lb;
    char *line;
    size_t len;
    assert_int_equal(linebuf_init(&lb, storage, sizeof storage, 8), 0);
    feed(&lb, "one\ntail", 3, out, sizeof out);
    assert_string_equal(out, "one|");
    assert_int_equal(linebuf_rest(&lb, &line, &len), 1);
    assert_string_equal(line, "tail");
    assert_int_equal(len, 4);
    assert_int_equal(linebuf_rest(&lb, &line, &len), 0);
    /* a tail that is part of an over-long line */
    assert_int_equal(linebuf_init(&lb, storage, sizeof storage, 8), 0);
    feed(&lb, "0123456789abc", 4, out, sizeof out);
    assert_string_equal(out, "");
    assert_int_equal(lb.overlong, 1);
    assert_int_equal(linebuf_rest(&lb, &line, &len), -E2BIG);
    assert_int_equal(linebuf_rest(&lb, &line, &len), 0);
}

static void test_init_errors(void **state)
{
    (void)state;
    char storage[8];
    struct linebuf lb;
    assert_int_equal(linebuf_init(&lb, storage, sizeof storage, 8), -EINVAL); /* no room for max + 1 */
    assert_int_equal(linebuf_init(&lb, NULL, 8, 4), -EINVAL);
    assert_int_equal(linebuf_init(&lb, storage, sizeof storage, 7), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_and_join),
        cmocka_unit_test(test_overlong),
        cmocka_unit_test(test_rest),
        cmocka_unit_test(test_init_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
