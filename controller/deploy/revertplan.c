/* controller/deploy/revertplan.c: is the job already back on its good release everywhere
 * (every agent went back by itself), so that a revert leaves its gangs running? */
#include "controller/deploy/revertplan.h"

#include <string.h>

bool revertplan_is_back(const struct job_status *js, const char *good)
{
    if (!js || !good || !good[0])
        return false;
    if (strcmp(js->current, good) != 0 || strcmp(js->good, good) != 0)
        return false;
    /* the good release with another spec than its good one (a failed spec change): not back */
    if (strcmp(js->spec_digest, js->good_spec_digest) != 0)
        return false;
    if (js->release[0] && strcmp(js->release, good) != 0)
        return false;
    return js->state == GANG_STARTING || js->state == GANG_RUNNING || js->state == GANG_REVERTED;
}

bool revertplan_all_back(const struct job_status *const js[], const bool ct_stopped[], int ncts,
                         const char *good, bool back[])
{
    bool all = ncts > 0 && good && good[0];
    for (int i = 0; i < ncts; i++) {
        back[i] = !(ct_stopped && ct_stopped[i]) && revertplan_is_back(js[i], good);
        all = all && back[i];
    }
    return all;
}
