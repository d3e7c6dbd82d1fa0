/* tests/fuzz/fuzz-trainconfig.c: drover-train's INI config parser (trainer/config.c). */
#include <stdint.h>
#include <stddef.h>

#include "trainer/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct train_config c;
    char err[256];
    (void)train_config_parse("fuzz.ini", (const char *)data, size, &c, err, sizeof err);
    return 0;
}
