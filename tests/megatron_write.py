#!/usr/bin/env python3
"""Write a Megatron-LM indexed dataset (PREFIX.idx + PREFIX.bin: MMIDIDX
version 1, uint16 ids, one sequence per document) with the standard
library only, as megatron/core/datasets/indexed_dataset.py lays it out:

    megatron_write.py PREFIX SEED N LO HI   N documents of LO..HI-1 ids below 256"""
import random, struct, sys


def main():
    prefix, seed, n, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    rng = random.Random(seed)
    docs = [[rng.randrange(256) for _ in range(rng.randrange(lo, hi))] for _ in range(n)]
    with open(prefix + ".bin", "wb") as f:
        for d in docs:
            f.write(struct.pack("<%dH" % len(d), *d))
    ptr, lens = [], []
    for d in docs:
        ptr.append(sum(2 * len(x) for x in docs[: len(ptr)]))
        lens.append(len(d))
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 8))
        f.write(struct.pack("<QQ", n, n + 1))
        f.write(struct.pack("<%di" % n, *lens) + struct.pack("<%dq" % n, *ptr) + struct.pack("<%dq" % (n + 1), *range(n + 1)))


if __name__ == "__main__":
    main()
