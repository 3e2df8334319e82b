/* The proxy graph: a model as ops with shapes and costs, sharded into
 * layers (the units stages own and recompute counts).
 *
 * Every op carries, for one micro-batch of b sequences of s tokens (N=b*s)
 * in the graph's dtype: parameters, forward/backward matrix-multiply FLOPs
 * (attention counted as full, non-causal, like Megatron-LM's paper; the
 * causal count is kept beside it), vector FLOPs, bytes moved, the bytes it
 * saves for backward, and its tensor-parallel role.  Saved bytes are split
 * into a part replicated across TP ranks, a part divided by t, and the
 * attention-score part (also divided by t) that selective recompute drops.
 *
 * Sharding cuts the op list where exactly one activation is live (broadcast
 * inputs such as position ids and masks are not activations), then folds
 * any piece without a weight-bearing op (embedding, linear, attention,
 * LM head) into the next piece (the last one into the previous), so GPT
 * gives embedding | attention | mlp | ... | final norm + head + loss. */
#ifndef MERAK_GRAPH_H
#define MERAK_GRAPH_H

#include "merak/model.h"

/* The loss's implementation, for its memory and its passes over the
 * logits (graph.c loss_passes): vocab-parallel (Megatron-LM's
 * vocab_parallel_cross_entropy, Megatron-Core's default: the gradient
 * written into the saved softmax in place), torch (F.cross_entropy on the
 * fp32 logits, as torchtitan calls it: its backward makes two fp32
 * logits-sized tensors), fused (Megatron-Core's --cross-entropy-loss-
 * fusion, its native jit-fused kernels; merak run's loss makes the same
 * passes) or fused-te (with --cross-entropy-fusion-impl te: Transformer
 * Engine's Triton kernels); the fused two keep what vocab-parallel keeps. */
typedef enum { MK_XENT_VOCAB_PARALLEL = 0, MK_XENT_TORCH, MK_XENT_FUSED, MK_XENT_FUSED_TE } mk_xent_t;

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MK_OPK_EMBEDDING = 0, /* token lookup (vocab, dim); input: token ids */
    MK_OPK_POS_EMBEDDING, /* position lookup (seq, dim); no activation input */
    MK_OPK_LAYERNORM,
    MK_OPK_LINEAR,        /* y = x W + b, W (in, out) */
    MK_OPK_ATTENTION,     /* core: scores, mask, softmax, dropout, context; input 3w */
    MK_OPK_GELU,
    MK_OPK_ADD,           /* residual join of two activations */
    MK_OPK_DROPOUT,
    MK_OPK_LM_HEAD,       /* logits = x E^T over the (padded) vocabulary */
    MK_OPK_LOSS,          /* softmax cross-entropy; labels are a broadcast input */
    MK_OPK_RMSNORM,       /* x * rsqrt(mean(x^2) + eps) * w */
    MK_OPK_ROPE,          /* rotary positions on the q and k parts of a fused q,k,v; same width */
    MK_OPK_SWIGLU,        /* silu(gate) * up: input [gate | up] 2f, output f */
    MK_OPK_MOE,           /* routed experts: inputs x (w) and router logits (E); output w */
    MK_OPK_QK_NORM,       /* q and k of a fused q,k,v normalised per head (RMSNorm; bias: LayerNorm); same width */
    MK_OPK_MLA_NORM,      /* MLA: RMSNorm of the q and kv latents of [q latent | kv latent | k_pe]; same width */
    MK_OPK_MLA_UP,        /* MLA: the latents' up-projections to the heads' fused [q | k | v] */
    MK_OPK_COUNT
} mk_opkind_t;

typedef enum {
    MK_TP_REPLICATED = 0, /* every TP rank computes it whole */
    MK_TP_COLUMN,         /* linear whose output is split (widening half of a pair) */
    MK_TP_ROW,            /* linear whose input is split; all-reduce after it */
    MK_TP_SPLIT,          /* elementwise op on a split tensor, inside a pair */
    MK_TP_HEADS,          /* attention core with heads split */
    MK_TP_VOCAB           /* embedding, LM head, loss split over the vocabulary */
} mk_tp_role_t;

#define MK_GRAPH_INPUT (-1) /* producer index meaning "the graph's token input" */

typedef struct mk_op {
    char name[48];
    mk_opkind_t kind;
    int n_in, in[2];          /* producer op indices, or MK_GRAPH_INPUT */
    int in_width, width;      /* features per token in and out */
    int heads;                /* attention, rope */
    int kv_heads;             /* attention, rope: K/V heads (GQA); 0 means heads (MHA) */
    int vocab, vocab_padded;  /* embedding, LM head, loss */
    int causal, bias, tied;
    int block;                /* transformer block, -1 outside blocks */
    /* moe: E experts of width ffn (gated: SwiGLU, else GELU), top-k of them
     * per token, a shared expert of width shared_ffn (0: none), its output
     * gated by sigmoid(x . g) when shared_gate */
    int experts, topk, ffn, shared_ffn, gated, shared_gate;
    /* multi-head latent attention (mla_norm, mla_up, and its rope and
     * attention): latent ranks, a head's q/k part without and with RoPE,
     * its v; v_dim 0: not MLA (q, k, v of one head dim) */
    int q_lora, kv_lora, qk_dim, rope_dim, v_dim;
    mk_tp_role_t tp_role;
    /* per micro-batch, whole (unsharded) op: */
    double params;
    double active_params;          /* the parameters one token uses (moe: k of E experts) */
    double expert_params;          /* moe: the E routed experts' (what expert parallelism splits) */
    double wgrad_bytes;            /* moe: what its weight-gradient GEMMs read, a split backward's
                                      B_IN -> B_W stash (graph.c moe_costs) */
    double bwd_grads;              /* moe: the most gradient bytes its backward holds at once, the
                                      experts' own (graph.c moe_costs; sim/memory_act.c op_grads) */
    double fwd_flops, bwd_flops;   /* matmul FLOPs, non-causal attention */
    double fwd_flops_causal;       /* matmul FLOPs, causal attention */
    double vec_flops;              /* elementwise FLOPs, forward */
    double bytes_moved;            /* forward memory traffic */
    double pass_bytes[2];          /* forward, backward traffic of kernels of their own beside
                                      the op's (fp8: Transformer Engine's casts and transposes) */
    double act_rep, act_split, act_scores; /* saved-for-backward bytes */
    double out_bytes;              /* its output activation */
} mk_op_t;

typedef struct mk_layer {
    char name[48];
    char kind[16];           /* embedding | attention | mlp | head | layer */
    int first_op, n_ops;
    int block;
    double params, active_params;
    double fwd_flops, bwd_flops, fwd_flops_causal, vec_flops, bytes_moved;
    double in_bytes;         /* activation entering the layer (what a checkpoint keeps) */
    double out_bytes;        /* activation leaving it (what a stage boundary sends) */
    double act_rep, act_split, act_scores; /* sums of the ops' saved bytes (see mk_op_t) */
    double wgrad_rep, wgrad_split; /* the weight-gradient GEMMs' operands (linears, LM head): each saved
                                      input whole, the output gradient as the output is split (a
                                      split backward's B_IN -> B_W stash: sim/memory_act.c) */
    double wgrad_moe;        /* the same of its MoE ops (mk_op_t.wgrad_bytes: a TP rank's rows
                                under sequence parallelism, / t) */
    double params_rep, params_split;       /* parameters whole on every TP rank / split over t */
    double expert_rep, expert_split;       /* of them, an MoE op's routed experts' (likewise) */
    int has_tp_pair;         /* holds a column/row pair: 2 TP all-reduces fwd, 2 bwd per block */
    int n_tp_allreduce;      /* row-parallel linears: all-reduces in forward */
    int twin;                /* an earlier layer equal to this one but for names, block numbers and
                                where the graph puts it (its ops' inputs at the same places in it):
                                the same costs and pieces on every plan, so computed once; or -1 */
} mk_layer_t;

typedef struct mk_graph_opts {
    int mbs;            /* b: sequences per micro-batch */
    mk_dtype_t dtype;   /* activation and weight type for bytes */
    int dropout;        /* dropout layers save masks */
    int tp;             /* for vocabulary padding only */
    int flash_attn;     /* the attention core keeps no s x s scores (FlashAttention) */
    int eager;          /* element-wise ops as eager PyTorch runs them (torchtitan without
                           torch.compile): RMSNorm, RoPE and SwiGLU as a kernel per PyTorch op,
                           each a pass over memory, with fp32 upcasts (graph.c vector_costs;
                           time only); 0: one fused kernel each (Megatron, TE, torch.compile) */
    int fp8_weight_cast; /* fp8: each linear casts its weight where it uses it (torchao's Float8Linear):
                            the cast's passes in every forward, the FP8 weight's transposed copy in
                            every backward (sim/cost.c fp8_weight_pass_bytes; time only); 0: TE's
                            weights cast once a step and kept (sim/memory.c fp8_copies) */
    int fp8_current;    /* fp8: current (tensorwise) scaling, each cast after an amax pass
                           of its own (mk_fp8_recipe_t; graph.c linear_bytes) */
    int xent;           /* the loss's implementation (mk_xent_t): its passes over the logits
                           (graph.c loss_passes) and, torch, its backward's two fp32 gradients */
    double moe_imbalance; /* MoE: the busiest expert's load over the mean (the plan's; 0 or 1:
                             balanced); the graph's FLOPs stay the mean, with ep > 1 the busiest
                             rank's routed saved rows scale by it (graph.c moe_costs) */
    int ep;             /* MoE: expert parallel ranks (0 or 1: none): an expert's GEMMs see the
                           tokens of ep ranks, ep N k / E (time only) */
    int moe_deepep;     /* MoE: Megatron-Core's flex dispatcher with DeepEP (mk_plan_t.moe_deepep),
                           else its all-to-all one: the kernels an MoE layer launches (time only) */
} mk_graph_opts_t;

typedef struct mk_graph {
    mk_model_config_t cfg;
    mk_graph_opts_t opts;
    int input_width;    /* 0: the input is token ids (read by an embedding); else activation width */
    int n_ops;
    mk_op_t *ops;
    int n_layers;
    mk_layer_t *layers;
    double tied_rep, tied_split;  /* embedding parameters an LM head ties to (0 if untied) */
    int *name_slot;     /* op names hashed (open addressing): op index + 1, 0 empty */
    int name_cap;       /* slots, a power of two above 2 * n_ops */
} mk_graph_t;

MK_API void mk_graph_opts_init(mk_graph_opts_t *o); /* b=1, bf16, dropout on, tp=1 */

/* Build GPT/BERT from the configuration, or load cfg->json_path.  Returns
 * a graph to free with mk_graph_free, or NULL (see mk_error_last()). */
MK_API mk_graph_t *mk_graph_build(const mk_model_config_t *cfg, const mk_graph_opts_t *opts);
MK_API void mk_graph_free(mk_graph_t *g);

/* Load a JSON model description (schema: traces/models/README.md) into a
 * configuration (family CUSTOM) after checking it fully.  Returns 0 or -1. */
MK_API int mk_graph_json_probe(const char *path, mk_model_config_t *cfg);

/* Bytes one layer saves for backward per micro-batch on one TP rank when
 * nothing is checkpointed, with tensor parallelism t, optional sequence
 * parallelism (replicated parts divided by t too) and optional selective
 * recompute (attention scores not kept). */
MK_API double mk_layer_act_bytes(const mk_graph_t *g, int layer, int tp, int seqpar, int selective);
/* Bytes a layer keeps when checkpointed (its input, divided by t under SP). */
MK_API double mk_layer_ckpt_bytes(const mk_graph_t *g, int layer, int tp, int seqpar);

/* A layer recompute may checkpoint: inside a transformer block and holding
 * parameters (the embedding and the head are never recomputed, as in
 * Megatron-LM's FLOP formula, src/graph/README.md "The model"). */
MK_API int mk_layer_checkpointable(const mk_graph_t *g, int layer);

/* The parameter tensors op o holds, as PyTorch modules hold them in the
 * graph's (Megatron's) layout (a fused q|k|v linear: one weight, one
 * bias): what per-tensor collectives count (mk_plan_t.zero3_per_param). */
typedef struct mk_op_tensors {
    int matrices;         /* weights, embedding tables, an untied LM head's */
    int vectors;          /* biases, norm weights, an MoE op's shared gate */
    int experts;          /* an MoE op's routed experts' (m matrices each: 3 gated, 2 not; and
                           * their biases) */
    double vector_params; /* the vectors' elements */
} mk_op_tensors_t;
MK_API void mk_graph_op_tensors(const mk_op_t *o, mk_op_tensors_t *t);

/* Totals over all layers. */
MK_API double mk_graph_params(const mk_graph_t *g);
/* Parameters one token goes through (an MoE layer counts k of its E
 * experts and the shared expert; the same as mk_graph_params when dense). */
MK_API double mk_graph_active_params(const mk_graph_t *g);
/* Matmul FLOPs of one training iteration with global batch gbs (sequences):
 * forward + backward, plus a second forward of every block when recompute
 * is set (the head and embedding are never recomputed). */
MK_API double mk_graph_flops_per_iteration(const mk_graph_t *g, int gbs, int recompute);

MK_API const char *mk_opkind_name(mk_opkind_t k);
MK_API int mk_opkind_parse(const char *s, mk_opkind_t *out);
MK_API const char *mk_tp_role_name(mk_tp_role_t r);

/* Internal to the graph module: append an op, derive costs, shard. */
MK_API int mk_graph_add_op(mk_graph_t *g, const mk_op_t *op);
/* Index of the op named name, or -1 (constant time, so graphs of many
 * thousands of ops build in linear time). */
MK_API int mk_graph_find_op(const mk_graph_t *g, const char *name);
MK_API int mk_graph_finish(mk_graph_t *g);
MK_API mk_graph_t *mk_graph_new(const mk_model_config_t *cfg, const mk_graph_opts_t *opts);
MK_API mk_graph_t *mk_graph_load_json(const mk_model_config_t *cfg, const mk_graph_opts_t *opts);

#ifdef __cplusplus
}
#endif
#endif
