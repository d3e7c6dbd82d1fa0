/* Fuzz target: text_escape on arbitrary bytes (worker and remote text): the result is bounded,
 * valid UTF-8, and holds no byte a terminal or journald acts on. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char out[256];
    size_t sz = size % sizeof out + 1;
    text_escape((const char *)data, size, out, sz);
    size_t n = strlen(out);
    if (n >= sz || !text_is_utf8(out, n) || text_needs_escape(out, n))
        abort();
    (void)text_is_utf8((const char *)data, size);
    return 0;
}
