// Internals shared by the CUDA backend's .cu files (not a public header).
//
// One backend table drives one GPU through its context (mk_backend_t.ctx,
// an mkc_ctx_t: compute stream, communication-staging stream, cuBLAS
// handle, math mode, the sticky error), created lazily on first use on the
// device chosen by the bind entry (node-local rank) or device 0.  No state
// lives in file statics: every entry receives the context first.  Every kernel is
// launched on the compute stream, so the executor's calls run in program
// order on the GPU exactly as they do on the CPU; the host waits only where
// a result comes back to it (xent_loss, sumsq, copies to host memory, MPI
// staging).  Shapes and semantics: include/merak/backend.h; each kernel
// mirrors src/cpu/kernels_cpu.c per entry (same operation order, no FMA
// contraction: the .cu files are compiled with --fmad=false).
#ifndef MERAK_CUDA_COMMON_CUH
#define MERAK_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include "merak/rope.h"

typedef enum { MKC_MATH_FP32 = 0, MKC_MATH_TF32, MKC_MATH_BF16 } mkc_math_t;

typedef struct mkc_pin {
    void *p;
    size_t cap;
    int used;
} mkc_pin_t;

typedef struct mkc_ctx {
    int ready, device;
    int bound_device;      // from the bind entry, -1: the current device
    cudaStream_t s;        // compute
    cudaStream_t cs;       // communication staging
    cudaEvent_t ev_c, ev_s;// compute -> staging, staging -> compute
    cublasHandle_t h;
    mkc_math_t math;
    int sync_each;         // MK_CUDA_SYNC=1: synchronise after every kernel (debugging)
    int *tok;              // device copy of host token / target arrays
    size_t tok_cap;        // ints
    double *red;           // reduction partials (sumsq, loss)
    size_t red_cap;        // doubles
    // Mixed precision (set_gemm_dtype): the linears' GEMM operands in this
    // 16-bit mk_dtype_t (0: fp32), copied into s16 (s16_cap values, held
    // from the first such GEMM on and counted in the peak: scratch_bytes).
    int gemm16;
    uint16_t *s16;
    size_t s16_cap;
    // Page-locked host buffers for MPI's staging (host_alloc / host_free):
    // a pool reused by size, freed with the context.
    mkc_pin_t *pins;
    int n_pins, cap_pins;
    // The first device error of this context, kept (sticky) instead of
    // exiting: library code never exits.  Work queued after it still runs,
    // on garbage or failing fast (CUDA errors mostly poison the context);
    // the executor asks status() after every step and fails the run on
    // every rank alike.
    int failed;
    char fail_msg[512];
} mkc_ctx_t;

// The context behind mk_backend_t.ctx, set up on first use (streams,
// cuBLAS handle on the bound device); always returns ctx.
mkc_ctx_t *mkc(void *ctx);

// Record the first CUDA / cuBLAS error of c (one line, sticky) for the
// backend's status() entry; the caller carries on (no exit in library code).
void mkc_fail(mkc_ctx_t *c, const char *what, const char *file, int line);
#define CK(c, x)                                                             \
    do {                                                                     \
        cudaError_t e_ = (x);                                                \
        if (e_ != cudaSuccess) mkc_fail((c), cudaGetErrorString(e_), __FILE__, __LINE__); \
    } while (0)
#define CKB(c, x)                                                            \
    do {                                                                     \
        cublasStatus_t e_ = (x);                                             \
        if (e_ != CUBLAS_STATUS_SUCCESS) mkc_fail((c), cublasGetStatusString(e_), __FILE__, __LINE__); \
    } while (0)
// After a launch: launch errors always, execution errors with MK_CUDA_SYNC=1.
void mkc_after_launch(mkc_ctx_t *c, const char *file, int line);
#define LAUNCHED(c) mkc_after_launch((c), __FILE__, __LINE__)

// A device pointer to n ints equal to p[0..n): p itself when it is device
// (or managed) memory, else a copy in a context buffer (stream-ordered, so
// the buffer may be reused by the next call).
const int *mkc_ints(mkc_ctx_t *c, const int *p, int n);
// Device scratch of n doubles (valid until the next call).
double *mkc_red(mkc_ctx_t *c, size_t n);

// Grid size for n independent items, bs threads per block (capped).
static inline unsigned mkc_grid(size_t n, int bs)
{
    size_t g = (n + bs - 1) / bs;
    if (g < 1) g = 1;
    if (g > 65535u * 32u) g = 65535u * 32u;  // grid-stride loops cover the rest
    return (unsigned)g;
}

// for (i over [0, n)) spread over the whole grid
#define MKC_GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)(n); \
         i += (size_t)gridDim.x * blockDim.x)

// Sum over a warp, the same value in every lane.
static __device__ inline float mkc_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return __shfl_sync(0xffffffffu, v, 0);
}

// Sum of v over a block of exactly nthreads (a power of two) threads in a
// fixed tree order (deterministic); sh holds nthreads doubles; the result is
// valid in thread 0.
static __device__ inline double mkc_block_sum_d(double v, double *sh, int nthreads)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int w = nthreads / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    return sh[0];
}

// Row-major GEMM helpers go through one column-major cuBLAS call in the
// context's math mode (fp32, TF32 or bf16 multiplies with fp32 accumulate):
// C (m,n; ldc) = alpha op(A) op(B) + beta C, column-major, batched with strides.
void mkc_gemm(mkc_ctx_t *c, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
              const float *A, int lda, long long sa, const float *B, int ldb, long long sb,
              float beta, float *C, int ldc, long long sc, int batch);

// 16-bit values (half.cu; the rule of include/merak/half_rule.h, the CPU's):
// rows x cols column-major at leading dimension ld packed into dst.
void mkc_pack16_2d(mkc_ctx_t *c, uint16_t *dst, const float *src, int rows, int cols, int ld, int dtype);
// The context's 16-bit scratch grown to n values (stream-ordered); NULL
// with the error recorded when the device has no room.
uint16_t *mkc_scratch16(mkc_ctx_t *c, size_t n);

// The kernels behind the table (C++ linkage, one .cu file per family);
// ctx is mk_backend_t.ctx, an mkc_ctx_t.
void mkc_linear_fwd(void *ctx, float *out, const float *inp, const float *w, const float *bias, int N, int IC, int OC);
void mkc_linear_bwd_in(void *ctx, float *dinp, const float *dout, const float *w, int N, int IC, int OC);
void mkc_linear_bwd_w(void *ctx, float *dw, float *dbias, const float *dout, const float *inp, int N, int IC, int OC);
void mkc_embed_fwd(void *ctx, float *out, const int *tok, const float *wte, const float *wpe, int N, int T, int C,
                   int v0, int Vl);
void mkc_embed_bwd(void *ctx, float *dwte, float *dwpe, const float *dout, const int *tok, int N, int T, int C,
                   int v0, int Vl);
void mkc_layernorm_fwd(void *ctx, float *out, float *mean, float *rstd, const float *inp, const float *w,
                       const float *b, int N, int C);
void mkc_layernorm_bwd(void *ctx, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                       const float *w, const float *mean, const float *rstd, int N, int C);
void mkc_rmsnorm_fwd(void *ctx, float *out, float *rstd, const float *inp, const float *w, float eps, int N, int C);
void mkc_rmsnorm_bwd(void *ctx, float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                     const float *rstd, int N, int C);
void mkc_attention_fwd(void *ctx, float *out, float *att, const float *qkv, int B, int T, int NH, int KV, int hs,
                       int window);
void mkc_attention_bwd(void *ctx, float *dqkv, float *datt, const float *dout, const float *qkv, const float *att,
                       int B, int T, int NH, int KV, int hs);
void mkc_attention_fused_fwd(void *ctx, float *out, float *lse, const float *qkv, int B, int T, int NH, int KV, int hs,
                             int window);
void mkc_attention_fused_bwd(void *ctx, float *dqkv, const float *dout, const float *qkv, const float *out,
                             const float *lse, int B, int T, int NH, int KV, int hs, int window);
void mkc_rope_fwd(void *ctx, float *out, const float *inp, int N, int T, int nh, int hs, int ld, const mk_rope_t *rope);
void mkc_rope_bwd(void *ctx, float *dinp, const float *dout, int N, int T, int nh, int hs, int ld, const mk_rope_t *rope);
void mkc_gelu_fwd(void *ctx, float *out, const float *inp, int n);
void mkc_gelu_bwd(void *ctx, float *dinp, const float *inp, const float *dout, int n);
void mkc_swiglu_fwd(void *ctx, float *out, const float *gu, int N, int F);
void mkc_swiglu_bwd(void *ctx, float *dgu, const float *dout, const float *gu, int N, int F);
void mkc_add(void *ctx, float *out, const float *a, const float *b, int n);
void mkc_acc(void *ctx, float *out, const float *a, int n);
void mkc_cols_gather(void *ctx, float *dst, const float *src, const int *idx, int N, int Ws, int Wd);
void mkc_cols_scatter(void *ctx, float *dsrc, const float *ddst, const int *idx, int N, int Ws, int Wd);
void mkc_xent_max(void *ctx, float *rowmax, const float *logits, int N, int Vl, int v0, int V);
void mkc_xent_exp(void *ctx, float *logits, float *rowsum, float *tgt, const float *rowmax, const int *targets,
                  int N, int Vl, int v0, int V);
double mkc_xent_loss(void *ctx, float *probs, const float *rowsum, const float *tgt, int N, int Vl);
void mkc_xent_bwd(void *ctx, float *dlogits, const float *probs, const int *targets, float scale, int N, int Vl, int v0);
void mkc_adamw(void *ctx, float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
               float bc1, float bc2, float eps, float decay, float gscale);
double mkc_sumsq(void *ctx, const float *x, size_t n);
void mkc_set_gemm_dtype(void *ctx, int dtype);
size_t mkc_scratch_bytes(void *ctx);
void mkc_round16(void *ctx, float *x, size_t n, int dtype);
void mkc_pack16(void *ctx, void *dst, const float *x, size_t n, int dtype);
void mkc_unpack16(void *ctx, float *dst, const void *src, size_t n, int dtype);

#endif
