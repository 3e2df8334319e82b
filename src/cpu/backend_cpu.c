/* The CPU backend: the backend table of the OpenBLAS/C kernels, with its
 * thread pool (cpu_par.c) as the context. */
#include "config.h"
#include "merak/backend.h"
#include "merak/common.h"
#include "merak/kernels_cpu.h"
#include "merak/model.h"
#include "merak/half.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

const char *mk_cpu_blas_core(void)
{
#ifdef HAVE_OPENBLAS_GET_CORENAME
    const char *c = openblas_get_corename();
    return c && *c ? c : "unknown";
#else
    return "unknown";
#endif
}

/* Zeroing split over the rank's cores: the step's gradients (0.5 GB at
 * gpt2-124m) are cleared every step, and one core does not saturate the
 * memory bus. */
static void zero_part(void *arg, size_t lo, size_t hi) { memset((char *)arg + lo, 0, hi - lo); }
static void par_zero(void *ctx, void *p, size_t bytes) { mk_cpu_par(ctx, bytes, (size_t)4 << 20, zero_part, p); }

/* The CPU backend's context is its thread pool (NULL: one thread). */
static size_t padded(size_t bytes) { return (bytes + 63) & ~(size_t)63 ? (bytes + 63) & ~(size_t)63 : 64; }

static void *cpu_alloc_raw(void *ctx, size_t bytes)
{
    (void)ctx; /* 64-byte alignment for vector loads */
    void *p = NULL;
    return posix_memalign(&p, 64, padded(bytes)) ? NULL : p;
}

static void *cpu_alloc(void *ctx, size_t bytes)
{
    void *p = cpu_alloc_raw(ctx, bytes); /* calloc semantics (zeroed) */
    if (p) par_zero(ctx, p, padded(bytes));
    return p;
}

static void cpu_free(void *ctx, void *p) { (void)ctx; free(p); }
static void cpu_zero(void *ctx, void *p, size_t bytes) { par_zero(ctx, p, bytes); }
static void cpu_copy(void *ctx, void *d, const void *s, size_t bytes) { (void)ctx; memmove(d, s, bytes); }

static void cpu_set_threads(void *ctx, int n) { mk_cpu_pool_set_threads(ctx, n); }
static void cpu_destroy(void *ctx) { mk_cpu_pool_free(ctx); }
static void cpu_set_gemm_dtype(void *ctx, int dtype) { mk_cpu_pool_set_gemm_dtype(ctx, dtype); }
static size_t cpu_scratch_bytes(void *ctx) { return mk_cpu_pool_scratch_bytes(ctx); }
static void cpu_weights16(void *ctx, const float *w, const void *w16, size_t n)
{
    mk_cpu_pool_view16(ctx, w, w16, n);
}

/* 16-bit conversions split over the rank's cores like zeroing: the
 * 16-bit weights are widened per layer and rounded from the masters every
 * step (exec_p16.c), gpt2-124m's 124 M of them.  op 0 round, 1 pack, 2
 * unpack; values [lo, hi) of n. */
typedef struct { int op, dtype; float *x; const float *cx; uint16_t *h; const uint16_t *ch; } conv16_t;

static void conv16_part(void *arg, size_t lo, size_t hi)
{
    const conv16_t *c = arg;
    int f16 = c->dtype == MK_DTYPE_FP16;
    if (c->op == 0 && f16) mk_fp16_round_n(c->x + lo, c->x + lo, hi - lo);
    else if (c->op == 0 && c->dtype == MK_DTYPE_BF16) mk_bf16_round_n(c->x + lo, c->x + lo, hi - lo);
    else if (c->op == 1 && f16) mk_fp16_from_float_n(c->h + lo, c->cx + lo, hi - lo);
    else if (c->op == 1) mk_bf16_from_float_n(c->h + lo, c->cx + lo, hi - lo);
    else if (c->op == 2 && f16) mk_fp16_to_float_n(c->x + lo, c->ch + lo, hi - lo);
    else if (c->op == 2) mk_bf16_to_float_n(c->x + lo, c->ch + lo, hi - lo);
}

static void cpu_round16(void *ctx, float *x, size_t n, int dtype)
{
    conv16_t c = {0, dtype, x, NULL, NULL, NULL};
    mk_cpu_par(ctx, n, (size_t)1 << 20, conv16_part, &c);
}

static void cpu_pack16(void *ctx, void *dst, const float *x, size_t n, int dtype)
{
    conv16_t c = {1, dtype, NULL, x, dst, NULL};
    mk_cpu_par(ctx, n, (size_t)1 << 20, conv16_part, &c);
}

static void cpu_unpack16(void *ctx, float *dst, const void *src, size_t n, int dtype)
{
    conv16_t c = {2, dtype, dst, NULL, NULL, src};
    mk_cpu_par(ctx, n, (size_t)1 << 20, conv16_part, &c);
}

static const mk_backend_t mk_cpu = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .zero = cpu_zero,
    .copy = cpu_copy,
    .linear_fwd = mk_cpu_linear_fwd,
    .linear_bwd_in = mk_cpu_linear_bwd_in,
    .linear_bwd_w = mk_cpu_linear_bwd_w,
    .embed_fwd = mk_cpu_embed_fwd,
    .embed_bwd = mk_cpu_embed_bwd,
    .layernorm_fwd = mk_cpu_layernorm_fwd,
    .layernorm_bwd = mk_cpu_layernorm_bwd,
    .rmsnorm_fwd = mk_cpu_rmsnorm_fwd,
    .rmsnorm_bwd = mk_cpu_rmsnorm_bwd,
    .attention_fwd = mk_cpu_attention_fwd,
    .attention_bwd = mk_cpu_attention_bwd,
    .attention16_fwd = mk_cpu_attention16_fwd,
    .attention16_bwd = mk_cpu_attention16_bwd,
    .rope_fwd = mk_cpu_rope_fwd,
    .rope_bwd = mk_cpu_rope_bwd,
    .gelu_fwd = mk_cpu_gelu_fwd,
    .gelu_bwd = mk_cpu_gelu_bwd,
    .swiglu_fwd = mk_cpu_swiglu_fwd,
    .swiglu_bwd = mk_cpu_swiglu_bwd,
    .add = mk_cpu_add,
    .acc = mk_cpu_acc,
    .xent_max = mk_cpu_xent_max,
    .xent_exp = mk_cpu_xent_exp,
    .xent_loss = mk_cpu_xent_loss,
    .xent_bwd = mk_cpu_xent_bwd,
    .adamw = mk_cpu_adamw,
    .sumsq = mk_cpu_sumsq,
    .moe_route = mk_cpu_moe_route,
    .moe_route_bwd = mk_cpu_moe_route_bwd,
    .moe_gather = mk_cpu_moe_gather,
    .moe_scatter = mk_cpu_moe_scatter,
    .attention_fused_fwd = mk_cpu_attention_fused_fwd,
    .attention_fused_bwd = mk_cpu_attention_fused_bwd,
    .moe_route_sig = mk_cpu_moe_route_sig,
    .moe_route_sig_bwd = mk_cpu_moe_route_sig_bwd,
    .cols_gather = mk_cpu_cols_gather,
    .cols_scatter = mk_cpu_cols_scatter,
    .set_threads = cpu_set_threads,
    .set_gemm_dtype = cpu_set_gemm_dtype,
    .scratch_bytes = cpu_scratch_bytes,
    .round16 = cpu_round16,
    .pack16 = cpu_pack16,
    .unpack16 = cpu_unpack16,
    .alloc_raw = cpu_alloc_raw,
    .weights16 = cpu_weights16,
};

const mk_backend_t *mk_backend_cpu(void) { return &mk_cpu; }

/* MK_TEST_STAGED=1 (a test hook): this backend's buffers look like a
 * device's to the executor (is_device, to_host, to_device, sync), so every
 * buffer it hands MPI goes through a host copy (src/exec/comm.c
 * mk_comm_stage) and the 16-bit stores stay off (mk_exec_store16): the
 * configuration the CUDA backend runs in, with its staging logic, tested
 * without a GPU (tests/mpi-staged.sh).  A staging buffer starts as NaNs,
 * so a copy the executor forgot shows in the losses; the buffers are
 * mappings of their own, so that MPI handed one (not its staged copy) is
 * caught there too (tests/mpi_guard.c). */
static int staged_is_device(void *ctx, const void *p) { (void)ctx; return p != NULL; }
static void staged_memcpy(void *ctx, void *d, const void *s, size_t bytes) { (void)ctx, memcpy(d, s, bytes); }
static void staged_sync(void *ctx) { (void)ctx; }
static void *staged_host_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    void *p = malloc(bytes ? bytes : 1);
    if (p) memset(p, 0xff, bytes); /* every float a NaN */
    return p;
}
static void staged_host_free(void *ctx, void *p) { (void)ctx, free(p); }

/* A staged "device" buffer: a memfd mapping of its own named
 * mk-staged-device (zero-filled), which tests/mpi_guard.c finds in
 * /proc/self/maps to refuse it to MPI; the mapping's size sits in a
 * header before the buffer (64 bytes: the buffer keeps the alignment). */
enum { STAGED_HEAD = 64 };
static void *staged_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    size_t n = STAGED_HEAD + padded(bytes);
    int fd = memfd_create("mk-staged-device", MFD_CLOEXEC);
    if (fd < 0) return NULL;
    void *p = ftruncate(fd, (off_t)n) ? MAP_FAILED : mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return NULL;
    *(size_t *)p = n;
    return (char *)p + STAGED_HEAD;
}

static void staged_free(void *ctx, void *p)
{
    (void)ctx;
    if (!p) return;
    char *b = (char *)p - STAGED_HEAD;
    munmap(b, *(size_t *)b);
}

static void cpu_staged(mk_backend_t *be)
{
    long long on = 0;
    if (!mk_test_env("MK_TEST_STAGED", NULL, &on) || !on) return;
    be->is_device = staged_is_device, be->to_host = staged_memcpy, be->to_device = staged_memcpy;
    be->sync = staged_sync, be->host_alloc = staged_host_alloc, be->host_free = staged_host_free;
    be->alloc = be->alloc_raw = staged_alloc, be->free = staged_free;
}

/* A CPU backend of its own: the shared table with a thread pool as its
 * context (one thread until set_threads), freed with the table. */
mk_backend_t *mk_backend_cpu_new(void)
{
    mk_backend_t *be = malloc(sizeof *be);
    mk_cpu_pool_t *pool = mk_cpu_pool_new();
    if (!be || !pool) {
        free(be), mk_cpu_pool_free(pool);
        mk_error_set("out of memory");
        return NULL;
    }
    *be = mk_cpu;
    be->ctx = pool;
    be->destroy = cpu_destroy;
    cpu_staged(be);
    return be;
}
