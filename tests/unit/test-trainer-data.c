/* tests/unit/test-trainer-data.c: shard header validation, shard write/read, the loader's
 * sequential positions, rank striding, wrap-around and its error paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "trainer/data.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/drover-test-data.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return fs_rm_rf(dir);
}

static void make_header(uint8_t *h, int32_t magic, int32_t ver, int32_t n)
{
    memset(h, 0, SHARD_HEADER_BYTES);
    memcpy(h, &magic, 4);
    memcpy(h + 4, &ver, 4);
    memcpy(h + 8, &n, 4);
}

static void test_header_validation(void **state)
{
    (void)state;
    uint8_t h[SHARD_HEADER_BYTES];
    int64_t n = 77;
    make_header(h, SHARD_MAGIC, 1, 10);
    assert_int_equal(shard_header_parse(h, sizeof h, 0, &n), 0);
    assert_int_equal(n, 10);
    assert_int_equal(shard_header_parse(h, sizeof h, SHARD_HEADER_BYTES + 20, &n), 0);
    n = 77;
    assert_int_equal(shard_header_parse(h, sizeof h, SHARD_HEADER_BYTES + 19, &n), -EINVAL);
    assert_int_equal(shard_header_parse(h, sizeof h - 1, 0, &n), -EINVAL);
    make_header(h, 20240519, 1, 10);
    assert_int_equal(shard_header_parse(h, sizeof h, 0, &n), -EINVAL);
    make_header(h, SHARD_MAGIC, 2, 10);
    assert_int_equal(shard_header_parse(h, sizeof h, 0, &n), -EPROTONOSUPPORT);
    make_header(h, SHARD_MAGIC, 1, 0);
    assert_int_equal(shard_header_parse(h, sizeof h, 0, &n), -EINVAL);
    make_header(h, SHARD_MAGIC, 1, -5);
    assert_int_equal(shard_header_parse(h, sizeof h, 0, &n), -EINVAL);
    assert_int_equal(n, 77); /* untouched on failure */
}

static void test_loader_sequence_and_ranks(void **state)
{
    (void)state;
    char p[128];
    uint16_t tok[100];
    for (int i = 0; i < 100; i++)
        tok[i] = (uint16_t)i;
    snprintf(p, sizeof p, "%s/a_000.bin", dir);
    assert_int_equal(shard_write(p, tok, 100), 0);
    for (int i = 0; i < 100; i++)
        tok[i] = (uint16_t)(1000 + i);
    snprintf(p, sizeof p, "%s/a_001.bin", dir);
    assert_int_equal(shard_write(p, tok, 50), 0);

    char pat[128], err[256];
    snprintf(pat, sizeof pat, "%s/a_*.bin", dir);
    struct loader *l0, *l1;
    /* B=2 T=4: a step of 2 ranks consumes 16 tokens */
    assert_int_equal(loader_open(pat, 2, 4, 0, 2, &l0, err, sizeof err), 0);
    assert_int_equal(loader_open(pat, 2, 4, 1, 2, &l1, err, sizeof err), 0);
    assert_int_equal(loader_num_shards(l0), 2);
    assert_int_equal(loader_num_tokens(l0), 150);
    int in[8], tg[8];
    assert_int_equal(loader_next(l0, 65536, in, tg, err, sizeof err), 0);
    assert_int_equal(in[0], 0);
    assert_int_equal(in[7], 7);
    assert_int_equal(tg[7], 8);
    assert_int_equal(loader_next(l1, 65536, in, tg, err, sizeof err), 0);
    assert_int_equal(in[0], 8); /* disjoint stride */
    assert_int_equal(tg[7], 16);
    struct data_pos pos;
    loader_get_pos(l0, &pos);
    assert_int_equal(pos.shard, 0);
    assert_int_equal(pos.offset, 16);
    /* steps at 16, 32, 48, 64, 80 fit (80+16+1 <= 100 is false: 97 <= 100 true) */
    for (int s = 0; s < 5; s++)
        assert_int_equal(loader_next(l0, 65536, in, tg, err, sizeof err), 0);
    loader_get_pos(l0, &pos);
    assert_int_equal(pos.shard, 1); /* moved to the next shard */
    assert_int_equal(pos.offset, 0);
    assert_int_equal(loader_next(l0, 65536, in, tg, err, sizeof err), 0);
    assert_int_equal(in[0], 1000);
    /* token out of vocabulary */
    assert_int_equal(loader_next(l0, 1000, in, tg, err, sizeof err), -ERANGE);
    assert_non_null(strstr(err, "outside the vocabulary"));
    /* positions: valid and invalid */
    struct data_pos bad = {5, 0};
    assert_int_equal(loader_set_pos(l0, &bad), -EINVAL);
    bad = (struct data_pos){1, 40};
    assert_int_equal(loader_set_pos(l0, &bad), -EINVAL);
    struct data_pos good = {0, 3};
    assert_int_equal(loader_set_pos(l0, &good), 0);
    assert_int_equal(loader_next(l0, 65536, in, tg, err, sizeof err), 0);
    assert_int_equal(in[0], 3);
    loader_free(l0);
    loader_free(l1);
    loader_free(NULL);
}

static void test_loader_errors(void **state)
{
    (void)state;
    char p[128], err[256];
    struct loader *l = (struct loader *)0x1;
    snprintf(p, sizeof p, "%s/missing.bin", dir);
    assert_int_equal(loader_open(p, 2, 4, 0, 1, &l, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, p));
    assert_ptr_equal(l, (struct loader *)0x1);
    /* too small for one step */
    uint16_t tok[8] = {0};
    snprintf(p, sizeof p, "%s/small.bin", dir);
    assert_int_equal(shard_write(p, tok, 8), 0);
    assert_int_equal(loader_open(p, 2, 4, 0, 1, &l, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "a step needs 9"));
    /* truncated file */
    snprintf(p, sizeof p, "%s/trunc.bin", dir);
    uint8_t h[SHARD_HEADER_BYTES + 10];
    make_header(h, SHARD_MAGIC, 1, 100);
    assert_int_equal(fs_write_atomic(p, h, sizeof h, 0644), 0);
    assert_int_equal(loader_open(p, 1, 1, 0, 1, &l, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "not a valid token shard"));
    assert_int_equal(loader_open(p, 1, 1, 2, 2, &l, err, sizeof err), -EINVAL); /* rank >= world */
    assert_int_equal(shard_write(p, tok, 0), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_validation),
        cmocka_unit_test(test_loader_sequence_and_ranks),
        cmocka_unit_test(test_loader_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
