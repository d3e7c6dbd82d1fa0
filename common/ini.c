/* common/ini.c: the INI reader with line numbers and the typed key table (see ini.h). */
#include "common/ini.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct reader {
    const char *p;
    size_t left;
    int line;
    size_t line_max;
    const struct ini_ops *ops;
    void *user;
    struct ini_error err; /* a reader error, or the first callback stop */
    bool after_key;       /* a key was read since the last section header (libinih's prev_name) */
    bool continued;       /* the line being handled is one libinih takes as a continuation */
};

/* What libinih would read otherwise than it looks: `key: value` (its name/value delimiters are
 * '=' and ':', so `containers: h1:201` is silently a key), and `[host h1] x` (it ignores anything
 * after ']').  A line that starts with a blank is left alone: libinih reads it as the previous
 * value's continuation.  Comments (';' or '#' first) are not lines of either shape. */
static enum ini_error_kind line_shape(const char *q)
{
    if (*q == ' ' || *q == '\t' || *q == ';' || *q == '#')
        return INI_OK;
    if (*q == '[') {
        const char *t = strchr(q, ']') + 1; /* the caller checked the ']' is there */
        t += strspn(t, " \t");
        return *t == '\0' || *t == '\r' || *t == '\n' || *t == ';' || *t == '#' ? INI_OK
                                                                             : INI_ERR_TRAILING;
    }
    size_t d = strcspn(q, "=:");
    return q[d] == ':' ? INI_ERR_COLON : INI_OK;
}

const char *ini_shape_words(enum ini_error_kind kind)
{
    if (kind == INI_ERR_COLON)
        return "'key: value' is not read here; write key = value";
    if (kind == INI_ERR_TRAILING)
        return "text after the section's ']'; put a comment after ' ;' or on its own line";
    return NULL;
}

static char *read_line(char *str, int num, void *stream)
{
    struct reader *r = stream;
    if (r->left == 0 || r->err.kind != INI_OK)
        return NULL;
    r->line++;
    const char *nl = memchr(r->p, '\n', r->left);
    size_t n = nl ? (size_t)(nl - r->p) + 1 : r->left;
    size_t content = n;
    if (content && r->p[content - 1] == '\n')
        content--;
    if (content && r->p[content - 1] == '\r')
        content--;
    if (memchr(r->p, '\0', n)) {
        r->err = (struct ini_error){ .kind = INI_ERR_NUL, .line = r->line };
        return NULL;
    }
    if (content > r->line_max || n + 1 > (size_t)num) {
        r->err = (struct ini_error){ .kind = INI_ERR_LONG, .line = r->line, .len = content };
        return NULL;
    }
    memcpy(str, r->p, n);
    str[n] = '\0';
    r->p += n;
    r->left -= n;
    const char *q = str;
    if (r->line == 1 && strncmp(q, "\xEF\xBB\xBF", 3) == 0)
        q += 3; /* a UTF-8 BOM, which libinih skips too */
    if (*q == '[' && !strchr(q, ']')) {
        /* "[host x" without its ']': libinih notes the line and reads on, so the keys below
         * were taken as the previous section's and the error named the next line */
        r->err = (struct ini_error){ .kind = INI_ERR_SYNTAX, .line = r->line };
        return NULL;
    }
    enum ini_error_kind k = line_shape(q);
    if (k != INI_OK) {
        r->err = (struct ini_error){ .kind = k, .line = r->line };
        return NULL;
    }
    /* libinih's multiline rule: after a key of this section, an indented line that is neither
     * blank nor a comment is more of that key's value, whatever it looks like ("  gpus = 1",
     * "  [job x]") */
    bool indented = *q == ' ' || *q == '\t';
    while (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n')
        q++;
    r->continued = indented && r->after_key && *q && *q != ';' && *q != '#';
    if (r->continued || !r->ops->section)
        return str;
    const char *close = *q == '[' ? strchr(q, ']') : NULL;
    if (close) {
        char name[256];
        size_t len = (size_t)(close - q - 1);
        if (len >= sizeof name)
            len = sizeof name - 1;
        memcpy(name, q + 1, len);
        name[len] = '\0';
        r->after_key = false;
        if (!r->ops->section(r->user, name, r->line)) {
            r->err = (struct ini_error){ .kind = INI_ERR_STOPPED, .line = r->line };
            return NULL;
        }
    }
    return str;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
    struct reader *r = user;
    if (r->err.kind != INI_OK)
        return 0;
    bool (*cb)(void *, const char *, const char *, const char *, int) =
        r->continued && r->ops->continued ? r->ops->continued : r->ops->key;
    r->after_key = true;
    if (!cb(r->user, section, name, value, r->line)) {
        r->err = (struct ini_error){ .kind = INI_ERR_STOPPED, .line = r->line };
        return 0;
    }
    return 1;
}

int ini_read(const char *text, size_t len, size_t line_max, const struct ini_ops *ops, void *user,
             struct ini_error *ret_err)
{
    struct reader r = { .p = text, .left = len, .line_max = line_max, .ops = ops, .user = user };
    int rc = ini_parse_stream(read_line, &r, on_key, &r);
    if (r.err.kind != INI_OK && (r.err.kind != INI_ERR_STOPPED || rc <= 0 || rc >= r.err.line)) {
        *ret_err = r.err;
        return -EINVAL;
    }
    if (rc != 0) {
        *ret_err = (struct ini_error){ .kind = INI_ERR_SYNTAX, .line = rc > 0 ? rc : r.line };
        return -EINVAL;
    }
    return 0;
}

const struct ini_key *ini_key_find(const struct ini_key *keys, size_t nkeys, const char *section,
                                   const char *name, bool *ret_section_known)
{
    const struct ini_key *k = NULL;
    bool known = false;
    for (size_t i = 0; i < nkeys; i++) {
        if (strcmp(keys[i].section, section) != 0)
            continue;
        known = true;
        if (!k && strcmp(keys[i].name, name) == 0)
            k = &keys[i];
    }
    if (ret_section_known)
        *ret_section_known = known;
    return k;
}

static bool in_range(const struct ini_key *k, double v)
{
    if (v < k->min || v > k->max)
        return false;
    if ((k->flags & INI_MIN_OPEN) && v == k->min)
        return false;
    return !((k->flags & INI_MAX_OPEN) && v == k->max);
}

/* The complaint: the row's hint for any bad value, else the generic words. */
static int bad(const struct ini_key *k, const char *value, const char *generic, char *why,
               size_t why_sz)
{
    if (k->hint)
        snprintf(why, why_sz, "'%s' %s", value, k->hint);
    else
        snprintf(why, why_sz, generic, value);
    return -EINVAL;
}

int ini_key_set(const struct ini_key *k, void *base, const char *value, char *why, size_t why_sz)
{
    char *dst = (char *)base + k->off;
    char *end = NULL;
    errno = 0;
    switch (k->type) {
    case INI_STRING: {
        if (!value[0])
            return bad(k, value, "empty value%s", why, why_sz);
        size_t n = strlen(value);
        if (n >= k->size) {
            snprintf(why, why_sz, "value too long: '%.60s'", value);
            return -EINVAL;
        }
        memcpy(dst, value, n + 1);
        return 0;
    }
    case INI_DOUBLE: {
        double v = strtod(value, &end);
        if (end == value || *end || errno || !isfinite(v))
            return bad(k, value, "'%s' is not a number", why, why_sz);
        if (!in_range(k, v))
            return bad(k, value, "'%s' is out of range", why, why_sz);
        *(double *)dst = v;
        return 0;
    }
    case INI_DURATION: {
        double v;
        int r = ini_parse_duration(value, &v);
        if (r == -ERANGE && k->max >= INI_DURATION_MAX_S) {
            snprintf(why, why_sz, "'%s' is too large (at most " INI_DURATION_MAX_WORDS ")", value);
            return -EINVAL;
        }
        if (r == -ERANGE)
            return bad(k, value, "'%s' is out of range", why, why_sz);
        if (r == -EDOM) {
            snprintf(why, why_sz,
                     "'%s' is not a duration: hex and exponent forms are not taken; write "
                     "decimal digits with a unit, like 30s, 5m, 1h, 250ms, or plain seconds",
                     value);
            return -EINVAL;
        }
        if (r < 0) {
            /* not the row's hint: "'1d' must be a duration greater than 0" read as if 1d were
             * one, too short; the hint is for a duration out of the row's range */
            snprintf(why, why_sz, "'%s' is not a duration: " INI_DURATION_FORMS_WORDS, value);
            return -EINVAL;
        }
        if (!in_range(k, v))
            return bad(k, value, "'%s' is out of range", why, why_sz);
        *(double *)dst = v;
        return 0;
    }
    case INI_BOOL: {
        bool b;
        if (ini_parse_bool(value, &b) < 0)
            return bad(k, value, "'%s' is not a boolean (true/false)", why, why_sz);
        *(bool *)dst = b;
        return 0;
    }
    case INI_U64: {
        if (value[0] == '-')
            return bad(k, value, "'%s' is not a non-negative integer", why, why_sz);
        unsigned long long u = strtoull(value, &end, 10);
        if (end == value || *end || errno)
            return bad(k, value, "'%s' is not an integer", why, why_sz);
        *(uint64_t *)dst = u;
        return 0;
    }
    case INI_INT:
    case INI_I64: {
        long long s = strtoll(value, &end, 10);
        if (end == value || *end || errno)
            return bad(k, value, "'%s' is not an integer", why, why_sz);
        if (!in_range(k, (double)s))
            return bad(k, value, "'%s' is out of range", why, why_sz);
        if (k->type == INI_INT)
            *(int *)dst = (int)s;
        else
            *(int64_t *)dst = s;
        return 0;
    }
    }
    return -EINVAL;
}

int ini_parse_duration(const char *s, double *ret_s)
{
    if (!s || !*s)
        return -EINVAL;
    /* decimal digits with at most one point, then the unit: strtod alone took "0x10" (16 s)
     * and "1e2" (100 s), which nobody means by a duration and nothing else here accepts */
    size_t n = 0, digits = 0;
    while (isdigit((unsigned char)s[n]) || (s[n] == '.' && !strchr(s + n + 1, '.')))
        digits += isdigit((unsigned char)s[n++]) != 0;
    if (!digits)
        return -EINVAL;
    if ((n == 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) ||
        ((s[n] == 'e' || s[n] == 'E') &&
         (isdigit((unsigned char)s[n + 1]) || s[n + 1] == '+' || s[n + 1] == '-')))
        return -EDOM;
    const char *unit = s + n;
    double mult;
    if (*unit == '\0' || strcmp(unit, "s") == 0)
        mult = 1;
    else if (strcmp(unit, "ms") == 0)
        mult = 0.001;
    else if (strcmp(unit, "m") == 0)
        mult = 60;
    else if (strcmp(unit, "h") == 0)
        mult = 3600;
    else
        return -EINVAL;
    /* strtod of the digits alone: leading zeros dropped, a whole part past 20 digits is past any
     * bound, and a fraction cut at 60 digits loses nothing a double keeps */
    while (n > 1 && s[0] == '0' && isdigit((unsigned char)s[1])) {
        s++;
        n--;
    }
    size_t whole = strcspn(s, ".");
    if ((whole < n ? whole : n) > 20)
        return -ERANGE;
    char num[64];
    if (n >= sizeof num)
        n = sizeof num - 1;
    memcpy(num, s, n);
    num[n] = '\0';
    double v = strtod(num, NULL) * mult;
    if (v > INI_DURATION_MAX_S)
        return -ERANGE;
    *ret_s = v;
    return 0;
}

int ini_parse_bool(const char *s, bool *ret_b)
{
    static const char *yes[] = { "true", "yes", "on", "1" }, *no[] = { "false", "no", "off", "0" };
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *ret_b = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *ret_b = false;
            return 0;
        }
    }
    return -EINVAL;
}
