/* Row helpers of the executor's attention layer (gpt_layers.c): Qwen3's
 * q/k norms, and Megatron's --reset-position-ids / --reset-attention-mask in the
 * executor (run->docs: 1 where a micro-batch row starts a document): a
 * document's rows run through the position-dependent kernels as a
 * sequence of their own, so RoPE and learned positions count from its
 * first row and attention over it sees nothing before it.  The kernels
 * are the backends' own (no new kernel, on CPU and CUDA alike). */
#include "config.h"
#include "exec/gpt_attn.h"

/* The end of the document segment starting at row r (rows [r, end) at
 * most, a sequence of T rows never crossed). */
static int seg_end(const mk_gpt_t *g, const mk_gpt_run_t *run, int r, int end)
{
    int e = r + 1, seq_end = (r / g->T + 1) * g->T;
    if (seq_end < end) end = seq_end;
    while (e < end && !run->docs[e]) e++;
    return e;
}

/* RoPE (sign +1 forward, -1 backward) on the first nheads heads of hs of
 * rows [r0, r0+nr) of x (ld floats a row). */
void mk_gpt_rope_heads(mk_gpt_t *g, const mk_gpt_run_t *run, float *x, int r0, int nr, int ld, int nheads, int hs,
                       int sign)
{
    const mk_backend_t *be = g->be;
    void (*f)(void *, float *, const float *, int, int, int, int, int, const mk_rope_t *) =
        sign > 0 ? be->rope_fwd : be->rope_bwd;
    if (!(run->docs && run->reset_pos)) {
        f(be->ctx, x + (size_t)r0 * ld, x + (size_t)r0 * ld, nr, g->T, nheads, hs, ld, &g->rope);
        return;
    }
    for (int s = r0, e; s < r0 + nr; s = e) {
        e = seg_end(g, run, s, r0 + nr);
        f(be->ctx, x + (size_t)s * ld, x + (size_t)s * ld, e - s, e - s, nheads, hs, ld, &g->rope);
    }
}

void mk_gpt_rope_rows(mk_gpt_t *g, const mk_gpt_run_t *run, float *x, int r0, int nr, int ld, int sign)
{
    mk_gpt_rope_heads(g, run, x, r0, nr, ld, g->nh + g->kv, g->hs, sign);
}

/* (CP's ring, all-gather and all-to-all keep no s x s tensor either: exec_cp.c) */
size_t mk_gpt_att_seq(const mk_gpt_t *g) { return (size_t)g->nh * g->T * (g->fused_attn || g->cp > 1 ? 1 : g->T); }

int mk_gpt_att_probs(const mk_gpt_t *g) { return !g->fused_attn && g->cp <= 1; }

int mk_gpt_att16(const mk_gpt_t *g, const mk_gpt_run_t *run)
{
    return run->act16 && mk_gpt_att_probs(g) && g->be->attention16_fwd && g->be->attention16_bwd;
}

void mk_gpt_att_round(const mk_gpt_t *g, int l, const mk_gpt_run_t *run, void *att, size_t seqs)
{
    if (mk_gpt_att_probs(g) && !mk_gpt_att16(g, run)) mk_gpt_round_kept(g, l, run, att, seqs * mk_gpt_att_seq(g));
}

size_t mk_gpt_att_floats(const mk_gpt_t *g, const mk_gpt_run_t *run, size_t seqs)
{
    size_t n = seqs * mk_gpt_att_seq(g);
    return mk_gpt_att16(g, run) ? (n + 1) / 2 : n;
}

/* an element's bytes: a 16-bit value or a float */
static size_t att_elem(const mk_gpt_t *g, const mk_gpt_run_t *run)
{
    return mk_gpt_att16(g, run) ? sizeof(uint16_t) : sizeof(float);
}

void *mk_gpt_att_at(const mk_gpt_t *g, const mk_gpt_run_t *run, void *base, size_t seqs)
{
    return base ? (char *)base + seqs * mk_gpt_att_seq(g) * att_elem(g, run) : NULL;
}

/* The core on n rows of one call (B = n / T sequences of T, or one
 * document of n): materialised or fused (fo: the forward's context). */
static void core(mk_gpt_t *g, const mk_gpt_run_t *run, float *out, void *att, const float *qkv, void *datt,
                 const float *dout, const float *fo, int B, int T)
{
    const mk_backend_t *be = g->be;
    if (mk_gpt_att16(g, run) && !dout)
        be->attention16_fwd(be->ctx, out, att, qkv, B, T, g->nh, g->kv, g->hs, g->window, run->act16);
    else if (mk_gpt_att16(g, run))
        be->attention16_bwd(be->ctx, out, datt, dout, qkv, att, B, T, g->nh, g->kv, g->hs, run->act16);
    else if (g->fused_attn && !dout)
        be->attention_fused_fwd(be->ctx, out, att, qkv, B, T, g->nh, g->kv, g->hs, g->window);
    else if (g->fused_attn)
        be->attention_fused_bwd(be->ctx, out, dout, qkv, fo, att, B, T, g->nh, g->kv, g->hs, g->window);
    else if (!dout)
        be->attention_fwd(be->ctx, out, att, qkv, B, T, g->nh, g->kv, g->hs, g->window);
    else
        be->attention_bwd(be->ctx, out, datt, dout, qkv, att, B, T, g->nh, g->kv, g->hs);
}

/* The attention core, forward (dout NULL) or backward, on whole sequences
 * rows [r0, r0+nr): with --reset-attention-mask one call per document,
 * its probabilities (fused: log-sum-exps) packed in the sequence's block. */
void mk_gpt_attn_rows(mk_gpt_t *g, mk_gpt_run_t *run, float *out, void *att, const float *qkv, void *datt,
                      const float *dout, const float *fo, int r0, int nr)
{
    size_t mid = (size_t)(g->nh + 2 * g->kv) * g->hs, Cl = (size_t)g->nh * g->hs;
    size_t ow = dout ? mid : Cl, iw = dout ? Cl : mid; /* out's and dout's widths */
    if (!(run->docs && run->reset_mask)) { /* the sequences at once */
        core(g, run, out + (size_t)r0 * ow, att, qkv + (size_t)r0 * mid, datt, dout ? dout + (size_t)r0 * iw : NULL,
             fo ? fo + (size_t)r0 * Cl : NULL, nr / g->T, g->T);
        return;
    }
    size_t el = att_elem(g, run);
    for (int b = r0 / g->T; b < (r0 + nr) / g->T; b++) {
        char *ab = mk_gpt_att_at(g, run, att, (size_t)(b - r0 / g->T)), *db = mk_gpt_att_at(g, run, datt, (size_t)(b - r0 / g->T));
        size_t packed = 0; /* elements */
        for (int s = b * g->T, e; s < (b + 1) * g->T; s = e) {
            e = seg_end(g, run, s, (b + 1) * g->T);
            int n = e - s;
            core(g, run, out + (size_t)s * ow, ab + packed * el, qkv + (size_t)s * mid, db ? db + packed * el : NULL,
                 dout ? dout + (size_t)s * iw : NULL, fo ? fo + (size_t)s * Cl : NULL, 1, n);
            packed += (size_t)g->nh * n * (g->fused_attn ? 1 : n);
        }
    }
}


/* Selective recompute (run->drop_core): a materialised core's
 * probabilities without CP (whose ring keeps only log-sum-exps) outside
 * MLA (whose layers keep theirs). */
int mk_gpt_att_dropped(const mk_gpt_t *g, int l, const mk_gpt_run_t *run)
{
    return run->drop_core && mk_gpt_att_probs(g) && !g->mla && mk_gpt_layer_kind(g, l) == MK_GPT_ATTN &&
           !mk_gpt_layer_is_moe(g, l);
}

size_t mk_gpt_att_kept(const mk_gpt_t *g, int l, const mk_gpt_run_t *run)
{
    return mk_gpt_att_dropped(g, l, run) ? 0 : mk_gpt_att_floats(g, run, (size_t)run->B);
}

/* The probabilities of rows [r0, r0+nr) remade from the kept Q|K|V (qkv)
 * into a new buffer of the micro-batch's size: the forward's kernel,
 * rounded as the forward rounded them, its context dropped.  NULL when out
 * of memory. */
static void *att_redo(mk_gpt_t *g, mk_gpt_run_t *run, int l, const float *qkv, int r0, int nr)
{
    size_t na = mk_gpt_att_floats(g, run, (size_t)run->B), no = (size_t)run->B * g->T * g->nh * g->hs;
    float *att = mk_gpt_alloc(run, g, na), *ctx = att ? mk_gpt_alloc(run, g, no) : NULL;
    if (!ctx) {
        if (att) mk_gpt_release(run, g, att, na);
        return NULL;
    }
    void *at = mk_gpt_att_at(g, run, att, (size_t)(r0 / g->T));
    mk_gpt_attn_rows(g, run, ctx, at, qkv, NULL, NULL, NULL, r0, nr);
    mk_gpt_att_round(g, l, run, at, (size_t)(nr / g->T));
    mk_gpt_release(run, g, ctx, no);
    return att;
}

int mk_gpt_attn_bwd_rows(mk_gpt_t *g, mk_gpt_run_t *run, int l, float *dqkv, void *att, const float *qkv, void *datt,
                         const float *dout, const float *fo, int r0, int nr)
{
    void *mine = mk_gpt_att_dropped(g, l, run) ? att_redo(g, run, l, qkv, r0, nr) : NULL;
    if (mk_gpt_att_dropped(g, l, run) && !mine) return -1;
    if (mine) att = mk_gpt_att_at(g, run, mine, (size_t)(r0 / g->T));
    mk_gpt_attn_rows(g, run, dqkv, att, qkv, datt, dout, fo, r0, nr);
    if (mine) mk_gpt_release(run, g, mine, mk_gpt_att_floats(g, run, (size_t)run->B));
    return 0;
}

/* The document segments of rows [0, N) for learned positions (one
 * segment of sequences without --reset-position-ids or a table). */
static int embed_seg(mk_gpt_t *g, const mk_gpt_run_t *run, int has_wpe, int s, int N, int *T)
{
    int segs = run->docs && run->reset_pos && has_wpe, e = segs ? seg_end(g, run, s, N) : N;
    *T = segs ? e - s : g->T;
    return e;
}

void mk_gpt_embed_fwd_rows(mk_gpt_t *g, const mk_gpt_run_t *run, float *out, const int *tokens, const float *wte,
                           const float *wpe, int N)
{
    for (int s = 0, e, T; s < N; s = e) {
        e = embed_seg(g, run, wpe != NULL, s, N, &T);
        g->be->embed_fwd(g->be->ctx, out + (size_t)s * g->C, tokens + s, wte, wpe, e - s, T, g->C, g->v0, g->Vl);
    }
}

void mk_gpt_embed_bwd_rows(mk_gpt_t *g, const mk_gpt_run_t *run, float *dwte, float *dwpe, const float *dout,
                           const int *tokens, int N)
{
    for (int s = 0, e, T; s < N; s = e) {
        e = embed_seg(g, run, dwpe != NULL, s, N, &T);
        g->be->embed_bwd(g->be->ctx, dwte, dwpe, dout + (size_t)s * g->C, tokens + s, e - s, T, g->C, g->v0, g->Vl);
    }
}

/* ---- Qwen3's q/k norms (--qk-layernorm): RMSNorm over each q head's hs
 * with q_norm's weight and each K/V head's k with k_norm's, between the
 * QKV GEMM and RoPE, a token row at a time (its heads are contiguous); qk
 * keeps the GEMM's rows, qkr each head's 1/rms.  Their weights are every
 * TP rank's, each rank's heads adding to their gradients: summed over the
 * TP group (transformers' replicated_with_grad_allreduce). */
static int qk_norm_w(const mk_gpt_t *g, int l) { return g->first[l] + 4; } /* q_norm; k_norm next */

static size_t qkv_w(const mk_gpt_t *g) { return (size_t)(g->nh + 2 * g->kv) * g->hs; }

void mk_gpt_qk_norm_fwd(mk_gpt_t *g, int l, float *x1, float *qk, float *qkr, int r0, int nr)
{
    const mk_backend_t *be = g->be;
    size_t mid = qkv_w(g), hs = g->hs, h = (size_t)g->nh + g->kv;
    const float *wq = mk_gpt_param(g, qk_norm_w(g, l)), *wk = mk_gpt_param(g, qk_norm_w(g, l) + 1);
    be->copy(be->ctx, qk + r0 * mid, x1 + r0 * mid, (size_t)nr * mid * sizeof(float));
    for (size_t r = r0; r < (size_t)r0 + nr; r++) {
        const float *in = qk + r * mid;
        be->rmsnorm_fwd(be->ctx, x1 + r * mid, qkr + r * h, in, wq, g->eps, g->nh, g->hs);
        be->rmsnorm_fwd(be->ctx, x1 + r * mid + g->nh * hs, qkr + r * h + g->nh, in + g->nh * hs, wk, g->eps, g->kv,
                        g->hs);
    }
}

int mk_gpt_qk_norm_bwd(mk_gpt_t *g, mk_gpt_run_t *run, int l, const float *qk, const float *qkr, float *dmid, int r0,
                       int nr)
{
    const mk_backend_t *be = g->be;
    size_t mid = qkv_w(g), hs = g->hs, h = (size_t)g->nh + g->kv;
    const float *wq = mk_gpt_param(g, qk_norm_w(g, l)), *wk = mk_gpt_param(g, qk_norm_w(g, l) + 1);
    float *din = run->s_qk, *dw = run->s_qk + h * hs;
    be->zero(be->ctx, dw, 2 * hs * sizeof(float));
    for (size_t r = r0; r < (size_t)r0 + nr; r++) {
        const float *in = qk + r * mid, *rs = qkr + r * h;
        be->zero(be->ctx, din, h * hs * sizeof(float));
        be->rmsnorm_bwd(be->ctx, din, dw, dmid + r * mid, in, wq, rs, g->nh, g->hs);
        be->rmsnorm_bwd(be->ctx, din + g->nh * hs, dw + hs, dmid + r * mid + g->nh * hs, in + g->nh * hs, wk,
                        rs + g->nh, g->kv, g->hs);
        be->copy(be->ctx, dmid + r * mid, din, h * hs * sizeof(float));
    }
    if (g->tp > 1 && run->allreduce(run->ctx, dw, (int)(2 * hs), 0) < 0) return -1;
    be->acc(be->ctx, mk_gpt_grad(g, qk_norm_w(g, l)), dw, hs);
    be->acc(be->ctx, mk_gpt_grad(g, qk_norm_w(g, l) + 1), dw + hs, hs);
    return 0;
}
