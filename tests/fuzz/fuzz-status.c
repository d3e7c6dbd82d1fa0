/* Fuzz target: status_parse on arbitrary bytes (documents read from a container). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct agent_status *st = malloc(sizeof *st);
    if (!st)
        return 0;
    if (status_parse((const char *)data, size, st) == 0) {
        char *text = NULL;
        if (status_format(st, &text) == 0)
            free(text);
    }
    free(st);
    return 0;
}
