/* common/histrec.c: a deploy history record as its JSON line and back (see histrec.h). */
#include "common/histrec.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "common/status.h"
#include "common/util.h"

static const char *const history_reason_names[HISTORY_RC_COUNT] = {
    "", "agent-revert", "environment", "promote-failed", "other", "operator-revert", "undecided",
    "agent-stopped", "agent-stopped-hung",
};

const char *history_reason_name(enum history_reason c)
{
    return (unsigned)c < HISTORY_RC_COUNT ? history_reason_names[c] : history_reason_names[HISTORY_RC_OTHER];
}

enum history_reason history_reason_from_name(const char *name)
{
    for (int i = 0; i < HISTORY_RC_COUNT; i++)
        if (!strcmp(name, history_reason_names[i]))
            return (enum history_reason)i;
    return HISTORY_RC_OTHER;
}

/* The words deploy.c and rollback.c recorded before the code: kept for reading those records
 * only; nothing written since is decided on by them. */
enum history_reason history_reason_from_text(const char *result, const char *reason)
{
    bool failed = !strcmp(result, "failed");
    if (failed && (strstr(reason, "promote failed") || strstr(reason, "promote by the operator failed")))
        return HISTORY_RC_PROMOTE_FAILED;
    if (failed && strstr(reason, STATUS_ATTENTION_PREFIX))
        return HISTORY_RC_ENVIRONMENT;
    if (!strcmp(result, "reverted") && strstr(reason, "by itself"))
        return HISTORY_RC_AGENT_REVERT;
    return HISTORY_RC_NONE;
}

int history_entry_format(const struct history_entry *e, char **ret_line)
{
    /* reason_code always, "" too: a record without it is an older drover's (history_entry_parse) */
    json_t *o = json_pack("{s:i,s:f,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "v", 1, "time", e->time, "job",
                          e->job, "release", e->release, "name", e->name, "result", e->result,
                          "previous", e->previous, "reason", e->reason, "reason_code",
                          history_reason_name(e->reason_code), "containers", e->containers);
    if (!o)
        return -ENOMEM;
    if (e->ktok_s >= 0)
        json_object_set_new(o, "ktok_s", json_real(e->ktok_s));
    if (e->baseline_ktok_s >= 0)
        json_object_set_new(o, "baseline_ktok_s", json_real(e->baseline_ktok_s));
    if (e->by[0])
        json_object_set_new(o, "by", json_string(e->by));
    json_object_set_new(o, "layout", json_integer(HISTORY_LAYOUT));
    char *line = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    if (!line)
        return -ENOMEM;
    *ret_line = line;
    return 0;
}

static json_t *num_or_null(double x)
{
    return x >= 0 ? json_real(x) : json_null();
}

json_t *history_entry_json(const struct history_entry *e)
{
    json_t *o = json_pack("{s:f,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "time", e->time, "job", e->job,
                          "release", e->release, "name", e->name, "result", e->result, "previous",
                          e->previous, "reason", e->reason, "reason_code",
                          history_reason_name(e->reason_code), "containers", e->containers);
    if (o) {
        json_object_set_new(o, "ktok_s", num_or_null(e->ktok_s));
        json_object_set_new(o, "baseline_ktok_s", num_or_null(e->baseline_ktok_s));
        json_object_set_new(o, "by", json_string(e->by[0] ? e->by : "drover"));
    }
    return o;
}

/* A record of a drover before HISTORY_LAYOUT: its rollback of a release never promoted (the
 * agents' revert, reason "operator rollback": rollback.c wrote no other words for it) named the
 * release it left as release and the good one it went back to as previous; turned round.  Its
 * rollback to an earlier good release named the target in both (or, failed, as release): as
 * the layout says already.  Decided on the words because nothing else tells the two apart in
 * those records; nothing written since is decided on them. */
static void history_entry_upgrade(struct history_entry *e)
{
    if (strcmp(e->name, "rollback") != 0 || strcmp(e->reason, "operator rollback") != 0 ||
        !e->previous[0] || !strcmp(e->release, e->previous))
        return;
    char t[sizeof e->release];
    memcpy(t, e->release, sizeof t);
    memcpy(e->release, e->previous, sizeof e->release);
    memcpy(e->previous, t, sizeof e->previous);
}

static void get_str(json_t *o, const char *k, char *dst, size_t sz)
{
    const char *s = json_string_value(json_object_get(o, k));
    (void)str_copy(dst, sz, s ? s : "");
}

static double get_num(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : -1;
}

int history_entry_parse(const char *line, size_t len, struct history_entry *ret)
{
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return -EINVAL;
    }
    struct history_entry e = { 0 };
    get_str(o, "job", e.job, sizeof e.job);
    e.time = get_num(o, "time");
    get_str(o, "release", e.release, sizeof e.release);
    get_str(o, "name", e.name, sizeof e.name);
    get_str(o, "result", e.result, sizeof e.result);
    get_str(o, "previous", e.previous, sizeof e.previous);
    get_str(o, "reason", e.reason, sizeof e.reason);
    json_t *code = json_object_get(o, "reason_code");
    if (json_is_string(code))
        e.reason_code = history_reason_from_name(json_string_value(code));
    else
        e.reason_code = history_reason_from_text(e.result, e.reason);
    get_str(o, "containers", e.containers, sizeof e.containers);
    get_str(o, "by", e.by, sizeof e.by);
    e.ktok_s = get_num(o, "ktok_s");
    e.baseline_ktok_s = get_num(o, "baseline_ktok_s");
    if (get_num(o, "layout") < HISTORY_LAYOUT)
        history_entry_upgrade(&e);
    json_decref(o);
    *ret = e;
    return 0;
}
