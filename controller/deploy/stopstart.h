/* controller/deploy/stopstart.h: `drover stop` and `drover start` of a job: the per-container
 * judgement of the agents' answers and the exit code it makes (pure, unit-tested), and the verb
 * itself (stopstart.c), which runs `drover-agent stop|start --job J` in every container of the
 * job at once under the job's lock and deploy lease, as deploy and rollback do.
 */
#ifndef DROVER_STOPSTART_H
#define DROVER_STOPSTART_H

#include <stdbool.h>
#include <stddef.h>

#include "common/status.h"
#include "controller/transport/fleet.h"

/* What one container's answer means. */
enum stopstart_outcome {
    SS_DONE,        /* stopped (no process of the gang is left), or started */
    SS_ALREADY,     /* start: it was running already; stop: the lease's status had it stopped */
    SS_CT_STOPPED,  /* the container itself is not running (pct says so): nothing runs there
                     * now, but its agent starts the job again with the container (a failure) */
    SS_FAILED,      /* the agent answered and refused or failed (its words kept) */
    SS_NO_ANSWER,   /* no answer within the deadline: the agent may go on */
    SS_INTERRUPTED, /* Ctrl-C before it answered: the agent goes on with the request */
    SS_UNREACHABLE, /* the host could not be reached: nothing was asked there */
    /* start: its gang ran as another rendezvous generation than the one the others start as
     * (a gang of several containers that ran in part): stopped, then started with the others */
    SS_RESTARTED,
    /* start: nothing was started there, because the part of the gang that ran elsewhere could
     * not be stopped first (it would have run on as another generation) */
    SS_HELD_BACK,
};

/* One container's outcome from what came back.  asked: the command was sent; ok_line: the
 * agent's "ok..." line on stdout (NULL: none came); ended: the command ended before the
 * deadline; ct_stopped: pct said the container is not running. */
enum stopstart_outcome stopstart_judge(bool start, bool asked, const char *ok_line, bool ended,
                                       bool ct_stopped);

/* The agent's (or pct's) words for one container, as kept: up to STOPSTART_SAID_MAX - 1 bytes. */
#define STOPSTART_SAID_MAX 600

/* The word of the per-container summary: "stopped", "started", "already running",
 * "already stopped", "container stopped", "FAILED", "NO ANSWER", "INTERRUPTED", "UNREACHABLE",
 * "restarted", "NOT STARTED". */
const char *stopstart_word(bool start, enum stopstart_outcome o);

/* Is o a success of the verb?  A stopped container is a failure of both: nothing can start
 * there, and a stop did not reach its agent, which still has the job started and starts the gang
 * again when the container starts (it counted as stopped: the job came back by itself). */
bool stopstart_is_ok(bool start, enum stopstart_outcome o);

/* The exit code of a stop or start over n containers: EXIT_OK when every one succeeded,
 * EXIT_HOSTKEY when a host key was refused, else EXIT_FAIL. */
int stopstart_exit(bool start, const enum stopstart_outcome *o, int n, bool key_refused);

/* The history result of a stop or start over n containers whose exit code is ret: "stopped",
 * "started", "stop-failed" or "start-failed"; NULL when nothing happened that a record would
 * tell: a start that found the job already running in every container. */
const char *stopstart_history_result(bool start, const enum stopstart_outcome *o, int n, int ret);

/* Whether no container of the n knows the job: every one refused the verb with the agent's
 * "no job 'J' on this agent" (said, as stopstart_fan fills it).  Nothing was changed and nothing
 * can be: the verb says so once, exit 1, and records no history (there is no release to name). */
bool stopstart_never_deployed(const enum stopstart_outcome *o, char (*said)[STOPSTART_SAID_MAX],
                              int n);

/* Whether the gang of js runs (or is starting) as a generation of its own: the agent answers
 * a start there "already running" (starting, running, or reverted: its good release runs). */
bool stopstart_gang_runs(const struct job_status *js);

/* A start of a gang of n containers must bring it up as one rendezvous generation: the ranks of
 * a generation pair only with each other, so a part that runs on as an older one never forms
 * with the part that starts (every rank exits 8, "rendezvous failed", for ever).  runs[i]: the
 * gang runs in container i; down[i]: it is known not to run there (nothing known: neither).
 * When it runs in some and is down in others, ret_part[i] says where it runs (to be stopped
 * first, then started with the others as one generation) and the count is returned; otherwise
 * 0 (it runs everywhere, nowhere, n < 2) and ret_part is not written. */
int stopstart_split_gang(const bool *runs, const bool *down, int n, bool ret_part[]);

/* A gang of several containers that runs (or backs off after a peer's exit, "peer_exit") in
 * every one of them, but not as one rendezvous generation: the agents' documents (js[i], NULL
 * where none came) name different "rdzv" tokens, so its ranks never form a gang (each exits 8,
 * "rendezvous failed", and is restarted as its own generation for ever) while a start answers
 * "already running" everywhere.  Then every ret_part[i] is set (stopped first, then started
 * with the others as one generation) and n returned; otherwise 0 and ret_part not written: a
 * token unknown anywhere (an older agent) decides nothing, nor does n < 2. */
int stopstart_split_generation(const struct job_status *const *js, int n, bool ret_part[]);

/* What to tell the operator about container vmid on host, which is not running (pct's words in
 * said): start: start it, then start again; stop: its gang does not run now but its agent starts it
 * again with the container: start it, then stop again.  A vmid < 0 (a local root): no pct. */
void stopstart_ct_stopped_hint(bool start, const char *job, int vmid, const char *host,
                               const char *said, char *buf, size_t sz);

/* The words of an agent that could not take the job's deploy lease (said; its logger prefix
 * cut) into buf, and, when they say the container's disk is full, what to do: "SAID (the
 * container's disk is full: free space there, then THEN)", or "SAID: free space there, then
 * THEN" where the agent said the disk was full itself.  true when the disk was full. */
bool stopstart_lease_said(const char *said, const char *then, char *buf, size_t sz);

/* The row of a start's container whose agent could not take the job's deploy lease (said: the
 * agent's words): nothing was started anywhere; a full disk says to free space, then start. */
void stopstart_no_lease_hint(const char *job, const char *said, char *buf, size_t sz);

/* The row of a container whose agent daemon sent nothing for waited seconds (its own status
 * deadline) to the status asked with the deploy lease: stopped (SIGSTOP) or wedged.  The verb was
 * not asked there (it would have waited the daemon's longer deadline again: `drover stop` took
 * 170 s and said "sent nothing for 110 s"); what brings the daemon back, with and without systemd
 * (agent_wedged_how), then the verb again. */
void stopstart_wedged_hint(bool start, const char *job, double waited, char *buf, size_t sz);

/* What to tell the operator about a container whose agent refused or failed the verb, from its
 * words (said): a job the agent never had is a job never deployed there (deploy it first); pct's
 * "no container" is said as pct_ct_problem() words it; anything else with `drover logs`. */
void stopstart_failed_hint(bool start, const char *job, const char *ct_label, const char *said,
                           char *buf, size_t sz);

/* The worst case of a stop or start of one job, step by step, each step bounded by the timeout
 * it runs under (the same values: what is announced is what is enforced), from before the lease
 * is taken to the verb's return:
 *   lease      `lease take --status`, one batched exec per host (lease_take_timeout), then the
 *              plain take where an agent is older than --status (exec_timeout);
 *   answer     the agents' answers to `drover-agent stop|start` (agent_fan_run's limit): the
 *              job's grace (30 s unset) + exec_timeout, + 30 s for start's GPU-memory wait;
 *   record     `history add`, a host's containers one after another, HISTORY_ADD_TIMEOUT_S each;
 *   give_back  the lease given back where the record did not: one batched exec per host.
 * host_rounds: how many times the hosts are worked on in turn (ceil(hosts / parallel));
 * max_cts_per_host: the most containers of the job on one host.  total is their sum. */
struct stopstart_budget {
    double lease, answer, record, give_back, total;
};
void stopstart_budget_of(bool start, double grace_s, double exec_timeout_s, int host_rounds,
                         int max_cts_per_host, struct stopstart_budget *ret);

/* stopstart_budget_of() for job j of inv (its hosts, [drover] parallel, exec_timeout, grace). */
void stopstart_job_budget(const struct inventory *inv, const struct inv_job *j, bool start,
                          struct stopstart_budget *ret);

/* `drover stop --job J` (start false) or `drover start --job J` (start true) of one job: the
 * job's lock and deploy lease (another operator's deploy is refused, nothing changed), then
 * `drover-agent stop|start --job J` in every container at once, each given the job's grace plus
 * exec_timeout to answer (start: one rendezvous generation for all; where the gang of several
 * containers runs in part, it is stopped there first, or nothing is started when it cannot be:
 * stopstart_split_gang); a summary line per container on stdout, one history record
 * (stopstart_history_result: none for a start that found it running everywhere) in state_dir
 * and in every container, whose write gives the lease back where the agent knows how; the rest
 * of the lease is given back at the end.  dry_run: say what
 * it would do and contact nothing (no lock, no lease).  Returns a drover exit code. */
int deploy_stop_start(struct fleet *f, const char *job, bool start, bool dry_run);

#endif
