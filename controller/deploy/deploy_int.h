/* controller/deploy/deploy_int.h: what the files of one deploy share (deploy.c: the deploy path
 * and its switch, probation and verdicts; fan.c: per-container work over the hosts; lease.c: the
 * job's lock and deploy lease; survey.c: what every container runs, and `plan`; rollback.c:
 * `rollback`, `promote`/`revert` by hand and the rollback target's check).  Not a contract with
 * another binary: those live in common/.
 */
#ifndef DROVER_DEPLOY_INT_H
#define DROVER_DEPLOY_INT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>

#include "common/agentcli.h"
#include "common/bundle.h"
#include "common/samples.h"
#include "common/sha256.h"
#include "controller/deploy/deploy.h"
#include "controller/deploy/holder.h"
#include "controller/deploy/objsync.h"
#include "controller/deploy/probation.h"
#include "controller/deploy/state.h"
#include "controller/transport/pct.h"

/* Set by the deploy's signal handlers (interrupt_handlers): the operator asked to stop. */
extern volatile sig_atomic_t deploy_interrupted;
/* An interrupt noted while a revert ran (on_sigint: "only the watch of its recovery ends"): the
 * recovery watch that follows (confirm_recovery) ends at once, not confirmed.  Cleared by each
 * revert_all and read once. */
extern volatile sig_atomic_t deploy_revert_interrupted;


struct deploy {
    struct fleet *f;
    const struct inventory *inv;
    const struct inv_job *job;
    char id[RELEASE_ID_LEN + 1];
    char sid[RELEASE_SHORT_LEN + 1];
    double probation_deadline_at;     /* wall clock: the agents' probation deadline of the last switch, 0 none */
    char name[MANIFEST_NAME_MAX];
    char blob[1024];           /* local bundle path */
    char blob_sha[SHA256_HEX_LEN + 1];
    uint64_t blob_size;
    char good[RELEASE_ID_LEN + 1];    /* last good release (from ct 0's agent) */
    char current[RELEASE_ID_LEN + 1]; /* what the job runs now (first container that says) */
    char previous[RELEASE_ID_LEN + 1];
    char key[1024];                   /* baseline key */
    double baseline;                  /* -1 none */
    bool rollback;                    /* an operator's rollback, not a failed deploy */
    bool rb_revert;                   /* rollback of a release never promoted (id) to the good
                                         one: its records name good as release and id as
                                         previous, the target first as for every record
                                         (common/histrec.h HISTORY_LAYOUT) */
    char earlier_good[RELEASE_ID_LEN + 1]; /* newest promoted release before good, bad nowhere */
    int nbad;                         /* releases some container marks bad (failed probation) */
    char bad[16][RELEASE_ID_LEN + 1];
    bool leased[INV_MAX_CTS];         /* we hold the job's deploy lease in that container */
    bool lease_status_known[INV_MAX_CTS]; /* its agent took the lease with --status: it knows
                                         release install --lease-release too */
    bool lease_with_record;           /* deploy: history_record gives the lease back with the
                                         record where the agent knows how (its last call there) */
    double lease_renew_at;            /* monotonic: the next renewal while watching */
    double lease_taken_at;            /* monotonic: the last take or renewal that held everywhere */
    bool lease_lost;                  /* a renewal was refused: another operator holds the lease */
    bool switching;                   /* the switch began: things were changed */
    char lease_lost_why[600];         /* "h1:101: job 'J' is being deployed by B (...)" */
    char holder[HOLDER_MAX];          /* who we are, for the leases: user@host/pid-N/boot-B/start-S */
    int ngoods;                       /* promoted releases, newest first (first container's) */
    char goods[STATUS_MAX_MARKS][RELEASE_ID_LEN + 1];
    bool analysis;                    /* deploy --analysis-only: the good release goes back anyway */
    bool no_confirm;                  /* rollback --now: do not watch the release gone back to */
    bool stopped_by_operator;         /* Ctrl-C/SIGTERM during probation: no verdict was reached */
    bool leave_stopped;               /* deploy: the job was stopped before it (the survey's
                                         deploy_job_is_stopped): a revert leaves it stopped */
    /* containers found stopped under the gang (`pct exec` there says "not running") during a
     * probation, a recovery or a switch's stop, with pct's words; "" where not */
    char ct_stopped[INV_MAX_CTS][200];
    /* the last lease take: containers whose agent answered but could not take the lease (not
     * held by another: its lease file could not be written, the container's disk full), with
     * the agent's words; "" where it was taken, refused by a holder, or not asked.  A deploy
     * goes on without it there (warned); a start starts nothing (stopstart.c) */
    char lease_failed[INV_MAX_CTS][400];
    /* the first lease take (`lease take --status`): containers where no status came because
     * nothing answered in time (the agent's daemon sent nothing for its own status deadline, or
     * this controller's deadline for the take passed), said as a stalled step, naming the
     * container and the deadline that fired; "" where not.  The survey that follows reports them without
     * asking again (another wait, which said its own 15 s instead) */
    char lease_mute[INV_MAX_CTS][600];
    /* of those, the containers whose agent CLI said its daemon sent nothing for its own status
     * deadline (stopped or wedged: this many seconds); 0 where not.  `drover stop`/`start` ask
     * nothing more there: its stop waited the daemon's longer deadline again (110 s), and said
     * "sent nothing for 110 s" after 170 */
    double lease_wedged_s[INV_MAX_CTS];
    /* containers whose host or agent answered nothing during the switch's or the revert's stop
     * (stop_old_gangs: not to the stop within the switch deadline, nor to a status asked after
     * it: a host's sshd or drover-agent stopped or hung), with what went unanswered; "" where
     * it answered.  A failed recovery names them first: the ranks elsewhere only wait for them */
    char no_answer[INV_MAX_CTS][200];
    /* watch_probation: after a failure, the containers that sent no status line in its last
     * look (WATCH_SETTLE_S, every stream open again): their host or agent is silent */
    bool watch_silent[INV_MAX_CTS];
    bool no_bad_mark;                 /* revert_all: the release reached no failing verdict (Ctrl-C,
                                         an analysis that passed): the agents do not mark it bad */
    struct sample_set *base;          /* the baseline's samples; NULL when none are known */
    struct agent_status *st;          /* scratch, large */
    struct relsrc rs, env;            /* the release and its environment (manifests v2) */
    bool has_rs, has_env;
    const char *labels[INV_MAX_CTS];
    bool attention[INV_MAX_CTS];      /* survey: the agent marked the job's environment faulty */
    bool has_gang[INV_MAX_CTS];       /* survey: the job has (or is about to restart) a gang there */
    bool agent_failed;                /* survey: some container was reached, its agent failed */
    char from[INV_MAX_CTS][RELEASE_ID_LEN + 1]; /* survey: the job's current release there */
    char attention_reason[INV_MAX_CTS][256];
    /* survey: how the inventory's job spec differs from the one the job runs (jobspec.h), as
     * the first container that differs says ("" everywhere the same); spec_only: the release
     * is current and good everywhere and only the spec differs; off_good_spec: some container
     * runs its good release with another spec than the good one (a spec change on probation,
     * held, or left running by auto_revert = false) */
    char spec_change[400];
    bool spec_only;
    bool off_good_spec;
    /* confirm_recovery: its release did not recover because an agent went back to the good
     * release by itself (a rollback's target that failed there) */
    bool recovery_went_back;
    char spec_note[460];              /* deploy: "job spec changed: ..." for its output and history */
    bool spec_unaware[INV_MAX_CTS];   /* activate: that agent refused --spec-digest (older) */
    /* The job's part of each container's status document as it came with the lease (`lease take
     * --status`), for the survey that follows: pre[i] 1 found (pre_js[i]), 2 the agent does not
     * know the job, 0 none came (an older agent, a daemon that did not answer): survey asks. */
    struct job_status *pre_js;        /* [ncts] */
    signed char pre[INV_MAX_CTS];
    unsigned pre_features[INV_MAX_CTS];
    /* survey: each container's view of the job as a whole (sv_found[i] false: its agent does not
     * know the job; sv_js [ncts], allocated by the first survey) and its agent's features
     * (STATUS_FEAT_*: 0 an agent older than them) */
    struct job_status *sv_js;
    bool sv_found[INV_MAX_CTS];
    unsigned features[INV_MAX_CTS];
    /* the switch: per container, the job spec digest the activation launches ("" unknown: an
     * agent without digests), which promote passes back (promote --spec-digest), and whether it
     * is the agent's recorded spec of (d->id, that digest) (rollback to an earlier pair) */
    char want_spec[INV_MAX_CTS][SPEC_DIGEST_LEN + 1];
    bool recorded[INV_MAX_CTS];
};

/* Per-container work spread over the job's hosts ([drover] parallel, transport/fanout.h): one
 * worker per host calls fn for that host's containers one after another (one SSH session per
 * host; pct holds a per-container lock), so N hosts cost about one host's time.  fn(cf, i) may
 * touch only container i's entries and its host's connection, and logs nothing: rc[i] (1: not
 * run) and err[i] are read afterwards, in container order, by the caller's thread. */
struct ct_fan {
    struct deploy *d;
    int (*fn)(struct ct_fan *cf, int i);
    const void *arg;           /* fn's input, read-only */
    bool skip[INV_MAX_CTS];    /* in: leave container i out (rc stays 1) */
    bool host_stops;           /* in: a failure skips the rest of its host's containers */
    int hosts[INV_MAX_HOSTS], nhosts;
    int rc[INV_MAX_CTS];
    char err[INV_MAX_CTS][2048];
    /* err[i] names its containers already (the batch's host exec got no answer:
     * objsync_stall_msg), the same text for every container of that host: ct_fan_said */
    bool named[INV_MAX_CTS];
    struct agent_status *scratch[INV_MAX_HOSTS]; /* per worker, for fn's status documents */
    /* Batch mode (batch_args set): the same agent command in every container of a host at once,
     * through one host exec (objsync_fan_agents), instead of one `pct exec` after another: a
     * host costs one round trip whatever its number of containers.  done(cf, i, r, res, why)
     * reads container i's answer as fn would have (res: its exit status and output), or, with
     * res NULL, the failure of its host's exec: r < 0 and why the connection's reason, or why
     * NULL when the host is unreachable (r from fleet_conn).  A host whose answer cannot be
     * read as a whole (-EBADMSG: a document past the exec's output limit) or whose command
     * line is too long falls back to fn, one container after another.  host_stops is not
     * supported here. */
    const char *const *batch_args;
    double batch_timeout_s;
    const char *batch_what; /* for the debug log: "lease", "status", ... */
    int (*done)(struct ct_fan *cf, int i, int r, struct exec_result *res, const char *why);
};

/* fan.c */
/* Run cf->fn (or cf->batch_args) for every container of the job that is not skipped, every
 * host at once.  Returns the number of containers that failed. */
int ct_fan_run(struct ct_fan *cf);
/* Thread index for cf->scratch: the position of container i's host in cf->hosts. */
int ct_fan_slot(const struct ct_fan *cf, int i);
/* The line that says container i's failure (cf->err[i]) once: "label: err", or err alone when
 * it names its containers already (cf->named[i]), in buf.  NULL when an earlier container's
 * line said the same (the containers of one host share a stalled host exec's message). */
const char *ct_fan_said(const struct ct_fan *cf, int i, char *buf, size_t sz);
/* Run the agent in ct with args; 0 when it exited 0, else -EIO with "label: reason" in err and
 * (ret_status not NULL) its exit status in *ret_status, or another -errno (not run, no status). */
int agent_call_status(struct deploy *d, const struct inv_ct *ct, const char *const *args,
                      double timeout_s, int *ret_status, char *err, size_t err_sz);
int agent_call(struct deploy *d, const struct inv_ct *ct, const char *const *args,
               double timeout_s, char *err, size_t err_sz);
/* agent_call_status and agent_call_out in one (ret_status and out may be NULL) */
int agent_call_full(struct deploy *d, const struct inv_ct *ct, const char *const *args,
                    double timeout_s, int *ret_status, char *out, size_t out_sz, char *err,
                    size_t err_sz);
/* agent_call, with the first line the agent printed on success in out ("" otherwise) */
int agent_call_out(struct deploy *d, const struct inv_ct *ct, const char *const *args, double timeout_s,
                   char *out, size_t out_sz, char *err, size_t err_sz);

/* One container's answer to an agent command run in every container of a job at once
 * (agent_fan_run). */
/* The warning for a stop whose gang in container label had a rank SIGKILLed after grace_s
 * (agent_stop_was_sigkilled; -1 unknown) into buf[sz]: its checkpoint on SIGTERM may be
 * missing.  Returns buf. */
const char *deploy_sigkilled_message(char *buf, size_t sz, const char *label, const char *job, double grace_s);

struct agent_fan_ct {
    bool asked;            /* the command was sent there (its stream opened) */
    bool ended;            /* it ended before the limit (false: not asked, or still running) */
    bool lost;             /* it ended by a lost connection (-EIO), not by the command's exit */
    char ok[300];          /* its last "ok..." line on stdout (at most 299 bytes), "" when none */
    char err[CONN_ERR_MAX]; /* not asked: why ("host unreachable" or the connection's words);
                            * ended: its last stderr line (pct's own error, say), "" when none */
    double took;           /* seconds from the start of the fan-out to its end, -1 if none */
};
/* Progress hooks of agent_fan_run, called in its thread (any may be NULL): asked once every
 * container was asked (ret[] says which were), ended the moment container i's command ends,
 * tick every tick_s seconds (0: never) while a command asked has not ended (elapsed: seconds
 * since the start, monotonic clock; limit: agent_fan_run's), so a long wait is not silent. */
struct agent_fan_hooks {
    void (*asked)(struct deploy *d, const struct agent_fan_ct ret[]);
    void (*ended)(struct deploy *d, int i, const struct agent_fan_ct *c);
    void (*tick)(struct deploy *d, const struct agent_fan_ct ret[], double elapsed, double limit);
    double tick_s;
    /* per container, a limit of its own, at most agent_fan_run's (NULL: that one for all): a
     * stream past it is left to go on on its own, as at the limit */
    const double *ct_limit;
};
/* Run the agent command argv (NULL: it could not be built, nothing is asked: -ENOMEM) in every
 * container of d's job that skip (NULL: none) does not leave out, all at once, one stream each,
 * until each has ended, limit seconds have passed since the start, or deploy_interrupted.
 * Fills ret[i] for every container (a skipped one: not asked, err ""); hooks (NULL: none) say
 * how it goes.  A command that has not ended is left to go on on its own.  Returns how many
 * were asked but did not end. */
int agent_fan_run(struct deploy *d, const char *const *argv, const bool *skip, double limit,
                  struct agent_fan_ct ret[], const struct agent_fan_hooks *hooks);
/* The two steps of agent_fan_run that judge what a stream gave, apart for the unit tests: a
 * stdout line (an "ok..." line is kept, the last one wins), and the stream's end (r: what
 * conn_stream_poll returned: -EPIPE the command ended, -EIO the connection was lost; err: its
 * last stderr line, NULL as ""; took: seconds since the start).  agent_fan_end returns false,
 * and changes nothing, when r is not an end. */
void agent_fan_line(struct agent_fan_ct *c, const char *line, size_t len);
bool agent_fan_end(struct agent_fan_ct *c, int r, const char *err, double took);
/* agent_fan_run's tick: true when elapsed has reached *next (a negative *next: never), which then
 * moves on past elapsed by whole steps of every (ticks missed by a slow turn are not made up). */
bool agent_fan_tick_due(double elapsed, double *next, double every);
/* "still waiting for WHAT to stop on h1:101, h2:201 (15 s of 180 s)": the containers of j asked
 * and not ended yet; returns how many (0: buf is ""). */
int agent_fan_waiting(char *buf, size_t buf_sz, const char *what, const struct inv_job *j,
                      const struct agent_fan_ct ret[], double elapsed, double limit);

/* lease.c */
/* The job's deploy lease in every container (agent/lease.h): the fleet, not this machine,
 * says who is deploying.  ttl: how long it holds without a renewal.  -EBUSY when another
 * operator holds it somewhere (the agent's line names the holder and its age): the leases taken
 * so far are given back.  An agent without leases (older) is let through with a warning. */
/* How long one container's `lease take` may take (its batched host exec): exec_timeout, and at
 * least a status query's time with --status (the document comes with it). */
double lease_take_timeout(double exec_timeout_s, bool with_status);
int leases_take(struct deploy *d, double ttl, bool with_status);
void leases_release(struct deploy *d);
void leases_renew_due(struct deploy *d, double now);
double lease_ttl(const struct deploy *d);
int deploy_lock(struct deploy *d, const char *verb);
bool leases_failed_refuse(const struct deploy *d, const char *verb);

/* survey.c */
bool deploy_is_bad(const struct deploy *d, const char *id);
int survey(struct deploy *d, bool quiet_errors, bool *ret_all_current, char *err, size_t err_sz);
/* The job's status in every container, asked of every host at once (skip[i] leaves container i
 * out): found[i] and js[i] where its agent answered and knows the job, found[i] false elsewhere
 * (not reached, no agent, the job unknown).  -ENOMEM, else 0. */
int survey_job_status(struct deploy *d, const bool skip[], struct job_status *js, bool *found);
int print_plan(struct deploy *d, json_t *out);
/* Is the throughput rule applied to this deploy, and if not, why?  base: the baseline's samples
 * (NULL: none, or only d->baseline's one number); good_pair: the deploy starts the job's good
 * release with the spec it was promoted with in every container.  The deploy and its plan ask
 * the same question, so the plan says what the deploy will do. */
enum tput_rule {
    TPUT_JUDGED,          /* against the baseline, the tolerance and confidence of the policy */
    TPUT_NO_BASELINE,     /* none yet: this release's samples become it */
    TPUT_RANKS_CHANGED,   /* measured with another number of ranks: its samples replace it */
    TPUT_GOOD_PAIR,       /* the good pair again: a regression could only revert it to itself */
};
enum tput_rule deploy_tput_rule(const struct deploy *d, const struct sample_set *base, bool good_pair);
/* After a survey, before staging: when release d->id failed its probation for the job before
 * (controller/deploy/pastfail.h), or its agent stopped it after hangs while it ran promoted
 * (survey_hang_stop_message), say when and why on stderr.  The job's history is read only
 * where the survey shows the release there (marked bad, or running unpromoted), so a deploy of
 * a new release costs no call; silent when the history cannot be read. */
void warn_failed_before(struct deploy *d);
/* The job's history, oldest first, into (*ret_h, *ret_n) (free *ret_h): state_dir's merged with
 * what the first container that shows release id (marked bad, or running unpromoted) keeps.
 * Never fails: what cannot be read is left out (logged at debug), *ret_h NULL with 0. */
void survey_history_of(struct deploy *d, const char *id, struct history_entry **ret_h, size_t *ret_n);
/* The same with the records of the first container the survey found the job in (any release):
 * for a release no container's status names any more.  *ret_h malloc'd (may be NULL). */
void survey_history_all(struct deploy *d, struct history_entry **ret_h, size_t *ret_n);
/* Where release id, promoted in some container (its goods), was stopped there by its agent
 * after hangs and not promoted since (pastfail_hang_stop, from survey_history_all: no container
 * shows such a release marked bad): the warning "WHAT <id> (<name>), which its agent stopped
 * ..." (pastfail_hang_warning) into buf, true; false, buf untouched, otherwise.  The one rule of
 * deploy, plan and rollback, to a release not marked bad that hung while promoted. */
bool survey_hang_stop_message(struct deploy *d, const char *id, const char *what, char *buf, size_t sz);

/* rollback.c */
/* The job's good release is in every store and verifies: 0 (or force, said); -ENOENT refused,
 * said; -EINTR on the operator's interrupt, not said (the caller says it). */
int check_rollback_target(struct deploy *d, bool force);
/* Before a switch to d->id stops anything: `release verify` of it in every container (each
 * failure logged).  0; -ENOENT with err = the first failure's line (and how many more);
 * -EINTR when the operator interrupted it; -ENOMEM. */
int check_switch_target(struct deploy *d, char *err, size_t err_sz);

/* The GPU environment preflight (drover-agent gpu-check) in every container of a job that names
 * GPUs, CUDA or GPU memory (or that a container was marked for): 0 when each passed, or with
 * force each fault said as a warning; a fault refuses (err says it and names --force).  A Ctrl-C
 * during it (deploy_interrupted) is -EINTR with nothing said: not judged, nor forced past. */
int gpu_check_cts(struct deploy *d, bool force, char *err, size_t err_sz);

/* deploy.c */
int deploy_init(struct deploy *d, struct fleet *f, const char *job, bool rollback);
void deploy_done(struct deploy *d, int lock);
void on_sigint(int sig);
void on_sigint_send(int sig);
void interrupt_handlers(void (*fn)(int));
/* One container's `history add` (history_record): short, a record must not hold up a verdict
 * on a host that stopped answering.  A host's containers are asked one after another. */
#define HISTORY_ADD_TIMEOUT_S 15
/* From the survey (d->sv_js; false before it): the job is stopped (`drover stop`, or its gang
 * ended, with a release current) in some container and runs a gang in none. */
bool deploy_job_is_stopped(const struct deploy *d);
/* Record the outcome (result, its reason code and the reason for people: controller/deploy/state.h)
 * in state_dir and in every container of the job, then notify. */
void history_record(struct deploy *d, const char *result, enum history_reason code, const char *reason,
                    double ktok);
/* After a switch: each release a container ran before it (the survey's current) that was never
 * promoted there, is not this deploy's and has no record of that run in the job's history
 * (state_dir and the agents', survey_history_of; history_tells_run) gets one, result "aborted",
 * said on stderr: the drover that deployed it died or was cut off during its probation, and a
 * release replaced that way used to leave no trace in the history. */
void history_record_abandoned(struct deploy *d);
/* Does the job's history h (n records, any jobs) tell how js's current run of js->current ended:
 * a record of that release newer than every record of the job's other releases and, where js
 * dates the run (no restart since its activation: age_s is the run's age), not older than the run
 * (now: the wall clock)?  A record of an earlier run of the same release (promoted once, then
 * deployed again by a drover that died during its probation) tells nothing of this one: it used
 * to, and the orphaned run got no "aborted" record. */
bool history_tells_run(const struct history_entry *h, size_t n, const char *job, const struct job_status *js,
                       double now);
/* A new rendezvous generation: 16 hex digits and a NUL, one per switch or operator's start
 * (agent activate/start --rdzv). */
void new_rdzv(char out[17]);
int activate_cts(struct deploy *d, double probation_deadline, char *err, size_t err_sz);
int taken_over(struct deploy *d, const char *what);
int confirm_recovery(struct deploy *d, const char *good, char *msg, size_t msg_sz);
/* code: the reason code of the record it writes (why the release is reverted), reason its words. */
int revert_all(struct deploy *d, enum history_reason code, const char *reason);
/* Does revert_all ask container i's agent `revert --no-start` (the job was stopped before the
 * deploy, d->leave_stopped, and its agent says STATUS_FEAT_REVERT_NO_START)?  Elsewhere a
 * stopped job's revert starts the good release, which revert_all then stops again (an older
 * agent; a mixed fleet, until `drover install` updates it). */
bool deploy_revert_leaves_stopped(const struct deploy *d, int i);
/* Promote d->id everywhere (with the spec digest d->want_spec[i] where the agent knows it); ss
 * (may be NULL) goes along as the job's new baseline samples.  Each failure logged; -EIO when
 * any container failed. */
int promote_all(struct deploy *d, double ktok, const struct sample_set *ss);
/* promote_all, leaving out container i where skip[i] (skip NULL: none left out): `drover
 * promote` where an earlier promote worked already. */
int promote_cts(struct deploy *d, double ktok, const struct sample_set *ss, const bool *skip);
struct sample_set *load_base_samples(struct deploy *d);
/* Follow one watch stream per container and feed p until it decides (what labels the progress
 * lines); Ctrl-C (deploy_interrupted) or a lost lease end it PENDING. */
enum probation_verdict watch_probation(struct deploy *d, struct probation *p, const char *what);
/* After a pass: the window's samples (NULL when none), keyed to d's containers, to keep as the
 * baseline (free it). */
struct sample_set *pass_samples(struct deploy *d, const struct probation *p);

#endif
