/* A 128-bit running hash of 64-bit words (two multiply-xor lanes: FNV-1a's
 * prime on one, a rotate and the golden-ratio constant on the other), for
 * the caches that key on what a thing was built from: a schedule spec's
 * identity (mk_sched_spec_hash) and the memory search's stream hashes
 * (sim/memory_auto.c).  Start from MK_HASH128_INIT. */
#ifndef MERAK_HASH_H
#define MERAK_HASH_H

#include <stdint.h>

#define MK_HASH128_INIT {0xcbf29ce484222325ull, 0x243f6a8885a308d3ull}

static inline void mk_hash128_mix(uint64_t h[2], uint64_t v)
{
    h[0] = (h[0] ^ v) * 0x100000001b3ull;
    h[1] = ((h[1] ^ v) << 27 | (h[1] ^ v) >> 37) * 0x9E3779B97F4A7C15ull;
}

#endif
