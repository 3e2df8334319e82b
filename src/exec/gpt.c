/* GPT and Llama parameter layout, sharding and initialisation (see merak/gpt.h). */
#include "config.h"
#include "merak/gpt.h"
#include "exec/gpt_moe.h"
#include "exec/gpt_mla.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *fmt;
    int rows, cols, split_dim, parts;
    float std;
} tdesc_t;

/* Append one tensor of layer l (full shape, split, init). */
static void add_tensor(mk_gpt_t *g, int l, int blk, const tdesc_t *d)
{
    mk_gpt_tensor_t *t = &g->t[g->n_tensors];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, d->fmt, blk);
    t->id = g->n_tensors++;
    t->layer = l;
    t->rows = d->rows;
    t->cols = d->cols;
    t->real_rows = d->rows;
    t->split_dim = g->tp > 1 ? d->split_dim : -1;
    t->parts = d->parts;
    t->lrows = t->split_dim == 0 ? d->rows / g->tp : d->rows;
    t->lcols = t->split_dim == 1 ? d->cols / g->tp : d->cols;
    t->init_std = d->std;
    /* matrices decay, vectors do not (Megatron's rule: 2-D weights); Qwen2-MoE's shared-expert gate is a
       (1, C) matrix */
    t->decay = d->rows > 1 || strstr(d->fmt, "shared_expert_gate.weight") != NULL;
    t->expert = -1;
    t->fp32 = strstr(d->fmt, "e_score_correction_bias") != NULL;
}

/* One model from its tensor lists: embedding, each block's attention and
 * MLP (fmt takes the block), head; the vocabulary tensors (the first and,
 * untied, the head's last) have V real rows of the padded Vp. */
typedef struct {
    const tdesc_t *emb, *attn, *mlp, *head, *moe;
    int ne, na, nm, nh, nmoe;  /* moe: an MoE block's MLP (mk_model_block_is_moe), nmoe tensors, */
    int moe_dense;             /* the first moe_dense not experts' (then 3 per expert) */
} tlist_t;

static void build_from(mk_gpt_t *g, const tlist_t *d)
{
    g->first[0] = 0;
    for (int i = 0; i < d->ne; i++) add_tensor(g, 0, 0, &d->emb[i]);
    g->t[0].real_rows = g->V;
    for (int b = 0; b < g->L; b++) {
        g->first[1 + 2 * b] = g->n_tensors;
        for (int i = 0; i < d->na; i++) add_tensor(g, 1 + 2 * b, b, &d->attn[i]);
        g->first[2 + 2 * b] = g->n_tensors;
        int moe = d->moe && mk_model_block_is_moe(&g->cfg, b);
        for (int i = 0; i < (moe ? d->nmoe : d->nm); i++) {
            add_tensor(g, 2 + 2 * b, b, moe ? &d->moe[i] : &d->mlp[i]);
            if (moe && i >= d->moe_dense) g->t[g->n_tensors - 1].expert = (i - d->moe_dense) / 3;
        }
    }
    g->first[g->n_layers - 1] = g->n_tensors;
    for (int i = 0; i < d->nh; i++) add_tensor(g, g->n_layers - 1, 0, &d->head[i]);
    if (d->head[d->nh - 1].rows == g->Vp) g->t[g->n_tensors - 1].real_rows = g->V;
}

/* An MoE block's MLP layer (src/exec/gpt_moe.c relies on this order): the
 * norm, the router (E, C), DeepSeek-V3's score bias (E; updated by the
 * load, not by its gradient: gpt_moe.c), the shared expert (width Fs, every token: gate,
 * up, down) under DeepSeek-V2/V3's names (mlp.shared_experts.*_proj;
 * Mixtral has none), then per expert j w1 (gate, F x C), w3 (up) and w2
 * (down, C x F): Hugging Face Mixtral's names; the gate|up pairs are
 * consecutive, one stacked GEMM.  The experts come last, so the layer's
 * dense tensors are one range and an EP rank's experts another.  Expert
 * tensor parallelism is 1 (Megatron's default): all replicated on the TP
 * ranks.  Returns the list (names in *names). */
static tdesc_t *moe_tensors(const mk_gpt_t *g, char (**names)[64], int *n)
{
    int C = g->C, F = g->Fe, Fs = g->Fs, k = 0, rb = g->cfg.moe_router_bias;
    float s = 0.02f;
    int sg = g->cfg.moe_shared_gate, q2 = sg; /* Qwen2-MoE: mlp.shared_expert.*, its gate after it */
    *n = 2 + rb + 3 * g->E + (Fs ? 3 : 0) + sg;
    tdesc_t *d = calloc(*n, sizeof *d);
    *names = calloc(*n, sizeof **names);
    static const char *const w[3] = {"w1", "w3", "w2"}, *const sh[3] = {"gate_proj", "up_proj", "down_proj"};
    /* Qwen3-MoE's names (Qwen3MoeSparseMoeBlock) and DeepSeek's (DeepseekV3MoE), else Mixtral's */
    int qwen = g->cfg.qk_norm || g->mla || rb || q2;
    d[k++] = (tdesc_t){"model.layers.%d.post_attention_layernorm.weight", 1, C, -1, 1, -1};
    d[k++] = (tdesc_t){qwen ? "model.layers.%d.mlp.gate.weight" : "model.layers.%d.block_sparse_moe.gate.weight", g->E,
                       C, -1, 1, s};
    if (rb) d[k++] = (tdesc_t){"model.layers.%d.mlp.gate.e_score_correction_bias", 1, g->E, -1, 1, 0};
    for (int i = 0; Fs && i < 3; i++, k++) {
        snprintf((*names)[k], 64, "model.layers.%%d.mlp.shared_expert%s.%s.weight", q2 ? "" : "s", sh[i]);
        d[k] = (tdesc_t){(*names)[k], i < 2 ? Fs : C, i < 2 ? C : Fs, -1, 1, s};
    }
    if (sg) d[k++] = (tdesc_t){"model.layers.%d.mlp.shared_expert_gate.weight", 1, C, -1, 1, s};
    for (int j = 0; j < g->E; j++)
        for (int i = 0; i < 3; i++, k++) {
            if (qwen) snprintf((*names)[k], 64, "model.layers.%%d.mlp.experts.%d.%s.weight", j, sh[i]);
            else snprintf((*names)[k], 64, "model.layers.%%d.block_sparse_moe.experts.%d.%s.weight", j, w[i]);
            d[k] = (tdesc_t){(*names)[k], i < 2 ? F : C, i < 2 ? C : F, -1, 1, s};
        }
    return d;
}

/* DeepSeek-V2/V3's attention (DeepseekV3Attention's names): the q and kv
 * down-projections and their latent norms every TP rank's whole (their
 * gradients made equal on every rank: gpt_mla.c), the up-projections split
 * by heads (a head's rows are consecutive), o_proj by its input columns. */
static int mla_tensors(const mk_gpt_t *g, tdesc_t *attn)
{
    int C = g->C, H = g->NH;
    float s = 0.02f;
    const tdesc_t d[] = {{"model.layers.%d.input_layernorm.weight", 1, C, -1, 1, -1},
                         {"model.layers.%d.self_attn.q_a_proj.weight", g->ql, C, -1, 1, s},
                         {"model.layers.%d.self_attn.q_a_layernorm.weight", 1, g->ql, -1, 1, -1},
                         {"model.layers.%d.self_attn.q_b_proj.weight", H * g->hs, g->ql, 0, 1, s},
                         {"model.layers.%d.self_attn.kv_a_proj_with_mqa.weight", g->kl + g->rp, C, -1, 1, s},
                         {"model.layers.%d.self_attn.kv_a_layernorm.weight", 1, g->kl, -1, 1, -1},
                         {"model.layers.%d.self_attn.kv_b_proj.weight", H * (g->qk + g->vd), g->kl, 0, 1, s},
                         {"model.layers.%d.self_attn.o_proj.weight", C, H * g->vd, 1, 1, s}};
    memcpy(attn, d, sizeof d);
    return (int)(sizeof d / sizeof *d);
}

/* Llama (Hugging Face names): q, k, v and gate, up column-parallel (each
 * split by rows on its own, so a rank's q|k|v and gate|up shards lie
 * next to each other: one GEMM each), o and down row-parallel; every
 * matrix normal(0, 0.02) (Hugging Face's initializer_range), norms ones.
 * An untied head has its own lm_head (vocabulary-parallel). */
static void build_llama_tensors(mk_gpt_t *g)
{
    int C = g->C, F = g->F, Q = g->NH * g->hs, K = g->KV * g->hs;
    float s = 0.02f;
    tdesc_t emb[] = {{"model.embed_tokens.weight", g->Vp, C, 0, 1, s}};
    /* after v: Qwen2's q/k/v biases (zeros, as its _init_weights; a rank's three slices lie next to each
       other, one stacked bias for its stacked q|k|v: gpt_layers.c tix), Qwen3's q/k norms (ones, every
       TP rank's whole), then o */
    const tdesc_t all[] = {{"model.layers.%d.input_layernorm.weight", 1, C, -1, 1, -1},
                           {"model.layers.%d.self_attn.q_proj.weight", Q, C, 0, 1, s},
                           {"model.layers.%d.self_attn.k_proj.weight", K, C, 0, 1, s},
                           {"model.layers.%d.self_attn.v_proj.weight", K, C, 0, 1, s},
                           {"model.layers.%d.self_attn.q_proj.bias", 1, Q, 1, 1, 0},
                           {"model.layers.%d.self_attn.k_proj.bias", 1, K, 1, 1, 0},
                           {"model.layers.%d.self_attn.v_proj.bias", 1, K, 1, 1, 0},
                           {"model.layers.%d.self_attn.q_norm.weight", 1, g->hs, -1, 1, -1},
                           {"model.layers.%d.self_attn.k_norm.weight", 1, g->hs, -1, 1, -1},
                           {"model.layers.%d.self_attn.o_proj.weight", C, Q, 1, 1, s}};
    tdesc_t attn[10];
    int na = 0;
    if (g->mla) na = mla_tensors(g, attn);
    for (int i = 0; !g->mla && i < 10; i++)
        if ((i < 4 || i == 9) || (i < 7 ? g->cfg.qkv_bias : g->cfg.qk_norm)) attn[na++] = all[i];
    tdesc_t mlp[] = {{"model.layers.%d.post_attention_layernorm.weight", 1, C, -1, 1, -1},
                     {"model.layers.%d.mlp.gate_proj.weight", F, C, 0, 1, s},
                     {"model.layers.%d.mlp.up_proj.weight", F, C, 0, 1, s},
                     {"model.layers.%d.mlp.down_proj.weight", C, F, 1, 1, s}};
    tdesc_t head[] = {{"model.norm.weight", 1, C, -1, 1, -1}, {"lm_head.weight", g->Vp, C, 0, 1, s}};
    tlist_t d = {emb, attn, mlp, head, NULL, 1, na, 4, g->cfg.untied ? 2 : 1, 0,
                 2 + g->cfg.moe_router_bias + (g->Fs ? 3 : 0) + g->cfg.moe_shared_gate};
    char (*names)[64] = NULL;
    tdesc_t *moe = g->E ? moe_tensors(g, &names, &d.nmoe) : NULL;
    d.moe = moe;
    build_from(g, &d);
    free(moe);
    free(names);
}

static void build_tensors(mk_gpt_t *g)
{
    int C = g->C, F = g->F;
    float s = 0.02f, sp = 0.02f / sqrtf(2.0f * g->L);
    tdesc_t emb[] = {{"transformer.wte.weight", g->Vp, C, 0, 1, s},
                     {"transformer.wpe.weight", g->T, C, -1, 1, s}};
    tdesc_t attn[] = {{"transformer.h.%d.ln_1.weight", 1, C, -1, 1, -1},
                      {"transformer.h.%d.ln_1.bias", 1, C, -1, 1, 0},
                      {"transformer.h.%d.attn.c_attn.weight", 3 * C, C, 0, 3, s},
                      {"transformer.h.%d.attn.c_attn.bias", 1, 3 * C, 1, 3, 0},
                      {"transformer.h.%d.attn.c_proj.weight", C, C, 1, 1, sp},
                      {"transformer.h.%d.attn.c_proj.bias", 1, C, -1, 1, 0}};
    tdesc_t mlp[] = {{"transformer.h.%d.ln_2.weight", 1, C, -1, 1, -1},
                     {"transformer.h.%d.ln_2.bias", 1, C, -1, 1, 0},
                     {"transformer.h.%d.mlp.c_fc.weight", F, C, 0, 1, s},
                     {"transformer.h.%d.mlp.c_fc.bias", 1, F, 1, 1, 0},
                     {"transformer.h.%d.mlp.c_proj.weight", C, F, 1, 1, sp},
                     {"transformer.h.%d.mlp.c_proj.bias", 1, C, -1, 1, 0}};
    tdesc_t head[] = {{"transformer.ln_f.weight", 1, C, -1, 1, -1},
                      {"transformer.ln_f.bias", 1, C, -1, 1, 0}};
    tlist_t d = {emb, attn, mlp, head, NULL, 2, 6, 6, 2, 0, 0};
    build_from(g, &d);
}

/* The head's own copy of wte when the embedding lives on another stage. */
static void add_tied_copy(mk_gpt_t *g)
{
    mk_gpt_tensor_t *t = &g->t[g->n_tensors++];
    *t = g->t[0];
    snprintf(t->name, sizeof t->name, "lm_head.weight");
    t->layer = g->n_layers - 1;
    t->tied_copy = 1;
}

static int alloc_block(mk_gpt_t *g, mk_gpt_run_t *run)
{
    size_t n = g->n_params ? g->n_params : 1;
    float **dst[4] = {&g->params, &g->grads, &g->m, &g->v};
    for (int i = 0; i < 4; i++) {
        *dst[i] = g->be->alloc(g->be->ctx, n * sizeof(float));
        if (!*dst[i]) return mk_error_set("out of memory for %zu parameters", n);
    }
    if (run) {
        run->mem_cur += 4 * n * sizeof(float);
        if (run->mem_cur > run->mem_peak) run->mem_peak = run->mem_cur;
    }
    return 0;
}

int mk_gpt_n_layers(const mk_model_config_t *cfg)
{
    return 2 * cfg->num_layers + 2;
}

/* The block the executor builds: 0 the GPT's (LayerNorm, GELU, learned
 * positions, biases, tied head, MHA), 1 the Llama family's (RMSNorm,
 * SwiGLU, RoPE, no biases; GQA; tied or not); -1 for a mixture. */
int mk_gpt_block_kind(const mk_model_config_t *c)
{
    if (c->family != MK_FAMILY_GPT && c->family != MK_FAMILY_LLAMA)
        return mk_error_set("the executor trains GPT and Llama models only");
    if (c->mtp_layers) /* issue 36: DeepSeek-V3's */
        return mk_error_set("multi-token prediction (DeepSeek-V3's --mtp-num-layers) is for merak sim and merak plan: "
                            "the executor has none");
    if (c->rope_yarn_factor > 0)
        return mk_error_set("YaRN rope_scaling (DeepSeek's) is for merak sim and merak plan: the executor's RoPE "
                            "scales as Llama 3.1's only");
    if (mk_model_is_mla(c) && c->window)
        return mk_error_set("multi-latent attention with a sliding window is for merak sim and merak plan");
    if (c->qk_norm && (c->moe_shared_ffn || c->moe_layer_freq > 1 || c->qkv_bias || c->norm != MK_NORM_RMSNORM))
        return mk_error_set("--qk-layernorm with shared experts, sparse blocks apart, q/k/v biases or LayerNorm is for "
                            "merak sim and merak plan: the executor trains Qwen3's and Qwen3-MoE's blocks");
    if (c->norm == MK_NORM_LAYERNORM && !c->swiglu && c->pos == MK_POS_LEARNED && c->bias && !c->untied &&
        (c->kv_heads == c->heads || c->kv_heads == 0)) {
        if (c->kv_channels) /* its c_attn and c_proj are h wide: GPT-2's layout has no other head dim */
            return mk_error_set("--kv-channels with GPT blocks is for merak sim and merak plan: the executor's GPT "
                                "block (GPT-2's tensors) has heads of hidden / heads");
        if (c->window) /* GPT2Config has no window: its checkpoints could not say it */
            return mk_error_set("a sliding attention window with GPT blocks is for merak sim and merak plan: the "
                                "executor windows Llama-family (Mistral) blocks");
        return 0;
    }
    if (c->qkv_bias && !c->bias && (c->window || (mk_model_is_moe(c) && !c->moe_shared_gate)))
        return mk_error_set("--add-qkv-bias with a sliding window, or with experts but no shared-expert gate, is for "
                            "merak sim and merak plan: the executor trains Qwen2's dense blocks and Qwen2-MoE's");
    if (c->norm == MK_NORM_RMSNORM && c->swiglu && c->pos == MK_POS_ROPE && !c->bias) return 1;
    return mk_error_set("the executor runs GPT blocks (LayerNorm, GELU, learned positions, biases, tied head, "
                        "multi-head) or Llama blocks (RMSNorm, SwiGLU, rotary positions, no biases), "
                        "not a mixture of the two");
}

mk_gpt_t *mk_gpt_new(const mk_model_config_t *cfg, const mk_backend_t *be, int tp, int tp_rank,
                     const int *own, int tied_copy, mk_gpt_run_t *run)
{
    return mk_gpt_new_ep(cfg, be, tp, tp_rank, 1, 0, own, tied_copy, run);
}

/* Whether this rank holds tensor t: its layer's, and of the experts its EP rank's. */
static int holds(const mk_gpt_t *g, const mk_gpt_tensor_t *t, const int *own)
{
    return own[t->layer] != 0 && (t->expert < 0 || t->expert / (g->E / g->ep) == g->ep_rank);
}

mk_gpt_t *mk_gpt_new_ep(const mk_model_config_t *cfg, const mk_backend_t *be, int tp, int tp_rank, int ep,
                        int ep_rank, const int *own, int tied_copy, mk_gpt_run_t *run)
{
    int llama = mk_gpt_block_kind(cfg);
    if (llama < 0 || mk_model_check_tp(cfg, tp) < 0 || mk_gpt_moe_check(cfg, be) < 0) return NULL;
    mk_gpt_t *g = calloc(1, sizeof *g);
    g->cfg = *cfg;
    g->be = be;
    g->tp = tp;
    g->tp_rank = tp_rank;
    g->ep = ep, g->ep_rank = ep_rank;
    g->L = cfg->num_layers; g->C = cfg->hidden; g->T = cfg->seq; g->NH = cfg->heads;
    g->hs = mk_model_head_dim(cfg); g->nh = g->NH / tp;
    if (mk_model_is_mla(cfg))
        g->mla = 1, g->ql = cfg->q_lora_rank, g->kl = cfg->kv_lora_rank, g->qk = cfg->qk_head_dim,
        g->rp = cfg->qk_pos_emb_head_dim, g->vd = cfg->v_head_dim; g->F = cfg->ffn; g->Fl = g->F / tp;
    g->V = cfg->vocab; g->Vp = mk_model_padded_vocab(cfg, tp); g->Vl = g->Vp / tp;
    g->v0 = tp_rank * g->Vl;
    g->llama = llama;
    g->KV = llama && cfg->kv_heads > 0 ? cfg->kv_heads : g->NH;
    g->kv = g->KV / tp;
    g->window = cfg->window > 0 && cfg->window < cfg->seq ? cfg->window : 0;
    g->eps = (float)cfg->norm_eps;
    g->theta = (float)cfg->rope_theta;
    /* the base as the float it always was (the same angles as before the scaling) */
    g->rope = (mk_rope_t){(double)g->theta, cfg->rope_factor, cfg->rope_low_freq, cfg->rope_high_freq,
                          (double)cfg->rope_orig_max_pos};
    if (g->F % tp) { mk_error_set("--tp %d does not divide the MLP width %d", tp, g->F); free(g); return NULL; }
    g->n_layers = mk_gpt_n_layers(cfg);
    if (mk_model_is_moe(cfg)) {
        g->E = cfg->num_experts, g->topk = cfg->moe_topk;
        g->Fe = cfg->moe_ffn > 0 ? cfg->moe_ffn : g->F, g->Fs = cfg->moe_shared_ffn > 0 ? cfg->moe_shared_ffn : 0;
    }
    /* a block at most: attention 8 (q, k, v, their biases or MLA's 7, o, the norm) + 2 q/k norms, the MLP's
       norm, router, score bias, 3 shared, a shared gate and 3 per expert */
    g->t = calloc((17 + 3 * (size_t)g->E) * g->L + 5, sizeof *g->t);
    g->first = calloc(g->n_layers + 1, sizeof *g->first);
    if (llama) build_llama_tensors(g);
    else build_tensors(g);
    if (tied_copy && !cfg->untied) add_tied_copy(g);
    g->first[g->n_layers] = g->n_tensors;
    for (int i = 0; i < g->n_tensors; i++) {
        mk_gpt_tensor_t *t = &g->t[i];
        t->owned = holds(g, t, own);
        if (!t->owned) continue;
        t->off = g->n_params;
        g->n_params += (size_t)t->lrows * t->lcols;
    }
    if (cfg->moe_router_bias && g->E && (!(g->moe_load = calloc((size_t)g->n_layers * g->E, sizeof *g->moe_load)) ||
                                         !(g->moe_bias = calloc((size_t)g->n_layers * g->E, sizeof *g->moe_bias)))) {
        mk_error_set("out of memory");
        mk_gpt_free(g);
        return NULL;
    }
    if ((g->mla && mk_gpt_mla_init(g) < 0) || alloc_block(g, run) < 0) { mk_gpt_free(g); return NULL; }
    return g;
}

void mk_gpt_free(mk_gpt_t *g)
{
    if (!g) return;
    if (g->be) {
        float *p[4] = {g->params, g->grads, g->m, g->v};
        for (int i = 0; i < 4; i++) if (p[i]) g->be->free(g->be->ctx, p[i]);
    }
    free(g->t);
    free(g->first);
    free(g->mla_map);
    free(g->moe_load);
    free(g->moe_bias);
    free(g);
}

int mk_gpt_layer_is_moe(const mk_gpt_t *g, int l)
{
    return g->E > 0 && mk_gpt_layer_kind(g, l) == MK_GPT_MLP && mk_model_block_is_moe(&g->cfg, (l - 2) / 2);
}

mk_gpt_kind_t mk_gpt_layer_kind(const mk_gpt_t *g, int l)
{
    if (l == 0) return MK_GPT_EMBED;
    if (l == g->n_layers - 1) return MK_GPT_HEAD;
    return (l % 2) ? MK_GPT_ATTN : MK_GPT_MLP;
}

/* Map a local index along the split dimension to the full one. */
static long full_along(const mk_gpt_t *g, const mk_gpt_tensor_t *t, int i, int full)
{
    int part_len = full / t->parts, loc = part_len / g->tp;
    return (long)(i / loc) * part_len + (long)g->tp_rank * loc + i % loc;
}

long mk_gpt_full_index(const mk_gpt_t *g, const mk_gpt_tensor_t *t, size_t i)
{
    long r = (long)(i / t->lcols), c = (long)(i % t->lcols);
    if (t->split_dim == 0) r = full_along(g, t, (int)r, t->rows);
    if (t->split_dim == 1) c = full_along(g, t, (int)c, t->cols);
    if (r >= t->real_rows) return -1;
    return r * t->cols + c;
}

size_t mk_gpt_full_size(const mk_gpt_tensor_t *t) { return (size_t)t->real_rows * t->cols; }

/* Counter-based normal: splitmix64 of (seed, tensor, index) -> Box-Muller,
 * so each element's value depends only on its place in the full model. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static float normal_at(uint64_t seed, int id, long idx)
{
    uint64_t h = mix64(mix64(seed * 0x100000001b3ULL + (uint64_t)id) + (uint64_t)idx);
    double u1 = ((h >> 11) + 1.0) / 9007199254740993.0, u2 = (mix64(h) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

void mk_gpt_init_params(mk_gpt_t *g, uint64_t seed)
{
    for (int k = 0; k < g->n_tensors; k++) {
        const mk_gpt_tensor_t *t = &g->t[k];
        if (!t->owned) continue;
        size_t n = (size_t)t->lrows * t->lcols;
        float *p = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) {
            long f = mk_gpt_full_index(g, t, i);
            if (f < 0) p[i] = 0.0f;
            else if (t->init_std > 0) p[i] = t->init_std * normal_at(seed, t->id, f);
            else p[i] = t->init_std < 0 ? 1.0f : 0.0f;
        }
        g->be->copy(g->be->ctx, g->params + t->off, p, n * sizeof(float));
        free(p);
    }
}
