/* controller/main.c: `drover`, the controller the operator runs.  Parses the global options,
 * loads the inventory and hands over to one verb.  Results go to stdout, diagnostics and
 * progress to stderr.  The controller talks to hosts over SSH (or runs pct locally) and to
 * containers only through pct and the agent CLI; it never talks to the Proxmox API and never
 * writes into a container's filesystem from the host side.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "controller/cmd.h"
#include "controller/deploy.h"
#include "controller/inventory.h"
#include "controller/top.h"

#ifndef DROVER_VERSION
#define DROVER_VERSION "unknown"
#endif

static void usage(FILE *fp)
{
    fprintf(fp,
            "usage: drover [-i INVENTORY] [-v] VERB [ARGS]\n"
            "\n"
            "  trust HOST... [--replace]          add HOST's SSH host key to known_hosts\n"
            "  install [--job J | HOST:VMID...] [--agent-binary PATH] [--restart-agent]\n"
            "                                     put drover-agent into containers and start it\n"
            "  plan DIR [--job J]                 what deploy would do (changes nothing)\n"
            "  deploy DIR [--job J]... | --all-jobs [--dry-run]\n"
            "                                     stage, push, verify, activate, probation,\n"
            "                                     then promote or revert (several jobs: in waves)\n"
            "  status [-o json|wide] [--job J] [--watch N]\n"
            "  rollback --job J                   return J to its last good release\n"
            "  history [--job J] [-o json]\n"
            "  top [--once] [-n S] [--ascii]      live fleet dashboard (docs/dashboard.md)\n"
            "  version | help\n"
            "\n"
            "INVENTORY defaults to $DROVER_INVENTORY, then ./drover.ini (docs/config.md).\n"
            "Exit codes: 0 ok, 1 failed (nothing switched), 2 usage, 3 reverted to the last good\n"
            "release, 4 revert failed, 5 host key unknown/changed, 6 failed without auto_revert\n"
            "(docs/controller.md).\n");
}

static int verb_deploy(struct fleet *f, int argc, char **argv, bool plan)
{
    static const struct option opts[] = {
        { "job", required_argument, NULL, 'j' },
        { "all-jobs", no_argument, NULL, 'a' },
        { "dry-run", no_argument, NULL, 'n' },
        { NULL, 0, NULL, 0 },
    };
    struct deploy_opts o = { .dry_run = plan };
    const char *jobs[INV_MAX_JOBS];
    int njobs = 0, c;
    bool all = false;
    optind = 0; /* 0: glibc re-initialises (main parsed with "+") */
    while ((c = getopt_long(argc, argv, "j:n", opts, NULL)) != -1) {
        if (c == 'j' && njobs < INV_MAX_JOBS)
            jobs[njobs++] = optarg;
        else if (c == 'a')
            all = true;
        else if (c == 'n')
            o.dry_run = true;
        else
            return EXIT_USAGE;
    }
    if (optind + 1 != argc || (all && njobs)) {
        log_error("usage: drover %s DIR [--job J]... | --all-jobs%s", argv[0],
                  plan ? "" : " [--dry-run]");
        return EXIT_USAGE;
    }
    o.dir = argv[optind];
    if (all || (plan && !njobs && f->inv->njobs > 1)) {
        for (int i = 0; i < f->inv->njobs; i++)
            jobs[njobs++] = f->inv->jobs[i].name;
    }
    if (njobs > 1)
        return deploy_wave(f, &o, jobs, njobs);
    o.job = njobs ? jobs[0] : NULL;
    return deploy_run(f, &o);
}

static int verb_rollback(struct fleet *f, int argc, char **argv)
{
    static const struct option opts[] = {
        { "job", required_argument, NULL, 'j' },
        { NULL, 0, NULL, 0 },
    };
    const char *job = NULL;
    int c;
    optind = 0; /* 0: glibc re-initialises (main parsed with "+") */
    while ((c = getopt_long(argc, argv, "j:", opts, NULL)) != -1) {
        if (c != 'j')
            return EXIT_USAGE;
        job = optarg;
    }
    if (optind != argc) {
        log_error("usage: drover rollback --job J");
        return EXIT_USAGE;
    }
    return deploy_rollback(f, job);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "inventory", required_argument, NULL, 'i' },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    log_init("drover");
    /* A host or stream that goes away must show up as an error return, not kill the process. */
    signal(SIGPIPE, SIG_IGN);
    log_set_level(LOG_LVL_INFO);
    const char *inv_arg = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "+i:vh", opts, NULL)) != -1) {
        switch (c) {
        case 'i':
            inv_arg = optarg;
            break;
        case 'v':
            log_set_level(LOG_LVL_DEBUG);
            break;
        case 'h':
            usage(stdout);
            return EXIT_OK;
        case 'V':
            printf("drover %s\n", DROVER_VERSION);
            return EXIT_OK;
        default:
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *verb = argv[optind];
    int vargc = argc - optind;
    char **vargv = argv + optind;
    if (strcmp(verb, "help") == 0) {
        usage(stdout);
        return EXIT_OK;
    }
    if (strcmp(verb, "version") == 0) {
        printf("drover %s\n", DROVER_VERSION);
        return EXIT_OK;
    }
    static const char *verbs[] = { "trust", "install", "plan", "deploy", "status", "rollback",
                                   "history", "top", NULL };
    bool known = false;
    for (int i = 0; verbs[i]; i++)
        known = known || strcmp(verbs[i], verb) == 0;
    if (!known) {
        log_error("unknown verb '%s' (drover help lists them)", verb);
        return EXIT_USAGE;
    }
    const char *path = inv_arg ? inv_arg : getenv("DROVER_INVENTORY");
    if (!path || !*path)
        path = "drover.ini";
    struct inventory *inv;
    char err[1024];
    if (inventory_load(path, &inv, err, sizeof err) < 0) {
        log_error("%s", err);
        return EXIT_USAGE;
    }
    struct fleet f;
    fleet_init(&f, inv, inv_arg);
    int ret;
    if (strcmp(verb, "trust") == 0)
        ret = cmd_trust(&f, vargc, vargv);
    else if (strcmp(verb, "install") == 0)
        ret = cmd_install(&f, vargc, vargv);
    else if (strcmp(verb, "plan") == 0)
        ret = verb_deploy(&f, vargc, vargv, true);
    else if (strcmp(verb, "deploy") == 0)
        ret = verb_deploy(&f, vargc, vargv, false);
    else if (strcmp(verb, "status") == 0)
        ret = cmd_status(&f, vargc, vargv);
    else if (strcmp(verb, "rollback") == 0)
        ret = verb_rollback(&f, vargc, vargv);
    else if (strcmp(verb, "top") == 0)
        ret = cmd_top(&f, vargc, vargv);
    else
        ret = cmd_history(&f, vargc, vargv);
    if (f.key_refused && (ret == EXIT_FAIL || ret == EXIT_OK))
        ret = EXIT_HOSTKEY;
    fleet_done(&f);
    inventory_free(inv);
    return ret;
}
