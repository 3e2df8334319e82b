// Vocabulary-parallel cross-entropy in the executor's three passes (see
// merak/backend.h): one 256-thread block per token row for the row max and
// the exp-sum, elementwise kernels for the normalisation and the gradient,
// and one block summing the token losses in double.
#include "config.h"
#include "common.cuh"

#include <math.h>

#define XB 256

// Block reductions over XB threads (all threads get the result).
__device__ static float block_max(float v, float *sh)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    float r = sh[0];
    for (int w = 1; w < XB / 32; w++) r = fmaxf(r, sh[w]);
    __syncthreads();
    return r;
}

__device__ static float block_sum(float v, float *sh)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    float r = sh[0];
    for (int w = 1; w < XB / 32; w++) r += sh[w];
    __syncthreads();
    return r;
}

__global__ void k_xent_max(float *rowmax, const float *logits, int N, int Vl, int valid)
{
    __shared__ float sh[XB / 32];
    int n = blockIdx.x;
    const float *l = logits + (size_t)n * Vl;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < valid; i += XB) m = fmaxf(m, l[i]);
    m = block_max(m, sh);
    if (threadIdx.x == 0) rowmax[n] = m;
}

__global__ void k_xent_exp(float *logits, float *rowsum, float *tgt, const float *rowmax,
                           const int *targets, int N, int Vl, int v0, int valid)
{
    __shared__ float sh[XB / 32];
    int n = blockIdx.x;
    float *l = logits + (size_t)n * Vl, mx = rowmax[n];
    if (threadIdx.x == 0) {  // read the target's logit before it is overwritten
        int r = targets[n] - v0;
        tgt[n] = r >= 0 && r < Vl ? l[r] - mx : 0.0f;
    }
    __syncthreads();
    float s = 0.0f;
    for (int i = threadIdx.x; i < Vl; i += XB) {
        if (i < valid) {
            float e = expf(l[i] - mx);
            l[i] = e;
            s += e;
        } else l[i] = 0.0f;
    }
    s = block_sum(s, sh);
    if (threadIdx.x == 0) rowsum[n] = s;
}

__global__ void k_xent_norm(float *probs, const float *rowsum, int N, int Vl)
{
    size_t total = (size_t)N * Vl;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        float inv = 1.0f / rowsum[i / Vl];
        probs[i] *= inv;
    }
}

// one block: out[0] = sum_n log(rowsum[n]) - tgt[n], in double, fixed order
__global__ void k_xent_loss(double *out, const float *rowsum, const float *tgt, int N)
{
    __shared__ double sh[XB];
    double s = 0.0;
    for (int n = threadIdx.x; n < N; n += XB) s += log((double)rowsum[n]) - tgt[n];
    s = mkc_block_sum_d(s, sh, XB);
    if (threadIdx.x == 0) out[0] = s;
}

__global__ void k_xent_bwd(float *dlogits, const float *probs, const int *targets, float scale, int N,
                           int Vl, int v0)
{
    size_t total = (size_t)N * Vl;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int n = (int)(i / Vl), col = (int)(i % Vl);
        float d = scale * probs[i];
        if (targets[n] - v0 == col) d -= scale;
        dlogits[i] = d;
    }
}

static int valid_cols(int Vl, int v0, int V)
{
    int valid = V - v0 < Vl ? V - v0 : Vl;
    return valid < 0 ? 0 : valid;
}

void mkc_xent_max(void *ctx, float *rowmax, const float *logits, int N, int Vl, int v0, int V)
{
    mkc_ctx_t *c = mkc(ctx);
    if (N <= 0) return;
    k_xent_max<<<N, XB, 0, c->s>>>(rowmax, logits, N, Vl, valid_cols(Vl, v0, V));
    LAUNCHED(c);
}

void mkc_xent_exp(void *ctx, float *logits, float *rowsum, float *tgt, const float *rowmax, const int *targets,
                  int N, int Vl, int v0, int V)
{
    mkc_ctx_t *c = mkc(ctx);
    if (N <= 0) return;
    const int *dt = mkc_ints(c, targets, N);
    k_xent_exp<<<N, XB, 0, c->s>>>(logits, rowsum, tgt, rowmax, dt, N, Vl, v0, valid_cols(Vl, v0, V));
    LAUNCHED(c);
}

double mkc_xent_loss(void *ctx, float *probs, const float *rowsum, const float *tgt, int N, int Vl)
{
    if (N <= 0) return 0.0;
    mkc_ctx_t *c = mkc(ctx);
    k_xent_norm<<<mkc_grid((size_t)N * Vl, 256), 256, 0, c->s>>>(probs, rowsum, N, Vl);
    LAUNCHED(c);
    double *red = mkc_red(c, 1), loss = 0.0;
    k_xent_loss<<<1, XB, 0, c->s>>>(red, rowsum, tgt, N);
    LAUNCHED(c);
    CK(c, cudaMemcpyAsync(&loss, red, sizeof loss, cudaMemcpyDeviceToHost, c->s));
    CK(c, cudaStreamSynchronize(c->s));
    return loss;
}

void mkc_xent_bwd(void *ctx, float *dlogits, const float *probs, const int *targets, float scale, int N, int Vl, int v0)
{
    mkc_ctx_t *c = mkc(ctx);
    if (N <= 0) return;
    const int *dt = mkc_ints(c, targets, N);
    k_xent_bwd<<<mkc_grid((size_t)N * Vl, 256), 256, 0, c->s>>>(dlogits, probs, dt, scale, N, Vl, v0);
    LAUNCHED(c);
}
