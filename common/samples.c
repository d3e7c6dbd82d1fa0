/* common/samples.c: see samples.h; the only file that knows the baseline sample set format. */
#include "common/samples.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonfield.h"
#include "common/util.h"

static bool id_ok(const char *id)
{
    if (strlen(id) != RELEASE_ID_LEN)
        return false;
    for (const char *c = id; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
            return false;
    return true;
}

static bool set_ok(const struct sample_set *s)
{
    if (s->n < 1 || s->n > SAMPLES_MAX || !id_ok(s->release) || s->ranks < 0 ||
        s->warmup_excluded < 0 || !isfinite(s->time))
        return false;
    for (int i = 0; i < s->n; i++)
        if (!isfinite(s->ktok_s[i]) || s->ktok_s[i] <= 0 || !isfinite(s->step_ms[i]) ||
            s->step_ms[i] < 0 || s->ktok_s[i] > 1e12 || s->step_ms[i] > 1e12)
            return false;
    return true;
}

int samples_format(const struct sample_set *s, char **ret_text)
{
    if (!set_ok(s))
        return -EINVAL;
    json_t *o = json_object(), *k = json_array(), *t = json_array();
    if (!o || !k || !t) {
        json_decref(o);
        json_decref(k);
        json_decref(t);
        return -ENOMEM;
    }
    bool any_ms = false;
    for (int i = 0; i < s->n; i++) {
        json_array_append_new(k, json_real(s->ktok_s[i]));
        json_array_append_new(t, json_real(s->step_ms[i]));
        any_ms = any_ms || s->step_ms[i] > 0;
    }
    json_object_set_new(o, "v", json_integer(SAMPLES_VERSION));
    json_object_set_new(o, "release", json_string(s->release));
    json_object_set_new(o, "job", json_string(s->job));
    json_object_set_new(o, "containers", json_string(s->containers));
    json_object_set_new(o, "time", json_real(s->time));
    json_object_set_new(o, "ranks", json_integer(s->ranks));
    json_object_set_new(o, "warmup_excluded", json_integer(s->warmup_excluded));
    json_object_set_new(o, "ktok_s", k);
    if (any_ms)
        json_object_set_new(o, "step_ms", t);
    else
        json_decref(t);
    /* 6 significant digits: throughput noise is far above that, and it keeps the set small. */
    char *text = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6));
    json_decref(o);
    if (!text)
        return -ENOMEM;
    if (strlen(text) > SAMPLES_MAX_BYTES) {
        free(text);
        return -E2BIG;
    }
    *ret_text = text;
    return 0;
}

/* A JSON array of numbers, each finite and in (lo, hi] (or [0, hi] when zero_ok). */
static int read_series(json_t *a, double *out, int *ret_n, bool zero_ok)
{
    if (!json_is_array(a))
        return -EINVAL;
    size_t n = json_array_size(a);
    if (n > SAMPLES_MAX)
        return -E2BIG;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_number(x))
            return -EINVAL;
        double v = json_number_value(x);
        if (!isfinite(v) || v > 1e12 || v < 0 || (v == 0 && !zero_ok))
            return -EINVAL;
        out[i] = v;
    }
    *ret_n = (int)n;
    return 0;
}

int samples_parse(const char *text, size_t len, struct sample_set *ret_s)
{
    json_t *o;
    int r = jf_load(text, len, SAMPLES_MAX_BYTES, SAMPLES_VERSION, &o);
    if (r < 0)
        return r;
    struct sample_set *s = calloc(1, sizeof *s);
    if (!s) {
        json_decref(o);
        return -ENOMEM;
    }
    int64_t ranks = 0, excl = 0;
    int nk = 0, nt = 0;
    json_t *k = json_object_get(o, "ktok_s"), *t = json_object_get(o, "step_ms");
    if (jf_id(o, "release", s->release) < 0 || !s->release[0] ||
        jf_str(o, "job", s->job, sizeof s->job, false) < 0 ||
        jf_str(o, "containers", s->containers, sizeof s->containers, false) < 0 ||
        jf_num_in(o, "time", 0, 1e11, &s->time) < 0 ||
        jf_int(o, "ranks", 0, 1 << 20, false, &ranks) < 0 ||
        jf_int(o, "warmup_excluded", 0, 1 << 30, false, &excl) < 0) {
        r = -EINVAL;
        goto out;
    }
    if (!k) {
        r = -EINVAL;
        goto out;
    }
    r = read_series(k, s->ktok_s, &nk, false);
    if (r == 0 && t)
        r = read_series(t, s->step_ms, &nt, true);
    if (r < 0)
        goto out;
    if (nk < 1 || (t && nt != nk)) {
        r = -EINVAL;
        goto out;
    }
    s->n = nk;
    s->ranks = (int)ranks;
    s->warmup_excluded = (int)excl;
    memcpy(ret_s, s, sizeof *s);
    r = 0;
out:
    free(s);
    json_decref(o);
    return r;
}
