/* The CUDA backend against the CPU backend, kernel by kernel, forward and
 * backward: the same random inputs go through both tables and
 *   err = ||gpu - cpu|| / ||cpu||   (Frobenius, in double)
 * must stay within the kernel's bound.  Exit 77 (SKIP) without a CUDA build
 * or without a visible device; never a pass there.
 *
 * Bounds (src/cuda/README.md "Error bounds"), u = 2^-24 (fp32 unit roundoff):
 *   1e-6 where the GPU computes each entry with the CPU's operations in the
 *        CPU's order (elementwise, embedding, bias and LayerNorm parameter
 *        gradients, xent gradient, AdamW): only expf/tanhf (CUDA: <= 2 ulp)
 *        may differ.
 *   max(1e-6, 4 sqrt(L) u) where an entry is a reduction of length L
 *        summed in another order (cuBLAS GEMMs, warp/block sums): the CPU's
 *        own rounding error is ~sqrt(L) u, so closer agreement cannot be
 *        demanded (L = 512 gives 5.4e-6).
 *   TF32 (10-bit mantissa, u' = 2^-11) and bf16 (7-bit, u' = 2^-8) GEMMs
 *        round both multiplicands: relative error per product <= 2u', about
 *        0.8u' RMS for random data; bound 4u' = 2e-3 (TF32), 1.6e-2 (bf16),
 *        on GEMM-based kernels (linear, attention) only.
 *   max(1e-5, 16 sqrt(L) u) for the 16-bit linears (set_gemm_dtype): both
 *        backends multiply the same rounded operands, whose products are
 *        exact in fp32, and sum them in fp32 in another order (tensor
 *        cores align their partial sums with truncation: a few ulps more
 *        than the CPU's); an operand rounded otherwise would show as
 *        ~1e-3 (bf16) or ~2e-4 (fp16).
 *   0: the 16-bit conversions (round16, pack16, unpack16) are one rule on
 *        both (include/merak/half_rule.h), bit for bit (NaNs widened: any NaN).
 * MK_CUDA_MATH selects the mode (run this test once per mode). */
#include "config.h"
#include "check.h"
#include "merak/backend.h"
#include "merak/model.h"
#ifdef MK_HAVE_CUDA
#include "merak/cuda.h"
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MK_HAVE_CUDA
int main(void)
{
    printf("SKIP: merak was built without CUDA\n");
    return 77;
}
#else

static const mk_backend_t *cpu;
static mk_backend_t *gpu;  /* a table with its own context */
static double gemm_bound;  /* mode-dependent extra bound for GEMM kernels */
static const double U = 5.9604644775390625e-08;
static double worst = 0;

static unsigned long long rng = 88172645463325252ULL;
static float urand(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *hrand(size_t n, float s)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = s * urand();
    return p;
}

/* a device copy of host array h */
static void *up(const void *h, size_t bytes)
{
    void *d = gpu->alloc(gpu->ctx, bytes);
    gpu->copy(gpu->ctx, d, h, bytes);
    return d;
}

/* compare device d (n floats) with host c; frees d */
static void cmp(const char *what, float *d, const float *c, size_t n, double bound)
{
    float *g = malloc(n * sizeof *g);
    gpu->copy(gpu->ctx, g, d, n * sizeof *g);
    double num = 0, den = 0;
    int finite = 1;
    for (size_t i = 0; i < n; i++) {
        double x = (double)g[i] - c[i];
        if (!isfinite(g[i]) != !isfinite(c[i])) finite = 0;
        if (isfinite(g[i]) && isfinite(c[i])) { num += x * x; den += (double)c[i] * c[i]; }
    }
    double err = sqrt(num / (den > 0 ? den : 1e-300));
    if (err / bound > worst) worst = err / bound;
    printf("%-28s err %.3e  bound %.1e  %s\n", what, err, bound, err <= bound && finite ? "ok" : "FAIL");
    CHECK(finite, "%s: non-finite entries differ", what);
    CHECK(err <= bound, "%s: err %.3e > %.1e", what, err, bound);
    free(g);
    gpu->free(gpu->ctx, d);
}

static double red_bound(int L) { double b = 4.0 * sqrt((double)L) * U; return b > 1e-6 ? b : 1e-6; }
static double gemm_b(int L) { double b = red_bound(L); return b > gemm_bound ? b : gemm_bound; }
static double gemm16_b(int L) { double b = 16.0 * sqrt((double)L) * U; return b > 1e-5 ? b : 1e-5; }

/* The linear entries of the GPU against ref's on the same inputs, forward
 * (with and without bias) and backward; t names the operands' type, bound
 * the GEMMs' bound by reduction length. */
static void linear_case(const mk_backend_t *ref, int N, int IC, int OC, const char *t, double (*bound)(int))
{
    char w[96];
    float *x = hrand((size_t)N * IC, 1), *W = hrand((size_t)OC * IC, 0.1f), *b = hrand(OC, 0.1f);
    float *dy = hrand((size_t)N * OC, 1), *dx = hrand((size_t)N * IC, 1), *dW = hrand((size_t)OC * IC, 1);
    float *db = hrand(OC, 1), *y = malloc((size_t)N * OC * sizeof *y);
    float *gx = up(x, (size_t)N * IC * 4), *gW = up(W, (size_t)OC * IC * 4), *gb = up(b, OC * 4);
    float *gdy = up(dy, (size_t)N * OC * 4);
    for (int bias = 1; bias >= 0; bias--) {
        float *gy = gpu->alloc(gpu->ctx, (size_t)N * OC * 4);
        ref->linear_fwd(ref->ctx, y, x, W, bias ? b : NULL, N, IC, OC);
        gpu->linear_fwd(gpu->ctx, gy, gx, gW, bias ? gb : NULL, N, IC, OC);
        snprintf(w, sizeof w, "linear_fwd%s %dx%dx%d%s", t, N, IC, OC, bias ? "" : " (no bias)");
        cmp(w, gy, y, (size_t)N * OC, bound(IC));
    }
    float *gdx = up(dx, (size_t)N * IC * 4), *gdW = up(dW, (size_t)OC * IC * 4), *gdb = up(db, OC * 4);
    ref->linear_bwd_in(ref->ctx, dx, dy, W, N, IC, OC);
    gpu->linear_bwd_in(gpu->ctx, gdx, gdy, gW, N, IC, OC);
    snprintf(w, sizeof w, "linear_bwd_in%s (+=)", t);
    cmp(w, gdx, dx, (size_t)N * IC, bound(OC));
    ref->linear_bwd_w(ref->ctx, dW, db, dy, x, N, IC, OC);
    gpu->linear_bwd_w(gpu->ctx, gdW, gdb, gdy, gx, N, IC, OC);
    snprintf(w, sizeof w, "linear_bwd_w%s dw (+=)", t);
    cmp(w, gdW, dW, (size_t)OC * IC, bound(N));
    cmp("linear_bwd_w dbias (+=)", gdb, db, OC, 1e-6);
    gpu->free(gpu->ctx, gx); gpu->free(gpu->ctx, gW); gpu->free(gpu->ctx, gb); gpu->free(gpu->ctx, gdy);
    free(x); free(W); free(b); free(dy); free(dx); free(dW); free(db); free(y);
}

static void test_linear(int N, int IC, int OC) { linear_case(cpu, N, IC, OC, "", gemm_b); }

/* The linears with 16-bit operands (mixed precision's GEMMs) against the
 * CPU backend's (its own context: the operands rounded in its scratch),
 * and the GPU's scratch counted. */
static void test_linear16(int N, int IC, int OC, int dt)
{
    mk_backend_t *c16 = mk_backend_new("cpu");
    if (!c16) { CHECK(0, "mk_backend_new(cpu): %s", mk_error_last()); return; }
    c16->set_gemm_dtype(c16->ctx, dt), gpu->set_gemm_dtype(gpu->ctx, dt);
    linear_case(c16, N, IC, OC, dt == MK_DTYPE_BF16 ? " bf16" : " fp16", gemm16_b);
    size_t want = ((size_t)N * IC + (size_t)OC * IC) * 2; /* at least the forward's two operands */
    CHECK(gpu->scratch_bytes(gpu->ctx) >= want, "scratch_bytes %zu < %zu", gpu->scratch_bytes(gpu->ctx), want);
    gpu->set_gemm_dtype(gpu->ctx, MK_DTYPE_FP32);
    mk_backend_free(c16);
}

static float f_bits(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }

/* n device floats against host c bit for bit (any NaN for a NaN when nan_any); frees d */
static void same_bits(const char *what, const void *d, const void *c, size_t n, size_t size, int nan_any)
{
    unsigned char *g = malloc(n * size);
    gpu->copy(gpu->ctx, g, d, n * size);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *a = g + i * size, *b = (const unsigned char *)c + i * size;
        if (nan_any && size == 4) {
            float fa, fb;
            memcpy(&fa, a, 4), memcpy(&fb, b, 4);
            if (isnan(fa) && isnan(fb)) continue;
        }
        bad += memcmp(a, b, size) != 0;
    }
    printf("%-28s %zu of %zu differ  %s\n", what, bad, n, bad ? "FAIL" : "ok");
    CHECK(bad == 0, "%s: %zu of %zu values differ from the CPU's", what, bad, n);
    free(g);
    gpu->free(gpu->ctx, (void *)d);
}

/* round16, pack16 and unpack16 of dtype dt: every bf16 neighbourhood (each
 * pattern's top half with random and tie low halves: NaN payloads,
 * infinities, subnormals) and fp16's range log-uniformly, then every
 * 16-bit pattern widened. */
static void test_half16(int dt)
{
    enum { NB = 0x10000, NF = 8192 };
    size_t n = NB + NF;
    float *x = malloc(n * sizeof *x), *r = malloc(n * sizeof *r), *wide = malloc(NB * sizeof *wide);
    uint16_t *h = malloc(n * sizeof *h), *all = malloc(NB * sizeof *all);
    for (uint32_t i = 0; i < NB; i++) {
        urand();
        x[i] = f_bits(i << 16 | (i & 1 ? 0x8000u : (uint32_t)(rng >> 48)));
    }
    for (size_t i = NB; i < n; i++) /* 2^-30 .. 2^17, both signs */
        x[i] = ldexpf(1.0f + 0.5f * (urand() + 1.0f), (int)(urand() * 24.0f) - 7) * (urand() < 0 ? -1.0f : 1.0f);
    for (uint32_t i = 0; i < NB; i++) all[i] = (uint16_t)i;
    const char *t = dt == MK_DTYPE_BF16 ? "bf16" : "fp16";
    char w[64];
    float *gx = up(x, n * 4);
    void *gh = gpu->alloc(gpu->ctx, n * 2);
    cpu->pack16(cpu->ctx, h, x, n, dt), gpu->pack16(gpu->ctx, gh, gx, n, dt);
    snprintf(w, sizeof w, "pack16 %s", t);
    same_bits(w, gh, h, n, 2, 0);
    memcpy(r, x, n * sizeof *r);
    cpu->round16(cpu->ctx, r, n, dt), gpu->round16(gpu->ctx, gx, n, dt);
    snprintf(w, sizeof w, "round16 %s", t);
    same_bits(w, gx, r, n, 4, 1);
    void *gall = up(all, NB * 2);
    float *gw = gpu->alloc(gpu->ctx, NB * 4);
    cpu->unpack16(cpu->ctx, wide, all, NB, dt), gpu->unpack16(gpu->ctx, gw, gall, NB, dt);
    snprintf(w, sizeof w, "unpack16 %s (all)", t);
    same_bits(w, gw, wide, NB, 4, 1);
    gpu->free(gpu->ctx, gall);
    free(x); free(r); free(wide); free(h); free(all);
}

/* MPI's staging buffers (host_alloc): host memory that to_device and
 * to_host carry exactly, given back to a pool that hands it out again for
 * a staging no larger, another while it is in use. */
static void test_host_staging(void)
{
    size_t n = (size_t)1 << 20;
    float *h = gpu->host_alloc(gpu->ctx, n * 4), *d = gpu->alloc(gpu->ctx, n * 4);
    CHECK(h && d && !gpu->is_device(gpu->ctx, h), "host_alloc: no host buffer");
    if (!h || !d) return;
    for (size_t i = 0; i < n; i++) h[i] = (float)i;
    gpu->to_device(gpu->ctx, d, h, n * 4);
    memset(h, 0, n * 4);
    gpu->to_host(gpu->ctx, h, d, n * 4);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += h[i] != (float)i;
    gpu->host_free(gpu->ctx, h);
    float *h2 = gpu->host_alloc(gpu->ctx, n * 2), *h3 = gpu->host_alloc(gpu->ctx, n * 2);
    printf("%-28s %zu of %zu differ; reused %s  %s\n", "host staging (pinned)", bad, n, h2 == h ? "yes" : "no",
           !bad && h2 == h && h3 != h2 ? "ok" : "FAIL");
    CHECK(bad == 0, "to_device / to_host through a pinned buffer: %zu values differ", bad);
    CHECK(h2 == h && h3 && h3 != h2, "the pinned pool: %p given back, then %p and %p", (void *)h, (void *)h2, (void *)h3);
    gpu->host_free(gpu->ctx, h2), gpu->host_free(gpu->ctx, h3);
    gpu->free(gpu->ctx, d);
}

static void test_embed(int B, int T, int C, int Vl, int v0, int V)
{
    int N = B * T, *tok = malloc(N * sizeof *tok);
    for (int n = 0; n < N; n++) tok[n] = (int)((urand() + 1) * 0.5f * V) % V;
    tok[0] = tok[N - 1] = tok[1];  /* repeated rows in dwte */
    float *wte = hrand((size_t)Vl * C, 1), *wpe = hrand((size_t)T * C, 1), *y = malloc((size_t)N * C * 4);
    float *dy = hrand((size_t)N * C, 1), *dwte = hrand((size_t)Vl * C, 1), *dwpe = hrand((size_t)T * C, 1);
    float *gwte = up(wte, (size_t)Vl * C * 4), *gwpe = up(wpe, (size_t)T * C * 4);
    float *gy = gpu->alloc(gpu->ctx, (size_t)N * C * 4), *gdy = up(dy, (size_t)N * C * 4);
    /* tokens from host memory (as the executor passes them) */
    cpu->embed_fwd(cpu->ctx, y, tok, wte, wpe, N, T, C, v0, Vl);
    gpu->embed_fwd(gpu->ctx, gy, tok, gwte, gwpe, N, T, C, v0, Vl);
    cmp("embed_fwd", gy, y, (size_t)N * C, 1e-6);
    gy = gpu->alloc(gpu->ctx, (size_t)N * C * 4);
    int *dtok = up(tok, N * sizeof(int));  /* and from device memory */
    cpu->embed_fwd(cpu->ctx, y, tok, wte, NULL, N, T, C, v0, Vl);
    gpu->embed_fwd(gpu->ctx, gy, dtok, gwte, NULL, N, T, C, v0, Vl);
    cmp("embed_fwd (no wpe, dev tok)", gy, y, (size_t)N * C, 1e-6);
    float *gdwte = up(dwte, (size_t)Vl * C * 4), *gdwpe = up(dwpe, (size_t)T * C * 4);
    cpu->embed_bwd(cpu->ctx, dwte, dwpe, dy, tok, N, T, C, v0, Vl);
    gpu->embed_bwd(gpu->ctx, gdwte, gdwpe, gdy, tok, N, T, C, v0, Vl);
    cmp("embed_bwd dwte (+=)", gdwte, dwte, (size_t)Vl * C, 1e-6);
    cmp("embed_bwd dwpe (+=)", gdwpe, dwpe, (size_t)T * C, 1e-6);
    gpu->free(gpu->ctx, gwte); gpu->free(gpu->ctx, gwpe); gpu->free(gpu->ctx, gdy); gpu->free(gpu->ctx, dtok);
    free(tok); free(wte); free(wpe); free(y); free(dy); free(dwte); free(dwpe);
}

static void test_layernorm(int N, int C)
{
    float *x = hrand((size_t)N * C, 2), *w = hrand(C, 1), *b = hrand(C, 1), *y = malloc((size_t)N * C * 4);
    float *mean = malloc(N * 4), *rstd = malloc(N * 4);
    for (size_t i = 0; i < (size_t)N * C; i++) x[i] += 0.5f;  /* nonzero mean */
    float *gx = up(x, (size_t)N * C * 4), *gw = up(w, C * 4), *gb = up(b, C * 4);
    float *gy = gpu->alloc(gpu->ctx, (size_t)N * C * 4), *gm = gpu->alloc(gpu->ctx, N * 4), *gr = gpu->alloc(gpu->ctx, N * 4);
    cpu->layernorm_fwd(cpu->ctx, y, mean, rstd, x, w, b, N, C);
    gpu->layernorm_fwd(gpu->ctx, gy, gm, gr, gx, gw, gb, N, C);
    float *gm2 = up(mean, N * 4), *gr2 = up(rstd, N * 4);  /* the backward gets CPU stats */
    cmp("layernorm_fwd out", gy, y, (size_t)N * C, red_bound(C));
    cmp("layernorm_fwd mean", gm, mean, N, red_bound(C));
    cmp("layernorm_fwd rstd", gr, rstd, N, red_bound(C));
    float *dy = hrand((size_t)N * C, 1), *dx = hrand((size_t)N * C, 1), *dw = hrand(C, 1), *db = hrand(C, 1);
    float *gdy = up(dy, (size_t)N * C * 4), *gdx = up(dx, (size_t)N * C * 4), *gdw = up(dw, C * 4);
    float *gdb = up(db, C * 4);
    cpu->layernorm_bwd(cpu->ctx, dx, dw, db, dy, x, w, mean, rstd, N, C);
    gpu->layernorm_bwd(gpu->ctx, gdx, gdw, gdb, gdy, gx, gw, gm2, gr2, N, C);
    cmp("layernorm_bwd dinp (+=)", gdx, dx, (size_t)N * C, red_bound(C));
    cmp("layernorm_bwd dw (+=)", gdw, dw, C, 1e-6);
    cmp("layernorm_bwd db (+=)", gdb, db, C, 1e-6);
    gpu->free(gpu->ctx, gx); gpu->free(gpu->ctx, gw); gpu->free(gpu->ctx, gb); gpu->free(gpu->ctx, gm2); gpu->free(gpu->ctx, gr2); gpu->free(gpu->ctx, gdy);
    free(x); free(w); free(b); free(y); free(mean); free(rstd); free(dy); free(dx); free(dw); free(db);
}

static void test_attention(int B, int T, int NH, int KV, int hs, int window)
{
    int C = NH * hs;
    char w[64];
    size_t nq = (size_t)B * T * (C + 2 * KV * hs), na = (size_t)B * NH * T * T, no = (size_t)B * T * C;
    float *qkv = hrand(nq, 1), *att = malloc(na * 4), *out = malloc(no * 4);
    float *gqkv = up(qkv, nq * 4), *gatt = gpu->alloc(gpu->ctx, na * 4), *gout = gpu->alloc(gpu->ctx, no * 4);
    cpu->attention_fwd(cpu->ctx, out, att, qkv, B, T, NH, KV, hs, window);
    gpu->attention_fwd(gpu->ctx, gout, gatt, gqkv, B, T, NH, KV, hs, window);
    float *gatt_cpu = up(att, na * 4);  /* the backward gets the CPU's probabilities */
    snprintf(w, sizeof w, "attention_fwd att NH%d KV%d window %d", NH, KV, window);
    cmp(w, gatt, att, na, gemm_b(hs > T ? hs : T));
    cmp("attention_fwd out", gout, out, no, gemm_b(hs > T ? hs : T));
    float *dout = hrand(no, 1), *dqkv = hrand(nq, 1), *datt = malloc(na * 4);
    float *gdout = up(dout, no * 4), *gdqkv = up(dqkv, nq * 4), *gdatt = gpu->alloc(gpu->ctx, na * 4);
    cpu->attention_bwd(cpu->ctx, dqkv, datt, dout, qkv, att, B, T, NH, KV, hs);
    gpu->attention_bwd(gpu->ctx, gdqkv, gdatt, gdout, gqkv, gatt_cpu, B, T, NH, KV, hs);
    gpu->free(gpu->ctx, gdatt);
    /* dK/dV sum G = NH/KV heads' reductions of length T */
    cmp("attention_bwd dqkv (+=)", gdqkv, dqkv, nq, gemm_b((hs > T ? hs : T) * NH / KV));
    gpu->free(gpu->ctx, gqkv); gpu->free(gpu->ctx, gatt_cpu); gpu->free(gpu->ctx, gdout);
    free(qkv); free(att); free(out); free(dout); free(dqkv); free(datt);
}

/* the fused attention (FlashAttention-2, lse kept) against the CPU's: out, lse, and dqkv from the CPU's
   forward (out, lse) so that only the backward differs */
static void test_attention_fused(int B, int T, int NH, int KV, int hs, int window)
{
    int C = NH * hs;
    size_t nq = (size_t)B * T * (C + 2 * KV * hs), nl = (size_t)B * NH * T, no = (size_t)B * T * C;
    float *qkv = hrand(nq, 1), *lse = malloc(nl * 4), *out = malloc(no * 4);
    float *gqkv = up(qkv, nq * 4), *glse = gpu->alloc(gpu->ctx, nl * 4), *gout = gpu->alloc(gpu->ctx, no * 4);
    cpu->attention_fused_fwd(cpu->ctx, out, lse, qkv, B, T, NH, KV, hs, window);
    gpu->attention_fused_fwd(gpu->ctx, gout, glse, gqkv, B, T, NH, KV, hs, window);
    cmp("attention_fused_fwd out", gout, out, no, red_bound(T));
    cmp("attention_fused_fwd lse", glse, lse, nl, red_bound(T));
    float *dout = hrand(no, 1), *dqkv = hrand(nq, 1);
    float *gdout = up(dout, no * 4), *gdqkv = up(dqkv, nq * 4), *gout2 = up(out, no * 4), *glse2 = up(lse, nl * 4);
    cpu->attention_fused_bwd(cpu->ctx, dqkv, dout, qkv, out, lse, B, T, NH, KV, hs, window);
    gpu->attention_fused_bwd(gpu->ctx, gdqkv, gdout, gqkv, gout2, glse2, B, T, NH, KV, hs, window);
    cmp("attention_fused_bwd dqkv (+=)", gdqkv, dqkv, nq, red_bound(T * NH / KV));
    gpu->free(gpu->ctx, gqkv); gpu->free(gpu->ctx, gdout); gpu->free(gpu->ctx, gout2); gpu->free(gpu->ctx, glse2);
    free(qkv); free(lse); free(out); free(dout); free(dqkv);
}

static void test_rmsnorm(int N, int C)
{
    float *x = hrand((size_t)N * C, 2), *w = hrand(C, 1), *y = malloc((size_t)N * C * 4), *rstd = malloc(N * 4);
    float *gx = up(x, (size_t)N * C * 4), *gw = up(w, C * 4);
    float *gy = gpu->alloc(gpu->ctx, (size_t)N * C * 4), *gr = gpu->alloc(gpu->ctx, N * 4);
    cpu->rmsnorm_fwd(cpu->ctx, y, rstd, x, w, 1e-5f, N, C);
    gpu->rmsnorm_fwd(gpu->ctx, gy, gr, gx, gw, 1e-5f, N, C);
    float *gr2 = up(rstd, N * 4);  /* the backward gets the CPU's rstd */
    cmp("rmsnorm_fwd out", gy, y, (size_t)N * C, red_bound(C));
    cmp("rmsnorm_fwd rstd", gr, rstd, N, red_bound(C));
    float *dy = hrand((size_t)N * C, 1), *dx = hrand((size_t)N * C, 1), *dw = hrand(C, 1);
    float *gdy = up(dy, (size_t)N * C * 4), *gdx = up(dx, (size_t)N * C * 4), *gdw = up(dw, C * 4);
    cpu->rmsnorm_bwd(cpu->ctx, dx, dw, dy, x, w, rstd, N, C);
    gpu->rmsnorm_bwd(gpu->ctx, gdx, gdw, gdy, gx, gw, gr2, N, C);
    cmp("rmsnorm_bwd dinp (+=)", gdx, dx, (size_t)N * C, red_bound(C));
    cmp("rmsnorm_bwd dw (+=)", gdw, dw, C, 1e-6);
    gpu->free(gpu->ctx, gx); gpu->free(gpu->ctx, gw); gpu->free(gpu->ctx, gr2); gpu->free(gpu->ctx, gdy);
    free(x); free(w); free(y); free(rstd); free(dy); free(dx); free(dw);
}

/* q and k heads of a GQA qkv row rotated, v copied (out of place), then back in place */
static void test_rope(int B, int T, int NH, int KV, int hs, float theta)
{
    mk_rope_t rp = {theta, 0, 0, 0, 0};
    if (theta > 100000) rp = (mk_rope_t){theta, 8, 1, 4, 8}; /* Llama 3.1's scaling, on a short context */
    int N = B * T, ld = (NH + 2 * KV) * hs;
    size_t n = (size_t)N * ld;
    float *x = hrand(n, 1), *y = malloc(n * 4), *gx = up(x, n * 4), *gy = gpu->alloc(gpu->ctx, n * 4);
    cpu->rope_fwd(cpu->ctx, y, x, N, T, NH + KV, hs, ld, &rp);
    gpu->rope_fwd(gpu->ctx, gy, gx, N, T, NH + KV, hs, ld, &rp);
    cmp("rope_fwd", gy, y, n, 1e-6);
    cpu->rope_bwd(cpu->ctx, x, x, N, T, NH + KV, hs, ld, &rp);
    gpu->rope_bwd(gpu->ctx, gx, gx, N, T, NH + KV, hs, ld, &rp);
    cmp("rope_bwd (in place)", gx, x, n, 1e-6);
    free(x); free(y);
}

static void test_swiglu(int N, int F)
{
    size_t n = (size_t)N * F;
    float *gu = hrand(2 * n, 4), *y = malloc(n * 4), *d = hrand(n, 1), *dgu = hrand(2 * n, 1);
    float *ggu = up(gu, 2 * n * 4), *gy = gpu->alloc(gpu->ctx, n * 4), *gd = up(d, n * 4);
    float *gdgu = up(dgu, 2 * n * 4);
    cpu->swiglu_fwd(cpu->ctx, y, gu, N, F);
    gpu->swiglu_fwd(gpu->ctx, gy, ggu, N, F);
    cmp("swiglu_fwd", gy, y, n, 1e-6);
    cpu->swiglu_bwd(cpu->ctx, dgu, d, gu, N, F);
    gpu->swiglu_bwd(gpu->ctx, gdgu, gd, ggu, N, F);
    cmp("swiglu_bwd [dgate | dup] (+=)", gdgu, dgu, 2 * n, 1e-6);
    gpu->free(gpu->ctx, ggu); gpu->free(gpu->ctx, gd);
    free(gu); free(y); free(d); free(dgu);
}

static void test_elementwise(int n)
{
    float *x = hrand(n, 3), *a = hrand(n, 1), *y = malloc(n * 4), *d = hrand(n, 1), *dx = hrand(n, 1);
    float *gx = up(x, n * 4), *ga = up(a, n * 4), *gy = gpu->alloc(gpu->ctx, n * 4), *gd = up(d, n * 4);
    float *gdx = up(dx, n * 4);
    cpu->gelu_fwd(cpu->ctx, y, x, n);
    gpu->gelu_fwd(gpu->ctx, gy, gx, n);
    cmp("gelu_fwd", gy, y, n, 1e-6);
    cpu->gelu_bwd(cpu->ctx, dx, x, d, n);
    gpu->gelu_bwd(gpu->ctx, gdx, gx, gd, n);
    cmp("gelu_bwd (+=)", gdx, dx, n, 1e-6);
    gy = gpu->alloc(gpu->ctx, n * 4);
    cpu->add(cpu->ctx, y, x, a, n);
    gpu->add(gpu->ctx, gy, gx, ga, n);
    cmp("add", gy, y, n, 1e-6);
    cpu->acc(cpu->ctx, x, a, n);
    gpu->acc(gpu->ctx, gx, ga, n);
    cmp("acc", gx, x, n, 1e-6);
    gpu->free(gpu->ctx, ga); gpu->free(gpu->ctx, gd);
    free(x); free(a); free(y); free(d); free(dx);
}

/* multi-head latent attention's column gathers: a map with skipped (-1)
 * and repeated source columns (the scatter sums the repeats); exact */
static void test_cols(int N, int Ws, int Wd)
{
    int *idx = malloc(Wd * sizeof *idx);
    for (int j = 0; j < Wd; j++) idx[j] = j % 5 == 4 ? -1 : (j * 7) % Ws;
    float *src = hrand((size_t)N * Ws, 1), *dst = hrand((size_t)N * Wd, 1);
    float *gs = up(src, (size_t)N * Ws * 4), *gd = up(dst, (size_t)N * Wd * 4);
    cpu->cols_gather(cpu->ctx, dst, src, idx, N, Ws, Wd);
    gpu->cols_gather(gpu->ctx, gd, gs, idx, N, Ws, Wd);
    cmp("cols_gather", gd, dst, (size_t)N * Wd, 1e-7);
    gd = up(dst, (size_t)N * Wd * 4);
    cpu->cols_scatter(cpu->ctx, src, dst, idx, N, Ws, Wd);
    gpu->cols_scatter(gpu->ctx, gs, gd, idx, N, Ws, Wd);
    cmp("cols_scatter (+=)", gs, src, (size_t)N * Ws, 1e-7);
    gpu->free(gpu->ctx, gd);
    free(idx); free(src); free(dst);
}

/* one TP shard of the vocabulary: columns [v0, v0+Vl) of which those >= V are padding */
static void test_xent(int N, int Vl, int v0, int V)
{
    char w[64];
    float *l = hrand((size_t)N * Vl, 4), *mx = malloc(N * 4), *sum = malloc(N * 4), *tgt = malloc(N * 4);
    int *t = malloc(N * sizeof *t);
    for (int n = 0; n < N; n++) t[n] = v0 + (int)((urand() + 1) * 0.5f * (Vl + 8)) - 4; /* some not ours */
    float *gl = up(l, (size_t)N * Vl * 4), *gmx = gpu->alloc(gpu->ctx, N * 4);
    float *gsum = gpu->alloc(gpu->ctx, N * 4), *gtgt = gpu->alloc(gpu->ctx, N * 4);
    cpu->xent_max(cpu->ctx, mx, l, N, Vl, v0, V);
    gpu->xent_max(gpu->ctx, gmx, gl, N, Vl, v0, V);
    float *gmx2 = up(mx, N * 4);
    snprintf(w, sizeof w, "xent_max Vl=%d v0=%d", Vl, v0);
    cmp(w, gmx, mx, N, 1e-6);
    cpu->xent_exp(cpu->ctx, l, sum, tgt, mx, t, N, Vl, v0, V);
    gpu->xent_exp(gpu->ctx, gl, gsum, gtgt, gmx2, t, N, Vl, v0, V);
    float *gsum2 = up(sum, N * 4), *gtgt2 = up(tgt, N * 4), *gl2 = up(l, (size_t)N * Vl * 4);
    cmp("xent_exp exp", gl, l, (size_t)N * Vl, 1e-6);
    cmp("xent_exp rowsum", gsum, sum, N, red_bound(Vl));
    cmp("xent_exp tgt", gtgt, tgt, N, 1e-6);
    if (V > v0) {  /* the loss pass sees global sums, never zero: skip it on all-padding shards */
        double lc = cpu->xent_loss(cpu->ctx, l, sum, tgt, N, Vl);
        double lg = gpu->xent_loss(gpu->ctx, gl2, gsum2, gtgt2, N, Vl);
        cmp("xent_loss probs", gl2, l, (size_t)N * Vl, 1e-6);
        double e = fabs(lg - lc) / (fabs(lc) > 0 ? fabs(lc) : 1);
        printf("%-28s err %.3e  bound %.1e  %s\n", "xent_loss loss", e, 1e-6, e <= 1e-6 ? "ok" : "FAIL");
        CHECK(e <= 1e-6, "xent_loss: %.10g vs %.10g", lg, lc);
    } else gpu->free(gpu->ctx, gl2);
    float *d = malloc((size_t)N * Vl * 4), *gd = gpu->alloc(gpu->ctx, (size_t)N * Vl * 4), *gp = up(l, (size_t)N * Vl * 4);
    cpu->xent_bwd(cpu->ctx, d, l, t, 1.0f / 1024, N, Vl, v0);
    gpu->xent_bwd(gpu->ctx, gd, gp, t, 1.0f / 1024, N, Vl, v0);
    cmp("xent_bwd", gd, d, (size_t)N * Vl, 1e-6);
    gpu->free(gpu->ctx, gp); gpu->free(gpu->ctx, gsum2); gpu->free(gpu->ctx, gtgt2); gpu->free(gpu->ctx, gmx2);
    free(l); free(mx); free(sum); free(tgt); free(t); free(d);
}

static void test_adamw(size_t n)
{
    float *p = hrand(n, 1), *g = hrand(n, 1), *m = hrand(n, 0.1f), *v = hrand(n, 0.1f);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    float *gp = up(p, n * 4), *gg = up(g, n * 4), *gm = up(m, n * 4), *gv = up(v, n * 4);
    for (int step = 0; step < 3; step++) {
        float bc1 = 1.0f - powf(0.9f, step + 1), bc2 = 1.0f - powf(0.95f, step + 1);
        cpu->adamw(cpu->ctx, p, g, m, v, n, 6e-4f, 0.9f, 0.95f, bc1, bc2, 1e-8f, 0.1f, 0.5f);
        gpu->adamw(gpu->ctx, gp, gg, gm, gv, n, 6e-4f, 0.9f, 0.95f, bc1, bc2, 1e-8f, 0.1f, 0.5f);
    }
    double sc = cpu->sumsq(cpu->ctx, g, n), sg = gpu->sumsq(gpu->ctx, gg, n), e = fabs(sg - sc) / sc;
    cmp("adamw p (3 steps)", gp, p, n, 1e-6);
    cmp("adamw m", gm, m, n, 1e-6);
    cmp("adamw v", gv, v, n, 1e-6);
    printf("%-28s err %.3e  bound %.1e  %s\n", "sumsq", e, 1e-12, e <= 1e-12 ? "ok" : "FAIL");
    CHECK(e <= 1e-12, "sumsq %.17g vs %.17g", sg, sc);
    gpu->free(gpu->ctx, gg);
    free(p); free(g); free(m); free(v);
}

int main(void)
{
    int nd = mk_cuda_device_count();
    if (nd < 1) {
        printf("SKIP: no CUDA device is visible\n");
        return 77;
    }
    char name[256] = "?";
    mk_cuda_device_name(0, name, sizeof name);
    cpu = mk_backend_cpu();
    gpu = mk_backend_cuda_new();
    if (!gpu) {
        fprintf(stderr, "mk_backend_cuda_new: %s\n", mk_error_last());
        return 1;
    }
    const char *mode = mk_cuda_math_name(gpu);
    gemm_bound = !strcmp(mode, "tf32") ? 2e-3 : !strcmp(mode, "bf16") ? 1.6e-2 : 0.0;
    printf("device 0: %s; GEMM math %s\n", name, mode);
    test_linear(64, 96, 288);
    test_linear(37, 53, 19);       /* odd sizes */
    test_linear(128, 512, 50);     /* long reduction */
    for (int dt = MK_DTYPE_FP16; dt <= MK_DTYPE_BF16; dt++) {
        test_linear16(64, 96, 288, dt);
        test_linear16(37, 53, 19, dt);
        test_linear16(128, 512, 50, dt);
        test_half16(dt);
    }
    test_embed(2, 16, 48, 40, 0, 40);
    test_embed(2, 16, 48, 40, 40, 70);  /* TP shard with padding rows */
    test_layernorm(70, 96);
    test_layernorm(33, 768);
    test_attention(2, 16, 3, 3, 8, 0);
    test_attention_fused(2, 150, 4, 2, 16, 0);
    test_attention_fused(1, 130, 4, 1, 8, 40);
    test_attention(2, 64, 4, 4, 32, 0);
    test_attention(1, 100, 2, 2, 64, 0);  /* T not a multiple of 32 */
    test_attention(2, 64, 8, 2, 16, 0);   /* GQA, 4 query heads per K/V head */
    test_attention(1, 40, 3, 1, 32, 0);   /* MQA */
    test_attention(1, 100, 4, 2, 16, 37); /* a sliding window (rows past 36 start at t - 36) */
    test_rmsnorm(70, 96);
    test_rmsnorm(33, 4096);
    test_rope(2, 64, 8, 2, 16, 10000.0f);
    test_rope(1, 300, 4, 4, 128, 500000.0f);  /* Llama-3's theta, long positions */
    test_swiglu(61, 173);
    test_elementwise(10007);
    test_cols(301, 40, 97);
    test_xent(48, 64, 0, 64);
    test_xent(48, 500, 500, 901);  /* shard with 99 padding columns and foreign targets */
    test_xent(8, 50, 100, 90);     /* an all-padding shard: max -inf, sums 0 */
    test_adamw(100003);
    test_host_staging();
    printf("worst err/bound %.3f\n", worst);
    CHECK(gpu->status(gpu->ctx) == 0, "a CUDA error during the tests: %s", mk_error_last());
    mk_backend_free(gpu);
    CHECK_DONE();
}
#endif
