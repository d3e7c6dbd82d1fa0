/* Unit tests for controller/transport/quote.c: every hostile word must reach the remote program byte for
 * byte after one pass through /bin/sh, and nothing may be expanded or executed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "controller/transport/quote.h"

static const char *hostile[] = {
    "plain",
    "",
    "two words",
    "it's",
    "'",
    "''",
    "\"double\"",
    "$(touch /tmp/drover-quote-pwned)",
    "`touch /tmp/drover-quote-pwned`",
    "$HOME",
    "${PATH}",
    "a;b",
    "a|b&c",
    "line1\nline2",
    "tab\there",
    "back\\slash",
    "*",
    "~",
    "-rf",
    "--",
    "!event",
    "#comment",
    "x > /tmp/drover-quote-pwned",
    "\xc3\xa9t\xc3\xa9",
};

static void test_plain_words_unquoted(void **state)
{
    (void)state;
    const char *argv[] = { "pct", "exec", "101", "--", "/usr/local/bin/drover-agent", "--job=a,b", NULL };
    char *line;
    assert_int_equal(quote_argv(argv, &line), 0);
    assert_string_equal(line, "pct exec 101 -- /usr/local/bin/drover-agent --job=a,b");
    free(line);
}

static void test_exact_forms(void **state)
{
    (void)state;
    const char *argv[] = { "echo", "", "it's", "a b", "$(x)", NULL };
    char *line;
    assert_int_equal(quote_argv(argv, &line), 0);
    assert_string_equal(line, "echo '' 'it'\\''s' 'a b' '$(x)'");
    free(line);
}

/* Run the quoted line through sh and read back each argument, NUL-separated. */
static void test_roundtrip_through_sh(void **state)
{
    (void)state;
    (void)unlink("/tmp/drover-quote-pwned");
    size_t n = sizeof hostile / sizeof hostile[0];
    const char *argv[64];
    argv[0] = "printf";
    argv[1] = "%s\\0";
    for (size_t i = 0; i < n; i++)
        argv[2 + i] = hostile[i];
    argv[2 + n] = NULL;
    char *line;
    assert_int_equal(quote_argv(argv, &line), 0);
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(p[1], 1);
        execl("/bin/sh", "sh", "-c", line, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char out[8192];
    size_t len = 0;
    ssize_t k;
    while ((k = read(p[0], out + len, sizeof out - len)) > 0)
        len += (size_t)k;
    close(p[0]);
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(off < len);
        assert_string_equal(out + off, hostile[i]);
        off += strlen(hostile[i]) + 1;
    }
    assert_int_equal(off, len);
    assert_int_not_equal(access("/tmp/drover-quote-pwned", F_OK), 0);
    free(line);
}

static void test_errors(void **state)
{
    (void)state;
    char *line = (char *)0x1;
    const char *empty[] = { NULL };
    assert_int_equal(quote_argv(empty, &line), -EINVAL);
    assert_ptr_equal(line, (char *)0x1); /* untouched on failure */
    char *big = malloc(QUOTE_LINE_MAX + 10);
    memset(big, '\'', QUOTE_LINE_MAX / 2);
    big[QUOTE_LINE_MAX / 2] = '\0';
    const char *argv[] = { "x", big, NULL };
    assert_int_equal(quote_argv(argv, &line), -E2BIG);
    assert_ptr_equal(line, (char *)0x1);
    free(big);
    char small[8];
    size_t off = 0;
    assert_int_equal(quote_word("it's long", small, sizeof small, &off), -ENOSPC);
    assert_int_equal(off, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_words_unquoted),
        cmocka_unit_test(test_exact_forms),
        cmocka_unit_test(test_roundtrip_through_sh),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
