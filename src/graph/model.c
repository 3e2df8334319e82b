/* Model presets and configuration checks.  Sizes of the GPT presets follow
 * the Merak paper (Table 2) and Megatron-LM; gpt2-124m is OpenAI's GPT-2
 * small; bert-large is Devlin et al. 2019 (24 layers, 1024, 16 heads). */
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
} mk_preset_t;

static const mk_preset_t mk_presets[] = {
    {"gpt-tiny", MK_FAMILY_GPT, 4, 64, 4, 64, 256, "4 blocks, hidden 64: for tests"},
    {"gpt2-124m", MK_FAMILY_GPT, 12, 768, 12, 1024, 50257, "GPT-2 small"},
    {"gpt-1.5b", MK_FAMILY_GPT, 48, 1600, 25, 1024, 50257, "Merak paper, GPT-1.5B"},
    {"gpt-2.5b", MK_FAMILY_GPT, 54, 1920, 20, 1024, 50257, "Merak paper, GPT-2.5B"},
    {"gpt-8.3b", MK_FAMILY_GPT, 72, 3072, 32, 1024, 50257, "Megatron-LM / Merak paper, GPT-8.3B"},
    {"gpt-20b", MK_FAMILY_GPT, 44, 6144, 64, 1024, 50257, "Merak paper, GPT-20B"},
    {"gpt-175b", MK_FAMILY_GPT, 96, 12288, 96, 2048, 50257, "GPT-3 175B"},
    {"bert-large", MK_FAMILY_BERT, 24, 1024, 16, 512, 30522, "BERT-Large (encoder)"},
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

int mk_model_preset(const char *name, mk_model_config_t *cfg)
{
    for (size_t i = 0; i < MK_NPRESETS; i++) {
        const mk_preset_t *p = &mk_presets[i];
        if (strcmp(name, p->name)) continue;
        memset(cfg, 0, sizeof *cfg);
        mk_strlcpy(cfg->name, p->name, sizeof cfg->name);
        cfg->family = p->family;
        cfg->num_layers = p->layers;
        cfg->hidden = p->hidden;
        cfg->heads = p->heads;
        cfg->seq = p->seq;
        cfg->vocab = p->vocab;
        cfg->ffn = 4 * p->hidden;
        return 0;
    }
    return mk_error_set("unknown model '%s' (see 'merak models'; or give a path to a .json description)", name);
}

void mk_model_overrides_init(mk_model_overrides_t *ov)
{
    ov->num_layers = ov->hidden = ov->heads = ov->seq = ov->vocab = ov->ffn = -1;
}

/* One model size against its range [1, max], named by its flag. */
static int check_size(const char *flag, int v, int max)
{
    if (v < 1) return mk_error_set("%s must be >= 1", flag);
    return mk_limit_check(flag, v, max);
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
    return 0;
}

int mk_model_check_tp(const mk_model_config_t *c, int tp)
{
    if (tp < 1) return mk_error_set("tensor parallel size must be >= 1, got %d", tp);
    if (mk_limit_check("tensor parallel size", tp, MK_MAX_TP) < 0) return -1;
    if (c->family == MK_FAMILY_CUSTOM) return 0;
    if (c->heads % tp)
        return mk_error_set("tensor parallel size %d does not divide the %d attention heads",
                            tp, c->heads);
    if (c->ffn % tp)
        return mk_error_set("tensor parallel size %d does not divide the FFN width %d", tp, c->ffn);
    return 0;
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
        if (ov->seq > 0) cfg->seq = ov->seq;
        return mk_model_validate(cfg);
    }
    if (mk_model_preset(model, cfg) < 0) return -1;
    if (ov->num_layers > 0) cfg->num_layers = ov->num_layers;
    if (ov->heads > 0) cfg->heads = ov->heads;
    if (ov->seq > 0) cfg->seq = ov->seq;
    if (ov->vocab > 0) cfg->vocab = ov->vocab;
    if (ov->hidden > 0) {
        cfg->hidden = ov->hidden;
        cfg->ffn = 4 * ov->hidden;
    }
    if (ov->ffn > 0) cfg->ffn = ov->ffn;
    return mk_model_validate(cfg);
}
