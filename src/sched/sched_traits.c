/* Each schedule generator's traits: the one statement of what its streams
 * do that the memory model (sim/memory.c), the planner's bound
 * (sim/sim_bound.c), the candidate generator (src/planner/planner_gen.c)
 * and the verifier (sched_verify.c) read, instead of each restating it.
 * tests/test_sched_traits.c checks every trait against the generated
 * streams for every schedule x pp x micro-batches x vpp of a grid. */
#include "merak/sched.h"

/* Rows in mk_sched_kind_t's order. */
static const mk_sched_traits_t traits[MK_SCHED_COUNT] = {
    [MK_SCHED_GPIPE] = {.min_pp = 1},
    [MK_SCHED_1F1B] = {.min_pp = 1},
    [MK_SCHED_INTERLEAVED] = {.min_pp = 2, .interleaved = 1, .m_per_pp = 1},
    [MK_SCHED_MERAK] = {.min_pp = 2, .replays_early = 1},
    [MK_SCHED_MERAK_PRE] = {.min_pp = 2, .replays_early = 1},
    [MK_SCHED_MERAK_LAST] = {.min_pp = 2, .replays_early = 1},
    [MK_SCHED_ZB_H1] = {.min_pp = 2, .split_backward = 1},
    [MK_SCHED_LOOPED_BFS] = {.min_pp = 2, .interleaved = 1, .min_vpp = 2},
};

const mk_sched_traits_t *mk_sched_traits(mk_sched_kind_t k)
{
    return k >= 0 && k < MK_SCHED_COUNT ? &traits[k] : &traits[MK_SCHED_1F1B];
}

static int imin(int a, int b) { return a < b ? a : b; }

/* Interleaved 1F1B (Megatron-LM's): stage s's warm-up forwards are
 * 2(p-s-1) + (v-1)p, then one more before its first backward; with one
 * chunk it is 1F1B. */
static int interleaved_warmup(int p, int m, int v, int s)
{
    return v == 1 ? imin(p - s, m) : imin(2 * (p - s - 1) + (v - 1) * p + 1, m * v);
}

int mk_sched_warmup(mk_sched_kind_t k, int p, int m, int v, int s, int ckpts)
{
    switch (k) {
    case MK_SCHED_GPIPE: return m;
    case MK_SCHED_LOOPED_BFS: return m * v; /* every forward before the first backward */
    case MK_SCHED_INTERLEAVED: return interleaved_warmup(p, m, v, s);
    case MK_SCHED_MERAK: /* the shifted critical path: one extra forward on stage p-2 when it checkpoints */
        return imin(p - s + (ckpts && p >= 2 && s == p - 2), m);
    default: return imin(p - s, m); /* 1F1B's order (merak-pre, merak-last, zb-h1 keep it) */
    }
}

int mk_sched_peak_inflight(mk_sched_kind_t k, int p, int m, int v, int s, int ckpts)
{
    /* zb-h1 defers B_W: a micro-batch is held until its B_W, and every
       stage then holds up to p of them (the first stage's 1F1B peak) */
    if (k == MK_SCHED_ZB_H1) return imin(p, m);
    return mk_sched_warmup(k, p, m, v, s, ckpts); /* the warm-up's forwards are the most ever held */
}

int mk_sched_tail_bw(mk_sched_kind_t k, int p, int m, int s)
{
    (void)p;
    return k == MK_SCHED_ZB_H1 ? imin(s + 1, m) : 0;
}
