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
    enum hb_phase phase; /* of the last heartbeat */
    int64_t step;
    double hb_mono;      /* last heartbeat */
    double step_mono;    /* the step last changed (first heartbeat counts) */
    double phase_mono;   /* the phase last changed */
    uint64_t bad_lines;  /* lines on the heartbeat pipe that were not heartbeats (unparsable,
                          * over HEARTBEAT_LINE_MAX): named in a first_step verdict, so a worker
                          * that writes the wrong format is not only told "no heartbeat" */
};

enum liveness_rule { LIVE_OK = 0, LIVE_FIRST_STEP, LIVE_CHECKPOINT, LIVE_SILENT, LIVE_STALLED };

struct liveness_verdict {
    enum liveness_rule rule;
    int rank;
    enum hb_phase phase;
    bool has_hb;
    int64_t step;
    double age_s;   /* how long the rule's condition has held */
    double limit_s; /* the deadline it passed */
    uint64_t bad_lines; /* the rank's liveness_rank.bad_lines */
};

/* Judge n ranks of a gang started at started_mono.  Returns true and fills *v for the first
 * rank that passed a deadline; false (v untouched) when every rank is fine. */
bool liveness_judge(const struct liveness_policy *p, const struct liveness_rank *r, int n,
                    double started_mono, double now, struct liveness_verdict *v);

/* The word status documents, `drover status` and `drover top` show for one live rank:
 * "starting" (no train heartbeat yet), "checkpointing", "silent" (no heartbeat for half the
 * silence deadline or more), "stalled" (no step progress for half the stall deadline or more),
 * "running".  *age_s gets the age that goes with it (time in phase for checkpointing, heartbeat
 * age for silent, time without progress for stalled, 0 otherwise). */
const char *liveness_rank_word(const struct liveness_policy *p, const struct liveness_rank *r,
                               double now, double *age_s);

const char *liveness_rule_name(enum liveness_rule rule);
/* One line for people and the journal, e.g. "rank 1 stalled: step 120 unchanged for 65 s in
 * phase train (stall_deadline 60 s)".  A first_step verdict of a rank that wrote lines that were
 * not heartbeats says how many and which command shows why they were dropped ("...; it wrote 40
 * lines that are not heartbeats (`drover logs --job JOB --agent` says why)"; job NULL or "":
 * `drover logs --agent`).  Returns the length it wanted, or -EINVAL. */
int liveness_describe(const struct liveness_verdict *v, const char *job, char *out, size_t outsz);

#endif
