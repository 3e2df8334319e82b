/* bf16 GEMMs through oneDNN's matmul (optional: configure's HAVE_DNNL),
 * where it runs a bf16 kernel (AVX512-BF16 or AMX: its implementation name
 * says which; elsewhere the caller keeps rounding to bf16 and calling
 * sgemm).  C (M, N, fp32, leading dimension ldc) = op(A) op(B) (+ C when
 * accumulating), A and B bf16 with any leading dimensions: one primitive
 * per shape, made once (shapes repeat every micro-batch) and run from any
 * of the pool's threads, each with its own stream, its own scratchpad (the
 * primitives are made in user scratchpad mode: oneDNN's library mode would
 * tie each to the thread that made it) and OpenMP held to one thread (the
 * pool splits the GEMM; oneDNN's own team would spin on the cores the
 * other kernels use). */
#include "config.h"
#include "merak/common.h"
#include "merak/kernels_cpu.h"

#ifdef HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

void omp_set_num_threads(int n); /* libgomp's (omp.h is not in every install) */

#define PRIMS 256 /* shapes kept: a model's linears, their split blocks and both backward GEMMs */

typedef struct {
    int key[9];               /* ta, tb, M, N, K, lda, ldb, ldc, acc */
    dnnl_primitive_t p;
} prim_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t eng;
static int usable = -1;       /* -1: not asked yet; 0: no bf16 kernel (or an error): sgemm */
static prim_t prims[PRIMS];
static int nprims;
static _Thread_local dnnl_stream_t stream;
static _Thread_local int one_thread;
static _Thread_local void *scratch;   /* this thread's scratchpad (kept, grown; freed at exit by the OS) */
static _Thread_local size_t scratch_n;

static dnnl_primitive_t make_prim(const int *k)
{
    dnnl_memory_desc_t a, b, c;
    dnnl_dims_t da = {k[2], k[4]}, db = {k[4], k[3]}, dc = {k[2], k[3]};
    dnnl_dims_t sa = {k[0] ? 1 : k[5], k[0] ? k[5] : 1}, sb = {k[1] ? 1 : k[6], k[1] ? k[6] : 1}, sc = {k[7], 1};
    dnnl_matmul_desc_t md;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t p = NULL;
    int ok = dnnl_memory_desc_init_by_strides(&a, 2, da, dnnl_bf16, sa) == dnnl_success &&
             dnnl_memory_desc_init_by_strides(&b, 2, db, dnnl_bf16, sb) == dnnl_success &&
             dnnl_memory_desc_init_by_strides(&c, 2, dc, dnnl_f32, sc) == dnnl_success &&
             dnnl_matmul_desc_init(&md, &a, &b, NULL, &c) == dnnl_success &&
             dnnl_primitive_attr_create(&attr) == dnnl_success &&
             /* the scratchpad ours, one per thread: oneDNN's own would tie a primitive to the thread that made it */
             dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
    if (ok && k[8]) /* C += A B: the sum post-op */
        ok = dnnl_post_ops_create(&po) == dnnl_success && dnnl_post_ops_append_sum(po, 1.0f) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
    if (ok) ok = dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL) == dnnl_success;
    if (ok && usable < 0) { /* the first one tells whether the CPU has a bf16 kernel */
        const char *impl = NULL;
        usable = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
                 (strstr(impl, "bf16") || strstr(impl, "amx"));
    }
    if (ok && usable) ok = dnnl_primitive_create(&p, pd) == dnnl_success;
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return ok ? p : NULL;
}

/* The primitive of shape k: kept; once PRIMS are kept (a model whose
 * shapes keep changing: MoE experts' token counts), one made for this call
 * alone (*temp: the caller destroys it). */
static dnnl_primitive_t prim_of(const int *k, int *temp)
{
    dnnl_primitive_t p = NULL;
    *temp = 0;
    pthread_mutex_lock(&mu);
    if (!eng && dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success) usable = 0, eng = NULL;
    for (int i = 0; i < nprims && !p; i++)
        if (!memcmp(prims[i].key, k, sizeof prims[i].key)) p = prims[i].p;
    if (!p && usable != 0 && eng && (p = make_prim(k))) {
        if (nprims < PRIMS) memcpy(prims[nprims].key, k, sizeof prims[nprims].key), prims[nprims++].p = p;
        else *temp = 1;
    }
    pthread_mutex_unlock(&mu);
    return p;
}

/* MK_TEST_NO_DNNL=1: as if oneDNN had no bf16 kernel here (the rounding path's tests). */
int mk_cpu_dnnl_bf16_ok(void)
{
    long long off;
    if (mk_test_env("MK_TEST_NO_DNNL", NULL, &off) && off) return 0;
    static atomic_int known = -1; /* asked once: every GEMM asks again */
    int v = atomic_load(&known);
    if (v >= 0) return v;
    int k[9] = {0, 0, 64, 64, 64, 64, 64, 64, 0}, temp;
    dnnl_primitive_t p = prim_of(k, &temp);
    if (p && temp) dnnl_primitive_destroy(p);
    atomic_store(&known, p != NULL);
    return p != NULL;
}

static int run_prim(dnnl_primitive_t p, const uint16_t *A, const uint16_t *B, float *C);

int mk_cpu_gemm_bf16(int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
                     int acc, float *C, int ldc)
{
    int k[9] = {ta, tb, M, N, K, lda, ldb, ldc, acc != 0}, temp;
    dnnl_primitive_t p = prim_of(k, &temp);
    if (!p) return -1;
    int rc = run_prim(p, A, B, C);
    if (temp) dnnl_primitive_destroy(p);
    return rc;
}

static int run_prim(dnnl_primitive_t p, const uint16_t *A, const uint16_t *B, float *C)
{
    if (!one_thread) omp_set_num_threads(1), one_thread = 1;
    if (!stream && dnnl_stream_create(&stream, eng, dnnl_stream_default_flags) != dnnl_success) return -1;
    const dnnl_memory_desc_t *d[4];
    dnnl_primitive_desc_t pd;
    if (dnnl_primitive_get_primitive_desc(p, (const_dnnl_primitive_desc_t *)&pd) != dnnl_success) return -1;
    static const dnnl_query_t q[4] = {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md,
                                      dnnl_query_scratchpad_md};
    for (int i = 0; i < 4; i++) d[i] = dnnl_primitive_desc_query_md(pd, q[i], 0);
    size_t need = d[3] ? dnnl_memory_desc_get_size(d[3]) : 0;
    if (need > scratch_n) {
        void *v = realloc(scratch, need);
        if (!v) return -1;
        scratch = v, scratch_n = need;
    }
    void *h[4] = {(void *)A, (void *)B, C, scratch};
    dnnl_memory_t m[4] = {NULL, NULL, NULL, NULL};
    int ok = 1, n = need ? 4 : 3;
    for (int i = 0; i < n; i++) ok &= dnnl_memory_create(&m[i], d[i], eng, h[i]) == dnnl_success;
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, m[0]}, {DNNL_ARG_WEIGHTS, m[1]}, {DNNL_ARG_DST, m[2]},
                               {DNNL_ARG_SCRATCHPAD, m[3]}};
    ok = ok && dnnl_primitive_execute(p, stream, n, args) == dnnl_success && dnnl_stream_wait(stream) == dnnl_success;
    for (int i = 0; i < n; i++)
        if (m[i]) dnnl_memory_destroy(m[i]);
    return ok ? 0 : -1;
}
#else
int mk_cpu_dnnl_bf16_ok(void) { return 0; }

int mk_cpu_gemm_bf16(int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
                     int acc, float *C, int ldc)
{
    (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)acc, (void)C;
    (void)ldc;
    return -1;
}
#endif
