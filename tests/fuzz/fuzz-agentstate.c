/* Fuzz target: state_parse (agent/state.c) on arbitrary bytes; a parsed state must format and
 * parse again to the same text. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct agent_state st, st2;
    if (state_parse((const char *)data, size, &st) < 0)
        return 0;
    char *text = NULL, *text2 = NULL;
    if (state_format(&st, &text) == 0) {
        int r = state_parse(text, strlen(text), &st2);
        assert(r == 0);
        (void)r;
        if (state_format(&st2, &text2) == 0)
            assert(strcmp(text, text2) == 0);
        state_done(&st2);
    }
    free(text);
    free(text2);
    state_done(&st);
    return 0;
}
