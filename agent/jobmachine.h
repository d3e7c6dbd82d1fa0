/* agent/jobmachine.h: every start, restart, stop, promote and revert rule of one job, in one pure
 * state machine.
 *
 * Input: one event (a request from the control socket, a rank's exit, a heartbeat fact, the gang
 * being gone, the result of a start, a tick, the agent starting or shutting down) plus the time
 * on the agent's monotonic clock.  Output: the job's next state, written into its job_rec and
 * jm_rt, and a list of effects (stop the gang, switch current, start the gang, journal an event,
 * answer the client, save, GC) that the daemon applies in order.  The machine does no I/O, reads
 * no clock and forks nothing, so every rule is unit-tested from tables of events and expected
 * effects (tests/unit/test-agent-jobmachine.c).
 *
 * "Why did it roll back?" is answered here and only here: jm_policy_on_exit (exit codes, crash
 * window, promoted or not, automatic rollback cap), the probation deadline, the revert after a
 * failed start, and the non-finite-loss stop.
 *
 * Deadlines (backoff, probation, switch) are on the daemon's monotonic clock (time_mono); nothing here
 * ever sees the wall clock, so a clock step changes no verdict.
 */
#ifndef DROVER_AGENT_JOBMACHINE_H
#define DROVER_AGENT_JOBMACHINE_H

#include <stdbool.h>

#include "agent/agent.h"
#include "agent/state.h"

#define JM_CRASH_HISTORY 32
#define JM_MAX_EFFECTS 24
#define JM_TEXT_MAX 600
/* Consecutive non-finite steps a heartbeat may report before the gang counts as diverged. */
#define JM_DIVERGED_STEPS 3
/* GANG_GONE code for a gang the agent stopped because a rank's heartbeats reported
 * JM_DIVERGED_STEPS non-finite steps: treated like drover-train's "diverged" exit. */
#define JM_EXIT_DIVERGED (-2)
/* GANG_GONE code for a gang the agent stopped because a liveness deadline tripped
 * (agent/liveness.h: no first step, silent, stalled, checkpoint too long).  A release on
 * probation (also one promoted before that runs a probation again) is reverted; a promoted one
 * restarts from its newest checkpoint with backoff, at most crash_limit times within its hang
 * window, then fails.  A hang is seen only once its
 * deadline has passed, so back-to-back hangs are at least that deadline apart and would never
 * fit in crash_window: the hang window is crash_window widened, for each restart of the budget,
 * by the deadline that tripped and the longest backoff (jm_hang_window_s). */
#define JM_EXIT_HUNG (-3)
/* drover-train's "device" exit (docs/errors.md, 9): the backend could not start or failed
 * mid-step.  An environment fault: the job stops as failed with a reason that starts with
 * JM_ATTENTION_PREFIX, never a rollback and never a restart loop. */
#define JM_EXIT_DEVICE 9
/* The least time a restart after drover-train's "peer_stopped" exit (docs/errors.md, 12) waits,
 * longer when the backoff is.  Such a rank stopped because a rank in another container was
 * stopped: that container's agent stopping what a killed agent left (it relaunches its part
 * at once), or a liveness trip there, and then the gang must come back; but also a fleet-wide
 * `drover stop` or a deploy's stop phase that reached that container first, in which case this
 * container's own stop request is on its way.  The controller asks every container at once
 * (controller/deploy/fan.c, agent_fan_run: one stream per container, opened one after another
 * on connections already made), so those requests arrive within a few seconds of each other;
 * a stop, switch, revert or start that arrives within this grace cancels the restart, and the
 * exit does not count in the crash window.  The restarted ranks find the others still in their
 * rendezvous (drover-train's dist_timeout, 60 s by default, is longer). */
#define JM_PEER_STOP_GRACE_S 15.0
/* How a reason marks a container whose environment needs attention, for people (status and top
 * show it); the controller decides on its code, STATUS_RC_ENVIRONMENT. */
#define JM_ATTENTION_PREFIX STATUS_ATTENTION_PREFIX

/* ---- policy knobs (drover-agent daemon flags) ---- */
struct crash_policy {
    int crash_limit;          /* K abnormal exits ... */
    double crash_window_s;    /* ... within W seconds make a crash loop */
    int max_auto_rollbacks;   /* consecutive automatic rollbacks before giving up */
    double backoff_initial_s; /* 1 s, doubling ... */
    double backoff_max_s;     /* ... capped at 60 s */
};
void crash_policy_default(struct crash_policy *p);

enum policy_action {
    POLICY_DONE,    /* clean finish: leave it stopped */
    POLICY_RESTART, /* same release again after jm_policy_backoff() */
    POLICY_REVERT,  /* back to the job's last good release */
    POLICY_FAIL,    /* give up: state failed */
};

/* Exit codes of drover-train that mean "restarting the same release cannot help"
 * (docs/errors.md, "retry helps? no": usage 2, config 3, data 4, disk full 6, diverged 7,
 * nomem 10, selftest 11). */
bool policy_exit_is_nonretryable(int exit_code);
/* What to do once a gang ended because rank exit_rank exited with (exit_code, exit_signal)
 * (exit_code JM_EXIT_DIVERGED: stopped for non-finite loss).  crashes_in_window counts abnormal
 * exits of this release in the last window_s seconds including this one (crash_window_s, or
 * jm_hang_window_s for a hang).  reason gets one line, code its cause (common/status.h: what
 * the controller decides on).  promoted: the release is judged as a promoted one (the good
 * pair, or one promoted once that runs no probation now), never reverted. */
enum policy_action policy_on_gang_exit(const struct crash_policy *p, bool promoted, bool has_good,
                                       int exit_rank, int exit_code, int exit_signal,
                                       int crashes_in_window, double window_s, int auto_rollbacks,
                                       enum status_reason *code, char *reason, size_t reasonsz);
/* The window in which a promoted release's hangs are counted against crash_limit, for a hang
 * whose deadline was limit_s: crash_window_s + crash_limit * (limit_s + backoff_max_s).  With
 * the defaults and the 2 min silence deadline: 660 s. */
double jm_hang_window_s(const struct crash_policy *p, double limit_s);
/* Delay before restart number n (1-based). */
double policy_backoff(const struct crash_policy *p, int n);

/* ---- the machine ---- */

enum jm_next { JM_NEXT_NONE, JM_NEXT_ACTIVATE, JM_NEXT_REVERT_AUTO, JM_NEXT_REVERT, JM_NEXT_RESTART,
               JM_NEXT_STOP, JM_NEXT_START };
/* Why a START_GANG effect was asked for; decides what its result does. */
enum jm_start { JM_START_NONE, JM_START_ACTIVATE, JM_START_REVERT, JM_START_REVERT_AUTO, JM_START_RESTART,
               JM_START_RESUME, JM_START_REQUEST };

/* The runtime half of a job (the durable half is its job_rec).  Owned by the daemon, one per
 * job; jm_rt_init before use, jm_rt_done frees next_spec. */
struct jm_rt {
    enum jm_next next;            /* the operation waiting for the old gang to be gone */
    struct job_spec next_spec;    /* JM_NEXT_ACTIVATE: owned */
    double next_probation_s;
    char next_reason[256];
    enum status_reason next_code; /* next_reason's cause */
    bool next_no_mark;            /* JM_NEXT_REVERT: the release left reached no verdict */
    bool next_not_blamed;         /* JM_NEXT_REVERT_AUTO: the release left is not to blame: one
                                     promoted before whose gang could not start here (its exec
                                     failed: this container's fault, it ran here before) */
    bool next_no_start;           /* JM_NEXT_REVERT: make the good release current, leave the job
                                     stopped (revert --no-start) */
    char next_rdzv[SPEC_RDZV_MAX]; /* JM_NEXT_REVERT: the good release's new generation ("" keep) */
    bool next_regen;              /* JM_NEXT_REVERT: the good gang ran, stopped only to take
                                     next_rdzv */
    double next_restart_after_s;  /* JM_NEXT_STOP: a switch's stop: the switch deadline (0 none) */
    enum jm_start starting;       /* a START_GANG effect is out: what its result means */
    enum gang_state start_state;  /* state once it started */
    char start_reason[JM_TEXT_MAX];
    enum status_reason start_code;
    double backoff_until;         /* JM_NEXT_RESTART: monotonic */
    bool restart_peer_stopped;    /* JM_NEXT_RESTART after a "peer_stopped" exit: a request that
                                     cancels it takes that exit out of the crash window */
    bool restart_peer_exit;       /* JM_NEXT_RESTART after an exit for a rank elsewhere (peer_lost,
                                     peer_stopped): the status document says peer_exit */
    bool last_restart_peer_exit;  /* the last restart was such a one (until the next activation,
                                     revert or start): peer_exit too, once restarted */
    double crash_mono[JM_CRASH_HISTORY];
    int ncrash;
    bool gang;                    /* a gang of this job exists (started, not yet gone) */
    bool stopping;                /* the machine asked it to stop */
    bool gone_sigkilled;          /* the gang just gone needed SIGKILL after its grace ... */
    double gone_grace_s;          /* ... of this many seconds: a stop's answer says so */
    bool quit;                    /* the agent is shutting down */
};
void jm_rt_init(struct jm_rt *rt);
void jm_rt_done(struct jm_rt *rt);
/* true while an operation (activate, revert, stop) waits; a pending restart is not one. */
bool jm_busy(const struct jm_rt *rt);
/* The job's gang is backing off, or was last restarted, only because its rank ended for a rank
 * elsewhere (peer_lost, peer_stopped): the status document's "peer_exit". */
bool jm_peer_exit(const struct job_rec *j, const struct jm_rt *rt);

enum jm_ev {
    JM_EV_ACTIVATE,     /* spec (release in the store, command checked), value = probation_s */
    JM_EV_PROMOTE,      /* release, value = Ktok/s, spec_digest: the pair the controller judged
                           (NULL or "": whatever runs, an older controller); refused when the
                           current pair is another (common/specdigest.h, spec_digest_matches) */
    JM_EV_REVERT,       /* text = reason (may be ""); value 1: the release left reached no
                           verdict (operator's Ctrl-C, a passed analysis): not marked bad;
                           rdzv: the good release's new rendezvous generation ("" keep).  While
                           a requested stop is in flight it replaces it, as START does (the
                           controller's two-phase revert whose stop was slow somewhere).
                           no_start: the good release becomes current and nothing is started
                           (a gang that runs is stopped first): the job ends stopped as a STOP
                           leaves it, so an agent restart starts nothing and START runs the
                           good release (a deploy onto a job the operator had stopped) */
    JM_EV_STOP,         /* value > 0: the first phase of a switch: once the gang is gone, the
                           job's switch deadline is armed at now + value; if no activate, revert,
                           start or stop comes by then (the controller died between the phases),
                           the machine starts the release it stopped again on its own */
    JM_EV_START,        /* text = a new rendezvous generation ("" keep): start the current release
                           again with its recorded spec (the controller's aborted switch).  While a
                           requested stop is in flight it replaces it: the job starts once the gang
                           is gone, so no gang is stopped for a switch that did not happen */
    JM_EV_RANK_EXIT,    /* rank, code, sig: the first rank that exited on its own */
    JM_EV_DIVERGED,     /* rank: JM_DIVERGED_STEPS consecutive non-finite steps */
    JM_EV_HUNG,         /* rank, text = the liveness verdict (agent/liveness.h) */
    JM_EV_TRAINING,     /* every rank's last heartbeat is in phase train */
    JM_EV_GANG_GONE,    /* every process reaped.  rank >= 0: the gang ended on its own: that
                           rank's (code, sig), code JM_EXIT_DIVERGED when stopped for non-finite
                           loss; text = its last heartbeat's error ("" none).  rank < 0: stopped
                           by the agent */
    JM_EV_START_OK,     /* the START_GANG effect started every rank */
    JM_EV_START_FAILED, /* text = why */
    JM_EV_TICK,
    JM_EV_AGENT_START,  /* the agent started with this job in state.json and no gang of it */
    JM_EV_ADOPT,        /* the agent started and re-adopted the job's gang (text: pids) */
    JM_EV_SHUTDOWN,     /* SIGTERM: the agent leaves; the gang keeps running for the next one */
};

struct jm_event {
    enum jm_ev kind;
    double now;                  /* time_mono() */
    const struct job_spec *spec; /* ACTIVATE (copied) */
    const char *release;         /* PROMOTE */
    double value;
    int rank, code, sig;
    const char *text;
    const char *rdzv;            /* REVERT (may be NULL) */
    const char *spec_digest;     /* PROMOTE (may be NULL) */
    bool no_start;               /* REVERT: leave the job stopped on its good release */
    double hang_limit_s;         /* GANG_GONE with JM_EXIT_HUNG: the liveness deadline that tripped */
    bool rebooted;               /* AGENT_START: the container restarted since the state was saved
                                    (another boot id): its gang ended with it, and a job relaunched
                                    in the new boot gets a fresh restart budget (a new run) */
    bool sigkilled;              /* GANG_GONE: a rank outlived SIGTERM for grace_s: SIGKILL sent */
    double grace_s;              /* GANG_GONE with sigkilled: the grace it had */
};

enum jm_fx {
    JM_FX_STOP_GANG,  /* SIGTERM the gang, SIGKILL after its grace */
    JM_FX_CLEAR_GANG, /* forget the gone gang */
    JM_FX_SWITCH,     /* release: point jobs/<job>/current at it */
    JM_FX_START_GANG, /* start job_rec.current's recorded spec as generation `code`; feed back
                         START_OK or START_FAILED.  Always the last effect of a step. */
    JM_FX_EVENT,      /* what, release, text: one journal line */
    JM_FX_REPLY,      /* answer the client of this request now: code (0 ok), text */
    JM_FX_WAIT,       /* the client of this request waits for the pending operation */
    JM_FX_ANSWER,     /* answer the waiting client (if any): code (0 ok), text */
    JM_FX_SAVE,       /* write state.json */
    JM_FX_GC,         /* release GC */
    JM_FX_HISTORY,    /* release, text: the agent went back from release, never promoted, on its
                         own (crash loop, hang, non-finite loss, failed start, probation
                         deadline): a record in the job's history
                         (common/histrec.h), by the agent, since no drover may be there to write
                         one (a drover that watched it records its verdict too; `drover history`
                         shows that one only, state.h STATE_HISTORY_FOLD_S); code
                         JM_HISTORY_STOPPED: the agent stopped release, the promoted one, for a
                         failure not retried, and marked it bad (a record `failed`, reason code
                         agent-stopped); JM_HISTORY_STOPPED_HUNG: it stopped release, the
                         promoted one, once its restart budget was spent on hangs, and marked
                         nothing (`failed`, reason code agent-stopped-hung) */
};

#define JM_HISTORY_STOPPED 1      /* JM_FX_HISTORY's codes: see there */
#define JM_HISTORY_STOPPED_HUNG 2

struct jm_effect {
    enum jm_fx kind;
    int code;
    char what[24];
    char release[RELEASE_ID_LEN + 1];
    char text[JM_TEXT_MAX];
};

struct jm_effects {
    int n;
    struct jm_effect fx[JM_MAX_EFFECTS];
};

/* Feed one event to job j.  Updates j and rt and appends the effects to out (out->n is not
 * reset).  Never fails: a rule that cannot proceed ends in state failed with a reason. */
void jm_step(const struct crash_policy *p, struct job_rec *j, struct jm_rt *rt,
             const struct jm_event *ev, struct jm_effects *out);

const char *jm_fx_name(enum jm_fx k);

#endif
