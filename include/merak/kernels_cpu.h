/* The CPU backend's module interface (src/cpu/): the kernels behind
 * mk_backend_cpu() (see merak/backend.h for shapes), declared here so the
 * executor's host-side CP code and the tests can call them directly.  Not
 * installed.  Each has the table's
 * signature, context first: the CPU backend's context is its thread pool
 * (mk_cpu_pool_t; NULL runs every loop on the calling thread). */
#ifndef MERAK_KERNELS_CPU_H
#define MERAK_KERNELS_CPU_H
#include "merak/rope.h"
#include <stddef.h>
#include <stdint.h>

/* ---- threads (src/cpu/cpu_par.c) ---- */
#define MK_CPU_MAX_THREADS 256
typedef struct mk_cpu_pool mk_cpu_pool_t;
/* Elements per thread below which a loop runs on one thread (creating one
 * costs ~20-50 us; 64 Ki floats of AdamW take ~100 us). */
#define MK_CPU_PAR_GRAIN ((size_t)1 << 16)
/* A pool of one thread (the caller's) until set_threads; NULL when out of memory. */
mk_cpu_pool_t *mk_cpu_pool_new(void);
/* The kernels' thread count, clamped to 1..MK_CPU_MAX_THREADS (the
   executor: mk_runtime_bind's count, the rank's cores). */
void mk_cpu_pool_set_threads(mk_cpu_pool_t *p, int n);
int mk_cpu_pool_threads(const mk_cpu_pool_t *p);  /* 1 for NULL */
/* The linears' GEMM operands: MK_DTYPE_FP32 (0: as given), MK_DTYPE_BF16 or
   MK_DTYPE_FP16 (each operand rounded to nearest even to that type, the
   products summed in fp32: mixed precision's GEMM); NULL pool: fp32. */
void mk_cpu_pool_set_gemm_dtype(mk_cpu_pool_t *p, int dtype);
int mk_cpu_pool_gemm_dtype(const mk_cpu_pool_t *p);
/* The most floats the rounded operand copies of one 16-bit GEMM take: a
   GEMM whose copies would take more runs in panels (gemm_cpu.c
   gemm_16bit), so the scratch stays bounded where an operand is large
   (gpt2-124m's LM head: 77 MB of bf16 copies whole).  2^23 floats (32 MiB:
   panels that large run as fast as the whole GEMM, experiments/README.md)
   unless set (0: that default; tests set small ones). */
#define MK_CPU_GEMM16_CAP ((size_t)1 << 23)
void mk_cpu_pool_set_gemm16_cap(mk_cpu_pool_t *p, size_t floats);
size_t mk_cpu_pool_gemm16_cap(const mk_cpu_pool_t *p);
/* 16-bit views (the backend's weights16): the floats w[0..n) are the
   16-bit values h[0..n) (bf16 or fp16 bits, the GEMMs' dtype), and w need
   not be readable memory (exec_p16.c reserves it PROT_NONE): a 16-bit
   GEMM takes an operand lying inside it from h, as it is for oneDNN,
   widened into the rounded-operand sgemm's scratch otherwise.
   h NULL or n 0: w's view goes.  At most MK_CPU_VIEWS16 at once (more:
   not recorded, the operand is converted as any other).  view16_of: the
   16-bit values of x[0..extent) where a view holds them all, else NULL. */
#define MK_CPU_VIEWS16 16
void mk_cpu_pool_view16(mk_cpu_pool_t *p, const float *w, const uint16_t *h, size_t n);
const uint16_t *mk_cpu_pool_view16_of(const mk_cpu_pool_t *p, const float *x, size_t extent);
/* The pool's scratch of at least n floats (kept, grown; NULL: out of memory or no pool). */
float *mk_cpu_pool_scratch(mk_cpu_pool_t *p, size_t n);
size_t mk_cpu_pool_scratch_bytes(const mk_cpu_pool_t *p);  /* its size now (it only grows) */
/* oneDNN's bf16 GEMM (src/cpu/gemm_dnnl.c): 1 where it runs a bf16 kernel
   on this CPU (built with oneDNN, AVX512-BF16 or AMX), else 0.  The GEMM:
   C (M,N; ldc) = op(A) op(B), + C when acc; A, B bfloat16 bits (op: the
   transpose where ta / tb); 0, or -1 (the caller multiplies otherwise). */
int mk_cpu_dnnl_bf16_ok(void);
int mk_cpu_gemm_bf16(int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
                     int acc, float *C, int ldc);
void mk_cpu_pool_free(mk_cpu_pool_t *p);
/* fn(arg, lo, hi) over [lo, hi) for contiguous ranges covering [0, n), on
   up to the pool's thread count (ctx: the pool, or NULL for one thread),
   each range at least grain long. */
typedef void (*mk_cpu_range_fn)(void *arg, size_t lo, size_t hi);
void mk_cpu_par(void *ctx, size_t n, size_t grain, mk_cpu_range_fn fn, void *arg);
/* The CPU table with a pool of its own as ctx (mk_backend_new("cpu")). */
struct mk_backend *mk_backend_cpu_new(void);
/* The kernel family OpenBLAS runs (openblas_get_corename: "SkylakeX",
   "Haswell", "Prescott", ...), "unknown" for another BLAS. */
const char *mk_cpu_blas_core(void);

void mk_cpu_linear_fwd(void *ctx, float *out, const float *inp, const float *w, const float *bias,
                       int N, int IC, int OC);
void mk_cpu_linear_bwd_in(void *ctx, float *dinp, const float *dout, const float *w, int N, int IC, int OC);
void mk_cpu_linear_bwd_w(void *ctx, float *dw, float *dbias, const float *dout, const float *inp,
                         int N, int IC, int OC);
void mk_cpu_embed_fwd(void *ctx, float *out, const int *tok, const float *wte, const float *wpe,
                      int N, int T, int C, int v0, int Vl);
void mk_cpu_embed_bwd(void *ctx, float *dwte, float *dwpe, const float *dout, const int *tok,
                      int N, int T, int C, int v0, int Vl);
void mk_cpu_layernorm_fwd(void *ctx, float *out, float *mean, float *rstd, const float *inp,
                          const float *w, const float *b, int N, int C);
void mk_cpu_layernorm_bwd(void *ctx, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                          const float *w, const float *mean, const float *rstd, int N, int C);
void mk_cpu_attention_fwd(void *ctx, float *out, float *att, const float *qkv, int B, int T, int NH, int KV,
                          int hs, int window);
void mk_cpu_attention_bwd(void *ctx, float *dqkv, float *datt, const float *dout, const float *qkv,
                          const float *att, int B, int T, int NH, int KV, int hs);
/* the same with 16-bit probabilities (src/cpu/kernels_attn16_cpu.c; dtype MK_DTYPE_BF16 or FP16) */
void mk_cpu_attention16_fwd(void *ctx, float *out, uint16_t *att, const float *qkv, int B, int T, int NH, int KV,
                            int hs, int window, int dtype);
void mk_cpu_attention16_bwd(void *ctx, float *dqkv, uint16_t *datt, const float *dout, const float *qkv,
                            const uint16_t *att, int B, int T, int NH, int KV, int hs, int dtype);
/* The K/V head of query head h (NH query heads, KV K/V heads; Hugging Face repeat_kv). */
#define KV_HEAD(h, NH, KV) ((int)((long)(h) * (KV) / (NH)))
/* the Llama family's kernels (src/cpu/kernels_llama_cpu.c) */
void mk_cpu_rmsnorm_fwd(void *ctx, float *out, float *rstd, const float *inp, const float *w, float eps,
                        int N, int C);
void mk_cpu_rmsnorm_bwd(void *ctx, float *dinp, float *dw, const float *dout, const float *inp,
                        const float *w, const float *rstd, int N, int C);
void mk_cpu_rope_fwd(void *ctx, float *out, const float *inp, int N, int T, int nh, int hs, int ld,
                     const mk_rope_t *rope);
void mk_cpu_rope_bwd(void *ctx, float *dinp, const float *dout, int N, int T, int nh, int hs, int ld,
                     const mk_rope_t *rope);
/* RoPE in place on N rows at positions p0 .. p0+N-1 (sign 1: forward, -1: inverse;
   context parallelism's chunks, src/exec/kernels_cp_cpu.c) */
void mk_cpu_rope_at(float *x, int N, int p0, int nh, int hs, int ld, const mk_rope_t *rope, int sign);
void mk_cpu_swiglu_fwd(void *ctx, float *out, const float *gu, int N, int F);
void mk_cpu_swiglu_bwd(void *ctx, float *dgu, const float *dout, const float *gu, int N, int F);
void mk_cpu_gelu_fwd(void *ctx, float *out, const float *inp, int n);
void mk_cpu_gelu_bwd(void *ctx, float *dinp, const float *inp, const float *dout, int n);
void mk_cpu_add(void *ctx, float *out, const float *a, const float *b, int n);
void mk_cpu_acc(void *ctx, float *out, const float *a, int n);
void mk_cpu_xent_max(void *ctx, float *rowmax, const float *logits, int N, int Vl, int v0, int V);
void mk_cpu_xent_exp(void *ctx, float *logits, float *rowsum, float *tgt, const float *rowmax,
                     const int *targets, int N, int Vl, int v0, int V);
double mk_cpu_xent_loss(void *ctx, float *probs, const float *rowsum, const float *tgt, int N, int Vl);
void mk_cpu_xent_bwd(void *ctx, float *dlogits, const float *probs, const int *targets, float scale,
                     int N, int Vl, int v0);
void mk_cpu_adamw(void *ctx, float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                  float beta2, float bc1, float bc2, float eps, float decay, float gscale);
double mk_cpu_sumsq(void *ctx, const float *x, size_t n);
/* mixture of experts (src/cpu/kernels_moe_cpu.c) */
void mk_cpu_moe_route(void *ctx, float *probs, int *topi, float *topw, int N, int E, int k, int renorm);
void mk_cpu_moe_route_bwd(void *ctx, float *dlogits, const float *probs, const int *topi, const float *topw,
                          const float *dtopw, const float *dpe, int N, int E, int k, int renorm);
void mk_cpu_moe_gather(void *ctx, float *dst, const float *src, const int *idx, const float *scale, int n, int C);
void mk_cpu_moe_scatter(void *ctx, float *dst, const float *src, const int *idx, const float *scale, int n, int C);
void mk_cpu_moe_route_sig(void *ctx, float *scores, int *topi, float *topw, const float *bias, int N, int E, int k,
                          int groups, int gtopk, int renorm, float scale);
void mk_cpu_moe_route_sig_bwd(void *ctx, float *dlogits, const float *scores, const int *topi, const float *dtopw,
                              const float *dpe, int N, int E, int k, int T, int renorm, float scale);
/* One query row's scaled scores against keys 0..t (kbase, ld floats a row) into a[0..t]
   (kernels_cpu.c, shared with the fused attention). */
void mk_cpu_attn_scores(float *a, const float *q, const float *kbase, size_t ld, int t, int hs, float scale);
void mk_cpu_attention_fused_fwd(void *ctx, float *out, float *lse, const float *qkv, int B, int T, int NH, int KV,
                                int hs, int window);
void mk_cpu_attention_fused_bwd(void *ctx, float *dqkv, const float *dout, const float *qkv, const float *out,
                                const float *lse, int B, int T, int NH, int KV, int hs, int window);
void mk_cpu_cols_gather(void *ctx, float *dst, const float *src, const int *idx, int N, int Ws, int Wd);
void mk_cpu_cols_scatter(void *ctx, float *dsrc, const float *ddst, const int *idx, int N, int Ws, int Wd);

#endif
