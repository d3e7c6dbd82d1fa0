/* controller/cmd_validate.c: `drover validate [DIR [--env ENVDIR]] [--job J]`: the checks that need no host.
 * The inventory was already parsed by main() (any error there exits 2 with file:line); with DIR,
 * the release directory is walked as `deploy` would bundle it (common/manifest2.c's rules: directories,
 * regular files, relative symlinks that stay inside) and each job's command and preflight must be
 * executable files in it.  With --env, ENVDIR is walked by the same rules (as plan and deploy
 * walk it) and a command or preflight under `.drover-env/` must be an executable file or a
 * symlink in it; without --env such a command is an error (the release alone has none), as
 * deploy refuses it.  Connects nowhere; writes nothing.
 */
#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/manifest2.h"
#include "common/text.h"
#include "controller/cli.h"
#include "controller/cmd.h"
#include "controller/deploy/objsync.h"
#include "controller/verbs.h"
#include "controller/transport/ssh.h"

int cmd_validate(struct fleet *f, int argc, char **argv)
{
    static const struct option opts[] = {
        { "job", required_argument, NULL, 'j' },
        { "env", required_argument, NULL, 'e' },
        { NULL, 0, NULL, 0 },
    };
    const char *jobname = NULL, *envdir = NULL;
    int c;
    optind = 0;
    while ((c = cli_getopt(argc, argv, "j:", opts)) != -1) {
        if (c == 'j') {
            if (cli_take_once(argv[0], "--job", &jobname, optarg) != EXIT_OK)
                return EXIT_USAGE;
        } else if (c == 'e')
            envdir = optarg;
        else {
            return verb_usage_error(argv[0], NULL);
        }
    }
    if (optind + 1 < argc) {
        return verb_usage_error(argv[0], argv[optind + 1]);
    }
    if (envdir && optind == argc) {
        log_error("--env needs a release directory DIR (the environment goes with a code release)");
        return verb_usage_error(argv[0], NULL);
    }
    if (f->args_only) /* controller/cli.c: arguments checked, no inventory yet */
        return EXIT_OK;
    const struct inventory *inv = f->inv;
    if (jobname && !inventory_find_job(inv, jobname)) {
        char why[512];
        log_error("%s", inventory_no_job(inv, jobname, why, sizeof why));
        return EXIT_USAGE;
    }
    /* an empty file (or the wrong one) is no inventory: it said "ok (0 hosts, 0 jobs, ...)".
     * Hosts without jobs are fine (install HOST:VMID, trust) but said. */
    char nojob[512];
    if (!inv->nhosts && !inv->njobs) {
        log_error("'%s' has no [host NAME] and no [job NAME] section: is it the inventory you meant? "
                  "(docs/config.md; deploy/drover.ini.example is a start)", inv->path);
        return EXIT_USAGE;
    }
    if (!inv->njobs)
        log_warn("%s", inventory_no_jobs(inv, nojob, sizeof nojob));
    /* an identity that is not there: every SSH connection then failed with "cannot read
     * identity", while validate said ok.  A warning: an inventory is also checked where its key
     * is not (a review, a CI job), and validate connects nowhere */
    bool remote = false;
    for (int h = 0; h < inv->nhosts; h++)
        remote = remote || !inv->hosts[h].local;
    if (remote && inv->identity[0] && access(inv->identity, R_OK) < 0)
        log_warn("%s: [drover] identity '%s' cannot be read here (%s): every connection from this "
                 "machine would fail; give the private key drover logs in with (ssh-keygen -t "
                 "ed25519 -f PATH makes one; its .pub goes into each host's authorized_keys)",
                 inv->path, inv->identity, strerror(errno));
    /* containers counted once however many jobs share them (it said 2 for one container that
     * two jobs name), and "1 job", not "1 jobs" */
    int ncts = inventory_count_cts(inv);
    printf("inventory %s: ok (%d %s, %d %s, %d %s)\n", inv->path, inv->nhosts,
           text_plural(inv->nhosts, "host", "hosts"), inv->njobs, text_plural(inv->njobs, "job", "jobs"), ncts,
           text_plural(ncts, "container", "containers"));
    /* a healthy_deadline that cuts short the first step a raised first_step_deadline allows:
     * every deploy failed at 60 s with "no heartbeat ... within healthy_deadline" */
    for (int j = 0; j < inv->njobs; j++) {
        char w[1200];
        if ((!jobname || !strcmp(jobname, inv->jobs[j].name)) &&
            inventory_deadline_warning(&inv->jobs[j], w, sizeof w))
            log_warn("%s", w);
    }
    /* Where each host really goes once ssh_config applies (nothing is connected). */
    for (int h = 0; h < inv->nhosts; h++) {
        const struct inv_host *ih = &inv->hosts[h];
        if (ih->local || !inv->ssh_config[0])
            continue;
        struct ssh_params p = { .name = ih->name, .address = ih->address, .port = ih->port,
                                .user = ih->user, .known_hosts = inv->known_hosts,
                                .identity = inv->identity, .ssh_config = inv->ssh_config,
                                .port_set = ih->port_set, .user_set = ih->user_set };
        struct ssh_target t;
        char err[512];
        if (ssh_resolve(&p, &t, err, sizeof err) < 0) {
            log_error("%s", err);
            return EXIT_USAGE;
        }
        printf("host %s: %s@%s:%d%s%s (%s)\n", ih->name, t.user, t.host, t.port,
               t.proxy[0] ? " via " : "", t.proxy, inv->ssh_config);
    }
    if (optind == argc)
        return EXIT_OK;
    const char *dir = argv[optind];
    struct manifest2 *m = NULL;
    int r = manifest2_from_dir(dir, NULL, &m);
    if (r < 0) {
        release_read_error("release", dir, r, false);
        return EXIT_FAIL;
    }
    struct manifest2 *em = NULL;
    if (envdir && (r = manifest2_from_dir(envdir, NULL, &em)) < 0) {
        release_read_error("environment", envdir, r, false);
        manifest2_free(m);
        return EXIT_FAIL;
    }
    /* allowed (deploy ships it: the job may create the target at run time), but said: a link
     * forgotten fails only at run time, in the container */
    size_t pos = 0;
    for (const struct m2_entry *l; (l = manifest2_dangling_link(m, &pos));)
        log_warn("release symlink '%s/%s' -> '%s' points to nothing in the release: it fails at run time "
                 "unless the job creates its target", dir, l->path, l->target);
    if (em)
        printf("environment %s: ok (%zu %s)\n", envdir, em->nfiles, text_plural(em->nfiles, "file", "files"));
    int ret = EXIT_OK, nok = 0;
    for (int j = 0; j < inv->njobs; j++) {
        const struct inv_job *job = &inv->jobs[j];
        if (jobname && strcmp(job->name, jobname) != 0)
            continue;
        bool ok = release_job_problems(m, dir, em, envdir, job, false) == 0;
        if (ok) {
            printf("release %s for job %s: ok (%zu %s)\n", dir, job->name, m->nfiles,
                   text_plural(m->nfiles, "file", "files"));
            nok++;
        } else
            ret = EXIT_FAIL;
    }
    /* a release for one job of several failed on the others (a PyTorch release checked against
     * the lab's inventory, whose job train runs bin/drover-train) */
    if (ret != EXIT_OK && !jobname && nok > 0) {
        fflush(stdout); /* under the "ok" lines before it, also in a pipe */
        fprintf(stderr, "(without --job the release is checked against every job of '%s': `drover "
                        "validate %s --job J` checks it for job J only)\n", inv->path, dir);
    }
    manifest2_free(em);
    manifest2_free(m);
    return ret;
}
