/* trainer/bpe.c: GPT-2 byte-level BPE (see bpe.h).  Owns its hash tables and the compiled
 * pre-tokenizer.  Never: log above debug; trust the vocabulary files (sizes are bounded). */
#include "trainer/bpe.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <jansson.h>
#include <pcre2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define BPE_PATTERN "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define BPE_MAX_TOKEN_BYTES 1024 /* an encoder key or a merge side */
#define BPE_MAX_ENTRIES 1000000
#define BPE_CACHE_MAX 500000
#define BPE_PIECE_MAX 4096 /* longer pre-tokenizer pieces are encoded in slices */

/* ---- a small open-addressing string -> int map ---- */
struct smap {
    char **keys;
    int *vals;
    size_t cap, n;
};

static uint64_t hash_str(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static void smap_done(struct smap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        free(m->keys[i]);
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static int smap_grow(struct smap *m)
{
    size_t nc = m->cap ? m->cap * 2 : 1024;
    char **nk = calloc(nc, sizeof *nk);
    int *nv = calloc(nc, sizeof *nv);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return -ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t j = hash_str(m->keys[i], strlen(m->keys[i])) & (nc - 1);
        while (nk[j])
            j = (j + 1) & (nc - 1);
        nk[j] = m->keys[i];
        nv[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = nk;
    m->vals = nv;
    m->cap = nc;
    return 0;
}

/* key of len bytes (no NUL inside); -1 when absent */
static int smap_get(const struct smap *m, const char *key, size_t len)
{
    if (!m->cap)
        return -1;
    size_t j = hash_str(key, len) & (m->cap - 1);
    while (m->keys[j]) {
        if (!strncmp(m->keys[j], key, len) && m->keys[j][len] == '\0')
            return m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

/* insert or overwrite */
static int smap_put(struct smap *m, const char *key, size_t len, int val)
{
    if ((m->n + 1) * 2 > m->cap) {
        int r = smap_grow(m);
        if (r < 0)
            return r;
    }
    size_t j = hash_str(key, len) & (m->cap - 1);
    while (m->keys[j]) {
        if (!strncmp(m->keys[j], key, len) && m->keys[j][len] == '\0') {
            m->vals[j] = val;
            return 0;
        }
        j = (j + 1) & (m->cap - 1);
    }
    char *k = strndup(key, len);
    if (!k)
        return -ENOMEM;
    m->keys[j] = k;
    m->vals[j] = val;
    m->n++;
    return 0;
}

/* ---- the tokenizer ---- */
struct bpe {
    struct smap enc;    /* token string -> id */
    struct smap ranks;  /* "a b" -> merge rank */
    char byte_utf8[256][3]; /* bytes_to_unicode as UTF-8 (1 or 2 bytes, NUL-terminated) */
    pcre2_code *re;
    pcre2_match_data *md;
    /* cache: piece bytes -> index into cache_ids (first id) with length packed */
    struct smap cache;
    uint32_t *cache_ids;
    size_t cache_n, cache_cap;
    int vocab;
};

void bpe_free(struct bpe *b)
{
    if (!b)
        return;
    smap_done(&b->enc);
    smap_done(&b->ranks);
    smap_done(&b->cache);
    free(b->cache_ids);
    pcre2_match_data_free(b->md);
    pcre2_code_free(b->re);
    free(b);
}

/* GPT-2's bytes_to_unicode: printable bytes map to themselves, the others to 256+n. */
static void init_byte_map(struct bpe *b)
{
    int n = 0;
    for (int c = 0; c < 256; c++) {
        bool printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
        int cp = printable ? c : 256 + n++;
        if (cp < 0x80) {
            b->byte_utf8[c][0] = (char)cp;
            b->byte_utf8[c][1] = 0;
        } else {
            b->byte_utf8[c][0] = (char)(0xC0 | (cp >> 6));
            b->byte_utf8[c][1] = (char)(0x80 | (cp & 0x3F));
            b->byte_utf8[c][2] = 0;
        }
    }
}

int bpe_load_mem(const char *encoder_json, size_t elen, const char *merges, size_t mlen,
                 struct bpe **ret, char *errbuf, size_t errsz)
{
    struct bpe *b = calloc(1, sizeof *b);
    if (!b)
        return -ENOMEM;
    init_byte_map(b);
    int r = -EINVAL;
    json_error_t je;
    json_t *root = json_loadb(encoder_json, elen, JSON_REJECT_DUPLICATES, &je);
    if (!root || !json_is_object(root)) {
        snprintf(errbuf, errsz, "encoder.json: %s (line %d)", root ? "not an object" : je.text, je.line);
        goto fail;
    }
    if (json_object_size(root) > BPE_MAX_ENTRIES) {
        snprintf(errbuf, errsz, "encoder.json: too many entries");
        goto fail;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        json_int_t id = json_is_integer(val) ? json_integer_value(val) : -1;
        size_t kl = strlen(key);
        if (id < 0 || id > 65535 || kl == 0 || kl > BPE_MAX_TOKEN_BYTES) {
            snprintf(errbuf, errsz, "encoder.json: bad entry '%.40s'", key);
            goto fail;
        }
        if ((r = smap_put(&b->enc, key, kl, (int)id)) < 0)
            goto fail;
        if ((int)id + 1 > b->vocab)
            b->vocab = (int)id + 1;
        r = -EINVAL;
    }
    json_decref(root);
    root = NULL;
    /* merges: skip a first line starting with "#version"; each other non-empty line "a b" */
    int rank = 0;
    size_t lineno = 0;
    for (size_t i = 0; i < mlen;) {
        const char *l = merges + i;
        const char *nl = memchr(l, '\n', mlen - i);
        size_t ll = nl ? (size_t)(nl - l) : mlen - i;
        i += ll + (nl ? 1 : 0);
        lineno++;
        if (ll && l[ll - 1] == '\r')
            ll--;
        if (ll == 0 || (lineno == 1 && ll >= 8 && !strncmp(l, "#version", 8)))
            continue;
        const char *sp = memchr(l, ' ', ll);
        if (!sp || sp == l || sp == l + ll - 1 || memchr(sp + 1, ' ', ll - (size_t)(sp - l) - 1) ||
            memchr(l, '\0', ll) || ll > 2 * BPE_MAX_TOKEN_BYTES || rank >= BPE_MAX_ENTRIES) {
            snprintf(errbuf, errsz, "vocab.bpe:%zu: not a merge 'a b'", lineno);
            goto fail;
        }
        if (smap_get(&b->ranks, l, ll) < 0 && (r = smap_put(&b->ranks, l, ll, rank)) < 0)
            goto fail;
        r = -EINVAL;
        rank++;
    }
    int ec;
    PCRE2_SIZE eo;
    b->re = pcre2_compile((PCRE2_SPTR)BPE_PATTERN, PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &eo, NULL);
    if (!b->re) {
        snprintf(errbuf, errsz, "pre-tokenizer pattern did not compile (PCRE2 error %d)", ec);
        goto fail;
    }
    b->md = pcre2_match_data_create_from_pattern(b->re, NULL);
    if (!b->md) {
        r = -ENOMEM;
        goto fail;
    }
    *ret = b;
    return 0;
fail:
    json_decref(root);
    bpe_free(b);
    return r;
}

int bpe_load(const char *encoder_json, const char *vocab_bpe, struct bpe **ret, char *errbuf,
             size_t errsz)
{
    char *e = NULL, *m = NULL;
    size_t el, ml;
    int r = fs_read_file(encoder_json, BPE_MAX_FILE, &e, &el);
    if (r < 0) {
        snprintf(errbuf, errsz, "'%s': %s", encoder_json, strerror(-r));
        return r;
    }
    r = fs_read_file(vocab_bpe, BPE_MAX_FILE, &m, &ml);
    if (r < 0) {
        snprintf(errbuf, errsz, "'%s': %s", vocab_bpe, strerror(-r));
        free(e);
        return r;
    }
    r = bpe_load_mem(e, el, m, ml, ret, errbuf, errsz);
    free(e);
    free(m);
    return r;
}

int bpe_vocab_size(const struct bpe *b)
{
    return b->vocab;
}

static int push_id(uint32_t **ids, size_t *n, size_t *cap, uint32_t id)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        uint32_t *ni = realloc(*ids, nc * sizeof **ids);
        if (!ni)
            return -ENOMEM;
        *ids = ni;
        *cap = nc;
    }
    (*ids)[(*n)++] = id;
    return 0;
}

/* BPE-merge one pre-tokenized piece (raw bytes) and append its ids. */
static int encode_piece(struct bpe *b, const char *p, size_t len, uint32_t **ids, size_t *n,
                        size_t *cap)
{
    int cached = smap_get(&b->cache, p, len);
    if (cached >= 0 && !memchr(p, '\0', len)) {
        size_t at = (size_t)cached;
        for (uint32_t k = 0; k < b->cache_ids[at]; k++)
            if (push_id(ids, n, cap, b->cache_ids[at + 1 + k]) < 0)
                return -ENOMEM;
        return 0;
    }
    /* symbols as NUL-separated strings in one buffer: each symbol is a run of mapped bytes */
    size_t nsym = len;
    char **sym = malloc(nsym * sizeof *sym);
    if (!sym)
        return -ENOMEM;
    int r = 0;
    for (size_t i = 0; i < len; i++) {
        sym[i] = strdup(b->byte_utf8[(uint8_t)p[i]]);
        if (!sym[i]) {
            nsym = i;
            r = -ENOMEM;
            goto out;
        }
    }
    char pair[2 * BPE_MAX_TOKEN_BYTES + 2];
    while (nsym > 1) {
        int best = -1;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < nsym; i++) {
            size_t l1 = strlen(sym[i]), l2 = strlen(sym[i + 1]);
            if (l1 + l2 + 2 > sizeof pair)
                continue;
            memcpy(pair, sym[i], l1);
            pair[l1] = ' ';
            memcpy(pair + l1 + 1, sym[i + 1], l2 + 1);
            int rk = smap_get(&b->ranks, pair, l1 + 1 + l2);
            if (rk >= 0 && (best < 0 || rk < best)) {
                best = rk;
                bi = i;
            }
        }
        if (best < 0)
            break;
        /* merge every occurrence of that pair, left to right (as GPT-2's bpe() does) */
        char *first = strdup(sym[bi]), *second = strdup(sym[bi + 1]);
        if (!first || !second) {
            free(first);
            free(second);
            r = -ENOMEM;
            goto out;
        }
        size_t w = 0;
        for (size_t i = 0; i < nsym;) {
            if (i + 1 < nsym && !strcmp(sym[i], first) && !strcmp(sym[i + 1], second)) {
                size_t l1 = strlen(sym[i]), l2 = strlen(sym[i + 1]);
                char *m = malloc(l1 + l2 + 1);
                if (!m) {
                    /* keep the array consistent for the cleanup */
                    for (size_t k = i; k < nsym; k++)
                        sym[w++] = sym[k];
                    nsym = w;
                    free(first);
                    free(second);
                    r = -ENOMEM;
                    goto out;
                }
                memcpy(m, sym[i], l1);
                memcpy(m + l1, sym[i + 1], l2 + 1);
                free(sym[i]);
                free(sym[i + 1]);
                sym[w++] = m;
                i += 2;
            } else {
                sym[w++] = sym[i++];
            }
        }
        nsym = w;
        free(first);
        free(second);
    }
    size_t start = *n;
    for (size_t i = 0; i < nsym; i++) {
        int id = smap_get(&b->enc, sym[i], strlen(sym[i]));
        if (id < 0) {
            r = -EINVAL;
            goto out;
        }
        if ((r = push_id(ids, n, cap, (uint32_t)id)) < 0)
            goto out;
    }
    /* remember the result for this piece */
    if (b->cache.n < BPE_CACHE_MAX && !memchr(p, '\0', len)) {
        size_t need = 1 + (*n - start);
        if (b->cache_n + need > b->cache_cap) {
            size_t nc = b->cache_cap ? b->cache_cap * 2 : 65536;
            while (nc < b->cache_n + need)
                nc *= 2;
            uint32_t *nci = realloc(b->cache_ids, nc * sizeof *nci);
            if (nci) {
                b->cache_ids = nci;
                b->cache_cap = nc;
            }
        }
        if (b->cache_n + need <= b->cache_cap && b->cache_n < (size_t)INT32_MAX - need &&
            smap_put(&b->cache, p, len, (int)b->cache_n) == 0) {
            b->cache_ids[b->cache_n] = (uint32_t)(*n - start);
            memcpy(b->cache_ids + b->cache_n + 1, *ids + start, (*n - start) * sizeof(uint32_t));
            b->cache_n += need;
        }
    }
out:
    for (size_t i = 0; i < nsym; i++)
        free(sym[i]);
    free(sym);
    return r;
}

int bpe_encode(struct bpe *b, const char *text, size_t len, uint32_t **ids, size_t *n, size_t *cap)
{
    PCRE2_SIZE off = 0;
    while (off < len) {
        int rc = pcre2_match(b->re, (PCRE2_SPTR)text, len, off, 0, b->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0)
            return rc == PCRE2_ERROR_NOMEMORY ? -ENOMEM : -EINVAL;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(b->md);
        size_t s = ov[0], e = ov[1];
        if (e <= s) {
            /* empty match cannot happen with this pattern; step over one byte to be safe */
            off = s + 1;
            continue;
        }
        /* bytes the pattern skipped (invalid UTF-8) are encoded as their own piece */
        if (s > off) {
            int r = encode_piece(b, text + off, s - off, ids, n, cap);
            if (r < 0)
                return r;
        }
        for (size_t k = s; k < e; k += BPE_PIECE_MAX) {
            size_t pl = e - k < BPE_PIECE_MAX ? e - k : BPE_PIECE_MAX;
            int r = encode_piece(b, text + k, pl, ids, n, cap);
            if (r < 0)
                return r;
        }
        off = e;
    }
    if (off < len)
        return encode_piece(b, text + off, len - off, ids, n, cap);
    return 0;
}
