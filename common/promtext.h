/* common/promtext.h: the Prometheus text exposition format (0.0.4) as both drover-agent metrics
 * (textfile collector) and drover exporter (/metrics) write it: family headers, escaped label
 * values, and numbers in their shortest form that reads back exactly (2.995, never
 * 2.9950000000000001).  Writes to a FILE; no allocation.
 */
#ifndef DROVER_PROMTEXT_H
#define DROVER_PROMTEXT_H

#include <stddef.h>
#include <stdio.h>

/* "# HELP name help\n# TYPE name type\n". */
void prom_head(FILE *out, const char *name, const char *type, const char *help);

/* A label value with backslash, double quote and newline escaped. */
void prom_label(FILE *out, const char *v);

/* v as the format wants it (NaN, +Inf, -Inf, integers without a fraction, else the shortest
 * %.Ng that parses back to v), into buf; returns buf. */
const char *prom_number(double v, char *buf, size_t buf_sz);

/* One sample: name{labels} value\n.  labels: NULL-terminated array of name, value pairs (values
 * escaped here); NULL or {NULL} for none. */
void prom_sample(FILE *out, const char *name, const char *const *labels, double v);

#endif
