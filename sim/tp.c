/* Sub-pipelined tensor parallelism (sim/README.md "Cost model", TP overlap),
 * modelled explicitly as two streams, compute and TP comm,
 * over a chunk's layers.  Each micro-batch splits into two halves (h1,
 * h2); a half costs c_half (the GEMMs are half as tall, so their
 * efficiency drops and launches double); an all-reduce of a half carries
 * half the bytes (ar_half).  The comm stream runs one collective at a time.
 *
 *  level 0  no overlap: t += c_full + n_ar * ar_full per layer.
 *  level 1  per layer: the part before the row-parallel linear runs on the
 *           whole micro-batch (c_full - row_full); then row(h1), AR(h1)
 *           starts while row(h2) computes, AR(h2) follows; the layer ends
 *           when both all-reduces are done.  So AR(h1) hides behind
 *           row(h2) and AR(h2) is exposed.
 *  level 2  the halves are independent chains: layer l of half h starts
 *           when the compute stream is free and AR(l-1, h) is done; its
 *           all-reduce then queues on the comm stream.  So each half's
 *           all-reduce hides behind the other half's compute.  At a
 *           transformer-block boundary both halves synchronise (the next
 *           block waits for every all-reduce of this one).
 *  level 3  as level 2 without the block-boundary synchronisation: the
 *           overlap carries across blocks; only the chunk end (the p2p
 *           send or the end of the backward) waits for everything.
 * Backward mirrors forward (layers in reverse, the column-parallel
 * linear's input-gradient all-reduce in place of the row one's).
 * Context parallelism's K/V ring (sim_chunk.c) lives inside a layer's
 * compute: its exposed part (ring_*) lengthens the layer's compute; so do
 * an MoE layer's EP all-to-alls (a2a_*, all of them: dispatch at the
 * layer's start, combine at its end, traced there). */
#include "sim/sim_internal.h"

/* The layer's all-to-alls for the trace: the first half of them (the
 * dispatches) from its start t0, the rest (the combines) ending at t1;
 * with halves (level >= 2) each is two half-size ones. */
static void a2a_emit(const mk_tpl_t *l, int level, double t0, double t1, mk_tp_emit_fn emit, void *ctx)
{
    int halves = level >= 2, n = l->n_a2a * (halves ? 2 : 1);
    double d = halves ? l->a2a_half : l->a2a_full;
    for (int a = 0; a < n / 2; a++) emit(ctx, 2, t0 + a * d, d, l->layer);
    for (int a = n / 2; a < n; a++) emit(ctx, 2, t1 - (n - a) * d, d, l->layer);
}

double mk_tp_run(const mk_tpl_t *L, int n, int level, double *end, double *comm, mk_tp_emit_fn emit,
                 void *ctx)
{
    double t = 0, cf = 0, cs = 0, ready[2] = {0, 0};
    for (int i = 0; i < n; i++) {
        const mk_tpl_t *l = &L[i];
        if (emit) /* the ring's steps from the layer's start */
            for (int k = 0; k < l->n_kv; k++) emit(ctx, 1, t + k * l->kv_step, l->kv_full, l->layer);
        double t_in = t; /* the layer's start (the dispatch's) */
        if (level <= 0 || (l->n_ar == 0 && level == 1)) {
            t += l->c_full + mk_tpl_block_full(l);
            for (int a = 0; a < l->n_ar; a++) {
                if (emit) emit(ctx, 0, t, l->ar_full, l->layer);
                t += l->ar_full;
                cs += l->ar_full;
            }
            cf = t;
        } else if (level == 1) {
            t += l->c_full - l->row_full + mk_tpl_block_full(l);
            for (int h = 0; h < 2; h++) {
                t += l->row_half;
                double s = cf > t ? cf : t, d = l->n_ar * l->ar_half;
                if (emit && d > 0) emit(ctx, 0, s, d, l->layer);
                cf = s + d;
                cs += d;
            }
            if (cf > t) t = cf;
        } else {
            for (int h = 0; h < 2; h++) {
                double s = t > ready[h] ? t : ready[h];
                t = s + l->c_half + mk_tpl_block_half(l);
                if (l->n_ar > 0) {
                    double c0 = cf > t ? cf : t, d = l->n_ar * l->ar_half;
                    if (emit) emit(ctx, 0, c0, d, l->layer);
                    cf = c0 + d;
                    cs += d;
                    ready[h] = cf;
                } else {
                    ready[h] = t;
                }
            }
            int boundary = i == n - 1 || L[i + 1].block != l->block;
            if (level == 2 && boundary) {
                double r = ready[0] > ready[1] ? ready[0] : ready[1];
                ready[0] = ready[1] = r;
            }
        }
        if (emit && l->n_a2a) a2a_emit(l, level, t_in, t, emit, ctx);
        if (end) {
            double e = t;
            if (cf > e) e = cf;
            if (level >= 2) {
                if (ready[0] > e) e = ready[0];
                if (ready[1] > e) e = ready[1];
            }
            end[i] = e;
        }
    }
    if (comm) *comm = cs;
    double e = t > cf ? t : cf;
    if (ready[0] > e) e = ready[0];
    if (ready[1] > e) e = ready[1];
    return e;
}
