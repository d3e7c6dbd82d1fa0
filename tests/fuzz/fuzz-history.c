/* Fuzz target: the two readers of a history record drover sends and reads back, on arbitrary
 * bytes: history_line_check (agent/history.c, the agent's check in drover-agent history add) and
 * state_history_parse_lines (controller/deploy/state.c: what `drover-agent history list` printed,
 * reason_code by name or derived from an older record's words; the lines it could not read
 * counted, never more than there are). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/history.h"
#include "controller/deploy/state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)history_line_check((const char *)data, size, "train");
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct history_entry *h = NULL;
    size_t n = 0, skipped = 0;
    if (state_history_parse_lines(text, "train", &h, &n, &skipped) == 0) {
        for (size_t i = 0; i < n; i++)
            (void)history_reason_name(h[i].reason_code);
        if (n + skipped > size) /* each record, each unreadable line, holds a byte at least */
            abort();
    }
    free(h);
    free(text);
    return 0;
}
