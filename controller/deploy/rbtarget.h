/* controller/deploy/rbtarget.h: where `drover rollback` takes a job, decided from every
 * container's view of it.  Pure: no I/O, no logging.
 *
 * What a job runs is a (release, job spec) pair, and each agent keeps the pairs promoted for the
 * job, newest first (status `goods` with `goods_spec`).  So a rollback from the good pair goes to
 * the newest earlier promoted pair: after a promoted change of the spec alone (nproc_per_node
 * 1 -> 2), that is the same release with the spec it was promoted with before, which the agent
 * starts from its own record (activate --recorded): the inventory no longer holds it.  A pair
 * whose spec the agent no longer records, or an agent older than the pairs, gives the release
 * only: it runs with the inventory's spec (what rollback did before the pairs).
 *
 * The job's current and good are taken from every container, never from the first one that
 * answers: containers that disagree on the good release (one was stopped during a deploy and
 * kept the older one) or on where a rollback goes are refused, naming each container, unless
 * the operator names the release (--to), which every container then goes to.
 */
#ifndef DROVER_CONTROLLER_RBTARGET_H
#define DROVER_CONTROLLER_RBTARGET_H

#include <stdbool.h>
#include <stddef.h>

#include "common/status.h"
#include "controller/inventory.h"

/* One container's view of the job. */
struct rb_ct {
    const char *label;           /* "h1:101" */
    const struct job_status *js; /* the job's part of its status; NULL: its agent does not know the job */
    const char *want;            /* the inventory's spec digest for it (jobspec_digest), "" unknown */
};

#define RB_MAX_SKIPPED 8

enum rb_kind {
    RB_REVERT,  /* some container runs a pair that was never promoted: every one back to the good pair */
    RB_EARLIER, /* to `release`, with per container the spec below */
    RB_NONE,    /* every container on the good pair and nothing earlier to go to; with --to:
                   every container runs that release with the inventory's spec and no other
                   spec of it was promoted (why says) */
    RB_REFUSED, /* the containers disagree (why names them and what to do) */
};

struct rb_target {
    enum rb_kind kind;
    char current[RELEASE_ID_LEN + 1]; /* the release the job runs: RB_REVERT the one left (the
                                         first container off its good pair), else the good one */
    char good[RELEASE_ID_LEN + 1];    /* the good release every container agrees on ("" with --to
                                         when they do not) */
    char release[RELEASE_ID_LEN + 1]; /* RB_EARLIER: where to */
    bool spec_only;                   /* RB_EARLIER: the release every container runs now, with an
                                         earlier spec */
    int nrecorded;                    /* containers with recorded[i] */
    /* per container: recorded[i]: activate the agent's recorded spec of (release, digest[i]);
     * else the inventory's spec (digest[i] ""). */
    bool recorded[INV_MAX_CTS];
    char digest[INV_MAX_CTS][SPEC_DIGEST_LEN + 1];
    char why[1400];
    /* RB_EARLIER and RB_NONE without --to: the promoted releases newer than where it goes that
     * were passed over because they failed probation since (a container marks them bad, or
     * skip names them), newest first: said by the caller, with when and why */
    int nskipped;
    char skipped[RB_MAX_SKIPPED][RELEASE_ID_LEN + 1];
};

/* Decide for n containers (1..INV_MAX_CTS) of job `job`.  to: the release the operator named
 * (a full id the caller resolved; NULL: none): every container goes there, with the spec of its
 * newest promoted pair of that release (other than what runs when every container runs it
 * already: an earlier spec of it), else the inventory's.  Returns 0
 * with *ret filled (its kind says what to do), -EINVAL for n out of range. */
int rbtarget_decide(const char *job, const struct rb_ct *cts, int n, const char *to, struct rb_target *ret);

/* rbtarget_decide, where also the releases skip[0..nskip) (full ids) are no earlier good pair to
 * go to: those whose newest probation for the job failed by the controller's history
 * (pastfail_find_now), which an agent older than the mark of a once-promoted release's failure
 * keeps unmarked.  Without --to only: --to is refused before (cmd_rollback). */
int rbtarget_decide_skip(const char *job, const struct rb_ct *cts, int n, const char *to,
                         const char *const *skip, int nskip, struct rb_target *ret);

/* Shortest prefix `rollback --to` takes: 6 hex digits. */
#define RB_PREFIX_MIN 6

/* true when s is a release id prefix --to takes: RB_PREFIX_MIN..RELEASE_ID_LEN hex digits, any
 * case.  Checked on the command line, before any host is contacted. */
bool rbtarget_prefix_ok(const char *s);

/* The distinct releases of known[0..n) (full ids; "" entries are skipped, a release listed more
 * than once counts once) that prefix (any case) begins: returns how many there are, with the
 * first max of them in ret_hits (pointers into known).  No match is 0; more than one is
 * ambiguous (the caller names them). */
int rbtarget_match_prefix(const char *const *known, int n, const char *prefix, const char **ret_hits, int max);

#endif
