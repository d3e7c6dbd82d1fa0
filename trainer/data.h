/* trainer/data.h: token shards in llm.c's .bin format and the sequential batch loader.
 *
 * Shard: a header of 256 little-endian int32 (magic 20240520, version 1, ntokens, the rest 0)
 * followed by ntokens uint16 token ids.  The only file that knows this format is data.c.
 * Loader: all ranks share one global position (shard index, token offset); each step consumes
 * world*B*T tokens from it and rank r reads the B*T+1 tokens starting at offset + r*B*T (inputs
 * are tokens 0..B*T-1, targets 1..B*T).  When the rest of a shard cannot fill a step the position
 * moves to the next shard (after the last: back to the first).  The position is what checkpoints
 * save, so a resumed run reads exactly the batches the uninterrupted run would have.
 * Never: log above debug (errors come back as -errno plus a message in errbuf).
 */
#ifndef DROVER_TRAINER_DATA_H
#define DROVER_TRAINER_DATA_H

#include <stddef.h>
#include <stdint.h>

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_INTS 256
#define SHARD_HEADER_BYTES (SHARD_HEADER_INTS * 4)
#define SHARD_MAX_TOKENS ((int64_t)1 << 40)
#define LOADER_MAX_SHARDS 100000

/* Validate a shard header: len >= SHARD_HEADER_BYTES, magic, version, 0 < ntokens <=
 * SHARD_MAX_TOKENS and, when file_size is not 0, file_size == header + 2*ntokens.  Returns 0 and
 * *ret_ntokens; -EINVAL (not a shard / truncated / size mismatch), -EPROTONOSUPPORT (version). */
int shard_header_parse(const void *buf, size_t len, uint64_t file_size, int64_t *ret_ntokens);

/* Write tokens[n] as a shard at path atomically (temp file, fsync, rename, fsync dir). */
int shard_write(const char *path, const uint16_t *tokens, size_t n);

struct data_pos {
    int64_t shard;  /* index into the sorted list of shard files */
    int64_t offset; /* token offset of the step's first token in that shard */
};

struct loader; /* loader_open / loader_free */

/* Open the shards matching pattern (a path or a glob(7); sorted).  B, T per rank; rank < world.
 * Every header is validated and every shard must hold at least world*B*T+1 tokens.  Returns 0 and
 * *ret_l; -ENOENT when nothing matches (errbuf names the path), -EINVAL bad shard, -errno. */
int loader_open(const char *pattern, int B, int T, int rank, int world, struct loader **ret_l,
                char *errbuf, size_t errsz);
/* Accepts NULL. */
void loader_free(struct loader *l);

int loader_num_shards(const struct loader *l);
/* Total tokens over all shards. */
int64_t loader_num_tokens(const struct loader *l);

/* Read this rank's batch at the current position into inputs[B*T], targets[B*T] and advance.
 * -ERANGE when a token is >= vocab (errbuf says which shard and offset), -EIO on a short read. */
int loader_next(struct loader *l, int vocab, int *inputs, int *targets, char *errbuf, size_t errsz);

void loader_get_pos(const struct loader *l, struct data_pos *ret_pos);
/* Move to pos (from a checkpoint).  -EINVAL when pos does not fit these shards (then the
 * position is unchanged). */
int loader_set_pos(struct loader *l, const struct data_pos *pos);

#endif
