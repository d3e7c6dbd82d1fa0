/* Fuzz target: lease_parse (agent/lease.c) on arbitrary bytes; a parsed lease must format and
 * parse again to the same holder and times. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/lease.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct lease l, l2;
    if (lease_parse((const char *)data, size, &l) < 0)
        return 0;
    char *text = NULL;
    if (lease_format(&l, &text) == 0) {
        int r = lease_parse(text, strlen(text), &l2);
        assert(r == 0);
        assert(strcmp(l.holder, l2.holder) == 0 && l.ttl_s == l2.ttl_s);
        (void)r;
    }
    free(text);
    return 0;
}
