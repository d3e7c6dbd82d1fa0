/* controller/top/top_render.c: the dashboard's column layout for a terminal width and the text
 * frame `drover top --once` prints (and the screen draws from the same rows).  Pure like
 * top_model.c: no I/O, no clock.
 */
#include "controller/top/top_model.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

/* ------------------------------------------------------------------ layout */

void top_layout(int width, struct top_view *v, int w[TOP_NCOLS])
{
    static const int base[TOP_NCOLS] = {
        [TOP_COL_NAME] = 16, [TOP_COL_REL] = 9,  [TOP_COL_STATE] = 0 /* below */, [TOP_COL_STEP] = 7,
        [TOP_COL_LOSS] = 6,  [TOP_COL_KTOK] = 7, [TOP_COL_TREND] = 10, [TOP_COL_HB] = 4,
        [TOP_COL_RST] = 11,  [TOP_COL_GPU] = 6,  [TOP_COL_MEM] = 6,    [TOP_COL_TEMP] = 4,
    };
    static const enum top_col drop[] = { TOP_COL_MEM, TOP_COL_TEMP, TOP_COL_GPU, TOP_COL_RST,
                                         TOP_COL_TREND, TOP_COL_LOSS, TOP_COL_REL };
    memcpy(w, base, sizeof base);
    w[TOP_COL_STATE] = top_state_col_width(); /* "checkpointing 42s" whole */
    int total = -1;
    for (int c = 0; c < TOP_NCOLS; c++)
        total += w[c] + 1;
    for (size_t d = 0; d < ARRAY_SIZE(drop) && total > width; d++) {
        enum top_col c = drop[d];
        if (c == TOP_COL_TREND && total - (w[c] - 6) <= width) {
            w[c] -= total - width;
            total = width;
            break;
        }
        total -= w[c] + 1;
        w[c] = 0;
    }
    int spare = width - total;
    if (spare > 0 && w[TOP_COL_TREND]) {
        int grow = spare / 2 < 10 ? spare / 2 : 10;
        w[TOP_COL_TREND] += grow;
        spare -= grow;
    }
    if (spare > 0) {
        int grow = spare < 14 ? spare : 14;
        w[TOP_COL_NAME] += grow;
    }
    v->trend_width = w[TOP_COL_TREND];
}

/* ------------------------------------------------------------------ text frame */

struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16384;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(struct sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

static void sb_pad(struct sbuf *b, int n)
{
    static const char spaces[] = "                                                                ";
    while (n > 0) {
        int k = n < (int)sizeof spaces - 1 ? n : (int)sizeof spaces - 1;
        sb_add(b, spaces, (size_t)k);
        n -= k;
    }
}

/* Bytes of s that make up at most w display columns. */
static size_t bytes_for_width(const char *s, int w)
{
    size_t i = 0;
    int cols = 0;
    while (s[i]) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            if (cols == w)
                break;
            cols++;
        }
        i++;
    }
    return i;
}

static bool col_right_aligned(enum top_col c)
{
    return c == TOP_COL_STEP || c == TOP_COL_LOSS || c == TOP_COL_KTOK || c == TOP_COL_HB ||
           c == TOP_COL_GPU || c == TOP_COL_MEM || c == TOP_COL_TEMP;
}

const char *top_fmt_cell(const char *text, int w, bool right, char *buf, size_t buf_sz)
{
    size_t nb = bytes_for_width(text, w);
    int tw = top_str_width(text);
    int pad = w - (tw < w ? tw : w);
    size_t len = 0;
    if (right)
        for (; pad > 0 && len + 1 < buf_sz; pad--)
            buf[len++] = ' ';
    if (nb > buf_sz - 1 - len)
        nb = buf_sz - 1 - len;
    memcpy(buf + len, text, nb);
    len += nb;
    for (; pad > 0 && len + 1 < buf_sz; pad--)
        buf[len++] = ' ';
    buf[len] = '\0';
    return buf;
}

bool top_col_right_aligned(enum top_col c)
{
    return col_right_aligned(c);
}

static void sb_cell(struct sbuf *b, const char *text, int w, bool right)
{
    size_t nb = bytes_for_width(text, w);
    int tw = top_str_width(text);
    int shown = tw < w ? tw : w;
    if (right)
        sb_pad(b, w - shown);
    sb_add(b, text, nb);
    if (!right)
        sb_pad(b, w - shown);
}

static void sb_color(struct sbuf *b, unsigned attr)
{
    if (attr & TOP_A_BOLD)
        sb_puts(b, "\033[1m");
    if (attr & TOP_A_DIM)
        sb_puts(b, "\033[2m");
    if (attr & TOP_A_RED)
        sb_puts(b, "\033[31m");
    else if (attr & TOP_A_YELLOW)
        sb_puts(b, "\033[33m");
    else if (attr & TOP_A_GREEN)
        sb_puts(b, "\033[32m");
}

int top_render_text(const struct top_snapshot *s, const struct inventory *inv,
                    struct top_view *v, double now, int width, bool color, char **ret_text)
{
    int w[TOP_NCOLS];
    top_layout(width, v, w);
    int max_rows = s->nhosts + s->ncts * (STATUS_MAX_RANKS + 1) + 1;
    struct top_row *rows = malloc((size_t)max_rows * sizeof *rows);
    if (!rows)
        return -ENOMEM;
    int n = top_build_rows(s, inv, v, now, rows, max_rows);
    struct top_summary m;
    top_summarize(s, now, &m);
    char l1[512], l2[512];
    top_header_lines(s, &m, v->ascii, l1, sizeof l1, l2, sizeof l2);
    struct sbuf b = { 0 };
    sb_puts(&b, l1);
    sb_puts(&b, "\n");
    if (color && strstr(l2, "alerts: none") == NULL)
        sb_puts(&b, "\033[1;31m");
    sb_puts(&b, l2);
    if (color && strstr(l2, "alerts: none") == NULL)
        sb_puts(&b, "\033[0m");
    sb_puts(&b, "\n");
    if (color)
        sb_puts(&b, "\033[1m");
    bool first = true;
    for (int c = 0; c < TOP_NCOLS; c++) {
        if (!w[c])
            continue;
        if (!first)
            sb_puts(&b, " ");
        first = false;
        sb_cell(&b, top_col_title((enum top_col)c), w[c], col_right_aligned((enum top_col)c));
    }
    if (color)
        sb_puts(&b, "\033[0m");
    sb_puts(&b, "\n");
    for (int i = 0; i < n; i++) {
        const struct top_row *row = &rows[i];
        first = true;
        for (int c = 0; c < TOP_NCOLS; c++) {
            if (!w[c])
                continue;
            if (!first)
                sb_puts(&b, " ");
            first = false;
            unsigned a = row->attr[c] | (row->stale ? TOP_A_DIM : 0);
            if (color && a)
                sb_color(&b, a);
            sb_cell(&b, row->cell[c], w[c], col_right_aligned((enum top_col)c));
            if (color && a)
                sb_puts(&b, "\033[0m");
        }
        /* trailing spaces are noise in a captured frame */
        while (b.len && b.p[b.len - 1] == ' ')
            b.p[--b.len] = '\0';
        sb_puts(&b, "\n");
    }
    /* what `drover status` warns of under its table (a job's good release marked bad), the
     * same lines */
    char notes[8192];
    if (top_notes(s, v, notes, sizeof notes) > 0) {
        for (char *l = notes, *nl; (nl = strchr(l, '\n')); l = nl + 1) {
            *nl = '\0';
            if (color)
                sb_puts(&b, "\033[33m");
            sb_puts(&b, "! ");
            sb_puts(&b, l);
            if (color)
                sb_puts(&b, "\033[0m");
            sb_puts(&b, "\n");
        }
    }
    /* why rows have no fresh data, once per host or container */
    char last[TOP_ERR_MAX + 400] = "";
    for (int i = 0; i < n; i++) {
        char why[TOP_ERR_MAX + 400];
        if (rows[i].state != TOP_UNREACHABLE || !top_row_problem(s, &rows[i], now, why, sizeof why)[0])
            continue;
        if (strcmp(why, last) == 0)
            continue;
        snprintf(last, sizeof last, "%s", why);
        sb_puts(&b, "! ");
        sb_puts(&b, why);
        sb_puts(&b, "\n");
    }
    free(rows);
    if (b.oom) {
        free(b.p);
        return -ENOMEM;
    }
    *ret_text = b.p;
    return 0;
}
