/* agent/supervise.h: one job's gang of worker processes on this container: the
 * mechanics of starting, stopping and reading them (the rules are in jobmachine.c).
 *
 * A gang is nproc ranks, each exec'd with cwd = the release directory, torchrun's environment
 * (docs/protocol.md, "Worker environment"), stdout/stderr appended to runs/<job>/logs/rank<N>.log
 * and its heartbeat FIFO on fd 3, the only fd the worker inherits besides 0-2.
 *
 * Gangs outlive the agent.  Each worker is forked by a small holder (a fork of the agent that
 * closed every agent fd and execs nothing) that waits for it and writes its exit status to
 * <gang dir>/rank<N>.exit, and keeps the rank's heartbeat FIFO <gang dir>/rank<N>.hb open, so
 * heartbeats written while no agent runs wait in the FIFO (1 MiB) and a worker's status is never
 * lost.  The next agent reopens the FIFOs and reads the exit files (gang_adopt).  Holders and
 * workers share one process group (the first holder's pid), so stop is one kill(-pgid); holders
 * ignore SIGTERM (meant for the workers) and leave once the worker's last heartbeats were read.
 * The caller reaps (waitpid) and hands holders' statuses to gang_note_exit.
 * Not thread-safe; call from the daemon's loop only.
 */
#ifndef DROVER_AGENT_SUPERVISE_H
#define DROVER_AGENT_SUPERVISE_H

#include <stdbool.h>
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/agent.h"
#include "agent/jobmachine.h"
#include "agent/proctree.h" /* the gang's cgroup (enum gang_cgroup_mode) */
#include "agent/store.h"
#include "common/heartbeat.h"
#include "common/linebuf.h"
#include "common/status.h"

/* Every rank finds its heartbeat pipe on fd 3 (single digit, so even dash's >&3 works). */
#define GANG_HEARTBEAT_FD 3
/* Consecutive non-finite steps a heartbeat may report before the gang counts as diverged. */
#define HB_DIVERGED_STEPS JM_DIVERGED_STEPS
#define RANK_LOG_MAX (64ull << 20) /* a rank log is truncated to 0 past this */

struct rank_proc {
    int rank, local_rank;
    pid_t pid;            /* the worker; 0: never started */
    pid_t holder;         /* its holder: the gang's process that forked it and waits for it */
    bool holder_child;    /* the holder is our child (not a gang adopted from an earlier agent) */
    bool holder_gone;     /* the holder was reaped (holder_status) or found gone */
    int holder_status;
    bool alive;
    int exit_code;        /* -1 while running / killed by a signal */
    int exit_signal;
    double exit_mono;     /* time_mono() when the exit was seen */
    int hb_fd;            /* read end, non-blocking; -1 once closed */
    char hb_buf[HEARTBEAT_LINE_MAX];
    struct linebuf hb_lb; /* over hb_buf; over-long lines counted in hb_lb.overlong */
    uint64_t hb_lines, hb_bad;
    bool has_hb;
    struct heartbeat hb;
    double hb_mono;       /* time_mono() of the last good heartbeat */
    double step_mono;     /* time_mono() when hb.step last changed (agent/liveness.h) */
    double phase_mono;    /* time_mono() when hb.phase last changed */
    int log_fd;
};

struct gang {
    char job[JOB_NAME_MAX];
    char release[RELEASE_ID_LEN + 1];
    pid_t pgid;           /* 0: no gang */
    int generation;
    int nranks;
    struct rank_proc ranks[STATUS_MAX_RANKS];
    double started_mono;
    double grace_s;
    bool stopping;        /* SIGTERM sent (by us) */
    bool killed;          /* SIGKILL sent */
    double kill_at;       /* time_mono() when SIGKILL is due */
    int first_exit;       /* index of the first rank that exited on its own (a peer effect, exit 8
                           * or 12, gives way to another exit found before first_told; an exit 8
                           * to a rank here frozen: gang_settle_first_exit); -1 none */
    int diverged;         /* index of the first rank whose heartbeat reported HB_DIVERGED_STEPS
                             consecutive non-finite steps (a worker that does not exit on NaN
                             by itself); -1 none */
    struct liveness_policy live; /* the spec's deadlines */
    int hung;             /* index of the rank a liveness deadline tripped on; -1 none */
    char hung_why[256];   /* liveness_describe() of that verdict */
    double hung_limit_s;  /* the deadline that tripped (s): how long the hang took to be seen */
    bool first_told;      /* the daemon has told the job machine about first_exit */
    bool adopted;         /* started by an earlier agent and re-adopted */
    char dir[PATH_MAX];   /* runs/<job>/gang/g<generation>: heartbeat FIFOs, pid and exit files */
    char cgroup[PATH_MAX]; /* the gang's cgroup directory (v2, else v1 freezer); "" none (no
                              cgroup mounted, or no right to create one): then a stop
                              reaches the process group only */
};

void gang_init(struct gang *g);

/* Check that spec's command can run from the release directory before anything is stopped:
 * the release dir exists and argv[0] resolves to an executable regular file (relative to the
 * release dir when it contains '/', else through PATH).  -ENOENT / -EACCES with reason in err. */
int gang_check_exec(const struct store *s, const struct job_spec *spec, char *err, size_t errsz);

/* Why executing cmd from the release directory dir failed with errno e, for "cannot execute
 * 'CMD': WHY".  Where cmd is a script whose #! interpreter is missing, not executable or
 * written with a DOS line ending, says so and names the interpreter (the kernel's errno names
 * the script, which is there); else strerror(e).  Returns buf.  Opens and reads cmd: call it
 * after the failed exec, not between fork and exec of a threaded program. */
const char *gang_exec_error_reason(const char *dir, const char *cmd, int e, char *buf,
                                   size_t bufsz);

/* In a new mount namespace of the calling process (a gang's holder, a preflight's child), bind
 * releases and objects (the store's releases/ and objects/) read-only onto themselves: a worker that
 * writes into its release directory gets EROFS instead of changing the objects every release
 * holding that file shares.  0, or -errno with the step that failed in *ret_step (named by
 * gang_protect_store_step); the caller then runs writable, as before. */
int gang_protect_store(const char *releases, const char *objects, int *ret_step);
const char *gang_protect_store_step(int step);
/* Is the mount that path lies on in mountinfo (/proc/self/mountinfo's text) a shared one?  1
 * shared, 0 not, -EINVAL when no line covers path.  (Where `mount --make-rslave /` is refused,
 * a bind on a mount that is not shared still cannot propagate out of the namespace.) */
int gang_mount_is_shared(const char *mountinfo, const char *path);

/* Start spec's ranks for job.  On success g describes a running gang (every exec succeeded).
 * When a rank fails to exec, the ranks already started are killed and reaped, g is reset, and
 * the error (-errno of execve) is returned with a reason in err.  g must not hold a gang. */
/* resume: comma-separated release ids whose checkpoints the workers may resume from, passed as
 * DROVER_RESUME_RELEASES (NULL: not set, the worker resumes from any). */
int gang_start(struct gang *g, const struct store *s, const char *job, const struct job_spec *spec,
               const char *resume, int generation, char *err, size_t errsz);

/* Re-adopt the gang an earlier agent started (generation gen of spec's release): its holders
 * (holders[k], the group leader holders[0] == pgid) and workers (pids[k]) for each local rank.
 * Reopens the heartbeat FIFOs (what the workers wrote meanwhile is waiting there) and the rank
 * logs; exits that happened while no agent ran are found by gang_tick in the ranks' exit files.
 * -ENOENT when the gang directory or a FIFO is missing (then it cannot be adopted). */
int gang_adopt(struct gang *g, const struct store *s, const char *job, const struct job_spec *spec,
               int gen, pid_t pgid, const int64_t *holders, const int64_t *pids, int n);

/* SIGTERM the process group and arm SIGKILL after grace_s; idempotent. */
void gang_stop(struct gang *g);
/* Escalate to SIGKILL when due; truncate oversize rank logs; notice ranks that exited (their
 * holder wrote the exit file, or the holder itself is gone).  now = time_mono(). */
void gang_tick(struct gang *g, double now);
/* Record a reaped child (a rank's holder); returns the rank index or -1 when pid is not one of
 * g's holders.  A rank counts as exited when its holder wrote the worker's status to the exit
 * file, or when the holder is gone without one (its own status then).  Marks first_exit when
 * the exit was not caused by gang_stop.  Drains the rank's heartbeat pipe first
 * (everything the worker wrote before it exited is in the pipe), so a last heartbeat, e.g. an
 * error written just before exit, is part of what the exit is judged by. */
int gang_note_exit(struct gang *g, pid_t pid, int wstatus);
int gang_alive(const struct gang *g);
/* true when every rank was reaped and no process is left in the process group. */
bool gang_is_gone(const struct gang *g);
/* Close fds and forget the gang (after gang_is_gone). */
void gang_clear(struct gang *g);

/* Drain rank idx's heartbeat pipe: complete lines go through heartbeat_parse; lines longer than
 * HEARTBEAT_LINE_MAX are dropped and counted in hb_lb.overlong, unparsable ones in hb_bad.
 * Returns the number of heartbeats accepted; closes the fd at EOF. */
int gang_read_heartbeats(struct gang *g, int idx, double now);
/* true when every rank's last heartbeat is in phase train (or later: checkpoint). */
bool gang_all_training(const struct gang *g);
/* Judge g's live ranks (agent/liveness.h) unless the gang is already stopping or ended; on a
 * trip, set g->hung and g->hung_why and return true (once). */
bool gang_judge_liveness(struct gang *g, double now);
/* May the first exit be told to the job machine now?  Where it is an exit 8 (peer_lost) and
 * another rank of this gang is alive and silent since before it (liveness_blame_peer_lost,
 * each live rank's /proc state read for it): false while such a rank may still exit on its
 * own (at most LIVENESS_PEER_LOST_SETTLE_S); once one is named, the gang counts as hung on it:
 * first_exit is cleared, g->hung, hung_why and hung_limit_s are set and first_told too (the
 * caller feeds JM_EV_HUNG and stops the gang), and true is returned, as it is whenever there
 * is nothing to wait for or the gang is stopping. */
bool gang_settle_first_exit(struct gang *g, double now);
/* Fill the ranks of js from g; a live rank's state is liveness_rank_word(). */
void gang_fill_status(const struct gang *g, struct job_status *js, double now);

/* Build the worker environment for (spec, local_rank) into env (NULL-terminated, strings in
 * storage).  Exposed for preflight and tests. */
#define GANG_ENV_MAX (24 + SPEC_MAX_ENV)
struct gang_env {
    char *envp[GANG_ENV_MAX + 1];
    char storage[GANG_ENV_MAX][SPEC_ENV_MAX + 512];
    int n;
};
int gang_build_env(struct gang_env *e, const struct store *s, const char *job,
                   const struct job_spec *spec, const char *resume, int local_rank, int hb_fd);

#endif
