/* controller/deploy/probation.h: the verdict on a newly activated release, as pure functions over a
 * time series of agent status documents (one stream per container), so every rule is
 * unit-testable without SSH.  The caller feeds documents with the controller's monotonic time
 * and asks for a verdict; heartbeat ages come from the agents' own clocks.
 *
 * Rules (docs/controller.md, "Probation"): every expected rank sends a train heartbeat from the
 * new release within healthy_deadline and keeps heartbeating and stepping; loss stays finite;
 * no rank exits or restarts; the agent must not revert or fail on its own; after warmup_steps,
 * over min_healthy_time, the median job Ktok/s (sum over ranks of tok_s / 1000) must be at least
 * (1 - tolerance) * baseline; with no baseline the throughput rule is skipped (said in note).
 * The whole probation must end within progress_deadline.
 */
#ifndef DROVER_PROBATION_H
#define DROVER_PROBATION_H

#include <stdbool.h>

#include "common/status.h"
#include "controller/inventory.h"

enum probation_verdict { PROBATION_PENDING = 0, PROBATION_PASS, PROBATION_FAIL };

#define PROBATION_REASON_MAX 512
#define PROBATION_MAX_SAMPLES 4096

struct probation; /* opaque; probation_free() */

/* ncts containers (labels[i] names node i in messages, e.g. "h1:101"), nproc ranks each, global
 * rank = node * nproc + local rank.  baseline_ktok_s <= 0: no baseline.  recovery = true checks
 * that a release we reverted to comes back (the agent's "reverted" state is expected then, and
 * only heartbeats matter: warmup and throughput rules are off).  t0: activation time.
 * -EINVAL for bad sizes, -ENOMEM. */
int probation_new(const struct inv_policy *pol, const char *job, const char *release, int ncts,
                  const char *const *labels, int nproc, double baseline_ktok_s, bool recovery,
                  double t0, struct probation **ret_p);
void probation_free(struct probation *p);

/* Feed container ct's newest status document, received at controller time now. */
void probation_feed(struct probation *p, int ct, const struct agent_status *st, double now);

/* The verdict at time now (evaluates deadlines).  Once PASS or FAIL it stays. */
enum probation_verdict probation_check(struct probation *p, double now);

/* Why it failed ("throughput regression: 41.2 Ktok/s < 0.80 × 96.5 Ktok/s baseline (tolerance
 * 0.20)"), or on pass what was measured.  Borrowed, valid until the next call. */
const char *probation_reason(const struct probation *p);
/* Extra information for people ("no baseline on these containers: throughput rule skipped"). */
const char *probation_note(const struct probation *p);
/* Median job Ktok/s over the window; -1 if not measured. */
double probation_ktok_s(const struct probation *p);
/* One line on progress for the operator: ranks heartbeating, step, Ktok/s, phase of probation. */
void probation_describe(const struct probation *p, double now, char *buf, size_t buf_sz);
/* Lowest step over the ranks and the checkpoint rank 0 resumed from (-1 unknown). */
void probation_progress(const struct probation *p, long long *ret_step, long long *ret_resumed);

/* Median of n values (sorts a copy).  n == 0 gives -1. */
double probation_median(const double *v, int n);

#endif
