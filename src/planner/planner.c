/* The planner's search (see planner.h for the space and the bound). */
#include "merak/partition.h"
#include "merak/planner.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define MK_MAX_TP_OPTS 16

/* A candidate as the search keeps it: its plan's fields from dtype up to
 * the stage arrays (model and cluster are the search's, the same in every
 * candidate: S->tmpl), and its n_vstages + 1 bounds and n_vstages counts
 * in S->ints at off, so that the search's memory grows with what the
 * candidates hold, not with MK_PLAN_MAX_VSTAGES-wide plans (5 KB each:
 * 228 MB for GPT-20B / 64 GPUs before issue 22). */
#define MK_CAND_FROM offsetof(mk_plan_t, dtype)
#define MK_CAND_TO offsetof(mk_plan_t, bounds)

typedef struct {
    unsigned char mid[MK_CAND_TO - MK_CAND_FROM];
    int has_ckpt;
    long off;         /* its stage arrays in S->ints */
    double lb;        /* lower bound on the step time, seconds */
    long index;
} mk_cand_t;

/* The lower bound's layer costs of one graph, one per layout whose
 * pieces differ (sequence parallelism; the groups' node sharing):
 * made as the candidates need them (lower_bound). */
typedef struct {
    const mk_cluster_t *cl;
    const mk_sim_opts_t *so;
    mk_sim_bound_t **v;
    int n, cap;
} mk_gbounds_t;

/* A group: the candidates of one (split, recompute kind, ZeRO variant),
 * one per TP overlap searched, pushed unsettled with a bound valid for
 * every outcome of its memory settling and settled only when the search
 * reaches that bound (issue 22: bound before building).  index: its
 * overlap-0 candidate's (overlap 1: index + 1), in enumeration order. */
typedef struct {
    long fam;  /* its split and ZeRO variant, S->fam */
    long index;
    long z1;   /* fixed policy, ZeRO-2: the ZeRO-1 group that makes it redundant if that fits (-1: none) */
    signed char rk, nov, done, fit;
    signed char floored; /* auto: queued again at the bound of its least counts (auto_floor) */
} mk_cgroup_t;

/* A family: one split (the bounds of one recompute-cost setting) and ZeRO
 * variant, shared by its recompute kinds' groups.  What no count changes
 * (state_ok, fx) is computed when its first group settles, and fx freed
 * with its last. */
typedef struct {
    unsigned char mid[MK_CAND_TO - MK_CAND_FROM];
    long off, toff; /* its bounds in S->ints, its tail (after[pp], dp[pp]) in S->dbl */
    long first;     /* its first group (the no-fit report's plan on a state miss) */
    mk_sim_fixed_t *fx;
    int pending;    /* groups not settled */
    signed char state_ok; /* -1 not known */
} mk_fam_t;

/* The search's queue: groups (grp: id in S->grp) and candidates that fit
 * (id in S->c), least (lb, index) first. */
typedef struct {
    double lb;
    long index, id;
    int grp;
} mk_hent_t;

/* Cached per (mbs, tp, cp, ep): the graph (ep: its experts' GEMM shapes); per seqpar: per-layer fwd/bwd times
 * of one rank's tokens (b s / cp). */
typedef struct {
    int mbs, tp, cp, ep;
    mk_graph_t *g;
    double *f[2], *b[2];  /* [seqpar][layer] compute of forward, backward */
    mk_gbounds_t *bd;     /* the bound's (mk_sim_bound_t) */
} mk_gcache_t;

/* What each stage runs after its compute and its DP stream's floor
 * (mk_sim_stage_tail; lower_bound). */
typedef struct {
    double after[MK_PLAN_MAX_VSTAGES], dp[MK_PLAN_MAX_VSTAGES]; /* [pp] seconds */
} mk_tail_t;

typedef struct {
    const mk_model_config_t *model;
    const mk_cluster_t *cl;
    const mk_planner_opts_t *o;
    mk_gcache_t *gc;
    int ngc, capgc;
    mk_cand_t *c;           /* settled candidates that fit */
    long n, cap;
    int *ints;              /* the candidates' and families' stage arrays (off) */
    long nints, capints;
    mk_fam_t *fam;
    long nfam, capfam;
    mk_cgroup_t *grp;
    long ngrp, capgrp;
    double *dbl;            /* the families' tails (toff) */
    long ndbl, capdbl;
    mk_hent_t *heap;
    long nheap, capheap;
    long *deferred;         /* auto groups that fit at no count, settled in full only if nothing fits */
    long ndeferred, capdeferred;
    long miss_order, closest_order; /* the candidate index of the group note_miss sees, the closest's */
    double reported_t;      /* the last progress report while simulating */
    mk_plan_t tmpl;         /* every candidate's model and cluster, the rest as mk_plan_init */
    mk_planner_result_t *r;
    mk_sim_opts_t so;
    long combo, combo_seq;  /* current (layout, micro-batch) ordinal and candidate within it */
    long combos, combos_done; /* this rank's layouts (dp, cp, ep, pp, tp, micro-batch), those generated */
    int counting;             /* enumerate() only counts this rank's layouts into combos (progress) */
    double t0;                /* search start (progress) */
    mk_sched_pool_t pool;   /* the auto searches' stream buffers, reused by every candidate */
    const mk_sim_fixed_t *fx; /* the candidate's memory parts no count changes (NULL: none) */
    mk_tail_t tail;
    double *all;            /* o->share: the K best step times of every rank (all_buf), else NULL */
    double all_buf[MK_MAX_TOP];
    int shared;             /* o->share: 1 once every rank is done (share_finish) */
} mk_search_t;

void mk_planner_opts_init(mk_planner_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->gpus = 64;
    o->gbs = 512;
    o->dtype = MK_DTYPE_BF16;
    o->top = 5;
    o->seqpar = o->tp_overlap = o->zero = o->zero_hybrid = -1;
    o->zero_max = 3;
    o->refine = -1;
    o->size = 1;
}

static mk_gcache_t *graph_for(mk_search_t *S, int mbs, int tp, int cp, int ep)
{
    for (int i = 0; i < S->ngc; i++)
        if (S->gc[i].mbs == mbs && S->gc[i].tp == tp && S->gc[i].cp == cp && S->gc[i].ep == ep) return &S->gc[i];
    if (S->ngc == S->capgc) {
        int cap = S->capgc ? 2 * S->capgc : 16;
        mk_gcache_t *n = realloc(S->gc, cap * sizeof *n);
        if (!n) return NULL;
        S->gc = n, S->capgc = cap;
    }
    mk_gcache_t *e = &S->gc[S->ngc];
    memset(e, 0, sizeof *e);
    mk_plan_t q; /* the graph of every plan with this (mbs, tp, ep) */
    mk_plan_init(&q);
    q.model = *S->model, q.dtype = S->o->dtype, q.mbs = mbs, q.tp = tp, q.ep = ep;
    if (S->o->moe_imbalance > 0) q.moe_imbalance = S->o->moe_imbalance;
    e->mbs = mbs, e->tp = tp, e->cp = cp, e->ep = ep;
    if (!(e->g = mk_plan_graph(&q))) return NULL;
    int L = e->g->n_layers;
    double tokens = (double)mbs * S->model->seq / cp; /* a CP rank's (the simulator's tokens_of) */
    if (!(e->bd = calloc(1, sizeof *e->bd))) return NULL;
    e->bd->cl = S->cl, e->bd->so = &S->so;
    for (int sp = 0; sp < 2; sp++) {
        e->f[sp] = malloc(L * sizeof(double));
        e->b[sp] = malloc(L * sizeof(double));
        if (!e->f[sp] || !e->b[sp]) return NULL;
        for (int l = 0; l < L; l++) {
            e->f[sp][l] = mk_cost_layer_compute(S->cl, e->g, l, tp, sp, tokens, S->o->dtype, 0);
            e->b[sp][l] = mk_cost_layer_compute(S->cl, e->g, l, tp, sp, tokens, S->o->dtype, 1);
        }
    }
    S->ngc++;
    return e;
}

/* Ties between plans (equal simulated steps: the ideal cluster) go to the
 * ones the search had before ZeRO-2/3 and hybrid groups (issue 17): the
 * less sharded plan does less communication on a real cluster. */
#define MK_LATE_VARIANT (1L << 40)

/* Room for need elements in *pa (capacity *cap, first allocation first). */
static int grow(void *pa, long *cap, long need, size_t size, long first)
{
    void **a = pa;
    if (need <= *cap) return 0;
    long n = *cap ? *cap : first;
    while (n < need) n *= 2;
    void *q = realloc(*a, n * size);
    if (!q) return mk_error_set("out of memory");
    *a = q, *cap = n;
    return 0;
}

/* Keep p's fields from dtype to the stage arrays in mid, its bounds (and
 * with ckpt its counts) in S->ints at *off. */
static int store_plan(mk_search_t *S, const mk_plan_t *p, int ckpt, unsigned char *mid, long *off)
{
    long need = (ckpt ? 2L : 1L) * p->n_vstages + 1;
    if (grow(&S->ints, &S->capints, S->nints + need, sizeof *S->ints, 16384) < 0) return -1;
    /* the layout loop sets model and cluster as the template does */
    if (memcmp(p, &S->tmpl, MK_CAND_FROM)) return mk_error_set("planner: a candidate's model or cluster changed");
    memcpy(mid, (const char *)p + MK_CAND_FROM, MK_CAND_TO - MK_CAND_FROM);
    *off = S->nints;
    memcpy(S->ints + S->nints, p->bounds, (p->n_vstages + 1) * sizeof(int));
    if (ckpt) memcpy(S->ints + S->nints + p->n_vstages + 1, p->ckpt, p->n_vstages * sizeof(int));
    S->nints += need;
    return 0;
}

static void load_plan(const mk_search_t *S, const unsigned char *mid, long off, int ckpt, mk_plan_t *p)
{
    *p = S->tmpl;
    memcpy((char *)p + MK_CAND_FROM, mid, MK_CAND_TO - MK_CAND_FROM);
    memcpy(p->bounds, S->ints + off, (p->n_vstages + 1) * sizeof(int));
    if (ckpt) memcpy(p->ckpt, S->ints + off + p->n_vstages + 1, p->n_vstages * sizeof(int));
}

static int hent_less(const mk_hent_t *a, const mk_hent_t *b)
{
    if (a->lb != b->lb) return a->lb < b->lb;
    return a->index < b->index;
}

static int heap_push(mk_search_t *S, double lb, long index, long id, int grp)
{
    if (grow(&S->heap, &S->capheap, S->nheap + 1, sizeof *S->heap, 1024) < 0) return -1;
    mk_hent_t e = {lb, index, id, grp};
    long i = S->nheap++;
    for (; i > 0 && hent_less(&e, &S->heap[(i - 1) / 2]); i = (i - 1) / 2) S->heap[i] = S->heap[(i - 1) / 2];
    S->heap[i] = e;
    return 0;
}

static mk_hent_t heap_pop(mk_search_t *S)
{
    mk_hent_t least = S->heap[0], last = S->heap[--S->nheap];
    long i = 0, n = S->nheap;
    for (long c; (c = 2 * i + 1) < n; i = c) {
        if (c + 1 < n && hent_less(&S->heap[c + 1], &S->heap[c])) c++;
        if (!hent_less(&S->heap[c], &last)) break;
        S->heap[i] = S->heap[c];
    }
    if (n > 0) S->heap[i] = last;
    return least;
}

/* A settled candidate that fits, into the queue at its bound. */
static int push(mk_search_t *S, const mk_plan_t *p, double lb, long index)
{
    if (S->n >= MK_MAX_PLAN_CANDIDATES)
        return mk_error_set("the search has more than %ld candidate plans that fit, the planner's cap; narrow it "
                            "(--baseline, fewer GPUs)", (long)MK_MAX_PLAN_CANDIDATES);
    if (grow(&S->c, &S->cap, S->n + 1, sizeof *S->c, 1024) < 0) return -1;
    mk_cand_t *c = &S->c[S->n];
    if (store_plan(S, p, 1, c->mid, &c->off) < 0) return -1;
    c->has_ckpt = p->has_ckpt;
    c->lb = lb;
    c->index = index;
    return heap_push(S, lb, index, S->n++, 0);
}

/* Candidate c's plan, as pushed. */
static void cand_plan(const mk_search_t *S, const mk_cand_t *c, mk_plan_t *p)
{
    load_plan(S, c->mid, c->off, 1, p);
    p->has_ckpt = c->has_ckpt;
}

/* A lower bound on the simulated step time: mk_sim_bound_step (the
 * simulator's own per-chunk op durations, pipeline fill and drain with
 * their p2p sends, the stages' tails; DESIGN-NOTES.md) from the layer
 * costs of p's layout, made on first use.  Where they cannot be made (out
 * of memory) 0, which bounds every step: the search only simulates more. */
static double lower_bound(const mk_plan_t *p, const mk_gcache_t *e, const int *ck, const mk_tail_t *tail)
{
    mk_gbounds_t *B = e->bd;
    for (int i = 0; i < B->n; i++)
        if (mk_sim_bound_matches(B->v[i], p)) return mk_sim_bound_step(B->v[i], p, ck, tail->after, tail->dp);
    if (B->n == B->cap) {
        int cap = B->cap ? 2 * B->cap : 4;
        mk_sim_bound_t **n = realloc(B->v, cap * sizeof *n);
        if (!n) return 0;
        B->v = n, B->cap = cap;
    }
    if (!(B->v[B->n] = mk_sim_bound_new(B->cl, p, e->g, B->so))) return 0;
    return mk_sim_bound_step(B->v[B->n++], p, ck, tail->after, tail->dp);
}

/* The checkpoint count of every (stage, chunk) the scheduler will use. */
static int resolved_ckpt(const mk_plan_t *p, const mk_graph_t *g, int *out)
{
    int layers[MK_PLAN_MAX_VSTAGES];
    mk_sched_spec_t spec;
    mk_plan_t q = *p;
    q.m = q.pp; /* counts do not depend on m: the smallest valid spec */
    mk_plan_sched_spec(&q, g, 0, layers, &spec);
    return mk_sched_ckpt_counts(&spec, out);
}

/* Remember the candidate closest to fitting, for the no-fit report; of
 * equal ones the first enumerated (S->miss_order, the group's candidate
 * index, the same on any rank split: groups settle in bound order, but
 * the report is the eager search's). */
static void note_miss(mk_search_t *S, const mk_plan_t *p, int stage, const mk_mem_breakdown_t *m, double shortfall)
{
    mk_planner_result_t *r = S->r;
    if (r->have_closest && (shortfall > r->closest_shortfall ||
                            (shortfall == r->closest_shortfall && S->miss_order > S->closest_order)))
        return;
    S->closest_order = r->closest_index = S->miss_order;
    r->have_closest = 1;
    r->closest = *p;
    r->closest_mem = *m;
    r->closest_stage = stage;
    r->closest_shortfall = shortfall;
}

static int plan_fits(mk_search_t *S, const mk_plan_t *p, const mk_graph_t *g, int record, int *ck)
{
    if (resolved_ckpt(p, g, ck) < 0) return 0;
    double limit = S->cl->dev.mem_bytes, worst = -1;
    int ws = 0;
    mk_mem_breakdown_t wm, m;
    for (int s = 0; s < p->pp; s++) {
        int rc = S->fx ? mk_sim_stage_memory_fixed(S->fx, p, g, s, ck + s * p->vpp, &m)
                       : mk_sim_stage_memory(S->cl, p, g, s, ck + s * p->vpp, -1, &S->so, &m);
        if (rc < 0) return 0;
        if (m.total > worst) worst = m.total, ws = s, wm = m;
    }
    if (worst <= limit) return 1;
    if (record) note_miss(S, p, ws, &wm, worst - limit);
    return 0;
}

/* Memory no recompute policy can avoid: weights, gradients, optimizer
 * state and buffers, with no activation in flight.  If a stage exceeds
 * the device with that alone, no recompute variant of the split fits. */
static int state_fits(mk_search_t *S, const mk_plan_t *p, const mk_graph_t *g)
{
    int zero[MK_PLAN_MAX_VSTAGES] = {0};
    mk_mem_breakdown_t m;
    for (int s = 0; s < p->pp; s++) {
        if (mk_sim_stage_memory(S->cl, p, g, s, zero, 0, &S->so, &m) < 0) return 0;
        if (m.total > S->cl->dev.mem_bytes) {
            note_miss(S, p, s, &m, m.total - S->cl->dev.mem_bytes);
            return 0;
        }
    }
    return 1;
}

/* Fix the recompute details a candidate needs before its memory check:
 * auto -> per-stage counts; stage-aware -> the smallest ratio on a 0.1
 * grid that fits.  Returns 1 when the candidate fits. */
static int settle_recompute(mk_search_t *S, mk_plan_t *p, const mk_graph_t *g, int *ck)
{
    if (p->recompute.kind == MK_RECOMPUTE_AUTO) {
        if (mk_sim_resolve_auto_pooled(S->cl, p, g, &S->so, &S->pool) < 0) return 0;
        return plan_fits(S, p, g, 1, ck);
    }
    if (p->recompute.kind != MK_RECOMPUTE_STAGE_AWARE) return plan_fits(S, p, g, 1, ck);
    /* memory falls as the ratio grows: bisect for the smallest that fits */
    p->recompute.ratio = 1.0;
    if (!plan_fits(S, p, g, 1, ck)) return 0;
    int lo = 1, hi = 10;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        p->recompute.ratio = mid / 10.0;
        if (plan_fits(S, p, g, 0, ck)) hi = mid;
        else lo = mid + 1;
    }
    p->recompute.ratio = hi / 10.0;
    return plan_fits(S, p, g, 0, ck);
}

static int has(unsigned mask, int bit) { return (mask >> bit) & 1u; }

/* An auto or stage-aware candidate whose counts come out as those of none
 * (nothing checkpointed) or full is the same plan as that candidate. */
static int duplicates_fixed_policy(mk_search_t *S, const mk_plan_t *p, const mk_graph_t *g, const int *ck)
{
    if (p->recompute.kind != MK_RECOMPUTE_AUTO && p->recompute.kind != MK_RECOMPUTE_STAGE_AWARE) return 0;
    unsigned rm = S->o->recompute_mask ? S->o->recompute_mask : 0x1fu;
    int zero = 1;
    for (int i = 0; i < p->n_vstages; i++) zero &= ck[i] == 0;
    if (zero && has(rm, MK_RECOMPUTE_NONE)) return 1;
    if (!has(rm, MK_RECOMPUTE_FULL)) return 0;
    mk_plan_t f = *p;
    int fck[MK_PLAN_MAX_VSTAGES];
    f.recompute.kind = MK_RECOMPUTE_FULL, f.has_ckpt = 0;
    return resolved_ckpt(&f, g, fck) == 0 && !memcmp(fck, ck, p->n_vstages * sizeof *ck);
}

/* Stage bounds for one partition method, layout and cost setting. */
static int bounds_for(mk_search_t *S, mk_plan_t *p, const mk_gcache_t *e, const char *method, int rcon)
{
    if (strcmp(method, "compute")) return mk_partition(p, e->g, method);
    const mk_graph_t *g = e->g;
    double cost[4096];
    if (g->n_layers > 4096) return mk_partition(p, g, method);
    for (int l = 0; l < g->n_layers; l++)
        cost[l] = e->f[p->seqpar][l] + e->b[p->seqpar][l] + (rcon && mk_layer_checkpointable(g, l) ? e->f[p->seqpar][l] : 0);
    return mk_partition_costs(p, g, method, cost);
}

/* A non-uniform method that lands on the uniform split adds nothing when
 * uniform is searched too. */
static int same_as_uniform(mk_search_t *S, const mk_plan_t *p, const mk_graph_t *g, const char *method)
{
    unsigned pm = S->o->partition_mask ? S->o->partition_mask : 1u | 4u;
    if (!strcmp(method, "uniform") || !(pm & 1u)) return 0;
    mk_plan_t u = *p;
    if (mk_plan_partition_uniform(&u, g) < 0) return 0;
    return !memcmp(u.bounds, p->bounds, (p->n_vstages + 1) * sizeof *p->bounds);
}

/* auto and stage-aware recompute less where memory is freed. */
static int rcon_adapts(int rk) { return rk == MK_RECOMPUTE_AUTO || rk == MK_RECOMPUTE_STAGE_AWARE; }

/* The ZeRO variants of a layout: (stage, sharding group) pairs, stage 0..3
 * (1..3 need dp > 1), over the whole DP group or (hybrid) a node's DP
 * ranks where that is a smaller group dividing dp.  Returns the count. */
static int zero_variants(const mk_search_t *S, const mk_plan_t *base, int zs[8][2])
{
    const mk_planner_opts_t *o = S->o;
    mk_plan_t q = *base;
    int n = 0, node = mk_plan_zero_shard_node(&q, S->cl->gpus_per_node) == 0 ? q.zero_shard : 0;
    for (int z = 0; z <= 3; z++) {
        if ((o->zero >= 0 ? z != o->zero : z > o->zero_max) || (z && mk_plan_dp_cp(base) == 1)) continue;
        for (int h = 0; h <= (z && node); h++) {
            if (o->zero_hybrid >= 0 && h != o->zero_hybrid) continue;
            zs[n][0] = z, zs[n][1] = h ? node : 0, n++;
        }
    }
    return n;
}

static const mk_gcache_t *cache_of(mk_search_t *S, const mk_plan_t *p)
{
    for (int i = 0; i < S->ngc; i++)
        if (S->gc[i].mbs == p->mbs && S->gc[i].tp == p->tp && S->gc[i].cp == p->cp && S->gc[i].ep == p->ep)
            return &S->gc[i];
    return NULL;
}

/* The TP overlap settings searched: ov 0 off, 1 on (at the level asked, 2 by default). */
static int ov_searched(const mk_search_t *S, const mk_plan_t *p, int ov)
{
    return !((S->o->tp_overlap >= 0 && ov != (S->o->tp_overlap > 0)) || (ov && p->tp == 1));
}

static int ov_level(const mk_search_t *S, int ov) { return ov ? (S->o->tp_overlap > 0 ? S->o->tp_overlap : 2) : 0; }

/* Family fi's tail into S->tail, for lower_bound. */
static void tail_load(mk_search_t *S, long fi, int pp)
{
    const double *t = S->dbl + S->fam[fi].toff;
    memcpy(S->tail.after, t, pp * sizeof *t);
    memcpy(S->tail.dp, t + pp, pp * sizeof *t);
}

/* A family for split p (with its ZeRO variant); returns its id or -1.
 * The tail is one per family: it reads the stage's parameters, ZeRO and
 * DP groups (stage statics, optimizer, DP floor), no recompute detail. */
static long fam_new(mk_search_t *S, const mk_plan_t *p, const mk_graph_t *g)
{
    if (grow(&S->fam, &S->capfam, S->nfam + 1, sizeof *S->fam, 256) < 0 ||
        grow(&S->dbl, &S->capdbl, S->ndbl + 2L * p->pp, sizeof *S->dbl, 4096) < 0)
        return -1;
    mk_fam_t *F = &S->fam[S->nfam];
    memset(F, 0, sizeof *F);
    if (store_plan(S, p, 0, F->mid, &F->off) < 0) return -1;
    F->toff = S->ndbl, F->first = S->ngrp, F->state_ok = -1;
    if (mk_sim_stage_tail(S->cl, p, g, &S->so, S->dbl + S->ndbl, S->dbl + S->ndbl + p->pp) < 0) return -1;
    S->ndbl += 2L * p->pp;
    return S->nfam++;
}

/* The least bound over the TP overlaps searched of p with counts ck
 * (S->tail loaded). */
static double group_bound(mk_search_t *S, mk_plan_t *p, const mk_gcache_t *e, const int *ck)
{
    double lb = DBL_MAX;
    for (int ov = 0; ov <= 1; ov++) {
        if (!ov_searched(S, p, ov)) continue;
        p->tp_overlap = ov_level(S, ov);
        double b = lower_bound(p, e, ck, &S->tail);
        if (b < lb) lb = b;
    }
    return lb;
}

/* Group (family fi, recompute kind rk) into the queue, unsettled.  Its
 * bound holds for every outcome of its settling: lower_bound only grows
 * with the checkpoint counts, so it takes those that are certain (a fixed
 * policy's; none for auto and stage-aware, which may checkpoint nothing),
 * the family's tail, and the least over the overlaps searched.  Returns
 * its id or -1. */
static long group_new(mk_search_t *S, const mk_gcache_t *e, long fi, int rk, long z1)
{
    if (grow(&S->grp, &S->capgrp, S->ngrp + 1, sizeof *S->grp, 1024) < 0) return -1;
    mk_plan_t p;
    load_plan(S, S->fam[fi].mid, S->fam[fi].off, 0, &p);
    p.recompute.kind = (mk_recompute_kind_t)rk, p.recompute.ratio = 1.0;
    int ck[MK_PLAN_MAX_VSTAGES] = {0}, nov = 0;
    if (!rcon_adapts(rk) && resolved_ckpt(&p, e->g, ck) < 0) memset(ck, 0, sizeof ck); /* it will not fit */
    tail_load(S, fi, p.pp);
    for (int ov = 0; ov <= 1; ov++) nov += ov_searched(S, &p, ov);
    double lb = group_bound(S, &p, e, ck);
    mk_cgroup_t *G = &S->grp[S->ngrp];
    *G = (mk_cgroup_t){.fam = fi, .index = S->combo * 1000000 + S->combo_seq, .z1 = z1, .rk = (signed char)rk,
                       .nov = (signed char)nov};
    S->combo_seq += 2; /* the same whatever the rank split */
    if (p.zero >= 2 || p.zero_shard) G->index += MK_LATE_VARIANT;
    S->fam[fi].pending++;
    S->r->candidates += nov;
    if (heap_push(S, lb, G->index, S->ngrp, 1) < 0) return -1;
    return S->ngrp++;
}

/* All recompute / ZeRO choices on one (schedule, vpp, partition, sp), as
 * groups (their overlaps inside): families fam[rcon][zi] made here. */
static int variant_candidates(mk_search_t *S, const mk_plan_t *base, const mk_gcache_t *e, const char *method)
{
    const mk_planner_opts_t *o = S->o;
    unsigned rm = o->recompute_mask ? o->recompute_mask : 0x1fu; /* none..auto */
    int have[2] = {0, 0}, zs[8][2], nz = zero_variants(S, base, zs);
    long fam[2][8];
    mk_plan_t bp[2];
    if (!ov_searched(S, base, 0) && !ov_searched(S, base, 1)) return 0;
    for (int rk = 0; rk <= MK_RECOMPUTE_AUTO; rk++) {
        if (!has(rm, rk) || (rk == MK_RECOMPUTE_STAGE_AWARE && base->pp == 1)) continue;
        int rcon = rk == MK_RECOMPUTE_FULL || rk == MK_RECOMPUTE_STAGE_AWARE || rk == MK_RECOMPUTE_AUTO;
        if (!have[rcon]) {
            bp[rcon] = *base;
            if (bounds_for(S, &bp[rcon], e, method, rcon) < 0 || mk_plan_check(&bp[rcon], e->g) < 0) return 0;
            if (same_as_uniform(S, &bp[rcon], e->g, method)) return 0; /* already a uniform candidate */
            have[rcon] = 1;
            for (int zi = 0; zi < nz; zi++) fam[rcon][zi] = -1;
        }
        long z1[2] = {-1, -1}; /* this kind's ZeRO-1 groups, over the whole group / hybrid */
        for (int zi = 0; zi < nz; zi++) {
            int h = zs[zi][1] != 0;
            if (fam[rcon][zi] < 0) {
                mk_plan_t p = bp[rcon];
                p.recompute.kind = (mk_recompute_kind_t)rk, p.recompute.ratio = 1.0;
                p.zero = zs[zi][0], p.zero_shard = zs[zi][1];
                if ((fam[rcon][zi] = fam_new(S, &p, e->g)) < 0) return -1;
            }
            long gi = group_new(S, e, fam[rcon][zi], rk, zs[zi][0] == 2 && !rcon_adapts(rk) ? z1[h] : -1);
            if (gi < 0) return -1;
            if (zs[zi][0] == 1) z1[h] = gi;
        }
    }
    return 0;
}

/* Group gi's recompute settled (the family's state and fixed parts first,
 * once); 1 when it fits. */
/* Group gi's family's state and fixed memory parts (once); 1 when its
 * state fits, with S->fx set for the group's memory checks. */
static int fam_state(mk_search_t *S, long gi, const mk_plan_t *p, const mk_graph_t *g)
{
    mk_fam_t *F = &S->fam[S->grp[gi].fam];
    if (F->state_ok < 0) {
        mk_plan_t q = *p; /* the eager search checked the state at the family's first group */
        q.recompute.kind = (mk_recompute_kind_t)S->grp[F->first].rk;
        S->miss_order = S->grp[F->first].index;
        F->state_ok = (signed char)state_fits(S, &q, g);
    }
    /* the same for every recompute kind and count (NULL: computed per count) */
    if (F->state_ok && !F->fx) F->fx = mk_sim_fixed_new(p, g, &S->so);
    S->fx = F->fx, S->miss_order = S->grp[gi].index;
    return F->state_ok;
}

/* Group gi's recompute settled; 1 when it fits. */
static int group_fits(mk_search_t *S, long gi, mk_plan_t *p, const mk_graph_t *g, int *ck)
{
    int fit = fam_state(S, gi, p, g) && settle_recompute(S, p, g, ck);
    S->fx = NULL;
    return fit;
}

/* A family's fixed parts go with its last unsettled group. */
static void fam_release(mk_search_t *S, long fi)
{
    if (S->fam[fi].pending == 0) mk_sim_fixed_free(S->fam[fi].fx), S->fam[fi].fx = NULL;
}

/* auto: per stage the fewest k (k per chunk, capped at its checkpointable
 * layers, as mk_sim_resolve_auto sets them) whose memory, plan_fits's,
 * fits (S->fx set).  An auto candidate that fits passes plan_fits on its
 * resolved counts, so it checkpoints at least these whatever the stream
 * walks find, and its bound may count them.  Returns 0 when a stage fits
 * at no k (the candidate cannot fit), else 1. */
static int auto_floor(mk_search_t *S, const mk_plan_t *p, const mk_graph_t *g, int *ck)
{
    int layers[MK_PLAN_MAX_VSTAGES], V = p->vpp;
    mk_plan_ckpt_layers(p, g, layers);
    for (int s = 0; s < p->pp; s++) {
        int nmax = 0, fits = 0, *c = ck + s * V;
        for (int ch = 0; ch < V; ch++) nmax = layers[s * V + ch] > nmax ? layers[s * V + ch] : nmax;
        for (int k = 0; k <= nmax && !fits; k++) {
            for (int ch = 0; ch < V; ch++) c[ch] = k < layers[s * V + ch] ? k : layers[s * V + ch];
            mk_mem_breakdown_t m;
            int rc = S->fx ? mk_sim_stage_memory_fixed(S->fx, p, g, s, c, &m)
                           : mk_sim_stage_memory(S->cl, p, g, s, c, -1, &S->so, &m);
            fits = rc == 0 && m.total <= S->cl->dev.mem_bytes;
        }
        if (!fits) return 0;
    }
    return 1;
}

/* An auto group's first turn: its family's state and the floor of its
 * counts (cheap closed forms).  Queued again at the floor's bound, or, if
 * it cannot fit, put by: its full settling (the stream walks) only feeds
 * the no-fit report.  Returns 1 when it was floored, 0 when it needs the
 * full settling now (its state does not fit), -1 on error. */
static int floor_group(mk_search_t *S, long gi)
{
    mk_cgroup_t *G = &S->grp[gi];
    long fi = G->fam;
    mk_plan_t p;
    load_plan(S, S->fam[fi].mid, S->fam[fi].off, 0, &p);
    p.recompute.kind = MK_RECOMPUTE_AUTO, p.recompute.ratio = 1.0;
    const mk_gcache_t *e = cache_of(S, &p);
    int ck[MK_PLAN_MAX_VSTAGES], fit = fam_state(S, gi, &p, e->g) ? auto_floor(S, &p, e->g, ck) : -1;
    S->fx = NULL;
    if (fit < 0) return 0;
    G->floored = 1;
    if (fit) {
        tail_load(S, fi, p.pp);
        return heap_push(S, group_bound(S, &p, e, ck), G->index, gi, 1) < 0 ? -1 : 1;
    }
    G->done = 1, G->fit = 0;
    S->r->settled += G->nov, S->r->pruned_memory += G->nov;
    S->fam[fi].pending--;
    fam_release(S, fi);
    if (grow(&S->deferred, &S->capdeferred, S->ndeferred + 1, sizeof *S->deferred, 256) < 0) return -1;
    S->deferred[S->ndeferred++] = gi;
    return 1;
}

/* Nothing fits: the put-by auto groups settled in full, for the report
 * of the candidate closest to fitting (note_miss, in enumeration order). */
static void settle_deferred(mk_search_t *S)
{
    for (long i = 0; i < S->ndeferred; i++) {
        long gi = S->deferred[i], fi = S->grp[gi].fam;
        mk_plan_t p;
        int ck[MK_PLAN_MAX_VSTAGES];
        load_plan(S, S->fam[fi].mid, S->fam[fi].off, 0, &p);
        p.recompute.kind = MK_RECOMPUTE_AUTO, p.recompute.ratio = 1.0;
        group_fits(S, gi, &p, cache_of(S, &p)->g, ck);
        fam_release(S, fi);
    }
}

/* Settle group gi: its memory, then its candidates that fit into the
 * queue at their true bounds.  Returns 1 when it fits, 0 not, -1 error. */
static int settle_group(mk_search_t *S, long gi)
{
    mk_cgroup_t *G = &S->grp[gi];
    if (G->done) return G->fit;
    G->done = 1;
    mk_plan_t p;
    long fi = G->fam;
    load_plan(S, S->fam[fi].mid, S->fam[fi].off, 0, &p);
    p.recompute.kind = (mk_recompute_kind_t)G->rk, p.recompute.ratio = 1.0;
    const mk_gcache_t *e = cache_of(S, &p);
    S->r->settled += G->nov;
    /* with a fixed policy ZeRO-2 is never faster than ZeRO-1 (the same
     * reductions, plus one per micro-batch): only worth it where ZeRO-1
     * does not fit */
    int z1 = G->z1 >= 0 ? settle_group(S, G->z1) : 0, ck[MK_PLAN_MAX_VSTAGES], fit = 0;
    if (z1 < 0) return -1;
    if (z1) S->r->duplicates += G->nov;
    else if (!(fit = group_fits(S, gi, &p, e->g, ck))) S->r->pruned_memory += G->nov;
    G->fit = (signed char)fit;
    S->fam[fi].pending--;
    fam_release(S, fi);
    if (!fit) return 0;
    if (duplicates_fixed_policy(S, &p, e->g, ck)) {
        S->r->duplicates += G->nov;
        return 1;
    }
    tail_load(S, fi, p.pp);
    for (int ov = 0; ov <= 1; ov++) {
        if (!ov_searched(S, &p, ov)) continue;
        p.tp_overlap = ov_level(S, ov); /* memory does not depend on TP overlap: settled once for both */
        if (push(S, &p, lower_bound(&p, e, ck, &S->tail), G->index + ov) < 0) return -1;
    }
    return 1;
}

/* Candidates of one layout (dp, cp, ep, pp, tp) and micro-batch size. */
static int layout_candidates(mk_search_t *S, int dp, int cp, int ep, int pp, int tp, int mbs)
{
    const mk_planner_opts_t *o = S->o;
    mk_gcache_t *e = graph_for(S, mbs, tp, cp, ep);
    if (!e) return -1;
    unsigned sm = o->sched_mask ? o->sched_mask
                                : 1u << MK_SCHED_1F1B | 1u << MK_SCHED_INTERLEAVED | 1u << MK_SCHED_MERAK |
                                      1u << MK_SCHED_ZB_H1;
    unsigned pm = o->partition_mask ? o->partition_mask : 1u | 4u;
    static const char *const parts[] = {"uniform", "parameters", "compute"};
    S->r->layouts++;
    for (int k = 0; k < MK_SCHED_COUNT; k++) {
        if (!has(sm, k) || (pp == 1 && k != MK_SCHED_1F1B && k != MK_SCHED_GPIPE)) continue;
        for (int v = 1; v <= 4; v *= 2) {
            if ((k == MK_SCHED_INTERLEAVED) != (v > 1)) continue;
            for (int pi = 0; pi < 3; pi++) {
                if (!has(pm, pi) || (pp == 1 && pi > 0 && (pm & 1u))) continue; /* one stage: one split */
                for (int sp = 0; sp <= 1; sp++) {
                    if ((o->seqpar >= 0 && sp != o->seqpar) || (sp && tp == 1)) continue;
                    mk_plan_t p;
                    mk_plan_init(&p);
                    p.model = *S->model;
                    mk_strlcpy(p.cluster, S->cl->name, sizeof p.cluster);
                    p.dtype = o->dtype, p.gbs = o->gbs;
                    p.dp = dp, p.cp = cp, p.ep = ep, p.pp = pp, p.tp = tp, p.vpp = v, p.mbs = mbs, p.seqpar = sp;
                    if (o->moe_imbalance > 0) p.moe_imbalance = o->moe_imbalance;
                    p.schedule = (mk_sched_kind_t)k;
                    p.n_vstages = (int)mk_plan_vstages(&p);
                    p.m = mk_plan_micro_batches(&p);
                    if (k == MK_SCHED_INTERLEAVED && (p.m % pp || p.n_vstages > e->g->n_layers)) continue;
                    if (variant_candidates(S, &p, e, parts[pi]) < 0) return -1;
                }
            }
        }
    }
    return 0;
}

static int entry_better(const mk_planner_entry_t *a, const mk_planner_entry_t *b)
{
    if (a->res.step_time_s != b->res.step_time_s) return a->res.step_time_s < b->res.step_time_s;
    return a->index < b->index;
}

/* Insert into the sorted top-K list (r->best has room for top). */
static void top_insert(mk_planner_result_t *r, const mk_planner_entry_t *e, int top)
{
    int i = r->n;
    if (i == top) {
        if (!entry_better(e, &r->best[top - 1])) return;
        i = top - 1;
    } else {
        r->n++;
    }
    while (i > 0 && entry_better(e, &r->best[i - 1])) {
        r->best[i] = r->best[i - 1];
        i--;
    }
    r->best[i] = *e;
}

void mk_planner_merge(mk_planner_result_t *r, const mk_planner_entry_t *e, int n, int top)
{
    for (int i = 0; i < n; i++) top_insert(r, &e[i], top);
}

static int divides(int a, int b) { return b % a == 0; }

/* Context parallelism is searched only where the sequence is long: at
 * s >= MK_PLANNER_CP_MIN_SEQ tokens (Megatron-LM's and NeMo's long-context
 * recipes start CP at 8K, Llama 3's long-context stage at 8K too (Dubey et
 * al. 2024, sec. 3.3.2): half that is a safe floor), and with chunks of
 * at least MK_PLANNER_CP_MIN_CHUNK tokens (2cp chunks of the sequence;
 * smaller ones make the ring's per-step attention, which shrinks as
 * 1/cp^2 while a step's K/V transfer shrinks as 1/cp, too short to hide
 * it).  A rule on the model alone, so every rank of an MPI search agrees;
 * below it a plan that needs CP to fit is not found (merak sim --cp
 * still simulates it). */
#define MK_PLANNER_CP_MIN_SEQ 4096
#define MK_PLANNER_CP_MIN_CHUNK 512

static int cp_searched(const mk_model_config_t *m, int cp)
{
    if (cp == 1) return 1;
    return m->seq >= MK_PLANNER_CP_MIN_SEQ && m->seq % (2 * cp) == 0 && m->seq / (2 * cp) >= MK_PLANNER_CP_MIN_CHUNK;
}

/* Progress to o->progress: phase 0 generating, 1 settling and simulating,
 * 2 done.  While simulating: at most the candidates of the queue's
 * entries whose bound is below the K-th best so far are still simulated
 * (the K-th best only drops, a group settles to at most its candidates);
 * counted at most every 0.05 s. */
static void report(mk_search_t *S, int phase)
{
    if (!S->o->progress) return;
    const mk_planner_result_t *r = S->r;
    int top = S->o->top > 0 ? S->o->top : 5, cut = !S->o->exhaustive && r->n == top;
    double now = mk_time_now() - S->t0;
    if (phase == 1 && now - S->reported_t < 0.05 && S->reported_t > 0) return;
    long left = 0;
    for (long i = 0; phase == 1 && i < S->nheap; i++) {
        const mk_hent_t *h = &S->heap[i];
        if (cut && h->lb >= r->best[top - 1].res.step_time_s) continue;
        left += h->grp ? (S->grp[h->id].done ? 0 : S->grp[h->id].nov) : 1;
    }
    if (phase == 1) S->reported_t = now;
    mk_planner_progress_t p = {phase,        S->combos_done, S->combos,     r->candidates, r->settled,
                               r->pruned_memory, r->duplicates, S->n,      r->simulated,
                               phase == 2 ? r->pruned_bound : 0, left, now};
    S->o->progress(S->o->progress_ctx, &p);
}

/* The micro-batch sizes of one layout: its (layout, micro-batch) combos. */
static int layout_batches(mk_search_t *S, int dp, int cp, int pp, int tp, int *any_batch, char *too_long, size_t n)
{
    const mk_planner_opts_t *o = S->o;
    int max_mbs = o->max_mbs > 0 ? o->max_mbs : 8, size = o->size > 0 ? o->size : 1;
    for (int mbs = 1; mbs <= max_mbs; mbs *= 2) {
        mk_plan_t sz;
        mk_plan_init(&sz);
        sz.dp = dp, sz.cp = cp, sz.pp = pp, sz.tp = tp, sz.mbs = mbs, sz.gbs = o->gbs;
        if (!mk_plan_micro_batches(&sz)) continue;
        /* a step too long to schedule: skipped, named if all are */
        if (mk_plan_check_sizes(&sz) < 0) {
            mk_strlcpy(too_long, mk_error_last(), n);
            continue;
        }
        *any_batch = 1;
        /* ranks take every size-th (layout, micro-batch): each
         * generates, checks and simulates only its own share */
        S->combo++, S->combo_seq = 0;
        if ((S->combo - 1) % size != o->rank) continue;
        /* expert parallelism: every ep dividing dp and the experts, 1 first
           (a dense model has only ep 1: its candidates are unchanged) */
        for (int ep = 1; ep <= dp; ep++) {
            if (!divides(ep, dp) || (ep > 1 && !(S->model->num_experts > 0 && divides(ep, S->model->num_experts))))
                continue;
            if (S->counting) {
                S->combos++;
                continue;
            }
            if (layout_candidates(S, dp, cp, ep, pp, tp, mbs) < 0) return -1;
            S->combos_done++;
            report(S, 0);
        }
    }
    return 0;
}

/* Every layout of N GPUs and micro-batch size; cp 1's first, so that
 * their candidate indices (ties) are what they were without CP. */
static int enumerate(mk_search_t *S)
{
    const mk_planner_opts_t *o = S->o;
    int N = o->gpus, blocks = S->model->num_layers, any_layout = 0, any_batch = 0;
    char too_long[256] = "";
    for (int cp = 1; cp <= N && cp <= MK_MAX_CP; cp++) {
        if (!divides(cp, N) || !cp_searched(S->model, cp)) continue;
        for (int tp = 1; tp <= N / cp && tp <= S->cl->gpus_per_node; tp++) {
            if (!divides(tp, N / cp) || mk_model_check_tp(S->model, tp) < 0) continue;
            int M = N / (cp * tp);
            for (int pp = 1; pp <= M && pp <= blocks && (!o->max_pp || pp <= o->max_pp); pp++) {
                if (!divides(pp, M)) continue;
                any_layout = 1;
                if (layout_batches(S, M / pp, cp, pp, tp, &any_batch, too_long, sizeof too_long) < 0) return -1;
            }
        }
    }
    if (!any_layout)
        return mk_error_set("no (dp, pp, tp) layout of %d GPUs suits the model (tp must divide the %d heads "
                            "and fit a node of %d GPUs, pp at most %d blocks)",
                            N, S->model->heads, S->cl->gpus_per_node, blocks);
    if (!any_batch && too_long[0])
        return mk_error_set("global batch %d: every layout of %d GPUs that divides it has too long a step (%s)",
                            o->gbs, N, too_long);
    if (!any_batch)
        return mk_error_set("global batch %d cannot be divided among the data-parallel replicas of any "
                            "layout of %d GPUs", o->gbs, N);
    return 0;
}

static int simulate(mk_search_t *S, mk_sim_t *sim, const mk_plan_t *p, long index, mk_planner_entry_t *out)
{
    mk_plan_resolve_opts_t ro = {.cluster = S->cl, .graph = cache_of(S, p)->g, .resolve_auto = mk_sim_auto};
    mk_plan_ctx_t ctx;
    out->plan = *p;
    out->index = index;
    S->r->simulated++;
    if (mk_plan_resolve(&ctx, p, &ro) < 0) return -1;
    int rc = mk_sim_run(sim, &ctx, &S->so, &out->res);
    mk_plan_ctx_free(&ctx);
    return rc < 0 ? -1 : out->res.fits;
}

/* o->share (S->all set: a split search): one exchange of this rank's K
 * best; done: wait (the callback waits politely) until every rank is
 * done.  Returns -1 on error. */
static int share_round(mk_search_t *S, int done)
{
    double mine[MK_MAX_TOP];
    for (int i = 0; i < S->r->n; i++) mine[i] = S->r->best[i].res.step_time_s;
    for (;;) {
        int k = S->o->share(S->o->share_ctx, mine, S->r->n, done, S->all);
        if (k < 0) return mk_error_last()[0] ? -1 : mk_error_set("sharing the search's best plans failed");
        if (k == 2) S->shared = 1;
        if (!done || k == 2) return 0;
    }
}

/* The step time a bound must reach to rule a candidate out: the K-th
 * best of this rank's, or of every rank's where they share them. */
static double kth_best(const mk_search_t *S)
{
    int top = S->o->top > 0 ? S->o->top : 5;
    double t = S->r->n == top ? S->r->best[top - 1].res.step_time_s : INFINITY;
    return S->all && S->all[top - 1] < t ? S->all[top - 1] : t;
}

/* Every rank done (o->share): the last exchange, also on a failed rank's
 * way out, so that none waits for it. */
static int share_finish(mk_search_t *S)
{
    return S->all && !S->shared ? share_round(S, 1) : 0;
}

/* Branch and bound over this rank's share of the candidates, A*-like:
 * the least (bound, index) entry of the queue first; a group is settled
 * and its candidates that fit queued at their true bounds (no less than
 * the group's), a candidate simulated.  Every candidate thus comes out in
 * the order of the eager search's sorted list, and the search stops where
 * that one did: at the first bound no less than the K-th best step. */
static int bound_and_simulate(mk_search_t *S, mk_sim_t *sim)
{
    const mk_planner_opts_t *o = S->o;
    int top = o->top > 0 ? o->top : 5;
    mk_planner_entry_t e;
    while (S->nheap > 0) {
        if (S->all && share_round(S, 0) < 0) return -1;
        if (!o->exhaustive && S->heap[0].lb >= kth_best(S)) break;
        mk_hent_t h = heap_pop(S);
        if (h.grp) {
            const mk_cgroup_t *G = &S->grp[h.id];
            int k = G->rk == MK_RECOMPUTE_AUTO && !G->floored && !G->done ? floor_group(S, h.id) : 0;
            if (k < 0 || (k == 0 && settle_group(S, h.id) < 0)) return -1;
            continue;
        }
        report(S, 1);
        mk_plan_t p;
        cand_plan(S, &S->c[h.id], &p);
        int rc = simulate(S, sim, &p, h.index, &e);
        if (rc < 0) return -1;
        if (e.res.step_time_s < h.lb * (1 - 1e-9)) S->r->bound_violations++;
        if (rc > 0) top_insert(S->r, &e, top);
    }
    if (share_finish(S) < 0) return -1;
    /* the put-by groups only feed the no-fit report: not when any rank found a plan */
    if (S->r->n == 0 && !(S->all && S->all[0] < INFINITY)) settle_deferred(S);
    /* ruled out by the bound: the candidates never settled, those that fit and were not simulated */
    S->r->pruned_bound = S->r->candidates - S->r->settled + S->n - S->r->simulated;
    report(S, 2);
    return 0;
}

static double mean_bubble(const mk_sim_result_t *r)
{
    double s = 0;
    for (int i = 0; i < r->pp; i++) s += r->bubble_fraction[i];
    return r->pp ? s / r->pp : 0;
}

/* The comparison behind mk_planner_explain. */
void mk_planner_why(const mk_planner_entry_t *a, const mk_planner_entry_t *b, mk_planner_why_t *w)
{
    const mk_plan_t *p = &a->plan, *q = &b->plan;
    char diff[256] = "", ra[32], rb[32];
    size_t d = 0;
    mk_recompute_format(&p->recompute, ra, sizeof ra);
    mk_recompute_format(&q->recompute, rb, sizeof rb);
#define DIFF(cond, ...)                                                                   \
    if ((cond) && d < sizeof diff - 64) {                                                 \
        if (d) d += snprintf(diff + d, sizeof diff - d, ", ");                          \
        d += snprintf(diff + d, sizeof diff - d, __VA_ARGS__);                            \
    }
    DIFF(p->dp != q->dp || p->pp != q->pp || p->tp != q->tp, "layout dp%d pp%d tp%d vs dp%d pp%d tp%d", p->dp,
         p->pp, p->tp, q->dp, q->pp, q->tp);
    DIFF(p->cp != q->cp, "cp %d vs %d", p->cp, q->cp);
    DIFF(p->ep != q->ep, "ep %d vs %d", p->ep, q->ep);
    DIFF(p->mbs != q->mbs, "micro-batch %d vs %d", p->mbs, q->mbs);
    DIFF(p->schedule != q->schedule || p->vpp != q->vpp, "schedule %s vs %s", mk_sched_kind_name(p->schedule),
         mk_sched_kind_name(q->schedule));
    DIFF(strcmp(ra, rb), "recompute %s vs %s", ra, rb);
    DIFF(p->seqpar != q->seqpar, "sequence parallel %s", p->seqpar ? "on vs off" : "off vs on");
    DIFF(p->tp_overlap != q->tp_overlap, "TP overlap %d vs %d", p->tp_overlap, q->tp_overlap);
    DIFF(p->zero != q->zero, "ZeRO-%d vs ZeRO-%d", p->zero, q->zero);
    DIFF(p->zero_shard != q->zero_shard, "ZeRO group %d vs %d", mk_plan_zero_group(p), mk_plan_zero_group(q));
    DIFF(strcmp(p->partition, q->partition), "partition %s vs %s", p->partition, q->partition);
#undef DIFF
    const mk_sim_result_t *x = &a->res, *y = &b->res;
    /* the all-to-alls block the compute stream: apart from compute, and a
       component of their own only where a plan has them */
    const char *what[6] = {"compute", "pipeline idle time", "exposed p2p time", "exposed TP communication",
                           "exposed DP communication", "all-to-all time"};
    /* the same figures, said in full (mean per stage, as the simulator reports them) */
    const char *what_long[6] = {
        "compute (the step less the compute stream's idle time, mean per stage)",
        "idle time of the compute stream (pipeline bubble and waits, mean per stage)",
        "exposed pipeline sends (p2p not hidden behind compute, mean per stage)",
        "exposed TP communication (collectives not hidden behind compute, mean per stage)",
        "exposed DP communication (gradient reductions not hidden behind compute, mean per stage)",
        "all-to-all time (expert dispatch and combine, mean per stage)"};
    double xe = x->exposed_comm_s[MK_COMM_EP], ye = y->exposed_comm_s[MK_COMM_EP];
    double va[6] = {x->step_time_s * (1 - mean_bubble(x)) - xe, x->step_time_s * mean_bubble(x),
                    x->exposed_comm_s[0], x->exposed_comm_s[1], x->exposed_comm_s[2], xe};
    double vb[6] = {y->step_time_s * (1 - mean_bubble(y)) - ye, y->step_time_s * mean_bubble(y),
                    y->exposed_comm_s[0], y->exposed_comm_s[1], y->exposed_comm_s[2], ye};
    int k = 0, nk = p->ep > 1 || q->ep > 1 ? 6 : 5;
    for (int i = 1; i < nk; i++)
        if (vb[i] - va[i] > vb[k] - va[k]) k = i;
    w->faster_pct = 100 * (y->step_time_s - x->step_time_s) / y->step_time_s;
    mk_strlcpy(w->knobs, d ? diff : "same knobs", sizeof w->knobs);
    w->what = what[k], w->what_long = what_long[k];
    w->a_s = va[k], w->b_s = vb[k];
}

/* Names the knobs that differ, then the step-time component that moved most. */
void mk_planner_explain(const mk_planner_entry_t *a, const mk_planner_entry_t *b, char *buf, size_t n)
{
    mk_planner_why_t w;
    mk_planner_why(a, b, &w);
    snprintf(buf, n, "#1 is %.1f%% faster than #2 (%s): less %s, %.4g s vs %.4g s per step", w.faster_pct, w.knobs,
             w.what, w.a_s, w.b_s);
}

void mk_planner_result_free(mk_planner_result_t *r)
{
    free(r->best);
    r->best = NULL;
    r->n = 0;
}

static void search_free(mk_search_t *S)
{
    for (int i = 0; i < S->ngc; i++) {
        mk_graph_free(S->gc[i].g);
        for (int sp = 0; sp < 2; sp++) free(S->gc[i].f[sp]), free(S->gc[i].b[sp]);
        if (S->gc[i].bd)
            for (int j = 0; j < S->gc[i].bd->n; j++) mk_sim_bound_free(S->gc[i].bd->v[j]);
        if (S->gc[i].bd) free(S->gc[i].bd->v);
        free(S->gc[i].bd);
    }
    free(S->gc);
    for (long i = 0; i < S->nfam; i++) mk_sim_fixed_free(S->fam[i].fx);
    free(S->c), free(S->ints), free(S->fam), free(S->grp), free(S->dbl), free(S->heap), free(S->deferred);
    mk_sched_pool_free(&S->pool);
}

int mk_planner_search(const mk_model_config_t *m, const mk_cluster_t *c, const mk_planner_opts_t *o,
                      mk_planner_result_t *r)
{
    double t0 = mk_time_now();
    memset(r, 0, sizeof *r);
    int top = o->top > 0 ? o->top : 5;
    mk_search_t S = {.model = m, .cl = c, .o = o, .r = r};
    mk_sim_opts_init(&S.so);
    mk_plan_init(&S.tmpl);
    S.tmpl.model = *m;
    mk_strlcpy(S.tmpl.cluster, c->name, sizeof S.tmpl.cluster);
    if (o->gpus < 1 || o->gbs < 1) return mk_error_set("--gpus and --gbs must be >= 1");
    if (mk_limit_check("--gpus", o->gpus, MK_MAX_GPUS) < 0 || mk_limit_check("--gbs", o->gbs, MK_MAX_GBS) < 0 ||
        mk_limit_check("--top", top, MK_MAX_TOP) < 0)
        return -1;
    if (c->max_nodes > 0 && o->gpus > c->max_nodes * c->gpus_per_node) {
        long long all = (long long)c->max_nodes * c->gpus_per_node; /* > all >= 1 GPUs asked: "GPUs" */
        return mk_error_set("%d GPUs exceed cluster '%s', which has %d node%s of %d GPU%s (%lld GPU%s in all)",
                            o->gpus, c->name, c->max_nodes, c->max_nodes == 1 ? "" : "s", c->gpus_per_node,
                            c->gpus_per_node == 1 ? "" : "s", all, all == 1 ? "" : "s");
    }
    if (mk_cluster_check_dtype(c, o->dtype) < 0) return -1; /* fp8 only where asked and present */
    r->best = calloc(top, sizeof *r->best);
    if (o->share && o->size > 1) { /* from here on every way out ends with this rank's last exchange */
        S.all = S.all_buf;
        for (int i = 0; i < top; i++) S.all[i] = INFINITY;
    }
    mk_sim_t *sim = mk_sim_new(c);
    S.t0 = t0;
    int rc = (!r->best || !sim) ? mk_error_set("out of memory") : 0;
    if (rc == 0 && o->progress) { /* a first pass counts the pairs: the bar's length while generating */
        S.counting = 1;
        rc = enumerate(&S);
        S.counting = 0, S.combo = 0;
        report(&S, 0);
    }
    if (rc == 0) rc = enumerate(&S);
    r->enumerate_time_s = mk_time_now() - t0;
    if (rc == 0) rc = bound_and_simulate(&S, sim);
    if (rc < 0 && S.all) { /* the others wait for this rank's last exchange */
        char err[512];
        mk_strlcpy(err, mk_error_last(), sizeof err);
        share_finish(&S);
        mk_error_set("%s", err);
    }
    mk_sim_free(sim);
    search_free(&S);
    r->search_time_s = mk_time_now() - t0;
    return rc;
}

/* Move one layer across the boundary on side `dir` (-1 left, +1 right) of
 * stage s; returns 0 if the move keeps every stage non-empty. */
static int move_layer(mk_plan_t *p, int s, int dir)
{
    if (dir < 0 && s > 0 && p->bounds[s + 1] - p->bounds[s] > 1) return p->bounds[s]++, 0;
    if (dir > 0 && s < p->pp - 1 && p->bounds[s + 1] - p->bounds[s] > 1) return p->bounds[s + 1]--, 0;
    return -1;
}

/* Simulate a moved plan; 1 when it fits and beats *e (then *e = *t). */
static int try_move(mk_sim_t *sim, const mk_plan_resolve_opts_t *ro, mk_planner_entry_t *e, mk_planner_entry_t *t)
{
    mk_plan_ctx_t ctx;
    if (t->plan.recompute.kind == MK_RECOMPUTE_AUTO) t->plan.has_ckpt = 0;
    if (mk_plan_resolve(&ctx, &t->plan, ro) < 0) return 0; /* not a valid split, or auto failed */
    t->plan = ctx.plan;
    int rc = mk_sim_run(sim, &ctx, NULL, &t->res);
    mk_plan_ctx_free(&ctx);
    if (rc < 0) return -1;
    if (!t->res.fits || t->res.step_time_s >= e->res.step_time_s * (1 - 1e-9)) return 0;
    *e = *t;
    return 1;
}

int mk_planner_refine(const mk_cluster_t *c, mk_planner_entry_t *e, int max_moves)
{
    if (e->plan.vpp != 1 || e->plan.pp < 2) return 0;
    mk_graph_t *g = mk_plan_graph(&e->plan);
    mk_sim_t *sim = mk_sim_new(c);
    mk_plan_resolve_opts_t ro = {.cluster = c, .graph = g, .resolve_auto = mk_sim_auto};
    int kept = 0, rc = (g && sim) ? 0 : -1;
    while (rc == 0 && kept < max_moves) {
        const mk_sim_result_t *r = &e->res;
        int s = 0;
        for (int i = 1; i < r->pp; i++)
            if (1 - r->bubble_fraction[i] > 1 - r->bubble_fraction[s]) s = i;
        int improved = 0;
        for (int dir = -1; dir <= 1 && !improved && rc == 0; dir += 2) {
            mk_planner_entry_t t = *e;
            if (move_layer(&t.plan, s, dir) < 0) continue;
            mk_strlcpy(t.plan.partition, "refine", sizeof t.plan.partition);
            int k = try_move(sim, &ro, e, &t);
            if (k < 0) rc = -1;
            else improved = k;
        }
        if (!improved) break;
        kept++;
    }
    mk_sim_free(sim);
    mk_graph_free(g);
    return rc < 0 ? -1 : kept;
}
