/* controller/cmd_trust.c: `drover trust HOST... [--replace]` or `drover trust HOST --fingerprint
 * SHA256:... [--replace]`: fetch HOST's SSH host key, print its SHA256 fingerprint and add it to
 * the inventory's known_hosts.  The only verb that writes known_hosts; a changed key is replaced
 * only with --replace; with --fingerprint only a key with that fingerprint is ever written.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "controller/cli.h"
#include "controller/cmd.h"
#include "controller/verbs.h"
#include "controller/transport/ssh.h"

int cmd_trust(struct fleet *f, int argc, char **argv)
{
    static const struct option opts[] = {
        { "replace", no_argument, NULL, 'r' },
        { "output", required_argument, NULL, 'o' },
        { "fingerprint", required_argument, NULL, 'f' },
        { NULL, 0, NULL, 0 },
    };
    bool replace = false, json = false;
    const char *expect = NULL;
    int c;
    optind = 0; /* 0: glibc re-initialises (main parsed with "+") */
    while ((c = cli_getopt(argc, argv, "o:", opts)) != -1) {
        if (c == 'r')
            replace = true;
        else if (c == 'o') { /* `-o yaml` printed the usage line alone */
            int k;
            if (cli_output(argv, optarg, cli_output_json, &k) != EXIT_OK)
                return EXIT_USAGE;
            json = true;
        } else if (c == 'f')
            expect = optarg;
        else
            return verb_usage_error(argv[0], NULL);
    }
    if (optind >= argc || (expect && argc - optind != 1))
        return verb_usage_error(argv[0], optind < argc ? argv[optind + 1] : NULL); /* one host per fingerprint */
    if (expect && !ssh_fingerprint_is_valid(expect)) {
        log_error("--fingerprint '%s' is not a SHA256 fingerprint (SHA256: and 43 base64 "
                  "characters, as ssh-keygen -lf prints it)", expect);
        return EXIT_USAGE;
    }
    cmd_result_want(f, json, "trust", NULL, 0);
    if (f->args_only) /* controller/cli.c: arguments checked, no inventory yet */
        return EXIT_OK;
    /* -o json: {"v":1,"kind":"trust","hosts":[{"host","address","port","fingerprint","result",
     * "error"}]} on stdout (docs/protocol.md, "Result document"). */
    for (int i = optind; i < argc; i++)
        if (inventory_find_host(f->inv, argv[i]) < 0) {
            char why[1200];
            log_error("%s", inventory_no_host(f->inv, argv[i], why, sizeof why));
            return EXIT_USAGE;
        }
    json_t *hosts = json ? json_array() : NULL;
    int ret = EXIT_OK;
    for (int i = optind; i < argc; i++) {
        int h = inventory_find_host(f->inv, argv[i]); /* checked above */
        const struct inv_host *host = &f->inv->hosts[h];
        if (host->local) {
            if (json)
                json_array_append_new(hosts, json_pack("{s:s,s:n,s:n,s:n,s:s,s:n}", "host", host->name,
                                                       "address", "port", "fingerprint", "result",
                                                       "local", "error"));
            else
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
        char fp[SSH_FP_MAX] = "", err[1024] = "";
        int state;
        int r = ssh_trust_host(&p, replace, expect, fp, &state, err, sizeof err);
        if (json)
            json_array_append_new(
                hosts, json_pack("{s:s,s:s,s:i,s:s,s:s,s:s?}", "host", host->name, "address",
                                 host->address, "port", host->port, "fingerprint", fp, "result",
                                 r < 0 ? (r == -EKEYREJECTED ? "changed" : "failed")
                                 : state == 1 ? "already-trusted"
                                 : state == 2 ? "replaced"
                                              : "added",
                                 "error", r < 0 ? err : NULL));
        if (r < 0) {
            log_error("%s", err);
            /* a changed key, or a known_hosts line for the host that libssh cannot read */
            ret = r == -EKEYREJECTED || r == -EBADMSG ? EXIT_HOSTKEY : EXIT_FAIL;
            continue;
        }
        if (!json)
            printf("%s (%s:%d): %s %s %s\n", host->name, host->address, host->port, fp,
               state == 1 ? "already trusted in" : state == 2 ? "replaced the old key in" : "added to",
               f->inv->known_hosts);
    }
    if (json) {
        json_t *root = json_pack("{s:i,s:s,s:s,s:o,s:i}", "v", 1, "kind", "trust", "known_hosts",
                                 f->inv->known_hosts, "hosts", hosts, "exit", ret);
        char *t = root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        if (t)
            puts(t);
        free(t);
        json_decref(root);
    }
    return ret;
}
