/* Tensors under Hugging Face's names and shapes (GPT2LMHeadModel,
 * LlamaForCausalLM, MixtralForCausalLM: the checkpoints of exec_ckpt.c use
 * them too), config.json, and model directories as the hub lays them out:
 * --save-hf's shards and index, --load DIR's reading of them. */
#include "config.h"
#include "exec/exec_internal.h"
#include "merak/fileio.h"
#include "merak/jsonio.h"
#include "merak/safetensors.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const kind_prefix[3] = {"", "optim.m.", "optim.v."};

/* Canonical tensors: all but the head's tied copy (which comes last). */
int mk_hf_n_canon(const mk_gpt_t *g)
{
    int n = g->n_tensors;
    while (n > 0 && g->t[n - 1].tied_copy) n--;
    return n;
}

/* Linear weights are stored (out, in); a GPT-2 file holds its Conv1D
 * blocks (in, out); Llama's nn.Linear weights are (out, in) as ours. */
int mk_hf_transposed(const mk_gpt_tensor_t *t)
{
    return t->rows > 1 && t->layer != 0 && !strncmp(t->name, "transformer.", 12);
}

/* The file's name and shape of tensor k's state `kind`, shared by save and load. */
void mk_hf_entry(const mk_gpt_t *g, int k, int kind, mk_st_tensor_t *d)
{
    const mk_gpt_tensor_t *t = &g->t[k];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s%s", kind_prefix[kind], t->name);
    if (t->rows == 1 && !t->decay) d->ndim = 1, d->shape[0] = t->cols; /* vectors; a 1-row matrix stays 2-D */
    else if (mk_hf_transposed(t)) d->ndim = 2, d->shape[0] = t->cols, d->shape[1] = t->real_rows;
    else d->ndim = 2, d->shape[0] = t->real_rows, d->shape[1] = t->cols;
}

/* JSON text for v as a person writes it: whole numbers as integers
 * (500000, not 5e+05), else the shortest "%g" that reads back as v (1e-05,
 * not 1.0000000000000001e-05). */
static void shortest_real(double v, char *buf, size_t n)
{
    if (v > -1e15 && v < 1e15 && (double)(long long)v == v) {
        snprintf(buf, n, "%lld", (long long)v);
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (strtod(buf, NULL) == v) return;
    }
}

/* MixtralConfig's expert fields, then (only when used) what Mixtral has no
 * field for: the shared expert's width (Qwen2-MoE's name), norm_topk_prob
 * false (softmax then top-k, not renormalised: Qwen2-MoE / DeepSeek), the
 * dense MLP width, the leading dense blocks and the MoE frequency
 * (DeepSeek-V2's first_k_dense_replace, moe_layer_freq). */
/* DeepseekV3Config's experts and router (the keys its reader takes back). */
static void deepseek_moe_json(const mk_gpt_t *g, char *buf, size_t n)
{
    const mk_model_config_t *c = &g->cfg;
    char scale[32];
    shortest_real(c->moe_topk_scale > 0 ? c->moe_topk_scale : 1.0, scale, sizeof scale);
    snprintf(buf, n, ",\"n_routed_experts\":%d,\"num_experts_per_tok\":%d,\"moe_intermediate_size\":%d,"
             "\"n_shared_experts\":%d,\"first_k_dense_replace\":%d,\"moe_layer_freq\":1,\"norm_topk_prob\":%s,"
             "\"scoring_func\":\"%s\",\"topk_method\":\"%s\",\"n_group\":%d,\"topk_group\":%d,"
             "\"routed_scaling_factor\":%s}", g->E, g->topk, g->Fe, g->Fs / g->Fe, c->moe_first_dense,
             c->moe_pre_softmax ? "false" : "true", c->moe_score_sigmoid ? "sigmoid" : "softmax",
             c->moe_router_bias ? "noaux_tc" : c->moe_groups ? "group_limited_greedy" : "greedy",
             c->moe_groups ? c->moe_groups : 1, c->moe_groups ? c->moe_group_topk : 1, scale);
}

static void moe_config_json(const mk_gpt_t *g, char *buf, size_t n)
{
    const mk_model_config_t *c = &g->cfg;
    if (g->mla) {
        deepseek_moe_json(g, buf, n);
        return;
    }
    if (c->qk_norm || c->moe_shared_gate) { /* Qwen3MoeConfig, Qwen2MoeConfig: the leading dense blocks as
                                                mlp_only_layers; Qwen2-MoE's gated shared expert */
        int len = snprintf(buf, n, ",\"num_experts\":%d,\"num_experts_per_tok\":%d,\"moe_intermediate_size\":%d,"
                           "\"norm_topk_prob\":%s,\"decoder_sparse_step\":1,\"mlp_only_layers\":[", g->E, g->topk,
                           g->Fe, c->moe_pre_softmax ? "false" : "true");
        for (int i = 0; i < c->moe_first_dense; i++) len += snprintf(buf + len, n - len, "%s%d", i ? "," : "", i);
        len += snprintf(buf + len, n - len, "]");
        if (c->moe_shared_gate) len += snprintf(buf + len, n - len, ",\"shared_expert_intermediate_size\":%d", g->Fs);
        snprintf(buf + len, n - len, "}");
        return;
    }
    int len = snprintf(buf, n, ",\"num_local_experts\":%d,\"num_experts_per_tok\":%d", g->E, g->topk);
    if (g->Fs) len += snprintf(buf + len, n - len, ",\"shared_expert_intermediate_size\":%d", g->Fs);
    if (c->moe_pre_softmax) len += snprintf(buf + len, n - len, ",\"norm_topk_prob\":false");
    if (c->moe_first_dense > 0 || c->moe_layer_freq > 1)
        len += snprintf(buf + len, n - len, ",\"dense_intermediate_size\":%d,\"first_k_dense_replace\":%d,"
                        "\"moe_layer_freq\":%d", c->ffn, c->moe_first_dense, c->moe_layer_freq);
    snprintf(buf + len, n - len, "}");
}

/* Hugging Face's config.json fields (GPT2Config, LlamaConfig), after the
 * blocks the executor built: a GPT preset given the Llama flags is a Llama. */
void mk_hf_config_json(const mk_gpt_t *g, char *buf, size_t n)
{
    const mk_model_config_t *c = &g->cfg;
    if (g->llama) {
        char eps[32], theta[32];
        shortest_real(c->norm_eps, eps, sizeof eps);
        shortest_real(c->rope_theta, theta, sizeof theta);
        int moe = g->E > 0, len;  /* MixtralConfig: intermediate_size is the experts' width (Qwen3-MoE's: dense) */
        const char *moe_type = c->qk_norm ? "qwen3_moe" : c->moe_shared_gate ? "qwen2_moe" : "mixtral";
        const char *type = g->mla ? "deepseek_v3" : moe ? moe_type : c->window ? "mistral" : c->qkv_bias ? "qwen2"
                           : c->qk_norm ? "qwen3" : "llama";
        len = snprintf(buf, n, "{\"model_type\":\"%s\",\"num_hidden_layers\":%d,\"hidden_size\":%d,"
                       "\"num_attention_heads\":%d,\"num_key_value_heads\":%d,\"intermediate_size\":%d,"
                       "\"vocab_size\":%d,\"max_position_embeddings\":%d,\"rms_norm_eps\":%s,"
                       "\"rope_theta\":%s,\"tie_word_embeddings\":%s",
                       type, c->num_layers, c->hidden, c->heads, c->kv_heads,
                       moe && !c->qk_norm && !c->moe_shared_gate && !g->mla ? g->Fe : c->ffn,
                       c->vocab, c->seq, eps, theta,
                       c->untied ? "false" : "true");
        /* Qwen3Config's head_dim defaults to 128, not hidden / heads: say it */
        if (c->kv_channels || c->qk_norm) len += snprintf(buf + len, n - len, ",\"head_dim\":%d", g->hs);
        /* MistralConfig's (and MixtralConfig's) sliding_window; LlamaConfig has none */
        if (c->window) len += snprintf(buf + len, n - len, ",\"sliding_window\":%d", c->window);
        if (c->rope_factor > 0) { /* Llama 3.1's, as its config.json has it */
            char f[32], lo[32], hi[32];
            shortest_real(c->rope_factor, f, sizeof f), shortest_real(c->rope_low_freq, lo, sizeof lo);
            shortest_real(c->rope_high_freq, hi, sizeof hi);
            len += snprintf(buf + len, n - len, ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":%s,"
                            "\"low_freq_factor\":%s,\"high_freq_factor\":%s,\"original_max_position_embeddings\":%d}",
                            f, lo, hi, c->rope_orig_max_pos);
        }
        /* DeepseekV3Config's MLA sizes; dense: no routed experts (DeepSeek's modeling_deepseek.py), and
           transformers' DeepseekV3 builds a dense MLP in the first first_k_dense_replace blocks */
        if (g->mla)
            len += snprintf(buf + len, n - len, ",\"q_lora_rank\":%d,\"kv_lora_rank\":%d,\"qk_nope_head_dim\":%d,"
                            "\"qk_rope_head_dim\":%d,\"v_head_dim\":%d", g->ql, g->kl, g->qk, g->rp, g->vd);
        if (g->mla && !moe)
            len += snprintf(buf + len, n - len, ",\"n_routed_experts\":null,\"first_k_dense_replace\":%d",
                            c->num_layers);
        if (moe) moe_config_json(g, buf + len, n - len);
        else snprintf(buf + len, n - len, "}");
        return;
    }
    snprintf(buf, n, "{\"model_type\":\"gpt2\",\"n_layer\":%d,\"n_embd\":%d,\"n_head\":%d,\"n_positions\":%d,"
             "\"vocab_size\":%d,\"n_inner\":%d}", c->num_layers, c->hidden, c->heads, c->seq, c->vocab, c->ffn);
}

/* Rank 0: DIR/config.json for --save-hf (the model's Hugging Face fields,
 * written whole or not at all). */
/* The export's element type (the run's dtype: exec opts hf_dtype), its
 * bytes per element and config.json's torch_dtype for it. */
static int hf_dtype(const mk_exec_t *e)
{
    int d = e->o->hf_dtype;
    return d == MK_ST_BF16 || d == MK_ST_F16 ? d : MK_ST_F32;
}

static int64_t hf_elem_bytes(const mk_exec_t *e) { return hf_dtype(e) == MK_ST_F32 ? 4 : 2; }

static int write_hf_config(mk_exec_t *e, const char *dir)
{
    static const char *const torch_dtype[] = {"float32", "bfloat16", "float16"};
    char path[4352], cfg[1024];
    if (mkdir(dir, 0777) < 0 && errno != EEXIST) return mk_error_set("--save-hf: cannot create '%s': %s", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/config.json", dir);
    mk_hf_config_json(e->g, cfg, sizeof cfg);
    size_t len = strlen(cfg); /* the object's last '}' gives way to transformers' torch_dtype */
    if (len < 2 || cfg[len - 1] != '}' || len + 32 > sizeof cfg) return mk_error_set("config.json: internal error");
    snprintf(cfg + len - 1, sizeof cfg - (len - 1), ",\"torch_dtype\":\"%s\"}", torch_dtype[hf_dtype(e)]);
    mk_file_out_t o;
    FILE *f = mk_file_begin(&o, path, "Hugging Face config");
    if (!f) return -1;
    if (fprintf(f, "%s\n", cfg) < 0) return mk_file_abort(&o), mk_error_set("cannot write %s", path);
    return mk_file_commit(&o);
}

/* ---- --save-hf DIR: config.json, then the shards --------------------- */

/* Hugging Face's default max_shard_size, "5GB" (transformers'
 * save_pretrained; huggingface_hub counts 1 GB as 10^9 bytes). */
#define MK_HF_SHARD_BYTES 5000000000LL

static int64_t shard_max(const mk_exec_t *e)
{
    return e->o->hf_max_shard_bytes > 0 ? e->o->hf_max_shard_bytes : MK_HF_SHARD_BYTES;
}

/* huggingface_hub's split_state_dict_into_shards_factory: the tensors in
 * order, a new shard when the next would take the current one past max
 * (a tensor larger than max alone in one).  of[k] = tensor k's; returns
 * the count. */
static int plan_shards(const mk_gpt_t *g, int64_t max, int64_t esz, int *of)
{
    int n = 0;
    int64_t cur = 0;
    for (int k = 0; k < mk_hf_n_canon(g); k++) {
        int64_t sz = (int64_t)mk_gpt_full_size(&g->t[k]) * esz;
        if (cur > 0 && cur + sz > max) n++, cur = 0;
        of[k] = n, cur += sz;
    }
    return n + 1;
}

/* model.safetensors alone, else model-0000i-of-0000n.safetensors (1-based). */
static void shard_name(int i, int n, char *buf, size_t len)
{
    if (n == 1) snprintf(buf, len, "model.safetensors");
    else snprintf(buf, len, "model-%05d-of-%05d.safetensors", i + 1, n);
}

int mk_hf_layout_ok(const mk_exec_t *e, const char *dir)
{
    int nc = mk_hf_n_canon(e->g), *of = malloc((nc > 0 ? (size_t)nc : 1) * sizeof *of);
    if (!of) return mk_error_set("out of memory");
    int n = plan_shards(e->g, shard_max(e), hf_elem_bytes(e), of);
    free(of);
    const char *other = n == 1 ? "model.safetensors.index.json" : "model.safetensors";
    char p[4352];
    snprintf(p, sizeof p, "%s/%s", dir, other);
    if (access(p, F_OK) == 0)
        return mk_error_set("--save-hf %s: it holds %s, and this model saves %s: Hugging Face's loaders would read "
                            "one or the other; remove it or give another directory", dir, other,
                            n == 1 ? "model.safetensors" : "shards with an index");
    return 0;
}

static mk_st_writer_t *begin_shard(mk_exec_t *e, const char *dir, const mk_hf_out_t *o, int i)
{
    int nc = mk_hf_n_canon(e->g), m = 0;
    mk_st_tensor_t *tab = calloc(nc > 0 ? (size_t)nc : 1, sizeof *tab);
    if (!tab) return mk_error_set("out of memory"), NULL;
    for (int k = 0; k < nc; k++)
        if (o->of[k] == i) mk_hf_entry(e->g, k, 0, &tab[m]), tab[m++].dtype = hf_dtype(e);
    char name[64], path[4352];
    shard_name(i, o->n, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    const char *keys[] = {"format"}, *vals[] = {"pt"};
    mk_st_writer_t *w = mk_st_writer_begin(path, tab, m, keys, vals, 1);
    free(tab);
    return w;
}

int mk_hf_save_begin(mk_exec_t *e, const char *dir, mk_hf_out_t *o)
{
    int nc = mk_hf_n_canon(e->g);
    memset(o, 0, sizeof *o);
    if (write_hf_config(e, dir) < 0) return -1;
    if (!(o->of = malloc((nc > 0 ? (size_t)nc : 1) * sizeof *o->of))) return mk_error_set("out of memory");
    int n = plan_shards(e->g, shard_max(e), hf_elem_bytes(e), o->of);
    if (!(o->w = calloc((size_t)n, sizeof *o->w))) return mk_hf_save_abort(o), mk_error_set("out of memory");
    o->n = n;
    for (int i = 0; i < n; i++)
        if (!(o->w[i] = begin_shard(e, dir, o, i))) return mk_hf_save_abort(o), -1;
    return 0;
}

int mk_hf_save_put(mk_hf_out_t *o, int k, const float *data, size_t n)
{
    return mk_st_writer_put(o->w[o->of ? o->of[k] : 0], data, n);
}

/* model.safetensors.index.json: metadata.total_size (the tensors' bytes)
 * and weight_map (tensor -> shard), as save_pretrained writes it. */
static int write_index(const mk_exec_t *e, const char *dir, const mk_hf_out_t *o)
{
    json_t *map = json_object(), *j = NULL;
    double total = 0;
    for (int k = 0; map && k < mk_hf_n_canon(e->g); k++) {
        mk_st_tensor_t d;
        char name[64];
        mk_hf_entry(e->g, k, 0, &d);
        shard_name(o->of[k], o->n, name, sizeof name);
        total += (double)mk_gpt_full_size(&e->g->t[k]) * (double)hf_elem_bytes(e);
        if (json_object_set_new(map, d.name, json_string(name)) < 0) json_decref(map), map = NULL;
    }
    if (map) j = json_pack("{s:{s:I}, s:o}", "metadata", "total_size", (json_int_t)total, "weight_map", map);
    char p[4352];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    mk_file_out_t f;
    FILE *fp = j ? mk_file_begin(&f, p, "safetensors index") : NULL;
    int rc = !j ? mk_error_set("out of memory") : !fp ? -1
             : json_dumpf(j, fp, JSON_INDENT(2) | JSON_SORT_KEYS) < 0 || fputc('\n', fp) == EOF
                 ? (mk_file_abort(&f), mk_error_set("cannot write %s", p)) : mk_file_commit(&f);
    json_decref(j);
    return rc;
}

int mk_hf_save_commit(const mk_exec_t *e, const char *dir, mk_hf_out_t *o)
{
    int rc = 0;
    for (int i = 0; i < o->n; i++) {
        if (rc == 0 && mk_st_writer_commit(o->w[i]) < 0) rc = -1;
        else if (rc) mk_st_writer_abort(o->w[i]);
        o->w[i] = NULL;
    }
    if (rc == 0 && o->n > 1) rc = write_index(e, dir, o);
    mk_hf_save_abort(o);
    return rc;
}

void mk_hf_save_abort(mk_hf_out_t *o)
{
    for (int i = 0; o->w && i < o->n; i++)
        if (o->w[i]) mk_st_writer_abort(o->w[i]);
    free(o->w), free(o->of);
    memset(o, 0, sizeof *o);
}


const char *mk_hf_shape_str(const mk_st_tensor_t *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* Rank 0: the file fits this model; *has_optim: optimizer state present. */
/* ---- --load DIR: a Hugging Face model as the hub publishes it ---------
 * DIR/config.json (the run's model: the same sizes and architecture) and
 * DIR/model.safetensors, or the shards DIR/model.safetensors.index.json's
 * weight_map names (plain file names in DIR), in F32, BF16 or F16: the
 * weights only, so Adam starts from zero at step 0. */

/* The first field in which the two models differ, or NULL. */
static const char *model_differs(const mk_model_config_t *a, const mk_model_config_t *b)
{
    const struct { const char *name; double x, y; } f[] = {
        {"num_hidden_layers", a->num_layers, b->num_layers}, {"hidden_size", a->hidden, b->hidden},
        {"num_attention_heads", a->heads, b->heads}, {"num_key_value_heads", a->kv_heads, b->kv_heads},
        {"head_dim", mk_model_head_dim(a), mk_model_head_dim(b)}, {"sliding_window", a->window, b->window},
        {"vocab_size", a->vocab, b->vocab}, {"intermediate_size", a->ffn, b->ffn},
        {"normalization", a->norm, b->norm}, {"the MLP", a->swiglu, b->swiglu}, {"positions", a->pos, b->pos},
        {"tie_word_embeddings", a->untied, b->untied}, {"biases", a->bias, b->bias},
        {"q/k/v biases", a->qkv_bias, b->qkv_bias}, {"num_local_experts", a->num_experts, b->num_experts},
        {"num_experts_per_tok", a->moe_topk, b->moe_topk}};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (f[i].x != f[i].y) return f[i].name;
    return NULL;
}

mk_st_reader_t *mk_hf_reader(const mk_hf_src_t *s, const char *tensor)
{
    if (!s->map) return s->r[0];
    const char *file = json_string_value(json_object_get(s->map, tensor));
    for (int i = 0; file && i < s->n; i++)
        if (!strcmp(s->name[i], file)) return s->r[i];
    return NULL;
}

/* Open the shards weight_map names (each once, plain names only). */
static int hf_shards(mk_hf_src_t *s, const char *dir)
{
    char p[4352];
    const char *tensor;
    json_t *v;
    json_object_foreach(s->map, tensor, v) {
        const char *f = json_string_value(v);
        if (!f || !*f || strchr(f, '/') || !strcmp(f, "..") || strlen(f) >= sizeof s->name[0])
            return mk_error_set("%s: weight_map['%s'] must be a file name in the directory", dir, tensor);
        int seen = 0;
        for (int i = 0; i < s->n && !seen; i++) seen = !strcmp(s->name[i], f);
        if (seen) continue;
        if (s->n == MK_HF_MAX_SHARDS) return mk_error_set("%s: more than %d shards", dir, MK_HF_MAX_SHARDS);
        snprintf(p, sizeof p, "%s/%s", dir, f);
        mk_strlcpy(s->name[s->n], f, sizeof s->name[0]);
        if (!(s->r[s->n] = mk_st_open(p))) return -1;
        s->n++;
    }
    return 0;
}

/* Rank 0: the directory's model checked against the run's, its files opened. */
int mk_hf_open(mk_exec_t *e, const char *dir, mk_hf_src_t *s)
{
    mk_model_config_t hf;
    if (mk_hf_dir_model(dir, &hf) < 0) return -1;
    const char *d = model_differs(&hf, &e->o->ctx->plan.model);
    if (d) return mk_error_set("%s: model mismatch: its config.json and this run's model differ in %s", dir, d);
    return mk_hf_dir_files(dir, s);
}

int mk_hf_dir_model(const char *dir, mk_model_config_t *cfg)
{
    mk_model_overrides_t ov;
    mk_model_overrides_init(&ov);
    return mk_model_resolve(dir, &ov, cfg);
}

int mk_hf_dir_files(const char *dir, mk_hf_src_t *s)
{
    char p[4352];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    if (access(p, F_OK) == 0) {
        json_t *idx = mk_json_load(p, "safetensors index");
        s->map = idx ? json_incref(json_object_get(idx, "weight_map")) : NULL;
        json_decref(idx);
        if (!idx) return -1;
        if (!json_is_object(s->map)) return mk_error_set("%s: no weight_map object", p);
        return hf_shards(s, dir);
    }
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    s->n = (s->r[0] = mk_st_open(p)) != NULL;
    return s->n ? 0 : -1;
}

void mk_hf_close(mk_hf_src_t *s)
{
    for (int i = 0; i < s->n; i++) mk_st_close(s->r[i]);
    json_decref(s->map);
    memset(s, 0, sizeof *s);
}

/* Every canonical weight present with its shape (the moments are not). */
int mk_hf_check(mk_exec_t *e, const mk_hf_src_t *s, const char *dir)
{
    for (int k = 0; k < mk_hf_n_canon(e->g); k++) {
        mk_st_tensor_t want;
        mk_hf_entry(e->g, k, 0, &want);
        mk_st_reader_t *r = mk_hf_reader(s, want.name);
        const mk_st_tensor_t *got = r ? mk_st_find(r, want.name) : NULL;
        if (!got) return mk_error_set("%s: tensor '%s' is missing", dir, want.name);
        int same = got->ndim == want.ndim;
        for (int i = 0; same && i < want.ndim; i++) same = got->shape[i] == want.shape[i];
        char a[64], b[64];
        if (!same) return mk_error_set("%s: tensor '%s' has shape %s, want %s", dir, want.name,
                                       mk_hf_shape_str(got, a, sizeof a), mk_hf_shape_str(&want, b, sizeof b));
    }
    return 0;
}


