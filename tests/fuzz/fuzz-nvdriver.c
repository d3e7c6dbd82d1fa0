/* Fuzz target: nvdriver_parse_version on arbitrary bytes (a host's /proc/driver/nvidia/version,
 * read over SSH): never reads past len, and what it returns is a version. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/nvdriver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char v[NVDRIVER_VERSION_MAX];
    if (nvdriver_parse_version((const char *)data, size, v) == 0 && !nvdriver_is_version(v))
        abort();
    return 0;
}
