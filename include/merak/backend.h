/* Compute backends: one table of function pointers per device kind.
 *
 * The executor calls kernels only through this table; the CPU backend
 * (OpenBLAS + C loops, src/exec/backend_cpu.c) and the CUDA backend (cuBLAS and
 * our kernels, src/cuda/, merak/cuda.h) each fill one.  All pointers passed
 * to kernels are device memory obtained from alloc(); the executor hands MPI
 * the same pointers, staged through host memory for a device backend
 * (mk_comm_stage, merak/cuda.h: no CUDA-aware MPI needed).
 * Optional entries may be NULL.  Shapes: N = b*T tokens, C channels,
 * NH heads (local to the TP rank), hs head size, row-major everywhere.
 * Linear weights are stored (out, in), as in llm.c: y = x W^T + b. */
#ifndef MERAK_BACKEND_H
#define MERAK_BACKEND_H

#include "merak/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mk_backend {
    const char *name;
    /* memory (bytes); zero-filled on allocation */
    void *(*alloc)(size_t bytes);
    void (*free)(void *p);
    void (*zero)(void *p, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes);
    /* out (N,OC) = inp (N,IC) W^T (W (OC,IC)) + bias (OC, may be NULL) */
    void (*linear_fwd)(float *out, const float *inp, const float *w, const float *bias,
                       int N, int IC, int OC);
    /* dinp (N,IC) += dout W  (dinp may be NULL) */
    void (*linear_bwd_in)(float *dinp, const float *dout, const float *w, int N, int IC, int OC);
    /* dw (OC,IC) += dout^T inp, dbias (OC) += sum_n dout (dbias may be NULL) */
    void (*linear_bwd_w)(float *dw, float *dbias, const float *dout, const float *inp,
                         int N, int IC, int OC);
    /* out (N,C) = wte[tok - v0] for tokens in [v0, v0+Vl), else 0; then + wpe (T,C) if
       wpe != NULL (position = n mod T) */
    void (*embed_fwd)(float *out, const int *tok, const float *wte, const float *wpe,
                      int N, int T, int C, int v0, int Vl);
    /* dwte (Vl,C) += rows of dout for owned tokens; dwpe (T,C) += dout (if not NULL) */
    void (*embed_bwd)(float *dwte, float *dwpe, const float *dout, const int *tok,
                      int N, int T, int C, int v0, int Vl);
    /* out (N,C), mean (N), rstd (N); eps 1e-5 */
    void (*layernorm_fwd)(float *out, float *mean, float *rstd, const float *inp,
                          const float *w, const float *b, int N, int C);
    /* dinp += , dw += , db += */
    void (*layernorm_bwd)(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                          const float *w, const float *mean, const float *rstd, int N, int C);
    /* qkv (B,T,3*NH*hs) as [q heads | k heads | v heads]; att (B,NH,T,T) softmax
       probabilities (saved); out (B,T,NH*hs); causal, scaled 1/sqrt(hs) */
    void (*attention_fwd)(float *out, float *att, const float *qkv, int B, int T, int NH, int hs);
    /* dqkv (B,T,3*NH*hs) += ; scratch datt (B,NH,T,T) is overwritten */
    void (*attention_bwd)(float *dqkv, float *datt, const float *dout, const float *qkv,
                          const float *att, int B, int T, int NH, int hs);
    void (*gelu_fwd)(float *out, const float *inp, int n);              /* tanh approximation */
    void (*gelu_bwd)(float *dinp, const float *inp, const float *dout, int n); /* dinp += */
    void (*add)(float *out, const float *a, const float *b, int n);     /* out = a + b */
    void (*acc)(float *out, const float *a, int n);                     /* out += a */
    /* Vocabulary-parallel cross-entropy over logits (N,Vl) holding columns
       [v0, v0+Vl) of the padded vocabulary; columns >= V (real) are masked.
       Pass 1: rowmax (N) = max over valid local columns (-inf if none). */
    void (*xent_max)(float *rowmax, const float *logits, int N, int Vl, int v0, int V);
    /* Pass 2 (rowmax now global): logits <- exp(logit - max) in place (0 for masked),
       rowsum (N) = local sum, tgt (N) = target's logit - max if owned, else 0. */
    void (*xent_exp)(float *logits, float *rowsum, float *tgt, const float *rowmax,
                     const int *targets, int N, int Vl, int v0, int V);
    /* Pass 3 (rowsum, tgt global): probs <- logits / rowsum; returns sum_n loss_n
       (log rowsum - tgt) in double; used by forward. */
    double (*xent_loss)(float *probs, const float *rowsum, const float *tgt, int N, int Vl);
    /* dlogits (N,Vl) = scale * (probs - onehot(target)) */
    void (*xent_bwd)(float *dlogits, const float *probs, const int *targets, float scale,
                     int N, int Vl, int v0);
    /* AdamW on n elements; decay 0 for vectors.  lr, bias corrections by the caller. */
    void (*adamw)(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                  float beta2, float bc1, float bc2, float eps, float decay, float gscale);
    double (*sumsq)(const float *x, size_t n);
    /* Optional (NULL: the backend cannot fail).  0, or -1 with mk_error_set
       once a device error has happened in any entry above (sticky: the
       entries return void, so they record it and carry on; results from
       then on are undefined).  The executor checks it after every step. */
    int (*status)(void);
} mk_backend_t;

/* The CPU backend (OpenBLAS sgemm and C loops). */
const mk_backend_t *mk_backend_cpu(void);
/* "cpu" (or "cuda" when built).  NULL with mk_error_set when unknown/unavailable. */
const mk_backend_t *mk_backend_get(const char *name);

#ifdef __cplusplus
}
#endif
#endif
