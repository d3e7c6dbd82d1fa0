/* common/samples.c: see samples.h; the only file that knows the baseline sample set format. */
#include "common/samples.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonfield.h"
#include "common/sha256.h"

static bool set_ok(const struct sample_set *s)
{
    if (s->n < 1 || s->n > SAMPLES_MAX || !sha256_is_hex(s->release) || s->ranks < 0 ||
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
    /* Types and bounds through common/jsonfield.c; what makes a set valid (ktok_s > 0, a
     * release id, step_ms as long as ktok_s) is set_ok(), the same check samples_format makes. */
    size_t nk = 0, nt = 0;
    bool has_t = json_object_get(o, "step_ms") != NULL;
    if ((r = jf_id(o, "release", s->release)) < 0 || (r = jf_str(o, "job", s->job, sizeof s->job, false)) < 0 ||
        (r = jf_str(o, "containers", s->containers, sizeof s->containers, false)) < 0 ||
        (r = jf_num_in(o, "time", 0, 1e11, &s->time)) < 0 ||
        (r = jf_i32(o, "ranks", 0, 1 << 20, &s->ranks)) < 0 ||
        (r = jf_i32(o, "warmup_excluded", 0, 1 << 30, &s->warmup_excluded)) < 0 ||
        (r = jf_num_array(o, "ktok_s", 0, 1e12, SAMPLES_MAX, true, s->ktok_s, &nk)) < 0 ||
        (r = jf_num_array(o, "step_ms", 0, 1e12, SAMPLES_MAX, false, s->step_ms, &nt)) < 0)
        goto out;
    s->n = (int)nk;
    if ((has_t && nt != nk) || !set_ok(s)) {
        r = -EINVAL;
        goto out;
    }
    memcpy(ret_s, s, sizeof *s);
    r = 0;
out:
    free(s);
    json_decref(o);
    return r;
}
