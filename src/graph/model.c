/* Model presets and configuration checks.  Sizes of the GPT presets follow
 * the Merak paper (Table 2) and Megatron-LM; gpt2-124m is OpenAI's GPT-2
 * small; bert-large is Devlin et al. 2019 (24 layers, 1024, 16 heads).  The
 * Llama presets are Meta's Hugging Face config.json files (hidden_size,
 * intermediate_size, num_attention_heads, num_key_value_heads, vocab_size,
 * max_position_embeddings as the sequence, rope_theta, rms_norm_eps;
 * untied heads, no biases). */
#include "merak/graph.h"
#include "merak/model.h"
#include "merak/limits.h"

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
};
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

void mk_model_defaults(mk_model_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->norm = MK_NORM_LAYERNORM;
    cfg->pos = MK_POS_LEARNED;
    cfg->rope_theta = 10000;
    cfg->norm_eps = 1e-5;
    cfg->bias = 1;
}

/* The Llama architecture: RMSNorm, SwiGLU, rotary positions, untied head, no biases. */
static void set_llama(mk_model_config_t *cfg)
{
    cfg->norm = MK_NORM_RMSNORM;
    cfg->swiglu = 1;
    cfg->pos = MK_POS_ROPE;
    cfg->untied = 1;
    cfg->bias = 0;
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
            set_llama(cfg);
            cfg->rope_theta = p->rope_theta;
        }
        return 0;
    }
    return mk_error_set("unknown model '%s' (see 'merak models'; or give a path to a .json description)", name);
}

void mk_model_overrides_init(mk_model_overrides_t *ov)
{
    ov->num_layers = ov->hidden = ov->heads = ov->seq = ov->vocab = ov->ffn = -1;
    ov->group_query_attention = ov->kv_heads = -1;
    ov->norm = ov->swiglu = ov->pos = ov->untied = ov->bias = -1;
    ov->rope_theta = ov->norm_eps = -1;
}

/* One model size against its range [1, max], named by its flag. */
static int check_size(const char *flag, int v, int max)
{
    if (v < 1) return mk_error_set("%s must be >= 1", flag);
    return mk_limit_check(flag, v, max);
}

/* A real number in (0, max], named by its flag. */
static int check_real(const char *flag, double v, double max)
{
    if (!(v > 0) || v > max) return mk_error_set("%s must be in (0, %g], got %g", flag, max, v);
    return 0;
}

/* GQA groups, the rotary base and the norm epsilon. */
static int validate_arch(const mk_model_config_t *c)
{
    if (check_size("--num-query-groups", c->kv_heads, MK_MAX_HEADS) < 0) return -1;
    if (c->heads % c->kv_heads)
        return mk_error_set("--num-query-groups %d does not divide --num-attention-heads %d", c->kv_heads,
                            c->heads);
    if (check_real("--rotary-base", c->rope_theta, MK_MAX_ROPE_THETA) < 0) return -1;
    return check_real("--norm-epsilon", c->norm_eps, MK_MAX_NORM_EPS);
}

int mk_model_validate(const mk_model_config_t *c)
{
    if (c->family == MK_FAMILY_CUSTOM) {
        if (c->seq < 1) return mk_error_set("model '%s': seq_length must be >= 1", c->name);
        return mk_limit_check("--seq-length", c->seq, MK_MAX_SEQ);
    }
    if (check_size("--num-layers", c->num_layers, MK_MAX_LAYERS) < 0 ||
        check_size("--hidden-size", c->hidden, MK_MAX_HIDDEN) < 0 ||
        check_size("--num-attention-heads", c->heads, MK_MAX_HEADS) < 0 ||
        check_size("--seq-length", c->seq, MK_MAX_SEQ) < 0 ||
        check_size("--vocab-size", c->vocab, MK_MAX_VOCAB) < 0 ||
        check_size("--ffn-hidden-size", c->ffn, MK_MAX_FFN) < 0)
        return -1;
    if (c->hidden % c->heads)
        return mk_error_set("--num-attention-heads %d does not divide --hidden-size %d",
                            c->heads, c->hidden);
    return validate_arch(c);
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

/* The architecture flags; --num-query-groups only means something with
 * --group-query-attention (as in Megatron-LM, whose default is 1 group). */
static int apply_arch(const mk_model_overrides_t *ov, mk_model_config_t *c)
{
    if (ov->kv_heads > 0 && ov->group_query_attention != 1)
        return mk_error_set("--num-query-groups needs --group-query-attention");
    if (ov->group_query_attention == 1) c->kv_heads = ov->kv_heads > 0 ? ov->kv_heads : 1;
    if (ov->norm >= 0) c->norm = (mk_norm_kind_t)ov->norm;
    if (ov->swiglu >= 0) c->swiglu = ov->swiglu;
    if (ov->pos >= 0) c->pos = (mk_pos_kind_t)ov->pos;
    if (ov->untied >= 0) c->untied = ov->untied;
    if (ov->bias >= 0) c->bias = ov->bias;
    if (ov->rope_theta >= 0) c->rope_theta = ov->rope_theta;
    if (ov->norm_eps >= 0) c->norm_eps = ov->norm_eps;
    return 0;
}

static int arch_given(const mk_model_overrides_t *ov)
{
    return ov->group_query_attention >= 0 || ov->kv_heads >= 0 || ov->norm >= 0 || ov->swiglu >= 0 ||
           ov->pos >= 0 || ov->untied >= 0 || ov->bias >= 0 || ov->rope_theta >= 0 || ov->norm_eps >= 0;
}

static int is_json_path(const char *s)
{
    size_t n = strlen(s);
    return strchr(s, '/') != NULL || (n > 5 && !strcasecmp(s + n - 5, ".json"));
}

int mk_model_resolve(const char *model, const mk_model_overrides_t *ov, mk_model_config_t *cfg)
{
    if (is_json_path(model)) {
        if (mk_graph_json_probe(model, cfg) < 0) return -1;
        if (ov->num_layers > 0 || ov->hidden > 0 || ov->heads > 0 || ov->vocab > 0 || ov->ffn > 0)
            return mk_error_set("model size flags cannot change a JSON model description (%s)", model);
        if (arch_given(ov))
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
    return mk_model_validate(cfg);
}
