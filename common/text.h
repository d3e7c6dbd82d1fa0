/* common/text.h: text that came from somewhere else (a worker's heartbeat, a remote command's
 * stderr, an agent's reason, an operator's inventory) made safe to show and checked for the
 * encodings the wire formats need.
 *
 * The one escaping rule of drover: wherever worker or remote text reaches a terminal or the
 * journal it goes through text_escape() (the logger applies it to every message), so a
 * worker cannot retitle the operator's terminal, erase a line, hide text or forge a journald
 * record with "\n<0>".  Valid UTF-8 other than controls passes through unchanged.
 *
 * Also the words that go with a count in messages for people (text_plural) and the list of
 * names they count (text_join_names), for every program: one home, so no message says "1 files"
 * or "0 fault", nor "h1:101, and h1:102".
 */
#ifndef DROVER_TEXT_H
#define DROVER_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Copy in[0..len) into out[out_sz] (always NUL-terminated), replacing:
 *   \n \r \t                       by the two characters "\n", "\r", "\t";
 *   other C0 controls and DEL      by "\xHH";
 *   C1 controls (U+0080..U+009F), bidirectional overrides and isolates (U+202A..U+202E,
 *   U+2066..U+2069)                by "\u{HHHH}";
 *   bytes that are not valid UTF-8 by "\xHH".
 * A backslash is left alone (the escape only has to be safe, not reversible).  When out is too
 * small the result is cut at a character boundary and ends in "...".  Returns out. */
const char *text_escape(const char *in, size_t len, char *out, size_t out_sz);

/* text_escape() of a NUL-terminated string into a malloc'd buffer (free()); NULL only on ENOMEM
 * or s == NULL. */
char *text_escape_dup(const char *s);

/* Escape the NUL-terminated string in buf[buf_sz] in place (for reasons built with snprintf
 * from foreign parts).  Cut with "..." when the escaped text does not fit.  Returns buf. */
const char *text_escape_inplace(char *buf, size_t buf_sz);

/* true when text_escape() would change s[0..len). */
bool text_needs_escape(const char *s, size_t len);

/* true when s[0..len) is valid UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF) and
 * has no NUL byte: what jansson's json_string() accepts. */
bool text_is_utf8(const char *s, size_t len);

/* s itself when it is valid UTF-8 without NUL (what json_string() takes), else text_escape() of
 * it in buf[buf_sz]: for text that must reach a JSON document even when a cut or a foreign byte
 * made it invalid (reasons).  Never NULL. */
const char *text_json_safe(const char *s, char *buf, size_t buf_sz);

/* Copy the NUL-terminated s into out[out_sz] (always NUL-terminated when out_sz > 0): whole when
 * it fits; else cut before the last word that does not fit, so no word is cut in two, and
 * followed by "\u2026" (an ellipsis) and more (NULL: nothing), which say that text is left out and
 * where all of it is.  Trailing spaces and " |" separators before the cut are dropped.  A
 * `backquoted command` is never cut in two: the cut moves before its opening quote (and the
 * " (", ";" or ":" that lead to it).  A text
 * with no space in reach is cut at a UTF-8 character boundary; when out cannot even hold the
 * ellipsis and more, s is cut there without them.  Returns out. */
const char *text_cut_words(const char *s, const char *more, char *out, size_t out_sz);

/* The noun that goes with count n: one for 1, many otherwise ("%zu %s", n, text_plural(n,
 * "file", "files"): "1 file", "0 files", "3 files").  Returns one of its arguments. */
const char *text_plural(long long n, const char *one, const char *many);

/* The n names (containers, mostly) as a list for people, appended to out[out_sz] at *off (cut,
 * never overrun, when out is full; *off then passes out_sz): "a", "a and b", "a, b and c"; past
 * max_named (>= 1) the first max_named then how many more: "a, b, c, d and 2 more".  So a verdict
 * says a reason once with the containers it applies to, instead of once per container.
 * Returns out. */
const char *text_join_names(const char *const names[], int n, int max_named, char *out, size_t out_sz,
                            size_t *off);

#endif
