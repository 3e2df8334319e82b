/* The 16-bit rounding rule of merak/half.h on a float's bits, as inline
 * functions that the C library (src/util/half.c) and the CUDA kernels
 * (src/cuda/half.cu) both compile, so the GPU's conversions are the CPU's
 * bit for bit (tests/test_half, tests/test_backend_cuda): one rule, one
 * piece of code.  Not a public header.
 *
 * bfloat16 is float's top half: rounding adds 0x7fff plus the kept half's
 * lowest bit, so a tie carries only into an odd half.  fp16 from the
 * float's fields: the exponent rebased (15 for 127), the 13 mantissa bits
 * below the kept 10 rounded the same way; below 2^-14 the implicit bit
 * joins the mantissa and more bits go (subnormals), at most half the
 * smallest subnormal is zero.  A NaN stays a quiet NaN of its sign
 * (truncating its payload could make it infinity). */
#ifndef MERAK_HALF_RULE_H
#define MERAK_HALF_RULE_H

#include <stdint.h>

#ifdef __CUDACC__
#define MK_HALF_FN static inline __host__ __device__
#else
#define MK_HALF_FN static inline
#endif

MK_HALF_FN uint16_t mk_half_bf16_of_bits(uint32_t u)
{
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? u >> 16 | 0x0040u : (u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}

/* m (with its implicit bit) shifted right by s (1..), rounded to nearest even. */
MK_HALF_FN uint32_t mk_half_shift_rne(uint32_t m, int s)
{
    if (s > 31) return 0;
    uint32_t q = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
    return q + (rem > half || (rem == half && (q & 1u)));
}

MK_HALF_FN uint16_t mk_half_fp16_of_bits(uint32_t u)
{
    uint32_t sign = u >> 16 & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | (a >> 13 & 0x3ffu)); /* NaN: quiet */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (65504 + half an ulp): infinity */
    int e = (int)(a >> 23) - 127 + 15;                    /* the fp16 exponent field */
    uint32_t m = (a & 0x7fffffu) | 0x800000u;             /* 24 bits with the implicit one */
    if (a < 0x38800000u) {                                /* below 2^-14: subnormal (or zero) */
        if (a < 0x33000000u) return (uint16_t)sign;       /* at most 2^-25 (half the least): zero, ties to even */
        return (uint16_t)(sign | mk_half_shift_rne(m, 14 - e)); /* e <= 0: 13 + (1 - e) bits go */
    }
    /* normal: the carry out of the mantissa bumps the exponent (up to infinity at 65520) */
    return (uint16_t)(sign | (((uint32_t)e << 10) + mk_half_shift_rne(m, 13) - 0x400u));
}

/* The float bits of an fp16 value (exact); a NaN widens to the quiet NaN
 * 0x7fc00000 with the value's sign. */
MK_HALF_FN uint32_t mk_half_bits_of_fp16(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = h >> 10 & 31u, m = h & 1023u;
    if (e == 31) return sign | (m ? 0x7fc00000u : 0x7f800000u);
    if (e) return sign | (e + 127 - 15) << 23 | m << 13;
    if (!m) return sign;
    uint32_t x = 113; /* a subnormal m 2^-24: normalised, 2^(x - 127) (1 + f) */
    while (!(m & 0x400u)) m <<= 1, x--;
    return sign | x << 23 | (m & 0x3ffu) << 13;
}

#endif
