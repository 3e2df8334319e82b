/* The proxy graph against the closed forms of src/graph/README.md "The model" (Megatron-LM and
 * Korthikanti et al.), vocabulary padding, TP roles and sharding. */
#include "check.h"
#include "merak/checked.h"
#include "merak/cluster.h"
#include "merak/cost.h"
#include "merak/graph.h"
#include "merak/limits.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static mk_graph_t *build(const char *model, int mbs, int tp, mk_dtype_t dt, int dropout)
{
    mk_model_config_t c;
    mk_model_overrides_t ov;
    mk_model_overrides_init(&ov);
    if (mk_model_resolve(model, &ov, &c) < 0) {
        fprintf(stderr, "resolve %s: %s\n", model, mk_error_last());
        exit(1);
    }
    mk_graph_opts_t o = {.mbs = mbs, .dtype = dt, .dropout = dropout, .tp = tp};
    mk_graph_t *g = mk_graph_build(&c, &o);
    if (!g) {
        fprintf(stderr, "build %s: %s\n", model, mk_error_last());
        exit(1);
    }
    return g;
}

static const char *gpt_presets[] = {"gpt-tiny", "gpt2-124m", "gpt-1.5b", "gpt-2.5b",
                                    "gpt-8.3b", "gpt-20b", "gpt-175b"};

static void test_params_and_flops(void)
{
    for (size_t i = 0; i < sizeof gpt_presets / sizeof *gpt_presets; i++) {
        mk_graph_t *g = build(gpt_presets[i], 1, 1, MK_DTYPE_BF16, 1);
        double l = g->cfg.num_layers, h = g->cfg.hidden, V = g->cfg.vocab, s = g->cfg.seq;
        double approx = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h));
        CHECK_REL(mk_graph_params(g), approx + 2 * h, 1e-12, gpt_presets[i]);
        CHECK_REL(mk_graph_params(g), approx, 0.005, gpt_presets[i]);
        for (int B = 8; B <= 512; B *= 64) {
            double f72 = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
            double f96 = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
            CHECK_REL(mk_graph_flops_per_iteration(g, B, 0), f72, 0.005, "flops without recompute");
            CHECK_REL(mk_graph_flops_per_iteration(g, B, 1), f96, 0.005, "flops with recompute");
        }
        mk_graph_free(g);
    }
    mk_graph_t *g = build("gpt-1.5b", 1, 1, MK_DTYPE_FP16, 1);
    CHECK(mk_graph_params(g) == 1557611200.0, "gpt-1.5b params %.0f", mk_graph_params(g));
    mk_graph_free(g);
}

/* Sum of one block's layers' saved bytes. */
static double block_act(const mk_graph_t *g, int block, int tp, int sp, int sel)
{
    double a = 0;
    for (int l = 0; l < g->n_layers; l++)
        if (g->layers[l].block == block) a += mk_layer_act_bytes(g, l, tp, sp, sel);
    return a;
}

static void test_activations(void)
{
    for (size_t i = 0; i < sizeof gpt_presets / sizeof *gpt_presets; i++)
        for (int b = 1; b <= 4; b *= 4) {
            mk_graph_t *g = build(gpt_presets[i], b, 1, MK_DTYPE_FP16, 1);
            double s = g->cfg.seq, h = g->cfg.hidden, a = g->cfg.heads, sbh = s * b * h;
            CHECK_REL(block_act(g, 1, 1, 0, 0), sbh * (34 + 5 * a * s / h), 0.005, "act no TP");
            for (int t = 2; t <= 8; t *= 2) {
                if ((int)a % t) continue;
                CHECK_REL(block_act(g, 1, t, 0, 0), sbh * (10 + 24.0 / t + 5 * a * s / (h * t)), 0.005,
                          "act TP");
                CHECK_REL(block_act(g, 1, t, 0, 1), sbh * (10 + 24.0 / t), 0.005, "act selective");
                CHECK_REL(block_act(g, 1, t, 1, 0), sbh / t * (34 + 5 * a * s / h), 0.005, "act SP");
                CHECK_REL(block_act(g, 1, t, 1, 1), 34 * sbh / t, 0.005, "act SP+selective");
            }
            /* a checkpointed block keeps its input: the attention layer's input */
            for (int l = 0; l < g->n_layers; l++)
                if (g->layers[l].block == 1 && !strcmp(g->layers[l].kind, "attention"))
                    CHECK_REL(mk_layer_ckpt_bytes(g, l, 1, 0), 2 * sbh, 1e-12, "checkpoint bytes");
            mk_graph_free(g);
        }
}

static void test_padding_and_roles(void)
{
    mk_graph_t *g = build("gpt-8.3b", 1, 8, MK_DTYPE_BF16, 1);
    CHECK(mk_model_padded_vocab(&g->cfg, 8) == 51200, "padded vocab %d", mk_model_padded_vocab(&g->cfg, 8));
    int seen = 0;
    for (int i = 0; i < g->n_ops; i++) {
        const mk_op_t *o = &g->ops[i];
        if (o->kind == MK_OPK_EMBEDDING) {
            CHECK(o->params == 50257.0 * 3072, "embedding params use the real vocabulary");
            CHECK(o->vocab == 50257, "embedding shape uses the real vocabulary");
            seen++;
        }
        if (o->kind == MK_OPK_LM_HEAD) {
            CHECK(o->vocab == 50257 && o->width == 50257, "head shape uses the real vocabulary");
            CHECK(o->vocab_padded == 51200, "head computes over the padded vocabulary");
            CHECK_REL(o->fwd_flops, 2.0 * 1024 * 3072 * 51200, 1e-12, "head FLOPs padded");
            seen++;
        }
        const char *n = o->name;
        if (!strncmp(n, "qkv.", 4) || !strncmp(n, "fc1.", 4)) CHECK(o->tp_role == MK_TP_COLUMN, "%s column", n);
        if (!strncmp(n, "proj.", 5) || !strncmp(n, "fc2.", 4)) CHECK(o->tp_role == MK_TP_ROW, "%s row", n);
        if (!strncmp(n, "attn.", 5)) CHECK(o->tp_role == MK_TP_HEADS, "%s heads", n);
        if (!strncmp(n, "gelu.", 5)) CHECK(o->tp_role == MK_TP_SPLIT, "%s split", n);
        if (!strncmp(n, "ln", 2)) CHECK(o->tp_role == MK_TP_REPLICATED, "%s replicated", n);
    }
    CHECK(seen == 2, "embedding and head found");
    mk_graph_free(g);
}

static void test_sharding(void)
{
    mk_graph_t *g = build("gpt-tiny", 2, 1, MK_DTYPE_FP32, 0);
    CHECK(g->n_layers == 2 * 4 + 2, "gpt-tiny layers %d", g->n_layers);
    CHECK(!strcmp(g->layers[0].name, "embedding"), "first layer %s", g->layers[0].name);
    CHECK(!strcmp(g->layers[1].name, "attention.0"), "second layer %s", g->layers[1].name);
    CHECK(!strcmp(g->layers[2].name, "mlp.0"), "third layer %s", g->layers[2].name);
    const mk_layer_t *H = &g->layers[g->n_layers - 1];
    CHECK(!strcmp(H->name, "head") && H->n_ops == 3, "head layer %s with %d ops", H->name, H->n_ops);
    CHECK(g->ops[H->first_op].kind == MK_OPK_LAYERNORM, "head starts with the final norm");
    mk_graph_free(g);

    g = build("bert-large", 1, 1, MK_DTYPE_FP16, 1);
    CHECK(!strcmp(g->layers[0].kind, "embedding") && !strcmp(g->layers[g->n_layers - 1].kind, "head"),
          "bert: embedding ... head");
    int attn = 0;
    for (int l = 0; l < g->n_layers; l++) attn += !strcmp(g->layers[l].kind, "attention");
    CHECK(attn == 24, "bert-large attention layers %d", attn);
    mk_graph_free(g);
}

/* A JSON model: the same graph as the GPT builder without dropout. */
static void test_json_matches_builder(const char *srcdir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/traces/models/gpt-small.json", srcdir);
    mk_graph_t *j = build(path, 2, 1, MK_DTYPE_FP16, 0);
    mk_model_config_t c;
    mk_model_preset("gpt-tiny", &c);
    c.num_layers = 4, c.hidden = 128, c.heads = 4, c.seq = 128, c.vocab = 1000, c.ffn = 512;
    mk_graph_opts_t o = {.mbs = 2, .dtype = MK_DTYPE_FP16, .dropout = 0, .tp = 1};
    mk_graph_t *g = mk_graph_build(&c, &o);
    CHECK(g && j->n_layers == g->n_layers, "json layers %d builder %d", j->n_layers, g ? g->n_layers : -1);
    for (int l = 0; g && l < g->n_layers && l < j->n_layers; l++) {
        CHECK(!strcmp(j->layers[l].kind, g->layers[l].kind), "layer %d kind %s vs %s", l,
              j->layers[l].kind, g->layers[l].kind);
        CHECK_REL(j->layers[l].params, g->layers[l].params, 1e-12, "json params per layer");
        CHECK_REL(j->layers[l].fwd_flops, g->layers[l].fwd_flops, 1e-12, "json flops per layer");
        CHECK_REL(mk_layer_act_bytes(j, l, 2, 0, 0), mk_layer_act_bytes(g, l, 2, 0, 0), 1e-12, "json act");
    }
    mk_graph_free(g);
    mk_graph_free(j);

    snprintf(path, sizeof path, "%s/traces/models/stack.json", srcdir);
    j = build(path, 1, 1, MK_DTYPE_FP16, 0);
    CHECK(j->n_layers == 8, "stack layers %d", j->n_layers);
    for (int l = 1; l < j->n_layers; l++)
        CHECK(j->layers[l].fwd_flops == j->layers[0].fwd_flops &&
              mk_layer_act_bytes(j, l, 1, 0, 0) == mk_layer_act_bytes(j, 0, 1, 0, 0), "stack layers identical");
    mk_graph_free(j);

    /* a skip connection spanning two blocks stays inside one layer */
    snprintf(path, sizeof path, "%s/tests/models/skip2.json", srcdir);
    j = build(path, 1, 1, MK_DTYPE_FP32, 0);
    int a1 = -1, skip = -1;
    for (int i = 0; i < j->n_ops; i++) {
        if (!strcmp(j->ops[i].name, "a_fc1")) a1 = i;
        if (!strcmp(j->ops[i].name, "skip")) skip = i;
    }
    int inside = 0;
    for (int l = 0; l < j->n_layers; l++) {
        const mk_layer_t *L = &j->layers[l];
        inside |= a1 >= L->first_op && skip < L->first_op + L->n_ops;
    }
    CHECK(a1 >= 0 && skip >= 0 && inside, "skip span (ops %d..%d) inside one layer", a1, skip);
    CHECK(j->n_layers == 2, "skip model layers %d (want the span + the next block)", j->n_layers);
    mk_graph_free(j);
}

/* The checked size arithmetic every product of user sizes goes through. */
static void test_checked(void)
{
    int64_t x;
    CHECK(mk_mul_i64(65536, 65536, &x) == 0 && x == 4294967296LL, "65536^2 in 64 bits: %lld", (long long)x);
    CHECK(mk_mul_i64(INT64_MAX / 2 + 1, 2, &x) < 0, "2^63 overflows");
    CHECK(mk_add_i64(INT64_MAX, 1, &x) < 0, "INT64_MAX + 1 overflows");
    CHECK(MK_PROD_WITHIN(100, &x, 2, 5, 10) == 0 && x == 100, "2*5*10 within 100: %lld", (long long)x);
    CHECK(MK_PROD_WITHIN(99, &x, 2, 5, 10) < 0 && x == 100, "2*5*10 above 99, reported %lld", (long long)x);
    CHECK(MK_PROD_WITHIN(INT64_MAX, &x, 1LL << 40, 1LL << 40) < 0 && x == INT64_MAX, "2^80 overflows");
    /* a 2050-layer model at the vocabulary and width maxima still builds */
    mk_model_config_t c;
    mk_model_preset("gpt-tiny", &c);
    c.num_layers = MK_MAX_LAYERS, c.hidden = MK_MAX_HIDDEN, c.ffn = MK_MAX_FFN, c.vocab = MK_MAX_VOCAB;
    c.seq = MK_MAX_SEQ;
    CHECK(mk_model_validate(&c) == 0, "maxima are valid: %s", mk_error_last());
    CHECK(mk_pad_vocab(MK_MAX_VOCAB - 1, MK_MAX_TP) == MK_MAX_VOCAB, "padded vocabulary %d",
          mk_pad_vocab(MK_MAX_VOCAB - 1, MK_MAX_TP));
    c.hidden++;
    CHECK(mk_model_validate(&c) < 0 && strstr(mk_error_last(), "at most"), "hidden above the maximum: %s",
          mk_error_last());
}

/* Twin layers (mk_layer_t.twin): a block's attention and MLP layers are
 * the first block's twins, the ends and the first block have none, a
 * DeepSeek-V3 MoE block is no twin of a dense one, and twins cost the same
 * on a cluster (what the planner and the bound rely on to compute them
 * once). */
static void test_twins(void)
{
    mk_graph_t *g = build("gpt-tiny", 2, 2, MK_DTYPE_BF16, 1);
    int first[2] = {-1, -1}; /* the first attention and MLP layers */
    for (int l = 0; l < g->n_layers; l++) {
        const mk_layer_t *L = &g->layers[l];
        int k = !strcmp(L->kind, "attention") ? 0 : !strcmp(L->kind, "mlp") ? 1 : -1;
        if (k < 0) {
            CHECK(L->twin == -1, "gpt-tiny layer %d (%s): no twin, got %d", l, L->kind, L->twin);
            continue;
        }
        if (first[k] < 0) first[k] = l;
        CHECK(L->twin == (l == first[k] ? -1 : first[k]), "gpt-tiny layer %d (%s): twin %d, want %d", l, L->kind,
              L->twin, l == first[k] ? -1 : first[k]);
    }
    mk_graph_free(g);
    mk_cluster_t c;
    CHECK(mk_cluster_get("dgx-h100", &c) == 0, "dgx-h100");
    g = build("deepseek-v3", 1, 8, MK_DTYPE_BF16, 0);
    int twins = 0;
    for (int l = 0; l < g->n_layers; l++) {
        int t = g->layers[l].twin;
        if (t < 0) continue;
        twins++;
        CHECK(t < l && !strcmp(g->layers[t].kind, g->layers[l].kind) && g->layers[t].params == g->layers[l].params &&
                  g->layers[t].fwd_flops == g->layers[l].fwd_flops,
              "deepseek-v3 layer %d's twin %d is its kind and size", l, t);
        for (int bwd = 0; bwd < 2; bwd++)
            CHECK(mk_cost_layer_compute(&c, g, l, 8, 1, 4096, MK_DTYPE_BF16, bwd) ==
                      mk_cost_layer_compute(&c, g, t, 8, 1, 4096, MK_DTYPE_BF16, bwd),
                  "deepseek-v3 layer %d costs its twin %d's (bwd %d)", l, t, bwd);
    }
    CHECK(twins > g->n_layers / 2, "deepseek-v3: %d of %d layers are twins", twins, g->n_layers);
    mk_graph_free(g);
}

/* Eager element-wise ops (graph.c "Eager element-wise ops"): RMSNorm,
 * RoPE and SwiGLU move 4 dt + 28, 2 dt + 16 and 5 dt bytes an element in
 * 16 bits (fp32: 28, 8, 20) where their fused kernels move 2 dt, 2 dt and
 * 3 dt; every other figure and every other op as fused. */
static void test_eager(void)
{
    static const mk_dtype_t dts[] = {MK_DTYPE_BF16, MK_DTYPE_FP32};
    for (int d = 0; d < 2; d++) {
        mk_model_config_t c;
        mk_model_overrides_t ov;
        mk_model_overrides_init(&ov);
        CHECK(mk_model_resolve("llama-tiny", &ov, &c) == 0, "llama-tiny");
        mk_graph_opts_t o = {.mbs = 2, .dtype = dts[d], .tp = 1}, e = o;
        e.eager = 1;
        mk_graph_t *f = mk_graph_build(&c, &o), *g = mk_graph_build(&c, &e);
        CHECK(f && g && f->n_ops == g->n_ops, "llama-tiny fused and eager graphs");
        double dt = mk_dtype_bytes(dts[d]), up = dt < 4 ? 2 * (dt + 4) : 0;
        int seen[3] = {0, 0, 0};
        for (int i = 0; f && g && i < f->n_ops; i++) {
            const mk_op_t *a = &f->ops[i], *b = &g->ops[i];
            double per = 0, fused = 0; /* bytes an element (of what the op passes over) */
            if (a->kind == MK_OPK_RMSNORM) per = up + 20 + 2 * dt, fused = 2 * dt, seen[0]++;
            if (a->kind == MK_OPK_ROPE) per = up + 8, fused = 2 * dt, seen[1]++;
            if (a->kind == MK_OPK_SWIGLU) per = 5 * dt, fused = 3 * dt, seen[2]++;
            double want = per ? a->bytes_moved / fused * per : a->bytes_moved;
            CHECK(fabs(b->bytes_moved - want) <= 1e-9 * want, "%s (%s): eager moves %g bytes, want %g", a->name,
                  mk_dtype_name(dts[d]), b->bytes_moved, want);
            CHECK(b->vec_flops == a->vec_flops && b->act_rep == a->act_rep && b->params == a->params &&
                      b->fwd_flops == a->fwd_flops,
                  "%s: eager changes only the bytes", a->name);
        }
        CHECK(seen[0] && seen[1] && seen[2], "llama-tiny has RMSNorm, RoPE and SwiGLU ops");
        mk_graph_free(f), mk_graph_free(g);
    }
}

/* The loss's passes (graph.c loss_passes) as each implementation's source
 * makes them, bytes a logit over N x Vp logits, forward and backward:
 * Megatron's unfused vocab-parallel cross entropy cast + 32 and cast + 8,
 * torch's F.cross_entropy cast + 12 and cast + 16, Megatron-Core's fused
 * kernels cast + 16 (fp32: 20) and 4 + dt, TE's 2 dt + 4 and 12 + dt
 * (cast: dt + 4 for a 16-bit head, 0 for fp32); the loss is no one
 * kernel's roofline (bytes_moved 0). */
static void test_loss_passes(void)
{
    static const mk_dtype_t dts[] = {MK_DTYPE_BF16, MK_DTYPE_FP32};
    for (int d = 0; d < 2; d++)
        for (int x = MK_XENT_VOCAB_PARALLEL; x <= MK_XENT_FUSED_TE; x++) {
            mk_model_config_t c;
            mk_model_overrides_t ov;
            mk_model_overrides_init(&ov);
            CHECK(mk_model_resolve("gpt2-124m", &ov, &c) == 0, "gpt2-124m");
            mk_graph_opts_t o = {.mbs = 2, .dtype = dts[d], .tp = 1, .xent = x};
            mk_graph_t *g = mk_graph_build(&c, &o);
            CHECK(g != NULL, "gpt2-124m graph");
            double dt = mk_dtype_bytes(dts[d]), cast = dt < 4 ? dt + 4 : 0;
            double want[4][2] = {{cast + 32, cast + 8}, {cast + 12, cast + 16},
                                 {(cast ? cast : 4) + 16, 4 + dt}, {2 * dt + 4, 12 + dt}};
            int seen = 0;
            for (int i = 0; g && i < g->n_ops; i++) {
                const mk_op_t *l = &g->ops[i];
                if (l->kind != MK_OPK_LOSS) continue;
                double n = 2.0 * c.seq * l->vocab_padded;
                seen++;
                for (int b = 0; b < 2; b++)
                    CHECK(fabs(l->pass_bytes[b] - n * want[x][b]) <= 1e-9 * n * want[x][b],
                          "%s loss (xent %d) pass %d: %g bytes, want %g", mk_dtype_name(dts[d]), x, b,
                          l->pass_bytes[b], n * want[x][b]);
                CHECK(l->bytes_moved == 0, "the loss is no one kernel's roofline: %g bytes", l->bytes_moved);
            }
            CHECK(seen == 1, "gpt2-124m has one loss op");
            mk_graph_free(g);
        }
}

int main(void)
{
    const char *srcdir = getenv("top_srcdir");
    if (!srcdir) srcdir = ".";
    test_params_and_flops();
    test_activations();
    test_padding_and_roles();
    test_sharding();
    test_checked();
    test_twins();
    test_eager();
    test_loss_passes();
    test_json_matches_builder(srcdir);
    CHECK_DONE();
}
