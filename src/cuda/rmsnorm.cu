// RMSNorm (Llama; eps from the config), one warp per row for the row
// statistics; the weight gradient (a sum over rows) runs one thread per
// column with the rows in order, as the CPU loop does
// (src/cpu/kernels_llama_cpu.c).
#include "config.h"
#include "common.cuh"

__global__ void k_rms_fwd(float *out, float *rstd, const float *inp, const float *w, float eps, int N, int C)
{
    int n = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (n >= N) return;  // whole warps leave together
    const float *x = inp + (size_t)n * C;
    float ss = 0.0f;
    for (int c = lane; c < C; c += 32) ss += x[c] * x[c];
    ss = mkc_warp_sum(ss);
    float s = 1.0f / sqrtf(ss / C + eps);
    float *o = out + (size_t)n * C;
    for (int c = lane; c < C; c += 32) o[c] = x[c] * s * w[c];
    if (lane == 0) rstd[n] = s;
}

__global__ void k_rms_bwd_in(float *dinp, const float *dout, const float *inp, const float *w, const float *rstd,
                             int N, int C)
{
    int n = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (n >= N) return;
    const float *d = dout + (size_t)n * C, *x = inp + (size_t)n * C;
    float *di = dinp + (size_t)n * C;
    float s = rstd[n], dot = 0.0f;
    for (int c = lane; c < C; c += 32) dot += w[c] * d[c] * x[c];
    dot = mkc_warp_sum(dot);
    dot = dot / C * s * s;
    for (int c = lane; c < C; c += 32) di[c] += (w[c] * d[c] - x[c] * dot) * s;
}

__global__ void k_rms_bwd_w(float *dw, const float *dout, const float *inp, const float *rstd, int N, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float sw = dw[c];
    for (int n = 0; n < N; n++) sw += dout[(size_t)n * C + c] * inp[(size_t)n * C + c] * rstd[n];
    dw[c] = sw;
}

void mkc_rmsnorm_fwd(void *ctx, float *out, float *rstd, const float *inp, const float *w, float eps, int N, int C)
{
    mkc_ctx_t *c = mkc(ctx);
    if (N <= 0) return;
    k_rms_fwd<<<(N + 7) / 8, 256, 0, c->s>>>(out, rstd, inp, w, eps, N, C);
    LAUNCHED(c);
}

void mkc_rmsnorm_bwd(void *ctx, float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                     const float *rstd, int N, int C)
{
    mkc_ctx_t *c = mkc(ctx);
    if (N <= 0) return;
    k_rms_bwd_in<<<(N + 7) / 8, 256, 0, c->s>>>(dinp, dout, inp, w, rstd, N, C);
    LAUNCHED(c);
    k_rms_bwd_w<<<(C + 127) / 128, 128, 0, c->s>>>(dw, dout, inp, rstd, N, C);
    LAUNCHED(c);
}
