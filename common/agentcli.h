/* common/agentcli.h: drover-agent's command line, the contract between the controller (which
 * builds it and runs it through `pct exec <vmid> -- drover-agent ...`) and the agent (which
 * parses it).  docs/protocol.md, "Agent command line", describes it; this file and agentcli.c
 * are the only places that spell a verb or an option name.
 *
 *   - enum agent_exit: the agent's exit codes (docs/errors.md, "drover-agent"), read by both.
 *   - enum agent_verb and agent_verb_parse(): the verbs, for the agent's dispatch table.
 *   - enum agent_opt and agent_cli_longopts[]: every option, the getopt_long table the agent
 *     parses with.  The builders below emit names from the same table, so renaming an option
 *     renames it on both sides, and an option the agent does not know cannot be built.
 *   - struct agent_argv and agent_argv_<verb>(): one builder per verb the controller runs.
 *
 * Builders never fail half-way silently: an argv that does not fit sets a->err = -E2BIG, which
 * agent_argv_end() returns.  Strings passed in are referenced, not copied (they must outlive
 * the argv); numbers are formatted into the struct itself.
 */
#ifndef DROVER_AGENTCLI_H
#define DROVER_AGENTCLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where an agent started without --root/--socket keeps its store, control socket and pidfile
 * (the controller pushes bundles under the root and stops the daemon through the pidfile).  An
 * agent given --socket PATH.sock uses PATH.pid. */
#define AGENT_DEFAULT_ROOT "/var/lib/drover"
#define AGENT_DEFAULT_SOCKET "/run/drover/agent.sock"
#define AGENT_DEFAULT_PIDFILE "/run/drover/agent.pid"

/* CLI exit codes; never renumbered (docs/errors.md, "drover-agent"): enum name, code,
 * docs/errors.md's name.  The enum and agent_exit_name() are generated from this one list, and
 * test-common-agentcli checks every row against docs/errors.md. */
#define AGENT_EXITS(X)                                                                      \
    X(AGENT_EXIT_OK, 0, "ok")                                                              \
    X(AGENT_EXIT_FAIL, 1, "fail")             /* the operation failed; reason on stderr */ \
    X(AGENT_EXIT_USAGE, 2, "usage")           /* bad command line */                       \
    X(AGENT_EXIT_NO_DAEMON, 3, "no_daemon")   /* control socket unreachable */             \
    X(AGENT_EXIT_NO_RELEASE, 4, "no_release") /* release not in the store */               \
    /* bundle failed verification (checksum, size, path, id) */                            \
    X(AGENT_EXIT_BUNDLE, 5, "bundle")                                                      \
    X(AGENT_EXIT_EXEC, 6, "exec") /* the job's command cannot be executed */               \
    /* another operation on the job is in progress / second daemon */                      \
    X(AGENT_EXIT_BUSY, 7, "busy")                                                          \
    /* ENOSPC/EDQUOT while installing a release; nothing installed */                      \
    X(AGENT_EXIT_DISK_FULL, 8, "disk_full")                                                \
    /* gpu-check: the container's GPU environment is broken */                            \
    X(AGENT_EXIT_GPU_ENV, 9, "gpu_env")                                                    \
    X(AGENT_EXIT_TIMEOUT, 124, "timeout") /* preflight ran past --timeout */

#define AGENT_EXIT_ENUM(id, code, name) id = code,
enum agent_exit { AGENT_EXITS(AGENT_EXIT_ENUM) };
#undef AGENT_EXIT_ENUM

/* The word of docs/errors.md's "name" column ("busy"); NULL for a code that is not ours. */
const char *agent_exit_name(int code);

/* What the agent CLI writes on stderr, after "VERB: ", when no daemon listens on its control
 * socket (exit AGENT_EXIT_NO_DAEMON): the daemon is not running there (killed, crashed, never
 * started).  The same exit code also says a daemon that sent nothing in time (wedged or
 * stopped), in other words; the controller tells the two apart by these. */
#define AGENT_NO_DAEMON_SAID "no drover-agent daemon listening on"
/* Does said (the agent CLI's last stderr line; NULL as "") say that no daemon listens? */
bool agent_said_no_daemon(const char *said);
/* What the agent CLI writes on stderr, after "VERB: the drover-agent daemon on 'SOCKET'", when
 * its daemon took the request and sent nothing for its idle deadline ("... sent nothing for 60 s:
 * it is stopped or wedged ..."): a daemon stopped (SIGSTOP) or hung. */
#define AGENT_WEDGED_SAID "' sent nothing for "
/* How to bring back a daemon that sends nothing (the agent CLI's words after AGENT_WEDGED_SAID,
 * and drover's), into buf: stopped with SIGSTOP, or wedged; where systemd runs it and where not
 * (the hint named systemctl alone, in containers without systemd).  job: the job's name for
 * `drover install --job J` (NULL or "": "J").  pidfile: the daemon's.  Returns buf. */
const char *agent_wedged_how(const char *job, const char *pidfile, char *buf, size_t sz);
/* Does said (NULL as "") say that the daemon sent nothing in time? */
bool agent_said_wedged(const char *said);

enum agent_verb {
    AGENT_VERB_DAEMON = 0,
    AGENT_VERB_VERSION,
    AGENT_VERB_RELEASE, /* release add BLOB --id ID | release list */
    AGENT_VERB_PREFLIGHT,
    AGENT_VERB_ACTIVATE,
    AGENT_VERB_PROMOTE,
    AGENT_VERB_REVERT,
    AGENT_VERB_STOP,
    AGENT_VERB_STATUS,
    AGENT_VERB_WATCH,
    AGENT_VERB_METRICS,
    AGENT_VERB_EVENTS,
    AGENT_VERB_LEASE, /* lease take JOB HOLDER TTL_S | lease release JOB HOLDER (agent/lease.h) */
    AGENT_VERB_BASELINE, /* baseline --job J: the sample set promote --samples kept */
    AGENT_VERB_GPU_CHECK, /* gpu-check: the GPU environment preflight (agent/gpucheck.h) */
    AGENT_VERB_START, /* start --job J [--rdzv G]: the job's current release again (an aborted switch) */
    AGENT_VERB_HISTORY, /* history add JOB LINE [--lease-release H] | history list JOB (agent/history.h) */
    AGENT_VERB_COUNT
};

const char *agent_verb_name(enum agent_verb v);
/* The verb named s; -EINVAL when there is none. */
int agent_verb_parse(const char *s);
/* A verb whose second word names the step (release have|missing|install, lease take|release,
 * history add|list): messages about a call name both words. */
bool agent_verb_has_sub(enum agent_verb v);

/* Option ids (getopt_long's val); 'v' and 'h' are -v/--verbose and -h/--help. */
enum agent_opt {
    AGENT_OPT_ROOT = 256, AGENT_OPT_SOCKET, AGENT_OPT_PIDFILE, AGENT_OPT_JOB, AGENT_OPT_ID,
    AGENT_OPT_JSON, AGENT_OPT_DETACH, AGENT_OPT_TIMEOUT, AGENT_OPT_INTERVAL, AGENT_OPT_COUNT,
    AGENT_OPT_SINCE, AGENT_OPT_NNODES, AGENT_OPT_NODE_RANK, AGENT_OPT_NPROC, AGENT_OPT_GPUS,
    AGENT_OPT_MASTER_ADDR, AGENT_OPT_MASTER_PORT, AGENT_OPT_GRACE, AGENT_OPT_PROBATION,
    AGENT_OPT_KTOK, AGENT_OPT_REASON, AGENT_OPT_ENV, AGENT_OPT_KEEP, AGENT_OPT_CRASH_LIMIT,
    AGENT_OPT_CRASH_WINDOW, AGENT_OPT_MAX_ROLLBACKS, AGENT_OPT_BACKOFF_INITIAL,
    AGENT_OPT_BACKOFF_MAX, AGENT_OPT_FIRST_STEP_DEADLINE, AGENT_OPT_SILENCE_DEADLINE,
    AGENT_OPT_STALL_DEADLINE, AGENT_OPT_CHECKPOINT_DEADLINE, AGENT_OPT_SAMPLES,
    AGENT_OPT_HOST_DRIVER, AGENT_OPT_CUDA, AGENT_OPT_GPU_MEM, AGENT_OPT_RDZV, AGENT_OPT_NO_MARK,
    AGENT_OPT_RESTART_AFTER, AGENT_OPT_CGROUP, AGENT_OPT_STATUS, AGENT_OPT_LEASE_RELEASE, AGENT_OPT_SPEC_DIGEST,
    AGENT_OPT_SPEC_FIELDS, AGENT_OPT_TAKE_OVER, AGENT_OPT_RECORDED, AGENT_OPT_NO_START, AGENT_OPT_END
};

/* getopt_long's table of every option, {0} terminated. */
extern const struct option agent_cli_longopts[];
/* "--job" for AGENT_OPT_JOB (with the dashes); NULL for an unknown id. */
const char *agent_opt_flag(enum agent_opt o);

#define AGENT_ARGV_MAX 150 /* fits pct.h's PCT_ARGV_MAX with the pct/agent prefix */
#define AGENT_ARGV_NUMS 16

struct agent_argv {
    const char *argv[AGENT_ARGV_MAX + 1]; /* NULL-terminated */
    int argc;
    char num[AGENT_ARGV_NUMS][32];        /* formatted numbers argv points into */
    int nnum;
    int err;                              /* -E2BIG once something did not fit */
};

/* Empty argv (no program name: pct_agent_argv() prepends the agent's path). */
void agent_argv_init(struct agent_argv *a);
/* Append a raw word (a command after "--"); internal to builders and callers with a program. */
void agent_argv_add(struct agent_argv *a, const char *word);
/* The global options that come before the verb: --root ROOT --socket SOCKET. */
void agent_argv_globals(struct agent_argv *a, const char *root, const char *socket);
/* 0, or -E2BIG when anything did not fit, -EINVAL when a builder formatted a number with the
 * wrong conversion (a bug in agentcli.c, which test-common-agentcli catches); the argv is then
 * unusable. */
int agent_argv_end(const struct agent_argv *a);

/* One builder per verb; each appends to a (after agent_argv_init, and globals if any). */
void agent_argv_status(struct agent_argv *a);                        /* status --json */
void agent_argv_watch(struct agent_argv *a, double interval_s);     /* watch --json --interval S */
void agent_argv_events(struct agent_argv *a);                        /* events --json */
void agent_argv_daemon(struct agent_argv *a, bool detach);          /* daemon [--detach] */
void agent_argv_release_add(struct agent_argv *a, const char *blob, const char *id);
/* release have ID;  release missing MANIFEST ("-": stdin);  release install MANIFEST [PACK]
 * --id ID (pack NULL: none; "-": stdin). */
void agent_argv_release_have(struct agent_argv *a, const char *id);
/* --keep-releases N (after agent_argv_daemon: the container store's GC, docs/config.md keep) */
void agent_argv_keep_releases(struct agent_argv *a, int n);
void agent_argv_release_missing(struct agent_argv *a, const char *manifest);
/* release clean: the stale temp entries an interrupted install left (objects/.tmp.<sha>.<pid>
 * of a dead pid, releases/<id>.tmp.<pid>), and incoming/'s manifests and packs when no deploy
 * lease is held there (agent/objstore.h, objstore_clean_gc).  Says one line on stdout,
 * AGENT_CLEAN_LINE: "removed N BYTES" and " incoming-kept" when incoming files stayed because
 * a lease is held; agent_clean_parse() reads it. */
void agent_argv_release_clean(struct agent_argv *a);
#define AGENT_CLEAN_WORD "removed"
#define AGENT_CLEAN_KEPT "incoming-kept"
/* 0 and the three, or -EINVAL when out does not start with the line (ret_* untouched). */
int agent_clean_parse(const char *out, size_t *ret_entries, uint64_t *ret_bytes, bool *ret_incoming_kept);
void agent_argv_release_install(struct agent_argv *a, const char *manifest, const char *pack, const char *id);
/* --job J --lease-release HOLDER after release_install: once the release is installed (exit 0),
 * the agent gives back J's deploy lease held by HOLDER and says so on stdout ("lease of job 'J'
 * given back"): `deploy --stage-only`'s last call into a container is then its install.  Only
 * for agents that took the lease with --status (the same version; older ones refuse it). */
void agent_argv_install_lease_release(struct agent_argv *a, const char *job, const char *holder);
void agent_argv_stop(struct agent_argv *a, const char *job);
/* stop --job J --restart-after S: the first phase of a switch; S (whole seconds, at least 1) is
 * the agent's switch deadline: it starts the stopped release again when nothing follows by then.
 * restart_after_s <= 0: a plain stop. */
void agent_argv_stop_switch(struct agent_argv *a, const char *job, double restart_after_s);
/* --rdzv G after a revert (or start): the release started gets generation G ("" or NULL: none) */
void agent_argv_rdzv(struct agent_argv *a, const char *rdzv);
/* history add JOB LINE (one controller history record) | history list JOB */
void agent_argv_history_add(struct agent_argv *a, const char *job, const char *line);
/* --lease-release HOLDER after history_add: once the record is kept (exit 0), the agent gives back
 * JOB's deploy lease held by HOLDER and says so on stdout ("lease of job 'J' given back"): a
 * deploy's last call into a container is then the record of its outcome.  An agent older than
 * this ignores the flag there (it knows it from `release install`) and keeps the record: drover
 * then gives the lease back on its own, where no such line came. */
void agent_argv_history_lease_release(struct agent_argv *a, const char *holder);
void agent_argv_history_list(struct agent_argv *a, const char *job);
/* start --job J [--rdzv G] (rdzv "" or NULL: left out) */
void agent_argv_start(struct agent_argv *a, const char *job, const char *rdzv);
/* lease take JOB HOLDER TTL_S (ttl != 0) or lease release JOB HOLDER (ttl == 0) */
void agent_argv_lease(struct agent_argv *a, const char *job, const char *holder, double ttl_s);
/* lease take JOB HOLDER TTL_S --status: the lease, then (when it was taken or renewed) the
 * status document as `status --json` prints it, as the last line of stdout, so a deploy's lease
 * and survey are one call per container (status_after_lease() finds the document).  An agent
 * older than --status refuses it with exit 2 (usage) and takes nothing: ask again without. */
void agent_argv_lease_status(struct agent_argv *a, const char *job, const char *holder, double ttl_s);
/* --take-over DEAD after agent_argv_lease{,_status}: the lease held by exactly DEAD (a holder the
 * controller found no longer running on its own host) is taken over at once instead of refused;
 * a lease held by anyone else is refused as always.  An agent older than --take-over refuses it
 * with exit 2 (usage) and takes nothing. */
void agent_argv_lease_take_over(struct agent_argv *a, const char *dead);
/* A `revert` (exit 0) whose job already runs, or starts, a gang of its good release with the
 * good spec (its agent went back by itself) says on stdout "already on the good release ID, its
 * gang STATE: nothing stopped or started"; the controller reads this prefix to tell it from a
 * revert that started the good release (agent/jobmachine.c, controller/deploy/deploy.c). */
#define AGENT_REVERT_ALREADY "already on the good release"
/* A `stop` (and a switch's stop, exit 0) says on stdout "stopped: no process of the gang is left"
 * (the controller's switch reads "ok" as every old rank gone); where a rank outlived SIGTERM for
 * the job's grace and was SIGKILLed, the agent adds AGENT_STOP_SIGKILLED and the grace in whole
 * seconds: "...; SIGKILLed after its grace of 15 s (a rank ignored SIGTERM)", so the controller
 * warns that a checkpoint written on SIGTERM may be missing.  An older agent never says it. */
#define AGENT_STOP_SIGKILLED "SIGKILLed after its grace of "
/* Does the agent's ok line say the stopped gang was SIGKILLed after its grace?  true with
 * *ret_grace_s (may be NULL) the grace it said (-1 when unreadable); false for a stop that
 * ended on SIGTERM, an older agent's line, or NULL. */
bool agent_stop_was_sigkilled(const char *ok_line, double *ret_grace_s);
/* A request about a job the agent does not know (never deployed there) is refused (exit 1) with
 * "no job 'J' on this agent"; the controller's stop and start read this prefix (stopstart.c). */
#define AGENT_NO_JOB "no job '"
/* A refused `lease take` (exit 7) says on stderr "job 'J' is being deployed by HOLDER (lease
 * taken N s ago, renewed N s ago, expires in N s)"; the agent prints it with these two pieces. */
#define AGENT_LEASE_HELD_BY "is being deployed by "
#define AGENT_LEASE_HELD_END " (lease taken "
/* The HOLDER of such a line (anywhere in said, an agent's stderr or the reason made of it):
 * 0 with ret_holder set; -ENOENT no such line; -ENAMETOOLONG it does not fit sz (ret untouched). */
int agent_lease_holder_of(const char *said, char *ret_holder, size_t sz);
/* no_mark: the release left behind reached no verdict (operator's Ctrl-C during probation, an
 * analysis that passed): it is not marked bad (docs/agent.md, "Bad marks"). */
void agent_argv_revert(struct agent_argv *a, const char *job, const char *reason, bool no_mark);
/* --no-start after agent_argv_revert: the agent makes the good release current again and
 * leaves the job stopped (no gang started; a gang that runs is stopped), recorded as `stop`
 * records it, so that `start` runs the good release later and an agent restart starts nothing.
 * For a deploy onto a job the operator had stopped.  Only for agents whose status says
 * STATUS_FEAT_REVERT_NO_START; an older one refuses it with exit 2 (usage), nothing changed. */
void agent_argv_revert_no_start(struct agent_argv *a);
struct agent_promote {
    const char *id, *job;
    double ktok_s;           /* <= 0: left out; else printed with 3 decimals */
    /* the job spec digest of the pair the controller judged (what it activated there); the
     * agent promotes only when its current pair has exactly this digest (common/specdigest.h,
     * spec_digest_matches).  "" or NULL: left out (an agent without the status feature
     * STATUS_FEAT_PROMOTE_SPEC refuses the option with exit 2) */
    const char *spec_digest;
};
/* promote ID --job J [--ktok-s X] [--spec-digest D] */
void agent_argv_promote(struct agent_argv *a, const struct agent_promote *p);
/* --samples JSON after promote: the baseline sample set (common/samples.h) the agent keeps. */
void agent_argv_samples(struct agent_argv *a, const char *json);
/* baseline --job J */
void agent_argv_baseline(struct agent_argv *a, const char *job);
/* preflight ID --job J [--gpus G] [--timeout S]  (gpus "" and timeout_s <= 0 left out; the
 * timeout printed as whole seconds); then agent_argv_env() and agent_argv_command(). */
void agent_argv_preflight(struct agent_argv *a, const char *id, const char *job, const char *gpus,
                          double timeout_s);
/* --env NAME=VALUE (activate, preflight). */
void agent_argv_env(struct agent_argv *a, const char *kv);
/* "--" CMD: ends the agent's options (activate, preflight); the caller appends the command's
 * arguments with agent_argv_add(). */
void agent_argv_command(struct agent_argv *a, const char *cmd);

struct agent_activate {
    const char *id, *job;
    int nnodes, node_rank, nproc_per_node;
    const char *gpus;          /* "" or NULL: left out */
    const char *master_addr;   /* "" or NULL: left out */
    int master_port;           /* 0: left out */
    double grace_s;            /* <= 0: left out; printed as a whole number of seconds */
    double probation_deadline_s; /* printed as a whole number of seconds */
    /* liveness deadlines the agent judges (agent/liveness.h), always sent, printed with %g */
    double first_step_deadline_s, silence_deadline_s, stall_deadline_s, checkpoint_deadline_s;
    const char *rdzv;          /* the switch's rendezvous generation; "" or NULL: left out */
    /* the job spec digest (common/specdigest.h) of what this activation launches, and its
     * per-field digests; "" or NULL: left out (the agent then records the spec as unknown) */
    const char *spec_digest, *spec_fields;
};
/* activate ID --job J --nnodes N --node-rank R --nproc-per-node P [--gpus G] [--master-addr A]
 * [--master-port P] [--grace S] --probation-deadline S --first-step-deadline S
 * --silence-deadline S --stall-deadline S --checkpoint-deadline S [--rdzv G] [--spec-digest D
 * --spec-fields F]; then agent_argv_env() and agent_argv_command(). */
void agent_argv_activate(struct agent_argv *a, const struct agent_activate *p);

/* activate ID --job J --spec-digest D --recorded [--probation-deadline S] [--rdzv G]: start the
 * job spec the agent recorded for (ID, D) when that pair ran here (how `drover rollback` returns
 * to an earlier promoted pair whose spec the inventory no longer holds); no command, no other
 * spec option.  Only for agents whose status says STATUS_FEAT_RECORDED_SPEC; an older one
 * refuses it with exit 2 (usage) before anything is stopped.  rdzv "" or NULL: left out. */
void agent_argv_activate_recorded(struct agent_argv *a, const char *id, const char *job,
                                  const char *spec_digest, double probation_deadline_s,
                                  const char *rdzv);

/* gpu-check --nproc-per-node P [--gpus G] [--host-driver V] [--cuda X.Y] [--gpu-mem BYTES]
 * ("" or NULL strings and gpu_mem 0 left out). */
void agent_argv_gpu_check(struct agent_argv *a, int nproc_per_node, const char *gpus,
                          const char *host_driver, const char *cuda, double gpu_mem);

#endif
