/* controller/deploy/pastfail.c: see pastfail.h. */
#include "controller/deploy/pastfail.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "controller/ui.h"

static bool is_failure(const char *result)
{
    return !strcmp(result, "reverted") || !strcmp(result, "revert-failed") || !strcmp(result, "failed");
}

/* e says nothing of how a probation of its release ended. */
static bool is_not_outcome(const struct history_entry *e)
{
    if (!strcmp(e->name, "rollback"))
        return true;
    if (e->reason_code == HISTORY_RC_ENVIRONMENT || e->reason_code == HISTORY_RC_OPERATOR_REVERT ||
        e->reason_code == HISTORY_RC_UNDECIDED || e->reason_code == HISTORY_RC_AGENT_STOPPED_HUNG)
        return true;
    /* a deploy of the good release itself (previous: the good release then): a job spec change,
     * whose failure is the spec's, never the release's (its agents never mark it bad); counted,
     * a failed spec change made the good release no rollback target and its earlier spec
     * unreachable (t-22) */
    if (e->previous[0] && !strcmp(e->previous, e->release))
        return true;
    return strcmp(e->result, "promoted") != 0 && strcmp(e->result, "held") != 0 && !is_failure(e->result);
}

const struct history_entry *pastfail_find(const struct history_entry *h, size_t n, const char *job,
                                          const char *id)
{
    for (size_t i = n; i-- > 0;) {
        const struct history_entry *e = &h[i];
        if (strcmp(e->job, job) != 0 || strcmp(e->release, id) != 0 || is_not_outcome(e))
            continue;
        return is_failure(e->result) && e->reason_code != HISTORY_RC_PROMOTE_FAILED ? e : NULL;
    }
    return NULL;
}

/* "at 2026-12-02 14:03:11 UTC" for e's time into when[32]. */
static const char *when_of(const struct history_entry *e, char when[32])
{
    time_t t = (time_t)e->time;
    struct tm tm;
    snprintf(when, 32, "at an unknown time");
    if (e->time > 0 && gmtime_r(&t, &tm))
        strftime(when, 32, "at %Y-%m-%d %H:%M:%S UTC", &tm);
    return when;
}

/* e is its agent's record of a stop of the promoted release (a failure not retried), not a
 * probation's outcome: said in those words, never "failed probation" */
static bool is_promoted_stop(const struct history_entry *e)
{
    return e && e->reason_code == HISTORY_RC_AGENT_STOPPED;
}

const char *pastfail_message(const struct history_entry *e, const char *name, char *buf, size_t sz)
{
    char sid[RELEASE_SHORT_LEN + 1], when[32];
    when_of(e, when);
    if (is_promoted_stop(e))
        snprintf(buf, sz, "release %s (%s) was stopped by its agent for job '%s' %s while it ran as "
                          "the promoted release: %s; deploying it again runs a full probation",
                 ui_short(e->release, sid), name && *name ? name : e->name, e->job, when,
                 e->reason[0] ? e->reason : "(no reason recorded)");
    else
        snprintf(buf, sz, "release %s (%s) failed probation for job '%s' before: %s %s: %s; deploying "
                          "it again runs a full probation",
                 ui_short(e->release, sid), name && *name ? name : e->name, e->job, e->result, when,
                 e->reason[0] ? e->reason : "(no reason recorded)");
    return buf;
}

/* Why release id runs unpromoted, from its newest record (pastfail_unpromoted_why). */
enum unpromoted {
    UNPROMOTED_HELD,
    UNPROMOTED_ROLLBACK,
    UNPROMOTED_PROMOTE_FAILED,
    UNPROMOTED_FAILED,
    UNPROMOTED_OTHER,
};

static enum unpromoted unpromoted_case(const struct history_entry *h, size_t n, const char *job, const char *id)
{
    for (size_t i = n; i-- > 0;) {
        const struct history_entry *e = &h[i];
        if (strcmp(e->job, job) != 0 || strcmp(e->release, id) != 0)
            continue;
        if (!strcmp(e->name, "promote") && e->reason_code == HISTORY_RC_PROMOTE_FAILED)
            continue; /* an earlier try of this very promote */
        if (!strcmp(e->result, "held"))
            return UNPROMOTED_HELD;
        if (!strcmp(e->name, "rollback") && !strcmp(e->result, "aborted"))
            return UNPROMOTED_ROLLBACK;
        if (!strcmp(e->result, "failed") && e->reason_code == HISTORY_RC_PROMOTE_FAILED)
            return UNPROMOTED_PROMOTE_FAILED;
        if (!strcmp(e->result, "failed") && e->reason_code != HISTORY_RC_ENVIRONMENT)
            return UNPROMOTED_FAILED;
        break;
    }
    return UNPROMOTED_OTHER;
}

const char *pastfail_unpromoted_why(const struct history_entry *h, size_t n, const char *job, const char *id)
{
    switch (unpromoted_case(h, n, job, id)) {
    case UNPROMOTED_HELD: return "held release";
    case UNPROMOTED_ROLLBACK: return "a rollback to it, not confirmed";
    case UNPROMOTED_PROMOTE_FAILED: return "it passed probation, its promote failed";
    case UNPROMOTED_FAILED: return "failed probation, left running (auto_revert off)";
    case UNPROMOTED_OTHER: break;
    }
    return "unpromoted, not held";
}

enum history_reason pastfail_hand_revert_code(const struct history_entry *h, size_t n, const char *job,
                                              const char *id)
{
    /* held: the operator decides a probation that could not; left running: its probation failed */
    enum unpromoted u = unpromoted_case(h, n, job, id);
    return u == UNPROMOTED_HELD || u == UNPROMOTED_FAILED ? HISTORY_RC_NONE : HISTORY_RC_OPERATOR_REVERT;
}

const struct history_entry *pastfail_find_now(const struct history_entry *h, size_t n, const char *job,
                                              const char *id)
{
    const struct history_entry *e = pastfail_find(h, n, job, id);
    /* a confirmed rollback to it since (with --force) made it good again: its agents no longer
     * mark it bad, and that record is no probation's outcome (pastfail_find skips it) */
    for (size_t i = e ? (size_t)(e - h) + 1 : n; i < n; i++)
        if (!strcmp(h[i].job, job) && !strcmp(h[i].release, id) && !strcmp(h[i].result, "rollback"))
            return NULL;
    return e;
}

const struct history_entry *pastfail_find_prefix(const struct history_entry *h, size_t n, const char *job,
                                                 const char *prefix)
{
    size_t pl = strlen(prefix);
    const char *id = NULL;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(h[i].job, job) != 0 || !h[i].release[0] || strncasecmp(h[i].release, prefix, pl) != 0)
            continue;
        if (id && strcmp(id, h[i].release) != 0)
            return NULL; /* several: the survey names them */
        id = h[i].release;
    }
    return id ? pastfail_find_now(h, n, job, id) : NULL;
}

const char *pastfail_release_name(const struct history_entry *h, size_t n, const char *job, const char *id)
{
    for (size_t i = n; i-- > 0;) {
        const struct history_entry *e = &h[i];
        if (strcmp(e->job, job) != 0 || strcmp(e->release, id) != 0 || history_name_is_verb(e->name))
            continue;
        return e->name;
    }
    return "";
}

const char *pastfail_rollback_refusal(const struct history_entry *e, const char *name, const char *job,
                                      const char *id, bool contacted, char *buf, size_t sz)
{
    char sid[RELEASE_SHORT_LEN + 1], named[MANIFEST_NAME_MAX + 4] = "", why[700], when[32];
    ui_short(id, sid);
    if (name && *name)
        snprintf(named, sizeof named, " (%s)", name);
    if (is_promoted_stop(e))
        snprintf(why, sizeof why, "was stopped by its agent for job '%s' %s while it ran as the "
                 "promoted release: %s", job, when_of(e, when), e->reason[0] ? e->reason : "(no reason recorded)");
    else if (e)
        snprintf(why, sizeof why, "failed probation for job '%s': %s %s: %s", job, e->result, when_of(e, when),
                 e->reason[0] ? e->reason : "(no reason recorded)");
    else
        snprintf(why, sizeof why, "is marked bad for job '%s' by its agents (a failed probation, or a stop "
                 "while it ran promoted for a failure not retried: `drover history --job %s` says when "
                 "and why)", job, job);
    snprintf(buf, sz, "rollback of job '%s' refused, %s: release %s%s %s; roll back to it only with "
                      "--force (drover rollback --job %s --to %s --force)",
             job, contacted ? "nothing changed" : "nothing was contacted, nothing changed", sid, named, why,
             job, sid);
    return buf;
}

const char *pastfail_rollback_skip(const struct history_entry *e, const char *name, const char *job,
                                   const char *id, char *buf, size_t sz)
{
    char sid[RELEASE_SHORT_LEN + 1], named[MANIFEST_NAME_MAX + 4] = "", why[700], when[32];
    ui_short(id, sid);
    if (name && *name)
        snprintf(named, sizeof named, " (%s)", name);
    if (is_promoted_stop(e))
        snprintf(why, sizeof why, "its agent stopped it for job '%s' %s while it ran as the promoted "
                 "release (%s: %s)", job, when_of(e, when), e->result,
                 e->reason[0] ? e->reason : "(no reason recorded)");
    else if (e)
        snprintf(why, sizeof why, "it failed probation for job '%s' %s after it was promoted (%s: %s)", job,
                 when_of(e, when), e->result, e->reason[0] ? e->reason : "(no reason recorded)");
    else
        snprintf(why, sizeof why, "it is marked bad for job '%s' by its agents (a failed probation after "
                 "it was promoted, or a stop while it ran promoted for a failure not retried: `drover "
                 "history --job %s` says when and why)", job, job);
    snprintf(buf, sz, "skipping %s%s: %s; it is no rollback target until it is promoted again (drover "
                      "rollback --job %s --to %s --force goes to it)",
             sid, named, why, job, sid);
    return buf;
}

bool pastfail_start_warning(const struct history_entry *h, size_t n, const char *job, const char *id,
                            char *buf, size_t sz)
{
    const struct history_entry *e = id && id[0] ? pastfail_find_now(h, n, job, id) : NULL;
    if (!e)
        return false;
    char sid[RELEASE_SHORT_LEN + 1], when[32];
    const char *name = pastfail_release_name(h, n, job, id);
    when_of(e, when);
    snprintf(buf, sz, "start: job '%s' runs release %s (%s), which %s %s: %s; "
                      "starting it anyway (drover deploy DIR --job %s deploys a fixed one)",
             job, ui_short(id, sid), name[0] ? name : e->name[0] ? e->name : "name unknown",
             is_promoted_stop(e) ? "its agent stopped while it ran as the promoted release" : "failed probation",
             when, e->reason[0] ? e->reason : "(no reason recorded)", job);
    return true;
}

const struct history_entry *pastfail_hang_stop(const struct history_entry *h, size_t n, const char *job,
                                               const char *id)
{
    for (size_t i = n; i-- > 0;) {
        const struct history_entry *e = &h[i];
        if (strcmp(e->job, job) != 0 || strcmp(e->release, id) != 0)
            continue;
        if (e->reason_code == HISTORY_RC_AGENT_STOPPED_HUNG)
            return e;
        /* promoted again, or a confirmed rollback to it, since: it ran as good after the stop */
        if (!strcmp(e->result, "promoted") || !strcmp(e->result, "rollback"))
            return NULL;
    }
    return NULL;
}

const char *pastfail_hang_warning(const struct history_entry *e, const char *name, const char *what,
                                  char *buf, size_t sz)
{
    char sid[RELEASE_SHORT_LEN + 1], when[32], named[MANIFEST_NAME_MAX + 4] = "";
    if (name && *name)
        snprintf(named, sizeof named, " (%s)", name);
    snprintf(buf, sz, "%s %s%s, which its agent stopped for job '%s' %s while it ran as the promoted "
                      "release: %s; it is not marked bad (a hang loop can be the infrastructure's: a "
                      "peer host down, the network), but watch it (drover status --job %s)",
             what, ui_short(e->release, sid), named, e->job, when_of(e, when),
             e->reason[0] ? e->reason : "(no reason recorded)", e->job);
    return buf;
}
