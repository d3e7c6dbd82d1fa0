/* tests/unit/capture.h: run a controller verb with its stdout and stderr captured into files,
 * for the unit tests that check what a verb says (test-controller-plan, test-controller-status).
 * Header-only: each test program includes it once. */
#ifndef DROVER_TESTS_UNIT_CAPTURE_H
#define DROVER_TESTS_UNIT_CAPTURE_H

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "controller/inventory.h"
#include "controller/transport/fleet.h"

/* Run verb on inv with stdout and stderr into the files out and err; its exit code. */
static int capture_verb(int (*verb)(struct fleet *, int, char **), const struct inventory *inv, char **argv,
                        int argc, const char *out, const char *err)
{
    struct fleet f;
    fleet_init(&f, inv, NULL);
    fflush(stdout);
    fflush(stderr);
    int save_out = dup(STDOUT_FILENO), save_err = dup(STDERR_FILENO);
    int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fo >= 0 && fe >= 0);
    dup2(fo, STDOUT_FILENO);
    dup2(fe, STDERR_FILENO);
    close(fo);
    close(fe);
    int code = verb(&f, argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(save_out, STDOUT_FILENO);
    dup2(save_err, STDERR_FILENO);
    close(save_out);
    close(save_err);
    fleet_done(&f);
    return code;
}

#endif
