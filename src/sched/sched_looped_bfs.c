/* Looped BFS (breadth-first pipeline parallelism: Lamy-Poirier, "Breadth-
 * First Pipeline Parallelism", arXiv:2211.05953; torchtitan's LoopedBFS,
 * torch.distributed.pipelining.ScheduleLoopedBFS): each rank holds v model
 * chunks placed in a loop (virtual stage chunk*p + rank, as interleaved
 * 1F1B), and runs every micro-batch's forward through its chunk 0, then
 * through chunk 1, ..., then every backward through chunk v-1, ..., chunk
 * 0.  It is GPipe over the p*v virtual stages with each rank's chunks in
 * turn (micro-batches in order in both passes: merak run's and the
 * simulator's GPipe order; torch.distributed.pipelining runs the backward
 * micro-batches in reverse, the same costs).
 *   Bubble: with m >= p a rank starts chunk c+1 as soon as it finishes
 *     chunk c (micro-batch 0 has looped back by then), so each pass loses
 *     (p-1) chunk-times: makespan (v m + p - 1)(F+B)/v with F, B the
 *     whole stage's times, idle share (p-1)/(v m + p - 1), v times less
 *     than GPipe's; with m < p each loop waits for micro-batch 0.
 *   In flight on every stage: all m x v (micro-batch, chunk) slots, since
 *     every forward runs before the first backward: GPipe's memory.
 *   Needs v >= 2 (v = 1 is GPipe) and no multiple of p for m. */
#include "config.h"
#include "sched/sched_internal.h"

int mk_sched_gen_looped_bfs(mk_sched_t *s)
{
    int p = s->spec.pp, v = s->spec.vpp, m = s->spec.m;
    for (int st = 0; st < p; st++) {
        for (int c = 0; c < v; c++)
            for (int mb = 0; mb < m; mb++)
                if (mk_sched_emit(s, st, MK_INSTR_F, mb, c) < 0) return -1;
        for (int c = v - 1; c >= 0; c--)
            for (int mb = 0; mb < m; mb++)
                if (mk_sched_emit(s, st, MK_INSTR_B, mb, c) < 0) return -1;
    }
    return 0;
}
