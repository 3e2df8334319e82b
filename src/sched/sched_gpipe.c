/* GPipe: every stage runs all m forwards, then all m backwards.
 *   Bubble: the same as 1F1B's, makespan (m+p-1)(F+B) under uniform
 *     stages and free communication; idle share (p-1)/(m+p-1).
 *   In flight on every stage: m micro-batches (all of them).
 * It is the 1F1B rule with the cap at m. */
#include "config.h"
#include "sched/sched_internal.h"

int mk_sched_gen_gpipe(mk_sched_t *s)
{
    for (int st = 0; st < s->spec.pp; st++)
        if (mk_sched_gen_1f1b_stage(s, st, s->spec.m, 0, NULL) < 0) return -1;
    return 0;
}
