/* common/jsonfield.c: see jsonfield.h. */
#include "common/jsonfield.h"

#include <errno.h>
#include <string.h>

#include "common/manifest.h"
#include "common/util.h"

int jf_load(const char *text, size_t len, size_t max, int64_t version, json_t **ret_o)
{
    if (len > max)
        return -E2BIG;
    json_error_t jerr;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!o)
        return -EINVAL;
    json_t *v = json_object_get(o, "v");
    int r = !json_is_object(o) || !json_is_integer(v) ? -EINVAL
            : json_integer_value(v) != version       ? -EPROTONOSUPPORT
                                                     : 0;
    if (r < 0) {
        json_decref(o);
        return r;
    }
    *ret_o = o;
    return 0;
}

int jf_int(json_t *o, const char *key, int64_t lo, int64_t hi, bool required, int64_t *v)
{
    json_t *x = json_object_get(o, key);
    if (!x)
        return required ? -EINVAL : 0;
    if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > hi)
        return -EINVAL;
    *v = json_integer_value(x);
    return 0;
}

int jf_i32(json_t *o, const char *key, int lo, int hi, int *v)
{
    int64_t t = *v;
    int r = jf_int(o, key, lo, hi, false, &t);
    if (r == 0)
        *v = (int)t;
    return r;
}

int jf_num(json_t *o, const char *key, double *v)
{
    json_t *x = json_object_get(o, key);
    if (!x || json_is_null(x))
        return 0;
    if (!json_is_number(x))
        return -EINVAL;
    *v = json_number_value(x);
    return 0;
}

int jf_str(json_t *o, const char *key, char *dst, size_t dstsz, bool too_long_ok)
{
    json_t *x = json_object_get(o, key);
    if (!x)
        return 0;
    if (!json_is_string(x))
        return -EINVAL;
    const char *v = json_string_value(x);
    if (strlen(v) >= dstsz && !too_long_ok)
        return -EINVAL; /* before copying: dst stays untouched on failure */
    (void)str_copy(dst, dstsz, v);
    return 0;
}

int jf_num_in(json_t *o, const char *key, double lo, double hi, double *v)
{
    double t = *v;
    int r = jf_num(o, key, &t);
    if (r < 0 || !(t >= lo && t <= hi))
        return -EINVAL;
    *v = t;
    return 0;
}

int jf_id(json_t *o, const char *key, char *dst)
{
    char id[RELEASE_ID_LEN + 1] = "";
    json_t *x = json_object_get(o, key);
    if (!x)
        return 0;
    if (jf_str(o, key, id, sizeof id, false) < 0 || (id[0] && !sha256_is_hex(id)))
        return -EINVAL;
    memcpy(dst, id, sizeof id);
    return 0;
}

int jf_array(json_t *o, const char *key, size_t max, json_t **ret_a)
{
    json_t *a = json_object_get(o, key);
    if (a && !json_is_array(a))
        return -EINVAL;
    if (a && json_array_size(a) > max)
        return -E2BIG;
    *ret_a = a;
    return 0;
}

int jf_num_array(json_t *o, const char *key, double lo, double hi, size_t max, bool required, double *out,
                 size_t *ret_n)
{
    json_t *a;
    int r = jf_array(o, key, max, &a);
    if (r < 0)
        return r;
    if (!a)
        return required ? -EINVAL : 0;
    size_t n = json_array_size(a);
    for (size_t i = 0; i < n; i++) { /* validate all first: out is untouched on failure */
        json_t *x = json_array_get(a, i);
        if (!json_is_number(x) || !(json_number_value(x) >= lo && json_number_value(x) <= hi))
            return -EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = json_number_value(json_array_get(a, i));
    *ret_n = n;
    return 0;
}
