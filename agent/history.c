/* agent/history.c: see history.h. */
#include "agent/history.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/text.h"
#include "common/util.h"

#define HISTORY_FILE_MAX ((size_t)(HISTORY_KEEP + 1) * (HISTORY_LINE_MAX + 1))

int history_line_check(const char *line, size_t len, const char *job)
{
    if (len > HISTORY_LINE_MAX)
        return -E2BIG;
    if (memchr(line, '\n', len) || memchr(line, '\0', len))
        return -EINVAL;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
    json_t *v = json_object_get(o, "v"), *j = json_object_get(o, "job"), *t = json_object_get(o, "time");
    int r = json_is_object(o) && json_is_integer(v) && json_integer_value(v) == 1 && json_is_string(j) &&
                    !strcmp(json_string_value(j), job) && json_is_number(t) && isfinite(json_number_value(t))
                ? 0
                : -EINVAL;
    json_decref(o);
    return r;
}

/* ROOT/jobs/<job>/history.{jsonl,lock}; the lock taken (AGENT_LOCK_TIMEOUT_S, then -ETIMEDOUT,
 * logged naming the holder).  Returns the lock fd. */
static int history_lock(const char *root, const char *job, char *path, size_t pathsz)
{
    char dir[4096], lk[4200], err[600];
    if (!job_name_is_valid(job) || snprintf(dir, sizeof dir, "%s/jobs/%s", root, job) >= (int)sizeof dir)
        return -EINVAL;
    int r = fs_mkdir_p(dir, 0755);
    if (r < 0)
        return r;
    snprintf(lk, sizeof lk, "%s/history.lock", dir);
    if (snprintf(path, pathsz, "%s/history.jsonl", dir) >= (int)pathsz)
        return -ENAMETOOLONG;
    int fd = fs_lock_file(lk, AGENT_LOCK_TIMEOUT_S, err, sizeof err);
    if (fd == -ETIMEDOUT)
        log_error("history of job '%s': %s", job, err);
    return fd;
}

struct history_buf {
    char *out;
    size_t len;
};

static int history_buf_add(const char *line, size_t len, void *ud);

/* The one walk over a history file: calls fn(line, len, ud) for each line of text that checks
 * out as a record of job (a damaged line hides nothing else), oldest first, after skipping the
 * first `skip` of them; fn may be NULL.  The other lines, empty ones aside, go to bad when it is
 * not NULL (room for len + 1 bytes).  Returns how many records there are (skipped included), or
 * fn's first failure. */
static int history_each(const char *text, size_t len, const char *job, int skip,
                        int (*fn)(const char *line, size_t len, void *ud), void *ud, struct history_buf *bad)
{
    int n = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (history_line_check(p, ll, job) == 0) {
            if (n++ >= skip && fn) {
                int r = fn(p, ll, ud);
                if (r < 0)
                    return r;
            }
        } else if (bad && ll > 0) {
            (void)history_buf_add(p, ll, bad);
        }
        p += ll + 1;
    }
    return n;
}

/* The lines history_add() cannot keep (torn by a crash, edited by hand) are not dropped in
 * silence: appended to PATH.unreadable, and said in the agent's log. */
static void history_set_aside(const char *path, const char *job, const struct history_buf *bad)
{
    char aside[4400];
    if (bad->len == 0 || snprintf(aside, sizeof aside, "%s.unreadable", path) >= (int)sizeof aside)
        return;
    size_t lines = 0;
    for (size_t i = 0; i < bad->len; i++)
        lines += bad->out[i] == '\n';
    int fd = open(aside, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    ssize_t w = fd < 0 ? -1 : write(fd, bad->out, bad->len);
    int e = w < 0 ? errno : EIO;
    if (fd >= 0)
        close(fd);
    if (w == (ssize_t)bad->len)
        log_warn("history of job '%s': %zu unreadable %s in %s, set aside in %s (every record is "
                 "kept)", job, lines, text_plural((long long)lines, "line", "lines"), path, aside);
    else
        log_warn("history of job '%s': %zu unreadable %s in %s dropped (could not write %s: %s)", job, lines,
                 text_plural((long long)lines, "line", "lines"), path, aside,
                 strerror(e));
}

static int history_buf_add(const char *line, size_t len, void *ud)
{
    struct history_buf *b = ud;
    memcpy(b->out + b->len, line, len);
    b->out[b->len + len] = '\n';
    b->len += len + 1;
    return 0;
}

static int history_print(const char *line, size_t len, void *ud)
{
    FILE *out = ud;
    fwrite(line, 1, len, out);
    fputc('\n', out);
    return 0;
}

int history_add(const char *root, const char *job, const char *line)
{
    size_t len = strlen(line);
    int r = history_line_check(line, len, job);
    if (r < 0)
        return r;
    char path[4300];
    int lk = history_lock(root, job, path, sizeof path);
    if (lk < 0)
        return lk;
    char *text = NULL;
    size_t tlen = 0;
    r = fs_read_file(path, HISTORY_FILE_MAX, &text, &tlen);
    if (r == -ENOENT) {
        r = 0;
        tlen = 0;
    }
    if (r == 0) {
        /* the kept records, then this one: at most HISTORY_KEEP, oldest dropped */
        struct history_buf bad = {malloc(tlen + 1), 0};
        int n = history_each(text ? text : "", tlen, job, 0, NULL, NULL, bad.out ? &bad : NULL);
        struct history_buf b = {malloc(tlen + len + 2), 0};
        if (!b.out || !bad.out) {
            r = -ENOMEM;
        } else {
            (void)history_each(text ? text : "", tlen, job, n >= HISTORY_KEEP ? n - HISTORY_KEEP + 1 : 0,
                               history_buf_add, &b, NULL);
            (void)history_buf_add(line, len, &b);
            history_set_aside(path, job, &bad); /* before they leave the file */
            r = fs_write_atomic(path, b.out, b.len, 0644);
        }
        free(b.out);
        free(bad.out);
    }
    free(text);
    close(lk);
    return r;
}

int history_dump(const char *root, const char *job, FILE *out)
{
    char path[4300];
    int lk = history_lock(root, job, path, sizeof path);
    if (lk < 0)
        return lk;
    char *text = NULL;
    size_t len = 0;
    int r = fs_read_file(path, HISTORY_FILE_MAX, &text, &len);
    close(lk);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    (void)history_each(text, len, job, 0, history_print, out, NULL);
    free(text);
    return fflush(out) == 0 ? 0 : -EIO;
}
