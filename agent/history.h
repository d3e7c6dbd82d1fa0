/* agent/history.h: the job's deploy history kept by every agent of the gang (issue 11: the fleet
 * holds the truth).  drover appends each outcome it records (deploy promoted/reverted/aborted,
 * rollback, ...) to every container of the job; `drover history` reads them back from the agents
 * and merges them with its own state_dir, so two operators' histories agree.
 *
 * File ROOT/jobs/<job>/history.jsonl: one line per record, the controller's own JSON line
 * (controller/deploy/state.c owns its fields; here only what the agent checks: a JSON object
 * with v 1, this job, a finite time).  Appended under an flock of ROOT/jobs/<job>/history.lock;
 * past HISTORY_KEEP lines the oldest are dropped (rewritten atomically).
 */
#ifndef DROVER_AGENT_HISTORY_H
#define DROVER_AGENT_HISTORY_H

#include <stddef.h>
#include <stdio.h>

#define HISTORY_LINE_MAX 4096 /* bytes of one record, without the newline */
#define HISTORY_KEEP 500      /* records kept per job */

/* Is line (len bytes, no newline, no NUL needed) a history record of job?  0 yes; -E2BIG over
 * HISTORY_LINE_MAX; -EINVAL not a JSON object with "v":1, "job" == job and a finite "time", or
 * it holds a newline or a NUL. */
int history_line_check(const char *line, size_t len, const char *job);

/* Append line to job's history under root (checked first: -EINVAL/-E2BIG, nothing written). */
int history_add(const char *root, const char *job, const char *line);

/* Write job's records, oldest first, one per line, to out (none: nothing).  -errno. */
int history_dump(const char *root, const char *job, FILE *out);

#endif
