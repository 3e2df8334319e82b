/* CPU kernels of the GPT (fp32), after llm.c's train_gpt2.c.  GEMMs go to
 * OpenBLAS; everything else is a plain loop.  Each kernel has a naive
 * double-precision reference in tests/test_kernels.c. */
#include "config.h"
#include "merak/half.h"
#include "merak/kernels_cpu.h"
#include "merak/model.h"
#include "merak/vec.h"

#include <stdint.h>
#include <math.h>
#include <string.h>

/* The elementwise loops vectorised (MK_VEC, merak/vec.h). */

#define PAR_GRAIN MK_CPU_PAR_GRAIN

void mk_cpu_embed_fwd(void *ctx, float *out, const int *tok, const float *wte, const float *wpe,
                      int N, int T, int C, int v0, int Vl)
{
    (void)ctx;
    for (int n = 0; n < N; n++) {
        float *o = out + (size_t)n * C;
        int r = tok[n] - v0;
        if (r >= 0 && r < Vl) memcpy(o, wte + (size_t)r * C, C * sizeof(float));
        else memset(o, 0, C * sizeof(float));
        if (wpe) {
            const float *p = wpe + (size_t)(n % T) * C;
            for (int c = 0; c < C; c++) o[c] += p[c];
        }
    }
}

void mk_cpu_embed_bwd(void *ctx, float *dwte, float *dwpe, const float *dout, const int *tok,
                      int N, int T, int C, int v0, int Vl)
{
    (void)ctx;
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * C;
        int r = tok[n] - v0;
        if (dwte && r >= 0 && r < Vl)
            for (int c = 0; c < C; c++) dwte[(size_t)r * C + c] += d[c];
        if (dwpe)
            for (int c = 0; c < C; c++) dwpe[(size_t)(n % T) * C + c] += d[c];
    }
}

void mk_cpu_layernorm_fwd(void *ctx, float *out, float *mean, float *rstd, const float *inp,
                          const float *w, const float *b, int N, int C)
{
    (void)ctx;
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float m = 0.0f, v = 0.0f;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
        float s = 1.0f / sqrtf(v / C + 1e-5f);
        float *o = out + (size_t)n * C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * w[c] + b[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

void mk_cpu_layernorm_bwd(void *ctx, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                          const float *w, const float *mean, const float *rstd, int N, int C)
{
    (void)ctx;
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * C, *x = inp + (size_t)n * C;
        float *di = dinp + (size_t)n * C;
        float m = mean[n], s = rstd[n], dnm = 0.0f, dnx = 0.0f;
        for (int c = 0; c < C; c++) {
            float dn = w[c] * d[c];
            dnm += dn;
            dnx += dn * (x[c] - m) * s;
        }
        dnm /= C;
        dnx /= C;
        for (int c = 0; c < C; c++) {
            float xh = (x[c] - m) * s;
            db[c] += d[c];
            dw[c] += xh * d[c];
            di[c] += (w[c] * d[c] - dnm - xh * dnx) * s;
        }
    }
}

/* Query head h reads K/V head h*KV/NH (Hugging Face repeat_kv); the row of
 * qkv is [q (NH*hs) | k (KV*hs) | v (KV*hs)].  KV == NH is the GPT's MHA
 * with the same operations in the same order (KV_HEAD: kernels_cpu.h).
 * The (sequence, head) pairs are independent: split over the rank's cores
 * (forward: by query head; backward: by K/V head, whose dK/dV the query
 * heads sharing it accumulate in head order, as the serial loop does). */
typedef struct {
    float *out, *att, *dqkv, *datt;
    const float *qkv, *dout, *catt;
    int B, T, NH, KV, hs, window;
} attn_t;

/* q.k of one query row with keys 0..t into a[], scaled: four keys at a
 * time, each dot still summed in i order (bitwise the one-key loop). */
void mk_cpu_attn_scores(float *a, const float *q, const float *kbase, size_t ld, int t, int hs, float scale)
{
    int u = 0;
    for (; u + 4 <= t + 1; u += 4) {
        const float *k0 = kbase + u * ld, *k1 = k0 + ld, *k2 = k1 + ld, *k3 = k2 + ld;
        float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
        for (int i = 0; i < hs; i++) {
            d0 += q[i] * k0[i];
            d1 += q[i] * k1[i];
            d2 += q[i] * k2[i];
            d3 += q[i] * k3[i];
        }
        a[u] = d0 * scale, a[u + 1] = d1 * scale, a[u + 2] = d2 * scale, a[u + 3] = d3 * scale;
    }
    for (; u <= t; u++) {
        const float *k = kbase + u * ld;
        float dot = 0.0f;
        for (int i = 0; i < hs; i++) dot += q[i] * k[i];
        a[u] = dot * scale;
    }
}

MK_VEC static void attn_fwd_head(const attn_t *x, int b, int h)
{
    int T = x->T, hs = x->hs, C = x->NH * hs, C3 = C + 2 * x->KV * hs;
    int ko = C + KV_HEAD(h, x->NH, x->KV) * hs, vo = ko + x->KV * hs;
    float scale = 1.0f / sqrtf((float)hs);
    for (int t = 0; t < T; t++) {
        const float *q = x->qkv + ((size_t)b * T + t) * C3 + h * hs;
        float *a = x->att + (((size_t)b * x->NH + h) * T + t) * T;
        float mx = -INFINITY, sum = 0.0f;
        int u0 = x->window > 0 && t >= x->window ? t - x->window + 1 : 0; /* the window's first key */
        mk_cpu_attn_scores(a, q, x->qkv + (size_t)b * T * C3 + ko, C3, t, hs, scale);
        for (int u = u0; u <= t; u++) if (a[u] > mx) mx = a[u];
        for (int u = u0; u <= t; u++) { a[u] = expf(a[u] - mx); sum += a[u]; }
        for (int u = 0; u < T; u++) a[u] = u >= u0 && u <= t ? a[u] / sum : 0.0f;
        float *o = x->out + ((size_t)b * T + t) * C + h * hs;
        memset(o, 0, hs * sizeof(float));
        for (int u = u0; u <= t; u++) {
            const float *v = x->qkv + ((size_t)b * T + u) * C3 + vo;
            for (int i = 0; i < hs; i++) o[i] += a[u] * v[i];
        }
    }
}

static void attn_fwd_part(void *arg, size_t lo, size_t hi)
{
    const attn_t *x = arg;
    for (size_t j = lo; j < hi; j++) attn_fwd_head(x, (int)(j / x->NH), (int)(j % x->NH));
}

/* Heads per thread at least: a thread's share must be worth creating it
 * (about 8 PAR_GRAIN multiply-adds, T^2 hs per head), so small models
 * (and ranks on a busy machine) stay on one thread. */
static size_t attn_grain(int T, int hs)
{
    size_t per = (size_t)T * (size_t)T * (size_t)(hs > 0 ? hs : 1);
    return 8 * PAR_GRAIN / (per ? per : 1) + 1;
}

void mk_cpu_attention_fwd(void *ctx, float *out, float *att, const float *qkv, int B, int T, int NH, int KV,
                          int hs, int window)
{
    (void)ctx;
    attn_t x = {.out = out, .att = att, .qkv = qkv, .B = B, .T = T, .NH = NH, .KV = KV, .hs = hs, .window = window};
    mk_cpu_par(ctx, (size_t)B * NH, attn_grain(T, hs), attn_fwd_part, &x);
}

MK_VEC static void attn_bwd_head(const attn_t *x, int b, int h)
{
    int T = x->T, hs = x->hs, C = x->NH * hs, C3 = C + 2 * x->KV * hs;
    int ko = C + KV_HEAD(h, x->NH, x->KV) * hs, vo = ko + x->KV * hs;
    float scale = 1.0f / sqrtf((float)hs);
    const float *qkv = x->qkv + (size_t)b * T * C3;
    float *dqkv = x->dqkv + (size_t)b * T * C3;
    for (int t = 0; t < T; t++) {
        const float *a = x->catt + (((size_t)b * x->NH + h) * T + t) * T;
        float *da = x->datt + (((size_t)b * x->NH + h) * T + t) * T;
        const float *d = x->dout + ((size_t)b * T + t) * C + h * hs;
        const float *q = qkv + (size_t)t * C3 + h * hs;
        float *dq = dqkv + (size_t)t * C3 + h * hs;
        float dot = 0.0f;
        /* through the value mix: da[u] = v_u . d, dv_u += a[u] d */
        mk_cpu_attn_scores(da, d, qkv + vo, C3, t, hs, 1.0f);
        for (int u = 0; u <= t; u++) {
            float *dv = dqkv + (size_t)u * C3 + vo;
            for (int i = 0; i < hs; i++) dv[i] += a[u] * d[i];
            dot += da[u] * a[u];
        }
        for (int u = 0; u <= t; u++) {   /* through the softmax and q.k */
            float g = a[u] * (da[u] - dot) * scale;
            const float *k = qkv + (size_t)u * C3 + ko;
            float *dk = dqkv + (size_t)u * C3 + ko;
            for (int i = 0; i < hs; i++) { dq[i] += g * k[i]; dk[i] += g * q[i]; }
        }
    }
}

static void attn_bwd_part(void *arg, size_t lo, size_t hi)
{
    const attn_t *x = arg;
    for (size_t j = lo; j < hi; j++) {
        int b = (int)(j / x->KV), kv = (int)(j % x->KV);
        for (int h = 0; h < x->NH; h++)
            if (KV_HEAD(h, x->NH, x->KV) == kv) attn_bwd_head(x, b, h);
    }
}

/* dK/dV of a K/V head accumulate over the query heads that share it, in
 * head order. */
void mk_cpu_attention_bwd(void *ctx, float *dqkv, float *datt, const float *dout, const float *qkv,
                          const float *att, int B, int T, int NH, int KV, int hs)
{
    (void)ctx;
    attn_t x = {.dqkv = dqkv, .datt = datt, .dout = dout, .qkv = qkv, .catt = att,
                .B = B, .T = T, .NH = NH, .KV = KV, .hs = hs};
    int group = KV > 0 && NH / KV > 0 ? NH / KV : 1; /* query heads per K/V head: one unit's work */
    mk_cpu_par(ctx, (size_t)B * KV, attn_grain(T, hs * group), attn_bwd_part, &x);
}

#define GELU_S 0.7978845608028654f /* sqrt(2/pi) */

/* tanh in float as a rational function of u (odd degree-13 numerator,
 * even degree-6 denominator, u clamped to +-7.9053111: tanh rounds to +-1
 * there): plain arithmetic, so the loops below vectorise (libm's tanhf is
 * a call per element, ~10x the rest of GELU: 0.59 CPU-s of a 2.3 s
 * gpt2-124m step).  The coefficients are the minimax fit Eigen uses for
 * float tanh (Eigen/src/Core/MathFunctionsImpl.h, generic_fast_tanh_float);
 * its error against tanh in double over [-10, 10] (2e6 points, float
 * arithmetic as here): at most 3.9e-7 absolute and relative, against
 * 6e-8 for tanhf (tests/test_kernels: GELU within 1e-6 of the double
 * reference, its gradient within 1e-5 of finite differences). */
static inline float tanh_rational(float u)
{
    const float c = 7.90531110763549805f;
    float x = u < -c ? -c : u > c ? c : u, x2 = x * x;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f;
    p = p * x2 - 8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    return x * p / q;
}

/* GELU (tanh form), split over the rank's cores and vectorised. */
typedef struct {
    float *out;
    const float *inp, *dout;
} ew_t;

MK_VEC static void gelu_fwd_range(float *restrict out, const float *restrict inp, size_t lo, size_t hi)
{
    for (size_t i = lo; i < hi; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanh_rational(GELU_S * (x + 0.044715f * x * x * x)));
    }
}

static void gelu_fwd_part(void *arg, size_t lo, size_t hi)
{
    const ew_t *e = arg;
    gelu_fwd_range(e->out, e->inp, lo, hi);
}

void mk_cpu_gelu_fwd(void *ctx, float *out, const float *inp, int n)
{
    (void)ctx;
    ew_t e = {out, inp, NULL};
    mk_cpu_par(ctx, (size_t)n, PAR_GRAIN / 4, gelu_fwd_part, &e);
}

MK_VEC static void gelu_bwd_range(float *restrict dinp, const float *restrict inp, const float *restrict dout,
                                  size_t lo, size_t hi)
{
    for (size_t i = lo; i < hi; i++) {
        float x = inp[i], u = GELU_S * (x + 0.044715f * x * x * x);
        float th = tanh_rational(u), sech2 = 1.0f - th * th;
        float g = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_S * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += g * dout[i];
    }
}

static void gelu_bwd_part(void *arg, size_t lo, size_t hi)
{
    const ew_t *e = arg;
    gelu_bwd_range(e->out, e->inp, e->dout, lo, hi);
}

void mk_cpu_gelu_bwd(void *ctx, float *dinp, const float *inp, const float *dout, int n)
{
    (void)ctx;
    ew_t e = {dinp, inp, dout};
    mk_cpu_par(ctx, (size_t)n, PAR_GRAIN / 4, gelu_bwd_part, &e);
}

MK_VEC void mk_cpu_add(void *ctx, float *out, const float *a, const float *b, int n)
{
    (void)ctx;
    for (int i = 0; i < n; i++) out[i] = a[i] + b[i];
}

MK_VEC void mk_cpu_acc(void *ctx, float *out, const float *a, int n)
{
    (void)ctx;
    for (int i = 0; i < n; i++) out[i] += a[i];
}

/* The vocabulary-wide cross-entropy, its rows split over the rank's cores
 * (each row as the serial loop computes it). */
typedef struct {
    float *l, *rowsum, *tgt, *rowmax, *d;
    const float *cl, *cmax;
    const int *targets;
    int Vl, v0, valid;
    float scale;
} xent_t;

static int xent_valid(int Vl, int v0, int V)
{
    int valid = V - v0 < Vl ? V - v0 : Vl;
    return valid < 0 ? 0 : valid;
}

/* rows of (N, Vl): enough per thread for ~100 us at Vl ~ 50 K */
#define XENT_GRAIN(Vl) (PAR_GRAIN / (size_t)((Vl) > 0 ? (Vl) : 1) + 1)

static void xent_max_part(void *arg, size_t lo, size_t hi)
{
    const xent_t *x = arg;
    for (size_t n = lo; n < hi; n++) {
        const float *l = x->cl + n * x->Vl;
        float m = -INFINITY;
        for (int i = 0; i < x->valid; i++) if (l[i] > m) m = l[i];
        x->rowmax[n] = m;
    }
}

void mk_cpu_xent_max(void *ctx, float *rowmax, const float *logits, int N, int Vl, int v0, int V)
{
    (void)ctx;
    xent_t x = {.rowmax = rowmax, .cl = logits, .Vl = Vl, .valid = xent_valid(Vl, v0, V)};
    mk_cpu_par(ctx, (size_t)N, XENT_GRAIN(Vl), xent_max_part, &x);
}

static void xent_exp_part(void *arg, size_t lo, size_t hi)
{
    const xent_t *x = arg;
    for (size_t n = lo; n < hi; n++) {
        float *l = x->l + n * x->Vl, mx = x->cmax[n];
        int r = x->targets[n] - x->v0;
        x->tgt[n] = r >= 0 && r < x->Vl ? l[r] - mx : 0.0f;
        float s = 0.0f;
        for (int i = 0; i < x->valid; i++) { l[i] = expf(l[i] - mx); s += l[i]; }
        for (int i = x->valid; i < x->Vl; i++) l[i] = 0.0f;
        x->rowsum[n] = s;
    }
}

void mk_cpu_xent_exp(void *ctx, float *logits, float *rowsum, float *tgt, const float *rowmax,
                     const int *targets, int N, int Vl, int v0, int V)
{
    (void)ctx;
    xent_t x = {.l = logits, .rowsum = rowsum, .tgt = tgt, .cmax = rowmax, .targets = targets,
                .Vl = Vl, .v0 = v0, .valid = xent_valid(Vl, v0, V)};
    mk_cpu_par(ctx, (size_t)N, XENT_GRAIN(Vl), xent_exp_part, &x);
}

static void xent_norm_part(void *arg, size_t lo, size_t hi)
{
    const xent_t *x = arg;
    for (size_t n = lo; n < hi; n++) {
        float inv = 1.0f / x->rowsum[n], *p = x->l + n * x->Vl;
        for (int i = 0; i < x->Vl; i++) p[i] *= inv;
    }
}

double mk_cpu_xent_loss(void *ctx, float *probs, const float *rowsum, const float *tgt, int N, int Vl)
{
    (void)ctx;
    xent_t x = {.l = probs, .rowsum = (float *)rowsum, .Vl = Vl};
    mk_cpu_par(ctx, (size_t)N, XENT_GRAIN(Vl), xent_norm_part, &x);
    double loss = 0.0;
    for (int n = 0; n < N; n++) loss += log((double)rowsum[n]) - tgt[n];
    return loss;
}

static void xent_bwd_part(void *arg, size_t lo, size_t hi)
{
    const xent_t *x = arg;
    for (size_t n = lo; n < hi; n++) {
        const float *p = x->cl + n * x->Vl;
        float *d = x->d + n * x->Vl;
        for (int i = 0; i < x->Vl; i++) d[i] = x->scale * p[i];
        int r = x->targets[n] - x->v0;
        if (r >= 0 && r < x->Vl) d[r] -= x->scale;
    }
}

void mk_cpu_xent_bwd(void *ctx, float *dlogits, const float *probs, const int *targets, float scale,
                     int N, int Vl, int v0)
{
    (void)ctx;
    xent_t x = {.d = dlogits, .cl = probs, .targets = targets, .Vl = Vl, .v0 = v0, .scale = scale};
    mk_cpu_par(ctx, (size_t)N, XENT_GRAIN(Vl), xent_bwd_part, &x);
}

/* AdamW, one fused pass over p, g, m, v (28 bytes per parameter moved:
 * memory-bound), vectorised and split over the rank's cores. */
typedef struct {
    float *p, *m, *v;
    const float *g;
    float lr, beta1, beta2, bc1, bc2, eps, decay, gscale;
} adamw_t;

MK_VEC static void adamw_part(void *arg, size_t lo, size_t hi)
{
    const adamw_t *a = arg;
    float *restrict p = a->p, *restrict m = a->m, *restrict v = a->v;
    const float *restrict g = a->g;
    float lr = a->lr, b1 = a->beta1, b2 = a->beta2, bc1 = a->bc1, bc2 = a->bc2, eps = a->eps, wd = a->decay,
          gs = a->gscale;
    for (size_t i = lo; i < hi; i++) {
        float gi = g[i] * gs;
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        float mh = m[i] / bc1, vh = v[i] / bc2;
        p[i] -= lr * (mh / (sqrtf(vh) + eps) + wd * p[i]);
    }
}

void mk_cpu_adamw(void *ctx, float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                  float beta2, float bc1, float bc2, float eps, float decay, float gscale)
{
    (void)ctx;
    adamw_t a = {p, m, v, g, lr, beta1, beta2, bc1, bc2, eps, decay, gscale};
    mk_cpu_par(ctx, n, PAR_GRAIN, adamw_part, &a);
}

/* The sum of squares in double, over SUMSQ_LANES interleaved partial sums
 * (one serial chain of 124 M adds would take ~4 cycles each), then in
 * order; the ranges' sums added in order too, so the result does not
 * depend on the thread count. */
#define SUMSQ_LANES 8
#define SUMSQ_PIECES 64
typedef struct {
    const float *x;
    size_t n;
    double part[SUMSQ_PIECES];
} sumsq_t;

MK_VEC static double sumsq_run(const float *restrict x, size_t n)
{
    double s[SUMSQ_LANES] = {0}, t = 0.0;
    size_t i = 0;
    for (; i + SUMSQ_LANES <= n; i += SUMSQ_LANES)
        for (int j = 0; j < SUMSQ_LANES; j++) s[j] += (double)x[i + j] * x[i + j];
    for (; i < n; i++) t += (double)x[i] * x[i];
    for (int j = 0; j < SUMSQ_LANES; j++) t += s[j];
    return t;
}

static void sumsq_part(void *arg, size_t lo, size_t hi)
{
    sumsq_t *a = arg;
    for (size_t k = lo; k < hi; k++) {  /* piece k of SUMSQ_PIECES equal pieces */
        size_t b = a->n * k / SUMSQ_PIECES, e = a->n * (k + 1) / SUMSQ_PIECES;
        a->part[k] = sumsq_run(a->x + b, e - b);
    }
}

double mk_cpu_sumsq(void *ctx, const float *x, size_t n)
{
    (void)ctx;
    sumsq_t a = {.x = x, .n = n};
    mk_cpu_par(ctx, SUMSQ_PIECES, n >= (size_t)SUMSQ_PIECES * PAR_GRAIN / 8 ? 1 : SUMSQ_PIECES, sumsq_part, &a);
    double s = 0.0;
    for (int k = 0; k < SUMSQ_PIECES; k++) s += a.part[k];
    return s;
}
