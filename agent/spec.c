/* agent/spec.c: the job spec (agent.h): defaults, validation, deep copy, JSON form.
 * The JSON form is used both in state.json and in control-socket requests; it never holds
 * anything a worker did not get from the controller's command line. */
#include "agent/agent.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonfield.h"
#include "common/text.h"
#include "common/util.h"
#include "common/workerenv.h"

void spec_init(struct job_spec *s)
{
    memset(s, 0, sizeof *s);
    s->nnodes = 1;
    s->nproc = 1;
    s->master_port = 29500;
    s->grace_s = 30;
    liveness_policy_default(&s->live);
    (void)str_copy(s->master_addr, sizeof s->master_addr, "127.0.0.1");
}

void spec_done(struct job_spec *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->argc && i < SPEC_MAX_ARGS; i++)
        free(s->argv[i]);
    s->argc = 0;
    memset(s->argv, 0, sizeof s->argv);
    for (int i = 0; i < s->nenv && i < SPEC_MAX_ENV; i++)
        free(s->env[i]);
    s->nenv = 0;
    memset(s->env, 0, sizeof s->env);
}

int spec_add_env(struct job_spec *s, const char *kv)
{
    char why[160];
    int r = worker_env_check(kv, why, sizeof why); /* the one allow-list, common/workerenv.c */
    if (r < 0)
        return r;
    size_t klen = (size_t)(strchr(kv, '=') - kv);
    if (!text_is_utf8(kv, strlen(kv)))
        return -EILSEQ; /* the spec is JSON (state.json, the control socket) */
    if (strlen(kv) >= SPEC_ENV_MAX || s->nenv >= SPEC_MAX_ENV)
        return -E2BIG;
    for (int i = 0; i < s->nenv; i++)
        if (!strncmp(s->env[i], kv, klen + 1))
            return -EINVAL; /* set twice */
    char *copy = strdup(kv);
    if (!copy)
        return -ENOMEM;
    s->env[s->nenv++] = copy;
    return 0;
}

int spec_set_argv(struct job_spec *s, int argc, char *const *argv)
{
    if (argc <= 0)
        return -EINVAL;
    if (argc > SPEC_MAX_ARGS)
        return -E2BIG;
    char *copy[SPEC_MAX_ARGS + 1] = {0};
    for (int i = 0; i < argc; i++) {
        size_t len = strlen(argv[i]);
        int bad = len >= SPEC_ARG_MAX ? -E2BIG : i == 0 && !len ? -EINVAL
                  : !text_is_utf8(argv[i], len) ? -EILSEQ /* JSON cannot carry it */ : 0;
        if (bad) {
            for (int j = 0; j < i; j++)
                free(copy[j]);
            return bad;
        }
        copy[i] = strdup(argv[i]);
        if (!copy[i]) {
            for (int j = 0; j < i; j++)
                free(copy[j]);
            return -ENOMEM;
        }
    }
    for (int i = 0; i < s->argc && i < SPEC_MAX_ARGS; i++) /* the old argv only; env stays */
        free(s->argv[i]);
    memcpy(s->argv, copy, sizeof copy);
    s->argc = argc;
    return 0;
}

int spec_copy(struct job_spec *dst, const struct job_spec *src)
{
    struct job_spec t = *src;
    memset(t.argv, 0, sizeof t.argv);
    t.argc = 0;
    memset(t.env, 0, sizeof t.env);
    t.nenv = 0;
    int r;
    if (src->argc > 0 && (r = spec_set_argv(&t, src->argc, src->argv)) < 0)
        return r;
    for (int i = 0; i < src->nenv; i++)
        if ((r = spec_add_env(&t, src->env[i])) < 0) {
            spec_done(&t);
            return r;
        }
    spec_done(dst);
    *dst = t;
    return 0;
}

bool spec_rdzv_ok(const char *t)
{
    size_t n = strlen(t);
    if (n == 0 || n >= SPEC_RDZV_MAX)
        return false;
    for (; *t; t++)
        if (!((*t >= '0' && *t <= '9') || (*t >= 'a' && *t <= 'z') || (*t >= 'A' && *t <= 'Z') ||
              *t == '_' || *t == '-'))
            return false;
    return true;
}

int spec_validate(const struct job_spec *s, char *err, size_t errsz)
{
    const char *why = NULL;
    if (s->argc <= 0)
        why = "no command";
    else if (s->nproc < 1 || s->nproc > STATUS_MAX_RANKS)
        why = "nproc-per-node out of range (1..16)";
    else if (s->nnodes < 1 || s->nnodes > 4096)
        why = "nnodes out of range (1..4096)";
    else if (s->node_rank < 0 || s->node_rank >= s->nnodes)
        why = "node-rank must be below nnodes";
    else if (s->master_port < 1 || s->master_port > 65535)
        why = "master-port out of range";
    else if (!(s->grace_s >= 0 && s->grace_s <= SPEC_GRACE_MAX_S))
        why = "grace out of range (0..3600 s)";
    else if (liveness_policy_check(&s->live) < 0)
        why = "liveness deadline out of range (0..30 days)";
    else if (!s->master_addr[0] || strpbrk(s->master_addr, " \t\n="))
        why = "bad master-addr";
    else if (s->rdzv[0] && !spec_rdzv_ok(s->rdzv))
        why = "rdzv must be 1..32 characters of [0-9A-Za-z_-]";
    if (!why && s->gpus[0]) {
        int n = 1;
        for (const char *p = s->gpus; *p; p++) {
            if (*p == ',')
                n++;
            else if (*p < '0' || *p > '9')
                why = "gpus must be a comma-separated list of indices";
        }
        if (!why && n != s->nproc)
            why = "gpus must name one GPU per local rank (nproc-per-node)";
    }
    if (why) {
        if (err)
            snprintf(err, errsz, "%s", why);
        return -EINVAL;
    }
    return 0;
}

bool job_name_is_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= JOB_NAME_MAX || s[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

json_t *spec_to_json(const struct job_spec *s)
{
    /* Every jansson result is checked: json_string() is NULL for text that is not UTF-8, and
     * a NULL appended or set is silently dropped (issue 12: one arg of ten went missing). */
    json_t *o = json_object(), *argv = json_array(), *env = json_array();
    bool ok = o && argv && env;
    for (int i = 0; ok && i < s->argc; i++)
        ok = json_array_append_new(argv, json_string(s->argv[i])) == 0;
    for (int i = 0; ok && i < s->nenv; i++)
        ok = json_array_append_new(env, json_string(s->env[i])) == 0;
    if (!ok) {
        json_decref(o);
        json_decref(argv);
        json_decref(env);
        return NULL;
    }
    ok = json_object_set_new(o, "argv", argv) == 0;
    ok = json_object_set_new(o, "env", env) == 0 && ok;
    ok = ok && json_object_set_new(o, "release", json_string(s->release)) == 0 &&
         json_object_set_new(o, "nnodes", json_integer(s->nnodes)) == 0 &&
         json_object_set_new(o, "node_rank", json_integer(s->node_rank)) == 0 &&
         json_object_set_new(o, "nproc", json_integer(s->nproc)) == 0 &&
         json_object_set_new(o, "gpus", json_string(s->gpus)) == 0 &&
         json_object_set_new(o, "master_addr", json_string(s->master_addr)) == 0 &&
         json_object_set_new(o, "master_port", json_integer(s->master_port)) == 0 &&
         json_object_set_new(o, "grace_s", json_real(s->grace_s)) == 0 &&
         json_object_set_new(o, "promoted", json_boolean(s->promoted)) == 0 &&
         json_object_set_new(o, "ktok_s", json_real(s->ktok_s)) == 0 &&
         json_object_set_new(o, "first_step_s", json_real(s->live.first_step_s)) == 0 &&
         json_object_set_new(o, "silence_s", json_real(s->live.silence_s)) == 0 &&
         json_object_set_new(o, "stall_s", json_real(s->live.stall_s)) == 0 &&
         json_object_set_new(o, "checkpoint_s", json_real(s->live.checkpoint_s)) == 0 &&
         (!s->rdzv[0] || json_object_set_new(o, "rdzv", json_string(s->rdzv)) == 0) &&
         (!s->digest[0] || json_object_set_new(o, "spec_digest", json_string(s->digest)) == 0) &&
         (!s->digest_fields[0] ||
          json_object_set_new(o, "spec_fields", json_string(s->digest_fields)) == 0);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int spec_from_json(json_t *o, struct job_spec *ret)
{
    if (!json_is_object(o))
        return -EINVAL;
    struct job_spec s;
    spec_init(&s);
    json_t *argv = json_object_get(o, "argv");
    json_t *pr = json_object_get(o, "promoted");
    int r = -EINVAL;
    if (jf_id(o, "release", s.release) < 0 ||
        jf_i32(o, "nnodes", 1, 4096, &s.nnodes) < 0 ||
        jf_i32(o, "node_rank", 0, 4095, &s.node_rank) < 0 ||
        jf_i32(o, "nproc", 1, STATUS_MAX_RANKS, &s.nproc) < 0 ||
        jf_str(o, "gpus", s.gpus, sizeof s.gpus, false) < 0 ||
        jf_str(o, "master_addr", s.master_addr, sizeof s.master_addr, false) < 0 ||
        jf_i32(o, "master_port", 1, 65535, &s.master_port) < 0 ||
        jf_num_in(o, "grace_s", 0, SPEC_GRACE_MAX_S, &s.grace_s) < 0 || jf_num_in(o, "ktok_s", 0, 1e12, &s.ktok_s) < 0 ||
        jf_num_in(o, "first_step_s", 0, LIVENESS_MAX_S, &s.live.first_step_s) < 0 ||
        jf_num_in(o, "silence_s", 0, LIVENESS_MAX_S, &s.live.silence_s) < 0 ||
        jf_num_in(o, "stall_s", 0, LIVENESS_MAX_S, &s.live.stall_s) < 0 ||
        jf_num_in(o, "checkpoint_s", 0, LIVENESS_MAX_S, &s.live.checkpoint_s) < 0 ||
        jf_str(o, "rdzv", s.rdzv, sizeof s.rdzv, false) < 0 || (s.rdzv[0] && !spec_rdzv_ok(s.rdzv)) ||
        /* absent in a state.json written before the digest: the spec is "unknown" */
        jf_str(o, "spec_digest", s.digest, sizeof s.digest, false) < 0 ||
        (s.digest[0] && !spec_digest_is_valid(s.digest)) ||
        jf_str(o, "spec_fields", s.digest_fields, sizeof s.digest_fields, false) < 0 ||
        (s.digest_fields[0] && !spec_fields_is_valid(s.digest_fields)) ||
        (pr && !json_is_boolean(pr)))
        return -EINVAL;
    s.promoted = pr && json_is_true(pr);
    int dropped = 0;
    {
        /* a spec without a command could never be launched: argv is required */
        if (!json_is_array(argv) || json_array_size(argv) == 0)
            return -EINVAL;
        if (json_array_size(argv) > SPEC_MAX_ARGS)
            return -E2BIG;
        char *tmp[SPEC_MAX_ARGS];
        size_t i;
        json_t *v;
        json_array_foreach(argv, i, v)
        {
            if (!json_is_string(v))
                return -EINVAL;
            tmp[i] = (char *)json_string_value(v);
        }
        if ((r = spec_set_argv(&s, (int)json_array_size(argv), tmp)) < 0)
            return r;
    }
    json_t *env = json_object_get(o, "env");
    if (env) {
        size_t i;
        json_t *v;
        if (!json_is_array(env) || json_array_size(env) > SPEC_MAX_ENV) {
            spec_done(&s);
            return -EINVAL;
        }
        json_array_foreach(env, i, v)
        {
            if (!json_is_string(v)) {
                spec_done(&s);
                return -EINVAL;
            }
            r = spec_add_env(&s, json_string_value(v));
            if (r == -EPERM) {
                dropped++; /* a name off the allow-list, recorded by an older agent */
                continue;
            }
            if (r < 0) {
                spec_done(&s);
                return -EINVAL;
            }
        }
    }
    *ret = s;
    return dropped;
}

int spec_gpu_at(const struct job_spec *s, int local_rank, char *out, size_t out_sz)
{
    if (!s->gpus[0] || local_rank < 0)
        return -ENOENT;
    const char *p = s->gpus;
    for (int i = 0; i < local_rank; i++) {
        p = strchr(p, ',');
        if (!p)
            return -ENOENT;
        p++;
    }
    size_t len = strcspn(p, ",");
    if (len == 0 || len >= out_sz)
        return -EINVAL;
    memcpy(out, p, len);
    out[len] = '\0';
    return 0;
}
