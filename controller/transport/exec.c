/* controller/transport/exec.c: collecting and finishing a command's result (see exec.h). */
#include "controller/transport/exec.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"

void exec_result_done(struct exec_result *r)
{
    if (!r)
        return;
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}

/* A line of Python's error art: only blanks, '^' and '~' (the markers under the code). */
static bool marker_only(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '^' && s[i] != '~')
            return false;
    return true;
}

/* The line that ends at src[end] (exclusive), blanks cut at both ends, into *line and *len; returns
 * where it starts (the end of the line before). */
static size_t line_before(const char *src, size_t end, const char **line, size_t *len)
{
    size_t start = end;
    while (start && src[start - 1] != '\n')
        start--;
    size_t a = start, b = end;
    while (a < b && (src[a] == ' ' || src[a] == '\t'))
        a++;
    while (b > a && (src[b - 1] == ' ' || src[b - 1] == '\t' || src[b - 1] == '\r'))
        b--;
    *line = src + a;
    *len = b - a;
    return start ? start - 1 : 0;
}

const char *exec_result_reason(const struct exec_result *r, char *buf, size_t buf_sz)
{
    /* The last lines of stderr (stdout if stderr is empty), newest last, joined with " | ":
     * a failing preflight prints its own diagnosis before the agent's one-line verdict.  Blank
     * lines and Python's marker lines ("    ^^^^") are skipped; when the line above the ones
     * kept is a Python traceback's location ('File "x.py", line 12'), it leads, so a syntax
     * error or an exception in a worker names its file and line, not only the code. */
    const char *src = r->err && r->err_len ? r->err : (r->out ? r->out : "");
    const char *lines[4];
    size_t lens[4];
    int n = 0;
    size_t end = strlen(src);
    while (n < 3 && end > 0) {
        const char *l;
        size_t len;
        end = line_before(src, end, &l, &len);
        if (len && !marker_only(l, len)) {
            lines[n] = l;
            lens[n] = len;
            n++;
        }
    }
    while (n == 3 && end > 0) { /* the next line with text above: a traceback's location? */
        const char *l;
        size_t len;
        end = line_before(src, end, &l, &len);
        if (!len || marker_only(l, len))
            continue;
        if (len > 6 && !strncmp(l, "File \"", 6) && strstr(l, "\", line ") && (size_t)(strstr(l, "\", line ") - l) < len) {
            lines[n] = l;
            lens[n] = len;
            n++;
        }
        break;
    }
    size_t off = 0;
    buf[0] = '\0';
    for (int i = n - 1; i >= 0 && off + 1 < buf_sz; i--) {
        int w = snprintf(buf + off, buf_sz - off, "%s%.*s", off ? " | " : "", (int)lens[i], lines[i]);
        if (w < 0)
            break;
        off += (size_t)w;
    }
    if (!n)
        snprintf(buf, buf_sz, "exit status %d, no message", r->status);
    return text_escape_inplace(buf, buf_sz); /* remote text, shown on terminals and logged */
}

static int append(char **buf, size_t *len, size_t max, const char *data, size_t n, bool *trunc)
{
    if (*len + n > max) {
        n = max - *len;
        if (trunc)
            *trunc = true;
    }
    if (!n)
        return 0;
    char *nb = realloc(*buf, *len + n + 1);
    if (!nb)
        return -ENOMEM;
    memcpy(nb + *len, data, n);
    *len += n;
    nb[*len] = '\0';
    *buf = nb;
    return 0;
}

int exec_result_add_out(struct exec_result *r, const char *data, size_t n)
{
    return append(&r->out, &r->out_len, EXEC_OUT_MAX, data, n, &r->out_truncated);
}

int exec_result_add_err(struct exec_result *r, const char *data, size_t n)
{
    return append(&r->err, &r->err_len, EXEC_ERR_MAX, data, n, NULL);
}

int exec_result_finish(struct exec_result *r, int status)
{
    r->status = status;
    if (!r->out)
        r->out = calloc(1, 1);
    if (!r->err)
        r->err = calloc(1, 1);
    if (!r->out || !r->err)
        return -ENOMEM;
    while (r->err_len && (r->err[r->err_len - 1] == '\n' || r->err[r->err_len - 1] == '\r'))
        r->err[--r->err_len] = '\0';
    return 0;
}
