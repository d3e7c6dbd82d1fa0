/* Fuzz target: objsync_fan_parse over arbitrary bytes (what a host's fan-out shell prints for
 * its containers): on success every container has an answer and every answer lies inside the
 * input. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "controller/deploy/objsync.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    for (int n = 1; n <= 3; n++) {
        struct fan_res fr[3];
        if (objsync_fan_parse(in, size, n, fr) < 0)
            continue;
        for (int k = 0; k < n; k++) {
            assert(fr[k].status >= 0 && fr[k].status <= 255);
            assert(fr[k].out >= in && fr[k].out + fr[k].out_len <= in + size);
            assert(fr[k].err >= in && fr[k].err + fr[k].err_len <= in + size);
        }
    }
    return 0;
}
