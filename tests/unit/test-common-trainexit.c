/* Unit tests for common/trainexit.c, drover-train's exit code table: docs/errors.md's
 * "drover-train" table and the code's table agree row for row (code, name, retry), so adding or
 * changing a code without its documentation fails here; the restart policy's "no retry" set is
 * the documented one. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/trainexit.h"
#include "common/util.h"

struct doc_row {
    int code;
    char name[32];
    char retry[16];
};

/* Rows "| N | name | meaning | retry |" of the "## drover-train" section, up to the next "## ". */
static int doc_rows(struct doc_row *rows, int max)
{
    char *text = NULL;
    size_t len;
    assert_int_equal(fs_read_file("docs/errors.md", 1 << 20, &text, &len), 0);
    char *sec = strstr(text, "## drover-train");
    assert_non_null(sec);
    char *end = strstr(sec + 3, "\n## ");
    if (end)
        *end = '\0';
    int n = 0;
    char *save = NULL;
    for (char *line = strtok_r(sec, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int code;
        char name[32], retry[16];
        if (sscanf(line, "| %d | %31[^ |] |", &code, name) != 2)
            continue;
        char *last = strrchr(line, '|');
        *last = '\0';
        char *cell = strrchr(line, '|');
        assert_non_null(cell);
        if (sscanf(cell + 1, " %15s", retry) != 1)
            continue;
        assert_true(n < max);
        rows[n].code = code;
        (void)str_copy(rows[n].name, sizeof rows[n].name, name);
        (void)str_copy(rows[n].retry, sizeof rows[n].retry, retry);
        n++;
    }
    free(text);
    return n;
}

static void test_docs_match_table(void **state)
{
    (void)state;
    struct doc_row rows[64];
    int n = doc_rows(rows, 64);
    assert_true(n >= 10);
    for (size_t i = 0; i < train_exit_count; i++) {
        const struct train_exit_info *x = &train_exit_table[i];
        int found = -1;
        for (int k = 0; k < n; k++)
            if (rows[k].code == x->code)
                found = k;
        if (found < 0)
            fail_msg("docs/errors.md has no drover-train row for code %d (%s)", x->code, x->name);
        if (strcmp(rows[found].name, x->name) != 0)
            fail_msg("code %d: docs/errors.md says '%s', common/trainexit.c '%s'", x->code,
                     rows[found].name, x->name);
        if (strcmp(rows[found].retry, train_retry_word(x->retry)) != 0)
            fail_msg("code %d: docs/errors.md's retry is '%s', common/trainexit.c's '%s'", x->code,
                     rows[found].retry, train_retry_word(x->retry));
    }
    for (int k = 0; k < n; k++) {
        if (rows[k].name[0] == '(')
            continue; /* a signal death shown as 128 + N, not an exit code */
        if (!train_exit_info(rows[k].code))
            fail_msg("docs/errors.md documents drover-train code %d (%s), common/trainexit.c lacks it",
                     rows[k].code, rows[k].name);
    }
}

static void test_lookup_and_policy(void **state)
{
    (void)state;
    for (size_t i = 1; i < train_exit_count; i++)
        assert_true(train_exit_table[i - 1].code < train_exit_table[i].code);
    assert_string_equal(train_exit_info(TX_DISK_FULL)->name, "disk_full");
    assert_string_equal(train_exit_info(TX_PEER_STOPPED)->name, "peer_stopped");
    assert_int_equal(TX_PEER_STOPPED, 12); /* never renumbered */
    assert_null(train_exit_info(13));
    assert_null(train_exit_info(-1));
    const int no[] = { TX_USAGE, TX_CONFIG, TX_DATA, TX_DISK_FULL, TX_DIVERGED, TX_NOMEM, TX_SELFTEST };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        assert_true(train_exit_is_nonretryable(no[i]));
    assert_true(train_exit_is_peer_effect(TX_PEER_LOST));
    assert_true(train_exit_is_peer_effect(TX_PEER_STOPPED));
    assert_false(train_exit_is_peer_effect(TX_FAILURE));
    assert_false(train_exit_is_peer_effect(TX_OK));
    assert_false(train_exit_is_peer_effect(134));
    const int retry[] = { TX_OK, TX_FAILURE, TX_CHECKPOINT, TX_PEER_LOST, TX_DEVICE, TX_PEER_STOPPED, TX_CUDA, 99, 137 };
    for (size_t i = 0; i < sizeof retry / sizeof retry[0]; i++)
        assert_false(train_exit_is_nonretryable(retry[i]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docs_match_table),
        cmocka_unit_test(test_lookup_and_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
