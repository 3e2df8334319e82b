// 16-bit values on the device (issue 37): rounding in place (round16),
// packing to and from uint16 (pack16 / unpack16), and the linears'
// operands copied into the 16-bit scratch their GEMMs read (mkc_gemm16,
// linear.cu).  Every narrowing is include/merak/half_rule.h's rule, the one the
// CPU compiles (round to nearest, ties to even; fp16 past its range to
// infinity, subnormals kept; a NaN a quiet NaN of its sign), so the CPU
// backend is the GPU's reference bit for bit (tests/test_backend_cuda).
// CUDA's __float2bfloat16_rn / __float2half_rn are not used: their NaNs
// are canonical where the CPU keeps the sign and payload's top bits.
#include "config.h"
#include "common.cuh"
#include "merak/model.h"
#include "merak/half_rule.h"

static __device__ inline uint16_t to16(float x, int dt)
{
    uint32_t u = __float_as_uint(x);
    return dt == MK_DTYPE_FP16 ? mk_half_fp16_of_bits(u) : mk_half_bf16_of_bits(u);
}

static __device__ inline float from16(uint16_t h, int dt)
{
    return __uint_as_float(dt == MK_DTYPE_FP16 ? mk_half_bits_of_fp16(h) : (uint32_t)h << 16);
}

__global__ void k_round16(float *x, size_t n, int dt)
{
    MKC_GRID_STRIDE(i, n) x[i] = from16(to16(x[i], dt), dt);
}

__global__ void k_pack16(uint16_t *dst, const float *x, size_t n, int dt)
{
    MKC_GRID_STRIDE(i, n) dst[i] = to16(x[i], dt);
}

__global__ void k_unpack16(float *dst, const uint16_t *src, size_t n, int dt)
{
    MKC_GRID_STRIDE(i, n) dst[i] = from16(src[i], dt);
}

// A column-major rows x cols block (leading dimension ld >= rows) into a
// packed one (leading dimension rows).
__global__ void k_pack16_2d(uint16_t *dst, const float *src, int rows, int cols, int ld, int dt)
{
    MKC_GRID_STRIDE(i, (size_t)rows * cols) {
        size_t r = i % (size_t)rows, c = i / (size_t)rows;
        dst[i] = to16(src[c * (size_t)ld + r], dt);
    }
}

void mkc_round16(void *ctx, float *x, size_t n, int dtype)
{
    mkc_ctx_t *c = mkc(ctx);
    if (!n) return;
    k_round16<<<mkc_grid(n, 256), 256, 0, c->s>>>(x, n, dtype);
    LAUNCHED(c);
}

void mkc_pack16(void *ctx, void *dst, const float *x, size_t n, int dtype)
{
    mkc_ctx_t *c = mkc(ctx);
    if (!n) return;
    k_pack16<<<mkc_grid(n, 256), 256, 0, c->s>>>((uint16_t *)dst, x, n, dtype);
    LAUNCHED(c);
}

void mkc_unpack16(void *ctx, float *dst, const void *src, size_t n, int dtype)
{
    mkc_ctx_t *c = mkc(ctx);
    if (!n) return;
    k_unpack16<<<mkc_grid(n, 256), 256, 0, c->s>>>(dst, (const uint16_t *)src, n, dtype);
    LAUNCHED(c);
}

void mkc_pack16_2d(mkc_ctx_t *c, uint16_t *dst, const float *src, int rows, int cols, int ld, int dtype)
{
    size_t n = (size_t)rows * cols;
    if (!n) return;
    k_pack16_2d<<<mkc_grid(n, 256), 256, 0, c->s>>>(dst, src, rows, cols, ld, dtype);
    LAUNCHED(c);
}
