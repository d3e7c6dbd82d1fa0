/* controller/top/top_model.h: the dashboard's model (top_model.c, top_rows.c, top_render.c):
 * pure functions from a fleet snapshot to states, rows, cells, sparklines, kubectl ages, sorting,
 * filter, fold, column layout and the text frame.  No I/O, no clock (callers pass `now`), so unit
 * tests and bench/top time it on synthetic data.  Times are the controller's CLOCK_MONOTONIC
 * seconds (time_mono()).
 */
#ifndef DROVER_TOP_MODEL_H
#define DROVER_TOP_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/event.h"
#include "common/status.h"
#include "controller/cmd.h"
#include "controller/inventory.h"

#define TOP_TREND 32          /* Ktok/s samples kept per rank, container, host and fleet */
#define TOP_MAX_CTS 1024      /* (job, container) pairs shown */
#define TOP_CELL_MAX 72       /* bytes of one cell, UTF-8 sparkline included */
#define TOP_ERR_MAX 256
#define TOP_GPU_LOW 30.0      /* GPU% below this while training is flagged LOW */
#define TOP_FILTER_MAX 64
#define TOP_RECENT_RESTART_S 60.0 /* RST is red this long after a restart, yellow after */
#define TOP_HB_MIN_INTERVAL 1.0 /* seconds: the expected heartbeat interval is max(step time, 1 s) */

/* What a row shows in STATE, in the words of the issue (plus "stopping" for a gang being
 * stopped by an activation).  Ordered by nothing; top_state_severity() orders them. */
enum top_state {
    TOP_RUNNING = 0,
    TOP_STARTING,
    TOP_PROBATION,   /* running a release that was never promoted (current != good) */
    TOP_DEGRADED,    /* running, but Ktok/s below the job's tolerance or loss not finite */
    TOP_STALLED,     /* the agent's word: heartbeats flow, the step does not advance */
    TOP_SILENT,      /* the agent's word: no heartbeat for half the silence deadline */
    TOP_CHECKPOINTING, /* the agent's word: the rank is in phase checkpoint */
    TOP_BACKOFF,
    TOP_REVERTED,
    TOP_FAILED,
    TOP_STOPPING,
    TOP_STOPPED,
    TOP_UNREACHABLE, /* host or agent not answering: last values kept, dimmed, with their age */
    TOP_NO_JOB,      /* the agent does not know the job (never deployed there): status's word */
    TOP_RENDEZVOUS,  /* a starting rank that sent the heartbeat module's hello only (status's word) */
    TOP_STATE_COUNT
};

const char *top_state_name(enum top_state s);
/* Display columns of the widest STATE cell: the longest state word, a space and the widest age
 * top_fmt_age() gives under 1000 days ("119s"), as a rank's "checkpointing 42s" (the column was
 * 11 wide and showed "checkpointi").  top_layout() gives the column this. */
int top_state_col_width(void);
/* Higher is worse: unreachable > failed > reverted > stalled > backoff > degraded > starting >
 * stopping > probation > stopped > running. */
int top_state_severity(enum top_state s);
/* Drawn in red (true for unreachable, failed, reverted, stalled, backoff). */
bool top_state_is_alert(enum top_state s);

/* ---- the snapshot the poller publishes (plain data, copied by value) ---- */

struct top_rank {
    int rank;
    char pstate[16];       /* agent's word for the process: running, starting, checkpointing,
                              silent, stalled (agent/liveness.h), exited, killed */
    double state_age_s;    /* with checkpointing/silent/stalled: for how long (agent clock) */
    int64_t pid;
    bool has_hb;
    bool hello;            /* its last heartbeat is the hello alone (status_rank_in_rendezvous) */
    int64_t step;
    int64_t resumed_from;
    double loss;
    bool loss_finite;
    bool loss_nan;         /* the agent counted non-finite steps (heartbeat nonfinite > 0); a rank
                              with no loss yet is neither finite nor NaN: its LOSS shows '-' */
    double ktok;           /* this rank's Ktok/s (heartbeat tok_s / 1000) */
    double step_s;         /* last step's wall time, s; 0 unknown */
    enum hb_phase phase;
    double hb_age_s;       /* at the time of the document, agent clock; -1 none yet */
    int exit_code, exit_signal;
    char release[RELEASE_ID_LEN + 1];
    struct gpu_status gpu;
    int ntrend;
    float trend[TOP_TREND]; /* Ktok/s after warmup, oldest first */
};

struct top_ct {
    int host;              /* inventory host index */
    int job;               /* inventory job index */
    int node_rank;         /* index in the job's container list */
    int same_as;           /* index in cts[] of the first pair naming the same container (host
                            * and vmid, or local root): itself unless an earlier job shares it */
    char label[INV_NAME_MAX + INV_PATH_MAX + 8]; /* "h1:101" */
    bool seen;             /* a status document ever arrived */
    double asked_mono;     /* when its watch stream was first opened on the host's current
                            * session; 0 not asked yet (or the session went down since) */
    double answer_by;      /* never seen by then: its agent does not answer (stopped or hung: it
                            * accepts the stream and sends nothing), unreachable; 0 no deadline */
    double doc_mono;       /* when the newest document arrived */
    char err[TOP_ERR_MAX]; /* why no documents come now; "" when they do */
    bool has_job;          /* the newest document knew this job */
    enum gang_state gang;
    char release[RELEASE_ID_LEN + 1], current[RELEASE_ID_LEN + 1], good[RELEASE_ID_LEN + 1];
    char previous[RELEASE_ID_LEN + 1];
    bool spec_unpromoted;  /* runs its good release with a job spec never promoted (a spec change
                            * on probation: status_runs_unpromoted_spec) */
    int restarts;
    double age_s;          /* seconds since this gang generation started, at doc time */
    char reason[STATUS_REASON_MAX];
    /* the release its agent marks bad that it runs or would go back to (status_marked_bad): its
     * good release (bad_good), else its current one; "" none.  With the mark's reason ("" an
     * older agent's).  `drover status` warns of it under its table, top under its own */
    char bad[RELEASE_ID_LEN + 1];
    bool bad_good;
    char bad_reason[STATUS_BAD_REASON_MAX];
    /* its part of the note on a release on probation that no drover watches (held, or its
     * drover killed), as `drover status` says it under its table (status_probation_add) */
    struct status_probation prob;
    int nranks;
    struct top_rank ranks[STATUS_MAX_RANKS];
    int ntrend;
    float trend[TOP_TREND]; /* container Ktok/s (sum over ranks) */
};

struct top_host {
    char name[INV_NAME_MAX];
    bool up;               /* session open and answering */
    bool tried;            /* a connection was attempted */
    double ok_mono;        /* when anything last came from it; 0 never */
    char err[TOP_ERR_MAX];
    bool key_refused;      /* the last connect failed on its host key (unknown or changed) */
};

struct top_job {
    char name[INV_NAME_MAX];
    char target[RELEASE_ID_LEN + 1]; /* release the controller last made good; "" unknown */
    double baseline_ktok;  /* job Ktok/s of the last good release on these containers; <= 0 none */
    double tolerance;
    int64_t warmup_steps;
    int expected_ranks;    /* containers x nproc_per_node */
    bool deploying;        /* a drover deploy/rollback holds the job's lock */
};

struct top_snapshot {
    double interval_s;     /* refresh interval the streams run at */
    int nhosts;
    struct top_host hosts[INV_MAX_HOSTS];
    int njobs;
    struct top_job jobs[INV_MAX_JOBS];
    int ncts;
    struct top_ct *cts;    /* ncts entries, owned by whoever filled the snapshot */
    int ntrend;
    float trend[TOP_TREND]; /* fleet Ktok/s */
};

/* Push v onto a trend ring (oldest dropped). */
void top_trend_push(float *trend, int *ntrend, float v);

/* Fill a top_ct from one agent status document received at `now` (keeps the trends, appending
 * a sample per rank past warmup_steps in phase train).  The job is cts->job's name. */
void top_ct_update(struct top_ct *ct, const struct agent_status *st, const char *job,
                   int64_t warmup_steps, double now);

/* A snapshot with one top_ct per (job, container) and one top_host per host of inv, nothing
 * seen yet.  cts malloc'd; free with top_snapshot_done().  -ENOMEM, -E2BIG over TOP_MAX_CTS. */
int top_snapshot_init(struct top_snapshot *s, const struct inventory *inv, double interval_s);
void top_snapshot_done(struct top_snapshot *s);
/* Deep copy (dst must be init'ed with the same ncts, or zeroed: then cts is allocated). */
int top_snapshot_copy(struct top_snapshot *dst, const struct top_snapshot *src);

/* ---- derived states ---- */

/* Seconds after which a container's documents count as stale (unreachable, dimmed). */
double top_stale_after(double interval_s);
/* Seconds a container's watch stream may take to send its first document: 4 x refresh + 6 s,
 * at least 30 s (a loaded host may take a while to start the agent).  Past it the container
 * counts as unreachable (answer_by), and a host whose streams all sent nothing that long has
 * its session dropped and reopened (top_poll.c): one rule for both. */
double top_first_doc_within(double interval_s);
/* The wait for a first document is over at `now` (`drover top --once`'s --timeout): every
 * container never seen counts as not answering from then on (answer_by = now; asked_mono =
 * asked_since where it was never asked, its host still connecting). */
void top_snapshot_wait_over(struct top_snapshot *s, double asked_since, double now);
/* Heartbeat age of a rank now: the agent's age at document time plus the time by which the
 * next document is overdue (time since the document minus the refresh interval), so a silent
 * host's ages grow while a slow refresh alone never makes a rank look late. */
double top_rank_hb_age(const struct top_snapshot *s, const struct top_ct *ct,
                       const struct top_rank *r, double now);
/* 0 fresh, 1 late (> 2x expected interval), 2 stalled (> 5x). */
int top_hb_lateness(const struct top_rank *r, double age_s);
enum top_state top_rank_state(const struct top_snapshot *s, const struct top_ct *ct,
                              const struct top_rank *r, double now);
enum top_state top_ct_state(const struct top_snapshot *s, const struct top_ct *ct, double now);

/* The exit code of `drover top --once` for snapshot s, the same rule as `drover status`
 * (docs/errors.md, "status and top"): EXIT_HOSTKEY (5) when some host's key was refused, else
 * EXIT_FAIL (1) when some container could not be asked (host down, container stopped, agent
 * not answering, or nothing arrived by the deadline: never seen), else EXIT_OK, whatever state
 * the jobs are in (a failed gang is an answer, not an error).  *ret_unanswered (may be NULL):
 * how many containers were never seen. */
int top_snapshot_exit(const struct top_snapshot *s, double now, int *ret_unanswered);
/* Never seen, and no error of its own or of its host says why: its agent has not answered
 * (not yet, or not at all: a stopped or hung agent). */
bool top_ct_unanswered(const struct top_snapshot *s, const struct top_ct *ct);
/* Whether `drover top --once` names pair i as "no answer": never seen, with no other reason
 * known (no error of its own or of its host: its agent did not answer, however its row shows
 * it), and no earlier pair naming the same container (another job's) already named it, so that
 * a container is named once however many jobs it runs. */
bool top_ct_report_unanswered(const struct top_snapshot *s, int i, double now);
enum top_state top_host_state(const struct top_snapshot *s, int host, double now);
/* The container shows unreachable: an error of its own or of its host, documents older than
 * top_stale_after(), or none at all by its answer_by. */
bool top_ct_is_stale(const struct top_snapshot *s, const struct top_ct *ct, double now);
/* The job of container ct; NULL when its index is out of range. */
const struct top_job *top_job_of(const struct top_snapshot *s, const struct top_ct *ct);
/* Ktok/s under which n ranks of job j count as slow; <= 0 when there is no baseline. */
double top_slow_threshold(const struct top_job *j, int n);
/* Rank r reports training heartbeats past the job's warmup steps (counted from its resume). */
bool top_rank_past_warmup(const struct top_job *j, const struct top_rank *r);
/* Median of the newest (at most 5) trend samples, fallback when n == 0: one slow step does not
 * turn a row red. */
double top_recent_ktok(const float *trend, int n, double fallback);
/* Rank r runs below its share of the job's tolerance, past warmup. */
bool top_rank_is_slow(const struct top_snapshot *s, const struct top_ct *ct,
                      const struct top_rank *r);

/* ---- formatting helpers ---- */

/* kubectl-style age: "0s", "45s", "3m", "2h", "4d"; "-" when negative. */
const char *top_fmt_age(double seconds, char *buf, size_t buf_sz);
/* Sparkline of n values scaled to their own max, at most width glyphs (the newest), UTF-8
 * block elements or ASCII " .:-=+*#" when ascii.  "" when n == 0. */
const char *top_fmt_spark(const float *v, int n, int width, bool ascii, char *buf, size_t buf_sz);
/* "3 (5m ago)", "0". */
const char *top_fmt_restarts(int restarts, double since_s, char *buf, size_t buf_sz);
/* Bytes as "37.2G", "812M"; "-" when negative. */
const char *top_fmt_bytes(int64_t bytes, char *buf, size_t buf_sz);

/* ---- rows ---- */

enum top_col {
    TOP_COL_NAME = 0, TOP_COL_REL, TOP_COL_STATE, TOP_COL_STEP, TOP_COL_LOSS, TOP_COL_KTOK,
    TOP_COL_TREND, TOP_COL_HB, TOP_COL_RST, TOP_COL_GPU, TOP_COL_MEM, TOP_COL_TEMP, TOP_NCOLS
};
const char *top_col_title(enum top_col c);

/* Cell attributes (bits). */
#define TOP_A_RED 1u
#define TOP_A_YELLOW 2u
#define TOP_A_GREEN 4u
#define TOP_A_DIM 8u
#define TOP_A_BOLD 16u

enum top_level { TOP_L_HOST = 0, TOP_L_CT, TOP_L_RANK };

struct top_row {
    enum top_level level;
    int host, ct, rank;      /* indices (snapshot host, cts[], ranks[]); -1 where not */
    enum top_state state;
    bool folded;             /* host/ct rows: children hidden */
    bool stale;              /* data is old: whole row dimmed */
    int64_t key;             /* stable identity for keeping the selection across frames */
    char cell[TOP_NCOLS][TOP_CELL_MAX];
    unsigned attr[TOP_NCOLS];
};

/* A row's identity (level, host, container index, rank number), stable across frames. */
int64_t top_row_key(enum top_level level, int host, int ct, int rank);

struct top_view {
    bool flat;               /* t: rank rows only, "h1:101/0" names */
    bool problems_first;     /* s: worst state first (else by name) */
    bool ascii;              /* --ascii: no UTF-8 glyphs */
    char filter[TOP_FILTER_MAX]; /* /: case-insensitive substring over name, state, release */
    bool host_folded[INV_MAX_HOSTS];
    bool ct_folded[TOP_MAX_CTS];
    int trend_width;         /* glyphs in TREND (top_layout sets it) */
    const char *inv_arg;     /* -i as given, for the commands the notes name (NULL: default) */
    const char *state_dir;   /* the inventory's, for the probation note's "held" and release name
                              * (NULL: not read: the note says it is not watched) */
};

/* Build the visible rows (tree or flat, sorted, filtered, folded) into rows[max_rows].
 * Returns the number of rows (<= max_rows). */
int top_build_rows(const struct top_snapshot *s, const struct inventory *inv,
                   const struct top_view *v, double now, struct top_row *rows, int max_rows);

/* true when v's filter hides every row that would show without it (`--filter X` matching no
 * host, container, job, rank, state or release), so a text frame can say why it has no rows;
 * false with no filter, or when there is no row to hide (nothing answered yet). */
bool top_filter_hides_all(const struct top_snapshot *s, const struct inventory *inv,
                          const struct top_view *v, double now);

/* Why a row has no fresh data ("t2: no answer for 14s", "t1:101: the agent's watch stream
 * ended ..."), for the footer and --once; "" when the row is fine. */
const char *top_row_problem(const struct top_snapshot *s, const struct top_row *row, double now,
                            char *buf, size_t buf_sz);

/* The warnings under the table, each line ending in '\n', into buf[sz] (cut at a line when
 * full): for each job whose containers mark its good (or current) release bad, `drover status`'s
 * lines (status_bad_marks_line, one implementation), from every container whose newest document
 * knows the job.  Returns the number of lines. */
int top_notes(const struct top_snapshot *s, const struct top_view *v, char *buf, size_t sz);

/* Totals for the header. */
struct top_summary {
    int hosts_up, hosts;
    int cts_up, cts;         /* distinct containers (a container running two jobs counts once) */
    int ranks_running, ranks_expected;
    double ktok;
    int alerts[TOP_STATE_COUNT]; /* containers in each state (alert states matter) */
    int nan_ranks, gpu_low, gpu_hot;
    char deploy[128];        /* "train: probation" or "" */
};
void top_summarize(const struct top_snapshot *s, double now, struct top_summary *ret);

/* Column layout for a terminal width: which columns show and how wide (0 = hidden).  Columns
 * are dropped in the order MEM, TEMP, GPU%, RST, TREND, LOSS, REL until they fit; NAME takes
 * what is left.  Also sets v->trend_width. */
void top_layout(int width, struct top_view *v, int widths[TOP_NCOLS]);

/* text cut or padded to exactly w display columns (right-aligned when right) into buf. */
const char *top_fmt_cell(const char *text, int w, bool right, char *buf, size_t buf_sz);
/* Numbers are right-aligned, words left. */
bool top_col_right_aligned(enum top_col c);

/* Display width of a UTF-8 string (every non-ASCII code point counts as 1). */
int top_str_width(const char *s);

/* One whole frame as text (header, column titles, rows, footer), colour as ANSI escapes when
 * color.  Appends to a malloc'd buffer; *ret_text free()d by the caller.  -ENOMEM. */
int top_render_text(const struct top_snapshot *s, const struct inventory *inv,
                    struct top_view *v, double now, int width, bool color, char **ret_text);

/* Header lines (title and totals, alerts) as text without colour, into buf. */
void top_header_lines(const struct top_snapshot *s, const struct top_summary *sum, bool ascii,
                      char *line1, size_t l1_sz, char *line2, size_t l2_sz);

/* What `drover rollback --job` would return the job of container ct to, as the containers
 * report it: the last good release when the job runs one never promoted, else the previous
 * one.  "" when unknown (nothing seen) or there is nothing to go back to. */
const char *top_rollback_target(const struct top_snapshot *s, int job, bool *ret_to_good);

/* ---- the agent's event journal (`drover-agent events --json`, common/event.h) ---- */

/* "12:03:04 train crash 3f2a9c1b rank 0 exited 1" into buf. */
const char *top_event_format(const struct event *e, char *buf, size_t buf_sz);

#endif
