// The CUDA backend table: its context (mkc_ctx_t behind mk_backend_t.ctx:
// streams, events, cuBLAS handle, math mode, the sticky error), memory,
// host staging for MPI, device choice.  Kernels live in the
// other .cu files of this directory (see common.cuh).
#include "config.h"
#include "merak/backend.h"
#include "merak/cuda.h"
#include "common.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mkc_fail(mkc_ctx_t *c, const char *what, const char *file, int line)
{
    if (c->failed) return;
    c->failed = 1;
    snprintf(c->fail_msg, sizeof c->fail_msg, "CUDA error: %s (%s:%d)", what, file, line);
}

static int cu_status(void *ctx)
{
    mkc_ctx_t *c = (mkc_ctx_t *)ctx;
    return c->failed ? mk_error_set("%s", c->fail_msg) : 0;
}

void mkc_after_launch(mkc_ctx_t *c, const char *file, int line)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && c->sync_each) e = cudaStreamSynchronize(c->s);
    if (e != cudaSuccess) mkc_fail(c, cudaGetErrorString(e), file, line);
}

// MK_CUDA_MATH: fp32 (default), tf32 or bf16; -1 with mk_error_set
// otherwise (mk_backend_cuda_new() refuses the backend then).
static int math_from_env(void)
{
    const char *m = getenv("MK_CUDA_MATH");
    if (!m || !*m || !strcmp(m, "fp32")) return MKC_MATH_FP32;
    if (!strcmp(m, "tf32")) return MKC_MATH_TF32;
    if (!strcmp(m, "bf16")) return MKC_MATH_BF16;
    return mk_error_set("MK_CUDA_MATH must be fp32, tf32 or bf16 (got '%s')", m);
}

extern "C" const char *mk_cuda_math_name(const struct mk_backend *be)
{
    static const char *names[] = {"fp32", "tf32", "bf16"};
    const mkc_ctx_t *c = (const mkc_ctx_t *)be->ctx;
    int m = c->ready ? (int)c->math : math_from_env();
    return m < 0 ? "invalid" : names[m];
}

mkc_ctx_t *mkc(void *ctx)
{
    mkc_ctx_t *c = (mkc_ctx_t *)ctx;
    if (c->ready) return c;
    if (c->bound_device >= 0) CK(c, cudaSetDevice(c->bound_device));
    CK(c, cudaGetDevice(&c->device));
    int math = math_from_env();
    if (math < 0) mkc_fail(c, mk_error_last(), __FILE__, __LINE__);  // changed since mk_backend_cuda_new()
    c->math = math < 0 ? MKC_MATH_FP32 : (mkc_math_t)math;
    const char *s = getenv("MK_CUDA_SYNC");
    c->sync_each = s && atoi(s) > 0;
    CK(c, cudaStreamCreateWithFlags(&c->s, cudaStreamNonBlocking));
    CK(c, cudaStreamCreateWithFlags(&c->cs, cudaStreamNonBlocking));
    CK(c, cudaEventCreateWithFlags(&c->ev_c, cudaEventDisableTiming));
    CK(c, cudaEventCreateWithFlags(&c->ev_s, cudaEventDisableTiming));
    CKB(c, cublasCreate(&c->h));
    CKB(c, cublasSetStream(c->h, c->s));
    // fp32 mode must not silently use TF32 tensor cores: pedantic math for it
    CKB(c, cublasSetMathMode(c->h, c->math == MKC_MATH_FP32 ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH));
    // keep freed stream-ordered memory in the pool instead of returning it at each sync
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, c->device) == cudaSuccess) {
        unsigned long long keep = ~0ULL;
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    cudaGetLastError();
    c->ready = 1;
    return c;
}

// ---- memory ----------------------------------------------------------------

static void *cu_alloc(void *ctx, size_t bytes)
{
    mkc_ctx_t *c = mkc(ctx);
    void *p = NULL;
    size_t n = (bytes + 255) & ~(size_t)255;
    if (!n) n = 256;
    // stream-ordered: a buffer freed after queued kernels is reused only after them
    if (cudaMallocAsync(&p, n, c->s) != cudaSuccess) {
        cudaGetLastError();
        return NULL;  // the executor reports "out of memory"
    }
    CK(c, cudaMemsetAsync(p, 0, n, c->s));
    return p;
}

static void cu_free(void *ctx, void *p)
{
    mkc_ctx_t *c = mkc(ctx);
    if (p) CK(c, cudaFreeAsync(p, c->s));
}

static void cu_zero(void *ctx, void *p, size_t bytes)
{
    mkc_ctx_t *c = mkc(ctx);
    if (bytes) CK(c, cudaMemsetAsync(p, 0, bytes, c->s));
}

// Stateless (the runtime's pointer attributes); ctx for the table's signature.
static int cu_is_device(void *ctx, const void *p)
{
    (void)ctx;
    cudaPointerAttributes a;
    if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice;
}

// Any direction (UVA): the executor copies host arrays in (initial
// parameters) and device buffers out (gradient dumps) through this entry.
static void cu_copy(void *ctx, void *d, const void *s, size_t bytes)
{
    if (!bytes || d == s) return;
    mkc_ctx_t *c = mkc(ctx);
    CK(c, cudaMemcpyAsync(d, s, bytes, cudaMemcpyDefault, c->s));
    // host memory on either side: the caller may read or free it next
    if (!cu_is_device(c, d) || !cu_is_device(c, s)) CK(c, cudaStreamSynchronize(c->s));
}

const int *mkc_ints(mkc_ctx_t *c, const int *p, int n)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) == cudaSuccess &&
        (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged))
        return p;
    cudaGetLastError();
    if ((size_t)n > c->tok_cap) {
        if (c->tok) CK(c, cudaFreeAsync(c->tok, c->s));
        c->tok_cap = (size_t)n < 4096 ? 4096 : (size_t)n;
        CK(c, cudaMallocAsync((void **)&c->tok, c->tok_cap * sizeof(int), c->s));
    }
    // from pageable memory: returns once the data is staged, so the caller
    // may overwrite p; the copy is ordered before the kernel that reads it
    if (n > 0) CK(c, cudaMemcpyAsync(c->tok, p, (size_t)n * sizeof(int), cudaMemcpyHostToDevice, c->s));
    return c->tok;
}

double *mkc_red(mkc_ctx_t *c, size_t n)
{
    if (n > c->red_cap) {
        if (c->red) CK(c, cudaFreeAsync(c->red, c->s));
        c->red_cap = n < 1024 ? 1024 : n;
        CK(c, cudaMallocAsync((void **)&c->red, c->red_cap * sizeof(double), c->s));
    }
    return c->red;
}

// ---- host staging for MPI --------------------------------------------------

static void cu_to_host(void *ctx, void *host, const void *dev, size_t bytes)
{
    mkc_ctx_t *c = mkc(ctx);
    CK(c, cudaEventRecord(c->ev_c, c->s));          // everything computed so far
    CK(c, cudaStreamWaitEvent(c->cs, c->ev_c, 0));
    CK(c, cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, c->cs));
    CK(c, cudaStreamSynchronize(c->cs));
}

static void cu_to_device(void *ctx, void *dev, const void *host, size_t bytes)
{
    mkc_ctx_t *c = mkc(ctx);
    // the staging stream must not overwrite dev before earlier compute reads end
    CK(c, cudaEventRecord(c->ev_c, c->s));
    CK(c, cudaStreamWaitEvent(c->cs, c->ev_c, 0));
    CK(c, cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, c->cs));
    // pageable host memory: the copy above has consumed host on return, but
    // the caller may also pass pinned memory, so wait for the copy itself
    // before host can be reused; compute work after this waits on the event
    CK(c, cudaEventRecord(c->ev_s, c->cs));
    CK(c, cudaStreamWaitEvent(c->s, c->ev_s, 0));
    CK(c, cudaEventSynchronize(c->ev_s));
}

// A pinned buffer of at least bytes: the smallest free one of the pool that
// fits, else a new one (cudaHostAlloc, slow: the pool keeps it); NULL (the
// caller falls back to pageable memory) when the host has no room.
static void *cu_host_alloc(void *ctx, size_t bytes)
{
    mkc_ctx_t *c = mkc(ctx);
    int best = -1;
    for (int i = 0; i < c->n_pins; i++)
        if (!c->pins[i].used && c->pins[i].cap >= bytes && (best < 0 || c->pins[i].cap < c->pins[best].cap)) best = i;
    if (best >= 0) {
        c->pins[best].used = 1;
        return c->pins[best].p;
    }
    if (c->n_pins == c->cap_pins) {
        int cap = c->cap_pins ? 2 * c->cap_pins : 16;
        mkc_pin_t *v = (mkc_pin_t *)realloc(c->pins, cap * sizeof *v);
        if (!v) return malloc(bytes);
        c->pins = v, c->cap_pins = cap;
    }
    void *p = NULL;
    if (cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault) != cudaSuccess) {
        cudaGetLastError();
        return malloc(bytes);
    }
    c->pins[c->n_pins++] = {p, bytes, 1};
    return p;
}

// Back to the pool; memory from the fallback malloc is freed.
static void cu_host_free(void *ctx, void *p)
{
    mkc_ctx_t *c = (mkc_ctx_t *)ctx;
    for (int i = 0; i < c->n_pins; i++)
        if (c->pins[i].p == p) {
            c->pins[i].used = 0;
            return;
        }
    free(p);
}

static void cu_sync(void *ctx)
{
    mkc_ctx_t *c = mkc(ctx);
    CK(c, cudaStreamSynchronize(c->s));
}

// ---- device choice -----------------------------------------------------------

static int cu_bind(void *ctx, int local_rank, int local_size)
{
    mkc_ctx_t *c = (mkc_ctx_t *)ctx;
    int n = mk_cuda_device_count();
    if (n < 1) return -1;
    // CUDA_VISIBLE_DEVICES already restricts what we see; ranks sharing a
    // node take devices round-robin (several ranks may share one GPU)
    int d = (local_rank >= 0 ? local_rank : 0) % n;
    if (c->ready) return c->device;  // too late to move: keep the current device
    c->bound_device = d;
    CK(c, cudaSetDevice(d));
    (void)local_size;
    return d;
}

// Ends the context once its queued work is done (mk_backend_free; the
// owner frees every buffer first).  Errors here change nothing any more.
static void cu_destroy(void *ctx)
{
    mkc_ctx_t *c = (mkc_ctx_t *)ctx;
    if (c && c->ready) {
        cudaStreamSynchronize(c->s);
        if (c->tok) cudaFreeAsync(c->tok, c->s);
        if (c->red) cudaFreeAsync(c->red, c->s);
        if (c->s16) cudaFreeAsync(c->s16, c->s);
        for (int i = 0; i < c->n_pins; i++) cudaFreeHost(c->pins[i].p);
        cudaStreamSynchronize(c->s);
        cublasDestroy(c->h);
        cudaEventDestroy(c->ev_c);
        cudaEventDestroy(c->ev_s);
        cudaStreamDestroy(c->s);
        cudaStreamDestroy(c->cs);
        cudaGetLastError();
    }
    if (c) free(c->pins);
    free(c);
}

// ---- the table ---------------------------------------------------------------

static const mk_backend_t mk_cuda = {
    /* .name = */ "cuda",
    /* .ctx = */ NULL,
    /* .alloc = */ cu_alloc,
    /* .free = */ cu_free,
    /* .zero = */ cu_zero,
    /* .copy = */ cu_copy,
    /* .linear_fwd = */ mkc_linear_fwd,
    /* .linear_bwd_in = */ mkc_linear_bwd_in,
    /* .linear_bwd_w = */ mkc_linear_bwd_w,
    /* .embed_fwd = */ mkc_embed_fwd,
    /* .embed_bwd = */ mkc_embed_bwd,
    /* .layernorm_fwd = */ mkc_layernorm_fwd,
    /* .layernorm_bwd = */ mkc_layernorm_bwd,
    /* .rmsnorm_fwd = */ mkc_rmsnorm_fwd,
    /* .rmsnorm_bwd = */ mkc_rmsnorm_bwd,
    /* .attention_fwd = */ mkc_attention_fwd,
    /* .attention_bwd = */ mkc_attention_bwd,
    /* .attention16_fwd = */ NULL, /* fp32 probabilities: no 16-bit path yet */
    /* .attention16_bwd = */ NULL,
    /* .attention_fused_fwd = */ mkc_attention_fused_fwd,
    /* .attention_fused_bwd = */ mkc_attention_fused_bwd,
    /* .rope_fwd = */ mkc_rope_fwd,
    /* .rope_bwd = */ mkc_rope_bwd,
    /* .gelu_fwd = */ mkc_gelu_fwd,
    /* .gelu_bwd = */ mkc_gelu_bwd,
    /* .swiglu_fwd = */ mkc_swiglu_fwd,
    /* .swiglu_bwd = */ mkc_swiglu_bwd,
    /* .add = */ mkc_add,
    /* .acc = */ mkc_acc,
    /* .xent_max = */ mkc_xent_max,
    /* .xent_exp = */ mkc_xent_exp,
    /* .xent_loss = */ mkc_xent_loss,
    /* .xent_bwd = */ mkc_xent_bwd,
    /* .adamw = */ mkc_adamw,
    /* .sumsq = */ mkc_sumsq,
    /* MoE entries: none on CUDA yet (the MoE layer refuses a backend without them) */
    /* .moe_route = */ NULL,
    /* .moe_route_bwd = */ NULL,
    /* .moe_gather = */ NULL,
    /* .moe_scatter = */ NULL,
    /* .moe_route_sig = */ NULL,
    /* .moe_route_sig_bwd = */ NULL,
    /* .cols_gather = */ mkc_cols_gather,
    /* .cols_scatter = */ mkc_cols_scatter,
    /* .status = */ cu_status,
    /* .set_threads = */ NULL,
    /* .set_gemm_dtype = */ mkc_set_gemm_dtype, /* the linears' 16-bit GEMMs (linear.cu) */
    /* .scratch_bytes = */ mkc_scratch_bytes,
    /* .round16 = */ mkc_round16, /* 16-bit values in fp32 buffers (half.cu) */
    /* .pack16 = */ mkc_pack16,
    /* .unpack16 = */ mkc_unpack16,
    /* 16-bit weight and gradient stores are the host's (mk_exec_store16): fp32 weights here */
    /* .alloc_raw = */ NULL,
    /* .weights16 = */ NULL,
    /* .bind = */ cu_bind,
    /* .is_device = */ cu_is_device,
    /* .to_host = */ cu_to_host,
    /* .to_device = */ cu_to_device,
    /* .sync = */ cu_sync,
    /* .host_alloc = */ cu_host_alloc,
    /* .host_free = */ cu_host_free,
    /* .destroy = */ cu_destroy,
};

extern "C" struct mk_backend *mk_backend_cuda_new(void)
{
    if (math_from_env() < 0) return NULL;
    mk_backend_t *be = (mk_backend_t *)malloc(sizeof *be);
    mkc_ctx_t *c = (mkc_ctx_t *)calloc(1, sizeof *c);
    if (!be || !c) {
        free(be); free(c);
        mk_error_set("out of memory");
        return NULL;
    }
    c->bound_device = -1;
    *be = mk_cuda;
    be->ctx = c;
    return be;
}
