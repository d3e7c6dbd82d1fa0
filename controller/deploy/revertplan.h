/* controller/deploy/revertplan.h: before a revert, is the job already back on its good release
 * everywhere?  Pure: no I/O, no logging.
 *
 * An agent goes back to the good release by itself (state "reverted") when the release on
 * probation fails in a way it knows to be hopeless (a data file that is missing: exit 4), and
 * when every container's agent did so the good gang forms and trains on its own.  The revert
 * that follows the failed probation must not stop that gang and start it again (steps lost, and
 * each agent journalled `reverted from <good>`, the good release "reverted" to itself): it
 * checks that every container is on the good pair and leaves the gangs running.  When only some
 * are back the gang cannot form without the others, so nothing is lost by the full two-phase
 * revert (a new rendezvous generation for all), which stays the rule then.
 */
#ifndef DROVER_CONTROLLER_REVERTPLAN_H
#define DROVER_CONTROLLER_REVERTPLAN_H

#include <stdbool.h>

#include "common/status.h"

/* Is the job (js: its part of the container's status; NULL: unknown there) back on the good
 * release `good` by itself: current and the good release are `good`, with its good job spec,
 * and a gang of it is starting or running (states starting, running, reverted; the processes'
 * release, when said, is `good` too)?  Not for a gang that is stopping, stopped, failed or
 * backing off: the revert must start it. */
bool revertplan_is_back(const struct job_status *js, const char *good);

/* Every one of the ncts containers back (revertplan_is_back; js[i] NULL: not known, so not
 * back)?  back[i] says which are; a container found stopped (ct_stopped[i]) is never back.  false
 * for ncts < 1 or no good release. */
bool revertplan_all_back(const struct job_status *const js[], const bool ct_stopped[], int ncts,
                         const char *good, bool back[]);

#endif
