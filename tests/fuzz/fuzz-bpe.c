/* tests/fuzz/fuzz-bpe.c: the GPT-2 BPE vocabulary parsers and encoder (trainer/bpe.c) and the
 * Brown untagger (trainer/prepare.c).  First byte even: the rest is encoded with a small fixed
 * vocabulary (and untagged); odd: the rest is "encoder.json NUL vocab.bpe" to load. */
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/bpe.h"
#include "trainer/prepare.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char enc[] = "{\"a\":0,\"b\":1,\"c\":2,\"\\u0120\":3,\"ab\":4,\"abc\":5,\"\\u0120ab\":6,"
                          "\"bc\":7,\"1\":8,\"!\":9,\"\\u0120\\u0120\":10,\"\\u010a\":11}";
static const char merges[] = "#version: 0.2\na b\nab c\n\xc4\xa0 ab\nb c\n\xc4\xa0 \xc4\xa0\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    char err[256];
    struct bpe *b = NULL;
    if (data[0] % 2 == 0) {
        if (bpe_load_mem(enc, strlen(enc), merges, strlen(merges), &b, err, sizeof err) < 0)
            abort();
        uint32_t *ids = NULL;
        size_t n = 0, cap = 0;
        (void)bpe_encode(b, text, len, &ids, &n, &cap);
        free(ids);
        bpe_free(b);
        char *copy = malloc(len + 1);
        if (copy) {
            memcpy(copy, text, len);
            size_t m = prepare_untag_brown(copy, len);
            if (m > len)
                abort();
            free(copy);
        }
        return 0;
    }
    const char *nul = memchr(text, '\0', len);
    size_t elen = nul ? (size_t)(nul - text) : len;
    const char *m = nul ? nul + 1 : "";
    size_t mlen = nul ? len - elen - 1 : 0;
    if (bpe_load_mem(text, elen, m, mlen, &b, err, sizeof err) == 0) {
        uint32_t *ids = NULL;
        size_t n = 0, cap = 0;
        (void)bpe_encode(b, "hello world 123!", 16, &ids, &n, &cap);
        free(ids);
        bpe_free(b);
    }
    return 0;
}
