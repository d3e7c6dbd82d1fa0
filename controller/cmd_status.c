/* controller/cmd_status.c: `drover status [-o json|wide] [--job J] [--watch N]`: one snapshot of
 * every job, container and rank from the agents (status --json through pct exec).  Unreachable
 * hosts and agents are shown as such; it never waits longer than the connect and exec timeouts.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/status.h"
#include "common/text.h"
#include "common/trainexit.h"
#include "common/util.h"
#include "controller/cli.h"
#include "controller/cmd.h"
#include "controller/verbs.h"
#include "controller/transport/fanout.h"
#include "controller/deploy/holder.h"
#include "controller/deploy/probation.h"
#include "controller/deploy/state.h"

void cmd_job_target(const struct inventory *inv, const char *job, char ret_id[RELEASE_ID_LEN + 1])
{
    struct history_entry *h;
    size_t n;
    ret_id[0] = '\0';
    if (state_history_read(inv->state_dir, job, &h, &n, NULL) < 0)
        return;
    for (size_t i = 0; i < n; i++) {
        /* a rollback's record names the release it went to as release, as a promote's does
         * (an older drover's record of one is turned round as it is read: histrec.h) */
        if (strcmp(h[i].result, "promoted") == 0 || strcmp(h[i].result, "rollback") == 0)
            (void)str_copy(ret_id, RELEASE_ID_LEN + 1, h[i].release);
        else if (strcmp(h[i].result, "reverted") == 0 && h[i].previous[0])
            (void)str_copy(ret_id, RELEASE_ID_LEN + 1, h[i].previous);
    }
    free(h);
}

void status_probation_add(struct status_probation *p, const struct job_status *js, const char *self)
{
    if (!js)
        return;
    struct status_probation one = { .left_s = 0 };
    /* a lease that runs (or that this machine cannot judge): a drover may be watching */
    one.watched = js->lease_holder[0] && holder_fate_here(js->lease_holder, self) != HOLDER_GONE;
    if (js->current[0] && js->probation_left_s > 0 &&
        status_on_probation(js->current, js->good, status_runs_unpromoted_spec(js))) {
        (void)str_copy(one.release, sizeof one.release, js->current);
        one.left_s = js->probation_left_s;
        one.ncts = 1;
    }
    status_probation_merge(p, &one);
}

void status_probation_merge(struct status_probation *p, const struct status_probation *one)
{
    p->watched = p->watched || one->watched;
    if (!one->release[0])
        return;
    if (!p->release[0])
        (void)str_copy(p->release, sizeof p->release, one->release);
    else if (strcmp(p->release, one->release) != 0)
        return; /* another release elsewhere: the first one's note */
    p->ncts += one->ncts;
    if (!(p->left_s > 0) || one->left_s < p->left_s)
        p->left_s = one->left_s;
}

const char *status_probation_line(const struct status_probation *p, const char *job, bool held, const char *name,
                                  const char *inv_arg, double now, char *buf, size_t sz)
{
    buf[0] = '\0';
    if (!p->release[0] || p->watched || !(p->left_s > 0))
        return buf;
    const char *ia = inv_arg ? " -i " : "", *iv = inv_arg ? inv_arg : "";
    char sid[RELEASE_SHORT_LEN + 1], named[MANIFEST_NAME_MAX + 4] = "", at[40] = "";
    if (name && name[0])
        snprintf(named, sizeof named, " (%s)", name);
    time_t t = (time_t)(now + p->left_s);
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(at, sizeof at, ", about %H:%M UTC", &tm);
    if (held)
        snprintf(buf, sz, "job '%s': %s%s is held on probation (on_inconclusive = hold), waiting for "
                          "`drover%s%s promote --job %s` or `drover%s%s revert --job %s`; its agents revert it on "
                          "their own in %.0f s%s", job, ui_short(p->release, sid), named, ia, iv, job, ia, iv, job,
                 p->left_s, at);
    else
        snprintf(buf, sz, "job '%s': %s%s is on probation with no drover watching it (the deploy that started "
                          "it is gone: its drover killed or cut off); its agents revert it on their own in %.0f s%s: "
                          "`drover%s%s rollback --job %s` reverts it now, a deploy replaces it",
                 job, ui_short(p->release, sid), named, p->left_s, at, ia, iv, job);
    return buf;
}

bool status_release_held(const char *state_dir, const char *job, const char *id)
{
    struct history_entry *h;
    size_t n;
    if (!state_dir || state_history_read(state_dir, job, &h, &n, NULL) < 0)
        return false;
    bool held = n > 0 && !strcmp(h[n - 1].release, id) && !strcmp(h[n - 1].result, "held");
    free(h);
    return held;
}

static json_t *json_str_or_null(const char *s)
{
    return s && *s ? json_string(s) : json_null();
}

const char *status_loss_text(const struct rank_status *rs, char *buf, size_t sz)
{
    if (rs->has_hb && rs->hb.loss_finite && isfinite(rs->hb.loss))
        snprintf(buf, sz, "%.4f", rs->hb.loss);
    else if (rs->has_hb && rs->hb.nonfinite > 0) /* the agent counts these (supervise.c) */
        snprintf(buf, sz, "NaN");
    else /* no loss yet (a rank that just started): not the non-finite-loss failure */
        snprintf(buf, sz, "-");
    return buf;
}

/* The heartbeat with its wire names (docs/protocol.md), so scripts read one vocabulary. */
const char *status_failed_hint(const char *ct, const char *job, const struct job_status *js,
                               const char *inv_arg, char *buf, size_t sz)
{
    if (!js || js->state != GANG_FAILED)
        return NULL;
    /* a worker's doing (a crash loop, an exit not retried): its log has the cause */
    char logs[JOB_NAME_MAX + 600] = "";
    if (status_reason_in_workers_log(js->reason_code))
        (void)probation_logs_pointer(job, inv_arg, logs, sizeof logs);
    /* a full disk is the container's, not the release's: another release fills it too */
    bool disk_full = false;
    for (int i = 0; i < js->nranks && i < STATUS_MAX_RANKS; i++)
        disk_full = disk_full || js->ranks[i].exit_code == TX_DISK_FULL;
    if (disk_full)
        snprintf(buf, sz, "%s: job '%s' has failed and is not running: %s%s; its disk is full: free "
                          "space in the container (old checkpoints, logs), then `drover%s%s start --job "
                          "%s` runs it again",
                 ct, job, js->reason[0] ? js->reason : "(no reason given)", logs, inv_arg ? " -i " : "",
                 inv_arg ? inv_arg : "", job);
    else if (!js->good[0])
        /* failed on its first deploy: no good release, so a rollback would only say "nothing to
         * roll back to" (it was recommended here) */
        snprintf(buf, sz, "%s: job '%s' has failed and is not running: %s%s; it has no good release to "
                          "roll back to: deploy a fixed release (`drover%s%s deploy DIR --job %s`)",
                 ct, job, js->reason[0] ? js->reason : "(no reason given)", logs, inv_arg ? " -i " : "",
                 inv_arg ? inv_arg : "", job);
    else
        snprintf(buf, sz, "%s: job '%s' has failed and is not running: %s%s; `drover%s%s rollback --job %s` "
                          "starts the last good release again (or the one before it, when this was it), "
                          "or deploy a fixed release",
                 ct, job, js->reason[0] ? js->reason : "(no reason given)", logs, inv_arg ? " -i " : "",
                 inv_arg ? inv_arg : "", job);
    return buf;
}

const char *status_agent_hint(const char *ct, const char *job, const struct job_status *js,
                              const char *inv_arg, char *buf, size_t sz)
{
    if (!js || !js->reason[0])
        return NULL;
    /* decided on the agent's reason code, as probation decides (a stop of its own, not a
     * requested stop's) */
    if (js->state == GANG_STOPPING && status_reason_stops_gang(js->reason_code))
        snprintf(buf, sz, "%s: job '%s' is being stopped by its agent: %s (a rank that ignores SIGTERM "
                          "is killed after the job's grace); `drover%s%s events --job %s` shows what "
                          "follows, `drover%s%s logs --job %s` the workers' output",
                 ct, job, js->reason, inv_arg ? " -i " : "", inv_arg ? inv_arg : "", job,
                 inv_arg ? " -i " : "", inv_arg ? inv_arg : "", job);
    else if (js->state == GANG_BACKOFF)
        snprintf(buf, sz, "%s: job '%s' lost a rank; its agent restarts the gang after a backoff: %s; "
                          "`drover%s%s logs --job %s` has the workers' output",
                 ct, job, js->reason, inv_arg ? " -i " : "", inv_arg ? inv_arg : "", job);
    else
        return NULL;
    return buf;
}

const char *status_switch_note(const char *ct, const char *job, const struct job_status *js,
                               const char *inv_arg, char *buf, size_t sz)
{
    size_t pl = strlen(STATUS_SWITCH_STOP_PREFIX);
    if (!js || js->state != GANG_STOPPED || strncmp(js->reason, STATUS_SWITCH_STOP_PREFIX, pl) != 0)
        return NULL;
    const char *rest = js->reason + pl;
    rest += strspn(rest, "; ");
    snprintf(buf, sz, "%s: job '%s' is stopped for a switch, not by `drover stop`: its agent %s%s (counted "
                      "from its stop); if no deploy, rollback or revert is running now (a drover that died "
                      "between the switch's phases), let it, or `drover%s%s start --job %s` starts it now",
             ct, job, !strncmp(rest, "starts ", 7) ? "" : "says: ", rest[0] ? rest : "starts it again on its own",
             inv_arg ? " -i " : "", inv_arg ? inv_arg : "", job);
    return buf;
}

const char *status_restart_note(const char *ct, const char *job, const struct job_status *js, char *buf,
                                size_t sz)
{
    if (!js || js->restarts <= 0 || !js->last_restart_reason[0] || js->state == GANG_BACKOFF)
        return NULL;
    snprintf(buf, sz, "%s: job '%s' was restarted by its agent %d %s since it was last activated or started, last after %s", ct, job,
             js->restarts, text_plural(js->restarts, "time", "times"), js->last_restart_reason);
    return buf;
}

const char *status_bad_lines_note(const char *ct, const char *job, const struct job_status *js,
                                  const char *inv_arg, char *buf, size_t sz)
{
    const struct rank_status *first = NULL;
    int n = 0;
    for (int k = 0; js && k < js->nranks && k < STATUS_MAX_RANKS; k++)
        if (js->ranks[k].bad_lines > 0) {
            if (!first)
                first = &js->ranks[k];
            n++;
        }
    if (!first)
        return NULL;
    char more[48] = "";
    if (n > 1)
        snprintf(more, sizeof more, " (%d of its ranks did)", n);
    snprintf(buf, sz, "%s: job '%s' rank %d wrote %lld %s%s; `drover%s%s logs --job %s --agent` says why "
                      "(docs/protocol.md, \"Heartbeat\")", ct, job, first->rank, (long long)first->bad_lines,
             text_plural(first->bad_lines, "line that is not a heartbeat", "lines that are not heartbeats"), more,
             inv_arg ? " -i " : "", inv_arg ? inv_arg : "", job);
    return buf;
}

bool status_runs_unpromoted_spec(const struct job_status *js)
{
    return js && js->current[0] && !strcmp(js->current, js->good) && js->spec_digest[0] &&
           js->good_spec_digest[0] && strcmp(js->spec_digest, js->good_spec_digest) != 0;
}

bool status_on_probation(const char *current, const char *good, bool spec_unpromoted)
{
    return !good[0] || strcmp(current, good) != 0 || spec_unpromoted;
}

const char *status_rank_word(enum gang_state gang, const char *agent_state, bool on_probation)
{
    if (gang == GANG_STOPPING)
        return gang_state_name(gang);
    return on_probation && !strcmp(agent_state, "running") ? STATUS_WORD_PROBATION : agent_state;
}

bool status_rank_in_rendezvous(const struct rank_status *rs)
{
    return rs && rs->has_hb && rs->hb.hello;
}

const char *status_rank_agent_word(const struct rank_status *rs)
{
    /* only "starting": silent, exited, killed ... are the agent's verdict and stay its word */
    return status_rank_in_rendezvous(rs) && !strcmp(rs->state, "starting") ? STATUS_WORD_RENDEZVOUS : rs->state;
}

const char *status_spec_hint(const char *ct, int nmore, const char *job, const char *release,
                             const char *inv_arg, char *buf, size_t sz)
{
    char more[32] = "", sid[RELEASE_SHORT_LEN + 1];
    if (nmore > 0)
        snprintf(more, sizeof more, " (and %d more)", nmore);
    snprintf(buf, sz, "%s%s: job '%s' runs its good release %s with a job spec that was not promoted "
                      "(a spec change on probation, or left there by a deploy that did not finish): "
                      "the agents return to the good spec at its probation deadline; `drover%s%s "
                      "rollback --job %s` does it now, `drover deploy` runs its probation again",
             ct, more, job, ui_short(release, sid), inv_arg ? " -i " : "", inv_arg ? inv_arg : "", job);
    return buf;
}

const char *status_nojob_hint(const char *cts, const char *job, const char *inv_arg, char *buf, size_t sz)
{
    snprintf(buf, sz, "no job '%s' in %.511s: deploy one with `drover%s%s deploy DIR --job %s` (DIR: the "
                      "release directory)", job, cts, inv_arg ? " -i " : "", inv_arg ? inv_arg : "", job);
    return buf;
}

const char *status_marked_bad(const struct job_status *js, const char **ret_reason)
{
    const char *rel[2] = { js ? js->good : "", js ? js->current : "" };
    for (int r = 0; r < 2; r++)
        for (int k = 0; rel[r][0] && k < js->nbad && k < STATUS_MAX_MARKS; k++)
            if (!strcmp(js->bad[k], rel[r])) {
                *ret_reason = js->bad_reason[k];
                return js->bad[k];
            }
    return NULL;
}

/* Append ", label" (or label first) to who[sz] when it fits; a list that no longer fits ends
 * in ", ..." once. */
static void who_add(char *who, size_t sz, const char *label)
{
    size_t n = strlen(who);
    if (n >= 5 && !strcmp(who + n - 5, ", ..."))
        return;
    if ((size_t)snprintf(who + n, sz - n, "%s%s", n ? ", " : "", label) >= sz - n) {
        who[n] = '\0';
        if (n + 6 <= sz)
            memcpy(who + n, ", ...", 6);
    }
}

/* Are a and b the same words but for the numbers after "rank "?  Each container's agent names its
 * own ranks ("rank 0 reported 3 consecutive non-finite steps", "rank 1 ..."): one reason, said
 * once, not once per container. */
static bool same_but_ranks(const char *a, const char *b)
{
    while (*a && *b) {
        if (!strncmp(a, "rank ", 5) && !strncmp(b, "rank ", 5) && isdigit((unsigned char)a[5]) &&
            isdigit((unsigned char)b[5])) {
            for (a += 5; isdigit((unsigned char)*a); a++)
                ;
            for (b += 5; isdigit((unsigned char)*b); b++)
                ;
            continue;
        }
        if (*a++ != *b++)
            return false;
    }
    return *a == *b;
}

void status_bad_marks_add(struct status_bad_marks *m, const char *ct, const char *release, bool good,
                          const char *reason)
{
    m->ncts++;
    if (!release || !release[0])
        return;
    if (!reason)
        reason = "";
    int k = 0;
    while (k < m->nmarks && strcmp(m->marks[k].release, release) != 0)
        k++;
    if (k == m->nmarks && m->nmarks == STATUS_BAD_MARKS_SHOWN) {
        /* said as a count: each release once */
        m->nmore_cts++;
        for (int i = 0; i < m->nmore; i++)
            if (!strcmp(m->more[i], release))
                return;
        if (m->nmore < (int)ARRAY_SIZE(m->more))
            (void)str_copy(m->more[m->nmore++], sizeof m->more[0], release);
        return;
    }
    struct status_bad_mark *b = &m->marks[k];
    if (k == m->nmarks) {
        memset(b, 0, sizeof *b);
        (void)str_copy(b->release, sizeof b->release, release);
        b->good = good;
        m->nmarks++;
    }
    b->n++;
    who_add(b->who, sizeof b->who, ct);
    int r = 0;
    while (r < b->nreasons && !same_but_ranks(b->reasons[r].reason, reason))
        r++;
    if (r == b->nreasons && b->nreasons == STATUS_BAD_MARK_REASONS) {
        b->nreasons_more++;
        return;
    }
    if (r == b->nreasons) {
        /* cut as the agent's state keeps it: the same words compare equal */
        (void)str_copy(b->reasons[r].reason, sizeof b->reasons[r].reason, reason);
        b->reasons[r].who[0] = '\0';
        b->reasons[r].ranks_differ = false;
        b->nreasons++;
    } else if (strncmp(b->reasons[r].reason, reason, sizeof b->reasons[r].reason - 1) != 0) {
        b->reasons[r].ranks_differ = true;
    }
    who_add(b->reasons[r].who, sizeof b->reasons[r].who, ct);
}

int status_bad_marks_nlines(const struct status_bad_marks *m)
{
    return m->nmarks + (m->nmore > 0);
}

const char *status_bad_marks_line(const struct status_bad_marks *m, int k, const char *job, const char *inv_arg,
                                  char *buf, size_t sz)
{
    const char *ia = inv_arg ? " -i " : "", *iv = inv_arg ? inv_arg : "";
    buf[0] = '\0';
    if (k == m->nmarks && m->nmore > 0) {
        /* releases the lines above leave out are counted, not dropped in silence */
        snprintf(buf, sz, "job '%s': %d more %s marked bad by the agents of %d %s, not said here: "
                          "`drover%s%s status -o json` lists each container's \"bad\" and \"bad_reasons\"",
                 job, m->nmore, text_plural(m->nmore, "release is", "releases are"), m->nmore_cts,
                 text_plural(m->nmore_cts, "container", "containers"), ia, iv);
        return buf;
    }
    if (k < 0 || k >= m->nmarks)
        return buf;
    const struct status_bad_mark *b = &m->marks[k];
    char sid[RELEASE_SHORT_LEN + 1], part[64] = "", why[STATUS_BAD_MARK_REASONS * (STATUS_BAD_REASON_MAX + 220) + 96];
    if (b->n < m->ncts) /* the other containers do not mark it: they disagree */
        snprintf(part, sizeof part, ", in %d of its %d containers", b->n, m->ncts);
    size_t off = 0;
    if (b->nreasons == 1 && !b->nreasons_more) {
        if (b->reasons[0].reason[0] && b->reasons[0].ranks_differ) {
            /* the first container's words, which name its ranks; the others' name theirs */
            const char *who = b->reasons[0].who, *comma = strstr(who, ", ");
            int first = comma ? (int)(comma - who) : (int)strlen(who);
            snprintf(why, sizeof why, " (%.*s: %s; %s: the same, of their own ranks)", first, who,
                     b->reasons[0].reason, comma ? comma + 2 : "the others");
        } else if (b->reasons[0].reason[0])
            snprintf(why, sizeof why, " (%s)", b->reasons[0].reason);
        else /* an older agent: the mark without its reason */
            snprintf(why, sizeof why, " (`drover history --job %s` says why)", job);
    } else {
        /* the containers give different reasons: each one's, not the first's alone */
        off += (size_t)snprintf(why, sizeof why, " (");
        for (int r = 0; r < b->nreasons && off < sizeof why; r++)
            off += (size_t)snprintf(why + off, sizeof why - off, "%s%s: %s", r ? "; " : "", b->reasons[r].who,
                                    b->reasons[r].reason[0] ? b->reasons[r].reason : "no reason given (an older agent)");
        if (b->nreasons_more && off < sizeof why)
            off += (size_t)snprintf(why + off, sizeof why - off, "; %d more %s", b->nreasons_more,
                                    text_plural(b->nreasons_more, "container with another reason",
                                                "containers with other reasons"));
        if (off < sizeof why)
            snprintf(why + off, sizeof why - off, ")");
    }
    snprintf(buf, sz, "job '%s': its %s release %s is marked bad by the %s of %.640s%s%s: a plain "
                      "rollback never goes to it; `drover%s%s rollback --job %s` goes to an earlier good "
                      "release, `drover%s%s deploy DIR --job %s` deploys a fixed one",
             job, b->good ? "good" : "current", ui_short(b->release, sid), b->n == 1 ? "agent" : "agents", b->who,
             part, why, ia, iv, job, ia, iv, job);
    return buf;
}

static json_t *rank_json(const struct rank_status *rs)
{
    json_t *o = json_pack("{s:i,s:i,s:s,s:I,s:f,s:i,s:i}", "rank", rs->rank, "local_rank",
                          rs->local_rank, "state", rs->state, "pid", (json_int_t)rs->pid, "hb_age_s",
                          rs->hb_age_s, "exit_code", rs->exit_code, "exit_signal", rs->exit_signal);
    if (!o)
        return NULL;
    /* checkpointing / silent / stalled (agent/liveness.h): for how long, on the agent's clock */
    json_object_set_new(o, "state_age_s", json_real(rs->state_age_s));
    /* lines on its heartbeat pipe that were not heartbeats (`drover logs --agent` says why) */
    json_object_set_new(o, "bad_lines", json_integer((json_int_t)rs->bad_lines));
    /* Flat convenience fields (what the table shows) next to the full heartbeat. */
    if (rs->has_hb) {
        const struct heartbeat *hb = &rs->hb;
        json_object_set_new(o, "release", json_str_or_null(hb->release));
        /* a hello alone reads as phase init: "rendezvous" tells it from a rank past hb.init() */
        json_object_set_new(o, "phase", json_string(status_rank_in_rendezvous(rs) ? STATUS_WORD_RENDEZVOUS
                                                                                   : hb_phase_name(hb->phase)));
        json_object_set_new(o, "step", json_integer(hb->step));
        json_object_set_new(o, "loss", hb->loss_finite && isfinite(hb->loss) ? json_real(hb->loss)
                                                                              : json_null());
        double k = rank_status_ktok(rs);
        json_object_set_new(o, "ktok_s", isfinite(k) ? json_real(k) : json_null()); /* null: no data */
        json_object_set_new(o, "hb", heartbeat_to_json(hb)); /* wire names: common/heartbeat.c */
    } else {
        json_object_set_new(o, "release", json_null());
        json_object_set_new(o, "phase", json_null());
        json_object_set_new(o, "step", json_null());
        json_object_set_new(o, "loss", json_null());
        json_object_set_new(o, "ktok_s", json_null());
        json_object_set_new(o, "hb", json_null());
    }
    json_object_set_new(o, "gpu", rs->gpu.valid
                                      ? json_pack("{s:f,s:I,s:I,s:f}", "util", rs->gpu.util,
                                                  "mem_used", (json_int_t)rs->gpu.mem_used,
                                                  "mem_total", (json_int_t)rs->gpu.mem_total,
                                                  "temp", rs->gpu.temp)
                                      : json_null());
    return o;
}

struct status_opts {
    int json, wide;
    const char *job;
};

static void print_row(const char *job, const char *ct, int node, const struct job_status *js,
                      const struct rank_status *rs, const char *target, int wide)
{
    char sid[RELEASE_SHORT_LEN + 1], age[16], step[24] = "-", loss[24] = "-", ktok[24] = "-",
         rank[8] = "-", rel[RELEASE_SHORT_LEN + 2];
    const char *release = js->release[0] ? js->release : js->current;
    const char *state = gang_state_name(js->state);
    char state_buf[32];
    if (rs) {
        snprintf(rank, sizeof rank, "%d", rs->rank);
        /* drover top's word for the same rank: "probation" for a candidate's running ranks */
        state = status_rank_word(js->state, status_rank_agent_word(rs),
                                 status_on_probation(js->current, js->good, status_runs_unpromoted_spec(js)));
        if (rs->state_age_s > 0 && !strcmp(state, rs->state)) { /* "checkpointing:42s" (one word for scripts; drover top shows the same) */
            snprintf(state_buf, sizeof state_buf, "%s:%.0fs", state, rs->state_age_s);
            state = state_buf;
        }
        if (rs->has_hb) {
            if (rs->hb.release[0])
                release = rs->hb.release;
            snprintf(step, sizeof step, "%lld", (long long)rs->hb.step);
            (void)status_loss_text(rs, loss, sizeof loss);
            if (isfinite(rank_status_ktok(rs)))
                snprintf(ktok, sizeof ktok, "%.1f", rank_status_ktok(rs));
        }
    }
    bool off = target[0] && release[0] && strncmp(release, target, strlen(release)) != 0;
    snprintf(rel, sizeof rel, "%s%s", ui_short(release, sid), off ? "*" : "");
    /* a worker writes its heartbeat's release, an agent its states and reasons: escaped */
    char state_e[64], reason_e[4 * sizeof js->reason];
    (void)text_escape_inplace(rel, sizeof rel);
    state = text_escape(state, strlen(state), state_e, sizeof state_e);
    bool bad = js->state == GANG_FAILED || js->state == GANG_REVERTED || js->state == GANG_BACKOFF ||
               (rs && (!strcmp(rs->state, "silent") || !strcmp(rs->state, "stalled")));
    printf("%-12s %-22s %4d %4s %-13s %s%-18s%s %8s %8s %8s %5s %4d", job, ct, node, rank, rel,
           bad ? ui_red(stdout) : "", state, bad ? ui_reset(stdout) : "", step, loss, ktok,
           rs ? ui_age(rs->hb_age_s, age, sizeof age) : "-", js->restarts);
    if (wide)
        printf("  %s (good %.12s) %s", gang_state_name(js->state), js->good[0] ? js->good : "-",
               text_escape(js->reason, strlen(js->reason), reason_e, sizeof reason_e));
    printf("\n");
}

/* One container's answer, fetched before printing: hosts are asked at once (transport/fanout.h),
 * each host's containers one after another on its own session.  A container that runs several
 * jobs is asked once; each of its jobs reads the same answer. */
struct fetched {
    const struct inv_ct *ct;
    int r;
    double t0, t1;
    char err[1500];
    struct agent_status *st;
    bool told;             /* its error or clock skew was said on stderr (once per container) */
};

struct prefetch {
    struct fleet *f;
    struct fetched *items;
    int nitems;
    int hosts[INV_MAX_HOSTS];
};

static void fetch_host(int k, void *ctx)
{
    struct prefetch *p = ctx;
    for (int i = 0; i < p->nitems; i++) {
        struct fetched *it = &p->items[i];
        if (it->ct->host != p->hosts[k])
            continue;
        it->t0 = time_wall();
        it->r = it->st ? fleet_agent_status(p->f, it->ct, it->st, it->err, sizeof it->err) : -ENOMEM;
        it->t1 = time_wall();
    }
}

static void prefetch_free(struct prefetch *p)
{
    for (int i = 0; i < p->nitems; i++)
        free(p->items[i].st);
    free(p->items);
}

/* The answer of container ct (the same container whatever job names it); NULL if not asked. */
static struct fetched *prefetch_find(struct prefetch *p, const struct inv_ct *ct)
{
    for (int i = 0; i < p->nitems; i++)
        if (inventory_same_ct(p->items[i].ct, ct))
            return &p->items[i];
    return NULL;
}

static int prefetch_all(struct fleet *f, const struct status_opts *o, struct prefetch *p)
{
    const struct inventory *inv = f->inv;
    *p = (struct prefetch){ .f = f };
    int n = 0;
    for (int ji = 0; ji < inv->njobs; ji++)
        n += inv->jobs[ji].ncts;
    p->items = calloc((size_t)(n ? n : 1), sizeof *p->items);
    if (!p->items)
        return -ENOMEM;
    bool need[INV_MAX_HOSTS] = { false };
    for (int ji = 0; ji < inv->njobs; ji++) {
        const struct inv_job *j = &inv->jobs[ji];
        if (o->job && strcmp(o->job, j->name) != 0)
            continue;
        for (int i = 0; i < j->ncts; i++) {
            if (prefetch_find(p, &j->cts[i]))
                continue;
            struct fetched *it = &p->items[p->nitems++];
            it->ct = &j->cts[i];
            it->st = malloc(sizeof *it->st);
            need[it->ct->host] = true;
        }
    }
    (void)fleet_connect_all(f, need);
    int nh = 0;
    for (int h = 0; h < inv->nhosts; h++)
        if (need[h])
            p->hosts[nh++] = h;
    fanout_run(nh, inv->parallel, fetch_host, p);
    return 0;
}

/* What status says on stderr of its containers and jobs (why one did not answer, its clock
 * skew, the agent's hints and notes, the spec and no-job hints), kept in order and said under
 * the table once it is printed, as docs/controller.md says: said as they came, they fell
 * between the table's rows on a terminal (`job 'train' was restarted by its agent` under its
 * container's row, the next container's rows after it).  Bounded: past STATUS_NOTES_MAX lines,
 * how many more is said instead. */
#define STATUS_NOTES_MAX 4096
#define STATUS_NOTE_RAW 0 /* a line of its own, no logger prefix (the clock skew's: scripts grep
                             "^h1:101: clock skew") */

struct status_notes {
    int n, cap, dropped;
    struct {
        int level; /* enum log_level, or STATUS_NOTE_RAW */
        char *text;
    } *v;
};

static void status_notes_add(struct status_notes *ns, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void status_notes_add(struct status_notes *ns, int level, const char *fmt, ...)
{
    if (ns->n == ns->cap) {
        int cap = ns->cap ? ns->cap * 2 : 16;
        void *v = cap <= STATUS_NOTES_MAX ? realloc(ns->v, (size_t)cap * sizeof *ns->v) : NULL;
        if (!v) {
            ns->dropped++;
            return;
        }
        ns->v = v;
        ns->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    int r = vasprintf(&text, fmt, ap);
    va_end(ap);
    if (r < 0) {
        ns->dropped++;
        return;
    }
    ns->v[ns->n].level = level;
    ns->v[ns->n++].text = text;
}

/* Say the notes, under what stdout printed so far (also in a pipe: stdout is flushed first),
 * and forget them. */
static void status_notes_say(struct status_notes *ns)
{
    fflush(stdout);
    for (int i = 0; i < ns->n; i++) {
        if (ns->v[i].level == STATUS_NOTE_RAW)
            fprintf(stderr, "%s\n", ns->v[i].text);
        else
            log_emit((enum log_level)ns->v[i].level, __FILE__, __LINE__, "%s", ns->v[i].text);
        free(ns->v[i].text);
    }
    if (ns->dropped)
        log_warn("%d more notes about the containers not shown", ns->dropped);
    free(ns->v);
    *ns = (struct status_notes){ 0 };
}

/* Why container it did not answer, on stderr, once however many jobs it runs (docs/errors.md:
 * stderr names each missing container; the table said only "agent-unreachable").  A host's
 * connect error was said when it failed. */
static void status_tell_unreachable(const struct fleet *f, struct fetched *it, const char *job,
                                    struct status_notes *ns)
{
    if (it->told || f->conn_err[it->ct->host])
        return;
    it->told = true;
    if (it->r == -EIO) /* the agent did not answer */
        status_notes_add(ns, LOG_LVL_ERR,
                         "%s: %s (is the agent running? drover install --job %s starts it where it is not)",
                         it->ct->label, it->err, job);
    else
        status_notes_add(ns, LOG_LVL_ERR, "%s: %s", it->ct->label, it->err);
}

/* Clock skew: the agent's wall clock when it wrote the document st against the middle of our
 * round trip (uncertain by half of it), into co; said on stderr once per container unless quiet.
 * No deadline uses the wall clock; the journal's timestamps and people reading them do. */
static void status_clock_skew(struct fetched *it, const struct agent_status *st, json_t *co, bool quiet,
                              struct status_notes *ns)
{
    if (st->wall <= 0)
        return;
    double skew = st->wall - (it->t0 + it->t1) / 2, rtt = it->t1 - it->t0;
    json_object_set_new(co, "clock_skew_s", json_real(skew));
    if (fabs(skew) <= 2 + rtt / 2 || quiet || it->told)
        return;
    it->told = true;
    status_notes_add(ns, STATUS_NOTE_RAW,
                     "%s: clock skew %+.1f s (the agent's clock is %s this machine's, measured within "
                     "%.1f s); no deadline depends on it, the timestamps in its journal do",
                     it->ct->label, skew, skew > 0 ? "ahead of" : "behind", rtt / 2);
}

/* "deploy_in_progress" of job: the drover (this machine's, this state_dir's) that holds its
 * per-job lock, deploying, rolling back, stopping or starting it, or null.  Another operator's
 * drover elsewhere holds the job's deploy lease instead: not seen here. */
static json_t *deploy_in_progress_json(const char *state_dir, const char *job)
{
    struct state_lock_use u;
    int r = state_lock_in_use(state_dir, job, &u);
    if (r < 0)
        log_debug("cannot tell whether job '%s' is being deployed: /proc/locks: %s", job, strerror(-r));
    if (r <= 0)
        return json_null();
    char since[32] = "";
    time_t t = (time_t)u.since;
    struct tm tm;
    if (u.since > 0 && gmtime_r(&t, &tm))
        strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *o = json_object();
    json_object_set_new(o, "holder_pid", u.holder_pid > 0 ? json_integer(u.holder_pid) : json_null());
    json_object_set_new(o, "since", since[0] ? json_string(since) : json_null());
    json_object_set_new(o, "lock", json_string(u.lock));
    return o;
}

static int status_once(struct fleet *f, const struct status_opts *o)
{
    const struct inventory *inv = f->inv;
    struct agent_status *st = malloc(sizeof *st);
    json_t *root = json_pack("{s:i,s:f,s:[]}", "v", 1, "time", time_wall(), "jobs");
    if (!st || !root) {
        free(st);
        json_decref(root);
        return EXIT_FAIL;
    }
    struct prefetch pf;
    if (prefetch_all(f, o, &pf) < 0) {
        free(st);
        json_decref(root);
        return EXIT_FAIL;
    }
    int unreachable = 0;
    struct status_notes notes = { 0 }; /* said under the table */
    char self[HOLDER_MAX]; /* this process as a lease holder: judges the holders the agents name */
    holder_self(self, sizeof self);
    /* per job, the containers whose agent does not know it: said once after the table */
    struct {
        char who[512];
        size_t off;
    } nojob[INV_MAX_JOBS] = { 0 };
    if (!o->json)
        printf("%-12s %-22s %4s %4s %-13s %-18s %8s %8s %8s %5s %4s%s\n", "JOB", "CONTAINER", "NODE",
               "RANK", "RELEASE", "STATE", "STEP", "LOSS", "KTOK/S", "HB", "RST",
               o->wide ? "  GANG (GOOD) REASON" : "");
    for (int ji = 0; ji < inv->njobs; ji++) {
        const struct inv_job *j = &inv->jobs[ji];
        if (o->job && strcmp(o->job, j->name) != 0)
            continue;
        char target[RELEASE_ID_LEN + 1];
        cmd_job_target(inv, j->name, target);
        json_t *jo = json_pack("{s:s,s:o,s:[]}", "job", j->name, "target", json_str_or_null(target),
                               "containers");
        double total = 0;
        int spec_ct = 0; /* containers that run the good release with an unpromoted job spec */
        const char *spec_label = NULL;
        char spec_release[RELEASE_ID_LEN + 1] = "";
        int nktok = 0; /* ranks that reported a throughput */
        /* the releases its containers mark bad among those they run or go back to (the good
         * release, or the current one): said once per release under the table */
        struct status_probation prob = { .left_s = 0 };
        static struct status_bad_marks marks_of_job; /* ~11 KB: not on the stack */
        struct status_bad_marks *marks = &marks_of_job;
        memset(marks, 0, sizeof *marks);
        for (int i = 0; i < j->ncts; i++) {
            const struct inv_ct *ct = &j->cts[i];
            struct fetched *it = prefetch_find(&pf, ct);
            assert(it); /* prefetch_all asked every container of the jobs shown */
            char *err = it->err;
            json_t *co = json_pack("{s:s,s:s,s:i}", "container", ct->label, "host",
                                   inv->hosts[ct->host].name, "node_rank", i);
            json_object_set_new(co, "vmid", ct->vmid >= 0 ? json_integer(ct->vmid) : json_null());
            json_object_set_new(co, "root", json_str_or_null(ct->root));
            int r = it->r;
            if (r == 0)
                memcpy(st, it->st, sizeof *st);
            const struct job_status *js = r == 0 ? status_find_job(st, j->name) : NULL;
            if (r < 0) {
                unreachable++;
                const char *why = f->conn_err[ct->host] ? "unreachable"
                                  : r == -EHOSTDOWN     ? "ct-stopped"
                                  : r == -ENODEV        ? "ct-missing"
                                                        : "agent-unreachable";
                json_object_set_new(co, "reachable", json_false());
                json_object_set_new(co, "state", json_string(why));
                json_object_set_new(co, "error", json_string(err));
                if (!o->json) {
                    printf("%-12s %-22s %4d %4s %s%s%s\n", j->name, ct->label, i, "-",
                           ui_red(stdout), why, ui_reset(stdout));
                    status_tell_unreachable(f, it, j->name, &notes);
                }
                json_array_append_new(json_object_get(jo, "containers"), co);
                continue;
            }
            json_object_set_new(co, "reachable", json_true());
            json_object_set_new(co, "error", json_null());
            json_object_set_new(co, "agent_version", json_string(st->agent_version));
            status_clock_skew(it, st, co, o->json, &notes);
            if (!js) {
                json_object_set_new(co, "state", json_string(status_job_state_name(js)));
                json_object_set_new(co, "ranks", json_array());
                if (!o->json)
                    printf("%-12s %-22s %4d %4s %-13s %-18s\n", j->name, ct->label, i, "-", "-",
                           status_job_state_name(js));
                if (nojob[ji].off < sizeof nojob[ji].who)
                    nojob[ji].off += (size_t)snprintf(nojob[ji].who + nojob[ji].off,
                                                      sizeof nojob[ji].who - nojob[ji].off, "%s%s",
                                                      nojob[ji].off ? ", " : "", ct->label);
                json_array_append_new(json_object_get(jo, "containers"), co);
                continue;
            }
            json_object_set_new(co, "state", json_string(status_job_state_name(js)));
            /* what the table's `probation` comes from, from the agent's releases alone (no drover
             * need watch): the ranks' "state" keeps the agent's word, which scripts read, and
             * nothing else in the document said what the table said */
            json_object_set_new(co, "on_probation",
                                json_boolean(js->current[0] &&
                                             status_on_probation(js->current, js->good,
                                                                 status_runs_unpromoted_spec(js))));
            json_object_set_new(co, "current", json_str_or_null(js->current));
            json_object_set_new(co, "good", json_str_or_null(js->good));
            json_object_set_new(co, "previous", json_str_or_null(js->previous));
            /* the job spec digests (common/specdigest.h): null from an agent that has none */
            json_object_set_new(co, "spec_digest", json_str_or_null(js->spec_digest));
            json_object_set_new(co, "good_spec_digest", json_str_or_null(js->good_spec_digest));
            json_object_set_new(co, "release", json_str_or_null(js->release));
            json_object_set_new(co, "restarts", json_integer(js->restarts));
            json_object_set_new(co, "generation", json_integer(js->generation));
            json_object_set_new(co, "age_s", json_real(js->age_s));
            json_object_set_new(co, "reason", json_string(js->reason));
            /* what scripts decide on (common/status.h): the reason's words are for people */
            json_object_set_new(co, "reason_code", json_string(status_reason_name(js->reason_code)));
            /* why the agent last restarted the current release; "" none (or an older agent) */
            json_object_set_new(co, "last_restart_reason", json_string(js->last_restart_reason));
            /* backing off only because of a rank in another container: no cause here */
            json_object_set_new(co, "peer_exit", json_boolean(js->peer_exit));
            json_t *bad = json_array(), *goods = json_array();
            for (int k = 0; k < js->nbad; k++)
                json_array_append_new(bad, json_string(js->bad[k]));
            for (int k = 0; k < js->ngoods; k++)
                json_array_append_new(goods, json_string(js->goods[k]));
            json_object_set_new(co, "bad", bad);     /* failed probation here: never a rollback target */
            json_t *bad_reasons = json_array();      /* why each was marked; "" unknown (older agent) */
            for (int k = 0; k < js->nbad; k++)
                json_array_append_new(bad_reasons, json_string(js->bad_reason[k]));
            json_object_set_new(co, "bad_reasons", bad_reasons);
            /* when the agent reverts it on its own: null when none is armed (or an older agent) */
            json_object_set_new(co, "probation_left_s",
                                js->probation_left_s > 0 ? json_real(js->probation_left_s) : json_null());
            status_probation_add(&prob, js, self);
            const char *mreason = NULL, *mrel = status_marked_bad(js, &mreason);
            status_bad_marks_add(marks, ct->label, mrel, mrel && !strcmp(mrel, js->good), mreason);
            json_object_set_new(co, "goods", goods); /* promoted here, newest first */
            json_t *ranks = json_array();
            for (int k = 0; k < js->nranks; k++) {
                json_array_append_new(ranks, rank_json(&js->ranks[k]));
                double kt = rank_status_ktok(&js->ranks[k]);
                if (isfinite(kt)) {
                    total += kt;
                    nktok++;
                }
                if (!o->json)
                    print_row(j->name, ct->label, i, js, &js->ranks[k], target, o->wide);
            }
            if (!js->nranks && !o->json)
                print_row(j->name, ct->label, i, js, NULL, target, o->wide);
            char hint[1200];
            if (!o->json && status_failed_hint(ct->label, j->name, js, f->inv_arg, hint, sizeof hint))
                status_notes_add(&notes, LOG_LVL_WARN, "%s", hint); /* the table alone said "failed", not why; escaped by the logger */
            else if (!o->json && status_agent_hint(ct->label, j->name, js, f->inv_arg, hint, sizeof hint))
                status_notes_add(&notes, LOG_LVL_WARN, "%s", hint); /* the table said "silent:75s" or "backoff", not that the agent acts */
            else if (!o->json && status_restart_note(ct->label, j->name, js, hint, sizeof hint))
                status_notes_add(&notes, LOG_LVL_NOTICE, "%s", hint); /* the table's restarts column said how many, not why */
            if (!o->json && status_switch_note(ct->label, j->name, js, f->inv_arg, hint, sizeof hint))
                status_notes_add(&notes, LOG_LVL_NOTICE, "%s", hint); /* the table said "stopped", as after a stop */
            if (!o->json && status_bad_lines_note(ct->label, j->name, js, f->inv_arg, hint, sizeof hint))
                status_notes_add(&notes, LOG_LVL_WARN, "%s", hint); /* the table said "starting", not that the format is wrong */
            if (status_runs_unpromoted_spec(js) && !spec_ct++) { /* said once, under the table */
                spec_label = ct->label;
                (void)str_copy(spec_release, sizeof spec_release, js->current);
            }
            json_object_set_new(co, "ranks", ranks);
            json_array_append_new(json_object_get(jo, "containers"), co);
        }
        /* the table shows the good release as it should; that its job spec is not the good one
         * (a spec change on probation, or orphaned by a drover killed -9) only this says */
        if (spec_ct && !o->json) {
            char hint[600];
            status_notes_add(&notes, LOG_LVL_WARN, "%s",
                             status_spec_hint(spec_label, spec_ct - 1, j->name, spec_release, f->inv_arg,
                                              hint, sizeof hint));
        }
        /* the table showed a release its agents will not go back to as any other (-o json's
         * "bad" alone said it): a promoted release they stopped for non-finite loss or an exit
         * not retried, or one started anyway */
        for (int m = 0; m < status_bad_marks_nlines(marks) && !o->json; m++) {
            char hint[2400];
            status_notes_add(&notes, LOG_LVL_WARN, "%s", status_bad_marks_line(marks, m, j->name, f->inv_arg,
                                                                              hint, sizeof hint));
        }
        /* the table said `ID* probation` and not that no drover watches it, nor until when */
        if (!o->json && prob.release[0] && !prob.watched) {
            char hint[900], pname[MANIFEST_NAME_MAX];
            if (state_release_name(inv->state_dir, prob.release, pname) < 0)
                pname[0] = '\0';
            if (status_probation_line(&prob, j->name, status_release_held(inv->state_dir, j->name, prob.release), pname,
                                      f->inv_arg, time_wall(), hint, sizeof hint)[0])
                status_notes_add(&notes, LOG_LVL_NOTICE, "%s", hint);
        }
        /* null when no rank said (every host down, ranks just started): 0.0 read as a stall */
        json_object_set_new(jo, "ktok_s", nktok ? json_real(total) : json_null());
        if (o->json)
            json_object_set_new(jo, "deploy_in_progress", deploy_in_progress_json(inv->state_dir, j->name));
        json_array_append_new(json_object_get(root, "jobs"), jo);
    }
    /* the table said `no-job` and not what to do (the newcomer pass); -o json stays the
     * document alone, its "state": "no-job" says it */
    for (int ji = 0; ji < inv->njobs && !o->json; ji++)
        if (nojob[ji].off) {
            char hint[800];
            status_notes_add(&notes, LOG_LVL_NOTICE, "%s",
                             status_nojob_hint(nojob[ji].who, inv->jobs[ji].name, f->inv_arg, hint, sizeof hint));
        }
    status_notes_say(&notes);
    if (o->json) {
        char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (text) {
            printf("%s\n", text);
            free(text);
        }
    }
    fflush(stdout);
    json_decref(root);
    free(st);
    prefetch_free(&pf);
    return unreachable ? EXIT_FAIL : EXIT_OK;
}

int cmd_status(struct fleet *f, int argc, char **argv)
{
    static const struct option opts[] = {
        { "output", required_argument, NULL, 'o' },
        { "job", required_argument, NULL, 'j' },
        { "watch", required_argument, NULL, 'w' },
        { NULL, 0, NULL, 0 },
    };
    struct status_opts o = { 0 };
    double watch = 0;
    char typed[32];
    int c;
    optind = 0; /* 0: glibc re-initialises (main parsed with "+") */
    while ((c = cli_getopt(argc, argv, "o:j:w:", opts)) != -1) {
        switch (c) {
        case 'o': {
            static const char *const takes[] = { "json", "wide", NULL };
            int k;
            if (cli_output(argv, optarg, takes, &k) != EXIT_OK)
                return EXIT_USAGE;
            if (k == 0)
                o.json = 1;
            else
                o.wide = 1;
            break;
        }
        case 'j':
            if (cli_take_once(argv[0], "--job", &o.job, optarg) != EXIT_OK)
                return EXIT_USAGE;
            break;
        case 'w': /* the whole word ('5x' was 5, 'abc' said nothing of what was typed) */
            if (cli_duration(verb_opt_typed(argv, optind, optarg, typed, sizeof typed), optarg, 0,
                             true, 86400, &watch) != EXIT_OK)
                return EXIT_USAGE;
            break;
        default:
            return verb_usage_error(argv[0], NULL);
        }
    }
    if (optind != argc)
        return verb_usage_error(argv[0], argv[optind]);
    cmd_result_want(f, o.json, "status", &o.job, 1);
    if (f->args_only) /* controller/cli.c: arguments checked, no inventory yet */
        return EXIT_OK;
    if (o.job && !inventory_find_job(f->inv, o.job)) {
        char why[512];
        log_error("%s", inventory_no_job(f->inv, o.job, why, sizeof why));
        return EXIT_USAGE;
    }
    if (!f->inv->njobs) { /* an empty table and exit 0 said nothing of why */
        char why[512];
        log_warn("%s", inventory_no_jobs(f->inv, why, sizeof why));
    }
    if (!watch)
        return status_once(f, &o);
    for (;;) {
        if (isatty(STDOUT_FILENO) && !o.json)
            printf("\033[H\033[2J");
        (void)status_once(f, &o);
        for (int h = 0; h < INV_MAX_HOSTS; h++)
            if (f->conn_err[h] != -ENOKEY && f->conn_err[h] != -EKEYREJECTED)
                f->conn_err[h] = 0; /* try unreachable hosts again next round */
        usleep((useconds_t)(watch * 1e6));
    }
}
