/* common/event.c: the event journal line (see event.h): writer and reader, nothing else. */
#include "common/event.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

int event_format(int64_t seq, double ts, const char *job, const char *kind, const char *release,
                 const char *detail, char *buf, size_t buf_sz)
{
    json_t *o = json_pack("{s:I,s:f,s:s,s:s,s:s,s:s,s:i}", "seq", (json_int_t)seq, "ts", ts, "job",
                          job ? job : "", "kind", kind, "release", release ? release : "", "detail",
                          detail ? detail : "", "v", EVENT_VERSION);
    if (!o)
        return -ENOMEM;
    char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    if (!text)
        return -ENOMEM;
    size_t n = strlen(text);
    int r = (int)n;
    if (n + 1 > EVENT_LINE_MAX || n + 1 > buf_sz)
        r = -E2BIG;
    else
        memcpy(buf, text, n + 1);
    free(text);
    return r;
}

int event_parse(const char *line, size_t len, struct event *ret)
{
    if (len > EVENT_PARSE_MAX)
        return -E2BIG;
    json_error_t jerr;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!o)
        return -EINVAL;
    int r = -EINVAL;
    json_t *seq = json_object_get(o, "seq"), *ts = json_object_get(o, "ts");
    json_t *job = json_object_get(o, "job"), *kind = json_object_get(o, "kind");
    json_t *rel = json_object_get(o, "release"), *det = json_object_get(o, "detail");
    json_t *v = json_object_get(o, "v");
    if (!json_is_object(o) || !json_is_integer(seq) || !json_is_number(ts) || !json_is_string(kind))
        goto out;
    if ((job && !json_is_string(job)) || (rel && !json_is_string(rel)) || (det && !json_is_string(det)))
        goto out;
    if (v && !json_is_integer(v))
        goto out;
    if (v && json_integer_value(v) != EVENT_VERSION) {
        r = -EPROTONOSUPPORT;
        goto out;
    }
    struct event e = { 0 };
    e.seq = json_integer_value(seq);
    e.ts = json_number_value(ts);
    (void)str_copy(e.kind, sizeof e.kind, json_string_value(kind));
    if (job)
        (void)str_copy(e.job, sizeof e.job, json_string_value(job));
    if (rel)
        (void)str_copy(e.release, sizeof e.release, json_string_value(rel));
    if (det)
        (void)str_copy(e.detail, sizeof e.detail, json_string_value(det));
    *ret = e;
    r = 0;
out:
    json_decref(o);
    return r;
}
