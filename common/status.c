/* common/status.c: see status.h; the only file that knows the agent status document.
 * status_format() is called by the agent, status_parse() by the controller; the per-rank
 * heartbeat is embedded with the same field names as the heartbeat line (heartbeat.h). */
#include "common/status.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonfield.h"
#include "common/sha256.h"
#include "common/text.h"
#include "common/util.h"

static const char *const gang_names[GANG_STATE_COUNT] = {
    "stopped", "starting", "running", "stopping", "backoff", "failed", "reverted",
};

const char *gang_state_name(enum gang_state s)
{
    return (unsigned)s < GANG_STATE_COUNT ? gang_names[s] : "unknown";
}

const char *status_job_state_name(const struct job_status *js)
{
    return js ? gang_state_name(js->state) : STATUS_STATE_NO_JOB;
}

int gang_state_from_name(const char *name, enum gang_state *ret)
{
    for (int i = 0; i < GANG_STATE_COUNT; i++)
        if (!strcmp(name, gang_names[i])) {
            *ret = (enum gang_state)i;
            return 0;
        }
    return -EINVAL;
}

const struct job_status *status_find_job(const struct agent_status *st, const char *job)
{
    for (int i = 0; i < st->njobs; i++)
        if (!strcmp(st->jobs[i].job, job))
            return &st->jobs[i];
    return NULL;
}

static const char *const reason_names[STATUS_RC_COUNT] = {
    "", "crash-loop", "fatal-exit", "rank-exit", "completed", "nonfinite", "liveness",
    "environment", "start-failure", "probation-deadline", "other",
};

const char *status_reason_name(enum status_reason c)
{
    return (unsigned)c < STATUS_RC_COUNT ? reason_names[c] : reason_names[STATUS_RC_OTHER];
}

enum status_reason status_reason_from_name(const char *name)
{
    for (int i = 0; i < STATUS_RC_COUNT; i++)
        if (!strcmp(name, reason_names[i]))
            return (enum status_reason)i;
    return STATUS_RC_OTHER;
}

static bool starts_with(const char *s, const char *prefix)
{
    return !strncmp(s, prefix, strlen(prefix));
}

enum status_reason status_reason_from_text(const char *reason)
{
    if (starts_with(reason, STATUS_ATTENTION_PREFIX))
        return STATUS_RC_ENVIRONMENT;
    if (strstr(reason, STATUS_REASON_CRASH_LOOP))
        return STATUS_RC_CRASH_LOOP;
    if (strstr(reason, STATUS_REASON_FATAL_EXIT))
        return STATUS_RC_FATAL_EXIT;
    if (starts_with(reason, STATUS_REASON_LIVENESS ":"))
        return STATUS_RC_LIVENESS;
    if (strstr(reason, STATUS_REASON_STOPPING_TAIL))
        return starts_with(reason, "rank ") &&
                       (strstr(reason, " exited with code ") || strstr(reason, " killed by signal "))
                   ? STATUS_RC_RANK_EXIT
                   : STATUS_RC_OTHER;
    return STATUS_RC_NONE;
}

bool status_reason_in_workers_log(enum status_reason c)
{
    switch (c) {
    case STATUS_RC_CRASH_LOOP:
    case STATUS_RC_FATAL_EXIT:
    case STATUS_RC_RANK_EXIT:
    case STATUS_RC_COMPLETED:
    case STATUS_RC_NONFINITE:
        return true;
    default:
        return false;
    }
}

bool status_reason_stops_gang(enum status_reason c)
{
    return c == STATUS_RC_RANK_EXIT || c == STATUS_RC_NONFINITE || c == STATUS_RC_LIVENESS ||
           c == STATUS_RC_OTHER;
}

static const char *const feature_names[] = {"spec-pairs", "promote-spec", "recorded-spec", "revert-no-start"};

const char *status_feature_name(unsigned feature)
{
    for (unsigned k = 0; k < sizeof feature_names / sizeof feature_names[0]; k++)
        if (feature == 1u << k)
            return feature_names[k];
    return NULL;
}

static json_t *num(double v) { return json_real(isfinite(v) ? v : 0.0); }

int status_format(const struct agent_status *st, char **ret_text)
{
    json_t *o = json_object(), *jobs = json_array();
    json_object_set_new(o, "v", json_integer(STATUS_VERSION));
    json_object_set_new(o, "host", json_string(st->host));
    json_object_set_new(o, "agent_pid", json_integer(st->agent_pid));
    json_object_set_new(o, "agent_version", json_string(st->agent_version));
    json_object_set_new(o, "uptime_s", num(st->uptime_s));
    json_object_set_new(o, "seq", json_integer(st->seq));
    if (st->features) {
        json_t *fa = json_array();
        for (unsigned k = 0; k < sizeof feature_names / sizeof feature_names[0]; k++)
            if (st->features & (1u << k))
                json_array_append_new(fa, json_string(feature_names[k]));
        json_object_set_new(o, "features", fa);
    }
    if (st->wall > 0) {
        /* `wall` goes with the document's 9 significant digits (10 s at today's Unix time), kept
         * for older controllers; `wall_ms` is exact, and what the skew check reads */
        json_object_set_new(o, "wall", num(st->wall));
        json_object_set_new(o, "wall_ms", json_integer((json_int_t)llround(st->wall * 1000)));
    }
    for (int j = 0; j < st->njobs && j < STATUS_MAX_JOBS; j++) {
        const struct job_status *js = &st->jobs[j];
        json_t *jo = json_object(), *ranks = json_array();
        json_object_set_new(jo, "job", json_string(js->job));
        json_object_set_new(jo, "current", json_string(js->current));
        json_object_set_new(jo, "previous", json_string(js->previous));
        json_object_set_new(jo, "good", json_string(js->good));
        json_object_set_new(jo, "state", json_string(gang_state_name(js->state)));
        json_object_set_new(jo, "release", json_string(js->release));
        json_object_set_new(jo, "generation", json_integer(js->generation));
        json_object_set_new(jo, "restarts", json_integer(js->restarts));
        json_object_set_new(jo, "age_s", num(js->age_s));
        json_object_set_new(jo, "world_size", json_integer(js->world_size));
        json_object_set_new(jo, "node_rank", json_integer(js->node_rank));
        json_object_set_new(jo, "nproc", json_integer(js->nproc));
        char reason[4 * sizeof js->reason]; /* cut to fit, maybe mid-character: kept valid */
        json_object_set_new(jo, "reason", json_string(text_json_safe(js->reason, reason, sizeof reason)));
        json_object_set_new(jo, "reason_code", json_string(status_reason_name(js->reason_code)));
        if (js->peer_exit)
            json_object_set_new(jo, "peer_exit", json_true());
        if (js->probation_left_s > 0) /* 0: a zeroed struct's, as none */
            json_object_set_new(jo, "probation_left_s", num(js->probation_left_s));
        if (js->lease_holder[0]) {
            char lh[4 * sizeof js->lease_holder];
            json_object_set_new(jo, "lease_holder", json_string(text_json_safe(js->lease_holder, lh, sizeof lh)));
            json_object_set_new(jo, "lease_left_s", num(js->lease_left_s >= 0 ? js->lease_left_s : 0));
        }
        if (js->rdzv[0])
            json_object_set_new(jo, "rdzv", json_string(js->rdzv));
        if (js->last_restart_reason[0]) {
            char lr[4 * sizeof js->last_restart_reason];
            json_object_set_new(jo, "last_restart_reason",
                                json_string(text_json_safe(js->last_restart_reason, lr, sizeof lr)));
        }
        if (js->spec_digest[0])
            json_object_set_new(jo, "spec_digest", json_string(js->spec_digest));
        if (js->spec_fields[0])
            json_object_set_new(jo, "spec_fields", json_string(js->spec_fields));
        if (js->good_spec_digest[0])
            json_object_set_new(jo, "good_spec_digest", json_string(js->good_spec_digest));
        json_t *bad = json_array(), *goods = json_array();
        for (int k = 0; k < js->nbad && k < STATUS_MAX_MARKS; k++)
            json_array_append_new(bad, json_string(js->bad[k]));
        for (int k = 0; k < js->ngoods && k < STATUS_MAX_MARKS; k++)
            json_array_append_new(goods, json_string(js->goods[k]));
        json_object_set_new(jo, "bad", bad);
        json_object_set_new(jo, "goods", goods);
        json_t *bad_reasons = json_array();
        for (int k = 0; k < js->nbad && k < STATUS_MAX_MARKS; k++) {
            char br[4 * STATUS_BAD_REASON_MAX]; /* cut to fit, maybe mid-character: kept valid */
            json_array_append_new(bad_reasons, json_string(text_json_safe(js->bad_reason[k], br, sizeof br)));
        }
        json_object_set_new(jo, "bad_reasons", bad_reasons);
        if (st->features & STATUS_FEAT_RECORDED_SPEC) {
            json_t *gs = json_array();
            for (int k = 0; k < js->ngoods && k < STATUS_MAX_MARKS; k++)
                json_array_append_new(gs, json_string(js->goods_spec[k]));
            json_object_set_new(jo, "goods_spec", gs);
        }
        for (int i = 0; i < js->nranks && i < STATUS_MAX_RANKS; i++) {
            const struct rank_status *rs = &js->ranks[i];
            json_t *ro = json_object();
            json_object_set_new(ro, "rank", json_integer(rs->rank));
            json_object_set_new(ro, "local_rank", json_integer(rs->local_rank));
            json_object_set_new(ro, "pid", json_integer(rs->pid));
            json_object_set_new(ro, "state", json_string(rs->state));
            json_object_set_new(ro, "hb_age_s", num(rs->hb_age_s));
            if (rs->state_age_s > 0)
                json_object_set_new(ro, "state_age_s", num(rs->state_age_s));
            json_object_set_new(ro, "exit_code", json_integer(rs->exit_code));
            json_object_set_new(ro, "exit_signal", json_integer(rs->exit_signal));
            if (rs->bad_lines > 0)
                json_object_set_new(ro, "bad_lines", json_integer((json_int_t)rs->bad_lines));
            json_object_set_new(ro, "hb", rs->has_hb ? heartbeat_to_json(&rs->hb) : json_null());
            if (rs->gpu.valid)
                json_object_set_new(ro, "gpu",
                                    json_pack("{s:o,s:I,s:I,s:o,s:o}", "util", num(rs->gpu.util), "mem_used",
                                              (json_int_t)rs->gpu.mem_used, "mem_total",
                                              (json_int_t)rs->gpu.mem_total, "temp", num(rs->gpu.temp),
                                              "slowdown_temp", num(rs->gpu.slowdown_temp)));
            if (rs->gpu.valid) {
                json_t *go = json_object_get(ro, "gpu");
                if (go && rs->gpu.index >= 0)
                    json_object_set_new(go, "index", json_integer(rs->gpu.index));
                if (go && rs->gpu.uuid[0])
                    json_object_set_new(go, "uuid", json_string(rs->gpu.uuid));
            }
            else
                json_object_set_new(ro, "gpu", json_null());
            json_array_append_new(ranks, ro);
        }
        json_object_set_new(jo, "ranks", ranks);
        json_array_append_new(jobs, jo);
    }
    json_object_set_new(o, "jobs", jobs);
    char *text = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(o);
    if (!text)
        return -ENOMEM;
    *ret_text = text;
    return 0;
}

static int rank_from_json(json_t *o, struct rank_status *rs)
{
    memset(rs, 0, sizeof *rs);
    rs->exit_code = -1;
    rs->hb_age_s = -1;
    if (!json_is_object(o) || jf_i32(o, "rank", 0, 1 << 20, &rs->rank) < 0 ||
        jf_i32(o, "local_rank", 0, 1 << 20, &rs->local_rank) < 0 || jf_int(o, "pid", 0, INT64_MAX, false, &rs->pid) < 0 ||
        jf_str(o, "state", rs->state, sizeof rs->state, false) < 0 || jf_num(o, "hb_age_s", &rs->hb_age_s) < 0 ||
        jf_num(o, "state_age_s", &rs->state_age_s) < 0 ||
        jf_i32(o, "exit_code", -1, 255, &rs->exit_code) < 0 || jf_i32(o, "exit_signal", 0, 128, &rs->exit_signal) < 0 ||
        jf_int(o, "bad_lines", 0, INT64_MAX, false, &rs->bad_lines) < 0)
        return -EINVAL;
    json_t *hb = json_object_get(o, "hb");
    if (hb && !json_is_null(hb)) {
        if (heartbeat_from_json(hb, &rs->hb) < 0)
            return -EINVAL;
        rs->has_hb = true;
    }
    json_t *g = json_object_get(o, "gpu");
    if (g && !json_is_null(g)) {
        if (!json_is_object(g) || jf_num(g, "util", &rs->gpu.util) < 0 ||
            jf_int(g, "mem_used", 0, INT64_MAX, false, &rs->gpu.mem_used) < 0 ||
            jf_int(g, "mem_total", 0, INT64_MAX, false, &rs->gpu.mem_total) < 0 || jf_num(g, "temp", &rs->gpu.temp) < 0 ||
            jf_num(g, "slowdown_temp", &rs->gpu.slowdown_temp) < 0)
            return -EINVAL;
        rs->gpu.index = -1;
        if (jf_i32(g, "index", -1, 1023, &rs->gpu.index) < 0 ||
            jf_str(g, "uuid", rs->gpu.uuid, sizeof rs->gpu.uuid, false) < 0 ||
            (rs->gpu.uuid[0] && !gpu_uuid_is_valid(rs->gpu.uuid)))
            return -EINVAL;
        rs->gpu.valid = true;
    }
    return 0;
}

double rank_status_ktok(const struct rank_status *rs)
{
    static const char *const live[] = { "running", "starting", "checkpointing" };
    if (!rs->has_hb || !isfinite(rs->hb.tok_s) || rs->hb.tok_s <= 0) /* 0: unknown (heartbeat.h) */
        return NAN;
    /* a frozen rank is "running" to its agent until half its silence_deadline: its figure is
     * stale once its heartbeat is older than three of its steps (at least 10 s) */
    double stale_s = fmax(10.0, isfinite(rs->hb.step_ms) ? 3 * rs->hb.step_ms / 1000.0 : 0);
    if (rs->hb_age_s > stale_s)
        return NAN;
    for (size_t i = 0; i < sizeof live / sizeof *live; i++)
        if (strcmp(rs->state, live[i]) == 0)
            return rs->hb.tok_s / 1000.0;
    return NAN;
}

bool gpu_uuid_is_valid(const char *s)
{
    if (strncmp(s, "GPU-", 4) != 0 && strncmp(s, "MIG-", 4) != 0)
        return false;
    size_t n = strlen(s);
    if (n <= 4 || n >= GPU_UUID_MAX)
        return false;
    for (const char *p = s + 4; *p; p++)
        if (!isxdigit((unsigned char)*p) && *p != '-')
            return false;
    return true;
}

static int job_from_json(json_t *o, struct job_status *js)
{
    memset(js, 0, sizeof *js);
    char state[16] = "stopped";
    if (!json_is_object(o) || jf_str(o, "job", js->job, sizeof js->job, false) < 0 ||
        jf_str(o, "current", js->current, sizeof js->current, false) < 0 ||
        jf_str(o, "previous", js->previous, sizeof js->previous, false) < 0 ||
        jf_str(o, "good", js->good, sizeof js->good, false) < 0 || jf_str(o, "state", state, sizeof state, false) < 0 ||
        gang_state_from_name(state, &js->state) < 0 || jf_str(o, "release", js->release, sizeof js->release, false) < 0 ||
        jf_i32(o, "generation", 0, INT32_MAX, &js->generation) < 0 ||
        jf_i32(o, "restarts", 0, INT32_MAX, &js->restarts) < 0 || jf_num(o, "age_s", &js->age_s) < 0 ||
        jf_i32(o, "world_size", 0, 1 << 20, &js->world_size) < 0 ||
        jf_i32(o, "node_rank", 0, 1 << 20, &js->node_rank) < 0 || jf_i32(o, "nproc", 0, 1 << 20, &js->nproc) < 0)
        return -EINVAL;
    /* optional (agents before the field, or no restart): "" */
    if (jf_str(o, "last_restart_reason", js->last_restart_reason, sizeof js->last_restart_reason, true) < 0)
        return -EINVAL;
    /* optional, true only (agents before the field: false) */
    json_t *ps = json_object_get(o, "peer_exit");
    if (ps && !json_is_boolean(ps))
        return -EINVAL;
    js->peer_exit = json_is_true(ps);
    /* optional (agents before the fields, or none armed/held): -1 and "" */
    js->probation_left_s = js->lease_left_s = -1;
    if ((json_object_get(o, "probation_left_s") &&
         jf_num_in(o, "probation_left_s", 0, 1e9, &js->probation_left_s) < 0) ||
        jf_str(o, "lease_holder", js->lease_holder, sizeof js->lease_holder, true) < 0 ||
        (json_object_get(o, "lease_left_s") && jf_num_in(o, "lease_left_s", 0, 1e9, &js->lease_left_s) < 0))
        return -EINVAL;
    /* optional (agents before the field, or no --rdzv given): "" is unknown */
    if (jf_str(o, "rdzv", js->rdzv, sizeof js->rdzv, false) < 0 ||
        (js->rdzv[0] && !status_rdzv_is_valid(js->rdzv)))
        return -EINVAL;
    /* optional (agents before the spec digest): "" is "unknown", which the survey redeploys */
    if (jf_str(o, "spec_digest", js->spec_digest, sizeof js->spec_digest, false) < 0 ||
        (js->spec_digest[0] && !spec_digest_is_valid(js->spec_digest)) ||
        jf_str(o, "spec_fields", js->spec_fields, sizeof js->spec_fields, false) < 0 ||
        (js->spec_fields[0] && !spec_fields_is_valid(js->spec_fields)) ||
        jf_str(o, "good_spec_digest", js->good_spec_digest, sizeof js->good_spec_digest, false) < 0 ||
        (js->good_spec_digest[0] && !spec_digest_is_valid(js->good_spec_digest)))
        return -EINVAL;
    json_t *reason = json_object_get(o, "reason");
    if (reason) {
        if (!json_is_string(reason))
            return -EINVAL;
        (void)text_cut_words(json_string_value(reason), NULL, js->reason, sizeof js->reason); /* a newer agent's */
    }
    /* optional: an agent before the code sends only the text, read as the controller read it */
    json_t *code = json_object_get(o, "reason_code");
    if (code) {
        if (!json_is_string(code))
            return -EINVAL;
        js->reason_code = status_reason_from_name(json_string_value(code));
    } else {
        js->reason_code = status_reason_from_text(js->reason);
    }
    static const char *const lists[] = {"bad", "goods"};
    for (int l = 0; l < 2; l++) { /* optional: agents before 2026-12 do not send them */
        json_t *a;
        if (jf_array(o, lists[l], STATUS_MAX_MARKS, &a) < 0)
            return -EINVAL;
        size_t i;
        json_t *v;
        json_array_foreach(a, i, v)
        {
            const char *id = json_string_value(v);
            char *dst = l == 0 ? js->bad[i] : js->goods[i];
            if (!id || !sha256_is_hex(id))
                return -EINVAL;
            (void)str_copy(dst, RELEASE_ID_LEN + 1, id);
        }
        if (l == 0)
            js->nbad = (int)json_array_size(a);
        else
            js->ngoods = (int)json_array_size(a);
    }
    /* optional (agents before it): "" each; when present, one per bad entry */
    json_t *br = NULL;
    if (jf_array(o, "bad_reasons", STATUS_MAX_MARKS, &br) < 0 ||
        (json_array_size(br) && (int)json_array_size(br) != js->nbad))
        return -EINVAL;
    {
        size_t k;
        json_t *v;
        json_array_foreach(br, k, v)
        {
            if (!json_is_string(v))
                return -EINVAL;
            (void)text_cut_words(json_string_value(v), NULL, js->bad_reason[k], sizeof js->bad_reason[0]);
        }
    }
    /* optional (agents before "recorded-spec"): "" each; when present, one per goods entry */
    json_t *gs = NULL;
    if (jf_array(o, "goods_spec", STATUS_MAX_MARKS, &gs) < 0 ||
        (json_array_size(gs) && (int)json_array_size(gs) != js->ngoods))
        return -EINVAL;
    {
        size_t k;
        json_t *v;
        json_array_foreach(gs, k, v)
        {
            const char *d = json_string_value(v);
            if (!d || (d[0] && !spec_digest_is_valid(d)))
                return -EINVAL;
            (void)str_copy(js->goods_spec[k], sizeof js->goods_spec[k], d);
        }
    }
    json_t *ranks, *r;
    size_t i;
    int e = jf_array(o, "ranks", STATUS_MAX_RANKS, &ranks);
    if (e < 0)
        return e;
    json_array_foreach(ranks, i, r)
    {
        if ((e = rank_from_json(r, &js->ranks[i])) < 0)
            return e;
    }
    js->nranks = (int)json_array_size(ranks);
    return 0;
}

int status_parse(const char *text, size_t len, struct agent_status *ret_st)
{
    json_t *o;
    int r = jf_load(text, len, STATUS_MAX_BYTES, STATUS_VERSION, &o);
    if (r < 0)
        return r;
    struct agent_status *st = calloc(1, sizeof *st);
    r = -EINVAL;
    if (!st) {
        r = -ENOMEM;
        goto out;
    }
    if (jf_str(o, "host", st->host, sizeof st->host, false) < 0 || jf_int(o, "agent_pid", 0, INT64_MAX, false, &st->agent_pid) < 0 ||
        jf_str(o, "agent_version", st->agent_version, sizeof st->agent_version, false) < 0 ||
        jf_num(o, "uptime_s", &st->uptime_s) < 0 || jf_int(o, "seq", 0, INT64_MAX, false, &st->seq) < 0 ||
        jf_num_in(o, "wall", 0, 1e11, &st->wall) < 0)
        goto out;
    int64_t wall_ms = -1;
    if (jf_int(o, "wall_ms", 0, (int64_t)1e14, false, &wall_ms) < 0)
        goto out;
    if (wall_ms >= 0)
        st->wall = (double)wall_ms / 1000;
    json_t *jobs, *j, *fa = NULL;
    size_t i;
    if (jf_array(o, "features", 32, &fa) < 0) /* optional; names this reader does not know are skipped */
        goto out;
    json_array_foreach(fa, i, j)
    {
        if (!json_is_string(j))
            goto out;
        for (unsigned k = 0; k < sizeof feature_names / sizeof feature_names[0]; k++)
            if (!strcmp(json_string_value(j), feature_names[k]))
                st->features |= 1u << k;
    }
    if ((r = jf_array(o, "jobs", STATUS_MAX_JOBS, &jobs)) < 0)
        goto out;
    json_array_foreach(jobs, i, j)
    {
        if ((r = job_from_json(j, &st->jobs[i])) < 0)
            goto out;
    }
    st->njobs = (int)json_array_size(jobs);
    *ret_st = *st;
    r = 0;
out:
    free(st);
    json_decref(o);
    return r;
}

int status_after_lease(const char *out, size_t len, size_t *ret_off, size_t *ret_len)
{
    if (!out)
        return -ENOENT;
    size_t end = len;
    if (end && out[end - 1] == '\n')
        end--;
    const char *nl = end ? memrchr(out, '\n', end) : NULL;
    size_t start = nl ? (size_t)(nl - out) + 1 : 0;
    if (start >= end || out[start] != '{')
        return -ENOENT;
    *ret_off = start;
    *ret_len = end - start;
    return 0;
}

bool status_rdzv_is_valid(const char *t)
{
    size_t n = t ? strlen(t) : 0;
    if (n == 0 || n >= STATUS_RDZV_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = t[i];
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
              c == '-'))
            return false;
    }
    return true;
}
