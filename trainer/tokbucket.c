/* trainer/tokbucket.c: counting sort of a micro-batch's positions by token (see tokbucket.h).
 * Never: allocates, or leaves cnt non-zero. */
#include "trainer/tokbucket.h"

#include <errno.h>

int tokbucket_build(const int *tokens, int n, int vocab, int *cnt, int *uniq, int *start, int *pos,
                    int *ret_nuniq)
{
    if (n < 0 || vocab <= 0)
        return -EINVAL;
    int nu = 0, acc = 0;
    for (int i = 0; i < n; i++)
        cnt[tokens[i]]++;
    for (int t = 0; t < vocab; t++) {
        if (!cnt[t])
            continue;
        uniq[nu] = t;
        start[nu] = acc;
        acc += cnt[t];
        cnt[t] = start[nu]; /* becomes the write cursor */
        nu++;
    }
    start[nu] = acc;
    for (int i = 0; i < n; i++)
        pos[cnt[tokens[i]]++] = i;
    for (int u = 0; u < nu; u++)
        cnt[uniq[u]] = 0;
    *ret_nuniq = nu;
    return 0;
}
