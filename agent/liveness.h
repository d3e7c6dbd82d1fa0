/* agent/liveness.h: is each rank of a gang alive and making progress?  A pure rule: inputs are
 * per-rank facts (phase, step, when the last heartbeat came, when the step last advanced, when
 * the phase began, all on the agent's monotonic clock), the job's policy and now; output is a
 * verdict naming rank, phase, step and age, or none.  No I/O, no clock: unit-tested from tables
 * (tests/unit/test-agent-liveness.c).  The daemon judges every live gang on every tick, not only
 * during probation, and feeds a trip to the job machine (JM_EV_HUNG).
 *
 * Rules, first match per rank, ranks in order (docs/agent.md, "Liveness"):
 *   first_step  no train heartbeat yet (no heartbeat, or phase init) first_step_s after the gang
 *               started: a rank that never finishes init (one rank failed while the others wait
 *               in NCCL's bootstrap, a torch.compile that never returns)
 *   checkpoint  phase checkpoint for longer than checkpoint_s (since the phase began)
 *   silent      phase train and no heartbeat for silence_s (a rank blocked in a collective, a
 *               dead main loop)
 *   stalled     phase train, heartbeats flowing, step unchanged for stall_s
 * A rank that has exited, or says phase done, is judged by its exit instead.  A deadline of 0
 * turns its rule off.
 *
 * One more rule names the culprit when a gang ends before a deadline could trip
 * (liveness_blame_peer_lost): a rank frozen after promotion (kill -STOP, a stuck worker) stays
 * alive and silent; its peers' distributed timeout (60 s by default) fires before the silence
 * deadline (2 min), and they exit 8 (peer_lost).  A rank of this container still alive, in phase
 * train and silent since before that exit, for half the silence deadline or more (where the
 * status already calls it "silent"), is then the gang's cause, not the peer that lost it.
 */
#ifndef DROVER_AGENT_LIVENESS_H
#define DROVER_AGENT_LIVENESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/heartbeat.h"

struct liveness_policy {
    double first_step_s; /* gang start -> every rank's first train heartbeat (default 10 min) */
    double silence_s;    /* longest heartbeat gap in phase train (default 2 min) */
    double stall_s;      /* longest time without step progress in phase train (default 5 min) */
    double checkpoint_s; /* longest checkpoint phase (default 15 min) */
};
#define LIVENESS_MAX_S (30.0 * 86400) /* a deadline is at most 30 days */
void liveness_policy_default(struct liveness_policy *p);
/* -EINVAL when a deadline is negative, not finite or over LIVENESS_MAX_S. */
int liveness_policy_check(const struct liveness_policy *p);

struct liveness_rank {
    int rank;
    bool alive;          /* the process runs */
    bool has_hb;
    bool hello;          /* its last line was a hello (heartbeat.h): the module started, no
                          * hb.init() yet (phase init) */
    enum hb_phase phase; /* of the last heartbeat */
    int64_t step;
    double hb_mono;      /* last heartbeat */
    double step_mono;    /* the step last changed (first heartbeat counts) */
    double phase_mono;   /* the phase last changed */
    uint64_t bad_lines;  /* lines on the heartbeat pipe that were not heartbeats (unparsable,
                          * over HEARTBEAT_LINE_MAX): named in a first_step verdict, so a worker
                          * that writes the wrong format is not only told "no heartbeat" */
    char proc_state;     /* the state letter of its /proc/<pid>/stat ('T' stopped by a signal,
                          * 't' by a tracer); 0 unknown.  Read by liveness_blame_peer_lost only */
};

enum liveness_rule { LIVE_OK = 0, LIVE_FIRST_STEP, LIVE_CHECKPOINT, LIVE_SILENT, LIVE_STALLED,
                     LIVE_PEER_LOST };

struct liveness_verdict {
    enum liveness_rule rule;
    int rank;
    enum hb_phase phase;
    bool has_hb;
    int64_t step;
    double age_s;   /* how long the rule's condition has held */
    double limit_s; /* the deadline it passed */
    uint64_t bad_lines; /* the rank's liveness_rank.bad_lines */
    /* LIVE_FIRST_STEP of a rank that sent only a hello: the module started, hb.init() never
     * came (a rendezvous waiting for a peer); and this gang's ranks that did send init or more
     * (past) and those that did not (before), as "0, 2" ("" none; cut with "..." when long) */
    bool hello;
    char past_init[48], before_init[48];
    /* LIVE_PEER_LOST: the rank whose exit (peer_code, 8) lost it, and whether the silent rank
     * is stopped by a signal */
    int peer_rank, peer_code;
    bool stopped;
};

/* Judge n ranks of a gang started at started_mono.  Returns true and fills *v for the first
 * rank that passed a deadline; false (v untouched) when every rank is fine.  Of ranks that all
 * passed first_step_deadline, the least advanced is named (none sent, then a hello only, then
 * init): in a rendezvous that waits for a missing peer, the peer, not rank 0 waiting for it. */
bool liveness_judge(const struct liveness_policy *p, const struct liveness_rank *r, int n,
                    double started_mono, double now, struct liveness_verdict *v);

/* How long after a rank's exit 8 (peer_lost) the other ranks of this container that went silent
 * before it get to exit too, before one still alive and silent is named the cause: ranks blocked
 * in the same collective (a rank in another container died) time out within moments of each
 * other; a frozen one never does.  A rank stopped by a signal is named at once. */
#define LIVENESS_PEER_LOST_SETTLE_S 10.0

enum liveness_blame {
    LIVE_BLAME_NONE = 0, /* the exit is the gang's cause, as it is */
    LIVE_BLAME_WAIT,     /* not yet: a silent rank may still exit (ask again on the next tick) */
    LIVE_BLAME_SILENT,   /* *v names the silent rank (rule LIVE_PEER_LOST): the gang hung */
};

/* The gang's first exit is r[exit_idx]'s (exit_code, exit_signal), seen at exit_mono: is a
 * silent rank of r (this container's n ranks) the real cause?  Only for exit 8 (peer_lost)
 * without a signal, and only with a silence deadline (p->silence_s > 0).  A rank is a suspect
 * when it is alive, its last heartbeat is in phase train (init is the first-step rule's, a
 * checkpoint may be long and silent) and came before exit_mono (a rank that heartbeats after
 * the peer's exit is not what it lost).  A suspect is named once it has been silent for
 * p->silence_s / 2 or more and is stopped by a signal (proc_state 'T' or 't') or still alive
 * LIVENESS_PEER_LOST_SETTLE_S after exit_mono; of several, the one stopped, then the one silent
 * longest.  While a suspect is not named and the settle time has not passed: WAIT.  *v is
 * written only for LIVE_BLAME_SILENT: limit_s is p->silence_s (the deadline it stood for, which
 * sets the hang window), age_s its silence.  Pure: no I/O, no clock. */
enum liveness_blame liveness_blame_peer_lost(const struct liveness_policy *p,
                                             const struct liveness_rank *r, int n, int exit_idx,
                                             int exit_code, int exit_signal, double exit_mono,
                                             double now, struct liveness_verdict *v);

/* The word status documents, `drover status` and `drover top` show for one live rank:
 * "starting" (no train heartbeat yet), "checkpointing", "silent" (no heartbeat for half the
 * silence deadline or more), "stalled" (no step progress for half the stall deadline or more),
 * "running".  *age_s gets the age that goes with it (time in phase for checkpointing, heartbeat
 * age for silent, time without progress for stalled, 0 otherwise). */
const char *liveness_rank_word(const struct liveness_policy *p, const struct liveness_rank *r,
                               double now, double *age_s);

const char *liveness_rule_name(enum liveness_rule rule);
/* One line for people and the journal, e.g. "rank 1 stalled: step 120 unchanged for 65 s in
 * phase train (stall_deadline 60 s)", or for LIVE_PEER_LOST "rank 1 silent for 64 s while its
 * peers lost it (rank 0 exited 8) (stopped by a signal)".  A first_step verdict of a rank that wrote lines that were
 * not heartbeats says how many and which command shows why they were dropped ("...; it wrote 40
 * lines that are not heartbeats (`drover logs --job JOB --agent` says why)"; job NULL or "":
 * `drover logs --agent`).  Returns the length it wanted, or -EINVAL. */
int liveness_describe(const struct liveness_verdict *v, const char *job, char *out, size_t outsz);

#endif
