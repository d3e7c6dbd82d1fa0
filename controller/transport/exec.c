/* controller/transport/exec.c: collecting and finishing a command's result (see exec.h). */
#include "controller/transport/exec.h"

#include <errno.h>
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

const char *exec_result_reason(const struct exec_result *r, char *buf, size_t buf_sz)
{
    /* The last lines of stderr (stdout if stderr is empty), newest last, joined with " | ":
     * a failing preflight prints its own diagnosis before the agent's one-line verdict. */
    const char *src = r->err && r->err_len ? r->err : (r->out ? r->out : "");
    const char *lines[3];
    size_t lens[3];
    int n = 0;
    size_t end = strlen(src);
    while (n < 3 && end > 0) {
        while (end && (src[end - 1] == '\n' || src[end - 1] == '\r' || src[end - 1] == ' '))
            end--;
        if (!end)
            break;
        size_t start = end;
        while (start && src[start - 1] != '\n')
            start--;
        lines[n] = src + start;
        lens[n] = end - start;
        n++;
        end = start;
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
