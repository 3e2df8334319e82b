// AdamW (elementwise, the CPU expression verbatim) and the sum of squares
// for gradient clipping (double partials per block, then one block summing
// them in a fixed order: deterministic).
#include "config.h"
#include "common.cuh"

__global__ void k_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                        float beta2, float bc1, float bc2, float eps, float decay, float gscale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i] * gscale;
        float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float mh = mi / bc1, vh = vi / bc2;
        p[i] -= lr * (mh / (sqrtf(vh) + eps) + decay * p[i]);
    }
}

void mkc_adamw(void *ctx, float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
               float bc1, float bc2, float eps, float decay, float gscale)
{
    mkc_ctx_t *c = mkc(ctx);
    if (!n) return;
    k_adamw<<<mkc_grid(n, 256), 256, 0, c->s>>>(p, g, m, v, n, lr, beta1, beta2, bc1, bc2, eps,
                                                    decay, gscale);
    LAUNCHED(c);
}

#define SB 256
#define SBLOCKS 1024

__global__ void k_sumsq_part(double *part, const float *x, size_t n)
{
    __shared__ double sh[SB];
    double s = 0.0;
    for (size_t i = blockIdx.x * (size_t)SB + threadIdx.x; i < n; i += (size_t)gridDim.x * SB)
        s += (double)x[i] * x[i];
    s = mkc_block_sum_d(s, sh, SB);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

__global__ void k_sum_parts(double *out, const double *part, int np)
{
    __shared__ double sh[SB];
    double s = 0.0;
    for (int i = threadIdx.x; i < np; i += SB) s += part[i];
    s = mkc_block_sum_d(s, sh, SB);
    if (threadIdx.x == 0) out[0] = s;
}

double mkc_sumsq(void *ctx, const float *x, size_t n)
{
    if (!n) return 0.0;
    mkc_ctx_t *c = mkc(ctx);
    int nb = (int)((n + SB - 1) / SB);
    if (nb > SBLOCKS) nb = SBLOCKS;
    double *red = mkc_red(c, SBLOCKS + 1), s = 0.0;
    k_sumsq_part<<<nb, SB, 0, c->s>>>(red + 1, x, n);
    LAUNCHED(c);
    k_sum_parts<<<1, SB, 0, c->s>>>(red, red + 1, nb);
    LAUNCHED(c);
    CK(c, cudaMemcpyAsync(&s, red, sizeof s, cudaMemcpyDeviceToHost, c->s));
    CK(c, cudaStreamSynchronize(c->s));
    return s;
}
