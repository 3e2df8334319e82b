/* The architecture fields of a model configuration (model.h): the GPT
 * defaults, their names on the command line and in files, and their JSON
 * form in plan files and `merak model --json`.  Uses nothing else in the
 * graph module but dtype.c's header. */
#include "merak/model.h"
#include "merak/model_json.h"

#include "merak/limits.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mk_model_defaults(mk_model_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->norm = MK_NORM_LAYERNORM;
    cfg->pos = MK_POS_LEARNED;
    cfg->rope_theta = 10000;
    cfg->norm_eps = 1e-5;
    cfg->bias = 1;
    cfg->moe_topk = 2;       /* Megatron-LM's --moe-router-topk default */
    cfg->moe_layer_freq = 1; /* every block */
}

int mk_model_is_moe(const mk_model_config_t *c) { return c->num_experts > 0; }

double mk_model_window_share(const mk_model_config_t *c)
{
    double s = c->seq, w = c->window;
    if (c->window <= 0 || c->window >= c->seq) return 1.0;
    return (w * (w + 1) / 2 + (s - w) * w) / (s * (s + 1) / 2);
}

int mk_model_is_mla(const mk_model_config_t *c) { return c->kv_lora_rank > 0; }

int mk_model_head_dim(const mk_model_config_t *c)
{
    if (c->kv_lora_rank) return c->qk_head_dim + c->qk_pos_emb_head_dim; /* MLA: a head's q and k */
    return c->kv_channels ? c->kv_channels : c->hidden / c->heads;
}

int mk_model_block_is_moe(const mk_model_config_t *c, int block)
{
    return c->num_experts > 0 && block >= c->moe_first_dense && block % c->moe_layer_freq == 0;
}

int mk_moe_layer_freq_parse(const char *s, int *freq, int *first_dense, int *len)
{
    char buf[64];
    size_t n = 0;
    for (const char *p = s; *p && n + 1 < sizeof buf; p++)
        if (*p != '\'' && *p != '"' && *p != '(' && *p != ')' && *p != ' ') buf[n++] = *p;
    buf[n] = 0;
    int a, b, end = 0;
    if (sscanf(buf, "%d%n", &a, &end) == 1 && !buf[end]) {
        if (a < 1) return mk_error_set("--moe-layer-freq must be >= 1, got %d", a);
        *freq = a, *first_dense = 0, *len = 0;
        return 0;
    }
    end = 0;
    if (sscanf(buf, "[0]*%d+[1]*%d%n", &a, &b, &end) == 2 && !buf[end] && a >= 0 && b >= 1 &&
        a <= MK_MAX_LAYERS && b <= MK_MAX_LAYERS) {
        *freq = 1, *first_dense = a, *len = a + b;
        return 0;
    }
    return mk_error_set("--moe-layer-freq '%s' is not an integer or \"([0]*K+[1]*M)\"", s);
}

/* One integer of --window-size at *p, in [-1, MK_MAX_SEQ]; *p past it. */
static int window_int(const char **p, long *out)
{
    char *end;
    errno = 0;
    *out = strtol(*p, &end, 10);
    if (end == *p || errno || *out < -1 || *out > MK_MAX_SEQ) return -1;
    *p = end;
    return 0;
}

int mk_window_size_parse(const char *s, int *window)
{
    const char *p = s;
    long left, right;
    int paren = *p == '(';
    p += paren;
    if (window_int(&p, &left) < 0 || *p++ != ',' || window_int(&p, &right) < 0 || (paren && *p++ != ')') || *p)
        return mk_error_set("--window-size '%s' is not LEFT,RIGHT (integers from -1 to %d)", s, MK_MAX_SEQ);
    if (right != 0)
        return mk_error_set("--window-size '%s': merak's decoders are causal, so RIGHT must be 0", s);
    *window = left < 0 ? 0 : (int)left + 1; /* -1: no window; LEFT keys before the query and itself */
    return 0;
}

void mk_model_llama_arch(mk_model_config_t *cfg)
{
    cfg->norm = MK_NORM_RMSNORM;
    cfg->swiglu = 1;
    cfg->pos = MK_POS_ROPE;
    cfg->untied = 1;
    cfg->bias = 0;
}

const char *mk_family_name(mk_family_t f)
{
    switch (f) {
    case MK_FAMILY_GPT: return "gpt";
    case MK_FAMILY_BERT: return "bert";
    case MK_FAMILY_LLAMA: return "llama";
    default: return "custom";
    }
}

/* Megatron-LM's spellings (--normalization, --position-embedding-type). */
static const char *const norm_names[] = {"LayerNorm", "RMSNorm", NULL};
static const char *const pos_names[] = {"learned_absolute", "rope", NULL};

static int name_index(const char *const *names, const char *s)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

const char *mk_norm_name(mk_norm_kind_t k) { return k <= MK_NORM_RMSNORM ? norm_names[k] : "?"; }
const char *mk_pos_name(mk_pos_kind_t k) { return k <= MK_POS_ROPE ? pos_names[k] : "?"; }

int mk_norm_parse(const char *s, mk_norm_kind_t *out)
{
    int i = name_index(norm_names, s);
    if (i < 0) return mk_error_set("normalization '%s' is not LayerNorm or RMSNorm", s);
    *out = (mk_norm_kind_t)i;
    return 0;
}

int mk_pos_parse(const char *s, mk_pos_kind_t *out)
{
    int i = name_index(pos_names, s);
    if (i < 0) return mk_error_set("position embedding type '%s' is not learned_absolute or rope", s);
    *out = (mk_pos_kind_t)i;
    return 0;
}

int mk_model_arch_is_gpt(const mk_model_config_t *c)
{
    return c->kv_heads == c->heads && c->norm == MK_NORM_LAYERNORM && !c->swiglu && c->pos == MK_POS_LEARNED &&
           c->rope_theta == 10000 && c->norm_eps == 1e-5 && !c->untied && c->bias && !c->qkv_bias && !c->window &&
           !c->kv_channels && !c->qk_norm && !c->kv_lora_rank && !c->mtp_layers &&
           !c->rope_factor && !c->no_dropout;
}

static const char *const arch_keys[] = {"num_query_groups", "normalization", "swiglu",
                                        "position_embedding_type", "rotary_base", "norm_epsilon",
                                        "untie_embeddings_and_output_weights", "add_bias_linear",
                                        /* the experts (arch_keys + MOE_KEYS), only with num_experts > 0 */
                                        "num_experts", "moe_router_topk", "moe_ffn_hidden_size",
                                        "moe_shared_expert_intermediate_size", "moe_router_pre_softmax",
                                        "moe_aux_loss_coeff", "moe_expert_capacity_factor", "moe_layer_freq",
                                        "moe_first_dense_layers",
                                        /* a Hugging Face config's (arch_keys + HF_KEYS), only when set */
                                        "window_size", "rope_scaling_factor", "rope_scaling_low_freq_factor",
                                        "rope_scaling_high_freq_factor",
                                        "rope_scaling_original_max_position_embeddings",
                                        "add_qkv_bias", "no_dropout", "kv_channels", "qk_layernorm",
                                        "moe_shared_expert_gate", "moe_router_enable_expert_bias", "q_lora_rank",
                                        "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim",
                                        "mtp_num_layers", "rope_yarn_factor", "moe_router_score_function",
                                        "moe_router_topk_scaling_factor", "moe_router_num_groups",
                                        "moe_router_group_topk", NULL};
#define MOE_KEYS 8 /* the index of num_experts */
#define HF_KEYS 17 /* the index of window_size */

/* The sliding window, the RoPE scaling, the QKV bias, no dropout, the
 * head dim and the q/k norm as keys of obj, where set. */
static int hf_to_json(const mk_model_config_t *c, json_t *obj)
{
    const char *const *k = arch_keys + HF_KEYS;
    int rc = 0;
    if (c->window) rc |= json_object_set_new(obj, k[0], json_integer(c->window));
    if (c->qkv_bias) rc |= json_object_set_new(obj, k[5], json_true());
    if (c->no_dropout && c->family != MK_FAMILY_LLAMA) rc |= json_object_set_new(obj, k[6], json_true());
    if (c->kv_channels) rc |= json_object_set_new(obj, k[7], json_integer(c->kv_channels));
    if (c->qk_norm) rc |= json_object_set_new(obj, k[8], json_true());
    if (c->moe_shared_gate) rc |= json_object_set_new(obj, k[9], json_true());
    if (c->moe_router_bias) rc |= json_object_set_new(obj, k[10], json_true());
    const int mla[] = {c->q_lora_rank, c->kv_lora_rank, c->qk_head_dim, c->qk_pos_emb_head_dim, c->v_head_dim};
    for (int i = 0; c->kv_lora_rank && i < 5; i++) rc |= json_object_set_new(obj, k[11 + i], json_integer(mla[i]));
    if (c->mtp_layers) rc |= json_object_set_new(obj, k[16], json_integer(c->mtp_layers));
    if (c->rope_yarn_factor) rc |= json_object_set_new(obj, k[17], json_real(c->rope_yarn_factor));
    if (c->moe_score_sigmoid) rc |= json_object_set_new(obj, k[18], json_string("sigmoid"));
    if (c->moe_topk_scale) rc |= json_object_set_new(obj, k[19], json_real(c->moe_topk_scale));
    if (c->moe_groups) rc |= json_object_set_new(obj, k[20], json_integer(c->moe_groups));
    if (c->moe_groups) rc |= json_object_set_new(obj, k[21], json_integer(c->moe_group_topk));
    if (c->rope_factor) {
        rc |= json_object_set_new(obj, k[1], json_real(c->rope_factor));
        rc |= json_object_set_new(obj, k[2], json_real(c->rope_low_freq));
        rc |= json_object_set_new(obj, k[3], json_real(c->rope_high_freq));
        rc |= json_object_set_new(obj, k[4], json_integer(c->rope_orig_max_pos));
    }
    return rc ? -1 : 0;
}

static int hf_from_json(json_t *o, const char *what, mk_model_config_t *c)
{
    const char *const *k = arch_keys + HF_KEYS;
    if (json_object_get(o, k[0]) && mk_json_int(o, what, k[0], 1, &c->window) < 0) return -1;
    if (json_object_get(o, k[5]) && mk_json_bool(o, what, k[5], &c->qkv_bias) < 0) return -1;
    if (json_object_get(o, k[6]) && mk_json_bool(o, what, k[6], &c->no_dropout) < 0) return -1;
    if (json_object_get(o, k[7]) && mk_json_int(o, what, k[7], 1, &c->kv_channels) < 0) return -1;
    if (json_object_get(o, k[8]) && mk_json_bool(o, what, k[8], &c->qk_norm) < 0) return -1;
    if (json_object_get(o, k[9]) && mk_json_bool(o, what, k[9], &c->moe_shared_gate) < 0) return -1;
    if (json_object_get(o, k[10]) && mk_json_bool(o, what, k[10], &c->moe_router_bias) < 0) return -1;
    int *mla[] = {&c->q_lora_rank, &c->kv_lora_rank, &c->qk_head_dim, &c->qk_pos_emb_head_dim, &c->v_head_dim};
    for (int i = 0; i < 5; i++)
        if (json_object_get(o, k[11 + i]) && mk_json_int(o, what, k[11 + i], 1, mla[i]) < 0) return -1;
    if (json_object_get(o, k[16]) && mk_json_int(o, what, k[16], 0, &c->mtp_layers) < 0) return -1;
    if (json_object_get(o, k[17]) && mk_json_num(o, what, k[17], 1, &c->rope_yarn_factor) < 0) return -1;
    json_t *sf = json_object_get(o, k[18]);
    if (sf && !(json_is_string(sf) && !strcmp(json_string_value(sf), "sigmoid")))
        return mk_error_set("%s: %s must be \"sigmoid\" (absent: softmax)", what, k[18]);
    c->moe_score_sigmoid = sf != NULL;
    if (json_object_get(o, k[19]) && mk_json_num(o, what, k[19], 0, &c->moe_topk_scale) < 0) return -1;
    if (json_object_get(o, k[20]) && (mk_json_int(o, what, k[20], 1, &c->moe_groups) < 0 ||
                                      mk_json_int(o, what, k[21], 1, &c->moe_group_topk) < 0))
        return -1;
    if (!json_object_get(o, k[1])) return 0; /* the four come together */
    if (mk_json_num(o, what, k[1], 1, &c->rope_factor) < 0 || mk_json_num(o, what, k[2], 0, &c->rope_low_freq) < 0 ||
        mk_json_num(o, what, k[3], 0, &c->rope_high_freq) < 0 || mk_json_int(o, what, k[4], 1, &c->rope_orig_max_pos) < 0)
        return -1;
    return 0;
}

/* The experts of an MoE model as keys of obj (a dense model has none, so
 * its JSON is unchanged). */
static json_t *moe_to_json(const mk_model_config_t *c)
{
    const char *const *k = arch_keys + MOE_KEYS;
    if (!c->num_experts) return json_object();
    return json_pack("{s:i, s:i, s:i, s:i, s:b, s:f, s:f, s:i, s:i}", k[0], c->num_experts, k[1], c->moe_topk,
                     k[2], c->moe_ffn, k[3], c->moe_shared_ffn, k[4], c->moe_pre_softmax, k[5], c->moe_aux_coeff,
                     k[6], c->moe_capacity, k[7], c->moe_layer_freq, k[8], c->moe_first_dense);
}

static int moe_from_json(json_t *o, const char *what, mk_model_config_t *c)
{
    const char *const *k = arch_keys + MOE_KEYS;
    int *ints[] = {&c->num_experts, &c->moe_topk, &c->moe_ffn, &c->moe_shared_ffn};
    for (int i = 0; i < 4; i++)
        if (json_object_get(o, k[i]) && mk_json_int(o, what, k[i], 0, ints[i]) < 0) return -1;
    if ((json_object_get(o, k[4]) && mk_json_bool(o, what, k[4], &c->moe_pre_softmax) < 0) ||
        (json_object_get(o, k[5]) && mk_json_num(o, what, k[5], 0, &c->moe_aux_coeff) < 0) ||
        (json_object_get(o, k[6]) && mk_json_num(o, what, k[6], 0, &c->moe_capacity) < 0) ||
        (json_object_get(o, k[7]) && mk_json_int(o, what, k[7], 1, &c->moe_layer_freq) < 0) ||
        (json_object_get(o, k[8]) && mk_json_int(o, what, k[8], 0, &c->moe_first_dense) < 0))
        return -1;
    if (c->num_experts && !c->moe_ffn) c->moe_ffn = c->ffn;
    return 0;
}

const char *const *mk_model_arch_keys(void) { return arch_keys; }

int mk_model_arch_to_json(const mk_model_config_t *c, json_t *obj)
{
    json_t *a = json_pack("{s:i, s:s, s:b, s:s, s:f, s:f, s:b, s:b}", arch_keys[0], c->kv_heads, arch_keys[1],
                          mk_norm_name(c->norm), arch_keys[2], c->swiglu, arch_keys[3], mk_pos_name(c->pos),
                          arch_keys[4], c->rope_theta, arch_keys[5], c->norm_eps, arch_keys[6], c->untied,
                          arch_keys[7], c->bias);
    json_t *m = moe_to_json(c);
    int bad = !a || !m || json_object_update(obj, a) < 0 || json_object_update(obj, m) < 0 || hf_to_json(c, obj) < 0;
    json_decref(a);
    json_decref(m);
    return bad ? mk_error_set("out of memory") : 0;
}

/* An optional string field naming an enum value. */
static int enum_field(json_t *o, const char *what, const char *key, int (*parse)(const char *, int *), int *out)
{
    json_t *v = json_object_get(o, key);
    if (!v) return 0;
    if (!json_is_string(v)) return mk_error_set("%s: field '%s' must be a string", what, key);
    if (parse(json_string_value(v), out) < 0) return mk_error_set("%s: %s", what, mk_error_last());
    return 0;
}

static int parse_norm(const char *s, int *out)
{
    mk_norm_kind_t k;
    if (mk_norm_parse(s, &k) < 0) return -1;
    *out = (int)k;
    return 0;
}

static int parse_pos(const char *s, int *out)
{
    mk_pos_kind_t k;
    if (mk_pos_parse(s, &k) < 0) return -1;
    *out = (int)k;
    return 0;
}

int mk_model_arch_from_json(json_t *o, const char *what, mk_model_config_t *c)
{
    int norm = (int)c->norm, pos = (int)c->pos;
    if ((json_object_get(o, arch_keys[0]) && mk_json_int(o, what, arch_keys[0], 1, &c->kv_heads) < 0) ||
        enum_field(o, what, arch_keys[1], parse_norm, &norm) < 0 ||
        (json_object_get(o, arch_keys[2]) && mk_json_bool(o, what, arch_keys[2], &c->swiglu) < 0) ||
        enum_field(o, what, arch_keys[3], parse_pos, &pos) < 0 ||
        (json_object_get(o, arch_keys[4]) && mk_json_num(o, what, arch_keys[4], 0, &c->rope_theta) < 0) ||
        (json_object_get(o, arch_keys[5]) && mk_json_num(o, what, arch_keys[5], 0, &c->norm_eps) < 0) ||
        (json_object_get(o, arch_keys[6]) && mk_json_bool(o, what, arch_keys[6], &c->untied) < 0) ||
        (json_object_get(o, arch_keys[7]) && mk_json_bool(o, what, arch_keys[7], &c->bias) < 0))
        return -1;
    c->norm = (mk_norm_kind_t)norm;
    c->pos = (mk_pos_kind_t)pos;
    return moe_from_json(o, what, c) < 0 ? -1 : hf_from_json(o, what, c);
}
