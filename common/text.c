/* common/text.c: see text.h.  Pure functions; no allocation except text_escape_dup(). */
#include "common/text.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (1..4) and its code point, or 0 when invalid. */
static size_t utf8_seq(const unsigned char *s, size_t len, uint32_t *ret_cp)
{
    unsigned char c = s[0];
    if (c < 0x80) {
        *ret_cp = c;
        return 1;
    }
    size_t n;
    uint32_t cp, min;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2, cp = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3, cp = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (len < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    *ret_cp = cp;
    return n;
}

static bool cp_is_unsafe(uint32_t cp)
{
    return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) ||
           (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

static bool cp_is_nul(uint32_t cp)
{
    return cp == 0;
}

/* true when s is valid UTF-8 and no code point of it is refused by refused() */
static bool text_all(const char *s, size_t len, bool (*refused)(uint32_t cp))
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        uint32_t cp;
        size_t n = utf8_seq(p + i, len - i, &cp);
        if (!n || refused(cp))
            return false;
        i += n;
    }
    return true;
}

bool text_is_utf8(const char *s, size_t len)
{
    return text_all(s, len, cp_is_nul);
}

bool text_needs_escape(const char *s, size_t len)
{
    return !text_all(s, len, cp_is_unsafe);
}

const char *text_escape(const char *in, size_t len, char *out, size_t out_sz)
{
    if (!out_sz)
        return out;
    const unsigned char *p = (const unsigned char *)in;
    size_t o = 0, i = 0;
    bool cut = false;
    while (i < len) {
        char rep[16];
        size_t rn;
        uint32_t cp;
        size_t n = utf8_seq(p + i, len - i, &cp);
        if (!n) {
            rn = (size_t)snprintf(rep, sizeof rep, "\\x%02x", p[i]);
            n = 1;
        } else if (cp == '\n') {
            rn = 2, memcpy(rep, "\\n", 2);
        } else if (cp == '\r') {
            rn = 2, memcpy(rep, "\\r", 2);
        } else if (cp == '\t') {
            rn = 2, memcpy(rep, "\\t", 2);
        } else if (cp < 0x20 || cp == 0x7f) {
            rn = (size_t)snprintf(rep, sizeof rep, "\\x%02x", (unsigned)cp);
        } else if (cp_is_unsafe(cp)) {
            rn = (size_t)snprintf(rep, sizeof rep, "\\u{%04x}", (unsigned)cp);
        } else {
            rn = n;
            memcpy(rep, p + i, n);
        }
        if (o + rn + 1 > out_sz) {
            cut = true;
            break;
        }
        memcpy(out + o, rep, rn);
        o += rn;
        i += n;
    }
    if (cut) {
        /* make room for "..." at a character boundary: back over whole escapes or sequences */
        while (o > 0 && o + 4 > out_sz) {
            o--;
            while (o > 0 && ((unsigned char)out[o] & 0xc0) == 0x80)
                o--;
        }
        if (o + 4 <= out_sz) {
            memcpy(out + o, "...", 3);
            o += 3;
        }
    }
    out[o] = '\0';
    return out;
}

char *text_escape_dup(const char *s)
{
    if (!s)
        return NULL;
    size_t len = strlen(s);
    size_t sz = len * 8 + 1; /* worst case: every byte becomes "\u{00xx}" (C1 is 2 bytes: 8/2) */
    char *out = malloc(sz);
    if (!out)
        return NULL;
    return (char *)text_escape(s, len, out, sz);
}

const char *text_escape_inplace(char *buf, size_t buf_sz)
{
    size_t len = strnlen(buf, buf_sz);
    if (!text_needs_escape(buf, len))
        return buf;
    char *copy = malloc(len + 1);
    if (!copy) {
        /* no memory for a copy: blank out what is unsafe rather than show it */
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)buf[i] < 0x20 || (unsigned char)buf[i] >= 0x7f)
                buf[i] = '?';
        return buf;
    }
    memcpy(copy, buf, len);
    text_escape(copy, len, buf, buf_sz);
    free(copy);
    return buf;
}

const char *text_json_safe(const char *s, char *buf, size_t buf_sz)
{
    size_t len = strlen(s);
    if (text_is_utf8(s, len))
        return s;
    return text_escape(s, len, buf, buf_sz);
}

const char *text_cut_words(const char *s, const char *more, char *out, size_t out_sz)
{
    static const char ellipsis[] = "\xe2\x80\xa6"; /* U+2026 */
    if (!out_sz)
        return out;
    size_t len = strlen(s);
    if (len < out_sz) {
        memcpy(out, s, len + 1);
        return out;
    }
    if (!more)
        more = "";
    size_t tail = strlen(ellipsis) + strlen(more);
    bool mark = tail < out_sz - 1;
    size_t room = out_sz - 1 - (mark ? tail : 0); /* bytes of s that fit: s[0..room) */
    size_t cut = room;
    while (cut > 0 && s[cut] != ' ') /* s[room] exists: len >= out_sz > room */
        cut--;
    if (cut > 0) { /* the word at the cut is left out whole, with the spaces and " |" before it */
        while (cut > 0 && (s[cut - 1] == ' ' || s[cut - 1] == '|'))
            cut--;
    }
    if (cut > 0) {
        /* never inside a `quoted command`: cut before its opening quote, and before the spaces
         * and "(" that lead to it (a history reason ended "(`drover logs --job J --agent` )") */
        size_t quotes = 0, open = 0;
        for (size_t i = 0; i < cut; i++)
            if (s[i] == '`') {
                quotes++;
                open = i;
            }
        if (quotes % 2) {
            cut = open;
            while (cut > 0 && (s[cut - 1] == ' ' || s[cut - 1] == '(' || s[cut - 1] == '|' ||
                               s[cut - 1] == ';' || s[cut - 1] == ',' || s[cut - 1] == ':'))
                cut--;
        }
    }
    if (!cut) { /* one long word: at a character boundary */
        cut = room;
        while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80)
            cut--;
    }
    memcpy(out, s, cut);
    if (mark)
        snprintf(out + cut, out_sz - cut, "%s%s", ellipsis, more);
    else
        out[cut] = '\0';
    return out;
}

const char *text_plural(long long n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

const char *text_join_names(const char *const names[], int n, int max_named, char *out, size_t out_sz,
                            size_t *off)
{
    int named = n < max_named ? n : max_named;
    for (int k = 0; k < named && *off < out_sz; k++) {
        /* "and" before the last one named when all fit: "a, b and c" */
        const char *sep = k == 0 ? "" : k == n - 1 ? " and " : ", ";
        *off += (size_t)snprintf(out + *off, out_sz - *off, "%s%s", sep, names[k]);
    }
    if (n > named && *off < out_sz)
        *off += (size_t)snprintf(out + *off, out_sz - *off, " and %d more", n - named);
    return out;
}
