/* controller/cmd_logs.c: `drover logs --job J [--rank N] [-n LINES] [-f] [--agent]` and `drover
 * events [--job J] [-f] [-o json]`: what happened inside the containers, read over the same SSH +
 * pct path as everything else.  logs reads the agent's per-rank worker log
 * (ROOT/runs/<job>/logs/rank<N>.log, written by agent/supervise.c) with `tail`, or with --agent
 * the agent's own log (ROOT/agent.log, or journald's under systemd); events runs
 * `drover-agent events --json [--since SEQ]` in each container.  Read-only: nothing here changes
 * a container.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "common/event.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/cli.h"
#include "controller/cmd.h"
#include "controller/verbs.h"
#include "controller/transport/pct.h"

#define LOGS_LINE_MAX 8192

static volatile sig_atomic_t stop_requested;
static void on_sigint(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static int parse_count(const char *s, long lo, long hi, long *ret)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -EINVAL;
    *ret = v;
    return 0;
}

/* One log as tail sees it: rank N's worker log, or (rank -1) the agent's own log. */
struct rank_tail {
    const struct inv_ct *ct;
    int rank;
    struct conn_stream *s;
};

/* The agent's own log, in the container: journald's where systemd runs the agent as
 * drover-agent.service (docs/agent.md; it writes no agent.log then), else ROOT/agent.log
 * (`daemon --detach`, what `drover install` starts), else journald's where the unit exists but
 * is not running (failed after its start limit: its crash is in the journal).  $0 the log path,
 * $1 the line count, $2 "f" to follow, $3 "host" for a local store root (the host's own unit,
 * if any, is another agent).  The script is a constant; paths and counts travel as arguments. */
/* Following a log: a `tail -F` (or `journalctl -f`) exec'd in place outlived `drover logs -f`'s
 * Ctrl-C in the container (and its lxc-attach on the host): closing the channel closes only
 * its stdin, which neither reads, and a quiet log never gives it the SIGPIPE that would end it.
 * So the follower runs in the background and a watcher reads stdin (drover keeps it open and
 * sends nothing); its EOF, the channel closed or drover gone, ends the follower. */
#define LOG_FOLLOW_FN \
    "follow() { exec 3<&0; \"$@\" & p=$!; { while read -r _; do :; done; kill $p 2>/dev/null; } <&3 & " \
    "w=$!; wait $p; s=$?; kill $w 2>/dev/null; exit $s; }; "
static const char agent_log_script[] =
    LOG_FOLLOW_FN
    "journal() { if [ \"$2\" = f ]; then follow journalctl -u drover-agent --no-pager -n \"$1\" -f; fi; "
    "exec journalctl -u drover-agent --no-pager -n \"$1\"; }; "
    "unit=; [ \"$3\" != host ] && command -v systemctl >/dev/null 2>&1 && unit=1; "
    "[ -n \"$unit\" ] && systemctl is-active --quiet drover-agent 2>/dev/null && journal \"$@\"; "
    "if [ -e \"$0\" ]; then if [ \"$2\" = f ]; then follow tail -n \"$1\" -F \"$0\"; fi; exec tail -n \"$1\" \"$0\"; fi; "
    "[ -n \"$unit\" ] && systemctl cat drover-agent >/dev/null 2>&1 && journal \"$@\"; "
    "echo \"no agent log at $0 and no drover-agent unit (is the agent installed here? drover install)\" >&2; exit 1";

/* A rank's worker log, in the container: $0 its path, $1 the line count, $2 "f" to follow, $3
 * the job's log directory.  A log that is not there is said in plain words and its own exit
 * code, before tail runs: `tail` said "cannot open" (and `tail -F` waited silently for a file
 * that never comes, then exited 0 on Ctrl-C) where the job never ran. */
#define RANK_LOG_NO_JOB 3  /* the job's log directory is not there: it never ran here */
#define RANK_LOG_NO_RANK 4 /* the directory is, the rank's log is not: that rank never ran here */
static const char rank_log_script[] =
    LOG_FOLLOW_FN
    "[ -d \"$3\" ] || { echo \"the job never ran here (no log directory $3)\" >&2; exit 3; }; "
    "[ -e \"$0\" ] || { echo \"this rank never ran here (no log at $0)\" >&2; exit 4; }; "
    "if [ \"$2\" = f ]; then follow tail -n \"$1\" -F \"$0\"; fi; exec tail -n \"$1\" \"$0\"";

/* the command that prints (or follows) one log; path and dir are the caller's buffers */
static void log_argv(const struct inv_ct *ct, const char *job, int rank, const char *nbuf, bool follow,
                     char *path, size_t pathsz, char *dir, size_t dirsz, const char *argv[8])
{
    int i = 0;
    if (rank < 0) {
        snprintf(path, pathsz, "%s/agent.log", pct_agent_root(ct));
        argv[i++] = "sh";
        argv[i++] = "-c";
        argv[i++] = agent_log_script;
        argv[i++] = path;
        argv[i++] = nbuf;
        argv[i++] = follow ? "f" : "";
        argv[i++] = ct->root[0] ? "host" : "";
    } else {
        snprintf(dir, dirsz, "%s/runs/%s/logs", pct_agent_root(ct), job);
        snprintf(path, pathsz, "%s/runs/%s/logs/rank%d.log", pct_agent_root(ct), job, rank);
        argv[i++] = "sh";
        argv[i++] = "-c";
        argv[i++] = rank_log_script;
        argv[i++] = path;
        argv[i++] = nbuf;
        argv[i++] = follow ? "f" : "";
        argv[i++] = dir;
    }
    argv[i] = NULL;
}

/* "rank 3" or "the agent" in messages */
static const char *log_whose(int rank, char *buf, size_t n)
{
    if (rank < 0)
        return "the agent";
    snprintf(buf, n, "rank %d", rank);
    return buf;
}

int cmd_logs(struct fleet *f, int argc, char **argv)
{
    static const struct option opts[] = {
        { "job", required_argument, NULL, 'j' },
        { "rank", required_argument, NULL, 'r' },
        { "lines", required_argument, NULL, 'n' },
        { "follow", no_argument, NULL, 'f' },
        { "agent", no_argument, NULL, 'a' },
        { NULL, 0, NULL, 0 },
    };
    const char *jobname = NULL;
    long rank = -1, lines = 100;
    bool follow = false, agent = false;
    int c;
    optind = 0;
    while ((c = cli_getopt(argc, argv, "j:r:n:f", opts)) != -1) {
        if (c == 'j') {
            if (cli_take_once(argv[0], "--job", &jobname, optarg) != EXIT_OK)
                return EXIT_USAGE;
        } else if (c == 'r' && parse_count(optarg, 0, 1 << 20, &rank) == 0)
            ;
        else if (c == 'n' && parse_count(optarg, 0, 1000000, &lines) == 0)
            ;
        else if (c == 'f')
            follow = true;
        else if (c == 'a')
            agent = true;
        else {
            char typed[32]; /* name the value refused: `--rank -1` printed only the usage line */
            if (c == 'r')
                log_error("%s takes a rank from 0 to %d, not '%s'",
                          verb_opt_typed(argv, optind, optarg, typed, sizeof typed), 1 << 20, optarg);
            else if (c == 'n')
                log_error("%s takes a line count from 0 to 1000000, not '%s'",
                          verb_opt_typed(argv, optind, optarg, typed, sizeof typed), optarg);
            return verb_usage_error(argv[0], NULL);
        }
    }
    if (optind != argc) {
        return verb_usage_error(argv[0], argv[optind]);
    }
    if (f->args_only) /* controller/cli.c: arguments checked, no inventory yet */
        return EXIT_OK;
    if (!jobname && f->inv->njobs == 1)
        jobname = f->inv->jobs[0].name;
    const struct inv_job *job = jobname ? inventory_find_job(f->inv, jobname) : NULL;
    if (!job) {
        char why[512];
        if (jobname)
            log_error("%s", inventory_no_job(f->inv, jobname, why, sizeof why));
        else
            log_error("name the job with --job");
        return EXIT_USAGE;
    }
    int world = job->ncts * job->nproc_per_node;
    if (rank >= world) {
        log_error("job '%s' has ranks 0..%d; there is no rank %ld", job->name, world - 1, rank);
        return EXIT_USAGE;
    }
    /* the logs to read: ranks first..last, or with --agent the agent's log of each container
     * those ranks run in (once per container) */
    struct rank_tail want[INV_MAX_CTS * 16];
    int nwant = 0;
    int first = rank >= 0 ? (int)rank : 0, last = rank >= 0 ? (int)rank : world - 1;
    for (int r = first; r <= last && nwant < (int)(sizeof want / sizeof want[0]); r++) {
        const struct inv_ct *ct = &job->cts[r / job->nproc_per_node];
        if (agent && nwant > 0 && want[nwant - 1].ct == ct)
            continue;
        want[nwant++] = (struct rank_tail){ .ct = ct, .rank = agent ? -1 : r };
    }
    char nbuf[24];
    snprintf(nbuf, sizeof nbuf, "%ld", lines);
    struct rank_tail tails[INV_MAX_CTS * 16];
    int ntails = 0, ret = EXIT_OK;
    for (int i = 0; i < nwant; i++) {
        const struct inv_ct *ct = want[i].ct;
        int r = want[i].rank;
        char path[PATH_MAX], dir[PATH_MAX], whose[32];
        const char *av[8];
        log_argv(ct, job->name, r, nbuf, follow, path, sizeof path, dir, sizeof dir, av);
        struct conn *cn;
        if (fleet_conn(f, ct->host, &cn) < 0) {
            ret = EXIT_FAIL;
            continue;
        }
        if (follow) {
            struct rank_tail *t = &tails[ntails];
            if (pct_stream(cn, ct, av, LOGS_LINE_MAX, &t->s) < 0) {
                log_error("%s: cannot follow %s's log: %s", ct->label, log_whose(r, whose, sizeof whose), cn->err);
                ret = EXIT_FAIL;
                continue;
            }
            t->ct = ct;
            t->rank = r;
            ntails++;
            continue;
        }
        struct exec_result res;
        int e = pct_run(cn, ct, av, f->inv->exec_timeout_s, &res);
        if (e < 0) {
            log_error("%s: cannot read %s's log: %s", ct->label, log_whose(r, whose, sizeof whose), cn->err);
            ret = EXIT_FAIL;
            continue;
        }
        if (res.status != 0) {
            char why[512];
            if (r < 0) /* the script's own words: no log, or journalctl's error */
                log_error("%s: cannot read the agent's log: %s", ct->label, exec_result_reason(&res, why, sizeof why));
            else if (res.status == RANK_LOG_NO_JOB)
                log_error("%s: job '%s' never ran here: no worker log (no '%s'); `drover status --job %s` "
                          "says what runs where", ct->label, job->name, dir, job->name);
            else if (res.status == RANK_LOG_NO_RANK)
                log_error("%s: %s of job '%s' never ran here: no worker log at '%s'; `drover status --job "
                          "%s` says what runs where", ct->label, log_whose(r, whose, sizeof whose), job->name,
                          path, job->name);
            else
                log_error("%s: %s has no log at '%s' (%s)", ct->label, log_whose(r, whose, sizeof whose), path,
                          exec_result_reason(&res, why, sizeof why));
            ret = EXIT_FAIL;
        } else {
            if (nwant > 1 && r < 0)
                printf("==> agent (%s) <==\n", ct->label);
            else if (nwant > 1)
                printf("==> rank %d (%s) <==\n", r, ct->label);
            fwrite(res.out, 1, res.out_len, stdout);
        }
        exec_result_done(&res);
    }
    if (!follow)
        return ret;
    signal(SIGINT, on_sigint);
    signal(SIGTERM, on_sigint);
    int open_n = ntails;
    while (open_n > 0 && !stop_requested) {
        bool any = false;
        for (int i = 0; i < ntails; i++) {
            if (!tails[i].s)
                continue;
            char *line;
            size_t len;
            int p;
            while ((p = conn_stream_poll(tails[i].s, &line, &len)) == 1) {
                any = true;
                if (nwant > 1 && tails[i].rank < 0)
                    printf("[agent %s] ", tails[i].ct->label);
                else if (nwant > 1)
                    printf("[rank %d] ", tails[i].rank);
                fwrite(line, 1, len, stdout);
                putchar('\n');
            }
            if (p < 0 && p != -E2BIG) {
                /* a follow ends only when its command did: say why (no log there, the
                 * container stopped), or the other logs go on and this one is silently gone */
                const char *why = conn_stream_err(tails[i].s);
                char whose[32];
                log_error("%s: stopped following %s's log%s%s", tails[i].ct->label,
                          log_whose(tails[i].rank, whose, sizeof whose), why[0] ? ": " : "", why);
                ret = EXIT_FAIL;
                (void)pct_streams_free(&tails[i].s, 1);
                open_n--;
            }
        }
        fflush(stdout);
        if (!any)
            fleet_wait(f, 500);
    }
    /* the followers are ended in their containers, not only their channels closed (one
     * follow-up per host for all of them) */
    struct conn_stream *ss[INV_MAX_CTS * 16];
    for (int i = 0; i < ntails; i++)
        ss[i] = tails[i].s;
    int left = pct_streams_free(ss, ntails);
    if (left > 0)
        log_warn("%d %s could not be ended in %s container (host not answering?): %s may still run there "
                 "(`drover -v logs` says which)", left, left == 1 ? "log reader" : "log readers",
                 left == 1 ? "its" : "their", left == 1 ? "it" : "they");
    return ret;
}

/* One container's place in the journal. */
struct ev_src {
    const struct inv_ct *ct;
    int64_t since;
    bool failed;
};

struct ev_line {
    struct event ev;
    const char *ct;
};

static int ev_cmp(const void *a, const void *b)
{
    const struct ev_line *x = a, *y = b;
    return x->ev.ts < y->ev.ts ? -1 : x->ev.ts > y->ev.ts ? 1 : 0;
}

static void ev_print(const struct ev_line *l, bool json)
{
    if (json) {
        json_t *o = json_pack("{s:i,s:s,s:I,s:f,s:s,s:s,s:s,s:s}", "v", 1, "container", l->ct,
                              "seq", (json_int_t)l->ev.seq, "ts", l->ev.ts, "job", l->ev.job,
                              "kind", l->ev.kind, "release", l->ev.release, "detail", l->ev.detail);
        char *t = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        if (t)
            puts(t);
        free(t);
        json_decref(o);
        return;
    }
    char when[32], sid[RELEASE_SHORT_LEN + 1];
    time_t tt = (time_t)l->ev.ts;
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime_r(&tt, &tm));
    ui_short(l->ev.release, sid);
    printf("%s  %-14s %-10s %-12s %-12s %s\n", when, l->ct, l->ev.job[0] ? l->ev.job : "-",
           l->ev.kind, sid, l->ev.detail);
}

/* Read ct's events after src->since; append them to *lines.  -errno (logged). */
static int ev_fetch(struct fleet *f, struct ev_src *src, struct ev_line **lines, size_t *n,
                    size_t *cap)
{
    char since[24];
    snprintf(since, sizeof since, "%lld", (long long)src->since);
    const char *args[] = { "events", "--json", "--since", since, NULL };
    struct conn *cn;
    int r = fleet_conn(f, src->ct->host, &cn);
    if (r < 0)
        return r;
    struct exec_result res;
    if ((r = pct_run_agent(cn, src->ct, args, f->inv->exec_timeout_s, &res)) < 0) {
        log_error("%s: cannot read the agent's events: %s", src->ct->label, cn->err);
        return r;
    }
    if (res.status != 0) {
        char why[512];
        log_error("%s: drover-agent events failed: %s", src->ct->label,
                  exec_result_reason(&res, why, sizeof why));
        exec_result_done(&res);
        return -EIO;
    }
    for (char *line = res.out, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        struct event ev;
        if (len == 0 || event_parse(line, len, &ev) < 0)
            continue;
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 256;
            struct ev_line *g = realloc(*lines, nc * sizeof **lines);
            if (!g) {
                exec_result_done(&res);
                return -ENOMEM;
            }
            *lines = g;
            *cap = nc;
        }
        (*lines)[(*n)++] = (struct ev_line){ .ev = ev, .ct = src->ct->label };
        if (ev.seq > src->since)
            src->since = ev.seq;
    }
    exec_result_done(&res);
    return 0;
}

int cmd_events(struct fleet *f, int argc, char **argv)
{
    static const struct option opts[] = {
        { "job", required_argument, NULL, 'j' },
        { "follow", no_argument, NULL, 'f' },
        { "output", required_argument, NULL, 'o' },
        { NULL, 0, NULL, 0 },
    };
    const char *jobname = NULL;
    bool follow = false, json = false;
    int c;
    optind = 0;
    while ((c = cli_getopt(argc, argv, "j:fo:", opts)) != -1) {
        if (c == 'j') {
            if (cli_take_once(argv[0], "--job", &jobname, optarg) != EXIT_OK)
                return EXIT_USAGE;
        } else if (c == 'f')
            follow = true;
        else if (c == 'o') { /* `-o yaml` printed the usage line alone */
            int k;
            if (cli_output(argv, optarg, cli_output_json, &k) != EXIT_OK)
                return EXIT_USAGE;
            json = true;
        } else {
            return verb_usage_error(argv[0], NULL);
        }
    }
    if (optind != argc) {
        return verb_usage_error(argv[0], argv[optind]);
    }
    cmd_result_want(f, json, "events", &jobname, 1);
    if (f->args_only) /* controller/cli.c: arguments checked, no inventory yet */
        return EXIT_OK;
    if (jobname && !inventory_find_job(f->inv, jobname)) {
        char why[512];
        log_error("%s", inventory_no_job(f->inv, jobname, why, sizeof why));
        return EXIT_USAGE;
    }
    /* Every container once, even when several jobs share it. */
    struct ev_src srcs[INV_MAX_JOBS * INV_MAX_CTS];
    size_t nsrc = 0;
    for (int j = 0; j < f->inv->njobs; j++) {
        const struct inv_job *job = &f->inv->jobs[j];
        if (jobname && strcmp(job->name, jobname) != 0)
            continue;
        for (int k = 0; k < job->ncts; k++) {
            bool seen = false;
            for (size_t i = 0; i < nsrc && !seen; i++)
                seen = strcmp(srcs[i].ct->label, job->cts[k].label) == 0;
            if (!seen && nsrc < sizeof srcs / sizeof srcs[0])
                srcs[nsrc++] = (struct ev_src){ .ct = &job->cts[k] };
        }
    }
    int ret = EXIT_OK;
    signal(SIGINT, on_sigint);
    signal(SIGTERM, on_sigint);
    do {
        struct ev_line *lines = NULL;
        size_t n = 0, cap = 0;
        for (size_t i = 0; i < nsrc; i++) {
            if (srcs[i].failed)
                continue;
            if (ev_fetch(f, &srcs[i], &lines, &n, &cap) < 0) {
                srcs[i].failed = true; /* reported once; a follow keeps the others going */
                ret = EXIT_FAIL;
            }
        }
        if (n)
            qsort(lines, n, sizeof *lines, ev_cmp);
        for (size_t i = 0; i < n; i++) {
            /* a job filter also drops the agent-wide events of other jobs' containers */
            if (jobname && lines[i].ev.job[0] && strcmp(lines[i].ev.job, jobname) != 0)
                continue;
            ev_print(&lines[i], json);
        }
        free(lines);
        fflush(stdout);
        for (int t = 0; follow && t < 20 && !stop_requested; t++) {
            struct timespec ts = { 0, 100 * 1000 * 1000 };
            nanosleep(&ts, NULL);
        }
    } while (follow && !stop_requested);
    return ret;
}
