/* controller/deploy/rollback.c: `drover rollback`, `drover promote`/`revert` of a held release,
 * and the check before a deploy that its rollback target is in every store and verifies.
 */
#include "controller/deploy/deploy_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/text.h"
#include "common/util.h"
#include "controller/cmd.h"
#include "controller/deploy/jobspec.h"
#include "controller/deploy/pastfail.h"
#include "controller/deploy/rbtarget.h"
#include "controller/deploy/state.h"
#include "controller/transport/fanout.h"
#include "controller/transport/send.h"

/* verify_everywhere's fan-out: 0 verified; -EIO with err = the reason (ct_fan_said makes the
 * line).  cf->arg: the release verified. */
static int verify_done(struct ct_fan *cf, int i, int r, struct exec_result *res, const char *why)
{
    const char *id = cf->arg;
    char sid[RELEASE_SHORT_LEN + 1];
    (void)r;
    if (!res && !why)
        return 0; /* survey already reached every container */
    if (!res) { /* labelled by ct_fan_said, unless why names the containers already */
        snprintf(cf->err[i], sizeof cf->err[i], "cannot verify the rollback target %s: %s", ui_short(id, sid), why);
        return -EIO;
    }
    if (res->status == 0)
        return 0;
    char reason[512];
    snprintf(cf->err[i], sizeof cf->err[i], "the rollback target %s %s: %s", ui_short(id, sid),
             res->status == AGENT_EXIT_NO_RELEASE ? "is not in the store" : "fails verification",
             exec_result_reason(res, reason, sizeof reason));
    return -EIO;
}

static int verify_one(struct ct_fan *cf, int i)
{
    struct deploy *d = cf->d;
    const struct inv_ct *ct = &d->job->cts[i];
    struct conn *c;
    int r = fleet_conn(d->f, ct->host, &c);
    if (r < 0)
        return verify_done(cf, i, r, NULL, NULL);
    struct exec_result res;
    if (pct_run_agent(c, ct, cf->batch_args, cf->batch_timeout_s, &res) < 0)
        return verify_done(cf, i, -EIO, NULL, c->err);
    r = verify_done(cf, i, 0, &res, NULL);
    exec_result_done(&res);
    return r;
}

/* `release verify id` in every container, every host at once (the agent's record-based check:
 * only files whose inode changed are read).  Each failure is logged, once; the first one's line
 * goes to first (may be NULL).  Returns how many failed, -EINTR (saying nothing) when the
 * operator interrupted it, or -ENOMEM. */
static int verify_everywhere(struct deploy *d, const char *id, char *first, size_t first_sz)
{
    struct ct_fan *cf = calloc(1, sizeof *cf);
    if (!cf)
        return -ENOMEM;
    const char *argv[] = { "release", "verify", id, NULL };
    cf->d = d;
    cf->fn = verify_one;
    cf->done = verify_done;
    cf->arg = id;
    cf->batch_args = argv;
    cf->batch_timeout_s = d->inv->exec_timeout_s + 60;
    cf->batch_what = "release verify";
    (void)ct_fan_run(cf); /* every host at once, a host's containers at once */
    if (deploy_interrupted) {
        /* the operator's Ctrl-C, not the target's fault: the calls it cut short say
         * "interrupted", which judged here would refuse the deploy naming --force.  The caller
         * says the interrupt, as for every other step before the switch. */
        free(cf);
        return -EINTR;
    }
    int bad = 0;
    for (int i = 0; i < d->job->ncts; i++)
        if (cf->rc[i] < 0) {
            char line[sizeof cf->err[i] + 64];
            const char *said = ct_fan_said(cf, i, line, sizeof line);
            if (said)
                log_error("%s", said);
            if (said && first && !bad)
                (void)str_copy(first, first_sz, said);
            bad++;
        }
    free(cf);
    return bad;
}

/* Before anything is pushed or stopped: the release this deploy would revert to (the job's good
 * release) must be in every container's store and pass verification there, or a failed deploy
 * would leave the job down (`REVERT FAILED ... not in the store`).  force: go on, saying so.
 * -EINTR, saying nothing, when the operator interrupted it (deploy_interrupted). */
int check_rollback_target(struct deploy *d, bool force)
{
    if (!d->good[0] || !strcmp(d->good, d->id))
        return 0;
    char sid[RELEASE_SHORT_LEN + 1];
    int bad = verify_everywhere(d, d->good, NULL, 0);
    if (bad <= 0)
        return bad;
    if (!force) {
        log_error("deploy refused: if %s failed probation, job '%s' could not go back to its good "
                  "release %s in %d %s; nothing was pushed or stopped.  Deploy %s again "
                  "to put it back, or deploy with --force to go on without a rollback target there",
                  d->sid, d->job->name, ui_short(d->good, sid), bad, text_plural(bad, "container", "containers"),
                  ui_short(d->good, sid));
        return -ENOENT;
    }
    log_warn("--force: deploying %s without a usable rollback target in %d %s: if it "
             "fails probation, job '%s' stays down there until a good release is deployed",
             d->sid, bad, text_plural(bad, "container", "containers"), d->job->name);
    return 0;
}

int check_switch_target(struct deploy *d, char *err, size_t err_sz)
{
    char first[2200] = "";
    int bad = verify_everywhere(d, d->id, first, sizeof first);
    if (bad <= 0)
        return bad;
    if (bad == 1)
        snprintf(err, err_sz, "%s", first);
    else
        snprintf(err, err_sz, "%s (and in %d more %s)", first, bad - 1, text_plural(bad - 1, "container", "containers"));
    return -ENOENT;
}

/* --to prefix names no release any container's status lists (good, previous, goods, bad): the
 * agents keep only the job's last few promoted ones, and their stores the newest releases.  From
 * the job's history (this controller's and the agents'), the one release matching prefix that
 * was promoted for the job (or a confirmed rollback went to).  Where every container still keeps
 * it (`release have`), it is the target: 0 with ret_id, said on stderr; where some do not, that
 * is said, exit 1 (EXIT_FAIL); -ENOENT, saying nothing, when the history knows no such release. */
static int rollback_to_forgotten(struct deploy *d, const char *to, char ret_id[RELEASE_ID_LEN + 1])
{
    struct history_entry *h = NULL;
    size_t n = 0;
    survey_history_all(d, &h, &n);
    const struct history_entry *e = NULL;
    const char *id = NULL;
    size_t pl = strlen(to);
    for (size_t i = n; i-- > 0;) {
        if (strcmp(h[i].job, d->job->name) != 0 || !h[i].release[0] ||
            strncasecmp(h[i].release, to, pl) != 0)
            continue;
        if (id && strcmp(id, h[i].release) != 0) {
            e = NULL; /* several releases: the caller's words (give more digits) */
            break;
        }
        id = h[i].release;
        if (!e && (!strcmp(h[i].result, "promoted") || !strcmp(h[i].result, "rollback")))
            e = &h[i];
    }
    if (!e) {
        free(h);
        return -ENOENT;
    }
    char sid[RELEASE_SHORT_LEN + 1], when[40] = "at an unknown time", named[MANIFEST_NAME_MAX + 4] = "";
    const char *name = pastfail_release_name(h, n, d->job->name, e->release);
    if (name[0])
        snprintf(named, sizeof named, " (%s)", name);
    time_t tt = (time_t)e->time;
    struct tm tm;
    if (e->time > 0 && gmtime_r(&tt, &tm))
        strftime(when, sizeof when, "at %Y-%m-%d %H:%M:%S UTC", &tm);
    ui_short(e->release, sid);
    char gone[INV_MAX_CTS * 40] = "", unasked[INV_MAX_CTS * 40] = "";
    size_t ng = 0, nu = 0;
    int ngone = 0;
    struct agent_argv a;
    agent_argv_init(&a);
    agent_argv_release_have(&a, e->release);
    for (int i = 0; i < d->job->ncts; i++) {
        const struct inv_ct *ct = &d->job->cts[i];
        struct conn *c;
        struct exec_result res;
        bool asked = fleet_conn(d->f, ct->host, &c) == 0 && pct_run_agent(c, ct, a.argv, 30, &res) == 0;
        bool present = asked && res.status == 0 && res.out && strstr(res.out, " present");
        bool absent = asked && res.status == 0 && res.out && strstr(res.out, " absent");
        if (asked)
            exec_result_done(&res);
        if (absent) {
            ng += (size_t)snprintf(gone + ng, sizeof gone - ng, "%s%s", ngone ? ", " : "", ct->label);
            ngone++;
        } else if (!present) {
            nu += (size_t)snprintf(unasked + nu, sizeof unasked - nu, "%s%s", nu ? ", " : "", ct->label);
        }
    }
    if (!ngone && !nu) {
        log_warn("rollback of job '%s': release %s%s was promoted for job '%s' %s; its agents no "
                 "longer list it among the job's promoted releases, but every container still keeps "
                 "it: going to it with the inventory's job spec", d->job->name, sid, named,
                 d->job->name, when);
        (void)str_copy(ret_id, RELEASE_ID_LEN + 1, e->release);
        free(h);
        return 0;
    }
    if (ngone)
        log_error("rollback of job '%s' refused, nothing changed: release %s%s was promoted for job "
                  "'%s' %s but is no longer kept in %s (each agent keeps its newest releases, "
                  "--keep-releases, and the job's last few promoted ones)%s%s: deploy it again from its "
                  "directory (drover deploy DIR --job %s)", d->job->name, sid, named, d->job->name, when,
                  gone, nu ? "; not known for " : "", nu ? unasked : "", d->job->name);
    else
        log_error("rollback of job '%s' refused, nothing changed: release %s%s was promoted for job "
                  "'%s' %s, but its agents no longer list it and %s did not say whether it keeps it: "
                  "try again, or deploy it again from its directory (drover deploy DIR --job %s)",
                  d->job->name, sid, named, d->job->name, when, unasked, d->job->name);
    free(h);
    return EXIT_FAIL;
}

/* The release --to names: one of those this job ran (good, previous, promoted or bad in any
 * container), by a unique prefix of at least 6 hex digits.  0 with ret_id; else the exit code,
 * said: a prefix that matches none or several is 1 (refused, nothing changed: the prefix was
 * well formed, "give at least 6 hex digits" read as if 8 were too few); a malformed one is 2,
 * though cmd_rollback() says that before any host is contacted. */
static int rollback_pick_to(struct deploy *d, const char *to, char ret_id[RELEASE_ID_LEN + 1])
{
    const char *known[2 + INV_MAX_CTS * STATUS_MAX_MARKS + 16];
    int nk = 0;
    known[nk++] = d->previous;
    known[nk++] = d->good;
    for (int i = 0; i < d->job->ncts; i++)
        for (int k = 0; d->sv_found[i] && k < d->sv_js[i].ngoods; k++)
            known[nk++] = d->sv_js[i].goods[k];
    for (int k = 0; k < d->nbad; k++)
        known[nk++] = d->bad[k];
    if (!rbtarget_prefix_ok(to)) {
        log_error("--to '%s' is not a release id: give %d to %d hex digits of one (`drover history "
                  "--job %s` lists the job's releases)", to, RB_PREFIX_MIN, RELEASE_ID_LEN, d->job->name);
        return EXIT_USAGE;
    }
    const char *hits[8];
    int nh = rbtarget_match_prefix(known, nk, to, hits, (int)ARRAY_SIZE(hits));
    if (nh == 0) {
        int r = rollback_to_forgotten(d, to, ret_id);
        if (r >= 0)
            return r;
        log_error("rollback of job '%s' refused, nothing changed: no release the job ran (good, "
                  "previous, promoted or bad) begins with '%s'; `drover history --job %s` lists "
                  "its releases", d->job->name, to, d->job->name);
        return EXIT_FAIL;
    }
    if (nh > 1) {
        /* each named as far as needed to tell it from the others: 12 digits, or all of them
         * when the prefix is that long already */
        char list[8 * (RELEASE_ID_LEN + 2) + 16] = "";
        size_t off = 0;
        int show = strlen(to) < RELEASE_SHORT_LEN ? RELEASE_SHORT_LEN : RELEASE_ID_LEN;
        for (int k = 0; k < nh && k < (int)ARRAY_SIZE(hits); k++)
            off += (size_t)snprintf(list + off, sizeof list - off, "%s%.*s", k ? ", " : "", show, hits[k]);
        if (nh > (int)ARRAY_SIZE(hits))
            snprintf(list + off, sizeof list - off, ", ...");
        log_error("rollback of job '%s' refused, nothing changed: %d releases the job ran begin "
                  "with '%s' (%s); give more hex digits of the one to go to", d->job->name, nh, to, list);
        return EXIT_FAIL;
    }
    (void)str_copy(ret_id, RELEASE_ID_LEN + 1, hits[0]);
    return 0;
}

/* The rollback target d->id's own baseline samples (state_samples_get_release), when the job's
 * baseline is another release's (the one rolled back from, say): malloc'd, NULL when they are
 * the baseline already, or none are kept here. */
static struct sample_set *rollback_target_samples(struct deploy *d)
{
    struct sample_set *ss = malloc(sizeof *ss), *cur = malloc(sizeof *cur);
    if (ss && cur && (state_samples_get(d->inv->state_dir, d->key, false, cur) < 0 ||
                      strcmp(cur->release, d->id) != 0) &&
        state_samples_get_release(d->inv->state_dir, d->key, d->id, ss) == 0) {
        free(cur);
        return ss;
    }
    free(ss);
    free(cur);
    return NULL;
}

/* After a rollback's promote: the baseline, said.  With tss (the target's own samples, sent with
 * the promote: the agents keep them as the baseline) recorded here as the baseline too.  Without,
 * where the baseline this machine knows is another release's, that it stays so: the next deploy
 * is judged against it (it was, silently: "probation: baseline c84dd6fa5d0e" after a rollback
 * away from that release). */
static void rollback_baseline(struct deploy *d, const struct sample_set *tss)
{
    char bsid[RELEASE_SHORT_LEN + 1];
    if (tss) {
        double k = probation_median(tss->ktok_s, tss->n);
        if (state_baseline_set(d->inv->state_dir, d->key, d->id, k) < 0 ||
            state_samples_set(d->inv->state_dir, d->key, false, tss) < 0)
            log_warn("cannot record the baseline in '%s'", d->inv->state_dir);
        fprintf(stderr, "baseline: job '%s''s baseline is %s's own again: its %d %s from when it was "
                "promoted (median %.1f Ktok/s)\n", d->job->name, d->sid, tss->n,
                text_plural(tss->n, "sample", "samples"), k);
        return;
    }
    struct sample_set *cur = malloc(sizeof *cur);
    if (cur && state_samples_get(d->inv->state_dir, d->key, false, cur) == 0 && strcmp(cur->release, d->id) != 0)
        fprintf(stderr, "baseline: job '%s''s baseline stays %s's samples (median %.1f Ktok/s): none of "
                "%s's are kept on this machine; `drover rebaseline --job %s` measures %s as it runs, "
                "for the next deploy to be judged against\n", d->job->name, ui_short(cur->release, bsid),
                probation_median(cur->ktok_s, cur->n), d->sid, d->job->name, d->sid);
    free(cur);
}

int deploy_rollback_refuse_failed(const struct inventory *inv, const char *job, const char *to)
{
    struct history_entry *h = NULL;
    size_t n = 0;
    if (!job || !to || !inventory_find_job(inv, job) || state_history_read(inv->state_dir, job, &h, &n, NULL) < 0)
        return EXIT_OK; /* the survey decides (a job not in the inventory is said there) */
    const struct history_entry *e = pastfail_find_prefix(h, n, job, to);
    if (e) {
        char msg[1400];
        log_error("%s", pastfail_rollback_refusal(e, pastfail_release_name(h, n, job, e->release), job,
                                                  e->release, false, msg, sizeof msg));
    }
    free(h);
    return e ? EXIT_FAIL : EXIT_OK;
}

int deploy_rollback(struct fleet *f, const char *job, const char *to, bool force, bool now, bool dry_run)
{
    struct deploy d;
    int ret = deploy_init(&d, f, job, true);
    if (ret)
        return ret;
    ret = EXIT_FAIL;
    d.no_confirm = now;
    char err[2048];
    char sid[RELEASE_SHORT_LEN + 1];
    /* Ctrl-C before the switch, from the lease (with its status) on: as in deploy_run, give the
     * lease back and record it.  A dry run takes neither the lock nor the lease: it changes nothing */
    interrupt_handlers(on_sigint_send);
    int lock = dry_run ? -1 : deploy_lock(&d, "rollback");
    if (lock < 0 && !dry_run)
        goto out;
    if (deploy_interrupted)
        goto interrupted_before_switch;
    bool all_current;
    int sr = survey(&d, false, &all_current, err, sizeof err);
    if (deploy_interrupted)
        goto interrupted_before_switch;
    if (sr < 0) {
        ret = f->key_refused ? EXIT_HOSTKEY : EXIT_FAIL;
        goto out;
    }
    /* where to, from every container's view (rbtarget.h), never from the first that answers */
    char pick[RELEASE_ID_LEN + 1] = "";
    if (to && (ret = rollback_pick_to(&d, to, pick)) != 0)
        goto out;
    ret = EXIT_FAIL;
    if (pick[0] && deploy_is_bad(&d, pick) && !force) {
        /* a refusal (exit 1), not a usage error: --to named a release the job ran; why it
         * failed from the history (state_dir's and an agent's), where it is recorded */
        struct history_entry *h;
        size_t nh;
        survey_history_of(&d, pick, &h, &nh);
        char msg[1400];
        log_error("%s", pastfail_rollback_refusal(pastfail_find(h, nh, d.job->name, pick),
                                                  pastfail_release_name(h, nh, d.job->name, pick),
                                                  d.job->name, pick, true, msg, sizeof msg));
        free(h);
        goto out;
    }
    struct rb_ct cts[INV_MAX_CTS];
    struct spec_digest want[INV_MAX_CTS];
    for (int i = 0; i < d.job->ncts; i++) {
        if (jobspec_digest(d.job, i, &want[i]) < 0)
            want[i].hex[0] = '\0';
        cts[i] = (struct rb_ct){ .label = d.job->cts[i].label, .want = want[i].hex,
                                 .js = d.sv_found[i] ? &d.sv_js[i] : NULL };
    }
    /* The one rule of both paths: a release whose newest probation for the job failed is bad
     * until promoted again.  --to was checked above; here the promoted releases this
     * controller's history says failed since, which an agent older than that mark keeps
     * unmarked (a plain rollback went back to such a release while --to refused it). */
    struct history_entry *hh = NULL;
    size_t nhh = 0;
    if (state_history_read(d.inv->state_dir, d.job->name, &hh, &nhh, NULL) < 0) {
        hh = NULL;
        nhh = 0;
    }
    const char *skip[INV_MAX_CTS * STATUS_MAX_MARKS];
    int nskip = 0;
    for (int i = 0; !pick[0] && i < d.job->ncts; i++)
        for (int k = 0; d.sv_found[i] && k < d.sv_js[i].ngoods && nskip < (int)ARRAY_SIZE(skip); k++)
            if (pastfail_find_now(hh, nhh, d.job->name, d.sv_js[i].goods[k]))
                skip[nskip++] = d.sv_js[i].goods[k];
    struct rb_target *t = calloc(1, sizeof *t);
    if (!t || rbtarget_decide_skip(d.job->name, cts, d.job->ncts, pick[0] ? pick : NULL, skip, nskip, t) < 0) {
        log_error("out of memory");
        free(t);
        free(hh);
        goto out;
    }
    for (int k = 0; k < t->nskipped && (t->kind == RB_EARLIER || t->kind == RB_NONE); k++) {
        char msg[1400];
        const struct history_entry *e = pastfail_find_now(hh, nhh, d.job->name, t->skipped[k]);
        /* when and why from this controller's history, else from the agents' own records: a
         * promoted release its agent stopped for a failure not retried (no drover was there to
         * record it) is known there only */
        struct history_entry *ah = NULL;
        size_t nah = 0;
        if (!e) {
            survey_history_of(&d, t->skipped[k], &ah, &nah);
            e = pastfail_find_now(ah, nah, d.job->name, t->skipped[k]);
        }
        const char *name = pastfail_release_name(ah ? ah : hh, ah ? nah : nhh, d.job->name, t->skipped[k]);
        log_warn("%s", pastfail_rollback_skip(e, name, d.job->name, t->skipped[k], msg, sizeof msg));
        free(ah);
    }
    free(hh);
    (void)str_copy(d.current, sizeof d.current, t->current);
    (void)str_copy(d.good, sizeof d.good, t->good);
    if (t->kind == RB_REFUSED) {
        log_error("rollback of job '%s' refused, nothing changed: %s", d.job->name, t->why);
        free(t);
        goto out;
    }
    if (t->kind == RB_NONE && t->why[0]) { /* --to the pair every container runs already */
        log_error("rollback of job '%s' refused, nothing changed: %s", d.job->name, t->why);
        free(t);
        goto out;
    }
    if (t->kind == RB_NONE) {
        /* "runs" only where a gang is there: a stopped or failed job runs nothing */
        bool runs = false;
        for (int i = 0; i < d.job->ncts; i++)
            runs = runs || (d.sv_found[i] && d.sv_js[i].state != GANG_STOPPED && d.sv_js[i].state != GANG_FAILED);
        char hint[JOB_NAME_MAX + 48] = "";
        if (!runs)
            snprintf(hint, sizeof hint, "; `drover start --job %s` runs it again", d.job->name);
        if (d.good[0])
            log_error("job '%s' %s its last good release %s and has no earlier good release to roll "
                      "back to%s%s", d.job->name, runs ? "runs" : "is stopped on", ui_short(d.current, sid),
                      d.nbad || t->nskipped ? " (releases marked bad, which failed probation or were "
                                              "stopped while promoted, are not rollback targets; name "
                                              "one with --to ID --force)" : "", hint);
        else
            log_error("job '%s' has no good release: nothing to roll back to (name one with --to ID)",
                      d.job->name);
        free(t);
        goto out;
    }
    if (t->kind == RB_REVERT) {
        /* Some container runs something that was never promoted (a release, or the good release
         * with a job spec that was not): the agents go back to the good release with its good
         * spec, everywhere. */
        free(t);
        (void)str_copy(d.id, sizeof d.id, d.current);
        ui_short(d.id, d.sid);
        (void)str_copy(d.name, sizeof d.name, "rollback");
        d.rb_revert = true; /* recorded as the good release it goes back to, from d.id */
        if (dry_run) {
            printf("rollback of job '%s' (dry run, nothing changed): would revert %s to its good "
                   "release %s with the job spec it was promoted with, in every container\n",
                   d.job->name, d.sid, ui_short(d.good, sid));
            ret = EXIT_OK;
            goto out;
        }
        if (deploy_interrupted)
            goto interrupted_before_switch;
        /* marked bad only where its probation was decided (a held release, a failure left
         * running, a failure recorded), as `drover revert` decides it: a release whose deploy never reached a verdict
         * (its agent died, deploy said "not marked bad") was marked bad here, and a later
         * rollback --to it asked for --force */
        struct history_entry *rh;
        size_t nrh;
        survey_history_of(&d, d.id, &rh, &nrh);
        d.no_bad_mark = !pastfail_find_now(rh, nrh, d.job->name, d.id) &&
                        pastfail_hand_revert_code(rh, nrh, d.job->name, d.id) == HISTORY_RC_OPERATOR_REVERT;
        free(rh);
        interrupt_handlers(on_sigint);
        ret = revert_all(&d, HISTORY_RC_NONE, "operator rollback");
        ret = ret == EXIT_REVERTED ? EXIT_OK : ret;
        goto out;
    }
    if (pick[0] && deploy_is_bad(&d, pick))
        log_warn("--force: rolling back to %s, which failed probation for job '%s'",
                 ui_short(pick, sid), d.job->name);
    /* a target its agent stopped after hangs while it ran promoted: no verdict on it (not
     * marked, not refused), but said, plain rollback and --to alike: it went through silently */
    char hung[1400];
    if (survey_hang_stop_message(&d, t->release, "rolling back to", hung, sizeof hung))
        log_warn("%s", hung);
    (void)str_copy(d.id, sizeof d.id, t->release);
    ui_short(d.id, d.sid);
    (void)str_copy(d.name, sizeof d.name, "rollback");
    for (int i = 0; i < d.job->ncts; i++) {
        d.recorded[i] = t->recorded[i];
        (void)str_copy(d.want_spec[i], sizeof d.want_spec[i], t->digest[i]);
    }
    char what[300];
    if (t->spec_only)
        snprintf(what, sizeof what, "the same release %s with the job spec it was promoted with "
                 "before", d.sid);
    else if (t->nrecorded)
        snprintf(what, sizeof what, "the previous good release %s with the job spec it was promoted "
                 "with", d.sid);
    else
        snprintf(what, sizeof what, "the %s release %s (with the inventory's job spec)",
                 pick[0] ? "named" : "previous good", d.sid);
    int nrecorded = t->nrecorded;
    free(t);
    if (dry_run) {
        printf("rollback of job '%s' (dry run, nothing changed): would go from %s to %s, in %d "
               "%s; it is confirmed to train, then promoted\n", d.job->name,
               ui_short(d.current, sid), what, d.job->ncts, text_plural(d.job->ncts, "container", "containers"));
        ret = EXIT_OK;
        goto out;
    }
    fprintf(stderr, "rolling job '%s' back from %s to %s\n", d.job->name, ui_short(d.current, sid), what);
    const struct inv_policy *pol = &d.job->policy;
    double pdl = pol->progress_deadline_s + pol->healthy_deadline_s + 120;
    if (deploy_interrupted)
        goto interrupted_before_switch;
    /* The target is checked in every container before any gang is stopped for it: the agent's
     * own check at activation comes after the switch stopped the old gang everywhere, and a
     * damaged target left the job down (the old gang stopped, the new one refused). */
    int vr = check_switch_target(&d, err, sizeof err);
    if (deploy_interrupted)
        goto interrupted_before_switch;
    if (vr < 0) {
        if (vr != -ENOENT)
            snprintf(err, sizeof err, "cannot verify %s: %s", d.sid, strerror(-vr));
        fprintf(stderr, "%s%sROLLBACK FAILED for job '%s': %s; nothing was stopped: the job is as it was%s\n",
                ui_bold(stderr), ui_red(stderr), d.job->name, err, ui_reset(stderr));
        history_record(&d, "aborted", HISTORY_RC_NONE, err, -1);
        ret = EXIT_FAIL;
        goto out;
    }
    interrupt_handlers(on_sigint);
    /* as a deploy decides it after its survey: a revert of a failed activation leaves a stopped
     * job stopped (revert --no-start where the agent knows it) */
    bool was_stopped = deploy_job_is_stopped(&d);
    d.switching = true;
    int ar = activate_cts(&d, pdl, err, sizeof err);
    if (ar == -ECANCELED) {
        printf("%sROLLBACK ABORTED%s for job '%s': %s\n", ui_red(stdout), ui_reset(stdout), d.job->name, err);
        history_record(&d, "aborted", HISTORY_RC_NONE, err, -1);
        ret = EXIT_FAIL;
        goto out;
    }
    char gsid[RELEASE_SHORT_LEN + 1];
    (void)ui_short(d.good, gsid);
    if (ar < 0) {
        /* Activated in some containers only: the target runs there unpromoted, the good release
         * restarts elsewhere, and the gang is split until the agents' deadlines.  The good release
         * goes back everywhere now, as one gang, by the revert a failed deploy makes (it said
         * "run `drover rollback`" and left the job split).  Recorded "reverted" with the name
         * "rollback", no verdict on the target (pastfail skips it), and not marked bad by the
         * agents: it never ran as a gang, and an earlier good release stays a rollback target. */
        char said[2200 + sizeof err];
        log_error("%s", err);
        deploy_rollback_failed_message(said, sizeof said, RBF_ACTIVATE, err, d.job->name, d.sid,
                                       d.good[0] ? gsid : NULL, d.probation_deadline_at);
        fprintf(stderr, "%s%sROLLBACK FAILED for job '%s': %s%s\n", ui_bold(stderr), ui_red(stderr),
                d.job->name, said, ui_reset(stderr));
        if (!d.good[0]) { /* nothing to put back: a revert would stop the job */
            history_record(&d, "revert-failed", HISTORY_RC_NONE, err, -1);
            ret = EXIT_REVERT_FAILED;
            goto out;
        }
        char why[900];
        snprintf(why, sizeof why, "rollback to %s: activate failed: %.760s", d.sid, err);
        d.rollback = false; /* "reverted" (or "revert-failed"), as a failed deploy's revert */
        d.no_bad_mark = true;
        d.leave_stopped = was_stopped;
        ret = revert_all(&d, HISTORY_RC_NONE, why);
        goto out;
    }
    char msg[700];
    if (now)
        snprintf(msg, sizeof msg, "%s activated without analysis (--now)", d.sid);
    int cr = now ? 0 : confirm_recovery(&d, d.id, msg, sizeof msg);
    if (d.lease_lost) {
        ret = taken_over(&d, "the rollback's confirmation");
        goto out;
    }
    if (cr == -EINTR) {
        /* activated everywhere, not promoted: the agents return to the good release at the
         * probation deadline unless the operator promotes it, which only a watched gang that
         * trains warrants (promoted, nothing watches it: no probation) */
        size_t n = strlen(msg);
        snprintf(msg + n, sizeof msg - n, ": %s runs unpromoted, on its agents' probation; once "
                 "`drover status --job %s` shows every rank of it training, `drover promote --job %s` "
                 "keeps it; `drover rollback --job %s` puts %s back now; else the agents return to %s "
                 "at its probation deadline (%.0f s)", d.sid, d.job->name, d.job->name, d.job->name,
                 d.good[0] ? gsid : "the good release", d.good[0] ? gsid : "no release", pdl);
        fprintf(stderr, "%sROLLBACK NOT CONFIRMED%s for job '%s': %s\n", ui_bold(stderr),
                ui_reset(stderr), d.job->name, msg);
        history_record(&d, "aborted", HISTORY_RC_NONE, msg, -1);
        ret = EXIT_FAIL;
        goto out;
    }
    if (cr == -EIO && d.recovery_went_back && d.good[0] && strcmp(d.good, d.id) != 0) {
        /* the target failed and the agents went back to the good release by themselves: the
         * revert a failed deploy makes then (each agent confirms, the good release's recovery is
         * watched), recorded as the target's failure.  It was ROLLBACK FAILED, exit 4, "the job
         * may be down", while the job ran its good release, left in the agents' reverted state. */
        printf("%sFAILED%s rollback of job '%s' to %s: %s\n", ui_red(stdout), ui_reset(stdout),
               d.job->name, d.sid, msg);
        d.rollback = false;
        ret = revert_all(&d, HISTORY_RC_AGENT_REVERT, msg);
        goto out;
    }
    /* the target's own baseline samples, where this machine kept them when it was the baseline:
     * its promote makes them the job's baseline again (rollback_baseline) */
    struct sample_set *tss = cr < 0 ? NULL : rollback_target_samples(&d);
    if (cr < 0 || promote_all(&d, -1, tss) < 0) {
        free(tss);
        /* the state it leaves and what puts the good release back, watched (it said nothing
         * more; a promote failure said only that the target trains) */
        char said[2200 + sizeof msg];
        deploy_rollback_failed_message(said, sizeof said, cr < 0 ? RBF_RECOVERY : RBF_PROMOTE, msg,
                                       d.job->name, d.sid, d.good[0] ? gsid : NULL, d.probation_deadline_at);
        fprintf(stderr, "%s%sROLLBACK FAILED for job '%s': %s%s\n", ui_bold(stderr), ui_red(stderr),
                d.job->name, said, ui_reset(stderr));
        history_record(&d, "revert-failed", HISTORY_RC_NONE, msg, -1);
        ret = EXIT_REVERT_FAILED;
        goto out;
    }
    printf("rolled job '%s' back to %s: %s\n", d.job->name, d.sid, msg);
    rollback_baseline(&d, tss);
    free(tss);
    if (nrecorded)
        printf("job '%s' runs %s with the job spec it was promoted with before; the inventory asks "
               "for another spec in %d %s: the next `drover deploy` relaunches with the "
               "inventory's (`drover plan` shows the change), so edit the inventory to keep this one\n",
               d.job->name, d.sid, nrecorded, text_plural(nrecorded, "container", "containers"));
    /* history: result "rollback", release the one it went back to, previous the good release it
     * came from (d.good, the pair every container ran), as its failures are recorded and as a
     * deploy names its candidate and the good release before it (common/histrec.h).  It named
     * the target in both, and a rollback of an unpromoted release named them the other way
     * round. */
    history_record(&d, "rollback", HISTORY_RC_NONE, "operator rollback", -1);
    ret = EXIT_OK;
    goto out;
interrupted_before_switch:
    exec_interrupted = 0; /* the lease and the history record below are sent */
    send_interrupted = 0;
    if (dry_run) {
        ret = EXIT_FAIL;
        goto out;
    }
    if (deploy_job_is_stopped(&d))
        log_error("rollback of job '%s' interrupted by the operator before the switch: nothing was "
                  "started: job '%s' stays stopped", d.job->name, d.job->name);
    else
        log_error("rollback of job '%s' interrupted by the operator before the switch: nothing was "
                  "stopped or switched, the running release keeps running untouched", d.job->name);
    history_record(&d, "aborted", HISTORY_RC_NONE, "rollback interrupted by the operator before the switch", -1);
    ret = EXIT_FAIL;
out:
    interrupt_handlers(NULL);
    exec_interrupted = 0; /* a second Ctrl-C during the record above: still give the lease back */
    send_interrupted = 0;
    deploy_done(&d, lock);
    return ret;
}

/* Does container i hold something for a promote: it runs a release, or a job spec, that was
 * not promoted there (its good pair is not what runs)? */
static bool ct_holds(const struct job_status *js)
{
    return js && js->current[0] &&
           (strcmp(js->current, js->good) != 0 || strcmp(js->spec_digest, js->good_spec_digest) != 0);
}

/* What `drover promote` promotes, or `drover revert` reverts, from every container's view (never
 * the first one's: after a promote that failed in some containers only, the first could call the
 * release good already, and "nothing is held" was said while the others held it on their
 * agents' probation; a revert then went back only where it was still held, splitting the gang).
 * The candidate is the release held in the first container that holds one; every container must
 * run it (for a revert, one that runs the good release the holders go back to is fine too: its
 * agent went back by itself).  Returns how many containers hold it (skip[i] set where it is
 * promoted already, named in note, ", "-joined, "" where none), with d->current the candidate
 * and d->good the good release it replaces (a holding container's); 0 when none holds anything;
 * -1 when the containers do not run one release (or one runs none of the job), with the refusal
 * in note. */
static int held_plan(struct deploy *d, bool promote, bool skip[INV_MAX_CTS], char *note, size_t note_sz)
{
    const struct inv_job *j = d->job;
    const char *verb = promote ? "promote" : "revert", *done = promote ? "promoted" : "reverted";
    int first = -1;
    for (int i = 0; i < j->ncts && first < 0; i++)
        if (d->sv_found[i] && ct_holds(&d->sv_js[i]))
            first = i;
    note[0] = '\0';
    if (first < 0)
        return 0;
    const char *cand = d->sv_js[first].current, *hgood = d->sv_js[first].good;
    char csid[RELEASE_SHORT_LEN + 1], a[RELEASE_SHORT_LEN + 1], b[RELEASE_SHORT_LEN + 1];
    (void)ui_short(cand, csid);
    char who[1400] = "", already[600] = "";
    size_t wn = 0, an = 0;
    int held = 0, odd = 0;
    for (int i = 0; i < j->ncts; i++) {
        const struct job_status *js = d->sv_found[i] ? &d->sv_js[i] : NULL;
        skip[i] = false;
        if (js && js->current[0] && !strcmp(js->current, cand)) {
            if (ct_holds(js)) {
                held++;
            } else { /* promoted there: its promote worked, another's did not */
                skip[i] = true;
                an += (size_t)snprintf(already + an, an < sizeof already ? sizeof already - an : 0, "%s%s",
                                       an ? ", " : "", j->cts[i].label);
            }
            continue;
        }
        if (!promote && js && js->current[0] && !ct_holds(js) && !strcmp(js->current, hgood))
            continue; /* back on the good release the holders revert to */
        odd++;
        if (!js || !js->current[0])
            wn += (size_t)snprintf(who + wn, wn < sizeof who ? sizeof who - wn : 0, "%s%s runs no release of "
                                   "the job", wn ? "; " : "", j->cts[i].label);
        else
            wn += (size_t)snprintf(who + wn, wn < sizeof who ? sizeof who - wn : 0, "%s%s runs %s (%s%s)",
                                   wn ? "; " : "", j->cts[i].label, ui_short(js->current, a),
                                   ct_holds(js) ? "not promoted there, good " : "its good release",
                                   ct_holds(js) ? ui_short(js->good, b) : "");
    }
    if (odd) {
        snprintf(note, note_sz, "%s of job '%s' refused, nothing %s: its containers do not run one "
                 "release: %s holds %s (not promoted there); %s.  `drover status --job %s` shows each; "
                 "`drover rollback --job %s --to ID` puts the release ID back in every container, or "
                 "`drover deploy DIR --job %s` runs a release's probation again as one gang", verb, j->name,
                 done, j->cts[first].label, csid, who, j->name, j->name, j->name);
        return -1;
    }
    (void)str_copy(d->current, sizeof d->current, cand);
    (void)str_copy(d->good, sizeof d->good, hgood);
    (void)str_copy(note, note_sz, already);
    return held;
}

int deploy_decide_held(struct fleet *f, const char *job, bool promote)
{
    struct deploy d;
    int ret = deploy_init(&d, f, job, false);
    if (ret)
        return ret;
    ret = EXIT_FAIL;
    char err[2048];
    int lock = deploy_lock(&d, promote ? "promote" : "revert");
    if (lock < 0)
        goto out;
    bool all_current;
    if (survey(&d, false, &all_current, err, sizeof err) < 0) {
        ret = f->key_refused ? EXIT_HOSTKEY : EXIT_FAIL;
        goto out;
    }
    if (deploy_job_is_stopped(&d)) {
        /* nothing runs to decide on: "runs its good release" was said of a job stopped on it */
        struct stopped_start ss;
        stopped_start_init(&ss);
        for (int i = 0; i < d.job->ncts; i++)
            (void)stopped_start_add(&ss, d.job->cts[i].label, d.sv_found[i] ? &d.sv_js[i] : NULL, d.current);
        char msg[1400];
        deploy_stopped_held_message(msg, sizeof msg, d.job->name, ss.who, promote);
        log_error("%s", msg);
        goto out;
    }
    bool skip[INV_MAX_CTS] = { false };
    char already[1600] = "";
    int held = held_plan(&d, promote, skip, already, sizeof already);
    if (held < 0) {
        log_error("%s", already);
        goto out;
    }
    if (!promote && held > 0 && already[0]) {
        /* promoted in some containers, held in the others: each agent's revert goes to its own
         * good release, the candidate itself where it was promoted, so the gang would split */
        char csid[RELEASE_SHORT_LEN + 1], gsid[RELEASE_SHORT_LEN + 1];
        log_error("revert of job '%s' refused, nothing reverted: %s is promoted already in %s (an "
                  "earlier promote worked there only) and held in %d %s, where a revert goes back to %s: "
                  "a revert would split the gang.  `drover rollback --job %s --to %s` puts %s back in "
                  "every container as one gang; `drover promote --job %s` keeps %s everywhere",
                  d.job->name, ui_short(d.current, csid), already, held,
                  text_plural(held, "other container", "other containers"), ui_short(d.good, gsid),
                  d.job->name, gsid, gsid, d.job->name, csid);
        goto out;
    }
    if (!d.current[0] || held == 0) {
        char msg[400];
        deploy_nothing_held_message(msg, sizeof msg, d.job->name, !d.current[0], promote);
        log_error("%s", msg);
        goto out;
    }
    (void)str_copy(d.id, sizeof d.id, d.current);
    ui_short(d.id, d.sid);
    (void)str_copy(d.name, sizeof d.name, promote ? "promote" : "revert");
    /* promote exactly the pair held in each container (what its probation measured): one that
     * changed since is refused by its agent (promote --spec-digest) */
    for (int i = 0; i < d.job->ncts; i++)
        (void)str_copy(d.want_spec[i], sizeof d.want_spec[i], d.sv_found[i] ? d.sv_js[i].spec_digest : "");
    /* the record says what was decided: "(held release)" was written after an unconfirmed
     * rollback too, where nothing was held */
    struct history_entry *h;
    size_t nh;
    survey_history_of(&d, d.id, &h, &nh);
    char why[160];
    snprintf(why, sizeof why, "%s by the operator (%s)", promote ? "promoted" : "reverted",
             pastfail_unpromoted_why(h, nh, d.job->name, d.id));
    /* a revert of a release whose probation never failed (an unconfirmed rollback to it) is no
     * verdict on it: recorded as operator-revert, which a later deploy's "failed probation
     * before" warning does not count, and not marked bad in the agents (a later rollback --to
     * it needs no --force) */
    enum history_reason code = pastfail_hand_revert_code(h, nh, d.job->name, d.id);
    free(h);
    if (!promote) {
        d.no_bad_mark = code == HISTORY_RC_OPERATOR_REVERT;
        ret = revert_all(&d, code, why);
        ret = ret == EXIT_REVERTED ? EXIT_OK : ret;
        goto out;
    }
    struct sample_set *ss = malloc(sizeof *ss);
    if (ss && (state_samples_get(d.inv->state_dir, d.key, true, ss) < 0 ||
               strcmp(ss->release, d.id) != 0)) {
        free(ss);
        ss = NULL;
    }
    double k = ss ? probation_median(ss->ktok_s, ss->n) : -1;
    if (already[0])
        fprintf(stderr, "promote: %s is promoted already in %s (an earlier promote worked there only): "
                "promoting it where it is held, %d %s\n", d.sid, already, held,
                text_plural(held, "container", "containers"));
    if (promote_cts(&d, k, ss, skip) < 0) {
        history_record(&d, "failed", HISTORY_RC_PROMOTE_FAILED, "promote by the operator failed", k);
        free(ss);
        goto out;
    }
    if (ss) {
        if (state_baseline_set(d.inv->state_dir, d.key, d.id, k) < 0 ||
            state_samples_set(d.inv->state_dir, d.key, false, ss) < 0)
            log_warn("cannot record the baseline in '%s'", d.inv->state_dir);
        (void)state_samples_drop(d.inv->state_dir, d.key, true);
    }
    printf("promoted %s for job '%s' by hand%s\n", d.sid, d.job->name,
           ss ? ": its probation samples are the new baseline" : " (no samples kept: the baseline "
                "stays the last measured one)");
    history_record(&d, "promoted", HISTORY_RC_NONE, why, k);
    free(ss);
    ret = EXIT_OK;
out:
    deploy_done(&d, lock);
    return ret;
}
