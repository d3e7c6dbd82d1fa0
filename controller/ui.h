/* controller/ui.h: terminal helpers for the controller's verbs: results go to stdout, progress
 * and diagnostics to stderr, colour only on a TTY and never when NO_COLOR is set (STYLE.md).
 * Pure functions; safe from any thread.
 */
#ifndef DROVER_UI_H
#define DROVER_UI_H

#include <stddef.h>
#include <stdio.h>

#include "common/manifest.h"

/* Colour escapes for stream fp ("" when fp is not a TTY or NO_COLOR is set). */
const char *ui_red(FILE *fp);
const char *ui_green(FILE *fp);
const char *ui_yellow(FILE *fp);
const char *ui_bold(FILE *fp);
const char *ui_reset(FILE *fp);
/* Short release id ("3f2a9c1b7d6e", or "-" for none) into buf[13]. */
const char *ui_short(const char *id, char buf[RELEASE_SHORT_LEN + 1]);
/* kubectl-style age: "800ms" no, "0s", "45s", "3m", "2h", "4d"; "-" when negative. */
const char *ui_age(double seconds, char *buf, size_t buf_sz);
/* What is wrong with a path the user gave, from a negative errno: "does not exist", "is a
 * directory", "is not a directory", or "cannot be read (strerror)"; into buf (cut to sz). */
const char *ui_path_problem(int neg_errno, char *buf, size_t sz);

/* s as one word of a table column: escaped as text_escape() does (controls, invalid UTF-8), and
 * single-quoted as a shell quotes it when it holds whitespace or a quote (a release
 * directory named 'sp ace' split `drover history`'s columns); else as is.  Into buf[sz]
 * (truncated); returns buf. */
const char *ui_table_word(const char *s, char *buf, size_t sz);

#endif
