/* common/status.h: the agent status document, version 1 (docs/protocol.md, "Agent status").
 *
 * `drover-agent status --json` prints one document; `drover-agent watch --json --interval S`
 * prints one per interval, each on a single line.  The controller parses them with
 * status_parse().  Only this file (with status.c) knows the format.  Ages are computed by the
 * agent on its own monotonic clock, so clocks of the controller and container never mix.
 *
 *   {"v":1,"host":"ct101","agent_pid":12,"agent_version":"…","uptime_s":31.2,"seq":44,
 *    "wall":1.79612193e9,"wall_ms":1796121934987,
 *    "jobs":[{"job":"train","current":"<id>","previous":"<id>","good":"<id>",
 *             "state":"running","release":"<id>","generation":3,"restarts":0,"age_s":12.5,
 *             "world_size":3,"node_rank":0,"nproc":1,"reason":"","reason_code":"",
 *             "spec_digest":"<64 hex>","spec_fields":"job:<16 hex>,...","good_spec_digest":"<64 hex>",
 *             "ranks":[{"rank":0,"local_rank":0,"pid":40,"state":"running","hb_age_s":0.4,
 *                       "state_age_s":0, "bad_lines":40 (only when > 0),
 *                       "exit_code":-1,"exit_signal":0,
 *                       "hb":{…heartbeat fields…} or null,
 *                       "gpu":{"util":97,"mem_used":…,"mem_total":…,"temp":61,"slowdown_temp":90,
 *                              "index":0,"uuid":"GPU-…"} or null}]}]}
 * Also per job "goods_spec" (beside "goods", the same length: the job spec digest each promoted
 * pair ran with, "" where no spec of that pair is recorded any more or it predates digests) and
 * top level "features" (what the agent can do: STATUS_FEAT_*, by name; unknown names ignored).
 * Both absent from older agents: goods_spec then reads as all "", features as 0.
 * (gpu's index and uuid only when known: absent, never "" or -1, so older agents' documents
 * read the same; so are spec_digest, spec_fields and good_spec_digest (common/specdigest.h): absent
 * when unknown (an agent from before them, or a spec recorded before them), read as "")
 * Per job "last_restart_reason" (what caused the last restart of the current release, kept while
 * the restarted gang runs and its "reason" is ""): absent when "" (none, or an older agent).
 * Per job "bad_reasons" (beside "bad", as long: why the agent marked each release bad, "" unknown):
 * absent from an older agent (read as all "").
 * Per job "probation_left_s" (seconds until the agent reverts the job's unpromoted current release
 * on its own, its probation deadline), present only while that deadline is armed, and
 * "lease_holder" with "lease_left_s" (the holder of the job's deploy lease and the seconds until
 * it expires), present only while a lease is held and not expired: absent from older agents
 * (-1 and "": unknown).  `drover status` notes a release on probation that no drover watches (a
 * held one, or one whose deploy's drover died), with when its agents revert it.
 * Per job "rdzv": the rendezvous generation (--rdzv G) the job's gang was started with, or that
 * its next restart uses while it backs off or is stopped: absent when "" (none given, or an
 * older agent: unknown, never a difference between containers).
 */
#ifndef DROVER_STATUS_H
#define DROVER_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/heartbeat.h"
#include "common/manifest.h"
#include "common/specdigest.h"

#define STATUS_VERSION 1
#define STATUS_MAX_JOBS 8
#define STATUS_MAX_RANKS 16 /* per job and container */
#define STATUS_MAX_MARKS 8  /* bad / promoted releases listed per job */
/* A bad mark's reason, as the agent keeps it (agent/state.h), and the most a controller sends as
 * the reason of a revert (`revert --reason`, cut at a word with an ellipsis: common/text.h).  It
 * was 160, and "ModuleNotFoundError: No module nam" was cut mid-word at the agent. */
#define STATUS_BAD_REASON_MAX 256
/* A job's reason (job_status.reason, the agent's job record), NUL included: the agent cuts a
 * longer one at a word with an ellipsis (agent/jobmachine.c, common/text.h), and so does a reader
 * given a longer one (a newer agent's): it was cut mid-word there. */
#define STATUS_REASON_MAX 256
/* A job's reason is text for people; what the controller decides on is its reason code (enum
 * status_reason below, "reason_code" in the document).  The words below are how the agent's
 * reasons begin (agent/jobmachine.c), kept for people and for reading an older agent's document,
 * which has no code: status_reason_from_text() derives the code from them.
 *
 * STATUS_ATTENTION_PREFIX begins the reason of a container whose environment (GPU, driver) needs
 * attention (code STATUS_RC_ENVIRONMENT): the agent stopped the job without blaming the release
 * (no rollback, no restart).  `drover status`/`top` show it; `drover deploy` refuses that
 * container until the agent's gpu-check passes there, or --force. */
#define STATUS_ATTENTION_PREFIX "needs attention: environment fault:"
/* The reason of a job whose gang its agent stopped as the first phase of a switch (`stop
 * --restart-after S`): "stopped for a switch; starts ID again on its own unless the switch goes
 * on within S s" (agent/jobmachine.c); `drover status` notes it under its table, as the table
 * shows only "stopped", the same as after `drover stop`.  Every agent since the switch deadline
 * writes these words. */
#define STATUS_SWITCH_STOP_PREFIX "stopped for a switch"
#define STATUS_REASON_CRASH_LOOP "crash loop"
#define STATUS_REASON_FATAL_EXIT "non-retryable exit"
#define STATUS_REASON_LIVENESS "liveness"
/* how the agent's reason ends while it stops a gang on its own (a rank exited, non-finite loss,
 * a liveness trip); in an older agent's document, the only sign of it */
#define STATUS_REASON_STOPPING_TAIL "stopping the gang"
#define STATUS_MAX_BYTES (256u << 10)

/* Agent features, "features" in the document by name (status.c's table).  An agent that sends
 * none is older than all of them. */
#define STATUS_FEAT_SPEC_PAIRS 0x1u    /* "spec-pairs": keeps a job spec per (release, spec digest),
                                          so a failed change of the spec alone reverts to the
                                          good spec (agents before it keep one per release) */
#define STATUS_FEAT_PROMOTE_SPEC 0x2u  /* "promote-spec": promote --spec-digest D checks the pair */
#define STATUS_FEAT_RECORDED_SPEC 0x4u /* "recorded-spec": activate --recorded; goods_spec */
#define STATUS_FEAT_REVERT_NO_START 0x8u /* "revert-no-start": revert --no-start leaves the job
                                            stopped on its good release */
#define STATUS_FEATURES_ALL 0xfu
#define JOB_NAME_MAX 32
#define STATUS_RDZV_MAX 33 /* a rendezvous generation: 1..32 of [0-9A-Za-z_-] (agent's SPEC_RDZV_MAX) */

/* Gang states, in the words the dashboard shows. */
enum gang_state {
    GANG_STOPPED = 0, /* no release active for this job */
    GANG_STARTING,    /* processes started, not every rank has sent a train heartbeat */
    GANG_RUNNING,     /* every rank heartbeating in phase train */
    GANG_STOPPING,    /* SIGTERM sent, waiting for every process to exit */
    GANG_BACKOFF,     /* a rank exited; waiting before restarting the gang */
    GANG_FAILED,      /* gave up (crash loop of a good release, non-finite loss, start failure) */
    GANG_REVERTED,    /* the agent returned to the last good release on its own (see reason) */
    GANG_STATE_COUNT
};

/* Why a job's state is what it is, typed: "reason_code" per job in the document, by name
 * (status.c's table).  The agent sets it wherever it sets the reason; the controller decides
 * on it, never on the reason's words.  A name this reader does not know (a newer agent's) reads
 * as STATUS_RC_OTHER, never an error; a document without "reason_code" (an older agent) gets
 * the code status_reason_from_text() derives from the reason. */
enum status_reason {
    STATUS_RC_NONE = 0,           /* "": nothing went wrong (running, a request, a start), or an
                                     older agent's reason that names none of the causes below */
    STATUS_RC_CRASH_LOOP,         /* "crash-loop": ranks crashed crash_limit times in the window:
                                     reverted, or given up */
    STATUS_RC_FATAL_EXIT,         /* "fatal-exit": a rank exited with a code that is not retried
                                     (common/trainexit.h) */
    STATUS_RC_RANK_EXIT,          /* "rank-exit": one rank exited or was killed, not (yet) a
                                     crash loop: the gang is stopped, backing off, restarted;
                                     also drover-train's "peer_stopped" exit (a rank elsewhere
                                     was stopped), on purpose: no new name for old readers */
    STATUS_RC_COMPLETED,          /* "completed": the gang ended with exit code 0 */
    STATUS_RC_NONFINITE,          /* "nonfinite": a rank reported non-finite steps (or drover-train
                                     exited "diverged") */
    STATUS_RC_LIVENESS,           /* "liveness": a liveness deadline tripped (agent/liveness.h) */
    STATUS_RC_ENVIRONMENT,        /* "environment": the GPU environment failed (drover-train exit
                                     9); the reason begins with STATUS_ATTENTION_PREFIX */
    STATUS_RC_START_FAILURE,      /* "start-failure": the gang could not be started */
    STATUS_RC_PROBATION_DEADLINE, /* "probation-deadline": not promoted before its deadline */
    STATUS_RC_OTHER,              /* "other": a code this reader does not know (a newer agent),
                                     or an older agent stopping its gang for a cause of its own */
    STATUS_RC_COUNT
};

/* The code's name in the document ("" for STATUS_RC_NONE). */
const char *status_reason_name(enum status_reason c);
/* A name from the document: STATUS_RC_OTHER for one this reader does not know. */
enum status_reason status_reason_from_name(const char *name);
/* The code an older agent's reason text means, as the controller read it before the code
 * existed: STATUS_ATTENTION_PREFIX at the start: environment; "crash loop" in it: crash-loop;
 * "non-retryable exit": fatal-exit; "liveness" at the start: liveness; ending a stop the agent
 * made on its own ("...; stopping the gang"): rank-exit when it names a rank's exit, else other;
 * anything else none. */
enum status_reason status_reason_from_text(const char *reason);
/* Is the cause behind the code in the workers' own output (their log has the traceback or the
 * missing file): a rank that exited, crashed (once or in a loop), completed, or reported
 * non-finite loss; not a liveness trip, a start failure or the environment. */
bool status_reason_in_workers_log(enum status_reason c);
/* Does the agent stop the gang on its own with this code (a rank's exit, non-finite loss, a
 * liveness trip; "other": a cause this reader does not know, from a newer agent or an older
 * agent's words), not on a request? */
bool status_reason_stops_gang(enum status_reason c);

#define GPU_UUID_MAX 96 /* NVML_DEVICE_UUID_V2_BUFFER_SIZE: "GPU-8e0ae0c6-..." and its NUL */

struct gpu_status {
    bool valid;
    int index;            /* the NVML index queried (the rank's CUDA_VISIBLE_DEVICES entry); -1 unknown */
    char uuid[GPU_UUID_MAX]; /* NVML's "GPU-..." (the UUID label of dcgm-exporter); "" unknown */
    double util;          /* percent 0..100 */
    int64_t mem_used;     /* bytes */
    int64_t mem_total;    /* bytes */
    double temp;          /* degrees C */
    double slowdown_temp; /* degrees C, the device's own slowdown threshold; 0 if unknown */
};

/* Is s a GPU UUID as NVML prints it ("GPU-" or "MIG-" then hex digits and dashes, at most
 * GPU_UUID_MAX - 1 bytes)?  Anything else is never put in a label. */
bool gpu_uuid_is_valid(const char *s);

struct rank_status {
    int rank, local_rank;
    int64_t pid;            /* 0 when not running */
    char state[16];         /* "running", "starting", "checkpointing", "silent", "stalled" (the
                               agent's liveness words, agent/liveness.h), "exited", "killed" */
    double hb_age_s;        /* seconds since the last heartbeat; -1 if none yet */
    double state_age_s;     /* checkpointing: seconds in the phase; silent: heartbeat age;
                               stalled: seconds without step progress; else 0 */
    int exit_code;          /* -1 while running or unknown */
    int exit_signal;        /* 0 if none */
    int64_t bad_lines;      /* lines on its heartbeat pipe that were not heartbeats (unparsable,
                               overlong; agent.log quotes why for the first three); in the JSON
                               ("bad_lines") only when > 0, so older readers never see it */
    bool has_hb;
    struct heartbeat hb;    /* last heartbeat received */
    struct gpu_status gpu;
};

/* A rank's throughput now, in Ktok/s: its last heartbeat's tok_s / 1000 while it is running,
 * starting or checkpointing; NAN when there is none to show (no heartbeat, tok_s 0 = unknown,
 * a heartbeat older than three of its steps and at least 10 s (a frozen rank stays "running" to
 * its agent for half its silence_deadline), or a rank that is silent, stalled, exited or killed:
 * its last figure is not what it does now,
 * and `status` showed 95.2 for a rank that had said nothing for minutes).  `drover status`
 * (table "-", JSON null, left out of the job's sum) and `drover top` read it. */
double rank_status_ktok(const struct rank_status *rs);

struct job_status {
    char job[JOB_NAME_MAX];
    char current[RELEASE_ID_LEN + 1];  /* release the job's gang runs (or should run); "" none */
    char previous[RELEASE_ID_LEN + 1];
    char good[RELEASE_ID_LEN + 1];     /* last promoted release; "" none */
    enum gang_state state;
    char release[RELEASE_ID_LEN + 1];  /* release of the processes that are running now */
    int generation;                    /* bumps each time a gang is started */
    int restarts;                      /* restarts of the current release since its activation,
                                          revert or last requested start (`drover start`) */
    /* what caused the last of those restarts ("rank 0 hung"), kept while the restarted gang runs
     * and its reason is ""; "" none, or an agent before the field ("last_restart_reason",
     * present only when not "") */
    char last_restart_reason[256];
    /* the gang is backing off, or was last restarted, because its rank ended only because of a
     * rank in another container (drover-train's exits 8 peer_lost and 12 peer_stopped,
     * train_exit_is_peer_effect): this container names no cause of its own.  JSON "peer_exit":
     * true, present only then (older readers ignore it) */
    bool peer_exit;
    /* the rendezvous generation (start/activate --rdzv) the gang was started with, or that its
     * next restart uses; "" unknown (none given, or an agent before the field: "rdzv", present
     * only when not "").  Containers whose gangs run with different ones never form one gang:
     * `drover start` restarts them all as one (controller/deploy/stopstart.c) */
    char rdzv[STATUS_RDZV_MAX];
    double age_s;                      /* seconds since this generation started */
    /* seconds until the agent reverts current on its own (its probation deadline: not promoted
     * by then); <= 0 none armed (or passing now), or an agent before the field
     * ("probation_left_s", present only when > 0; read as -1 when absent) */
    double probation_left_s;
    /* the job's deploy lease in this container (agent/lease.h): its holder ("user@host/pid-N/...",
     * controller/deploy/holder.h) and the seconds until it expires; "" and -1 when none is held
     * or it expired, or an agent before the fields ("lease_holder", "lease_left_s": present only
     * while held) */
    char lease_holder[128];
    double lease_left_s;
    int world_size, node_rank, nproc;
    char reason[STATUS_REASON_MAX];    /* why the state is what it is, for people */
    enum status_reason reason_code;    /* ... and for programs: "reason_code" */
    /* the job spec digest of current and of good (common/specdigest.h), and current's per-field
     * digests; "" unknown: an older agent, or a spec it recorded before the digest existed */
    char spec_digest[SPEC_DIGEST_LEN + 1];
    char spec_fields[SPEC_FIELDS_MAX];
    char good_spec_digest[SPEC_DIGEST_LEN + 1];
    int nbad;                          /* releases that failed probation here, or were stopped
                                          while promoted for a failure not retried: never a rollback */
    char bad[STATUS_MAX_MARKS][RELEASE_ID_LEN + 1]; /* target unless named with --force */
    /* bad_reason[k]: why bad[k] was marked ("stopped while promoted: ..."), for people; ""
     * unknown (an older agent: "bad_reasons" absent) */
    char bad_reason[STATUS_MAX_MARKS][STATUS_BAD_REASON_MAX];
    int ngoods;                        /* releases promoted for the job, newest first */
    char goods[STATUS_MAX_MARKS][RELEASE_ID_LEN + 1];
    /* goods_spec[k]: the spec digest goods[k] was promoted with, when the agent still records
     * that pair's spec; "" otherwise (or from an older agent) */
    char goods_spec[STATUS_MAX_MARKS][SPEC_DIGEST_LEN + 1];
    int nranks;
    struct rank_status ranks[STATUS_MAX_RANKS];
};

struct agent_status {
    char host[64];
    int64_t agent_pid;
    char agent_version[32];
    double uptime_s;
    double wall;      /* the agent's wall clock (Unix seconds) when it wrote the document: for
                         measuring clock skew only, never for a deadline; 0 unknown.  JSON:
                         `wall_ms` (exact) and `wall` (9 digits: 10 s, for older controllers) */
    int64_t seq;      /* event journal sequence number of the newest event */
    unsigned features; /* STATUS_FEAT_* the agent said it has; 0 from an older agent */
    int njobs;
    struct job_status jobs[STATUS_MAX_JOBS];
};

const char *gang_state_name(enum gang_state s);
int gang_state_from_name(const char *name, enum gang_state *ret);

/* The state word of a job an agent's document does not hold (never deployed in that container):
 * `drover status` (its table and -o json's "state") and `drover top` say this one word, never
 * "stopped", which is a gang the agent stopped. */
#define STATUS_STATE_NO_JOB "no-job"
/* The state word `drover status` and `drover top` show for job status js: gang_state_name() of
 * its state, or STATUS_STATE_NO_JOB for NULL (the agent does not know the job).  Never NULL. */
const char *status_job_state_name(const struct job_status *js);

/* Serialize as one line of compact JSON without a trailing newline; malloc'd, caller frees. */
int status_format(const struct agent_status *st, char **ret_text);

/* Parse a document (at most STATUS_MAX_BYTES).  -EINVAL malformed, -E2BIG over a limit (bytes,
 * jobs, ranks), -EPROTONOSUPPORT another version.  ret_st written only on success. */
int status_parse(const char *text, size_t len, struct agent_status *ret_st);

/* The status document in the output of `drover-agent lease take ... --status`
 * (common/agentcli.h, agent_argv_lease_status): the lease's own lines, then the document as
 * the last line (compact JSON: one line, starting with '{').  0 with the document's offset and
 * length in out (parse it with status_parse), or -ENOENT when the output ends in no document
 * (the lease was refused, or the agent could not ask its daemon: ask `status` separately). */
int status_after_lease(const char *out, size_t len, size_t *ret_off, size_t *ret_len);

/* A feature's name in the document ("spec-pairs"); NULL for none or several bits. */
const char *status_feature_name(unsigned feature);

/* Is t a rendezvous generation as the document carries it (1..STATUS_RDZV_MAX-1 characters of
 * [0-9A-Za-z_-])? */
bool status_rdzv_is_valid(const char *t);

/* Find a job by name; NULL if absent.  Borrowed. */
const struct job_status *status_find_job(const struct agent_status *st, const char *job);

#endif
