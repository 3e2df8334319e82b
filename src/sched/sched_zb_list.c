/* The zero-bubble schedules built by list scheduling (Qi et al., "Zero
 * Bubble Pipeline Parallelism", ICLR 2024, section 3 and appendix: their
 * handcrafted ZB-H2 and ZB-V are what this greedy rule gives under equal
 * costs): B split into B_IN and B_W, every stage run on one clock with
 * the unit costs (F = B_IN = B_W = 1 tick, a B_IN that recomputes 2: the
 * verifier's timeline), and at each tick a free stage issues
 *   1. the B_IN whose gradient has arrived (the highest virtual stage
 *      first: its chain of backwards down to stage 0 is the longest),
 *   2. else the next forward whose input has arrived, while fewer than
 *      cap (micro-batch, chunk) slots are in flight (F to B_W),
 *   3. else its oldest B_W, filling what would be a bubble.
 * The streams are that order; the timeline under the unit costs then
 * finishes when this clock does.
 *
 *   zb-h2 (one chunk, the loop): cap max(2(p-1-s)+1, p) on stage s, so
 *     stage 0 forwards 2p-1 micro-batches while micro-batch 0 goes to the
 *     end and back and never waits for its gradient (the paper's (2p-1)
 *     M_B on stage 0); the floor p keeps the last stages from F B W
 *     cycles that would slow the drain to a gradient every three ticks.
 *     Makespan without recompute 3m + p - 1 for m >= p, 2(m + p) - 1
 *     below: the least a synchronous step takes with F = B_IN = B_W
 *     (ZB-H1 reaches it too there; ZB-H2's slack pays where B_W is
 *     cheaper than F, the paper's bubble (p-1)(F + B_IN - 2 B_W)).
 *   zb-v (two chunks in a V, mk_sched_vstage): cap 2p chunk slots on every
 *     stage, each half a stage: p micro-batches' activations, 1F1B's
 *     first-stage peak (the paper's ZB-V memory), the least cap that does
 *     not deadlock.  Bubble without recompute, m >= p: from p-1 to 3p/2
 *     chunk-times (p 2-8, m p-16; 52 ticks for 48 busy at p 4, m 8: 26
 *     stage-times to ZB-H1's 27 and 1F1B's 33).
 * A chunk runs ahead of the next one by no more than the virtual stages
 * between them, so the cap never fills with forwards whose next chunk
 * cannot start.
 * The peak is the cap (mk_sched_zb_cap, sched_traits.c) but where a
 * stage-aware policy mixes one- and two-tick B_INs and the clock leaves a
 * slot free (1 of tests/test_sched_traits.c's 4,608 stages): the memory
 * model takes the cap, never under.  The warm-up and the tail follow the
 * clock (no closed form; the tail is at most the cap). */
#include "config.h"
#include "sched/sched_internal.h"

#include <limits.h>
#include <stdlib.h>

typedef struct {
    int p, v, m, V;
    int *fend, *bend;           /* [V * m] tick a forward / B_IN ended (INT_MAX: not yet) */
    int *nf, *nb;               /* [p * v] next micro-batch to forward / to backward per chunk */
    int *wq, *wh, *wn;          /* [p][m * v] each stage's B_W queue (slot ids), head, length */
    int *busy, *held, *cap;     /* [p] tick the stage is free, slots in flight, its cap */
} zbl_t;

/* Issue one op on stage st at tick t; 1 if it did, 0 if nothing is ready. */
static int zbl_issue(mk_sched_t *s, zbl_t *z, int st, int t)
{
    for (int c = z->v - 1; c >= 0; c--) { /* B_IN, highest virtual stage first */
        int k = mk_sched_vstage(s->vshape, z->p, st, c), mb = z->nb[st * z->v + c];
        if (mb >= z->m || z->fend[k * z->m + mb] > t) continue;
        if (k < z->V - 1 && z->bend[(k + 1) * z->m + mb] > t) continue;
        int d = 1 + (mk_sched_ckpt(s, st, c) > 0); /* a B_IN that recomputes takes a tick more */
        z->bend[k * z->m + mb] = z->busy[st] = t + d;
        z->nb[st * z->v + c]++;
        z->wq[st * z->m * z->v + (z->wh[st] + z->wn[st]++)] = mb * z->v + c;
        return mk_sched_emit(s, st, MK_INSTR_B_IN, mb, c) < 0 ? -1 : 1;
    }
    for (int c = z->v - 1; c >= 0 && z->held[st] < z->cap[st]; c--) { /* forwards, deepest first */
        int k = mk_sched_vstage(s->vshape, z->p, st, c), mb = z->nf[st * z->v + c];
        if (mb >= z->m || (k > 0 && z->fend[(k - 1) * z->m + mb] > t)) continue;
        /* no further ahead of the next chunk than the virtual stages between them */
        if (c + 1 < z->v && mb - z->nf[st * z->v + c + 1] >= mk_sched_vstage(s->vshape, z->p, st, c + 1) - k) continue;
        z->fend[k * z->m + mb] = z->busy[st] = t + 1;
        z->nf[st * z->v + c]++;
        z->held[st]++;
        return mk_sched_emit(s, st, MK_INSTR_F, mb, c) < 0 ? -1 : 1;
    }
    if (!z->wn[st]) return 0;
    int sl = z->wq[st * z->m * z->v + z->wh[st]++];
    z->wn[st]--;
    z->held[st]--;
    z->busy[st] = t + 1;
    return mk_sched_emit(s, st, MK_INSTR_B_W, sl / z->v, sl % z->v) < 0 ? -1 : 1;
}

/* The clock: every free stage issues what is ready; ends when every
 * stage has run its m * v B_Ws. */
static int zbl_run(mk_sched_t *s, zbl_t *z)
{
    long left = (long)z->p * z->m * z->v * 3;
    for (int t = 0; left > 0; t++) {
        int any = 0;
        for (int st = 0; st < z->p; st++) {
            if (z->busy[st] > t) { any = 1; continue; }
            int rc = zbl_issue(s, z, st, t);
            if (rc < 0) return -1;
            if (rc) left--, any = 1;
        }
        if (!any) return mk_error_set("%s: no stage can move at tick %d (cap too small)",
                                      mk_sched_kind_name(s->spec.kind), t);
    }
    return 0;
}

int mk_sched_gen_zb_list(mk_sched_t *s)
{
    zbl_t z = {.p = s->spec.pp, .v = s->spec.vpp, .m = s->spec.m, .V = s->n_vstages};
    size_t vm = (size_t)z.V * z.m, pv = (size_t)z.p * z.v; /* within MK_MAX_SCHED_UNITS */
    z.fend = malloc(vm * sizeof *z.fend), z.bend = malloc(vm * sizeof *z.bend);
    z.nf = calloc(pv, sizeof *z.nf), z.nb = calloc(pv, sizeof *z.nb);
    z.wq = malloc(vm * sizeof *z.wq);
    z.wh = calloc((size_t)z.p, sizeof *z.wh), z.wn = calloc((size_t)z.p, sizeof *z.wn);
    z.busy = calloc((size_t)z.p, sizeof *z.busy), z.held = calloc((size_t)z.p, sizeof *z.held);
    z.cap = malloc((size_t)z.p * sizeof *z.cap);
    int rc = -1;
    if (!z.fend || !z.bend || !z.nf || !z.nb || !z.wq || !z.wh || !z.wn || !z.busy || !z.held || !z.cap)
        mk_error_set("sched: out of memory");
    else {
        for (size_t i = 0; i < vm; i++) z.fend[i] = z.bend[i] = INT_MAX;
        for (int st = 0; st < z.p; st++) z.cap[st] = mk_sched_zb_cap(s->spec.kind, z.p, z.m, z.v, st);
        rc = zbl_run(s, &z);
    }
    free(z.fend), free(z.bend), free(z.nf), free(z.nb), free(z.wq);
    free(z.wh), free(z.wn), free(z.busy), free(z.held), free(z.cap);
    return rc;
}
