/* Every CPU kernel (the GPT's and the Llama family's) against a naive
 * double-precision reference written here:
 * forwards compared directly, backwards against central finite differences
 * of the reference forward (L = sum(out * r) for a random r). */
#include "config.h"
#include "check.h"
#include "merak/kernels_cpu.h"
#include "merak/half.h"
#include "merak/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef void (*ref_fn)(double *out, const double *x, const void *ctx);

static unsigned long long rng = 88172645463325252ULL;
static double urand(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}
static void fill(float *f, double *d, int n, double s)
{
    for (int i = 0; i < n; i++) { f[i] = (float)(s * urand()); if (d) d[i] = f[i]; }
}

/* norm(got - want) / norm(want) */
static double rel(const float *got, const double *want, int n)
{
    double d = 0, w = 0;
    for (int i = 0; i < n; i++) { d += (got[i] - want[i]) * (got[i] - want[i]); w += want[i] * want[i]; }
    return sqrt(d / (w > 0 ? w : 1e-300));
}

/* grad[i] = d/dx_i sum(out * r) by central differences of the reference */
static void fd(ref_fn f, const void *ctx, double *x, int nx, int nout, const double *r, double *grad)
{
    double *o = malloc(nout * sizeof *o), h = 1e-6;
    for (int i = 0; i < nx; i++) {
        double keep = x[i], lp = 0, lm = 0;
        x[i] = keep + h; f(o, x, ctx); for (int k = 0; k < nout; k++) lp += o[k] * r[k];
        x[i] = keep - h; f(o, x, ctx); for (int k = 0; k < nout; k++) lm += o[k] * r[k];
        x[i] = keep;
        grad[i] = (lp - lm) / (2 * h);
    }
    free(o);
}

/* ---- linear: x = [inp (N,IC) | w (OC,IC) | b (OC)] ---- */
typedef struct { int N, IC, OC; } lin_t;
static void ref_linear(double *out, const double *x, const void *c)
{
    const lin_t *s = c;
    const double *in = x, *w = x + s->N * s->IC, *b = w + s->OC * s->IC;
    for (int n = 0; n < s->N; n++)
        for (int o = 0; o < s->OC; o++) {
            double a = b[o];
            for (int i = 0; i < s->IC; i++) a += in[n * s->IC + i] * w[o * s->IC + i];
            out[n * s->OC + o] = a;
        }
}

static void test_linear(void)
{
    lin_t s = {6, 5, 7};
    int nx = s.N * s.IC + s.OC * s.IC + s.OC, no = s.N * s.OC;
    float *xf = malloc(nx * sizeof *xf), *out = malloc(no * sizeof *out), *r = malloc(no * sizeof *r);
    double *x = malloc(nx * sizeof *x), *ref = malloc(no * sizeof *ref), *rd = malloc(no * sizeof *rd);
    double *g = malloc(nx * sizeof *g);
    fill(xf, x, nx, 1.0); fill(r, rd, no, 1.0);
    float *in = xf, *w = xf + s.N * s.IC, *b = w + s.OC * s.IC;
    mk_cpu_linear_fwd(NULL, out, in, w, b, s.N, s.IC, s.OC);
    ref_linear(ref, x, &s);
    CHECK(rel(out, ref, no) < 1e-6, "linear fwd rel %g", rel(out, ref, no));
    float *dg = calloc(nx, sizeof *dg);
    mk_cpu_linear_bwd_in(NULL, dg, r, w, s.N, s.IC, s.OC);
    mk_cpu_linear_bwd_w(NULL, dg + s.N * s.IC, dg + s.N * s.IC + s.OC * s.IC, r, in, s.N, s.IC, s.OC);
    fd(ref_linear, &s, x, nx, no, rd, g);
    CHECK(rel(dg, g, nx) < 1e-6, "linear bwd rel %g", rel(dg, g, nx));
    free(xf); free(out); free(r); free(x); free(ref); free(rd); free(g); free(dg);
}

/* ---- layernorm: x = [inp (N,C) | w (C) | b (C)] ---- */
typedef struct { int N, C; } ln_t;
static void ref_ln(double *out, const double *x, const void *c)
{
    const ln_t *s = c;
    const double *w = x + s->N * s->C, *b = w + s->C;
    for (int n = 0; n < s->N; n++) {
        const double *v = x + n * s->C;
        double m = 0, var = 0;
        for (int i = 0; i < s->C; i++) m += v[i];
        m /= s->C;
        for (int i = 0; i < s->C; i++) var += (v[i] - m) * (v[i] - m);
        var /= s->C;
        for (int i = 0; i < s->C; i++) out[n * s->C + i] = (v[i] - m) / sqrt(var + 1e-5) * w[i] + b[i];
    }
}

static void test_layernorm(void)
{
    ln_t s = {4, 16};
    int nx = s.N * s.C + 2 * s.C, no = s.N * s.C;
    float xf[96], out[64], r[64], mean[4], rstd[4], dg[96] = {0};
    double x[96], ref[64], rd[64], g[96];
    fill(xf, x, nx, 1.0); fill(r, rd, no, 1.0);
    mk_cpu_layernorm_fwd(NULL, out, mean, rstd, xf, xf + no, xf + no + s.C, s.N, s.C);
    ref_ln(ref, x, &s);
    CHECK(rel(out, ref, no) < 1e-5, "layernorm fwd rel %g", rel(out, ref, no));
    mk_cpu_layernorm_bwd(NULL, dg, dg + no, dg + no + s.C, r, xf, xf + no, mean, rstd, s.N, s.C);
    fd(ref_ln, &s, x, nx, no, rd, g);
    CHECK(rel(dg, g, nx) < 1e-4, "layernorm bwd rel %g", rel(dg, g, nx));
}

/* ---- causal grouped-query attention: x = qkv (B,T,(NH+2KV)hs); query
   head h uses K/V head h*KV/NH (repeat_kv); with a sliding window W > 0
   query t sees keys u with t - W < u <= t (Hugging Face's sliding_window)
   ---- */
typedef struct { int B, T, NH, KV, hs, W; } att_t;
static void ref_att(double *out, const double *x, const void *c)
{
    const att_t *s = c;
    int C = s->NH * s->hs, C3 = C + 2 * s->KV * s->hs;
    double *p = malloc(s->T * sizeof *p);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->NH; h++)
            for (int t = 0; t < s->T; t++) {
                int kh = h / (s->NH / s->KV), ko = C + kh * s->hs, vo = C + (s->KV + kh) * s->hs;
                const double *q = x + (b * s->T + t) * C3 + h * s->hs;
                double mx = -1e300, sum = 0;
                int lo = s->W > 0 && t - s->W + 1 > 0 ? t - s->W + 1 : 0;
                for (int u = 0; u <= t; u++) p[u] = 0;
                for (int u = lo; u <= t; u++) {
                    const double *k = x + (b * s->T + u) * C3 + ko;
                    double d = 0;
                    for (int i = 0; i < s->hs; i++) d += q[i] * k[i];
                    p[u] = d / sqrt((double)s->hs);
                    if (p[u] > mx) mx = p[u];
                }
                for (int u = lo; u <= t; u++) { p[u] = exp(p[u] - mx); sum += p[u]; }
                for (int i = 0; i < s->hs; i++) {
                    double a = 0;
                    for (int u = lo; u <= t; u++) a += p[u] / sum * x[(b * s->T + u) * C3 + vo + i];
                    out[(b * s->T + t) * C + h * s->hs + i] = a;
                }
            }
    free(p);
}

/* MHA (KV = NH, the GPT's), GQA and MQA (KV = 1); W > 0 a sliding window */
static void test_attention(int NH, int KV, int W)
{
    att_t s = {2, 5, NH, KV, 3, W};
    int C = s.NH * s.hs, nx = s.B * s.T * (C + 2 * KV * s.hs), no = s.B * s.T * C, na = s.B * s.NH * s.T * s.T;
    float *xf = malloc(nx * 4), *out = malloc(no * 4), *r = malloc(no * 4), *att = malloc(na * 4);
    float *datt = malloc(na * 4), *dg = calloc(nx, 4);
    double *x = malloc(nx * 8), *ref = malloc(no * 8), *rd = malloc(no * 8), *g = malloc(nx * 8);
    fill(xf, x, nx, 1.0); fill(r, rd, no, 1.0);
    mk_cpu_attention_fwd(NULL, out, att, xf, s.B, s.T, s.NH, s.KV, s.hs, W);
    ref_att(ref, x, &s);
    CHECK(rel(out, ref, no) < 1e-5, "attention NH %d KV %d W %d fwd rel %g", NH, KV, W, rel(out, ref, no));
    if (W) { /* and the window changes the result: the causal reference misses it */
        att_t c = s;
        c.W = 0;
        double *full = malloc(no * 8);
        ref_att(full, x, &c);
        CHECK(rel(out, full, no) > 1e-3, "window %d: the unwindowed attention gives the same (rel %g)", W,
              rel(out, full, no));
        free(full);
    }
    mk_cpu_attention_bwd(NULL, dg, datt, r, xf, att, s.B, s.T, s.NH, s.KV, s.hs);
    fd(ref_att, &s, x, nx, no, rd, g);
    CHECK(rel(dg, g, nx) < 1e-4, "attention NH %d KV %d W %d bwd rel %g", NH, KV, W, rel(dg, g, nx));
    free(xf); free(out); free(r); free(att); free(datt); free(dg); free(x); free(ref); free(rd); free(g);
}

/* The fused attention (FlashAttention-2: tiles of 64 keys, the online
 * softmax, lse kept) against the unfused kernel (itself checked against
 * the double reference and finite differences above) by normalised error,
 * forward and backward, on sequences of several tiles; the forward also
 * against the double reference, and lse against log sum exp. */
static void test_attention_fused(int NH, int KV, int W)
{
    att_t s = {2, 150, NH, KV, 8, W};
    int C = s.NH * s.hs, nx = s.B * s.T * (C + 2 * KV * s.hs), no = s.B * s.T * C, na = s.B * s.NH * s.T * s.T;
    int nl = s.B * s.NH * s.T;
    float *xf = malloc(nx * 4), *out = malloc(no * 4), *fo = malloc(no * 4), *r = malloc(no * 4);
    float *att = malloc(na * 4), *datt = malloc(na * 4), *dg = calloc(nx, 4), *fg = calloc(nx, 4);
    float *lse = malloc(nl * 4);
    double *x = malloc(nx * 8), *ref = malloc(no * 8), *rd = malloc(no * 8), *d64 = malloc(nx * 8);
    fill(xf, x, nx, 1.0); fill(r, rd, no, 1.0);
    mk_cpu_attention_fwd(NULL, out, att, xf, s.B, s.T, s.NH, s.KV, s.hs, W);
    mk_cpu_attention_fused_fwd(NULL, fo, lse, xf, s.B, s.T, s.NH, s.KV, s.hs, W);
    ref_att(ref, x, &s);
    double *o64 = malloc(no * 8);
    for (int i = 0; i < no; i++) o64[i] = out[i];
    CHECK(rel(fo, o64, no) < 1e-6, "fused attention NH %d KV %d W %d fwd vs unfused rel %g", NH, KV, W,
          rel(fo, o64, no));
    CHECK(rel(fo, ref, no) < 1e-5, "fused attention NH %d KV %d W %d fwd rel %g", NH, KV, W, rel(fo, ref, no));
    /* lse of the last query row of head 0, sequence 0, from the unfused probabilities' own scores */
    mk_cpu_attention_bwd(NULL, dg, datt, r, xf, att, s.B, s.T, s.NH, s.KV, s.hs);
    mk_cpu_attention_fused_bwd(NULL, fg, r, xf, fo, lse, s.B, s.T, s.NH, s.KV, s.hs, W);
    for (int i = 0; i < nx; i++) d64[i] = dg[i];
    CHECK(rel(fg, d64, nx) < 1e-5, "fused attention NH %d KV %d W %d bwd vs unfused rel %g", NH, KV, W,
          rel(fg, d64, nx));
    double worst = 0; /* lse of sequence 0, head 0, every row: log sum_u exp(q.k_u / sqrt(hs)) in double */
    int C3 = C + 2 * KV * s.hs;
    for (int t = 0; t < s.T; t++) {
        int lo = W > 0 && t - W + 1 > 0 ? t - W + 1 : 0;
        double sum = 0;
        for (int u = lo; u <= t; u++) {
            double d = 0;
            for (int i = 0; i < s.hs; i++) d += x[t * C3 + i] * x[u * C3 + C + i];
            sum += exp(d / sqrt((double)s.hs));
        }
        if (fabs(log(sum) - lse[t]) > worst) worst = fabs(log(sum) - lse[t]);
    }
    CHECK(worst < 1e-5, "fused attention NH %d KV %d W %d: lse off by %g", NH, KV, W, worst);
    free(xf); free(out); free(fo); free(r); free(att); free(datt); free(dg); free(fg); free(lse);
    free(x); free(ref); free(rd); free(d64); free(o64);
}

/* The materialised attention with 16-bit probabilities (a bf16/fp16 run's
 * unfused core) against the fp32 kernel on the same 16-bit inputs, by
 * normalised error within the type's rounding (bf16 keeps 8 bits, fp16
 * 11): the output, the probabilities, the backward's dP (datt) and input
 * gradient; each differs from fp32's (the rounding is there), the keys
 * outside a window hold 0, and a row's probabilities sum to 1 within the
 * rounding of its T values. */
static void widen16(int dt, double *dst, const uint16_t *src, int n)
{
    for (int i = 0; i < n; i++) dst[i] = dt == MK_DTYPE_FP16 ? mk_fp16_to_float(src[i]) : mk_bf16_to_float(src[i]);
}

static void test_attention16(int dt, int NH, int KV, int W)
{
    att_t s = {2, 150, NH, KV, 8, W};
    int C = s.NH * s.hs, nx = s.B * s.T * (C + 2 * KV * s.hs), no = s.B * s.T * C, na = s.B * s.NH * s.T * s.T;
    double tol = dt == MK_DTYPE_FP16 ? 0x1p-11 : 0x1p-8; /* the type's epsilon: twice its worst rounding */
    const char *nm = dt == MK_DTYPE_FP16 ? "fp16" : "bf16";
    float *xf = malloc(nx * 4), *out = malloc(no * 4), *o16 = malloc(no * 4), *r = malloc(no * 4);
    float *att = malloc(na * 4), *datt = malloc(na * 4), *dg = calloc(nx, 4), *dg16 = calloc(nx, 4);
    uint16_t *a16 = malloc(na * 2), *da16 = malloc(na * 2);
    double *w = malloc(na * 8), *o64 = malloc((na > nx ? na : nx) * 8); /* na >= no */
    fill(xf, NULL, nx, 1.0); fill(r, NULL, no, 1.0);
    if (dt == MK_DTYPE_FP16) mk_fp16_round_n(xf, xf, nx); else mk_bf16_round_n(xf, xf, nx); /* the run's q|k|v */
    mk_cpu_attention_fwd(NULL, out, att, xf, s.B, s.T, s.NH, s.KV, s.hs, W);
    mk_cpu_attention16_fwd(NULL, o16, a16, xf, s.B, s.T, s.NH, s.KV, s.hs, W, dt);
    for (int i = 0; i < no; i++) o64[i] = out[i];
    double e = rel(o16, o64, no);
    CHECK(e < tol && e > 0, "attention16 %s NH %d KV %d W %d: out rel %g (fp32's, rounded)", nm, NH, KV, W, e);
    widen16(dt, w, a16, na);
    for (int i = 0; i < na; i++) o64[i] = att[i];
    float *wf = malloc(na * 4);
    for (int i = 0; i < na; i++) wf[i] = (float)w[i];
    e = rel(wf, o64, na);
    CHECK(e < tol && e > 0, "attention16 %s NH %d KV %d W %d: probabilities rel %g", nm, NH, KV, W, e);
    double worst = 0;
    int outside = 0;
    for (int row = 0; row < s.B * s.NH * s.T; row++) {
        int t = row % s.T, lo = W > 0 && t - W + 1 > 0 ? t - W + 1 : 0;
        double sum = 0;
        for (int u = 0; u < s.T; u++) {
            if (u < lo || u > t) outside += w[(size_t)row * s.T + u] != 0;
            else sum += w[(size_t)row * s.T + u];
        }
        if (fabs(sum - 1) > worst) worst = fabs(sum - 1);
    }
    CHECK(outside == 0, "attention16 %s W %d: %d probabilities outside the keys seen", nm, W, outside);
    CHECK(worst < 4 * tol, "attention16 %s: a row sums to 1 +- %g", nm, worst);
    mk_cpu_attention_bwd(NULL, dg, datt, r, xf, att, s.B, s.T, s.NH, s.KV, s.hs);
    mk_cpu_attention16_bwd(NULL, dg16, da16, r, xf, a16, s.B, s.T, s.NH, s.KV, s.hs, dt);
    for (int i = 0; i < nx; i++) o64[i] = dg[i];
    e = rel(dg16, o64, nx);
    CHECK(e < 2 * tol && e > 0, "attention16 %s NH %d KV %d W %d: bwd rel %g", nm, NH, KV, W, e);
    double d = 0, n2 = 0; /* dP on and below the diagonal, where the kernels write it */
    for (int row = 0; row < s.B * s.NH * s.T; row++)
        for (int u = 0; u <= row % s.T; u++) {
            size_t i = (size_t)row * s.T + u;
            double x = dt == MK_DTYPE_FP16 ? mk_fp16_to_float(da16[i]) : mk_bf16_to_float(da16[i]);
            d += (x - datt[i]) * (x - datt[i]), n2 += (double)datt[i] * datt[i];
        }
    CHECK(sqrt(d / n2) <= tol / 2, "attention16 %s: dP rel %g (one rounding)", nm, sqrt(d / n2));
    free(xf); free(out); free(o16); free(r); free(att); free(datt); free(dg); free(dg16); free(a16); free(da16);
    free(w); free(o64); free(wf);
}

/* ---- GELU (tanh) ---- */
static void ref_gelu(double *out, const double *x, const void *c)
{
    int n = *(const int *)c;
    for (int i = 0; i < n; i++)
        out[i] = 0.5 * x[i] * (1 + tanh(sqrt(2 / M_PI) * (x[i] + 0.044715 * x[i] * x[i] * x[i])));
}

static void test_gelu(void)
{
    int n = 50;
    float xf[50], out[50], r[50], dg[50] = {0};
    double x[50], ref[50], rd[50], g[50];
    fill(xf, x, n, 3.0); fill(r, rd, n, 1.0);
    mk_cpu_gelu_fwd(NULL, out, xf, n);
    ref_gelu(ref, x, &n);
    CHECK(rel(out, ref, n) < 1e-6, "gelu fwd rel %g", rel(out, ref, n));
    mk_cpu_gelu_bwd(NULL, dg, xf, r, n);
    fd(ref_gelu, &n, x, n, n, rd, g);
    CHECK(rel(dg, g, n) < 1e-5, "gelu bwd rel %g", rel(dg, g, n));
}

/* ---- RMSNorm: x = [inp (N,C) | w (C)] ---- */
typedef struct { int N, C; double eps; } rms_t;
static void ref_rms(double *out, const double *x, const void *c)
{
    const rms_t *s = c;
    const double *w = x + s->N * s->C;
    for (int n = 0; n < s->N; n++) {
        const double *v = x + n * s->C;
        double ms = 0;
        for (int i = 0; i < s->C; i++) ms += v[i] * v[i];
        ms /= s->C;
        for (int i = 0; i < s->C; i++) out[n * s->C + i] = v[i] / sqrt(ms + s->eps) * w[i];
    }
}

static void test_rmsnorm(void)
{
    rms_t s = {4, 16, 1e-2};  /* a large eps, so that a dropped eps fails */
    int nx = s.N * s.C + s.C, no = s.N * s.C;
    float xf[80], out[64], r[64], rstd[4], dg[80] = {0};
    double x[80], ref[64], rd[64], g[80];
    fill(xf, x, nx, 0.3); fill(r, rd, no, 1.0);
    mk_cpu_rmsnorm_fwd(NULL, out, rstd, xf, xf + no, (float)s.eps, s.N, s.C);
    ref_rms(ref, x, &s);
    CHECK(rel(out, ref, no) < 1e-5, "rmsnorm fwd rel %g", rel(out, ref, no));
    mk_cpu_rmsnorm_bwd(NULL, dg, dg + no, r, xf, xf + no, rstd, s.N, s.C);
    fd(ref_rms, &s, x, nx, no, rd, g);
    CHECK(rel(dg, g, nx) < 1e-4, "rmsnorm bwd rel %g", rel(dg, g, nx));
}

/* ---- RoPE (rotate-half): x = rows (N, ld), the first nh heads rotated ---- */
typedef struct { int N, T, nh, hs, ld; mk_rope_t r; } rope_t;

/* transformers' _compute_llama3_parameters, step by step as it is written
 * there (torch.where on wavelengths), for one frequency */
static double ref_rope_freq(const mk_rope_t *r, int i, int hs)
{
    double f = 1.0 / pow(r->theta, 2.0 * i / hs);
    if (r->factor == 0) return f;
    double low_wavelen = r->orig / r->low_freq, high_wavelen = r->orig / r->high_freq;
    double wavelen = 2 * M_PI / f;
    double llama = wavelen > low_wavelen ? f / r->factor : f;
    double smooth = (r->orig / wavelen - r->low_freq) / (r->high_freq - r->low_freq);
    double smoothed = (1 - smooth) * llama / r->factor + smooth * llama;
    int medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    return medium ? smoothed : llama;
}

static void ref_rope(double *out, const double *x, const void *c)
{
    const rope_t *s = c;
    int h2 = s->hs / 2;
    for (int n = 0; n < s->N; n++) {
        for (int k = 0; k < s->ld; k++) out[n * s->ld + k] = x[n * s->ld + k];
        for (int h = 0; h < s->nh; h++)
            for (int i = 0; i < h2; i++) {
                /* Hugging Face: q cos + rotate_half(q) sin at angle position * inv_freq_i */
                double a = (n % s->T) * ref_rope_freq(&s->r, i, s->hs);
                double x1 = x[n * s->ld + h * s->hs + i], x2 = x[n * s->ld + h * s->hs + i + h2];
                out[n * s->ld + h * s->hs + i] = x1 * cos(a) - x2 * sin(a);
                out[n * s->ld + h * s->hs + i + h2] = x2 * cos(a) + x1 * sin(a);
            }
    }
}

static void test_rope_case(const mk_rope_t *r)
{
    /* two sequences (positions restart at n = T), 3 rotated heads of 8 and one left alone */
    rope_t s = {2 * 6, 6, 3, 8, 4 * 8, *r};
    int n = s.N * s.ld;
    float *xf = malloc(n * 4), *out = malloc(n * 4), *rf = malloc(n * 4), *dg = malloc(n * 4);
    double *x = malloc(n * 8), *ref = malloc(n * 8), *rd = malloc(n * 8), *g = malloc(n * 8);
    fill(xf, x, n, 1.0); fill(rf, rd, n, 1.0);
    mk_cpu_rope_fwd(NULL, out, xf, s.N, s.T, s.nh, s.hs, s.ld, r);
    ref_rope(ref, x, &s);
    CHECK(rel(out, ref, n) < 1e-6, "rope fwd rel %g (factor %g)", rel(out, ref, n), r->factor);
    mk_cpu_rope_bwd(NULL, dg, rf, s.N, s.T, s.nh, s.hs, s.ld, r);
    fd(ref_rope, &s, x, n, n, rd, g);
    CHECK(rel(dg, g, n) < 1e-6, "rope bwd rel %g (factor %g)", rel(dg, g, n), r->factor);
    memcpy(dg, xf, n * 4);  /* in place gives the same; the backward undoes the forward */
    mk_cpu_rope_fwd(NULL, dg, dg, s.N, s.T, s.nh, s.hs, s.ld, r);
    CHECK(!memcmp(dg, out, n * 4), "rope fwd in place differs");
    mk_cpu_rope_bwd(NULL, dg, dg, s.N, s.T, s.nh, s.hs, s.ld, r);
    for (int i = 0; i < n; i++) ref[i] = xf[i];
    CHECK(rel(dg, ref, n) < 1e-6, "rope bwd(fwd(x)) rel %g", rel(dg, ref, n));
    free(xf); free(out); free(rf); free(dg); free(x); free(ref); free(rd); free(g);
}

static void test_rope(void)
{
    mk_rope_t plain = {10000.0, 0, 0, 0, 0};
    test_rope_case(&plain);
    /* Llama 3.1's scaling with an original context of 1000: the four
     * wavelengths of hs = 8 (6.3, 63, 628, 6283) fall in all three bands
     * (kept below 250, smoothed between, divided by 8 above 1000) */
    mk_rope_t llama3 = {10000.0, 8.0, 1.0, 4.0, 1000.0};
    test_rope_case(&llama3);
    /* and the scaling moves the angles: the plain rotation misses */
    rope_t s = {2 * 6, 6, 3, 8, 4 * 8, llama3};
    int n = s.N * s.ld;
    float *xf = malloc(n * 4), *out = malloc(n * 4);
    double *x = malloc(n * 8), *ref = malloc(n * 8);
    fill(xf, x, n, 1.0);
    mk_cpu_rope_fwd(NULL, out, xf, s.N, s.T, s.nh, s.hs, s.ld, &plain);
    ref_rope(ref, x, &s);
    CHECK(rel(out, ref, n) > 1e-3, "unscaled rope matches the scaled reference (rel %g)", rel(out, ref, n));
    free(xf); free(out); free(x); free(ref);
}

/* ---- SwiGLU: x = gu (N, 2F), rows [gate (F) | up (F)] ---- */
typedef struct { int N, F; } glu_t;
static void ref_swiglu(double *out, const double *x, const void *c)
{
    const glu_t *s = c;
    for (int n = 0; n < s->N; n++)
        for (int i = 0; i < s->F; i++) {
            double g = x[n * 2 * s->F + i], u = x[n * 2 * s->F + s->F + i];
            out[n * s->F + i] = g / (1 + exp(-g)) * u;
        }
}

static void test_swiglu(void)
{
    glu_t s = {5, 10};
    int n = s.N * s.F;
    float xf[100], out[50], r[50], dg[100] = {0};
    double x[100], ref[50], rd[50], g[100];
    fill(xf, x, 2 * n, 4.0); fill(r, rd, n, 1.0);
    mk_cpu_swiglu_fwd(NULL, out, xf, s.N, s.F);
    ref_swiglu(ref, x, &s);
    CHECK(rel(out, ref, n) < 1e-6, "swiglu fwd rel %g", rel(out, ref, n));
    mk_cpu_swiglu_bwd(NULL, dg, r, xf, s.N, s.F);
    fd(ref_swiglu, &s, x, 2 * n, n, rd, g);
    CHECK(rel(dg, g, 2 * n) < 1e-5, "swiglu bwd rel %g", rel(dg, g, 2 * n));
}

/* ---- MoE router: x = logits (N,E); out = [top-k weights (N,k) | probs (N,E)]
 * for the top-k sets fixed at the base point (their gradient is the
 * kernel's: the aux term enters as dpe on every row's probabilities) ---- */
typedef struct { int N, E, k, renorm; const int *topi; } route_t;
static void ref_route(double *out, const double *x, const void *c)
{
    const route_t *s = c;
    for (int n = 0; n < s->N; n++) {
        const double *l = x + n * s->E;
        double *p = out + s->N * s->k + n * s->E, mx = l[0], sum = 0, sk = 0;
        for (int e = 1; e < s->E; e++) if (l[e] > mx) mx = l[e];
        for (int e = 0; e < s->E; e++) sum += (p[e] = exp(l[e] - mx));
        for (int e = 0; e < s->E; e++) p[e] /= sum;
        for (int j = 0; j < s->k; j++) sk += p[s->topi[n * s->k + j]];
        for (int j = 0; j < s->k; j++) out[n * s->k + j] = p[s->topi[n * s->k + j]] / (s->renorm ? sk : 1.0);
    }
}

static void test_moe_route(int renorm)
{
    enum { N = 6, E = 5, K = 2 };
    float lf[N * E], pf[N * E], tw[N * K], dtw[N * K], dpe[E], dl[N * E];
    double x[N * E], r[N * K + N * E], g[N * E], ref[N * K + N * E];
    int ti[N * K];
    fill(lf, x, N * E, 2.0);
    lf[1] = lf[3] = lf[0] = 5.0f; x[1] = x[3] = x[0] = 5.0;  /* row 0: a three-way tie: experts 0, 1 win */
    memcpy(pf, lf, sizeof pf);
    mk_cpu_moe_route(NULL, pf, ti, tw, N, E, K, renorm);
    CHECK(ti[0] == 0 && ti[1] == 1, "ties go to the lower index (got %d, %d)", ti[0], ti[1]);
    int order = 1;
    for (int n = 0; n < N; n++)
        for (int e = 0; e < E; e++) {  /* every expert outside the top-k is no more probable than the k-th */
            int in = 0;
            for (int j = 0; j < K; j++) in |= ti[n * K + j] == e;
            order &= in || pf[n * E + e] <= pf[n * E + ti[n * K + K - 1]];
        }
    CHECK(order, "the top-k are the k most probable");
    route_t s = {N, E, K, renorm, ti};
    ref_route(ref, x, &s);
    CHECK(rel(tw, ref, N * K) < 1e-6 && rel(pf, ref + N * K, N * E) < 1e-6, "route fwd rel %g",
          rel(tw, ref, N * K));
    fill(dtw, r, N * K, 1.0);
    fill(dpe, NULL, E, 1.0);
    for (int n = 0; n < N; n++) for (int e = 0; e < E; e++) r[N * K + n * E + e] = dpe[e];
    mk_cpu_moe_route_bwd(NULL, dl, pf, ti, tw, dtw, dpe, N, E, K, renorm);
    fd(ref_route, &s, x, N * E, N * K + N * E, r, g);
    CHECK(rel(dl, g, N * E) < 1e-5, "route bwd (renorm %d) rel %g", renorm, rel(dl, g, N * E));
}

/* gather and scatter (its adjoint) against direct loops */
static void test_moe_rows(void)
{
    enum { n = 5, R = 4, C = 3 };
    int idx[n] = {2, 0, 2, 3, 1};
    float src[R * C], w[n], got[n * C], back[R * C] = {0};
    double want = 0, have = 0;
    fill(src, NULL, R * C, 1.0); fill(w, NULL, n, 1.0);
    mk_cpu_moe_gather(NULL, got, src, idx, w, n, C);
    int ok = 1;
    for (int i = 0; i < n; i++)
        for (int c = 0; c < C; c++) ok &= got[i * C + c] == w[i] * src[idx[i] * C + c];
    CHECK(ok, "moe gather");
    mk_cpu_moe_scatter(NULL, back, got, idx, w, n, C);  /* <scatter(y), s> = <y, gather(s)> */
    for (int i = 0; i < R * C; i++) have += (double)back[i] * src[i];
    for (int i = 0; i < n * C; i++) want += (double)got[i] * got[i];
    CHECK(fabs(have - want) < 1e-5, "moe scatter is gather's adjoint (%g vs %g)", have, want);
}

/* ---- embedding: x = [wte (V,C) | wpe (T,C)], tokens fixed; vocab split in two ---- */
typedef struct { int N, T, C, V; const int *tok; } emb_t;
static void ref_emb(double *out, const double *x, const void *c)
{
    const emb_t *s = c;
    for (int n = 0; n < s->N; n++)
        for (int i = 0; i < s->C; i++)
            out[n * s->C + i] = x[s->tok[n] * s->C + i] + x[s->V * s->C + (n % s->T) * s->C + i];
}

static void test_embedding(void)
{
    int tok[6] = {0, 3, 5, 1, 5, 2};
    emb_t s = {6, 3, 4, 6, tok};
    int nx = (s.V + s.T) * s.C, no = s.N * s.C, half = s.V / 2;
    float xf[36], o1[24], o2[24], out[24], r[24], dg[36] = {0};
    double x[36], ref[24], rd[24], g[36];
    fill(xf, x, nx, 1.0); fill(r, rd, no, 1.0);
    /* two vocabulary shards: the first adds wpe, the sum is the whole */
    mk_cpu_embed_fwd(NULL, o1, tok, xf, xf + s.V * s.C, s.N, s.T, s.C, 0, half);
    mk_cpu_embed_fwd(NULL, o2, tok, xf + half * s.C, NULL, s.N, s.T, s.C, half, half);
    mk_cpu_add(NULL, out, o1, o2, no);
    ref_emb(ref, x, &s);
    CHECK(rel(out, ref, no) < 1e-7, "embedding fwd rel %g", rel(out, ref, no));
    mk_cpu_embed_bwd(NULL, dg, dg + s.V * s.C, r, tok, s.N, s.T, s.C, 0, half);
    mk_cpu_embed_bwd(NULL, dg + half * s.C, NULL, r, tok, s.N, s.T, s.C, half, half);
    fd(ref_emb, &s, x, nx, no, rd, g);
    CHECK(rel(dg, g, nx) < 1e-7, "embedding bwd rel %g", rel(dg, g, nx));
}

/* ---- cross-entropy: x = logits (N, Vp), V real; two vocabulary shards ---- */
typedef struct { int N, Vp, V; const int *tgt; } xe_t;
static void ref_xent(double *out, const double *x, const void *c)
{
    const xe_t *s = c;
    double L = 0;
    for (int n = 0; n < s->N; n++) {
        double mx = -1e300, sum = 0;
        for (int i = 0; i < s->V; i++) if (x[n * s->Vp + i] > mx) mx = x[n * s->Vp + i];
        for (int i = 0; i < s->V; i++) sum += exp(x[n * s->Vp + i] - mx);
        L += log(sum) + mx - x[n * s->Vp + s->tgt[n]];
    }
    out[0] = L;
}

static void test_xent(void)
{
    int tgt[3] = {4, 0, 6};
    xe_t s = {3, 8, 7, tgt};
    int nx = s.N * s.Vp, h = s.Vp / 2;
    float lf[24], sh[2][12], mx[2][3], sum[2][3], tg[2][3], dg[24];
    double x[24], g[24], ref, one = 1.0;
    fill(lf, x, nx, 3.0);
    for (int k = 0; k < 2; k++) {
        for (int n = 0; n < s.N; n++) memcpy(sh[k] + n * h, lf + n * s.Vp + k * h, h * 4);
        mk_cpu_xent_max(NULL, mx[k], sh[k], s.N, h, k * h, s.V);
    }
    for (int n = 0; n < s.N; n++) mx[0][n] = mx[1][n] = fmaxf(mx[0][n], mx[1][n]);
    for (int k = 0; k < 2; k++) mk_cpu_xent_exp(NULL, sh[k], sum[k], tg[k], mx[k], tgt, s.N, h, k * h, s.V);
    for (int n = 0; n < s.N; n++) {
        sum[0][n] = sum[1][n] = sum[0][n] + sum[1][n];
        tg[0][n] = tg[1][n] = tg[0][n] + tg[1][n];
    }
    double L = 0;
    for (int k = 0; k < 2; k++) L = mk_cpu_xent_loss(NULL, sh[k], sum[k], tg[k], s.N, h);
    ref_xent(&ref, x, &s);
    CHECK_REL(L, ref, 1e-6, "cross-entropy loss");
    for (int k = 0; k < 2; k++) {
        float d[12];
        mk_cpu_xent_bwd(NULL, d, sh[k], tgt, 1.0f, s.N, h, k * h);
        for (int n = 0; n < s.N; n++) memcpy(dg + n * s.Vp + k * h, d + n * h, h * 4);
    }
    fd(ref_xent, &s, x, nx, 1, &one, g);
    CHECK(rel(dg, g, nx) < 1e-5, "cross-entropy bwd rel %g (padded columns masked)", rel(dg, g, nx));
}

static void test_adamw(void)
{
    float p[4] = {1, -2, 0.5f, 0}, gr[4] = {0.1f, -0.3f, 0, 2}, m[4] = {0}, v[4] = {0};
    double pd[4] = {1, -2, 0.5, 0};
    mk_cpu_adamw(NULL, p, gr, m, v, 4, 0.01f, 0.9f, 0.95f, 0.1f, 0.05f, 1e-8f, 0.1f, 0.5f);
    for (int i = 0; i < 4; i++) {
        double gi = gr[i] * 0.5, mh = 0.1 * gi / 0.1, vh = 0.05 * gi * gi / 0.05;
        pd[i] -= 0.01 * (mh / (sqrt(vh) + 1e-8) + 0.1 * pd[i]);
        CHECK_REL(p[i], pd[i], 1e-6, "adamw");
    }
    CHECK_REL(mk_cpu_sumsq(NULL, gr, 4), 0.01 + 0.09 + 4.0, 1e-6, "sumsq");
}

int main(void)
{
    test_linear();
    test_layernorm();
    test_attention(2, 2, 0);  /* MHA */
    test_attention(4, 2, 0);  /* GQA */
    test_attention(3, 1, 0);  /* MQA */
    test_attention(4, 2, 2);  /* GQA in a sliding window of 2 (T 5) */
    test_attention_fused(2, 2, 0);   /* MHA, 150 keys: 3 tiles */
    test_attention_fused(4, 2, 0);   /* GQA */
    test_attention_fused(4, 1, 100); /* MQA in a window across a tile boundary */
    test_attention16(MK_DTYPE_BF16, 2, 2, 0);
    test_attention16(MK_DTYPE_BF16, 4, 1, 100);
    test_attention16(MK_DTYPE_FP16, 4, 2, 0);
    test_rmsnorm();
    test_rope();
    test_swiglu();
    test_moe_route(1);
    test_moe_route(0);
    test_moe_rows();
    test_gelu();
    test_embedding();
    test_xent();
    test_adamw();
    CHECK_DONE();
}
