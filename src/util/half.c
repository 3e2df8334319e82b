/* 16-bit floats (merak/half.h): the rule itself (rounding to nearest
 * even on a float's bits) is include/merak/half_rule.h, which the CUDA kernels
 * compile too; here the arrays, the F16C fast path and the sums. */
#include "merak/half.h"
#include "merak/vec.h"
#include "merak/half_rule.h"

#include <string.h>

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

uint16_t mk_bf16_from_float(float x) { return mk_half_bf16_of_bits(bits_of(x)); }

float mk_bf16_to_float(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

uint16_t mk_fp16_from_float(float x) { return mk_half_fp16_of_bits(bits_of(x)); }

float mk_fp16_to_float(uint16_t h)
{
    uint32_t u = mk_half_bits_of_fp16(h);
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}


/* The bfloat16 rule, branch-free but for NaN, in a loop that vectorises
 * (the GEMMs' operands pass through it). */
MK_VEC void mk_bf16_round_n(float *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t r = (uint32_t)mk_half_bf16_of_bits(bits_of(src[i])) << 16;
        memcpy(&dst[i], &r, sizeof r);
    }
}

/* fp16 arrays through the CPU's own conversions where it has them (x86's
 * F16C, since 2012's CPUs: vcvtps2ph rounds to nearest even with IEEE's
 * overflow, subnormals and quiet NaNs, the rule above, bit for bit;
 * tests/test_half checks every pattern and a million floats against the
 * scalar functions), 8 at a time; the scalar rule elsewhere and for the
 * tail.  The scalar fp16 widening cost ~20 ns an element (with ldexpf),
 * which a 16-bit gradient reduction pays per element and addition. */
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
        dst[i] = mk_half_bf16_of_bits(bits_of(src[i]));
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
