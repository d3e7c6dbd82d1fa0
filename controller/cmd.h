/* controller/cmd.h: the verbs of `drover`, one cmd_<verb>.c each (top's is controller/top/top.c).
 * Each parses its own arguments (argv[0] is the verb) and returns an exit code (fleet.h);
 * controller/main.c's verb table dispatches to them.
 */
#ifndef DROVER_CMD_H
#define DROVER_CMD_H

#include "controller/transport/fleet.h"

int cmd_status(struct fleet *f, int argc, char **argv);
int cmd_history(struct fleet *f, int argc, char **argv);
int cmd_install(struct fleet *f, int argc, char **argv);
int cmd_trust(struct fleet *f, int argc, char **argv);
int cmd_deploy(struct fleet *f, int argc, char **argv);
int cmd_plan(struct fleet *f, int argc, char **argv);
int cmd_rollback(struct fleet *f, int argc, char **argv);
int cmd_promote(struct fleet *f, int argc, char **argv);
int cmd_rebaseline(struct fleet *f, int argc, char **argv);
int cmd_revert(struct fleet *f, int argc, char **argv);
int cmd_top(struct fleet *f, int argc, char **argv);
int cmd_gc(struct fleet *f, int argc, char **argv);
int cmd_stop(struct fleet *f, int argc, char **argv);
int cmd_start(struct fleet *f, int argc, char **argv);

/* `drover stop|start`'s arguments (cmd_stopstart.c): the jobs named with --job (each once, at
 * most INV_MAX_JOBS; the strings are argv's), or all (--all-jobs), never both nor neither. */
struct stopstart_args {
    const char *jobs[INV_MAX_JOBS];
    int njobs;
    bool all, dry_run, json;
};
/* Parse argv (argv[0] the verb) into *ret: EXIT_OK, or EXIT_USAGE with the reason and the
 * verb's usage line logged (*ret untouched). */
int cmd_stopstart_parse(int argc, char **argv, struct stopstart_args *ret);

/* GC of host object stores (of every host, or only only_job's) and of the manifest cache,
 * keeping extra ids, every job's current/previous/good/target, the environments they name and
 * the keep_n newest releases.  Objects removed, or -errno (nothing removed on a host whose
 * containers could not all be asked).  only_job_hosts (a deploy's collection after its promote,
 * which succeeded): what it skips is said as warnings ("gc after the promote skipped host ...",
 * with why and what to run), not as errors under "promoted".  cmd_gc.c. */
int objsync_gc_fleet(struct fleet *f, const char *const *extra, size_t nextra, int keep_n, bool only_job_hosts,
                     const struct inv_job *only_job);
/* What gc says of host `host`'s store ("gc h1: removed 3 objects (kept the objects of 2 releases
 * in use and of the 5 newest)"; it said "kept 1 release's and the 5 newest"), and of the
 * controller's manifest cache mdir ("gc: removed 1 cached manifest from 'DIR'").  Return buf. */
/* Does an agent's status failure (fleet_agent_status's err) say the agent could not be run at
 * all in the container: pct exec's 127 or 126, lxc-attach's "Failed to exec"? */
bool gc_agent_not_installed(const char *said);
const char *gc_host_line(const char *host, int removed, size_t in_use, int keep_n, char *buf, size_t sz);
const char *gc_cache_line(const char *mdir, int removed, char *buf, size_t sz);
/* `drover gc`'s line for container label's `release clean` (agent_clean_parse's numbers). */
const char *gc_ct_line(const char *label, size_t entries, uint64_t bytes, bool incoming_kept, char *buf, size_t sz);
int cmd_logs(struct fleet *f, int argc, char **argv);
int cmd_events(struct fleet *f, int argc, char **argv);
int cmd_validate(struct fleet *f, int argc, char **argv);
int cmd_exporter(struct fleet *f, int argc, char **argv);

/* -o json for verbs that change things (controller/cmd_result.c).  begin() sends stdout to
 * stderr until end(), which restores it and prints the result document (version 1,
 * docs/protocol.md): the exit code, its name and the history records the run appended for the
 * jobs, why it failed ("error": the last error logged since begin()), plus the members of
 * extra (a verb's own: plan's "plans", install's "containers"; end() takes the reference).
 * end() returns code. */
struct cmd_result {
    double t0;
    int saved_fd;
    struct json_t *extra;
};
/* The document end() prints, without printing it (new reference; NULL on allocation failure):
 * what the unit test checks.  error: why it failed (the message printed on stderr; "error" is
 * null when code is EXIT_OK or error is NULL or "").  records: a JSON array, taken. */
struct json_t *cmd_result_doc(const char *kind, const char *const *jobs, int njobs, int code,
                              const char *error, struct json_t *records, struct json_t *extra);
struct history_entry;
typedef struct json_t json_t;
int cmd_result_begin(struct cmd_result *cr);
/* A verb given -o json says so while f->args_only (kind: its document's "kind", jobs: the jobs
 * it was asked for), so that an inventory that fails to load still writes cmd_result_early()'s
 * document (controller/cli.c).  Does nothing when json is false or after args_only. */
void cmd_result_want(struct fleet *f, bool json, const char *kind, const char *const *jobs, int njobs);
/* The document of a verb that failed before it began (no inventory, nothing contacted): the
 * seven members of cmd_result_doc() with "records": [], plus kind's own empty members (trust:
 * "known_hosts": null, "hosts": []; install: "agent_binary"/"sha256" null, "containers": []),
 * printed on stdout.  error: what was logged.  Returns code. */
int cmd_result_early(const char *kind, const char *const *jobs, int njobs, int code, const char *error);
int cmd_result_end(struct cmd_result *cr, const struct inventory *inv, const char *kind,
                   const char *const *jobs, int njobs, int code);
/* What `drover-agent --version` run in a container says about the container (cmd_install.c):
 * from its stderr and exit status, the missing shared library, glibc version or loader
 * ("" when none is named), its Debian package (NULL when unknown) and a one-line reason. */
/* Whether `drover-agent --version`'s output (out, len bytes) is drover-agent's ("drover-agent
 * VERSION"): another binary that runs is refused before it replaces the agent. */
bool install_is_agent_version(const char *out, size_t len);
void install_diagnose(const char *err, int status, char *missing, size_t missing_sz,
                      const char **package, char *why, size_t why_sz);

/* `drover status` (cmd_status.c): a rank's throughput is rank_status_ktok (common/status.h).
 * Its LOSS cell: the loss,
 * "NaN" only for the non-finite-loss failure (the agent counted non-finite steps), "-" when
 * there is no loss yet.  Returns buf. */
struct rank_status;
const char *status_loss_text(const struct rank_status *rs, char *buf, size_t sz);
/* The line `drover status` prints on stderr under its table for a container whose gang of job
 * has failed (the agent gave up: a promoted release's non-finite loss, a crash loop, a failed
 * start): the agent's reason, where its reason code is a worker's doing the pointer at the
 * workers' log (probation_logs_pointer, as a crash's verdict ends), and what to do.  NULL when
 * the gang has not failed.  inv_arg: -i as given (NULL: default).  Returns buf. */
struct job_status;
const char *status_failed_hint(const char *ct, const char *job, const struct job_status *js,
                               const char *inv_arg, char *buf, size_t sz);

/* The line `drover status` prints on stderr under its table for a container whose agent is
 * stopping the gang on its own (a liveness trip, non-finite loss, a rank that exited) or backs
 * off before a restart: the table showed only `silent:75s` or `backoff` for as long as the job's
 * grace lasts (2 minutes and more) while the agent had already decided, and why was only in
 * `-o wide`.  NULL in any other state.  inv_arg: -i as given (NULL: default).  Returns buf. */
const char *status_agent_hint(const char *ct, const char *job, const struct job_status *js,
                              const char *inv_arg, char *buf, size_t sz);

/* The note under the table for a job whose agent restarted its current release (restarts > 0)
 * and runs it again: what caused the last restart (the agent's last_restart_reason), which the
 * state's reason no longer says once the restarted gang runs ("reason": "", "restarts": 1
 * was all `status` showed).  NULL when nothing restarted, the agent did not say why (an agent
 * before the field), or the gang is in backoff (status_agent_hint says that).  Returns buf. */
const char *status_restart_note(const char *ct, const char *job, const struct job_status *js, char *buf,
                                size_t sz);

/* The note under the table for a job its agent stopped as the first phase of a switch (its
 * reason begins with STATUS_SWITCH_STOP_PREFIX): the table shows "stopped", as after `drover
 * stop`, while the agent starts the release again on its own unless the switch goes on (a
 * drover killed between the phases); only -o wide and -o json said so.  NULL in any other state.
 * inv_arg: -i as given (NULL: default).  Returns buf. */
const char *status_switch_note(const char *ct, const char *job, const struct job_status *js,
                               const char *inv_arg, char *buf, size_t sz);

/* The warning under the table for a gang whose ranks wrote lines that are not heartbeats (a
 * worker speaking another format shows only "starting" in the table): the first such rank, its
 * count, how many ranks did, and where the agent says why.  NULL when none did. */
const char *status_bad_lines_note(const char *ct, const char *job, const struct job_status *js,
                                  const char *inv_arg, char *buf, size_t sz);

/* Does js run its good release with a job spec it was not promoted with (a spec change on
 * probation, held, or orphaned by a drover that died)?  The table cannot show it: its release
 * column is the good release. */
bool status_runs_unpromoted_spec(const struct job_status *js);
/* The state word `drover status` and `drover top` both say for a live rank of a container that
 * runs what was never promoted there, where its agent says "running". */
#define STATUS_WORD_PROBATION "probation"
/* Does a container whose current release is current and good release good ("" none) run what
 * was never promoted there: no good release yet, another release (a deploy's candidate, a
 * manual activate), or the good release with another spec (spec_unpromoted:
 * status_runs_unpromoted_spec)?  drover top's probation rows and the word below decide on it. */
bool status_on_probation(const char *current, const char *good, bool spec_unpromoted);
/* The word for a rank the agent calls agent_state ("running", "silent", ...) in a container per
 * status_on_probation(), of a gang in state gang: "stopping" while its agent stops the gang
 * (drover top's word; status said "silent:62s" for the two minutes of a hung gang's grace),
 * STATUS_WORD_PROBATION for "running" on probation (status said "running" for the rows top
 * showed as probation), else agent_state.  Never NULL. */
const char *status_rank_word(enum gang_state gang, const char *agent_state, bool on_probation);
/* The word `drover status` and `drover top` say for a rank that sent only the heartbeat module's
 * hello (common/heartbeat.h: its script is past its imports, in or before the rendezvous, and has
 * not called hb.init()): its agent calls it "starting", as one that sent nothing. */
#define STATUS_WORD_RENDEZVOUS "rendezvous"
/* Has rank rs sent a hello and nothing after it (its last heartbeat is the hello)? */
bool status_rank_in_rendezvous(const struct rank_status *rs);
/* The agent's word for rank rs, but STATUS_WORD_RENDEZVOUS for a "starting" rank that is
 * status_rank_in_rendezvous(): what status_rank_word() is given.  Never NULL. */
const char *status_rank_agent_word(const struct rank_status *rs);
/* The line `drover status` prints once per job under its table when containers run such a
 * spec: ct the first of them, nmore how many others, release the good release, and what to do.
 * inv_arg: -i as given (NULL: default).  Returns buf. */
const char *status_spec_hint(const char *ct, int nmore, const char *job, const char *release,
                             const char *inv_arg, char *buf, size_t sz);

/* The line `drover status` prints once per job after its table when containers answered but
 * their agents do not know job (the table's `no-job`, which said nothing of what to do): cts
 * the containers ("h1:101, h1:102") and the deploy that puts it there.  inv_arg: -i as given
 * (NULL: default).  Returns buf. */
const char *status_nojob_hint(const char *cts, const char *job, const char *inv_arg, char *buf, size_t sz);
/* The release of js that its agent marks bad and that it runs or would go back to: its good
 * release, else its current one (started anyway, as asked); NULL when neither is marked.  With
 * *ret_reason the mark's reason ("" unknown: an older agent).  Borrowed from js. */
const char *status_marked_bad(const struct job_status *js, const char **ret_reason);
/* The bad marks of one job's containers, for the warning under `drover status`'s table and
 * under `drover top`'s (one implementation: status_bad_marks_add for each container whose agent
 * knows the job, then status_bad_marks_line for each line).  Plain data: zero it to start. */
#define STATUS_BAD_MARKS_SHOWN 4  /* releases said in full, one line each; the others are counted */
#define STATUS_BAD_MARK_REASONS 4 /* distinct reasons kept per release; the others are counted */
struct status_bad_mark {
    char release[RELEASE_ID_LEN + 1];
    bool good;                    /* it is the good release where first seen (else the current) */
    int n;                        /* containers that mark it */
    char who[640];                /* their labels, ", "-separated (cut when long) */
    int nreasons;                 /* distinct reasons kept ("" unknown: an older agent) */
    int nreasons_more;            /* containers whose reason did not fit in reasons[] */
    struct {
        char reason[STATUS_BAD_REASON_MAX];
        char who[200];            /* the containers that give it */
        bool ranks_differ;        /* the same words but for the rank numbers they name */
    } reasons[STATUS_BAD_MARK_REASONS];
};
struct status_bad_marks {
    int ncts;                     /* containers added (whose agent knows the job) */
    int nmarks;
    struct status_bad_mark marks[STATUS_BAD_MARKS_SHOWN];
    int nmore;                    /* releases marked past marks[]: counted, not said */
    int nmore_cts;                /* containers marking those */
    char more[INV_MAX_CTS][RELEASE_ID_LEN + 1]; /* their ids (each counted once) */
};
/* One container ct ("h1:101") whose agent knows the job: release is what status_marked_bad()
 * gave for it (NULL or "": none; it still counts in "N of M containers"), good whether that is
 * the container's good release, reason the mark's reason (NULL or "": unknown). */
void status_bad_marks_add(struct status_bad_marks *m, const char *ct, const char *release, bool good,
                          const char *reason);
/* How many lines status_bad_marks_line gives: one per release kept, and one more when releases
 * were left out. */
int status_bad_marks_nlines(const struct status_bad_marks *m);
/* Line k into buf (without the "drover: warning: " status prints before it): the release, the
 * containers that mark it ("in 2 of its 3 containers" when not all of them do), the reason (each
 * container's when they differ: "h1:101: A; h2:201: B"), and what to do (`drover rollback --job
 * J` for an earlier good release, `drover deploy DIR --job J` for a fixed one); the last line,
 * when releases were left out, says how many and where they are listed.  inv_arg: -i as given
 * (NULL: default).  Returns buf ("" for k out of range). */
const char *status_bad_marks_line(const struct status_bad_marks *m, int k, const char *job, const char *inv_arg,
                                  char *buf, size_t sz);


/* A job's release on probation that no drover watches, for the note under `drover status`'s
 * table and under `drover top`'s (one implementation: status_probation_add for each container
 * whose agent knows the job, then status_probation_line).  The table showed it only as `ID*
 * probation`: a release held by a deploy (on_inconclusive = hold) waiting for promote or revert,
 * or one whose deploy's drover died (kill -9), reverted by its agents at their own deadline.
 * Plain data: zero it to start. */
struct status_probation {
    char release[RELEASE_ID_LEN + 1]; /* the first unpromoted current release with a deadline */
    double left_s;                    /* the soonest of its agents' deadlines; 0 none known */
    int ncts;                         /* containers that run it with a deadline */
    bool watched;                     /* a container's deploy lease holder runs, or is not ours to
                                         judge (another host: holder_fate_here): nothing said */
};
/* Container's job status js (NULL: none) into p; self: this process's lease holder text
 * (holder_self()), to judge the lease holder by. */
void status_probation_add(struct status_probation *p, const struct job_status *js, const char *self);
/* One container's part (status_probation_add into a zeroed one, kept: drover top keeps it per
 * container as its documents come) into p, as status_probation_add would have put it. */
void status_probation_merge(struct status_probation *p, const struct status_probation *one);
/* Did the job's deploy of release id end HELD, by the history in state_dir (its newest record of
 * the job)?  False when it cannot be read. */
bool status_release_held(const char *state_dir, const char *job, const char *id);
/* The note into buf, or "" (returned) when nothing is to be said: no release on an agent's
 * probation deadline (or only agents too old to send it), or a drover watches it.  held: this
 * controller's history says the release's deploy ended HELD; name: its manifest name ("" or NULL
 * unknown); now: the wall clock, for the deadline's time of day.  inv_arg: -i as given (NULL:
 * default). */
const char *status_probation_line(const struct status_probation *p, const char *job, bool held, const char *name,
                                  const char *inv_arg, double now, char *buf, size_t sz);

/* The release the controller last made good for job (from history): promoted, or returned to by
 * a revert or rollback.  "" when none. */
void cmd_job_target(const struct inventory *inv, const char *job, char ret_id[RELEASE_ID_LEN + 1]);

#endif
