/* agent/field.h: typed, range-checked reads of optional members of a jansson object, shared by
 * the agent's parsers (state.json, job specs, control-socket requests).
 * Each returns 0 when the key is absent (ret untouched) or was read into ret; -EINVAL when the
 * member has the wrong type, is out of [lo, hi], or does not fit. */
#ifndef DROVER_AGENT_FIELD_H
#define DROVER_AGENT_FIELD_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

int field_get_i64(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *ret);
int field_get_int(json_t *o, const char *key, int lo, int hi, int *ret);
int field_get_num(json_t *o, const char *key, double lo, double hi, double *ret);
/* A string into dst[dstsz]; too long is -EINVAL. */
int field_get_str(json_t *o, const char *key, char *dst, size_t dstsz);
/* A release id: "" or 64 lowercase hex digits; dst holds RELEASE_ID_LEN + 1 bytes. */
int field_get_id(json_t *o, const char *key, char *dst);

#endif
