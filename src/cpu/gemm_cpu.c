/* The linears' GEMMs on the CPU backend: a row-major sgemm split over the
 * pool, and mixed precision's 16-bit GEMMs (operands rounded to bf16 or
 * fp16, oneDNN's bf16 kernel where it has one, in panels where the copies
 * would be large).  Tested against double sums in tests/test_kernels_par. */
#include "config.h"
#include "merak/half.h"
#include "merak/kernels_cpu.h"
#include "merak/model.h"

#include <cblas.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#define PAR_GRAIN MK_CPU_PAR_GRAIN

/* A row-major sgemm split over the rank's cores by OpenBLAS's one-thread
 * sgemm on column blocks of C (or row blocks where C is taller than wide:
 * the split duplicates the packing of the operand it does not cut, so cut
 * the larger).  OpenBLAS runs one thread (mk_runtime_bind): its own workers
 * would spin between GEMMs on the cores our kernels use.  Each element of C
 * is the same K-ordered sum whatever the block (OpenBLAS blocks K by K
 * alone), so the result is bitwise the unsplit call's (tests/test_kernels_par). */
typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc, by_rows;
    const float *A, *B;
    float beta, *C;
} gemm_t;

#define GEMM_UNIT 64  /* rows or columns per split unit */

/* Units [lo, hi) of a split GEMM (by rows: of A and C, else columns of B
 * and C): the element offsets into A, B and C and the block's M x N. */
typedef struct { size_t a, b, c; int M, N; } gblock_t;

static gblock_t gemm_block(int by_rows, int ta, int tb, int M, int N, int lda, int ldb, int ldc, size_t lo,
                           size_t hi)
{
    int a = (int)lo * GEMM_UNIT, e = (int)hi * GEMM_UNIT, lim = by_rows ? M : N;
    if (e > lim) e = lim;
    if (by_rows) return (gblock_t){ta ? (size_t)a : (size_t)a * lda, 0, (size_t)a * ldc, e - a, N};
    return (gblock_t){0, tb ? (size_t)a * ldb : (size_t)a, (size_t)a, M, e - a};
}

/* The split over the pool: units of GEMM_UNIT rows (or columns), a share
 * of at least ~8 MFLOP (~0.1 ms) per thread. */
static void gemm_par(void *ctx, int by_rows, int M, int N, int K, mk_cpu_range_fn fn, void *arg)
{
    size_t units = (size_t)((by_rows ? M : N) + GEMM_UNIT - 1) / GEMM_UNIT;
    size_t flop_unit = 2 * (size_t)GEMM_UNIT * K * (by_rows ? N : M) + 1;
    mk_cpu_par(ctx, units, ((size_t)8 << 20) / flop_unit + 1, fn, arg);
}

static void gemm_part(void *p, size_t lo, size_t hi)
{
    const gemm_t *g = p;
    gblock_t k = gemm_block(g->by_rows, g->ta, g->tb, g->M, g->N, g->lda, g->ldb, g->ldc, lo, hi);
    cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans,
                k.M, k.N, g->K, 1.0f, g->A + k.a, g->lda, g->B + k.b, g->ldb, g->beta, g->C + k.c, g->ldc);
}

/* Mixed precision's GEMM (mk_cpu_pool_set_gemm_dtype): the operand rows
 * rows x cols (leading dimension ld) rounded to bf16 or fp16 values into
 * dst (packed: leading dimension cols), a range of rows per thread. */
typedef struct {
    const float *src;
    const uint16_t *src16;    /* src's 16-bit view (the GEMM's dtype), or NULL */
    float *dst;               /* BF16_BITS: uint16_t bfloat16 bits (oneDNN's operands), else floats */
    int cols, ld, dtype;
} round_t;

enum { BF16_BITS = -1 };      /* round_t's dtype for the bits themselves */

static void round_part(void *p, size_t lo, size_t hi)
{
    const round_t *r = p;
    for (size_t i = lo; i < hi; i++) {
        const float *s = r->src + i * (size_t)r->ld;
        const uint16_t *h = r->src16 ? r->src16 + i * (size_t)r->ld : NULL;
        float *d = r->dst + i * (size_t)r->cols;
        if (h && r->dtype == MK_DTYPE_BF16) mk_bf16_to_float_n(d, h, (size_t)r->cols); /* a view's values */
        else if (h) mk_fp16_to_float_n(d, h, (size_t)r->cols);
        else if (r->dtype == MK_DTYPE_BF16) mk_bf16_round_n(d, s, (size_t)r->cols);
        else if (r->dtype == MK_DTYPE_FP16) mk_fp16_round_n(d, s, (size_t)r->cols);
        else mk_bf16_from_float_n((uint16_t *)r->dst + i * (size_t)r->cols, s, (size_t)r->cols); /* BF16_BITS */
    }
}

/* src's rows rounded into dst; src16 (a 16-bit view of src, or NULL): widened from it instead. */
static void round_rows(void *ctx, const float *src, const uint16_t *src16, int rows, int cols, int ld, float *dst,
                       int dtype)
{
    round_t r = {src, src16, dst, cols, ld, dtype};
    mk_cpu_par(ctx, (size_t)rows, PAR_GRAIN / ((size_t)cols + 1) + 1, round_part, &r);
}

/* The 16-bit view holding operand X (rows x cols, leading dimension ld), or NULL. */
static const uint16_t *view_of(void *ctx, const float *X, int rows, int cols, int ld)
{
    return rows && cols ? mk_cpu_pool_view16_of(ctx, X, (size_t)(rows - 1) * ld + cols) : NULL;
}

/* oneDNN's bf16 GEMM on column (or row) blocks of C, as gemm_part splits sgemm. */
typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc, by_rows, acc;
    const uint16_t *A, *B;
    float *C;
} gemm16_t;

static void gemm16_part(void *p, size_t lo, size_t hi)
{
    gemm16_t *g = p;
    gblock_t k = gemm_block(g->by_rows, g->ta, g->tb, g->M, g->N, g->lda, g->ldb, g->ldc, lo, hi);
    const uint16_t *A = g->A + k.a, *B = g->B + k.b;
    float *C = g->C + k.c;
    int M = k.M, N = k.N;
    if (mk_cpu_gemm_bf16(g->ta, g->tb, M, N, g->K, A, g->lda, B, g->ldb, g->acc, C, g->ldc) == 0) return;
    /* oneDNN failed on a block it took before (not expected): the same sums, by loops */
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float acc = 0;
            for (int q = 0; q < g->K; q++)
                acc += mk_bf16_to_float(A[g->ta ? (size_t)q * g->lda + m : (size_t)m * g->lda + q]) *
                       mk_bf16_to_float(B[g->tb ? (size_t)n * g->ldb + q : (size_t)q * g->ldb + n]);
            C[(size_t)m * g->ldc + n] = g->acc ? C[(size_t)m * g->ldc + n] + acc : acc;
        }
}

/* bf16 through oneDNN where it has a bf16 kernel here: both operands as
 * bf16 bits (half the scratch), the blocks split over the pool.  0, or -1
 * with nothing written (no kernel, beta not 0 or 1, no scratch). */
static int gemm_dnnl(void *ctx, int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc)
{
    if ((beta != 0.0f && beta != 1.0f) || !mk_cpu_dnnl_bf16_ok()) return -1;
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    const uint16_t *va = view_of(ctx, A, ar, ac, lda), *vb = view_of(ctx, B, br, bc, ldb);
    size_t na = va ? 0 : (size_t)ar * ac, nb = vb ? 0 : (size_t)br * bc;
    float *s = mk_cpu_pool_scratch(ctx, (na + nb + 1) / 2 + 1);
    if (!s) return -1;
    uint16_t *a16 = (uint16_t *)s, *b16 = a16 + na;
    if (!va) round_rows(ctx, A, NULL, ar, ac, lda, (float *)a16, BF16_BITS);
    if (!vb) round_rows(ctx, B, NULL, br, bc, ldb, (float *)b16, BF16_BITS);
    gemm16_t g = {ta, tb, M, N, K, va ? lda : ac, vb ? ldb : bc, ldc, M > N, beta != 0.0f,
                  va ? va : a16, vb ? vb : b16, C};
    gemm_par(ctx, g.by_rows, M, N, K, gemm16_part, &g);
    return 0;
}


static void gemm_split(void *ctx, int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
                       int ldb, float beta, float *C, int ldc);

/* The operands' 16-bit values (an fp32 sum of their products, as cuBLAS
 * and oneDNN give for 16-bit inputs); 0, or -1 without the scratch (the
 * caller then multiplies in fp32). */
static int gemm_whole16(void *ctx, int dtype, int ta, int tb, int M, int N, int K, const float *A, int lda,
                        const float *B, int ldb, float beta, float *C, int ldc)
{
    if (dtype == MK_DTYPE_BF16 && gemm_dnnl(ctx, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc) == 0) return 0;
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    size_t na = (size_t)ar * ac, nb = (size_t)br * bc;
    float *s = mk_cpu_pool_scratch(ctx, na + nb);
    if (!s) return -1;
    round_rows(ctx, A, view_of(ctx, A, ar, ac, lda), ar, ac, lda, s, dtype);
    round_rows(ctx, B, view_of(ctx, B, br, bc, ldb), br, bc, ldb, s + na, dtype);
    gemm_split(ctx, ta, tb, M, N, K, s, ac, s + na, bc, beta, C, ldc);
    return 0;
}

/* Which dimension a 16-bit GEMM's panels split (0: none, 1 C's rows, 2
 * its columns, 3 K): none where both copies fit the cap; the large
 * operand's own one where the other's copy takes at most half the cap;
 * else K (both shrink), or where K is too short the large one's. */
static int panel_dim(int M, int N, int K, size_t cap, int wide)
{
    size_t na = (size_t)M * K, nb = (size_t)N * K, small = na < nb ? na : nb;
    int own = na >= nb ? 1 : 2, len = own == 1 ? M : N;
    if (na + nb <= cap) return 0;
    if (small <= cap / 2 && len >= 2 * wide) return own;
    if (K >= 2 * wide) return 3;
    return len >= 2 * wide ? own : 0;
}

/* The same in panels where the copies of both operands whole would pass
 * the pool's cap (mk_cpu_pool_gemm16_cap, in fp32 floats: a bf16 copy
 * takes half), each panel converting only its share: C's rows or columns,
 * or K with C accumulating (beta, then 1: the panels' sums add in fp32 as
 * the blocked kernels' do).  A panel is at least 64 wide (a GEMM that
 * narrow is no longer efficient). */
static int gemm_16bit(void *ctx, int dtype, int ta, int tb, int M, int N, int K, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc)
{
    size_t na = (size_t)M * K, nb = (size_t)N * K, cap = mk_cpu_pool_gemm16_cap(ctx);
    int wide = 64, dim = panel_dim(M, N, K, cap, wide);
    if (!dim) return gemm_whole16(ctx, dtype, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    size_t other = dim == 1 ? nb : dim == 2 ? na : 0;
    size_t per = dim == 3 ? (size_t)M + N : (size_t)K; /* floats a unit of the split dimension takes */
    size_t room = cap > other ? (cap - other) / per : 0;
    int P = room < (size_t)wide ? wide : room > (size_t)INT_MAX ? INT_MAX : (int)room;
    int D = dim == 1 ? M : dim == 2 ? N : K;
    for (int at = 0; at < D; at += P) {
        int n = D - at < P ? D - at : P;
        const float *a = A, *b = B;
        float *c = C, bt = beta;
        if (dim == 1) a += ta ? (size_t)at : (size_t)at * lda, c += (size_t)at * ldc;
        else if (dim == 2) b += tb ? (size_t)at * ldb : (size_t)at, c += at;
        else a += ta ? (size_t)at * lda : (size_t)at, b += tb ? (size_t)at : (size_t)at * ldb, bt = at ? 1.0f : beta;
        int pm = dim == 1 ? n : M, pn = dim == 2 ? n : N, pk = dim == 3 ? n : K;
        if (gemm_whole16(ctx, dtype, ta, tb, pm, pn, pk, a, lda, b, ldb, bt, c, ldc) == 0) continue;
        if (!at) return -1; /* nothing written: the caller multiplies in fp32 */
        gemm_split(ctx, ta, tb, pm, pn, pk, a, lda, b, ldb, bt, c, ldc); /* not expected: the first panel had room */
    }
    return 0;
}

static void gemm(void *ctx, int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc)
{
    int dt = mk_cpu_pool_gemm_dtype(ctx);
    if ((dt == MK_DTYPE_BF16 || dt == MK_DTYPE_FP16) &&
        gemm_16bit(ctx, dt, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc) == 0)
        return;
    gemm_split(ctx, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

static void gemm_split(void *ctx, int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
                       int ldb, float beta, float *C, int ldc)
{
    gemm_t g = {ta, tb, M, N, K, lda, ldb, ldc, M > N, A, B, beta, C};
#ifndef HAVE_OPENBLAS_SET_NUM_THREADS
    /* OpenBLAS's own threads stay on: a split would nest them in ours */
    g.by_rows = 0;
    gemm_part(&g, 0, (size_t)(N + GEMM_UNIT - 1) / GEMM_UNIT);
    return;
#endif
    gemm_par(ctx, g.by_rows, M, N, K, gemm_part, &g);
}

void mk_cpu_linear_fwd(void *ctx, float *out, const float *inp, const float *w, const float *bias,
                       int N, int IC, int OC)
{
    (void)ctx;
    if (bias)
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, OC * sizeof(float));
    gemm(ctx, 0, 1, N, OC, IC, inp, IC, w, IC, bias ? 1.0f : 0.0f, out, OC);
}

void mk_cpu_linear_bwd_in(void *ctx, float *dinp, const float *dout, const float *w, int N, int IC, int OC)
{
    (void)ctx;
    if (dinp) gemm(ctx, 0, 0, N, IC, OC, dout, OC, w, IC, 1.0f, dinp, IC);
}

void mk_cpu_linear_bwd_w(void *ctx, float *dw, float *dbias, const float *dout, const float *inp,
                         int N, int IC, int OC)
{
    if (dw) gemm(ctx, 1, 0, OC, IC, N, dout, OC, inp, IC, 1.0f, dw, IC);
    if (!dbias) return;
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * OC;
        for (int o = 0; o < OC; o++) dbias[o] += d[o];
    }
}

