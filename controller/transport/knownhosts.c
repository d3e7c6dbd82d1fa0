/* controller/transport/knownhosts.c: filters a host's lines out of known_hosts text (for trust --replace).
 * Never adds keys (libssh writes them) and never touches lines of other hosts.
 */
#include "controller/transport/knownhosts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int knownhosts_pattern(const char *address, int port, char *out, size_t out_sz)
{
    int n = port == 22 ? snprintf(out, out_sz, "%s", address)
                       : snprintf(out, out_sz, "[%s]:%d", address, port);
    return n < 0 || (size_t)n >= out_sz ? -ENAMETOOLONG : 0;
}

/* true when the host field [f, f+flen) contains pattern as one comma-separated item. */
static int field_names(const char *f, size_t flen, const char *pattern)
{
    size_t plen = strlen(pattern);
    const char *end = f + flen;
    while (f < end) {
        const char *comma = memchr(f, ',', (size_t)(end - f));
        size_t n = comma ? (size_t)(comma - f) : (size_t)(end - f);
        if (n == plen && memcmp(f, pattern, n) == 0)
            return 1;
        f += n + 1;
    }
    return 0;
}

int knownhosts_remove(const char *text, size_t len, const char *pattern, char **ret_text,
                      int *ret_removed)
{
    if (len > KNOWNHOSTS_MAX_BYTES)
        return -E2BIG;
    char *out = malloc(len + 1);
    if (!out)
        return -ENOMEM;
    size_t o = 0;
    int removed = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
        const char *f = p;
        while (f < p + n && (*f == ' ' || *f == '\t'))
            f++;
        size_t rest = (size_t)(p + n - f);
        int drop = 0;
        if (rest && *f != '#' && *f != '@' && *f != '|' && *f != '\n' && *f != '\r') {
            size_t flen = 0;
            while (flen < rest && f[flen] != ' ' && f[flen] != '\t' && f[flen] != '\n' &&
                   f[flen] != '\r')
                flen++;
            drop = field_names(f, flen, pattern);
        }
        if (drop) {
            removed++;
        } else {
            memcpy(out + o, p, n);
            o += n;
        }
        p += n;
    }
    out[o] = '\0';
    *ret_text = out;
    *ret_removed = removed;
    return 0;
}
