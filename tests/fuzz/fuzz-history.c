/* Fuzz target: history_line_check (agent/history.c) on arbitrary bytes, the agent's check of a
 * history record drover sends (drover-agent history add). */
#include <stddef.h>
#include <stdint.h>

#include "agent/history.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)history_line_check((const char *)data, size, "train");
    return 0;
}
