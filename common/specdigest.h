/* common/specdigest.h: the job spec digest, the contract between the controller and the agent on
 * "how the gang of a job is launched" (docs/protocol.md, "Job spec digest").
 *
 * The controller computes it from the inventory for each container (the same values it sends
 * with `drover-agent activate`) and sends it along (--spec-digest, --spec-fields); the agent
 * keeps it with the job's release record (state.json) and reports it in the status document
 * (common/status.h: spec_digest, spec_fields, good_spec_digest).  A deploy's survey compares
 * it: a container runs what the inventory asks only when its release id AND its spec digest
 * match, so a change of nproc_per_node, gpus, env, command or arg alone is a deploy, not
 * "nothing to do".
 *
 * What is in it: everything that changes how the gang runs: job, nnodes, node_rank,
 * nproc_per_node, gpus, master_addr, master_port, env (as a set: order does not matter), command
 * and its args (in order).  What is not: the release id (compared on its own), the rendezvous
 * generation (new at every switch), grace and the liveness deadlines (how the agent watches the
 * gang, not how it runs: they travel with every activation and take effect then).
 *
 * Canonical form, version 1 (never changed; a new form is a new version string):
 *   "drover-spec 1\n" then, per field in enum order, NAME "=" VALUE "\n", where VALUE is a
 *   number as its decimal digits then ";", a string as LEN ":" BYTES (LEN in decimal), a list as
 *   COUNT "#" then each item as a string (env sorted bytewise first).
 * spec_digest = sha256 of it (64 hex).  Each field also gets its own digest, the first 16 hex of
 * sha256("drover-spec-field 1\n" NAME "=" VALUE), so that a controller can name the fields that
 * changed without the agent reporting their values (spec_fields: "job:0123456789abcdef,...").
 * Pure: no I/O.
 */
#ifndef DROVER_SPECDIGEST_H
#define DROVER_SPECDIGEST_H

#include <stdbool.h>
#include <stddef.h>

#define SPEC_DIGEST_LEN 64       /* hex digits */
#define SPEC_FIELD_DIGEST_LEN 16 /* hex digits */
#define SPEC_FIELDS_MAX 400      /* bytes of a spec_fields text, NUL included */

enum spec_field {
    SPEC_F_JOB = 0, SPEC_F_NNODES, SPEC_F_NODE_RANK, SPEC_F_NPROC, SPEC_F_GPUS, SPEC_F_MASTER_ADDR,
    SPEC_F_MASTER_PORT, SPEC_F_ENV, SPEC_F_COMMAND, SPEC_F_ARGS, SPEC_F_COUNT
};

/* The field's name in spec_fields and in messages (the inventory's words: "nproc_per_node",
 * "env", "arg"); NULL for an unknown one. */
const char *spec_field_name(enum spec_field f);

/* The launch spec as both sides hold it.  Strings are borrowed; NULL counts as "". */
struct launch_spec {
    const char *job;
    int nnodes, node_rank, nproc_per_node;
    const char *gpus;        /* "" none */
    const char *master_addr; /* "" the agent's default */
    int master_port;         /* 0 the agent's default */
    int nenv;
    const char *const *env;  /* NAME=VALUE, any order (hashed sorted) */
    const char *command;
    int nargs;
    const char *const *args; /* the command's arguments, in order */
};

struct spec_digest {
    char hex[SPEC_DIGEST_LEN + 1];
    char fields[SPEC_FIELDS_MAX]; /* "job:<16 hex>,nnodes:<16 hex>,..." in enum order */
};

/* Digest of s into ret.  -EINVAL for a negative count or over 256 env entries; -ENOMEM, -EIO
 * (OpenSSL).  ret written only on success. */
int spec_digest_compute(const struct launch_spec *s, struct spec_digest *ret);

/* Is t a spec digest (64 lowercase hex)? */
bool spec_digest_is_valid(const char *t);
/* Is t a spec_fields text (NAME:16 lowercase hex, comma-separated, names of [a-z_], at most
 * SPEC_FIELDS_MAX - 1 bytes)?  "" is not one. */
bool spec_fields_is_valid(const char *t);

/* May a pair that runs with spec digest `running` be promoted (or otherwise acted on) as the
 * pair with digest `asked`?  asked NULL or "": yes (a controller from before digests sent none:
 * what runs is promoted, as before); otherwise only when running is exactly asked (an unknown
 * running digest, "", matches no asked one).  The one rule of `drover-agent promote
 * --spec-digest` (docs/protocol.md, "Job spec digest"). */
bool spec_digest_matches(const char *running, const char *asked);

/* The names of the fields whose digests differ between two spec_fields texts, comma-separated
 * into out ("arg, env"): a field present in one only counts as changed.  Returns how many
 * differ; -EINVAL when either text is not valid (out is then ""). */
int spec_fields_diff(const char *a, const char *b, char *out, size_t out_sz);

#endif
