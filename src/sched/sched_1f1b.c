/* 1F1B (PipeDream-flush, Megatron-LM): stage i runs p-1-i warm-up forwards,
 * then alternates one forward and one backward, then drains the backwards.
 *   Bubble (uniform stages, no communication): (p-1)(F+B) per stage, i.e.
 *     makespan (m+p-1)(F+B); idle share (p-1)/(m+p-1), (p-1)/m of ideal.
 *   In flight on stage i: min(m, p-i) micro-batches.
 * The order is one rule: issue a forward while fewer than cap = p-i
 * micro-batches are in flight, else a backward.  The merak variants reuse
 * the rule with a different cap before the first backward and with some
 * forwards turned into F_PRE + R (sched_merak.c). */
#include "config.h"
#include "sched/sched_internal.h"

int mk_sched_gen_1f1b_stage(mk_sched_t *s, int stage, int cap, int cap2, const unsigned char *pre)
{
    int m = s->spec.m, nf = 0, nb = 0;
    while (nb < m) {
        int c = nb == 0 && cap2 > 0 ? cap2 : cap;
        if (nf < m && nf - nb < c) {
            int p = pre && pre[nf];
            if (mk_sched_emit(s, stage, p ? MK_INSTR_F_PRE : MK_INSTR_F, nf, 0) < 0) return -1;
            nf++;
            continue;
        }
        /* R right before B: it runs while the gradient is still on its way. */
        if (pre && pre[nb] && mk_sched_emit(s, stage, MK_INSTR_R, nb, 0) < 0) return -1;
        if (mk_sched_emit(s, stage, MK_INSTR_B, nb, 0) < 0) return -1;
        nb++;
    }
    return 0;
}

int mk_sched_gen_1f1b(mk_sched_t *s)
{
    for (int st = 0; st < s->spec.pp; st++)
        if (mk_sched_gen_1f1b_stage(s, st, s->spec.pp - st, 0, NULL) < 0) return -1;
    return 0;
}
