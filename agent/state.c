/* agent/state.c: state.json and events.jsonl (see state.h).  The only file that knows
 * state.json's format; the journal's lines are common/event.c's.  Never touches the release store
 * or processes: it records, the daemon decides. */
#include "agent/state.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/jsonfield.h"
#include "common/text.h"
#include "common/util.h"

void state_init(struct agent_state *st) { memset(st, 0, sizeof *st); }

void state_done(struct agent_state *st)
{
    for (int i = 0; i < st->njobs && i < STATUS_MAX_JOBS; i++)
        for (int k = 0; k < st->jobs[i].nspecs && k < STATE_MAX_SPECS; k++)
            spec_done(&st->jobs[i].specs[k]);
    memset(st, 0, sizeof *st);
}

static json_t *job_to_json(const struct job_rec *j)
{
    json_t *pids = json_array(), *specs = json_array(), *bad = json_array(), *goods = json_array();
    json_t *holders = json_array(), *goods_spec = json_array();
    bool ok = pids && specs && bad && goods && holders && goods_spec;
    for (int i = 0; ok && i < j->npids; i++)
        ok = json_array_append_new(pids, json_integer(j->pids[i])) == 0 &&
             json_array_append_new(holders, json_integer(j->holders[i])) == 0;
    for (int i = 0; ok && i < j->nspecs; i++)
        ok = json_array_append_new(specs, spec_to_json(&j->specs[i])) == 0;
    for (int i = 0; ok && i < j->nbad; i++) {
        char br[4 * sizeof j->bad[i].reason];
        ok = json_array_append_new(bad, json_pack("{s:s,s:s}", "release", j->bad[i].release, "reason",
                                                  text_json_safe(j->bad[i].reason, br, sizeof br))) == 0;
    }
    for (int i = 0; ok && i < j->ngoods; i++)
        ok = json_array_append_new(goods, json_string(j->goods[i])) == 0 &&
             json_array_append_new(goods_spec, json_string(j->goods_digest[i])) == 0;
    if (!ok) {
        json_decref(goods_spec);
        json_decref(pids);
        json_decref(specs);
        json_decref(bad);
        json_decref(goods);
        json_decref(holders);
        return NULL;
    }
    /* the reason quotes workers and is cut to fit: kept valid UTF-8 so state.json stays writable */
    char reason[4 * sizeof j->reason];
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:i,s:f,s:f,s:f,s:f,s:s,s:I,s:I,s:o,s:o,s:o,s:o,s:o,s:o}",
                     "job", j->job, "current", j->current, "previous", j->previous, "good", j->good,
                     "current_spec", j->current_digest, "good_spec", j->good_digest,
                     "state", gang_state_name(j->state), "reason",
                     text_json_safe(j->reason, reason, sizeof reason), "reason_code",
                     status_reason_name(j->reason_code), "generation",
                     j->generation, "restarts", j->restarts, "auto_rollbacks", j->auto_rollbacks,
                     "probation_mono", j->probation_deadline, "probation_left_s", j->probation_left_s,
                     "switch_mono", j->switch_deadline, "switch_left_s", j->switch_left_s,
                     "boot_id", j->boot_id, "gang_pgid", (json_int_t)j->gang_pgid, "gang_starttime",
                     (json_int_t)j->gang_starttime, "pids", pids, "holders", holders, "specs", specs,
                     "bad", bad, "goods", goods, "goods_spec", goods_spec);
    if (o && j->init_start && json_object_set_new(o, "init_start", json_integer((json_int_t)j->init_start)) < 0) {
        json_decref(o);
        return NULL;
    }
    char lr[4 * sizeof j->last_restart_reason];
    /* only when there is one: a state.json without it reads as "" (an agent before the field) */
    if (o && j->last_restart_reason[0] &&
        json_object_set_new(o, "last_restart_reason",
                            json_string(text_json_safe(j->last_restart_reason, lr, sizeof lr))) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int state_format(const struct agent_state *st, char **ret_text)
{
    json_t *jobs = json_array();
    if (!jobs)
        return -ENOMEM;
    for (int i = 0; i < st->njobs; i++) {
        if (json_array_append_new(jobs, job_to_json(&st->jobs[i])) < 0) {
            json_decref(jobs);
            return -EILSEQ; /* a spec jansson refused (spec_set_argv keeps them out) or ENOMEM */
        }
    }
    json_t *o = json_pack("{s:i,s:o}", "v", STATE_VERSION, "jobs", jobs);
    if (!o)
        return -ENOMEM;
    char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    if (!text)
        return -ENOMEM;
    *ret_text = text;
    return 0;
}

static bool id_is_release(const char *id)
{
    size_t n = 0;
    for (; id[n]; n++)
        if (!((id[n] >= '0' && id[n] <= '9') || (id[n] >= 'a' && id[n] <= 'f')))
            return false;
    return n == RELEASE_ID_LEN;
}

static int job_from_json(json_t *o, struct job_rec *j)
{
    memset(j, 0, sizeof *j);
    json_t *name = json_object_get(o, "job"), *state = json_object_get(o, "state");
    json_t *reason = json_object_get(o, "reason"), *pm = json_object_get(o, "probation_mono");
    json_t *pl = json_object_get(o, "probation_left_s"), *bid = json_object_get(o, "boot_id");
    json_t *sm = json_object_get(o, "switch_mono"), *sl = json_object_get(o, "switch_left_s");
    json_t *pids, *specs, *bad, *goods, *goods_spec = NULL;
    int64_t gen = 0, restarts = 0, rb = 0, pgid = 0, start = 0, init = 0;
    if (!json_is_object(o) || !json_is_string(name) || !job_name_is_valid(json_string_value(name)))
        return -EINVAL;
    int r;
    if ((r = jf_array(o, "pids", STATUS_MAX_RANKS, &pids)) < 0 || (r = jf_array(o, "specs", STATE_MAX_SPECS, &specs)) < 0 ||
        (r = jf_array(o, "bad", STATE_MAX_BAD, &bad)) < 0 || (r = jf_array(o, "goods", STATE_MAX_GOODS, &goods)) < 0 ||
        (r = jf_array(o, "goods_spec", STATE_MAX_GOODS, &goods_spec)) < 0)
        return r;
    (void)str_copy(j->job, sizeof j->job, json_string_value(name));
    if (jf_id(o, "current", j->current) < 0 || jf_id(o, "previous", j->previous) < 0 ||
        jf_id(o, "good", j->good) < 0 ||
        /* absent in a state.json from before the spec digest: "" (unknown), as its specs' */
        jf_str(o, "current_spec", j->current_digest, sizeof j->current_digest, false) < 0 ||
        (j->current_digest[0] && !spec_digest_is_valid(j->current_digest)) ||
        jf_str(o, "good_spec", j->good_digest, sizeof j->good_digest, false) < 0 ||
        (j->good_digest[0] && !spec_digest_is_valid(j->good_digest)) || jf_int(o, "generation", 0, INT32_MAX, false, &gen) < 0 ||
        jf_int(o, "restarts", 0, INT32_MAX, false, &restarts) < 0 ||
        jf_int(o, "auto_rollbacks", 0, INT32_MAX, false, &rb) < 0 ||
        jf_int(o, "gang_pgid", 0, INT32_MAX, false, &pgid) < 0 ||
        jf_int(o, "gang_starttime", 0, INT64_MAX, false, &start) < 0 ||
        jf_int(o, "init_start", 0, INT64_MAX, false, &init) < 0)
        return -EINVAL;
    j->init_start = (uint64_t)init;
    j->generation = (int)gen;
    j->restarts = (int)restarts;
    j->auto_rollbacks = (int)rb;
    j->gang_pgid = pgid;
    j->gang_starttime = (uint64_t)start;
    if (state && (!json_is_string(state) || gang_state_from_name(json_string_value(state), &j->state) < 0))
        return -EINVAL;
    if (reason) {
        if (!json_is_string(reason))
            return -EINVAL;
        (void)str_copy(j->reason, sizeof j->reason, json_string_value(reason));
    }
    json_t *lrr = json_object_get(o, "last_restart_reason"); /* absent: before the field, or none */
    if (lrr) {
        if (!json_is_string(lrr))
            return -EINVAL;
        (void)str_copy(j->last_restart_reason, sizeof j->last_restart_reason, json_string_value(lrr));
    }
    /* absent in a state.json from before the code: what its reason's words say */
    json_t *code = json_object_get(o, "reason_code");
    if (code && !json_is_string(code))
        return -EINVAL;
    j->reason_code = code ? status_reason_from_name(json_string_value(code)) : status_reason_from_text(j->reason);
    /* (an older agent's wall-clock "probation_until" is ignored: no deadline trusts the wall clock) */
    if (pm) {
        if (!json_is_number(pm) || !(json_number_value(pm) >= 0 && json_number_value(pm) < 1e12))
            return -EINVAL;
        j->probation_deadline = json_number_value(pm);
    }
    if (pl) {
        if (!json_is_number(pl) || !(json_number_value(pl) >= 0 && json_number_value(pl) < 1e9))
            return -EINVAL;
        j->probation_left_s = json_number_value(pl);
    }
    if (sm) {
        if (!json_is_number(sm) || !(json_number_value(sm) >= 0 && json_number_value(sm) < 1e12))
            return -EINVAL;
        j->switch_deadline = json_number_value(sm);
    }
    if (sl) {
        if (!json_is_number(sl) || !(json_number_value(sl) >= 0 && json_number_value(sl) < 1e9))
            return -EINVAL;
        j->switch_left_s = json_number_value(sl);
    }
    if (bid) {
        if (!json_is_string(bid) || strlen(json_string_value(bid)) >= sizeof j->boot_id)
            return -EINVAL;
        (void)str_copy(j->boot_id, sizeof j->boot_id, json_string_value(bid));
    }
    size_t i;
    json_t *v;
    json_array_foreach(bad, i, v)
    {
        json_t *why = json_object_get(v, "reason");
        struct bad_mark *m = &j->bad[j->nbad];
        if (!json_is_object(v) || jf_id(v, "release", m->release) < 0 || !m->release[0] ||
            (why && !json_is_string(why)))
            return -EINVAL;
        (void)str_copy(m->reason, sizeof m->reason, why ? json_string_value(why) : "");
        j->nbad++;
    }
    json_array_foreach(goods, i, v)
    {
        const char *id = json_string_value(v);
        if (!id || !id_is_release(id))
            return -EINVAL;
        (void)str_copy(j->goods[j->ngoods++], sizeof j->goods[0], id);
    }
    /* optional (before the pairs: every digest unknown); when present, one per goods entry */
    if (json_array_size(goods_spec) && (int)json_array_size(goods_spec) != j->ngoods)
        return -EINVAL;
    json_array_foreach(goods_spec, i, v)
    {
        const char *dg = json_string_value(v);
        if (!dg || (dg[0] && !spec_digest_is_valid(dg)))
            return -EINVAL;
        (void)str_copy(j->goods_digest[i], sizeof j->goods_digest[0], dg);
    }
    if (j->good[0] && j->ngoods == 0) /* written by an agent without the list */
        state_note_good(j, j->good, j->good_digest);
    json_array_foreach(pids, i, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
            return -EINVAL;
        j->pids[j->npids++] = json_integer_value(v);
    }
    if (pids) {
        json_t *holders = json_object_get(o, "holders");
        if (holders) { /* written by an agent whose gangs have holders: one per pid */
            if (!json_is_array(holders) || json_array_size(holders) != json_array_size(pids))
                return -EINVAL;
            json_array_foreach(holders, i, v)
            {
                if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
                    return -EINVAL;
                j->holders[i] = json_integer_value(v);
            }
        }
    }
    json_array_foreach(specs, i, v)
    {
        r = spec_from_json(v, &j->specs[j->nspecs]);
        if (r < 0 || !j->specs[j->nspecs].release[0]) {
            if (r >= 0)
                spec_done(&j->specs[j->nspecs]);
            for (int k = 0; k < j->nspecs; k++)
                spec_done(&j->specs[k]);
            j->nspecs = 0;
            return r < 0 ? r : -EINVAL;
        }
        j->nspecs++;
    }
    return 0;
}

int state_parse(const char *text, size_t len, struct agent_state *ret_st)
{
    json_t *o;
    int r = jf_load(text, len, STATE_MAX_BYTES, STATE_VERSION, &o);
    if (r < 0)
        return r;
    struct agent_state *st = calloc(1, sizeof *st);
    r = -EINVAL;
    if (!st) {
        r = -ENOMEM;
        goto out;
    }
    json_t *jobs, *jo;
    size_t i;
    if ((r = jf_array(o, "jobs", STATUS_MAX_JOBS, &jobs)) < 0)
        goto out;
    json_array_foreach(jobs, i, jo)
    {
        if ((r = job_from_json(jo, &st->jobs[st->njobs])) < 0)
            goto out;
        st->njobs++;
        for (int k = 0; k < st->njobs - 1; k++)
            if (!strcmp(st->jobs[k].job, st->jobs[st->njobs - 1].job)) {
                r = -EINVAL;
                goto out;
            }
    }
    *ret_st = *st;
    free(st);
    st = NULL;
    r = 0;
out:
    if (st) {
        state_done(st);
        free(st);
    }
    json_decref(o);
    return r;
}

int state_load(const char *path, struct agent_state *ret_st)
{
    char *text;
    size_t len;
    int r = fs_read_file(path, STATE_MAX_BYTES, &text, &len);
    if (r == -ENOENT) {
        state_init(ret_st);
        return 0;
    }
    if (r == -EFBIG)
        return -E2BIG;
    if (r < 0)
        return r;
    r = state_parse(text, len, ret_st);
    free(text);
    return r;
}

int state_save(const char *path, const struct agent_state *st)
{
    char *text;
    int r = state_format(st, &text);
    if (r < 0)
        return r;
    r = fs_write_atomic(path, text, strlen(text), 0600);
    free(text);
    return r;
}

int state_job_grace(const char *path, const char *job, double *ret_grace_s)
{
    struct agent_state *st = malloc(sizeof *st); /* large: not on the stack */
    if (!st)
        return -ENOMEM;
    int r = state_load(path, st);
    if (r < 0) {
        free(st);
        return r;
    }
    struct job_rec *j = state_find_job(st, job);
    struct job_spec *s = j ? state_current_spec(j) : NULL;
    if (s)
        *ret_grace_s = s->grace_s;
    r = s ? 0 : -ENOENT;
    state_done(st);
    free(st);
    return r;
}

struct job_rec *state_find_job(struct agent_state *st, const char *job)
{
    for (int i = 0; i < st->njobs; i++)
        if (!strcmp(st->jobs[i].job, job))
            return &st->jobs[i];
    return NULL;
}

int state_add_job(struct agent_state *st, const char *job, struct job_rec **ret)
{
    struct job_rec *j = state_find_job(st, job);
    if (!j) {
        if (!job_name_is_valid(job))
            return -EINVAL;
        if (st->njobs >= STATUS_MAX_JOBS)
            return -ENOSPC;
        j = &st->jobs[st->njobs++];
        memset(j, 0, sizeof *j);
        (void)str_copy(j->job, sizeof j->job, job);
    }
    *ret = j;
    return 0;
}

struct job_spec *state_find_spec(struct job_rec *j, const char *release, const char *digest)
{
    for (int i = 0; i < j->nspecs; i++)
        if (!strcmp(j->specs[i].release, release) && (!digest || !strcmp(j->specs[i].digest, digest)))
            return &j->specs[i];
    return NULL;
}

struct job_spec *state_current_spec(struct job_rec *j)
{
    return j->current[0] ? state_find_spec(j, j->current, j->current_digest) : NULL;
}

struct job_spec *state_good_spec(struct job_rec *j)
{
    return j->good[0] ? state_find_spec(j, j->good, j->good_digest) : NULL;
}

bool state_on_good(const struct job_rec *j)
{
    return j->good[0] && !strcmp(j->current, j->good) && !strcmp(j->current_digest, j->good_digest);
}

void state_mark_bad(struct job_rec *j, const char *release, const char *reason)
{
    state_unmark_bad(j, release);
    if (j->nbad == STATE_MAX_BAD)
        j->nbad--;
    memmove(&j->bad[1], &j->bad[0], (size_t)j->nbad * sizeof j->bad[0]);
    memset(&j->bad[0], 0, sizeof j->bad[0]);
    (void)str_copy(j->bad[0].release, sizeof j->bad[0].release, release);
    /* at a word, with an ellipsis: a reason cut mid-word ("No module nam") read as garbled */
    (void)text_cut_words(reason ? reason : "", NULL, j->bad[0].reason, sizeof j->bad[0].reason);
    j->nbad++;
}

void state_unmark_bad(struct job_rec *j, const char *release)
{
    for (int i = 0; i < j->nbad; i++)
        if (!strcmp(j->bad[i].release, release)) {
            memmove(&j->bad[i], &j->bad[i + 1], (size_t)(j->nbad - i - 1) * sizeof j->bad[0]);
            j->nbad--;
            return;
        }
}

const char *state_bad_reason(const struct job_rec *j, const char *release)
{
    for (int i = 0; i < j->nbad; i++)
        if (!strcmp(j->bad[i].release, release))
            return j->bad[i].reason;
    return NULL;
}

bool state_is_bad(const struct job_rec *j, const char *release)
{
    for (int i = 0; i < j->nbad; i++)
        if (!strcmp(j->bad[i].release, release))
            return true;
    return false;
}

void state_resume_list(const struct job_rec *j, char *out, size_t outsz)
{
    size_t len = 0;
    out[0] = '\0';
    const char *ids[STATE_MAX_SPECS + 2];
    int n = 0;
    ids[n++] = j->current;
    if (j->good[0])
        ids[n++] = j->good;
    for (int k = 0; k < j->nspecs; k++)
        if (j->specs[k].promoted)
            ids[n++] = j->specs[k].release;
    for (int k = 0; k < n; k++) {
        bool skip = k > 0 && state_is_bad(j, ids[k]); /* promoted once, failed a probation since */
        for (int m = 0; m < k; m++)
            skip = skip || !strcmp(ids[m], ids[k]);
        int w = skip ? 0 : snprintf(out + len, outsz - len, "%s%s", len ? "," : "", ids[k]);
        if (w < 0 || (size_t)w >= outsz - len)
            break;
        len += (size_t)w;
    }
}

void state_note_good(struct job_rec *j, const char *release, const char *digest)
{
    if (!digest)
        digest = "";
    int at = j->ngoods == STATE_MAX_GOODS ? STATE_MAX_GOODS - 1 : j->ngoods;
    for (int i = 0; i < j->ngoods; i++)
        if (!strcmp(j->goods[i], release) && !strcmp(j->goods_digest[i], digest))
            at = i;
    memmove(&j->goods[1], &j->goods[0], (size_t)at * sizeof j->goods[0]);
    memmove(&j->goods_digest[1], &j->goods_digest[0], (size_t)at * sizeof j->goods_digest[0]);
    (void)str_copy(j->goods[0], sizeof j->goods[0], release);
    (void)str_copy(j->goods_digest[0], sizeof j->goods_digest[0], digest);
    if (at == j->ngoods)
        j->ngoods++;
}

const char *state_last_good(struct job_rec *j, const char *except)
{
    for (int i = 0; i < j->ngoods; i++) {
        const char *id = j->goods[i];
        if ((except && !strcmp(id, except)) || state_is_bad(j, id) || !state_find_spec(j, id, NULL))
            continue;
        return id;
    }
    return NULL;
}

int state_put_spec(struct job_rec *j, const struct job_spec *spec, struct job_spec **ret)
{
    struct job_spec copy;
    spec_init(&copy);
    int r = spec_copy(&copy, spec);
    if (r < 0)
        return r;
    struct job_spec *old = state_find_spec(j, spec->release, spec->digest);
    if (old) {
        copy.promoted = copy.promoted || old->promoted;
        if (copy.ktok_s <= 0)
            copy.ktok_s = old->ktok_s;
        spec_done(old);
        *old = copy;
        if (ret)
            *ret = old;
        return 0;
    }
    if (j->nspecs >= STATE_MAX_SPECS) {
        /* keep the current and the good pair always; previous and the earlier good ones
         * (rollback targets) if we can.  Other specs of the current or good release (spec
         * changes that were left) go first. */
        int victim = -1;
        for (int pass = 0; pass < 2 && victim < 0; pass++)
            for (int i = 0; i < j->nspecs && victim < 0; i++) {
                const char *id = j->specs[i].release, *dg = j->specs[i].digest;
                bool keep = (!strcmp(id, j->current) && !strcmp(dg, j->current_digest)) ||
                            (!strcmp(id, j->good) && !strcmp(dg, j->good_digest));
                bool other_pair = !strcmp(id, j->current) || !strcmp(id, j->good);
                if (pass == 0) {
                    /* a promoted pair is a rollback target, also the good release's earlier spec */
                    for (int k = 0; k < j->ngoods; k++)
                        keep = keep || (!strcmp(id, j->goods[k]) && !strcmp(dg, j->goods_digest[k]));
                }
                if (pass == 0 && !other_pair) {
                    keep = keep || !strcmp(id, j->previous);
                    for (int k = 0; k < j->ngoods; k++)
                        keep = keep || !strcmp(id, j->goods[k]);
                }
                if (!keep)
                    victim = i;
            }
        if (victim < 0) {
            spec_done(&copy);
            return -ENOSPC;
        }
        spec_done(&j->specs[victim]);
        memmove(&j->specs[victim], &j->specs[victim + 1],
                (size_t)(j->nspecs - victim - 1) * sizeof j->specs[0]);
        j->nspecs--;
        memset(&j->specs[j->nspecs], 0, sizeof j->specs[0]);
    }
    j->specs[j->nspecs] = copy;
    if (ret)
        *ret = &j->specs[j->nspecs];
    j->nspecs++;
    return 0;
}

/* ---- events ---- */

static int64_t events_last_seq(const char *path)
{
    char *text;
    size_t len;
    int64_t seq = 0;
    if (fs_read_file(path, EVENTS_ROTATE_BYTES * 2, &text, &len) < 0)
        return 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_error_t jerr;
        json_t *o = json_loads(line, 0, &jerr);
        json_t *s = o ? json_object_get(o, "seq") : NULL;
        if (json_is_integer(s) && json_integer_value(s) > seq)
            seq = json_integer_value(s);
        json_decref(o);
    }
    free(text);
    return seq;
}

int events_open(const char *path, struct events *ret_ev)
{
    struct events ev = {.fd = -1};
    if (str_copy(ev.path, sizeof ev.path, path) < 0)
        return -ENAMETOOLONG;
    char rotated[sizeof ev.path + 4];
    snprintf(rotated, sizeof rotated, "%s.1", path);
    int64_t a = events_last_seq(rotated), b = events_last_seq(path);
    ev.seq = a > b ? a : b;
    ev.fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (ev.fd < 0)
        return -errno;
    *ret_ev = ev;
    return 0;
}

int64_t events_append(struct events *ev, const char *job, const char *kind, const char *release,
                      const char *detail)
{
    if (ev->fd < 0)
        return -EBADF;
    struct stat st;
    if (fstat(ev->fd, &st) == 0 && (uint64_t)st.st_size > EVENTS_ROTATE_BYTES) {
        char rotated[sizeof ev->path + 4];
        snprintf(rotated, sizeof rotated, "%s.1", ev->path);
        if (rename(ev->path, rotated) == 0) {
            int fd = open(ev->path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
            if (fd >= 0) {
                close(ev->fd);
                ev->fd = fd;
            }
        }
    }
    int64_t seq = ev->seq + 1;
    char text[EVENT_LINE_MAX];
    int n = event_format(seq, time_wall(), job, kind, release, detail, text, sizeof text);
    if (n < 0)
        return n;
    text[n] = '\n'; /* event_format keeps the line under EVENT_LINE_MAX, newline included */
    int r = fd_write_all(ev->fd, text, (size_t)n + 1);
    if (r < 0)
        return r;
    if (fsync(ev->fd) < 0)
        return -errno;
    ev->seq = seq;
    return seq;
}

void events_close(struct events *ev)
{
    if (ev && ev->fd >= 0) {
        close(ev->fd);
        ev->fd = -1;
    }
}

static void events_dump_file(const char *path, int64_t since, FILE *out)
{
    char *text;
    size_t len;
    if (fs_read_file(path, EVENTS_ROTATE_BYTES * 2, &text, &len) < 0)
        return;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_error_t jerr;
        json_t *o = json_loads(line, 0, &jerr);
        json_t *s = o ? json_object_get(o, "seq") : NULL;
        if (json_is_integer(s) && json_integer_value(s) > since)
            fprintf(out, "%s\n", line);
        json_decref(o);
    }
    free(text);
}

int events_dump(const char *path, int64_t since, FILE *out)
{
    char rotated[4200];
    if (snprintf(rotated, sizeof rotated, "%s.1", path) >= (int)sizeof rotated)
        return -ENAMETOOLONG;
    events_dump_file(rotated, since, out);
    events_dump_file(path, since, out);
    return fflush(out) == 0 ? 0 : -EIO;
}

bool state_job_saved_in_other_boot(const struct job_rec *j, const char *boot, uint64_t init_start)
{
    return (boot && boot[0] && j->boot_id[0] && strcmp(boot, j->boot_id) != 0) ||
           (init_start && j->init_start && init_start != j->init_start);
}
