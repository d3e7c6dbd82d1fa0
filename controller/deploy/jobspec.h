/* controller/deploy/jobspec.h: the job spec a deploy launches in each container, as its digest
 * (common/specdigest.h), and how it compares with what a container's agent reports running.
 *
 * A job runs a (release, spec) pair: the survey counts a container current only when the
 * release id AND the spec digest match, so editing the inventory (nproc_per_node, gpus, env,
 * command, arg, master_addr, master_port, the containers) and deploying the same release is a
 * relaunch on probation, not "nothing to do".  Pure: no I/O, no logging.
 */
#ifndef DROVER_CONTROLLER_JOBSPEC_H
#define DROVER_CONTROLLER_JOBSPEC_H

#include <stdbool.h>
#include <stddef.h>

#include "common/specdigest.h"
#include "common/status.h"
#include "controller/inventory.h"

/* The digest of the spec `activate` sends container node_rank of job j (the same values as the
 * activation's --nnodes ... -- COMMAND ARGS).  -errno from spec_digest_compute(). */
int jobspec_digest(const struct inv_job *j, int node_rank, struct spec_digest *ret);

/* Does js (the job's part of a container's status) run want as its current spec? */
bool jobspec_is_current(const struct job_status *js, const struct spec_digest *want);

/* Is the job settled on (id, want): id current and promoted, want its current and its good
 * spec?  What a deploy of id with want calls "already current" (when the gang runs). */
bool jobspec_is_settled(const struct job_status *js, const char *id, const struct spec_digest *want);

/* Is (id, want) the job's good pair there: id its good release, promoted with want as its spec?
 * Whether or not it runs now (stopped, failed, or another release on probation). */
bool jobspec_is_good_pair(const struct job_status *js, const char *id, const struct spec_digest *want);

/* Can a failed change of the job spec alone be reverted in a container whose job status is js
 * (NULL: its agent does not know the job) and whose agent says features (STATUS_FEAT_*)?  Its
 * agent must keep a spec per (release, spec digest): it says so (spec-pairs), or it reports the
 * digest of what runs (every agent since digests keeps specs per pair).  An agent older than
 * digests keeps one spec per release: reverting there would start the new spec again. */
bool jobspec_revertible_here(const struct job_status *js, unsigned features);

/* What changed between the spec js runs and want, for people, into out: "nproc_per_node 1 -> 2,
 * env" (the fields whose digests differ; nproc_per_node with its values, which the status
 * carries), or "unknown: its agent recorded no job spec digest (an agent or a deploy from
 * before them)" when js has none, or "not promoted yet (...)" when js runs want on its good
 * release but was never promoted with it.  "" when nothing differs.  Returns out. */
const char *jobspec_describe_change(const struct inv_job *j, const struct job_status *js,
                                    const struct spec_digest *want, char *out, size_t out_sz);

#endif
