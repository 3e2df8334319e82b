/* 16-bit floats: IEEE binary16 (fp16) and bfloat16, to and from float.
 * Narrowing rounds to nearest, ties to even, wherever a value becomes
 * 16-bit (one rule for the files, the CPU and the CUDA kernels): fp16
 * overflows to infinity past its largest finite value (65504) by more
 * than half an ulp and keeps its subnormals; a NaN stays a (quiet) NaN
 * with its sign.  Widening is exact. */
#ifndef MERAK_HALF_H
#define MERAK_HALF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

uint16_t mk_bf16_from_float(float x);
float mk_bf16_to_float(uint16_t h);
uint16_t mk_fp16_from_float(float x);
float mk_fp16_to_float(uint16_t h);
/* dst[i] = src[i] rounded to the nearest bfloat16 / fp16 value (as a
 * float: the value mk_*_to_float(mk_*_from_float(x)) gives); dst may be src. */
void mk_bf16_round_n(float *dst, const float *src, size_t n);
void mk_fp16_round_n(float *dst, const float *src, size_t n);
/* dst[i] = mk_bf16_from_float(src[i]), a loop that vectorises. */
void mk_bf16_from_float_n(uint16_t *dst, const float *src, size_t n);
/* The same for fp16 (8 at a time through x86's F16C where the CPU has
 * it, bit for bit the scalar rule), and back: dst[i] = mk_*_to_float(src[i])
 * (exact). */
void mk_fp16_from_float_n(uint16_t *dst, const float *src, size_t n);
void mk_bf16_to_float_n(float *dst, const uint16_t *src, size_t n);
void mk_fp16_to_float_n(float *dst, const uint16_t *src, size_t n);
/* acc[i] = the 16-bit value nearest acc[i] + x[i] (ties to even; fp16
 * past its range to infinity): a 16-bit reduction's sum, rounded after
 * each addition as a half-precision all-reduce rounds it. */
void mk_fp16_add_n(uint16_t *acc, const uint16_t *x, size_t n);
void mk_bf16_add_n(uint16_t *acc, const uint16_t *x, size_t n);

#ifdef __cplusplus
}
#endif
#endif
