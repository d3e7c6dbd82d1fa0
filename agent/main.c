/* agent/main.c: drover-agent, the in-container agent: one binary that is both the daemon and
 * the command line the controller runs through `pct exec <vmid> -- drover-agent ...`
 * (docs/protocol.md, "Agent command line"; docs/agent.md).
 *
 * Owns argument parsing and turning results into stdout / one-line stderr reasons / exit codes.
 * Store verbs (release add/list, preflight, events) work on --root directly; job verbs
 * (activate, promote, revert, stop, status, watch) go to the daemon over the control socket.
 * Never talks to anything outside the container; never exits below main().
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/daemon.h"
#include "agent/history.h"
#include "agent/lease.h"
#include "agent/gpucheck.h"
#include "agent/metrics.h"
#include "agent/rpc.h"
#include "agent/state.h"
#include "agent/objstore.h"
#include "agent/store.h"
#include "agent/proctree.h"
#include "agent/supervise.h"
#include "common/agentcli.h"
#include "common/bundle.h"
#include "common/log.h"
#include "common/safefile.h"
#include "common/samples.h"
#include "common/status.h"
#include "common/text.h"
#include "common/trainexit.h"
#include "common/util.h"
#include "common/workerenv.h"

#ifndef DROVER_VERSION
#define DROVER_VERSION "unknown"
#endif

struct cli {
    char root[PATH_MAX - 512];
    char socket[108];
    char pidfile[PATH_MAX];
    char job[JOB_NAME_MAX];
    char id[RELEASE_ID_LEN + 1];
    char reason[256];
    bool json, detach;
    bool no_mark; /* revert --no-mark */
    bool no_start; /* revert --no-start */
    bool recorded; /* activate --recorded: the spec recorded for (ID, --spec-digest) */
    bool lease_status; /* lease take --status: the status document after the lease */
    char lease_holder[LEASE_HOLDER_MAX]; /* release install --lease-release HOLDER (with --job) */
    char lease_dead[LEASE_HOLDER_MAX]; /* lease take --take-over DEAD: a holder its controller found gone */
    double restart_after_s; /* stop --restart-after S: a switch's stop */
    bool metrics; /* the metrics verb: status as Prometheus text */
    double timeout_s, interval_s, probation_s, ktok_s;
    int64_t count, since;
    char host_driver[32], cuda[32]; /* gpu-check */
    double gpu_mem;
    struct job_spec spec;
    struct daemon_opts dopts;
    int nargs;
    char **args; /* positional arguments after the verb */
    int ncmd;
    char **cmd;  /* after "--" */
    const char *samples; /* promote --samples: a baseline sample set (common/samples.h), argv's */
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: drover-agent [--root DIR] [--socket PATH] [-v] VERB ... | --version | --help\n"
            "  daemon [--detach] [--pidfile P] [--keep-releases N] [--crash-limit K] [--crash-window S]\n"
            "         [--max-auto-rollbacks N] [--backoff-initial S] [--backoff-max S]\n"
            "         [--cgroup auto|v2|v1|none]\n"
            "  version\n"
            "  release add BLOB --id ID | release list [--json] | release verify ID | release clean\n"
            "  release have ID... | release missing MANIFEST|- | release install MANIFEST [PACK|-] --id ID [--job J --lease-release H]\n"
            "  lease take JOB HOLDER TTL_S [--status] [--take-over DEAD] | lease release JOB HOLDER\n"
            "  history add JOB LINE [--lease-release H] | history list JOB   the job's deploy history kept here\n"
            "  preflight ID [--timeout S] [--job J] [--gpus 0,1] [--env NAME=VALUE]... -- CMD ARGS...\n"
            "  activate ID --job J --nnodes N --node-rank R --nproc-per-node P [--gpus 0,1]\n"
            "           [--master-addr A] [--master-port P] [--grace S] [--probation-deadline S]\n"
            "           [--first-step-deadline S] [--silence-deadline S] [--stall-deadline S]\n"
            "           [--checkpoint-deadline S] [--rdzv G] [--spec-digest D --spec-fields F]\n"
            "           [--env NAME=VALUE]... -- CMD ARGS...\n"
            "  activate ID --job J --spec-digest D --recorded [--probation-deadline S] [--rdzv G]\n"
            "           the job spec recorded here for (ID, D), as it ran before\n"
            "  promote ID --job J [--ktok-s X] [--samples JSON] [--spec-digest D]\n"
            "  baseline --job J             the promoted release's samples (kept by promote --samples)\n"
            "  revert --job J [--reason TEXT] [--no-mark] [--no-start] [--rdzv G]\n"
            "  stop --job J [--restart-after S] | start --job J [--rdzv G]\n"
            "  status [--json] | watch [--json] [--interval S] [--count N]\n"
            "  metrics                      status as Prometheus text (node_exporter textfile collector)\n"
            "  events [--since SEQ] [--json]\n"
            "  gpu-check [--gpus 0,1] [--nproc-per-node P] [--host-driver V] [--cuda X.Y] [--gpu-mem BYTES]\n"
            "exit codes (common/agentcli.h's table; meanings in docs/errors.md, \"drover-agent\"):\n ");
    const char *sep = " ";
    for (int code = 0; code < 256; code++)
        if (agent_exit_name(code)) {
            fprintf(f, "%s%d %s", sep, code, agent_exit_name(code));
            sep = ", ";
        }
    fputc('\n', f);
}

/* The range the last parse_num/parse_int asked for, for the error naming the option (the
 * option loop is single-threaded and reports right after the failed parse). */
static struct {
    bool set, whole;
    double lo, hi;
} last_range;

static int parse_num(const char *s, double lo, double hi, double *v)
{
    last_range.set = true;
    last_range.whole = false;
    last_range.lo = lo;
    last_range.hi = hi;
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (errno || end == s || *end || !(x >= lo && x <= hi))
        return -EINVAL;
    *v = x;
    return 0;
}

static int parse_int(const char *s, long lo, long hi, int *v)
{
    double x;
    int r = parse_num(s, (double)lo, (double)hi, &x);
    last_range.whole = true;
    if (r < 0 || x != (double)(long)x)
        return -EINVAL;
    *v = (int)x;
    return 0;
}

/* The options and verbs are common/agentcli.c's: the controller builds its argv from the same
 * tables. */
static const struct option *const longopts = agent_cli_longopts;

/* Why spec_set_argv refused the command after "--", naming the argument. */
static void log_bad_command(const char *verb, int r, char *const *cmd, int ncmd)
{
    for (int i = 0; r == -EILSEQ && i < ncmd; i++) {
        if (!text_is_utf8(cmd[i], strlen(cmd[i]))) {
            char shown[128];
            log_error("%s: argument %d of the command ('%s') is not valid UTF-8", verb, i,
                      text_escape(cmd[i], strlen(cmd[i]), shown, sizeof shown));
            return;
        }
    }
    if (r == -E2BIG)
        log_error("%s: the command has more than %d arguments or one of %d bytes or more", verb,
                  SPEC_MAX_ARGS, SPEC_ARG_MAX);
    else
        log_error("%s: bad command", verb);
}

/* Parse options of argv[0..argc) (argv[0] is the verb).  0 ok, -EINVAL with a message logged. */
static int cli_parse(struct cli *c, int argc, char **argv)
{
    int opt, li = -1, end = argc;
    double x;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--")) {
            end = i;
            break;
        }
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(end, argv, "+vh", longopts, &li)) != -1) {
        const char *a = optarg;
        int bad = 0, env_r = 0;
        last_range.set = false;
        switch (opt) {
        case AGENT_OPT_ROOT: bad = str_copy(c->root, sizeof c->root, a) < 0 || !a[0]; break;
        case AGENT_OPT_SOCKET: bad = str_copy(c->socket, sizeof c->socket, a) < 0 || !a[0]; break;
        case AGENT_OPT_PIDFILE: bad = str_copy(c->pidfile, sizeof c->pidfile, a) < 0 || !a[0]; break;
        case AGENT_OPT_JOB: bad = !job_name_is_valid(a) || str_copy(c->job, sizeof c->job, a) < 0; break;
        case AGENT_OPT_ID: bad = str_copy(c->id, sizeof c->id, a) < 0; break;
        case AGENT_OPT_JSON: c->json = true; break;
        case AGENT_OPT_DETACH: c->detach = true; break;
        case AGENT_OPT_NO_MARK: c->no_mark = true; break;
        case AGENT_OPT_NO_START: c->no_start = true; break;
        case AGENT_OPT_RECORDED: c->recorded = true; break;
        case AGENT_OPT_STATUS: c->lease_status = true; break;
        case AGENT_OPT_LEASE_RELEASE: bad = !a[0] || str_copy(c->lease_holder, sizeof c->lease_holder, a) < 0; break;
        case AGENT_OPT_TAKE_OVER: bad = !a[0] || str_copy(c->lease_dead, sizeof c->lease_dead, a) < 0; break;
        case AGENT_OPT_TIMEOUT: bad = parse_num(a, 0.1, 86400, &c->timeout_s) < 0; break;
        case AGENT_OPT_INTERVAL: bad = parse_num(a, 0.05, 3600, &c->interval_s) < 0; break;
        case AGENT_OPT_COUNT: bad = parse_num(a, 0, 1e12, &x) < 0; c->count = (int64_t)x; break;
        case AGENT_OPT_SINCE: bad = parse_num(a, 0, 1e15, &x) < 0; c->since = (int64_t)x; break;
        case AGENT_OPT_NNODES: bad = parse_int(a, 1, 4096, &c->spec.nnodes) < 0; break;
        case AGENT_OPT_NODE_RANK: bad = parse_int(a, 0, 4095, &c->spec.node_rank) < 0; break;
        case AGENT_OPT_NPROC: bad = parse_int(a, 1, STATUS_MAX_RANKS, &c->spec.nproc) < 0; break;
        case AGENT_OPT_GPUS: bad = str_copy(c->spec.gpus, sizeof c->spec.gpus, a) < 0; break;
        case AGENT_OPT_MASTER_ADDR: bad = str_copy(c->spec.master_addr, sizeof c->spec.master_addr, a) < 0; break;
        case AGENT_OPT_MASTER_PORT: bad = parse_int(a, 1, 65535, &c->spec.master_port) < 0; break;
        case AGENT_OPT_GRACE: bad = parse_num(a, 0, 3600, &c->spec.grace_s) < 0; break;
        case AGENT_OPT_PROBATION: bad = parse_num(a, 0, 86400 * 30, &c->probation_s) < 0; break;
        case AGENT_OPT_RESTART_AFTER: bad = parse_num(a, 1, 86400, &c->restart_after_s) < 0; break;
        case AGENT_OPT_FIRST_STEP_DEADLINE: bad = parse_num(a, 0, LIVENESS_MAX_S, &c->spec.live.first_step_s) < 0; break;
        case AGENT_OPT_SILENCE_DEADLINE: bad = parse_num(a, 0, LIVENESS_MAX_S, &c->spec.live.silence_s) < 0; break;
        case AGENT_OPT_STALL_DEADLINE: bad = parse_num(a, 0, LIVENESS_MAX_S, &c->spec.live.stall_s) < 0; break;
        case AGENT_OPT_CHECKPOINT_DEADLINE: bad = parse_num(a, 0, LIVENESS_MAX_S, &c->spec.live.checkpoint_s) < 0; break;
        case AGENT_OPT_KTOK: bad = parse_num(a, 0, 1e12, &c->ktok_s) < 0; break;
        case AGENT_OPT_SAMPLES: c->samples = a; break;
        case AGENT_OPT_REASON: (void)text_cut_words(a, NULL, c->reason, sizeof c->reason); break; /* at a word */
        case AGENT_OPT_ENV: env_r = spec_add_env(&c->spec, a); bad = env_r < 0; break;
        case AGENT_OPT_HOST_DRIVER: bad = str_copy(c->host_driver, sizeof c->host_driver, a) < 0 || !a[0]; break;
        case AGENT_OPT_CUDA: bad = str_copy(c->cuda, sizeof c->cuda, a) < 0 || !a[0]; break;
        case AGENT_OPT_GPU_MEM: bad = parse_num(a, 0, 1e15, &c->gpu_mem) < 0; break;
        case AGENT_OPT_RDZV: bad = !spec_rdzv_ok(a) || str_copy(c->spec.rdzv, sizeof c->spec.rdzv, a) < 0; break;
        case AGENT_OPT_SPEC_DIGEST: bad = !spec_digest_is_valid(a) || str_copy(c->spec.digest, sizeof c->spec.digest, a) < 0; break;
        case AGENT_OPT_SPEC_FIELDS: bad = !spec_fields_is_valid(a) || str_copy(c->spec.digest_fields, sizeof c->spec.digest_fields, a) < 0; break;
        case AGENT_OPT_KEEP: bad = parse_int(a, 1, 10000, &c->dopts.keep_releases) < 0; break;
        case AGENT_OPT_CRASH_LIMIT: bad = parse_int(a, 1, JM_CRASH_HISTORY - 1, &c->dopts.policy.crash_limit) < 0; break;
        case AGENT_OPT_CRASH_WINDOW: bad = parse_num(a, 1, 86400, &c->dopts.policy.crash_window_s) < 0; break;
        case AGENT_OPT_MAX_ROLLBACKS: bad = parse_int(a, 0, 1000, &c->dopts.policy.max_auto_rollbacks) < 0; break;
        case AGENT_OPT_BACKOFF_INITIAL: bad = parse_num(a, 0.01, 3600, &c->dopts.policy.backoff_initial_s) < 0; break;
        case AGENT_OPT_BACKOFF_MAX: bad = parse_num(a, 0.01, 86400, &c->dopts.policy.backoff_max_s) < 0; break;
        case AGENT_OPT_CGROUP: bad = gang_cgroup_mode_parse(a, &c->dopts.cgroup) < 0; break;
        case 'v': log_set_level(LOG_LVL_DEBUG); break;
        case 'h': usage(stdout); return 1;
        default:
            log_error("%s: unknown option or missing value '%s'", argv[0], argv[optind - 1]);
            return -EINVAL;
        }
        if (bad && opt == AGENT_OPT_ENV) {
            char why[600], name[80];
            text_escape(a, strcspn(a, "="), name, sizeof name);
            if (worker_env_check(a, why, sizeof why) < 0) /* names the variable and the rule */
                log_error("%s: --env: %s", argv[0], why);
            else if (env_r == -EILSEQ)
                log_error("%s: --env '%s': the value is not valid UTF-8", argv[0], name);
            else
                log_error("%s: --env takes NAME=VALUE, each NAME once, at most %d of at most %d "
                          "bytes ('%s')", argv[0], SPEC_MAX_ENV, SPEC_ENV_MAX - 1, name);
            return -EINVAL;
        }
        if (bad && opt == AGENT_OPT_CGROUP) {
            log_error("%s: bad value '%s' for --cgroup: one of auto, v2, v1, none", argv[0], a);
            return -EINVAL;
        }
        if (bad) {
            /* the option's name, not argv[optind - 1] + 2: that is the value in "--opt VALUE" */
            const char *name = li >= 0 ? longopts[li].name : "?";
            if (last_range.set)
                log_error("%s: bad value '%s' for --%s: %s from %g to %g", argv[0], a, name,
                          last_range.whole ? "a whole number" : "a number", last_range.lo, last_range.hi);
            else
                log_error("%s: bad value '%s' for --%s", argv[0], a, name);
            return -EINVAL;
        }
    }
    /* positional arguments up to "--", then the command */
    c->args = argv + optind;
    c->nargs = end - optind;
    if (end < argc) {
        c->cmd = argv + end + 1;
        c->ncmd = argc - end - 1;
    }
    return 0;
}

/* "+": options must precede positionals for getopt; move positionals (before "--") to the end of
 * the option part so "activate ID --job J" works like "activate --job J ID". */
static void cli_permute(int argc, char **argv)
{
    int end = argc;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--")) {
            end = i;
            break;
        }
    char *pos[256], *opts[256];
    int np = 0, no = 0;
    for (int i = 1; i < end && np < 256 && no < 256; i++) {
        if (argv[i][0] == '-' && argv[i][1]) {
            opts[no++] = argv[i];
            const struct option *o;
            for (o = longopts; o->name; o++)
                if (!strncmp(argv[i], "--", 2) && !strcmp(argv[i] + 2, o->name))
                    break;
            if (o->name && o->has_arg == required_argument && i + 1 < end)
                opts[no++] = argv[++i];
        } else {
            pos[np++] = argv[i];
        }
    }
    int k = 1;
    for (int i = 0; i < no; i++)
        argv[k++] = opts[i];
    for (int i = 0; i < np; i++)
        argv[k++] = pos[i];
}

static int open_store(const struct cli *c, struct store *s)
{
    int r = store_open(s, c->root);
    if (r < 0)
        log_error("cannot open the store at '%s': %s", c->root, strerror(-r));
    return r;
}

static int resolve_id(const struct store *s, const char *arg, char id[RELEASE_ID_LEN + 1])
{
    int r = store_resolve(s, arg, id);
    if (r == -ENOENT)
        log_error("release '%s' is not in the store", arg);
    else if (r == -ENOTUNIQ)
        log_error("release prefix '%s' is ambiguous", arg);
    else if (r < 0)
        log_error("'%s' is not a release id (64 hex digits, or a unique prefix of at least 6: "
                  "drover-agent release list)", arg);
    return r == -ENOENT ? AGENT_EXIT_NO_RELEASE : (r < 0 ? AGENT_EXIT_USAGE : 0);
}

/* ---- the deploy lease (agent/lease.h) ---- */

/* rpc_call's on_line that only counts the answers */
static int count_line(const char *line, size_t len, void *ud)
{
    (void)line;
    (void)len;
    (*(int *)ud)++;
    return 0;
}

/* `history add JOB LINE [--lease-release HOLDER] | history list JOB` (agent/history.h): the job's
 * deploy history here.  With --lease-release, once the record is kept (exit 0 only), JOB's
 * deploy lease held by HOLDER is given back as `lease release` does: a deploy's record of its
 * outcome is its last call into a container. */
static int cmd_history(struct cli *c)
{
    bool add = c->nargs == 3 && !strcmp(c->args[0], "add");
    bool list = c->nargs == 2 && !strcmp(c->args[0], "list");
    if ((!add && !list) || !job_name_is_valid(c->args[1]) || (c->lease_holder[0] && !add)) {
        log_error("history: usage: history add JOB LINE [--lease-release HOLDER] | history list JOB");
        return AGENT_EXIT_USAGE;
    }
    int r = add ? history_add(c->root, c->args[1], c->args[2]) : history_dump(c->root, c->args[1], stdout);
    if (r == -EINVAL || r == -E2BIG) {
        log_error("history add: not a history record of job '%s' (docs/protocol.md)", c->args[1]);
        return AGENT_EXIT_USAGE;
    }
    if (r == -ETIMEDOUT) /* history.c named the lock and its holder */
        return AGENT_EXIT_BUSY;
    if (r < 0) {
        log_error("history %s: %s", c->args[0], strerror(-r));
        return AGENT_EXIT_FAIL;
    }
    if (c->lease_holder[0]) {
        /* the record stands whatever happens here (drover gives back a lease this did not) */
        int lr = lease_release(c->root, c->args[1], c->lease_holder);
        if (lr == 0)
            printf("lease of job '%s' given back\n", c->args[1]);
        else if (lr != -EBUSY && lr != -ETIMEDOUT) /* those are said by lease.c */
            fprintf(stderr, "history add: recorded, but the lease of job '%s' was not given back: %s\n",
                    c->args[1], strerror(-lr));
    }
    return AGENT_EXIT_OK;
}

static int call_daemon(const struct cli *c, struct rpc_request *q, bool raw, int *ret_lines);

static int cmd_lease(struct cli *c)
{
    bool take = c->nargs == 4 && !strcmp(c->args[0], "take");
    bool release = c->nargs == 3 && !strcmp(c->args[0], "release");
    double ttl = 0;
    if ((!take && !release) || (release && (c->lease_status || c->lease_dead[0])) ||
        !job_name_is_valid(c->args[1]) || !c->args[2][0] || strlen(c->args[2]) >= LEASE_HOLDER_MAX ||
        (take && parse_num(c->args[3], 1, LEASE_TTL_MAX, &ttl) < 0)) {
        log_error("lease: usage: lease take JOB HOLDER TTL_S [--status] [--take-over DEAD] | lease release JOB HOLDER");
        return AGENT_EXIT_USAGE;
    }
    char over[400] = "";
    int r = take ? lease_take(c->root, c->args[1], c->args[2], ttl, c->lease_dead[0] ? c->lease_dead : NULL,
                              over, sizeof over)
                 : lease_release(c->root, c->args[1], c->args[2]);
    if (r == -EBUSY || r == -ETIMEDOUT) /* said by lease.c: the holder, or the lock's */
        return AGENT_EXIT_BUSY;
    if (r == -ENOSPC || r == -EDQUOT) /* said by lease.c, naming the file: nothing taken */
        return AGENT_EXIT_DISK_FULL;
    if (r == 1) {
        /* an expired lease taken over: the daemon journals it (lease-takeover); the CLI never
         * writes the journal itself (one writer keeps its seq numbers) */
        struct rpc_request q;
        rpc_request_init(&q);
        q.op = RPC_LEASE_TAKEOVER;
        (void)str_copy(q.job, sizeof q.job, c->args[1]);
        (void)str_copy(q.reason, sizeof q.reason, over);
        char *text = NULL;
        int lines = 0;
        if (rpc_format_request(&q, &text) < 0 || rpc_call(c->socket, text, rpc_idle_deadline(q.op, 0, -1), count_line, &lines) < 0 || !lines)
            log_warn("lease: %s (not journalled: no agent daemon answered)", over);
        free(text);
        rpc_request_done(&q);
        r = 0;
    }
    if (r < 0) /* said by lease.c */
        return AGENT_EXIT_FAIL;
    if (c->lease_status) {
        /* The deploy's next question, answered in the same call (one `pct exec` per container
         * instead of two).  The lease is held whatever happens here: a daemon that does not
         * answer leaves the document out (said on stderr), and the controller asks `status`
         * on its own, which reports it as it always did. */
        struct rpc_request q;
        fflush(stdout);
        c->json = true; /* as `status --json` prints it */
        rpc_request_init(&q);
        q.op = RPC_STATUS;
        (void)call_daemon(c, &q, true, NULL);
        rpc_request_done(&q);
    }
    return AGENT_EXIT_OK;
}

/* ---- store verbs ---- */

/* v2 releases (agent/objstore.h): `release missing MANIFEST` prints "present" (installed, and its
 * tree passes the cheap verify), or the ranges of manifest entries whose objects the store lacks
 * ("START COUNT" lines; none for a damaged release whose objects are intact); `release install
 * MANIFEST [PACK] --id ID` stores the pack's objects and assembles the release. */
/* A path a verb was given must be a regular file, checked before anything opens it for real:
 * opening or reading a FIFO blocks forever, a device may do anything (issue 12: `release add`
 * on a FIFO hung).  0, or the exit code after saying why. */
static int refuse_special(const char *verb, const char *path)
{
    const char *type = NULL;
    int fd, r = safefile_open_regular(path, false, &fd, &type);
    if (r == 0) {
        close(fd);
        return 0;
    }
    char shown[256];
    text_escape(path, strlen(path), shown, sizeof shown);
    if (r == -EINVAL) {
        fprintf(stderr, "%s: '%s' is a %s, not a regular file: refused\n", verb, shown,
                type ? type : "special file");
        return AGENT_EXIT_BUNDLE;
    }
    fprintf(stderr, "%s: cannot open '%s': %s\n", verb, shown, strerror(-r));
    return AGENT_EXIT_FAIL;
}

/* Read all of stdin (a manifest piped through `pct exec`), at most max bytes. */
static int read_stdin(size_t max, char **ret, size_t *ret_len)
{
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap + 1);
    if (!b)
        return -ENOMEM;
    for (;;) {
        if (len == cap) {
            if (cap >= max) {
                free(b);
                return -E2BIG;
            }
            cap = cap * 2 > max ? max : cap * 2;
            char *nb = realloc(b, cap + 1);
            if (!nb) {
                free(b);
                return -ENOMEM;
            }
            b = nb;
        }
        ssize_t n = read(STDIN_FILENO, b + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = -errno;
            free(b);
            return e;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    b[len] = '\0';
    *ret = b;
    *ret_len = len;
    return 0;
}

/* `release have ID...`: one line "ID present" or "ID absent" each, from the record of a verified
 * install and the cheap verify of its tree (objstore_have_intact): no manifest needed, a stat per
 * file, nothing read that did not change.  The controller's first question for a large release
 * (an environment), so one already in place costs one call per host, and one changed on disk is
 * "absent": its `release missing` then asks for what changed, in the same deploy. */
static int cmd_release_have(struct cli *c, struct store *s)
{
    if (c->nargs < 2) {
        log_error("release have: usage: release have ID...");
        return AGENT_EXIT_USAGE;
    }
    for (size_t i = 1; i < (size_t)c->nargs; i++) {
        if (!sha256_is_hex(c->args[i])) {
            log_error("release have: '%.80s' is not a release id (64 hex digits)", c->args[i]);
            return AGENT_EXIT_USAGE;
        }
        printf("%s %s\n", c->args[i], objstore_have_intact(s, c->args[i]) ? "present" : "absent");
    }
    return AGENT_EXIT_OK;
}

static int cmd_release_tree(struct cli *c, struct store *s)
{
    bool install = !strcmp(c->args[0], "install");
    if (c->nargs < 2 || c->nargs > (install ? 3 : 2) || (install && !c->id[0]) ||
        (c->lease_holder[0] && (!install || !c->job[0]))) {
        log_error("release: usage: release missing MANIFEST|- | release install MANIFEST [PACK|-] --id ID "
                  "[--job J --lease-release HOLDER]");
        return AGENT_EXIT_USAGE;
    }
    /* "-": the manifest (missing) or the pack (install) comes on stdin, so the controller needs
     * no `pct push` round trip; a manifest read so is kept in incoming/<id>.manifest for the
     * install that follows. */
    bool man_stdin = !install && !strcmp(c->args[1], "-");
    const char *mpath = c->args[1], *pack = c->nargs == 3 ? c->args[2] : NULL;
    bool pack_stdin = pack && !strcmp(pack, "-");
    char verb[32];
    snprintf(verb, sizeof verb, "release %s", c->args[0]);
    int special = man_stdin ? 0 : refuse_special(verb, mpath);
    if (!special && pack && !pack_stdin)
        special = refuse_special(verb, pack);
    if (special)
        return special;
    char *text = NULL;
    size_t len = 0;
    int r = man_stdin ? read_stdin(MANIFEST2_MAX_BYTES, &text, &len)
                      : fs_read_file(mpath, MANIFEST2_MAX_BYTES, &text, &len);
    if (r < 0) {
        fprintf(stderr, "release %s: cannot read manifest '%s': %s\n", c->args[0], man_stdin ? "(stdin)" : mpath,
                strerror(-r));
        return AGENT_EXIT_FAIL;
    }
    objstore_clean_stale(s, NULL);
    if (!install) {
        struct manifest2 *m = NULL;
        char id[RELEASE_ID_LEN + 1];
        struct m2_ranges rg = { 0 };
        bool present = false;
        if ((r = manifest2_parse(text, len, &m)) == 0 && (r = sha256_buf_hex(text, len, id)) == 0)
            r = objstore_missing(s, m, id, NULL, &rg, &present);
        manifest2_free(m);
        if (r == 0 && man_stdin && !present) {
            char keep[PATH_MAX];
            if ((r = store_path(s, keep, sizeof keep, "incoming/%s.manifest", id)) == 0 &&
                (r = fs_write_atomic(keep, text, len, 0600)) < 0)
                fprintf(stderr, "release missing: cannot keep the manifest in '%s': %s\n", keep, strerror(-r));
        }
        free(text);
        if (r < 0) {
            m2_ranges_done(&rg);
            fprintf(stderr, "release missing: %s: %s\n", man_stdin ? "(stdin)" : mpath, strerror(-r));
            return r == -EINVAL || r == -E2BIG ? AGENT_EXIT_BUNDLE : AGENT_EXIT_FAIL;
        }
        if (present && !man_stdin)
            store_consume(s, mpath); /* nothing follows: no install for a present release */
        fputs(present ? "present\n" : rg.text, stdout);
        m2_ranges_done(&rg);
        return AGENT_EXIT_OK;
    }
    char err[512] = "";
    r = objstore_add(s, text, len, c->id, pack, stdout, err, sizeof err);
    free(text);
    /* The manifest always goes (the next deploy sends it again with `release missing -`); a
     * pack file stays after a full disk, for a retry once space is freed. */
    store_consume(s, mpath);
    if (pack && !pack_stdin && r != -ENOSPC && r != -EDQUOT)
        store_consume(s, pack);
    if (r < 0) {
        if (r == -ENOSPC || r == -EDQUOT) {
            fprintf(stderr, "release install: disk full under '%s': %s\n", c->root, err);
            return AGENT_EXIT_DISK_FULL;
        }
        fprintf(stderr, "release install: %s\n", err[0] ? err : strerror(-r));
        return r == -EBADMSG || r == -EINVAL || r == -E2BIG ? AGENT_EXIT_BUNDLE : AGENT_EXIT_FAIL;
    }
    printf("%s %s\n", c->id, r == 1 ? "present" : "added");
    if (c->lease_holder[0]) {
        /* deploy --stage-only: nothing follows the install here, so the lease goes back in the
         * same call; the install stands whatever happens (drover gives back a lease this did
         * not, as it always did) */
        int lr = lease_release(c->root, c->job, c->lease_holder);
        if (lr == 0)
            printf("lease of job '%s' given back\n", c->job);
        else if (lr != -EBUSY && lr != -ETIMEDOUT) /* those are said by lease.c */
            fprintf(stderr, "release install: installed, but the lease of job '%s' was not given back: %s\n",
                    c->job, strerror(-lr));
    }
    return AGENT_EXIT_OK;
}

static int cmd_release(struct cli *c)
{
    struct store s;
    if (c->nargs < 1) {
        log_error("release: expected 'add', 'list' or 'verify'");
        return AGENT_EXIT_USAGE;
    }
    if (open_store(c, &s) < 0)
        return AGENT_EXIT_FAIL;
    if (!strcmp(c->args[0], "add")) {
        if (c->nargs != 2 || !c->id[0]) {
            log_error("release add: usage: release add BLOB --id ID");
            return AGENT_EXIT_USAGE;
        }
        int code = refuse_special("release add", c->args[1]);
        if (code)
            return code;
        char err[512];
        int r = store_add_release(&s, c->args[1], c->id, err, sizeof err);
        if (r < 0) {
            if (r == -ENOSPC || r == -EDQUOT) {
                struct statvfs vfs;
                unsigned long long avail = statvfs(c->root, &vfs) == 0
                                               ? (unsigned long long)vfs.f_bavail * vfs.f_frsize : 0;
                fprintf(stderr, "release add: disk full under '%s' (%llu bytes free): %s\n", c->root,
                        avail, err);
                return AGENT_EXIT_DISK_FULL;
            }
            fprintf(stderr, "release add: %s\n", err);
            return r == -EBADMSG || r == -EINVAL || r == -E2BIG ? AGENT_EXIT_BUNDLE : AGENT_EXIT_FAIL;
        }
        printf("%s %s\n", c->id, r == 1 ? "present" : "added");
        return AGENT_EXIT_OK;
    }
    if (!strcmp(c->args[0], "verify")) { /* re-check an installed release against its manifest */
        if (c->nargs != 2) {
            log_error("release verify: usage: release verify ID");
            return AGENT_EXIT_USAGE;
        }
        char id[RELEASE_ID_LEN + 1], err[512];
        int x = resolve_id(&s, c->args[1], id);
        if (x)
            return x;
        int r = store_verify_release(&s, id, err, sizeof err);
        if (r < 0) {
            fprintf(stderr, "release verify: %s\n", err);
            return r == -ENOENT ? AGENT_EXIT_NO_RELEASE : AGENT_EXIT_BUNDLE;
        }
        printf("%s verified\n", id);
        return AGENT_EXIT_OK;
    }
    if (!strcmp(c->args[0], "missing") || !strcmp(c->args[0], "install"))
        return cmd_release_tree(c, &s);
    if (!strcmp(c->args[0], "clean") && c->nargs == 1) {
        /* `drover gc`: what interrupted installs left (docs/agent.md, "The store") */
        struct objstore_cleaned cl = { 0 };
        bool kept = false;
        objstore_clean_gc(&s, &cl, &kept);
        printf(AGENT_CLEAN_WORD " %zu %llu%s\n", cl.entries, (unsigned long long)cl.bytes,
               kept ? " " AGENT_CLEAN_KEPT : "");
        return AGENT_EXIT_OK;
    }
    if (!strcmp(c->args[0], "have"))
        return cmd_release_have(c, &s);
    if (!strcmp(c->args[0], "list")) {
        char **ids;
        size_t n;
        int r = store_list(&s, &ids, &n);
        if (r < 0) {
            log_error("release list: %s", strerror(-r));
            return AGENT_EXIT_FAIL;
        }
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
            char p[PATH_MAX], *text = NULL;
            size_t len;
            struct manifest *m = NULL;
            struct manifest2 *m2 = NULL;
            (void)store_path(&s, p, sizeof p, "releases/%s/MANIFEST.json", ids[i]);
            if (fs_read_file(p, MANIFEST_MAX_BYTES, &text, &len) == 0)
                (void)manifest_parse(text, len, &m);
            free(text);
            text = NULL;
            (void)store_path(&s, p, sizeof p, "releases/%s/MANIFEST", ids[i]);
            if (!m && fs_read_file(p, MANIFEST2_MAX_BYTES, &text, &len) == 0)
                (void)manifest2_parse(text, len, &m2);
            free(text);
            const char *name = m ? m->name : m2 ? m2->name : "";
            size_t nf = m ? m->nfiles : m2 ? m2->nfiles : 0;
            if (c->json)
                json_array_append_new(arr, json_pack("{s:s,s:s,s:i,s:s}", "id", ids[i], "name", name, "files",
                                                     (int)nf, "env", m2 ? m2->env : ""));
            else
                printf("%.12s  %-20s  %zu %s%s%.12s\n", ids[i], name[0] ? name : "?", nf,
                       text_plural(nf, "file", "files"), m2 && m2->env[0] ? ", env " : "", m2 ? m2->env : "");
            manifest_free(m);
            manifest2_free(m2);
        }
        if (c->json) {
            char *t = json_dumps(arr, JSON_COMPACT);
            printf("%s\n", t ? t : "[]");
            free(t);
        }
        json_decref(arr);
        store_ids_free(ids, n);
        return AGENT_EXIT_OK;
    }
    log_error("release: unknown subcommand '%s'", c->args[0]);
    return AGENT_EXIT_USAGE;
}

static int cmd_events(struct cli *c)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/events.jsonl", c->root) >= (int)sizeof p)
        return AGENT_EXIT_USAGE;
    int r = events_dump(p, c->since, stdout);
    if (r < 0) {
        log_error("events: %s", strerror(-r));
        return AGENT_EXIT_FAIL;
    }
    return AGENT_EXIT_OK;
}

static volatile sig_atomic_t preflight_signal;
static void on_preflight_signal(int sig)
{
    preflight_signal = sig;
}

/* Signal the preflight's whole tree: its process group, its cgroup (cg, "" none), and every
 * descendant of ours (we are their subreaper), so that a child that called setsid() or
 * double-forked is reached too.  How many descendants were live. */
static int preflight_signal_tree(pid_t pgid, const char *cg, int sig)
{
    (void)kill(-pgid, sig);
    proctree_cgroup_signal(cg, sig);
    return proctree_descendants_signal(sig);
}

/* End what the preflight's command left behind once it was reaped: SIGKILL the tree until
 * nothing of it lives (bounded: a fork bomb is not waited out), reaping the orphans that came
 * to us.  How many processes were left. */
static int preflight_end_tree(pid_t pgid, const char *cg)
{
    int in_cg = proctree_cgroup_live(cg), mine = proctree_descendants_signal(0);
    int left = in_cg > mine ? in_cg : mine;
    for (int i = 0; i < 250; i++) {
        int live = preflight_signal_tree(pgid, cg, SIGKILL);
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        if (live <= 0 && proctree_cgroup_live(cg) == 0 && kill(-pgid, 0) < 0)
            break;
        usleep(20000);
    }
    if (cg[0])
        (void)rmdir(cg);
    return left;
}

static int cmd_preflight(struct cli *c)
{
    struct store s;
    if (c->nargs != 1 || c->ncmd < 1) {
        log_error("preflight: usage: preflight ID [--timeout S] -- CMD ARGS...");
        return AGENT_EXIT_USAGE;
    }
    if (open_store(c, &s) < 0)
        return AGENT_EXIT_FAIL;
    int code = resolve_id(&s, c->args[0], c->spec.release);
    if (code)
        return code;
    char err[512];
    int sr = spec_set_argv(&c->spec, c->ncmd, c->cmd);
    if (sr < 0) {
        log_bad_command("preflight", sr, c->cmd, c->ncmd);
        return AGENT_EXIT_USAGE;
    }
    if (spec_validate(&c->spec, err, sizeof err) < 0) {
        log_error("preflight: %s", err);
        return AGENT_EXIT_USAGE;
    }
    if (gang_check_exec(&s, &c->spec, err, sizeof err) < 0) {
        fprintf(stderr, "preflight: %s\n", err);
        return AGENT_EXIT_EXEC;
    }
    const char *job = c->job[0] ? c->job : "preflight";
    char dir[PATH_MAX], run[PATH_MAX];
    (void)store_path(&s, dir, sizeof dir, "releases/%s", c->spec.release);
    (void)store_path(&s, run, sizeof run, "runs/%s/checkpoints", job);
    char ro[2][PATH_MAX]; /* read-only to the command, as to a gang's workers */
    bool protect = store_path(&s, ro[0], sizeof ro[0], "releases") == 0 &&
                   store_path(&s, ro[1], sizeof ro[1], "objects") == 0;
    (void)fs_mkdir_p(run, 0750);
    int hb = open("/dev/null", O_WRONLY | O_CLOEXEC); /* heartbeats of a preflight are not read */
    struct gang_env env;
    if (hb < 0 || gang_build_env(&env, &s, job, &c->spec, NULL, 0, GANG_HEARTBEAT_FD) < 0) {
        log_error("preflight: cannot build the worker environment");
        return AGENT_EXIT_FAIL;
    }
    /* The command's whole tree is ended at its timeout, when it exits, and when its caller goes
     * away: a child that called setsid() left its process group and would otherwise run on,
     * holding the channel's stdout open, so that drover waited for it to its own deadline.  By
     * the preflight's cgroup where one can be made, and as our descendants in any case. */
    gang_set_cgroup_mode(c->dopts.cgroup);
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1);
    char cg[PATH_MAX] = "", cgprocs[PATH_MAX + 16] = "", cgname[NAME_MAX + 1];
    snprintf(cgname, sizeof cgname, "drover-preflight-%s-%d", job, (int)getpid());
    if (proctree_cgroup_create(cgname, cg, sizeof cg) == 0)
        snprintf(cgprocs, sizeof cgprocs, "%s/cgroup.procs", cg);
    /* the child's exec errno, so that a failed exec is not also "exited with 127"; never waited
     * on: non-blocking */
    int ep[2];
    if (pipe2(ep, O_CLOEXEC | O_NONBLOCK) < 0) {
        log_error("preflight: pipe: %s", strerror(errno));
        if (cg[0])
            (void)rmdir(cg);
        return AGENT_EXIT_FAIL;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        log_error("preflight: fork: %s", strerror(errno));
        if (cg[0])
            (void)rmdir(cg);
        return AGENT_EXIT_FAIL;
    }
    if (pid == 0) {
        (void)setpgid(0, 0);
        if (cgprocs[0]) /* before anything forks: all it forks follows */
            (void)proctree_cgroup_join(cgprocs);
        /* a preflight runs the worker's own code (`train.py --check`) in its release directory:
         * it must not change the release either; where that cannot be arranged it runs as before
         * (a gang start warns about it in the agent's log) */
        int step;
        if (protect)
            (void)gang_protect_store(ro[0], ro[1], &step);
        int h = fcntl(hb, F_DUPFD_CLOEXEC, 10);
        if (h >= 0 && dup2(h, GANG_HEARTBEAT_FD) >= 0 && chdir(dir) == 0)
            execvpe(c->spec.argv[0], c->spec.argv, env.envp);
        int e = errno;
        char why[384];
        fprintf(stderr, "preflight: cannot execute '%s': %s\n", c->spec.argv[0],
                gang_exec_error_reason(dir, c->spec.argv[0], e, why, sizeof why));
        (void)!write(ep[1], &e, sizeof e);
        _exit(127);
    }
    close(hb);
    close(ep[1]);
    (void)setpgid(pid, pid);
    /* The caller going away ends the preflight too: a drover interrupted (Ctrl-C) or past its
     * own deadline closes the SSH channel, and the command would otherwise run on to its own
     * timeout, holding the job's GPUs against the next deploy's checks.  Seen as stdout's or
     * stderr's reader gone (pct exec hands the channel's pipes through), or a signal to us. */
    struct sigaction sa = { .sa_handler = on_preflight_signal };
    sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGTERM, &sa, NULL);
    (void)sigaction(SIGHUP, &sa, NULL);
    (void)sigaction(SIGINT, &sa, NULL);
    (void)signal(SIGPIPE, SIG_IGN); /* a line to a gone caller must not end us first */
    double deadline = time_mono() + (c->timeout_s > 0 ? c->timeout_s : 300);
    int ws = 0;
    bool timed_out = false, abandoned = false, stopping = false;
    for (;;) {
        pid_t w = waitpid(pid, &ws, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            log_error("preflight: waitpid: %s", strerror(errno));
            return AGENT_EXIT_FAIL;
        }
        if (!stopping && !abandoned &&
            (preflight_signal || fd_reader_gone(STDOUT_FILENO) || fd_reader_gone(STDERR_FILENO)))
            abandoned = true;
        if (!stopping && (abandoned || time_mono() > deadline)) {
            stopping = true;
            timed_out = !abandoned;
            (void)preflight_signal_tree(pid, cg, SIGTERM);
            deadline = time_mono() + 5;
        } else if (stopping && time_mono() > deadline) {
            (void)preflight_signal_tree(pid, cg, SIGKILL);
            deadline = time_mono() + 3600;
        }
        usleep(20000);
    }
    int left = preflight_end_tree(pid, cg); /* anything it left behind, setsid escapes too */
    if (left > 0 && !stopping)
        fprintf(stderr, "preflight: '%s' left %d process%s running: stopped\n", c->spec.argv[0], left,
                left == 1 ? "" : "es");
    if (abandoned) { /* said for a caller still there (a signal); a gone one reads nothing */
        fprintf(stderr, "preflight: '%s' stopped: %s\n", c->spec.argv[0],
                preflight_signal ? "drover-agent preflight was signalled"
                                 : "its caller went away (drover interrupted, or its connection lost)");
        return AGENT_EXIT_FAIL;
    }
    if (timed_out) {
        fprintf(stderr, "preflight: '%s' did not finish within %g s\n", c->spec.argv[0],
                c->timeout_s > 0 ? c->timeout_s : 300);
        return AGENT_EXIT_TIMEOUT;
    }
    if (WIFSIGNALED(ws)) {
        fprintf(stderr, "preflight: '%s' killed by signal %d\n", c->spec.argv[0], WTERMSIG(ws));
        return 128 + WTERMSIG(ws);
    }
    int e = 0;
    ssize_t n;
    while ((n = read(ep[0], &e, sizeof e)) < 0 && errno == EINTR)
        ;
    close(ep[0]);
    int st = WEXITSTATUS(ws);
    if (n == (ssize_t)sizeof e) /* the child said why it could not execute CMD */
        return st;
    if (st == TRAIN_EXIT_NOT_FOUND) /* env's or a shell's "not found": "#!/usr/bin/env python" without python */
        fprintf(stderr, "preflight: '%s' exited with 127 (" TRAIN_EXIT_NOT_FOUND_TEXT ": its own words are above)\n",
                c->spec.argv[0]);
    else if (st != 0)
        fprintf(stderr, "preflight: '%s' exited with %d\n", c->spec.argv[0], st);
    return st;
}

/* ---- daemon verbs ---- */

struct reply {
    int code;
    bool json;
    bool raw; /* print lines as they come (status/watch) */
    bool prom; /* as Prometheus text (metrics) */
    int lines;
};

static void print_status_human(const char *line, size_t len)
{
    struct agent_status *st = malloc(sizeof *st);
    if (!st || status_parse(line, len, st) < 0) {
        printf("%s\n", line);
        free(st);
        return;
    }
    printf("agent pid %lld on %s, up %.0f s, event seq %lld\n", (long long)st->agent_pid, st->host,
           st->uptime_s, (long long)st->seq);
    for (int i = 0; i < st->njobs; i++) {
        const struct job_status *j = &st->jobs[i];
        printf("job %-12s %-9s current %.12s good %.12s gen %d restarts %d %s\n", j->job,
               gang_state_name(j->state), j->current[0] ? j->current : "-", j->good[0] ? j->good : "-",
               j->generation, j->restarts, j->reason);
        for (int k = 0; k < j->nranks; k++) {
            const struct rank_status *r = &j->ranks[k];
            printf("  rank %d pid %lld %-8s step %lld tok/s %.0f hb_age %.1f s exit %d sig %d\n", r->rank,
                   (long long)r->pid, r->state, (long long)(r->has_hb ? r->hb.step : -1),
                   r->has_hb ? r->hb.tok_s : 0, r->hb_age_s, r->exit_code, r->exit_signal);
        }
    }
    free(st);
}

static int on_reply(const char *line, size_t len, void *ud)
{
    struct reply *rp = ud;
    rp->lines++;
    if (rp->raw) {
        json_error_t jerr;
        json_t *o = json_loadb(line, len, 0, &jerr);
        json_t *ok = o ? json_object_get(o, "ok") : NULL;
        if (json_is_false(ok)) {
            json_t *e = json_object_get(o, "error"), *code = json_object_get(o, "code");
            fprintf(stderr, "%s\n", json_is_string(e) ? json_string_value(e) : line);
            rp->code = json_is_integer(code) ? (int)json_integer_value(code) : AGENT_EXIT_FAIL;
        } else if (rp->prom) {
            struct agent_status *st = malloc(sizeof *st);
            if (!st || status_parse(line, len, st) < 0 || metrics_write(st, stdout) < 0) {
                fprintf(stderr, "metrics: bad status document from the daemon\n");
                rp->code = AGENT_EXIT_FAIL;
            }
            free(st);
        } else if (rp->json) {
            printf("%s\n", line);
        } else {
            print_status_human(line, len);
        }
        json_decref(o);
        fflush(stdout);
        return 0;
    }
    json_error_t jerr;
    json_t *o = json_loadb(line, len, 0, &jerr);
    if (!o) {
        fprintf(stderr, "bad reply from the daemon\n");
        rp->code = AGENT_EXIT_FAIL;
        return 0;
    }
    json_t *ok = json_object_get(o, "ok");
    if (json_is_true(ok)) {
        rp->code = AGENT_EXIT_OK;
        if (rp->json)
            printf("%s\n", line);
        else {
            json_t *det = json_object_get(o, "detail"), *rel = json_object_get(o, "release");
            json_t *gen = json_object_get(o, "generation");
            printf("ok");
            if (json_is_string(rel))
                printf(" release %.12s", json_string_value(rel));
            if (json_is_integer(gen))
                printf(" generation %lld", (long long)json_integer_value(gen));
            if (json_is_string(det) && json_string_length(det))
                printf(": %s", json_string_value(det));
            printf("\n");
        }
    } else {
        json_t *e = json_object_get(o, "error"), *code = json_object_get(o, "code");
        fprintf(stderr, "%s\n", json_is_string(e) ? json_string_value(e) : "failed");
        rp->code = json_is_integer(code) && json_integer_value(code) > 0 ? (int)json_integer_value(code)
                                                                         : AGENT_EXIT_FAIL;
    }
    json_decref(o);
    return 0;
}

/* The grace of the gang a job verb may have to stop (the job's current release's, from the
 * daemon's state.json), for its idle deadline; -1 when not known (no state yet, no such job). */
static double job_verb_grace(const struct cli *c, const struct rpc_request *q)
{
    char p[PATH_MAX];
    double g;
    if (!q->job[0] || snprintf(p, sizeof p, "%s/state.json", c->root) >= (int)sizeof p ||
        state_job_grace(p, q->job, &g) < 0)
        return -1;
    return g;
}

/* The daemon's pidfile when --pidfile is not given: next to its socket (/run/drover/agent.sock ->
 * /run/drover/agent.pid), so agents with their own --socket (several stores on one machine) do
 * not collide. */
static void pidfile_of_socket(const char *socket, char *buf, size_t sz)
{
    size_t n = strlen(socket);
    if (n > 5 && !strcmp(socket + n - 5, ".sock"))
        snprintf(buf, sz, "%.*s.pid", (int)(n - 5), socket);
    else
        snprintf(buf, sz, "%s.pid", socket);
}

static int call_daemon(const struct cli *c, struct rpc_request *q, bool raw, int *ret_lines)
{
    char *text;
    if (rpc_format_request(q, &text) < 0) {
        log_error("out of memory");
        return AGENT_EXIT_FAIL;
    }
    struct reply rp = {.code = raw ? -1 : AGENT_EXIT_FAIL, .json = c->json, .raw = raw, .prom = c->metrics};
    double idle = rpc_idle_deadline(q->op, q->interval_s, job_verb_grace(c, q));
    int r = rpc_call(c->socket, text, idle, on_reply, &rp);
    free(text);
    if (ret_lines)
        *ret_lines = rp.lines;
    if (r == -ENOENT || r == -ECONNREFUSED) {
        fprintf(stderr, "%s: " AGENT_NO_DAEMON_SAID " '%s'\n", rpc_op_name(q->op), c->socket);
        return AGENT_EXIT_NO_DAEMON;
    }
    if (r == -ETIMEDOUT) {
        bool job_verb = q->op == RPC_ACTIVATE || q->op == RPC_REVERT || q->op == RPC_STOP || q->op == RPC_START;
        char how[700], pidfile[PATH_MAX];
        pidfile_of_socket(c->socket, pidfile, sizeof pidfile); /* the daemon's default */
        fprintf(stderr, "%s: the drover-agent daemon on '%s" AGENT_WEDGED_SAID "%.0f s%s: it is stopped "
                "or wedged%s (%s)\n", rpc_op_name(q->op), c->socket, idle,
                job_verb ? " (longer than the gang's grace and the GPU-memory wait)" : "",
                job_verb ? ", or a process of the gang outlives SIGKILL (stuck in the kernel)" : "",
                agent_wedged_how(q->job, pidfile, how, sizeof how));
        return AGENT_EXIT_NO_DAEMON;
    }
    if (r < 0) {
        fprintf(stderr, "%s: control socket '%s': %s\n", rpc_op_name(q->op), c->socket, strerror(-r));
        return AGENT_EXIT_FAIL;
    }
    if (raw && rp.code >= 0)
        return rp.code; /* an error line */
    if (raw)
        return rp.lines > 0 ? AGENT_EXIT_OK : AGENT_EXIT_FAIL;
    if (rp.lines == 0) {
        fprintf(stderr, "%s: the daemon closed without an answer\n", rpc_op_name(q->op));
        return AGENT_EXIT_FAIL;
    }
    return rp.code;
}

/* activate --recorded: c->spec becomes the spec recorded in state.json for (id, c->spec.digest)
 * of c->job, with the rendezvous generation given (if any); everything else as it ran then.
 * 0, or an exit code with the reason said. */
static int recorded_spec(struct cli *c, const char *id)
{
    char p[PATH_MAX], rdzv[SPEC_RDZV_MAX], digest[SPEC_DIGEST_LEN + 1];
    struct agent_state st;
    if (snprintf(p, sizeof p, "%s/state.json", c->root) >= (int)sizeof p || state_load(p, &st) < 0) {
        log_error("activate --recorded: cannot read the agent's state '%s'", p);
        return AGENT_EXIT_FAIL;
    }
    struct job_rec *j = state_find_job(&st, c->job);
    struct job_spec *s = j ? state_find_spec(j, id, c->spec.digest) : NULL;
    int code = AGENT_EXIT_OK;
    memcpy(rdzv, c->spec.rdzv, sizeof rdzv);
    memcpy(digest, c->spec.digest, sizeof digest);
    if (!s) {
        log_error("activate --recorded: job '%s' has no job spec recorded for release %.12s with "
                  "spec digest %.12s here (it never ran here, or its record was dropped for newer "
                  "ones): nothing was stopped", c->job, id, digest);
        code = AGENT_EXIT_FAIL;
    } else if (spec_copy(&c->spec, s) < 0) {
        code = AGENT_EXIT_FAIL;
    } else if (rdzv[0]) {
        (void)str_copy(c->spec.rdzv, sizeof c->spec.rdzv, rdzv);
    }
    state_done(&st);
    return code;
}

static int cmd_job_verb(struct cli *c, enum rpc_op op)
{
    struct rpc_request q;
    rpc_request_init(&q);
    q.op = op;
    bool needs_id = op == RPC_ACTIVATE || op == RPC_PROMOTE;
    bool recorded = op == RPC_ACTIVATE && c->recorded;
    if ((needs_id && c->nargs != 1) || (!needs_id && c->nargs != 0) || !c->job[0] ||
        (op == RPC_ACTIVATE && !recorded) != (c->ncmd > 0) || (c->recorded && !recorded) ||
        (recorded && !c->spec.digest[0]) || (c->no_start && op != RPC_REVERT)) {
        log_error("%s: wrong arguments (see drover-agent --help)", rpc_op_name(op));
        return AGENT_EXIT_USAGE;
    }
    (void)str_copy(q.job, sizeof q.job, c->job);
    int code = 0;
    if (needs_id) {
        struct store s;
        if (open_store(c, &s) < 0)
            return AGENT_EXIT_FAIL;
        if ((code = resolve_id(&s, c->args[0], q.release)) != 0)
            return code;
    }
    if (recorded && (code = recorded_spec(c, q.release)) != 0)
        return code;
    if (op == RPC_ACTIVATE) {
        char err[256];
        (void)str_copy(c->spec.release, sizeof c->spec.release, q.release);
        int sr = recorded ? 0 : spec_set_argv(&c->spec, c->ncmd, c->cmd);
        if (sr < 0) {
            log_bad_command("activate", sr, c->cmd, c->ncmd);
            return AGENT_EXIT_USAGE;
        }
        if (spec_validate(&c->spec, err, sizeof err) < 0) {
            fprintf(stderr, "activate: %s\n", err);
            return AGENT_EXIT_USAGE;
        }
        if (spec_copy(&q.spec, &c->spec) < 0)
            return AGENT_EXIT_FAIL;
        q.probation_s = c->probation_s;
    }
    struct sample_set *ss = NULL;
    if (c->samples) {
        /* Checked before promoting: a bad set refuses the promote instead of half-doing it. */
        ss = malloc(sizeof *ss);
        if (op != RPC_PROMOTE || !ss ||
            samples_parse(c->samples, strlen(c->samples), ss) < 0 || strcmp(ss->release, q.release) != 0 ||
            strcmp(ss->job, c->job) != 0) {
            log_error("%s: --samples is not a sample set of release %.12s for job '%s' "
                      "(docs/protocol.md, \"Baseline samples\")", rpc_op_name(op), q.release, c->job);
            free(ss);
            rpc_request_done(&q);
            return AGENT_EXIT_USAGE;
        }
    }
    q.ktok_s = c->ktok_s;
    if (op == RPC_PROMOTE)
        (void)str_copy(q.spec_digest, sizeof q.spec_digest, c->spec.digest);
    (void)str_copy(q.reason, sizeof q.reason, c->reason);
    q.no_mark = c->no_mark;
    q.no_start = c->no_start;
    if (op == RPC_START || op == RPC_REVERT)
        (void)str_copy(q.rdzv, sizeof q.rdzv, c->spec.rdzv);
    if (op == RPC_STOP)
        q.restart_after_s = c->restart_after_s;
    code = call_daemon(c, &q, false, NULL);
    rpc_request_done(&q);
    if (code == 0 && ss) {
        /* Kept with the job: the promoted release's samples are the next probation's baseline. */
        char p[PATH_MAX];
        int r = -ENAMETOOLONG;
        if (snprintf(p, sizeof p, "%s/jobs/%s/baseline.json", c->root, c->job) < (int)sizeof p)
            r = fs_write_atomic(p, c->samples, strlen(c->samples), 0644);
        if (r < 0) {
            log_error("promote: promoted, but cannot keep the baseline samples in '%s': %s", p,
                      strerror(-r));
            code = AGENT_EXIT_FAIL;
        }
    }
    free(ss);
    return code;
}

/* `baseline --job J`: print the sample set kept by the last promote --samples. */
static int cmd_baseline(struct cli *c)
{
    if (!c->job[0] || c->nargs != 0) {
        log_error("baseline: wrong arguments (see drover-agent --help)");
        return AGENT_EXIT_USAGE;
    }
    char p[PATH_MAX], *text = NULL;
    size_t len = 0;
    if (snprintf(p, sizeof p, "%s/jobs/%s/baseline.json", c->root, c->job) >= (int)sizeof p)
        return AGENT_EXIT_FAIL;
    int r = fs_read_file(p, SAMPLES_MAX_BYTES, &text, &len);
    struct sample_set *ss = malloc(sizeof *ss);
    if (r == 0 && ss)
        r = samples_parse(text, len, ss);
    free(ss);
    if (r < 0) {
        log_error("baseline: no baseline samples for job '%s' ('%s': %s)", c->job, p, strerror(-r));
        free(text);
        return AGENT_EXIT_FAIL;
    }
    printf("%s\n", text);
    free(text);
    return 0;
}

static int cmd_status(struct cli *c, bool watch)
{
    struct rpc_request q;
    rpc_request_init(&q);
    q.op = watch ? RPC_WATCH : RPC_STATUS;
    q.interval_s = c->interval_s > 0 ? c->interval_s : 1;
    q.count = c->count;
    int lines = 0;
    int code = call_daemon(c, &q, true, &lines);
    if (watch && code == AGENT_EXIT_OK && (q.count == 0 || lines < q.count)) {
        /* the controller's live stream: an early end means the daemon went away */
        fprintf(stderr, "watch: the daemon closed the stream after %d documents\n", lines);
        return AGENT_EXIT_NO_DAEMON;
    }
    return code;
}

/* --root/--socket given before the verb: refuse a value that does not fit instead of cutting it
 * (a cut --root is another directory; a cut --socket another daemon's socket). */
static int set_global(char *dst, size_t dstsz, const char *opt, const char *v)
{
    if (!v[0] || str_copy(dst, dstsz, v) < 0) {
        log_error("%s: '%s' is empty or longer than %zu bytes", opt, v, dstsz - 1);
        return -EINVAL;
    }
    return 0;
}

/* gpu-check: the GPU environment preflight (agent/gpucheck.h).  Every check runs; passed ones
 * are one "ok: ..." line each on stdout, faults one line each on stderr (so the controller's
 * one-line reason is exactly the faults).  Exit 9 when any check failed. */
static int cmd_gpu_check(struct cli *c)
{
    if (c->nargs != 0) {
        log_error("gpu-check: usage: gpu-check [--gpus 0,1] [--nproc-per-node P] "
                  "[--host-driver V] [--cuda X.Y] [--gpu-mem BYTES]");
        return AGENT_EXIT_USAGE;
    }
    struct gpucheck_paths paths;
    gpucheck_paths_default(&paths);
    char why[4][1024];
    int r[4];
    r[0] = gpucheck_driver(&paths, c->host_driver, why[0], sizeof why[0]);
    r[1] = gpucheck_cuda(&paths, c->cuda, why[1], sizeof why[1]);
    r[2] = gpucheck_devices(&paths, c->spec.gpus, c->spec.nproc, why[2], sizeof why[2]);
    r[3] = gpucheck_memory(c->spec.gpus, c->spec.nproc, (uint64_t)c->gpu_mem, why[3], sizeof why[3]);
    int faults = 0;
    for (int i = 0; i < 4; i++)
        if (r[i] == 0)
            printf("ok: %s\n", why[i]);
    for (int i = 0; i < 4; i++)
        if (r[i] < 0) {
            fprintf(stderr, "%s\n", why[i]);
            faults++;
        }
    if (faults) {
        printf("gpu environment: %d %s\n", faults, text_plural(faults, "fault", "faults"));
        return AGENT_EXIT_GPU_ENV;
    }
    printf("gpu environment: ok\n");
    return AGENT_EXIT_OK;
}

int main(int argc, char **argv)
{
    log_init("drover-agent");
    static struct cli c;
    (void)str_copy(c.root, sizeof c.root, AGENT_DEFAULT_ROOT);
    (void)str_copy(c.socket, sizeof c.socket, AGENT_DEFAULT_SOCKET);
    spec_init(&c.spec);
    daemon_opts_default(&c.dopts);
    /* global options before the verb */
    int vi = 1;
    while (vi < argc && argv[vi][0] == '-') {
        if (!strcmp(argv[vi], "-v") || !strcmp(argv[vi], "--verbose")) {
            log_set_level(LOG_LVL_DEBUG);
            vi++;
        } else if (!strcmp(argv[vi], "-h") || !strcmp(argv[vi], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[vi], "-V") || !strcmp(argv[vi], "--version")) {
            printf("drover-agent %s\n", DROVER_VERSION); /* as the version verb, for scripts */
            return 0;
        } else if (!strncmp(argv[vi], "--root=", 7)) {
            if (set_global(c.root, sizeof c.root, "--root", argv[vi] + 7) < 0)
                return AGENT_EXIT_USAGE;
            vi++;
        } else if (!strncmp(argv[vi], "--socket=", 9)) {
            if (set_global(c.socket, sizeof c.socket, "--socket", argv[vi] + 9) < 0)
                return AGENT_EXIT_USAGE;
            vi++;
        } else if (vi + 1 < argc && !strcmp(argv[vi], "--root")) {
            if (set_global(c.root, sizeof c.root, "--root", argv[vi + 1]) < 0)
                return AGENT_EXIT_USAGE;
            vi += 2;
        } else if (vi + 1 < argc && !strcmp(argv[vi], "--socket")) {
            if (set_global(c.socket, sizeof c.socket, "--socket", argv[vi + 1]) < 0)
                return AGENT_EXIT_USAGE;
            vi += 2;
        } else {
            break;
        }
    }
    if (vi >= argc) {
        usage(stderr);
        return AGENT_EXIT_USAGE;
    }
    const char *verb = argv[vi];
    int sub_argc = argc - vi;
    char **sub_argv = argv + vi;
    cli_permute(sub_argc, sub_argv);
    int r = cli_parse(&c, sub_argc, sub_argv);
    if (r != 0)
        return r > 0 ? 0 : AGENT_EXIT_USAGE;
    int code;
    switch (agent_verb_parse(verb)) {
    case AGENT_VERB_VERSION:
        printf("drover-agent %s\n", DROVER_VERSION);
        code = 0;
        break;
    case AGENT_VERB_DAEMON:
        (void)str_copy(c.dopts.root, sizeof c.dopts.root, c.root);
        (void)str_copy(c.dopts.socket, sizeof c.dopts.socket, c.socket);
        if (!c.pidfile[0])
            pidfile_of_socket(c.socket, c.pidfile, sizeof c.pidfile);
        (void)str_copy(c.dopts.pidfile, sizeof c.dopts.pidfile, c.pidfile);
        c.dopts.detach = c.detach;
        code = daemon_run(&c.dopts);
        break;
    case AGENT_VERB_RELEASE: code = cmd_release(&c); break;
    case AGENT_VERB_EVENTS: code = cmd_events(&c); break;
    case AGENT_VERB_LEASE: code = cmd_lease(&c); break;
    case AGENT_VERB_HISTORY: code = cmd_history(&c); break;
    case AGENT_VERB_PREFLIGHT: code = cmd_preflight(&c); break;
    case AGENT_VERB_ACTIVATE: code = cmd_job_verb(&c, RPC_ACTIVATE); break;
    case AGENT_VERB_PROMOTE: code = cmd_job_verb(&c, RPC_PROMOTE); break;
    case AGENT_VERB_BASELINE: code = cmd_baseline(&c); break;
    case AGENT_VERB_REVERT: code = cmd_job_verb(&c, RPC_REVERT); break;
    case AGENT_VERB_STOP: code = cmd_job_verb(&c, RPC_STOP); break;
    case AGENT_VERB_START: code = cmd_job_verb(&c, RPC_START); break;
    case AGENT_VERB_STATUS: code = cmd_status(&c, false); break;
    case AGENT_VERB_WATCH: code = cmd_status(&c, true); break;
    case AGENT_VERB_METRICS:
        c.metrics = true;
        code = cmd_status(&c, false);
        break;
    case AGENT_VERB_GPU_CHECK: code = cmd_gpu_check(&c); break;
    default:
        log_error("unknown verb '%s'", verb);
        usage(stderr);
        code = AGENT_EXIT_USAGE;
    }
    spec_done(&c.spec);
    return code;
}
