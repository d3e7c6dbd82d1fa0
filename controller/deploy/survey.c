/* controller/deploy/survey.c: what each container of the job runs (release, spec, good and bad
 * marks), asked of every host at once before anything is pushed; and `plan`'s account of it.
 */
#include "controller/deploy/deploy_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/manifest2.h"
#include "common/text.h"
#include "common/util.h"
#include "controller/cmd.h"
#include "controller/deploy/jobspec.h"
#include "controller/deploy/pastfail.h"
#include "controller/deploy/state.h"
#include "controller/transport/fanout.h"

/* Read each container's view of the job; fills d->good from the first container that has one. */
bool deploy_is_bad(const struct deploy *d, const char *id)
{
    for (int k = 0; k < d->nbad; k++)
        if (!strcmp(d->bad[k], id))
            return true;
    return false;
}

/* survey's fan-out: container i's status document, the job's part kept in arg's slot i
 * (found[i] false: the agent does not know the job). */
struct survey_arg {
    struct job_status *js; /* [ncts] */
    bool found[INV_MAX_CTS];
    unsigned features[INV_MAX_CTS];
};

static int survey_keep(struct ct_fan *cf, int i, const struct agent_status *st)
{
    struct survey_arg *sa = (struct survey_arg *)cf->arg;
    const struct job_status *js = status_find_job(st, cf->d->job->name);
    sa->found[i] = js != NULL;
    sa->features[i] = st->features;
    if (js)
        sa->js[i] = *js;
    return 0;
}

static int survey_one(struct ct_fan *cf, int i)
{
    struct agent_status *st = cf->scratch[ct_fan_slot(cf, i)];
    int r = fleet_agent_status(cf->d->f, &cf->d->job->cts[i], st, cf->err[i], sizeof cf->err[i]);
    return r < 0 ? r : survey_keep(cf, i, st);
}

/* survey_one for an answer of a host's containers asked at once: the same results and messages
 * as fleet_agent_status. */
static int survey_done(struct ct_fan *cf, int i, int r, struct exec_result *res, const char *why)
{
    const struct inv_ct *ct = &cf->d->job->cts[i];
    if (!res) {
        if (why)
            snprintf(cf->err[i], sizeof cf->err[i], "%s", why);
        else
            snprintf(cf->err[i], sizeof cf->err[i], "host unreachable: %s", cf->d->f->conn_msg[ct->host]);
        return r;
    }
    struct agent_status *st = cf->scratch[ct_fan_slot(cf, i)];
    r = fleet_agent_status_read(ct, res, st, cf->err[i], sizeof cf->err[i]);
    return r < 0 ? r : survey_keep(cf, i, st);
}

/* The job's status in every container at once (a host's containers one after another), skip[i]
 * leaving container i out (its rc stays 1): cf->rc[i] and cf->err[i] per container, sa's slots
 * where it answered.  NULL when out of memory; free with status_fan_free. */
static void status_fan_free(struct ct_fan *cf, struct survey_arg *sa);

static struct ct_fan *status_fan(struct deploy *d, const bool skip[], struct survey_arg **ret_sa)
{
    const struct inv_job *j = d->job;
    struct ct_fan *cf = calloc(1, sizeof *cf);
    struct survey_arg *sa = calloc(1, sizeof *sa);
    if (sa)
        sa->js = calloc((size_t)j->ncts, sizeof *sa->js);
    bool ok = cf && sa && sa->js, seen[INV_MAX_HOSTS] = { false };
    int nhosts = 0; /* one scratch document per worker (ct_fan_slot) */
    for (int i = 0; i < j->ncts; i++)
        nhosts += !seen[j->cts[i].host], seen[j->cts[i].host] = true;
    for (int k = 0; ok && k < nhosts; k++)
        ok = (cf->scratch[k] = malloc(sizeof *cf->scratch[k])) != NULL;
    if (!ok) {
        status_fan_free(cf, sa);
        return NULL;
    }
    struct agent_argv sargv;
    agent_argv_init(&sargv);
    agent_argv_status(&sargv);
    (void)agent_argv_end(&sargv);
    cf->d = d;
    cf->fn = survey_one;
    cf->arg = sa;
    cf->done = survey_done;
    cf->batch_args = sargv.argv; /* a host's containers at once */
    cf->batch_timeout_s = FLEET_STATUS_TIMEOUT_S;
    cf->batch_what = "status";
    for (int i = 0; i < j->ncts; i++)
        cf->skip[i] = skip && skip[i];
    (void)ct_fan_run(cf);
    *ret_sa = sa;
    return cf;
}

static void status_fan_free(struct ct_fan *cf, struct survey_arg *sa)
{
    for (int k = 0; cf && k < INV_MAX_HOSTS; k++)
        free(cf->scratch[k]);
    free(cf);
    if (sa)
        free(sa->js);
    free(sa);
}

int survey_job_status(struct deploy *d, const bool skip[], struct job_status *js, bool *found)
{
    struct survey_arg *sa = NULL;
    struct ct_fan *cf = status_fan(d, skip, &sa);
    if (!cf)
        return -ENOMEM;
    for (int i = 0; i < d->job->ncts; i++) {
        found[i] = cf->rc[i] == 0 && sa->found[i];
        if (found[i])
            js[i] = sa->js[i];
    }
    status_fan_free(cf, sa);
    return 0;
}

/* Which release each container runs, asked of every host at once (a host's containers one after
 * another); the answers are then read in inventory order, so "the first container that says"
 * stays the same as when they were asked one by one. */
int survey(struct deploy *d, bool quiet_errors, bool *ret_all_current, char *err, size_t err_sz)
{
    const struct inv_job *j = d->job;
    bool all_current = true;
    int bad = 0, spec_differs = 0;
    d->spec_change[0] = '\0';
    d->off_good_spec = false;
    bool release_current = true;
    if (!d->sv_js)
        d->sv_js = calloc((size_t)j->ncts, sizeof *d->sv_js); /* freed by deploy_done */
    bool skip[INV_MAX_CTS];
    for (int i = 0; i < j->ncts; i++) /* answered with the lease, or answered nothing then */
        skip[i] = d->pre[i] != 0 || d->lease_mute[i][0];
    struct survey_arg *sa = NULL;
    struct ct_fan *cf = d->sv_js ? status_fan(d, skip, &sa) : NULL;
    bool ok = cf != NULL;
    if (!ok) {
        snprintf(err, err_sz, "out of memory");
        goto out;
    }
    for (int i = 0; i < j->ncts; i++) {
        if (!d->pre[i])
            continue;
        sa->found[i] = d->pre[i] == 1;
        sa->features[i] = d->pre_features[i];
        if (sa->found[i])
            sa->js[i] = d->pre_js[i];
        cf->rc[i] = 0;
        d->pre[i] = 0; /* used once: a later survey asks */
    }
    for (int i = 0; i < j->ncts; i++) {
        if (!d->lease_mute[i][0])
            continue;
        /* what the lease step found, with the deadline that fired there (asked again, the
         * status waited another FLEET_STATUS_TIMEOUT_S and said that one instead) */
        cf->rc[i] = -ETIMEDOUT;
        cf->named[i] = true; /* the words name the container(s) */
        (void)str_copy(cf->err[i], sizeof cf->err[i], d->lease_mute[i]);
        d->lease_mute[i][0] = '\0'; /* used once */
    }
    for (int i = 0; i < j->ncts; i++) {
        const struct inv_ct *ct = &j->cts[i];
        const char *e = cf->err[i];
        int r = cf->rc[i];
        if (r < 0) {
            /* -EIO: connected, and `drover-agent status` failed there (missing, not running);
             * any other error is the connection's or the container's (fleet.h) */
            if (r == -EIO && !d->f->conn_err[ct->host])
                d->agent_failed = true;
            char line[sizeof cf->err[i] + 64];
            const char *said = ct_fan_said(cf, i, line, sizeof line); /* the container named once */
            if (!bad)
                snprintf(err, err_sz, "%s", said ? said : e);
            if (!quiet_errors && said)
                log_error("%s", said);
            bad++;
            all_current = false;
            continue;
        }
        const struct job_status *js = sa->found[i] ? &sa->js[i] : NULL;
        /* kept whole for rollback, which decides from every container's view (rbtarget.h) */
        d->features[i] = sa->features[i];
        d->sv_found[i] = js != NULL;
        if (js && d->sv_js)
            d->sv_js[i] = *js;
        if (!js || strcmp(js->current, d->id) != 0 || strcmp(js->good, d->id) != 0 ||
            js->state != GANG_RUNNING)
            all_current = release_current = false;
        /* what runs is a (release, spec) pair: the same release with another job spec (or one
         * its agent never recorded) is not current, nor is a spec change not yet promoted */
        struct spec_digest want;
        if (js && js->current[0] && jobspec_digest(j, i, &want) == 0 &&
            (!jobspec_is_current(js, &want) || strcmp(js->good_spec_digest, want.hex) != 0)) {
            all_current = false;
            /* "not promoted yet" only of the release being deployed: a job that never had a
             * good release (its first deploys failed) has no promoted spec either, and a new
             * release there was announced as "job spec changed: not promoted yet" */
            if (!spec_differs++ &&
                !jobspec_describe_change(j, js, &want, d->spec_change, sizeof d->spec_change)[0] &&
                !strcmp(js->current, d->id))
                snprintf(d->spec_change, sizeof d->spec_change, "not promoted yet");
        }
        if (js && js->current[0] && !strcmp(js->current, js->good) &&
            strcmp(js->spec_digest, js->good_spec_digest) != 0)
            d->off_good_spec = true;
        /* stopped and failed jobs have no gang and start none on their own; every other state
         * has one, or restarts one after its backoff (a stop cancels that) */
        d->has_gang[i] = js && js->state != GANG_STOPPED && js->state != GANG_FAILED;
        (void)str_copy(d->from[i], sizeof d->from[i], js ? js->current : "");
        d->attention[i] = js && js->state == GANG_FAILED && js->reason_code == STATUS_RC_ENVIRONMENT;
        if (d->attention[i])
            (void)str_copy(d->attention_reason[i], sizeof d->attention_reason[i], js->reason);
        if (js && js->good[0] && !d->good[0])
            (void)str_copy(d->good, sizeof d->good, js->good);
        if (js && js->current[0] && !d->current[0])
            (void)str_copy(d->current, sizeof d->current, js->current);
        if (js && js->previous[0] && !d->previous[0])
            (void)str_copy(d->previous, sizeof d->previous, js->previous);
        for (int k = 0; js && k < js->nbad && d->nbad < (int)ARRAY_SIZE(d->bad); k++)
            if (!deploy_is_bad(d, js->bad[k]))
                (void)str_copy(d->bad[d->nbad++], sizeof d->bad[0], js->bad[k]);
        if (js && js->ngoods && !d->ngoods) {
            for (int k = 0; k < js->ngoods; k++)
                (void)str_copy(d->goods[k], sizeof d->goods[0], js->goods[k]);
            d->ngoods = js->ngoods;
        }
    }
    d->spec_only = !bad && release_current && spec_differs > 0;
    d->earlier_good[0] = '\0';
    for (int k = 0; k < d->ngoods && !d->earlier_good[0]; k++)
        if (strcmp(d->goods[k], d->current) != 0 && !deploy_is_bad(d, d->goods[k]))
            (void)str_copy(d->earlier_good, sizeof d->earlier_good, d->goods[k]);
    *ret_all_current = all_current;
out:
    status_fan_free(cf, sa);
    return !ok ? -ENOMEM : bad ? -EIO : 0;
}

/* A container's view of the job shows release id: marked bad there, or run without a promote. */
static bool js_shows_release(const struct job_status *js, const char *id)
{
    if (!js)
        return false;
    for (int k = 0; k < js->nbad; k++)
        if (!strcmp(js->bad[k], id))
            return true;
    return !strcmp(js->current, id) && strcmp(js->good, id) != 0;
}

/* Merge into (*h, *n) the job's history as the first container marked in shows keeps it
 * (every container of the job keeps the same records, agent/history.h); nothing when none
 * answers.  Logs nothing above debug: the warning is a courtesy, never a failure. */
static void merge_agent_history(struct deploy *d, const bool *shows, struct history_entry **h, size_t *n)
{
    struct agent_argv a;
    agent_argv_init(&a);
    agent_argv_history_list(&a, d->job->name);
    for (int i = 0; i < d->job->ncts; i++) {
        const struct inv_ct *ct = &d->job->cts[i];
        struct conn *c;
        struct exec_result res;
        if (!shows[i] || fleet_conn(d->f, ct->host, &c) < 0)
            continue;
        if (pct_run_agent(c, ct, a.argv, 15, &res) < 0) {
            log_debug("%s: history list: %s", ct->label, c->err);
            continue;
        }
        struct history_entry *more = NULL;
        size_t nmore = 0, skipped = 0;
        int r = res.status == 0 ? state_history_parse_lines(res.out, d->job->name, &more, &nmore, &skipped) : -EIO;
        if (skipped) /* `drover history` warns of them; a deploy's survey only needs the rest */
            log_debug("%s: history list: %zu unreadable lines skipped", ct->label, skipped);
        if (r == 0)
            r = state_history_merge(h, n, more, nmore, ct->label);
        free(more);
        exec_result_done(&res);
        if (r >= 0)
            return;
        log_debug("%s: history list: %s", ct->label, strerror(-r));
    }
}

/* Which containers' survey answers show release id (js_shows_release) into shows[ncts]. */
static void survey_shows(const struct deploy *d, const char *id, bool *shows)
{
    for (int i = 0; i < d->job->ncts; i++)
        shows[i] = js_shows_release(d->sv_found[i] && d->sv_js ? &d->sv_js[i] : NULL, id);
}

/* The job's history: state_dir's merged with what the first container marked in shows keeps. */
static void history_shown(struct deploy *d, const bool *shows, struct history_entry **ret_h, size_t *ret_n)
{
    struct history_entry *h = NULL;
    size_t n = 0;
    if (state_history_read(d->inv->state_dir, d->job->name, &h, &n, NULL) < 0) {
        h = NULL; /* not written on failure: the agents' records alone */
        n = 0;
    }
    merge_agent_history(d, shows, &h, &n);
    *ret_h = h;
    *ret_n = n;
}

void survey_history_of(struct deploy *d, const char *id, struct history_entry **ret_h, size_t *ret_n)
{
    bool shows[INV_MAX_CTS] = { false };
    survey_shows(d, id, shows);
    history_shown(d, shows, ret_h, ret_n);
}

void survey_history_all(struct deploy *d, struct history_entry **ret_h, size_t *ret_n)
{
    bool shows[INV_MAX_CTS] = { false };
    for (int i = 0; i < d->job->ncts; i++)
        shows[i] = d->sv_found[i];
    history_shown(d, shows, ret_h, ret_n);
}

bool survey_hang_stop_message(struct deploy *d, const char *id, const char *what, char *buf, size_t sz)
{
    bool promoted = false; /* only a release promoted somewhere can have been stopped so */
    for (int i = 0; i < d->job->ncts && !promoted; i++)
        for (int k = 0; d->sv_found[i] && d->sv_js && k < d->sv_js[i].ngoods && !promoted; k++)
            promoted = !strcmp(d->sv_js[i].goods[k], id);
    if (!promoted)
        return false;
    struct history_entry *h;
    size_t n;
    survey_history_all(d, &h, &n);
    const struct history_entry *e = pastfail_hang_stop(h, n, d->job->name, id);
    if (e)
        (void)pastfail_hang_warning(e, pastfail_release_name(h, n, d->job->name, id), what, buf, sz);
    free(h);
    return e != NULL;
}

/* The "failed probation before" warning into buf, where a container (shows[i]) has the release
 * marked bad or run without a promote and the history says its probation failed; false (buf
 * untouched) otherwise.  The one rule of deploy (after the survey) and plan. */
static bool failed_before_message(struct deploy *d, const bool *shows, char *buf, size_t sz)
{
    bool shown = false;
    for (int i = 0; i < d->job->ncts && !shown; i++)
        shown = shows[i];
    if (!shown)
        return false;
    struct history_entry *h;
    size_t n;
    history_shown(d, shows, &h, &n);
    const struct history_entry *e = pastfail_find(h, n, d->job->name, d->id);
    if (e)
        (void)pastfail_message(e, d->name, buf, sz);
    free(h);
    return e != NULL;
}

/* The environment release that release id runs with, from the manifest this controller kept
 * (state_dir/manifests/<id>) into env (RELEASE_ID_LEN + 1): true when it names one; false when
 * it names none or the manifest is not here (deployed from elsewhere: nothing is claimed). */
static bool release_env_of(const struct deploy *d, const char *id, char *env)
{
    char head[STATE_MANIFEST_HEAD];
    size_t len;
    return state_manifest_head(d->inv->state_dir, id, head, sizeof head, &len) == 0 &&
           manifest2_env_of(head, len, env) == 1;
}

/* Deploying without --env where the job's current release runs with an environment: the new
 * release's workers see no .drover-env/.  Said (never refused: a release may bring its own
 * interpreter) by deploy and plan, once, for the first container whose current release (its
 * ids in cur[0..n)) had one. */
static bool env_dropped_message(const struct deploy *d, const char *const *cur, int n, char *buf, size_t sz)
{
    if (d->has_env)
        return false;
    for (int i = 0; i < n; i++) {
        char env[RELEASE_ID_LEN + 1], s1[RELEASE_SHORT_LEN + 1], s2[RELEASE_SHORT_LEN + 1];
        if (!cur[i] || !cur[i][0] || !strcmp(cur[i], d->id) || !release_env_of(d, cur[i], env))
            continue;
        snprintf(buf, sz, "job '%s' runs %s with environment %s; release %s (%s) has none (no "
                 "--env given), so its workers will not see .drover-env/: give --env ENVDIR to "
                 "keep the environment (an environment already on the hosts is hashed, not sent again)",
                 d->job->name, ui_short(cur[i], s1), ui_short(env, s2), d->sid, d->name);
        return true;
    }
    return false;
}

void warn_failed_before(struct deploy *d)
{
    bool shows[INV_MAX_CTS] = { false };
    const char *cur[INV_MAX_CTS] = { NULL };
    for (int i = 0; i < d->job->ncts; i++) {
        const struct job_status *js = d->sv_found[i] && d->sv_js ? &d->sv_js[i] : NULL;
        shows[i] = js_shows_release(js, d->id);
        cur[i] = js ? js->current : NULL;
    }
    char msg[1400];
    if (failed_before_message(d, shows, msg, sizeof msg) ||
        survey_hang_stop_message(d, d->id, "deploying", msg, sizeof msg))
        log_warn("%s", msg);
    if (env_dropped_message(d, cur, d->job->ncts, msg, sizeof msg))
        log_warn("%s", msg);
}

/* A release id as JSON: null when there is none. */
static json_t *plan_id(const char *id)
{
    return id && *id ? json_string(id) : json_null();
}

/* Prints the plan; returns the number of containers that could not be reached (a deploy now
 * would fail at staging, so plan says so with its exit status too).  out: when not NULL, the
 * same plan as one JSON object appended to it (docs/protocol.md, "Plan"). */
int print_plan(struct deploy *d, json_t *out)
{
    int unreachable = 0;
    const struct inv_job *j = d->job;
    char sid[RELEASE_SHORT_LEN + 1], sid2[RELEASE_SHORT_LEN + 1];
    json_t *cts = json_array(), *cmd = json_array();
    json_array_append_new(cmd, json_string(j->command));
    for (int i = 0; i < j->nargs; i++)
        json_array_append_new(cmd, json_string(j->args[i]));
    printf("release %s (%s), %zu %s, %.2f MiB\n", d->sid, d->name, d->rs.m->nfiles,
           text_plural(d->rs.m->nfiles, "file", "files"), (double)d->blob_size / 1048576.0);
    printf("job %s: %d %s x %d %s, command %s", j->name, j->ncts, text_plural(j->ncts, "node", "nodes"),
           j->nproc_per_node, text_plural(j->nproc_per_node, "rank", "ranks"), j->command);
    for (int i = 0; i < j->nargs; i++)
        printf(" %s", j->args[i]);
    printf("\n");
    struct stopped_start ss; /* where the job is stopped: a deploy would start it (deploy.h) */
    stopped_start_init(&ss);
    bool shows[INV_MAX_CTS] = { false }; /* the release marked bad or run unpromoted there */
    const char *cur_of[INV_MAX_CTS] = { NULL };
    char cur_ids[INV_MAX_CTS][RELEASE_ID_LEN + 1];
    json_t *starts = json_array();
    bool good_pair = true; /* in every container: the deploy's rule on throughput (deploy_tput_rule) */
    for (int i = 0; i < j->ncts; i++) {
        const struct inv_ct *ct = &j->cts[i];
        char e[1200];
        if (fleet_agent_status(d->f, ct, d->st, e, sizeof e) < 0) {
            printf("  %-24s unreachable: %s\n", ct->label, e);
            json_array_append_new(cts, json_pack("{s:s,s:i,s:b,s:s}", "container", ct->label,
                                                 "node", i, "reachable", 0, "error", e));
            unreachable++;
            good_pair = false;
            continue;
        }
        const struct job_status *js = status_find_job(d->st, j->name);
        const char *cur = js ? js->current : "";
        shows[i] = js_shows_release(js, d->id);
        (void)str_copy(cur_ids[i], sizeof cur_ids[i], cur);
        cur_of[i] = cur_ids[i];
        /* the same release with another job spec is a deploy too (jobspec.h) */
        struct spec_digest want;
        char change[400] = "", what[460] = "";
        bool have_want = js && js->current[0] && jobspec_digest(j, i, &want) == 0;
        if (have_want)
            (void)jobspec_describe_change(j, js, &want, change, sizeof change);
        bool same = strcmp(cur, d->id) == 0;
        struct spec_digest mine; /* as have_want's, where the job never ran a release there */
        if (!js || jobspec_digest(j, i, &mine) < 0 || !jobspec_is_good_pair(js, d->id, &mine))
            good_pair = false;
        /* "already current" only where the deploy would say "nothing to do": the release AND
         * the spec promoted, not a candidate still on probation (or left by a drover that died) */
        bool settled = same && have_want && jobspec_is_settled(js, d->id, &want) && !change[0];
        if (same && change[0])
            snprintf(what, sizeof what, " (job spec changed: %s)", change);
        else if (same)
            snprintf(what, sizeof what, settled ? " (already current)" : " (current, not promoted yet)");
        json_array_append_new(cts, json_pack("{s:s,s:i,s:b,s:o,s:o,s:s,s:b,s:o}", "container", ct->label,
                                             "node", i, "reachable", 1, "current", plan_id(cur),
                                             "good", plan_id(js ? js->good : ""), "state",
                                             js ? gang_state_name(js->state) : "no job",
                                             "already_current", settled, "spec_change",
                                             change[0] ? json_string(change) : json_null()));
        printf("  %-24s node %d: %s (good %s, %s) -> %s%s\n", ct->label, i, ui_short(cur, sid),
               ui_short(js ? js->good : "", sid2), js ? gang_state_name(js->state) : "no job",
               d->sid, what);
        if (stopped_start_add(&ss, ct->label, js, d->id))
            json_array_append_new(starts, json_string(ct->label));
    }
    char line[1600];
    if (ss.n)
        printf("%s\n", stopped_start_message(&ss, true, j->name, d->sid, d->name, line, sizeof line));
    /* what a deploy would warn of after its survey, said by the plan too (and in its JSON) */
    char failed[1400] = "", dropped[1400] = "";
    if (failed_before_message(d, shows, failed, sizeof failed) ||
        survey_hang_stop_message(d, d->id, "deploying", failed, sizeof failed))
        log_warn("%s", failed);
    if (env_dropped_message(d, cur_of, j->ncts, dropped, sizeof dropped))
        log_warn("%s", dropped);
    const struct inv_policy *p = &j->policy;
    printf("probation: healthy_deadline %.0fs, warmup_steps %lld, warmup_time %.0fs, warmup_max "
           "%.0fs, min_healthy_time %.0fs, max_probation_time %.0fs, tolerance %.2f, confidence "
           "%.2f, on_inconclusive %s, progress_deadline %.0fs, auto_revert %s\n",
           p->healthy_deadline_s, (long long)p->warmup_steps, p->warmup_time_s, p->warmup_max_s,
           p->min_healthy_time_s, p->max_probation_time_s, p->tolerance, p->confidence,
           p->on_inconclusive_hold ? "hold" : "revert", p->progress_deadline_s,
           p->auto_revert ? "true" : "false");
    struct sample_set *bs = load_base_samples(d);
    json_t *base = json_null();
    if (bs) {
        printf("baseline: %s, %d %s, median %.1f Ktok/s; fail when the whole interval of the "
               "change lies below -%.0f%%\n", ui_short(bs->release, sid), bs->n,
               text_plural(bs->n, "sample", "samples"),
               probation_median(bs->ktok_s, bs->n), p->tolerance * 100);
        base = json_pack("{s:s,s:i,s:f}", "release", bs->release, "samples", bs->n, "ktok_s",
                         probation_median(bs->ktok_s, bs->n));
    } else if (d->baseline > 0) {
        printf("baseline: %.1f Ktok/s (one number, no samples); tolerance -%.0f%%\n", d->baseline,
               p->tolerance * 100);
        base = json_pack("{s:n,s:i,s:f}", "release", "samples", 0, "ktok_s", d->baseline);
    } else
        printf("baseline: none on these containers yet (throughput rule skipped; this release "
               "sets it)\n");
    const enum tput_rule rule = deploy_tput_rule(d, bs, good_pair && j->ncts > 0);
    const char *skip = NULL;
    if (rule == TPUT_GOOD_PAIR)
        skip = "the job's good release with the job spec it was promoted with: a regression could only "
               "revert it to itself, so the rate is said against the baseline, which stays";
    else if (rule == TPUT_RANKS_CHANGED)
        skip = "the baseline was measured with another number of ranks (nproc_per_node changed): its "
               "Ktok/s are not comparable, and this release's samples replace it";
    else if (rule == TPUT_NO_BASELINE)
        skip = "no baseline yet: this release's samples become it";
    if (rule == TPUT_GOOD_PAIR || rule == TPUT_RANKS_CHANGED)
        printf("throughput: not judged for this deploy: %s%s%s%s\n", skip,
               rule == TPUT_GOOD_PAIR ? " (`drover rebaseline --job " : "",
               rule == TPUT_GOOD_PAIR ? j->name : "", rule == TPUT_GOOD_PAIR ? "` measures it again)" : "");
    json_t *tput = json_pack("{s:b,s:o}", "judged", rule == TPUT_JUDGED, "why",
                             skip ? json_string(skip) : json_null());
    free(bs);
    json_t *pol = json_pack("{s:f,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:s,s:f,s:b}", "healthy_deadline_s",
                            p->healthy_deadline_s, "warmup_steps", (json_int_t)p->warmup_steps,
                            "warmup_time_s", p->warmup_time_s, "warmup_max_s", p->warmup_max_s,
                            "min_healthy_time_s", p->min_healthy_time_s, "max_probation_time_s",
                            p->max_probation_time_s, "tolerance", p->tolerance, "confidence",
                            p->confidence, "on_inconclusive", p->on_inconclusive_hold ? "hold" : "revert",
                            "progress_deadline_s", p->progress_deadline_s, "auto_revert",
                            p->auto_revert);
    json_t *plan = json_pack("{s:s,s:s,s:s,s:o,s:I,s:I,s:i,s:i,s:o,s:i,s:o,s:o,s:o,s:o}", "job", j->name,
                             "release", d->id, "name", d->name, "env",
                             plan_id(d->has_env ? d->env.id : NULL), "files",
                             (json_int_t)d->rs.m->nfiles, "bytes", (json_int_t)d->blob_size, "nodes",
                             j->ncts, "nproc_per_node", j->nproc_per_node, "command", cmd,
                             "unreachable", unreachable, "containers", cts, "starts_stopped", starts,
                             "policy", pol, "baseline", base);
    if (plan) {
        json_object_set_new(plan, "failed_before", failed[0] ? json_string(failed) : json_null());
        json_object_set_new(plan, "environment_dropped", dropped[0] ? json_string(dropped) : json_null());
        json_object_set_new(plan, "throughput_rule", tput);
    } else
        json_decref(tput);
    if (out && plan)
        json_array_append_new(out, plan);
    else
        json_decref(plan);
    return unreachable;
}
