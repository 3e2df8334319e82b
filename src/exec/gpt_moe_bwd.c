/* The MoE layer's backward (gpt_moe.c has the layer and its forward): the
 * experts' (their output gradients back through the all-to-alls), the shared
 * expert's, the router's and the norm's; a split backward (zero-bubble
 * schedules) keeps in B_IN the weight-gradient GEMMs' output gradients and
 * runs those GEMMs in B_W, as torch's pipelining and DualPipe split them. */
#include "config.h"
#include "exec/gpt_moe_layout.h"

#include <string.h>

/* What a split backward's B_W reads, held alone from the end of its B_IN
 * (a->wgs; the layer's internals and expert side go then): each weight-
 * gradient GEMM's output gradient and input, as the zero-bubble
 * implementations keep them (merak sim's mk_op_t.wgrad_bytes).  A header
 * of integers, R and the local experts' row offsets eoff (El + 1), then
 * the experts' output gradients dye (R, C), gate|up gradients dgu (R, 2F),
 * inputs xe (R, C) and weighted activations h (R, F) in the side's order,
 * the shared expert's output and gate|up gradients dsh (N, C), dsgu (N,
 * 2Fs) and activation sh (N, Fs), the norm output ln (N, C) and the
 * router logits' gradient dlog (N, E): values a 16-bit run's GEMMs round
 * to the run's type anyway, so they wait 16-bit (gpt_act.c bw_convert). */
typedef struct {
    int *hdr, *eoff;
    float *dye, *dgu, *xe, *h, *dsh, *dsgu, *sh, *ln, *dlog;
} moe_wgs_t;

static size_t wgs_head(const mk_gpt_t *g) { return 2 + (size_t)n_local(g); }

static size_t wgs_body(const mk_gpt_t *g, const mk_gpt_run_t *run, size_t R)
{
    size_t N = rows(g, run), C = g->C, Fs = g->Fs;
    return R * (2 * C + 3 * (size_t)g->Fe) + (Fs ? N * (C + 3 * Fs) : 0) + N * (C + g->E);
}

size_t mk_gpt_moe_wgs_runs(const mk_gpt_t *g, const mk_gpt_run_t *run, const mk_gpt_act_t *a, mk_gpt_run16_t *s)
{
    size_t R = (size_t)*(const int *)a->wgs; /* the header sits where it is, packed or not */
    s[0] = (mk_gpt_run16_t){wgs_head(g), 0};
    s[1] = (mk_gpt_run16_t){wgs_body(g, run, R), 1};
    return s[0].n + s[1].n;
}

static moe_wgs_t wgs_split(const mk_gpt_t *g, const mk_gpt_run_t *run, float *b)
{
    size_t N = rows(g, run), C = g->C, F = g->Fe, Fs = g->Fs, R;
    moe_wgs_t w;
    w.hdr = (int *)b, w.eoff = w.hdr + 1, R = (size_t)w.hdr[0];
    w.dye = b + wgs_head(g), w.dgu = w.dye + R * C, w.xe = w.dgu + R * 2 * F, w.h = w.xe + R * C;
    w.dsh = w.h + R * F, w.dsgu = w.dsh + (Fs ? N * C : 0), w.sh = w.dsgu + (Fs ? N * 2 * Fs : 0);
    w.ln = w.sh + (Fs ? N * Fs : 0), w.dlog = w.ln + N * C;
    return w;
}

void mk_gpt_moe_free_side(mk_gpt_run_t *run, const mk_gpt_t *g, mk_gpt_act_t *a)
{
    mk_gpt_run16_t s[2];
    if (a->wgs) mk_gpt_release(run, g, a->wgs, (mk_gpt_moe_wgs_runs(g, run, a, s), mk_gpt_runs_floats(s, 2, a->bw16)));
    a->wgs = NULL;
    if (!a->stash || !a->buf) return;
    mk_gpt_moe_side_runs(g, run, a, s);
    mk_gpt_release(run, g, a->stash, mk_gpt_runs_floats(s, 2, a->buf16)); /* packed with a->buf */
    a->stash = NULL;
}

/* B_IN's end: B_W's inputs (the experts' rows and activations, the norm
 * output, the shared expert's activation) join the gradients in a->wgs. */
static void wgs_inputs(const mk_gpt_t *g, const mk_gpt_run_t *run, const moe_parts_t *p, const moe_side_t *q,
                       const moe_wgs_t *w)
{
    const mk_backend_t *be = g->be;
    size_t N = rows(g, run), R = (size_t)w->hdr[0], C = g->C;
    memcpy(w->eoff, q->eoff, (size_t)(n_local(g) + 1) * sizeof *w->eoff);
    be->copy(be->ctx, w->xe, q->xe, R * C * sizeof(float));
    be->copy(be->ctx, w->h, q->h, R * g->Fe * sizeof(float));
    be->copy(be->ctx, w->ln, p->ln, N * C * sizeof(float));
    if (g->Fs) be->copy(be->ctx, w->sh, p->sh, N * g->Fs * sizeof(float));
}

static void shared_gate_bwd(mk_gpt_t *g, int l, const moe_parts_t *p, const float *dy, float *dys, float *ys,
                            float *dlog, float *dln, int N)
{
    const mk_backend_t *be = g->be;
    size_t C = g->C;
    be->linear_fwd(be->ctx, ys, p->sh, P(g, t_shared(g, l) + 2), NULL, N, g->Fs, (int)C);
    for (int n = 0; n < N; n++) {
        double d = 0;
        float s = p->sg[n];
        for (size_t c = 0; c < C; c++) d += (double)dy[n * C + c] * ys[n * C + c], dys[n * C + c] = s * dy[n * C + c];
        dlog[n] = (float)(d * s * (1.0f - s));
    }
    be->linear_bwd_w(be->ctx, G(g, t_sgate(g, l)), NULL, dlog, p->ln, N, (int)C, 1);
    be->linear_bwd_in(be->ctx, dln, dlog, P(g, t_sgate(g, l)), N, (int)C, 1);
}

/* B_W of one SwiGLU MLP: its two weight gradients from the output gradients
 * (dy at the down-projection, dgu at gate|up) and their inputs (h, x). */
static void swiglu_mlp_wgrad(const mk_gpt_t *g, const float *dy, const float *x, const float *h, const float *dgu,
                             int w13, int w2, int n, int F)
{
    const mk_backend_t *be = g->be;
    if (n == 0) return;
    be->linear_bwd_w(be->ctx, G(g, w2), NULL, dy, h, n, F, g->C);
    be->linear_bwd_w(be->ctx, G(g, w13), NULL, dgu, x, n, g->C, 2 * F);
}

/* The activation's weights' gradients, dwr (n) = dh . act(gu) row by row
 * (the activation rebuilt into act), and dh times the weights: h = act(gu)
 * wr (swiglu_mlp).  The cpu backend's host memory. */
static void weights_bwd(const mk_gpt_t *g, const float *gu, const float *wr, float *dwr, float *dh, float *act,
                        int n, int F)
{
    g->be->swiglu_fwd(g->be->ctx, act, gu, n, F);
    for (int r = 0; r < n; r++) {
        double d = 0;
        float *row = dh + (size_t)r * F;
        for (int f = 0; f < F; f++) d += (double)row[f] * act[(size_t)r * F + f], row[f] *= wr[r];
        dwr[r] = (float)d;
    }
}

/* The MLP's backward; wr (NULL: none) its rows' weights on the activation,
 * their gradients into dwr; keep (a split backward's B_IN): no weight
 * gradients, the gate|up gradient kept there for B_W (dy is the caller's
 * to keep). */
static void swiglu_mlp_bwd(const mk_gpt_t *g, const float *dy, const float *x, const float *gu, const float *h,
                           const float *wr, float *dwr, int w13, int w2, float *dx, float *dh, float *dgu, int n,
                           int F, float *keep)
{
    const mk_backend_t *be = g->be;
    if (n == 0) return;
    be->zero(be->ctx, dh, (size_t)n * F * sizeof(float));
    be->linear_bwd_in(be->ctx, dh, dy, P(g, w2), n, F, g->C);
    if (wr) weights_bwd(g, gu, wr, dwr, dh, dgu, n, F);
    be->zero(be->ctx, dgu, (size_t)n * 2 * F * sizeof(float));
    be->swiglu_bwd(be->ctx, dgu, dh, gu, n, F);
    if (keep) be->copy(be->ctx, keep, dgu, (size_t)n * 2 * F * sizeof(float));
    else swiglu_mlp_wgrad(g, dy, x, h, dgu, w13, w2, n, F);
    be->linear_bwd_in(be->ctx, dx, dgu, P(g, w13), n, g->C, 2 * F);
}

/* Scratch of the backward: the expert side's (R, C) and (R, C + 1) and its
 * rows' weights' gradients (R), dh and dgu (3 wf: the experts' R rows or
 * the shared expert's N, the wider), dys (A, C), dxg (A, C + 1), dwslot
 * (A), dtopw (N, k), dlogits (N, E), dpe (E; sigmoid scores: (B, E),
 * seq_aux, and sliced its rows' (N, E)); N this rank's rows. */
static size_t bwd_scratch(const mk_gpt_t *g, const mk_gpt_run_t *run, size_t R, size_t *wf)
{
    size_t N = rows(g, run), A = slots(g, run), C = g->C, E = g->E;
    *wf = R * g->Fe > N * g->Fs ? R * g->Fe : N * g->Fs;
    return R * (2 * C + 2) + 3 * *wf + A * (2 * C + 2) + N * (g->topk + E) + (size_t)run->B * E +
           (sliced(g, run) ? N * E : 0);
}

/* The router's backward: dlogits from the weights' (dwslot: the kept
 * slots', experts_bwd) and the aux gradients, then Wr's gradient and dln
 * += dlogits Wr.  Sliced, the sequence-wise loss's (B, E) gradient goes to
 * the kernel row by row (T = 1).  0 or -1. */
static int router_bwd(mk_gpt_t *g, mk_gpt_run_t *run, int l, moe_parts_t *p, const float *dwslot, float *dtopw,
                      float *dlog, float *dpe, float *dln, float *keep)
{
    const mk_backend_t *be = g->be;
    int N = rows(g, run), C = g->C, E = g->E, kept = p->off[E];
    memset(dtopw, 0, (size_t)N * g->topk * sizeof *dtopw);
    for (int s = 0; s < kept; s++) dtopw[p->slot_src[s]] = dwslot[s];
    if (g->cfg.moe_score_sigmoid) {
        double aux;
        int T = g->T, n0 = row0(g, run);
        float *dr = dpe;
        if (mk_gpt_moe_seq_aux(g, run, p, dpe, &aux) < 0) return -1;
        if (sliced(g, run)) {
            dr = dpe + (size_t)run->B * E, T = 1;
            for (int n = 0; n < N; n++) memcpy(dr + (size_t)n * E, dpe + (size_t)((n0 + n) / g->T) * E, E * sizeof *dr);
        }
        be->moe_route_sig_bwd(be->ctx, dlog, p->probs, p->topi, dtopw, g->cfg.moe_aux_coeff ? dr : NULL, N, E,
                              g->topk, T, !g->cfg.moe_pre_softmax, topk_scale(g));
    } else {
        for (int e = 0; e < E; e++)
            dpe[e] = (float)(run->grad_scale * g->cfg.moe_aux_coeff * E * p->cnt[e] /
                             ((double)tokens(g, run) * g->topk));
        be->moe_route_bwd(be->ctx, dlog, p->probs, p->topi, p->topw, dtopw, dpe, N, E, g->topk,
                          !g->cfg.moe_pre_softmax);
    }
    if (keep) be->copy(be->ctx, keep, dlog, (size_t)N * E * sizeof(float)); /* B_W's (keep: split) */
    else be->linear_bwd_w(be->ctx, G(g, t_router(g, l)), NULL, dlog, p->ln, N, C, E);
    be->linear_bwd_in(be->ctx, dln, dlog, P(g, t_router(g, l)), N, C, E);
    return 0;
}

/* Sliced: the gradients this micro-batch adds to the layer's replicated
 * tensors (its dense range: norm, router, shared expert) are summed over
 * the TP group (each rank saw its rows only): the range's sum so far is
 * set aside (dense_hold: the held copy, the range zeroed), the backward
 * adds this micro-batch's, and dense_sum all-reduces it and adds the held
 * sum back.  NULL / -1: failed. */
static float *dense_hold(mk_gpt_t *g, mk_gpt_run_t *run, int l)
{
    size_t n = mk_gpt_moe_dense_floats(g, l);
    float *h = mk_gpt_alloc(run, g, n), *gr = G(g, t_norm(g, l));
    if (!h) return NULL;
    g->be->copy(g->be->ctx, h, gr, n * sizeof(float));
    g->be->zero(g->be->ctx, gr, n * sizeof(float));
    return h;
}

static int dense_sum(mk_gpt_t *g, mk_gpt_run_t *run, int l, float *h)
{
    size_t n = mk_gpt_moe_dense_floats(g, l);
    float *gr = G(g, t_norm(g, l));
    int rc = run->allreduce(run->ctx, gr, (int)n, 0);
    g->be->acc(g->be->ctx, gr, h, n);
    mk_gpt_release(run, g, h, n);
    return rc;
}

/* The experts' backward: dys (kept, C) at the kept slots' outputs to
 * their ranks, each local expert's gradients, dxg (kept, C; room for C +
 * 1) back with the slots' weights' gradients dwslot (kept); scratch t (R,
 * C) then (R, C + 1), dwr (R). */
static int experts_bwd(mk_gpt_t *g, mk_gpt_run_t *run, int l, const moe_parts_t *p, const moe_side_t *q,
                       const float *dys, float *dxg, float *dwslot, float *t, float *dwr, float *dh, float *dgu,
                       const moe_wgs_t *w)
{
    const mk_backend_t *be = g->be;
    size_t R = *p->nrecv, C = g->C, F = g->Fe;
    float *dye = t + R * C;
    int A = p->off[g->E];
    if (mk_gpt_moe_exchange(g, run, p, 0, dys, t, (int)C) < 0) return -1;
    be->moe_gather(be->ctx, dye, t, q->perm, NULL, (int)R, (int)C);
    if (w) be->copy(be->ctx, w->dye, dye, R * C * sizeof(float)); /* the down-projections' output gradients */
    be->zero(be->ctx, t, R * C * sizeof(float));
    for (int j = 0; j < n_local(g); j++) {
        size_t r = q->eoff[j];
        int e = g->ep_rank * n_local(g) + j;
        swiglu_mlp_bwd(g, dye + r * C, q->xe + r * C, q->gu + r * 2 * F, q->h + r * F, q->wr + r, dwr + r,
                       t_w13(g, l, e), t_w2(g, l, e), t + r * C, dh, dgu, q->eoff[j + 1] - q->eoff[j], (int)F,
                       w ? w->dgu + r * 2 * F : NULL);
    }
    for (size_t i = 0; i < R; i++) { /* back to peer-major, each row with its weight's gradient */
        float *d = dye + (size_t)q->perm[i] * (C + 1);
        memcpy(d, t + i * C, C * sizeof *d);
        d[C] = dwr[i];
    }
    if (mk_gpt_moe_exchange(g, run, p, 1, dye, dxg, (int)C + 1) < 0) return -1;
    for (int s = 0; s < A; s++) { /* the rows compacted in place to C wide, front to back */
        dwslot[s] = dxg[(size_t)s * (C + 1) + C];
        memmove(dxg + (size_t)s * C, dxg + (size_t)s * (C + 1), C * sizeof *dxg);
    }
    return 0;
}

/* The layer's backward on this rank's rows, the replicated tensors' gradients this rank's share;
 * split (B_IN) the weight-gradient GEMMs' output gradients kept in a->wgs instead. */
static int moe_backward_rows(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, const float *dout, float *din,
                             int split_bwd)
{
    const mk_backend_t *be = g->be;
    int N = rows(g, run), C = g->C, E = g->E;
    moe_parts_t p = split(g, run, a->buf);
    size_t A = slots(g, run), R = *p.nrecv, wf, ns = bwd_scratch(g, run, R, &wf);
    moe_side_t q = side_split(g, a->stash, R);
    if (split_bwd && !(a->wgs = mk_gpt_alloc(run, g, wgs_head(g) + wgs_body(g, run, R)))) return -1;
    if (split_bwd) *(int *)a->wgs = (int)R;
    moe_wgs_t wk = split_bwd ? wgs_split(g, run, a->wgs) : (moe_wgs_t){0}, *w = split_bwd ? &wk : NULL;
    float *s = mk_gpt_alloc(run, g, ns);
    if (!s) return -1;
    float *t = s, *dwr = t + R * (2 * C + 1), *dh = dwr + R, *dgu = dh + wf, *dys = dgu + 2 * wf, *dxg = dys + A * C;
    float *dwslot = dxg + A * (C + 1), *dtopw = dwslot + A, *dlog = dtopw + (size_t)N * g->topk;
    float *dpe = dlog + (size_t)N * E, *dln = run->s_c;
    int kept = p.off[E], rc = 0;
    be->moe_gather(be->ctx, dys, dout, p.slot_tok, NULL, kept, C);  /* the weights are the activation's */
    if (experts_bwd(g, run, l, &p, &q, dys, dxg, dwslot, t, dwr, dh, dgu, w) < 0) rc = -1;
    if (rc == 0) {
        be->zero(be->ctx, dln, (size_t)N * C * sizeof(float));
        be->moe_scatter(be->ctx, dln, dxg, p.slot_tok, NULL, kept, C);
        const float *dsh = dout; /* the shared expert's output gradient; gated: dys and dxg are free for it */
        if (g->Fs && g->cfg.moe_shared_gate) shared_gate_bwd(g, l, &p, dout, dys, dxg, dlog, dln, N), dsh = dys;
        if (g->Fs && w) be->copy(be->ctx, w->dsh, dsh, (size_t)N * C * sizeof(float));
        if (g->Fs)
            swiglu_mlp_bwd(g, dsh, p.ln, p.sgu, p.sh, NULL, NULL, t_shared(g, l), t_shared(g, l) + 2, dln, dh, dgu, N,
                           g->Fs, w ? w->dsgu : NULL);
        rc = router_bwd(g, run, l, &p, dwslot, dtopw, dlog, dpe, dln, w ? w->dlog : NULL);
    }
    if (rc == 0) {
        if (din != dout) be->copy(be->ctx, din, dout, (size_t)N * C * sizeof(float));
        be->rmsnorm_bwd(be->ctx, din, G(g, t_norm(g, l)), dln, a->in, P(g, t_norm(g, l)), p.rstd, N, C);
        if (w) wgs_inputs(g, run, &p, &q, w);
    }
    mk_gpt_release(run, g, s, ns);
    return rc;
}

/* A split backward's B_W: the experts', the shared expert's and the router's weight gradients from
 * what B_IN kept (a->wgs: their GEMMs' output gradients and inputs). */
static int moe_wgrad_rows(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a)
{
    const mk_backend_t *be = g->be;
    if (!a->wgs) return mk_error_set("B_W of MoE layer %d without its B_IN", l);
    int N = rows(g, run), C = g->C;
    size_t F = g->Fe;
    moe_wgs_t w = wgs_split(g, run, a->wgs);
    for (int j = 0; j < n_local(g); j++) {
        size_t r = (size_t)w.eoff[j];
        int e = g->ep_rank * n_local(g) + j;
        swiglu_mlp_wgrad(g, w.dye + r * C, w.xe + r * C, w.h + r * F, w.dgu + r * 2 * F, t_w13(g, l, e),
                         t_w2(g, l, e), w.eoff[j + 1] - w.eoff[j], (int)F);
    }
    if (g->Fs) swiglu_mlp_wgrad(g, w.dsh, w.ln, w.sh, w.dsgu, t_shared(g, l), t_shared(g, l) + 2, N, g->Fs);
    be->linear_bwd_w(be->ctx, G(g, t_router(g, l)), NULL, w.dlog, w.ln, N, C, g->E);
    return 0;
}

static int moe_backward_part(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, const float *dout, float *din,
                             mk_bwd_mode_t mode)
{
    if (mode == MK_BWD_W) return moe_wgrad_rows(g, run, l, a);
    return moe_backward_rows(g, run, l, a, dout, din, mode == MK_BWD_IN);
}

int mk_gpt_moe_backward(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, const float *dout, float *din,
                        mk_bwd_mode_t mode)
{
    /* with CP alone the replicated tensors' gradients sum in the DP x CP reduction, as every layer's */
    if (!sp_rows(g, run)) return moe_backward_part(g, run, l, a, dout, din, mode);
    /* sliced: B_IN's (the norm's) and B_W's (the router's, the shared expert's) each summed over TP */
    float *h = dense_hold(g, run, l);
    if (!h) return -1;
    if (moe_backward_part(g, run, l, a, dout, din, mode) < 0) {
        mk_gpt_release(run, g, h, mk_gpt_moe_dense_floats(g, l));
        return -1;
    }
    return dense_sum(g, run, l, h);
}
