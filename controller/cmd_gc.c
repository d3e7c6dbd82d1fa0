/* controller/cmd_gc.c: `drover gc [--keep N]`: collect host object stores and the controller's
 * manifest cache without ever removing a way back: every job's current, previous and good
 * release (as each container's agent reports them, plus the release history names as the
 * job's target, and every earlier good release a rollback may return to) and the environments
 * they name are kept, with the N newest releases besides.
 * Containers collect their own stores (the agent, after every promote).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/agentcli.h"
#include "common/log.h"
#include "common/manifest2.h"
#include "common/text.h"
#include "common/util.h"
#include "controller/cli.h"
#include "controller/cmd.h"
#include "controller/verbs.h"
#include "controller/deploy/objsync.h"
#include "controller/transport/pct.h"

#define GC_MAX_IDS (INV_MAX_JOBS * INV_MAX_CTS * (3 + STATUS_MAX_MARKS) + INV_MAX_JOBS)

struct idset {
    char ids[GC_MAX_IDS * 2][RELEASE_ID_LEN + 1];
    size_t n;
};

static void idset_add(struct idset *s, const char *id)
{
    if (!id || !sha256_is_hex(id) || s->n == ARRAY_SIZE(s->ids))
        return;
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->ids[i], id))
            return;
    memcpy(s->ids[s->n++], id, RELEASE_ID_LEN + 1);
}

const char *gc_host_line(const char *host, int removed, size_t in_use, int keep_n, char *buf, size_t sz)
{
    char kept[200] = "";
    if (in_use && keep_n > 0)
        snprintf(kept, sizeof kept, " (kept the objects of %zu %s in use and of the %d newest)", in_use,
                 text_plural((long long)in_use, "release", "releases"), keep_n);
    else if (in_use)
        snprintf(kept, sizeof kept, " (kept the objects of %zu %s in use)", in_use,
                 text_plural((long long)in_use, "release", "releases"));
    else if (keep_n > 0)
        snprintf(kept, sizeof kept, " (kept the objects of the %d newest %s)", keep_n,
                 text_plural(keep_n, "release", "releases"));
    snprintf(buf, sz, "gc %s: removed %d %s%s", host, removed, text_plural(removed, "object", "objects"), kept);
    return buf;
}

const char *gc_cache_line(const char *mdir, int removed, char *buf, size_t sz)
{
    snprintf(buf, sz, "gc: removed %d cached %s from '%s'", removed, text_plural(removed, "manifest", "manifests"),
             mdir);
    return buf;
}

const char *gc_ct_line(const char *label, size_t entries, uint64_t bytes, bool incoming_kept, char *buf, size_t sz)
{
    char kept[160] = "";
    if (incoming_kept)
        snprintf(kept, sizeof kept, "; a deploy holds a lease there, so its staged manifests and "
                 "packs stay (gc again once it is done)");
    if (!entries)
        snprintf(buf, sz, "gc %s: no temp files left by interrupted deploys%s", label, kept);
    else
        snprintf(buf, sz, "gc %s: removed %zu %s left by interrupted deploys (%.1f MiB freed)%s", label,
                 entries, text_plural((long long)entries, "temp file", "temp files"), (double)bytes / 1048576.0,
                 kept);
    return buf;
}

/* `release clean` in container ct: what an install interrupted by Ctrl-C left in its store
 * (objects/.tmp.* as large as the file being stored, incoming/ manifests and packs), said on
 * stderr.  A failure is a warning: the objects' GC does not depend on it. */
static void gc_clean_ct(struct fleet *f, const struct inv_ct *ct, const char *job)
{
    struct conn *c;
    if (fleet_conn(f, ct->host, &c) < 0)
        return;
    struct agent_argv a;
    agent_argv_init(&a);
    agent_argv_release_clean(&a);
    struct exec_result res;
    char line[600], reason[512];
    if (pct_run_agent(c, ct, a.argv, f->inv->exec_timeout_s, &res) < 0) {
        log_warn("gc %s: temp files left by interrupted deploys not cleaned: %s", ct->label, c->err);
        return;
    }
    size_t n;
    uint64_t bytes;
    bool kept;
    if (res.status != 0 || agent_clean_parse(res.out, &n, &bytes, &kept) < 0)
        log_warn("gc %s: temp files left by interrupted deploys not cleaned: `drover-agent release clean` "
                 "%s (an agent older than this drover: `drover install --job %s` updates it)", ct->label,
                 res.status != 0 ? exec_result_reason(&res, reason, sizeof reason) : "printed no count", job);
    else
        fprintf(stderr, "%s\n", gc_ct_line(ct->label, n, bytes, kept, line, sizeof line));
    exec_result_done(&res);
}

bool gc_agent_not_installed(const char *said)
{
    /* fleet_agent_status_read's words for pct exec's 127/126 (lxc-attach: `Failed to exec
     * "/usr/local/bin/drover-agent"`) */
    return said && (strstr(said, "(exit 127)") || strstr(said, "(exit 126)") || strstr(said, "Failed to exec"));
}

int objsync_gc_fleet(struct fleet *f, const char *const *extra, size_t nextra, int keep_n, bool only_job_hosts,
                     const struct inv_job *only_job)
{
    const struct inventory *inv = f->inv;
    struct idset *keep = calloc(1, sizeof *keep);
    struct agent_status *st = malloc(sizeof *st);
    if (!keep || !st) {
        free(keep);
        free(st);
        return -ENOMEM;
    }
    int r = 0;
    for (size_t i = 0; i < nextra; i++)
        idset_add(keep, extra[i]);
    bool hosts[INV_MAX_HOSTS] = { false }, unknown[INV_MAX_HOSTS] = { false }, incomplete = false;
    for (int j = 0; j < inv->njobs; j++)
        for (int c = 0; c < inv->jobs[j].ncts; c++)
            if (!only_job_hosts || &inv->jobs[j] == only_job)
                hosts[inv->jobs[j].cts[c].host] = true;
    for (int j = 0; j < inv->njobs; j++) {
        const struct inv_job *job = &inv->jobs[j];
        char target[RELEASE_ID_LEN + 1];
        cmd_job_target(inv, job->name, target);
        idset_add(keep, target);
        for (int c = 0; c < job->ncts; c++) {
            int h = job->cts[c].host;
            char e[1200];
            if (fleet_agent_status(f, &job->cts[c], st, e, sizeof e) < 0) {
                /* Unknown what it runs: nothing is collected on its host, whose store stages to
                 * it (a way back could go), nor in the manifest cache; the other hosts' stores
                 * serve other containers.  It stopped the whole GC, every run, with a dead
                 * container of an unrelated job */
                incomplete = true;
                if (!hosts[h])
                    continue; /* its host's store is not collected in this run */
                char fix[200];
                if (agent_said_no_daemon(e)) /* the container runs, its agent does not */
                    snprintf(fix, sizeof fix, "`drover install --job %s` starts its agent", job->name);
                else if (gc_agent_not_installed(e)) /* pct exec could not run it at all */
                    snprintf(fix, sizeof fix, "the agent is not installed there: `drover install --job %s` "
                             "puts it there", job->name);
                else
                    snprintf(fix, sizeof fix, "start the container, or fix [job %s]'s containers in "
                             "the inventory", job->name);
                /* after a deploy's promote, which succeeded: a warning that says what was skipped
                 * (it was an error line under "promoted"); `drover gc` itself fails on it */
                if (!unknown[h] && only_job_hosts)
                    log_warn("gc after the promote skipped host '%s': %s (job '%s'): %s; nothing is "
                             "collected there until its agent answers (%s; then `drover gc` collects it)",
                             inv->hosts[h].name, job->cts[c].label, job->name, e, fix);
                else if (!unknown[h])
                    log_error("gc: %s (job '%s'): %s; nothing is collected on host '%s' until its "
                              "agent answers (%s)", job->cts[c].label, job->name, e,
                              inv->hosts[h].name, fix);
                unknown[h] = true;
                r = -EHOSTUNREACH;
                continue;
            }
            bool again = false; /* a container two jobs share is cleaned once */
            for (int j2 = 0; j2 <= j && !again; j2++)
                for (int c2 = 0; c2 < inv->jobs[j2].ncts && !again && (j2 < j || c2 < c); c2++)
                    again = inventory_same_ct(&inv->jobs[j2].cts[c2], &job->cts[c]);
            if (!only_job_hosts && !again)
                gc_clean_ct(f, &job->cts[c], job->name);
            const struct job_status *js = status_find_job(st, job->name);
            if (js) {
                idset_add(keep, js->current);
                idset_add(keep, js->previous);
                idset_add(keep, js->good);
                for (int g = 0; g < js->ngoods; g++) /* rollback targets */
                    idset_add(keep, js->goods[g]);
            }
        }
    }
    char mdir[1100];
    snprintf(mdir, sizeof mdir, "%s/manifests", inv->state_dir);
    objsync_cache_add_envs(mdir, keep->ids, &keep->n, ARRAY_SIZE(keep->ids));
    const char **ids = calloc(keep->n ? keep->n : 1, sizeof *ids);
    if (!ids) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < keep->n; i++)
        ids[i] = keep->ids[i];
    int total = 0;
    for (int h = 0; h < inv->nhosts; h++) {
        if (!hosts[h] || unknown[h])
            continue;
        char err[1200];
        int n = objsync_gc_host(f, h, ids, keep->n, keep_n, err, sizeof err);
        if (n < 0 && only_job_hosts) {
            log_warn("gc after the promote skipped host '%s': %s (`drover gc` collects it once that is "
                     "fixed)", inv->hosts[h].name, err);
            r = n;
            continue;
        }
        if (n < 0) {
            log_error("gc: host '%s': %s", inv->hosts[h].name, err);
            r = n;
            continue;
        }
        char line[600];
        fprintf(stderr, "%s\n", gc_host_line(inv->hosts[h].name, n, keep->n, keep_n, line, sizeof line));
        total += n;
    }
    int c = incomplete ? 0 : objsync_gc_cache(mdir, ids, keep->n, keep_n);
    if (c > 0) {
        char line[1400];
        fprintf(stderr, "%s\n", gc_cache_line(mdir, c, line, sizeof line));
    }
    free(ids);
    if (r == 0)
        r = total;
out:
    free(st);
    free(keep);
    return r;
}

int cmd_gc(struct fleet *f, int argc, char **argv)
{
    static const struct option opts[] = {
        { "keep", required_argument, NULL, 'k' },
        { NULL, 0, NULL, 0 },
    };
    int keep = f->inv->keep, c; /* [drover] keep; --keep N for this run */
    optind = 0; /* 0: glibc re-initialises (main parsed with "+") */
    while ((c = cli_getopt(argc, argv, "k:", opts)) != -1) {
        /* the inventory's keep's bound (it took 999999 here, 10000 there); 0 is for the
         * command line only: one run that keeps just the protected releases (docs/config.md) */
        if (c == 'k' && str_is_digits(optarg, 5) && atoi(optarg) <= INV_KEEP_MAX)
            keep = atoi(optarg);
        else {
            char typed[32]; /* name the value refused: `--keep -3` printed only the usage line */
            if (c == 'k')
                log_error("%s takes a count from 0 to %d, not '%s' (0: keep only the releases in "
                          "use and the ways back, for this run)", verb_opt_typed(argv, optind, optarg, typed, sizeof typed),
                          INV_KEEP_MAX, optarg);
            return verb_usage_error(argv[0], NULL);
        }
    }
    if (optind != argc) {
        return verb_usage_error(argv[0], argv[optind]);
    }
    if (f->args_only) /* controller/cli.c: arguments checked, no inventory yet */
        return EXIT_OK;
    int r = objsync_gc_fleet(f, NULL, 0, keep, false, NULL);
    return r < 0 ? (f->key_refused ? EXIT_HOSTKEY : EXIT_FAIL) : EXIT_OK;
}
