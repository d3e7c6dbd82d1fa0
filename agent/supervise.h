/* agent/supervise.h: one job's gang of worker processes on this container, and the restart /
 * rollback policy applied when a gang ends.
 *
 * A gang is nproc ranks, each fork+exec'd with cwd = the release directory, torchrun's
 * environment (docs/protocol.md, "Worker environment"), stdout/stderr appended to
 * runs/<job>/logs/rank<N>.log and a heartbeat pipe whose write end, on fd 3, is the only fd the
 * worker inherits besides 0-2.  All ranks share one process group (the first rank's pid) so stop is one
 * kill(-pgid).  The caller owns reaping: it calls waitpid and hands results to gang_note_exit.
 * Not thread-safe; call from the daemon's loop only.
 */
#ifndef DROVER_AGENT_SUPERVISE_H
#define DROVER_AGENT_SUPERVISE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/agent.h"
#include "agent/store.h"
#include "common/heartbeat.h"
#include "common/status.h"

/* Every rank finds its heartbeat pipe on fd 3 (single digit, so even dash's >&3 works). */
#define GANG_HEARTBEAT_FD 3
/* Consecutive non-finite steps a heartbeat may report before the gang counts as diverged. */
#define HB_DIVERGED_STEPS 3
#define RANK_LOG_MAX (64ull << 20) /* a rank log is truncated to 0 past this */

struct rank_proc {
    int rank, local_rank;
    pid_t pid;            /* 0: never started */
    bool alive;
    int exit_code;        /* -1 while running / killed by a signal */
    int exit_signal;
    int hb_fd;            /* read end, non-blocking; -1 once closed */
    char hb_buf[HEARTBEAT_LINE_MAX];
    size_t hb_len;
    bool hb_discarding;   /* inside an overlong line: drop bytes up to the next newline */
    uint64_t hb_lines, hb_overlong, hb_bad;
    bool has_hb;
    struct heartbeat hb;
    double hb_mono;       /* time_mono() of the last good heartbeat */
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
    int first_exit;       /* index of the first rank that exited on its own; -1 none */
    int diverged;         /* index of the first rank whose heartbeat reported HB_DIVERGED_STEPS
                             consecutive non-finite steps (a worker that does not exit on NaN
                             by itself); -1 none */
};

void gang_init(struct gang *g);

/* Check that spec's command can run from the release directory before anything is stopped:
 * the release dir exists and argv[0] resolves to an executable regular file (relative to the
 * release dir when it contains '/', else through PATH).  -ENOENT / -EACCES with reason in err. */
int gang_check_exec(const struct store *s, const struct job_spec *spec, char *err, size_t errsz);

/* Start spec's ranks for job.  On success g describes a running gang (every exec succeeded).
 * When a rank fails to exec, the ranks already started are killed and reaped, g is reset, and
 * the error (-errno of execve) is returned with a reason in err.  g must not hold a gang. */
/* resume: comma-separated release ids whose checkpoints the workers may resume from, passed as
 * DROVER_RESUME_RELEASES (NULL: not set, the worker resumes from any). */
int gang_start(struct gang *g, const struct store *s, const char *job, const struct job_spec *spec,
               const char *resume, int generation, char *err, size_t errsz);

/* SIGTERM the process group and arm SIGKILL after grace_s; idempotent. */
void gang_stop(struct gang *g);
/* Escalate to SIGKILL when due; truncate oversize rank logs.  now = time_mono(). */
void gang_tick(struct gang *g, double now);
/* Record a reaped child; returns the rank index or -1 when pid is not one of g's ranks.  Marks
 * first_exit when the exit was not caused by gang_stop. */
int gang_note_exit(struct gang *g, pid_t pid, int wstatus);
int gang_alive(const struct gang *g);
/* true when every rank was reaped and no process is left in the process group. */
bool gang_is_gone(const struct gang *g);
/* Close fds and forget the gang (after gang_is_gone). */
void gang_clear(struct gang *g);

/* Drain rank idx's heartbeat pipe: complete lines go through heartbeat_parse; lines longer than
 * HEARTBEAT_LINE_MAX are dropped and counted in hb_overlong, unparsable ones in hb_bad.
 * Returns the number of heartbeats accepted; closes the fd at EOF. */
int gang_read_heartbeats(struct gang *g, int idx, double now);
/* true when every rank's last heartbeat is in phase train (or later: checkpoint). */
bool gang_all_training(const struct gang *g);
/* Fill the ranks of js from g. */
void gang_fill_status(const struct gang *g, struct job_status *js, double now);

/* Build the worker environment for (spec, local_rank) into env (NULL-terminated, strings in
 * storage).  Exposed for preflight and tests. */
#define GANG_ENV_MAX (16 + SPEC_MAX_ENV)
struct gang_env {
    char *envp[GANG_ENV_MAX + 1];
    char storage[GANG_ENV_MAX][SPEC_ENV_MAX + 512];
    int n;
};
int gang_build_env(struct gang_env *e, const struct store *s, const char *job,
                   const struct job_spec *spec, const char *resume, int local_rank, int hb_fd);

/* ---- restart / rollback policy ---- */

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
    POLICY_RESTART, /* same release again after policy_backoff() */
    POLICY_REVERT,  /* back to the job's last good release */
    POLICY_FAIL,    /* give up: state failed */
};

/* Exit codes of drover-train that mean "restarting the same release cannot help"
 * (docs/errors.md, "retry helps? no": usage 2, config 3, data 4, disk full 6, diverged 7,
 * nomem 10, selftest 11). */
bool policy_exit_is_nonretryable(int exit_code);

/* Decide what to do once a gang ended because rank exit_rank exited with (exit_code,
 * exit_signal).  crashes_in_window counts abnormal exits of this release in the window,
 * including this one.  reason gets a one-line explanation. */
/* exit_code value for a gang the agent stopped because a rank's heartbeats reported
 * HB_DIVERGED_STEPS non-finite steps: treated like drover-train's "diverged" exit. */
#define POLICY_EXIT_DIVERGED (-2)

enum policy_action policy_on_gang_exit(const struct crash_policy *p, bool promoted, bool has_good,
                                       int exit_rank, int exit_code, int exit_signal,
                                       int crashes_in_window, int auto_rollbacks, char *reason,
                                       size_t reasonsz);
/* Delay before restart number n (1-based). */
double policy_backoff(const struct crash_policy *p, int n);

#endif
