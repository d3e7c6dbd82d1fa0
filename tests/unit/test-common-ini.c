/* Unit tests for common/ini.c: the reader's line numbers (sections and keys), its refusals (NUL,
 * over-long line, libinih syntax, a callback's stop) and the key table's parsing, bounds (open
 * and closed), hints and generic words, with nothing stored on failure. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/ini.h"

struct seen {
    char log[512];
    size_t off;
    int stop_at; /* line whose key stops the parse; 0 never */
};

static bool on_section(void *user, const char *section, int line)
{
    struct seen *s = user;
    s->off += (size_t)snprintf(s->log + s->off, sizeof s->log - s->off, "[%s]@%d ", section, line);
    return true;
}

static bool on_key(void *user, const char *section, const char *key, const char *value, int line)
{
    struct seen *s = user;
    s->off += (size_t)snprintf(s->log + s->off, sizeof s->log - s->off, "%s.%s=%s@%d ", section,
                               key, value, line);
    return line != s->stop_at;
}

static bool on_continued(void *user, const char *section, const char *key, const char *value, int line)
{
    struct seen *s = user;
    s->off += (size_t)snprintf(s->log + s->off, sizeof s->log - s->off, "+");
    return on_key(user, section, key, value, line);
}

static const struct ini_ops ops = { .section = on_section, .key = on_key };
static const struct ini_ops ops_cont = { .section = on_section, .key = on_key, .continued = on_continued };


static int read_text(const char *text, size_t line_max, struct seen *s, struct ini_error *e)
{
    memset(s->log, 0, sizeof s->log);
    s->off = 0;
    return ini_read(text, strlen(text), line_max, &ops, s, e);
}

/* libinih's continuation lines are told apart (a "\tgpus = 1" typo was key "x" set twice), and
 * an indented "[b]" after a key is no section header (libinih reads it as x's value; it was
 * reported as a section too); indented lines after a header, blank and comment lines are not
 * continuations.  Without the callback, key gets them as before. */
static void test_continued(void **state)
{
    (void)state;
    struct seen s = { 0 };
    struct ini_error e;
    const char *text = "[a]\nx = 1\n\tgpus = 2\n  [b]\n\n  ; c\n   \n[c]\n  y = 3\nz = 4\n  more\n";
    assert_int_equal(ini_read(text, strlen(text), 64, &ops_cont, &s, &e), 0);
    assert_string_equal(s.log, "[a]@1 a.x=1@2 +a.x=gpus = 2@3 +a.x=[b]@4 [c]@8 c.y=3@9 c.z=4@10 +c.z=more@11 ");
    assert_int_equal(read_text(text, 64, &s, &e), 0);
    assert_string_equal(s.log, "[a]@1 a.x=1@2 a.x=gpus = 2@3 a.x=[b]@4 [c]@8 c.y=3@9 c.z=4@10 c.z=more@11 ");
}

static void test_reader(void **state)
{
    (void)state;
    struct seen s = { .stop_at = 0 };
    struct ini_error e;
    assert_int_equal(read_text("\xEF\xBB\xBF[a]\nx = 1\r\n\n; c\n[empty]\n[b c]\ny=2", 64, &s, &e), 0);
    assert_string_equal(s.log, "[a]@1 a.x=1@2 [empty]@5 [b c]@6 b c.y=2@7 ");
    /* over-long line: refused at its line, with its length */
    assert_int_equal(read_text("[a]\nx = 1\nlong = 0123456789\n", 12, &s, &e), -EINVAL);
    assert_int_equal(e.kind, INI_ERR_LONG);
    assert_int_equal(e.line, 3);
    assert_int_equal(e.len, 17);
    /* a NUL byte */
    const char nul[] = "[a]\nx = 1\0\n";
    memset(s.log, 0, sizeof s.log);
    s.off = 0;
    assert_int_equal(ini_read(nul, sizeof nul - 1, 64, &ops, &s, &e), -EINVAL);
    assert_int_equal(e.kind, INI_ERR_NUL);
    assert_int_equal(e.line, 2);
    /* libinih syntax */
    assert_int_equal(read_text("[a]\nx = 1\nnot a key\n", 64, &s, &e), -EINVAL);
    assert_int_equal(e.kind, INI_ERR_SYNTAX);
    assert_int_equal(e.line, 3);
    /* a callback stop, after an earlier syntax error: the earlier line is reported */
    s.stop_at = 3;
    assert_int_equal(read_text("[a]\nx = 1\ny = 2\nz = 3\n", 64, &s, &e), -EINVAL);
    assert_int_equal(e.kind, INI_ERR_STOPPED);
    assert_int_equal(e.line, 3);
    assert_null(strstr(s.log, "z=3")); /* nothing after the stop */
    assert_int_equal(read_text("[a]\nbad\ny = 2\n", 64, &s, &e), -EINVAL);
    assert_int_equal(e.kind, INI_ERR_SYNTAX);
    assert_int_equal(e.line, 2);
    /* a section line without its ']' is the error, at its own line, even when the key below it
     * is one the previous section's callback refuses (it named line 4 and that key) */
    s.stop_at = 4;
    assert_int_equal(read_text("[a]\nx = 1\n[host h1\naddress = 10.0.0.1\n", 64, &s, &e), -EINVAL);
    assert_int_equal(e.kind, INI_ERR_SYNTAX);
    assert_int_equal(e.line, 3);
    assert_null(strstr(s.log, "address")); /* nothing below it is read */
    s.stop_at = 0;
    assert_int_equal(read_text("[a]\n[b\n", 64, &s, &e), -EINVAL);
    assert_int_equal(e.kind, INI_ERR_SYNTAX);
    assert_int_equal(e.line, 2);
    /* `key: value` (libinih's other delimiter) and text after ']': refused at their line,
     * nothing from them reported; a ':' after the '=', a comment after ']' and a continuation
     * line (a blank first) are read as before */
    assert_int_equal(read_text("[a]\nx = 1\nhost: h1:201\n", 64, &s, &e), -EINVAL);
    assert_int_equal(e.kind, INI_ERR_COLON);
    assert_int_equal(e.line, 3);
    assert_null(strstr(s.log, "host"));
    assert_int_equal(read_text("[a] b\nx = 1\n", 64, &s, &e), -EINVAL);
    assert_int_equal(e.kind, INI_ERR_TRAILING);
    assert_int_equal(e.line, 1);
    assert_string_equal(s.log, "");
    assert_int_equal(read_text("[a]  ; c\n[b]# d\nx = h:1\n  y: z\n[c]\t\r\n", 64, &s, &e), 0);
    assert_string_equal(s.log, "[a]@1 [b]@2 b.x=h:1@3 b.x=y: z@4 [c]@5 ");
    assert_non_null(ini_shape_words(INI_ERR_COLON));
    assert_null(ini_shape_words(INI_ERR_SYNTAX));
}

struct cfg {
    int n;
    int64_t big;
    uint64_t seed;
    double frac, dur, longdur;
    bool on;
    char name[8];
};

#define R(key, type, field, size, lo, hi, fl, hint) \
    { "s", key, type, offsetof(struct cfg, field), size, lo, hi, fl, hint, 0 }
static const struct ini_key keys[] = {
    R("n", INI_INT, n, 0, 1, 10, 0, NULL),
    R("big", INI_I64, big, 0, 0, 1e15, 0, NULL),
    R("seed", INI_U64, seed, 0, 0, 0, 0, NULL),
    R("frac", INI_DOUBLE, frac, 0, 0, 1, INI_MAX_OPEN, "is not a fraction in [0, 1)"),
    R("dur", INI_DURATION, dur, 0, 0, 3600, INI_MIN_OPEN, NULL),
    R("on", INI_BOOL, on, 0, 0, 0, 0, NULL),
    R("name", INI_STRING, name, 8, 0, 0, 0, NULL),
    /* a duration with no bound of its own (the inventory's deadlines) and a hint */
    R("long", INI_DURATION, longdur, 0, 0, 1e18, INI_MIN_OPEN, "must be a duration greater than 0"),
};

static void expect_bad(const char *key, const char *value, const char *why_has)
{
    struct cfg c, keep;
    memset(&c, 0x5a, sizeof c);
    keep = c;
    char why[256];
    const struct ini_key *k = ini_key_find(keys, sizeof keys / sizeof keys[0], "s", key, NULL);
    assert_non_null(k);
    assert_int_equal(ini_key_set(k, &c, value, why, sizeof why), -EINVAL);
    assert_memory_equal(&c, &keep, sizeof c);
    if (!strstr(why, why_has))
        fail_msg("%s = '%s': got '%s', want '%s'", key, value, why, why_has);
}

static void test_keys(void **state)
{
    (void)state;
    struct cfg c = { 0 };
    char why[128];
    bool known;
    assert_null(ini_key_find(keys, 7, "s", "nope", &known));
    assert_true(known);
    assert_null(ini_key_find(keys, 7, "t", "n", &known));
    assert_false(known);
    const struct ini_key *k = ini_key_find(keys, 7, "s", "n", NULL);
    assert_int_equal(ini_key_set(k, &c, "10", why, sizeof why), 0);
    assert_int_equal(c.n, 10);
    k = ini_key_find(keys, 7, "s", "dur", NULL);
    assert_int_equal(ini_key_set(k, &c, "5m", why, sizeof why), 0);
    assert_true(c.dur == 300);
    k = ini_key_find(keys, 7, "s", "on", NULL);
    assert_int_equal(ini_key_set(k, &c, "Yes", why, sizeof why), 0);
    assert_true(c.on);
    k = ini_key_find(keys, 7, "s", "seed", NULL);
    assert_int_equal(ini_key_set(k, &c, "18446744073709551615", why, sizeof why), 0);
    assert_true(c.seed == UINT64_MAX);
    k = ini_key_find(keys, 7, "s", "name", NULL);
    assert_int_equal(ini_key_set(k, &c, "seven77", why, sizeof why), 0);
    assert_string_equal(c.name, "seven77");

    expect_bad("n", "0", "'0' is out of range");
    expect_bad("n", "11", "out of range");
    expect_bad("n", "3x", "'3x' is not an integer");
    expect_bad("seed", "-1", "is not a non-negative integer");
    expect_bad("frac", "1", "'1' is not a fraction in [0, 1)"); /* open max, with its hint */
    expect_bad("frac", "nan", "is not a fraction");
    expect_bad("dur", "0", "out of range");                      /* open min */
    expect_bad("dur", "2 h", "is not a duration");
    expect_bad("on", "maybe", "is not a boolean");
    expect_bad("name", "eight888", "value too long");
    expect_bad("name", "", "empty value");
}

/* Durations past 30 days are -ERANGE, and a key says "too large" with the bound: "99999999999h"
 * was -EINVAL, which a key with a hint worded as "must be a duration greater than 0".  Hex and
 * exponent forms are -EDOM, said as such ("1e400" was "too large", "0x10" 16 s) */
static void test_duration_too_large(void **state)
{
    (void)state;
    double v = 7;
    assert_int_equal(ini_parse_duration("720h", &v), 0);
    assert_true(v == INI_DURATION_MAX_S);
    assert_int_equal(ini_parse_duration("30d", &v), -EINVAL); /* no 'd' unit: malformed, not large */
    v = 7;
    static const char *const large[] = { "99999999999h", "721h", "43201m", "2592001", "2592000001ms",
                                         "0000000000000000000000000000000000000000000000000000000000000000000002592001",
                                         "123456789012345678901234567890", "123456789012345678901s", NULL };
    for (int i = 0; large[i]; i++) {
        if (ini_parse_duration(large[i], &v) != -ERANGE)
            fail_msg("'%s': want -ERANGE", large[i]);
        assert_true(v == 7); /* untouched */
    }
    /* malformed stays -EINVAL, overflowing or not */
    assert_int_equal(ini_parse_duration("-1e400", &v), -EINVAL);
    assert_int_equal(ini_parse_duration("1.2.3s", &v), -EINVAL);
    assert_int_equal(ini_parse_duration(".", &v), -EINVAL);
    /* strtod's hex and exponent forms are refused, said as such: "0x10" was 16 s, "1e2" 100 s,
     * and "1e400" too large */
    static const char *const forms[] = { "0x10", "0X1p4", "1e2", "1E2s", "1e400", "1e400h", "1e-400x", "2.5e+1m", NULL };
    for (int i = 0; forms[i]; i++)
        if (ini_parse_duration(forms[i], &v) != -EDOM)
            fail_msg("'%s': want -EDOM", forms[i]);
    assert_true(v == 7); /* untouched */
    assert_int_equal(ini_parse_duration("1em", &v), -EINVAL); /* no exponent there: a bad unit */
    expect_bad("long", "0x10", "'0x10' is not a duration: hex and exponent forms are not taken");
    expect_bad("long", "1e2", "'1e2' is not a duration: hex and exponent forms are not taken; write decimal "
                              "digits with a unit, like 30s, 5m, 1h, 250ms, or plain seconds");
    /* what stays: decimal forms with every unit, leading zeros, a long fraction */
    static const struct { const char *s; double v; } ok[] = {
        { "90s", 90 }, { "2m", 120 }, { "1.5m", 90 }, { ".5", 0.5 }, { "5.", 5 }, { "250ms", 0.25 },
        { "1h", 3600 }, { "007", 7 }, { "0.000000000000000000000000000000000000000000000000000000000000000001", 0 },
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        double got = -1;
        assert_int_equal(ini_parse_duration(ok[i].s, &got), 0);
        if (!(got >= ok[i].v - 1e-12 && got <= ok[i].v + 1e-12))
            fail_msg("'%s': %g, want %g", ok[i].s, got, ok[i].v);
    }
    expect_bad("long", "99999999999h", "'99999999999h' is too large (at most 720h (30 days))");
    /* the hint is for a duration out of range: one that is none says so, with the units */
    expect_bad("long", "0", "'0' must be a duration greater than 0");
    expect_bad("long", "soon", "'soon' is not a duration: give a number with a unit of ms, s, m or h");
    expect_bad("long", "1d", "'1d' is not a duration: " INI_DURATION_FORMS_WORDS);
    /* a key whose own bound is lower says its own words */
    expect_bad("dur", "99999999999h", "'99999999999h' is out of range");
    struct cfg c = { 0 };
    char why[128];
    const struct ini_key *k = ini_key_find(keys, sizeof keys / sizeof keys[0], "s", "long", NULL);
    assert_int_equal(ini_key_set(k, &c, "720h", why, sizeof why), 0);
    assert_true(c.longdur == INI_DURATION_MAX_S);
}

/* The comment rule docs/config.md states, as the reader applies it (libinih's inline comments):
 * `;` or `#` first on a line (after blanks) makes a comment line; after that, only a `;` that
 * follows a blank starts a comment, anywhere after the `=`, the blank after `=` included, so a
 * value that is all comment is empty; `#` and a `;` with no blank before it stay in the value,
 * and quotes keep nothing together.  A section line takes a comment too. */
static void test_inline_comments(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want;
    } rows[] = {
        { "[a]\nx = v ; c\n", "[a]@1 a.x=v@2 " },
        { "[a]\nx = v\t; tab\n", "[a]@1 a.x=v@2 " },
        { "[a]\nx = v ;\n", "[a]@1 a.x=v@2 " },
        { "[a]\nx = a ;b ;c\n", "[a]@1 a.x=a@2 " },           /* the first one */
        { "[a]\nx = v;c\n", "[a]@1 a.x=v;c@2 " },             /* no blank before it: value */
        { "[a]\nx = --lr=0.1;y\n", "[a]@1 a.x=--lr=0.1;y@2 " },
        { "[a]\nx = v # c\n", "[a]@1 a.x=v # c@2 " },         /* '#' only starts a line's comment */
        { "[a]\nx = \"a ;b\"\n", "[a]@1 a.x=\"a@2 " },          /* quotes do not protect */
        { "[a]\nx = ;c\n", "[a]@1 a.x=@2 " },                 /* the blank after '=' counts */
        { "[a]\nx =;c\n", "[a]@1 a.x=;c@2 " },
        { "[a] ; about a\nx = 1\n", "[a]@1 a.x=1@2 " },
        { "; top\n# top\n[a]\n  ; in\n\t# in\nx = 1\n", "[a]@3 a.x=1@6 " },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct seen s = { .stop_at = 0 };
        struct ini_error e;
        assert_int_equal(read_text(rows[i].text, 64, &s, &e), 0);
        if (strcmp(s.log, rows[i].want) != 0)
            fail_msg("row %zu: got '%s', want '%s'", i, s.log, rows[i].want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader),
        cmocka_unit_test(test_inline_comments),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_duration_too_large),
        cmocka_unit_test(test_continued),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
