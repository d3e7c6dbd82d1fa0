/* controller/cmd_trust.c: `drover trust HOST [--replace]`: fetch HOST's SSH host key, print its
 * SHA256 fingerprint and add it to the inventory's known_hosts.  The only verb that writes
 * known_hosts; a changed key is replaced only with --replace.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "controller/cmd.h"
#include "controller/transport/ssh.h"

int cmd_trust(struct fleet *f, int argc, char **argv)
{
    static const struct option opts[] = {
        { "replace", no_argument, NULL, 'r' },
        { NULL, 0, NULL, 0 },
    };
    bool replace = false;
    int c;
    optind = 0; /* 0: glibc re-initialises (main parsed with "+") */
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c != 'r')
            return EXIT_USAGE;
        replace = true;
    }
    if (optind >= argc) {
        log_error("usage: drover trust HOST... [--replace]");
        return EXIT_USAGE;
    }
    int ret = EXIT_OK;
    for (int i = optind; i < argc; i++) {
        int h = inventory_find_host(f->inv, argv[i]);
        if (h < 0) {
            log_error("no [host %s] in '%s'", argv[i], f->inv->path);
            return EXIT_USAGE;
        }
        const struct inv_host *host = &f->inv->hosts[h];
        if (host->local) {
            printf("%s: local (no SSH): nothing to trust\n", host->name);
            continue;
        }
        struct ssh_params p = {
            .name = host->name,
            .address = host->address,
            .port = host->port,
            .user = host->user,
            .known_hosts = f->inv->known_hosts,
            .identity = f->inv->identity,
            .connect_timeout_s = f->inv->connect_timeout_s,
            .ssh_config = f->inv->ssh_config,
            .port_set = host->port_set,
            .user_set = host->user_set,
        };
        char fp[SSH_FP_MAX], err[1024];
        int state;
        int r = ssh_trust_host(&p, replace, fp, &state, err, sizeof err);
        if (r < 0) {
            log_error("%s", err);
            ret = r == -EKEYREJECTED ? EXIT_HOSTKEY : EXIT_FAIL;
            continue;
        }
        printf("%s (%s:%d): %s %s %s\n", host->name, host->address, host->port, fp,
               state == 1 ? "already trusted in" : state == 2 ? "replaced the old key in" : "added to",
               f->inv->known_hosts);
    }
    return ret;
}
