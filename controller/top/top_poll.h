/* controller/top/top_poll.h: the dashboard's data feed (top_poll.c): one background thread per
 * host, one SSH session each, one long-lived `drover-agent watch --json` channel per container
 * multiplexed on it; snapshots published under a mutex.  A slow or dead host only ever stalls its
 * own thread.
 */
#ifndef DROVER_TOP_POLL_H
#define DROVER_TOP_POLL_H

#include <stdbool.h>
#include <stddef.h>

#include "controller/inventory.h"
#include "controller/top/top_model.h"

struct top_poll; /* free with top_poll_stop() */

/* Start one thread per host of inv.  Never blocks on a host.  -ENOMEM, -errno from
 * pthread_create. */
int top_poll_start(const struct inventory *inv, double interval_s, struct top_poll **ret_p);
/* Ask threads to stop; waits at most wait_s for them, then leaves the stuck ones detached
 * (they hold only their own memory).  Accepts NULL. */
void top_poll_stop(struct top_poll *p, double wait_s);
/* Change the refresh interval (streams restart with it). */
void top_poll_set_interval(struct top_poll *p, double interval_s);
/* Copy the current snapshot into dst (allocating dst->cts on first use). */
int top_poll_snapshot(struct top_poll *p, struct top_snapshot *dst);

/* Ask for container ct's newest `max` events (fetched by its host's thread).  Then
 * top_poll_events() returns 1 with the lines once there, 0 while pending, -errno on failure
 * (message in err). */
void top_poll_request_events(struct top_poll *p, int ct);
int top_poll_events(struct top_poll *p, char *text, size_t text_sz, char *err, size_t err_sz);
/* Bumps each time something new was published. */
int top_poll_seq(struct top_poll *p);
/* Wait until new data was published or ms passed. */
void top_poll_wait(struct top_poll *p, int ms);

#endif
