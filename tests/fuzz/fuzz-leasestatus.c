/* Fuzz target: the answer of `drover-agent lease take ... --status` as the controller reads it
 * (controller/deploy/lease.c, lease_done): the lease's lines, then the status document found
 * by status_after_lease() and parsed by status_parse(), and the takeover line searched for only
 * before the document. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *out = (const char *)data;
    size_t off = 0, len = 0, lines = size;
    struct agent_status *st = malloc(sizeof *st);
    if (!st)
        return 0;
    if (status_after_lease(out, size, &off, &len) == 0) {
        if (off > size || len > size - off || len == 0 || out[off] != '{' || memchr(out + off, '\n', len))
            abort();
        lines = off;
        if (status_parse(out + off, len, st) == 0) {
            const struct job_status *js = status_find_job(st, "train");
            if (js && (js->nranks < 0 || js->nranks > STATUS_MAX_RANKS))
                abort();
        }
    }
    const char *over = memmem(out, lines, "deploy lease taken over by", 26);
    if (over && (over < out || over + 26 > out + lines))
        abort();
    free(st);
    return 0;
}
