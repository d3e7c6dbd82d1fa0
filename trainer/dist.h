/* trainer/dist.h: data-parallel plumbing between ranks over TCP (star topology through rank 0).
 *
 * Rank 0 listens on MASTER_ADDR:MASTER_PORT; ranks 1..W-1 connect (retrying until the deadline)
 * and introduce themselves with a hello frame carrying their rank and world size.  Every
 * collective is: each rank sends its buffer to rank 0, rank 0 reduces in rank order (so the
 * result is deterministic) and sends the result back.  Every blocking call has a deadline; a dead
 * or silent peer yields -ETIMEDOUT or -ECONNRESET, never a hang.  WORLD_SIZE 1 never opens a
 * socket (dist_open is not called).
 * Never: log above debug, or reorder a reduction.
 */
#ifndef DROVER_TRAINER_DIST_H
#define DROVER_TRAINER_DIST_H

#include <signal.h>
#include <stddef.h>

struct dist;

/* Connect the gang.  addr: IPv4/IPv6 literal or host name; port 1..65535; timeout_s bounds the
 * rendezvous and every later collective.  stop (NULL: none): the rendezvous gives up with
 * -ECANCELED within 0.1 s of *stop becoming non-zero (the SIGTERM flag: a gang stopped while it
 * forms must not wait out the timeout for a peer that the same stop killed before it could
 * catch the signal).  Returns 0 and *ret_d (free with dist_free), -EINVAL for bad arguments,
 * -ETIMEDOUT when the gang did not form in time, -errno otherwise. */
int dist_open(int rank, int world_size, const char *addr, int port, double timeout_s,
              const volatile sig_atomic_t *stop, struct dist **ret_d);
/* The same with a rendezvous token: the gang's identity (dist_open takes $DROVER_RDZV, which
 * the agent sets to the release id).  The hello and its answer carry a hash of it, so a rank of
 * another release never joins this gang (a new rank 0 refuses old ranks; a new rank refused by
 * an old rank 0 keeps trying until the deadline).  NULL or "" = no token (hash 0). */
int dist_open_rdzv(int rank, int world_size, const char *addr, int port, double timeout_s,
                   const char *rdzv, const volatile sig_atomic_t *stop, struct dist **ret_d);
/* Accepts NULL.  Closes every socket. */
void dist_free(struct dist *d);

int dist_rank(const struct dist *d);
int dist_world_size(const struct dist *d);

/* In place: buf[n] becomes the element-wise sum over ranks (rank order, float accumulation).
 * -ETIMEDOUT / -ECONNRESET / -EPROTO on a lost or confused peer. */
int dist_allreduce_sum_f32(struct dist *d, float *buf, size_t n);
/* Copy rank 0's buf[len] to every rank (e.g. an ncclUniqueId). */
int dist_broadcast(struct dist *d, void *buf, size_t len);
/* All ranks reach this point; same errors. */
int dist_barrier(struct dist *d);

#endif
