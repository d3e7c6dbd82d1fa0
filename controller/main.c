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
#include "controller/inventory.h"

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
            "  deploy DIR [--env ENVDIR] [--stage-only] [--job J]... | --all-jobs [--dry-run]\n"
            "  gc [--keep N]                      collect host object stores and the manifest cache\n"
            "                                     stage, push, verify, activate, probation,\n"
            "                                     then promote or revert (several jobs: in waves)\n"
            "  status [-o json|wide] [--job J] [--watch N]\n"
            "  rollback --job J [--to ID [--force]]  return J to its last good release\n"
            "  history [--job J] [-o json]\n"
            "  top [--once] [-n S] [--ascii]      live fleet dashboard (docs/dashboard.md)\n"
            "  version | help\n"
            "\n"
            "INVENTORY defaults to $DROVER_INVENTORY, then ./drover.ini (docs/config.md).\n"
            "Exit codes: 0 ok, 1 failed (nothing switched), 2 usage, 3 reverted to the last good\n"
            "release, 4 revert failed, 5 host key unknown/changed, 6 failed without auto_revert\n"
            "(docs/controller.md).\n");
}

/* Every verb: its name and the function that parses its arguments (argv[0] is the verb) and
 * returns the exit code.  "help" and "version" need no inventory and are answered above. */
static const struct verb {
    const char *name;
    int (*run)(struct fleet *f, int argc, char **argv);
} verbs[] = {
    { "trust", cmd_trust },   { "install", cmd_install },   { "plan", cmd_plan },
    { "deploy", cmd_deploy }, { "status", cmd_status },     { "rollback", cmd_rollback },
    { "history", cmd_history }, { "top", cmd_top }, { "gc", cmd_gc },
};

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
    const struct verb *vb = NULL;
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0] && !vb; i++)
        if (strcmp(verbs[i].name, verb) == 0)
            vb = &verbs[i];
    if (!vb) {
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
    int ret = vb->run(&f, vargc, vargv);
    if (f.key_refused && (ret == EXIT_FAIL || ret == EXIT_OK))
        ret = EXIT_HOSTKEY;
    fleet_done(&f);
    inventory_free(inv);
    return ret;
}
