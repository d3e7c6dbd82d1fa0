/* agent/metrics.h: the agent's status as Prometheus text exposition format 0.0.4
 * (https://prometheus.io/docs/instrumenting/exposition_formats/), for node_exporter's textfile
 * collector or any scraper: `drover-agent metrics > /var/lib/node_exporter/drover.prom`.
 * Metric names follow Prometheus conventions (base units, _seconds, _bytes, _ratio). */
#ifndef DROVER_AGENT_METRICS_H
#define DROVER_AGENT_METRICS_H

#include <stdio.h>

#include "common/status.h"

/* Write every metric of st to out.  Returns 0, or -EIO when out reports a write error. */
int metrics_write(const struct agent_status *st, FILE *out);

#endif
