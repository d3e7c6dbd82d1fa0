/* controller/transport/fanout.h: work across hosts at once, bounded by [drover] parallel.
 * Each host's connection stays single-owner: a worker only ever touches its own host's conn, so
 * nothing in struct fleet is shared between threads except read-only inventory data.
 */
#ifndef DROVER_FANOUT_H
#define DROVER_FANOUT_H

#include <stdbool.h>

#include "controller/transport/fleet.h"

/* Run fn(i, ctx) for i in [0, n) on at most max_parallel threads (1: in this thread, in order).
 * Returns when every call has returned.  fn must only touch what item i owns. */
void fanout_run(int n, int max_parallel, void (*fn)(int i, void *ctx), void *ctx);

/* Open the connections of every host with need[host] true, all at once (a dead host costs one
 * connect timeout in total, not one per host).  Failures are remembered in f as fleet_conn()
 * does and logged once each, in inventory order, from this thread.  Returns how many failed. */
int fleet_connect_all(struct fleet *f, const bool need[INV_MAX_HOSTS]);

/* need[] for the hosts of job (NULL: every job's). */
void fleet_hosts_of(const struct inventory *inv, const struct inv_job *job, bool need[INV_MAX_HOSTS]);
/* need[] for the hosts of the jobs named jobs[0..njobs) (a name of no job adds nothing: the
 * verb reports it later): the hosts a verb over several jobs connects to at once. */
void fleet_hosts_of_jobs(const struct inventory *inv, const char *const *jobs, int njobs, bool need[INV_MAX_HOSTS]);

#endif
