/* Fuzz target: /proc/<pid>/stat texts (common/procstat.c) and deploy lease holder names
 * (controller/deploy/holder.c, read from an agent's refusal line: remote input). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/procstat.h"
#include "controller/deploy/holder.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct proc_stat ps;
    if (proc_stat_parse(text, &ps) == 0 && !ps.state)
        abort();
    struct holder h;
    if (holder_parse(text, &h) == 0) {
        if (!h.host[0] || h.pid <= 0 || strlen(h.host) >= sizeof h.host || strlen(h.boot) >= sizeof h.boot)
            abort();
        struct holder me = h;
        (void)holder_judge(&h, &me, 0, h.start, h.has_start);
    }
    free(text);
    return 0;
}
