/* agent/proctree.h: ending a process tree whole, setsid() escapes and double forks included: a
 * gang's workers (supervise.c), a preflight's command (main.c).  Two ways, the first where it can
 * be had: a cgroup (v2, else v1's freezer hierarchy) that the tree's first process enters before
 * it execs, so that everything it forks is in it; else the descendants of a subreaper
 * (prctl(PR_SET_CHILD_SUBREAPER)), whose orphans come back to it instead of init, found by their
 * parent links in /proc.  Not thread-safe: the cgroup mode is process-wide.
 */
#ifndef DROVER_AGENT_PROCTREE_H
#define DROVER_AGENT_PROCTREE_H

#include <stdbool.h>
#include <stddef.h>

/* Which cgroup a gang or preflight gets (drover-agent --cgroup): auto = v2 where mounted, else
 * v1's freezer hierarchy, else none; v2, v1: only that one; none: no cgroup. */
enum gang_cgroup_mode { GANG_CGROUP_AUTO, GANG_CGROUP_V2, GANG_CGROUP_V1, GANG_CGROUP_NONE };
void gang_set_cgroup_mode(enum gang_cgroup_mode m);
int gang_cgroup_mode_parse(const char *s, enum gang_cgroup_mode *m); /* -EINVAL: unknown */

/* Create the cgroup `name` next to this process's own and write its directory to ret_path.
 * -ENOENT: no hierarchy to use (mode none, or none mounted); -ENAMETOOLONG; else mkdir's
 * -errno.  ret_path is untouched on failure.  The caller rmdir()s it once it is empty. */
int proctree_cgroup_create(const char *name, char *ret_path, size_t size);

/* Move the calling process into the cgroup whose cgroup.procs file is `procs` (a path made
 * before fork(): this only opens and writes, so a forked child may call it).  -errno. */
int proctree_cgroup_join(const char *procs);

/* Send sig to every process in cgroup directory cg ("" : nothing).  SIGKILL uses cgroup.kill
 * where the kernel has it (v2, 5.14+), or freezes a v1 freezer cgroup around the kills, so that
 * nothing forks past it. */
void proctree_cgroup_signal(const char *cg, int sig);

/* How many processes in cgroup directory cg are not zombies (0 for ""). */
int proctree_cgroup_live(const char *cg);

/* Send sig (0: none, only count) to every descendant of this process that is not a zombie, found
 * by parent links in /proc; with this process a subreaper, that includes descendants whose
 * parent died (a double fork).  Returns how many there were; -errno when /proc can't be read. */
int proctree_descendants_signal(int sig);

#endif
