/* Fuzz target: manifest2_parse (and m2_ranges_parse, the agent's `release missing` answer, and
 * manifest2_env_of, the head reader) on arbitrary bytes; a parsed manifest must dump to the same
 * bytes (the text is canonical), every symlink must resolve inside the release, and the head
 * reader must name the environment the full parse found. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/manifest2.h"

static int nop(size_t start, size_t count, void *ctx)
{
    (void)start;
    (void)count;
    (void)ctx;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)m2_ranges_parse((const char *)data, size, 1000, nop, NULL);
    char env[RELEASE_ID_LEN + 1];
    int he = manifest2_env_of((const char *)data, size, env);
    struct manifest2 *m = NULL;
    if (manifest2_parse((const char *)data, size, &m) < 0)
        return 0;
    assert(manifest2_check_links(m, NULL) == 0);
    assert(he == (m->env[0] ? 1 : 0) && (he != 1 || strcmp(env, m->env) == 0));
    char *text = NULL, id[RELEASE_ID_LEN + 1];
    size_t len = 0;
    if (manifest2_dump(m, &text, &len, id) == 0) {
        assert(len == size && memcmp(text, data, size) == 0);
        free(text);
    }
    manifest2_free(m);
    return 0;
}
