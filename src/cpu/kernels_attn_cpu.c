/* The CPU backend's fused causal attention (merak/backend.h
 * attention_fused_fwd/bwd): the FlashAttention-2 algorithm (Dao 2023,
 * arXiv:2307.08691, Algorithms 1 and 2) with a tile of one query row and
 * up to KT keys.  Forward: per row, the running max m and sum l of
 * exp(s - m) over the key tiles, the output rescaled by exp(m_old - m_new)
 * when the max grows, then out = o / l and lse = m + log l.  Backward:
 * D = dout . out per row, then per tile the scores again, p = exp(s - lse),
 * dV += p dout, dS = p (dout . v - D), dQ += dS k scale, dK += dS q scale.
 * No (T, T) tensor: a tile's KT scores live on the stack.  Forward by
 * (sequence, query head); backward by (sequence, K/V head), whose query
 * heads add dK/dV in head order (no two threads write one row). */
#include "config.h"
#include "merak/kernels_cpu.h"

#include <math.h>
#include <string.h>

#define KT 64 /* keys a tile: 256 bytes of scores, in L1 with the row's q and o */

typedef struct {
    float *out, *lse, *dqkv;
    const float *qkv, *dout, *fout, *flse;
    int B, T, NH, KV, hs, window;
} fattn_t;

/* the row's first key: 0, or the window's */
static int first_key(int t, int window) { return window > 0 && t >= window ? t - window + 1 : 0; }

static void fwd_row(const fattn_t *x, int b, int h, int t, float *o)
{
    int T = x->T, hs = x->hs, C = x->NH * hs, C3 = C + 2 * x->KV * hs;
    int ko = C + KV_HEAD(h, x->NH, x->KV) * hs, vo = ko + x->KV * hs;
    const float *base = x->qkv + (size_t)b * T * C3, *q = base + (size_t)t * C3 + h * hs;
    float s[KT], m = -INFINITY, l = 0.0f, scale = 1.0f / sqrtf((float)hs);
    memset(o, 0, hs * sizeof(float));
    for (int u0 = first_key(t, x->window); u0 <= t; u0 += KT) {
        int n = t + 1 - u0 < KT ? t + 1 - u0 : KT;
        mk_cpu_attn_scores(s, q, base + (size_t)u0 * C3 + ko, C3, n - 1, hs, scale);
        float mt = m;
        for (int u = 0; u < n; u++) if (s[u] > mt) mt = s[u];
        float corr = expf(m - mt); /* 0 on the first tile (m = -inf) */
        l *= corr;
        for (int i = 0; i < hs; i++) o[i] *= corr;
        for (int u = 0; u < n; u++) {
            float p = expf(s[u] - mt);
            const float *v = base + (size_t)(u0 + u) * C3 + vo;
            l += p;
            for (int i = 0; i < hs; i++) o[i] += p * v[i];
        }
        m = mt;
    }
    for (int i = 0; i < hs; i++) o[i] /= l;
    x->lse[((size_t)b * x->NH + h) * T + t] = m + logf(l);
}

static void fwd_part(void *arg, size_t lo, size_t hi)
{
    const fattn_t *x = arg;
    for (size_t j = lo; j < hi; j++) {
        int b = (int)(j / x->NH), h = (int)(j % x->NH);
        for (int t = 0; t < x->T; t++) fwd_row(x, b, h, t, x->out + ((size_t)b * x->T + t) * x->NH * x->hs + h * x->hs);
    }
}

/* (sequence, head) units a thread takes at least: ~T^2 hs / 2 multiply-adds each */
static size_t grain(int T, int hs)
{
    size_t per = (size_t)T * (size_t)T * (size_t)(hs > 0 ? hs : 1) / 2;
    return ((size_t)1 << 19) / (per ? per : 1) + 1;
}

void mk_cpu_attention_fused_fwd(void *ctx, float *out, float *lse, const float *qkv, int B, int T, int NH, int KV,
                                int hs, int window)
{
    fattn_t x = {.out = out, .lse = lse, .qkv = qkv, .B = B, .T = T, .NH = NH, .KV = KV, .hs = hs, .window = window};
    mk_cpu_par(ctx, (size_t)B * NH, grain(T, hs), fwd_part, &x);
}

static void bwd_row(const fattn_t *x, int b, int h, int t)
{
    int T = x->T, hs = x->hs, C = x->NH * hs, C3 = C + 2 * x->KV * hs;
    int ko = C + KV_HEAD(h, x->NH, x->KV) * hs, vo = ko + x->KV * hs;
    const float *base = x->qkv + (size_t)b * T * C3, *q = base + (size_t)t * C3 + h * hs;
    const float *d = x->dout + ((size_t)b * T + t) * C + h * hs, *o = x->fout + ((size_t)b * T + t) * C + h * hs;
    float *dbase = x->dqkv + (size_t)b * T * C3, *dq = dbase + (size_t)t * C3 + h * hs;
    float s[KT], dp[KT], scale = 1.0f / sqrtf((float)hs), lse = x->flse[((size_t)b * x->NH + h) * T + t], D = 0.0f;
    for (int i = 0; i < hs; i++) D += d[i] * o[i];
    for (int u0 = first_key(t, x->window); u0 <= t; u0 += KT) {
        int n = t + 1 - u0 < KT ? t + 1 - u0 : KT;
        mk_cpu_attn_scores(s, q, base + (size_t)u0 * C3 + ko, C3, n - 1, hs, scale);
        mk_cpu_attn_scores(dp, d, base + (size_t)u0 * C3 + vo, C3, n - 1, hs, 1.0f); /* dout . v */
        for (int u = 0; u < n; u++) {
            float p = expf(s[u] - lse), g = p * (dp[u] - D) * scale;
            const float *k = base + (size_t)(u0 + u) * C3 + ko;
            float *dk = dbase + (size_t)(u0 + u) * C3 + ko, *dv = dbase + (size_t)(u0 + u) * C3 + vo;
            for (int i = 0; i < hs; i++) {
                dv[i] += p * d[i];
                dq[i] += g * k[i];
                dk[i] += g * q[i];
            }
        }
    }
}

static void bwd_part(void *arg, size_t lo, size_t hi)
{
    const fattn_t *x = arg;
    for (size_t j = lo; j < hi; j++) {
        int b = (int)(j / x->KV), kv = (int)(j % x->KV);
        for (int h = 0; h < x->NH; h++)
            for (int t = 0; KV_HEAD(h, x->NH, x->KV) == kv && t < x->T; t++) bwd_row(x, b, h, t);
    }
}

void mk_cpu_attention_fused_bwd(void *ctx, float *dqkv, const float *dout, const float *qkv, const float *out,
                                const float *lse, int B, int T, int NH, int KV, int hs, int window)
{
    fattn_t x = {.dqkv = dqkv, .dout = dout, .qkv = qkv, .fout = out, .flse = lse, .B = B, .T = T, .NH = NH, .KV = KV,
                 .hs = hs, .window = window};
    int group = KV > 0 && NH / KV > 0 ? NH / KV : 1;
    mk_cpu_par(ctx, (size_t)B * KV, grain(T, hs * group), bwd_part, &x);
}
