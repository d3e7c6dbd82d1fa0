/* Fuzz target: heartbeat_parse on arbitrary bytes (lines from an untrusted worker). */
#include <stddef.h>
#include <stdint.h>

#include "common/heartbeat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct heartbeat hb;
    char out[HEARTBEAT_LINE_MAX];
    if (heartbeat_parse((const char *)data, size, &hb) == 0)
        (void)heartbeat_format(&hb, out, sizeof out);
    return 0;
}
