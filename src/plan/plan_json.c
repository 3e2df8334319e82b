/* Plan files: the JSON form of mk_plan_t (documented in traces/README.md).
 * Written to a temporary file and renamed, so an existing plan is never
 * left half-written.  Versioned like the checkpoint metadata: the writer
 * puts "format_version": MK_PLAN_FORMAT_VERSION first; the reader refuses
 * other versions and unknown keys (at every level), so a misspelt field is
 * an error instead of a default.  A file without the key is read as
 * version 1: the releases before versioning wrote exactly version 1's
 * fields. */
#include "merak/jsonio.h"
#include "merak/model_json.h"
#include "merak/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MK_PLAN_FORMAT_VERSION 1

static json_t *model_json(const mk_model_config_t *c)
{
    json_t *m = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i}", "name", c->name, "family",
                          mk_family_name(c->family), "num_layers", c->num_layers, "hidden_size", c->hidden,
                          "num_attention_heads", c->heads, "seq_length", c->seq, "vocab_size", c->vocab,
                          "ffn_hidden_size", c->ffn);
    if (c->family == MK_FAMILY_CUSTOM) json_object_set_new(m, "json_path", json_string(c->json_path));
    /* GPT plan files stay as they were; other architectures say theirs */
    else if (m && (c->family == MK_FAMILY_LLAMA || !mk_model_arch_is_gpt(c)) && mk_model_arch_to_json(c, m) < 0) {
        json_decref(m);
        return NULL;
    }
    return m;
}

static json_t *int_array(const int *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
    return a;
}

json_t *mk_plan_to_json(const mk_plan_t *p)
{
    char rc[48];
    mk_recompute_format(&p->recompute, rc, sizeof rc);
    json_t *j = json_pack(
        "{s:i, s:o, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:s, s:i, s:i, s:b, s:s, s:o}",
        "format_version", MK_PLAN_FORMAT_VERSION, "model", model_json(&p->model), "cluster", p->cluster, "dtype", mk_dtype_name(p->dtype),
        "global_batch_size", p->gbs, "dp", p->dp, "pp", p->pp, "tp", p->tp, "vpp", p->vpp,
        "micro_batch_size", p->mbs, "micro_batches", p->m, "schedule", mk_sched_kind_name(p->schedule),
        "recompute", rc, "tp_overlap", p->tp_overlap, "zero", p->zero, "sequence_parallel", p->seqpar,
        "partition", p->partition, "stage_bounds", int_array(p->bounds, p->n_vstages + 1));
    if (j && p->has_ckpt) json_object_set_new(j, "checkpoint_layers", int_array(p->ckpt, p->n_vstages));
    /* written only when off: absent means on, so files written before the
     * field (and every plan with the default) read and print unchanged */
    if (j && !p->overlap_grad_reduce) json_object_set_new(j, "overlap_grad_reduce", json_false());
    /* likewise only when set (absent: the dtype's default, mk_plan_grad_dtype) */
    if (j && p->grad_reduce_dtype > 0)
        json_object_set_new(j, "grad_reduce_dtype", json_string(mk_dtype_name(mk_plan_grad_dtype(p))));
    /* likewise only when not unfused: absent means the materialised attention
       core (and use_flash_attn, the field before Megatron-Core's name, is read) */
    if (j && p->attention != MK_ATTN_UNFUSED)
        json_object_set_new(j, "attention_backend", json_string(mk_attn_backend_name(p->attention)));
    /* likewise only when given: absent means an even split */
    if (j && p->first_stage_layers)
        json_object_set_new(j, "decoder_first_pipeline_num_layers", json_integer(p->first_stage_layers));
    if (j && p->last_stage_layers)
        json_object_set_new(j, "decoder_last_pipeline_num_layers", json_integer(p->last_stage_layers));
    /* likewise only when on */
    if (j && p->optimizer_offload) json_object_set_new(j, "optimizer_cpu_offload", json_true());
    if (j && p->tp_comm_overlap) json_object_set_new(j, "tp_comm_overlap", json_true());
    if (j && p->overlap_param_gather) json_object_set_new(j, "overlap_param_gather", json_true());
    if (j && p->scatter_gather_p2p) json_object_set_new(j, "scatter_gather_tensors_in_pipeline", json_true());
    if (j && p->cpu_offload_layers) json_object_set_new(j, "cpu_offloading_num_layers", json_integer(p->cpu_offload_layers));
    /* likewise only when off (a ZeRO-3 plan's): absent means prefetched */
    if (j && !p->zero3_prefetch && p->zero == 3) json_object_set_new(j, "zero3_prefetch", json_false());
    /* likewise only when on */
    if (j && p->zero3_per_param && p->zero == 3)
        json_object_set_new(j, "zero3_per_param_collectives", json_true());
    /* likewise only when never: absent means gathered per layer */
    if (j && p->reshard != MK_RESHARD_ALWAYS)
        json_object_set_new(j, "fsdp_reshard_after_forward", json_string(mk_reshard_name(p->reshard)));
    /* likewise only when eager: absent means fused kernels */
    if (j && p->eager) json_object_set_new(j, "elementwise", json_string("eager"));
    /* likewise only when current scaling: absent means delayed */
    if (j && p->fp8_recipe != MK_FP8_DELAYED)
        json_object_set_new(j, "fp8_recipe", json_string(mk_fp8_recipe_name(p->fp8_recipe)));
    /* likewise only when not vocab-parallel: absent means Megatron's unfused loss */
    if (j && p->cross_entropy != MK_XENT_VOCAB_PARALLEL)
        json_object_set_new(j, "cross_entropy", json_string(mk_xent_name(p->cross_entropy)));
    /* likewise only when hybrid: absent means the whole DP group */
    if (j && p->zero_shard) json_object_set_new(j, "zero_shard_size", json_integer(p->zero_shard));
    if (j && p->cp > 1) json_object_set_new(j, "cp", json_integer(p->cp)); /* likewise: absent means 1 */
    if (j && p->cp > 1 && p->cp_comm != MK_CP_COMM_P2P) /* likewise: absent means the ring (p2p) */
        json_object_set_new(j, "cp_comm_type", json_string(mk_cp_comm_name(p->cp_comm)));
    if (j && p->ep > 1) json_object_set_new(j, "ep", json_integer(p->ep)); /* likewise: absent means 1 */
    if (j && p->moe_imbalance != 1.0) json_object_set_new(j, "moe_imbalance", json_real(p->moe_imbalance));
    if (j && p->moe_deepep) json_object_set_new(j, "moe_deepep", json_true()); /* absent: the pairwise all-to-all */
    if (j && p->moe_a2a_overlap) json_object_set_new(j, "moe_a2a_overlap", json_true()); /* absent: none */
    return j;
}

static int need_str(json_t *j, const char *what, const char *key, const char **out)
{
    json_t *v = json_object_get(j, key);
    if (!json_is_string(v)) return mk_error_set("%s: missing string field '%s'", what, key);
    *out = json_string_value(v);
    return 0;
}

/* Model keys: a custom model names its description file, the others may
 * give their architecture (model_json.h). */
static const char *const model_keys[] = {"name", "family", "num_layers", "hidden_size", "num_attention_heads",
                                         "seq_length", "vocab_size", "ffn_hidden_size"};
#define MODEL_NKEYS (sizeof model_keys / sizeof *model_keys)

static int model_keys_check(json_t *m, const char *what, int custom)
{
#define ARCH_MAXKEYS 64 /* room for mk_model_arch_keys (33 with the experts', HF configs' and MLA's) */
    const char *keys[MODEL_NKEYS + ARCH_MAXKEYS + 1] = {NULL};
    memcpy(keys, model_keys, sizeof model_keys);
    const char *const *arch = mk_model_arch_keys();
    size_t i = 0;
    if (custom) keys[MODEL_NKEYS] = "json_path";
    else
        for (; arch[i] && i < ARCH_MAXKEYS; i++) keys[MODEL_NKEYS + i] = arch[i];
    if (!custom && arch[i]) /* never cut short */
        return mk_error_set("%s: the model's keys outgrew ARCH_MAXKEYS", what);
    char where[4200];
    snprintf(where, sizeof where, "%s: model", what);
    return mk_json_only_keys(m, where, keys);
}

static int model_from_json(json_t *m, const char *what, mk_model_config_t *c)
{
    const char *name = NULL, *family = NULL;
    if (!json_is_object(m)) return mk_error_set("%s: field 'model' must be an object", what);
    if (need_str(m, what, "name", &name) < 0 || need_str(m, what, "family", &family) < 0) return -1;
    if (model_keys_check(m, what, !strcmp(family, "custom")) < 0) return -1;
    mk_model_defaults(c);
    mk_strlcpy(c->name, name, sizeof c->name);
    if (!strcmp(family, "custom")) {
        const char *path = NULL;
        if (need_str(m, what, "json_path", &path) < 0) return -1;
        if (mk_graph_json_probe(path, c) < 0) return -1;
        return mk_json_int(m, what, "seq_length", 1, &c->seq);
    }
    if (strcmp(family, "gpt") && strcmp(family, "bert") && strcmp(family, "llama"))
        return mk_error_set("%s: model family '%s' is not gpt, bert, llama or custom", what, family);
    c->family = !strcmp(family, "gpt") ? MK_FAMILY_GPT : !strcmp(family, "bert") ? MK_FAMILY_BERT : MK_FAMILY_LLAMA;
    if (mk_json_int(m, what, "num_layers", 1, &c->num_layers) < 0 ||
        mk_json_int(m, what, "hidden_size", 1, &c->hidden) < 0 ||
        mk_json_int(m, what, "num_attention_heads", 1, &c->heads) < 0 ||
        mk_json_int(m, what, "seq_length", 1, &c->seq) < 0 || mk_json_int(m, what, "vocab_size", 1, &c->vocab) < 0 ||
        mk_json_int(m, what, "ffn_hidden_size", 1, &c->ffn) < 0)
        return -1;
    c->kv_heads = c->heads;
    if (c->family == MK_FAMILY_LLAMA) mk_model_llama_arch(c);
    if (mk_model_arch_from_json(m, what, c) < 0) return -1;
    return mk_model_validate_in(c, what, "model");
}

static int int_list(json_t *j, const char *what, const char *key, int n, int lo, int *out)
{
    json_t *a = json_object_get(j, key);
    if (!json_is_array(a) || (int)json_array_size(a) != n)
        return mk_error_set("%s: field '%s' must be an array of %d integers", what, key, n);
    for (int i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > 1 << 30)
            return mk_error_set("%s: field '%s' must hold integers >= %d", what, key, lo);
        out[i] = (int)json_integer_value(v);
    }
    return 0;
}

/* An optional boolean field: deflt when absent. */
static int opt_bool(json_t *j, const char *what, const char *key, int deflt, int *out)
{
    json_t *v = json_object_get(j, key);
    if (v && !json_is_boolean(v)) return mk_error_set("%s: '%s' must be true or false", what, key);
    *out = v ? json_is_true(v) : deflt;
    return 0;
}

/* grad_reduce_dtype: fp32, bf16 or fp16 (checked against the dtype by
 * mk_plan_check_grad_dtype); absent: the dtype's default. */
static int grad_dtype_from_json(json_t *j, const char *what, mk_plan_t *p)
{
    json_t *v = json_object_get(j, "grad_reduce_dtype");
    mk_dtype_t d;
    if (!v) return 0;
    if (!json_is_string(v) || mk_dtype_parse(json_string_value(v), &d) < 0 || d == MK_DTYPE_FP8)
        return mk_error_set("%s: 'grad_reduce_dtype' must be fp32, bf16 or fp16", what);
    p->grad_reduce_dtype = (int)d + 1;
    return 0;
}

/* attention_backend (Megatron-Core's values), or the older use_flash_attn
 * (true: flash); both must agree; neither: unfused (with cp > 1 flash,
 * mk_plan_from_json: the writer leaves out only unfused, which CP never is). */
static int attention_from_json(json_t *j, const char *what, mk_plan_t *p)
{
    int flash = 0;
    json_t *v = json_object_get(j, "attention_backend");
    if (opt_bool(j, what, "use_flash_attn", 0, &flash) < 0) return -1;
    p->attention = flash ? MK_ATTN_FLASH : MK_ATTN_UNFUSED;
    if (!v) return 0;
    if (!json_is_string(v) || mk_attn_backend_parse(json_string_value(v), &p->attention) < 0)
        return mk_error_set("%s: 'attention_backend' must be flash, fused, unfused or auto", what);
    if (json_object_get(j, "use_flash_attn") && flash != (p->attention == MK_ATTN_FLASH))
        return mk_error_set("%s: 'use_flash_attn' %s and 'attention_backend' %s disagree", what,
                            flash ? "true" : "false", mk_attn_backend_name(p->attention));
    return 0;
}

/* cross_entropy (absent: vocab-parallel), elementwise (absent: fused),
 * fsdp_reshard_after_forward (absent: always), cp_comm_type (absent:
 * p2p) and fp8_recipe (absent: delayed). */
static int xent_from_json(json_t *j, const char *what, mk_plan_t *p)
{
    json_t *v = json_object_get(j, "cross_entropy"), *r = json_object_get(j, "fsdp_reshard_after_forward");
    json_t *cc = json_object_get(j, "cp_comm_type");
    p->cp_comm = MK_CP_COMM_P2P;
    if (cc && (!json_is_string(cc) || mk_cp_comm_parse(json_string_value(cc), &p->cp_comm) < 0))
        return mk_error_set("%s: 'cp_comm_type' must be p2p, allgather or a2a", what);
    p->cross_entropy = MK_XENT_VOCAB_PARALLEL;
    if (v && (!json_is_string(v) || mk_xent_parse(json_string_value(v), &p->cross_entropy) < 0))
        return mk_error_set("%s: 'cross_entropy' must be vocab-parallel, torch, fused or fused-te", what);
    json_t *el = json_object_get(j, "elementwise");
    p->eager = 0;
    if (el && (!json_is_string(el) || mk_elementwise_parse(json_string_value(el), &p->eager) < 0))
        return mk_error_set("%s: 'elementwise' must be fused or eager", what);
    p->reshard = MK_RESHARD_ALWAYS;
    if (r && (!json_is_string(r) || mk_reshard_parse(json_string_value(r), &p->reshard) < 0))
        return mk_error_set("%s: 'fsdp_reshard_after_forward' must be always or never", what);
    json_t *fr = json_object_get(j, "fp8_recipe");
    p->fp8_recipe = MK_FP8_DELAYED;
    if (fr && (!json_is_string(fr) || mk_fp8_recipe_parse(json_string_value(fr), &p->fp8_recipe) < 0))
        return mk_error_set("%s: 'fp8_recipe' must be delayed, tensorwise or torchao", what);
    return 0;
}

/* The version first (a newer file's new keys are not "unknown" but
 * "too new"), then the keys. */
static int plan_version_and_keys(json_t *j, const char *what)
{
    static const char *const keys[] = {"format_version", "model", "cluster", "dtype", "global_batch_size", "dp",
                                       "pp", "tp", "vpp", "micro_batch_size", "micro_batches", "schedule",
                                       "recompute", "tp_overlap", "zero", "sequence_parallel", "partition",
                                       "stage_bounds", "checkpoint_layers", "overlap_grad_reduce", "zero_shard_size", "cp",
                                       "use_flash_attn", "attention_backend", "ep", "moe_imbalance", "moe_deepep", "moe_a2a_overlap", "cross_entropy",
                                       "fsdp_reshard_after_forward", "optimizer_cpu_offload",
                                       "cpu_offloading_num_layers", "decoder_first_pipeline_num_layers",
                                       "decoder_last_pipeline_num_layers", "grad_reduce_dtype", "tp_comm_overlap", "overlap_param_gather", "elementwise",
                                       "cp_comm_type", "fp8_recipe", "zero3_prefetch", "zero3_per_param_collectives",
                                       "scatter_gather_tensors_in_pipeline", NULL};
    json_t *v = json_object_get(j, "format_version");
    if (v && !json_is_integer(v)) return mk_error_set("%s: field 'format_version' must be an integer", what);
    if (v && json_integer_value(v) != MK_PLAN_FORMAT_VERSION)
        return mk_error_set("%s: plan format_version %" JSON_INTEGER_FORMAT " is not supported (this merak reads "
                            "version %d)", what, json_integer_value(v), MK_PLAN_FORMAT_VERSION);
    return mk_json_only_keys(j, what, keys);
}

/* Sizes and their products checked before anything multiplies them
 * (mk_plan_check_sizes), the message naming the file. */
static int plan_sizes(const char *what, mk_plan_t *p)
{
    if (mk_plan_check_sizes(p) == 0) return 0;
    char why[512];
    mk_strlcpy(why, mk_error_last(), sizeof why);
    return mk_error_set("%s: %s", what, why);
}

/* "micro_batches" is derived (gbs / (dp * mbs), p->m after plan_sizes);
 * one that disagrees is refused rather than silently recomputed. */
static int check_micro_batches(json_t *j, const char *what, const mk_plan_t *p)
{
    int m = 0;
    if (!json_object_get(j, "micro_batches")) return 0;
    if (mk_json_int(j, what, "micro_batches", 1, &m) < 0) return -1;
    if (p->m != m)
        return mk_error_set("%s: field 'micro_batches' is %d, but global_batch_size / (dp x micro_batch_size) "
                            "= %d", what, m, p->m);
    return 0;
}

int mk_plan_from_json(json_t *j, const char *what, mk_plan_t *p)
{
    const char *cluster = NULL, *dtype = NULL, *sched = NULL, *rc = NULL, *part = NULL;
    mk_plan_init(p);
    if (!json_is_object(j)) return mk_error_set("%s: a plan must be a JSON object", what);
    if (plan_version_and_keys(j, what) < 0) return -1;
    if (model_from_json(json_object_get(j, "model"), what, &p->model) < 0) return -1;
    if (need_str(j, what, "cluster", &cluster) < 0 || need_str(j, what, "dtype", &dtype) < 0 ||
        need_str(j, what, "schedule", &sched) < 0 || need_str(j, what, "recompute", &rc) < 0 ||
        need_str(j, what, "partition", &part) < 0)
        return -1;
    mk_strlcpy(p->cluster, cluster, sizeof p->cluster);
    static const char *const parts[] = {"uniform", "parameters", "compute", "refine", "explicit"};
    int known = 0;
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) known |= !strcmp(part, parts[i]);
    if (!known)
        return mk_error_set("%s: field 'partition' must be uniform, parameters, compute, refine or explicit, "
                            "not '%s'", what, part);
    mk_strlcpy(p->partition, part, sizeof p->partition);
    if (mk_dtype_parse(dtype, &p->dtype) < 0 || mk_sched_kind_parse(sched, &p->schedule) < 0)
        return mk_error_set("%s: %s", what, mk_error_last());
    if (strcmp(rc, "explicit") && mk_recompute_parse(rc, &p->recompute) < 0)
        return mk_error_set("%s: %s", what, mk_error_last());
    if (!strcmp(rc, "explicit")) p->recompute.kind = MK_RECOMPUTE_EXPLICIT;
    if (opt_bool(j, what, "sequence_parallel", 0, &p->seqpar) < 0 ||
        opt_bool(j, what, "overlap_grad_reduce", 1, &p->overlap_grad_reduce) < 0 ||
        opt_bool(j, what, "zero3_prefetch", 1, &p->zero3_prefetch) < 0 || attention_from_json(j, what, p) < 0 ||
        opt_bool(j, what, "zero3_per_param_collectives", 0, &p->zero3_per_param) < 0 ||
        grad_dtype_from_json(j, what, p) < 0 ||
        xent_from_json(j, what, p) < 0 || opt_bool(j, what, "optimizer_cpu_offload", 0, &p->optimizer_offload) < 0 ||
        opt_bool(j, what, "tp_comm_overlap", 0, &p->tp_comm_overlap) < 0 ||
        opt_bool(j, what, "overlap_param_gather", 0, &p->overlap_param_gather) < 0 ||
        opt_bool(j, what, "scatter_gather_tensors_in_pipeline", 0, &p->scatter_gather_p2p) < 0 ||
        (json_object_get(j, "cpu_offloading_num_layers") &&
         mk_json_int(j, what, "cpu_offloading_num_layers", 0, &p->cpu_offload_layers) < 0) ||
        (json_object_get(j, "decoder_first_pipeline_num_layers") &&
         mk_json_int(j, what, "decoder_first_pipeline_num_layers", 0, &p->first_stage_layers) < 0) ||
        (json_object_get(j, "decoder_last_pipeline_num_layers") &&
         mk_json_int(j, what, "decoder_last_pipeline_num_layers", 0, &p->last_stage_layers) < 0))
        return -1;
    if (mk_json_int(j, what, "global_batch_size", 1, &p->gbs) < 0 || mk_json_int(j, what, "dp", 1, &p->dp) < 0 ||
        mk_json_int(j, what, "pp", 1, &p->pp) < 0 || mk_json_int(j, what, "tp", 1, &p->tp) < 0 ||
        mk_json_int(j, what, "vpp", 1, &p->vpp) < 0 || mk_json_int(j, what, "micro_batch_size", 1, &p->mbs) < 0 ||
        mk_json_int(j, what, "tp_overlap", 0, &p->tp_overlap) < 0 || mk_json_int(j, what, "zero", 0, &p->zero) < 0 ||
        (json_object_get(j, "zero_shard_size") && mk_json_int(j, what, "zero_shard_size", 1, &p->zero_shard) < 0) ||
        (json_object_get(j, "cp") && mk_json_int(j, what, "cp", 1, &p->cp) < 0) ||
        (json_object_get(j, "ep") && mk_json_int(j, what, "ep", 1, &p->ep) < 0) ||
        (json_object_get(j, "moe_imbalance") && mk_json_num(j, what, "moe_imbalance", 1.0, &p->moe_imbalance) < 0) ||
        (json_object_get(j, "moe_deepep") && mk_json_bool(j, what, "moe_deepep", &p->moe_deepep) < 0) ||
        opt_bool(j, what, "moe_a2a_overlap", 0, &p->moe_a2a_overlap) < 0 ||
        plan_sizes(what, p) < 0 || check_micro_batches(j, what, p) < 0)
        return -1;
    if (mk_plan_check_zero3(p) < 0) return mk_error_set("%s: %s", what, mk_error_last());
    if (p->cp > 1 && !json_object_get(j, "attention_backend") && !json_object_get(j, "use_flash_attn"))
        p->attention = MK_ATTN_FLASH; /* files written before CP's rule (mk_plan_attention) */
    /* n_vstages: filled by plan_sizes, within MK_PLAN_MAX_VSTAGES */
    if (int_list(j, what, "stage_bounds", p->n_vstages + 1, 0, p->bounds) < 0) return -1;
    if (json_object_get(j, "checkpoint_layers")) {
        if (int_list(j, what, "checkpoint_layers", p->n_vstages, 0, p->ckpt) < 0) return -1;
        p->has_ckpt = 1;
    } else if (p->recompute.kind == MK_RECOMPUTE_EXPLICIT || p->recompute.kind == MK_RECOMPUTE_AUTO) {
        return mk_error_set("%s: recompute '%s' needs field 'checkpoint_layers'", what, rc);
    }
    return 0;
}

int mk_plan_save(const mk_plan_t *p, const char *path)
{
    json_t *j = mk_plan_to_json(p);
    if (!j) return mk_error_set("cannot encode the plan as JSON");
    int rc = mk_json_save(j, path, "plan file");
    json_decref(j);
    return rc;
}

int mk_plan_load(const char *path, mk_plan_t *p)
{
    json_t *j = mk_json_load(path, "plan file");
    if (!j) return -1;
    int rc = mk_plan_from_json(j, path, p);
    json_decref(j);
    return rc;
}

char *mk_plan_to_json_text(const mk_plan_t *p)
{
    json_t *j = mk_plan_to_json(p);
    char *s = j ? json_dumps(j, JSON_INDENT(1) | JSON_ENSURE_ASCII) : NULL;
    json_decref(j);
    if (!s) mk_error_set("out of memory");
    return s;
}

int mk_plan_from_json_text(const char *text, const char *what, mk_plan_t *p)
{
    json_error_t e;
    json_t *j = json_loads(text ? text : "", JSON_REJECT_DUPLICATES, &e);
    if (!j) return mk_error_set("%s:%d:%d: malformed JSON: %s", what, e.line, e.column, e.text);
    int rc = mk_plan_from_json(j, what, p);
    json_decref(j);
    return rc;
}
