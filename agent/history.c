/* agent/history.c: see history.h. */
#include "agent/history.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "agent/agent.h"
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

/* ROOT/jobs/<job>/history.{jsonl,lock}; the lock taken.  Returns the lock fd. */
static int history_lock(const char *root, const char *job, char *path, size_t pathsz)
{
    char dir[4096], lk[4200];
    if (!job_name_is_valid(job) || snprintf(dir, sizeof dir, "%s/jobs/%s", root, job) >= (int)sizeof dir)
        return -EINVAL;
    int r = fs_mkdir_p(dir, 0755);
    if (r < 0)
        return r;
    snprintf(lk, sizeof lk, "%s/history.lock", dir);
    if (snprintf(path, pathsz, "%s/history.jsonl", dir) >= (int)pathsz)
        return -ENAMETOOLONG;
    int fd = open(lk, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_EX) < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    return fd;
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
        size_t nl = 0, start = 0;
        for (size_t i = 0; i < tlen; i++)
            nl += text[i] == '\n';
        for (size_t i = 0; i < tlen && nl >= HISTORY_KEEP; i++)
            if (text[i] == '\n') {
                nl--;
                start = i + 1;
            }
        char *out = malloc(tlen - start + len + 1);
        if (!out) {
            r = -ENOMEM;
        } else {
            memcpy(out, text ? text + start : "", tlen - start);
            memcpy(out + tlen - start, line, len);
            out[tlen - start + len] = '\n';
            r = fs_write_atomic(path, out, tlen - start + len + 1, 0644);
            free(out);
        }
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
    /* only lines that still check out (a damaged file hides nothing else) */
    char *p = text, *end = text + len;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (history_line_check(p, n, job) == 0) {
            fwrite(p, 1, n, out);
            fputc('\n', out);
        }
        p += n + 1;
    }
    free(text);
    return fflush(out) == 0 ? 0 : -EIO;
}
