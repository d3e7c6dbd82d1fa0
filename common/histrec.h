/* common/histrec.h: one deploy history record, the contract between drover and drover-agent.
 * drover writes a record for each outcome it decides (state_dir/history.jsonl and, through
 * `drover-agent history add`, every container of the job); the agent writes one itself for a
 * revert it decided alone, with no drover holding the job (agent/history.h).  `drover history`
 * reads both and merges them (docs/protocol.md, "History records").
 */
#ifndef DROVER_COMMON_HISTREC_H
#define DROVER_COMMON_HISTREC_H

#include <jansson.h>
#include <stddef.h>

#include "common/manifest.h"

/* Why a history record's result is what it is, where the result alone does not say: typed,
 * "reason_code" in the record by name (histrec.c's table).  The record's reason is text for
 * people; pastfail and notify decide on this code, never on the reason's words.  A name this
 * reader does not know (a newer drover's) reads as HISTORY_RC_OTHER; a record without
 * "reason_code" (a drover before it) gets the code history_reason_from_text() derives. */
enum history_reason {
    HISTORY_RC_NONE = 0,       /* "": the result says it all (a verdict of this controller, an
                                  operator's rollback, stop or abort) */
    HISTORY_RC_AGENT_REVERT,   /* "agent-revert": during probation the agent went back to the good
                                  release on its own (crash loop, probation deadline); reverted */
    HISTORY_RC_ENVIRONMENT,    /* "environment": the agent stopped the gang on a GPU environment
                                  fault (status.h STATUS_RC_ENVIRONMENT): failed, the release is
                                  not to blame */
    HISTORY_RC_PROMOTE_FAILED, /* "promote-failed": the release passed probation (or was held and
                                  promoted by the operator) but the promote call failed: failed,
                                  not a verdict on the release */
    HISTORY_RC_OTHER,          /* "other": a code this reader does not know */
    HISTORY_RC_OPERATOR_REVERT, /* "operator-revert": `drover revert` by hand of a release whose
                                  probation never failed (a rollback to it not confirmed, its
                                  promote failed, run unpromoted otherwise): reverted, no verdict
                                  on the release (pastfail.h) */
    HISTORY_RC_UNDECIDED,      /* "undecided": the probation was never decided, its agent died
                                  or answered nothing past healthy_deadline (SIGSTOP,
                                  a hung host), or its container stopped under the gang: failed or reverted
                                  (or revert-failed), no verdict on the release, not marked bad
                                  (pastfail.h); an older reader takes it for "other" */
    HISTORY_RC_AGENT_STOPPED,  /* "agent-stopped": the agent stopped the job's promoted release
                                  on its own for a failure not retried (non-finite loss, a
                                  non-retryable exit code) and marked it bad; failed, a verdict on
                                  the release as a failed probation is (docs/agent.md) */
    HISTORY_RC_AGENT_STOPPED_HUNG, /* "agent-stopped-hung": the agent stopped the job's promoted
                                  release on its own once its restart budget was spent on hangs
                                  (liveness deadlines); failed, NOT marked bad (a hang can be the
                                  infrastructure's: a peer host down, a frozen network): no
                                  verdict on the release, drover warns of it on a rollback or a
                                  deploy to it (pastfail.h); an older reader takes it for "other" */
    HISTORY_RC_COUNT
};

/* The code's name in the record ("" for HISTORY_RC_NONE). */
const char *history_reason_name(enum history_reason c);
/* A name from a record: HISTORY_RC_OTHER for one this reader does not know. */
enum history_reason history_reason_from_name(const char *name);
/* The code of a record written before the code existed, from the words drover recorded then:
 * "promote failed" or "promote by the operator failed" in the reason: promote-failed; result
 * `failed` with STATUS_ATTENTION_PREFIX in the reason: environment; result `reverted` with
 * "by itself" in the reason: agent-revert; else none. */
enum history_reason history_reason_from_text(const char *result, const char *reason);

/* Which release a record names where, for every kind of record (docs/protocol.md, "History
 * records"): `release` is the release the operation put in place or tried to (a deploy's
 * candidate; a rollback's target: the release it went to, or tried to go to), `previous` the
 * release the job ran as good before it (where a deploy's revert goes back to; where a rollback
 * came from).  The record carries "layout": HISTORY_LAYOUT.  A record without it (a drover
 * before it) wrote a rollback of a release never promoted (back to the good release, with the
 * reason "operator rollback") the other way round: release the one it left, previous the good
 * one it went to, while a failed rollback to an earlier good release named its target as
 * release.  history_entry_parse() turns such a record round, so every reader (`drover history`,
 * -o json, pastfail, gc's and status's targets) sees one rule; a successful rollback to an
 * earlier good release then named its target in both fields and reads as it is. */
#define HISTORY_LAYOUT 2

struct history_entry {
    double time;                       /* epoch seconds */
    char job[32];
    char release[RELEASE_ID_LEN + 1];
    char name[MANIFEST_NAME_MAX];      /* manifest name ("v2") */
    char result[24];                   /* promoted, reverted, revert-failed, failed, aborted, rollback */
    char previous[RELEASE_ID_LEN + 1]; /* the good release the job ran before (HISTORY_LAYOUT) */
    double ktok_s;                     /* measured, -1 if none */
    double baseline_ktok_s;            /* compared against, -1 if none */
    char reason[512];                  /* for people */
    enum history_reason reason_code;   /* ... and for programs: "reason_code" */
    char containers[512];
    char by[16];                       /* "" drover; HISTORY_BY_AGENT: an agent's own record of a
                                          revert it decided with no drover there ("by" in the
                                          record only then; containers "" until a drover that
                                          read it from a container names that one) */
};

#define HISTORY_BY_AGENT "agent"

/* The entry as its one JSON line (no newline), malloc'd: what history.jsonl holds and what the
 * agents keep (drover-agent history add, docs/protocol.md). */
int history_entry_format(const struct history_entry *e, char **ret_line);
/* The entry as drover shows it to scripts: a record of the result documents, of `drover history
 * -o json` and of a notification (docs/protocol.md): time, job, release, name, result, previous,
 * reason, reason_code, containers, ktok_s, baseline_ktok_s, by in that order, ktok_s and
 * baseline_ktok_s null when not measured, by "drover" or "agent".  A new reference; NULL on ENOMEM or text jansson refuses. */
json_t *history_entry_json(const struct history_entry *e);
/* One line back into *ret (missing fields empty, numbers -1; no "reason_code": derived with
 * history_reason_from_text; no "layout": a rollback's record of an older drover turned round
 * as HISTORY_LAYOUT says).  -EINVAL when not a JSON object. */
int history_entry_parse(const char *line, size_t len, struct history_entry *ret);

#endif
