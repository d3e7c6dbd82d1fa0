/* Fuzz target: known_hosts filtering for `drover trust --replace` (controller/transport/knownhosts.c). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "controller/transport/knownhosts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *out;
    int removed;
    if (knownhosts_remove((const char *)data, size, "[127.0.0.2]:2222", &out, &removed) == 0) {
        if (strlen(out) > size || removed < 0)
            abort(); /* output is a subset of the input lines */
        char *again;
        int removed2;
        if (knownhosts_remove(out, strlen(out), "[127.0.0.2]:2222", &again, &removed2) == 0) {
            if (removed2 != 0 && memchr(data, '\0', size) == NULL)
                abort(); /* filtering is idempotent */
            free(again);
        }
        free(out);
    }
    return 0;
}
