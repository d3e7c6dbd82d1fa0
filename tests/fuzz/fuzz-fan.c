/* Fuzz target: objsync_fan_parse over arbitrary bytes (what a host's fan-out shell prints for
 * its containers): on success every container has an answer and every answer lies inside the
 * input.  The last answer is also read as the host store's ask-lacks answer
 * (objsync_lacks_filter) against a small manifest: what it keeps is a subset of the list. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "controller/deploy/objsync.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct manifest2 *m;
    if (!m) {
        static const char man[] =
            "drover-manifest 2\nname t\n"
            "f 0644 1 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa a.py\n"
            "f 0644 2 bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb b.py\n";
        if (manifest2_parse(man, sizeof man - 1, &m) < 0)
            abort();
    }
    const char *in = (const char *)data;
    for (int n = 1; n <= 3; n++) {
        struct fan_res fr[3];
        if (objsync_fan_parse(in, size, n, fr) < 0)
            continue;
        for (int k = 0; k < n; k++) {
            assert(fr[k].status >= 0 && fr[k].status <= 255);
            assert(fr[k].out >= in && fr[k].out + fr[k].out_len <= in + size);
            assert(fr[k].err >= in && fr[k].err + fr[k].err_len <= in + size);
        }
        size_t list[] = { 0, 1 }, *v, nv;
        if (objsync_lacks_filter(fr[n - 1].out, fr[n - 1].out_len, m, list, 2, &v, &nv) == 0) {
            assert(nv <= 2);
            for (size_t i = 0; i < nv; i++)
                assert(v[i] == 0 || v[i] == 1);
            free(v);
        }
    }
    return 0;
}
