/* agent/field.c: see field.h.  Pure functions, no logging. */
#include "agent/field.h"

#include <errno.h>

#include "common/manifest.h"
#include "common/util.h"

int field_get_i64(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *ret)
{
    json_t *x = json_object_get(o, key);
    if (!x)
        return 0;
    if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > hi)
        return -EINVAL;
    *ret = json_integer_value(x);
    return 0;
}

int field_get_int(json_t *o, const char *key, int lo, int hi, int *ret)
{
    int64_t v;
    json_t *x = json_object_get(o, key);
    if (!x)
        return 0;
    if (field_get_i64(o, key, lo, hi, &v) < 0)
        return -EINVAL;
    *ret = (int)v;
    return 0;
}

int field_get_num(json_t *o, const char *key, double lo, double hi, double *ret)
{
    json_t *x = json_object_get(o, key);
    if (!x)
        return 0;
    if (!json_is_number(x) || !(json_number_value(x) >= lo && json_number_value(x) <= hi))
        return -EINVAL;
    *ret = json_number_value(x);
    return 0;
}

int field_get_str(json_t *o, const char *key, char *dst, size_t dstsz)
{
    json_t *x = json_object_get(o, key);
    if (!x)
        return 0;
    if (!json_is_string(x) || str_copy(dst, dstsz, json_string_value(x)) < 0)
        return -EINVAL;
    return 0;
}

int field_get_id(json_t *o, const char *key, char *dst)
{
    json_t *x = json_object_get(o, key);
    if (!x)
        return 0;
    if (!json_is_string(x))
        return -EINVAL;
    const char *s = json_string_value(x);
    if (s[0] && !sha256_is_hex(s))
        return -EINVAL;
    return str_copy(dst, RELEASE_ID_LEN + 1, s) < 0 ? -EINVAL : 0;
}
