/* 16-bit floats (merak/half.h).  bfloat16 is float's top half: rounding
 * adds 0x7fff plus the kept half's lowest bit, so a tie carries only into
 * an odd half.  fp16 from the float's fields: the exponent rebased (15 for
 * 127), the 13 mantissa bits below the kept 10 rounded the same way; below
 * 2^-14 the implicit bit joins the mantissa and more bits go (subnormals),
 * below half the smallest subnormal the value is zero. */
#include "merak/half.h"
#include "merak/vec.h"

#include <math.h>
#include <string.h>

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

uint16_t mk_bf16_from_float(float x)
{
    uint32_t u = bits_of(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x0040u); /* NaN: quiet, sign kept */
    return (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}

float mk_bf16_to_float(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* m (with its implicit bit) shifted right by s, rounded to nearest even. */
static uint32_t shift_rne(uint32_t m, int s)
{
    if (s > 31) return 0;
    uint32_t q = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
    return q + (rem > half || (rem == half && (q & 1u)));
}

uint16_t mk_fp16_from_float(float x)
{
    uint32_t u = bits_of(x), sign = u >> 16 & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | (a >> 13 & 0x3ffu)); /* NaN: quiet */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (65504 + half an ulp): infinity */
    int e = (int)(a >> 23) - 127 + 15;                    /* the fp16 exponent field */
    uint32_t m = (a & 0x7fffffu) | 0x800000u;             /* 24 bits with the implicit one */
    if (a < 0x38800000u) {                                /* below 2^-14: subnormal (or zero) */
        if (a < 0x33000000u) return (uint16_t)sign;       /* at most 2^-25 (half the least): zero, ties to even */
        return (uint16_t)(sign | shift_rne(m, 14 - e));   /* e <= 0: 13 + (1 - e) bits go */
    }
    /* normal: the carry out of the mantissa bumps the exponent (up to infinity at 65520) */
    return (uint16_t)(sign | (((uint32_t)e << 10) + shift_rne(m, 13) - 0x400u));
}

float mk_fp16_to_float(uint16_t h)
{
    int e = h >> 10 & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
    return h >> 15 ? -v : v;
}


/* The bfloat16 rule on float bits, branch-free but for NaN, so that the
 * loop vectorises (the GEMMs' operands pass through it). */
MK_VEC void mk_bf16_round_n(float *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = bits_of(src[i]);
        uint32_t r = (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) & 0xffff0000u
                                                      : (u + 0x7fffu + (u >> 16 & 1u)) & 0xffff0000u;
        memcpy(&dst[i], &r, sizeof r);
    }
}

/* fp16 arrays through the CPU's own conversions where it has them (x86's
 * F16C, since 2012's CPUs: vcvtps2ph rounds to nearest even with IEEE's
 * overflow, subnormals and quiet NaNs, the rule above, bit for bit;
 * tests/test_half checks every pattern and a million floats against the
 * scalar functions), 8 at a time; the scalar rule elsewhere and for the
 * tail.  The scalar fp16 widening (ldexpf) costs ~20 ns an element, which a
 * 16-bit gradient reduction pays per element and addition. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
/* CPUID leaf 1's F16C and AVX bits, and the OS saving the YMM registers
 * (OSXSAVE, XCR0 bits 1-2): clang 14 knows no "f16c" for
 * __builtin_cpu_supports. */
static int have_f16c(void)
{
    static int have = -1; /* (a benign race: every thread finds the same) */
    if (have < 0) {
        unsigned a, b, c, d, lo = 0, hi = 0;
        int ok = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) && (c & bit_AVX) && (c & bit_OSXSAVE);
        if (ok) __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        have = ok && (lo & 6) == 6;
    }
    return have;
}

__attribute__((target("avx,f16c"))) static size_t f16c_from(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    return i;
}

__attribute__((target("avx,f16c"))) static size_t f16c_to(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    return i;
}
#else
static int have_f16c(void) { return 0; }
static size_t f16c_from(uint16_t *dst, const float *src, size_t n) { (void)dst, (void)src, (void)n; return 0; }
static size_t f16c_to(float *dst, const uint16_t *src, size_t n) { (void)dst, (void)src, (void)n; return 0; }
#endif

/* Chunks of this many elements go through a stack buffer (round, add). */
enum { CHUNK = 256 };

void mk_fp16_round_n(float *dst, const float *src, size_t n)
{
    uint16_t h[CHUNK];
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t c = n - i < CHUNK ? n - i : CHUNK;
        mk_fp16_from_float_n(h, src + i, c);
        mk_fp16_to_float_n(dst + i, h, c);
    }
}

MK_VEC void mk_bf16_from_float_n(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = bits_of(src[i]);
        dst[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? u >> 16 | 0x0040u : (u + 0x7fffu + (u >> 16 & 1u)) >> 16);
    }
}

MK_VEC void mk_bf16_to_float_n(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        memcpy(&dst[i], &u, sizeof u);
    }
}

void mk_fp16_from_float_n(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = have_f16c() ? f16c_from(dst, src, n) : 0; i < n; i++) dst[i] = mk_fp16_from_float(src[i]);
}

void mk_fp16_to_float_n(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = have_f16c() ? f16c_to(dst, src, n) : 0; i < n; i++) dst[i] = mk_fp16_to_float(src[i]);
}

/* The sum in fp32, then rounded to 16 bits: the correctly rounded 16-bit
 * sum, since fp32's 24 significand bits are at least 2p + 2 for fp16's
 * p = 11 and bf16's 8, where rounding a sum twice is innocuous (S. A.
 * Figueroa, "When is double rounding innocuous?", ACM SIGNUM Newsletter
 * 30(3), 1995); tests/test_half checks it against rounding by distance. */
static void add_n(uint16_t *acc, const uint16_t *x, size_t n, void (*wide)(float *, const uint16_t *, size_t),
                  void (*narrow)(uint16_t *, const float *, size_t))
{
    float a[CHUNK], b[CHUNK];
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t c = n - i < CHUNK ? n - i : CHUNK;
        wide(a, acc + i, c), wide(b, x + i, c);
        for (size_t j = 0; j < c; j++) a[j] += b[j];
        narrow(acc + i, a, c);
    }
}

void mk_fp16_add_n(uint16_t *acc, const uint16_t *x, size_t n)
{
    add_n(acc, x, n, mk_fp16_to_float_n, mk_fp16_from_float_n);
}

void mk_bf16_add_n(uint16_t *acc, const uint16_t *x, size_t n)
{
    add_n(acc, x, n, mk_bf16_to_float_n, mk_bf16_from_float_n);
}
