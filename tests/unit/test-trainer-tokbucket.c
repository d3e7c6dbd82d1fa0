/* tests/unit/test-trainer-tokbucket.c: the embedding backward's token buckets (trainer/tokbucket.c)
 * against a brute-force grouping: every position once, grouped by ascending token, ascending
 * within a token; the count scratch left zero so a second call with other tokens is unaffected;
 * bad sizes refused with nothing written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/tokbucket.h"

/* every bucket checked against a scan of tokens[] in position order */
static void check_buckets(const int *tok, int n, int vocab, const int *uniq, const int *start,
                          const int *pos, int nu)
{
    int seen = 0, prev_tok = -1;
    assert_int_equal(start[0], 0);
    for (int u = 0; u < nu; u++) {
        assert_true(uniq[u] > prev_tok && uniq[u] < vocab);
        prev_tok = uniq[u];
        int k = start[u];
        for (int i = 0; i < n; i++)
            if (tok[i] == uniq[u]) {
                assert_true(k < start[u + 1]);
                assert_int_equal(pos[k++], i);
            }
        assert_int_equal(k, start[u + 1]);
        seen += start[u + 1] - start[u];
    }
    assert_int_equal(seen, n);
    assert_int_equal(start[nu], n);
    for (int i = 0; i < n; i++) { /* every token present has its bucket */
        int found = 0;
        for (int u = 0; u < nu; u++)
            found |= uniq[u] == tok[i];
        assert_true(found);
    }
}

static void test_buckets_small(void **state)
{
    (void)state;
    const int tok[] = {5, 1, 5, 0, 7, 1, 5, 7};
    int cnt[8] = {0}, uniq[8], start[9], pos[8], nu = -1;
    assert_int_equal(tokbucket_build(tok, 8, 8, cnt, uniq, start, pos, &nu), 0);
    assert_int_equal(nu, 4);
    const int want_uniq[] = {0, 1, 5, 7}, want_start[] = {0, 1, 3, 6, 8};
    const int want_pos[] = {3, 1, 5, 0, 2, 6, 4, 7};
    assert_memory_equal(uniq, want_uniq, sizeof want_uniq);
    assert_memory_equal(start, want_start, sizeof want_start);
    assert_memory_equal(pos, want_pos, sizeof want_pos);
    for (int t = 0; t < 8; t++)
        assert_int_equal(cnt[t], 0);
}

static void test_buckets_random_reuse(void **state)
{
    (void)state;
    enum { N = 3000, V = 257 };
    int *tok = malloc(N * sizeof(int)), *cnt = calloc(V, sizeof(int));
    int *uniq = malloc(N * sizeof(int)), *start = malloc((N + 1) * sizeof(int));
    int *pos = malloc(N * sizeof(int));
    assert_non_null(tok && cnt && uniq && start && pos);
    unsigned x = 12345;
    for (int round = 0; round < 3; round++) { /* the scratch carried over between calls */
        int n = round == 2 ? 0 : N - round * 1000, vocab = round == 1 ? 7 : V;
        for (int i = 0; i < n; i++) {
            x = x * 1103515245u + 12345u;
            tok[i] = (int)((x >> 8) % (unsigned)vocab);
        }
        int nu = -1;
        assert_int_equal(tokbucket_build(tok, n, vocab, cnt, uniq, start, pos, &nu), 0);
        check_buckets(tok, n, vocab, uniq, start, pos, nu);
        for (int t = 0; t < V; t++)
            assert_int_equal(cnt[t], 0);
    }
    free(tok);
    free(cnt);
    free(uniq);
    free(start);
    free(pos);
}

static void test_buckets_reject(void **state)
{
    (void)state;
    int tok[1] = {0}, cnt[1] = {0}, uniq[1] = {-7}, start[2] = {-7, -7}, pos[1] = {-7}, nu = -7;
    assert_int_equal(tokbucket_build(tok, -1, 1, cnt, uniq, start, pos, &nu), -EINVAL);
    assert_int_equal(tokbucket_build(tok, 1, 0, cnt, uniq, start, pos, &nu), -EINVAL);
    assert_int_equal(nu, -7);
    assert_int_equal(uniq[0], -7);
    assert_int_equal(start[0], -7);
    assert_int_equal(pos[0], -7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buckets_small),
        cmocka_unit_test(test_buckets_random_reuse),
        cmocka_unit_test(test_buckets_reject),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
