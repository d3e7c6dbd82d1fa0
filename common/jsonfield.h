/* common/jsonfield.h: typed, bounded reads of one member of a jansson object, shared by the
 * wire-format and state readers (common/heartbeat.c, status.c, manifest.c, samples.c; agent/state.c,
 * spec.c, rpc.c).
 *
 * Each returns 0 and writes *v (or dst) when the member is present and valid, 0 and leaves the
 * output untouched when it is absent (and not required; JSON null counts as absent for
 * numbers), and -EINVAL for a member of the wrong type or out of [lo, hi], or a required one
 * that is missing.  The object is borrowed; nothing is allocated.
 */
#ifndef DROVER_JSONFIELD_H
#define DROVER_JSONFIELD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parse a versioned document: at most max bytes (-E2BIG), a JSON object without duplicate keys
 * whose integer member "v" is present (-EINVAL otherwise) and equals version (-EPROTONOSUPPORT).
 * On success *ret_o is a new reference (json_decref). */
int jf_load(const char *text, size_t len, size_t max, int64_t version, json_t **ret_o);

int jf_int(json_t *o, const char *key, int64_t lo, int64_t hi, bool required, int64_t *v);
int jf_i32(json_t *o, const char *key, int lo, int hi, int *v);
int jf_num(json_t *o, const char *key, double *v);
/* A number in [lo, hi] (NaN never is). */
int jf_num_in(json_t *o, const char *key, double lo, double hi, double *v);
/* too_long_ok: a longer string is cut to dstsz-1 bytes (labels); else it is -EINVAL (ids). */
int jf_str(json_t *o, const char *key, char *dst, size_t dstsz, bool too_long_ok);
/* A release id: "" or 64 lowercase hex digits (common/manifest.h); dst holds RELEASE_ID_LEN + 1. */
int jf_id(json_t *o, const char *key, char *dst);
/* The member key when it is an array of at most max elements: 0 and *ret_a the borrowed array,
 * or NULL when the member is absent (json_array_foreach runs no round on NULL); -EINVAL when it
 * is not an array, -E2BIG when it is longer than max (*ret_a untouched on failure). */
int jf_array(json_t *o, const char *key, size_t max, json_t **ret_a);
/* An array of at most max numbers, each in [lo, hi] (NaN never is): *ret_n and out[0..n) are
 * written only when every element is valid; -E2BIG over max.  An absent member is 0 with the
 * outputs untouched, or -EINVAL when required. */
int jf_num_array(json_t *o, const char *key, double lo, double hi, size_t max, bool required, double *out,
                 size_t *ret_n);

#endif
