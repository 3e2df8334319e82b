// SwiGLU (Llama's MLP activation): out (N,F) = silu(gate) * up with each
// row of gu (N,2F) = [gate | up], one thread per output entry with the
// CPU's expressions verbatim (src/cpu/kernels_llama_cpu.c).
#include "config.h"
#include "common.cuh"

__global__ void k_swiglu_fwd(float *out, const float *gu, int N, int F)
{
    MKC_GRID_STRIDE(j, (size_t)N * F) {
        size_t n = j / F, i = j % F;
        float g = gu[n * 2 * F + i];
        out[j] = g / (1.0f + expf(-g)) * gu[n * 2 * F + F + i];
    }
}

// d silu(g)/dg = sig(g) (1 + g (1 - sig(g)))
__global__ void k_swiglu_bwd(float *dgu, const float *dout, const float *gu, int N, int F)
{
    MKC_GRID_STRIDE(j, (size_t)N * F) {
        size_t n = j / F, i = j % F, a = n * 2 * F + i, b = a + F;
        float g = gu[a], sg = 1.0f / (1.0f + expf(-g)), d = dout[j];
        dgu[b] += g * sg * d;
        dgu[a] += sg * (1.0f + g * (1.0f - sg)) * gu[b] * d;
    }
}

void mkc_swiglu_fwd(void *ctx, float *out, const float *gu, int N, int F)
{
    mkc_ctx_t *c = mkc(ctx);
    if (N <= 0 || F <= 0) return;
    k_swiglu_fwd<<<mkc_grid((size_t)N * F, 256), 256, 0, c->s>>>(out, gu, N, F);
    LAUNCHED(c);
}

void mkc_swiglu_bwd(void *ctx, float *dgu, const float *dout, const float *gu, int N, int F)
{
    mkc_ctx_t *c = mkc(ctx);
    if (N <= 0 || F <= 0) return;
    k_swiglu_bwd<<<mkc_grid((size_t)N * F, 256), 256, 0, c->s>>>(dgu, dout, gu, N, F);
    LAUNCHED(c);
}
