/* controller/deploy/deploy.h: the deploy state machine (stage, push, verify, preflight, activate,
 * probation, promote or revert), `plan`, and `rollback`.  Each returns a drover exit code
 * (fleet.h) and has printed its result on stdout and its diagnostics on stderr.
 */
#ifndef DROVER_DEPLOY_H
#define DROVER_DEPLOY_H

#include <stdbool.h>
#include <stdio.h>

#include "controller/transport/fleet.h"

struct deploy_opts {
    const char *dir;   /* release directory */
    const char *job;   /* job name; NULL = the inventory's only job */
    bool dry_run;      /* plan only: bundle, look, print; change nothing */
    bool force;        /* deploy even when the rollback target is missing or fails verification,
                          or where the GPU environment check fails */
    bool stage_only;   /* put the release into every container and verify it; switch nothing */
    const char *env_dir; /* an environment (e.g. a venv) deployed as its own release first and
                          * named by the code release (NULL: none) */
    bool analysis_only; /* probation and verdict, then the good release back whatever it says */
    struct json_t *plan_out; /* dry run: each job's plan is also appended here as JSON (-o json) */
    struct json_t *unchanged_out; /* -o json: each job found already current and promoted with
                                   * this spec everywhere (nothing done) is appended by name */
};

int deploy_run(struct fleet *f, const struct deploy_opts *o);

/* Several jobs in waves.  First every job's local checks (the release and --env directories read,
 * each job's command and preflight in them), before any host is contacted: bad input in any job
 * exits 2 and deploys nothing.  Then the first `canary` jobs (policy of the first job) one at a time, then
 * the rest in inventory order (one at a time: max_parallel > 1 is not used yet).  The first
 * failure stops the wave, and jobs this wave already promoted are rolled back to the release
 * they ran before (deploy_rollback).  Returns the failing job's exit code (4 if a rollback of
 * an earlier job failed), or 0. */
int deploy_wave(struct fleet *f, const struct deploy_opts *o, const char *const *jobs, int njobs);

/* `drover rollback --job J [--to RELEASE [--force]] [--now] [--dry-run]`, decided from every
 * container's view (rbtarget.h): a job running an unpromoted pair anywhere goes back to its good
 * pair; a job on its good pair everywhere goes to the newest earlier promoted (release, job spec)
 * pair that no container marks bad (not simply "previous"): after a promoted change of the spec
 * alone, the same release with its earlier spec, which the agents start from their own record.
 * Containers that disagree on the good release or the target are refused, naming them.  to: a
 * release id or prefix to go to instead (its newest promoted spec other than what runs, else the
 * inventory's); one marked bad needs force.  Confirms that the job recovers, except with now (an
 * incident: no analysis, no waiting for the release gone back to; the agents' own crash-loop
 * rules still apply).  dry_run: say where it would go; no lock, no lease, nothing changed. */
int deploy_rollback(struct fleet *f, const char *job, const char *to, bool force, bool now, bool dry_run);

/* `drover rollback --job J --to ID` without --force, before any host is contacted: where the
 * history in state_dir says the one release of J that ID begins with failed its probation
 * (pastfail_find_prefix), refuses, said (the release, when and why it failed, --force): exit 1.
 * EXIT_OK otherwise (no such record, no history, several releases match, J not in the
 * inventory): deploy_rollback decides after its survey, from the agents' bad marks. */
int deploy_rollback_refuse_failed(const struct inventory *inv, const char *job, const char *to);

/* `drover promote --job J` / `drover revert --job J`: decide a release held on an inconclusive
 * (or no-data) verdict by hand.  promote records the held samples as the baseline; revert goes
 * back to the good release and confirms it trains.  Both refuse when J runs its good release. */
int deploy_decide_held(struct fleet *f, const char *job, bool promote);

/* `drover rebaseline --job J`: J must run its good (release, job spec) pair everywhere, every
 * rank training.  That gang is watched as a probation watches a candidate (nothing switched or
 * stopped), judged on health alone, and on a pass its warm samples become J's baseline (agents
 * and state_dir) and the history records `rebaselined`.  Refused (exit 1, baseline unchanged)
 * when J runs anything else, or a rank of it froze (the verdict's rule, probation_find_silent());
 * a failed or interrupted measurement changes nothing either. */
int deploy_rebaseline(struct fleet *f, const char *job);

/* What a deploy says when it could not ask every container (err: the first failure):
 * the hint to install the agent only when agent_failed (a container was reached and its
 * agent failed there), never for a connection that failed (a timeout is not a missing agent). */
void deploy_unsurveyed_message(char *buf, size_t sz, const char *err, bool agent_failed, const char *job);

/* Why `drover promote`/`revert --job J` (promote: which) has nothing to decide: J runs its good
 * pair, or (runs_nothing) no container runs any release of J (never deployed there): that one
 * said it ran "its good release". */
void deploy_nothing_held_message(char *buf, size_t sz, const char *job, bool runs_nothing, bool promote);

/* What `drover promote` or `drover revert` (promote false) of job says when the job is stopped in
 * every container that knows it (where: their labels, ", "-joined; `drover stop --job J`, or its
 * gang ended): it runs nothing to decide on, and `drover start --job J` runs it again.  It used
 * to say "job 'J' runs its good release" (stopped on it) or go on to promote a release that did
 * not run. */
void deploy_stopped_held_message(char *buf, size_t sz, const char *job, const char *where, bool promote);

/* The line that closes a deploy stopped before anything was switched (sid: its release), from
 * the survey: labels[i], marked[i] (the agent marked the job there for attention: environment
 * fault, so the job is failed and nothing of it runs there) and has_gang[i] of each of the
 * job's ncts containers; gpu_refused: gpu-check refused the deploy.  Without a marked container
 * "the running release keeps running untouched" where a gang runs and "nothing was started: job
 * 'J' stays stopped" (in the containers named, when it runs in others) where none does (it
 * used to say the running release kept running on a job `drover stop` had stopped); with
 * marked ones, that the job stays stopped there,
 * what runs in the others, and (gpu_refused) what to do: fix the GPU environment, gpu-check,
 * or deploy --force. */
void deploy_aborted_message(char *buf, size_t sz, const char *sid, const char *job, const char *const labels[],
                            const bool marked[], const bool has_gang[], int ncts, bool gpu_refused);

/* One container's part in a switch aborted in its first phase: why its old gang is not known
 * gone, or what became of its old release.  Said "HEAD on NAMES TAIL" (head "interrupted while
 * the old gang was stopping", no tail; head "the old gang", tail " was not gone within ..."), so
 * one text names every container it applies to.  An empty head: nothing to say there. */
struct deploy_ct_said {
    char head[160];
    char tail[400];
};

/* The verdict of a switch (deploy or rollback) aborted in its first phase, into buf[sz]:
 * "switch to SID aborted before anything new started: WHY.  Nothing of SID was started
 * anywhere; DONE".  why[i] and done[i] of the n containers labels[i]: each distinct text said
 * once, with the containers it applies to in inventory order (at most four named, then "and N
 * more"), distinct texts joined by "; ".  The same reason used to be said once per container:
 * a Ctrl-C while the old gangs stopped said "interrupted while its old gang was stopping" three
 * times on the lab. */
void deploy_switch_aborted_message(char *buf, size_t sz, const char *sid, const char *const labels[], int n,
                                   const struct deploy_ct_said why[], const struct deploy_ct_said done[]);

/* An activation that failed after the switch had stopped the old gang in nstopped containers
 * (> 0): the agent's reason in err[sz] says "nothing was stopped" (true of its own request, not
 * of the switch), which is taken out, and what the switch stopped is said instead.  A rollback
 * said "ROLLBACK FAILED ...; nothing was stopped" with the job down. */
void deploy_activate_failed_message(char *err, size_t sz, int nstopped);

/* What a deploy of the job's good pair says once promoted, its throughput rule skipped: its rate
 * k against the baseline base_k (both Ktok/s, > 0) measured on base_sid, kept.  Below
 * -tolerance: where base_sid is the release itself, that the cause lies outside it and what to
 * do; else how to make its rate the baseline. */
const char *deploy_own_baseline_note(char *buf, size_t sz, const char *sid, const char *base_sid, const char *job,
                                     double k, double base_k, double tolerance);

/* Did an agent call in a container (agent_call_status: r, the exit status it set, err) find no
 * agent daemon there: the host answered, pct ran the agent CLI, and it exited 3 (no daemon)
 * saying that none listens (agent_said_no_daemon), not that one is wedged?  Not a host to wait
 * for: an agent to start again (drover install).  Pure. */
bool deploy_call_found_no_agent(int r, int status, const char *err);

/* What REVERT FAILED says when the revert did not reach every container (what: "revert failed
 * on 1 of 2 containers"; unreached: those containers' labels, ", "-joined, "" or NULL none;
 * no_agent: those where the host answered but no agent daemon runs (its CLI said so, exit 3),
 * the same way; sid: the release it reverted from; deadline_at: the wall-clock time of its
 * agents' probation deadline, 0 unknown).  True whether the job is down or still runs that
 * release there: an unreached container may still run it, its agent reverts on its own at its
 * probation deadline, and `drover rollback --job J` does it now once its host answers; where no
 * agent runs nothing reverts it: `drover install --job J` starts the agent (which takes the job
 * up with its probation deadline), then `drover rollback --job J`. */
void deploy_revert_failed_message(char *buf, size_t sz, const char *what, const char *unreached,
                                  const char *no_agent, const char *sid, double deadline_at,
                                  const char *job);

/* What a revert of a deploy onto a stopped job says once the good release (good: its short id)
 * is current again everywhere: that the job is left stopped, as it was before the deploy, and
 * how to run it; running: the containers where stopping it again did not succeed, each with
 * why, ", "-joined ("" or NULL: none), where it may run and how to stop it. */
void deploy_left_stopped_message(char *buf, size_t sz, const char *job, const char *good, const char *running);

/* What REVERT FAILED says when stopped containers (of the job's ncts; names: "h2:201 (pct: why)",
 * ", "-joined) kept the good release (good: its short id; good_name: its manifest name, "" or
 * NULL unknown) from forming a gang in the others: how to start them (cmds: "`pct start N` on
 * H", ", "-joined) and to deploy the good release again, by its name where drover knows it. */
void deploy_stopped_cts_message(char *buf, size_t sz, const char *job, int stopped, int ncts, const char *names,
                                const char *cmds, const char *good, const char *good_name);

/* The warning a revert of job gives when left containers did not confirm the stop of the failed
 * release sid; cut of them only because the operator's Ctrl-C ended the wait (nothing timed out:
 * their agents go on stopping it).  Said "within the switch deadline" for a Ctrl-C <1 s after it. */
void deploy_revert_unstopped_message(char *buf, size_t sz, const char *job, int left, int cut, const char *sid);

/* The containers (labels[i] of n) whose host or agent answered nothing during a revert or its
 * recovery watch (no_answer[i]: what went unanswered, "" none; silent[i]: no status in the
 * watch's last look), into buf[sz]: "h2:201 answered nothing (WHAT)", "; "-joined.  The cause
 * of a recovery that failed there: the ranks elsewhere only wait for them.  Returns how many
 * were named (0: buf is ""). */
int deploy_silent_cts(char *buf, size_t sz, const char *const labels[], int n, const char (*no_answer)[200],
                      const bool silent[]);

/* What REVERT FAILED says when the revert reached every container but the job's recovery was
 * not confirmed (why: what the watching found): the job may be down, where to look. */
void deploy_revert_unconfirmed_message(char *buf, size_t sz, const char *why, const char *job);

/* What a deploy says on stderr when its release (short id sid) passed probation but its promote
 * failed in some containers (pdl: the probation deadline, seconds): the agents' revert at the
 * deadline, and `drover promote --job J` to finish the promote where it is still held (or the
 * deploy again). */
void deploy_promote_failed_message(char *buf, size_t sz, const char *sid, const char *job, double pdl);

/* How a rollback of job to target (short id) from the good release good failed after its
 * switch began (its ROLLBACK FAILED line, exit 4). */
enum rollback_failure {
    RBF_ACTIVATE, /* activated in some containers only: the rollback reverts to good everywhere
                     (said so; with no good release, the split and the deploy that ends it) */
    RBF_RECOVERY, /* activated everywhere, did not recover, its agents have not gone back yet */
    RBF_PROMOTE,  /* trains (or --now), but its promote failed in some containers */
};
/* What ROLLBACK FAILED says after why (what failed): the state the job is left in (target
 * unpromoted on its agents' probation, which ends at deadline_at, wall clock, 0 unknown) and
 * the command that puts good back now and watches it: `drover rollback --job J`; after a partial
 * promote (RBF_PROMOTE: target recovered) `drover promote --job J`, which finishes it where target
 * is still held, or `drover rollback --job J --to good`, the containers disagreeing on the good
 * release.  Never `drover
 * promote` of a target that did not recover: it would run as the good release, no probation
 * watching it.  It said "look with `drover status`", or nothing.  RBF_ACTIVATE says instead
 * that good is being put back everywhere now, as one gang (the rollback's revert, whose outcome
 * follows), or, good NULL, that there is none to put back and a deploy ends the split. */
void deploy_rollback_failed_message(char *buf, size_t sz, enum rollback_failure kind, const char *why,
                                    const char *job, const char *target, const char *good, double deadline_at);

/* Say REVERT FAILED for job with the message said, once wherever it is seen: on out, which
 * scripts read (bold red on a TTY), and the same words on err only when err is another file
 * (stdout redirected, stderr a terminal).  Where both are one file (a terminal, `2>&1`, -o json's
 * stdout onto stderr) it was said twice. */
void deploy_say_revert_failed(FILE *out, FILE *err, const char *job, const char *said);

/* A deploy onto a job that is stopped (`drover stop`, or its gang ended) starts it: the deploy
 * says so before it acts, and plan says that it would (the survey counts only a running job as
 * current, so even the release it ran is launched again, on probation).  Gathered container by
 * container, then said in one line by stopped_start_message, so deploy and plan word it alike. */
struct stopped_start {
    char who[1024]; /* "h1:101, h1:102": the containers where the job is stopped */
    size_t off;
    int n;
    bool same;      /* each of them ran the release deployed: `drover start` is the other way */
};

void stopped_start_init(struct stopped_start *s);

/* Counts container label when js (its agent's view of the job; NULL: it does not know the job)
 * is stopped with a current release; release: the one deployed.  True when it was counted. */
bool stopped_start_add(struct stopped_start *s, const char *label, const struct job_status *js,
                       const char *release);

/* The line (no newline) for job, release sid (name): "job 'J' is stopped in h1:101 (...): this
 * deploy starts it, ..." or, would (plan), "... a deploy would start it, ..."; "" when no
 * container was counted.  Returns buf. */
const char *stopped_start_message(const struct stopped_start *s, bool would, const char *job,
                                  const char *sid, const char *name, char *buf, size_t sz);

/* Pick the job: by name, or the only one.  NULL (and a logged error) otherwise. */
const struct inv_job *deploy_pick_job(const struct inventory *inv, const char *name);

#endif
