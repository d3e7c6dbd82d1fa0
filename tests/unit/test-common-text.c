/* Unit tests for common/text.c (escaping worker and remote text for terminals and the journal,
 * UTF-8 checks, the noun that goes with a count) and for the logger applying it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "common/text.h"

static const char *esc(const char *s, char *out, size_t sz)
{
    return text_escape(s, strlen(s), out, sz);
}

static void test_escape_controls(void **state)
{
    (void)state;
    char out[256];
    /* what issue 12 reproduced: title change, erase-line, carriage return, hidden text */
    assert_string_equal(esc("\033]0;pwned\007", out, sizeof out), "\\x1b]0;pwned\\x07");
    assert_string_equal(esc("ok\033[2K\rfake", out, sizeof out), "ok\\x1b[2K\\rfake");
    assert_string_equal(esc("a\033[8mhidden\033[0m", out, sizeof out), "a\\x1b[8mhidden\\x1b[0m");
    /* a journald record forged with a newline and a priority prefix stays on one line */
    assert_string_equal(esc("bad\n<0>forged", out, sizeof out), "bad\\n<0>forged");
    assert_string_equal(esc("t\tx\x7f", out, sizeof out), "t\\tx\\x7f");
    /* C1 CSI (U+009B) and a right-to-left override */
    assert_string_equal(esc("a\xc2\x9b" "2Jb", out, sizeof out), "a\\u{009b}2Jb");
    assert_string_equal(esc("x\xe2\x80\xaey", out, sizeof out), "x\\u{202e}y");
    /* invalid UTF-8: lone continuation, overlong '/', truncated sequence, surrogate */
    assert_string_equal(esc("\x80\xc0\xaf\xe2\x82", out, sizeof out), "\\x80\\xc0\\xaf\\xe2\\x82");
    assert_string_equal(esc("\xed\xa0\x80", out, sizeof out), "\\xed\\xa0\\x80");
}

static void test_escape_passes_text(void **state)
{
    (void)state;
    char out[256];
    const char *plain[] = { "", "rank 0 exited with code 4 (data error): shard 'x' missing",
                            "Grüße, 日本語, emoji \xf0\x9f\x98\x80", "back\\slash" };
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        assert_false(text_needs_escape(plain[i], strlen(plain[i])));
        assert_string_equal(esc(plain[i], out, sizeof out), plain[i]);
    }
    assert_true(text_needs_escape("a\nb", 3));
    /* an embedded NUL is escaped too when the length says it is part of the text */
    assert_string_equal(text_escape("a\0b", 3, out, sizeof out), "a\\x00b");
}

static void test_escape_bounds(void **state)
{
    (void)state;
    char out[12];
    memset(out, 'Z', sizeof out);
    esc("0123456789abcdef", out, sizeof out);
    assert_string_equal(out, "01234567...");
    /* never cuts inside a multi-byte character */
    esc("ééééééééé", out, sizeof out);
    assert_true(text_is_utf8(out, strlen(out)));
    esc("\033\033\033\033\033", out, sizeof out);
    assert_null(memchr(out, '\033', strlen(out)));
    assert_true(strlen(out) < sizeof out);
    char one[1] = { 'Z' };
    text_escape("abc", 3, one, 1);
    assert_int_equal(one[0], '\0');
    char *d = text_escape_dup("\xc2\x80\xc2\x80\n");
    assert_string_equal(d, "\\u{0080}\\u{0080}\\n");
    free(d);
    assert_null(text_escape_dup(NULL));
}

static void test_utf8(void **state)
{
    (void)state;
    assert_true(text_is_utf8("", 0));
    assert_true(text_is_utf8("arg=π", strlen("arg=π")));
    assert_false(text_is_utf8("\xff", 1));
    assert_false(text_is_utf8("caf\xe9", 4)); /* Latin-1 */
    assert_false(text_is_utf8("\xf4\x90\x80\x80", 4)); /* above U+10FFFF */
    assert_false(text_is_utf8("a\0b", 3));
    /* one scanner, two rules: controls and bidi overrides are UTF-8 that needs escaping */
    assert_true(text_is_utf8("a\nb", 3));
    assert_true(text_needs_escape("a\nb", 3));
    assert_true(text_is_utf8("\xe2\x80\xae", 3)); /* U+202E */
    assert_true(text_needs_escape("\xe2\x80\xae", 3));
    assert_true(text_needs_escape("caf\xe9", 4));
    assert_true(text_needs_escape("a\0b", 3));
    assert_false(text_needs_escape("\xc3\xa9", 2));
}

static void test_log_one_line(void **state)
{
    (void)state;
    /* The logger escapes the message: a worker's "\n<0>" is not a second journald record. */
    int p[2];
    assert_int_equal(pipe(p), 0);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_int_equal(dup2(p[1], STDERR_FILENO), STDERR_FILENO);
    log_set_journald(true);
    log_warn("revert: %s", "boom\n<0>forged\033[2K");
    log_set_journald(false);
    assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
    close(p[1]);
    char buf[512] = "";
    ssize_t n = read(p[0], buf, sizeof buf - 1);
    close(p[0]);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_string_equal(buf, "<4>revert: boom\\n<0>forged\\x1b[2K\n");
}

/* "reverting job 'train' to ... on 1 containers" (a one-container job), "release ...: 1 files",
 * "gpu environment: 0 fault": the noun follows the count, in every program. */
static void test_plural(void **state)
{
    (void)state;
    assert_string_equal(text_plural(1, "container", "containers"), "container");
    assert_string_equal(text_plural(0, "container", "containers"), "containers");
    assert_string_equal(text_plural(2, "container", "containers"), "containers");
    assert_string_equal(text_plural(-1, "rank", "ranks"), "ranks");
    size_t nfiles = 1;
    assert_string_equal(text_plural(nfiles, "file", "files"), "file");
    char m[128];
    for (int n = 1; n <= 2; n++) {
        snprintf(m, sizeof m, "revert failed on %d of %d %s", 1, n, text_plural(n, "container", "containers"));
        assert_string_equal(m, n == 1 ? "revert failed on 1 of 1 container" : "revert failed on 1 of 2 containers");
    }
}

/* The gpu-check reason a refused deploy quoted was cut mid-word ("nvidia-uvm's majo") by a
 * 600-byte snprintf: a cut is now before a whole word, marked, and says where the rest is. */
static void test_cut_words(void **state)
{
    (void)state;
    char out[40];
    /* fits: whole, unmarked */
    assert_string_equal(text_cut_words("and nvidia-uvm's major too)", " (more)", out, sizeof out),
                        "and nvidia-uvm's major too)");
    const char *s = "lxc.cgroup2.devices.allow = c 195:* rwm, and nvidia-uvm's major too)";
    text_cut_words(s, " (more)", out, sizeof out);
    assert_true(strlen(out) < sizeof out);
    assert_string_equal(out, "lxc.cgroup2.devices.allow = c\xe2\x80\xa6 (more)");
    /* at the limit exactly: len == out_sz - 1 fits, one more byte does not */
    char e[8];
    assert_string_equal(text_cut_words("abc def", NULL, e, sizeof e), "abc def");
    assert_string_equal(text_cut_words("abc defg", NULL, e, sizeof e), "abc\xe2\x80\xa6");
    /* " | " between two lines of a reason: not left dangling before the mark */
    char r[16];
    assert_string_equal(text_cut_words("first line | second line", "", r, sizeof r), "first line\xe2\x80\xa6");
    /* a `command` in backquotes is never cut in two (a history reason ended
     * "(`drover logs --job nc-x --agent` )"): the cut goes before it, and before its " (" */
    const char *q = "rank 0 never reached its first step; it wrote 3 lines that are not heartbeats "
                    "(`drover logs --job nc-x --agent` says why)";
    char c[100];
    assert_string_equal(text_cut_words(q, NULL, c, sizeof c),
                        "rank 0 never reached its first step; it wrote 3 lines that are not heartbeats\xe2\x80\xa6");
    /* a closed pair before the cut stays */
    char c2[40];
    assert_string_equal(text_cut_words("run `drover status` now, then look at the logs", NULL, c2, sizeof c2),
                        "run `drover status` now, then look\xe2\x80\xa6");
    /* one long word: cut at a character boundary, never inside a UTF-8 sequence */
    char w[9];
    text_cut_words("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", NULL, w, sizeof w); /* 5 x e-acute, 10 bytes */
    assert_true(text_is_utf8(w, strlen(w)));
    assert_string_equal(w, "\xc3\xa9\xc3\xa9\xe2\x80\xa6");
    /* no room for the mark and more: a plain cut, still bounded and terminated */
    char t[6];
    text_cut_words("abc defgh", " (the rest: elsewhere)", t, sizeof t);
    assert_string_equal(t, "abc");
    char one[1] = { 'x' };
    assert_string_equal(text_cut_words("abc", NULL, one, sizeof one), "");
    assert_ptr_equal(text_cut_words("abc", NULL, one, 0), one); /* out_sz 0: untouched */
}

/* A verdict names the containers a reason applies to once, as one list: it used to repeat the
 * reason per container ("h1:101: interrupted ...; h1:102: interrupted ...; h2:201: ..."). */
static void test_join_names(void **state)
{
    (void)state;
    const char *cts[] = { "h1:101", "h1:102", "h2:201", "h2:202", "h3:301", "h3:302" };
    char b[128];
    size_t off = 0;
    assert_string_equal(text_join_names(cts, 1, 4, b, sizeof b, &off), "h1:101");
    assert_int_equal(off, strlen("h1:101"));
    off = 0;
    assert_string_equal(text_join_names(cts, 2, 4, b, sizeof b, &off), "h1:101 and h1:102");
    off = 0;
    assert_string_equal(text_join_names(cts, 3, 4, b, sizeof b, &off), "h1:101, h1:102 and h2:201");
    off = 0;
    assert_string_equal(text_join_names(cts, 4, 4, b, sizeof b, &off), "h1:101, h1:102, h2:201 and h2:202");
    off = 0;
    assert_string_equal(text_join_names(cts, 6, 4, b, sizeof b, &off),
                        "h1:101, h1:102, h2:201, h2:202 and 2 more");
    off = 0;
    assert_string_equal(text_join_names(cts, 5, 4, b, sizeof b, &off), "h1:101, h1:102, h2:201, h2:202 and 1 more");
    /* appended at *off */
    strcpy(b, "on ");
    off = 3;
    assert_string_equal(text_join_names(cts, 2, 4, b, sizeof b, &off), "on h1:101 and h1:102");
    /* none: nothing appended */
    off = 0;
    b[0] = '\0';
    assert_string_equal(text_join_names(cts, 0, 4, b, sizeof b, &off), "");
    assert_int_equal(off, 0);
    /* a full buffer: cut, terminated, never overrun; *off says it is full */
    char s[10];
    off = 0;
    text_join_names(cts, 3, 4, s, sizeof s, &off);
    assert_string_equal(s, "h1:101, h");
    assert_true(off >= sizeof s);
    size_t was = off;
    text_join_names(cts, 3, 4, s, sizeof s, &off); /* past the end: untouched */
    assert_int_equal(off, was);
    assert_string_equal(s, "h1:101, h");
}

int main(void)
{
    log_init("test");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape_controls),
        cmocka_unit_test(test_plural),
        cmocka_unit_test(test_join_names),
        cmocka_unit_test(test_cut_words),
        cmocka_unit_test(test_escape_passes_text),
        cmocka_unit_test(test_escape_bounds),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_log_one_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
