/* The Llama family in the proxy graph: the presets' exact parameter counts
 * and FLOPs (issue 16's closed forms), grouped-query attention, RoPE and
 * SwiGLU shapes, saved activations, TP roles, sharding, the Megatron-LM
 * flags on a GPT preset and the JSON description of llama-tiny. */
#include "check.h"
#include "merak/graph.h"
#include "merak/plan.h"

#include <stdlib.h>
#include <string.h>

static int dropout = 1; /* the graph option (the Llama builder turns it off itself) */

static mk_graph_t *build_cfg(const mk_model_config_t *c, int mbs, int tp)
{
    mk_graph_opts_t o = {.mbs = mbs, .dtype = MK_DTYPE_BF16, .dropout = dropout, .tp = tp};
    mk_graph_t *g = mk_graph_build(c, &o);
    if (!g) {
        fprintf(stderr, "build %s: %s\n", c->name, mk_error_last());
        exit(1);
    }
    return g;
}

static mk_graph_t *build(const char *model, int mbs, int tp)
{
    mk_model_config_t c;
    mk_model_overrides_t ov;
    mk_model_overrides_init(&ov);
    if (mk_model_resolve(model, &ov, &c) < 0) {
        fprintf(stderr, "resolve %s: %s\n", model, mk_error_last());
        exit(1);
    }
    return build_cfg(&c, mbs, tp);
}

static const struct {
    const char *name;
    double params;
} presets[] = {
    {"llama-2-7b", 6738415616.0},   {"llama-2-13b", 13015864320.0}, {"llama-2-70b", 68976648192.0},
    {"llama-3-8b", 8030261248.0},   {"llama-3-70b", 70553706496.0}, {"llama-3.1-405b", 405853388800.0},
};

/* 3*B*s*(2*P_mm + 4*l*s*h), P_mm = l*(2h^2 + 2h*h_kv + 3hf) + hV; full
 * recompute adds one forward of every block: B*s*(2*P_blocks + 4*l*s*h). */
static void test_params_and_flops(void)
{
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) {
        mk_graph_t *g = build(presets[i].name, 1, 1);
        const mk_model_config_t *c = &g->cfg;
        CHECK(mk_graph_params(g) == presets[i].params, "%s params %.0f", c->name, mk_graph_params(g));
        double l = c->num_layers, h = c->hidden, f = c->ffn, V = c->vocab, s = c->seq;
        double hkv = (double)c->kv_heads * (c->hidden / c->heads);
        double blocks = l * (2 * h * h + 2 * h * hkv + 3 * h * f), att = 4 * l * s * h;
        for (int B = 1; B <= 1024; B *= 32) {
            double want = 3 * B * s * (2 * (blocks + h * V) + att);
            CHECK_REL(mk_graph_flops_per_iteration(g, B, 0), want, 1e-12, c->name);
            CHECK_REL(mk_graph_flops_per_iteration(g, B, 1), want + B * s * (2 * blocks + att), 1e-12, c->name);
        }
        mk_graph_free(g);
    }
}

/* Grouped K/V heads: the fused q,k,v is h + 2*kv*d wide, the context h;
 * the attention saves its input (smaller K and V); RoPE keeps the width;
 * SwiGLU halves it; no dropout, no biases, untied head. */
static void test_shapes(void)
{
    mk_graph_t *g = build("llama-3-8b", 2, 1);
    const double N = 2.0 * 8192, dt = 2;
    int qkv = mk_graph_find_op(g, "qkv.0"), rope = mk_graph_find_op(g, "rope.0");
    int att = mk_graph_find_op(g, "attn.0"), sw = mk_graph_find_op(g, "swiglu.0");
    int gu = mk_graph_find_op(g, "gate_up.0"), head = mk_graph_find_op(g, "lm_head");
    CHECK(qkv >= 0 && rope >= 0 && att >= 0 && sw >= 0 && gu >= 0 && head >= 0, "ops present");
    if (qkv < 0 || rope < 0 || att < 0 || sw < 0 || gu < 0 || head < 0) return;
    CHECK(g->ops[qkv].width == 4096 + 2 * 1024 && g->ops[rope].width == 6144, "qkv %d", g->ops[qkv].width);
    CHECK(g->ops[att].width == 4096 && g->ops[att].kv_heads == 8, "attn %d", g->ops[att].width);
    CHECK(g->ops[qkv].params == 4096.0 * 6144, "no bias on qkv");
    CHECK_REL(g->ops[att].act_rep + g->ops[att].act_split, N * 6144 * dt, 1e-15, "attention saves q,k,v");
    CHECK_REL(g->ops[att].act_scores, 32.0 * 8192 * 8192 * 2 * dt, 1e-15, "scores, no dropout mask");
    CHECK(g->ops[rope].act_rep + g->ops[rope].act_split == 0, "rope saves nothing");
    CHECK_REL(g->ops[rope].vec_flops, 3 * N * (4096 + 1024), 1e-15, "rope rotates q and k");
    CHECK(g->ops[gu].width == 2 * 14336 && g->ops[sw].width == 14336, "swiglu halves");
    CHECK(g->ops[head].params == 128256.0 * 4096 && g->tied_rep + g->tied_split == 0, "untied head");
    CHECK(mk_graph_find_op(g, "wpe") < 0 && mk_graph_find_op(g, "attn_drop.0") < 0, "no positions, no dropout");
    mk_graph_free(g);
}

/* Per block with 16-bit types: replicated 8*N*h (two norms' and two
 * column linears' inputs), split 2*N*(2h + 2*h_kv + 3f), scores 2*a*s*s*b. */
static void test_activations(void)
{
    mk_graph_t *g = build("llama-2-70b", 1, 1);
    double s = 4096, N = s, h = 8192, hkv = 1024, f = 28672, a = 64;
    double rep = 8 * N * h, split = 2 * N * (2 * h + 2 * hkv + 3 * f), scores = 2 * a * s * s;
    double got[4] = {0, 0, 0, 0};
    for (int l = 0; l < g->n_layers; l++) {
        if (g->layers[l].block != 1) continue;
        got[0] += mk_layer_act_bytes(g, l, 1, 0, 0);
        got[1] += mk_layer_act_bytes(g, l, 8, 0, 0);
        got[2] += mk_layer_act_bytes(g, l, 8, 0, 1);
        got[3] += mk_layer_act_bytes(g, l, 8, 1, 1);
    }
    CHECK_REL(got[0], rep + split + scores, 1e-12, "block, no TP");
    CHECK_REL(got[1], rep + (split + scores) / 8, 1e-12, "block, tp 8");
    CHECK_REL(got[2], rep + split / 8, 1e-12, "block, tp 8 selective");
    CHECK_REL(got[3], (rep + split) / 8, 1e-12, "block, tp 8 SP selective");
    mk_graph_free(g);
}

static void test_roles_and_sharding(void)
{
    mk_graph_t *g = build("llama-tiny", 1, 2);
    static const struct {
        const char *op;
        mk_tp_role_t role;
    } roles[] = {{"ln1.0", MK_TP_REPLICATED}, {"qkv.0", MK_TP_COLUMN},   {"rope.0", MK_TP_SPLIT},
                 {"attn.0", MK_TP_HEADS},     {"proj.0", MK_TP_ROW},      {"ln2.0", MK_TP_REPLICATED},
                 {"gate_up.0", MK_TP_COLUMN}, {"swiglu.0", MK_TP_SPLIT},  {"down.0", MK_TP_ROW},
                 {"wte", MK_TP_VOCAB},        {"lm_head", MK_TP_VOCAB}};
    for (size_t i = 0; i < sizeof roles / sizeof *roles; i++) {
        int k = mk_graph_find_op(g, roles[i].op);
        CHECK(k >= 0 && g->ops[k].tp_role == roles[i].role, "%s role %s", roles[i].op,
              k >= 0 ? mk_tp_role_name(g->ops[k].tp_role) : "missing");
    }
    CHECK(g->n_layers == 2 + 2 * 4, "layers %d", g->n_layers);
    for (int l = 0; l < g->n_layers; l++) {
        const char *want = l == 0 ? "embedding" : l == g->n_layers - 1 ? "head" : l % 2 ? "attention" : "mlp";
        CHECK(!strcmp(g->layers[l].kind, want), "layer %d is %s, want %s", l, g->layers[l].kind, want);
        if (l > 0 && l < g->n_layers - 1) CHECK(g->layers[l].n_tp_allreduce == 1, "one all-reduce per layer");
    }
    mk_graph_free(g);
    mk_model_config_t c;
    mk_model_preset("llama-3-8b", &c);
    CHECK(mk_model_check_tp(&c, 8) == 0, "tp 8 divides 8 KV heads");
    CHECK(mk_model_check_tp(&c, 16) < 0 && strstr(mk_error_last(), "8 KV heads"), "tp 16: %s", mk_error_last());
}

/* Megatron-LM's flags turn gpt-tiny into llama-tiny (parameters and FLOPs). */
static void test_flags(void)
{
    mk_model_overrides_t ov;
    mk_model_overrides_init(&ov);
    ov.norm = MK_NORM_RMSNORM, ov.swiglu = 1, ov.pos = MK_POS_ROPE, ov.untied = 1, ov.bias = 0;
    ov.group_query_attention = 1, ov.kv_heads = 2, ov.ffn = 192;
    mk_model_config_t c;
    CHECK(mk_model_resolve("gpt-tiny", &ov, &c) == 0, "resolve: %s", mk_error_last());
    mk_graph_t *a = build_cfg(&c, 1, 1), *b = build("llama-tiny", 1, 1);
    CHECK(mk_graph_params(a) == mk_graph_params(b), "params %.0f vs %.0f", mk_graph_params(a), mk_graph_params(b));
    CHECK(mk_graph_flops_per_iteration(a, 8, 1) == mk_graph_flops_per_iteration(b, 8, 1), "flops");
    mk_graph_free(a), mk_graph_free(b);
    mk_model_overrides_init(&ov);
    ov.swiglu = 1, ov.hidden = 96;
    CHECK(mk_model_resolve("gpt-tiny", &ov, &c) == 0 && c.ffn == 256, "swiglu ffn 2/3 of 4h: %d", c.ffn);
    mk_model_overrides_init(&ov);
    ov.heads = 8;
    CHECK(mk_model_resolve("llama-2-7b", &ov, &c) == 0 && c.kv_heads == 8, "MHA stays MHA: %d", c.kv_heads);
    CHECK(mk_model_resolve("llama-3-8b", &ov, &c) == 0 && c.kv_heads == 8, "GQA keeps its groups");
    ov.heads = 12;
    CHECK(mk_model_resolve("llama-3-8b", &ov, &c) < 0 && strstr(mk_error_last(), "does not divide"),
          "groups must divide heads: %s", mk_error_last());
    mk_model_overrides_init(&ov);
    ov.kv_heads = 2;
    CHECK(mk_model_resolve("gpt-tiny", &ov, &c) < 0, "--num-query-groups alone");
}

static void test_json(const char *srcdir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/traces/models/llama-small.json", srcdir);
    dropout = 0; /* a JSON attention takes the option; the description has no dropout */
    mk_graph_t *j = build(path, 2, 1), *g = build("llama-tiny", 2, 1);
    CHECK(j->n_layers == g->n_layers, "layers %d vs %d", j->n_layers, g->n_layers);
    for (int l = 0; l < g->n_layers && l < j->n_layers; l++) {
        CHECK(!strcmp(j->layers[l].kind, g->layers[l].kind), "layer %d kind", l);
        CHECK(j->layers[l].params == g->layers[l].params, "layer %d params", l);
        CHECK(j->layers[l].fwd_flops == g->layers[l].fwd_flops, "layer %d flops", l);
        CHECK(mk_layer_act_bytes(j, l, 2, 0, 0) == mk_layer_act_bytes(g, l, 2, 0, 0), "layer %d act", l);
        CHECK(j->layers[l].bytes_moved == g->layers[l].bytes_moved, "layer %d bytes", l);
    }
    mk_graph_free(j), mk_graph_free(g);
    dropout = 1;
}

/* Issue 36's attention variants on llama-tiny (h 64, 4 heads, 2 KV heads):
 * --kv-channels 24 widens q|k|v to (4 + 2*2)*24 and the context to 96;
 * --qk-layernorm's op keeps the width, holds 2*24 weights whole on every
 * TP rank (params_rep) and saves its q and k input; a sliding window's
 * share of the causal pairs is W(W+1)/2 + (s-W)W over s(s+1)/2. */
static void test_attention_variants(void)
{
    mk_model_config_t c;
    mk_model_overrides_t ov;
    mk_model_overrides_init(&ov);
    ov.kv_channels = 24, ov.qk_norm = 1;
    CHECK(mk_model_resolve("llama-tiny", &ov, &c) == 0, "resolve: %s", mk_error_last());
    mk_graph_t *g = build_cfg(&c, 1, 2);
    int qkv = mk_graph_find_op(g, "qkv.0"), qn = mk_graph_find_op(g, "qk_norm.0"), att = mk_graph_find_op(g, "attn.0");
    int proj = mk_graph_find_op(g, "proj.0");
    CHECK(qkv >= 0 && qn == qkv + 1 && att > qn && proj > att, "qkv, qk_norm, rope, attn, proj in order");
    CHECK(g->ops[qkv].width == 8 * 24 && g->ops[qn].width == 8 * 24 && g->ops[att].width == 96, "widths %d %d %d",
          g->ops[qkv].width, g->ops[qn].width, g->ops[att].width);
    CHECK(g->ops[proj].params == 96.0 * 64, "proj reads a*d = 96");
    CHECK(g->ops[qn].params == 2 * 24 && g->ops[qn].tp_role == MK_TP_SPLIT, "qk_norm params %g", g->ops[qn].params);
    CHECK(g->ops[qn].act_rep + g->ops[qn].act_split == 64.0 * 6 * 24 * 2, "qk_norm saves q and k (bf16)");
    int l = 0;
    while (l + 1 < g->n_layers && g->layers[l + 1].first_op <= qn) l++;
    double rep = 0;
    for (int i = g->layers[l].first_op; i < g->layers[l].first_op + g->layers[l].n_ops; i++)
        if (g->ops[i].tp_role == MK_TP_REPLICATED || g->ops[i].kind == MK_OPK_QK_NORM) rep += g->ops[i].params;
    CHECK(g->layers[l].params_rep == rep && rep >= 48, "the q/k norm weights are replicated over TP");
    mk_graph_free(g);
    mk_model_config_t w = c;
    w.seq = 5, w.window = 2;
    CHECK_REL(mk_model_window_share(&w), (3.0 + 3 * 2) / 15, 1e-15, "window 2 of 5: 9 of 15 pairs");
    w.window = 5;
    CHECK(mk_model_window_share(&w) == 1 && (w.window = 0, mk_model_window_share(&w) == 1), "no window: 1");
}

/* Multi-head latent attention on deepseek-tiny (h 64, 4 heads, q latent
 * 32, kv latent 16, q/k 16 + 8 rotary, v 16): the down-projection
 * 64 x (32+16+8) and the latents' norms every TP rank's, the
 * up-projections 32 x 4*24 + 16 x 4*(16+16) column-parallel, RoPE on
 * 4*8 + 8, the core 2 N s a (24 + 16), the output 4*16 x 64 row-parallel. */
static void test_mla(void)
{
    mk_graph_t *g = build("deepseek-tiny", 1, 2);
    const double N = 64, s = 64;
    static const struct {
        const char *op;
        mk_tp_role_t role;
        double params;
    } ops[] = {{"mla_down.0", MK_TP_REPLICATED, 64.0 * 56}, {"mla_norm.0", MK_TP_REPLICATED, 48},
               {"mla_up.0", MK_TP_COLUMN, 32.0 * 96 + 16.0 * 128}, {"rope.0", MK_TP_SPLIT, 0},
               {"attn.0", MK_TP_HEADS, 0}, {"proj.0", MK_TP_ROW, 64.0 * 64},
               {"router.1", MK_TP_REPLICATED, 64 * 8 + 8}};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        int k = mk_graph_find_op(g, ops[i].op);
        CHECK(k >= 0 && g->ops[k].tp_role == ops[i].role && g->ops[k].params == ops[i].params, "%s: %s, %g params",
              ops[i].op, k >= 0 ? mk_tp_role_name(g->ops[k].tp_role) : "missing", k >= 0 ? g->ops[k].params : -1);
    }
    int up = mk_graph_find_op(g, "mla_up.0"), att = mk_graph_find_op(g, "attn.0"), rope = mk_graph_find_op(g, "rope.0");
    CHECK(g->ops[up].width == 4 * (2 * 24 + 16) && g->ops[att].width == 4 * 16, "q|k|v %d, context %d",
          g->ops[up].width, g->ops[att].width);
    CHECK(g->ops[up].fwd_flops == 2 * N * (32.0 * 96 + 16.0 * 128), "up-projection FLOPs");
    CHECK(g->ops[att].fwd_flops == 2 * N * s * 4 * (24 + 16), "core FLOPs %g", g->ops[att].fwd_flops);
    CHECK(g->ops[rope].vec_flops == 3 * N * (4 * 8 + 8), "rope on q_pe and k_pe");
    CHECK(g->ops[att].act_rep + g->ops[att].act_split == N * 4 * 64 * 2, "the core saves q|k|v (bf16)");
    mk_graph_free(g);
}

/* Multi-token prediction on deepseek-tiny: a depth adds its join (two
 * norms of 64 and the 2h -> h projection, 2*64*64 + 2*64), one block like
 * the last (MoE), a final norm, and the model's head again (no weights,
 * 2 N h V FLOPs), in layers of no block after the main head: the uniform
 * split puts them on the last stage. */
static void test_mtp(void)
{
    mk_model_config_t c;
    mk_model_overrides_t ov;
    mk_model_overrides_init(&ov);
    ov.mtp_layers = 1;
    CHECK(mk_model_resolve("deepseek-tiny", &ov, &c) == 0, "resolve: %s", mk_error_last());
    mk_graph_t *g = build_cfg(&c, 1, 1), *g0 = build("deepseek-tiny", 1, 1);
    double block = 0, head_f = 0;
    for (int l = 0; l < g0->n_layers; l++) {
        if (g0->layers[l].block == 3) block += g0->layers[l].params;
        if (!strcmp(g0->layers[l].kind, "head")) head_f = g0->layers[l].fwd_flops;
    }
    CHECK(mk_graph_params(g) - mk_graph_params(g0) == 2.0 * 64 * 64 + 2 * 64 + block + 64, "MTP adds %g parameters",
          mk_graph_params(g) - mk_graph_params(g0));
    int n0 = g0->n_layers, heads = 0;
    CHECK(g->n_layers == n0 + 4 && !strcmp(g->layers[n0].kind, "mtp"), "4 layers after the main head (%d)",
          g->n_layers - n0);
    for (int l = n0; l < g->n_layers; l++) {
        CHECK(g->layers[l].block == -1, "MTP layer %d in no block", l);
        if (strcmp(g->layers[l].kind, "head")) continue;
        heads++;
        CHECK(g->layers[l].fwd_flops == head_f, "the shared head's FLOPs (%g, want %g)", g->layers[l].fwd_flops, head_f);
    }
    CHECK(heads == 1 && g->layers[g->n_layers - 1].params == 64, "its head layer: the norm's 64 weights only");
    mk_plan_t p;
    mk_plan_init(&p);
    p.pp = 2, p.vpp = 1;
    CHECK(mk_plan_partition_uniform(&p, g) == 0 && p.bounds[1] < n0, "pp 2: the MTP layers on the last stage (%d)",
          p.bounds[1]);
    mk_graph_free(g), mk_graph_free(g0);
}

int main(void)
{
    const char *srcdir = getenv("top_srcdir");
    if (!srcdir) srcdir = ".";
    test_params_and_flops();
    test_shapes();
    test_activations();
    test_roles_and_sharding();
    test_flags();
    test_attention_variants();
    test_mla();
    test_mtp();
    test_json(srcdir);
    CHECK_DONE();
}
