/* ZB-H1 (Qi et al. 2024, "Zero Bubble Pipeline Parallelism"): B is split
 * into B_IN (input gradient, on the critical path) and B_W (weight
 * gradient, free to move).  Stage i keeps 1F1B's warm-up of p-1-i
 * forwards and defers its weight passes by i, so the deferred B_Ws fill
 * the cool-down bubble.
 *   Bubble: about (p-1)(F + B_IN - B_W) instead of (p-1)(F+B), a third of
 *     1F1B's when F = B_IN = B_W.
 *   In flight on stage i (F to B_W): at most min(m, p), 1F1B's peak (stage
 *     0's), so memory is no higher than 1F1B's.
 * A checkpointed layer recomputes inside B_IN (never in B_W). */
#include "config.h"
#include "sched/sched_internal.h"

static int zbh1_stage(mk_sched_t *s, int st)
{
    int m = s->spec.m, w = s->spec.pp - st - 1, d = st, nw = 0;
    if (w > m) w = m;
    for (int k = 0; k < w; k++)
        if (mk_sched_emit(s, st, MK_INSTR_F, k, 0) < 0) return -1;
    for (int k = 0; k < m; k++) {
        if (w + k < m && mk_sched_emit(s, st, MK_INSTR_F, w + k, 0) < 0) return -1;
        if (mk_sched_emit(s, st, MK_INSTR_B_IN, k, 0) < 0) return -1;
        if (k - d >= 0 && mk_sched_emit(s, st, MK_INSTR_B_W, nw++, 0) < 0) return -1;
    }
    while (nw < m)
        if (mk_sched_emit(s, st, MK_INSTR_B_W, nw++, 0) < 0) return -1;
    return 0;
}

int mk_sched_gen_zbh1(mk_sched_t *s)
{
    for (int st = 0; st < s->spec.pp; st++)
        if (zbh1_stage(s, st) < 0) return -1;
    return 0;
}
