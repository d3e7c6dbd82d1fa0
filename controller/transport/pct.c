/* controller/transport/pct.c: container operations over a host connection: pct exec / pct push for
 * HOST:VMID nodes, plain commands with --root for HOST:local:/ROOT nodes.  It never writes into
 * a container's rootfs from the host side, and never trusts pct push's exit status alone.
 *
 * Calls that end with their deadline: a command run in a container is `env DROVER_CALL=TOKEN
 * CMD...`, TOKEN new for each call.  When its deadline fires (or the operator interrupts it),
 * closing the SSH channel reaches only the host's shell: neither lxc-attach's child in the
 * container nor a stopped process there hears of it.  pct_end_calls then runs SH_END_CALL in
 * the container, which ends every process carrying the token (the command and the children
 * that inherited its environment), so that no call outlives its deadline there.
 */
#include "controller/transport/pct.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/agentcli.h"
#include "common/log.h"
#include "common/util.h"

const char *pct_agent_root(const struct inv_ct *ct)
{
    return ct->root[0] ? ct->root : PCT_AGENT_ROOT;
}

/* In a container (pct exec), or on the host itself for a local root: end every process that
 * carries the call's mark, " DROVER_CALL=$1 " in its environment or its command line (`env`
 * before it execs), and print how many there were.  SIGTERM and SIGCONT first (a stopped process
 * keeps TERM pending until continued; the agent stops what its verb started, a preflight's
 * tree, on TERM), up to 2 s, then SIGKILL to what is left.  Zombies are not counted.  This
 * script's own processes carry the token only as $1, never as DROVER_CALL=..., so never match. */
static const char SH_END_CALL[] =
    "m=\" DROVER_CALL=$1 \"; ps=\n"
    "for p in /proc/[0-9]*; do\n"
    "  e=\" $(tr '\\0' ' ' <\"$p/environ\" 2>/dev/null) $(tr '\\0' ' ' <\"$p/cmdline\" 2>/dev/null) \"\n"
    "  case $e in *\"$m\"*) ;; *) continue;; esac\n"
    "  case $(cat \"$p/stat\" 2>/dev/null) in *') Z '*|'') continue;; esac\n"
    "  ps=\"$ps ${p#/proc/}\"\n"
    "done\n"
    "[ -n \"$ps\" ] || { echo 0; exit 0; }\n"
    "set -- $ps; n=$#\n"
    "kill -TERM $ps 2>/dev/null; kill -CONT $ps 2>/dev/null\n"
    "i=0\n"
    "while :; do\n"
    "  left=\n"
    "  for p in $ps; do\n"
    "    s=$(cat \"/proc/$p/stat\" 2>/dev/null) || continue\n"
    "    case $s in *') Z '*) ;; *) left=\"$left $p\";; esac\n"
    "  done\n"
    "  [ -n \"$left\" ] && [ $i -lt 20 ] || break\n"
    "  sleep 0.1; i=$((i+1))\n"
    "done\n"
    "[ -z \"$left\" ] || kill -KILL $left 2>/dev/null\n"
    "echo $n\n";

/* On the host: SH_END_CALL ($1) in each container named after it, with that container's token
 * (pairs VMID TOKEN: a vmid, or "-" for a local root, run on the host itself), all at once; one
 * line "K N" per pair (K its position, N what SH_END_CALL printed; empty when it said nothing). */
static const char SH_END_CALLS[] =
    "s=$1; shift; k=0\n"
    "while [ $# -ge 2 ]; do\n"
    "  v=$1; t=$2; shift 2\n"
    "  if [ \"$v\" = - ]; then (n=$(sh -c \"$s\" sh \"$t\" 2>/dev/null </dev/null); echo \"$k $n\") &\n"
    "  else (n=$(pct exec \"$v\" --keep-env 0 -- sh -c \"$s\" sh \"$t\" 2>/dev/null </dev/null); echo \"$k $n\") &\n"
    "  fi\n"
    "  k=$((k+1))\n"
    "done\n"
    "wait\n";

void pct_call_new(char ret_token[PCT_CALL_MAX])
{
    static unsigned seq;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned n = __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED);
    /* pid, a count and the time: unique among this drover's calls, and another drover's */
    snprintf(ret_token, PCT_CALL_MAX, "%x.%x.%llx", (unsigned)getpid(), n,
             (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec);
}

int pct_end_calls(struct conn *c, const struct inv_ct *const *cts, int n, const char *const *tokens,
                  double timeout_s, int *ret_ended)
{
    if (n <= 0 || n > INV_MAX_CTS)
        return -EINVAL;
    const char *argv[6 + 2 * INV_MAX_CTS]; /* sh -c SCRIPT sh SCAN (VMID TOKEN)... NULL */
    char vmids[INV_MAX_CTS][16];
    int a = 0;
    argv[a++] = "sh";
    argv[a++] = "-c";
    argv[a++] = SH_END_CALLS;
    argv[a++] = "sh";
    argv[a++] = SH_END_CALL;
    for (int k = 0; k < n; k++) {
        if (cts[k]->vmid >= 0)
            snprintf(vmids[k], sizeof vmids[k], "%d", cts[k]->vmid);
        else
            snprintf(vmids[k], sizeof vmids[k], "-");
        argv[a++] = vmids[k];
        argv[a++] = tokens[k];
    }
    argv[a] = NULL;
    struct exec_result res;
    int r = conn_run_cleanup(c, argv, timeout_s, &res);
    if (r < 0)
        return r;
    int got[INV_MAX_CTS];
    for (int k = 0; k < n; k++)
        got[k] = -EIO; /* no line, or no number: pct exec itself failed there */
    for (char *l = res.out, *nl; l && *l; l = nl + 1) {
        nl = strchr(l, '\n');
        if (!nl)
            break;
        *nl = '\0';
        int k, cnt, used = 0;
        if (sscanf(l, "%d %d%n", &k, &cnt, &used) == 2 && used == (int)strlen(l) && k >= 0 && k < n && cnt >= 0)
            got[k] = cnt;
    }
    exec_result_done(&res);
    memcpy(ret_ended, got, (size_t)n * sizeof *got);
    return 0;
}

/* The outcome of ending a call in ct (pct_end_calls: r and its count; conn_ended: c->ended of
 * the conn_run that gave up, which on a local host ended its process group), appended to
 * c->err: "; drover ended it there ..." or "; drover could not end it there ...". */
static void say_ended(struct conn *c, int r, int count, int conn_ended)
{
    size_t el = strlen(c->err);
    if (el >= sizeof c->err - 1)
        return;
    /* without the container's label: the callers put it first.  On a local host conn.c ended the
     * command's process group (conn_ended > 0; end_after took its words out): one call, said once */
    if (r == 0 && (count > 0 || (count == 0 && !c->ssh && conn_ended > 0)))
        snprintf(c->err + el, sizeof c->err - el, "; drover ended it there (SIGTERM, then SIGKILL)");
    else if (r == -ETIMEDOUT || r == -ENOTCONN || r == -EIO)
        snprintf(c->err + el, sizeof c->err - el, "; %s: drover could not end it there, it may still be running",
                 pct_end_why(r, 0, NULL));
    else if (r < 0 || count < 0)
        snprintf(c->err + el, sizeof c->err - el, "; drover could not end it there (%s): it may still be running",
                 pct_end_why(r, count, NULL));
}

const char *pct_end_why(int r, int count, const char *err)
{
    /* the follow-up got no answer or no channel, or was not tried (conn_run_cleanup) */
    if (r == -ETIMEDOUT || r == -ENOTCONN || r == -EIO)
        return "the host is not answering";
    if (r == 0 && count < 0)
        return "pct exec failed there";
    return err && err[0] ? err : strerror(-r);
}

/* After conn_run gave r for a call marked with token in ct: end what is left of it there. */
static void end_after(struct conn *c, const struct inv_ct *ct, const char *token, int r)
{
    if (r != -ETIMEDOUT && r != -EINTR)
        return;
    int conn_ended = c->ended, count = -1;
    char said[sizeof c->err];
    (void)str_copy(said, sizeof said, c->err);
    /* a local host's words for its process group are said below with the container's, once:
     * "drover ended it and what it started" and "drover ended it there" were both said */
    if (!c->ssh && conn_ended > 0)
        conn_unsay_ended(said, conn_ended);
    const struct inv_ct *one[1] = { ct };
    const char *tok[1] = { token };
    int er = pct_end_calls(c, one, 1, tok, PCT_END_TIMEOUT_S, &count);
    (void)str_copy(c->err, sizeof c->err, said); /* the follow-up's own words, if any, are not the news */
    say_ended(c, er, count, conn_ended);
}

static int wrap_exec(const struct inv_ct *ct, const char *const *argv, const char *mark, const char **out,
                     char vmid_buf[16])
{
    size_t n = 0;
    if (ct->vmid >= 0) {
        snprintf(vmid_buf, 16, "%d", ct->vmid);
        out[n++] = "pct";
        out[n++] = "exec";
        out[n++] = vmid_buf;
        out[n++] = "--keep-env"; /* never leak the host's environment (cases-field C05) */
        out[n++] = "0";
        out[n++] = "--";
    }
    if (mark) { /* "DROVER_CALL=TOKEN": pct_end_calls finds the call by it */
        out[n++] = "env";
        out[n++] = mark;
    }
    for (size_t i = 0; argv[i]; i++) {
        if (n + 1 >= PCT_ARGV_MAX)
            return -E2BIG;
        out[n++] = argv[i];
    }
    out[n] = NULL;
    return 0;
}

int pct_agent_argv(const struct inventory *inv, const struct inv_ct *ct,
                   const char *const *agent_args, const char **argv_out, char vmid_buf[16])
{
    return pct_agent_call_argv(inv, ct, agent_args, NULL, argv_out, vmid_buf);
}

void pct_call_mark(const char *token, char ret_mark[PCT_MARK_MAX])
{
    snprintf(ret_mark, PCT_MARK_MAX, PCT_CALL_ENV "=%s", token);
}

int pct_agent_call_argv(const struct inventory *inv, const struct inv_ct *ct, const char *const *agent_args,
                        const char *mark, const char **argv_out, char vmid_buf[16])
{
    struct agent_argv inner;
    agent_argv_init(&inner);
    const struct inv_host *h = &inv->hosts[ct->host];
    agent_argv_add(&inner, ct->root[0] && h->agent_path[0] ? h->agent_path : inv->agent_path);
    /* Global options, before the verb: several local roots on one machine each get their own
     * store and their own control socket. */
    if (ct->root[0])
        agent_argv_globals(&inner, ct->root, ct->socket);
    for (size_t i = 0; agent_args[i]; i++)
        agent_argv_add(&inner, agent_args[i]);
    if (agent_argv_end(&inner) < 0)
        return -E2BIG;
    return wrap_exec(ct, inner.argv, mark, argv_out, vmid_buf);
}

int pct_run(struct conn *c, const struct inv_ct *ct, const char *const *argv, double timeout_s,
            struct exec_result *ret)
{
    const char *full[PCT_ARGV_MAX];
    char vmid[16], token[PCT_CALL_MAX], mark[PCT_MARK_MAX];
    pct_call_new(token);
    pct_call_mark(token, mark);
    if (wrap_exec(ct, argv, mark, full, vmid) < 0) {
        snprintf(c->err, sizeof c->err, "too many arguments");
        return -E2BIG;
    }
    int r = conn_run(c, full, timeout_s, ret);
    end_after(c, ct, token, r);
    return r;
}

int pct_run_agent(struct conn *c, const struct inv_ct *ct, const char *const *agent_args,
                  double timeout_s, struct exec_result *ret)
{
    const char *full[PCT_ARGV_MAX];
    char vmid[16], token[PCT_CALL_MAX], mark[PCT_MARK_MAX];
    pct_call_new(token);
    pct_call_mark(token, mark);
    if (pct_agent_call_argv(c->inv, ct, agent_args, mark, full, vmid) < 0) {
        snprintf(c->err, sizeof c->err, "too many arguments");
        return -E2BIG;
    }
    int r = conn_run(c, full, timeout_s, ret);
    if (r == -ETIMEDOUT) { /* conn_run quoted the command line: say the step instead */
        log_debug("%s: %s", ct->label, c->err);
        pct_agent_timeout_msg(agent_args, timeout_s, c->err, sizeof c->err);
    }
    end_after(c, ct, token, r);
    return r;
}

void pct_agent_timeout_msg(const char *const *agent_args, double timeout_s, char *buf, size_t sz)
{
    const char *verb = agent_args && agent_args[0] ? agent_args[0] : "?", *sub = "", *job = NULL;
    /* the verbs with a second word (release have, lease take, history add) are named by both */
    int v = agent_args && agent_args[0] ? agent_verb_parse(agent_args[0]) : -EINVAL;
    if (v >= 0 && agent_verb_has_sub((enum agent_verb)v) && agent_args[1] && agent_args[1][0] != '-')
        sub = agent_args[1];
    for (size_t i = 0; agent_args && agent_args[i]; i++)
        if (!strcmp(agent_args[i], "--job") && agent_args[i + 1]) {
            job = agent_args[i + 1];
            break;
        }
    char see[320] = ""; /* not for `status` itself: it was what got no answer */
    if (strcmp(verb, "status") != 0)
        snprintf(see, sizeof see, " `drover status%s%s` shows it", job ? " --job " : "", job ? job : "");
    snprintf(buf, sz, "step '%s%s%s' got no answer from the agent within %.0fs: is drover-agent stopped or "
             "hung there, or the host no longer answering?%s (drover -v logs the command)", verb,
             sub[0] ? " " : "", sub, timeout_s, see);
}

/* Open the stream of full, a command marked with token (pct_call_mark's) in ct: the call kept
 * with it, for pct_streams_free. */
static int stream_open_call(struct conn *c, const struct inv_ct *ct, const char *const *full, const char *token,
                            size_t line_max, struct conn_stream **ret_s)
{
    struct conn_stream *s;
    int r = conn_stream_open(c, full, line_max, &s);
    if (r < 0)
        return r;
    conn_stream_set_call(s, ct, token);
    *ret_s = s;
    return 0;
}

int pct_stream_agent(struct conn *c, const struct inv_ct *ct, const char *const *agent_args,
                     size_t line_max, struct conn_stream **ret_s)
{
    const char *full[PCT_ARGV_MAX];
    char vmid[16], token[PCT_CALL_MAX], mark[PCT_MARK_MAX];
    pct_call_new(token);
    pct_call_mark(token, mark);
    if (pct_agent_call_argv(c->inv, ct, agent_args, mark, full, vmid) < 0) {
        snprintf(c->err, sizeof c->err, "too many arguments");
        return -E2BIG;
    }
    return stream_open_call(c, ct, full, token, line_max, ret_s);
}

int pct_streams_free(struct conn_stream **ss, int n)
{
    int left = 0;
    for (int i = 0; i < n; i++) {
        struct conn *c;
        const struct inv_ct *ct;
        if (!ss[i] || !conn_stream_call(ss[i], &c, &ct)) {
            conn_stream_free(ss[i]); /* ended on its own, or no call of a container's */
            ss[i] = NULL;
            continue;
        }
        /* this one and the others on its host (up to INV_MAX_CTS): one follow-up for them all */
        const struct inv_ct *cts[INV_MAX_CTS];
        char toks[INV_MAX_CTS][PCT_CALL_MAX];
        const char *tp[INV_MAX_CTS];
        int m = 0, cnt[INV_MAX_CTS];
        for (int k = i; k < n && m < INV_MAX_CTS; k++) {
            struct conn *ck;
            const struct inv_ct *ctk;
            const char *tk = ss[k] ? conn_stream_call(ss[k], &ck, &ctk) : NULL;
            if (!tk || ck != c)
                continue;
            cts[m] = ctk;
            (void)str_copy(toks[m], sizeof toks[m], tk);
            tp[m] = toks[m];
            m++;
            /* closed first: what the channel's close reaches (the host's side, a local group)
             * goes by itself; the follow-up finds what it does not */
            conn_stream_free(ss[k]);
            ss[k] = NULL;
        }
        char said[sizeof c->err];
        (void)str_copy(said, sizeof said, c->err);
        int r = pct_end_calls(c, cts, m, tp, PCT_END_TIMEOUT_S, cnt);
        for (int k = 0; k < m; k++) {
            if (r == 0 && cnt[k] >= 0) {
                log_debug("%s: %d %s of the stream %s ended", cts[k]->label, cnt[k],
                          cnt[k] == 1 ? "process" : "processes", tp[k]);
                continue;
            }
            log_debug("%s: the stream %s could not be ended there: %s", cts[k]->label, tp[k],
                      r < 0 ? c->err : "pct exec failed there");
            left++;
        }
        (void)str_copy(c->err, sizeof c->err, said); /* the follow-up's words are not the news */
    }
    return left;
}

int pct_push(struct conn *c, const struct inv_ct *ct, const char *host_path, const char *ct_path,
             const char *perms)
{
    return pct_push_timeout(c, ct, host_path, ct_path, perms, c->inv->exec_timeout_s);
}

int pct_push_timeout(struct conn *c, const struct inv_ct *ct, const char *host_path, const char *ct_path,
                     const char *perms, double timeout_s)
{
    struct exec_result res;
    int r;
    if (ct->vmid >= 0) {
        char vmid[16];
        snprintf(vmid, sizeof vmid, "%d", ct->vmid);
        const char *argv[] = { "pct", "push", vmid, host_path, ct_path, "--perms", perms, NULL };
        r = conn_run(c, argv, timeout_s, &res);
    } else {
        const char *argv[] = { "install", "-m", perms, host_path, ct_path, NULL };
        r = conn_run(c, argv, timeout_s, &res);
    }
    if (r < 0)
        return r;
    char reason[512];
    /* pct push prints copy errors but still exits 0: any stderr counts as a failure here too. */
    if (res.status != 0 || res.err_len) {
        snprintf(c->err, sizeof c->err, "push of '%s' to '%s' failed: %s", host_path, ct_path,
                 exec_result_reason(&res, reason, sizeof reason));
        r = -EIO;
    }
    exec_result_done(&res);
    return r;
}

int pct_sha256(struct conn *c, const struct inv_ct *ct, const char *path, char ret_hex[65])
{
    const char *argv[] = { "sha256sum", path, NULL };
    struct exec_result res;
    int r = pct_run(c, ct, argv, c->inv->exec_timeout_s, &res);
    if (r < 0)
        return r;
    if (res.status != 0 || res.out_len < 64) {
        exec_result_done(&res);
        return -ENOENT;
    }
    for (int i = 0; i < 64; i++)
        if (!isxdigit((unsigned char)res.out[i])) {
            exec_result_done(&res);
            return -EBADMSG;
        }
    memcpy(ret_hex, res.out, 64);
    ret_hex[64] = '\0';
    exec_result_done(&res);
    return 0;
}

int pct_stream(struct conn *c, const struct inv_ct *ct, const char *const *argv, size_t line_max,
               struct conn_stream **ret_s)
{
    const char *full[PCT_ARGV_MAX];
    char vmid[16], token[PCT_CALL_MAX], mark[PCT_MARK_MAX];
    pct_call_new(token);
    pct_call_mark(token, mark);
    if (wrap_exec(ct, argv, mark, full, vmid) < 0) {
        snprintf(c->err, sizeof c->err, "too many arguments");
        return -E2BIG;
    }
    return stream_open_call(c, ct, full, token, line_max, ret_s);
}

int pct_ct_problem(int vmid, const char *reason, char *out, size_t sz)
{
    if (vmid < 0 || !reason)
        return 0;
    /* PVE: "Configuration file 'nodes/pve1/lxc/103.conf' does not exist" (a vmid of no
     * container, or of another node's) */
    if (strstr(reason, "Configuration file") && strstr(reason, "does not exist")) {
        snprintf(out, sz, "no container %d on this host (%s): check the vmid in the inventory's "
                          "containers (`pct list` on the host lists them)", vmid, reason);
        return -ENODEV;
    }
    if (strstr(reason, "not running")) {
        snprintf(out, sz, "container %d is stopped (%s); start it with: pct start %d", vmid, reason, vmid);
        return -EHOSTDOWN;
    }
    return 0;
}
