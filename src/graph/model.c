/* Model presets and configuration checks.  Sizes of the GPT presets follow
 * the Merak paper (Table 2) and Megatron-LM; gpt2-124m is OpenAI's GPT-2
 * small; bert-large is Devlin et al. 2019 (24 layers, 1024, 16 heads).  The
 * Llama presets are Meta's Hugging Face config.json files (hidden_size,
 * intermediate_size, num_attention_heads, num_key_value_heads, vocab_size,
 * max_position_embeddings as the sequence, rope_theta, rms_norm_eps;
 * untied heads, no biases).  The MoE presets are the Llama architecture
 * with the experts of mk_moe_presets: Mixtral's from Mistral AI's Hugging
 * Face config.json (mistralai/Mixtral-8x7B-v0.1: num_local_experts 8,
 * num_experts_per_tok 2, intermediate_size 14336, max_position_embeddings
 * 32768, rope_theta 1e6, router_aux_loss_coef 0.02; Mixtral-8x22B-v0.1 /
 * Instruct: 56 layers, hidden 6144, 48 heads, 8 KV heads, 16384, vocab
 * 32768, 65536 positions), DeepSeek-MoE 16B from deepseek-ai/
 * deepseek-moe-16b-base's config.json (28 layers, hidden 2048, 16 heads,
 * first_k_dense_replace 1 with intermediate_size 10944, 64 routed experts
 * of moe_intermediate_size 1408, n_shared_experts 2 (one shared MLP of
 * 2816), num_experts_per_tok 6, norm_topk_prob false, aux_loss_alpha
 * 0.001, vocab 102400, 4096 positions, rms_norm_eps 1e-6). */
#include "merak/graph.h"
#include "merak/readfile.h"
#include "graph/model_hf.h"
#include "merak/model.h"
#include "merak/limits.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct {
    const char *name;
    mk_family_t family;
    int layers, hidden, heads, seq, vocab;
    const char *about;
    int kv_heads, ffn;   /* Llama only (0: heads and 4h) */
    double rope_theta;   /* Llama only */
} mk_preset_t;

static const mk_preset_t mk_presets[] = {
    {"gpt-tiny", MK_FAMILY_GPT, 4, 64, 4, 64, 256, "4 blocks, hidden 64: for tests", 0, 0, 0},
    {"gpt2-124m", MK_FAMILY_GPT, 12, 768, 12, 1024, 50257, "GPT-2 small", 0, 0, 0},
    {"gpt-1.5b", MK_FAMILY_GPT, 48, 1600, 25, 1024, 50257, "Merak paper, GPT-1.5B", 0, 0, 0},
    {"gpt-2.5b", MK_FAMILY_GPT, 54, 1920, 20, 1024, 50257, "Merak paper, GPT-2.5B", 0, 0, 0},
    {"gpt-8.3b", MK_FAMILY_GPT, 72, 3072, 32, 1024, 50257, "Megatron-LM / Merak paper, GPT-8.3B", 0, 0, 0},
    {"gpt-20b", MK_FAMILY_GPT, 44, 6144, 64, 1024, 50257, "Merak paper, GPT-20B", 0, 0, 0},
    {"gpt-175b", MK_FAMILY_GPT, 96, 12288, 96, 2048, 50257, "GPT-3 175B", 0, 0, 0},
    {"bert-large", MK_FAMILY_BERT, 24, 1024, 16, 512, 30522, "BERT-Large (encoder)", 0, 0, 0},
    {"llama-tiny", MK_FAMILY_LLAMA, 4, 64, 4, 64, 256, "4 blocks, hidden 64, 2 KV heads: for tests", 2, 192,
     10000},
    {"llama-2-7b", MK_FAMILY_LLAMA, 32, 4096, 32, 4096, 32000, "Llama 2 7B", 32, 11008, 10000},
    {"llama-2-13b", MK_FAMILY_LLAMA, 40, 5120, 40, 4096, 32000, "Llama 2 13B", 40, 13824, 10000},
    {"llama-2-70b", MK_FAMILY_LLAMA, 80, 8192, 64, 4096, 32000, "Llama 2 70B (GQA, 8 KV heads)", 8, 28672,
     10000},
    {"llama-3-8b", MK_FAMILY_LLAMA, 32, 4096, 32, 8192, 128256, "Llama 3 8B (GQA, 8 KV heads)", 8, 14336,
     500000},
    {"llama-3-70b", MK_FAMILY_LLAMA, 80, 8192, 64, 8192, 128256, "Llama 3 70B (GQA, 8 KV heads)", 8, 28672,
     500000},
    {"llama-3.1-405b", MK_FAMILY_LLAMA, 126, 16384, 128, 131072, 128256, "Llama 3.1 405B (GQA, 8 KV heads)", 8,
     53248, 500000},
    {"moe-tiny", MK_FAMILY_LLAMA, 4, 64, 4, 64, 256, "llama-tiny with 4 SwiGLU experts of 128, top-2: for tests",
     2, 128, 10000},
    {"mixtral-8x7b", MK_FAMILY_LLAMA, 32, 4096, 32, 32768, 32000, "Mixtral 8x7B (8 experts, top-2)", 8, 14336,
     1e6},
    {"mixtral-8x22b", MK_FAMILY_LLAMA, 56, 6144, 48, 65536, 32768, "Mixtral 8x22B (8 experts, top-2)", 8, 16384,
     1e6},
    {"deepseek-moe-16b", MK_FAMILY_LLAMA, 28, 2048, 16, 4096, 102400,
     "DeepSeek-MoE 16B (64 experts of 1408, top-6, a shared expert)", 16, 10944, 10000},
    {"deepseek-v3", MK_FAMILY_LLAMA, 61, 7168, 128, 4096, 129280,
     "DeepSeek-V3 671B (MLA, 256 experts of 2048, top-8, a shared expert)", 128, 18432, 10000},
    {"deepseek-tiny", MK_FAMILY_LLAMA, 4, 64, 4, 64, 256, "deepseek-v3's shape in small (MLA, 8 experts): for tests",
     4, 192, 10000},
};

/* The multi-head latent attention of the MLA presets: q and kv latents,
 * q/k head without and with RoPE, v head (DeepSeek-V3's config.json). */
static const struct {
    const char *name;
    int q_lora, kv_lora, qk, rope, v;
} mk_mla_presets[] = {
    {"deepseek-v3", 1536, 512, 128, 64, 128},
    {"deepseek-tiny", 32, 16, 16, 8, 16},
};

static void mla_preset(const char *name, mk_model_config_t *cfg)
{
    for (size_t i = 0; i < sizeof mk_mla_presets / sizeof *mk_mla_presets; i++)
        if (!strcmp(name, mk_mla_presets[i].name)) {
            cfg->q_lora_rank = mk_mla_presets[i].q_lora, cfg->kv_lora_rank = mk_mla_presets[i].kv_lora;
            cfg->qk_head_dim = mk_mla_presets[i].qk, cfg->qk_pos_emb_head_dim = mk_mla_presets[i].rope;
            cfg->v_head_dim = mk_mla_presets[i].v;
            cfg->moe_router_bias = 1; /* noaux_tc's e_score_correction_bias */
            /* DeepSeek-V3's config.json: sigmoid scores, routed_scaling_factor 2.5, 8 groups, top 4 of them;
               the tiny one: 2 groups of 4 experts, the best 1 */
            cfg->moe_score_sigmoid = 1, cfg->moe_topk_scale = 2.5;
            int v3 = !strcmp(name, "deepseek-v3");
            cfg->moe_groups = v3 ? 8 : 2, cfg->moe_group_topk = v3 ? 4 : 1;
        }
}

/* The experts of the MoE presets (the sources on top); the first block
 * of DeepSeek-MoE is dense. */
typedef struct {
    const char *name;
    int experts, topk, moe_ffn, shared_ffn, first_dense, pre_softmax;
    double aux_coeff, norm_eps;
} mk_moe_preset_t;

static const mk_moe_preset_t mk_moe_presets[] = {
    {"moe-tiny", 4, 2, 128, 0, 0, 0, 0.01, 1e-5},
    {"mixtral-8x7b", 8, 2, 14336, 0, 0, 0, 0.02, 1e-5},
    {"mixtral-8x22b", 8, 2, 16384, 0, 0, 0, 0.001, 1e-5},
    {"deepseek-moe-16b", 64, 6, 1408, 2816, 1, 1, 0.001, 1e-6},
    /* DeepSeek-V3: sigmoid scores renormalised over the top 8 (norm_topk_prob), a sequence-wise balance
       loss of 1e-4 (arXiv:2412.19437, 4.2) beside the bias */
    {"deepseek-v3", 256, 8, 2048, 2048, 3, 0, 0.0001, 1e-6},
    {"deepseek-tiny", 8, 2, 32, 32, 1, 0, 0.0001, 1e-6},
};

static void moe_preset(const char *name, mk_model_config_t *cfg)
{
    for (size_t i = 0; i < sizeof mk_moe_presets / sizeof *mk_moe_presets; i++) {
        const mk_moe_preset_t *m = &mk_moe_presets[i];
        if (strcmp(name, m->name)) continue;
        cfg->num_experts = m->experts;
        cfg->moe_topk = m->topk;
        cfg->moe_ffn = m->moe_ffn;
        cfg->moe_shared_ffn = m->shared_ffn;
        cfg->moe_first_dense = m->first_dense;
        cfg->moe_pre_softmax = m->pre_softmax;
        cfg->moe_aux_coeff = m->aux_coeff;
        cfg->norm_eps = m->norm_eps;
    }
}
#define MK_NPRESETS (sizeof mk_presets / sizeof mk_presets[0])

const char *const *mk_model_preset_names(void)
{
    static const char *names[MK_NPRESETS + 1];
    for (size_t i = 0; i < MK_NPRESETS; i++) names[i] = mk_presets[i].name;
    names[MK_NPRESETS] = NULL;
    return names;
}

const char *mk_model_preset_about(const char *name)
{
    for (size_t i = 0; i < MK_NPRESETS; i++)
        if (!strcmp(name, mk_presets[i].name)) return mk_presets[i].about;
    return "";
}

int mk_model_preset(const char *name, mk_model_config_t *cfg)
{
    for (size_t i = 0; i < MK_NPRESETS; i++) {
        const mk_preset_t *p = &mk_presets[i];
        if (strcmp(name, p->name)) continue;
        mk_model_defaults(cfg);
        mk_strlcpy(cfg->name, p->name, sizeof cfg->name);
        cfg->family = p->family;
        cfg->num_layers = p->layers;
        cfg->hidden = p->hidden;
        cfg->heads = p->heads;
        cfg->kv_heads = p->kv_heads ? p->kv_heads : p->heads;
        cfg->seq = p->seq;
        cfg->vocab = p->vocab;
        cfg->ffn = p->ffn ? p->ffn : 4 * p->hidden;
        if (p->family == MK_FAMILY_LLAMA) {
            mk_model_llama_arch(cfg);
            cfg->rope_theta = p->rope_theta;
        }
        moe_preset(name, cfg);
        mla_preset(name, cfg);
        return 0;
    }
    return mk_error_set("unknown model '%s' (see 'merak models'; or give a path to a .json description)", name);
}

void mk_model_overrides_init(mk_model_overrides_t *ov)
{
    ov->num_layers = ov->hidden = ov->heads = ov->seq = ov->vocab = ov->ffn = -1;
    ov->group_query_attention = ov->kv_heads = ov->kv_channels = -1;
    ov->norm = ov->swiglu = ov->pos = ov->untied = ov->bias = ov->qkv_bias = ov->qk_norm = ov->window = -1;
    ov->mla = ov->q_lora_rank = ov->kv_lora_rank = ov->qk_head_dim = ov->qk_pos_emb_head_dim = ov->v_head_dim = -1;
    ov->mtp_layers = ov->max_pos = -1;
    ov->attention_dropout = ov->hidden_dropout = -1;
    ov->rope_theta = ov->norm_eps = ov->rope_scaling_factor = -1;
    ov->use_rope_scaling = -1;
    ov->num_experts = ov->moe_topk = ov->moe_ffn = ov->moe_shared_ffn = ov->moe_pre_softmax = -1;
    ov->moe_shared_gate = ov->moe_router_bias = -1;
    ov->moe_score_sigmoid = ov->moe_groups = ov->moe_group_topk = -1, ov->moe_topk_scale = -1;
    ov->moe_layer_freq = ov->moe_first_dense = ov->moe_pattern_len = -1;
    ov->moe_aux_coeff = ov->moe_capacity = -1;
}

/* How validation names a model's fields: by their flags (the command
 * line), or as FILE: OBJ.field when they came from a file (a plan's
 * "model" object), so that a message points where the value was typed. */
typedef struct {
    const char *file, *obj;  /* file NULL: flags */
    char buf[3][96];         /* up to three names in one message */
} names_t;

enum { F_LAYERS, F_HIDDEN, F_HEADS, F_SEQ, F_VOCAB, F_FFN, F_KV, F_ROPE, F_NORM_EPS, F_EXPERTS, F_TOPK, F_MOE_FFN,
       F_MOE_SHARED, F_MOE_FREQ, F_MOE_AUX, F_MOE_CAP, F_KV_CHANNELS, F_COUNT };
static const char *const field_names[F_COUNT][2] = {
    {"--num-layers", "num_layers"}, {"--hidden-size", "hidden_size"},
    {"--num-attention-heads", "num_attention_heads"}, {"--seq-length", "seq_length"},
    {"--vocab-size", "vocab_size"}, {"--ffn-hidden-size", "ffn_hidden_size"},
    {"--num-query-groups", "num_query_groups"}, {"--rotary-base", "rotary_base"},
    {"--norm-epsilon", "norm_epsilon"}, {"--num-experts", "num_experts"},
    {"--moe-router-topk", "moe_router_topk"}, {"--moe-ffn-hidden-size", "moe_ffn_hidden_size"},
    {"--moe-shared-expert-intermediate-size", "moe_shared_expert_intermediate_size"},
    {"--moe-layer-freq", "moe_layer_freq"}, {"--moe-aux-loss-coeff", "moe_aux_loss_coeff"},
    {"--moe-expert-capacity-factor", "moe_expert_capacity_factor"}, {"--kv-channels", "kv_channels"}};

/* Field f's name in message slot (0-2). */
static const char *nm(names_t *n, int f, int slot)
{
    if (!n->file) return field_names[f][0];
    snprintf(n->buf[slot], sizeof n->buf[slot], "%s%s%s", n->obj ? n->obj : "", n->obj ? "." : "",
             field_names[f][1]);
    return n->buf[slot];
}

/* One model size against its range [1, max]. */
static int check_size(names_t *n, int f, int v, int max)
{
    if (v < 1) return mk_error_set("%s must be >= 1", nm(n, f, 0));
    return mk_limit_check(nm(n, f, 0), v, max);
}

/* A real number in (0, max]. */
static int check_real(names_t *n, int f, double v, double max)
{
    if (!(v > 0) || v > max) return mk_error_set("%s must be in (0, %g], got %g", nm(n, f, 0), max, v);
    return 0;
}

/* The head dim: hidden / heads, or kv_channels with the queries' width
 * heads * d within the hidden size's limit. */
static int validate_heads(names_t *n, const mk_model_config_t *c)
{
    if (!c->kv_channels) {
        if (c->hidden % c->heads)
            return mk_error_set("%s %d does not divide %s %d", nm(n, F_HEADS, 0), c->heads, nm(n, F_HIDDEN, 1),
                                c->hidden);
        return 0;
    }
    if (check_size(n, F_KV_CHANNELS, c->kv_channels, MK_MAX_HEAD_DIM) < 0) return -1;
    if ((int64_t)c->heads * c->kv_channels > MK_MAX_HIDDEN)
        return mk_error_set("%s %d x %s %d: the queries' width is above %d", nm(n, F_HEADS, 0), c->heads,
                            nm(n, F_KV_CHANNELS, 1), c->kv_channels, MK_MAX_HIDDEN);
    return 0;
}

/* Multi-head latent attention: a q latent (merak has no plain-q MLA), the
 * sizes in range, RoPE on an even part, no K/V groups, no other attention
 * variant on top. */
static int validate_mla(const mk_model_config_t *c)
{
    if (!c->kv_lora_rank) return 0;
    const int v[] = {c->q_lora_rank, c->kv_lora_rank, c->qk_head_dim, c->qk_pos_emb_head_dim, c->v_head_dim};
    const int max[] = {MK_MAX_HIDDEN, MK_MAX_HIDDEN, MK_MAX_HEAD_DIM, MK_MAX_HEAD_DIM, MK_MAX_HEAD_DIM};
    static const char *const name[] = {"--q-lora-rank", "--kv-lora-rank", "--qk-head-dim", "--qk-pos-emb-head-dim",
                                       "--v-head-dim"};
    if (c->q_lora_rank < 1)
        return mk_error_set("model '%s': multi-latent attention without a q latent (Megatron's default, "
                            "DeepSeek-V2-Lite) is not modelled: give --q-lora-rank", c->name);
    for (int i = 0; i < 5; i++)
        if (v[i] < 1 || v[i] > max[i]) return mk_error_set("%s must be from 1 to %d, got %d", name[i], max[i], v[i]);
    if ((int64_t)c->heads * (2 * (c->qk_head_dim + c->qk_pos_emb_head_dim) + c->v_head_dim) > MK_MAX_WIDTH)
        return mk_error_set("model '%s': %d heads of MLA's q, k and v are wider than %d", c->name, c->heads,
                            MK_MAX_WIDTH);
    if (c->pos != MK_POS_ROPE || c->qk_pos_emb_head_dim % 2 || c->family == MK_FAMILY_BERT)
        return mk_error_set("model '%s': multi-latent attention is a causal decoder's with rotary positions on an "
                            "even --qk-pos-emb-head-dim", c->name);
    if (c->kv_heads != c->heads || c->kv_channels || c->qk_norm || c->qkv_bias)
        return mk_error_set("model '%s': multi-latent attention has no K/V groups, --kv-channels, --qk-layernorm "
                            "or --add-qkv-bias", c->name);
    return 0;
}

/* GQA groups, the rotary base and the norm epsilon. */
static int validate_arch(names_t *n, const mk_model_config_t *c)
{
    if (check_size(n, F_KV, c->kv_heads, MK_MAX_HEADS) < 0) return -1;
    if (c->heads % c->kv_heads)
        return mk_error_set("%s %d does not divide %s %d", nm(n, F_KV, 0), c->kv_heads, nm(n, F_HEADS, 1), c->heads);
    if (check_real(n, F_ROPE, c->rope_theta, MK_MAX_ROPE_THETA) < 0) return -1;
    if (c->pos == MK_POS_ROPE && mk_model_head_dim(c) % 2)
        return mk_error_set("model '%s': rotary positions turn pairs: the head dim %d is odd", c->name,
                            mk_model_head_dim(c));
    if (c->window < 0 || (c->window > 0 && c->family == MK_FAMILY_BERT))
        return mk_error_set("model '%s': a sliding attention window is for causal decoders (got %d)", c->name,
                            c->window);
    if (c->window > MK_MAX_SEQ) return mk_error_set("model '%s': the attention window %d is above %d", c->name,
                                                   c->window, MK_MAX_SEQ);
    if (c->rope_factor && c->pos != MK_POS_ROPE)
        return mk_error_set("model '%s': RoPE scaling needs rotary positions (--position-embedding-type rope)",
                            c->name);
    if (c->rope_factor && !(c->rope_factor >= 1 && c->rope_factor <= 1e6 && c->rope_low_freq > 0 &&
                            c->rope_high_freq > c->rope_low_freq && c->rope_high_freq <= 1e6 &&
                            c->rope_orig_max_pos >= 1 && c->rope_orig_max_pos <= MK_MAX_SEQ))
        return mk_error_set("model '%s': rope scaling needs factor 1 to 1e6, 0 < low_freq_factor < high_freq_factor "
                            "<= 1e6 and an original context of 1 to %d", c->name, MK_MAX_SEQ);
    return check_real(n, F_NORM_EPS, c->norm_eps, MK_MAX_NORM_EPS);
}

/* The experts: E and the widths in range, 1 <= k <= E, the MoE blocks
 * inside the model, the coefficients in range. */
static int validate_moe(names_t *n, const mk_model_config_t *c)
{
    if (c->num_experts < 0) return mk_error_set("%s must be >= 0, got %d", nm(n, F_EXPERTS, 0), c->num_experts);
    if (!c->num_experts) return 0;
    if (mk_limit_check(nm(n, F_EXPERTS, 0), c->num_experts, MK_MAX_EXPERTS) < 0) return -1;
    if (c->moe_topk < 1) return mk_error_set("%s must be >= 1, got %d", nm(n, F_TOPK, 0), c->moe_topk);
    if (c->moe_topk > c->num_experts)
        return mk_error_set("%s %d is above %s %d", nm(n, F_TOPK, 0), c->moe_topk, nm(n, F_EXPERTS, 1),
                            c->num_experts);
    if (check_size(n, F_MOE_FFN, c->moe_ffn, MK_MAX_MOE_FFN) < 0) return -1;
    if (c->moe_shared_ffn < 0) return mk_error_set("%s must be >= 0", nm(n, F_MOE_SHARED, 0));
    if (mk_limit_check(nm(n, F_MOE_SHARED, 0), c->moe_shared_ffn, MK_MAX_MOE_FFN) < 0) return -1;
    if (c->moe_shared_gate && !c->moe_shared_ffn)
        return mk_error_set("--moe-shared-expert-gate needs a shared expert (%s)", nm(n, F_MOE_SHARED, 0));
    if (c->moe_layer_freq < 1 || c->moe_layer_freq > c->num_layers)
        return mk_error_set("%s %d must be from 1 to the %d blocks", nm(n, F_MOE_FREQ, 0), c->moe_layer_freq,
                            c->num_layers);
    if (c->moe_first_dense < 0 || c->moe_first_dense >= c->num_layers)
        return mk_error_set("%s: %d dense blocks leave no MoE block of %d", nm(n, F_MOE_FREQ, 0),
                            c->moe_first_dense, c->num_layers);
    if (c->moe_aux_coeff < 0 || c->moe_aux_coeff > MK_MAX_MOE_AUX_COEFF)
        return mk_error_set("%s must be in [0, %g], got %g", nm(n, F_MOE_AUX, 0), MK_MAX_MOE_AUX_COEFF,
                            c->moe_aux_coeff);
    if (c->moe_topk_scale < 0 || c->moe_topk_scale > MK_MAX_MOE_CAPACITY)
        return mk_error_set("the router's scaling factor must be 0 (1) to %g, got %g", MK_MAX_MOE_CAPACITY,
                            c->moe_topk_scale);
    if (c->moe_groups < 0 || c->moe_groups > c->num_experts || (c->moe_groups && c->num_experts % c->moe_groups) ||
        (c->moe_groups && (c->num_experts / c->moe_groups < 2 || c->moe_group_topk < 1 ||
                           c->moe_group_topk > c->moe_groups ||
                           (int64_t)c->moe_group_topk * (c->num_experts / c->moe_groups) < c->moe_topk)))
        return mk_error_set("the router's %d groups (top %d) must divide the %d experts in groups of 2 or more "
                            "holding the top %d", c->moe_groups, c->moe_group_topk, c->num_experts, c->moe_topk);
    if (c->moe_capacity < 0 || c->moe_capacity > MK_MAX_MOE_CAPACITY)
        return mk_error_set("%s must be 0 (dropless) to %g, got %g", nm(n, F_MOE_CAP, 0), MK_MAX_MOE_CAPACITY,
                            c->moe_capacity);
    return 0;
}

static int validate(names_t *n, const mk_model_config_t *c)
{
    if (c->family == MK_FAMILY_CUSTOM) {
        if (c->seq < 1) return mk_error_set("model '%s': seq_length must be >= 1", c->name);
        return mk_limit_check(nm(n, F_SEQ, 0), c->seq, MK_MAX_SEQ);
    }
    static const int sizes[] = {F_LAYERS, F_HIDDEN, F_HEADS, F_SEQ, F_VOCAB, F_FFN};
    const int vals[] = {c->num_layers, c->hidden, c->heads, c->seq, c->vocab, c->ffn};
    const int max[] = {MK_MAX_LAYERS, MK_MAX_HIDDEN, MK_MAX_HEADS, MK_MAX_SEQ, MK_MAX_VOCAB, MK_MAX_FFN};
    for (int i = 0; i < 6; i++)
        if (check_size(n, sizes[i], vals[i], max[i]) < 0) return -1;
    if (validate_heads(n, c) < 0 || validate_arch(n, c) < 0 || validate_mla(c) < 0) return -1;
    if (c->mtp_layers < 0 || c->mtp_layers > MK_MAX_MTP_LAYERS || (c->mtp_layers && c->family == MK_FAMILY_BERT))
        return mk_error_set("--mtp-num-layers %d: a decoder's 0 to %d", c->mtp_layers, MK_MAX_MTP_LAYERS);
    return validate_moe(n, c);
}

int mk_model_validate(const mk_model_config_t *c) { return mk_model_validate_in(c, NULL, NULL); }

int mk_model_validate_in(const mk_model_config_t *c, const char *file, const char *obj)
{
    names_t n = {file, obj, {""}};
    if (validate(&n, c) == 0) return 0;
    if (!file) return -1;
    char why[1024];
    mk_strlcpy(why, mk_error_last(), sizeof why);
    return mk_error_set("%s: %s", file, why);
}

int mk_model_check_tp(const mk_model_config_t *c, int tp)
{
    if (tp < 1) return mk_error_set("tensor parallel size must be >= 1, got %d", tp);
    if (mk_limit_check("tensor parallel size", tp, MK_MAX_TP) < 0) return -1;
    if (c->family == MK_FAMILY_CUSTOM) return 0;
    if (c->heads % tp)
        return mk_error_set("tensor parallel size %d does not divide the %d attention heads",
                            tp, c->heads);
    if (c->kv_heads % tp)
        return mk_error_set("tensor parallel size %d does not divide the %d KV heads (query groups)", tp,
                            c->kv_heads);
    if (c->ffn % tp)
        return mk_error_set("tensor parallel size %d does not divide the FFN width %d", tp, c->ffn);
    return 0;
}

/* Megatron-LM's default MLP width: 4h, or 2/3 of it rounded down to a
 * multiple of 64 for SwiGLU (the same parameters in three matrices). */
static int default_ffn(const mk_model_config_t *c)
{
    if (!c->swiglu) return 4 * c->hidden;
    int f = (int)((4.0 * c->hidden * 2 / 3) / 64) * 64;
    return f > 0 ? f : 64;
}

/* --multi-latent-attention and its dims (Megatron's defaults for those not
 * given; a model with MLA already keeps its own). */
static int apply_mla(const mk_model_overrides_t *ov, mk_model_config_t *c)
{
    int dims = ov->q_lora_rank >= 0 || ov->kv_lora_rank >= 0 || ov->qk_head_dim >= 0 || ov->qk_pos_emb_head_dim >= 0 ||
               ov->v_head_dim >= 0;
    if (ov->mla != 1 && !c->kv_lora_rank) {
        if (dims)
            return mk_error_set("--q-lora-rank, --kv-lora-rank and the MLA head dims need --multi-latent-attention");
        return 0;
    }
    if (!c->kv_lora_rank) /* megatron/training/arguments.py's _add_mla_args defaults */
        c->q_lora_rank = 0, c->kv_lora_rank = 32, c->qk_head_dim = 128, c->qk_pos_emb_head_dim = 64,
        c->v_head_dim = 128;
    if (ov->q_lora_rank >= 0) c->q_lora_rank = ov->q_lora_rank;
    if (ov->kv_lora_rank >= 0) c->kv_lora_rank = ov->kv_lora_rank;
    if (ov->qk_head_dim >= 0) c->qk_head_dim = ov->qk_head_dim;
    if (ov->qk_pos_emb_head_dim >= 0) c->qk_pos_emb_head_dim = ov->qk_pos_emb_head_dim;
    if (ov->v_head_dim >= 0) c->v_head_dim = ov->v_head_dim;
    if (ov->group_query_attention == 1) return mk_error_set("multi-latent attention has no K/V groups");
    c->kv_heads = c->heads; /* every head its own k and v from the latent */
    return 0;
}

/* The architecture flags; --num-query-groups only means something with
 * --group-query-attention (as in Megatron-LM, whose default is 1 group). */
static int apply_arch(const mk_model_overrides_t *ov, mk_model_config_t *c)
{
    if (ov->kv_heads > 0 && ov->group_query_attention != 1)
        return mk_error_set("--num-query-groups needs --group-query-attention");
    if (ov->group_query_attention == 1) c->kv_heads = ov->kv_heads > 0 ? ov->kv_heads : 1;
    if (ov->kv_channels >= 0) c->kv_channels = ov->kv_channels;
    if (ov->norm >= 0) c->norm = (mk_norm_kind_t)ov->norm;
    if (ov->swiglu >= 0) c->swiglu = ov->swiglu;
    if (ov->pos >= 0) c->pos = (mk_pos_kind_t)ov->pos;
    if (ov->untied >= 0) c->untied = ov->untied;
    if (ov->bias >= 0) c->bias = ov->bias;
    if (ov->qkv_bias >= 0) c->qkv_bias = ov->qkv_bias;
    if (ov->qk_norm >= 0) c->qk_norm = ov->qk_norm;
    if (ov->window >= 0) c->window = ov->window;
    if (ov->mtp_layers >= 0) c->mtp_layers = ov->mtp_layers;
    if (apply_mla(ov, c) < 0) return -1;
    if (ov->attention_dropout >= 0 || ov->hidden_dropout >= 0) { /* Megatron's default for one not given: 0.1 */
        double at = ov->attention_dropout >= 0 ? ov->attention_dropout : 0.1;
        double hd = ov->hidden_dropout >= 0 ? ov->hidden_dropout : 0.1;
        if ((at == 0) != (hd == 0))
            return mk_error_set("--attention-dropout %g and --hidden-dropout %g: merak models dropout everywhere or "
                                "nowhere (both 0, or both above 0)", at, hd);
        c->no_dropout = at == 0;
    }
    if (ov->rope_theta >= 0) c->rope_theta = ov->rope_theta;
    if (ov->norm_eps >= 0) c->norm_eps = ov->norm_eps;
    if (ov->rope_scaling_factor >= 0 && ov->use_rope_scaling != 1)
        return mk_error_set("--rope-scaling-factor needs --use-rope-scaling");
    if (ov->use_rope_scaling == 1) { /* megatron/core/models/common/embeddings/rotary_pos_embedding.py's */
        c->rope_factor = ov->rope_scaling_factor >= 0 ? ov->rope_scaling_factor : 8.0;
        c->rope_low_freq = 1, c->rope_high_freq = 4, c->rope_orig_max_pos = 8192;
    }
    return 0;
}

static int arch_given(const mk_model_overrides_t *ov)
{
    return ov->group_query_attention >= 0 || ov->kv_heads >= 0 || ov->kv_channels >= 0 || ov->norm >= 0 ||
           ov->swiglu >= 0 || ov->pos >= 0 || ov->untied >= 0 || ov->bias >= 0 || ov->qkv_bias >= 0 ||
           ov->qk_norm >= 0 || ov->window >= 0 || ov->rope_theta >= 0 || ov->norm_eps >= 0 ||
           ov->use_rope_scaling >= 0 || ov->rope_scaling_factor >= 0 || ov->mla >= 0 || ov->q_lora_rank >= 0 ||
           ov->kv_lora_rank >= 0 || ov->qk_head_dim >= 0 || ov->qk_pos_emb_head_dim >= 0 || ov->v_head_dim >= 0 ||
           ov->mtp_layers >= 0 ||
           ov->attention_dropout >= 0 || ov->hidden_dropout >= 0;
}

static int moe_given(const mk_model_overrides_t *ov)
{
    return ov->moe_topk >= 0 || ov->moe_ffn >= 0 || ov->moe_shared_ffn >= 0 || ov->moe_pre_softmax >= 0 ||
           ov->moe_shared_gate >= 0 || ov->moe_router_bias >= 0 || ov->moe_score_sigmoid >= 0 ||
           ov->moe_groups >= 0 || ov->moe_group_topk >= 0 || ov->moe_topk_scale >= 0 ||
           ov->moe_layer_freq >= 0 || ov->moe_aux_coeff >= 0 || ov->moe_capacity >= 0;
}

/* The MoE flags, after the sizes (an expert width not given follows the
 * final ffn).  MoE options on a model without experts are refused. */
static int apply_moe(const mk_model_overrides_t *ov, mk_model_config_t *c)
{
    if (ov->num_experts >= 0) {
        if (ov->num_experts > 0 && !c->num_experts) c->moe_ffn = 0; /* a dense model gets experts */
        c->num_experts = ov->num_experts;
    }
    if (!c->num_experts) {
        if (moe_given(ov)) return mk_error_set("MoE options need experts: the model has none (give --num-experts)");
        return 0;
    }
    if (ov->moe_topk >= 0) c->moe_topk = ov->moe_topk;
    if (ov->moe_ffn >= 0) c->moe_ffn = ov->moe_ffn;
    if (!c->moe_ffn) c->moe_ffn = c->ffn;
    if (ov->moe_shared_ffn >= 0) c->moe_shared_ffn = ov->moe_shared_ffn;
    if (ov->moe_pre_softmax >= 0) c->moe_pre_softmax = ov->moe_pre_softmax;
    if (ov->moe_shared_gate >= 0) c->moe_shared_gate = ov->moe_shared_gate;
    if (ov->moe_router_bias >= 0) c->moe_router_bias = ov->moe_router_bias;
    if (ov->moe_score_sigmoid >= 0) c->moe_score_sigmoid = ov->moe_score_sigmoid;
    if (ov->moe_topk_scale >= 0) c->moe_topk_scale = ov->moe_topk_scale;
    if (ov->moe_groups >= 0) c->moe_groups = ov->moe_groups > 1 ? ov->moe_groups : 0; /* 1: no limit */
    if (ov->moe_group_topk >= 0) c->moe_group_topk = ov->moe_group_topk;
    if (!c->moe_groups) c->moe_group_topk = 0;
    if (ov->moe_aux_coeff >= 0) c->moe_aux_coeff = ov->moe_aux_coeff;
    if (ov->moe_capacity >= 0) c->moe_capacity = ov->moe_capacity;
    if (ov->moe_layer_freq >= 0) {
        if (ov->moe_pattern_len > 0 && ov->moe_pattern_len != c->num_layers)
            return mk_error_set("--moe-layer-freq: the pattern has %d blocks, the model %d", ov->moe_pattern_len,
                                c->num_layers);
        c->moe_layer_freq = ov->moe_layer_freq;
        c->moe_first_dense = ov->moe_first_dense;
    }
    return 0;
}

static int is_json_path(const char *s)
{
    size_t n = strlen(s);
    return strchr(s, '/') != NULL || (n > 5 && !strcasecmp(s + n - 5, ".json"));
}

/* A Hugging Face config: its sizes and architecture stand; --seq-length
 * (what the config does not say) may change the sequence. */
static int resolve_hf(const char *model, const mk_model_overrides_t *ov, mk_model_config_t *cfg)
{
    if (mk_model_hf_load(model, cfg) < 0) return -1;
    if (ov->num_layers > 0 || ov->hidden > 0 || ov->heads > 0 || ov->vocab > 0 || ov->ffn > 0 || arch_given(ov) ||
        moe_given(ov) || ov->num_experts >= 0)
        return mk_error_set("model flags cannot change a Hugging Face config (%s) but --seq-length", model);
    if (ov->seq > 0) cfg->seq = ov->seq;
    return mk_model_validate(cfg);
}

/* Megatron-LM's --max-position-embeddings: at least the sequence (its own
 * rule); a learned position table has exactly seq rows here, so a larger
 * one would be rows merak does not model. */
static int check_max_pos(const mk_model_overrides_t *ov, const mk_model_config_t *c)
{
    if (ov->max_pos <= 0) return 0;
    if (ov->max_pos < c->seq)
        return mk_error_set("--max-position-embeddings %d is below the sequence length %d", ov->max_pos, c->seq);
    if (ov->max_pos > c->seq && c->pos == MK_POS_LEARNED)
        return mk_error_set("--max-position-embeddings %d: merak's learned position table has --seq-length rows "
                            "(%d); give %d", ov->max_pos, c->seq, c->seq);
    return 0;
}

static int resolve(const char *model, const mk_model_overrides_t *ov, mk_model_config_t *cfg);

int mk_model_resolve(const char *model, const mk_model_overrides_t *ov, mk_model_config_t *cfg)
{
    return resolve(model, ov, cfg) < 0 ? -1 : check_max_pos(ov, cfg);
}

/* The model (preset, HF config or JSON description) with the flags on it, validated. */
static int resolve(const char *model, const mk_model_overrides_t *ov, mk_model_config_t *cfg)
{
    /* a preset's name is the preset, whatever a directory of that name holds */
    if (!mk_model_preset_about(model)[0] && mk_model_hf_is(model)) return resolve_hf(model, ov, cfg);
    if (is_json_path(model)) {
        char found[sizeof cfg->json_path]; /* the path kept must fit there */
        if (mk_graph_json_probe(mk_data_path(model, found, sizeof found), cfg) < 0) return -1;
        if (ov->num_layers > 0 || ov->hidden > 0 || ov->heads > 0 || ov->vocab > 0 || ov->ffn > 0)
            return mk_error_set("model size flags cannot change a JSON model description (%s)", model);
        if (arch_given(ov) || moe_given(ov) || ov->num_experts >= 0)
            return mk_error_set("architecture flags cannot change a JSON model description (%s): its ops say it",
                                model);
        if (ov->seq > 0) cfg->seq = ov->seq;
        return mk_model_validate(cfg);
    }
    if (mk_model_preset(model, cfg) < 0) return -1;
    if (ov->num_layers > 0) cfg->num_layers = ov->num_layers;
    if (ov->heads > 0) {
        if (cfg->kv_heads == cfg->heads) cfg->kv_heads = ov->heads; /* MHA stays MHA */
        cfg->heads = ov->heads;
    }
    if (ov->seq > 0) cfg->seq = ov->seq;
    if (ov->vocab > 0) cfg->vocab = ov->vocab;
    if (apply_arch(ov, cfg) < 0) return -1;
    if (ov->hidden > 0 || ov->swiglu == 1) {
        if (ov->hidden > 0) cfg->hidden = ov->hidden;
        cfg->ffn = default_ffn(cfg);
    }
    if (ov->ffn > 0) cfg->ffn = ov->ffn;
    if (apply_moe(ov, cfg) < 0) return -1;
    /* Megatron's default --kv-channels is h/a: given so, it is the same model */
    if (cfg->kv_channels && cfg->heads > 0 && cfg->hidden % cfg->heads == 0 &&
        cfg->kv_channels == cfg->hidden / cfg->heads)
        cfg->kv_channels = 0;
    return mk_model_validate(cfg);
}
