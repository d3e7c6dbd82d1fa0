#!/usr/bin/env python3
# bench/gpu-loop/mkshard.py OUT VOCAB NTOKENS [SEED]: one synthetic llm.c-format shard of
# uniformly random tokens (header 20240520, version 1, ntokens, then uint16 tokens).  Random
# tokens give a loss near ln(VOCAB): finite, flat, enough for throughput.  Never reads anything.
import array, random, struct, sys

out, vocab, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
seed = int(sys.argv[4]) if len(sys.argv) > 4 else 1
if not (2 <= vocab <= 65536 and 1 <= n <= 200_000_000):
    sys.exit("mkshard: vocab 2..65536, ntokens 1..2e8")
rng = random.Random(seed)
toks = array.array("H", (rng.randrange(vocab) for _ in range(n)))
if sys.byteorder != "little":
    toks.byteswap()
with open(out + ".tmp", "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(toks.tobytes())
import os
os.replace(out + ".tmp", out)
