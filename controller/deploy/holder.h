/* controller/deploy/holder.h: the name a drover gives itself as the holder of a job's deploy
 * lease (agent/lease.h keeps it as opaque text), and the decision whether the holder named by a
 * refusal is a drover of this machine that no longer runs (killed -9, its terminal gone), so its
 * lease may be taken over at once instead of after lease_ttl.
 *
 *     user@host/pid-N/boot-B/start-S
 *
 * B: the first 8 hex digits of the kernel's boot id (of the boot id and the PID namespace when
 * drover runs in another than the init one: holder_boot_tag); S: the process's start time (clock ticks
 * since boot, /proc/<pid>/stat field 22).  Together with the pid they name one process of one
 * boot: a pid reused since, or the same pid after a reboot, is not mistaken for the holder.  An
 * older drover wrote user@host/pid-N: still understood, judged by the pid alone (a live pid N is
 * taken for the holder).  Only the machine the holder names can judge it; a holder of another
 * host, or of another boot of a host of this name, is never judged gone here (its lease frees
 * itself after lease_ttl, as before).
 */
#ifndef DROVER_CONTROLLER_HOLDER_H
#define DROVER_CONTROLLER_HOLDER_H

#include <stdbool.h>
#include <stddef.h>

#define HOLDER_MAX 128 /* as agent/lease.h's LEASE_HOLDER_MAX, NUL included */

struct holder {
    char host[HOLDER_MAX];
    long pid;
    char boot[9];             /* "" in an older drover's holder */
    unsigned long long start; /* meaningful when has_start */
    bool has_start;
};

/* The inode of the init PID namespace (/proc/self/ns/pid outside any container). */
#define HOLDER_INIT_PIDNS 0xEFFFFFFCULL

/* The boot tag B of a holder: boot (8 hex digits of the boot id) as it is in the init PID
 * namespace (pidns HOLDER_INIT_PIDNS, or 0: unknown); in another (a drover in a container,
 * `docker run --network host` keeps the host's name) 8 hex digits of both, never the plain
 * boot's.  A pid means nothing across PID namespaces: a drover in one container found another
 * container's live holder missing from its /proc and took its lease over mid-probation; with
 * the tag they name different "boots", which are never judged here. */
void holder_boot_tag(const char *boot, unsigned long long pidns, char out[9]);

/* This process's holder into buf (sz >= 40 for the full form; user and host shortened so that it
 * fits in sz and in HOLDER_MAX).  Leaves boot and start out when they cannot be read or do not
 * fit (an older drover's form). */
void holder_self(char *buf, size_t sz);

/* Parse a holder written by holder_self() or an older drover.  -EINVAL for anything else (another
 * tool's name: never judged); ret written on success only. */
int holder_parse(const char *s, struct holder *ret);

enum holder_fate {
    HOLDER_UNKNOWN, /* another host, another boot, or not ours to read: judged as before */
    HOLDER_RUNS,    /* the very process runs here */
    HOLDER_GONE,    /* named this host and boot, and no such process runs: its lease is free */
};

/* Pure: h judged from here (me: this process's own parsed holder) and what a probe of h->pid
 * found: probe 0 a process runs with start time `start` (has_start false when unread), -ESRCH
 * none (or a zombie), anything else unknown. */
enum holder_fate holder_judge(const struct holder *h, const struct holder *me, int probe,
                              unsigned long long start, bool has_start);

/* holder_judge() of the holder text `other` against self (holder_self()'s text), probing its pid
 * in /proc (kill(pid, 0) where /proc cannot say).  Reads the system; no side effects. */
enum holder_fate holder_fate_here(const char *other, const char *self);

#endif
