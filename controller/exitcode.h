/* controller/exitcode.h: `drover`'s exit codes, the one table (docs/errors.md, "drover").
 *
 * Each program has its own codes: drover's 7 is "held", drover-agent's 7 is "busy"
 * (common/agentcli.h), drover-train's 7 is "diverged" (common/trainexit.h).  drover never exits
 * with another program's code; it reports theirs as "drover-agent ... failed (exit N)".
 *
 * DROVER_EXITS rows: enum name, code, name (the word of docs/errors.md's name column and of the
 * `outcome` member of `-o json` results, docs/protocol.md), a few words for `drover help`.
 * Codes are never renumbered or reused; test-controller-exitcode checks the table against
 * docs/errors.md both ways.
 */
#ifndef DROVER_EXITCODE_H
#define DROVER_EXITCODE_H

#include <stdio.h>

#define DROVER_EXITS(X)                                                                                  \
    /* promoted, already current, or a verb's success */                                                \
    X(EXIT_OK, 0, "ok", "ok")                                                                            \
    /* failed before anything was switched (or a verb's plain failure) */                                \
    X(EXIT_FAIL, 1, "failed", "failed (nothing switched)")                                                \
    /* bad command line or inventory */                                                                  \
    X(EXIT_USAGE, 2, "usage", "usage or inventory error")                                                \
    /* release failed probation; the last good release is back and healthy */                           \
    X(EXIT_REVERTED, 3, "reverted", "reverted to the last good release")                                 \
    /* release failed and the revert failed or did not recover: act now */                               \
    X(EXIT_REVERT_FAILED, 4, "revert-failed", "revert failed")                                           \
    /* a host key is unknown or changed: nothing was touched */                                          \
    X(EXIT_HOSTKEY, 5, "hostkey", "host key unknown or changed")                                         \
    /* release failed probation, auto_revert off: left running */                                        \
    X(EXIT_NOT_REVERTED, 6, "not-reverted", "failed without auto_revert")                                \
    /* inconclusive or no data, on_inconclusive = hold: left running, unpromoted, for `drover       \
     * promote` or `drover revert` */                                                                    \
    X(EXIT_HELD, 7, "held", "held on an inconclusive verdict")                                           \
    /* a container's GPU environment is broken: nothing reverted (the release is not to blame);        \
     * fix it (drover-agent gpu-check) */                                                                \
    X(EXIT_ENV_FAULT, 8, "env-fault", "GPU environment fault")                                          \
    /* another operator took over this deploy's lease (it went unrenewed for a whole TTL) while it \
     * watched: this deploy decided nothing after that (no promote, no revert) */                     \
    X(EXIT_TAKEN_OVER, 9, "taken-over", "deploy lease taken over by another operator")

#define DROVER_EXIT_ENUM(id, code, name, words) id = code,
enum drover_exit { DROVER_EXITS(DROVER_EXIT_ENUM) };
#undef DROVER_EXIT_ENUM

/* The name of code ("held"); NULL for a code that is not drover's. */
const char *drover_exit_name(int code);

/* "Exit codes: 0 ok, 1 failed, nothing switched, ..." for `drover help`, from the table. */
void drover_exit_usage(FILE *fp);

#endif
