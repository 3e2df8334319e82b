// Causal self-attention on the fused qkv layout (B,T,3C) = [q heads | k
// heads | v heads], C = NH*hs.  The products are strided-batched cuBLAS
// GEMMs over the heads of one sequence (a head's q, k or v is a (T,hs)
// row-major matrix with row stride 3C, heads hs apart), one call per
// sequence b, so no permutation copies are needed; the softmax and its
// backward are one warp per (b,h,t) row.  The (B,NH,T,T) probabilities
// are materialised as the backend table requires (they are saved for the
// backward pass); entries above the diagonal are exactly 0.
#include "config.h"
#include "common.cuh"

#include <math.h>

__device__ static float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return __shfl_sync(0xffffffffu, v, 0);
}

__device__ static float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return __shfl_sync(0xffffffffu, v, 0);
}

// rows (B*NH*T) of T scaled scores -> causal softmax probabilities, 0 above t
__global__ void k_softmax_causal(float *att, int rows, int T)
{
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= rows) return;
    int t = r % T;
    float *a = att + (size_t)r * T;
    float mx = -INFINITY, sum = 0.0f;
    for (int u = lane; u <= t; u += 32) mx = fmaxf(mx, a[u]);
    mx = warp_max(mx);
    for (int u = lane; u <= t; u += 32) {
        float e = expf(a[u] - mx);
        a[u] = e;
        sum += e;
    }
    sum = warp_sum(sum);
    for (int u = lane; u < T; u += 32) a[u] = u <= t ? a[u] / sum : 0.0f;
}

// datt row: da[u] = v_u . d_t (all u) -> g[u] = a[u] (da[u] - sum_u' da a) scale, 0 above t
__global__ void k_softmax_causal_bwd(float *datt, const float *att, int rows, int T, float scale)
{
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= rows) return;
    int t = r % T;
    float *da = datt + (size_t)r * T;
    const float *a = att + (size_t)r * T;
    float dot = 0.0f;
    for (int u = lane; u <= t; u += 32) dot += da[u] * a[u];
    dot = warp_sum(dot);
    for (int u = lane; u < T; u += 32) da[u] = u <= t ? a[u] * (da[u] - dot) * scale : 0.0f;
}

void mkc_attention_fwd(void *ctx, float *out, float *att, const float *qkv, int B, int T, int NH, int hs)
{
    mkc_ctx_t *c = mkc(ctx);
    int C = NH * hs, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    long long TT = (long long)T * T;
    for (int b = 0; b < B; b++) {
        const float *q = qkv + (size_t)b * T * C3, *k = q + C;
        float *ab = att + (size_t)b * NH * TT;
        // column-major S(u,t) = scale k_u . q_t, i.e. row-major att[t][u]
        mkc_gemm(c, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, scale, k, C3, hs, q, C3, hs, 0.0f, ab, T, TT, NH);
    }
    int rows = B * NH * T;
    k_softmax_causal<<<(rows + 7) / 8, 256, 0, c->s>>>(att, rows, T);
    LAUNCHED(c);
    for (int b = 0; b < B; b++) {
        const float *v = qkv + (size_t)b * T * C3 + 2 * C;
        const float *ab = att + (size_t)b * NH * TT;
        // out_t (head h) = sum_u att[t][u] v_u: column-major O (hs,T) = V^T (hs,T) A^T (T,T)
        mkc_gemm(c, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, 1.0f, v, C3, hs, ab, T, TT, 0.0f,
                 out + (size_t)b * T * C, C, hs, NH);
    }
}

void mkc_attention_bwd(void *ctx, float *dqkv, float *datt, const float *dout, const float *qkv, const float *att,
                       int B, int T, int NH, int hs)
{
    mkc_ctx_t *c = mkc(ctx);
    int C = NH * hs, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    long long TT = (long long)T * T;
    for (int b = 0; b < B; b++) {
        const float *v = qkv + (size_t)b * T * C3 + 2 * C, *d = dout + (size_t)b * T * C;
        const float *ab = att + (size_t)b * NH * TT;
        float *dab = datt + (size_t)b * NH * TT, *dv = dqkv + (size_t)b * T * C3 + 2 * C;
        // datt[t][u] = v_u . d_t
        mkc_gemm(c, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, 1.0f, v, C3, hs, d, C, hs, 0.0f, dab, T, TT, NH);
        // dv_u += sum_t att[t][u] d_t
        mkc_gemm(c, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, 1.0f, d, C, hs, ab, T, TT, 1.0f, dv, C3, hs, NH);
    }
    int rows = B * NH * T;
    k_softmax_causal_bwd<<<(rows + 7) / 8, 256, 0, c->s>>>(datt, att, rows, T, scale);
    LAUNCHED(c);
    for (int b = 0; b < B; b++) {
        const float *q = qkv + (size_t)b * T * C3, *k = q + C;
        const float *gb = datt + (size_t)b * NH * TT;
        float *dq = dqkv + (size_t)b * T * C3, *dk = dq + C;
        // dq_t += sum_u g[t][u] k_u
        mkc_gemm(c, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, 1.0f, k, C3, hs, gb, T, TT, 1.0f, dq, C3, hs, NH);
        // dk_u += sum_t g[t][u] q_t
        mkc_gemm(c, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, 1.0f, q, C3, hs, gb, T, TT, 1.0f, dk, C3, hs, NH);
    }
}
