/* Interleaved 1F1B (Megatron-LM 2021): each rank holds v model chunks; the
 * virtual pipeline is chunk-major (virtual stage chunk*p + rank), and
 * micro-batches go through in groups of p, chunk by chunk.
 *   Bubble: (p-1)(F+B)/v per stage with F, B the whole stage's times, i.e.
 *     (p-1)/(v*m) of ideal.  Needs m a multiple of p (Megatron's order).
 *   In flight on rank i (counting micro-batch x chunk pairs): at most
 *     (p-1-i)*2 + (v-1)*p + 1 warm-up forwards, capped at m*v.
 * Order (Megatron's forward_backward_pipelining_with_interleaving): the
 * k-th forward is chunk (k mod pv)/p, micro-batch (k div pv)*p + k mod p;
 * the k-th backward the same with the chunks reversed. */
#include "config.h"
#include "sched/sched_internal.h"

/* micro-batch of the k-th forward (V = pp*vpp virtual stages) */
static int vmb(int k, int p, int V) { return (k / V) * p + k % p; }

static int emit_k(mk_sched_t *s, int st, int k, int fwd)
{
    int p = s->spec.pp, v = s->spec.vpp, V = s->n_vstages, c = (k % V) / p;
    if (fwd) return mk_sched_emit(s, st, MK_INSTR_F, vmb(k, p, V), c);
    return mk_sched_emit(s, st, MK_INSTR_B, vmb(k, p, V), v - 1 - c);
}

int mk_sched_gen_interleaved(mk_sched_t *s)
{
    int p = s->spec.pp, v = s->spec.vpp, total = s->spec.m * v;
    for (int st = 0; st < p; st++) {
        int w = v > 1 ? (p - st - 1) * 2 + (v - 1) * p : p - st - 1;
        if (w > total) w = total;
        for (int k = 0; k < w; k++)
            if (emit_k(s, st, k, 1) < 0) return -1;
        for (int i = 0; i < total; i++) {
            if (w + i < total && emit_k(s, st, w + i, 1) < 0) return -1;
            if (emit_k(s, st, i, 0) < 0) return -1;
        }
    }
    return 0;
}
