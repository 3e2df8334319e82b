/* The CPU kernels split over threads (src/cpu/cpu_par.c) give bitwise the
 * results of one thread, and the attention core's four-keys-at-a-time
 * loops bitwise those of the plain one-key loop written here (the serial
 * kernel before issue 23), at sizes that take the threaded paths. */
#include "config.h"
#include "check.h"
#include "merak/half.h"
#include "merak/kernels_cpu.h"
#include "merak/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* the kernels' context: a CPU backend's thread pool (sized per test) */
static mk_cpu_pool_t *pool;

static unsigned long long rng = 88172645463325252ULL;
static float urand(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static float *rnd(size_t n, float s)
{
    float *f = malloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++) f[i] = s * urand();
    return f;
}
static float *dup(const float *f, size_t n) { float *d = malloc(n * sizeof *d); memcpy(d, f, n * sizeof *d); return d; }
static int same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

/* the one-key loops (the serial kernel before issue 23) on one (b, h, t):
 * forward (dout NULL): scores, softmax, value mix; backward otherwise */
typedef struct {
    float *out, *att, *dqkv, *datt;
    const float *qkv, *dout;
    int T, NH, KV, hs;
} pa_t;

static void plain_row(const pa_t *p, int b, int h, int t)
{
    int T = p->T, hs = p->hs, C = p->NH * hs, C3 = C + 2 * p->KV * hs;
    int ko = C + KV_HEAD(h, p->NH, p->KV) * hs, vo = ko + p->KV * hs;
    float scale = 1.0f / sqrtf((float)hs), dot = 0.0f, mx = -INFINITY, sum = 0.0f;
    const float *x = p->qkv + (size_t)b * T * C3, *q = x + (size_t)t * C3 + h * hs;
    float *a = p->att + (((size_t)b * p->NH + h) * T + t) * T;
    if (!p->dout) {
        for (int u = 0; u <= t; u++) {
            float s = 0.0f;
            for (int i = 0; i < hs; i++) s += q[i] * x[(size_t)u * C3 + ko + i];
            a[u] = s * scale;
            if (a[u] > mx) mx = a[u];
        }
        for (int u = 0; u <= t; u++) { a[u] = expf(a[u] - mx); sum += a[u]; }
        for (int u = 0; u < T; u++) a[u] = u <= t ? a[u] / sum : 0.0f;
        float *o = p->out + ((size_t)b * T + t) * C + h * hs;
        memset(o, 0, hs * sizeof(float));
        for (int u = 0; u <= t; u++)
            for (int i = 0; i < hs; i++) o[i] += a[u] * x[(size_t)u * C3 + vo + i];
        return;
    }
    const float *d = p->dout + ((size_t)b * T + t) * C + h * hs;
    float *da = p->datt + (((size_t)b * p->NH + h) * T + t) * T, *dx = p->dqkv + (size_t)b * T * C3;
    float *dq = dx + (size_t)t * C3 + h * hs;
    for (int u = 0; u <= t; u++) {
        float s = 0.0f;
        for (int i = 0; i < hs; i++) { s += x[(size_t)u * C3 + vo + i] * d[i]; dx[(size_t)u * C3 + vo + i] += a[u] * d[i]; }
        da[u] = s;
        dot += s * a[u];
    }
    for (int u = 0; u <= t; u++) {
        float g = a[u] * (da[u] - dot) * scale;
        for (int i = 0; i < hs; i++) { dq[i] += g * x[(size_t)u * C3 + ko + i]; dx[(size_t)u * C3 + ko + i] += g * q[i]; }
    }
}

static void plain_att(const pa_t *p, int B)
{
    for (int b = 0; b < B; b++)
        for (int h = 0; h < p->NH; h++)
            for (int t = 0; t < p->T; t++) plain_row(p, b, h, t);
}

/* attention at threads 1 and 3 against the one-key loop: fwd and bwd bitwise */
static void test_attention(int NH, int KV)
{
    int B = 4, T = 61, hs = 67, /* large enough for attn_grain to split: 2-3 threads */ C = NH * hs, C3 = C + 2 * KV * hs;
    size_t nx = (size_t)B * T * C3, no = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    float *x = rnd(nx, 1.0f), *r = rnd(no, 1.0f), *o0 = calloc(no, 4), *a0 = calloc(na, 4), *d0 = calloc(nx, 4);
    float *da0 = calloc(na, 4);
    pa_t pa = {o0, a0, d0, da0, x, NULL, T, NH, KV, hs};
    plain_att(&pa, B);
    pa.dout = r;
    plain_att(&pa, B);
    for (int th = 1; th <= 3; th += 2) {
        float *o = calloc(no, 4), *a = calloc(na, 4), *d = calloc(nx, 4), *da = calloc(na, 4);
        mk_cpu_pool_set_threads(pool, th);
        mk_cpu_attention_fwd(pool, o, a, x, B, T, NH, KV, hs, 0);
        mk_cpu_attention_bwd(pool, d, da, r, x, a, B, T, NH, KV, hs);
        CHECK(same(o, o0, no) && same(a, a0, na), "attention NH %d KV %d fwd, %d threads", NH, KV, th);
        CHECK(same(d, d0, nx), "attention NH %d KV %d bwd, %d threads", NH, KV, th);
        free(o); free(a); free(d); free(da);
    }
    mk_cpu_pool_set_threads(pool, 1);
    free(x); free(r); free(o0); free(a0); free(d0); free(da0);
}

/* the 16-bit-probability attention at threads 3 against 1 thread: fwd and bwd bitwise */
static void test_attention16(int NH, int KV)
{
    int B = 4, T = 61, hs = 67, C = NH * hs, C3 = C + 2 * KV * hs;
    size_t nx = (size_t)B * T * C3, no = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    float *x = rnd(nx, 1.0f), *r = rnd(no, 1.0f), *o[2], *d[2];
    uint16_t *a[2], *da[2];
    for (int k = 0; k < 2; k++) {
        o[k] = calloc(no, 4), d[k] = calloc(nx, 4), a[k] = calloc(na, 2), da[k] = calloc(na, 2);
        mk_cpu_pool_set_threads(pool, 1 + 2 * k);
        mk_cpu_attention16_fwd(pool, o[k], a[k], x, B, T, NH, KV, hs, 0, MK_DTYPE_BF16);
        mk_cpu_attention16_bwd(pool, d[k], da[k], r, x, a[k], B, T, NH, KV, hs, MK_DTYPE_BF16);
    }
    CHECK(same(o[1], o[0], no) && !memcmp(a[1], a[0], na * 2), "attention16 NH %d KV %d fwd, 3 threads", NH, KV);
    CHECK(same(d[1], d[0], nx) && !memcmp(da[1], da[0], na * 2), "attention16 NH %d KV %d bwd, 3 threads", NH, KV);
    mk_cpu_pool_set_threads(pool, 1);
    for (int k = 0; k < 2; k++) free(o[k]), free(d[k]), free(a[k]), free(da[k]);
    free(x); free(r);
}

/* GELU, AdamW, cross-entropy, the sum of squares: 3 threads = 1 thread */
static void test_elementwise(void)
{
    int n = 300001, N = 7, Vl = 30011;
    float *x = rnd(n, 3.0f), *dy = rnd(n, 1.0f), *lg = rnd((size_t)N * Vl, 5.0f), *res[2][6];
    int tg[7] = {0, 5, 30010, 17, 29999, 3, 1234};
    double ss[2], loss[2];
    for (int k = 0; k < 2; k++) {
        mk_cpu_pool_set_threads(pool, k ? 3 : 1);
        float *g = res[k][0] = calloc(n, 4), *dg = res[k][1] = calloc(n, 4), *p = res[k][2] = dup(x, n);
        float *m = res[k][3] = calloc(n, 4), *v = res[k][4] = calloc(n, 4), *l = res[k][5] = dup(lg, (size_t)N * Vl);
        mk_cpu_gelu_fwd(pool, g, x, n);
        mk_cpu_gelu_bwd(pool, dg, x, dy, n);
        for (int s = 1; s <= 2; s++)
            mk_cpu_adamw(pool, p, dy, m, v, n, 1e-3f, 0.9f, 0.95f, 1 - powf(0.9f, s), 1 - powf(0.95f, s), 1e-8f, 0.1f, 0.7f);
        float mx[7], sum[7], t[7];
        mk_cpu_xent_max(pool, mx, l, N, Vl, 0, Vl - 3);
        mk_cpu_xent_exp(pool, l, sum, t, mx, tg, N, Vl, 0, Vl - 3);
        loss[k] = mk_cpu_xent_loss(pool, l, sum, t, N, Vl);
        mk_cpu_xent_bwd(pool, l, l, tg, 0.25f, N, Vl, 0);
        ss[k] = mk_cpu_sumsq(pool, x, n);
    }
    mk_cpu_pool_set_threads(pool, 1);
    const char *what[6] = {"gelu fwd", "gelu bwd", "adamw p", "adamw m", "adamw v", "cross-entropy"};
    for (int j = 0; j < 6; j++) CHECK(same(res[0][j], res[1][j], j == 5 ? (size_t)N * Vl : (size_t)n), "%s", what[j]);
    CHECK(loss[0] == loss[1] && ss[0] == ss[1], "loss %.17g %.17g, sumsq %.17g %.17g", loss[0], loss[1], ss[0], ss[1]);
    double want = 0.0;
    for (int i = 0; i < n; i++) want += (double)x[i] * x[i];
    CHECK_REL(ss[0], want, 1e-12, "sumsq (interleaved sums) against one serial sum");
    for (int k = 0; k < 2; k++) for (int j = 0; j < 6; j++) free(res[k][j]);
    free(x); free(dy); free(lg);
}

/* largest |a - b| over largest |b| */
static double normdiff(const float *a, const float *b, size_t n)
{
    double d = 0.0, m = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (fabs((double)a[i] - b[i]) > d) d = fabs((double)a[i] - b[i]);
        if (fabs((double)b[i]) > m) m = fabs((double)b[i]);
    }
    return m > 0.0 ? d / m : d;
}

/* The linears' GEMMs split over 3 threads (column blocks, or row blocks
   where C is taller) against one OpenBLAS call, at gpt2's shapes and with
   ragged edges.  Not bitwise: OpenBLAS's Zen kernel rounds an element
   differently depending on where its block starts (as its own threads
   do); the sums agree to float rounding, and 3 threads repeat exactly. */
static void test_gemm(int N, int IC, int OC)
{
    float *x = rnd((size_t)N * IC, 1.0f), *w = rnd((size_t)OC * IC, 0.1f), *b = rnd(OC, 1.0f);
    float *dy = rnd((size_t)N * OC, 1.0f), *res[3][4];
    for (int k = 0; k < 3; k++) {
        mk_cpu_pool_set_threads(pool, k ? 3 : 1);
        float *y = res[k][0] = calloc((size_t)N * OC, 4), *dx = res[k][1] = dup(x, (size_t)N * IC);
        float *dw = res[k][2] = dup(w, (size_t)OC * IC), *db = res[k][3] = calloc(OC, 4);
        mk_cpu_linear_fwd(pool, y, x, w, b, N, IC, OC);
        mk_cpu_linear_bwd_in(pool, dx, dy, w, N, IC, OC);
        mk_cpu_linear_bwd_w(pool, dw, db, dy, x, N, IC, OC);
    }
    mk_cpu_pool_set_threads(pool, 1);
    size_t len[4] = {(size_t)N * OC, (size_t)N * IC, (size_t)OC * IC, (size_t)OC};
    const char *what[4] = {"linear fwd", "linear bwd in", "linear bwd w", "bias grad"};
    for (int j = 0; j < 4; j++) {
        double d = normdiff(res[1][j], res[0][j], len[j]);
        CHECK(d < 1e-6, "%s N %d IC %d OC %d: split differs by %g", what[j], N, IC, OC, d);
        CHECK(same(res[1][j], res[2][j], len[j]), "%s N %d IC %d OC %d: 3 threads repeat", what[j], N, IC, OC);
    }
    for (int k = 0; k < 3; k++) for (int j = 0; j < 4; j++) free(res[k][j]);
    free(x); free(w); free(b); free(dy);
}

/* Mixed precision's GEMMs (mk_cpu_pool_set_gemm_dtype): against a double
   sum over the operands rounded to bf16 / fp16 (merak/half.h, the one
   rounding rule), by normalised error; and not the fp32 product. */
static void ref_linears(int dtype, int N, int IC, int OC, const float *x, const float *w, const float *dy,
                        double *y, double *dx, double *dw)
{
    size_t nx = (size_t)N * IC, nw = (size_t)OC * IC, ny = (size_t)N * OC;
    float *xr = malloc(nx * 4), *wr = malloc(nw * 4), *dr = malloc(ny * 4);
    if (dtype == MK_DTYPE_BF16) mk_bf16_round_n(xr, x, nx), mk_bf16_round_n(wr, w, nw), mk_bf16_round_n(dr, dy, ny);
    else mk_fp16_round_n(xr, x, nx), mk_fp16_round_n(wr, w, nw), mk_fp16_round_n(dr, dy, ny);
    memset(dx, 0, nx * sizeof *dx), memset(dw, 0, nw * sizeof *dw);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double acc = 0;
            for (int i = 0; i < IC; i++) {
                acc += (double)xr[(size_t)n * IC + i] * wr[(size_t)o * IC + i];
                dx[(size_t)n * IC + i] += (double)dr[(size_t)n * OC + o] * wr[(size_t)o * IC + i];
                dw[(size_t)o * IC + i] += (double)dr[(size_t)n * OC + o] * xr[(size_t)n * IC + i];
            }
            y[(size_t)n * OC + o] = acc;
        }
    free(xr), free(wr), free(dr);
}

static double normdiff_d(const float *a, const double *b, size_t n)
{
    double d = 0.0, m = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(a[i] - b[i]) > d) d = fabs(a[i] - b[i]);
        if (fabs(b[i]) > m) m = fabs(b[i]);
    }
    return m > 0.0 ? d / m : d;
}

static void test_gemm16(int dtype, int N, int IC, int OC)
{
    size_t nx = (size_t)N * IC, nw = (size_t)OC * IC, ny = (size_t)N * OC;
    float *x = rnd(nx, 1.0f), *w = rnd(nw, 0.1f), *dy = rnd(ny, 1.0f), *out[2][3];
    double *ry = malloc(ny * 8), *rdx = malloc(nx * 8), *rdw = malloc(nw * 8);
    ref_linears(dtype, N, IC, OC, x, w, dy, ry, rdx, rdw);
    mk_cpu_pool_set_threads(pool, 3);
    for (int k = 0; k < 2; k++) { /* 16-bit, then fp32 */
        mk_cpu_pool_set_gemm_dtype(pool, k ? MK_DTYPE_FP32 : dtype);
        out[k][0] = calloc(ny, 4), out[k][1] = calloc(nx, 4), out[k][2] = calloc(nw, 4);
        mk_cpu_linear_fwd(pool, out[k][0], x, w, NULL, N, IC, OC);
        mk_cpu_linear_bwd_in(pool, out[k][1], dy, w, N, IC, OC);
        mk_cpu_linear_bwd_w(pool, out[k][2], NULL, dy, x, N, IC, OC);
    }
    mk_cpu_pool_set_gemm_dtype(pool, MK_DTYPE_FP32), mk_cpu_pool_set_threads(pool, 1);
    const double *ref[3] = {ry, rdx, rdw};
    size_t len[3] = {ny, nx, nw};
    const char *what[3] = {"fwd", "bwd in", "bwd w"}, *dn = dtype == MK_DTYPE_BF16 ? "bf16" : "fp16";
    for (int j = 0; j < 3; j++) {
        double d = normdiff_d(out[0][j], ref[j], len[j]), f = normdiff_d(out[1][j], ref[j], len[j]);
        CHECK(d < 1e-5, "%s linear %s N %d IC %d OC %d: %g from the rounded operands' product", dn, what[j], N,
              IC, OC, d);
        CHECK(f > 10 * d, "%s linear %s: the fp32 product (%g) is no further off than the 16-bit one (%g)", dn,
              what[j], f, d);
        free(out[0][j]), free(out[1][j]);
    }
    free(x), free(w), free(dy), free(ry), free(rdx), free(rdw);
}

/* 16-bit views (mk_cpu_pool_view16, exec_p16.c's weights): a weight
   inside a registered view, whose floats are an address range holding no
   memory (PROT_NONE: a read faults), gives the same products bit for bit
   as the same values as rounded floats, on oneDNN (which reads the bits)
   and on the rounded-operand sgemm (which widens them into its scratch);
   the weight is a block inside a larger view, and the view goes when
   dropped. */
static void test_gemm16_view(int dtype, int N, int IC, int OC)
{
    size_t nx = (size_t)N * IC, nw = (size_t)OC * IC, ny = (size_t)N * OC, pad = 37, nv = nw + 2 * pad;
    float *x = rnd(nx, 1.0f), *big = rnd(nv, 0.1f), *dy = rnd(ny, 1.0f), *o[2][2];
    uint16_t *h = malloc(nv * sizeof *h);
    if (dtype == MK_DTYPE_BF16) mk_bf16_from_float_n(h, big, nv), mk_bf16_to_float_n(big, h, nv);
    else mk_fp16_from_float_n(h, big, nv), mk_fp16_to_float_n(big, h, nv);
    float *none = mmap(NULL, nv * sizeof(float), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(none != MAP_FAILED, "an address range without memory");
    if (none == MAP_FAILED) return;
    mk_cpu_pool_set_threads(pool, 3), mk_cpu_pool_set_gemm_dtype(pool, dtype);
    for (int k = 0; k < 2; k++) { /* the rounded floats, then the view of a range that cannot be read */
        const float *w = (k ? none : big) + pad;
        if (k) mk_cpu_pool_view16(pool, none, h, nv);
        o[k][0] = calloc(ny, 4), o[k][1] = calloc(nx, 4);
        mk_cpu_linear_fwd(pool, o[k][0], x, w, NULL, N, IC, OC);
        mk_cpu_linear_bwd_in(pool, o[k][1], dy, w, N, IC, OC);
    }
    const uint16_t *in = mk_cpu_pool_view16_of(pool, none + pad, nw);
    const uint16_t *past = mk_cpu_pool_view16_of(pool, none + pad, nw + pad + 1);
    CHECK(in == h + pad && !past, "a view holds its block, not past it");
    mk_cpu_pool_view16(pool, none, NULL, 0);
    CHECK(mk_cpu_pool_view16_of(pool, none + pad, nw) == NULL, "a dropped view is gone");
    mk_cpu_pool_set_gemm_dtype(pool, MK_DTYPE_FP32), mk_cpu_pool_set_threads(pool, 1);
    CHECK(!memcmp(o[0][0], o[1][0], ny * 4) && !memcmp(o[0][1], o[1][1], nx * 4),
          "%s GEMMs through a 16-bit view (%s): the same products bit for bit",
          dtype == MK_DTYPE_BF16 ? "bf16" : "fp16", mk_cpu_dnnl_bf16_ok() && dtype == MK_DTYPE_BF16 ? "oneDNN" : "sgemm");
    for (int k = 0; k < 2; k++) free(o[k][0]), free(o[k][1]);
    munmap(none, nv * sizeof(float));
    free(x), free(big), free(dy), free(h);
}

/* A small cap (mk_cpu_pool_set_gemm16_cap) splits the 16-bit GEMMs into
   panels: of K (130 x 300 x 200's three; 60 tokens x 3000 -> 100's
   forward), of C's columns (its input and weight gradients) and of C's
   rows (400 tokens x 50 -> 300's forward): the same sums (test_gemm16's
   bounds), a scratch of one panel, not the operands' copies whole
   (99,000 floats and more; bf16 bits: half). */
static void test_gemm16_panels(void)
{
    mk_cpu_pool_t *whole = pool;
    pool = mk_cpu_pool_new();
    mk_cpu_pool_set_gemm16_cap(pool, 4096);
    test_gemm16(MK_DTYPE_BF16, 130, 300, 200);
    test_gemm16(MK_DTYPE_BF16, 60, 3000, 100);
    test_gemm16(MK_DTYPE_BF16, 400, 50, 300);
    test_gemm16(MK_DTYPE_FP16, 60, 3000, 100);
    setenv("MK_TEST_NO_DNNL", "1", 1);
    test_gemm16(MK_DTYPE_BF16, 60, 3000, 100);
    unsetenv("MK_TEST_NO_DNNL");
    /* the widest panel here, 64 of K for 200 x 300 output (64 x 500 floats), is 32,000 floats as the
       rounded-operand copies (no oneDNN: the sanitizer build), half as bf16 bits */
    size_t got = mk_cpu_pool_scratch_bytes(pool) / sizeof(float);
    CHECK(got > 0 && got <= 32000, "16-bit GEMM panels: scratch %zu floats (at most 32000)", got);
    mk_cpu_pool_free(pool);
    pool = whole;
}

/* Two pools are two backends: each its own size, and a split on one runs
   while the other has its own workers (created, used, joined on free). */
static void add_one(void *arg, size_t lo, size_t hi)
{
    for (size_t i = lo; i < hi; i++) ((int *)arg)[i] += 1;
}

static void test_two_pools(void)
{
    mk_cpu_pool_t *a = mk_cpu_pool_new(), *b = mk_cpu_pool_new();
    mk_cpu_pool_set_threads(a, 2), mk_cpu_pool_set_threads(b, 3);
    CHECK(mk_cpu_pool_threads(a) == 2 && mk_cpu_pool_threads(b) == 3 && mk_cpu_pool_threads(NULL) == 1,
          "pool sizes %d %d", mk_cpu_pool_threads(a), mk_cpu_pool_threads(b));
    mk_cpu_pool_set_threads(a, 100000);
    CHECK(mk_cpu_pool_threads(a) == MK_CPU_MAX_THREADS, "clamped to %d", MK_CPU_MAX_THREADS);
    mk_cpu_pool_set_threads(a, 2);
    int n = 1000, *x = calloc(n, sizeof *x);
    mk_cpu_par(a, n, 10, add_one, x);
    mk_cpu_par(b, n, 10, add_one, x);
    mk_cpu_par(NULL, n, 10, add_one, x);
    int ok = 1;
    for (int i = 0; i < n; i++) ok &= x[i] == 3;
    CHECK(ok, "every element once per split, on either pool and on none");
    mk_cpu_pool_free(a), mk_cpu_pool_free(b), mk_cpu_pool_free(NULL);
    free(x);
}

int main(void)
{
    pool = mk_cpu_pool_new();
    test_two_pools();
    test_gemm(256, 768, 2304);   /* gpt2's QKV */
    test_gemm(256, 3072, 768);   /* MLP down */
    test_gemm(1000, 333, 203);   /* rows split, ragged */
    test_gemm(77, 3001, 5000);   /* LM-head-like, ragged */
    /* bf16 through oneDNN where it has a bf16 kernel here, then the rounded operands' sgemm */
    printf("bf16 GEMMs: %s\n", mk_cpu_dnnl_bf16_ok() ? "oneDNN's bf16 kernel" : "sgemm on rounded operands");
    test_gemm16(MK_DTYPE_BF16, 130, 300, 200);
    test_gemm16(MK_DTYPE_BF16, 300, 130, 70);
    setenv("MK_TEST_NO_DNNL", "1", 1);
    CHECK(!mk_cpu_dnnl_bf16_ok(), "MK_TEST_NO_DNNL=1 turns oneDNN off");
    test_gemm16(MK_DTYPE_BF16, 130, 300, 200);
    unsetenv("MK_TEST_NO_DNNL");
    test_gemm16(MK_DTYPE_FP16, 64, 257, 190);
    test_gemm16_view(MK_DTYPE_BF16, 130, 300, 200);
    test_gemm16_view(MK_DTYPE_FP16, 64, 257, 190);
    setenv("MK_TEST_NO_DNNL", "1", 1);
    test_gemm16_view(MK_DTYPE_BF16, 130, 300, 200);
    unsetenv("MK_TEST_NO_DNNL");
    test_gemm16_panels();
    test_attention(4, 4);  /* MHA */
    test_attention(6, 2);  /* GQA */
    test_attention(3, 1);  /* MQA */
    test_attention16(6, 2);
    test_elementwise();
    mk_cpu_pool_free(pool);
    CHECK_DONE();
}
