/* common/ini.h: the one INI reader (over libinih) for the controller's inventory
 * (controller/inventory.c) and drover-train's config (trainer/config.c), and the typed key
 * table both describe their keys with.
 *
 * Debian's libinih is built without INI_HANDLER_LINENO and cuts long lines silently, so
 * ini_read() feeds it through its own line reader: it counts lines (libinih calls the handler
 * for a line before it reads the next one), refuses a NUL byte and a line longer than line_max
 * instead of letting libinih cut it, and reports every section header (an empty or repeated
 * section is seen too: libinih only reports keys).
 *
 * A key table row says where a value goes and what it may be; ini_key_set() parses, checks and
 * stores it, or says why not in the caller's words (hint) or generic ones.  Pure: no I/O.
 */
#ifndef DROVER_INI_H
#define DROVER_INI_H

#include <stdbool.h>
#include <stddef.h>

enum ini_error_kind {
    INI_OK = 0,
    INI_ERR_NUL,     /* a NUL byte in line `line` */
    INI_ERR_LONG,    /* line `line` has len content bytes, more than line_max */
    INI_ERR_SYNTAX,  /* libinih: not [section], key = value or a comment, at `line` */
    INI_ERR_COLON,   /* `key: value` at `line` (libinih would take ':' for '=' silently) */
    INI_ERR_TRAILING, /* text after a section's ']' that is not a comment, at `line` */
    INI_ERR_STOPPED, /* a callback returned false at `line` (it reported why itself) */
};

struct ini_error {
    enum ini_error_kind kind;
    int line;
    size_t len;
};

struct ini_ops {
    /* A section header at line (name without brackets, leading BOM and spaces skipped, cut at
     * 255 bytes).  May be NULL.  false stops the parse. */
    bool (*section)(void *user, const char *section, int line);
    /* A key.  false stops the parse. */
    bool (*key)(void *user, const char *section, const char *key, const char *value, int line);
    /* A line libinih reads as more of the previous key's value (libinih's multiline rule: an
     * indented line, not blank nor a comment, after a key of the same section): key is that
     * previous key, value the line's text without its indentation ("gpus = 1" for "\tgpus = 1").
     * May be NULL: key is called instead, as if the key were repeated.  false stops the parse. */
    bool (*continued)(void *user, const char *section, const char *key, const char *value, int line);
};

/* Parse text (len bytes) with lines of at most line_max content bytes (newline and CR excluded;
 * libinih's own buffer allows 198).  0, or -EINVAL with *ret_err filled. */
int ini_read(const char *text, size_t len, size_t line_max, const struct ini_ops *ops, void *user,
             struct ini_error *ret_err);

/* What to write instead, for INI_ERR_COLON and INI_ERR_TRAILING; NULL for the other kinds. */
const char *ini_shape_words(enum ini_error_kind kind);

enum ini_type {
    INI_INT,      /* int */
    INI_I64,      /* int64_t */
    INI_U64,      /* uint64_t (no bounds check) */
    INI_DOUBLE,   /* double, finite */
    INI_DURATION, /* double seconds: "30s", "5m", "1h", "250ms" or plain seconds (ini_parse_duration) */
    INI_BOOL,     /* bool: true/yes/on/1, false/no/off/0 (ini_parse_bool) */
    INI_STRING,   /* char[size], not empty */
};

#define INI_MIN_OPEN 1u /* min itself is out of range */
#define INI_MAX_OPEN 2u /* max itself is out of range */

struct ini_key {
    const char *section; /* the section (or section kind) the caller looks it up under */
    const char *name;
    enum ini_type type;
    size_t off;          /* offset of the field in the caller's struct */
    size_t size;         /* INI_STRING: buffer size */
    double min, max;     /* numbers: inclusive bounds unless flags say open */
    unsigned flags;
    const char *hint;    /* complaint after "'VALUE' " for any bad value; NULL: generic words */
    unsigned bit;        /* the caller's (e.g. which policy key was set) */
};

/* The row for (section, name); NULL when none.  *ret_section_known (may be NULL): some row has
 * that section. */
const struct ini_key *ini_key_find(const struct ini_key *keys, size_t nkeys, const char *section,
                                   const char *name, bool *ret_section_known);
/* Parse value per k and store it at base + k->off.  0, or -EINVAL with the complaint in why
 * (nothing stored).  A value that is no duration at all is INI_DURATION_FORMS_WORDS for every
 * INI_DURATION row (the hint is said for one out of the row's range).  A duration past INI_DURATION_MAX_S is "'V' is too large (at most 720h (30
 * days))" whatever the row's hint, unless the row's own max is below that (its hint names it). */
int ini_key_set(const struct ini_key *k, void *base, const char *value, char *why, size_t why_sz);

/* What ini_key_set() says after "'V' is not a duration: " for any value ini_parse_duration()
 * does not read (-EINVAL), whatever the row's hint (which is for a duration out of range): the
 * units the parser takes. */
#define INI_DURATION_FORMS_WORDS \
    "give a number with a unit of ms, s, m or h (like 30s, 5m, 1h, 250ms), or plain seconds"
/* The longest duration any key takes, and how ini_key_set() words it. */
#define INI_DURATION_MAX_S (30.0 * 86400)
#define INI_DURATION_MAX_WORDS "720h (30 days)"

/* "30s", "5m", "1.5m", "2h", "250ms", "45" (seconds): decimal digits with at most one point,
 * then the unit; at most INI_DURATION_MAX_S.  -ERANGE for a well-formed duration longer than
 * that ("99999999999h" was -EINVAL, a bad one of any key); -EDOM for a hex or exponent form
 * ("0x10", "1e2", "1e400": strtod took them, as 16 and 100 s), for the caller to say so;
 * -EINVAL otherwise.  *ret_s untouched on failure.  The one duration parser: the inventory's
 * keys and the command line's options (cli_duration) both read with it. */
int ini_parse_duration(const char *s, double *ret_s);
/* true/yes/on/1 and false/no/off/0, any case.  -EINVAL otherwise. */
int ini_parse_bool(const char *s, bool *ret_b);

#endif
