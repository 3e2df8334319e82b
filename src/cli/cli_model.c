/* `merak models` and `merak model`: the presets, and one model's layers
 * with parameters, FLOPs and activation bytes. */
#include "config.h"
#include "cli/cli.h"
#include "merak/cluster.h"
#include "merak/graph.h"
#include "merak/model_json.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* merak model: the cluster only gives the default dtype (its 16-bit type). */
static const mk_cli_defaults_t model_defaults = {.model = "gpt-8.3b", .cluster = "rtx3090-pcie", .dtype = -1,
                                                 .gbs = 512};

static const char *models_usage =
    "usage: merak models\n\nList the model and cluster presets.\n";

int mk_cmd_models(int argc, char **argv)
{
    mk_args_t a;
    int rc = mk_args_parse(&a, argc, argv, 0, models_usage, NULL);
    if (rc) return rc < 0 ? MK_EXIT_USAGE : 0;
    if (a.npos) return mk_cli_fail("models", "unexpected argument '%s'", a.pos[0]);
    printf("Models (--model NAME, a path to a JSON description, or a Hugging Face config.json or its directory):\n");
    printf("  %-14s %6s %7s %6s %4s %6s %7s  %6s\n", "name", "blocks", "hidden", "heads", "kv", "seq", "vocab",
           "params");
    for (const char *const *n = mk_model_preset_names(); *n; n++) {
        mk_model_config_t c;
        mk_model_preset(*n, &c);
        mk_graph_opts_t o;
        mk_graph_opts_init(&o);
        mk_graph_t *g = mk_graph_build(&c, &o);
        char np[24];
        mk_fmt_count(np, sizeof np, g ? mk_graph_params(g) : 0.0);
        printf("  %-14s %6d %7d %6d %4d %6d %7d  %6s  %s\n", c.name, c.num_layers, c.hidden, c.heads, c.kv_heads,
               c.seq, c.vocab, np, mk_model_preset_about(*n));
        mk_graph_free(g);
    }
    printf("  (MoE presets: described, simulated, planned, and trained by merak run on the CPU backend)\n");
    printf("\nClusters (--cluster NAME, or a path to a cluster JSON):\n");
    for (const char *const *n = mk_cluster_preset_names(); *n; n++)
        printf("  %-14s %s\n", *n, mk_cluster_preset_about(*n));
    return 0;
}

static const char *model_usage =
    "usage: merak model [--model NAME|FILE.json] [--tp T] [--mbs b] [--gbs B]\n"
    "                   [--dtype fp16|bf16|fp32|fp8] [--json] [model flags]\n\n"
    "Build a model's proxy graph, shard it into layers and print each layer's\n"
    "parameters, FLOPs per micro-batch and activation bytes saved for backward\n"
    "(per tensor-parallel rank), with totals.\n\n"
    "  --model NAME     preset (see 'merak models'), JSON description, or a Hugging Face\n"
    "                   config.json or its directory: gpt2, llama, mistral, mixtral, qwen2\n"
    "                   (default @model@)\n"
    "  --num-layers N --hidden-size H --num-attention-heads A --seq-length S\n"
    "  --vocab-size V --ffn-hidden-size F   override the preset (any order)\n"
    "  --normalization LayerNorm|RMSNorm --swiglu --position-embedding-type\n"
    "  learned_absolute|rope --rotary-base B --use-rope-scaling --rope-scaling-factor F\n"
    "  --group-query-attention\n"
    "  --num-query-groups G --kv-channels D --untie-embeddings-and-output-weights\n"
    "  --disable-bias-linear --add-qkv-bias --qk-layernorm --window-size LEFT,0 --norm-epsilon E\n"
    "  --multi-latent-attention --q-lora-rank R --kv-lora-rank R --qk-head-dim D\n"
    "  --qk-pos-emb-head-dim D --v-head-dim D   DeepSeek's MLA (Megatron-LM's flags)\n"
    "  --mtp-num-layers N   multi-token prediction depths (DeepSeek-V3's)\n"
    "                   the architecture (Megatron-LM's flags)\n"
    "  --num-experts E --moe-router-topk K --moe-ffn-hidden-size F\n"
    "  --moe-shared-expert-intermediate-size F --moe-shared-expert-gate --moe-router-pre-softmax\n"
    "  --moe-router-enable-expert-bias --moe-router-score-function softmax|sigmoid\n"
    "  --moe-router-topk-scaling-factor F --moe-router-num-groups G --moe-router-group-topk K\n"
    "  --moe-aux-loss-coeff C --moe-expert-capacity-factor C --moe-layer-freq N|'([0]*K+[1]*M)'\n"
    "                   mixture of experts (Megatron-LM's flags)\n"
    "  --tp T           tensor-parallel degree (default 1)\n"
    "  --mbs b          micro-batch size in sequences (default 1)\n"
    "  --gbs B          global batch for FLOPs per iteration (default @gbs@)\n"
    "  --dtype D        fp16, bf16, fp32 or fp8 (default: the default cluster's, bf16)\n"
    "  --json           one JSON object on stdout\n";

static json_t *layer_json(const mk_graph_t *g, int l, int tp)
{
    const mk_layer_t *L = &g->layers[l];
    return json_pack("{s:s, s:s, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:i}",
                     "name", L->name, "kind", L->kind, "block", L->block, "params", L->params,
                     "fwd_flops", L->fwd_flops, "bwd_flops", L->bwd_flops,
                     "act_bytes", mk_layer_act_bytes(g, l, tp, 0, 0),
                     "ckpt_bytes", mk_layer_ckpt_bytes(g, l, tp, 0), "out_bytes", L->out_bytes,
                     "first_op", L->first_op, "ops", L->n_ops);
}

static int print_json(const mk_graph_t *g, int tp, int gbs)
{
    const mk_model_config_t *c = &g->cfg;
    json_t *layers = json_array();
    for (int l = 0; l < g->n_layers; l++) json_array_append_new(layers, layer_json(g, l, tp));
    json_t *o = json_pack(
        "{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:f, s:f, s:f, s:o}",
        "name", c->name, "family", mk_family_name(c->family),
        "num_layers", c->num_layers, "hidden_size", c->hidden, "num_attention_heads", c->heads,
        "seq_length", c->seq, "vocab_size", c->vocab, "vocab_padded", mk_model_padded_vocab(c, tp),
        "ffn_hidden_size", c->ffn, "tp", tp, "mbs", g->opts.mbs, "gbs", gbs,
        "dtype", mk_dtype_name(g->opts.dtype), "params", mk_graph_params(g),
        "flops_per_iteration", mk_graph_flops_per_iteration(g, gbs, 0),
        "flops_per_iteration_recompute", mk_graph_flops_per_iteration(g, gbs, 1), "layers", layers);
    if (o) json_object_set_new(o, "active_params", json_real(mk_graph_active_params(g)));
    if (!o || (c->family != MK_FAMILY_CUSTOM && mk_model_arch_to_json(c, o) < 0)) {
        json_decref(o);
        return mk_cli_fail("model", "cannot build the JSON output");
    }
    json_dumpf(o, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    fputc('\n', stdout);
    json_decref(o);
    return 0;
}

static void print_human(const mk_graph_t *g, int tp, int gbs)
{
    const mk_model_config_t *c = &g->cfg;
    printf("model %s: %d blocks, hidden %d, %d heads, seq %d, vocab %d (padded %d at tp %d), ffn %d\n",
           c->name, c->num_layers, c->hidden, c->heads, c->seq, c->vocab,
           mk_model_padded_vocab(c, tp), tp, c->ffn);
    if (c->family != MK_FAMILY_CUSTOM && !mk_model_arch_is_gpt(c))
        printf("architecture: %d KV heads (query groups), head dim %d, %s, %s MLP, %s positions (theta %g), eps %g, "
               "%s head, %s%s\n",
               c->kv_heads, mk_model_head_dim(c), mk_norm_name(c->norm), c->swiglu ? "SwiGLU" : "GELU",
               c->pos == MK_POS_ROPE ? "rotary" : "learned", c->rope_theta, c->norm_eps,
               c->untied ? "untied" : "tied", c->bias ? "biases" : c->qkv_bias ? "biases on QKV only" : "no biases",
               c->qk_norm ? ", q/k norm" : "");
    if (mk_model_is_mla(c))
        printf("multi-latent attention: q latent %d, kv latent %d, q/k head %d + %d rotary, v head %d\n",
               c->q_lora_rank, c->kv_lora_rank, c->qk_head_dim, c->qk_pos_emb_head_dim, c->v_head_dim);
    if (mk_model_is_moe(c))
        printf("experts: %d of width %d, top-%d (%s), shared expert %d%s, aux-loss coefficient %g, %s\n",
               c->num_experts, c->moe_ffn, c->moe_topk,
               c->moe_pre_softmax ? "softmax then top-k, not renormalised" : "top-k renormalised",
               c->moe_shared_ffn, c->moe_shared_gate ? " (sigmoid-gated)" : "", c->moe_aux_coeff,
               c->moe_capacity > 0 ? "capacity-limited" : "dropless");
    if (mk_model_is_moe(c) && (c->moe_score_sigmoid || c->moe_router_bias || c->moe_groups || c->moe_topk_scale))
        printf("router: %s scores%s, %d groups (the best %d), weights x %g\n",
               c->moe_score_sigmoid ? "sigmoid" : "softmax", c->moe_router_bias ? " + expert bias (choosing)" : "",
               c->moe_groups ? c->moe_groups : 1,
               c->moe_groups ? c->moe_group_topk : 1, c->moe_topk_scale > 0 ? c->moe_topk_scale : 1.0);
    printf("micro-batch %d, dtype %s, %d ops in %d layers; per micro-batch, activations per TP rank:\n",
           g->opts.mbs, mk_dtype_name(g->opts.dtype), g->n_ops, g->n_layers);
    printf("  %-16s %-10s %14s %12s %12s %12s\n", "layer", "kind", "params", "fwd GFLOP", "bwd GFLOP",
           "act MiB");
    double act = 0;
    for (int l = 0; l < g->n_layers; l++) {
        const mk_layer_t *L = &g->layers[l];
        double a = mk_layer_act_bytes(g, l, tp, 0, 0);
        act += a;
        if (g->n_layers > 14 && l >= 5 && l < g->n_layers - 5) {
            if (l == 5) printf("  %-16s (%d more layers)\n", "...", g->n_layers - 10);
            continue;
        }
        printf("  %-16s %-10s %14.0f %12.3f %12.3f %12.3f\n", L->name, L->kind, L->params,
               L->fwd_flops / 1e9, L->bwd_flops / 1e9, a / (1 << 20));
    }
    char np[24], ab[24];
    printf("total: %.0f parameters (%s); activations %s per micro-batch per TP rank\n", mk_graph_params(g),
           mk_fmt_count(np, sizeof np, mk_graph_params(g)), mk_fmt_bytes(ab, sizeof ab, act));
    if (mk_model_is_moe(c))
        printf("active: %.0f parameters per token (%s)\n", mk_graph_active_params(g),
               mk_fmt_count(np, sizeof np, mk_graph_active_params(g)));
    printf("FLOPs per iteration (global batch %d, matmuls, non-causal): %.4g without recompute, "
           "%.4g with full recompute\n",
           gbs, mk_graph_flops_per_iteration(g, gbs, 0), mk_graph_flops_per_iteration(g, gbs, 1));
}

int mk_cmd_model(int argc, char **argv)
{
    mk_args_t a;
    int rc = mk_args_parse(&a, argc, argv, MK_OPTG_MODEL | MK_OPTG_BATCH | MK_OPTG_JSON, model_usage,
                           &model_defaults);
    if (rc) return rc < 0 ? MK_EXIT_USAGE : 0;
    if (a.npos) return mk_cli_fail("model", "unexpected argument '%s'", a.pos[0]);
    mk_model_config_t cfg;
    if (mk_args_model(&a, model_defaults.model, &cfg) < 0) return MK_EXIT_USAGE;
    mk_graph_opts_t o;
    mk_graph_opts_init(&o);
    o.tp = a.tp ? a.tp : 1;
    o.mbs = a.mbs ? a.mbs : 1;
    int gbs = a.gbs ? a.gbs : model_defaults.gbs;
    mk_cluster_t cl;
    mk_cluster_get(model_defaults.cluster, &cl);
    o.dtype = mk_cluster_default_dtype(&cl);
    if (a.dtype && mk_dtype_parse(a.dtype, &o.dtype) < 0) return mk_cli_fail("model", "%s", mk_error_last());
    if (mk_model_check_tp(&cfg, o.tp) < 0) return mk_cli_fail("model", "%s", mk_error_last());
    if (gbs % o.mbs)
        return mk_cli_fail("model", "--gbs %d is not a multiple of --mbs %d", gbs, o.mbs);
    mk_graph_t *g = mk_graph_build(&cfg, &o);
    if (!g) return mk_cli_fail("model", "%s", mk_error_last());
    if (a.json) rc = print_json(g, o.tp, gbs);
    else print_human(g, o.tp, gbs);
    mk_graph_free(g);
    return rc;
}
