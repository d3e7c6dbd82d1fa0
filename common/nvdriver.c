/* common/nvdriver.c: see nvdriver.h.  Pure. */
#include "common/nvdriver.h"

#include <errno.h>
#include <string.h>

bool nvdriver_is_version(const char *s)
{
    size_t n = strlen(s);
    if (!n || n >= NVDRIVER_VERSION_MAX || s[0] < '0' || s[0] > '9' || s[n - 1] == '.' ||
        !strchr(s, '.'))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] == '.' && s[i + 1] != '.')))
            return false;
    return true;
}

int nvdriver_parse_version(const char *text, size_t len, char ret[NVDRIVER_VERSION_MAX])
{
    static const char key[] = "Kernel Module";
    const char *end = text + len;
    const char *k = NULL;
    for (const char *p = text; p + sizeof key - 1 <= end; p++)
        if (!memcmp(p, key, sizeof key - 1)) {
            k = p + sizeof key - 1;
            break;
        }
    if (!k)
        return -EINVAL;
    /* the version is a later word of the same line */
    for (int words = 0; words < 8 && k < end && *k != '\n'; words++) {
        while (k < end && (*k == ' ' || *k == '\t'))
            k++;
        size_t n = 0;
        while (k + n < end && k[n] != ' ' && k[n] != '\t' && k[n] != '\n' && k[n] != '\0')
            n++;
        if (n && n < NVDRIVER_VERSION_MAX) {
            char w[NVDRIVER_VERSION_MAX];
            memcpy(w, k, n);
            w[n] = '\0';
            if (nvdriver_is_version(w)) {
                memcpy(ret, w, n + 1);
                return 0;
            }
        }
        if (!n)
            break;
        k += n;
    }
    return -EINVAL;
}
