/* controller/exitcode.c: see exitcode.h; everything here is generated from DROVER_EXITS. */
#include "controller/exitcode.h"

#include <string.h>

static const struct {
    int code;
    const char *name, *words;
} rows[] = {
#define ROW(id, c, name, words) { c, name, words },
    DROVER_EXITS(ROW)
#undef ROW
};

const char *drover_exit_name(int code)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].code == code)
            return rows[i].name;
    return NULL;
}

void drover_exit_usage(FILE *fp)
{
    const char *head = "Exit codes:";
    fputs(head, fp);
    size_t col = strlen(head);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char item[96];
        int n = snprintf(item, sizeof item, " %d %s%s", rows[i].code, rows[i].words,
                         i + 1 < sizeof rows / sizeof rows[0] ? "," : " (docs/errors.md).");
        if (col + (size_t)n > 96) { /* wrap, keeping each item on one line */
            fputs("\n", fp);
            col = 0;
        }
        fputs(col ? item : item + 1, fp);
        col += (size_t)(col ? n : n - 1);
    }
    fputc('\n', fp);
}
