// Causal grouped-query self-attention on the fused qkv layout
// (B,T,C3) = [q heads (NH*hs) | k heads (KV*hs) | v heads (KV*hs)],
// C3 = (NH+2KV)*hs; query head h = j*G + r (G = NH/KV) uses K/V head j.
// The products are strided-batched cuBLAS GEMMs over the heads of one
// sequence (a head's q, k or v is a (T,hs) row-major matrix with row
// stride C3, heads hs apart): per sequence b, one call per r batched over
// the KV heads j (MHA, G = 1: one call over all heads, as the GPT's), so
// no permutation copies are needed; the softmax and its
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
// and, with a sliding window (window > 0), below t - window + 1
__global__ void k_softmax_causal(float *att, int rows, int T, int window)
{
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= rows) return;
    int t = r % T, u0 = window > 0 && t >= window ? t - window + 1 : 0;
    float *a = att + (size_t)r * T;
    float mx = -INFINITY, sum = 0.0f;
    for (int u = u0 + lane; u <= t; u += 32) mx = fmaxf(mx, a[u]);
    mx = warp_max(mx);
    for (int u = u0 + lane; u <= t; u += 32) {
        float e = expf(a[u] - mx);
        a[u] = e;
        sum += e;
    }
    sum = warp_sum(sum);
    for (int u = lane; u < T; u += 32) a[u] = u >= u0 && u <= t ? a[u] / sum : 0.0f;
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

// Which operand of a per-group GEMM: a query-side (T,hs) matrix of head
// j*G + r, a K/V head j, or the (T,T) probabilities of head j*G + r.
enum { SIDE_Q, SIDE_KV, SIDE_ATT };

typedef struct {
    int G, KV, hs;
    long long TT;
} groups_t;

static const float *at(const groups_t *g, const float *p, int side, int r, long long *stride)
{
    if (side == SIDE_KV) { *stride = g->hs; return p; }
    if (side == SIDE_Q) { *stride = (long long)g->G * g->hs; return p + (size_t)r * g->hs; }
    *stride = g->G * g->TT;
    return p + (size_t)r * g->TT;
}

// mkc_gemm over the heads of one sequence: G calls, each batched over KV.
static void heads_gemm(mkc_ctx_t *c, const groups_t *g, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                       int k, float alpha, const float *A, int lda, int sa, const float *B, int ldb, int sb,
                       float beta, float *C, int ldc, int sc)
{
    for (int r = 0; r < g->G; r++) {
        long long xa, xb, xc;
        const float *a = at(g, A, sa, r, &xa), *b = at(g, B, sb, r, &xb);
        float *cc = (float *)at(g, C, sc, r, &xc);
        mkc_gemm(c, ta, tb, m, n, k, alpha, a, lda, xa, b, ldb, xb, beta, cc, ldc, xc, g->KV);
    }
}

void mkc_attention_fwd(void *ctx, float *out, float *att, const float *qkv, int B, int T, int NH, int KV, int hs,
                       int window)
{
    mkc_ctx_t *c = mkc(ctx);
    int C = NH * hs, C3 = C + 2 * KV * hs;
    float scale = 1.0f / sqrtf((float)hs);
    groups_t g = {NH / KV, KV, hs, (long long)T * T};
    for (int b = 0; b < B; b++) {
        const float *q = qkv + (size_t)b * T * C3, *k = q + C;
        float *ab = att + (size_t)b * NH * g.TT;
        // column-major S(u,t) = scale k_u . q_t, i.e. row-major att[t][u]
        heads_gemm(c, &g, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, scale, k, C3, SIDE_KV, q, C3, SIDE_Q, 0.0f, ab, T,
                   SIDE_ATT);
    }
    int rows = B * NH * T;
    k_softmax_causal<<<(rows + 7) / 8, 256, 0, c->s>>>(att, rows, T, window);
    LAUNCHED(c);
    for (int b = 0; b < B; b++) {
        const float *v = qkv + (size_t)b * T * C3 + C + KV * hs;
        const float *ab = att + (size_t)b * NH * g.TT;
        // out_t (head h) = sum_u att[t][u] v_u: column-major O (hs,T) = V^T (hs,T) A^T (T,T)
        heads_gemm(c, &g, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, 1.0f, v, C3, SIDE_KV, ab, T, SIDE_ATT, 0.0f,
                   out + (size_t)b * T * C, C, SIDE_Q);
    }
}

// dK and dV of head j accumulate (beta 1) over its G query heads in turn.
void mkc_attention_bwd(void *ctx, float *dqkv, float *datt, const float *dout, const float *qkv, const float *att,
                       int B, int T, int NH, int KV, int hs)
{
    mkc_ctx_t *c = mkc(ctx);
    int C = NH * hs, C3 = C + 2 * KV * hs;
    float scale = 1.0f / sqrtf((float)hs);
    groups_t g = {NH / KV, KV, hs, (long long)T * T};
    for (int b = 0; b < B; b++) {
        const float *v = qkv + (size_t)b * T * C3 + C + KV * hs, *d = dout + (size_t)b * T * C;
        const float *ab = att + (size_t)b * NH * g.TT;
        float *dab = datt + (size_t)b * NH * g.TT, *dv = dqkv + (size_t)b * T * C3 + C + KV * hs;
        // datt[t][u] = v_u . d_t
        heads_gemm(c, &g, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, 1.0f, v, C3, SIDE_KV, d, C, SIDE_Q, 0.0f, dab, T,
                   SIDE_ATT);
        // dv_u += sum_t att[t][u] d_t
        heads_gemm(c, &g, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, 1.0f, d, C, SIDE_Q, ab, T, SIDE_ATT, 1.0f, dv, C3,
                   SIDE_KV);
    }
    int rows = B * NH * T;
    k_softmax_causal_bwd<<<(rows + 7) / 8, 256, 0, c->s>>>(datt, att, rows, T, scale);
    LAUNCHED(c);
    for (int b = 0; b < B; b++) {
        const float *q = qkv + (size_t)b * T * C3, *k = q + C;
        const float *gb = datt + (size_t)b * NH * g.TT;
        float *dq = dqkv + (size_t)b * T * C3, *dk = dq + C;
        // dq_t += sum_u g[t][u] k_u
        heads_gemm(c, &g, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, 1.0f, k, C3, SIDE_KV, gb, T, SIDE_ATT, 1.0f, dq, C3,
                   SIDE_Q);
        // dk_u += sum_t g[t][u] q_t
        heads_gemm(c, &g, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, 1.0f, q, C3, SIDE_Q, gb, T, SIDE_ATT, 1.0f, dk, C3,
                   SIDE_KV);
    }
}
