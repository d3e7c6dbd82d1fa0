/* Fuzz target: samples_parse on arbitrary bytes (a baseline sample set from an agent's store or
 * the controller's state_dir), then a format round trip of what parsed. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/samples.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct sample_set s, back;
    char *text;
    if (samples_parse((const char *)data, size, &s) != 0)
        return 0;
    if (samples_format(&s, &text) == 0) {
        if (samples_parse(text, strlen(text), &back) != 0 || back.n != s.n)
            abort();
        free(text);
    }
    return 0;
}
