/* Fuzz target: rpc_parse_request (agent/rpc.c), the daemon's parser of control-socket requests;
 * a parsed request must format and parse again. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rpc_request q, q2;
    if (rpc_parse_request((const char *)data, size, &q) < 0)
        return 0;
    char *text = NULL;
    if (rpc_format_request(&q, &text) == 0) {
        int r = rpc_parse_request(text, strlen(text), &q2);
        assert(r == 0);
        (void)r;
        assert(q2.op == q.op && strcmp(q2.job, q.job) == 0);
        rpc_request_done(&q2);
        free(text);
    }
    rpc_request_done(&q);
    return 0;
}
