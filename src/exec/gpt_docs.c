/* Megatron's --reset-position-ids / --reset-attention-mask in the
 * executor (run->docs: 1 where a micro-batch row starts a document): a
 * document's rows run through the position-dependent kernels as a
 * sequence of their own, so RoPE and learned positions count from its
 * first row and attention over it sees nothing before it.  The kernels
 * are the backends' own (no new kernel, on CPU and CUDA alike). */
#include "config.h"
#include "exec/gpt_docs.h"

/* The end of the document segment starting at row r (rows [r, end) at
 * most, a sequence of T rows never crossed). */
static int seg_end(const mk_gpt_t *g, const mk_gpt_run_t *run, int r, int end)
{
    int e = r + 1, seq_end = (r / g->T + 1) * g->T;
    if (seq_end < end) end = seq_end;
    while (e < end && !run->docs[e]) e++;
    return e;
}

/* RoPE (sign +1 forward, -1 backward) on rows [r0, r0+nr) of x (ld floats a row). */
void mk_gpt_rope_rows(mk_gpt_t *g, const mk_gpt_run_t *run, float *x, int r0, int nr, int ld, int sign)
{
    const mk_backend_t *be = g->be;
    void (*f)(void *, float *, const float *, int, int, int, int, int, const mk_rope_t *) =
        sign > 0 ? be->rope_fwd : be->rope_bwd;
    if (!(run->docs && run->reset_pos)) {
        f(be->ctx, x + (size_t)r0 * ld, x + (size_t)r0 * ld, nr, g->T, g->nh + g->kv, g->hs, ld, &g->rope);
        return;
    }
    for (int s = r0, e; s < r0 + nr; s = e) {
        e = seg_end(g, run, s, r0 + nr);
        f(be->ctx, x + (size_t)s * ld, x + (size_t)s * ld, e - s, e - s, g->nh + g->kv, g->hs, ld, &g->rope);
    }
}

/* The attention core, forward (dout NULL) or backward, on whole sequences
 * rows [r0, r0+nr): with --reset-attention-mask one call per document,
 * its probabilities packed in the sequence's T x T block per head. */
void mk_gpt_attn_rows(mk_gpt_t *g, mk_gpt_run_t *run, float *out, float *att, const float *qkv, float *datt,
                      const float *dout, int r0, int nr)
{
    const mk_backend_t *be = g->be;
    size_t mid = (size_t)(g->nh + 2 * g->kv) * g->hs, Cl = (size_t)g->nh * g->hs, T = (size_t)g->T;
    if (!(run->docs && run->reset_mask)) { /* the sequences at once */
        if (!dout)
            be->attention_fwd(be->ctx, out + (size_t)r0 * Cl, att, qkv + (size_t)r0 * mid, nr / g->T, g->T, g->nh,
                              g->kv, g->hs, g->window);
        else
            be->attention_bwd(be->ctx, out + (size_t)r0 * mid, datt, dout + (size_t)r0 * Cl, qkv + (size_t)r0 * mid,
                              att, nr / g->T, g->T, g->nh, g->kv, g->hs);
        return;
    }
    for (int b = r0 / g->T; b < (r0 + nr) / g->T; b++) {
        size_t blk = (size_t)(b - r0 / g->T) * g->nh * T * T, packed = 0;
        for (int s = b * g->T, e; s < (b + 1) * g->T; s = e) {
            e = seg_end(g, run, s, (b + 1) * g->T);
            int n = e - s;
            if (!dout)
                be->attention_fwd(be->ctx, out + (size_t)s * Cl, att + blk + packed, qkv + (size_t)s * mid, 1, n,
                                  g->nh, g->kv, g->hs, g->window);
            else
                be->attention_bwd(be->ctx, out + (size_t)s * mid, datt + blk + packed, dout + (size_t)s * Cl,
                                  qkv + (size_t)s * mid, att + blk + packed, 1, n, g->nh, g->kv, g->hs);
            packed += (size_t)g->nh * n * n;
        }
    }
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
