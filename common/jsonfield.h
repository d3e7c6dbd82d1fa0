/* common/jsonfield.h: typed, bounded reads of one member of a jansson object, shared by the
 * wire-format readers in common/ (heartbeat.c, status.c).
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

int jf_int(json_t *o, const char *key, int64_t lo, int64_t hi, bool required, int64_t *v);
int jf_i32(json_t *o, const char *key, int lo, int hi, int *v);
int jf_num(json_t *o, const char *key, double *v);
/* too_long_ok: a longer string is cut to dstsz-1 bytes (labels); else it is -EINVAL (ids). */
int jf_str(json_t *o, const char *key, char *dst, size_t dstsz, bool too_long_ok);

#endif
