/* tests/fuzz/fuzz-shard.c: llm.c shard header validation (trainer/data.c) on arbitrary bytes,
 * with the file size taken as the input length. */
#include <stdint.h>
#include <stddef.h>

#include "trainer/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int64_t n;
    (void)shard_header_parse(data, size, size, &n);
    (void)shard_header_parse(data, size, 0, &n);
    return 0;
}
