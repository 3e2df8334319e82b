/* The executor's GPT (src/exec/README.md "Training for real"): parameters sharded for
 * tensor parallelism, laid out layer-major in one allocation, and per-layer
 * forward / backward / recompute on one micro-batch.
 *
 * Layers (as in src/graph/graph_gpt.c): 0 embedding | 1+2i attention.i |
 * 2+2i mlp.i | 2L+1 head (ln_f + tied LM head + loss).  The Llama family
 * (llama != 0) has the same layers: RMSNorm, q|k|v (grouped-query, KV
 * heads), RoPE, attention, o | RMSNorm, gate|up, SwiGLU, down | RMSNorm,
 * LM head (untied unless the config ties it); no biases, no positions
 * table; Hugging Face LlamaForCausalLM names, weights (out, in) as stored.
 * An MoE block's MLP layer (Llama blocks only) holds the RMSNorm, the
 * router and E SwiGLU experts with Hugging Face Mixtral's names and an
 * optional shared expert with DeepSeek's (src/exec/gpt_moe.c).  A rank owns any
 * subset of layers (its pipeline chunks); its tensors are packed in layer
 * order, so each chunk is one contiguous range of the parameter block.
 * Weights are stored (out, in) as in llm.c; the checkpoint code transposes
 * to Hugging Face's (in, out) by name. */
#ifndef MERAK_GPT_H
#define MERAK_GPT_H

#include "merak/backend.h"
#include "merak/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MK_GPT_EMBED = 0, MK_GPT_ATTN, MK_GPT_MLP, MK_GPT_HEAD } mk_gpt_kind_t;

typedef struct mk_gpt_tensor {
    char name[64];      /* Hugging Face GPT-2 name ("transformer.h.0.attn.c_attn.weight") */
    int id;             /* canonical index: init RNG key and dump order (tied copy: wte's) */
    int layer;          /* owning layer */
    int rows, cols;     /* full shape as stored (out, in); vectors have rows = 1 */
    int real_rows;      /* rows that exist in the real model (wte: V of the padded Vp) */
    int lrows, lcols;   /* this TP rank's shard */
    int split_dim;      /* -1 replicated, 0 rows, 1 columns split across TP ranks */
    int parts;          /* 3 for q|k|v (each part split separately), else 1 */
    float init_std;     /* > 0: normal(0, std); 0: zeros; < 0: ones */
    int decay;          /* matrices decay, vectors do not */
    int owned;          /* held by this rank */
    int tied_copy;      /* the head's copy of wte (pipeline: other rank holds the embedding) */
    int expert;         /* MoE: the expert whose weight it is, -1 for every other tensor */
    int fp32;           /* read from its fp32 master in a 16-bit run (src/exec/exec_p16.c): DeepSeek-V3's
                           score bias, an fp32 buffer in Megatron-Core, moved 1e-3 at a time */
    size_t off;         /* offset (floats) in the rank's parameter block, if owned */
} mk_gpt_tensor_t;

typedef struct mk_gpt {
    mk_model_config_t cfg;
    const mk_backend_t *be;
    int tp, tp_rank;
    int L, C, T, NH, nh, hs, F, Fl, V, Vp, Vl, v0;  /* nh, Fl, Vl: this TP rank's share */
    int llama;                    /* Llama blocks (see above); 0: GPT */
    int KV, kv;                   /* K/V heads, all and this TP rank's (GPT: NH, nh) */
    int window;                   /* a sliding attention window below T (Mistral's), else 0 */
    float eps, theta;             /* Llama: RMSNorm eps, RoPE base */
    mk_rope_t rope;               /* Llama: the rotary frequencies (the base as a float, the scaling) */
    int E, topk, Fe, Fs;          /* MoE (src/exec/gpt_moe.c): experts, k, expert and shared-expert
                                     widths (0: a dense model / no shared expert) */
    /* multi-head latent attention (DeepSeek-V2/V3; src/exec/gpt_mla.c): the q and kv latent
       ranks, a head's q/k width without and with RoPE, its v width (hs = qk + rp; kv = nh);
       mla_map: the column gathers' index maps (host memory, gpt_mla.c); 0 / NULL: none */
    int mla, ql, kl, qk, rp, vd;
    int fused_attn;               /* the attention core without (T,T) scores (the backend's attention_fused_*;
                                     the plan's flash or fused backend, cp 1): each row's lse kept instead */
    int *mla_map;
    float *moe_load;              /* DeepSeek-V3's score bias: [n_layers][E] tokens routed to each expert
                                     this step (gpt_moe.c mk_gpt_moe_bias_step), host memory; else NULL */
    float *moe_bias;              /* and the biases the router reads, [n_layers][E], every rank's whole
                                     copy as Megatron-Core's expert_bias buffer (unsharded by ZeRO: the
                                     masters of e_score_correction_bias follow it, exec_ep.c), host memory */
    int ep, ep_rank;              /* expert parallel: this rank holds experts [ep_rank*E/ep, (ep_rank+1)*E/ep) */
    int cp, cp_rank;              /* context parallel (src/exec/cp.h): T is this rank's 2 chunks of
                                     each sequence; cp <= 1: none */
    int n_layers;                 /* 2L + 2 */
    int n_tensors;
    mk_gpt_tensor_t *t;           /* [n_tensors] */
    int *first;                   /* [n_layers + 1] first tensor of each layer */
    size_t n_params;              /* floats owned by this rank */
    float *params, *grads, *m, *v;/* (n_params) each, one allocation per kind */
    /* ZeRO-2/3 (src/exec/exec_fsdp.c): tensor k's parameters at pw[k] and
       its gradient at gw[k], working buffers the executor gathers and
       frees per layer; NULL arrays: in the blocks above, at t[k].off */
    float **pw, **gw;
} mk_gpt_t;

/* Where the layers read tensor k's parameters and accumulate its gradient. */
static inline float *mk_gpt_param(const mk_gpt_t *g, int k) { return g->pw ? g->pw[k] : g->params + g->t[k].off; }
static inline float *mk_gpt_grad(const mk_gpt_t *g, int k) { return g->gw ? g->gw[k] : g->grads + g->t[k].off; }
/* The LM head's weight: its own (untied), the tied copy, or the embedding's (0). */
int mk_gpt_head_weight(const mk_gpt_t *g);

/* Saved state of one layer for one micro-batch. */
typedef struct mk_gpt_act {
    float *in;          /* (N, C) the layer's input; kept while in flight (not the embedding) */
    float *buf;         /* internals for backward; NULL when checkpointed or freed */
    float *stash;       /* B_IN -> B_W: gradients at the layer's linears' outputs */
    float *wgs;         /* an MoE layer's B_IN -> B_W gradients (gpt_moe.c; its stash is the expert side) */
    int in16, buf16;    /* in / buf hold their 16-bit values packed (mk_gpt_act_pack) */
    int bw16;           /* the B_IN -> B_W gradients (stash; an MoE layer's wgs) likewise */
} mk_gpt_act_t;

/* What a forward/backward needs besides the model: micro-batch geometry,
 * the TP all-reduce, scratch, and the activation allocator's counters. */
typedef struct mk_gpt_run {
    int B;                        /* sequences per micro-batch */
    float loss_scale;             /* 1 / (tokens in the global batch) */
    float grad_scale;             /* the gradients' seed: loss_scale x the loss scaler's scale (merak/loss_scale.h) */
    /* sum (max when is_max) over the TP group, in place; 0 or -1 */
    int (*allreduce)(void *ctx, float *buf, int n, int is_max);
    void *ctx;
    /* Sub-pipelined TP (src/profile/README.md "Sub-pipelined TP in the executor"; gpt_layers.c): level 0 none, 1, 2 (3 runs
       as 2).  iallreduce starts a TP sum in place and returns a handle (or
       -1), tp_wait completes it, tp_poll progresses MPI between kernels.
       next_local: the next layer of this micro-batch runs right after this
       one on this rank (set by the caller; lets level 2 carry an attention
       layer's second-half all-reduce into its MLP). */
    int tp_overlap;
    int (*iallreduce)(void *ctx, float *buf, int n);
    int (*tp_wait)(void *ctx, int handle);
    void (*tp_poll)(void *ctx);
    int next_local;
    struct { int h, r0, n; float *out; const float *in; } defer; /* h < 0: none */
    /* Megatron's --reset-position-ids / --reset-attention-mask: docs[n] = 1
       where token row n of the micro-batch starts a document (the caller
       sets it before each layer; NULL: none); positions restart there
       (RoPE, learned positions) and attention stays inside a document. */
    const unsigned char *docs;
    int reset_pos, reset_mask;
    /* Context parallelism (g->cp > 1, src/exec/exec_cp.c): the attention
       core on B local sequences as a ring over the CP group; the forward
       writes out (B,T,nh*hs) and lse (B,nh,T) (in the probabilities' place),
       the backward adds dQ|dK|dV to dqkv.  MPI errors are fatal there. */
    void (*cp_attn_fwd)(void *ctx, float *out, float *lse, const float *qkv, int B);
    void (*cp_attn_bwd)(void *ctx, float *dqkv, const float *dout, const float *qkv, const float *out,
                        const float *lse, int B);

    /* Megatron sequence parallelism (gpt_layers.c; sp needs tp > 1, no
       tp_overlap): between the TP regions (layer inputs and outputs, the
       norms, the residual adds) this rank holds N/tp token rows, rows
       [tp_rank*N/tp, (tp_rank+1)*N/tp) of the micro-batch.  sp_coll over the
       TP group: gather != 0 all-gathers local (n floats) into full (tp*n
       floats, rank order); gather == 0 reduce-scatters full into local (sum;
       local may be full itself).  0 or -1. */
    int sp;
    int (*sp_coll)(void *ctx, float *full, float *local, int n, int gather);
    /* Expert parallelism (g->ep > 1, src/exec/exec_ep.c), over the EP
       group: ep_counts sends n ints to each peer and receives n from each
       (send, recv: ep*n, peer order); ep_a2a sends scount[r] rows of width
       floats to peer r and receives rcount[r] rows from it (rows in peer
       order).  0 or -1.  ep_tokens (may be NULL): the tokens routed to each
       of the E experts by this rank's micro-batch, for the trace. */
    int (*ep_counts)(void *ctx, const int *send, int *recv, int n);
    /* An MoE layer on part of a micro-batch's tokens (its CP ranks' chunks, and with sp its TP
       ranks' rows: gpt_moe.c): tok_allreduce sums n floats over the tok_size ranks holding the
       micro-batch's tokens, this one the tok_rank-th (SP alone: the TP rank).  0 or -1. */
    int (*tok_allreduce)(void *ctx, float *buf, int n);
    int tok_rank, tok_size;
    int (*ep_a2a)(void *ctx, const float *send, const int *scount, float *recv, const int *rcount, int width);
    void (*ep_tokens)(void *ctx, const float *count, int E);
    float *s_d;                   /* sp: (N, C) a gathered output gradient, then (2C) norm weight gradients */
    float *s_a, *s_b, *s_att, *s_c;  /* scratch: (N, wide), (N, mid), (B, nh, T, T), (N, C) */
    float *s_red;                 /* (3N) row statistics of the loss */
    float *s_qk;                  /* --qk-layernorm: one row's q|k input gradient, then the norms' 2 hs weight
                                     gradients ((nh + kv + 2) hs) */
    float *s_mla;                 /* multi-head latent attention: the backward's gradients of its
                                     pieces (N x mk_gpt_mla_scratch_row floats, gpt_mla.c) */
    double aux;                   /* MoE: the load-balancing losses' share of the objective, summed by
                                     the forwards (each micro-batch's aux loss x loss_scale x N) */
    size_t mem_cur, mem_peak;     /* bytes held by activations (and the model, see below) */
    /* 16-bit runs (mk_dtype_t BF16 or FP16; 0: fp32 activations): every
       layer's output rounded to that type where it becomes final
       (mk_gpt_round_out), the layers' saved inputs kept in it between their
       forward and their recompute or backward (mk_gpt_act_pack/unpack).
       Needs the backend's round16, pack16 and unpack16. */
    int act16;
    /* Selective recompute (Megatron-LM's --recompute-granularity selective,
       Korthikanti et al. 2022): a materialised attention core's (T, T)
       probabilities are not kept between a layer's forward and its
       backward; the backward recomputes them from the kept Q|K|V, as
       Megatron's checkpointed core does (gpt_attn.c mk_gpt_att_dropped). */
    int drop_core;
} mk_gpt_run_t;

/* The executor's layer count for cfg: the embedding, attention and MLP of
 * each of the L blocks, the head: 2L + 2 (the graph's layers, graph_gpt.c). */
int mk_gpt_n_layers(const mk_model_config_t *cfg);
/* The block the executor builds for cfg: 0 the GPT's, 1 the Llama
 * family's; -1 (a family it does not train, or a mixture of the two). */
int mk_gpt_block_kind(const mk_model_config_t *cfg);

/* Lay out the model for TP rank tp_rank of tp, owning the layers with
 * own[l] != 0; tied_copy: the head keeps its own wte (pipeline).  Allocates
 * params, grads and the two Adam moments (counted in run->mem_*). */
mk_gpt_t *mk_gpt_new(const mk_model_config_t *cfg, const mk_backend_t *be, int tp, int tp_rank,
                     const int *own, int tied_copy, mk_gpt_run_t *run);
/* The same as EP rank ep_rank of ep (ep divides the experts): of the
 * experts' tensors, it owns only its experts' (mk_gpt_new: ep 1). */
mk_gpt_t *mk_gpt_new_ep(const mk_model_config_t *cfg, const mk_backend_t *be, int tp, int tp_rank, int ep,
                        int ep_rank, const int *own, int tied_copy, mk_gpt_run_t *run);
void mk_gpt_free(mk_gpt_t *g);
mk_gpt_kind_t mk_gpt_layer_kind(const mk_gpt_t *g, int layer);
/* 1 when layer is the MLP of an MoE block (mk_model_block_is_moe). */
int mk_gpt_layer_is_moe(const mk_gpt_t *g, int layer);

/* Initialise owned parameters from the seed, independent of the layout. */
void mk_gpt_init_params(mk_gpt_t *g, uint64_t seed);
/* Full (unsharded) index of local element i of tensor t, or -1 (padding). */
long mk_gpt_full_index(const mk_gpt_t *g, const mk_gpt_tensor_t *t, size_t i);
/* Floats of the full tensor (real rows only). */
size_t mk_gpt_full_size(const mk_gpt_tensor_t *t);

/* Scratch and activations (counted in run->mem_*). */
int mk_gpt_run_init(mk_gpt_run_t *run, const mk_gpt_t *g, int B);
void mk_gpt_run_free(mk_gpt_run_t *run, const mk_gpt_t *g);
/* The activations' sizes on this rank (gpt_layers.c): a layer boundary's
 * (loc rows x C), layer l's internals (split_buf's layout) and its
 * B_IN -> B_W stash, in floats; the internals as runs kept 16-bit or fp32
 * in a 16-bit run (at most MK_GPT_RUNS16; their count). */
typedef struct { size_t n; int half; } mk_gpt_run16_t;
#define MK_GPT_RUNS16 10
size_t mk_gpt_row_floats(const mk_gpt_t *g, const mk_gpt_run_t *run);
size_t mk_gpt_internals(const mk_gpt_t *g, int l, const mk_gpt_run_t *run);
size_t mk_gpt_stash_floats(const mk_gpt_t *g, int l, const mk_gpt_run_t *run);
/* The scratch rows' width: with the logits (s_a) or without (s_b); a
 * block layer's column-parallel output row (mid) and row-parallel input
 * row (inner), in floats. */
size_t mk_gpt_scratch_row(const mk_gpt_t *g, int logits);
size_t mk_gpt_mid_w(const mk_gpt_t *g, int l);
size_t mk_gpt_inner_w(const mk_gpt_t *g, int l);
int mk_gpt_buf_runs(const mk_gpt_t *g, int l, const mk_gpt_run_t *run, mk_gpt_run16_t *runs);
/* the floats k runs take, packed (their 16-bit runs two values a float) or not */
size_t mk_gpt_runs_floats(const mk_gpt_run16_t *runs, int k, int packed);
/* gpt_act.c: the allocator (counted in run->mem_*), and the 16-bit storage.
 * The peak counts the backend's scratch (the rounded GEMM operands'
 * copies: it only grows and stays held) as it is at each allocation and
 * release, so run->mem_peak is the most ever held, activations and
 * scratch together; mk_gpt_note_peak takes it in now. */
void mk_gpt_note_peak(mk_gpt_run_t *run, const mk_gpt_t *g);
float *mk_gpt_alloc(mk_gpt_run_t *run, const mk_gpt_t *g, size_t floats);
/* the same, not zero-filled where the backend can: a buffer written whole before it is read */
float *mk_gpt_alloc_raw(mk_gpt_run_t *run, const mk_gpt_t *g, size_t floats);
void mk_gpt_release(mk_gpt_run_t *run, const mk_gpt_t *g, float *p, size_t floats);
/* Free everything a layer holds for a micro-batch (but_stash: all but
 * what its B_W reads, the B_IN -> B_W stash, an MoE layer's wgs). */
void mk_gpt_act_clear(mk_gpt_run_t *run, const mk_gpt_t *g, int layer, mk_gpt_act_t *a);
void mk_gpt_act_clear_but_stash(mk_gpt_run_t *run, const mk_gpt_t *g, int layer, mk_gpt_act_t *a);
/* run->act16: x[0..n) (a layer's output rows) rounded to the run's 16-bit
 * type in place; else nothing. */
void mk_gpt_round_out(const mk_gpt_t *g, const mk_gpt_run_t *run, float *x, size_t n);
/* run->act16: layer's saved input, and of a dense attention or MLP its
 * internals but the fp32 statistics (the norm's, the fused attention's
 * log-sum-exps), into 16-bit storage (half the bytes; exact, their values
 * rounded where made), and back to fp32 before anything reads them; else,
 * or with nothing held, nothing.  0 or -1 (out of memory, nothing
 * changed). */
int mk_gpt_act_pack(mk_gpt_run_t *run, const mk_gpt_t *g, int layer, mk_gpt_act_t *a);
int mk_gpt_act_unpack(mk_gpt_run_t *run, const mk_gpt_t *g, int layer, mk_gpt_act_t *a);
/* Whether layer's internals are kept 16-bit (run->act16, an attention, MLP
 * or MoE layer), and
 * then x[0..n) (a kept internal, where made) rounded in place;
 * floats its internals take (packed or not); their release. */
int mk_gpt_internals16(const mk_gpt_t *g, int layer, const mk_gpt_run_t *run);
void mk_gpt_round_kept(const mk_gpt_t *g, int layer, const mk_gpt_run_t *run, float *x, size_t n);
size_t mk_gpt_buf_floats(const mk_gpt_t *g, int layer, const mk_gpt_run_t *run, int packed);
void mk_gpt_free_internals(mk_gpt_run_t *run, const mk_gpt_t *g, int layer, mk_gpt_act_t *a);

/* Forward of one layer.  a->in holds the input (tokens for the embedding);
 * out (N, C) (sp: (N/tp, C), as a->in, dout and din) receives the output (NULL for the head, which adds the sum of
 * its token losses to *loss).  ckpt: keep only a->in (internals freed). */
int mk_gpt_forward(mk_gpt_t *g, mk_gpt_run_t *run, int layer, mk_gpt_act_t *a,
                   const int *tokens, const int *targets, float *out, int ckpt, double *loss);
/* Rebuild the internals of a checkpointed layer from a->in. */
int mk_gpt_recompute(mk_gpt_t *g, mk_gpt_run_t *run, int layer, mk_gpt_act_t *a,
                     const int *tokens, const int *targets);

typedef enum { MK_BWD_FULL = 0, MK_BWD_IN, MK_BWD_W } mk_bwd_mode_t;
/* Backward of one layer: dout (N, C) the gradient at its output (ignored by
 * the head), din (N, C) receives the gradient at its input (not for the
 * embedding).  FULL and W release the layer's saved state. */
int mk_gpt_backward(mk_gpt_t *g, mk_gpt_run_t *run, int layer, mk_gpt_act_t *a, mk_bwd_mode_t mode,
                    const float *dout, float *din, const int *tokens, const int *targets);

#ifdef __cplusplus
}
#endif
#endif
