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
    [MK_SCHED_MERAK] = {.min_pp = 2, .replays_early = 1, .reads_counts = 1},
    [MK_SCHED_MERAK_PRE] = {.min_pp = 2, .replays_early = 1, .reads_counts = 1},
    [MK_SCHED_MERAK_LAST] = {.min_pp = 2, .replays_early = 1, .reads_counts = 1},
    [MK_SCHED_ZB_H1] = {.min_pp = 2, .split_backward = 1},
    [MK_SCHED_LOOPED_BFS] = {.min_pp = 2, .interleaved = 1, .min_vpp = 2},
    [MK_SCHED_ZB_H2] = {.min_pp = 2, .split_backward = 1, .list_scheduled = 1},
    [MK_SCHED_ZB_V] = {.min_pp = 2, .interleaved = 1, .min_vpp = 2, .max_vpp = 2, .vshape = 1, .split_backward = 1,
                       .list_scheduled = 1},
    [MK_SCHED_DUALPIPEV] = {.min_pp = 2, .interleaved = 1, .min_vpp = 2, .max_vpp = 2, .vshape = 1,
                            .split_backward = 1, .min_m_per_pp = 2},
};

int mk_sched_ends_apart(mk_sched_kind_t k, int pp, int vpp)
{
    int vs = mk_sched_traits(k)->vshape, last = (int)mk_vstages(pp, vpp) - 1;
    return mk_sched_vstage_stage(vs, pp, 0) != mk_sched_vstage_stage(vs, pp, last);
}

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

/* The zero-bubble list schedules' cap on (micro-batch, chunk) slots in
 * flight on stage s (sched_zb_list.c states why). */
int mk_sched_zb_cap(mk_sched_kind_t k, int p, int m, int v, int s)
{
    if (k == MK_SCHED_ZB_V) return imin(2 * p, m * v);
    return imin(2 * (p - 1 - s) + 1 > p ? 2 * (p - 1 - s) + 1 : p, m * v); /* zb-h2 */
}

int mk_sched_warmup(mk_sched_kind_t k, int p, int m, int v, int s, int ckpts)
{
    switch (k) {
    case MK_SCHED_GPIPE: return m;
    case MK_SCHED_LOOPED_BFS: return m * v; /* every forward before the first backward */
    case MK_SCHED_INTERLEAVED: return interleaved_warmup(p, m, v, s);
    case MK_SCHED_MERAK: /* the shifted critical path: one extra forward on stage p-2 when it checkpoints */
        return imin(p - s + (ckpts && p >= 2 && s == p - 2), m);
    case MK_SCHED_ZB_H2: case MK_SCHED_ZB_V: return -1; /* the list scheduler's clock: no closed form */
    case MK_SCHED_DUALPIPEV: return 2 * p + (s == p - 1); /* steps 1 and 2, and on the last rank step 4 opens with F0 */
    default: return imin(p - s, m); /* 1F1B's order (merak-pre, merak-last, zb-h1 keep it) */
    }
}

int mk_sched_peak_inflight(mk_sched_kind_t k, int p, int m, int v, int s, int ckpts)
{
    /* zb-h1 defers B_W: a micro-batch is held until its B_W, and every
       stage then holds up to p of them (the first stage's 1F1B peak) */
    if (k == MK_SCHED_ZB_H1) return imin(p, m);
    if (mk_sched_traits(k)->list_scheduled)
        return mk_sched_zb_cap(k, p, m, v, s); /* the cap is reached */
    if (k == MK_SCHED_DUALPIPEV) return 2 * p + 1; /* step 4's F0 before its B1 */
    return mk_sched_warmup(k, p, m, v, s, ckpts); /* the warm-up's forwards are the most ever held */
}

int mk_sched_tail_bw(mk_sched_kind_t k, int p, int m, int s)
{
    if (k == MK_SCHED_DUALPIPEV) return s + 1; /* step 8 */
    if (mk_sched_traits(k)->list_scheduled) return mk_sched_zb_cap(k, p, m, mk_sched_traits(k)->max_vpp ? 2 : 1, s);
    return k == MK_SCHED_ZB_H1 ? imin(s + 1, m) : 0;
}
