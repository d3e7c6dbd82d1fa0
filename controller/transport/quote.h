/* controller/transport/quote.h: turns an argv array into one command line for the remote user's shell
 * (sshd runs "$SHELL -c <line>"), quoting every word exactly once.  The only place in drover
 * that builds a shell command line; nothing else concatenates arguments into strings.
 */
#ifndef DROVER_QUOTE_H
#define DROVER_QUOTE_H

#include <stddef.h>

#define QUOTE_LINE_MAX (64u << 10) /* longest command line we send */

/* Quote one word for POSIX sh: words made only of [A-Za-z0-9_@%+=:,./-] stay as they are,
 * everything else is wrapped in single quotes with each ' written as '\''; the empty word is ''.
 * Appends to out[out_sz] at *off (NUL-terminated).  -ENOSPC if it does not fit (*off and out
 * unchanged past the old terminator). */
int quote_word(const char *word, char *out, size_t out_sz, size_t *off);

/* Join argv (NULL-terminated, at least one word) into "w1 w2 ..." with quote_word.  Returns 0
 * and a malloc'd string in *ret_line (caller frees), -EINVAL for an empty argv, -E2BIG over
 * QUOTE_LINE_MAX, -ENOMEM. */
int quote_argv(const char *const *argv, char **ret_line);

#endif
