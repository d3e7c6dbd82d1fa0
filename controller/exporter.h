/* controller/exporter.h: `drover exporter --listen ADDR`: the fleet as Prometheus metrics over
 * HTTP (/metrics), fed by the same per-host watch streams as `drover top` (top/top_poll.c).
 * Names follow Prometheus's conventions (docs/controller.md, "Prometheus"): the job label is
 * `drover_job` (Prometheus keeps `job` for the scrape target), base units (`_seconds`, `_bytes`,
 * tokens per second), `_total` for counters, `drover_build_info`, `process_start_time_seconds`;
 * every per-container series carries host and vmid, every per-rank one rank and gpu (the index
 * from the job's `gpus`) so they join with DCGM's series.
 */
#ifndef DROVER_EXPORTER_H
#define DROVER_EXPORTER_H

#include <stdint.h>
#include <stdio.h>

#include "controller/inventory.h"
#include "controller/top/top_model.h"

/* The exposition for snapshot s at monotonic time now.  start_wall: the exporter's start (epoch
 * seconds); scrapes: the count of /metrics answers so far.  Pure: no I/O but out. */
void exporter_render(const struct top_snapshot *s, const struct inventory *inv, double now,
                     double start_wall, uint64_t scrapes, FILE *out);

/* Parse "HOST:PORT", "[V6]:PORT" or ":PORT" (all interfaces) into host (buf) and port.  -EINVAL. */
int exporter_parse_listen(const char *spec, char *ret_host, size_t host_sz, int *ret_port);

#endif
