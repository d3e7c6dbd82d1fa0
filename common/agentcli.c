/* common/agentcli.c: drover-agent's command line (see agentcli.h): the verb and option tables
 * the agent parses with, and the builders the controller runs it with.  Pure: no I/O.
 */
#include "common/agentcli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *agent_exit_name(int code)
{
#define NAME(id, c, name) \
    if (code == (c))      \
        return name;
    AGENT_EXITS(NAME)
#undef NAME
    return NULL;
}

bool agent_stop_was_sigkilled(const char *ok_line, double *ret_grace_s)
{
    const char *p = ok_line ? strstr(ok_line, AGENT_STOP_SIGKILLED) : NULL;
    if (!p)
        return false;
    char *end;
    double g = strtod(p + strlen(AGENT_STOP_SIGKILLED), &end);
    if (ret_grace_s)
        *ret_grace_s = end != p + strlen(AGENT_STOP_SIGKILLED) && g >= 0 ? g : -1;
    return true;
}

bool agent_said_no_daemon(const char *said)
{
    return said && strstr(said, AGENT_NO_DAEMON_SAID) != NULL;
}

const char *agent_wedged_how(const char *job, const char *pidfile, char *buf, size_t sz)
{
    snprintf(buf, sz, "if it was stopped (SIGSTOP), `kill -CONT $(cat %s)` in the container resumes it; "
             "else restart it: `systemctl restart drover-agent` where systemd runs it, or `kill -9 $(cat %s)` "
             "there and `drover install --job %.64s` from the controller, which starts it again (the gangs "
             "survive either way)", pidfile, pidfile, job && job[0] ? job : "J");
    return buf;
}

bool agent_said_wedged(const char *said)
{
    return said && strstr(said, "the drover-agent daemon on '") && strstr(said, AGENT_WEDGED_SAID);
}

static const char *const verb_names[AGENT_VERB_COUNT] = {
    [AGENT_VERB_DAEMON] = "daemon",       [AGENT_VERB_VERSION] = "version",
    [AGENT_VERB_RELEASE] = "release",     [AGENT_VERB_PREFLIGHT] = "preflight",
    [AGENT_VERB_ACTIVATE] = "activate",   [AGENT_VERB_PROMOTE] = "promote",
    [AGENT_VERB_REVERT] = "revert",       [AGENT_VERB_STOP] = "stop",
    [AGENT_VERB_STATUS] = "status",       [AGENT_VERB_WATCH] = "watch",
    [AGENT_VERB_METRICS] = "metrics",     [AGENT_VERB_EVENTS] = "events",
    [AGENT_VERB_LEASE] = "lease",
    [AGENT_VERB_BASELINE] = "baseline",
    [AGENT_VERB_GPU_CHECK] = "gpu-check",
    [AGENT_VERB_START] = "start",
    [AGENT_VERB_HISTORY] = "history",
};

const char *agent_verb_name(enum agent_verb v)
{
    return (unsigned)v < AGENT_VERB_COUNT ? verb_names[v] : NULL;
}

bool agent_verb_has_sub(enum agent_verb v)
{
    return v == AGENT_VERB_RELEASE || v == AGENT_VERB_LEASE || v == AGENT_VERB_HISTORY;
}

int agent_verb_parse(const char *s)
{
    for (int v = 0; v < AGENT_VERB_COUNT; v++)
        if (strcmp(verb_names[v], s) == 0)
            return v;
    return -EINVAL;
}

/* Every option once: id, name, argument.  Both tables below are generated from this list, so
 * the getopt table and the flags the builders emit cannot disagree. */
#define AGENT_OPTIONS(X)                                          \
    X(AGENT_OPT_ROOT, "root", required_argument)                  \
    X(AGENT_OPT_SOCKET, "socket", required_argument)              \
    X(AGENT_OPT_PIDFILE, "pidfile", required_argument)            \
    X(AGENT_OPT_JOB, "job", required_argument)                    \
    X(AGENT_OPT_ID, "id", required_argument)                      \
    X(AGENT_OPT_JSON, "json", no_argument)                        \
    X(AGENT_OPT_DETACH, "detach", no_argument)                    \
    X(AGENT_OPT_NO_MARK, "no-mark", no_argument)                  \
    X(AGENT_OPT_TIMEOUT, "timeout", required_argument)            \
    X(AGENT_OPT_INTERVAL, "interval", required_argument)          \
    X(AGENT_OPT_COUNT, "count", required_argument)                \
    X(AGENT_OPT_SINCE, "since", required_argument)                \
    X(AGENT_OPT_NNODES, "nnodes", required_argument)              \
    X(AGENT_OPT_NODE_RANK, "node-rank", required_argument)        \
    X(AGENT_OPT_NPROC, "nproc-per-node", required_argument)       \
    X(AGENT_OPT_GPUS, "gpus", required_argument)                  \
    X(AGENT_OPT_MASTER_ADDR, "master-addr", required_argument)    \
    X(AGENT_OPT_MASTER_PORT, "master-port", required_argument)    \
    X(AGENT_OPT_GRACE, "grace", required_argument)                \
    X(AGENT_OPT_PROBATION, "probation-deadline", required_argument) \
    X(AGENT_OPT_KTOK, "ktok-s", required_argument)                \
    X(AGENT_OPT_REASON, "reason", required_argument)              \
    X(AGENT_OPT_ENV, "env", required_argument)                    \
    X(AGENT_OPT_KEEP, "keep-releases", required_argument)         \
    X(AGENT_OPT_CRASH_LIMIT, "crash-limit", required_argument)    \
    X(AGENT_OPT_CRASH_WINDOW, "crash-window", required_argument)  \
    X(AGENT_OPT_MAX_ROLLBACKS, "max-auto-rollbacks", required_argument) \
    X(AGENT_OPT_BACKOFF_INITIAL, "backoff-initial", required_argument) \
    X(AGENT_OPT_BACKOFF_MAX, "backoff-max", required_argument)                \
    X(AGENT_OPT_FIRST_STEP_DEADLINE, "first-step-deadline", required_argument) \
    X(AGENT_OPT_SILENCE_DEADLINE, "silence-deadline", required_argument)       \
    X(AGENT_OPT_STALL_DEADLINE, "stall-deadline", required_argument)           \
    X(AGENT_OPT_CHECKPOINT_DEADLINE, "checkpoint-deadline", required_argument) \
    X(AGENT_OPT_SAMPLES, "samples", required_argument) \
    X(AGENT_OPT_HOST_DRIVER, "host-driver", required_argument)                 \
    X(AGENT_OPT_CUDA, "cuda", required_argument)                               \
    X(AGENT_OPT_GPU_MEM, "gpu-mem", required_argument)                         \
    X(AGENT_OPT_RDZV, "rdzv", required_argument) \
    X(AGENT_OPT_RESTART_AFTER, "restart-after", required_argument) \
    X(AGENT_OPT_CGROUP, "cgroup", required_argument)              \
    X(AGENT_OPT_STATUS, "status", no_argument)                    \
    X(AGENT_OPT_LEASE_RELEASE, "lease-release", required_argument) \
    X(AGENT_OPT_SPEC_DIGEST, "spec-digest", required_argument)    \
    X(AGENT_OPT_SPEC_FIELDS, "spec-fields", required_argument)   \
    X(AGENT_OPT_TAKE_OVER, "take-over", required_argument)       \
    X(AGENT_OPT_RECORDED, "recorded", no_argument)               \
    X(AGENT_OPT_NO_START, "no-start", no_argument)

#define AS_LONGOPT(id, name, arg) { name, arg, 0, id },
const struct option agent_cli_longopts[] = {
    AGENT_OPTIONS(AS_LONGOPT)
    { "verbose", no_argument, 0, 'v' },
    { "help", no_argument, 0, 'h' },
    { 0, 0, 0, 0 },
};

#define AS_FLAG(id, name, arg) [id - AGENT_OPT_ROOT] = "--" name,
static const char *const flags[AGENT_OPT_END - AGENT_OPT_ROOT] = { AGENT_OPTIONS(AS_FLAG) };

const char *agent_opt_flag(enum agent_opt o)
{
    return o >= AGENT_OPT_ROOT && o < AGENT_OPT_END ? flags[o - AGENT_OPT_ROOT] : NULL;
}

void agent_argv_init(struct agent_argv *a)
{
    a->argc = 0;
    a->nnum = 0;
    a->err = 0;
    a->argv[0] = NULL;
}

void agent_argv_add(struct agent_argv *a, const char *word)
{
    if (!word || a->argc >= AGENT_ARGV_MAX) {
        a->err = -E2BIG;
        return;
    }
    a->argv[a->argc++] = word;
    a->argv[a->argc] = NULL;
}

static void add_verb(struct agent_argv *a, enum agent_verb v)
{
    agent_argv_add(a, agent_verb_name(v));
}

static void add_opt(struct agent_argv *a, enum agent_opt o, const char *value)
{
    agent_argv_add(a, agent_opt_flag(o));
    if (value)
        agent_argv_add(a, value);
}

/* x with a floating conversion (%g, %.0f, ...); whole numbers go through numi.  An integer
 * conversion here read an int that was never passed (gpu-check's --nproc-per-node was garbage
 * on the H200), so any other conversion is refused as a builder error. */
static const char *numf(struct agent_argv *a, const char *fmt, double x)
{
    size_t n = strlen(fmt);
    if (n < 2 || fmt[0] != '%' || !strchr("fgeFGE", fmt[n - 1])) {
        a->err = -EINVAL;
        return NULL;
    }
    if (a->nnum >= AGENT_ARGV_NUMS) {
        a->err = -E2BIG;
        return NULL;
    }
    char *b = a->num[a->nnum++];
    snprintf(b, sizeof a->num[0], fmt, x);
    return b;
}

static const char *numi(struct agent_argv *a, int x)
{
    if (a->nnum >= AGENT_ARGV_NUMS) {
        a->err = -E2BIG;
        return NULL;
    }
    char *b = a->num[a->nnum++];
    snprintf(b, sizeof a->num[0], "%d", x);
    return b;
}

void agent_argv_globals(struct agent_argv *a, const char *root, const char *socket)
{
    add_opt(a, AGENT_OPT_ROOT, root);
    add_opt(a, AGENT_OPT_SOCKET, socket);
}

int agent_argv_end(const struct agent_argv *a)
{
    return a->err;
}

void agent_argv_status(struct agent_argv *a)
{
    add_verb(a, AGENT_VERB_STATUS);
    add_opt(a, AGENT_OPT_JSON, NULL);
}

void agent_argv_watch(struct agent_argv *a, double interval_s)
{
    add_verb(a, AGENT_VERB_WATCH);
    add_opt(a, AGENT_OPT_JSON, NULL);
    add_opt(a, AGENT_OPT_INTERVAL, numf(a, "%g", interval_s));
}

void agent_argv_events(struct agent_argv *a)
{
    add_verb(a, AGENT_VERB_EVENTS);
    add_opt(a, AGENT_OPT_JSON, NULL);
}

void agent_argv_daemon(struct agent_argv *a, bool detach)
{
    add_verb(a, AGENT_VERB_DAEMON);
    if (detach)
        add_opt(a, AGENT_OPT_DETACH, NULL);
}

void agent_argv_keep_releases(struct agent_argv *a, int n)
{
    const char *v = numf(a, "%.0f", (double)n); /* kept in a->num: argv points into it */
    if (v)
        add_opt(a, AGENT_OPT_KEEP, v);
}

void agent_argv_release_add(struct agent_argv *a, const char *blob, const char *id)
{
    add_verb(a, AGENT_VERB_RELEASE);
    agent_argv_add(a, "add");
    agent_argv_add(a, blob);
    add_opt(a, AGENT_OPT_ID, id);
}

void agent_argv_release_have(struct agent_argv *a, const char *id)
{
    add_verb(a, AGENT_VERB_RELEASE);
    agent_argv_add(a, "have");
    agent_argv_add(a, id);
}

void agent_argv_release_clean(struct agent_argv *a)
{
    add_verb(a, AGENT_VERB_RELEASE);
    agent_argv_add(a, "clean");
}

int agent_clean_parse(const char *out, size_t *ret_entries, uint64_t *ret_bytes, bool *ret_incoming_kept)
{
    unsigned long long n, bytes;
    int end = 0;
    if (!out || sscanf(out, AGENT_CLEAN_WORD " %llu %llu%n", &n, &bytes, &end) != 2 || end <= 0)
        return -EINVAL;
    const char *rest = out + end;
    bool kept = !strncmp(rest, " " AGENT_CLEAN_KEPT, strlen(AGENT_CLEAN_KEPT) + 1);
    if (kept)
        rest += strlen(AGENT_CLEAN_KEPT) + 1;
    if (*rest && *rest != '\n')
        return -EINVAL;
    *ret_entries = (size_t)n;
    *ret_bytes = (uint64_t)bytes;
    *ret_incoming_kept = kept;
    return 0;
}

void agent_argv_release_missing(struct agent_argv *a, const char *manifest)
{
    add_verb(a, AGENT_VERB_RELEASE);
    agent_argv_add(a, "missing");
    agent_argv_add(a, manifest);
}

void agent_argv_release_install(struct agent_argv *a, const char *manifest, const char *pack, const char *id)
{
    add_verb(a, AGENT_VERB_RELEASE);
    agent_argv_add(a, "install");
    agent_argv_add(a, manifest);
    if (pack)
        agent_argv_add(a, pack);
    add_opt(a, AGENT_OPT_ID, id);
}

void agent_argv_lease(struct agent_argv *a, const char *job, const char *holder, double ttl_s)
{
    add_verb(a, AGENT_VERB_LEASE);
    agent_argv_add(a, ttl_s > 0 ? "take" : "release");
    agent_argv_add(a, job);
    agent_argv_add(a, holder);
    if (ttl_s > 0)
        agent_argv_add(a, numf(a, "%.0f", ttl_s));
}

void agent_argv_install_lease_release(struct agent_argv *a, const char *job, const char *holder)
{
    add_opt(a, AGENT_OPT_JOB, job);
    add_opt(a, AGENT_OPT_LEASE_RELEASE, holder);
}

void agent_argv_lease_status(struct agent_argv *a, const char *job, const char *holder, double ttl_s)
{
    agent_argv_lease(a, job, holder, ttl_s > 0 ? ttl_s : 1);
    add_opt(a, AGENT_OPT_STATUS, NULL);
}

void agent_argv_lease_take_over(struct agent_argv *a, const char *dead)
{
    add_opt(a, AGENT_OPT_TAKE_OVER, dead);
}

int agent_lease_holder_of(const char *said, char *ret_holder, size_t sz)
{
    const char *h = said ? strstr(said, AGENT_LEASE_HELD_BY) : NULL;
    if (!h)
        return -ENOENT;
    h += strlen(AGENT_LEASE_HELD_BY);
    const char *end = strstr(h, AGENT_LEASE_HELD_END);
    if (!end || end == h)
        return -ENOENT;
    if ((size_t)(end - h) >= sz)
        return -ENAMETOOLONG;
    memcpy(ret_holder, h, (size_t)(end - h));
    ret_holder[end - h] = '\0';
    return 0;
}

void agent_argv_samples(struct agent_argv *a, const char *json)
{
    add_opt(a, AGENT_OPT_SAMPLES, json);
}

void agent_argv_baseline(struct agent_argv *a, const char *job)
{
    add_verb(a, AGENT_VERB_BASELINE);
    add_opt(a, AGENT_OPT_JOB, job);
}

void agent_argv_stop(struct agent_argv *a, const char *job)
{
    add_verb(a, AGENT_VERB_STOP);
    add_opt(a, AGENT_OPT_JOB, job);
}

void agent_argv_stop_switch(struct agent_argv *a, const char *job, double restart_after_s)
{
    agent_argv_stop(a, job);
    if (restart_after_s > 0)
        add_opt(a, AGENT_OPT_RESTART_AFTER, numf(a, "%.0f", restart_after_s < 1 ? 1 : restart_after_s));
}

void agent_argv_rdzv(struct agent_argv *a, const char *rdzv)
{
    if (rdzv && rdzv[0])
        add_opt(a, AGENT_OPT_RDZV, rdzv);
}

void agent_argv_history_add(struct agent_argv *a, const char *job, const char *line)
{
    add_verb(a, AGENT_VERB_HISTORY);
    agent_argv_add(a, "add");
    agent_argv_add(a, job);
    agent_argv_add(a, line);
}

void agent_argv_history_lease_release(struct agent_argv *a, const char *holder)
{
    add_opt(a, AGENT_OPT_LEASE_RELEASE, holder);
}

void agent_argv_history_list(struct agent_argv *a, const char *job)
{
    add_verb(a, AGENT_VERB_HISTORY);
    agent_argv_add(a, "list");
    agent_argv_add(a, job);
}

void agent_argv_start(struct agent_argv *a, const char *job, const char *rdzv)
{
    add_verb(a, AGENT_VERB_START);
    add_opt(a, AGENT_OPT_JOB, job);
    if (rdzv && rdzv[0])
        add_opt(a, AGENT_OPT_RDZV, rdzv);
}

void agent_argv_revert(struct agent_argv *a, const char *job, const char *reason, bool no_mark)
{
    add_verb(a, AGENT_VERB_REVERT);
    add_opt(a, AGENT_OPT_JOB, job);
    if (reason)
        add_opt(a, AGENT_OPT_REASON, reason);
    if (no_mark)
        add_opt(a, AGENT_OPT_NO_MARK, NULL);
}

void agent_argv_revert_no_start(struct agent_argv *a)
{
    add_opt(a, AGENT_OPT_NO_START, NULL);
}

void agent_argv_promote(struct agent_argv *a, const struct agent_promote *p)
{
    add_verb(a, AGENT_VERB_PROMOTE);
    agent_argv_add(a, p->id);
    add_opt(a, AGENT_OPT_JOB, p->job);
    if (p->ktok_s > 0)
        add_opt(a, AGENT_OPT_KTOK, numf(a, "%.3f", p->ktok_s));
    if (p->spec_digest && p->spec_digest[0])
        add_opt(a, AGENT_OPT_SPEC_DIGEST, p->spec_digest);
}

void agent_argv_preflight(struct agent_argv *a, const char *id, const char *job, const char *gpus,
                          double timeout_s)
{
    add_verb(a, AGENT_VERB_PREFLIGHT);
    agent_argv_add(a, id);
    add_opt(a, AGENT_OPT_JOB, job);
    if (gpus && gpus[0])
        add_opt(a, AGENT_OPT_GPUS, gpus);
    if (timeout_s > 0)
        add_opt(a, AGENT_OPT_TIMEOUT, numf(a, "%.0f", timeout_s));
}

void agent_argv_env(struct agent_argv *a, const char *kv)
{
    add_opt(a, AGENT_OPT_ENV, kv);
}

void agent_argv_command(struct agent_argv *a, const char *cmd)
{
    agent_argv_add(a, "--");
    agent_argv_add(a, cmd);
}

void agent_argv_activate(struct agent_argv *a, const struct agent_activate *p)
{
    add_verb(a, AGENT_VERB_ACTIVATE);
    agent_argv_add(a, p->id);
    add_opt(a, AGENT_OPT_JOB, p->job);
    add_opt(a, AGENT_OPT_NNODES, numi(a, p->nnodes));
    add_opt(a, AGENT_OPT_NODE_RANK, numi(a, p->node_rank));
    add_opt(a, AGENT_OPT_NPROC, numi(a, p->nproc_per_node));
    if (p->gpus && p->gpus[0])
        add_opt(a, AGENT_OPT_GPUS, p->gpus);
    if (p->master_addr && p->master_addr[0])
        add_opt(a, AGENT_OPT_MASTER_ADDR, p->master_addr);
    if (p->master_port)
        add_opt(a, AGENT_OPT_MASTER_PORT, numi(a, p->master_port));
    if (p->grace_s > 0)
        add_opt(a, AGENT_OPT_GRACE, numf(a, "%.0f", p->grace_s));
    add_opt(a, AGENT_OPT_PROBATION, numf(a, "%.0f", p->probation_deadline_s));
    add_opt(a, AGENT_OPT_FIRST_STEP_DEADLINE, numf(a, "%g", p->first_step_deadline_s));
    add_opt(a, AGENT_OPT_SILENCE_DEADLINE, numf(a, "%g", p->silence_deadline_s));
    add_opt(a, AGENT_OPT_STALL_DEADLINE, numf(a, "%g", p->stall_deadline_s));
    add_opt(a, AGENT_OPT_CHECKPOINT_DEADLINE, numf(a, "%g", p->checkpoint_deadline_s));
    if (p->rdzv && p->rdzv[0])
        add_opt(a, AGENT_OPT_RDZV, p->rdzv);
    if (p->spec_digest && p->spec_digest[0])
        add_opt(a, AGENT_OPT_SPEC_DIGEST, p->spec_digest);
    if (p->spec_fields && p->spec_fields[0])
        add_opt(a, AGENT_OPT_SPEC_FIELDS, p->spec_fields);
}

void agent_argv_activate_recorded(struct agent_argv *a, const char *id, const char *job,
                                  const char *spec_digest, double probation_deadline_s,
                                  const char *rdzv)
{
    add_verb(a, AGENT_VERB_ACTIVATE);
    agent_argv_add(a, id);
    add_opt(a, AGENT_OPT_JOB, job);
    add_opt(a, AGENT_OPT_SPEC_DIGEST, spec_digest);
    add_opt(a, AGENT_OPT_RECORDED, NULL);
    add_opt(a, AGENT_OPT_PROBATION, numf(a, "%.0f", probation_deadline_s));
    if (rdzv && rdzv[0])
        add_opt(a, AGENT_OPT_RDZV, rdzv);
}

void agent_argv_gpu_check(struct agent_argv *a, int nproc_per_node, const char *gpus,
                          const char *host_driver, const char *cuda, double gpu_mem)
{
    add_verb(a, AGENT_VERB_GPU_CHECK);
    add_opt(a, AGENT_OPT_NPROC, numi(a, nproc_per_node));
    if (gpus && gpus[0])
        add_opt(a, AGENT_OPT_GPUS, gpus);
    if (host_driver && host_driver[0])
        add_opt(a, AGENT_OPT_HOST_DRIVER, host_driver);
    if (cuda && cuda[0])
        add_opt(a, AGENT_OPT_CUDA, cuda);
    if (gpu_mem > 0)
        add_opt(a, AGENT_OPT_GPU_MEM, numf(a, "%.0f", gpu_mem));
}
