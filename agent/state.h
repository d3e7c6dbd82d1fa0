/* agent/state.h: the agent's durable state: state.json (per job: current/previous/good release,
 * gang state and reason, the pids of the running gang, the job spec per release and spec digest) and the event
 * journal events.jsonl.  Both live under the store root and are reloaded at start.
 *
 * state.json is replaced atomically (fs_write_atomic) on every change; events are appended one
 * JSON line each (the line is common/event.h's) and fsynced before the append returns.  Only
 * state.c knows state.json's format.
 */
#ifndef DROVER_AGENT_STATE_H
#define DROVER_AGENT_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "agent/agent.h"
#include "common/event.h"

#define STATE_VERSION 1
#define STATE_MAX_BYTES (1u << 20)
#define STATE_MAX_SPECS 6           /* specs kept per job (current, previous, good + history) */
#define STATE_MAX_BAD 8             /* bad marks kept per job (oldest dropped) */
#define STATE_MAX_GOODS 4           /* promoted releases remembered per job */
#define EVENTS_ROTATE_BYTES (16u << 20) /* events.jsonl is renamed to events.jsonl.1 past this */

struct job_rec {
    char job[JOB_NAME_MAX];
    char current[RELEASE_ID_LEN + 1];
    char previous[RELEASE_ID_LEN + 1];
    char good[RELEASE_ID_LEN + 1];
    /* The job spec digests (common/specdigest.h) that go with current and good: what a job runs
     * is a (release, spec) pair, and a spec change of the same release is a candidate like a new
     * release.  "" unknown (sent by an older controller, or a state.json from before them:
     * "current_spec"/"good_spec" absent). */
    char current_digest[SPEC_DIGEST_LEN + 1];
    char good_digest[SPEC_DIGEST_LEN + 1];
    enum gang_state state;
    char reason[STATUS_REASON_MAX];
    enum status_reason reason_code; /* the reason's cause, typed (common/status.h); a state.json
                                       from before it: derived from the text */
    int generation;
    int restarts;          /* gang restarts of the current release since its activation, revert,
                              last requested start (drover start: a new run) or the relaunch
                              after a container restart (a new boot: a new run) */
    char last_restart_reason[256]; /* what caused the last of those ("rank 0 hung"); "" none */
    int auto_rollbacks;    /* consecutive automatic rollbacks; reset by promote */
    /* Probation deadline on the agent's monotonic clock (time_mono); 0: none.  Never the wall
     * clock: a clock step changes no verdict.  Saved as the deadline with the kernel's boot id
     * (CLOCK_MONOTONIC is one clock for every process until a reboot, so the next agent keeps
     * it as is) and as the seconds left at the save (after a reboot the probation resumes with
     * that much left).  The daemon fills probation_left_s and boot_id before each save. */
    double probation_deadline;
    double probation_left_s;
    /* Switch deadline (the same clock and the same saving as the probation deadline; 0: none):
     * armed when a switch's stop (`stop --restart-after S`) has stopped the gang; cleared by the
     * next activate, revert, start or stop.  When it passes with the job still stopped (the
     * controller died between the two phases), the agent starts the release it stopped again. */
    double switch_deadline;
    double switch_left_s;
    char boot_id[40];
    /* Releases that failed probation or were reverted before being promoted, or that the agent
     * stopped for a failure not retried while they ran promoted (jobmachine.c
     * mark_bad_promoted), newest first: never a rollback target unless named with --force, never
     * a revert target unless it is the good release itself (promoting one clears the mark). */
    int nbad;
    struct bad_mark {
        char release[RELEASE_ID_LEN + 1];
        char reason[STATUS_BAD_REASON_MAX]; /* cut at a word (state_mark_bad) */
    } bad[STATE_MAX_BAD];
    /* (release, spec) pairs promoted for this job, newest first (goods[0] and goods_digest[0]
     * are the good pair): where a rollback from the good pair goes, which may be the same
     * release with the spec it was promoted with before.  goods_digest "" unknown (a spec from
     * before digests, or a state.json from before the pairs: "goods_spec" absent). */
    int ngoods;
    char goods[STATE_MAX_GOODS][RELEASE_ID_LEN + 1];
    char goods_digest[STATE_MAX_GOODS][SPEC_DIGEST_LEN + 1];
    /* the gang last started (generation `generation`), so a restarted agent can re-adopt it */
    int64_t gang_pgid;
    uint64_t gang_starttime; /* /proc/<pgid>/stat field 22 of the group leader */
    uint64_t init_start;     /* /proc/1/stat field 22 at the save: the container's init, which a
                                restart of the container (pct stop/start) changes while the
                                kernel's boot id, the host's, stays; 0 unknown ("init_start",
                                only when known) */
    int npids;
    int64_t pids[STATUS_MAX_RANKS];    /* the workers, by local rank */
    int64_t holders[STATUS_MAX_RANKS]; /* their holders (agent/supervise.h), by local rank */
    int nspecs;
    struct job_spec specs[STATE_MAX_SPECS];
};

struct agent_state {
    int njobs;
    struct job_rec jobs[STATUS_MAX_JOBS];
};

void state_init(struct agent_state *st);
/* Free every spec; st is then empty. */
void state_done(struct agent_state *st);

/* Compact JSON text, malloc'd; caller frees. */
int state_format(const struct agent_state *st, char **ret_text);
/* Parse (at most STATE_MAX_BYTES).  -EINVAL malformed, -E2BIG over a limit, -EPROTONOSUPPORT
 * other version.  ret_st (uninitialised is fine) written only on success; state_done() it. */
int state_parse(const char *text, size_t len, struct agent_state *ret_st);
/* Load path; a missing file gives an empty state. */
int state_load(const char *path, struct agent_state *ret_st);
int state_save(const char *path, const struct agent_state *st);

/* The grace (SIGTERM -> SIGKILL) of job's current release, the gang a job verb may have to stop,
 * from the state file at path (read only: the CLI asks before a daemon's job verb).  -ENOENT
 * when the file, the job or its current spec is not there; other -errno for a state file that
 * cannot be read.  ret_grace_s written only on success. */
int state_job_grace(const char *path, const char *job, double *ret_grace_s);

/* Find a job; with create, add it (-ENOSPC when STATUS_MAX_JOBS are used).  Borrowed. */
struct job_rec *state_find_job(struct agent_state *st, const char *job);
int state_add_job(struct agent_state *st, const char *job, struct job_rec **ret);
/* Spec recorded for (job, release, digest); digest NULL: the first one of release whatever its
 * digest.  NULL if none.  Borrowed. */
struct job_spec *state_find_spec(struct job_rec *j, const char *release, const char *digest);
/* The spec of the current pair (current, current_digest) and of the good pair; NULL if none. */
struct job_spec *state_current_spec(struct job_rec *j);
struct job_spec *state_good_spec(struct job_rec *j);
/* Does the job run its good pair (the good release with the spec it was promoted with)? */
bool state_on_good(const struct job_rec *j);
/* Record a copy of spec (keyed by spec->release and spec->digest), replacing an older one for
 * the same pair but keeping its promoted flag and ktok_s.  When full, evicts the oldest spec
 * that is not the current or the good pair (nor, if it can, the previous release's or an
 * earlier good one's).  Returns the stored spec through ret (may be NULL). */
int state_put_spec(struct job_rec *j, const struct job_spec *spec, struct job_spec **ret);

/* Bad marks: mark (newest first; an existing mark is refreshed; the oldest is dropped when
 * full), clear, ask. */
void state_mark_bad(struct job_rec *j, const char *release, const char *reason);
void state_unmark_bad(struct job_rec *j, const char *release);
bool state_is_bad(const struct job_rec *j, const char *release);
/* The reason release was marked bad with; NULL when it is not marked.  Borrowed. */
const char *state_bad_reason(const struct job_rec *j, const char *release);
/* DROVER_RESUME_RELEASES for j's current release: the releases whose checkpoints it may resume
 * from, comma-separated: itself and every release promoted for j, less those marked bad since (a
 * release promoted once that failed a later probation).  A release reverted during probation is
 * in none of them, so the good release never resumes from (never inherits the training of) a
 * release that failed probation: a newcomer's rollback resumed the checkpoint such a release
 * wrote during its failed probation.  Cut at outsz, between ids. */
void state_resume_list(const struct job_rec *j, char *out, size_t outsz);
/* Record (release, digest) as the newest promoted pair (goods[0]); an entry of the same pair
 * moves to the front.  digest NULL counts as "". */
void state_note_good(struct job_rec *j, const char *release, const char *digest);
/* The newest promoted release other than `except` that is not marked bad and has a recorded
 * spec; NULL if none.  Borrowed. */
const char *state_last_good(struct job_rec *j, const char *except);

/* ---- event journal ---- */
struct events {
    int fd;          /* O_APPEND; -1 when closed */
    int64_t seq;     /* newest sequence number written */
    char path[4096];
};

/* Open (create) the journal and find the newest seq in it (and in the rotated file). */
int events_open(const char *path, struct events *ret_ev);
/* Append one common/event.h line and fsync.  Returns the seq; -E2BIG for a line over
 * EVENT_LINE_MAX. */
int64_t events_append(struct events *ev, const char *job, const char *kind, const char *release,
                      const char *detail);
void events_close(struct events *ev);
/* Copy events with seq > since to out (one JSON line each), reading the rotated file first.
 * Lines that do not parse are skipped. */
int events_dump(const char *path, int64_t since, FILE *out);

/* Was job j's state saved in another boot of the container than now: another kernel boot id
 * (boot), or another start of the container's init (init_start: a container restarted on a host
 * that did not reboot)?  Each compared only where both are known ("" or 0: an agent before the
 * field, no /proc).  Its gang cannot have outlived that boot. */
bool state_job_saved_in_other_boot(const struct job_rec *j, const char *boot, uint64_t init_start);

#endif
