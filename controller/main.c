/* controller/main.c: `drover`, the controller the operator runs: controller/cli.c parses the global
 * options, loads the inventory and hands over to one verb.  Results go to stdout, diagnostics and
 * progress to stderr.  The controller talks to hosts over SSH (or runs pct locally) and to
 * containers only through pct and the agent CLI; it never talks to the Proxmox API and never
 * writes into a container's filesystem from the host side.
 */
#include <signal.h>
#include <stdio.h>

#include "common/log.h"
#include "controller/cli.h"
#include "controller/transport/conn.h"

#ifndef DROVER_VERSION
#define DROVER_VERSION "unknown"
#endif

int main(int argc, char **argv)
{
    log_init("drover");
    /* Results go to stdout a line at a time, as on a terminal: in a pipe (`drover ... 2>&1 |
     * tee`) a block-buffered stdout came out after the stderr lines written later (the notes
     * under `status`'s table above it, a deploy's verdict after the rollback it announced).
     * The logger flushes stdout too (cli_main), which covers partial lines. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* A host or stream that goes away must show up as an error return, not kill the process. */
    signal(SIGPIPE, SIG_IGN);
    /* Ctrl-C where a verb has no handler: the local commands (groups of their own) end too */
    conn_exit_signals_init();
    return cli_main(argc, argv, DROVER_VERSION);
}
