/* trainer/tokbucket.h: the positions of a micro-batch's input tokens grouped by token (CSR), the
 * index the CUDA backend's embedding backward (kern_encoder_backward) sums wte's gradient rows
 * through.  Pure host code, no allocation: the caller owns every array.
 * Invariant: for the same tokens the output is the same, whatever the earlier calls were, and
 * positions are ascending within a token (the kernel sums them in that order: deterministic).
 */
#ifndef DROVER_TRAINER_TOKBUCKET_H
#define DROVER_TRAINER_TOKBUCKET_H

/* tokens[n] (each 0 <= token < vocab; checked by the caller) -> *ret_nuniq distinct tokens in
 * ascending order in uniq[0..nuniq-1]; token uniq[u] owns positions pos[start[u] .. start[u+1]-1]
 * (ascending), start[nuniq] == n.  cnt: vocab ints, all zero on entry and left zero on return
 * (scratch kept across calls so that a call costs O(n + vocab) without a memset).  uniq and pos
 * hold n ints, start n + 1.  Returns 0; -EINVAL for n < 0 or vocab <= 0 (nothing written). */
int tokbucket_build(const int *tokens, int n, int vocab, int *cnt, int *uniq, int *start, int *pos,
                    int *ret_nuniq);

#endif
