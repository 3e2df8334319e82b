/* Compute backends: one table of function pointers per device kind.
 *
 * The executor calls kernels only through this table; the CPU backend
 * (OpenBLAS + C loops, src/cpu/backend_cpu.c) and the CUDA backend (cuBLAS and
 * our kernels, src/cuda/, merak/cuda.h) each fill one.  All pointers passed
 * to kernels are device memory obtained from alloc(); the executor hands MPI
 * the same pointers, staged through host memory for a device backend
 * (mk_comm_stage through the device entries below: no CUDA-aware MPI needed).
 * Every entry takes the table's context (ctx) first, as ggml's backends do:
 * the state of a backend (CUDA: device, streams, cuBLAS handle, the sticky
 * error) lives there, none in file statics, so two tables are two
 * independent backends.  Optional entries may be NULL.  Shapes: N = b*T tokens, C channels,
 * NH heads (local to the TP rank), hs head size, row-major everywhere.
 * Linear weights are stored (out, in), as in llm.c: y = x W^T + b. */
#ifndef MERAK_BACKEND_H
#define MERAK_BACKEND_H

#include "merak/common.h"
#include "merak/rope.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mk_backend {
    const char *name;
    void *ctx;  /* the backend's state, passed first to every entry (CPU: its thread pool) */
    /* memory (bytes); zero-filled on allocation */
    void *(*alloc)(void *ctx, size_t bytes);
    void (*free)(void *ctx, void *p);
    void (*zero)(void *ctx, void *p, size_t bytes);
    void (*copy)(void *ctx, void *dst, const void *src, size_t bytes);
    /* out (N,OC) = inp (N,IC) W^T (W (OC,IC)) + bias (OC, may be NULL) */
    void (*linear_fwd)(void *ctx, float *out, const float *inp, const float *w, const float *bias,
                       int N, int IC, int OC);
    /* dinp (N,IC) += dout W  (dinp may be NULL) */
    void (*linear_bwd_in)(void *ctx, float *dinp, const float *dout, const float *w, int N, int IC, int OC);
    /* dw (OC,IC) += dout^T inp, dbias (OC) += sum_n dout (dbias may be NULL; dw NULL:
       the bias gradient only, inp unread: a split backward's B_IN) */
    void (*linear_bwd_w)(void *ctx, float *dw, float *dbias, const float *dout, const float *inp,
                         int N, int IC, int OC);
    /* out (N,C) = wte[tok - v0] for tokens in [v0, v0+Vl), else 0; then + wpe (T,C) if
       wpe != NULL (position = n mod T) */
    void (*embed_fwd)(void *ctx, float *out, const int *tok, const float *wte, const float *wpe,
                      int N, int T, int C, int v0, int Vl);
    /* dwte (Vl,C) += rows of dout for owned tokens; dwpe (T,C) += dout (if not NULL) */
    void (*embed_bwd)(void *ctx, float *dwte, float *dwpe, const float *dout, const int *tok,
                      int N, int T, int C, int v0, int Vl);
    /* out (N,C), mean (N), rstd (N); eps 1e-5 */
    void (*layernorm_fwd)(void *ctx, float *out, float *mean, float *rstd, const float *inp,
                          const float *w, const float *b, int N, int C);
    /* dinp += , dw += , db += */
    void (*layernorm_bwd)(void *ctx, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                          const float *w, const float *mean, const float *rstd, int N, int C);
    /* RMSNorm: out (N,C) = inp * rstd * w, rstd (N) = 1/sqrt(mean_c inp^2 + eps) (saved); no bias */
    void (*rmsnorm_fwd)(void *ctx, float *out, float *rstd, const float *inp, const float *w, float eps,
                        int N, int C);
    /* dinp (N,C) += , dw (C) += */
    void (*rmsnorm_bwd)(void *ctx, float *dinp, float *dw, const float *dout, const float *inp,
                        const float *w, const float *rstd, int N, int C);
    /* Grouped-query causal attention, scaled 1/sqrt(hs).  qkv (B,T,(NH+2*KV)*hs) as
       [q heads (NH*hs) | k heads (KV*hs) | v heads (KV*hs)]; query head h uses K/V head
       floor(h*KV/NH) (Hugging Face repeat_kv; KV divides NH; KV == NH: multi-head, the
       GPT's).  att (B,NH,T,T) softmax probabilities (saved); out (B,T,NH*hs).
       window > 0: query t sees keys t-window+1..t only (a sliding window, Hugging Face's
       sliding_window), the others' probabilities 0; 0: keys 0..t. */
    void (*attention_fwd)(void *ctx, float *out, float *att, const float *qkv, int B, int T, int NH, int KV,
                          int hs, int window);
    /* dqkv (B,T,(NH+2*KV)*hs) += (dK/dV summed over the query heads sharing them);
       scratch datt (B,NH,T,T) is overwritten */
    void (*attention_bwd)(void *ctx, float *dqkv, float *datt, const float *dout, const float *qkv,
                          const float *att, int B, int T, int NH, int KV, int hs);
    /* Optional (NULL: the probabilities stay fp32): attention_fwd/bwd with att and
       datt (B,NH,T,T) 16-bit (dtype mk_dtype_t BF16 or FP16), as Megatron-LM's
       unfused core keeps them in a 16-bit run: the scores rounded where made, the
       softmax in fp32 over them writing the rounded probabilities in their place,
       P.V from those; dP = dout.v rounded into datt, the softmax's backward in
       fp32 from the 16-bit P and dP.  CPU. */
    void (*attention16_fwd)(void *ctx, float *out, uint16_t *att, const float *qkv, int B, int T, int NH, int KV,
                            int hs, int window, int dtype);
    void (*attention16_bwd)(void *ctx, float *dqkv, uint16_t *datt, const float *dout, const float *qkv,
                            const uint16_t *att, int B, int T, int NH, int KV, int hs, int dtype);
    /* Fused causal attention (optional: NULL where a backend has none; the executor then
       materialises the scores): the FlashAttention-2 algorithm (Dao 2023, arXiv:2307.08691),
       query rows against tiles of keys with the online softmax, no (T,T) tensor; out as
       attention_fwd's, lse (B,NH,T) each row's log-sum-exp of its scaled scores. */
    void (*attention_fused_fwd)(void *ctx, float *out, float *lse, const float *qkv, int B, int T, int NH, int KV,
                                int hs, int window);
    /* dqkv (B,T,(NH+2*KV)*hs) += from dout, the forward's out and lse, each tile's scores
       recomputed (D = dout . out per row) */
    void (*attention_fused_bwd)(void *ctx, float *dqkv, const float *dout, const float *qkv, const float *out,
                                const float *lse, int B, int T, int NH, int KV, int hs, int window);
    /* Rotary position embedding, rotate-half form (Hugging Face Llama): in each of the
       first nh heads (hs even) of every row of inp (N rows of ld floats), the pair
       (i, i + hs/2) turns by angle p * f_i (merak/rope.h: theta^(-2i/hs), Llama 3.1's
       scaling), position p = n mod T:
       out_i = x_i cos - x_{i+hs/2} sin, out_{i+hs/2} = x_{i+hs/2} cos + x_i sin.
       Columns past nh*hs are copied.  out may equal inp (in place). */
    void (*rope_fwd)(void *ctx, float *out, const float *inp, int N, int T, int nh, int hs, int ld,
                     const mk_rope_t *rope);
    /* the inverse rotation (the backward): dinp = R^T dout, same shapes; may be in place */
    void (*rope_bwd)(void *ctx, float *dinp, const float *dout, int N, int T, int nh, int hs, int ld,
                     const mk_rope_t *rope);
    void (*gelu_fwd)(void *ctx, float *out, const float *inp, int n);              /* tanh approximation */
    void (*gelu_bwd)(void *ctx, float *dinp, const float *inp, const float *dout, int n); /* dinp += */
    /* SwiGLU: out (N,F) = silu(gate) * up, silu(g) = g / (1 + exp(-g)), where each row of
       gu (N,2F) is [gate (F) | up (F)] (one GEMM with the gate and up weights stacked) */
    void (*swiglu_fwd)(void *ctx, float *out, const float *gu, int N, int F);
    /* dgu (N,2F) += [d gate | d up] */
    void (*swiglu_bwd)(void *ctx, float *dgu, const float *dout, const float *gu, int N, int F);
    void (*add)(void *ctx, float *out, const float *a, const float *b, int n);     /* out = a + b */
    void (*acc)(void *ctx, float *out, const float *a, int n);                     /* out += a */
    /* Vocabulary-parallel cross-entropy over logits (N,Vl) holding columns
       [v0, v0+Vl) of the padded vocabulary; columns >= V (real) are masked.
       Pass 1: rowmax (N) = max over valid local columns (-inf if none). */
    void (*xent_max)(void *ctx, float *rowmax, const float *logits, int N, int Vl, int v0, int V);
    /* Pass 2 (rowmax now global): logits <- exp(logit - max) in place (0 for masked),
       rowsum (N) = local sum, tgt (N) = target's logit - max if owned, else 0. */
    void (*xent_exp)(void *ctx, float *logits, float *rowsum, float *tgt, const float *rowmax,
                     const int *targets, int N, int Vl, int v0, int V);
    /* Pass 3 (rowsum, tgt global): probs <- logits / rowsum; returns sum_n loss_n
       (log rowsum - tgt) in double; used by forward. */
    double (*xent_loss)(void *ctx, float *probs, const float *rowsum, const float *tgt, int N, int Vl);
    /* dlogits (N,Vl) = scale * (probs - onehot(target)) */
    void (*xent_bwd)(void *ctx, float *dlogits, const float *probs, const int *targets, float scale,
                     int N, int Vl, int v0);
    /* AdamW on n elements; decay 0 for vectors.  lr, bias corrections by the caller. */
    void (*adamw)(void *ctx, float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                  float beta2, float bc1, float bc2, float eps, float decay, float gscale);
    double (*sumsq)(void *ctx, const float *x, size_t n);
    /* Mixture of experts (optional: NULL where a backend has none; the MoE
       layer needs all four).  topi is host-visible int memory (the dispatch
       plan is made on the host).  moe_route: logits (N,E) -> probs in place
       (softmax over E), topi (N,k) the k most probable experts in descending
       order (ties: the lower index), topw (N,k) their weights, renormalised
       to sum 1 over the k when renorm (Mixtral), else the probabilities. */
    void (*moe_route)(void *ctx, float *probs, int *topi, float *topw, int N, int E, int k, int renorm);
    /* dlogits (N,E) = the softmax's backward of d probs = dpe (E, per expert, added to every row; NULL:
       0) + dtopw (N,k) through the top-k weights (and the renormalisation) */
    void (*moe_route_bwd)(void *ctx, float *dlogits, const float *probs, const int *topi, const float *topw,
                          const float *dtopw, const float *dpe, int N, int E, int k, int renorm);
    /* dst (n,C) row i = scale[i] * src row idx[i] (scale NULL: 1) */
    void (*moe_gather)(void *ctx, float *dst, const float *src, const int *idx, const float *scale, int n, int C);
    /* dst row idx[i] += scale[i] * src (n,C) row i (scale NULL: 1) */
    void (*moe_scatter)(void *ctx, float *dst, const float *src, const int *idx, const float *scale, int n, int C);
    /* DeepSeek-V3's router (optional: NULL where a backend has none; a sigmoid-scored MoE layer
       needs both).  moe_route_sig: scores (N,E) = sigmoid(logits) in place; topi (N,k) the k
       largest of scores + bias (bias (E) NULL: 0) in descending order, ties the lower index,
       among the gtopk of the `groups` equal expert groups whose two largest sum the most (groups
       0: all; the others count 0, as transformers masks them); topw (N,k) their scores, divided by
       their sum + 1e-20 when renorm, times scale. */
    void (*moe_route_sig)(void *ctx, float *scores, int *topi, float *topw, const float *bias, int N, int E, int k,
                          int groups, int gtopk, int renorm, float scale);
    /* dlogits (N,E) = the sigmoid's backward of d scores: dtopw (N,k) through the weights, plus
       (dpe non-NULL) dpe's row n / T (E) as the gradient of each token's scores normalised to sum 1 */
    void (*moe_route_sig_bwd)(void *ctx, float *dlogits, const float *scores, const int *topi, const float *dtopw,
                              const float *dpe, int N, int E, int k, int T, int renorm, float scale);
    /* Column gathers (optional: NULL where a backend has none; multi-head latent attention
       needs both, src/exec/gpt_mla.c).  idx (Wd ints) is host (or device) memory, as topi.
       cols_gather: for every row r < N and j < Wd with idx[j] >= 0,
       dst[r*Wd + j] = src[r*Ws + idx[j]]; the other columns of dst are left as they are. */
    void (*cols_gather)(void *ctx, float *dst, const float *src, const int *idx, int N, int Ws, int Wd);
    /* its transpose: dsrc[r*Ws + idx[j]] += ddst[r*Wd + j], j ascending (a column that several
       j name gets their sum, in that order) */
    void (*cols_scatter)(void *ctx, float *dsrc, const float *ddst, const int *idx, int N, int Ws, int Wd);
    /* Optional (NULL: the backend cannot fail).  0, or -1 with mk_error_set
       once a device error has happened in any entry above (sticky: the
       entries return void, so they record it and carry on; results from
       then on are undefined).  The executor checks it after every step. */
    int (*status)(void *ctx);
    /* Optional (NULL: no host threads of its own): the kernels' thread
       count, the cores the rank is bound to (mk_runtime_bind); CPU only. */
    void (*set_threads)(void *ctx, int n);
    /* Optional (NULL: fp32 GEMMs only): the linears' GEMM operands in a
       16-bit type (mk_dtype_t: FP32, BF16, FP16), rounded to nearest even,
       their products summed in fp32: mixed precision's matmuls.  CPU. */
    void (*set_gemm_dtype)(void *ctx, int dtype);
    /* Optional (NULL: none): bytes the backend holds beside the executor's
       tensors (the CPU's rounded GEMM operands), counted in the peak. */
    size_t (*scratch_bytes)(void *ctx);
    /* Optional (NULL: gradients stay fp32): x[0..n) rounded in place to the
       16-bit type (mk_dtype_t BF16 or FP16) to nearest even, fp16 past its
       range to infinity: fp16 gradient buffers (Megatron-LM without
       --accumulate-allreduce-grads-in-fp32).  CPU. */
    void (*round16)(void *ctx, float *x, size_t n, int dtype);
    /* Optional (NULL: saved activations stay fp32): x[0..n) as 16-bit values
       (mk_dtype_t BF16 or FP16, rounded to nearest even) into dst[0..n) of
       uint16, and back (exact): 16-bit runs keep the layers' saved inputs
       in half the bytes (src/exec/gpt_act16.c).  CPU. */
    void (*pack16)(void *ctx, void *dst, const float *x, size_t n, int dtype);
    void (*unpack16)(void *ctx, float *dst, const void *src, size_t n, int dtype);
    /* Optional (NULL: alloc): memory not zero-filled, for a buffer written
       whole before it is read (16-bit weights widened per layer, exec_p16.c). */
    void *(*alloc_raw)(void *ctx, size_t bytes);
    /* Optional (NULL: none): the floats w[0..n) are the 16-bit values
       w16[0..n) (the GEMMs' dtype, set_gemm_dtype), read by the GEMMs from
       w16; w need not be readable memory.  n 0: that view of w goes.  CPU
       (exec_p16.c's weights). */
    void (*weights16)(void *ctx, const float *w, const void *w16, size_t n);
    /* Optional, device backends only (NULL on the CPU). */
    /* one device per rank: local_rank mod the visible devices, local_rank
       within the node; before the first allocation.  The device, or -1. */
    int (*bind)(void *ctx, int local_rank, int local_size);
    /* nonzero when p is device memory, which MPI is handed through host copies */
    int (*is_device)(void *ctx, const void *p);
    /* host <- dev after all compute queued so far; returns when host holds it */
    void (*to_host)(void *ctx, void *host, const void *dev, size_t bytes);
    /* dev <- host; compute queued after this waits for it; host reusable on return */
    void (*to_device)(void *ctx, void *dev, const void *host, size_t bytes);
    /* wait for all queued compute work */
    void (*sync)(void *ctx);
    /* Optional (NULL: malloc/free): page-locked host memory for MPI's staging
       copies (mk_comm_stage), so that to_host / to_device run at the host
       link's rate and without the driver's bounce buffer; host_free keeps it
       for the next staging of at most its size (freed with the backend). */
    void *(*host_alloc)(void *ctx, size_t bytes);
    void (*host_free)(void *ctx, void *p);
    /* frees ctx (mk_backend_free) */
    void (*destroy)(void *ctx);
} mk_backend_t;

/* The CPU backend's table (OpenBLAS sgemm and C loops) with no context:
 * every kernel runs on the calling thread; one shared table, never freed.
 * mk_backend_new("cpu") gives one with a thread pool. */
const mk_backend_t *mk_backend_cpu(void);
/* A new backend by name: "cpu", or "cuda" when built; NULL (no --backend):
 * cuda when built with CUDA and a device is visible, else cpu.  NULL with
 * mk_error_set when unknown or unavailable.  Free with mk_backend_free. */
mk_backend_t *mk_backend_new(const char *name);
void mk_backend_free(mk_backend_t *be);  /* (both also in merak/exec.h, the table opaque) */

#ifdef __cplusplus
}
#endif
#endif
