// The CUDA backend table: context (streams, events, cuBLAS handle, math
// mode), memory, host staging for MPI, device choice.  Kernels live in the
// other .cu files of this directory (see common.cuh).
#include "config.h"
#include "merak/backend.h"
#include "merak/cuda.h"
#include "common.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mkc_ctx_t ctx;
static int active;
static int bound_device = -1;

// The first device error of this process, kept (sticky) instead of exiting:
// library code never exits.  Work queued after it still runs, on garbage or
// failing fast (CUDA errors mostly poison the context); the executor asks
// status() after every step and fails the run on every rank alike.
static int failed;
static char fail_msg[512];

void mkc_fail(const char *what, const char *file, int line)
{
    if (failed) return;
    failed = 1;
    snprintf(fail_msg, sizeof fail_msg, "CUDA error: %s (%s:%d)", what, file, line);
}

static int cu_status(void)
{
    return failed ? mk_error_set("%s", fail_msg) : 0;
}

void mkc_after_launch(const char *file, int line)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && ctx.sync_each) e = cudaStreamSynchronize(ctx.s);
    if (e != cudaSuccess) mkc_fail(cudaGetErrorString(e), file, line);
}

// MK_CUDA_MATH: fp32 (default), tf32 or bf16; -1 with mk_error_set
// otherwise (mk_backend_cuda() refuses the backend then).
static int math_from_env(void)
{
    const char *m = getenv("MK_CUDA_MATH");
    if (!m || !*m || !strcmp(m, "fp32")) return MKC_MATH_FP32;
    if (!strcmp(m, "tf32")) return MKC_MATH_TF32;
    if (!strcmp(m, "bf16")) return MKC_MATH_BF16;
    return mk_error_set("MK_CUDA_MATH must be fp32, tf32 or bf16 (got '%s')", m);
}

extern "C" const char *mk_cuda_math_name(void)
{
    static const char *names[] = {"fp32", "tf32", "bf16"};
    int m = ctx.ready ? (int)ctx.math : math_from_env();
    return m < 0 ? "invalid" : names[m];
}

mkc_ctx_t *mkc(void)
{
    if (ctx.ready) return &ctx;
    if (bound_device >= 0) CK(cudaSetDevice(bound_device));
    CK(cudaGetDevice(&ctx.device));
    int math = math_from_env();
    if (math < 0) mkc_fail(mk_error_last(), __FILE__, __LINE__);  // changed since mk_backend_cuda()
    ctx.math = math < 0 ? MKC_MATH_FP32 : (mkc_math_t)math;
    const char *s = getenv("MK_CUDA_SYNC");
    ctx.sync_each = s && atoi(s) > 0;
    CK(cudaStreamCreateWithFlags(&ctx.s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&ctx.cs, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&ctx.ev_c, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&ctx.ev_s, cudaEventDisableTiming));
    CKB(cublasCreate(&ctx.h));
    CKB(cublasSetStream(ctx.h, ctx.s));
    // fp32 mode must not silently use TF32 tensor cores: pedantic math for it
    CKB(cublasSetMathMode(ctx.h, ctx.math == MKC_MATH_FP32 ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH));
    // keep freed stream-ordered memory in the pool instead of returning it at each sync
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, ctx.device) == cudaSuccess) {
        unsigned long long keep = ~0ULL;
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    cudaGetLastError();
    ctx.ready = 1;
    return &ctx;
}

// ---- memory ----------------------------------------------------------------

static void *cu_alloc(size_t bytes)
{
    mkc_ctx_t *c = mkc();
    void *p = NULL;
    size_t n = (bytes + 255) & ~(size_t)255;
    if (!n) n = 256;
    // stream-ordered: a buffer freed after queued kernels is reused only after them
    if (cudaMallocAsync(&p, n, c->s) != cudaSuccess) {
        cudaGetLastError();
        return NULL;  // the executor reports "out of memory"
    }
    CK(cudaMemsetAsync(p, 0, n, c->s));
    return p;
}

static void cu_free(void *p)
{
    if (p) CK(cudaFreeAsync(p, mkc()->s));
}

static void cu_zero(void *p, size_t bytes)
{
    if (bytes) CK(cudaMemsetAsync(p, 0, bytes, mkc()->s));
}

extern "C" int mk_cuda_is_device(const void *p)
{
    cudaPointerAttributes a;
    if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice;
}

// Any direction (UVA): the executor copies host arrays in (initial
// parameters) and device buffers out (gradient dumps) through this entry.
static void cu_copy(void *d, const void *s, size_t bytes)
{
    if (!bytes || d == s) return;
    mkc_ctx_t *c = mkc();
    CK(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDefault, c->s));
    // host memory on either side: the caller may read or free it next
    if (!mk_cuda_is_device(d) || !mk_cuda_is_device(s)) CK(cudaStreamSynchronize(c->s));
}

const int *mkc_ints(const int *p, int n)
{
    mkc_ctx_t *c = mkc();
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) == cudaSuccess &&
        (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged))
        return p;
    cudaGetLastError();
    if ((size_t)n > c->tok_cap) {
        if (c->tok) CK(cudaFreeAsync(c->tok, c->s));
        c->tok_cap = (size_t)n < 4096 ? 4096 : (size_t)n;
        CK(cudaMallocAsync((void **)&c->tok, c->tok_cap * sizeof(int), c->s));
    }
    // from pageable memory: returns once the data is staged, so the caller
    // may overwrite p; the copy is ordered before the kernel that reads it
    if (n > 0) CK(cudaMemcpyAsync(c->tok, p, (size_t)n * sizeof(int), cudaMemcpyHostToDevice, c->s));
    return c->tok;
}

double *mkc_red(size_t n)
{
    mkc_ctx_t *c = mkc();
    if (n > c->red_cap) {
        if (c->red) CK(cudaFreeAsync(c->red, c->s));
        c->red_cap = n < 1024 ? 1024 : n;
        CK(cudaMallocAsync((void **)&c->red, c->red_cap * sizeof(double), c->s));
    }
    return c->red;
}

// ---- host staging for MPI --------------------------------------------------

extern "C" void mk_cuda_stage_d2h(void *host, const void *dev, size_t bytes)
{
    mkc_ctx_t *c = mkc();
    CK(cudaEventRecord(c->ev_c, c->s));          // everything computed so far
    CK(cudaStreamWaitEvent(c->cs, c->ev_c, 0));
    CK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, c->cs));
    CK(cudaStreamSynchronize(c->cs));
}

extern "C" void mk_cuda_stage_h2d(void *dev, const void *host, size_t bytes)
{
    mkc_ctx_t *c = mkc();
    // the staging stream must not overwrite dev before earlier compute reads end
    CK(cudaEventRecord(c->ev_c, c->s));
    CK(cudaStreamWaitEvent(c->cs, c->ev_c, 0));
    CK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, c->cs));
    // pageable host memory: the copy above has consumed host on return, but
    // the caller may also pass pinned memory, so wait for the copy itself
    // before host can be reused; compute work after this waits on the event
    CK(cudaEventRecord(c->ev_s, c->cs));
    CK(cudaStreamWaitEvent(c->s, c->ev_s, 0));
    CK(cudaEventSynchronize(c->ev_s));
}

extern "C" void mk_cuda_sync(void) { CK(cudaStreamSynchronize(mkc()->s)); }

// ---- device choice -----------------------------------------------------------

extern "C" int mk_cuda_bind(int local_rank, int local_size)
{
    int n = mk_cuda_device_count();
    if (n < 1) return -1;
    // CUDA_VISIBLE_DEVICES already restricts what we see; ranks sharing a
    // node take devices round-robin (several ranks may share one GPU)
    int d = (local_rank >= 0 ? local_rank : 0) % n;
    if (ctx.ready) return ctx.device;  // too late to move: keep the current device
    bound_device = d;
    CK(cudaSetDevice(d));
    (void)local_size;
    return d;
}

// ---- the table ---------------------------------------------------------------

static const mk_backend_t mk_cuda = {
    /* .name = */ "cuda",
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
    /* .attention_fwd = */ mkc_attention_fwd,
    /* .attention_bwd = */ mkc_attention_bwd,
    /* .gelu_fwd = */ mkc_gelu_fwd,
    /* .gelu_bwd = */ mkc_gelu_bwd,
    /* .add = */ mkc_add,
    /* .acc = */ mkc_acc,
    /* .xent_max = */ mkc_xent_max,
    /* .xent_exp = */ mkc_xent_exp,
    /* .xent_loss = */ mkc_xent_loss,
    /* .xent_bwd = */ mkc_xent_bwd,
    /* .adamw = */ mkc_adamw,
    /* .sumsq = */ mkc_sumsq,
    /* .status = */ cu_status,
};

extern "C" const struct mk_backend *mk_backend_cuda(void)
{
    if (math_from_env() < 0) return NULL;
    active = 1;
    return &mk_cuda;
}

extern "C" int mk_cuda_active(void) { return active; }
