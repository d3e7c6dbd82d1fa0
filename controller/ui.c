/* controller/ui.c: the controller's terminal helpers (see ui.h): colour escapes that honour
 * NO_COLOR and a TTY, short release ids, kubectl-style ages.  No state, no I/O but isatty(). */
#include "controller/ui.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/text.h"

static bool use_color(FILE *fp)
{
    const char *nc = getenv("NO_COLOR");
    return !(nc && *nc) && isatty(fileno(fp));
}

const char *ui_red(FILE *fp)
{
    return use_color(fp) ? "\033[31m" : "";
}
const char *ui_green(FILE *fp)
{
    return use_color(fp) ? "\033[32m" : "";
}
const char *ui_yellow(FILE *fp)
{
    return use_color(fp) ? "\033[33m" : "";
}
const char *ui_bold(FILE *fp)
{
    return use_color(fp) ? "\033[1m" : "";
}
const char *ui_reset(FILE *fp)
{
    return use_color(fp) ? "\033[0m" : "";
}

const char *ui_short(const char *id, char buf[RELEASE_SHORT_LEN + 1])
{
    return release_short(id, "-", buf);
}

const char *ui_age(double s, char *buf, size_t buf_sz)
{
    if (s < 0)
        snprintf(buf, buf_sz, "-");
    else if (s < 120)
        snprintf(buf, buf_sz, "%.0fs", s);
    else if (s < 7200)
        snprintf(buf, buf_sz, "%.0fm", s / 60);
    else if (s < 172800)
        snprintf(buf, buf_sz, "%.0fh", s / 3600);
    else
        snprintf(buf, buf_sz, "%.0fd", s / 86400);
    return buf;
}

const char *ui_path_problem(int neg_errno, char *buf, size_t sz)
{
    if (neg_errno == -ENOENT)
        snprintf(buf, sz, "does not exist");
    else if (neg_errno == -EISDIR)
        snprintf(buf, sz, "is a directory");
    else if (neg_errno == -ENOTDIR)
        snprintf(buf, sz, "is not a directory");
    else
        snprintf(buf, sz, "cannot be read (%s)", strerror(-neg_errno));
    return buf;
}

const char *ui_table_word(const char *s, char *buf, size_t sz)
{
    char e[4 * MANIFEST_NAME_MAX + 8];
    (void)text_escape(s ? s : "", s ? strlen(s) : 0, e, sizeof e);
    if (!strpbrk(e, " \t'")) {
        snprintf(buf, sz, "%s", e);
        return buf;
    }
    /* one column, read back as one word by a shell's read or awk's split on quotes: 'sp ace' */
    size_t o = 0;
    if (sz < 3) {
        if (sz)
            buf[0] = '\0';
        return buf;
    }
    buf[o++] = '\'';
    for (const char *p = e; *p && o + 5 < sz; p++) {
        if (*p == '\'') {
            memcpy(buf + o, "'\\''", 4); /* as a shell quotes one: 'it'\''s' */
            o += 4;
        } else {
            buf[o++] = *p;
        }
    }
    buf[o++] = '\'';
    buf[o] = '\0';
    return buf;
}
