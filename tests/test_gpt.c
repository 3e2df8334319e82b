/* One-rank GPT and Llama (GQA, RoPE, RMSNorm, SwiGLU; untied and tied
 * heads): the backward of the whole model (every layer, through
 * mk_gpt_forward / mk_gpt_backward) against central finite differences of
 * the loss, per tensor along its own gradient direction and along random
 * directions.  fp32 forward, so the tolerance is documented: 1e-2 relative
 * (the loss carries ~1e-7 relative rounding; eps = 1e-2 on weights ~0.02-1).
 * Also: layout-independent initialisation (TP shards slice one tensor). */
#include "config.h"
#include "check.h"
#include "merak/gpt.h"
#include "exec/gpt_moe.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#define B 2

/* a small model of the preset's family; Llama: 2 K/V heads for 4 query heads */
static mk_model_config_t small_cfg(const char *preset)
{
    mk_model_config_t c;
    mk_model_preset(preset, &c);
    c.num_layers = 2; c.hidden = 32; c.heads = 4; c.seq = 8; c.vocab = 50;
    c.ffn = c.family == MK_FAMILY_LLAMA ? 64 : 128;
    if (c.family == MK_FAMILY_LLAMA) c.kv_heads = 2;
    if (c.num_experts) c.moe_ffn = 32;  /* moe-tiny: 4 experts, top-2 */
    return c;
}

static int tok[B * 8], tgt[B * 8];
static uint64_t routes;  /* MoE: a hash of the last forward's top-k choices */
static double margin;    /* MoE: the smallest gap between a k-th and a (k+1)-th probability */

static void hash_routes(mk_gpt_t *g, mk_gpt_run_t *run, mk_gpt_act_t *a)
{
    routes = 1469598103934665603ULL;
    margin = 1;
    for (int l = 0; l < g->n_layers; l++) {
        if (!mk_gpt_layer_is_moe(g, l)) continue;
        const float *pr;
        const int *t = mk_gpt_moe_routes(g, run, &a[l], &pr);
        for (int i = 0; i < B * g->T * g->topk; i++) routes = (routes ^ (uint64_t)t[i]) * 1099511628211ULL;
        for (int n = 0; n < B * g->T; n++) {
            const float *p = pr + (size_t)n * g->E;
            float kth = p[t[(n + 1) * g->topk - 1]], next = 0;
            for (int e = 0; e < g->E; e++) if (p[e] < kth && p[e] > next) next = p[e];
            if (kth - next < margin) margin = kth - next;
        }
    }
}

/* Loss (mean over tokens) of the whole model; grads accumulated when bwd. */
static double run_model(mk_gpt_t *g, mk_gpt_run_t *run, int bwd)
{
    int n = g->n_layers, N = B * g->T;
    mk_gpt_act_t *a = calloc(n, sizeof *a);
    double loss = 0;
    run->aux = 0;
    for (int l = 0; l < n; l++) {
        float *out = l + 1 < n ? mk_gpt_alloc(run, g, (size_t)N * g->C) : NULL;
        mk_gpt_forward(g, run, l, &a[l], tok, tgt, out, l % 2, &loss); /* checkpoint odd layers */
        if (out) a[l + 1].in = out;
    }
    hash_routes(g, run, a);
    if (bwd) {
        float *d1 = mk_gpt_alloc(run, g, (size_t)N * g->C), *d2 = mk_gpt_alloc(run, g, (size_t)N * g->C);
        const float *dout = NULL;
        for (int l = n - 1; l >= 0; l--) {
            float *din = dout == d1 ? d2 : d1;
            /* exercise the zero-bubble split on the blocks */
            if (l > 0 && l < n - 1) {
                mk_gpt_backward(g, run, l, &a[l], MK_BWD_IN, dout, din, tok, tgt);
                mk_gpt_backward(g, run, l, &a[l], MK_BWD_W, dout, din, tok, tgt);
            } else mk_gpt_backward(g, run, l, &a[l], MK_BWD_FULL, dout, din, tok, tgt);
            dout = din;
        }
        mk_gpt_release(run, g, d1, (size_t)N * g->C);
        mk_gpt_release(run, g, d2, (size_t)N * g->C);
    } else
        for (int l = 0; l < n; l++) mk_gpt_act_clear(run, g, l, &a[l]);
    free(a);
    return loss * run->loss_scale + run->aux;  /* MoE: plus the load-balancing losses */
}

static double loss_along(mk_gpt_t *g, mk_gpt_run_t *run, const float *base, const double *dir, double eps)
{
    for (size_t i = 0; i < g->n_params; i++) g->params[i] = (float)(base[i] + eps * dir[i]);
    double L = run_model(g, run, 0);
    memcpy(g->params, base, g->n_params * sizeof(float));
    return L;
}

static void check_direction(mk_gpt_t *g, mk_gpt_run_t *run, const float *base, const double *dir,
                            const char *what)
{
    double an = 0, eps = 1e-2, fd = 0;
    for (size_t i = 0; i < g->n_params; i++) an += g->grads[i] * dir[i];
    /* MoE: routing is piecewise constant; a step that changes a top-k choice
       crosses a discontinuity, so shrink it until both sides route as the
       base point does (dense models: routes stay the empty hash) */
    uint64_t base_routes = routes;
    int same = 0;
    for (;; eps /= 2) {
        double lp = loss_along(g, run, base, dir, eps);
        uint64_t rp = routes;
        fd = (lp - loss_along(g, run, base, dir, -eps)) / (2 * eps);
        if ((same = rp == base_routes && routes == base_routes) || eps < 1e-3) break;
    }
    routes = base_routes;
    CHECK(same, "%s: the routing changes within a step of %g", what, eps);
    if (!same) return;
    /* 2e-6 absolute: the fp32 loss's rounding (~1e-7 of ~4) over the step's 2 eps, which the smallest
       directional derivatives (MLA's latent norms, ~1e-5) come near */
    CHECK(fabs(fd - an) <= 1e-2 * fabs(an) + 2e-6, "%s: analytic %.8g finite-difference %.8g", what, an, fd);
}

/* MoE variants (moe-tiny): shared expert width, DeepSeek's unnormalised
 * top-k, capacity factor, a larger aux coefficient (its gradient visible);
 * mla: DeepSeek's multi-head latent attention (llama-tiny's blocks; v
 * narrower than q/k, so v's padding and o_proj's width are exercised);
 * 2: with deepseek-tiny's experts (sigmoid scores, a score bias, two
 * groups, scaled weights; the sequence-wise balance loss visible);
 * fused: the backend's fused attention (lse kept, scores recomputed);
 * sgate: Qwen2-MoE's sigmoid gate on the shared expert (and its q/k/v biases) */
typedef struct { int shared, pre_softmax; double capacity, aux; int mla, fused, sgate; } moe_var_t;

static void test_fd_moe(const char *preset, int tied, const moe_var_t *v)
{
    mk_model_config_t c = small_cfg(preset);
    if (tied) c.untied = 0;
    if (v) c.moe_shared_ffn = v->shared, c.moe_pre_softmax = v->pre_softmax, c.moe_capacity = v->capacity,
           c.moe_aux_coeff = v->aux;
    if (v && v->mla)
        c.kv_heads = c.heads, c.q_lora_rank = 12, c.kv_lora_rank = 10, c.qk_head_dim = 6, c.qk_pos_emb_head_dim = 4,
        c.v_head_dim = 5;
    if (v && v->mla == 2) c.moe_ffn = 16, c.moe_shared_ffn = 16, c.moe_first_dense = 1;
    if (v && v->sgate) c.moe_shared_gate = 1, c.qkv_bias = 1;
    int own[6] = {1, 1, 1, 1, 1, 1};
    mk_gpt_run_t run;
    memset(&run, 0, sizeof run);
    mk_gpt_t *g = mk_gpt_new(&c, mk_backend_cpu(), 1, 0, own, 0, &run);
    CHECK(g != NULL, "%s", mk_error_last());
    if (!g) return;
    g->fused_attn = v && v->fused;
    mk_gpt_run_init(&run, g, B);
    run.loss_scale = run.grad_scale = 1.0f / (B * g->T);
    for (int i = 0; i < B * g->T; i++) { tok[i] = (i * 7) % c.vocab; tgt[i] = (i * 11 + 3) % c.vocab; }
    /* MoE: a seed whose routing decisions are not near ties (see check_direction) */
    for (uint64_t seed = 7; seed < 107; seed++) {
        mk_gpt_init_params(g, seed);
        run_model(g, &run, 0);
        if (margin > 2e-3) break;
    }
    double L = run_model(g, &run, 1);
    CHECK(L > 3.0 && L < 5.0, "initial loss %g near ln(50) = 3.9", L);
    float *base = malloc(g->n_params * sizeof *base);
    memcpy(base, g->params, g->n_params * sizeof *base);
    double *dir = calloc(g->n_params, sizeof *dir);
    for (int k = 0; k < g->n_tensors; k++) {
        const mk_gpt_tensor_t *t = &g->t[k];
        size_t n = (size_t)t->lrows * t->lcols;
        double nn = 0;
        for (size_t i = 0; i < n; i++) nn += (double)g->grads[t->off + i] * g->grads[t->off + i];
        memset(dir, 0, g->n_params * sizeof *dir);
        for (size_t i = 0; i < n; i++) dir[t->off + i] = g->grads[t->off + i] / sqrt(nn + 1e-30);
        check_direction(g, &run, base, dir, t->name);
    }
    unsigned s = 1;
    for (int rep = 0; rep < 3; rep++) {
        double nn = 0;
        for (size_t i = 0; i < g->n_params; i++) {
            s = s * 1103515245u + 12345u;
            dir[i] = ((s >> 8) & 0xffff) / 32768.0 - 1.0;
            nn += dir[i] * dir[i];
        }
        for (size_t i = 0; i < g->n_params; i++) dir[i] /= sqrt(nn);
        check_direction(g, &run, base, dir, "random direction");
    }
    free(base); free(dir);
    mk_gpt_run_free(&run, g);
    CHECK(run.mem_cur == 4 * g->n_params * sizeof(float), "all activations released (%zu bytes held)",
          run.mem_cur - 4 * g->n_params * sizeof(float));
    mk_gpt_free(g);
}

static void test_fd(const char *preset, int tied) { test_fd_moe(preset, tied, NULL); }

/* TP shards of every tensor are slices of the one-rank tensor. */
static void test_sharded_init(const char *preset)
{
    mk_model_config_t c = small_cfg(preset);
    int own[6] = {1, 1, 1, 1, 1, 1};
    mk_gpt_t *full = mk_gpt_new(&c, mk_backend_cpu(), 1, 0, own, 0, NULL);
    mk_gpt_init_params(full, 3);
    for (int r = 0; r < 2; r++) {
        mk_gpt_t *g = mk_gpt_new(&c, mk_backend_cpu(), 2, r, own, 1, NULL);
        mk_gpt_init_params(g, 3);
        int bad = 0;
        for (int k = 0; k < g->n_tensors; k++) {
            const mk_gpt_tensor_t *t = &g->t[k], *f = &full->t[t->id];
            for (size_t i = 0; i < (size_t)t->lrows * t->lcols; i++) {
                long fi = mk_gpt_full_index(g, t, i);
                float want = fi < 0 ? 0.0f : full->params[f->off + fi];
                bad += g->params[t->off + i] != want;
            }
        }
        CHECK(bad == 0, "tp rank %d: %d elements differ from the one-rank init", r, bad);
        mk_gpt_free(g);
    }
    mk_gpt_free(full);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_sharded_init("gpt-tiny");
    test_sharded_init("llama-tiny");
    test_fd("gpt-tiny", 1);
    test_fd("llama-tiny", 0);
    test_fd("llama-tiny", 1);
    test_sharded_init("moe-tiny");
    test_fd("moe-tiny", 0);
    const moe_var_t vars[] = {{24, 0, 0, 0.5}, {0, 1, 0, 0.5}, {0, 0, 1.0, 0.5}};
    for (int i = 0; i < 3; i++) test_fd_moe("moe-tiny", 0, &vars[i]);
    const moe_var_t mla = {0, 0, 0, 0, 1, 0}, ds = {16, 0, 0, 0.5, 2, 0};
    const moe_var_t fl = {0, 0, 0, 0, 0, 1}, fmla = {0, 0, 0, 0, 1, 1}, q2 = {24, 1, 0, 0.5, 0, 0, 1};
    test_fd_moe("llama-tiny", 0, &mla);
    test_fd_moe("deepseek-tiny", 0, &ds);
    test_fd_moe("gpt-tiny", 1, &fl);
    test_fd_moe("llama-tiny", 0, &fmla);
    test_fd_moe("moe-tiny", 0, &q2);
    MPI_Finalize();
    CHECK_DONE();
}
