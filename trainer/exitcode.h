/* trainer/exitcode.h: drover-train's exit codes.  The table (code, name, retry, text) is
 * common/trainexit.h's, shared with the agent's restart policy and the controller's verdicts;
 * docs/errors.md shows it.  Codes are never renumbered or reused. */
#ifndef DROVER_TRAINER_EXITCODE_H
#define DROVER_TRAINER_EXITCODE_H

#include "common/trainexit.h"

#endif
