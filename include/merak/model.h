/* Model configurations: presets, Megatron-LM-style overrides, dtypes.
 *
 * A configuration names a family (GPT decoder, BERT encoder, or a custom
 * graph from a JSON description) and its sizes.  The proxy graph
 * (graph.h) is built from it. */
#ifndef MERAK_MODEL_H
#define MERAK_MODEL_H

#include "merak/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fp8: Transformer-Engine-style mixed precision: the linear layers' GEMMs in
 * FP8 (E4M3 forward, E5M2 gradients), everything else, the weights and the
 * tensors between ops in bf16 (README "FP8"). */
typedef enum { MK_DTYPE_FP32 = 0, MK_DTYPE_FP16, MK_DTYPE_BF16, MK_DTYPE_FP8, MK_DTYPE_COUNT } mk_dtype_t;

typedef enum { MK_FAMILY_GPT = 0, MK_FAMILY_BERT, MK_FAMILY_CUSTOM, MK_FAMILY_LLAMA } mk_family_t;

/* Block normalization and position encoding (GPT: LayerNorm, learned positions). */
typedef enum { MK_NORM_LAYERNORM = 0, MK_NORM_RMSNORM } mk_norm_kind_t;
typedef enum { MK_POS_LEARNED = 0, MK_POS_ROPE } mk_pos_kind_t;

typedef struct mk_model_config {
    char name[64];
    mk_family_t family;
    int num_layers;       /* transformer blocks (Megatron's --num-layers) */
    int hidden;           /* h */
    int heads;            /* a */
    int seq;              /* s */
    int vocab;            /* V, the real vocabulary (padding is computational only) */
    int ffn;              /* MLP width, 4h by default */
    /* The Llama architecture (Hugging Face LlamaForCausalLM); the defaults
     * (mk_model_defaults) give the GPT.  Head dim d = hidden / heads, or
     * kv_channels where set (mk_model_head_dim); the queries are heads * d
     * wide, the K/V kv_heads * d; query head i uses K/V head floor(i*kv/heads). */
    int kv_heads;          /* num_key_value_heads (GQA); == heads for MHA (GPT: heads) */
    int kv_channels;       /* head dim apart from hidden / heads (Megatron's --kv-channels, HF head_dim); 0: h/a */
    mk_norm_kind_t norm;   /* MK_NORM_LAYERNORM (GPT) | MK_NORM_RMSNORM */
    int swiglu;            /* MLP = down(silu(gate(x)) * up(x)); 0: GELU MLP */
    mk_pos_kind_t pos;     /* MK_POS_LEARNED (GPT) | MK_POS_ROPE */
    double rope_theta;     /* rotary base (--rotary-base), 10000 */
    double norm_eps;       /* 1e-5 */
    int untied;            /* LM head separate from the embedding (--untie-embeddings-and-output-weights) */
    int bias;              /* linears have biases (GPT 1; --disable-bias-linear -> 0) */
    int qkv_bias;          /* the QKV linear has a bias where the others have none (Megatron's
                              --add-qkv-bias; Qwen2); 0: as bias says */
    /* Multi-head latent attention (DeepSeek-V2/V3; Megatron's --multi-latent-attention), when
     * kv_lora_rank > 0: q from a q_lora_rank latent, k and v from a kv_lora_rank one (each
     * RMSNorm'd), both down-projections every TP rank's; a head's q and k are qk_head_dim wide
     * without position and qk_pos_emb_head_dim with RoPE (k's one part shared by the heads), its v
     * v_head_dim; no K/V groups (kv_heads = heads). */
    int q_lora_rank, kv_lora_rank, qk_head_dim, qk_pos_emb_head_dim, v_head_dim;
    int mtp_layers;        /* multi-token prediction depths after the blocks (Megatron's --mtp-num-layers;
                              DeepSeek-V3 trained with 1): each embeds the tokens again (shared table),
                              joins them to the previous depth's hidden state (two norms, a 2h -> h
                              projection), runs one more block and the shared head and a loss */
    int qk_norm;           /* q and k normalised per head before RoPE by the model's norm (Megatron's
                              --qk-layernorm; Qwen3's q_norm, k_norm) */
    int no_dropout;        /* 1: no dropout ops (Megatron's --attention-dropout 0 --hidden-dropout 0;
                              the Llama family never has them) */
    /* Mixture of experts (Megatron-LM's --num-experts and --moe-* flags): the
     * MLP of each MoE block is a router linear (h -> E), softmax and top-k
     * selection, E expert MLPs of width moe_ffn (SwiGLU or GELU as swiglu
     * says) and an optional shared expert MLP every token goes through.
     * Block i is MoE when i >= moe_first_dense and i % moe_layer_freq == 0
     * (Megatron's --moe-layer-freq N or "([0]*K+[1]*M)"); the others keep
     * the dense MLP of width ffn.  num_experts 0: a dense model. */
    int num_experts;       /* E (--num-experts), 0 = dense */
    int moe_topk;          /* k experts per token (--moe-router-topk, 2) */
    int moe_ffn;           /* expert width (--moe-ffn-hidden-size, default ffn) */
    int moe_shared_ffn;    /* shared expert width, 0 = none (--moe-shared-expert-intermediate-size) */
    int moe_router_bias;   /* a per-expert routing-score bias, E parameters (--moe-router-enable-expert-bias;
                              DeepSeek-V3's e_score_correction_bias) */
    /* DeepSeek-V3's router (transformers' DeepseekV3TopkRouter; Megatron's --moe-router-score-function
       sigmoid, --moe-router-topk-scaling-factor, --moe-router-num-groups, --moe-router-group-topk):
       sigmoid scores (0: softmax), the k weights times moe_topk_scale (0: 1), the top k chosen from
       the moe_group_topk of moe_groups expert groups with the best two scores (0: no groups).  No
       cost changes (the sim and plan read them for the record); the executor routes by them. */
    int moe_score_sigmoid;
    double moe_topk_scale;
    int moe_groups, moe_group_topk;
    int moe_shared_gate;   /* the shared expert's output scaled by sigmoid(x . g), g an h-vector
                              (--moe-shared-expert-gate; Qwen2-MoE's shared_expert_gate) */
    int moe_pre_softmax;   /* 1: softmax over E then top-k, not renormalised (DeepSeek;
                              --moe-router-pre-softmax); 0: the k weights sum to 1 (Mixtral) */
    double moe_aux_coeff;  /* load-balancing loss coefficient (--moe-aux-loss-coeff, Megatron 0) */
    double moe_capacity;   /* expert capacity factor, 0 = dropless (--moe-expert-capacity-factor) */
    int moe_layer_freq;    /* 1: every block (from moe_first_dense on) */
    int moe_first_dense;   /* leading dense blocks */
    /* window: a causal sliding attention window (Mistral's sliding_window:
     * a query sees the window keys ending at itself; Megatron's
     * --window-size window-1,0), 0 none: the fused attention does its
     * share of the work (mk_model_window_share), the executor masks the
     * rest; not under context parallelism.  rope_factor > 0:
     * Llama 3.1's rope_scaling (rope_type llama3: factor, low/high
     * frequency factors, the original context): the kernels' RoPE scales
     * the frequencies (merak/rope.h). */
    int window;
    double rope_factor, rope_low_freq, rope_high_freq;
    int rope_orig_max_pos;
    double rope_yarn_factor; /* DeepSeek's YaRN rope_scaling (its config.json's factor): no cost
                              * changes; kept so that the executor refuses it; 0: none */
    char json_path[512];  /* MK_FAMILY_CUSTOM: the JSON description it came from */
} mk_model_config_t;

/* Overrides from Megatron-LM flags; a field < 0 means "not given".  The
 * architecture switches (norm, swiglu, pos, untied, bias) are 0/1 or enum
 * values when given; kv_heads is --num-query-groups (only with
 * group_query_attention: Megatron's default is 1 group). */
typedef struct mk_model_overrides {
    int num_layers, hidden, heads, seq, vocab, ffn;
    int group_query_attention, kv_heads, kv_channels;
    int norm, swiglu, pos, untied, bias, qkv_bias, qk_norm, window;
    /* --multi-latent-attention (1) and its dims (Megatron's defaults: no q latent, kv 32, 128, 64, 128) */
    int mla, q_lora_rank, kv_lora_rank, qk_head_dim, qk_pos_emb_head_dim, v_head_dim;
    int mtp_layers;     /* --mtp-num-layers */
    int max_pos;        /* --max-position-embeddings: at least the sequence; a learned table has seq rows */
    double rope_theta, norm_eps;
    int use_rope_scaling;        /* Megatron's --use-rope-scaling: Llama 3.1's, low 1, high 4, original 8192 */
    double rope_scaling_factor;  /* --rope-scaling-factor (Megatron's default 8) */
    double attention_dropout, hidden_dropout; /* Megatron's probabilities (< 0: not given) */
    /* --num-experts, --moe-router-topk, --moe-ffn-hidden-size,
     * --moe-shared-expert-intermediate-size, --moe-router-pre-softmax (1),
     * --moe-layer-freq as (freq, first dense, pattern length: 0 for the
     * integer form), --moe-aux-loss-coeff, --moe-expert-capacity-factor;
     * the router's --moe-router-score-function (1 sigmoid, 0 softmax),
     * --moe-router-topk-scaling-factor, --moe-router-num-groups,
     * --moe-router-group-topk */
    int num_experts, moe_topk, moe_ffn, moe_shared_ffn, moe_pre_softmax, moe_shared_gate, moe_router_bias;
    int moe_score_sigmoid, moe_groups, moe_group_topk;
    double moe_topk_scale;
    int moe_layer_freq, moe_first_dense, moe_pattern_len;
    double moe_aux_coeff, moe_capacity;
} mk_model_overrides_t;

/* The GPT architecture fields: zero sizes, kv_heads 0 (set it to the heads
 * once they are known), LayerNorm, GELU MLP, learned positions, theta
 * 10000, eps 1e-5, tied head, biases. */
MK_API void mk_model_defaults(mk_model_config_t *cfg);
/* The Llama architecture on top: RMSNorm, SwiGLU, rotary positions, an
 * untied head, no biases (the sizes, kv_heads and theta are the caller's). */
MK_API void mk_model_llama_arch(mk_model_config_t *cfg);

/* Names: "gpt", "bert", "custom", "llama"; Megatron-LM's "LayerNorm",
 * "RMSNorm" and "learned_absolute", "rope".  The parsers return 0 or -1. */
MK_API const char *mk_family_name(mk_family_t f);
MK_API const char *mk_norm_name(mk_norm_kind_t k);
MK_API const char *mk_pos_name(mk_pos_kind_t k);
MK_API int mk_norm_parse(const char *s, mk_norm_kind_t *out);
MK_API int mk_pos_parse(const char *s, mk_pos_kind_t *out);
/* A causal sliding window's share of the causal attention's work: of the
 * s(s+1)/2 (query, key) pairs a causal mask keeps, those with key >
 * query - window (window keys a query, itself included: Hugging Face's
 * sliding_window), W(W+1)/2 + (s - W) W; 1 without a window or one that
 * covers the sequence. */
MK_API double mk_model_window_share(const mk_model_config_t *cfg);
/* 1 for multi-head latent attention (kv_lora_rank > 0). */
MK_API int mk_model_is_mla(const mk_model_config_t *cfg);
/* The head dim d: kv_channels where set, else hidden / heads. */
MK_API int mk_model_head_dim(const mk_model_config_t *cfg);
/* 1 for a mixture-of-experts model (num_experts > 0), 0 for a dense one. */
MK_API int mk_model_is_moe(const mk_model_config_t *cfg);
/* 1 when block i (0-based) has an MoE layer instead of the dense MLP. */
MK_API int mk_model_block_is_moe(const mk_model_config_t *cfg, int block);
/* --moe-layer-freq: an integer N (every N-th block) or Megatron's pattern
 * "([0]*K+[1]*M)" (K dense blocks then M MoE blocks; quotes and the
 * parentheses optional).  Sets *freq, *first_dense and *len (K+M, 0 for
 * the integer form).  Returns 0 or -1. */
MK_API int mk_moe_layer_freq_parse(const char *s, int *freq, int *first_dense, int *len);
/* Megatron's --window-size "LEFT,RIGHT" (parentheses optional): a query
 * sees LEFT keys before it and RIGHT after; RIGHT must be 0 (causal), and
 * LEFT -1 means no window.  *window = LEFT + 1 (the keys a query sees,
 * itself included: Hugging Face's sliding_window), 0 for none.  Returns
 * 0 or -1. */
MK_API int mk_window_size_parse(const char *s, int *window);
/* 1 when the architecture fields are the GPT's (mk_model_defaults, MHA). */
MK_API int mk_model_arch_is_gpt(const mk_model_config_t *cfg);

/* Fill *cfg from a preset name.  Returns -1 (unknown preset) otherwise. */
MK_API int mk_model_preset(const char *name, mk_model_config_t *cfg);
/* Names of the model presets, NULL-terminated. */
MK_API const char *const *mk_model_preset_names(void);
/* One-line description of a preset ("" if unknown). */
MK_API const char *mk_model_preset_about(const char *name);

/* Resolve --model (a preset or a path to a JSON description) and apply the
 * overrides, whatever order the flags came in; ffn is re-derived as 4h when
 * the hidden size changes and --ffn-hidden-size is not given.  Validates
 * the result (mk_model_validate).  Returns 0 or -1. */
MK_API int mk_model_resolve(const char *model, const mk_model_overrides_t *ov,
                     mk_model_config_t *cfg);
MK_API void mk_model_overrides_init(mk_model_overrides_t *ov);

/* Sizes from 1 to their maxima (merak/limits.h), heads dividing hidden.
 * Returns 0 or -1. */
MK_API int mk_model_validate(const mk_model_config_t *cfg);
/* The same, naming the fields as the file `file` spells them ("plan.json:
 * model.hidden_size ..."; obj: the object holding them, or NULL); file
 * NULL names the flags (--hidden-size). */
MK_API int mk_model_validate_in(const mk_model_config_t *cfg, const char *file, const char *obj);
/* Check that tensor parallelism t fits the model (t divides the heads). */
MK_API int mk_model_check_tp(const mk_model_config_t *cfg, int tp);

/* Vocabulary padded for computation to a multiple of 128*tp (Megatron). */
MK_API int mk_model_padded_vocab(const mk_model_config_t *cfg, int tp);
/* The same for any vocabulary (an op of a JSON model). */
MK_API int mk_pad_vocab(int vocab, int tp);

/* dtype names: "fp32", "fp16", "bf16", "fp8".  Returns 0 or -1. */
MK_API int mk_dtype_parse(const char *s, mk_dtype_t *out);
MK_API const char *mk_dtype_name(mk_dtype_t d);
/* Bytes of an activation or weight element: fp8 plans keep them in bf16
 * (2); only a linear layer's GEMM operands are FP8 (mk_dtype_gemm_bytes). */
MK_API int mk_dtype_bytes(mk_dtype_t d);
/* Bytes of a linear layer's GEMM input element (and of the input it saves
 * for its weight gradient): 1 for fp8, else mk_dtype_bytes. */
MK_API int mk_dtype_gemm_bytes(mk_dtype_t d);
/* Bytes per element of Transformer Engine's fused cast-transpose to FP8
 * (reads the bf16 tensor, writes the FP8 copy and its transpose: Hopper's
 * FP8 GEMMs take only the TN layout), 2 + 1 + 1; with current (tensorwise)
 * scaling the tensor is read once more before, for the amax its scale
 * needs (+ 2); 0 for other dtypes (no cast). */
MK_API int mk_dtype_cast_bytes(mk_dtype_t d, int current);

#ifdef __cplusplus
}
#endif
#endif
