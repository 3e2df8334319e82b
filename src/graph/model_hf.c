/* Hugging Face `config.json` (transformers' PretrainedConfig as the hub
 * publishes it) -> a model configuration, for --model PATH where PATH is
 * such a file or a directory holding one (issue 36).
 *
 * Families by model_type: gpt2 (GPT2LMHeadModel: LayerNorm, GELU MLP of
 * n_inner or 4h, learned positions, the head tied to the embedding),
 * llama (Llama 1/2/3/3.1/3.2), mistral, mixtral and qwen2 (RMSNorm,
 * SwiGLU, rotary positions, GQA; mixtral's sparse MoE: num_local_experts
 * experts of intermediate_size, top num_experts_per_tok, renormalised;
 * qwen2's biases on the q/k/v projections, Megatron's --add-qkv-bias;
 * qwen3's RMSNorm of each q and k head, Megatron's --qk-layernorm;
 * qwen3_moe's num_experts of moe_intermediate_size, top
 * num_experts_per_tok, renormalised as norm_topk_prob says, the blocks of
 * mlp_only_layers dense; qwen2_moe's, with qwen2's biases and a shared
 * expert gated by a sigmoid: Megatron's --moe-shared-expert-gate).  Every key
 * is known: those that shape the cost are read, those that do not
 * (tokenizer ids, dtype, dropout, initialisation, cache, router loss
 * weights, ...) are listed and ignored, and any other key, a missing
 * required one, or a value merak cannot honour (attention or MLP biases
 * in a Llama, an odd head_dim, another activation or
 * RoPE scaling type, router noise) fails naming the key.  A sliding window
 * and Llama 3.1's rope_scaling are kept in the configuration (window,
 * rope_*): the validator refuses a window below the sequence; the
 * executor's RoPE scales the frequencies (merak/rope.h).
 *
 * The training sequence is not in a config.json (max_position_embeddings
 * is the longest the model supports): it is min(max_position_embeddings,
 * 2048), torchtitan's training.seq_len default, until --seq-length says. */
#include "config.h"
#include "graph/model_hf.h"
#include "merak/jsonio.h"
#include "merak/limits.h"
#include "merak/readfile.h"

#include <jansson.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MK_HF_SEQ 2048 /* torchtitan's [training] seq_len default (torchtitan/config/job_config.py) */

/* Keys that do not change what training costs, in every family. */
#define HF_IGNORED                                                                                         \
    "architectures", "model_type", "_name_or_path", "transformers_version", "torch_dtype", "use_cache",   \
        "bos_token_id", "eos_token_id", "pad_token_id", "initializer_range", "return_dict",                \
        "output_hidden_states", "output_attentions", "torchscript", "tie_encoder_decoder", "is_decoder",   \
        "id2label", "label2id", "problem_type", "tokenizer_class"

static const char *const gpt2_keys[] = {
    "n_layer", "n_embd", "n_head", "n_positions", "vocab_size", "n_inner", "activation_function",
    "layer_norm_epsilon", "tie_word_embeddings", "n_ctx", "attn_pdrop", "embd_pdrop", "resid_pdrop",
    "summary_activation", "summary_first_dropout", "summary_proj_to_labels", "summary_type",
    "summary_use_proj", "task_specific_params", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
    "reorder_and_upcast_attn", HF_IGNORED, NULL};

#define LLAMA_KEYS                                                                                         \
    "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",   \
    "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta", "tie_word_embeddings", "hidden_act", \
    "attention_bias", "mlp_bias", "head_dim", "rope_scaling", "sliding_window", "num_local_experts",         \
    "num_experts_per_tok", "router_jitter_noise", "pretraining_tp", "attention_dropout", "output_router_logits", \
    "router_aux_loss_coef", "max_window_layers", "use_sliding_window", HF_IGNORED
static const char *const llama_keys[] = {LLAMA_KEYS, NULL};
/* Qwen3MoeConfig's experts (num_experts_per_tok is the llama list's);
 * Qwen2MoeConfig's add the shared expert */
#define QWEN_MOE_KEYS "num_experts", "moe_intermediate_size", "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers"
static const char *const qwen3_moe_keys[] = {LLAMA_KEYS, QWEN_MOE_KEYS, NULL};
static const char *const qwen2_moe_keys[] = {LLAMA_KEYS, QWEN_MOE_KEYS, "shared_expert_intermediate_size", NULL};

/* An optional integer (absent or null: dflt). */
static int opt_int(json_t *o, const char *what, const char *key, int lo, int dflt, int *out)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return *out = dflt, 0;
    return mk_json_int(o, what, key, lo, out);
}

static int opt_num(json_t *o, const char *what, const char *key, double lo, double dflt, double *out)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return *out = dflt, 0;
    return mk_json_num(o, what, key, lo, out);
}

static int opt_bool(json_t *o, const char *what, const char *key, int dflt, int *out)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return *out = dflt, 0;
    return mk_json_bool(o, what, key, out);
}

/* A string field that must be one of the names given. */
static int want_str(json_t *o, const char *what, const char *key, const char *const *ok)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    for (int i = 0; json_is_string(v) && ok[i]; i++)
        if (!strcmp(json_string_value(v), ok[i])) return 0;
    return mk_error_set("%s: %s %s is not supported (%s%s%s)", what, key,
                        json_is_string(v) ? json_string_value(v) : "(not a string)", ok[0], ok[1] ? ", " : "",
                        ok[1] ? ok[1] : "");
}

static int load_gpt2(json_t *o, const char *what, mk_model_config_t *c)
{
    static const char *const gelu[] = {"gelu_new", "gelu", "gelu_pytorch_tanh", NULL};
    int inner, tie, npos;
    double eps;
    if (mk_json_only_keys(o, what, gpt2_keys) < 0 || mk_json_int(o, what, "n_layer", 1, &c->num_layers) < 0 ||
        mk_json_int(o, what, "n_embd", 1, &c->hidden) < 0 || mk_json_int(o, what, "n_head", 1, &c->heads) < 0 ||
        mk_json_int(o, what, "n_positions", 1, &npos) < 0 || mk_json_int(o, what, "vocab_size", 1, &c->vocab) < 0 ||
        opt_int(o, what, "n_inner", 1, 0, &inner) < 0 || want_str(o, what, "activation_function", gelu) < 0 ||
        opt_num(o, what, "layer_norm_epsilon", 0, 1e-5, &eps) < 0 ||
        opt_bool(o, what, "tie_word_embeddings", 1, &tie) < 0)
        return -1;
    if (!tie) return mk_error_set("%s: tie_word_embeddings false: GPT-2's head is its embedding", what);
    if (c->hidden % c->heads) return mk_error_set("%s: n_embd %d is not a multiple of n_head %d", what, c->hidden, c->heads);
    c->family = MK_FAMILY_GPT;
    c->kv_heads = c->heads;
    c->ffn = inner ? inner : 4 * c->hidden;
    c->norm_eps = eps;
    c->seq = npos < MK_HF_SEQ ? npos : MK_HF_SEQ;
    return 0;
}

/* rope_scaling: null, or Llama 3.1's {rope_type (or type) "llama3",
 * factor, low_freq_factor, high_freq_factor,
 * original_max_position_embeddings}, every key required. */
static int rope_scaling(json_t *o, const char *what, mk_model_config_t *c)
{
    static const char *const keys[] = {"rope_type", "type", "factor", "low_freq_factor", "high_freq_factor",
                                       "original_max_position_embeddings", NULL};
    static const char *const llama3[] = {"llama3", NULL};
    json_t *rs = json_object_get(o, "rope_scaling");
    if (!rs || json_is_null(rs)) return 0;
    char in[1200];
    snprintf(in, sizeof in, "%s: rope_scaling", what);
    if (!json_is_object(rs)) return mk_error_set("%s must be an object or null", in);
    if (mk_json_only_keys(rs, in, keys) < 0) return -1;
    if (!json_object_get(rs, "rope_type") && !json_object_get(rs, "type"))
        return mk_error_set("%s: missing field 'rope_type'", in);
    if (want_str(rs, in, "rope_type", llama3) < 0 || want_str(rs, in, "type", llama3) < 0 ||
        mk_json_num(rs, in, "factor", 1, &c->rope_factor) < 0 ||
        mk_json_num(rs, in, "low_freq_factor", 0, &c->rope_low_freq) < 0 ||
        mk_json_num(rs, in, "high_freq_factor", 0, &c->rope_high_freq) < 0 ||
        mk_json_int(rs, in, "original_max_position_embeddings", 1, &c->rope_orig_max_pos) < 0)
        return -1;
    return 0;
}

/* The attention and rotary keys: what merak's graph has not refuses the
 * model, naming the key; the window and the scaling are kept. */
static int llama_unsupported(json_t *o, const char *what, mk_model_config_t *c)
{
    int ab, mb, hd;
    if (opt_bool(o, what, "attention_bias", 0, &ab) < 0 || opt_bool(o, what, "mlp_bias", 0, &mb) < 0 ||
        opt_int(o, what, "head_dim", 1, c->qk_norm ? 128 : 0, &hd) < 0) /* Qwen3Config's default: 128 */
        return -1;
    if (ab || mb) return mk_error_set("%s: %s true: biases in a Llama's linears are not in merak's graph", what,
                                      ab ? "attention_bias" : "mlp_bias");
    if (!hd && c->hidden % c->heads)
        return mk_error_set("%s: num_attention_heads %d does not divide hidden_size %d (and no head_dim)", what,
                            c->heads, c->hidden);
    /* head_dim apart from hidden/heads: Megatron's --kv-channels (Mistral-Nemo: 5120 / 32 heads of 128) */
    c->kv_channels = hd && hd * (int64_t)c->heads != c->hidden ? hd : 0;
    json_t *sw = json_object_get(o, "sliding_window"), *use = json_object_get(o, "use_sliding_window");
    if (sw && !json_is_null(sw) && !(use && json_is_false(use)) &&
        mk_json_int(o, what, "sliding_window", 1, &c->window) < 0)
        return -1;
    return rope_scaling(o, what, c);
}

/* Qwen3MoeConfig's and Qwen2MoeConfig's experts: block i is sparse unless
 * in mlp_only_layers, every decoder_sparse_step-th; merak's blocks are its
 * first K dense then every one sparse, so the step must be 1 and
 * mlp_only_layers 0..K-1.  Qwen2-MoE's shared expert (its
 * shared_expert_intermediate_size) is gated by sigmoid(shared_expert_gate). */
static int load_qwen_moe(json_t *o, const char *what, mk_model_config_t *c)
{
    int step, norm_topk;
    if (opt_int(o, what, "shared_expert_intermediate_size", 0, 0, &c->moe_shared_ffn) < 0) return -1;
    c->moe_shared_gate = c->moe_shared_ffn > 0;
    if (mk_json_int(o, what, "num_experts", 1, &c->num_experts) < 0 ||
        mk_json_int(o, what, "num_experts_per_tok", 1, &c->moe_topk) < 0 ||
        mk_json_int(o, what, "moe_intermediate_size", 1, &c->moe_ffn) < 0 ||
        opt_bool(o, what, "norm_topk_prob", 0, &norm_topk) < 0 ||
        opt_int(o, what, "decoder_sparse_step", 1, 1, &step) < 0)
        return -1;
    if (step != 1)
        return mk_error_set("%s: decoder_sparse_step %d: merak's MoE blocks are every block after the dense ones", what,
                            step);
    json_t *dense = json_object_get(o, "mlp_only_layers");
    size_t i, n = dense && !json_is_null(dense) ? json_array_size(dense) : 0;
    if (dense && !json_is_null(dense) && !json_is_array(dense))
        return mk_error_set("%s: mlp_only_layers must be a list of block indices", what);
    for (i = 0; i < n; i++)
        if (!json_is_integer(json_array_get(dense, i)) || json_integer_value(json_array_get(dense, i)) != (json_int_t)i)
            return mk_error_set("%s: mlp_only_layers must be the first blocks 0, 1, ... in order (merak's dense "
                                "blocks lead)", what);
    c->moe_first_dense = (int)(n < (size_t)c->num_layers ? n : (size_t)c->num_layers);
    c->moe_layer_freq = 1;
    c->moe_pre_softmax = !norm_topk; /* softmax over all, top-k kept as they are unless renormalised */
    return 0;
}

static int load_llama(json_t *o, const char *what, const char *type, mk_model_config_t *c)
{
    static const char *const silu[] = {"silu", NULL};
    int npos, tie, moe = !strcmp(type, "mixtral"), qwen3_moe = !strcmp(type, "qwen3_moe");
    int qwen2_moe = !strcmp(type, "qwen2_moe");
    const char *const *keys = qwen3_moe ? qwen3_moe_keys : qwen2_moe ? qwen2_moe_keys : llama_keys;
    if (mk_json_only_keys(o, what, keys) < 0 ||
        mk_json_int(o, what, "hidden_size", 1, &c->hidden) < 0 ||
        mk_json_int(o, what, "intermediate_size", 1, &c->ffn) < 0 ||
        mk_json_int(o, what, "num_hidden_layers", 1, &c->num_layers) < 0 ||
        mk_json_int(o, what, "num_attention_heads", 1, &c->heads) < 0 ||
        opt_int(o, what, "num_key_value_heads", 1, c->heads, &c->kv_heads) < 0 ||
        mk_json_int(o, what, "vocab_size", 1, &c->vocab) < 0 ||
        mk_json_int(o, what, "max_position_embeddings", 1, &npos) < 0 ||
        opt_num(o, what, "rms_norm_eps", 0, 1e-6, &c->norm_eps) < 0 ||
        opt_num(o, what, "rope_theta", 1, 10000, &c->rope_theta) < 0 ||
        opt_bool(o, what, "tie_word_embeddings", 0, &tie) < 0 || want_str(o, what, "hidden_act", silu) < 0)
        return -1;
    if (c->heads % c->kv_heads)
        return mk_error_set("%s: num_key_value_heads %d does not divide num_attention_heads %d", what, c->kv_heads,
                            c->heads);
    c->seq = npos < MK_HF_SEQ ? npos : MK_HF_SEQ;
    c->untied = !tie;
    if (llama_unsupported(o, what, c) < 0) return -1;
    double jitter;
    if (opt_num(o, what, "router_jitter_noise", 0, 0, &jitter) < 0) return -1;
    if (jitter > 0) return mk_error_set("%s: router_jitter_noise %g: router noise is not modelled", what, jitter);
    if (qwen3_moe || qwen2_moe) return load_qwen_moe(o, what, c);
    if (!moe) return 0;
    if (mk_json_int(o, what, "num_local_experts", 1, &c->num_experts) < 0 ||
        mk_json_int(o, what, "num_experts_per_tok", 1, &c->moe_topk) < 0)
        return -1;
    c->moe_ffn = c->ffn; /* Mixtral's experts are intermediate_size wide, every block sparse */
    c->moe_layer_freq = 1, c->moe_first_dense = 0, c->moe_pre_softmax = 0;
    return 0;
}

/* The model's name: _name_or_path (the hub id), else its directory's
 * name, else the file's. */
static void hf_name(json_t *o, const char *path, const char *file, mk_model_config_t *c)
{
    json_t *n = json_object_get(o, "_name_or_path");
    const char *s = json_is_string(n) && json_string_length(n) ? json_string_value(n) : NULL;
    char dir[1024];
    if (!s) {
        mk_strlcpy(dir, file != path ? path : file, sizeof dir);
        size_t k = strlen(dir);
        while (k > 1 && dir[k - 1] == '/') dir[--k] = 0;
        char *slash = strrchr(dir, '/');
        if (file == path && slash && !strcmp(slash + 1, "config.json")) { /* .../NAME/config.json */
            *slash = 0;
            slash = strrchr(dir, '/');
        }
        s = slash ? slash + 1 : dir;
    }
    snprintf(c->name, sizeof c->name, "%s", s);
}

/* config.json itself, or the one in directory path. */
static const char *config_path(const char *path, char *buf, size_t n)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        size_t k = strlen(path);
        if (k + sizeof "/config.json" > n) return NULL;
        snprintf(buf, n, "%s%sconfig.json", path, k && path[k - 1] == '/' ? "" : "/");
        return buf;
    }
    return path;
}

int mk_model_hf_is(const char *path)
{
    char buf[1024];
    const char *f = config_path(path, buf, sizeof buf);
    if (!f) return 0;
    if (f != path) return access(f, F_OK) == 0; /* a directory holding a config.json */
    json_t *j = mk_json_load(f, "model");
    int is = j && json_is_object(j) && json_object_get(j, "model_type") != NULL;
    json_decref(j);
    return is;
}

/* DeepseekV2Config / DeepseekV3Config (the hub's config.json keys). */
static const char *const deepseek_keys[] = {
    "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta", "tie_word_embeddings", "hidden_act",
    "attention_bias", "attention_dropout", "pretraining_tp", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
    "qk_rope_head_dim", "v_head_dim", "n_routed_experts", "n_shared_experts", "num_experts_per_tok",
    "moe_intermediate_size", "first_k_dense_replace", "moe_layer_freq", "norm_topk_prob", "scoring_func",
    "topk_method", "n_group", "topk_group", "routed_scaling_factor", "aux_loss_alpha", "seq_aux", "ep_size",
    "num_nextn_predict_layers", "quantization_config", "rope_scaling", "auto_map", HF_IGNORED, NULL};

/* DeepSeek's YaRN rope_scaling: checked, and changes no cost; its factor
 * kept (the executor, which would have to turn by it, refuses it). */
static int yarn_scaling(json_t *o, const char *what, double *factor)
{
    static const char *const keys[] = {"type", "rope_type", "factor", "original_max_position_embeddings", "beta_fast",
                                       "beta_slow", "mscale", "mscale_all_dim", NULL};
    static const char *const yarn[] = {"yarn", NULL};
    json_t *rs = json_object_get(o, "rope_scaling");
    if (!rs || json_is_null(rs)) return 0;
    char in[1200];
    double f;
    snprintf(in, sizeof in, "%s: rope_scaling", what);
    if (!json_is_object(rs) || mk_json_only_keys(rs, in, keys) < 0 || want_str(rs, in, "type", yarn) < 0 ||
        want_str(rs, in, "rope_type", yarn) < 0 || mk_json_num(rs, in, "factor", 1, &f) < 0)
        return json_is_object(rs) ? -1 : mk_error_set("%s must be an object or null", in);
    *factor = f;
    return 0;
}

/* The router: scoring_func, routed_scaling_factor, and with topk_method
 * group_limited_greedy or noaux_tc (whose score bias it also means) the
 * groups, n_group and topk_group; absent, DeepseekV3Config's defaults
 * (sigmoid, 2.5, 8 and 4) or DeepseekV2Config's (softmax, 1, none). */
static int deepseek_router(json_t *o, const char *what, mk_model_config_t *c)
{
    static const char *const score[] = {"softmax", "sigmoid", NULL};
    json_t *tm = json_object_get(o, "topk_method"), *sf = json_object_get(o, "scoring_func");
    int v3 = !strcmp(json_string_value(json_object_get(o, "model_type")), "deepseek_v3");
    const char *method = json_is_string(tm) ? json_string_value(tm) : v3 ? "noaux_tc" : "greedy";
    if (want_str(o, what, "scoring_func", score) < 0 ||
        opt_num(o, what, "routed_scaling_factor", 0, v3 ? 2.5 : 1.0, &c->moe_topk_scale) < 0)
        return -1;
    c->moe_score_sigmoid = json_is_string(sf) ? !strcmp(json_string_value(sf), "sigmoid") : v3;
    c->moe_router_bias = !strcmp(method, "noaux_tc");
    if (!strcmp(method, "greedy")) return 0;
    if (opt_int(o, what, "n_group", 1, v3 ? 8 : 1, &c->moe_groups) < 0 ||
        opt_int(o, what, "topk_group", 1, v3 ? 4 : 1, &c->moe_group_topk) < 0)
        return -1;
    if (c->moe_groups == 1) c->moe_groups = c->moe_group_topk = 0; /* one group: no limit */
    return 0;
}

/* MLA's sizes (q_lora_rank null: a plain q projection, which merak does
 * not model) and the experts: n_routed_experts of moe_intermediate_size,
 * n_shared_experts of it as one shared expert, the first
 * first_k_dense_replace blocks dense; noaux_tc's score bias. */
static int load_deepseek(json_t *o, const char *what, mk_model_config_t *c)
{
    static const char *const silu[] = {"silu", NULL};
    static const char *const topk[] = {"greedy", "group_limited_greedy", "noaux_tc", NULL};
    int npos, tie, kv, ab, shared, freq, norm_topk;
    json_t *ql = json_object_get(o, "q_lora_rank");
    if (mk_json_only_keys(o, what, deepseek_keys) < 0 || mk_json_int(o, what, "hidden_size", 1, &c->hidden) < 0 ||
        mk_json_int(o, what, "intermediate_size", 1, &c->ffn) < 0 ||
        mk_json_int(o, what, "num_hidden_layers", 1, &c->num_layers) < 0 ||
        mk_json_int(o, what, "num_attention_heads", 1, &c->heads) < 0 ||
        opt_int(o, what, "num_key_value_heads", 1, c->heads, &kv) < 0 ||
        mk_json_int(o, what, "vocab_size", 1, &c->vocab) < 0 ||
        mk_json_int(o, what, "max_position_embeddings", 1, &npos) < 0 ||
        opt_num(o, what, "rms_norm_eps", 0, 1e-6, &c->norm_eps) < 0 ||
        opt_num(o, what, "rope_theta", 1, 10000, &c->rope_theta) < 0 ||
        opt_bool(o, what, "tie_word_embeddings", 0, &tie) < 0 || want_str(o, what, "hidden_act", silu) < 0 ||
        opt_bool(o, what, "attention_bias", 0, &ab) < 0 ||
        mk_json_int(o, what, "kv_lora_rank", 1, &c->kv_lora_rank) < 0 ||
        mk_json_int(o, what, "qk_nope_head_dim", 1, &c->qk_head_dim) < 0 ||
        mk_json_int(o, what, "qk_rope_head_dim", 1, &c->qk_pos_emb_head_dim) < 0 ||
        mk_json_int(o, what, "v_head_dim", 1, &c->v_head_dim) < 0 || want_str(o, what, "topk_method", topk) < 0 ||
        yarn_scaling(o, what, &c->rope_yarn_factor) < 0)
        return -1;
    if (!ql || json_is_null(ql))
        return mk_error_set("%s: q_lora_rank null (a plain q projection, DeepSeek-V2-Lite's) is not modelled", what);
    if (mk_json_int(o, what, "q_lora_rank", 1, &c->q_lora_rank) < 0) return -1;
    if (kv != c->heads || ab)
        return mk_error_set("%s: %s: MLA has no K/V groups and no biases", what,
                            ab ? "attention_bias true" : "num_key_value_heads other than num_attention_heads");
    c->kv_heads = c->heads, c->untied = !tie, c->seq = npos < MK_HF_SEQ ? npos : MK_HF_SEQ;
    json_t *ne = json_object_get(o, "n_routed_experts");
    if (!ne || json_is_null(ne)) return 0; /* dense */
    if (mk_json_int(o, what, "n_routed_experts", 1, &c->num_experts) < 0 ||
        mk_json_int(o, what, "num_experts_per_tok", 1, &c->moe_topk) < 0 ||
        mk_json_int(o, what, "moe_intermediate_size", 1, &c->moe_ffn) < 0 ||
        opt_int(o, what, "n_shared_experts", 0, 0, &shared) < 0 ||
        opt_int(o, what, "first_k_dense_replace", 0, 0, &c->moe_first_dense) < 0 ||
        opt_int(o, what, "moe_layer_freq", 1, 1, &freq) < 0 || opt_bool(o, what, "norm_topk_prob", 0, &norm_topk) < 0)
        return -1;
    if (freq != 1)
        return mk_error_set("%s: moe_layer_freq %d: merak's MoE blocks are every block after the dense ones", what,
                            freq);
    if ((int64_t)shared * c->moe_ffn > MK_MAX_MOE_FFN)
        return mk_error_set("%s: %d shared experts of %d are too wide", what, shared, c->moe_ffn);
    c->moe_shared_ffn = shared * c->moe_ffn, c->moe_layer_freq = 1, c->moe_pre_softmax = !norm_topk;
    return deepseek_router(o, what, c);
}

/* The families read as Llama's decoder (RMSNorm, SwiGLU, RoPE, GQA). */
static int is_llama_like(const char *type)
{
    static const char *const t[] = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", NULL};
    for (int i = 0; t[i]; i++)
        if (!strcmp(type, t[i])) return 1;
    return 0;
}

int mk_model_hf_load(const char *path, mk_model_config_t *c)
{
    char buf[1024];
    const char *f = config_path(path, buf, sizeof buf);
    if (!f) return mk_error_set("model directory '%s': path too long", path);
    json_t *o = mk_json_load(f, "Hugging Face config");
    if (!o) return -1;
    char what[1100];
    snprintf(what, sizeof what, "%s", f);
    int rc = -1;
    json_t *t = json_object_get(o, "model_type");
    mk_model_defaults(c);
    if (!json_is_object(o) || !json_is_string(t)) {
        mk_error_set("%s: not a Hugging Face config (a string model_type)", what);
    } else if (!strcmp(json_string_value(t), "gpt2")) {
        rc = load_gpt2(o, what, c);
    } else if (is_llama_like(json_string_value(t))) {
        const char *type = json_string_value(t);
        mk_model_llama_arch(c);
        c->family = MK_FAMILY_LLAMA; /* transformers' Llama-family decoders have no dropout ops (attention_dropout 0) */
        c->qkv_bias = !strncmp(type, "qwen2", 5); /* Qwen2Attention's q/k/v projections have biases */
        c->qk_norm = !strncmp(type, "qwen3", 5); /* Qwen3Attention's q_norm, k_norm (RMSNorm over head_dim) */
        rc = load_llama(o, what, type, c);
    } else if (!strcmp(json_string_value(t), "deepseek_v2") || !strcmp(json_string_value(t), "deepseek_v3")) {
        mk_model_llama_arch(c);
        c->family = MK_FAMILY_LLAMA;
        rc = load_deepseek(o, what, c);
    } else {
        mk_error_set("%s: model_type '%s' is not supported (gpt2, llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, "
                     "qwen3_moe, deepseek_v2, deepseek_v3)", what, json_string_value(t));
    }
    if (rc == 0) hf_name(o, path, f, c);
    json_decref(o);
    return rc;
}
