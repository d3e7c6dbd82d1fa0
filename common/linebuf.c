/* common/linebuf.c: the bounded line reader (see linebuf.h). */
#include "common/linebuf.h"

#include <errno.h>
#include <string.h>

int linebuf_init(struct linebuf *lb, char *buf, size_t cap, size_t max)
{
    if (!buf || cap < max + 1)
        return -EINVAL;
    *lb = (struct linebuf){ .buf = buf, .cap = cap, .max = max };
    return 0;
}

static void drop_consumed(struct linebuf *lb)
{
    if (!lb->consumed)
        return;
    memmove(lb->buf, lb->buf + lb->consumed, lb->len - lb->consumed);
    lb->len -= lb->consumed;
    lb->consumed = 0;
}

/* Held bytes without a newline: once more than max of them, the line is over-long. */
static void check_overlong(struct linebuf *lb)
{
    if (lb->skipping) {
        lb->len = 0; /* still inside the over-long line */
        return;
    }
    if (lb->len > lb->max || lb->len == lb->cap) {
        if (!lb->skipping)
            lb->overlong++;
        lb->skipping = true;
        lb->len = 0;
    }
}

char *linebuf_room(struct linebuf *lb, size_t *ret_room)
{
    drop_consumed(lb);
    if (lb->len == lb->cap)
        check_overlong(lb); /* only reached when the caller did not ask for lines */
    *ret_room = lb->cap - lb->len;
    return lb->buf + lb->len;
}

void linebuf_added(struct linebuf *lb, size_t n)
{
    lb->len += n <= lb->cap - lb->len ? n : lb->cap - lb->len;
}

int linebuf_next(struct linebuf *lb, char **ret_line, size_t *ret_len)
{
    drop_consumed(lb);
    char *nl = memchr(lb->buf, '\n', lb->len);
    if (!nl) {
        check_overlong(lb);
        return 0;
    }
    size_t n = (size_t)(nl - lb->buf);
    lb->consumed = n + 1;
    if (lb->skipping || n > lb->max) {
        if (!lb->skipping)
            lb->overlong++;
        lb->skipping = false;
        return -E2BIG;
    }
    *nl = '\0';
    *ret_line = lb->buf;
    *ret_len = n;
    return 1;
}

int linebuf_rest(struct linebuf *lb, char **ret_line, size_t *ret_len)
{
    drop_consumed(lb);
    if (lb->skipping) {
        lb->skipping = false;
        lb->len = 0;
        return -E2BIG;
    }
    if (lb->len == 0)
        return 0;
    if (lb->len > lb->max) {
        lb->overlong++;
        lb->len = 0;
        return -E2BIG;
    }
    lb->buf[lb->len] = '\0';
    *ret_line = lb->buf;
    *ret_len = lb->len;
    lb->consumed = lb->len;
    return 1;
}
