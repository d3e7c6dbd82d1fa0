/* agent/lease.h: the deploy lease of one job in this container (issue 11: the fleet holds the
 * truth, not one operator's machine).  A controller takes the lease of the job in every
 * container of the gang before it deploys or rolls back, renews it at each phase and releases
 * it at the end; a second operator's deploy is refused naming the holder and the lease's age;
 * a lease past its TTL (a controller that died) can be taken over.
 *
 * File ROOT/leases/<job>.json, read-modified-written under an flock of ROOT/leases/<job>.lock.
 * Times are CLOCK_MONOTONIC with the boot id (comparable between processes of one boot; a
 * lease from an earlier boot is expired): no wall clock.  The decision is lease_decide(), pure.
 */
#ifndef DROVER_AGENT_LEASE_H
#define DROVER_AGENT_LEASE_H

#include <stdbool.h>
#include <stddef.h>

#define LEASE_HOLDER_MAX 128
#define LEASE_TTL_MAX (7 * 86400.0)

struct lease {
    char holder[LEASE_HOLDER_MAX];
    double taken, renewed, ttl_s; /* monotonic seconds */
    char boot_id[40];
};

enum lease_verdict {
    LEASE_TAKE,     /* free: take it */
    LEASE_RENEW,    /* ours: renew it */
    LEASE_TAKEOVER, /* someone else's, expired: take it over */
    LEASE_REFUSE,   /* someone else's and alive */
    LEASE_TAKEOVER_DEAD, /* someone else's, not expired, but the taker says that holder's process
                            is gone (`lease take --take-over DEAD`): take it over */
};

/* What `lease take` by holder does with the current lease cur (NULL: none) at monotonic time now
 * in boot `boot`.  dead (NULL: none): the holder the taker found no longer running on its own
 * host (only the controller that wrote a holder can tell; the agent cannot see that host): a lease
 * held by exactly that holder is taken over at once, any other holder is judged as always. */
enum lease_verdict lease_decide(const struct lease *cur, const char *holder, double now, const char *boot,
                                const char *dead);

/* JSON text <-> lease (at most 4 KiB).  lease_parse: -EINVAL malformed; ret written on success. */
int lease_format(const struct lease *l, char **ret_text);
int lease_parse(const char *text, size_t len, struct lease *ret);

/* The verbs (drover-agent lease take|release JOB HOLDER [TTL_S] [--take-over DEAD]) on the store
 * at root.  take: 0 taken/renewed, 1 taken over from an expired holder, or from dead (see
 * lease_decide; ret_takeover, when not NULL, gets one line: "deploy lease taken over by H from P
 * (idle N s, past its N s TTL)", or "... from P (no longer running on its host, said H)"); a line on stdout
 * says which; -EBUSY held by another (a line on stderr names the holder, its age and when it
 * expires); -ENOSPC/-EDQUOT when the lease file cannot be written (the container's disk full:
 * nothing taken, and the caller must not act as if it held the job here); any other -errno.
 * release: 0, or -EBUSY when another holds it (nothing changed), or -errno.  Every failure is
 * said on stderr here (the file and the errno's words), never by the caller. */
int lease_take(const char *root, const char *job, const char *holder, double ttl_s, const char *dead,
               char *ret_takeover, size_t takeover_sz);
int lease_release(const char *root, const char *job, const char *holder);
/* The job's lease as it stands, for the status document: its holder into ret_holder[sz] and the
 * seconds until it expires into *ret_left when one is held and not expired at monotonic time now
 * (this boot); else "" and -1.  Reads the file without its lock (it is replaced whole, never
 * written in place); changes nothing and says nothing. */
void lease_peek(const char *root, const char *job, double now, char *ret_holder, size_t sz, double *ret_left);

/* Does any job hold a live deploy lease in the store at root (one lease_take would refuse)?  A
 * lease file that cannot be read, or a leases directory that cannot be listed, counts as held. */
bool lease_any_held(const char *root);

#endif
