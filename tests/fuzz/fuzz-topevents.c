/* Fuzz target: event_parse (common/event.c) on arbitrary bytes (lines of a container agent's event journal,
 * read by `drover top` through `drover-agent events --json`), then formatting the result. */
#include <stddef.h>
#include <stdint.h>

#include "controller/top/top_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct event e;
    char out[512];
    if (event_parse((const char *)data, size, &e) == 0)
        (void)top_event_format(&e, out, sizeof out);
    return 0;
}
