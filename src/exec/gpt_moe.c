/* The MoE layer (src/graph/README.md "Mixture of experts"): the MLP of an MoE block
 * on one micro-batch of N = B*T tokens.  RMSNorm, router logits x Wr^T
 * (N, E) in fp32, softmax over E, top-k (ties: the lower expert index), the
 * k weights renormalised (Mixtral) or not (moe_pre_softmax, DeepSeek);
 * y = in + sum_k w_k expert_k(x) (+ the shared expert), SwiGLU experts.
 * Dispatch: the N*k token-assignments sorted by expert in token order, so
 * expert e's rows are one range (one GEMM each); with a capacity factor c
 * each expert keeps at most ceil(c*N*k/E) of them, the first in token
 * order (then choice order), the rest dropped (they add nothing; the
 * residual carries the token), the same in every layout since N is the
 * micro-batch's global token count.  The load-balancing loss (Switch /
 * Mixtral): aux = coeff * E * sum_e f_e P_e over the micro-batch, f_e the
 * fraction of assignments routed to e (before drops; constant in the
 * backward, as in Megatron), P_e the mean probability of e; its share of
 * the objective, aux * loss_scale * N (the mean over micro-batches), adds
 * loss_scale * coeff * E * f_e to every d prob of e.  Tensors (gpt.c
 * moe_tensors): norm, router, per expert w1|w3 (stacked gate|up) and w2,
 * the shared expert's gate|up and down; all whole on every TP rank (expert
 * tensor parallelism 1).  Without sequence parallelism each TP rank computes
 * the layer for all its tokens redundantly (its input is already
 * replicated) and nothing is reduced.  With it (run->sp, tp > 1: Megatron-
 * Core's MoE layer, which needs SP with TP) the layer runs on this TP
 * rank's n = N/tp rows, rows [tp_rank n, (tp_rank+1) n) of the micro-batch
 * (the layer boundary's), and what the one-rank layer takes over the
 * micro-batch is summed over the TP group: the counts routed to each expert
 * (the aux loss and its gradient, the bias's load), the probabilities' sums,
 * the order of the drops (an expert's assignments on lower TP ranks come
 * first), and the gradients of the replicated tensors (norm, router, shared
 * expert), which each rank makes from its rows only.  The EP group then
 * spans TP ranks too (exec_ep.c: MoE parallel folding).  Context
 * parallelism likewise: a CP rank's rows are its two chunks of each
 * sequence, the micro-batch's sums go over the CP ranks (and with SP their
 * TP ranks: run->tok_allreduce), the replicated tensors' gradients over
 * the DP x CP group as every layer's.  The dispatch plan
 * is made on the host from topi and probs (host-visible memory: the CPU
 * backend). */
#include "config.h"
#include "exec/gpt_moe_layout.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t mk_gpt_moe_internals(const mk_gpt_t *g, const mk_gpt_run_t *run)
{
    size_t N = rows(g, run), A = slots(g, run), E = g->E, k = g->topk, C = g->C;
    return N * (C + 1 + E + 2 * k) + 3 * A + 3 * E + 2 + N * 3 * (size_t)g->Fs + N;
}

int mk_gpt_moe_runs(const mk_gpt_t *g, const mk_gpt_run_t *run, mk_gpt_run16_t *s)
{
    size_t N = rows(g, run);
    s[0] = (mk_gpt_run16_t){meta_floats(g, run), 0};
    s[1] = (mk_gpt_run16_t){N * g->C + 3 * N * (size_t)g->Fs, 1};
    s[2] = (mk_gpt_run16_t){N, 0};
    return 3;
}

/* The expert side's runs (side_split's order): the order and offsets
 * (integers), then its rows' inputs, gate|up and activations (16-bit in a
 * 16-bit run: rounded where made); R read from the buffer's counts, which
 * sit where they are packed or not.  The floats unpacked. */
size_t mk_gpt_moe_side_runs(const mk_gpt_t *g, const mk_gpt_run_t *run, const mk_gpt_act_t *a, mk_gpt_run16_t *s)
{
    size_t R = (size_t)*split(g, run, a->buf).nrecv;
    s[0] = (mk_gpt_run16_t){2 * R + n_local(g) + 1, 0};
    s[1] = (mk_gpt_run16_t){R * (g->C + 3 * (size_t)g->Fe), 1};
    return side_size(g, R);
}

int mk_gpt_moe_check(const mk_model_config_t *cfg, const mk_backend_t *be)
{
    if (!mk_model_is_moe(cfg)) return 0;
    if (!(cfg->norm == MK_NORM_RMSNORM && cfg->swiglu && cfg->pos == MK_POS_ROPE && !cfg->bias))
        return mk_error_set("the executor's MoE layers are Llama blocks with SwiGLU experts (RMSNorm, "
                            "rotary positions, no biases)");
    if (be && !(be->moe_route && be->moe_route_bwd && be->moe_gather && be->moe_scatter &&
                (!cfg->moe_score_sigmoid || (be->moe_route_sig && be->moe_route_sig_bwd))))
        return mk_error_set("the %s backend has no mixture-of-experts kernels (use --backend cpu)", be->name);
    if (!cfg->moe_score_sigmoid && (cfg->moe_router_bias || cfg->moe_groups || (cfg->moe_topk_scale &&
                                                                                cfg->moe_topk_scale != 1)))
        return mk_error_set("the router's expert bias, groups and scaling factor with softmax scores (DeepSeek-V2's) "
                            "are for merak sim and merak plan: the executor routes by them with sigmoid scores");
    if (cfg->moe_shared_gate && (!cfg->qkv_bias || cfg->qk_norm || mk_model_is_mla(cfg))) /* Qwen2-MoE's names */
        return mk_error_set("--moe-shared-expert-gate trains in Qwen2-MoE's blocks, with --add-qkv-bias (no q/k norms, "
                            "no MLA)");
    if (cfg->moe_router_bias && !mk_model_is_mla(cfg)) /* its tensors and config are DeepSeek-V3's */
        return mk_error_set("the router's expert bias trains in DeepSeek-V3's blocks, with --multi-latent-attention");
    if (mk_model_is_mla(cfg) && cfg->moe_shared_ffn % cfg->moe_ffn)
        return mk_error_set("DeepSeek's shared experts are whole experts: a shared width of %d is not a multiple of "
                            "the expert width %d", cfg->moe_shared_ffn, cfg->moe_ffn);
    return 0;
}

size_t mk_gpt_moe_dense_floats(const mk_gpt_t *g, int l)
{
    const mk_gpt_tensor_t *a = &g->t[g->first[l]], *z = &g->t[t_w13(g, l, 0) - 1];
    return z->off + (size_t)z->lrows * z->lcols - a->off;
}

void mk_gpt_moe_expert_range(const mk_gpt_t *g, int l, size_t *off, size_t *n)
{
    int El = n_local(g);
    const mk_gpt_tensor_t *a = &g->t[t_w13(g, l, g->ep_rank * El)], *z = &g->t[t_w2(g, l, (g->ep_rank + 1) * El - 1)];
    *off = a->off;
    *n = z->off + (size_t)z->lrows * z->lcols - a->off;
}


/* Expert capacity from the micro-batch's N tokens: ceil(c*N*k/E); -1 dropless. */
static long capacity(const mk_gpt_t *g, int N)
{
    double c = g->cfg.moe_capacity;
    return c > 0 ? (long)ceil(c * N * g->topk / g->E) : -1;
}

/* Sliced: cnt (E, this rank's) -> the micro-batch's, summed over the ranks
 * holding its tokens; pre[e] the assignments to e on lower ones (earlier
 * tokens with SP alone; run refuses a capacity factor with CP, whose
 * chunks are not in token order).  One all-reduce of a (tok_size, E)
 * table with this rank's row filled. */
static int tok_counts(const mk_gpt_t *g, mk_gpt_run_t *run, float *cnt, float *pre)
{
    int E = g->E, n = run->tok_size, me = run->tok_rank;
    float *t = calloc((size_t)n * E, sizeof *t);
    if (!t) return mk_error_set("out of memory");
    memcpy(t + (size_t)me * E, cnt, E * sizeof *t);
    int rc = run->tok_allreduce(run->ctx, t, n * E);
    for (int e = 0; rc == 0 && e < E; e++) {
        pre[e] = cnt[e] = 0;
        for (int r = 0; r < n; r++) {
            if (r < me) pre[e] += t[(size_t)r * E + e];
            cnt[e] += t[(size_t)r * E + e];
        }
    }
    free(t);
    return rc;
}

/* The dispatch plan from topi: counts (the micro-batch's), kept slots
 * sorted by expert in token order; an expert keeps its first cap
 * assignments of the micro-batch (pre: those on lower TP ranks).  0 or -1. */
static int plan(const mk_gpt_t *g, mk_gpt_run_t *run, moe_parts_t *p)
{
    int E = g->E, k = g->topk, A = (int)slots(g, run);
    long cap = capacity(g, tokens(g, run));
    int *fill = calloc(E, sizeof *fill), *keep = calloc(E, sizeof *keep);
    float *pre = calloc(E, sizeof *pre);
    if (!fill || !keep || !pre) return free(fill), free(keep), free(pre), mk_error_set("out of memory");
    for (int s = 0; s < A; s++) keep[p->topi[s]]++;
    for (int e = 0; e < E; e++) p->cnt[e] = (float)keep[e];
    if (sliced(g, run) && tok_counts(g, run, p->cnt, pre) < 0) return free(fill), free(keep), free(pre), -1;
    p->off[0] = 0;
    for (int e = 0; e < E; e++) {
        long room = cap < 0 ? keep[e] : cap - (long)pre[e];
        keep[e] = room < 0 ? 0 : room < keep[e] ? (int)room : keep[e];
        p->off[e + 1] = p->off[e] + keep[e];
    }
    for (int s = 0; s < A; s++) {
        int e = p->topi[s];
        if (fill[e] >= keep[e]) continue;
        int slot = p->off[e] + fill[e]++;
        p->slot_tok[slot] = s / k, p->slot_src[slot] = s, p->slot_w[slot] = p->topw[s];
    }
    free(fill), free(keep), free(pre);
    return 0;
}

/* n rows through one SwiGLU MLP: gu = x [w1;w3]^T, h = silu(gate)*up (times
 * the row's weight wr, NULL: 1), y = h w2^T; a 16-bit run's gu and h
 * rounded where made (layer l's kept internals, mk_gpt_round_kept). */
static void swiglu_mlp(const mk_gpt_t *g, const mk_gpt_run_t *run, int l, const float *x, float *gu, float *h,
                       const float *wr, float *y, const float *w13, const float *w2, int n, int F)
{
    const mk_backend_t *be = g->be;
    if (n == 0) return;
    be->linear_fwd(be->ctx, gu, x, w13, NULL, n, g->C, 2 * F);
    mk_gpt_round_kept(g, l, run, gu, (size_t)n * 2 * F);
    be->swiglu_fwd(be->ctx, h, gu, n, F);
    for (int r = 0; wr && r < n; r++) /* the cpu backend's host memory (MoE layers are the cpu's) */
        for (int f = 0; f < F; f++) h[(size_t)r * F + f] *= wr[r];
    mk_gpt_round_kept(g, l, run, h, (size_t)n * F);
    if (y) be->linear_fwd(be->ctx, y, h, w2, NULL, n, F, g->C);
}

/* The rows each EP peer gets (dir 0: this rank's kept slots, by their
 * experts' owners) or sends back (dir 1: the expert side's, by source). */
static void peer_rows(const mk_gpt_t *g, const moe_parts_t *p, int dir, int *rows)
{
    int El = n_local(g);
    for (int r = 0; r < g->ep; r++)
        rows[r] = dir ? 0 : p->off[(r + 1) * El] - p->off[r * El];
    for (int i = 0; dir && i < g->E; i++) rows[i / El] += p->rcnt[i];
}

/* Token rows of width floats between the two sides: dir 0 the kept slots
 * (slot order) to their experts' ranks, arriving peer-major; dir 1 back.
 * One rank: a copy.  0 or -1. */
int mk_gpt_moe_exchange(const mk_gpt_t *g, mk_gpt_run_t *run, const moe_parts_t *p, int dir, const float *send,
                        float *recv, int width)
{
    if (g->ep == 1) {
        g->be->copy(g->be->ctx, recv, send, (size_t)p->off[g->E] * width * sizeof(float));
        return 0;
    }
    int *rows = calloc(2 * (size_t)g->ep, sizeof *rows);
    if (!rows) return mk_error_set("out of memory");
    peer_rows(g, p, dir, rows);
    peer_rows(g, p, !dir, rows + g->ep);
    int rc = run->ep_a2a(run->ctx, send, rows, recv, rows + g->ep, width);
    free(rows);
    return rc;
}

/* The counts of the rows each local expert gets from each peer (rcnt, R),
 * then the expert side, its order and expert offsets.  0 or -1. */
static int open_side(const mk_gpt_t *g, mk_gpt_run_t *run, mk_gpt_act_t *a, moe_parts_t *p, moe_side_t *q)
{
    int E = g->E, El = n_local(g), *kept = malloc(E * sizeof *kept), rc = 0;
    if (!kept) return mk_error_set("out of memory");
    for (int e = 0; e < E; e++) kept[e] = p->off[e + 1] - p->off[e];
    if (g->ep == 1) memcpy(p->rcnt, kept, E * sizeof *kept);
    else rc = run->ep_counts(run->ctx, kept, p->rcnt, El);
    free(kept);
    if (rc < 0) return -1;
    size_t R = 0;
    for (int i = 0; i < E; i++) R += p->rcnt[i];
    *p->nrecv = (int)R;  /* at most ep * N * k rows: mk_exec_check keeps that an int */
    mk_gpt_moe_free_side(run, g, a);
    if (!(a->stash = mk_gpt_alloc(run, g, side_size(g, R)))) return -1;
    *q = side_split(g, a->stash, R);
    int pos = 0;
    for (int j = 0; j < El; j++) {
        q->eoff[j] = pos;
        for (int s = 0, base = 0; s < g->ep; s++) {
            int at = base;  /* peer s's rows for expert j start after its rows for experts < j */
            for (int i = 0; i < j; i++) at += p->rcnt[s * El + i];
            for (int i = 0; i < p->rcnt[s * El + j]; i++) q->perm[pos++] = at + i;
            for (int i = 0; i < El; i++) base += p->rcnt[s * El + i];
        }
    }
    q->eoff[El] = pos;
    return 0;
}

/* The dispatch's rows carry each slot's routing weight beside its input
 * (one exchange for both, as DeepEP sends the probabilities with the
 * tokens; the backward returns the weight's gradient beside the input
 * gradient): dst row s (C + 1 wide) = src row idx[s], then x[s].  The cpu
 * backend's host memory. */
static void rows_with(float *dst, const float *src, const int *idx, const float *x, size_t n, size_t C)
{
    for (size_t s = 0; s < n; s++) {
        memcpy(dst + s * (C + 1), src + (size_t)idx[s] * C, C * sizeof *dst);
        dst[s * (C + 1) + C] = x[s];
    }
}

/* Dispatch (the kept slots' inputs, gathered from p->ln, each with its
 * weight), this rank's experts, combine: the experts' outputs, weighted
 * already, added into out (NULL: a recompute, which rebuilds the expert
 * side only).  Scratch: the slots' rows (A, C + 1), the expert side's
 * (R, C + 1) and (R, C). */
static int run_experts(mk_gpt_t *g, mk_gpt_run_t *run, int l, moe_parts_t *p, moe_side_t *q, float *out)
{
    const mk_backend_t *be = g->be;
    size_t R = *p->nrecv, C = g->C, W = C + 1, F = g->Fe, A = (size_t)p->off[g->E], n = (A + R) * W + R * C;
    float *xg = mk_gpt_alloc(run, g, n);
    if (!xg) return -1;
    float *t = xg + A * W, *u = t + R * W;
    rows_with(xg, p->ln, p->slot_tok, p->slot_w, A, C);
    int rc = mk_gpt_moe_exchange(g, run, p, 0, xg, t, (int)W);
    for (size_t i = 0; i < R; i++) { /* expert-major: row i is row perm[i] of the peer-major order */
        const float *s = t + (size_t)q->perm[i] * W;
        memcpy(q->xe + i * C, s, C * sizeof *s);
        q->wr[i] = s[C];
    }
    for (int j = 0; rc == 0 && j < n_local(g); j++) {
        size_t r = q->eoff[j];
        int e = g->ep_rank * n_local(g) + j;
        swiglu_mlp(g, run, l, q->xe + r * C, q->gu + r * 2 * F, q->h + r * F, q->wr + r, t + r * C,
                   P(g, t_w13(g, l, e)), P(g, t_w2(g, l, e)), q->eoff[j + 1] - q->eoff[j], (int)F);
    }
    be->zero(be->ctx, u, R * C * sizeof(float));
    be->moe_scatter(be->ctx, u, t, q->perm, NULL, (int)R, (int)C);  /* back to peer-major */
    if (rc == 0) rc = mk_gpt_moe_exchange(g, run, p, 1, u, xg, (int)C);
    mk_gpt_round_kept(g, l, run, xg, A * C); /* the experts' outputs, 16-bit as made */
    if (rc == 0 && out) be->moe_scatter(be->ctx, out, xg, p->slot_tok, NULL, (int)A, (int)C);
    mk_gpt_release(run, g, xg, n);
    return rc;
}

int mk_gpt_moe_inner(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, float *out)
{
    const mk_backend_t *be = g->be;
    int N = rows(g, run), C = g->C;
    if (!a->buf && !(a->buf = mk_gpt_alloc(run, g, mk_gpt_moe_internals(g, run)))) return -1;
    moe_parts_t p = split(g, run, a->buf);
    moe_side_t q = {NULL, NULL, NULL, NULL, NULL, NULL};
    be->rmsnorm_fwd(be->ctx, p.ln, p.rstd, a->in, P(g, t_norm(g, l)), g->eps, N, C);
    mk_gpt_round_kept(g, l, run, p.ln, (size_t)N * C); /* the GEMMs round it alike: their products unchanged */
    be->linear_fwd(be->ctx, p.probs, p.ln, P(g, t_router(g, l)), NULL, N, C, g->E);
    const mk_model_config_t *c = &g->cfg;
    const float *bias = c->moe_router_bias ? g->moe_bias + (size_t)l * g->E : NULL; /* every rank's whole copy */
    if (c->moe_score_sigmoid)
        be->moe_route_sig(be->ctx, p.probs, p.topi, p.topw, bias, N, g->E, g->topk, c->moe_groups, c->moe_group_topk,
                          !c->moe_pre_softmax, topk_scale(g));
    else be->moe_route(be->ctx, p.probs, p.topi, p.topw, N, g->E, g->topk, !c->moe_pre_softmax);
    if (plan(g, run, &p) < 0 || open_side(g, run, a, &p, &q) < 0) return -1;
    if (run_experts(g, run, l, &p, &q, out) < 0) return -1;
    if (g->Fs) swiglu_mlp(g, run, l, p.ln, p.sgu, p.sh, NULL, NULL, P(g, t_shared(g, l)), NULL, N, g->Fs);
    if (g->Fs && g->cfg.moe_shared_gate) { /* Qwen2-MoE: sigmoid(x . w_g) per token */
        be->linear_fwd(be->ctx, p.sg, p.ln, P(g, t_sgate(g, l)), NULL, N, C, 1);
        for (int n = 0; n < N; n++) p.sg[n] = 1.0f / (1.0f + expf(-p.sg[n]));
    }
    return 0;
}

const int *mk_gpt_moe_routes(const mk_gpt_t *g, const mk_gpt_run_t *run, mk_gpt_act_t *a, const float **probs)
{
    moe_parts_t p = split(g, run, a->buf);
    *probs = p.probs;
    return p.topi;
}

/* x (n doubles) summed over the ranks holding the micro-batch's tokens,
 * through floats (the all-reduce's type).  0 or -1. */
static int tok_sum(const mk_gpt_run_t *run, double *x, size_t n)
{
    float *t = malloc((n ? n : 1) * sizeof *t);
    if (!t) return mk_error_set("out of memory");
    for (size_t i = 0; i < n; i++) t[i] = (float)x[i];
    int rc = run->tok_allreduce(run->ctx, t, (int)n);
    for (size_t i = 0; i < n; i++) x[i] = t[i];
    free(t);
    return rc;
}

/* DeepSeek-V3's sequence-wise balance loss (arXiv:2412.19437 eqs. 17-20,
 * Megatron's seq_aux_loss): per sequence b of T tokens, coeff * sum_e
 * f_be P_be with f_be = E / (k T) * (its tokens routed to e), P_be the mean
 * over its tokens of the scores normalised to sum 1; the micro-batch's, the
 * mean over its B sequences.  The (B, E) tables from this rank's rows (row
 * n of sequence (row0 + n) / T), summed over the TP group when sliced.
 * dpe (B, E), if non-NULL: d(aux * loss_scale * N) / d normalised score =
 * loss_scale * coeff * f_be.  0 or -1. */
int mk_gpt_moe_seq_aux(const mk_gpt_t *g, const mk_gpt_run_t *run, const moe_parts_t *p, float *dpe, double *aux)
{
    int T = g->T, Tf = T * cps(g), E = g->E, k = g->topk, N = rows(g, run), n0 = row0(g, run);
    size_t BE = (size_t)run->B * E;
    double *f = calloc(2 * BE, sizeof *f), *pe = f + BE;
    if (!f) return mk_error_set("out of memory");
    for (int n = 0; n < N; n++) {
        size_t b = (size_t)((n0 + n) / T) * E;
        const float *s = p->probs + (size_t)n * E;
        double tot = 0;
        for (int e = 0; e < E; e++) tot += s[e];
        for (int e = 0; e < E; e++) pe[b + e] += s[e] / tot / Tf;
        for (int j = 0; j < k; j++) f[b + p->topi[(size_t)n * k + j]] += (double)E / ((double)k * Tf);
    }
    int rc = sliced(g, run) ? tok_sum(run, f, 2 * BE) : 0;
    *aux = 0;
    for (size_t i = 0; rc == 0 && i < BE; i++) {
        *aux += g->cfg.moe_aux_coeff * f[i] * pe[i] / run->B;
        if (dpe) dpe[i] = (float)(run->grad_scale * g->cfg.moe_aux_coeff * f[i]);
    }
    free(f);
    return rc;
}

/* The micro-batch's aux loss: coeff * E * sum_e f_e P_e (sigmoid scores:
 * seq_aux); the probabilities' sums over the TP group when sliced (the
 * counts are the micro-batch's already: plan).  0 or -1. */
static int aux_loss(const mk_gpt_t *g, const mk_gpt_run_t *run, const moe_parts_t *p, double *aux)
{
    if (g->cfg.moe_score_sigmoid) return mk_gpt_moe_seq_aux(g, run, p, NULL, aux);
    int N = rows(g, run), E = g->E;
    double Nt = tokens(g, run), *pe = calloc(E, sizeof *pe);
    if (!pe) return mk_error_set("out of memory");
    for (int e = 0; e < E; e++)
        for (int n = 0; n < N; n++) pe[e] += p->probs[(size_t)n * E + e];
    int rc = sliced(g, run) ? tok_sum(run, pe, E) : 0;
    *aux = 0;
    for (int e = 0; e < E; e++) *aux += (p->cnt[e] / (Nt * g->topk)) * (pe[e] / Nt);
    *aux *= g->cfg.moe_aux_coeff * g->E;
    free(pe);
    return rc;
}

/* Qwen2-MoE's gate on the shared expert (Qwen2MoeSparseMoeBlock): each
 * token's output y (N, C) times its p->sg = sigmoid(x . w_g) (made with
 * the internals, so a recompute remakes it).  Host loops: the MoE layer
 * runs on the cpu backend's host memory. */
static void shared_gate(const mk_gpt_t *g, const moe_parts_t *p, float *y, int N)
{
    for (int n = 0; n < N; n++)
        for (int c = 0; c < g->C; c++) y[(size_t)n * g->C + c] *= p->sg[n];
}

/* Its backward: dy (N, C) at the gated output -> *dys (N, C) the shared
 * expert's output gradient (scratch), w_g's gradient added, dln += the
 * gate's input gradient; y the ungated output, recomputed into ys. */
int mk_gpt_moe_forward(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, float *out)
{
    const mk_backend_t *be = g->be;
    int N = rows(g, run), C = g->C;
    double aux;
    be->copy(be->ctx, out, a->in, (size_t)N * C * sizeof(float));
    if (mk_gpt_moe_inner(g, run, l, a, out) < 0) return -1;
    moe_parts_t p = split(g, run, a->buf);
    if (g->Fs) {
        be->linear_fwd(be->ctx, run->s_c, p.sh, P(g, t_shared(g, l) + 2), NULL, N, g->Fs, C);
        if (g->cfg.moe_shared_gate) shared_gate(g, &p, run->s_c, N);
        be->acc(be->ctx, out, run->s_c, N * C);
    }
    if (aux_loss(g, run, &p, &aux) < 0) return -1;
    run->aux += aux * run->loss_scale * tokens(g, run);
    if (run->ep_tokens) run->ep_tokens(run->ctx, p.cnt, g->E);
    for (int e = 0; g->moe_load && e < g->E; e++) /* the bias's load: the micro-batch's */
        g->moe_load[(size_t)l * g->E + e] += p.cnt[e];
    return 0;
}

/* Backward of one SwiGLU MLP on n rows: dy (n, C) at its output; dW2, dW13
 * added; dx (n, C) += its input gradient; scratch dh (n, F), dgu (n, 2F). */
/* DeepSeek-V3's auxiliary-loss-free balancing (arXiv:2412.19437 2.1.2, Megatron's expert bias):
   each step, every score bias moves by this rate towards the mean load (Megatron's
   --moe-router-bias-update-rate default, DeepSeek-V3's gamma for most of its training) */
#define MK_MOE_BIAS_RATE 1e-3f

void mk_gpt_moe_bias_step(mk_gpt_t *g)
{
    for (int l = 0; l < g->n_layers; l++) {
        if (mk_gpt_moe_bias_tensor(g, l) < 0) continue;
        const float *load = g->moe_load + (size_t)l * g->E;
        float *b = g->moe_bias + (size_t)l * g->E;
        double mean = 0;
        for (int e = 0; e < g->E; e++) mean += load[e] / g->E;
        for (int e = 0; e < g->E; e++) b[e] += MK_MOE_BIAS_RATE * (float)((load[e] < mean) - (load[e] > mean));
    }
    memset(g->moe_load, 0, (size_t)g->n_layers * g->E * sizeof *g->moe_load);
}

int mk_gpt_moe_bias_tensor(const mk_gpt_t *g, int l)
{
    return g->moe_bias && mk_gpt_layer_is_moe(g, l) && g->t[t_bias(g, l)].owned ? t_bias(g, l) : -1;
}
