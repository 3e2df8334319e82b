/* Built-in families: GPT (pre-norm decoder, causal, tied LM head), Llama
 * (the same decoder with RMSNorm, grouped K/V heads, rotary positions,
 * SwiGLU, an untied head, no biases and no dropout: Hugging Face
 * LlamaForCausalLM) and BERT (post-norm encoder, bidirectional, MLM head
 * tied to the word embedding).  The architecture fields of the config
 * (model.h) select each part on any family, as Megatron-LM's flags do.
 * Like Megatron-LM, q,k,v are one fused linear (h -> (a + 2*kv)*d, d the
 * head dim: mk_model_head_dim) and so are gate and up (h -> 2f): the same
 * FLOPs and parameters as separate projections.  They emit plain ops; roles and layers come from
 * graph_shard.c. */
#include "merak/graph.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    mk_graph_t *g;
    int block;
    int err;
    int mla;         /* the ops emitted carry the model's MLA dims */
    int shared_head; /* an LM head emitted is the model's (tied to it: no weights of its own) */
} mk_builder_t;

/* "base.idx" into dst (n bytes), cut short as snprintf cuts it: what
 * snprintf("%s.%d") gives for idx >= 0, without its format parsing (a
 * search builds dozens of 126-block graphs: snprintf was 2% of its time). */
static void name_indexed(char *dst, size_t n, const char *base, int idx)
{
    char num[12];
    int k = 0;
    unsigned u = (unsigned)idx;
    do num[k++] = (char)('0' + u % 10), u /= 10;
    while (u);
    size_t i = 0;
    for (; base[i] && i + 1 < n; i++) dst[i] = base[i];
    if (i + 1 < n) dst[i++] = '.';
    while (k > 0 && i + 1 < n) dst[i++] = num[--k];
    dst[i] = '\0';
}

/* Append an op; returns its index (or -1 after the first error). */
static int emit_op(mk_builder_t *b, mk_opkind_t kind, const char *name, int in0, int in1, int width,
                   int bias)
{
    if (b->err) return -1;
    mk_op_t o;
    memset(&o, 0, sizeof o);
    o.kind = kind;
    if (b->block >= 0) name_indexed(o.name, sizeof o.name, name, b->block);
    else mk_strlcpy(o.name, name, sizeof o.name);
    o.n_in = kind == MK_OPK_POS_EMBEDDING ? 0 : kind == MK_OPK_ADD ? 2 : 1;
    o.in[0] = in0;
    o.in[1] = in1;
    o.width = width;
    o.block = b->block;
    o.bias = bias;
    o.tied = !b->g->cfg.untied || b->shared_head;
    o.causal = b->g->cfg.family != MK_FAMILY_BERT;
    o.heads = b->g->cfg.heads;
    o.kv_heads = b->g->cfg.kv_heads;
    o.vocab = b->g->cfg.vocab;
    if (b->mla) {
        const mk_model_config_t *c = &b->g->cfg;
        o.q_lora = c->q_lora_rank, o.kv_lora = c->kv_lora_rank, o.qk_dim = c->qk_head_dim;
        o.rope_dim = c->qk_pos_emb_head_dim, o.v_dim = c->v_head_dim;
    }
    if (mk_graph_add_op(b->g, &o) < 0) {
        b->err = 1;
        return -1;
    }
    return b->g->n_ops - 1;
}

/* The experts' op reading the block input y and the router logits. */
static int emit_moe(mk_builder_t *b, int y, int router)
{
    const mk_model_config_t *c = &b->g->cfg;
    mk_op_t o;
    memset(&o, 0, sizeof o);
    o.kind = MK_OPK_MOE;
    name_indexed(o.name, sizeof o.name, "experts", b->block);
    o.n_in = 2;
    o.in[0] = y;
    o.in[1] = router;
    o.block = b->block;
    o.bias = c->bias;
    o.experts = c->num_experts;
    o.topk = c->moe_topk;
    o.ffn = c->moe_ffn;
    o.shared_ffn = c->moe_shared_ffn;
    o.shared_gate = c->moe_shared_gate && c->moe_shared_ffn > 0;
    o.gated = c->swiglu;
    if (mk_graph_add_op(b->g, &o) < 0) {
        b->err = 1;
        return -1;
    }
    return b->g->n_ops - 1;
}

static int emit(mk_builder_t *b, mk_opkind_t kind, const char *name, int in0, int in1, int width)
{
    return emit_op(b, kind, name, in0, in1, width, b->g->cfg.bias);
}

static int norm(mk_builder_t *b, const char *name, int x)
{
    return emit(b, b->g->cfg.norm == MK_NORM_RMSNORM ? MK_OPK_RMSNORM : MK_OPK_LAYERNORM, name, x, 0, 0);
}

static int dropout(mk_builder_t *b, const char *name, int x)
{
    return b->g->opts.dropout ? emit(b, MK_OPK_DROPOUT, name, x, 0, 0) : x;
}

/* Multi-head latent attention (DeepSeek-V2/V3, Megatron-Core's
 * MLASelfAttention): one down-projection h -> [q latent | kv latent |
 * k_pe] (q_a and kv_a fused: every TP rank's), the latents' RMSNorms, the
 * up-projections to the heads' [q | k | v] (column-parallel), RoPE on q's
 * and k's position parts, the core, and the output projection (row). */
static int mla_attention(mk_builder_t *b, int y)
{
    const mk_model_config_t *c = &b->g->cfg;
    int down = emit_op(b, MK_OPK_LINEAR, "mla_down", y, 0, c->q_lora_rank + c->kv_lora_rank + c->qk_pos_emb_head_dim,
                       0);
    b->mla = 1;
    int up = emit(b, MK_OPK_MLA_UP, "mla_up", emit(b, MK_OPK_MLA_NORM, "mla_norm", down, 0, 0), 0, 0);
    int att = emit(b, MK_OPK_ATTENTION, "attn", emit(b, MK_OPK_ROPE, "rope", up, 0, 0), 0, 0);
    b->mla = 0;
    int proj = emit(b, MK_OPK_LINEAR, "proj", att, 0, c->hidden);
    return dropout(b, "attn_drop", proj);
}

/* Attention sub-block on input y (already normalised for pre-norm). */
static int attention(mk_builder_t *b, int y)
{
    const mk_model_config_t *c = &b->g->cfg;
    if (mk_model_is_mla(c)) return mla_attention(b, y);
    int h = c->hidden, d = mk_model_head_dim(c);
    int qkv = emit_op(b, MK_OPK_LINEAR, "qkv", y, 0, (c->heads + 2 * c->kv_heads) * d, c->bias || c->qkv_bias);
    /* Megatron's --qk-layernorm (Qwen3): the model's norm per q and k head, before RoPE */
    if (c->qk_norm) qkv = emit_op(b, MK_OPK_QK_NORM, "qk_norm", qkv, 0, 0, c->norm == MK_NORM_LAYERNORM);
    if (c->pos == MK_POS_ROPE) qkv = emit(b, MK_OPK_ROPE, "rope", qkv, 0, 0);
    int att = emit(b, MK_OPK_ATTENTION, "attn", qkv, 0, 0);
    int proj = emit(b, MK_OPK_LINEAR, "proj", att, 0, h);
    return dropout(b, "attn_drop", proj);
}

/* The MoE layer in place of the MLP: a router linear (h -> E, no bias:
 * Megatron-Core's TopKRouter, HF Mixtral's gate) and the experts' op. */
static int moe(mk_builder_t *b, int y)
{
    const mk_model_config_t *c = &b->g->cfg;
    /* DeepSeek-V3's per-expert score bias (e_score_correction_bias): the router linear's bias */
    int router = emit_op(b, MK_OPK_LINEAR, "router", y, 0, c->num_experts, c->moe_router_bias);
    if (b->err) return -1;
    int e = emit_moe(b, y, router);
    return dropout(b, "mlp_drop", e);
}

static int mlp(mk_builder_t *b, int y)
{
    const mk_model_config_t *c = &b->g->cfg;
    if (mk_model_block_is_moe(c, b->block)) return moe(b, y);
    int act, fc2;
    if (c->swiglu) {
        int gate_up = emit(b, MK_OPK_LINEAR, "gate_up", y, 0, 2 * c->ffn);
        act = emit(b, MK_OPK_SWIGLU, "swiglu", gate_up, 0, 0);
        fc2 = emit(b, MK_OPK_LINEAR, "down", act, 0, c->hidden);
    } else {
        int fc1 = emit(b, MK_OPK_LINEAR, "fc1", y, 0, c->ffn);
        act = emit(b, MK_OPK_GELU, "gelu", fc1, 0, 0);
        fc2 = emit(b, MK_OPK_LINEAR, "fc2", act, 0, c->hidden);
    }
    return dropout(b, "mlp_drop", fc2);
}

static int embeddings(mk_builder_t *b, int bert)
{
    int h = b->g->cfg.hidden;
    int x = emit(b, MK_OPK_EMBEDDING, "wte", MK_GRAPH_INPUT, 0, h);
    if (b->g->cfg.pos == MK_POS_LEARNED) {
        int wpe = emit(b, MK_OPK_POS_EMBEDDING, "wpe", 0, 0, h);
        x = emit(b, MK_OPK_ADD, "embed_add", x, wpe, 0);
    }
    if (bert) {
        int tte = emit(b, MK_OPK_POS_EMBEDDING, "token_type", 0, 0, h);
        if (!b->err) b->g->ops[tte].params = 2.0 * h; /* two segment types, not seq rows */
        x = emit(b, MK_OPK_ADD, "type_add", x, tte, 0);
        x = norm(b, "embed_ln", x);
    }
    return dropout(b, "embed_drop", x);
}

/* Multi-token prediction (DeepSeek-V3 sec. 2.2; Megatron-Core's
 * MultiTokenPredictionLayer), depth d on hidden state h of the one before:
 * the tokens embedded again (the model's table), both normalised, the
 * 2h -> h projection (eh_proj, as its two h -> h halves and their sum:
 * the same weights and FLOPs), one more block, a norm, the model's head
 * and a loss.  Its ops belong to no block (the last stage's, as Megatron
 * places them), named after block L + d. */
static void mtp(mk_builder_t *b, int h)
{
    const mk_model_config_t *c = &b->g->cfg;
    for (int d = 0; d < c->mtp_layers && !b->err; d++) {
        int first = b->g->n_ops;
        b->block = c->num_layers + d; /* its block is MoE or dense as block L + d would be */
        int e = emit(b, MK_OPK_EMBEDDING, "mtp_embed", MK_GRAPH_INPUT, 0, c->hidden);
        if (!b->err) b->g->ops[e].params = 0; /* the model's embedding table */
        int pe = emit_op(b, MK_OPK_LINEAR, "mtp_proj_e", norm(b, "mtp_enorm", e), 0, c->hidden, 0);
        int ph = emit_op(b, MK_OPK_LINEAR, "mtp_proj_h", norm(b, "mtp_hnorm", h), 0, c->hidden, 0);
        int x = emit(b, MK_OPK_ADD, "mtp_join", pe, ph, 0);
        x = emit(b, MK_OPK_ADD, "add1", x, attention(b, norm(b, "ln1", x)), 0);
        h = x = emit(b, MK_OPK_ADD, "add2", x, mlp(b, norm(b, "ln2", x)), 0);
        b->shared_head = 1;
        x = emit_op(b, MK_OPK_LM_HEAD, "mtp_head", norm(b, "mtp_norm", x), 0, 0, 0);
        b->shared_head = 0;
        emit(b, MK_OPK_LOSS, "mtp_loss", x, 0, 0);
        for (int i = first; !b->err && i < b->g->n_ops; i++) b->g->ops[i].block = -1;
    }
    b->block = -1;
}

static void build_gpt(mk_builder_t *b)
{
    const mk_model_config_t *c = &b->g->cfg;
    b->block = -1;
    int x = embeddings(b, 0);
    for (int i = 0; i < c->num_layers; i++) {
        b->block = i;
        int a = attention(b, norm(b, "ln1", x));
        x = emit(b, MK_OPK_ADD, "add1", x, a, 0);
        int m = mlp(b, norm(b, "ln2", x));
        x = emit(b, MK_OPK_ADD, "add2", x, m, 0);
    }
    b->block = -1;
    int h = x;
    x = norm(b, "ln_f", x);
    x = emit_op(b, MK_OPK_LM_HEAD, "lm_head", x, 0, 0, 0);
    emit(b, MK_OPK_LOSS, "loss", x, 0, 0);
    mtp(b, h);
}

static void build_bert(mk_builder_t *b)
{
    const mk_model_config_t *c = &b->g->cfg;
    b->block = -1;
    int x = embeddings(b, 1);
    for (int i = 0; i < c->num_layers; i++) {
        b->block = i;
        x = emit(b, MK_OPK_ADD, "add1", x, attention(b, x), 0);
        x = norm(b, "ln1", x);
        x = emit(b, MK_OPK_ADD, "add2", x, mlp(b, x), 0);
        x = norm(b, "ln2", x);
    }
    b->block = -1;
    x = emit(b, MK_OPK_LINEAR, "mlm_dense", x, 0, c->hidden);
    x = emit(b, MK_OPK_GELU, "mlm_gelu", x, 0, 0);
    x = norm(b, "mlm_ln", x);
    x = emit(b, MK_OPK_LM_HEAD, "mlm_decoder", x, 0, 0);
    emit(b, MK_OPK_LOSS, "loss", x, 0, 0);
}

mk_graph_t *mk_graph_build(const mk_model_config_t *cfg, const mk_graph_opts_t *opts)
{
    if (opts->mbs < 1) return mk_error_set("micro-batch size must be >= 1"), NULL;
    if (cfg->family == MK_FAMILY_CUSTOM) return mk_graph_load_json(cfg, opts);
    if (mk_model_validate(cfg) < 0) return NULL;
    mk_builder_t b = {mk_graph_new(cfg, opts), -1, 0, 0, 0};
    if (!b.g) return mk_error_set("out of memory"), NULL;
    if (cfg->family == MK_FAMILY_LLAMA || cfg->no_dropout) b.g->opts.dropout = 0; /* Llama trains without dropout */
    if (cfg->family == MK_FAMILY_BERT) build_bert(&b);
    else build_gpt(&b);
    if (b.err || mk_graph_finish(b.g) < 0) {
        mk_graph_free(b.g);
        return NULL;
    }
    return b.g;
}
