/* CPU kernels of the GPT (fp32), after llm.c's train_gpt2.c.  GEMMs go to
 * OpenBLAS; everything else is a plain loop.  Each kernel has a naive
 * double-precision reference in tests/test_kernels.c. */
#include "config.h"
#include "exec/kernels_cpu.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

void mk_cpu_linear_fwd(void *ctx, float *out, const float *inp, const float *w, const float *bias,
                       int N, int IC, int OC)
{
    (void)ctx;
    if (bias)
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, OC * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, IC, 1.0f, inp, IC, w, IC,
                bias ? 1.0f : 0.0f, out, OC);
}

void mk_cpu_linear_bwd_in(void *ctx, float *dinp, const float *dout, const float *w, int N, int IC, int OC)
{
    (void)ctx;
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, IC, OC, 1.0f, dout, OC, w, IC,
                    1.0f, dinp, IC);
}

void mk_cpu_linear_bwd_w(void *ctx, float *dw, float *dbias, const float *dout, const float *inp,
                         int N, int IC, int OC)
{
    (void)ctx;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, N, 1.0f, dout, OC, inp, IC,
                1.0f, dw, IC);
    if (!dbias) return;
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * OC;
        for (int o = 0; o < OC; o++) dbias[o] += d[o];
    }
}

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
 * with the same operations in the same order (KV_HEAD: kernels_cpu.h). */
void mk_cpu_attention_fwd(void *ctx, float *out, float *att, const float *qkv, int B, int T, int NH, int KV,
                          int hs)
{
    (void)ctx;
    int C = NH * hs, C3 = C + 2 * KV * hs;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            int ko = C + KV_HEAD(h, NH, KV) * hs, vo = ko + KV * hs;
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * C3 + h * hs;
                float *a = att + (((size_t)b * NH + h) * T + t) * T;
                float mx = -INFINITY, sum = 0.0f;
                for (int u = 0; u <= t; u++) {
                    const float *k = qkv + ((size_t)b * T + u) * C3 + ko;
                    float dot = 0.0f;
                    for (int i = 0; i < hs; i++) dot += q[i] * k[i];
                    a[u] = dot * scale;
                    if (a[u] > mx) mx = a[u];
                }
                for (int u = 0; u <= t; u++) { a[u] = expf(a[u] - mx); sum += a[u]; }
                for (int u = 0; u < T; u++) a[u] = u <= t ? a[u] / sum : 0.0f;
                float *o = out + ((size_t)b * T + t) * C + h * hs;
                memset(o, 0, hs * sizeof(float));
                for (int u = 0; u <= t; u++) {
                    const float *v = qkv + ((size_t)b * T + u) * C3 + vo;
                    for (int i = 0; i < hs; i++) o[i] += a[u] * v[i];
                }
            }
        }
}

/* dK/dV of a K/V head accumulate over the query heads that share it, in
 * head order. */
void mk_cpu_attention_bwd(void *ctx, float *dqkv, float *datt, const float *dout, const float *qkv,
                          const float *att, int B, int T, int NH, int KV, int hs)
{
    (void)ctx;
    int C = NH * hs, C3 = C + 2 * KV * hs;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            int ko = C + KV_HEAD(h, NH, KV) * hs, vo = ko + KV * hs;
            for (int t = 0; t < T; t++) {
                const float *a = att + (((size_t)b * NH + h) * T + t) * T;
                float *da = datt + (((size_t)b * NH + h) * T + t) * T;
                const float *d = dout + ((size_t)b * T + t) * C + h * hs;
                const float *q = qkv + ((size_t)b * T + t) * C3 + h * hs;
                float *dq = dqkv + ((size_t)b * T + t) * C3 + h * hs;
                float dot = 0.0f;
                for (int u = 0; u <= t; u++) {   /* through the value mix */
                    const float *v = qkv + ((size_t)b * T + u) * C3 + vo;
                    float *dv = dqkv + ((size_t)b * T + u) * C3 + vo;
                    float s = 0.0f;
                    for (int i = 0; i < hs; i++) { s += v[i] * d[i]; dv[i] += a[u] * d[i]; }
                    da[u] = s;
                    dot += s * a[u];
                }
                for (int u = 0; u <= t; u++) {   /* through the softmax and q.k */
                    float g = a[u] * (da[u] - dot) * scale;
                    const float *k = qkv + ((size_t)b * T + u) * C3 + ko;
                    float *dk = dqkv + ((size_t)b * T + u) * C3 + ko;
                    for (int i = 0; i < hs; i++) { dq[i] += g * k[i]; dk[i] += g * q[i]; }
                }
            }
        }
}

#define GELU_S 0.7978845608028654f /* sqrt(2/pi) */

void mk_cpu_gelu_fwd(void *ctx, float *out, const float *inp, int n)
{
    (void)ctx;
    for (int i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_S * (x + 0.044715f * x * x * x)));
    }
}

void mk_cpu_gelu_bwd(void *ctx, float *dinp, const float *inp, const float *dout, int n)
{
    (void)ctx;
    for (int i = 0; i < n; i++) {
        float x = inp[i], u = GELU_S * (x + 0.044715f * x * x * x);
        float th = tanhf(u), sech2 = 1.0f - th * th;
        float g = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_S * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += g * dout[i];
    }
}

void mk_cpu_add(void *ctx, float *out, const float *a, const float *b, int n)
{
    (void)ctx;
    for (int i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void mk_cpu_acc(void *ctx, float *out, const float *a, int n)
{
    (void)ctx;
    for (int i = 0; i < n; i++) out[i] += a[i];
}

void mk_cpu_xent_max(void *ctx, float *rowmax, const float *logits, int N, int Vl, int v0, int V)
{
    (void)ctx;
    int valid = V - v0 < Vl ? V - v0 : Vl;
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * Vl;
        float m = -INFINITY;
        for (int i = 0; i < valid; i++) if (l[i] > m) m = l[i];
        rowmax[n] = m;
    }
}

void mk_cpu_xent_exp(void *ctx, float *logits, float *rowsum, float *tgt, const float *rowmax,
                     const int *targets, int N, int Vl, int v0, int V)
{
    (void)ctx;
    int valid = V - v0 < Vl ? V - v0 : Vl;
    if (valid < 0) valid = 0;
    for (int n = 0; n < N; n++) {
        float *l = logits + (size_t)n * Vl;
        int r = targets[n] - v0;
        tgt[n] = r >= 0 && r < Vl ? l[r] - rowmax[n] : 0.0f;
        float s = 0.0f;
        for (int i = 0; i < valid; i++) { l[i] = expf(l[i] - rowmax[n]); s += l[i]; }
        for (int i = valid; i < Vl; i++) l[i] = 0.0f;
        rowsum[n] = s;
    }
}

double mk_cpu_xent_loss(void *ctx, float *probs, const float *rowsum, const float *tgt, int N, int Vl)
{
    (void)ctx;
    double loss = 0.0;
    for (int n = 0; n < N; n++) {
        float inv = 1.0f / rowsum[n];
        float *p = probs + (size_t)n * Vl;
        for (int i = 0; i < Vl; i++) p[i] *= inv;
        loss += log((double)rowsum[n]) - tgt[n];
    }
    return loss;
}

void mk_cpu_xent_bwd(void *ctx, float *dlogits, const float *probs, const int *targets, float scale,
                     int N, int Vl, int v0)
{
    (void)ctx;
    for (int n = 0; n < N; n++) {
        const float *p = probs + (size_t)n * Vl;
        float *d = dlogits + (size_t)n * Vl;
        for (int i = 0; i < Vl; i++) d[i] = scale * p[i];
        int r = targets[n] - v0;
        if (r >= 0 && r < Vl) d[r] -= scale;
    }
}

void mk_cpu_adamw(void *ctx, float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                  float beta2, float bc1, float bc2, float eps, float decay, float gscale)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * gscale;
        m[i] = beta1 * m[i] + (1.0f - beta1) * gi;
        v[i] = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        float mh = m[i] / bc1, vh = v[i] / bc2;
        p[i] -= lr * (mh / (sqrtf(vh) + eps) + decay * p[i]);
    }
}

double mk_cpu_sumsq(void *ctx, const float *x, size_t n)
{
    (void)ctx;
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}
