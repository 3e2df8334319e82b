// The fused causal attention (merak/backend.h attention_fused_fwd/bwd):
// the FlashAttention-2 algorithm with a tile of one key, no (T,T) tensor.
// Forward: one thread per (b,h,t) query row, the online softmax over its
// keys (running max m, sum l, the context rescaled when m grows), out =
// o / l and lse = m + log l, as the CPU's kernels_attn_cpu.c (whose tiles
// change only the order of the max updates).  Backward in two passes, no
// atomics: one thread per query row for D = dout . out and dQ; one thread
// per (b, K/V head, key u) for dK and dV over the query heads sharing it
// and the queries that see u, so every dK/dV row has one writer.
#include "config.h"
#include "common.cuh"

#include <math.h>

#define MAXHS 256 // the per-thread context row (local memory); wider heads are refused

#define ROWS(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)(n); i += (size_t)gridDim.x * blockDim.x)

__device__ static int kv_head(int h, int NH, int KV) { return (int)((long)h * KV / NH); }

__device__ static float dot(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

__global__ void k_fattn_fwd(float *out, float *lse, const float *qkv, int B, int T, int NH, int KV, int hs, int window)
{
    int C = NH * hs, C3 = C + 2 * KV * hs;
    ROWS(r, (size_t)B * NH * T) {
        int t = (int)(r % T), h = (int)(r / T % NH), b = (int)(r / T / NH);
        int ko = C + kv_head(h, NH, KV) * hs, vo = ko + KV * hs, u0 = window > 0 && t >= window ? t - window + 1 : 0;
        const float *base = qkv + (size_t)b * T * C3, *q = base + (size_t)t * C3 + h * hs;
        float o[MAXHS], m = -INFINITY, l = 0.0f, scale = 1.0f / sqrtf((float)hs);
        for (int i = 0; i < hs; i++) o[i] = 0.0f;
        for (int u = u0; u <= t; u++) {
            float s = dot(q, base + (size_t)u * C3 + ko, hs) * scale, mn = fmaxf(m, s), corr = expf(m - mn);
            float p = expf(s - mn);
            const float *v = base + (size_t)u * C3 + vo;
            l = l * corr + p;
            for (int i = 0; i < hs; i++) o[i] = o[i] * corr + p * v[i];
            m = mn;
        }
        float *y = out + ((size_t)b * T + t) * C + h * hs;
        for (int i = 0; i < hs; i++) y[i] = o[i] / l;
        lse[r] = m + logf(l);
    }
}

// D = dout . out and dQ += sum_u dS k_u scale, dS = p (dout . v_u - D)
__global__ void k_fattn_bwd_q(float *dqkv, double *D, const float *dout, const float *qkv, const float *out,
                              const float *lse, int B, int T, int NH, int KV, int hs, int window)
{
    int C = NH * hs, C3 = C + 2 * KV * hs;
    ROWS(r, (size_t)B * NH * T) {
        int t = (int)(r % T), h = (int)(r / T % NH), b = (int)(r / T / NH);
        int ko = C + kv_head(h, NH, KV) * hs, vo = ko + KV * hs, u0 = window > 0 && t >= window ? t - window + 1 : 0;
        const float *base = qkv + (size_t)b * T * C3, *q = base + (size_t)t * C3 + h * hs;
        const float *d = dout + ((size_t)b * T + t) * C + h * hs, *y = out + ((size_t)b * T + t) * C + h * hs;
        float *dq = dqkv + (size_t)b * T * C3 + (size_t)t * C3 + h * hs, scale = 1.0f / sqrtf((float)hs);
        float Dr = dot(d, y, hs);
        D[r] = Dr;
        for (int u = u0; u <= t; u++) {
            const float *k = base + (size_t)u * C3 + ko;
            float p = expf(dot(q, k, hs) * scale - lse[r]), g = p * (dot(d, base + (size_t)u * C3 + vo, hs) - Dr) * scale;
            for (int i = 0; i < hs; i++) dq[i] += g * k[i];
        }
    }
}

// dK, dV of key u of K/V head j: the queries t >= u that see it, of every query head sharing j
__global__ void k_fattn_bwd_kv(float *dqkv, const double *D, const float *dout, const float *qkv, const float *lse,
                               int B, int T, int NH, int KV, int hs, int window)
{
    int C = NH * hs, C3 = C + 2 * KV * hs;
    ROWS(r, (size_t)B * KV * T) {
        int u = (int)(r % T), j = (int)(r / T % KV), b = (int)(r / T / KV);
        int ko = C + j * hs, vo = ko + KV * hs, t1 = window > 0 && u + window - 1 < T - 1 ? u + window - 1 : T - 1;
        const float *base = qkv + (size_t)b * T * C3, *k = base + (size_t)u * C3 + ko, *v = base + (size_t)u * C3 + vo;
        float dk[MAXHS], dv[MAXHS], scale = 1.0f / sqrtf((float)hs);
        for (int i = 0; i < hs; i++) dk[i] = dv[i] = 0.0f;
        for (int h = 0; h < NH; h++) {
            if (kv_head(h, NH, KV) != j) continue;
            for (int t = u; t <= t1; t++) {
                size_t row = ((size_t)b * NH + h) * T + t;
                const float *q = base + (size_t)t * C3 + h * hs, *d = dout + ((size_t)b * T + t) * C + h * hs;
                float p = expf(dot(q, k, hs) * scale - lse[row]), g = p * (dot(d, v, hs) - (float)D[row]) * scale;
                for (int i = 0; i < hs; i++) dv[i] += p * d[i], dk[i] += g * q[i];
            }
        }
        float *gk = dqkv + (size_t)b * T * C3 + (size_t)u * C3 + ko, *gv = gk + KV * hs;
        for (int i = 0; i < hs; i++) gk[i] += dk[i], gv[i] += dv[i];
    }
}

static int fattn_ok(mkc_ctx_t *c, int hs)
{
    if (hs <= MAXHS) return 1;
    mkc_fail(c, "the fused attention takes heads of up to 256", __FILE__, __LINE__);
    return 0;
}

void mkc_attention_fused_fwd(void *ctx, float *out, float *lse, const float *qkv, int B, int T, int NH, int KV, int hs,
                             int window)
{
    mkc_ctx_t *c = mkc(ctx);
    size_t rows = (size_t)B * NH * T;
    if (!rows || !fattn_ok(c, hs)) return;
    k_fattn_fwd<<<mkc_grid(rows, 128), 128, 0, c->s>>>(out, lse, qkv, B, T, NH, KV, hs, window);
    LAUNCHED(c);
}

void mkc_attention_fused_bwd(void *ctx, float *dqkv, const float *dout, const float *qkv, const float *out,
                             const float *lse, int B, int T, int NH, int KV, int hs, int window)
{
    mkc_ctx_t *c = mkc(ctx);
    size_t rows = (size_t)B * NH * T;
    if (!rows || !fattn_ok(c, hs)) return;
    double *D = mkc_red(c, rows);
    k_fattn_bwd_q<<<mkc_grid(rows, 128), 128, 0, c->s>>>(dqkv, D, dout, qkv, out, lse, B, T, NH, KV, hs, window);
    LAUNCHED(c);
    k_fattn_bwd_kv<<<mkc_grid((size_t)B * KV * T, 128), 128, 0, c->s>>>(dqkv, D, dout, qkv, lse, B, T, NH, KV, hs,
                                                                          window);
    LAUNCHED(c);
}
