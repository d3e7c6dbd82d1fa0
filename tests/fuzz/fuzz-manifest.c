/* Fuzz target: manifest_parse on arbitrary bytes; a parsed manifest must dump and re-parse. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct manifest *m = NULL, *m2 = NULL;
    if (manifest_parse((const char *)data, size, &m) < 0)
        return 0;
    char *text = NULL, id[RELEASE_ID_LEN + 1];
    if (manifest_dump(m, &text, id) == 0) {
        int r = manifest_parse(text, strlen(text), &m2);
        assert(r == 0);
        (void)r;
        free(text);
    }
    manifest_free(m2);
    manifest_free(m);
    return 0;
}
