/* controller/transport/quote.c: argv -> one POSIX shell command line, each word quoted exactly once.
 * Must never interpret or expand anything: single quotes make the shell take bytes literally.
 */
#include "controller/transport/quote.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static bool word_is_plain(const char *w)
{
    if (!*w)
        return false;
    for (const char *p = w; *p; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                  strchr("_@%+=:,./-", ch);
        if (!ok)
            return false;
    }
    return true;
}

int quote_word(const char *word, char *out, size_t out_sz, size_t *off)
{
    size_t o = *off;
    size_t need = 0;
    bool plain = word_is_plain(word);
    if (plain) {
        need = strlen(word);
    } else {
        need = 2;
        for (const char *p = word; *p; p++)
            need += *p == '\'' ? 4 : 1;
    }
    if (o >= out_sz || need + 1 > out_sz - o)
        return -ENOSPC;
    if (plain) {
        memcpy(out + o, word, need);
        o += need;
    } else {
        out[o++] = '\'';
        for (const char *p = word; *p; p++) {
            if (*p == '\'') {
                memcpy(out + o, "'\\''", 4);
                o += 4;
            } else {
                out[o++] = *p;
            }
        }
        out[o++] = '\'';
    }
    out[o] = '\0';
    *off = o;
    return 0;
}

int quote_argv(const char *const *argv, char **ret_line)
{
    if (!argv || !argv[0])
        return -EINVAL;
    char *buf = malloc(QUOTE_LINE_MAX);
    if (!buf)
        return -ENOMEM;
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; argv[i]; i++) {
        if (i) {
            if (off + 2 > QUOTE_LINE_MAX) {
                free(buf);
                return -E2BIG;
            }
            buf[off++] = ' ';
            buf[off] = '\0';
        }
        if (quote_word(argv[i], buf, QUOTE_LINE_MAX, &off) < 0) {
            free(buf);
            return -E2BIG;
        }
    }
    char *line = realloc(buf, off + 1);
    *ret_line = line ? line : buf;
    return 0;
}
