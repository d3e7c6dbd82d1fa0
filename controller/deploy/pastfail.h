/* controller/deploy/pastfail.h: has the release a deploy is about to stage failed its probation
 * on this job before, and what the deploy says about it.  Pure: no I/O, no logging, no clock
 * (the caller reads the job's history: its state_dir's and the agents', controller/deploy/state.h).
 *
 * A deploy of such a release runs a full probation again; it is allowed (a flaky verdict, a fixed
 * environment), but the operator is told when and why it failed, before anything is staged.
 */
#ifndef DROVER_CONTROLLER_PASTFAIL_H
#define DROVER_CONTROLLER_PASTFAIL_H

#include <stdbool.h>
#include <stddef.h>

#include "controller/deploy/state.h"

/* The record, among h[0..n) (oldest first, as state_history_read/merge give them), that says
 * release id failed its probation for job: the newest record of (job, id) that is an outcome of
 * a probation of it, when that outcome is a failure.  Outcomes: `promoted` and `held` (passed, or
 * waits for the operator: NULL), `failed` with reason code promote-failed (NULL),
 * and the failures `reverted`, `revert-failed` and `failed` (auto_revert off).  Not outcomes, so
 * skipped: `aborted`, `analysis`, `rollback`, the records of `drover rollback` (name "rollback":
 * the release gone back to, or the one left), a record with reason code environment (the
 * release was not to blame), one with reason code operator-revert (`drover revert` of a
 * release whose probation never failed: pastfail_hand_revert_code) and one with reason code
 * undecided (its probation never ended in a verdict: an agent died, a container stopped under
 * the gang; deploy said the release is not marked bad) and one with reason code
 * agent-stopped-hung (its agent stopped it, promoted, after hangs: not marked bad, only warned
 * of, pastfail_hang_stop).  Decided on result, name and reason_code (state.h: an older
 * drover's record gets its code from its words when it is read), never the reason's words.
 * Returns a pointer into h, or NULL. */
const struct history_entry *pastfail_find(const struct history_entry *h, size_t n, const char *job,
                                          const char *id);

/* The warning for record e of release `name`: "release 3f2a9c1b7d6e (v2) failed probation for
 * job 'train' before: reverted at 2026-12-02 14:03:11 UTC: <reason>; deploying it again runs a
 * full probation" into buf (truncated to sz).  Times in UTC.  Returns buf. */
const char *pastfail_message(const struct history_entry *e, const char *name, char *buf, size_t sz);

/* Why release id runs unpromoted for job, in words for the record `drover promote` or `drover
 * revert` writes ("promoted by the operator (WORDS)"), from the newest record of (job, id) among
 * h[0..n) (oldest first), the operator's own failed tries of that promote skipped: `held` is
 * "held release" (the one case the words said whatever the case was); a `rollback` that was
 * `aborted` (Ctrl-C while its recovery was watched: ROLLBACK NOT CONFIRMED) is "a rollback to it,
 * not confirmed"; a deploy's failed promote is "it passed probation, its promote failed"; a
 * failure left running (auto_revert off) is "failed probation, left running (auto_revert off)";
 * anything else, no record included, "unpromoted, not held".  Decided on result, name and
 * reason_code, never the reason's words.  Returns a static string. */
const char *pastfail_unpromoted_why(const struct history_entry *h, size_t n, const char *job, const char *id);

/* The reason code of the record `drover revert` writes for release id of job, from the same
 * newest record as pastfail_unpromoted_why: HISTORY_RC_NONE (a failure pastfail_find counts)
 * for a held release (the operator decides its inconclusive probation) and for a failure left
 * running (auto_revert off); HISTORY_RC_OPERATOR_REVERT (not counted: it never failed probation)
 * for a rollback to it not confirmed, a passed probation whose promote failed, and anything else
 * (the case that used to make a later deploy of a release the operator had rolled back to, then
 * reverted by hand, say it "failed probation before").  Pure. */
enum history_reason pastfail_hand_revert_code(const struct history_entry *h, size_t n, const char *job,
                                              const char *id);

/* The one rule both `drover rollback` and `rollback --to` go by: the record (pastfail_find) that
 * says release id failed its newest probation for job among h[0..n), unless a confirmed
 * rollback went to it since (result `rollback`: it is good again); NULL otherwise.  A promote
 * since makes pastfail_find say NULL already.  Pure. */
const struct history_entry *pastfail_find_now(const struct history_entry *h, size_t n, const char *job,
                                              const char *id);

/* What a plain `drover rollback` says of a promoted release it passes over because it failed a
 * later probation: "skipping 6a208f9ed985 (rel1): it failed probation for job 'train' at
 * 2026-12-02 14:03:11 UTC after it was promoted (reverted: <reason>); it is no rollback target
 * until it is promoted again (drover rollback --job train --to 6a208f9ed985 --force goes to
 * it)" into buf (truncated to sz).  e: its failure record (pastfail_find_now), NULL when only
 * its agents know ("it is marked bad for job 'train' by its agents (...)"); name: "" when
 * unknown.  A record of its agent's stop of it while promoted (agent-stopped) is said as that:
 * "its agent stopped it for job 'train' at T while it ran as the promoted release (failed:
 * <reason>)".  Returns buf. */
const char *pastfail_rollback_skip(const struct history_entry *e, const char *name, const char *job,
                                   const char *id, char *buf, size_t sz);

/* For `drover rollback --to PREFIX` before any host is contacted: the record (pastfail_find)
 * that says the one release of job among h[0..n) whose id begins with prefix (case-insensitive)
 * failed its probation; NULL when no release of job there begins with it, when several do (the
 * survey names them), when it did not fail, or when a confirmed rollback went to it since
 * (result `rollback`: it is good again).  Pure. */
const struct history_entry *pastfail_find_prefix(const struct history_entry *h, size_t n, const char *job,
                                                 const char *prefix);

/* The manifest name ("v2") of release id of job, from its newest record among h[0..n) that is not
 * one of drover's own verbs (history_name_is_verb: "rollback", "promote", "revert", "stop",
 * "start", "rebaseline"); "" when none.  Returns a
 * pointer into h, or a static "". */
const char *pastfail_release_name(const struct history_entry *h, size_t n, const char *job, const char *id);

/* The refusal of `drover rollback --job J --to ID` without --force where release id failed
 * probation, into buf (truncated to sz): "rollback of job 'train' refused, nothing changed:
 * release 3f2a9c1b7d6e (v2) failed probation for job 'train': reverted at 2026-12-02 14:03:11
 * UTC: <reason>; roll back to it only with --force (drover rollback --job train --to
 * 3f2a9c1b7d6e --force)".  e: its failure record (pastfail_find), NULL when only its agents know
 * ("is marked bad for job 'train' by its agents (...)"); an agent-stopped record reads "was
 * stopped by its agent for job 'train' at T while it ran as the promoted release: <reason>"; name: "" when unknown; contacted: false when said before any
 * host was contacted ("nothing was contacted, nothing changed").  Returns buf. */
const char *pastfail_rollback_refusal(const struct history_entry *e, const char *name, const char *job,
                                      const char *id, bool contacted, char *buf, size_t sz);

/* What `drover start --job J` says on stderr before it starts release id that J runs, when
 * release id failed its newest probation for job among h[0..n) (pastfail_find_now: a promote or
 * a confirmed rollback since clears it): "start: job 'train' runs release 3f2a9c1b7d6e (v2),
 * which failed probation at 2026-12-02 14:03:11 UTC: <reason>; starting it anyway (drover deploy
 * DIR --job train deploys a fixed one)" into buf (truncated to sz), true.  A start runs the
 * job's current release whatever its verdict (a first deploy that failed with no good release
 * to go back to stays current): it used to be started again with no word.  False, buf
 * untouched, when it did not fail or id is "".  Pure. */
bool pastfail_start_warning(const struct history_entry *h, size_t n, const char *job, const char *id,
                            char *buf, size_t sz);

/* The agent's record (reason code agent-stopped-hung) of its stop of release id, the promoted
 * one, after its restart budget was spent on hangs, among h[0..n) (oldest first): the newest
 * record of (job, id) when it is that one, or when only records other than a promote or a
 * confirmed rollback (result `rollback`) of it came since; NULL otherwise.  Such a release is
 * not marked bad (a hang can be the infrastructure's) and pastfail_find does not count it; a
 * rollback or a deploy to it warns (pastfail_hang_warning).  Pure. */
const struct history_entry *pastfail_hang_stop(const struct history_entry *h, size_t n, const char *job,
                                               const char *id);

/* The warning for e (pastfail_hang_stop) of release `name` ("" unknown): "WHAT 3f2a9c1b7d6e
 * (v2), which its agent stopped for job 'train' at 2026-12-02 14:03:11 UTC while it ran as the
 * promoted release: <reason>; it is not marked bad (a hang loop can be the infrastructure's: a
 * peer host down, the network), but watch it (drover status --job train)" into buf (truncated
 * to sz); what: "rolling back to", "deploying".  Returns buf. */
const char *pastfail_hang_warning(const struct history_entry *e, const char *name, const char *what,
                                  char *buf, size_t sz);

#endif
