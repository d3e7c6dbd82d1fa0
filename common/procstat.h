/* common/procstat.h: what drover reads of /proc/<pid>/stat (the agent: is a gang's process alive,
 * of which group, started when, whose child; the controller: is the drover holding a deploy lease still the
 * process it names).  One parser for the one format, fuzzed (tests/fuzz/fuzz-procstat.c). */
#ifndef DROVER_PROCSTAT_H
#define DROVER_PROCSTAT_H

struct proc_stat {
    char state;               /* field 3: R, S, D, Z, X, ... */
    long ppid;                /* field 4: the parent (a preflight's escaped descendants) */
    long pgrp;                /* field 5 */
    unsigned long long start; /* field 22: clock ticks since boot */
};

/* Parse a /proc/<pid>/stat text: "pid (comm) S ppid pgrp ...", comm holding anything
 * (spaces, parentheses), so fields count from the last ')'.  -EINVAL when malformed; ret
 * written on success only. */
int proc_stat_parse(const char *text, struct proc_stat *ret);

/* Read and parse /proc/<pid>/stat.  -ESRCH when no such process (a zombie is still one: see
 * state), -EINVAL when unreadable as a stat text, another -errno when /proc cannot be read. */
int proc_stat_read(long pid, struct proc_stat *ret);

#endif
