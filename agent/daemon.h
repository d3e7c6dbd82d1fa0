/* agent/daemon.h: the agent daemon: control socket, gang supervision per job, crash-loop
 * rollback, probation deadline, status stream, state.json/events.jsonl upkeep. */
#ifndef DROVER_AGENT_DAEMON_H
#define DROVER_AGENT_DAEMON_H

#include <limits.h>
#include <stdbool.h>

#include "agent/supervise.h"

struct daemon_opts {
    char root[PATH_MAX - 512];
    char socket[108];
    char pidfile[PATH_MAX];
    bool detach;
    int keep_releases;          /* GC keeps this many newest releases (plus protected ones) */
    struct crash_policy policy;
    enum gang_cgroup_mode cgroup; /* --cgroup: the gangs' cgroups (agent/supervise.h) */
};

void daemon_opts_default(struct daemon_opts *o);

/* Run the daemon until SIGTERM/SIGINT.  Refuses (AGENT_EXIT_BUSY) when another daemon holds the
 * pidfile lock.  With detach, forks into the background and returns AGENT_EXIT_OK in the
 * parent once the daemon listens.  Returns an agent_exit code. */
int daemon_run(const struct daemon_opts *o);

#endif
