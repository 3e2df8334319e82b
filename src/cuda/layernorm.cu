// LayerNorm (eps 1e-5), one warp per row for the row statistics; the
// parameter gradients (sums over rows) run one thread per column with the
// rows in order, as the CPU loop does.
#include "config.h"
#include "common.cuh"

// Sum over the warp, the same value in every lane.
__device__ static float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return __shfl_sync(0xffffffffu, v, 0);
}

__global__ void k_ln_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w,
                         const float *b, int N, int C)
{
    int n = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (n >= N) return;  // whole warps leave together
    const float *x = inp + (size_t)n * C;
    float m = 0.0f, v = 0.0f;
    for (int c = lane; c < C; c += 32) m += x[c];
    m = warp_sum(m);
    m /= C;
    for (int c = lane; c < C; c += 32) v += (x[c] - m) * (x[c] - m);
    v = warp_sum(v);
    float s = 1.0f / sqrtf(v / C + 1e-5f);
    float *o = out + (size_t)n * C;
    for (int c = lane; c < C; c += 32) o[c] = (x[c] - m) * s * w[c] + b[c];
    if (lane == 0) {
        mean[n] = m;
        rstd[n] = s;
    }
}

__global__ void k_ln_bwd_in(float *dinp, const float *dout, const float *inp, const float *w,
                            const float *mean, const float *rstd, int N, int C)
{
    int n = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (n >= N) return;
    const float *d = dout + (size_t)n * C, *x = inp + (size_t)n * C;
    float *di = dinp + (size_t)n * C;
    float m = mean[n], s = rstd[n], dnm = 0.0f, dnx = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float dn = w[c] * d[c];
        dnm += dn;
        dnx += dn * (x[c] - m) * s;
    }
    dnm = warp_sum(dnm);
    dnx = warp_sum(dnx);
    dnm /= C;
    dnx /= C;
    for (int c = lane; c < C; c += 32) {
        float xh = (x[c] - m) * s;
        di[c] += (w[c] * d[c] - dnm - xh * dnx) * s;
    }
}

__global__ void k_ln_bwd_w(float *dw, float *db, const float *dout, const float *inp, const float *mean,
                           const float *rstd, int N, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float sw = dw[c], sb = db[c];
    for (int n = 0; n < N; n++) {
        float d = dout[(size_t)n * C + c];
        float xh = (inp[(size_t)n * C + c] - mean[n]) * rstd[n];
        sb += d;
        sw += xh * d;
    }
    dw[c] = sw;
    db[c] = sb;
}

void mkc_layernorm_fwd(void *ctx, float *out, float *mean, float *rstd, const float *inp, const float *w,
                       const float *b, int N, int C)
{
    mkc_ctx_t *c = mkc(ctx);
    if (N <= 0) return;
    k_ln_fwd<<<(N + 7) / 8, 256, 0, c->s>>>(out, mean, rstd, inp, w, b, N, C);
    LAUNCHED(c);
}

void mkc_layernorm_bwd(void *ctx, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                       const float *w, const float *mean, const float *rstd, int N, int C)
{
    if (N <= 0) return;
    mkc_ctx_t *c = mkc(ctx);
    k_ln_bwd_in<<<(N + 7) / 8, 256, 0, c->s>>>(dinp, dout, inp, w, mean, rstd, N, C);
    LAUNCHED(c);
    k_ln_bwd_w<<<(C + 127) / 128, 128, 0, c->s>>>(dw, db, dout, inp, mean, rstd, N, C);
    LAUNCHED(c);
}
