// SwiGLU (Llama's MLP activation): out = silu(gate) * up, one thread per
// entry with the CPU's expressions verbatim (src/exec/kernels_llama_cpu.c).
#include "config.h"
#include "common.cuh"

__global__ void k_swiglu_fwd(float *out, const float *gate, const float *up, int n)
{
    MKC_GRID_STRIDE(i, n) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

// d silu(g)/dg = sig(g) (1 + g (1 - sig(g)))
__global__ void k_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int n)
{
    MKC_GRID_STRIDE(i, n) {
        float g = gate[i], sg = 1.0f / (1.0f + expf(-g));
        dup[i] += g * sg * dout[i];
        dgate[i] += sg * (1.0f + g * (1.0f - sg)) * up[i] * dout[i];
    }
}

void mkc_swiglu_fwd(void *ctx, float *out, const float *gate, const float *up, int n)
{
    mkc_ctx_t *c = mkc(ctx);
    if (n <= 0) return;
    k_swiglu_fwd<<<mkc_grid(n, 256), 256, 0, c->s>>>(out, gate, up, n);
    LAUNCHED(c);
}

void mkc_swiglu_bwd(void *ctx, float *dgate, float *dup, const float *dout, const float *gate, const float *up, int n)
{
    mkc_ctx_t *c = mkc(ctx);
    if (n <= 0) return;
    k_swiglu_bwd<<<mkc_grid(n, 256), 256, 0, c->s>>>(dgate, dup, dout, gate, up, n);
    LAUNCHED(c);
}
