/* controller/deploy/probation.h: the verdict on a newly activated release, as pure functions over a
 * time series of agent status documents (one stream per container), so every rule is
 * unit-testable without SSH.  The caller feeds documents with the controller's monotonic time
 * and asks for a verdict; heartbeat ages come from the agents' own clocks.
 *
 * Rules (docs/controller.md, "Probation"): every expected rank sends a train heartbeat from the
 * new release within healthy_deadline and keeps heartbeating and stepping; loss stays finite;
 * no rank exits or restarts; the agent must not revert or fail on its own.  A rank that froze
 * (probation_find_silent() below) is named as the cause of its peers' exits, and first of a
 * gang that fell silent behind it.
 *
 * Throughput is a comparison of distributions, not of two numbers.  One job sample (the sum of
 * the ranks' tok_s / 1000, and the slowest rank's step time) is taken each time every rank has
 * stepped since the previous sample: a stale heartbeat is never counted twice.  Warmup (the
 * first warmup_steps since the resumed checkpoint, warmup_time, and then for as long as the
 * step time is still falling: torch.compile, autotuning; capped at warmup_max) is excluded and
 * counted.  After min_healthy_time of warm samples, the log-throughput samples are compared with
 * the baseline's recorded samples by a Mann-Whitney U test; the Hodges-Lehmann shift and its
 * confidence interval (common/stats.h) decide against the tolerance: FAIL when the whole
 * interval lies below -tolerance, PASS when it lies above, otherwise keep measuring up to
 * max_probation_time and then INCONCLUSIVE.  No warm samples by then: NODATA (never a pass).
 * A baseline known only as one number is compared by the sign test's interval for the median.
 * With no baseline the comparison is skipped (said in note).  Ranks: with 3 or more, a rank
 * whose own samples lie below its peers' by more than the tolerance (same test) fails the
 * release as a straggler, named.
 */
#ifndef DROVER_PROBATION_H
#define DROVER_PROBATION_H

#include <stdbool.h>

#include "common/status.h"
#include "controller/inventory.h"

enum probation_verdict {
    PROBATION_PENDING = 0,
    PROBATION_PASS,
    PROBATION_FAIL,
    PROBATION_INCONCLUSIVE, /* measured, but the interval straddles the tolerance */
    PROBATION_NODATA,       /* healthy, but no warm throughput sample to judge: never a pass */
};

/* "pass", "fail", "inconclusive", "no-data" ("pending"). */
const char *probation_verdict_name(enum probation_verdict v);

struct sample_set;

#define PROBATION_REASON_MAX 768
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

/* Give the baseline as a distribution (the promoted release's recorded samples): copied; the
 * newest STATS_MAX_SAMPLES are used.  Without it, baseline_ktok_s of probation_new is compared
 * as one number.  -EINVAL for an empty set. */
int probation_set_baseline_samples(struct probation *p, const struct sample_set *s);

/* The throughput rule is not applied, for a reason the caller says (why: a few words, "its own
 * baseline"): the progress line says "throughput not judged: WHY" instead of "no baseline", and
 * a pass gives no "these samples become the baseline" note (the caller keeps its baseline).
 * Call it with no baseline given (probation_new's -1, no samples). */
void probation_unjudged(struct probation *p, const char *why);

/* As probation_unjudged, for a baseline that exists but cannot be compared with (measured with
 * another number of ranks, "the baseline ran 2 ranks, this deploy 1"): the progress line says
 * "throughput not judged: WHY", and a pass notes "throughput rule skipped (WHY); these N samples
 * (median M Ktok/s) become the baseline" (the caller records them), never "no baseline". */
void probation_rebase(struct probation *p, const char *why);

/* Container ct was activated with job spec digest `digest` (common/specdigest.h): its agent
 * reporting another digest for the watched release fails the probation (a second deploy of the
 * same release with another spec took the job over; promote names the release only).  Not
 * called for an agent that took no digest; ignored in a recovery. */
void probation_expect_spec(struct probation *p, int ct, const char *digest);

/* Was the baseline s measured with world_size ranks (the container count times nproc_per_node
 * the deploy runs)?  A job's Ktok/s is the sum over its ranks: after a job spec change of
 * nproc_per_node (the baseline key names the containers, not the ranks in each) the old figure
 * is not comparable, and halving the GPUs read as a 50% regression.  A set that does not say
 * (ranks 0) is taken as comparable. */
bool probation_baseline_fits(const struct sample_set *s, int world_size);

/* Feed container ct's newest status document, received at controller time now. */
void probation_feed(struct probation *p, int ct, const struct agent_status *st, double now);

/* Container ct was stopped under the gang (its `pct exec` says the container is not running;
 * pct_said: pct's own words): the gang cannot be healthy without it, so the probation (or the
 * recovery) fails at once, "container h1:101 stopped during probation (pct: ...)", rather than
 * after healthy_deadline as "no status".  It also replaces a failure already decided (the
 * stopped container's peers lose a rank, and their agents may say so first); not a pass or an
 * inconclusive verdict, and not another container's stop said before. */
void probation_ct_stopped(struct probation *p, int ct, const char *pct_said);

/* Container ct's agent is not running: its status stream ended with the agent CLI saying that
 * no daemon listens (agent_said_no_daemon(); said: those words, quoted by the verdict).  Nothing
 * is decided at once (a daemon its service manager restarts answers again: a document fed from
 * ct clears this).  Once ct has sent nothing for healthy_deadline the probation fails as "no
 * status from h1:102 for 60s (healthy_deadline 60s): its drover-agent is not running (...)",
 * before any rule over its stale figures (its ranks' missing heartbeats), and
 * probation_agent_gone_ct() names ct: the release is not to blame.  A container whose documents
 * stop coming without its stream ending (its agent stopped with SIGSTOP or wedged, its host hung)
 * is decided the same way once its silence passes healthy_deadline ("... its drover-agent is not
 * answering ..."); while it has been quiet PROBATION_QUIET_S or more, no verdict on the workers
 * is drawn from its old figures (nor from the others': its ranks are in every rendezvous). */
void probation_agent_gone(struct probation *p, int ct, const char *said);
/* The container a FAIL blames on its agent not running or not answering (probation_agent_gone,
 * or a silence past healthy_deadline), else -1 (no FAIL, or another cause, a container stopped
 * under the gang included). */
int probation_agent_gone_ct(const struct probation *p);

/* The verdict at time now (evaluates deadlines).  Once decided it stays. */
enum probation_verdict probation_check(struct probation *p, double now);

/* Why it failed, or on pass / inconclusive / no data what was measured: the test, the estimated
 * change with its interval, the threshold and the sample counts.  Borrowed, valid until the next
 * call. */
const char *probation_reason(const struct probation *p);
/* The reason code of the agent's reason a FAIL quotes (the gang failed, the agent went back on
 * its own, it is stopping the gang); STATUS_RC_NONE when the verdict quotes none.  What the
 * deploy decides on (an environment fault is not the release's), never the verdict's words. */
enum status_reason probation_agent_code(const struct probation *p);
/* The exit code of the rank a FAIL names ("rank 0 on h1:101 exited with code 9 ..."), typed:
 * what the deploy decides on (drover-train's TX_DEVICE: wait for the agent's environment
 * verdict), never the verdict's words.  -1 when the FAIL names no rank's exit, or a signal. */
int probation_exit_code(const struct probation *p);
/* Is the FAIL an agent that went back to another release on its own (its state "reverted", or
 * another release current), not one this controller's rules caught?  What the history record's
 * reason code agent-revert says (controller/deploy/state.h), never the verdict's words. */
bool probation_agent_went_back(const struct probation *p);
/* "; see `drover [-i INV] logs --job J`" into buf (cut to sz), what a message about a worker's
 * exit ends with: the verdict or the agent's reason quote a worker's last word at most, its log
 * has the traceback or the missing file.  inv_arg NULL: no -i. */
const char *probation_logs_pointer(const char *job, const char *inv_arg, char *buf, size_t sz);
/* Extra information for people ("no baseline on these containers: throughput rule skipped"). */
const char *probation_note(const struct probation *p);
/* Median job Ktok/s over the window; -1 if not measured. */
double probation_ktok_s(const struct probation *p);
/* Samples excluded as warmup so far (or at the verdict). */
int probation_warmup_excluded(const struct probation *p);
/* The straggler rank named in a FAIL, or -1. */
int probation_straggler(const struct probation *p);
/* The warm window's samples (newest SAMPLES_MAX) as a baseline set for job/release; 0, or
 * -ENODATA when there are none.  ret_s->containers and time are left for the caller. */
int probation_samples(const struct probation *p, struct sample_set *ret_s);
/* One line on progress for the operator: ranks heartbeating, step, Ktok/s, phase of probation;
 * and the container that sent no status document for PROBATION_QUIET_S or more (its figures in
 * the line are that old), else the rank whose last heartbeat is that old. */
#define PROBATION_QUIET_S 10
void probation_describe(const struct probation *p, double now, char *buf, size_t buf_sz);

/* The frozen rank, one rule for the verdict and for `drover rebaseline` (which refuses to
 * measure a gang with one): a rank that made PROBATION_SILENT_MIN_STEPS steps of its own (so it
 * really ran), then sent no heartbeat for PROBATION_QUIET_S or more while it still runs (hung in
 * a collective, a deadlocked data loader, SIGSTOP).  Its peers block in their next collective
 * and fall silent too, then exit on their timeout (peer_lost 8, peer_stopped 12, or a plain
 * crash): their exits are not the cause, the rank whose heartbeats stopped first is. */
#define PROBATION_SILENT_MIN_STEPS 3
struct rank_silence {
    double hb_age_s; /* seconds since its last heartbeat; < 0: none yet */
    long long steps; /* steps it made in this gang: its step less the one it resumed from */
    bool ended;      /* it exited or was killed */
};
/* Which of the n ranks r froze: of those that made PROBATION_SILENT_MIN_STEPS steps, the one
 * whose last heartbeat is the oldest, when it still runs and is silent for PROBATION_QUIET_S or
 * more; -1 when none (the oldest one ended: its exit is a cause of its own).  On a rank found,
 * *ret_next is the rank whose heartbeats stopped next (the next oldest with a heartbeat that
 * still runs), -1 none; untouched when -1 is returned.  Pure. */
int probation_find_silent(const struct rank_silence *r, int n, int *ret_next);
/* rs's facts for probation_find_silent() into *ret: its last heartbeat's age and steps when that
 * heartbeat is of release, in phase train or checkpoint (else hb_age_s -1), and whether it
 * ended.  Read the same by the verdict and by rebaseline. */
void probation_rank_silence(const struct rank_status *rs, const char *release, struct rank_silence *ret);
/* Lowest step over the ranks and the checkpoint rank 0 resumed from (-1 unknown). */
void probation_progress(const struct probation *p, long long *ret_step, long long *ret_resumed);

/* Median of n values (sorts a copy).  n == 0 gives -1. */
double probation_median(const double *v, int n);

#endif
