/* common/event.h: one line of the agent's event journal, version 1 (docs/protocol.md, "Event
 * journal").  The agent appends lines to ROOT/events.jsonl (agent/state.c) and prints them with
 * `drover-agent events --json`; the dashboard reads them (controller/top/).  Only this file (with
 * event.c) knows the format:
 *
 *   {"detail":"rank 0 exited 1","job":"train","kind":"crash","release":"<id>","seq":41,
 *    "ts":1764552000.25,"v":1}
 *
 * seq increases by one per line over the journal's life (rotation included); ts is wall-clock
 * epoch seconds (for people; never for deadlines).  A line without "v" (agents before v1) reads
 * as version 1.
 */
#ifndef DROVER_EVENT_H
#define DROVER_EVENT_H

#include <stddef.h>
#include <stdint.h>

#include "common/manifest.h"
#include "common/status.h"

#define EVENT_VERSION 1
#define EVENT_LINE_MAX 2048  /* bytes of a line the writer emits, newline included */
#define EVENT_PARSE_MAX 4096 /* bytes of a line the reader accepts (room for newer writers) */
#define EVENT_KIND_MAX 32
#define EVENT_DETAIL_MAX 256 /* the reader keeps this much of detail (cut, not refused) */

struct event {
    int64_t seq;
    double ts;                         /* epoch seconds */
    char job[JOB_NAME_MAX];            /* "" for agent-wide events */
    char kind[EVENT_KIND_MAX];         /* "activate", "crash", "revert", ... */
    char release[RELEASE_ID_LEN + 1];  /* "" when none */
    char detail[EVENT_DETAIL_MAX];
};

/* Format one line (no newline) into buf.  NULL job/release/detail are written as "".  Returns
 * its length; -E2BIG when it would not fit in buf or in EVENT_LINE_MAX - 1, -ENOMEM. */
int event_format(int64_t seq, double ts, const char *job, const char *kind, const char *release,
                 const char *detail, char *buf, size_t buf_sz);

/* Parse one line (len bytes, no newline needed).  -E2BIG over EVENT_PARSE_MAX, -EINVAL not an
 * event object (seq integer, ts number and kind string required; job, release, detail strings
 * when present; duplicate keys refused), -EPROTONOSUPPORT another version.  Over-long strings
 * are cut.  ret written only on success. */
int event_parse(const char *line, size_t len, struct event *ret);

#endif
