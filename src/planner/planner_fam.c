/* The planner's families and groups as the generator makes them: the
 * families' tails (one per split and ZeRO variant, shared across the
 * schedules with the same placement), and a group's bound from its split's
 * terms and its family's tail. */
#include "planner/planner_internal.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The schedule a tail is keyed by: one per placement and chunk count. */
static mk_sched_kind_t tail_sched(const mk_plan_t *p)
{
    if (mk_sched_traits(p->schedule)->vshape) return MK_SCHED_ZB_V;
    return p->vpp > 1 ? MK_SCHED_INTERLEAVED : MK_SCHED_1F1B;
}

/* FNV-1a over n bytes, from h. */
static uint64_t fnv(uint64_t h, const void *v, size_t n)
{
    const unsigned char *c = v;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

/* p's tail (mk_sim_stage_tail: after[pp], then dp[pp]) into out.  It
 * reads the stages' parameters, ZeRO and DP groups, not the schedule's
 * order nor any recompute detail: found in S->tailc by p's fields with
 * those canonical (the bounds stand for the split's method), a slot
 * keeping the last tail hashed there.  Below ZeRO-2 the DP stream carries
 * the step's gradient once and the optimizer's work is the parameters',
 * whatever the micro-batches: their size and count and the TP overlap
 * are canonical too (ZeRO-2 reduces, ZeRO-3 gathers, per micro-batch).
 * 0 or -1. */
int mk_pl_tail(mk_search_t *S, const mk_plan_t *p, const mk_graph_t *g, double *out)
{
    if (!S->tailc && !(S->tailc = calloc(MK_TAILC, sizeof *S->tailc))) return mk_error_set("out of memory");
    mk_plan_t q = *p;
    q.schedule = tail_sched(p);
    q.recompute.kind = MK_RECOMPUTE_NONE, q.recompute.ratio = 1.0;
    memset(q.partition, 0, sizeof q.partition);
    if (mk_plan_zero(p) < 2) q.mbs = q.m = q.tp_overlap = 0;
    const unsigned char *key = (const unsigned char *)&q + MK_CAND_FROM;
    int nb = p->n_vstages + 1, pp = p->pp;
    uint64_t h = fnv(fnv(0xcbf29ce484222325ull, key, MK_CAND_TO - MK_CAND_FROM), p->bounds, (size_t)nb * sizeof(int));
    mk_tailc_t *t = &S->tailc[h % MK_TAILC];
    if (t->nb == nb && !memcmp(t->mid, key, sizeof t->mid) && !memcmp(t->bounds, p->bounds, (size_t)nb * sizeof(int))) {
        memcpy(out, t->tail, 2 * (size_t)pp * sizeof *out);
        return 0;
    }
    if (mk_sim_stage_tail(S->cl, p, g, &S->so, out, out + pp) < 0) return -1;
    int *b = realloc(t->bounds, (size_t)nb * sizeof *b);
    double *v = b ? realloc(t->tail, 2 * (size_t)pp * sizeof *v) : NULL;
    if (b) t->bounds = b;
    if (v) t->tail = v;
    t->nb = 0; /* kept only whole */
    if (!b || !v) return 0;
    memcpy(t->mid, key, sizeof t->mid);
    memcpy(t->bounds, p->bounds, (size_t)nb * sizeof *b);
    memcpy(t->tail, out, 2 * (size_t)pp * sizeof *v);
    t->nb = nb;
    return 0;
}

void mk_pl_tails_free(mk_search_t *S)
{
    for (int i = 0; S->tailc && i < MK_TAILC; i++) free(S->tailc[i].bounds), free(S->tailc[i].tail);
    free(S->tailc);
}

/* A family for split p (with its ZeRO variant) with its tail (mk_pl_tail:
 * a copy, or where toff >= 0 the one there already); its id or -1. */
long mk_pl_fam_new(mk_search_t *S, const mk_plan_t *p, const double *tail, long toff)
{
    if (mk_pl_grow(&S->fam, &S->capfam, S->nfam + 1, sizeof *S->fam, 256) < 0 ||
        mk_pl_grow(&S->dbl, &S->capdbl, S->ndbl + 2L * p->pp, sizeof *S->dbl, 4096) < 0)
        return -1;
    mk_fam_t *F = &S->fam[S->nfam];
    memset(F, 0, sizeof *F);
    if (mk_pl_store_plan(S, p, 0, F->mid, &F->off) < 0) return -1;
    F->first = S->ngrp, F->state_ok = -1;
    F->toff = toff;
    if (toff < 0) {
        F->toff = S->ndbl;
        memcpy(S->dbl + S->ndbl, tail, 2 * (size_t)p->pp * sizeof *tail);
        S->ndbl += 2L * p->pp;
    }
    return S->nfam++;
}

/* The least bound over the overlaps searched of terms T with a tail
 * (after[pp], dp[pp]; NULL: none, which bounds every tail's: the bound
 * only grows with them). */
double mk_pl_terms_lb(const mk_pl_terms_t *T, int pp, const double *tail)
{
    static const double none[2 * MK_PLAN_MAX_VSTAGES];
    const double *t = tail ? tail : none;
    double lb = DBL_MAX;
    if (T->busy > 0) return T->busy;
    for (int ov = 0; ov <= 1; ov++) {
        if (!T->on[ov]) continue;
        double b = T->zero[ov] ? 0 : mk_sim_bound_finish(T->v[ov], pp, t, t + pp);
        if (b < lb) lb = b;
    }
    return lb;
}

/* A group's candidates counted and its index taken (S->combo_seq: the
 * same whatever the rank split), whether it is kept or not (then they
 * are pruned by the bound). */
void mk_pl_group_skip(mk_search_t *S, int nov)
{
    S->combo_seq += 2;
    S->r->candidates += nov;
}

/* Group (family fi, recompute kind rk, nov TP overlaps, candidate index
 * at: mk_pl_group_skip took it) at bound lb (mk_pl_terms_lb with the
 * family's tail: valid for every outcome of its settling), unsettled,
 * into the queue if queue (else kept only for the ZeRO-2 group that asks
 * whether it fits: z1).  Returns its id or -1. */
long mk_pl_group_new(mk_search_t *S, long fi, int rk, long z1, double lb, int nov, long at, int queue)
{
    if (mk_pl_grow(&S->grp, &S->capgrp, S->ngrp + 1, sizeof *S->grp, 1024) < 0) return -1;
    mk_cgroup_t *G = &S->grp[S->ngrp];
    *G = (mk_cgroup_t){.fam = fi, .index = at, .z1 = z1, .rk = (signed char)rk, .nov = (signed char)nov};
    if (MK_FAM_INT(S, fi, zero) >= 2 || MK_FAM_INT(S, fi, zero_shard)) G->index += MK_LATE_VARIANT;
    S->fam[fi].pending++;
    if (queue && mk_pl_heap_push(S, lb, G->index, S->ngrp, 1) < 0) return -1;
    return S->ngrp++;
}
