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
#include "controller/verbs.h"

#ifndef DROVER_VERSION
#define DROVER_VERSION "unknown"
#endif

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
            verbs_usage(stdout);
            return EXIT_OK;
        case 'V':
            printf("drover %s\n", DROVER_VERSION);
            return EXIT_OK;
        default:
            verbs_usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        verbs_usage(stderr);
        return EXIT_USAGE;
    }
    const char *verb = argv[optind];
    int vargc = argc - optind;
    char **vargv = argv + optind;
    if (!verbs_take_inventory_arg(&vargc, vargv, &inv_arg)) {
        log_error("-i/--inventory takes a file (drover %s -i FILE ...)", verb);
        return EXIT_USAGE;
    }
    if (strcmp(verb, "help") == 0) {
        const struct verb *hv = vargc > 1 ? verb_find(vargv[1]) : NULL;
        if (hv)
            verb_help(hv, stdout);
        else
            verbs_usage(stdout);
        return EXIT_OK;
    }
    if (strcmp(verb, "version") == 0) {
        printf("drover %s\n", DROVER_VERSION);
        return EXIT_OK;
    }
    const struct verb *vb = verb_find(verb);
    if (!vb || (!vb->run && !vb->run_plain)) {
        log_error("unknown verb '%s' (drover help lists them)", verb);
        return EXIT_USAGE;
    }
    /* --help is answered from the table, before the inventory is read (a verb's help must work
     * on a machine that has none). */
    if (verb_wants_help(vargc, vargv)) {
        verb_help(vb, stdout);
        return EXIT_OK;
    }
    if (vb->run_plain)
        return vb->run_plain(vargc, vargv);
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
