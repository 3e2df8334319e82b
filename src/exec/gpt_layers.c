/* GPT and Llama layers on one micro-batch: forward, recompute, backward
 * (full, or split into input and weight gradients for zero-bubble
 * schedules), with Megatron tensor parallelism: column-parallel QKV /
 * MLP-up (Llama: q|k|v, gate|up), row-parallel attention-out / MLP-down
 * followed by an all-reduce, heads (and K/V heads) split, and a
 * vocabulary-parallel embedding, LM head and cross-entropy.  A Llama block
 * is the GPT's with RMSNorm for LayerNorm, RoPE on q and k between the
 * QKV GEMM and the attention core, SwiGLU for GELU, no biases.
 * Megatron sequence parallelism (run->sp; Korthikanti et al. 2022, "Reducing
 * Activation Recomputation in Large Transformer Models"): the layer
 * boundaries, norms and residual adds on this rank's N/tp token rows; the
 * norm output all-gathered (AG.sp) before the column-parallel linear, the
 * row-parallel output reduce-scattered (RS.sp) for the all-reduce; backward
 * the conjugates, and the norm weights' gradients (replicated parameters
 * computed on sharded rows) summed over the TP group. */
#include "config.h"
#include "merak/gpt.h"
#include "exec/cp.h"
#include "exec/gpt_moe.h"
#include "exec/gpt_attn.h"
#include "exec/gpt_mla.h"

#include <stdlib.h>
#include <string.h>

#define P(g, k) mk_gpt_param(g, k)
#define G(g, k) mk_gpt_grad(g, k)

/* A block layer's parameters by role, in the GPT's build order (gpt.c):
 * 0 norm weight, 1 norm bias, 2 column-parallel weight, 3 its bias, 4
 * row-parallel weight, 5 its bias.  Llama has no biases (-1) but Qwen2's
 * q/k/v ones, and its q|k|v (and their biases) and gate|up are
 * consecutive tensors, used as one stacked weight (bias). */
static int tix(const mk_gpt_t *g, int l, int role)
{
    if (!g->llama) return g->first[l] + role;
    switch (role) {
    case 0: return g->first[l];
    case 2: return g->first[l] + 1;
    case 3: return g->cfg.qkv_bias && mk_gpt_layer_kind(g, l) == MK_GPT_ATTN ? g->first[l] + 4 : -1;
    case 4: return g->first[l + 1] - 1;
    default: return -1;
    }
}
static float *PN(const mk_gpt_t *g, int k) { return k < 0 ? NULL : P(g, k); }
static float *GN(const mk_gpt_t *g, int k) { return k < 0 ? NULL : G(g, k); }

int mk_gpt_head_weight(const mk_gpt_t *g)
{
    int k = g->first[g->n_layers - 1] + (g->llama ? 1 : 2);
    return k < g->first[g->n_layers] ? k : 0;
}

/* Floats per token row of a block layer's column-parallel output (mid:
 * q|k|v, the MLP's up or gate|up) and of its row-parallel input (inner). */
static size_t mid_w(const mk_gpt_t *g, int l)
{
    if (mk_gpt_layer_kind(g, l) == MK_GPT_ATTN) return (size_t)(g->nh + 2 * g->kv) * g->hs;
    return (size_t)(g->llama ? 2 : 1) * g->Fl;
}
static size_t inner_w(const mk_gpt_t *g, int l)
{
    if (mk_gpt_layer_kind(g, l) != MK_GPT_ATTN) return (size_t)g->Fl;
    return (size_t)g->nh * (g->mla ? g->vd : g->hs); /* MLA: o_proj takes each head's v */
}
size_t mk_gpt_mid_w(const mk_gpt_t *g, int l) { return mid_w(g, l); }
size_t mk_gpt_inner_w(const mk_gpt_t *g, int l) { return inner_w(g, l); }

/* The widest token row of the scratch buffers: s_a, hidden, mid and
 * inner widths and, on the stage that holds the head, the logits (the
 * head's logit gradient: a stage without it would hold a logits-wide
 * buffer it never writes, 51 MB at gpt2-124m's micro-batch of 256
 * tokens, which merak sim rightly does not count); s_b (a block's dmid)
 * without the logits. */
static size_t mid_max(const mk_gpt_t *g)
{
    size_t wide = (size_t)g->C, cand[4] = {mid_w(g, 1), mid_w(g, 2), inner_w(g, 1), inner_w(g, 2)};
    for (int i = 0; i < 4; i++) if (cand[i] > wide) wide = cand[i];
    return wide;
}
static int holds_head(const mk_gpt_t *g)
{
    for (int k = 0; k < g->n_tensors; k++)
        if (g->t[k].layer == g->n_layers - 1 && g->t[k].owned) return 1;
    return 0;
}
static size_t wide_w(const mk_gpt_t *g)
{
    size_t wide = mid_max(g);
    return holds_head(g) && (size_t)g->Vl > wide ? (size_t)g->Vl : wide;
}
size_t mk_gpt_scratch_row(const mk_gpt_t *g, int logits) { return logits ? wide_w(g) : mid_max(g); }

static int tp_reduce(const mk_gpt_t *g, mk_gpt_run_t *run, float *x, int n, int is_max)
{
    if (g->tp == 1) return 0;
    return run->allreduce(run->ctx, x, n, is_max);
}

/* ---- sequence parallelism ---- */
typedef struct parts parts_t;
static int sp_on(const mk_gpt_t *g, const mk_gpt_run_t *run) { return run->sp && g->tp > 1; }

/* Token rows at the layer boundaries on this rank: N, or N/tp with SP. */
static int loc_rows(const mk_gpt_t *g, const mk_gpt_run_t *run)
{
    return run->B * g->T / (sp_on(g, run) ? g->tp : 1);
}

size_t mk_gpt_row_floats(const mk_gpt_t *g, const mk_gpt_run_t *run) { return (size_t)loc_rows(g, run) * g->C; }

/* This rank's (loc_rows, C) shard of full (N, C) <-> full: all-gather
 * (gather) or the reduce-scatter of a partial sum. */
static int sp_coll(const mk_gpt_t *g, mk_gpt_run_t *run, float *full, float *local, int gather)
{
    return run->sp_coll(run->ctx, full, local, loc_rows(g, run) * g->C, gather);
}

/* A layer's output (rows x C) -> the layer boundary: the TP sum in place
 * (all-reduce), or with SP its reduce-scatter to out's N/tp rows. */
static int tp_sum_out(const mk_gpt_t *g, mk_gpt_run_t *run, float *full, float *out)
{
    if (sp_on(g, run)) return sp_coll(g, run, full, out, 0);
    return tp_reduce(g, run, full, run->B * g->T * g->C, 0);
}

/* The internals as runs of floats (split_buf's order), each kept 16-bit
 * or fp32: the norm's output; its statistics (fp32); the column linear's
 * output, the attention's probabilities (fused: its log-sum-exps, fp32)
 * and output (with q/k norms then their input rows and 1/rms, fp32), or
 * the MLP's activation; an MoE layer's, gpt_moe.c's.  The count. */
int mk_gpt_buf_runs(const mk_gpt_t *g, int l, const mk_gpt_run_t *run, mk_gpt_run16_t *s)
{
    size_t N = (size_t)run->B * g->T, n = loc_rows(g, run), att = mk_gpt_att_kept(g, l, run);
    int k = 0;
    if (mk_gpt_layer_is_moe(g, l)) return mk_gpt_moe_runs(g, run, s);
    s[k++] = (mk_gpt_run16_t){n * g->C, 1};
    s[k++] = (mk_gpt_run16_t){2 * n, 0};
    if (mk_gpt_layer_kind(g, l) == MK_GPT_MLP) {
        s[k++] = (mk_gpt_run16_t){N * (mid_w(g, l) + inner_w(g, l)), 1};
        return k;
    }
    s[k++] = (mk_gpt_run16_t){N * mid_w(g, l), 1};
    s[k++] = (mk_gpt_run16_t){att, mk_gpt_att_probs(g) && !mk_gpt_att16(g, run)}; /* 16-bit already: copied */
    s[k++] = (mk_gpt_run16_t){N * inner_w(g, l), 1};
    if (g->mla) return k + mk_gpt_mla_runs(g, run, s + k);       /* p->qk: the MLA internals */
    if (!g->cfg.qk_norm) return k;
    s[k++] = (mk_gpt_run16_t){N * mid_w(g, l), 1};                /* q/k norms' input: the rounded QKV rows */
    s[k++] = (mk_gpt_run16_t){N * ((size_t)g->nh + g->kv), 0};   /* each head's 1/rms */
    return k;
}

/* Pointers into the internals of an attention / MLP / head layer. */
struct parts { float *ln, *mean, *rstd, *x1, *x2, *x3, *qk, *qkr; };

/* SP: the saved norm output (N/tp, C) all-gathered into full (N, C), which
 * p->ln then points to. */
static int ln_full(const mk_gpt_t *g, mk_gpt_run_t *run, parts_t *p, float *full)
{
    float *mine = full + (size_t)g->tp_rank * loc_rows(g, run) * g->C;
    g->be->copy(g->be->ctx, mine, p->ln, (size_t)loc_rows(g, run) * g->C * sizeof(float));
    p->ln = full;
    return sp_coll(g, run, full, mine, 1);
}

static parts_t split_buf(const mk_gpt_t *g, int l, const mk_gpt_run_t *run, float *buf)
{
    size_t B = run->B, N = B * g->T, n = loc_rows(g, run);
    parts_t p;
    p.ln = buf; p.mean = buf + n * g->C; p.rstd = p.mean + n; p.x1 = p.rstd + n;
    p.qk = p.qkr = NULL;
    switch (mk_gpt_layer_kind(g, l)) {
    case MK_GPT_ATTN:
        p.x2 = p.x1 + N * mid_w(g, l), p.x3 = p.x2 + mk_gpt_att_kept(g, l, run);
        p.qk = p.x3 + N * inner_w(g, l), p.qkr = p.qk + N * mid_w(g, l);
        break;
    case MK_GPT_MLP: p.x2 = p.x1 + N * mid_w(g, l); p.x3 = NULL; break;
    default: p.x2 = p.x3 = NULL;
    }
    return p;
}

/* ---- sub-pipelined TP (src/profile/README.md "Sub-pipelined TP in the executor") ----
 * A micro-batch's N = B*T token rows split in two halves: between sequences
 * when B >= 2 (a batch split), else mid-sequence.  Every op but the
 * attention core works row by row, so a half is a row range; the attention
 * core splits only along the batch (with a sequence split the second half's
 * queries read the first half's keys and values, so the core runs whole and
 * the split starts after it).
 *  level 1: forward: the layer up to its row-parallel linear runs whole, then
 *           row(h1), start AR(h1), row(h2), start AR(h2), wait both;
 *           backward: up to the column-parallel input gradient whole, then
 *           dX(h1), start AR(h1), dX(h2), start AR(h2), LN backward of h1
 *           once AR(h1) is done, then of h2.
 *  level 2: the halves run the whole layer as two chains (MLP always,
 *           attention when B >= 2), so AR(h1) hides behind all of h2's
 *           compute; in forward, an attention layer's AR(h2) stays in flight
 *           into its block's MLP, which runs half 1 first (each half's
 *           all-reduce hides behind the other half's compute; the block end
 *           synchronises).  Backward: the chains within each layer.
 * The all-reduces are MPI_Iallreduce progressed by MPI_Test between
 * kernels (tp_poll): MPI progresses only inside MPI calls. */
static int ov_level(const mk_gpt_t *g, const mk_gpt_run_t *run)
{
    if (g->tp == 1 || sp_on(g, run) || run->tp_overlap <= 0 || !run->iallreduce || !run->tp_wait) return 0;
    return run->tp_overlap >= 2 ? 2 : 1;
}

/* Rows of the first half. */
static int half_rows(const mk_gpt_t *g, const mk_gpt_run_t *run)
{
    return run->B >= 2 ? run->B / 2 * g->T : g->T / 2;
}

/* Whether layer l can run as two independent half chains. */
static int chains(const mk_gpt_t *g, const mk_gpt_run_t *run, int l)
{
    return ov_level(g, run) >= 2 && (mk_gpt_layer_kind(g, l) == MK_GPT_MLP || run->B >= 2);
}

static void tp_poll(mk_gpt_run_t *run)
{
    if (run->tp_poll) run->tp_poll(run->ctx);
}

/* Finish an all-reduce left in flight by level 2: wait, add the residual. */
static int settle(const mk_gpt_t *g, mk_gpt_run_t *run)
{
    if (run->defer.h < 0) return 0;
    int h = run->defer.h;
    run->defer.h = -1;
    if (run->tp_wait(run->ctx, h) < 0) return -1;
    size_t o = (size_t)run->defer.r0 * g->C;
    g->be->acc(g->be->ctx, run->defer.out + o, run->defer.in + o, run->defer.n * g->C);
    mk_gpt_round_out(g, run, run->defer.out + o, (size_t)run->defer.n * g->C);
    return 0;
}

/* The block's norm (LayerNorm, or RMSNorm for Llama) of layer l on rows
 * [r0, r0+nr): in -> p->ln, its statistics kept in p->mean, p->rstd. */
static void norm_at(const mk_gpt_t *g, int l, float *ln, float *mean, float *rstd, const float *in, int nr)
{
    const mk_backend_t *be = g->be;
    if (g->llama)
        be->rmsnorm_fwd(be->ctx, ln, rstd, in, P(g, tix(g, l, 0)), g->eps, nr, g->C);
    else
        be->layernorm_fwd(be->ctx, ln, mean, rstd, in, P(g, tix(g, l, 0)), P(g, tix(g, l, 1)), nr, g->C);
}

static void norm_rows(const mk_gpt_t *g, const mk_gpt_run_t *run, int l, parts_t *p, const float *in, int r0,
                      int nr)
{
    size_t C = g->C;
    norm_at(g, l, p->ln + r0 * C, p->mean + r0, p->rstd + r0, in + r0 * C, nr);
    mk_gpt_round_kept(g, l, run, p->ln + r0 * C, (size_t)nr * C);
}

/* The norm of the whole micro-batch into p->ln (N, C); with SP, of this
 * rank's rows into the saved p->ln (N/tp, C), all-gathered into s_d, which
 * p->ln then points to for the linear that follows. */
static int norm_all(const mk_gpt_t *g, mk_gpt_run_t *run, int l, parts_t *p, const float *in)
{
    if (!sp_on(g, run)) {
        norm_rows(g, run, l, p, in, 0, run->B * g->T);
        return 0;
    }
    norm_rows(g, run, l, p, in, 0, loc_rows(g, run));
    return ln_full(g, run, p, run->s_d);
}

/* The norm and the column-parallel part of an attention or MLP layer on
 * rows [r0, r0+nr) (attention: whole sequences, so RoPE's position is the
 * row mod T). */
static void col_rows(mk_gpt_t *g, mk_gpt_run_t *run, int l, parts_t *p, int r0, int nr)
{
    const mk_backend_t *be = g->be;
    size_t C = g->C, Cl = (size_t)g->nh * g->hs, mid = mid_w(g, l);
    int attn = mk_gpt_layer_kind(g, l) == MK_GPT_ATTN;
    if (attn && g->mla) { /* p->qk: the MLA internals (gpt_mla.c) */
        void *att = mk_gpt_att_at(g, run, p->x2, (size_t)(r0 / g->T));
        mk_gpt_mla_fwd(g, run, l, p->ln, p->x1, att, p->x3, p->qk, r0, nr);
        return;
    }
    be->linear_fwd(be->ctx, p->x1 + r0 * mid, p->ln + r0 * C, P(g, tix(g, l, 2)), PN(g, tix(g, l, 3)), nr, (int)C,
                   (int)mid);
    mk_gpt_round_kept(g, l, run, p->x1 + r0 * mid, (size_t)nr * mid);
    if (attn) {
        if (g->cfg.qk_norm) mk_gpt_qk_norm_fwd(g, l, p->x1, p->qk, p->qkr, r0, nr);
        if (g->llama && g->cp > 1)  /* context parallel: global positions, ring attention */
            mk_cp_rope(g, p->x1 + r0 * mid, nr, (int)mid, 1);
        else if (g->llama)  /* q and k heads, in place */
            mk_gpt_rope_rows(g, run, p->x1, r0, nr, (int)mid, 1);
        if (g->llama) mk_gpt_round_kept(g, l, run, p->x1 + r0 * mid, (size_t)nr * mid);
        void *att = mk_gpt_att_at(g, run, mk_gpt_att_dropped(g, l, run) ? run->s_att : p->x2, (size_t)(r0 / g->T));
        if (g->cp > 1) run->cp_attn_fwd(run->ctx, p->x3 + r0 * Cl, att, p->x1 + r0 * mid, nr / g->T);
        else mk_gpt_attn_rows(g, run, p->x3, att, p->x1, NULL, NULL, NULL, r0, nr);
        mk_gpt_att_round(g, l, run, att, (size_t)(nr / g->T));
        mk_gpt_round_kept(g, l, run, p->x3 + r0 * Cl, (size_t)nr * Cl);
    } else if (g->llama) {
        be->swiglu_fwd(be->ctx, p->x2 + r0 * g->Fl, p->x1 + r0 * mid, nr, g->Fl);
        mk_gpt_round_kept(g, l, run, p->x2 + r0 * g->Fl, (size_t)nr * g->Fl);
    } else {
        size_t Fl = g->Fl;
        be->gelu_fwd(be->ctx, p->x2 + r0 * Fl, p->x1 + r0 * Fl, nr * g->Fl);
        mk_gpt_round_kept(g, l, run, p->x2 + r0 * Fl, (size_t)nr * Fl);
    }
}

static void fwd_rows(mk_gpt_t *g, mk_gpt_run_t *run, int l, parts_t *p, const float *in, int r0, int nr)
{
    norm_rows(g, run, l, p, in, r0, nr);
    col_rows(g, run, l, p, r0, nr);
}

/* The row-parallel linear of an attention or MLP layer on rows [r0, r0+nr):
 * the bias is added by TP rank 0 only, before the sum. */
static void row_rows(mk_gpt_t *g, int l, parts_t *p, float *out, int r0, int nr)
{
    const float *bias = g->tp_rank == 0 ? PN(g, tix(g, l, 5)) : NULL;
    size_t C = g->C, Cl = inner_w(g, l); /* MLA: heads of v_head_dim */
    if (mk_gpt_layer_kind(g, l) == MK_GPT_ATTN)
        g->be->linear_fwd(g->be->ctx, out + r0 * C, p->x3 + r0 * Cl, P(g, tix(g, l, 4)), bias, nr, (int)Cl, (int)C);
    else
        g->be->linear_fwd(g->be->ctx, out + r0 * C, p->x2 + (size_t)r0 * g->Fl, P(g, tix(g, l, 4)), bias, nr, g->Fl, (int)C);
}

/* The internals: everything but the row-parallel output and its all-reduce
 * (the head: its loss statistics, which need the TP group). */
static int fwd_inner(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, const int *targets)
{
    const mk_backend_t *be = g->be;
    int B = run->B, N = B * g->T, C = g->C;
    mk_gpt_kind_t kind = mk_gpt_layer_kind(g, l);
    if (!a->buf && !(a->buf = mk_gpt_alloc(run, g, mk_gpt_internals(g, l, run)))) return -1;
    parts_t p = split_buf(g, l, run, a->buf);
    if (norm_all(g, run, l, &p, a->in) < 0) return -1;
    if (kind != MK_GPT_HEAD) {
        col_rows(g, run, l, &p, 0, N);
    } else {
        float *mx = run->s_red, *sum = mx + N, *tgt = sum + N;
        be->linear_fwd(be->ctx, p.x1, p.ln, P(g, mk_gpt_head_weight(g)), NULL, N, C, g->Vl);
        be->xent_max(be->ctx, mx, p.x1, N, g->Vl, g->v0, g->V);
        if (tp_reduce(g, run, mx, N, 1) < 0) return -1;
        be->xent_exp(be->ctx, p.x1, sum, tgt, mx, targets, N, g->Vl, g->v0, g->V);
        if (tp_reduce(g, run, sum, 2 * N, 0) < 0) return -1;
    }
    return 0;
}

/* Forward of an attention or MLP layer with sub-pipelined TP. */
static int fwd_overlap(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, const int *targets, float *out)
{
    int N = run->B * g->T, C = g->C, r[2] = {0, half_rows(g, run)}, n[2] = {r[1], N - r[1]}, h[2];
    int two = chains(g, run, l);
    if (!two && fwd_inner(g, run, l, a, targets) < 0) return -1;
    if (two && !a->buf && !(a->buf = mk_gpt_alloc(run, g, mk_gpt_internals(g, l, run)))) return -1;
    parts_t p = split_buf(g, l, run, a->buf);
    for (int i = 0; i < 2; i++) {
        if (two) {
            if (i == 1 && settle(g, run) < 0) return -1; /* the previous layer's half 2 */
            fwd_rows(g, run, l, &p, a->in, r[i], n[i]);
            tp_poll(run);
        }
        row_rows(g, l, &p, out, r[i], n[i]);
        if ((h[i] = run->iallreduce(run->ctx, out + (size_t)r[i] * C, n[i] * C)) < 0) return -1;
        tp_poll(run);
    }
    /* level 2: an attention layer's half 2 finishes inside the block's MLP */
    int carry = two && run->next_local && mk_gpt_layer_kind(g, l) == MK_GPT_ATTN && l + 1 < g->n_layers &&
                mk_gpt_layer_kind(g, l + 1) == MK_GPT_MLP;
    for (int i = 0; i < 2; i++) {
        if (i == 1 && carry) {
            run->defer.h = h[1], run->defer.r0 = r[1], run->defer.n = n[1];
            run->defer.out = out, run->defer.in = a->in;
            break;
        }
        if (run->tp_wait(run->ctx, h[i]) < 0) return -1;
        g->be->acc(g->be->ctx, out + (size_t)r[i] * C, a->in + (size_t)r[i] * C, n[i] * C);
        mk_gpt_round_out(g, run, out + (size_t)r[i] * C, (size_t)n[i] * C);
    }
    return 0;
}

int mk_gpt_forward(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, const int *tokens,
                   const int *targets, float *out, int ckpt, double *loss)
{
    const mk_backend_t *be = g->be;
    int N = run->B * g->T, C = g->C;
    mk_gpt_kind_t kind = mk_gpt_layer_kind(g, l);
    if (mk_gpt_layer_is_moe(g, l)) {  /* gpt_moe.c: its input complete first */
        if (settle(g, run) < 0 || mk_gpt_moe_forward(g, run, l, a, out) < 0) return -1;
        mk_gpt_round_out(g, run, out, mk_gpt_row_floats(g, run)); /* the boundary's rows (N/tp with SP) */
        if (ckpt) mk_gpt_free_internals(run, g, l, a);
        return 0;
    }
    /* a carried all-reduce belongs to this layer's input only if it is the
       block's MLP that runs in two chains */
    if (!(kind == MK_GPT_MLP && chains(g, run, l)) && settle(g, run) < 0) return -1;
    if (kind == MK_GPT_EMBED) {
        /* wpe is added by TP rank 0 only, so the all-reduce counts it once */
        const float *wpe = g->tp_rank == 0 && !g->llama ? P(g, 1) : NULL;  /* Llama: no positions table */
        float *full = sp_on(g, run) ? run->s_c : out;
        mk_gpt_embed_fwd_rows(g, run, full, tokens, P(g, 0), g->cp > 1 ? NULL : wpe, N);
        if (g->cp > 1 && wpe) mk_cp_pos_fwd(g, full, wpe, run->B);  /* positions of the rank's chunks */
        if (tp_sum_out(g, run, full, out) < 0) return -1;
        mk_gpt_round_out(g, run, out, (size_t)loc_rows(g, run) * C);
        return 0;
    }
    if (kind != MK_GPT_HEAD && ov_level(g, run)) {
        if (fwd_overlap(g, run, l, a, targets, out) < 0) return -1;
    } else {
        if (fwd_inner(g, run, l, a, targets) < 0) return -1;
        parts_t p = split_buf(g, l, run, a->buf);
        if (kind == MK_GPT_HEAD) {
            float *sum = run->s_red + N;
            *loss += be->xent_loss(be->ctx, p.x1, sum, sum + N, N, g->Vl);
        } else {
            float *full = sp_on(g, run) ? run->s_c : out;
            row_rows(g, l, &p, full, 0, N);
            if (tp_sum_out(g, run, full, out) < 0) return -1;
            be->acc(be->ctx, out, a->in, (size_t)loc_rows(g, run) * C);
            mk_gpt_round_out(g, run, out, (size_t)loc_rows(g, run) * C);
        }
    }
    if (ckpt) mk_gpt_free_internals(run, g, l, a);
    return 0;
}

int mk_gpt_recompute(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, const int *tokens,
                     const int *targets)
{
    if (mk_gpt_layer_kind(g, l) == MK_GPT_EMBED || a->buf) return 0;
    if (mk_gpt_layer_is_moe(g, l)) return mk_gpt_moe_inner(g, run, l, a, NULL);
    if (fwd_inner(g, run, l, a, targets) < 0) return -1;
    if (mk_gpt_layer_kind(g, l) == MK_GPT_HEAD) {
        int N = run->B * g->T;
        parts_t p = split_buf(g, l, run, a->buf);
        g->be->xent_loss(g->be->ctx, p.x1, run->s_red + N, run->s_red + 2 * N, N, g->Vl);
    }
    return 0;
}

/* Gradient at the layer norm's output (in s_c, TP-reduced) -> din += . */
static void ln_rows(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, parts_t *p, float *din, int r0, int nr);

static void norm_bwd(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, parts_t *p, float *din, float *dw,
                     float *db, int r0, int nr);

/* SP: s_c's reduce-scatter to this rank's rows, the norm's backward on
 * them, its weight gradients summed over the TP group (every rank saw only
 * its rows of a replicated parameter) and added to the gradient. */
static int sp_ln_back(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, parts_t *p, float *din)
{
    const mk_backend_t *be = g->be;
    size_t C = g->C, nw = g->llama ? C : 2 * C;
    float *dw = run->s_d + (size_t)run->B * g->T * C, *db = dw + C;
    if (sp_coll(g, run, run->s_c, run->s_c, 0) < 0) return -1;
    be->zero(be->ctx, dw, nw * sizeof(float));
    norm_bwd(g, run, l, a, p, din, dw, db, 0, loc_rows(g, run));
    if (tp_reduce(g, run, dw, (int)nw, 0) < 0) return -1;
    be->acc(be->ctx, G(g, tix(g, l, 0)), dw, C);
    if (!g->llama) be->acc(be->ctx, G(g, tix(g, l, 1)), db, C);
    return 0;
}

static int ln_back(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, parts_t *p, float *din)
{
    int N = run->B * g->T;
    if (sp_on(g, run)) return sp_ln_back(g, run, l, a, p, din);
    if (tp_reduce(g, run, run->s_c, N * g->C, 0) < 0) return -1;
    ln_rows(g, run, l, a, p, din, 0, N);
    return 0;
}

/* Backward through the row-parallel linear and the core (attention or
 * GELU) on rows [r0, r0+nr): dmid rows = the core's input gradient. */
static int bwd_mid_rows(mk_gpt_t *g, mk_gpt_run_t *run, int l, parts_t *p, const float *dy, float *dmid,
                         int r0, int nr)
{
    const mk_backend_t *be = g->be;
    size_t C = g->C;
    int attn = mk_gpt_layer_kind(g, l) == MK_GPT_ATTN;
    size_t mid = mid_w(g, l), inner = inner_w(g, l);
    be->zero(be->ctx, run->s_a + r0 * inner, nr * inner * sizeof(float));
    be->linear_bwd_in(be->ctx, run->s_a + r0 * inner, dy + r0 * C, P(g, tix(g, l, 4)), nr, (int)inner, (int)C);
    be->zero(be->ctx, dmid + r0 * mid, nr * mid * sizeof(float));
    if (attn) {
        size_t sq = (size_t)(r0 / g->T); /* the first sequence's statistics */
        void *att = mk_gpt_att_at(g, run, p->x2, sq), *datt = mk_gpt_att_at(g, run, run->s_att, sq);
        if (g->mla) mk_gpt_mla_bwd_core(g, run, run->s_a, dmid, p->x1, att, datt, p->qk, r0, nr);
        else if (g->cp > 1)
            run->cp_attn_bwd(run->ctx, dmid + r0 * mid, run->s_a + r0 * inner, p->x1 + r0 * mid, p->x3 + r0 * inner,
                             att, nr / g->T);
        else if (mk_gpt_attn_bwd_rows(g, run, l, dmid, att, p->x1, datt, run->s_a, p->x3, r0, nr) < 0) return -1;
        if (g->mla) return 0; /* its RoPE and the rest: bwd_col_rows */
        if (g->llama && g->cp > 1) mk_cp_rope(g, dmid + r0 * mid, nr, (int)mid, -1);
        else if (g->llama)  /* back through RoPE: to the q|k GEMM's output */
            mk_gpt_rope_rows(g, run, dmid, r0, nr, (int)mid, -1);
        if (g->cfg.qk_norm) return mk_gpt_qk_norm_bwd(g, run, l, p->qk, p->qkr, dmid, r0, nr);
    } else if (g->llama) {
        be->swiglu_bwd(be->ctx, dmid + r0 * mid, run->s_a + r0 * inner, p->x1 + r0 * mid, nr, g->Fl);
    } else {
        be->gelu_bwd(be->ctx, dmid + r0 * mid, p->x1 + r0 * mid, run->s_a + r0 * inner, nr * g->Fl);
    }
    return 0;
}

/* The column-parallel linear's input gradient on rows [r0, r0+nr) into s_c
 * (MLA: its chain's, and its weights' gradients). */
static int bwd_col_rows(mk_gpt_t *g, mk_gpt_run_t *run, int l, parts_t *p, const float *dmid, int r0, int nr)
{
    size_t C = g->C, mid = mid_w(g, l);
    g->be->zero(g->be->ctx, run->s_c + r0 * C, nr * C * sizeof(float));
    if (g->mla && mk_gpt_layer_kind(g, l) == MK_GPT_ATTN)
        return mk_gpt_mla_bwd_in(g, run, l, p->ln, dmid, run->s_c, p->qk, r0, nr);
    g->be->linear_bwd_in(g->be->ctx, run->s_c + r0 * C, dmid + r0 * mid, P(g, tix(g, l, 2)), nr, (int)C, (int)mid);
    return 0;
}

/* The norm's backward on rows [r0, r0+nr) (s_c already TP-reduced), its
 * weight (and bias) gradients added to dw (db). */
static void norm_bwd(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, parts_t *p, float *din, float *dw,
                     float *db, int r0, int nr)
{
    size_t C = g->C;
    if (g->llama) {
        g->be->rmsnorm_bwd(g->be->ctx, din + r0 * C, dw, run->s_c + r0 * C, a->in + r0 * C, P(g, tix(g, l, 0)),
                           p->rstd + r0, nr, (int)C);
        return;
    }
    g->be->layernorm_bwd(g->be->ctx, din + r0 * C, dw, db, run->s_c + r0 * C, a->in + r0 * C, P(g, tix(g, l, 0)),
                         p->mean + r0, p->rstd + r0, nr, (int)C);
}

static void ln_rows(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, parts_t *p, float *din, int r0, int nr)
{
    norm_bwd(g, run, l, a, p, din, G(g, tix(g, l, 0)), GN(g, tix(g, l, 1)), r0, nr);
}

/* Attention or MLP: input gradients; the linears' output gradients go to
 * dy (N,C) and dmid (N, 3Cl or Fl) for the weight gradients. */
static int bwd_block_in(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, parts_t *p,
                        const float *dout, float *din, float *dy, float *dmid)
{
    const mk_backend_t *be = g->be;
    int N = run->B * g->T, C = g->C;
    if (sp_on(g, run)) {
        if (sp_coll(g, run, dy, (float *)dout, 1) < 0) return -1;
    } else if (dy != dout) {
        be->copy(be->ctx, dy, dout, (size_t)N * C * sizeof(float));
    }
    if (!ov_level(g, run)) {
        if (bwd_mid_rows(g, run, l, p, dy, dmid, 0, N) < 0 || bwd_col_rows(g, run, l, p, dmid, 0, N) < 0) return -1;
        if (din != dout) be->copy(be->ctx, din, dout, (size_t)loc_rows(g, run) * C * sizeof(float));
        return ln_back(g, run, l, a, p, din);
    }
    /* sub-pipelined: each half's input-gradient all-reduce hides behind the
       other half's work (level 1: its dX GEMM; level 2: its whole chain) */
    int r[2] = {0, half_rows(g, run)}, n[2] = {r[1], N - r[1]}, h[2], two = chains(g, run, l);
    if (!two && bwd_mid_rows(g, run, l, p, dy, dmid, 0, N) < 0) return -1;
    for (int i = 0; i < 2; i++) {
        if (two) {
            if (bwd_mid_rows(g, run, l, p, dy, dmid, r[i], n[i]) < 0) return -1;
            tp_poll(run);
        }
        if (bwd_col_rows(g, run, l, p, dmid, r[i], n[i]) < 0) return -1;
        if ((h[i] = run->iallreduce(run->ctx, run->s_c + (size_t)r[i] * C, n[i] * C)) < 0) return -1;
        tp_poll(run);
    }
    if (din != dout) be->copy(be->ctx, din, dout, (size_t)N * C * sizeof(float));
    for (int i = 0; i < 2; i++) {
        if (run->tp_wait(run->ctx, h[i]) < 0) return -1;
        ln_rows(g, run, l, a, p, din, r[i], n[i]);
    }
    return 0;
}

/* The linears' weight (and, with bias, bias) gradients from the gradients
 * at their outputs (dy, dmid) and their inputs: the norm output's rows ln
 * (SP: gathered again into s_c, free once the input gradient is done) and xin (N, inner). */
static int bwd_block_w(mk_gpt_t *g, mk_gpt_run_t *run, int l, const float *ln, const float *xin, const float *dy,
                       const float *dmid, int bias)
{
    int N = run->B * g->T, C = g->C;
    parts_t q = {.ln = (float *)ln};
    if (sp_on(g, run) && ln_full(g, run, &q, run->s_c) < 0) return -1;
    int attn = mk_gpt_layer_kind(g, l) == MK_GPT_ATTN, mid = (int)mid_w(g, l), inner = (int)inner_w(g, l);
    float *b_row = bias ? GN(g, tix(g, l, 5)) : NULL, *b_col = bias ? GN(g, tix(g, l, 3)) : NULL;
    g->be->linear_bwd_w(g->be->ctx, G(g, tix(g, l, 4)), b_row, dy, xin, N, inner, C);
    if (!(attn && g->mla)) /* MLA's: with its input gradients (bwd_col_rows) */
        g->be->linear_bwd_w(g->be->ctx, G(g, tix(g, l, 2)), b_col, dmid, q.ln, N, C, mid);
    return 0;
}

/* A split backward's bias gradients, in B_IN from the fp32 output gradients
 * as the unsplit backward's: B_W reads the stash only as GEMM operands,
 * so it can wait 16-bit exactly (gpt_act.c bw_convert). */
static void bwd_block_bias(mk_gpt_t *g, mk_gpt_run_t *run, int l, const float *dy, const float *dmid)
{
    int N = run->B * g->T, C = g->C, attn = mk_gpt_layer_kind(g, l) == MK_GPT_ATTN;
    float *b_row = GN(g, tix(g, l, 5)), *b_col = GN(g, tix(g, l, 3));
    if (b_row) g->be->linear_bwd_w(g->be->ctx, NULL, b_row, dy, NULL, N, (int)inner_w(g, l), C);
    if (b_col && !(attn && g->mla)) g->be->linear_bwd_w(g->be->ctx, NULL, b_col, dmid, NULL, N, C, (int)mid_w(g, l));
}

/* After B_IN: the linears' inputs join their output gradients in the
 * stash (mk_gpt_stash_floats), and the rest of what F kept goes: B_W
 * reads nothing else, as the zero-bubble implementations keep only each
 * weight-gradient GEMM's operands (sim/memory_act.c mk_sim_chunk_wstash). */
static void stash_inputs(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, const parts_t *p)
{
    size_t N = (size_t)run->B * g->T, n = mk_gpt_row_floats(g, run), at = N * (g->C + mid_w(g, l));
    const float *xin = mk_gpt_layer_kind(g, l) == MK_GPT_ATTN ? p->x3 : p->x2;
    g->be->copy(g->be->ctx, a->stash + at, p->ln, n * sizeof(float));
    g->be->copy(g->be->ctx, a->stash + at + n, xin, N * inner_w(g, l) * sizeof(float));
    mk_gpt_act_clear_but_stash(run, g, l, a);
}

/* The head: the logits' gradient, the weight's (B, B_W) and the input's
 * (B, B_IN); a split backward keeps the logits' gradient and the norm
 * output's rows from B_IN to B_W (mk_gpt_stash_floats), as a block does. */
static int bwd_head(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, parts_t *p,
                    const int *targets, float *din, mk_bwd_mode_t mode)
{
    const mk_backend_t *be = g->be;
    int N = run->B * g->T, C = g->C, w = mk_gpt_head_weight(g);
    size_t nl = (size_t)N * g->Vl;
    float *dl = mode == MK_BWD_W ? a->stash : run->s_a;
    if (mode == MK_BWD_W) p->ln = a->stash + nl;
    else be->xent_bwd(be->ctx, run->s_a, p->x1, targets, run->grad_scale, N, g->Vl, g->v0);
    if (mode == MK_BWD_IN) {
        if (!(a->stash = mk_gpt_alloc(run, g, mk_gpt_stash_floats(g, l, run)))) return -1;
        be->copy(be->ctx, a->stash, run->s_a, nl * sizeof(float));
        be->copy(be->ctx, a->stash + nl, p->ln, mk_gpt_row_floats(g, run) * sizeof(float));
    } else {
        parts_t q = *p;  /* SP: q.ln gathered into s_c, overwritten next */
        if (sp_on(g, run) && ln_full(g, run, &q, run->s_c) < 0) return -1;
        be->linear_bwd_w(be->ctx, G(g, w), NULL, dl, q.ln, N, C, g->Vl);
        if (mode == MK_BWD_W) return 0;
    }
    be->zero(be->ctx, run->s_c, (size_t)N * C * sizeof(float));
    be->linear_bwd_in(be->ctx, run->s_c, run->s_a, P(g, w), N, C, g->Vl);
    be->zero(be->ctx, din, (size_t)loc_rows(g, run) * C * sizeof(float));
    return ln_back(g, run, l, a, p, din);
}

int mk_gpt_backward(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, mk_bwd_mode_t mode,
                    const float *dout, float *din, const int *tokens, const int *targets)
{
    int N = run->B * g->T;
    mk_gpt_kind_t kind = mk_gpt_layer_kind(g, l);
    if (settle(g, run) < 0) return -1;
    if (kind == MK_GPT_EMBED) {       /* weights only: all of it in FULL or IN */
        if (mode == MK_BWD_W) return 0;
        const float *dfull = dout;
        if (sp_on(g, run)) {
            if (sp_coll(g, run, run->s_d, (float *)dout, 1) < 0) return -1;
            dfull = run->s_d;
        }
        float *dwpe = g->llama ? NULL : G(g, 1);
        mk_gpt_embed_bwd_rows(g, run, G(g, 0), g->cp > 1 ? NULL : dwpe, dfull, tokens, N);
        if (g->cp > 1 && dwpe) mk_cp_pos_bwd(g, dwpe, dfull, run->B);
        return 0;
    }
    if (mode != MK_BWD_W && mk_gpt_recompute(g, run, l, a, tokens, targets) < 0) return -1;
    if (mk_gpt_layer_is_moe(g, l)) {  /* B_IN keeps what B_W reads: its weight GEMMs' operands */
        if (mk_gpt_moe_backward(g, run, l, a, dout, din, mode) < 0) return -1;
        (mode == MK_BWD_IN ? mk_gpt_act_clear_but_stash : mk_gpt_act_clear)(run, g, l, a);
        return 0;
    }
    parts_t p = a->buf ? split_buf(g, l, run, a->buf) : (parts_t){0}; /* (none after a B_IN) */
    if (kind == MK_GPT_HEAD) {
        if (mode == MK_BWD_W && !a->stash) return mk_error_set("B_W of layer %d without its B_IN", l);
        if (bwd_head(g, run, l, a, &p, targets, din, mode) < 0) return -1;
        (mode == MK_BWD_IN ? mk_gpt_act_clear_but_stash : mk_gpt_act_clear)(run, g, l, a); /* kept for B_W */
        return 0;
    }
    if (mode == MK_BWD_FULL) {
        /* the linears' output gradients: dout itself and scratch */
        float *dy = sp_on(g, run) ? run->s_d : (float *)dout, *dmid = run->s_b;
        if (bwd_block_in(g, run, l, a, &p, dout, din, dy, dmid) < 0) return -1;
        if (bwd_block_w(g, run, l, p.ln, kind == MK_GPT_ATTN ? p.x3 : p.x2, dy, dmid, 1) < 0) return -1;
        mk_gpt_act_clear(run, g, l, a);
        return 0;
    }
    float *st = a->stash; /* its layout: mk_gpt_stash_floats */
    if (mode == MK_BWD_IN) {
        if (!st && !(st = a->stash = mk_gpt_alloc(run, g, mk_gpt_stash_floats(g, l, run)))) return -1;
        if (bwd_block_in(g, run, l, a, &p, dout, din, st, st + (size_t)N * g->C) < 0) return -1;
        bwd_block_bias(g, run, l, st, st + (size_t)N * g->C);
        stash_inputs(g, run, l, a, &p);
        return 0;
    }
    if (!st) return mk_error_set("B_W of layer %d without its B_IN", l);
    const float *in_at = st + (size_t)N * (g->C + mid_w(g, l));
    if (bwd_block_w(g, run, l, in_at, in_at + mk_gpt_row_floats(g, run), st, st + (size_t)N * g->C, 0) < 0) return -1;
    mk_gpt_act_clear(run, g, l, a);
    return 0;
}
