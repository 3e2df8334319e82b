/* Merak's recompute-aware 1F1B variants (merak-pre, merak-last, merak).
 * All three keep 1F1B's order (sched_1f1b.c's rule) and change which
 * forwards keep only their input (F_PRE) and recompute early (R), issued
 * right before the B whose gradient the stage would otherwise wait for.
 *
 *  merak-pre:  stages i < p-1 run their last p-1-i micro-batches (the
 *              cool-down, where the stage waits for gradients) as F_PRE + R.
 *              Saves the cool-down's recompute from the critical path:
 *              unit-cost makespan (m+p-1)(F+B+R) - (p-1)R  (S=4, m=8: 41).
 *  merak-last: as merak-pre on stages i < p-2; the last stage checkpoints
 *              nothing (it holds one micro-batch), stage p-2 pre-recomputes
 *              micro-batch 0 only (S=4, m=8: 39).
 *  merak:      shifted critical path: as merak-last, and stage p-3 also
 *              pre-recomputes micro-batch 0 while stage p-2 pre-recomputes
 *              0 and 1 and runs one extra forward before its first backward
 *              (so it takes stage p-3's checkpoint ratio) (S=4, m=8: 38).
 *  In flight on stage i: min(m, p-i) as 1F1B, except min(m, 3) on stage p-2
 *  of merak until its first backward.  Pre-recompute applies only where
 *  the stage checkpoints something (resolved ckpt > 0): with recompute
 *  none these are plain 1F1B.  Explicit (planner) counts are used as
 *  given; policy counts (full, stage-aware) get the last-stage and p-2
 *  adjustments above. */
#include "config.h"
#include "sched/sched_internal.h"

#include <stdlib.h>
#include <string.h>

/* Policy adjustments of merak-last / merak (one chunk per stage); the
 * builder makes them with the policy (sched.c), before the streams. */
void mk_sched_merak_adjust_ckpt(mk_sched_t *s)
{
    int p = s->spec.pp;
    mk_recompute_kind_t rk = s->spec.recompute.kind;
    if (s->spec.kind == MK_SCHED_MERAK_PRE ||
        (rk != MK_RECOMPUTE_FULL && rk != MK_RECOMPUTE_STAGE_AWARE))
        return;
    if (s->spec.kind == MK_SCHED_MERAK && p >= 3) {
        double r = rk == MK_RECOMPUTE_FULL ? 1.0
                                           : mk_recompute_stage_ratio(s->spec.recompute.ratio, p, p - 3);
        s->ckpt[p - 2] = s->layers_given ? mk_recompute_count(s->layers[p - 2], r) : r > 0.0;
    }
    s->ckpt[p - 1] = 0;
}

/* Which forwards of stage st are F_PRE; returns the cap before the first B. */
static int pre_set(const mk_sched_t *s, int st, unsigned char *pre)
{
    int p = s->spec.pp, m = s->spec.m, k = s->spec.kind, cap2 = 0;
    memset(pre, 0, (size_t)m);
    if (mk_sched_ckpt(s, st, 0) == 0) return 0;
    int cooldown = k == MK_SCHED_MERAK_PRE ? st < p - 1 : st < p - 2;
    if (cooldown)
        for (int mb = m - (p - 1 - st); mb < m; mb++)
            if (mb >= 0) pre[mb] = 1;
    if (k != MK_SCHED_MERAK_PRE && st == p - 2) pre[0] = 1;
    if (k == MK_SCHED_MERAK && st == p - 3) pre[0] = 1;
    if (k == MK_SCHED_MERAK && st == p - 2) {
        if (m > 1) pre[1] = 1;
        cap2 = p - st + 1;
    }
    return cap2;
}

int mk_sched_gen_merak(mk_sched_t *s)
{
    unsigned char *pre = malloc((size_t)s->spec.m);
    if (!pre) return mk_error_set("sched: out of memory");
    int rc = 0;
    for (int st = 0; st < s->spec.pp && rc == 0; st++) {
        int cap2 = pre_set(s, st, pre);
        rc = mk_sched_gen_1f1b_stage(s, st, s->spec.pp - st, cap2, pre);
    }
    free(pre);
    return rc;
}
