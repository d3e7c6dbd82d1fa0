/* controller/cmd_install.c: `drover install [--job J | HOST:VMID...] [--agent-binary PATH]
 * [--restart-agent] [-o json]`:
 * put the agent binary into each container (staged once per host, pushed with --perms 0755 to a
 * temp name, sha256 checked inside the container, renamed into place so a running agent's
 * binary is never written over), then start the daemon if it is not running.  Idempotent.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/agentcli.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/text.h"
#include "common/util.h"
#include "controller/cli.h"
#include "controller/cmd.h"
#include "controller/transport/fanout.h"
#include "controller/transport/pct.h"
#include "controller/transport/stage.h"
#include "controller/verbs.h"

/* What install did in one container: the "containers" entries of `install -o json`
 * (docs/protocol.md, "Result document"). */
struct install_res {
    const char *binary; /* installed, already-installed, failed (NULL: not reached) */
    const char *agent;  /* running, started, restarted, not-running */
    char error[512];    /* "" when none */
    char missing[128];  /* a shared library the agent lacks in the container, "" when none */
    const char *package; /* the Debian package that has it, NULL when unknown */
};

static void default_agent_binary(char *out, size_t out_sz)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        (void)str_copy(out, out_sz, "drover-agent");
        return;
    }
    self[n] = '\0';
    snprintf(out, out_sz, "%s/drover-agent", dirname(self));
}

static bool agent_answers(struct conn *c, const struct inv_ct *ct)
{
    struct agent_argv a;
    agent_argv_init(&a);
    agent_argv_status(&a);
    struct exec_result res;
    if (pct_run_agent(c, ct, a.argv, 15, &res) < 0)
        return false;
    bool ok = res.status == 0;
    exec_result_done(&res);
    return ok;
}

/* true when systemd in the container runs the agent as drover-agent.service: then only systemd
 * may restart it (a daemon started beside it would be outside the unit, unwatched). */
static bool agent_under_systemd(struct conn *c, const struct inv_ct *ct)
{
    if (ct->root[0]) /* a local store root: never a unit */
        return false;
    const char *sh[] = { "systemctl", "is-active", "--quiet", "drover-agent.service", NULL };
    struct exec_result res;
    if (pct_run(c, ct, sh, 15, &res) < 0)
        return false;
    bool yes = res.status == 0;
    exec_result_done(&res);
    return yes;
}

/* Ask the running daemon to exit (SIGTERM through its pidfile: it leaves its gangs running and
 * the next daemon re-adopts them, docs/agent.md). */
static int agent_stop_daemon(struct conn *c, const struct inv_ct *ct)
{
    char pidfile[PATH_MAX];
    if (ct->root[0])
        snprintf(pidfile, sizeof pidfile, "%s/agent.pid", ct->root);
    else
        snprintf(pidfile, sizeof pidfile, "%s", AGENT_DEFAULT_PIDFILE);
    const char *sh[] = { "sh", "-c", "kill \"$(cat \"$0\")\"", pidfile, NULL };
    struct exec_result res;
    int r = pct_run(c, ct, sh, 30, &res);
    if (r < 0)
        return r;
    r = res.status == 0 ? 0 : -ESRCH;
    exec_result_done(&res);
    return r;
}

/* The Debian package that ships a library drover-agent links (Debian 12 names). */
static const char *lib_package(const char *soname)
{
    static const char *const map[][2] = {
        { "libjansson.so", "libjansson4" }, { "libarchive.so", "libarchive13" },
        { "libcrypto.so", "libssl3" },      { "libssl.so", "libssl3" },
        { "libxml2.so", "libxml2" },        { "libicu", "libicu72" },
        { "liblzma.so", "liblzma5" },       { "libzstd.so", "libzstd1" },
        { "libbz2.so", "libbz2-1.0" },      { "liblz4.so", "liblz4-1" },
        { "libacl.so", "libacl1" },         { "libnettle.so", "libnettle8" },
        { "libz.so", "zlib1g" },           { "libc.so", "libc6" },
        { "libm.so", "libc6" },            { "libpthread.so", "libc6" },
        { "libdl.so", "libc6" },           { "librt.so", "libc6" },
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strncmp(soname, map[i][0], strlen(map[i][0])))
            return map[i][1];
    return NULL;
}

void install_diagnose(const char *err, int status, char *missing, size_t missing_sz,
                      const char **package, char *why, size_t why_sz)
{
    static const char shlib[] = "error while loading shared libraries: ";
    const char *m = err ? strstr(err, shlib) : NULL, *g = err ? strstr(err, "version `GLIBC_") : NULL;
    missing[0] = '\0';
    *package = NULL;
    if (m) {
        m += strlen(shlib);
        snprintf(missing, missing_sz, "%.*s", (int)strcspn(m, ": \n"), m);
        *package = lib_package(missing);
        if (*package && !strcmp(*package, "libc6"))
            snprintf(why, why_sz, "drover-agent cannot run in the container: it lacks %s, part of "
                     "the C library (Debian package libc6), which the agent needs", missing);
        else
            snprintf(why, why_sz, "drover-agent cannot run in the container: it lacks %s (Debian "
                     "package %s; the default build needs only the C library, this one was "
                     "linked with STATIC_LIBS=0: docs/operations.md)", missing,
                     *package ? *package : "unknown");
    } else if (g) {
        g += strlen("version `");
        snprintf(missing, missing_sz, "%.*s", (int)strcspn(g, "'"), g);
        *package = "libc6";
        snprintf(why, why_sz, "drover-agent cannot run in the container: its C library is older than "
                 "the one the agent was built against (it needs %s): build drover-agent on the "
                 "oldest distribution the containers run (docs/operations.md)", missing);
    } else if (status == 126 || status == 127) {
        /* the binary was pushed and its sha256 checked: what cannot be found is its loader */
        snprintf(missing, missing_sz, "%s", "ld-linux-x86-64.so.2");
        *package = "libc6";
        snprintf(why, why_sz, "drover-agent cannot start in the container (exit %d): it has no glibc "
                 "loader (/lib64/ld-linux-x86-64.so.2, Debian package libc6; a musl container such "
                 "as Alpine cannot run it)", status);
    } else {
        snprintf(why, why_sz, "'drover-agent --version' failed in the container (exit %d)", status);
    }
}

bool install_is_agent_version(const char *out, size_t len)
{
    static const char want[] = "drover-agent ";
    return out && len > sizeof want - 1 && memcmp(out, want, sizeof want - 1) == 0;
}

/* Run the pushed binary (`PATH --version`) in the container before it replaces anything: a
 * container without the agent's shared libraries gets told which one is missing and which
 * package has it, instead of an agent that never starts.  0 when it runs. */
static int check_agent_runs(struct conn *c, const struct inv_ct *ct, const char *path, double timeout_s,
                            struct install_res *ir)
{
    const char *argv[] = { path, "--version", NULL };
    struct exec_result res;
    int r = pct_run(c, ct, argv, timeout_s, &res);
    if (r < 0) {
        snprintf(ir->error, sizeof ir->error, "cannot run '%.200s': %.280s", path, c->err);
        log_error("%s: %s", ct->label, ir->error);
        return r;
    }
    if (res.status == 0 && !install_is_agent_version(res.out, res.out_len)) {
        /* another program that runs (--agent-binary build/drover-train, one tab too far): it
         * would have replaced the agent in every container, none of which could start it */
        char shown[96];
        size_t n = res.out ? strcspn(res.out, "\n") : 0;
        (void)text_escape(res.out ? res.out : "", n < 80 ? n : 80, shown, sizeof shown);
        snprintf(ir->error, sizeof ir->error, "the binary given is not drover-agent: its --version "
                 "says '%s', not 'drover-agent VERSION'; nothing was replaced: give --agent-binary "
                 "the drover-agent binary (build/drover-agent)", shown);
        log_error("%s: %s", ct->label, ir->error);
        exec_result_done(&res);
        return -ENOEXEC;
    }
    if (res.status == 0) {
        exec_result_done(&res);
        return 0;
    }
    char why[512];
    exec_result_reason(&res, why, sizeof why);
    install_diagnose(res.err, res.status, ir->missing, sizeof ir->missing, &ir->package, ir->error,
                     sizeof ir->error);
    log_error("%s: %s", ct->label, ir->error);
    if (ir->package && ct->vmid >= 0)
        log_error("%s: e.g. pct exec %d -- apt-get install -y %s", ct->label, ct->vmid, ir->package);
    else if (ir->package)
        log_error("%s: e.g. apt-get install -y %s", ct->label, ir->package);
    if (!ir->missing[0])
        log_error("%s: '%s --version' failed in the container (exit %d): %s", ct->label, path,
                  res.status, why);
    exec_result_done(&res);
    return -ENOEXEC;
}

/* Logs "LABEL: why" and keeps why for the JSON document. */
__attribute__((format(printf, 3, 4))) static void install_fail(struct install_res *ir,
                                                               const struct inv_ct *ct, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ir->error, sizeof ir->error, fmt, ap);
    va_end(ap);
    log_error("%s: %s", ct->label, ir->error);
}

static int install_one(struct fleet *f, const struct inv_ct *ct, const char *staged, const char *sha,
                       bool restart, struct install_res *ir)
{
    const struct inventory *inv = f->inv;
    struct conn *c;
    int r = fleet_conn(f, ct->host, &c);
    if (r < 0)
        return r;
    const struct inv_host *h = &inv->hosts[ct->host];
    const char *dest = ct->root[0] && h->agent_path[0] ? h->agent_path : inv->agent_path;
    char cur[65], tmp[PATH_MAX], dir[PATH_MAX];
    bool changed = false;
    ir->binary = "failed";
    if (pct_sha256(c, ct, dest, cur) == 0 && strcmp(cur, sha) == 0) {
        fprintf(stderr, "%s: %s already installed (sha256 %.12s)\n", ct->label, dest, sha);
        ir->binary = "already-installed";
    } else {
        snprintf(tmp, sizeof tmp, "%s.new", dest);
        (void)str_copy(dir, sizeof dir, dest);
        const char *mk[] = { "mkdir", "-p", dirname(dir), NULL };
        struct exec_result res;
        r = pct_run(c, ct, mk, inv->exec_timeout_s, &res);
        if (r < 0) {
            install_fail(ir, ct, "%s", c->err);
            return r;
        }
        int st = res.status;
        char reason[512], why[1024];
        exec_result_reason(&res, reason, sizeof reason);
        exec_result_done(&res);
        if (st != 0) {
            /* pct's own error first: a vmid of no container here was "is the container running?" */
            if (pct_ct_problem(ct->vmid, reason, why, sizeof why) < 0)
                install_fail(ir, ct, "%s", why);
            else
                install_fail(ir, ct, "cannot create '%s': %s", dir, reason);
            return -EIO;
        }
        r = pct_push(c, ct, staged, tmp, "0755");
        if (r < 0) {
            install_fail(ir, ct, "%s", c->err);
            return r;
        }
        /* pct push exits 0 even when the copy failed: check what arrived. */
        if (pct_sha256(c, ct, tmp, cur) < 0 || strcmp(cur, sha) != 0) {
            install_fail(ir, ct, "'%s' did not arrive intact (sha256 mismatch: disk full?)", tmp);
            return -EBADMSG;
        }
        if ((r = check_agent_runs(c, ct, tmp, inv->exec_timeout_s, ir)) < 0) {
            const char *rm[] = { "rm", "-f", tmp, NULL };
            if (pct_run(c, ct, rm, inv->exec_timeout_s, &res) == 0)
                exec_result_done(&res);
            return r;
        }
        const char *mv[] = { "mv", "-f", tmp, dest, NULL };
        r = pct_run(c, ct, mv, inv->exec_timeout_s, &res);
        if (r < 0 || res.status != 0) {
            install_fail(ir, ct, "cannot move '%s' into place", tmp);
            if (r == 0)
                exec_result_done(&res);
            return -EIO;
        }
        exec_result_done(&res);
        changed = true;
        ir->binary = "installed";
        fprintf(stderr, "%s: installed %s (sha256 %.12s)\n", ct->label, dest, sha);
    }
    ir->agent = "not-running";
    bool restarting = false;
    if (agent_answers(c, ct)) {
        if (!changed || !restart) {
            if (changed)
                log_warn("%s: the agent daemon still runs the previous binary; `drover install "
                         "--restart-agent` restarts it (its gangs keep running)", ct->label);
            printf("%s: agent running\n", ct->label);
            ir->agent = "running";
            return 0;
        }
        if (agent_under_systemd(c, ct)) {
            const char *rs[] = { "systemctl", "restart", "drover-agent.service", NULL };
            struct exec_result res;
            r = pct_run(c, ct, rs, 60, &res);
            int st = r < 0 ? -1 : res.status;
            if (r == 0)
                exec_result_done(&res);
            if (st != 0) {
                install_fail(ir, ct, "systemctl restart drover-agent failed (exit %d); see "
                             "`journalctl -u drover-agent` in the container", st);
                return -EIO;
            }
            for (int i = 0; i < 50; i++) {
                if (agent_answers(c, ct)) {
                    printf("%s: agent restarted (systemd; its gangs keep running)\n", ct->label);
                    ir->agent = "restarted";
                    return 0;
                }
                usleep(200000);
            }
            install_fail(ir, ct, "systemd restarted drover-agent but it does not answer "
                             "`drover-agent status`");
            return -EIO;
        }
        r = agent_stop_daemon(c, ct);
        if (r < 0) {
            install_fail(ir, ct, "cannot stop the running agent daemon (pidfile)");
            return r;
        }
        restarting = true;
        fprintf(stderr, "%s: stopping the old agent daemon (its gangs keep running)\n", ct->label);
    }
    /* The detached daemon keeps stderr for its log; left on our channel it would hold the
     * channel open forever.  A constant script (arguments passed as $0/$1, never spliced into
     * it) sends that log to ROOT/agent.log instead. */
    const struct inv_host *hh = &inv->hosts[ct->host];
    const char *agent = ct->root[0] && hh->agent_path[0] ? hh->agent_path : inv->agent_path;
    struct exec_result res;
    /* $0 is the store root (for the log), "$@" the agent's own argv from common/agentcli.h. */
    struct agent_argv a;
    agent_argv_init(&a);
    agent_argv_add(&a, "sh");
    agent_argv_add(&a, "-c");
    agent_argv_add(&a, "mkdir -p \"$0\" && exec \"$@\" </dev/null >/dev/null 2>>\"$0/agent.log\"");
    agent_argv_add(&a, pct_agent_root(ct));
    agent_argv_add(&a, agent);
    if (ct->root[0])
        agent_argv_globals(&a, ct->root, ct->socket);
    agent_argv_daemon(&a, true);
    agent_argv_keep_releases(&a, inv->keep); /* the container store's GC: [drover] keep */
    /* Until the old daemon has exited it holds the pidfile lock and a new one exits
     * AGENT_EXIT_BUSY: retry for up to two minutes. */
    for (int attempt = 0;; attempt++) {
        r = pct_run(c, ct, a.argv, 30, &res);
        if (r < 0 || !restarting || res.status != AGENT_EXIT_BUSY || attempt >= 120)
            break;
        exec_result_done(&res);
        sleep(1);
    }
    if (r < 0) {
        install_fail(ir, ct, "%s", c->err);
        return r;
    }
    char reason[512];
    if (res.status != 0) {
        install_fail(ir, ct, "drover-agent daemon --detach failed (exit %d): %s (its log: %s/agent.log)",
                     res.status, exec_result_reason(&res, reason, sizeof reason), pct_agent_root(ct));
        exec_result_done(&res);
        return -EIO;
    }
    exec_result_done(&res);
    for (int i = 0; i < 50; i++) {
        if (agent_answers(c, ct)) {
            printf("%s: agent %s\n", ct->label, restarting ? "restarted" : "started");
            ir->agent = restarting ? "restarted" : "started";
            return 0;
        }
        usleep(200000);
    }
    install_fail(ir, ct, "started the agent daemon but it does not answer `drover-agent status`");
    return -ETIMEDOUT;
}

/* install's fan-out: one worker per host (transport/fanout.h), each touching only its host's
 * connection and its own containers' res/rc entries. */
struct install_fan {
    struct fleet *f;
    const struct inv_ct *cts;
    int n;
    const char *binary, *sha;
    uint64_t size;
    bool restart;
    struct install_res *res;
    int *rc;
    int hosts[INV_MAX_HOSTS], nhosts;
};

static void install_host(int k, void *ctx)
{
    struct install_fan *fan = ctx;
    struct fleet *f = fan->f;
    int h = fan->hosts[k];
    char staged[1024], err[1500] = "";
    int sr = stage_to_host(f, h, fan->binary, fan->sha, fan->size, "agent", staged, sizeof staged, err,
                           sizeof err);
    if (sr < 0 && f->conn_err[h] == 0)
        log_error("%s", err);
    for (int i = 0; i < fan->n; i++) {
        if (fan->cts[i].host != h)
            continue;
        struct install_res *ir = &fan->res[i];
        fan->rc[i] = sr < 0 ? sr : install_one(f, &fan->cts[i], staged, fan->sha, fan->restart, ir);
        if (fan->rc[i] < 0 && !ir->error[0])
            (void)str_copy(ir->error, sizeof ir->error,
                           sr < 0 ? (f->conn_err[h] && f->conn_msg[h][0] ? f->conn_msg[h] : err) : strerror(-fan->rc[i]));
    }
}

/* One "containers" entry of `install -o json`. */
static json_t *install_res_json(const struct inv_ct *ct, const struct install_res *ir)
{
    json_t *o = json_pack("{s:s,s:s?,s:s?}", "container", ct->label, "binary", ir->binary, "agent",
                          ir->agent);
    if (!o)
        return NULL;
    json_object_set_new(o, "error", ir->error[0] ? json_string(ir->error) : json_null());
    json_object_set_new(o, "missing",
                        ir->missing[0] ? json_pack("{s:s,s:s?}", "library", ir->missing, "package",
                                                   ir->package)
                                       : json_null());
    return o;
}

/* A failure before any container was tried: with -o json the document, its members that are
 * not known yet null or empty.  Returns code. */
static int install_early(struct cmd_result *cr, bool json, const struct inventory *inv, const char *job,
                         const char *binary, int code)
{
    if (!json)
        return code;
    cr->extra = json_pack("{s:s?,s:n,s:[]}", "agent_binary", binary[0] ? binary : NULL, "sha256", "containers");
    return cmd_result_end(cr, inv, "install", job ? &job : NULL, job ? 1 : 0, code);
}

int cmd_install(struct fleet *f, int argc, char **argv)
{
    static const struct option opts[] = {
        { "job", required_argument, NULL, 'j' },
        { "agent-binary", required_argument, NULL, 'a' },
        { "restart-agent", no_argument, NULL, 'r' },
        { "output", required_argument, NULL, 'o' },
        { NULL, 0, NULL, 0 },
    };
    const char *job = NULL;
    bool restart = false, json = false;
    char binary[PATH_MAX];
    default_agent_binary(binary, sizeof binary);
    int c;
    optind = 0; /* 0: glibc re-initialises (main parsed with "+") */
    while ((c = cli_getopt(argc, argv, "j:a:o:", opts)) != -1) {
        if (c == 'j') {
            if (cli_take_once(argv[0], "--job", &job, optarg) != EXIT_OK)
                return EXIT_USAGE;
        } else if (c == 'a')
            (void)str_copy(binary, sizeof binary, optarg);
        else if (c == 'r')
            restart = true;
        else if (c == 'o') {
            int k;
            if (cli_output(argv, optarg, cli_output_json, &k) != EXIT_OK)
                return EXIT_USAGE;
            json = true;
        } else
            return verb_usage_error(argv[0], NULL);
    }
    if (optind < argc && job) {
        log_error("give --job or HOST:VMID arguments, not both");
        return EXIT_USAGE;
    }
    cmd_result_want(f, json, "install", &job, 1);
    if (f->args_only) /* controller/cli.c: arguments checked, no inventory yet */
        return EXIT_OK;
    const struct inventory *inv = f->inv;
    /* -o json from here on: a failure before any container is tried (a mistyped container, an
     * unknown job, no agent binary) still writes the document, with its "error" */
    struct cmd_result cr = { .saved_fd = -1 };
    if (json && cmd_result_begin(&cr) < 0) {
        log_error("cannot redirect stdout for -o json");
        return EXIT_FAIL;
    }
    struct inv_ct *cts = calloc(INV_MAX_JOBS * INV_MAX_CTS, sizeof *cts);
    if (!cts)
        return install_early(&cr, json, inv, job, binary, EXIT_FAIL);
    int n = 0, ret = EXIT_OK;
    if (optind < argc) {
        for (int i = optind; i < argc && n < INV_MAX_JOBS * INV_MAX_CTS; i++) {
            char err[512];
            if (inventory_parse_ct(inv, argv[i], &cts[n], err, sizeof err) < 0) {
                log_error("%s", err);
                free(cts);
                return install_early(&cr, json, inv, job, binary, EXIT_USAGE);
            }
            n++;
        }
    } else {
        for (int ji = 0; ji < inv->njobs; ji++) {
            const struct inv_job *j = &inv->jobs[ji];
            if (job && strcmp(job, j->name) != 0)
                continue;
            for (int i = 0; i < j->ncts; i++) {
                bool dup = false;
                for (int k = 0; k < n; k++)
                    dup = dup || strcmp(cts[k].label, j->cts[i].label) == 0;
                if (!dup)
                    cts[n++] = j->cts[i];
            }
        }
        if (job && !inventory_find_job(inv, job)) {
            char why[512];
            log_error("%s", inventory_no_job(inv, job, why, sizeof why));
            free(cts);
            return install_early(&cr, json, inv, job, binary, EXIT_USAGE);
        }
    }
    if (n == 0) {
        log_error("no containers to install into");
        free(cts);
        return install_early(&cr, json, inv, job, binary, EXIT_USAGE);
    }
    char sha[SHA256_HEX_LEN + 1];
    uint64_t size;
    int r = sha256_file_hex(binary, sha, &size);
    if (r < 0) {
        /* bad input, found before any host is contacted: exit 2 as a usage error, the way deploy
         * treats a missing release directory (it was 1, the code of an install that failed) */
        char why[160];
        (void)ui_path_problem(r, why, sizeof why);
        log_error("agent binary '%s' %s: build it (make builds build/drover-agent next to drover), "
                  "or give the drover-agent to push (drover install --agent-binary PATH); "
                  "nothing was contacted, nothing changed", binary, why);
        free(cts);
        return install_early(&cr, json, inv, job, binary, EXIT_USAGE);
    }
    /* Every host at once (bounded by [drover] parallel): a dead host costs one connect timeout
     * in total, and a slow upload to one host does not hold up the others.  A host's containers
     * go one after another, by that host's worker; results are reported in container order. */
    struct install_fan *fan = calloc(1, sizeof *fan);
    struct install_res *res = calloc((size_t)n, sizeof *res);
    int *rc = calloc((size_t)n, sizeof *rc);
    if (!fan || !res || !rc) {
        free(fan);
        free(res);
        free(rc);
        free(cts);
        return install_early(&cr, json, inv, job, binary, EXIT_FAIL);
    }
    *fan = (struct install_fan){ .f = f, .cts = cts, .n = n, .binary = binary, .sha = sha,
                                 .size = size, .restart = restart, .res = res, .rc = rc };
    bool need[INV_MAX_HOSTS] = { false };
    for (int i = 0; i < n; i++)
        need[cts[i].host] = true;
    for (int h = 0; h < INV_MAX_HOSTS; h++)
        if (need[h])
            fan->hosts[fan->nhosts++] = h;
    (void)fleet_connect_all(f, need);
    fanout_run(fan->nhosts, inv->parallel, install_host, fan);
    json_t *jcts = json ? json_array() : NULL;
    for (int i = 0; i < n; i++) {
        if (rc[i] < 0)
            ret = f->key_refused ? EXIT_HOSTKEY : EXIT_FAIL;
        if (jcts)
            json_array_append_new(jcts, install_res_json(&cts[i], &res[i]));
    }
    free(fan);
    free(res);
    free(rc);
    free(cts);
    if (!json)
        return ret;
    cr.extra = json_pack("{s:s,s:s,s:o}", "agent_binary", binary, "sha256", sha, "containers", jcts);
    return cmd_result_end(&cr, inv, "install", job ? &job : NULL, job ? 1 : 0, ret);
}
