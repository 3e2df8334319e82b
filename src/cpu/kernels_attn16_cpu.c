/* The CPU backend's materialised attention with 16-bit probabilities
 * (merak/backend.h attention16_fwd/bwd): the tensors Megatron-LM's unfused
 * core keeps in a bf16/fp16 run, in their 16-bit type, rounded to nearest
 * even where each is made (src/util/half.c), the arithmetic between in
 * fp32 as its kernels do:
 *   forward   scores = scale q.k (baddbmm's 16-bit output), then the fused
 *             softmax reads them, takes max and sum in fp32 (one pass, the
 *             online softmax's rescaling) and writes the 16-bit
 *             probabilities over them (the (T, T) block holds
 *             scores, then probabilities: no second tensor); out = P.V
 *             from the rounded probabilities (bmm's 16-bit inputs).
 *   backward  dP = dout.v (bmm's 16-bit output) into datt; dV += P dout;
 *             dS = P (dP - sum_u dP P) in fp32 from the 16-bit P and dP,
 *             dQ += dS k scale, dK += dS q scale.
 * A (T, T) row goes through KT-wide float tiles on the stack, so no float
 * copy of a row is held.  The fp32 kernels (kernels_cpu.c) are the
 * reference: tests/test_kernels compares the two by normalised error.
 * Split as they are: forward by (sequence, query head), backward by
 * (sequence, K/V head), its query heads adding dK/dV in head order. */
#include "config.h"
#include "merak/kernels_cpu.h"
#include "merak/half.h"
#include "merak/model.h"
#include "merak/vec.h"

#include <math.h>
#include <string.h>

#define KT 64 /* a tile of keys: 256 bytes of floats, in L1 with the row's q and o */

typedef struct {
    float *out, *dqkv;
    uint16_t *att, *datt;
    const float *qkv, *dout;
    const uint16_t *catt;
    int B, T, NH, KV, hs, window, dt;
} attn16_t;

static void narrow(int dt, uint16_t *dst, const float *src, size_t n)
{
    if (dt == MK_DTYPE_FP16) mk_fp16_from_float_n(dst, src, n);
    else mk_bf16_from_float_n(dst, src, n);
}

static void widen(int dt, float *dst, const uint16_t *src, size_t n)
{
    if (dt == MK_DTYPE_FP16) mk_fp16_to_float_n(dst, src, n);
    else mk_bf16_to_float_n(dst, src, n);
}

/* Row t's softmax over its 16-bit scores a[u0..t], then P.V into o (hs):
 * the max and the sum of exp(s - max) in one pass (the sum rescaled when
 * the max grows, the online softmax's way), then each probability rounded
 * in place and o += p v from the rounded value; the keys outside the
 * window 0 (+0.0 in both types). */
MK_VEC static void softmax_pv(const attn16_t *x, uint16_t *a, int u0, int t, const float *vb, size_t ld, float *o)
{
    float s[KT], mx = -INFINITY, sum = 0.0f;
    for (int u = u0; u <= t; u += KT) {
        int n = t + 1 - u < KT ? t + 1 - u : KT;
        float mt = mx;
        widen(x->dt, s, a + u, (size_t)n);
        for (int j = 0; j < n; j++) if (s[j] > mt) mt = s[j];
        if (mt > mx) sum *= expf(mx - mt), mx = mt;
        for (int j = 0; j < n; j++) sum += expf(s[j] - mx);
    }
    memset(o, 0, (size_t)x->hs * sizeof *o);
    for (int u = u0; u <= t; u += KT) {
        int n = t + 1 - u < KT ? t + 1 - u : KT;
        widen(x->dt, s, a + u, (size_t)n);
        for (int j = 0; j < n; j++) s[j] = expf(s[j] - mx) / sum;
        narrow(x->dt, a + u, s, (size_t)n);
        widen(x->dt, s, a + u, (size_t)n);
        for (int j = 0; j < n; j++) {
            const float *v = vb + (size_t)(u + j) * ld;
            for (int i = 0; i < x->hs; i++) o[i] += s[j] * v[i];
        }
    }
    memset(a, 0, (size_t)u0 * sizeof *a);
    memset(a + t + 1, 0, (size_t)(x->T - t - 1) * sizeof *a);
}

MK_VEC static void fwd_head(const attn16_t *x, int b, int h)
{
    int T = x->T, hs = x->hs, C = x->NH * hs, C3 = C + 2 * x->KV * hs;
    int ko = C + KV_HEAD(h, x->NH, x->KV) * hs, vo = ko + x->KV * hs;
    float s[KT], scale = 1.0f / sqrtf((float)hs);
    const float *base = x->qkv + (size_t)b * T * C3;
    for (int t = 0; t < T; t++) {
        const float *q = base + (size_t)t * C3 + h * hs;
        uint16_t *a = x->att + (((size_t)b * x->NH + h) * T + t) * T;
        int u0 = x->window > 0 && t >= x->window ? t - x->window + 1 : 0;
        for (int u = u0; u <= t; u += KT) {
            int n = t + 1 - u < KT ? t + 1 - u : KT;
            mk_cpu_attn_scores(s, q, base + (size_t)u * C3 + ko, C3, n - 1, hs, scale);
            narrow(x->dt, a + u, s, (size_t)n);
        }
        softmax_pv(x, a, u0, t, base + vo, (size_t)C3, x->out + ((size_t)b * T + t) * C + h * hs);
    }
}

static void fwd_part(void *arg, size_t lo, size_t hi)
{
    const attn16_t *x = arg;
    for (size_t j = lo; j < hi; j++) fwd_head(x, (int)(j / x->NH), (int)(j % x->NH));
}

/* (sequence, head) units a thread takes at least: ~T^2 hs / 2 multiply-adds each */
static size_t grain(int T, int hs)
{
    size_t per = (size_t)T * (size_t)T * (size_t)(hs > 0 ? hs : 1) / 2;
    return ((size_t)1 << 19) / (per ? per : 1) + 1;
}

void mk_cpu_attention16_fwd(void *ctx, float *out, uint16_t *att, const float *qkv, int B, int T, int NH, int KV,
                            int hs, int window, int dtype)
{
    attn16_t x = {.out = out, .att = att, .qkv = qkv, .B = B, .T = T, .NH = NH, .KV = KV, .hs = hs,
                  .window = window, .dt = dtype};
    mk_cpu_par(ctx, (size_t)B * NH, grain(T, hs), fwd_part, &x);
}

/* One query row t of head h: dP into its 16-bit row (and dV), then dS. */
MK_VEC static void bwd_row(const attn16_t *x, int b, int h, int t)
{
    int T = x->T, hs = x->hs, C = x->NH * hs, C3 = C + 2 * x->KV * hs;
    int ko = C + KV_HEAD(h, x->NH, x->KV) * hs, vo = ko + x->KV * hs;
    const float *base = x->qkv + (size_t)b * T * C3, *q = base + (size_t)t * C3 + h * hs;
    const float *d = x->dout + ((size_t)b * T + t) * C + h * hs;
    float *dbase = x->dqkv + (size_t)b * T * C3, *dq = dbase + (size_t)t * C3 + h * hs;
    const uint16_t *a = x->catt + (((size_t)b * x->NH + h) * T + t) * T;
    uint16_t *da = x->datt + (((size_t)b * x->NH + h) * T + t) * T;
    float p[KT], dp[KT], dot = 0.0f, scale = 1.0f / sqrtf((float)hs);
    for (int u = 0; u <= t; u += KT) { /* through the value mix */
        int n = t + 1 - u < KT ? t + 1 - u : KT;
        mk_cpu_attn_scores(dp, d, base + (size_t)u * C3 + vo, C3, n - 1, hs, 1.0f);
        narrow(x->dt, da + u, dp, (size_t)n);
        widen(x->dt, dp, da + u, (size_t)n);
        widen(x->dt, p, a + u, (size_t)n);
        for (int j = 0; j < n; j++) {
            float *dv = dbase + (size_t)(u + j) * C3 + vo;
            for (int i = 0; i < hs; i++) dv[i] += p[j] * d[i];
            dot += dp[j] * p[j];
        }
    }
    for (int u = 0; u <= t; u += KT) { /* through the softmax and q.k */
        int n = t + 1 - u < KT ? t + 1 - u : KT;
        widen(x->dt, dp, da + u, (size_t)n);
        widen(x->dt, p, a + u, (size_t)n);
        for (int j = 0; j < n; j++) {
            float g = p[j] * (dp[j] - dot) * scale;
            const float *k = base + (size_t)(u + j) * C3 + ko;
            float *dk = dbase + (size_t)(u + j) * C3 + ko;
            for (int i = 0; i < hs; i++) { dq[i] += g * k[i]; dk[i] += g * q[i]; }
        }
    }
}

static void bwd_part(void *arg, size_t lo, size_t hi)
{
    const attn16_t *x = arg;
    for (size_t j = lo; j < hi; j++) {
        int b = (int)(j / x->KV), kv = (int)(j % x->KV);
        for (int h = 0; h < x->NH; h++)
            for (int t = 0; KV_HEAD(h, x->NH, x->KV) == kv && t < x->T; t++) bwd_row(x, b, h, t);
    }
}

void mk_cpu_attention16_bwd(void *ctx, float *dqkv, uint16_t *datt, const float *dout, const float *qkv,
                            const uint16_t *att, int B, int T, int NH, int KV, int hs, int dtype)
{
    attn16_t x = {.dqkv = dqkv, .datt = datt, .dout = dout, .qkv = qkv, .catt = att, .B = B, .T = T, .NH = NH,
                  .KV = KV, .hs = hs, .dt = dtype};
    int group = KV > 0 && NH / KV > 0 ? NH / KV : 1;
    mk_cpu_par(ctx, (size_t)B * KV, grain(T, hs * group), bwd_part, &x);
}
