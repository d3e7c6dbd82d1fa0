/* agent/agent.h: what the agent's modules share: default paths, CLI exit codes (docs/errors.md,
 * "Agent"), and the job spec, i.e. how one job's gang is launched for one release.
 *
 * A job spec is recorded per (job, release, spec digest) in state.json so that a revert relaunches
 * the good release with the spec it was promoted with, not the spec of the release (or of the
 * spec change) being abandoned.
 */
#ifndef DROVER_AGENT_H
#define DROVER_AGENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/agentcli.h"
#include "common/manifest.h"
#include "common/specdigest.h"
#include "common/status.h"
#include "agent/liveness.h"

/* AGENT_DEFAULT_ROOT, _SOCKET, _PIDFILE: common/agentcli.h (the controller relies on them). */

/* CLI exit codes: enum agent_exit in common/agentcli.h (the controller reads them too). */

/* How long a verb waits for a lock file held by another process (a job's history or lease
 * lock, common/fs.h): their holders keep them for one read-modify-write, so past this something
 * is wrong and the verb fails naming the holder (exit busy) instead of hanging the deploy. */
#define AGENT_LOCK_TIMEOUT_S 10.0

#define SPEC_MAX_ARGS 64
#define SPEC_ARG_MAX 1024
#define SPEC_ADDR_MAX 64
#define SPEC_MAX_ENV 16
#define SPEC_ENV_MAX 512 /* bytes of one NAME=value */
#define SPEC_GRACE_MAX_S 3600 /* the longest grace a spec may have */
#define SPEC_RDZV_MAX 33 /* a rendezvous generation: 1..32 of [0-9A-Za-z_-] */

struct job_spec {
    char release[RELEASE_ID_LEN + 1];
    int argc;
    char *argv[SPEC_MAX_ARGS + 1]; /* owned, NULL-terminated; argv[0] relative to the release dir
                                      when it contains a '/', else looked up in PATH */
    int nnodes, node_rank, nproc;
    char gpus[SPEC_ADDR_MAX];      /* "0,1": one GPU index per local rank; "" none */
    char master_addr[SPEC_ADDR_MAX];
    int master_port;
    double grace_s;                /* SIGTERM -> SIGKILL, 0..SPEC_GRACE_MAX_S */
    int nenv;
    char *env[SPEC_MAX_ENV];       /* owned "NAME=value" extras for the workers (NCCL_*, fault
                                      knobs); never one of the names the agent sets itself */
    bool promoted;                 /* this release was promoted for this job at some point */
    double ktok_s;                 /* throughput given at promote; 0 unknown */
    struct liveness_policy live;   /* liveness deadlines (agent/liveness.h), judged always */
    char rdzv[SPEC_RDZV_MAX];      /* the switch's rendezvous generation (activate/start --rdzv):
                                      one per controller switch, the same in every container of
                                      the gang; "" = none (DROVER_RDZV is then job:release) */
    /* The controller's digest of this launch spec (activate --spec-digest, common/specdigest.h)
     * and its per-field digests; "" unknown (an older controller, a state.json from before).
     * With release it names what a job runs: specs are kept per (release, digest), so a spec
     * change of the good release is a candidate of its own and a revert returns to the good
     * release with the spec it was promoted with. */
    char digest[SPEC_DIGEST_LEN + 1];
    char digest_fields[SPEC_FIELDS_MAX];
};

/* Defaults: nnodes 1, node_rank 0, nproc 1, master 127.0.0.1:29500, grace 30 s, no argv. */
void spec_init(struct job_spec *s);
/* Free argv; s is then empty (spec_init state).  Accepts a zeroed struct. */
void spec_done(struct job_spec *s);
/* Deep copy src into dst (dst must be empty or initialised; its old argv is freed). */
int spec_copy(struct job_spec *dst, const struct job_spec *src);
/* Set argv from argc strings; -E2BIG over SPEC_MAX_ARGS / SPEC_ARG_MAX, -EINVAL when argc is 0
 * or argv[0] is empty, -EILSEQ when a string is not valid UTF-8 (the spec travels as JSON). */
int spec_set_argv(struct job_spec *s, int argc, char *const *argv);
/* Add one "NAME=value".  NAME must be on the allow-list (worker_env_allowed_text(), common/workerenv.h) and not a name
 * the agent sets (RANK, WORLD_SIZE, ..., CUDA_VISIBLE_DEVICES, PATH, HOME, LANG).
 * -EINVAL malformed or NAME set twice, -EPERM NAME not allowed (LD_PRELOAD, ...), -EILSEQ not
 * valid UTF-8, -E2BIG over the limits. */
int spec_add_env(struct job_spec *s, const char *kv);
/* Check ranges (nproc 1..STATUS_MAX_RANKS, node_rank < nnodes, world size, port, grace, gpus
 * list length == nproc when given).  -EINVAL with a reason in err. */
int spec_validate(const struct job_spec *s, char *err, size_t errsz);
/* Is t a rendezvous generation (1..SPEC_RDZV_MAX-1 characters of [0-9A-Za-z_-])? */
bool spec_rdzv_ok(const char *t);

/* The GPU of local rank local_rank in s->gpus ("0,1": one entry per local rank) into out:
 * -ENOENT when there is no list or no such entry, -EINVAL for an empty or over-long entry.
 * The one reader of the list (the workers' CUDA_VISIBLE_DEVICES, the status' GPU figures). */
int spec_gpu_at(const struct job_spec *s, int local_rank, char *out, size_t out_sz);

/* JSON object <-> spec.  spec_to_json: a new reference, NULL when jansson refuses a value
 * (only text that is not UTF-8, which spec_set_argv/spec_add_env refuse earlier) or on ENOMEM.
 * spec_from_json requires a non-empty argv and validates limits; ret written only on success.
 * It returns the number of env entries left out because their name is off the allow-list (a
 * state.json written by an agent from before the allow-list): those never reach a worker. */
json_t *spec_to_json(const struct job_spec *s);
int spec_from_json(json_t *o, struct job_spec *ret);

/* true when s is a job name we accept: 1..JOB_NAME_MAX-1 of [A-Za-z0-9_.-], not starting with '.'. */
bool job_name_is_valid(const char *s);

#endif
