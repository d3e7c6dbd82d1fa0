/* The job's history kept by the agent (agent/history.c): which lines it accepts, that it keeps
 * the newest HISTORY_KEEP in order, and that a damaged file hides nothing else. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/history.h"
#include "common/util.h"

static void test_line_check(void **state)
{
    (void)state;
    const char *ok = "{\"v\":1,\"job\":\"train\",\"time\":1764552000.5,\"result\":\"promoted\"}";
    assert_int_equal(history_line_check(ok, strlen(ok), "train"), 0);
    assert_int_equal(history_line_check(ok, strlen(ok), "eval"), -EINVAL); /* another job's */
    const char *bad[] = {
        "", "[]", "{\"v\":1,\"job\":\"train\"}", "{\"v\":2,\"job\":\"train\",\"time\":1}",
        "{\"v\":1,\"job\":\"train\",\"time\":\"now\"}", "{\"v\":1,\"job\":7,\"time\":1}",
        "{\"v\":1,\"job\":\"train\",\"time\":1,\"v\":1}", /* duplicate key */
        "{\"v\":1,\"job\":\"train\",\"time\":1}\n{\"v\":1,\"job\":\"train\",\"time\":2}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (history_line_check(bad[i], strlen(bad[i]), "train") != -EINVAL)
            fail_msg("accepted '%s'", bad[i]);
    char big[HISTORY_LINE_MAX + 64];
    int n = snprintf(big, sizeof big, "{\"v\":1,\"job\":\"train\",\"time\":1,\"reason\":\"");
    memset(big + n, 'x', sizeof big - (size_t)n - 3);
    memcpy(big + sizeof big - 3, "\"}", 3);
    assert_int_equal(history_line_check(big, strlen(big), "train"), -E2BIG);
}

static void test_add_dump_keep(void **state)
{
    (void)state;
    char root[] = "/tmp/drover-history-test.XXXXXX";
    assert_non_null(mkdtemp(root));
    char *out = NULL;
    size_t outlen = 0;
    FILE *f = open_memstream(&out, &outlen);
    assert_int_equal(history_dump(root, "train", f), 0); /* none yet */
    fclose(f);
    assert_int_equal(outlen, 0);
    free(out);
    assert_int_equal(history_add(root, "train", "{\"v\":1,\"job\":\"eval\",\"time\":1}"), -EINVAL);
    assert_int_equal(history_add(root, "../x", "{\"v\":1,\"job\":\"../x\",\"time\":1}"), -EINVAL);
    char line[128];
    for (int i = 0; i < HISTORY_KEEP + 5; i++) {
        snprintf(line, sizeof line, "{\"v\":1,\"job\":\"train\",\"time\":%d}", i);
        assert_int_equal(history_add(root, "train", line), 0);
    }
    /* a torn line (a crash while something else wrote there) is skipped, not shown */
    char p[512];
    snprintf(p, sizeof p, "%s/jobs/train/history.jsonl", root);
    FILE *a = fopen(p, "a");
    fputs("{\"v\":1,\"job\":\"tr", a);
    fclose(a);
    f = open_memstream(&out, &outlen);
    assert_int_equal(history_dump(root, "train", f), 0);
    fclose(f);
    int lines = 0;
    for (size_t i = 0; i < outlen; i++)
        lines += out[i] == '\n';
    assert_int_equal(lines, HISTORY_KEEP);
    assert_int_equal(strncmp(out, "{\"v\":1,\"job\":\"train\",\"time\":5}\n", 31), 0); /* oldest kept */
    assert_non_null(strstr(out, "\"time\":504}\n"));
    free(out);
    /* the next record after the torn line is kept whole: the trim once copied the file's bytes
     * and glued the new line onto the torn one, losing the record (now one walk, records only) */
    assert_int_equal(history_add(root, "train", "{\"v\":1,\"job\":\"train\",\"time\":505}"), 0);
    f = open_memstream(&out, &outlen);
    assert_int_equal(history_dump(root, "train", f), 0);
    fclose(f);
    lines = 0;
    for (size_t i = 0; i < outlen; i++)
        lines += out[i] == '\n';
    assert_int_equal(lines, HISTORY_KEEP);
    assert_int_equal(strncmp(out, "{\"v\":1,\"job\":\"train\",\"time\":6}\n", 31), 0);
    assert_non_null(strstr(out, "\"time\":504}\n{\"v\":1,\"job\":\"train\",\"time\":505}\n"));
    free(out);
    /* the torn line left the file with that rewrite, set aside, not dropped in silence; the
     * records trimmed past HISTORY_KEEP are not (that is the keep rule) */
    char aside[600], *got = NULL;
    size_t gotlen = 0;
    snprintf(aside, sizeof aside, "%s.unreadable", p);
    assert_int_equal(fs_read_file(aside, 4096, &got, &gotlen), 0);
    assert_int_equal(gotlen, strlen("{\"v\":1,\"job\":\"tr\n"));
    assert_memory_equal(got, "{\"v\":1,\"job\":\"tr\n", gotlen);
    free(got);
    /* a clean rewrite adds nothing there */
    assert_int_equal(history_add(root, "train", "{\"v\":1,\"job\":\"train\",\"time\":506}"), 0);
    assert_int_equal(fs_read_file(aside, 4096, &got, &gotlen), 0);
    assert_int_equal(gotlen, strlen("{\"v\":1,\"job\":\"tr\n"));
    free(got);
    assert_int_equal(fs_rm_rf(root), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_check),
        cmocka_unit_test(test_add_dump_keep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
