/* controller/inventory.h: the operator's inventory (INI through libinih): hosts, containers by
 * vmid, jobs (gangs of containers and GPUs with a worker command) and the probation policy.
 * docs/config.md is the reference for every key.  Parsing only: nothing here connects anywhere.
 */
#ifndef DROVER_INVENTORY_H
#define DROVER_INVENTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define INV_MAX_HOSTS 64
#define INV_MAX_JOBS 16
#define INV_MAX_CTS 32      /* containers per job (nodes of one gang) */
#define INV_MAX_ARGS 32     /* arg = ... / preflight_arg = ... keys per job */
#define INV_NAME_MAX 32
#define INV_VALUE_MAX 200   /* Debian's libinih reads at most 200 bytes a line anyway */
#define INV_PATH_MAX 256
#define INV_ERR_MAX 512
/* [drover] keep is 1..INV_KEEP_MAX (it is also every agent's --keep-releases, which takes
 * 1..10000); `drover gc --keep N` takes 0..INV_KEEP_MAX, 0 for a one-off run that keeps only the
 * protected releases (docs/config.md) */
#define INV_KEEP_MAX 10000
#define INV_AGENT_MASTER_PORT 29500 /* the agent's MASTER_PORT when a job sets none (agent/spec.c) */

struct inv_policy {
    double healthy_deadline_s;  /* every rank heartbeats (new release, phase train) within this */
    double min_healthy_time_s;  /* throughput window after warmup */
    int64_t warmup_steps;       /* steps excluded from the throughput rule */
    double tolerance;           /* fraction 0..1: pass when Ktok/s >= (1 - tolerance) * baseline */
    bool auto_revert;           /* on failure, return to the last good release */
    double progress_deadline_s; /* the whole probation must reach a verdict within this */
    int max_parallel;           /* fleet waves: jobs switched at once (>= 1) */
    int canary;                 /* fleet waves: jobs deployed alone first (>= 0) */
    /* liveness, judged by the agent always (agent/liveness.h); 0 turns a rule off */
    double first_step_deadline_s; /* gang start -> every rank's first train heartbeat */
    double silence_deadline_s;    /* longest heartbeat gap in phase train */
    double stall_deadline_s;      /* longest time without step progress in phase train */
    double checkpoint_deadline_s; /* longest checkpoint phase */
    /* Statistical verdicts (docs/controller.md, "Probation"): */
    double warmup_time_s;       /* time after the first train heartbeat excluded as warmup */
    double warmup_max_s;        /* cap on warmup, however long the step time keeps falling */
    double max_probation_time_s; /* an inconclusive comparison keeps measuring up to this */
    bool on_inconclusive_hold;  /* inconclusive / no data: hold (true) or revert (false) */
    double confidence;          /* of the shift's interval, 0.5 < confidence < 1 */
    double hold_time_s;         /* a held release: the agents revert it after this */
    double switch_deadline_s;   /* a switch: every old rank gone within this, else aborted;
                                   0 = the job's grace (30 s when unset) + 60 s */
    double lease_ttl_s;         /* the job's deploy lease lapses this long after its last renewal */
};

struct inv_host {
    char name[INV_NAME_MAX];
    char address[INV_VALUE_MAX];
    int port;
    char user[INV_NAME_MAX];
    bool local;                  /* this machine: run pct / the agent directly, no SSH */
    char agent_path[INV_PATH_MAX]; /* for HOST:local:ROOT containers; "" = [drover] agent_path */
    bool port_set, user_set;     /* written in the inventory (they win over ssh_config) */
    int line;                    /* its [host NAME] line */
};

/* One node of a gang: HOST:VMID (through pct) or HOST:local:/root (agent run directly on the
 * host with --root, no container: the GPU machine's stand-in). */
struct inv_ct {
    int host;                    /* index into inventory.hosts */
    int vmid;                    /* 100..999999999; -1 for a local root */
    char root[INV_PATH_MAX];     /* agent --root for a local root; "" otherwise */
    char socket[108];            /* agent --socket for a local root (ROOT/agent.sock); "" otherwise */
    char label[INV_NAME_MAX + INV_PATH_MAX + 8]; /* "h1:101" or "h1:local:/path" as written */
};

struct inv_job {
    char name[INV_NAME_MAX];
    int ncts;
    struct inv_ct cts[INV_MAX_CTS]; /* node_rank = index */
    int nproc_per_node;
    char gpus[64];               /* "0,1" or "" */
    char command[INV_VALUE_MAX]; /* path inside the release */
    int nargs;
    char args[INV_MAX_ARGS][INV_VALUE_MAX];
    char preflight[INV_VALUE_MAX]; /* "" = none */
    int npreflight_args;
    char preflight_args[INV_MAX_ARGS][INV_VALUE_MAX];
    char master_addr[INV_VALUE_MAX]; /* "" = agent default */
    int master_port;             /* 0 = agent default */
    double grace_s;              /* 0 = agent default */
    double preflight_timeout_s;  /* preflight's --timeout; 0 = agent default */
    double gpu_mem_gib;          /* free GPU memory each GPU needs before a start; 0 = not checked */
    char cuda[16];               /* CUDA version the release's runtime needs ("12.8"); "" = not checked */
    int nenv;                    /* env = NAME=VALUE extras for the workers (common/workerenv.h) */
    char env[16][INV_VALUE_MAX];
    struct inv_policy policy;
    /* where policy's healthy_deadline and first_step_deadline came from (enum inv_from), for
     * inventory_deadline_warning() */
    signed char healthy_deadline_from, first_step_deadline_from;
    int line;                    /* line of the [job] header, for messages */
};

enum inv_from { INV_FROM_DEFAULT, INV_FROM_POLICY, INV_FROM_JOB };

/* [notify]: who hears about outcomes (controller/notify.c, docs/config.md). */
#define INV_MAX_WEBHOOKS 4
struct inv_notify {
    int nwebhooks;
    char webhook[INV_MAX_WEBHOOKS][INV_VALUE_MAX]; /* http(s):// URLs */
    bool slack;                    /* format = slack: {"text": ...} instead of the JSON record */
    char secret_file[INV_PATH_MAX]; /* bearer token read from this file ... */
    char secret_env[INV_NAME_MAX];  /* ... or this environment variable; never printed */
    char exec[INV_PATH_MAX];       /* hook program: argv EVENT JOB, the JSON payload on stdin */
    double timeout_s;              /* per attempt; default 5s */
    int retries;                   /* further attempts after the first; default 2 */
};

struct inventory {
    char path[INV_PATH_MAX];
    char state_dir[INV_PATH_MAX];
    char known_hosts[INV_PATH_MAX];
    char identity[INV_PATH_MAX];
    char agent_path[INV_PATH_MAX];
    char staging_dir[INV_PATH_MAX];
    char ssh_config[INV_PATH_MAX]; /* OpenSSH client config read for every host; "" = none */
    double connect_timeout_s;
    double exec_timeout_s;
    int parallel;                  /* hosts worked on at once (connect, status); 1 = one by one */
    int keep;                      /* GC: newest releases kept besides every job's ways back */
    int nhosts;
    struct inv_host hosts[INV_MAX_HOSTS];
    int njobs;
    struct inv_job jobs[INV_MAX_JOBS];
    struct inv_notify notify;
};

/* Parse inventory text (len bytes, need not be NUL-terminated); path is used in messages and
 * to resolve relative known_hosts/identity/state_dir paths (relative to the file's directory).
 * Any error (syntax, unknown section or key, bad value, line over 196 bytes, undefined host,
 * duplicate container, job without containers or command) returns -EINVAL with a message
 * "FILE:LINE: [section] key: what" in err (err_sz bytes).  Returns 0 and a malloc'd inventory in
 * *ret_inv (free with inventory_free()) on success.  -ENOMEM. */
int inventory_parse(const char *text, size_t len, const char *path, struct inventory **ret_inv,
                    char *err, size_t err_sz);

/* Read and parse the file (at most 1 MiB).  -ENOENT etc. with err set as well (-EISDIR: err
 * says to give the file in the directory). */
int inventory_load(const char *path, struct inventory **ret_inv, char *err, size_t err_sz);

void inventory_free(struct inventory *inv);

/* Lookups; NULL / -1 when absent. */
const struct inv_job *inventory_find_job(const struct inventory *inv, const char *name);

/* "no [job trian] in 'drover.ini': did you mean train?" (or ": its jobs are train, pt") into
 * buf, for a --job NAME that inventory_find_job() did not find.  Returns buf. */
const char *inventory_no_job(const struct inventory *inv, const char *name, char *buf, size_t sz);
/* The same for a host name: "no [host h3] in 'PATH': did you mean h2?" or "...: its hosts are h1,
 * h2"; where name is the address of a host, says that host's name. */
const char *inventory_no_host(const struct inventory *inv, const char *name, char *buf, size_t sz);
/* "'drover.ini' has no job: add a [job NAME] section with its containers and command
 * (docs/config.md)" into buf, for an inventory with no job at all: deploy refuses it, status and
 * validate warn (an empty or wrong file showed an empty table, or "ok", without a word).
 * Returns buf. */
const char *inventory_no_jobs(const struct inventory *inv, char *buf, size_t sz);
int inventory_find_host(const struct inventory *inv, const char *name);

/* Parse "HOST:VMID" or "HOST:local:/abs/root" against inv's hosts.  -EINVAL with err set. */
int inventory_parse_ct(const struct inventory *inv, const char *spec, struct inv_ct *ret_ct,
                       char *err, size_t err_sz);

/* Are a and b (of one inventory) the same container?  One vmid on one host is one container
 * whatever its agent root; local roots (vmid -1) are one container per root. */
bool inventory_same_ct(const struct inv_ct *a, const struct inv_ct *b);
/* How many distinct containers the inventory's jobs name (two jobs sharing h1:101 count it once). */
int inventory_count_cts(const struct inventory *inv);

/* Durations: "30s", "5m", "2h", "500ms", "1.5m" or plain seconds ("45").  0 allowed; negative,
 * empty, trailing junk or unknown unit => -EINVAL, over 30 days => -ERANGE.  ret_s in seconds. */
int inventory_parse_duration(const char *s, double *ret_s);

/* Booleans: true/false/yes/no/on/off/1/0 (case-insensitive).  -EINVAL otherwise. */
int inventory_parse_bool(const char *s, bool *ret_b);

/* The warning of a job whose healthy_deadline cuts the first step short: its first_step_deadline
 * was raised (set in [job J] or [policy]) past a healthy_deadline that comes from a less
 * specific place (the built-in 60 s, or [policy] under a job's own first_step_deadline), so every
 * deploy whose first step takes longer than healthy_deadline fails with "no heartbeat ... within
 * healthy_deadline" whatever first_step_deadline allows.  It names both keys, their values and
 * sections, and what to write (max_probation_time and progress_deadline too when they end the
 * probation before the first step may come).  Into buf; NULL when there is nothing to say (both
 * set in one section, as t-21 does on purpose; the built-in pair, 60 s and 10 m, either).  Said
 * by validate, plan and deploy; never an error. */
const char *inventory_deadline_warning(const struct inv_job *j, char *buf, size_t sz);
/* A duration as the inventory takes it: "15m", "60s" (as verdicts say it), "1h", "90s", "2.5s". */
const char *inventory_duration_str(double s, char *buf, size_t sz);

/* Built-in policy defaults (docs/config.md). */
void inventory_policy_defaults(struct inv_policy *p);

/* The key identifying a job's container set, for baselines: "JOB@h1:101,h1:102" into out. */
void inventory_job_key(const struct inv_job *job, char *out, size_t out_sz);

#endif
