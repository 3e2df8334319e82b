/* The planner's pruning: memory settling of groups and families (what a
 * recompute kind needs to fit) and the lower bound that orders the queue. */
#include "planner/planner_internal.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A lower bound on the simulated step time: mk_sim_bound_step (the
 * simulator's own per-chunk op durations, pipeline fill and drain with
 * their p2p sends, the stages' tails; DESIGN-NOTES.md) from the layer
 * costs of p's layout, made on first use.  Where they cannot be made (out
 * of memory) 0, which bounds every step: the search only simulates more. */
static const mk_sim_bound_t *bound_of(const mk_plan_t *p, const mk_gcache_t *e)
{
    mk_gbounds_t *B = e->bd;
    /* the last one found, where the groups are the same (they read sp, dp and the cluster beside e's key) */
    int sp = p->seqpar && p->tp > 1;
    if (B->last >= 0 && B->last_sp == sp && B->last_dp == p->dp) return B->v[B->last];
    B->last_sp = sp, B->last_dp = p->dp;
    int i = mk_sim_bound_find((const mk_sim_bound_t *const *)B->v, B->n, p);
    if (i >= 0) return B->v[B->last = i];
    if (B->n == B->cap) {
        int cap = B->cap ? 2 * B->cap : 4;
        mk_sim_bound_t **n = realloc(B->v, cap * sizeof *n);
        if (!n) return NULL;
        B->v = n, B->cap = cap;
    }
    if (!(B->v[B->n] = mk_sim_bound_new_sharing(B->cl, p, e->g, B->so, *B->share))) return B->last = -1, NULL;
    if (!*B->share) *B->share = B->v[B->n];
    return B->v[B->last = B->n++];
}

static double lower_bound(const mk_plan_t *p, const mk_gcache_t *e, const int *ck, const mk_tail_t *tail)
{
    const mk_sim_bound_t *b = bound_of(p, e);
    return b ? mk_sim_bound_step(b, p, ck, tail->after, tail->dp) : 0;
}


/* The walk programs of the streams walked so far (mk_sim_bound_prog_t),
 * least recently used dropped first: candidates of one spec come up
 * together (ZeRO variants, TP overlaps, layouts with the same pipeline
 * and micro-batch count): the Llama-3.1-405B search walks 73 specs for
 * 461 candidates, and records 138 programs with this budget (73 with 16
 * MB, 5% faster).  The budget keeps that search under its memory target
 * (issue 35: 100 MB; 91 MB with 8 MB here, where a pp 64, m 128 zb-v
 * program takes 0.9 MB). */
#define MK_PL_PROGS 64
#define MK_PL_PROG_BUDGET (8L << 20)

struct mk_pl_progs {
    struct {
        uint64_t key[2];      /* mk_sched_spec_hash */
        mk_sim_bound_prog_t *q;
        unsigned long used;   /* the tick of its last use (0: empty) */
    } e[MK_PL_PROGS];
    unsigned long tick;
    size_t bytes;
};

void mk_pl_progs_free(mk_pl_progs_t *P)
{
    if (!P) return;
    for (int i = 0; i < MK_PL_PROGS; i++) mk_sim_bound_prog_free(P->e[i].q);
    free(P);
}

static void prog_drop(mk_pl_progs_t *P, int i)
{
    P->bytes -= mk_sim_bound_prog_bytes(P->e[i].q);
    mk_sim_bound_prog_free(P->e[i].q);
    memset(&P->e[i], 0, sizeof P->e[i]);
}

/* A free entry, the least recently used ones dropped until the budget
 * has room for `need` bytes more. */
static int prog_slot(mk_pl_progs_t *P, size_t need)
{
    for (;;) {
        int lru = -1, empty = -1;
        for (int i = 0; i < MK_PL_PROGS; i++) {
            if (!P->e[i].used) empty = i;
            else if (lru < 0 || P->e[i].used < P->e[lru].used) lru = i;
        }
        if (empty >= 0 && (P->bytes + need <= MK_PL_PROG_BUDGET || lru < 0)) return empty;
        prog_drop(P, lru);
    }
}

/* The spec whose streams p's walk program records.  A program keeps the
 * streams' event order and each compute op's checkpoint count and
 * replay flag (sim_bound_walk.c), not the chunks' layer counts, which
 * reach the streams only through those counts: where nothing is
 * checkpointed (no recompute, or selective's attention core, which the
 * engines replay inside B) the layer counts and the recompute kind are
 * dropped, so plans whose partitions differ share one program (not for
 * the schedules whose streams read the counts: traits reads_counts). */
static void prog_spec(const mk_plan_t *p, const mk_graph_t *g, int *layers, mk_sched_spec_t *spec)
{
    mk_plan_sched_spec(p, g, mk_plan_dp_cp(p) > 1, layers, spec);
    mk_recompute_kind_t k = spec->recompute.kind;
    if ((k == MK_RECOMPUTE_NONE || k == MK_RECOMPUTE_SELECTIVE) && !mk_sched_traits(spec->kind)->reads_counts) {
        spec->layers = spec->ckpt = NULL;
        spec->recompute.kind = MK_RECOMPUTE_NONE, spec->recompute.ratio = 0;
    }
}

/* Plan p's walk program: a kept one where the spec is the same, else
 * recorded from newly built streams and kept.  NULL where the streams
 * cannot be built or walked (the bound stays as it is). */
static const mk_sim_bound_prog_t *walk_prog(mk_search_t *S, const mk_plan_t *p, const mk_graph_t *g)
{
    mk_sched_spec_t spec;
    int layers[MK_PLAN_MAX_VSTAGES];
    uint64_t key[2];
    prog_spec(p, g, layers, &spec);
    mk_sched_spec_hash(&spec, key);
    mk_pl_progs_t *P = S->progs ? S->progs : (S->progs = calloc(1, sizeof *S->progs));
    if (!P) return NULL;
    P->tick++;
    for (int i = 0; i < MK_PL_PROGS; i++)
        if (P->e[i].used && P->e[i].key[0] == key[0] && P->e[i].key[1] == key[1])
            return P->e[i].used = P->tick, P->e[i].q;
    mk_sched_t *sch = mk_sched_build_pooled(&spec, &S->pool);
    mk_sim_bound_prog_t *q = sch ? mk_sim_bound_prog_new(sch) : NULL;
    mk_sched_recycle(sch, &S->pool);
    if (!q) return NULL;
    int i = prog_slot(P, mk_sim_bound_prog_bytes(q));
    P->e[i].key[0] = key[0], P->e[i].key[1] = key[1], P->e[i].q = q, P->e[i].used = P->tick;
    P->bytes += mk_sim_bound_prog_bytes(q);
    return q;
}

/* Candidate ci's bound from its streams (mk_sim_bound_walk_prog) into its lb
 * where higher (p: its plan), and its other TP overlap's from the same
 * walk; both refined. */
void mk_pl_refine(mk_search_t *S, long ci, const mk_plan_t *p)
{
    mk_cand_t *c = &S->c[ci], *o = c->sib >= 0 && !S->c[c->sib].refined ? &S->c[c->sib] : NULL;
    const mk_gcache_t *e = mk_pl_cache_of(S, p);
    const mk_sim_bound_t *b = e ? bound_of(p, e) : NULL;
    double tail[2 * MK_PLAN_MAX_VSTAGES], w[2] = {0, 0};
    const mk_sim_bound_prog_t *q = b ? walk_prog(S, p, e->g) : NULL;
    c->refined = 1;
    if (o) o->refined = 1;
    if (!q || mk_pl_tail(S, p, e->g, tail) < 0) return;
    int lv[2] = {p->tp_overlap, -1};
    if (o) memcpy(&lv[1], o->mid + (offsetof(mk_plan_t, tp_overlap) - MK_CAND_FROM), sizeof lv[1]);
    mk_sim_bound_walk_prog(b, p, q, tail, tail + p->pp, lv, w);
    if (w[0] > c->lb) c->lb = w[0];
    if (o && w[1] > o->lb) o->lb = w[1];
}


/* The checkpoint count of every (stage, chunk) the scheduler will use. */
static int resolved_ckpt(const mk_plan_t *p, const mk_graph_t *g, int *out)
{
    int layers[MK_PLAN_MAX_VSTAGES];
    mk_sched_spec_t spec;
    mk_plan_t q = *p;
    int least = mk_sched_traits(q.schedule)->min_m_per_pp; /* dualpipev: m >= 2p */
    q.m = q.pp * (least > 1 ? least : 1); /* counts do not depend on m: the smallest valid spec */
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
    double limit = mk_cluster_usable_bytes(S->cl), worst = -1;
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
static int state_fits(mk_search_t *S, mk_sim_fixed_t *fx, const mk_plan_t *p, const mk_graph_t *g)
{
    mk_mem_breakdown_t m;
    for (int s = 0; s < p->pp; s++) {
        if (mk_sim_stage_state_fixed(fx, p, g, s, &m) < 0) return 0;
        if (m.total > mk_cluster_usable_bytes(S->cl)) {
            note_miss(S, p, s, &m, m.total - mk_cluster_usable_bytes(S->cl));
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
        if (mk_sim_resolve_auto_pooled(S->cl, p, g, &S->so, &S->pool, S->pmemo) < 0) return 0;
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


int mk_pl_has(unsigned mask, int bit) { return (mask >> bit) & 1u; }


/* An auto or stage-aware candidate whose counts come out as those of none
 * (nothing checkpointed) or full is the same plan as that candidate. */
static int duplicates_fixed_policy(mk_search_t *S, const mk_plan_t *p, const mk_graph_t *g, const int *ck)
{
    if (p->recompute.kind != MK_RECOMPUTE_AUTO && p->recompute.kind != MK_RECOMPUTE_STAGE_AWARE) return 0;
    unsigned rm = S->o->recompute_mask ? S->o->recompute_mask : 0x1fu;
    int zero = 1;
    for (int i = 0; i < p->n_vstages; i++) zero &= ck[i] == 0;
    if (zero && mk_pl_has(rm, MK_RECOMPUTE_NONE)) return 1;
    if (!mk_pl_has(rm, MK_RECOMPUTE_FULL)) return 0;
    mk_plan_t f = *p;
    int fck[MK_PLAN_MAX_VSTAGES];
    f.recompute.kind = MK_RECOMPUTE_FULL, f.has_ckpt = 0;
    return resolved_ckpt(&f, g, fck) == 0 && !memcmp(fck, ck, p->n_vstages * sizeof *ck);
}


/* auto and stage-aware recompute less where memory is freed. */
int mk_pl_rcon_adapts(int rk) { return rk == MK_RECOMPUTE_AUTO || rk == MK_RECOMPUTE_STAGE_AWARE; }


const mk_gcache_t *mk_pl_cache_of(mk_search_t *S, const mk_plan_t *p)
{
    for (int i = 0; i < S->ngc; i++)
        if (S->gc[i].mbs == p->mbs && S->gc[i].tp == p->tp && S->gc[i].cp == p->cp && S->gc[i].ep == p->ep)
            return &S->gc[i];
    return NULL;
}


/* The TP overlap settings searched: ov 0 off, 1 on (at the level asked, 2
 * by default).  Not with sequence parallelism: sub-pipelined TP's halves
 * have no SP form in merak run (it refuses the pair) nor in Megatron-LM,
 * so such a plan would be one no engine runs. */
int mk_pl_ov_searched(const mk_search_t *S, const mk_plan_t *p, int ov)
{
    return !((S->o->tp_overlap >= 0 && ov != (S->o->tp_overlap > 0)) || (ov && (p->tp == 1 || p->seqpar)));
}


static int ov_level(const mk_search_t *S, int ov) { return ov ? (S->o->tp_overlap > 0 ? S->o->tp_overlap : 2) : 0; }


/* Family fi's tail into S->tail, for lower_bound. */
void mk_pl_tail_load(mk_search_t *S, long fi, int pp)
{
    const double *t = S->dbl + S->fam[fi].toff;
    memcpy(S->tail.after, t, pp * sizeof *t);
    memcpy(S->tail.dp, t + pp, pp * sizeof *t);
}


/* The least bound over the TP overlaps searched of p with counts ck
 * (S->tail loaded). */
static double group_bound(mk_search_t *S, mk_plan_t *p, const mk_gcache_t *e, const int *ck)
{
    double lb = DBL_MAX;
    for (int ov = 0; ov <= 1; ov++) {
        if (!mk_pl_ov_searched(S, p, ov)) continue;
        p->tp_overlap = ov_level(S, ov);
        double b = lower_bound(p, e, ck, &S->tail);
        if (b < lb) lb = b;
    }
    return lb;
}


/* Where every searched TP overlap's busiest end stage (the first or the
 * last: embedding, head) alone reaches the cut, that busy time, a bound
 * on every candidate of the split and kind (the terms are never less):
 * the groups are pruned without the terms (most are, at scale).  Else 0. */
static double busy_cut(mk_search_t *S, const mk_sim_bound_t *b, mk_plan_t *p, const int *ck)
{
    double cut = mk_pl_cut(S), least = DBL_MAX;
    if (!isfinite(cut)) return 0;
    for (int ov = 0; ov <= 1; ov++) {
        if (!mk_pl_ov_searched(S, p, ov)) continue; /* (reads no tp_overlap) */
        p->tp_overlap = ov_level(S, ov);
        double a = mk_sim_bound_busy(b, p, ck, 0), z = mk_sim_bound_busy(b, p, ck, p->pp - 1);
        if ((a > z ? a : z) < least) least = a > z ? a : z;
    }
    return least >= cut && least < DBL_MAX ? least : 0;
}

/* The terms of split p's bound under recompute kind rk (rcon: the split
 * balanced with recompute costs), per TP overlap searched: one for every
 * ZeRO variant, whose bounds differ only in their tails.  They take the
 * checkpoint counts that are certain (a fixed policy's; none for auto and
 * stage-aware, which may checkpoint nothing: lower_bound only grows with
 * the counts), so kinds with the same counts and chunk ops share one (T,
 * *n: those of the split so far).  NULL on error. */
const mk_pl_terms_t *mk_pl_terms_of(mk_search_t *S, const mk_gcache_t *e, const mk_plan_t *split, int rk, int rcon,
                                    mk_pl_terms_t *T, int *n, double *sends, int *have_sends)
{
    mk_plan_t p = *split;
    p.recompute.kind = (mk_recompute_kind_t)rk, p.recompute.ratio = 1.0;
    int ck[MK_PLAN_MAX_VSTAGES] = {0}, sel = rk == MK_RECOMPUTE_SELECTIVE, nv = p.n_vstages;
    /* none and selective checkpoint no layer (mk_sched_resolve_ckpt): the scheduler is asked for full's */
    int asks = !mk_pl_rcon_adapts(rk) && rk != MK_RECOMPUTE_NONE && rk != MK_RECOMPUTE_SELECTIVE;
    if (asks && resolved_ckpt(&p, e->g, ck) < 0) memset(ck, 0, sizeof ck); /* it will not fit */
    for (int i = 0; i < *n; i++) /* the terms read the split, not how it was balanced: one split, one set */
        if (T[i].sel == sel && !memcmp(T[i].ck, ck, nv * sizeof *ck) &&
            (T[i].rcon == rcon || !memcmp(T[i].bounds, split->bounds, (nv + 1) * sizeof *split->bounds)))
            return &T[i];
    if (!S->tbuf && !(S->tbuf = malloc(sizeof *S->tbuf * 6 * (MK_RECOMPUTE_AUTO + 1) * MK_PLAN_MAX_VSTAGES)))
        return mk_error_set("out of memory"), NULL;
    mk_pl_terms_t *t = &T[(*n)++];
    t->rcon = rcon, t->sel = sel, t->bounds = split->bounds, t->busy = 0;
    memcpy(t->ck, ck, nv * sizeof *ck);
    const mk_sim_bound_t *b = bound_of(&p, e);
    for (int ov = 0; ov <= 1; ov++) t->on[ov] = mk_pl_ov_searched(S, &p, ov);
    if (b && (t->busy = busy_cut(S, b, &p, ck)) > 0) return t;
    if (b && !*have_sends) mk_sim_bound_sends(b, &p, sends), *have_sends = 1;
    for (int ov = 0; ov <= 1; ov++) {
        t->v[ov] = S->tbuf + (6L * (t - T) + 3L * ov) * MK_PLAN_MAX_VSTAGES;
        t->zero[ov] = 1;
        if (!t->on[ov]) continue; /* mk_pl_terms_lb reads only the overlaps searched */
        p.tp_overlap = ov_level(S, ov);
        t->zero[ov] = !b || mk_sim_bound_terms(b, &p, ck, sends, t->v[ov]); /* no bound: 0, which bounds every step */
    }
    return t;
}


/* Group gi's recompute settled (the family's state and fixed parts first,
 * once); 1 when it fits. */
/* Group gi's family's state and fixed memory parts (once); 1 when its
 * state fits, with S->fx set for the group's memory checks. */
static int fam_state(mk_search_t *S, long gi, const mk_plan_t *p, const mk_graph_t *g)
{
    mk_fam_t *F = &S->fam[S->grp[gi].fam];
    /* the same for every recompute kind and count (NULL: computed per count) */
    if (F->state_ok < 0 && !(F->fx = mk_sim_fixed_new(p, g, &S->so))) return 0; /* out of memory: no fit */
    if (F->state_ok < 0) {
        mk_plan_t q = *p; /* the eager search checked the state at the family's first group */
        q.recompute.kind = (mk_recompute_kind_t)S->grp[F->first].rk;
        S->miss_order = S->grp[F->first].index;
        F->state_ok = (signed char)state_fits(S, F->fx, &q, g);
        if (!F->state_ok) mk_sim_fixed_free(F->fx), F->fx = NULL;
    }
    if (F->state_ok > 0 && !F->fx) F->fx = mk_sim_fixed_new(p, g, &S->so); /* freed with the last group before */
    S->fx = F->fx, S->miss_order = S->grp[gi].index;
    return F->state_ok;
}


/* Group gi's recompute settled; 1 when it fits. */
static int group_fits(mk_search_t *S, long gi, mk_plan_t *p, const mk_graph_t *g, int *ck)
{
    int fit = fam_state(S, gi, p, g) && settle_recompute(S, p, g, ck);
    mk_sim_fixed_trim(S->fx), S->fx = NULL;
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
            fits = rc == 0 && m.total <= mk_cluster_usable_bytes(S->cl);
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
int mk_pl_floor_group(mk_search_t *S, long gi)
{
    mk_cgroup_t *G = &S->grp[gi];
    long fi = G->fam;
    mk_plan_t p;
    mk_pl_load_plan(S, S->fam[fi].mid, S->fam[fi].off, 0, &p);
    p.recompute.kind = MK_RECOMPUTE_AUTO, p.recompute.ratio = 1.0;
    const mk_gcache_t *e = mk_pl_cache_of(S, &p);
    int ck[MK_PLAN_MAX_VSTAGES], fit = fam_state(S, gi, &p, e->g) ? auto_floor(S, &p, e->g, ck) : -1;
    mk_sim_fixed_trim(S->fx), S->fx = NULL;
    if (fit < 0) return 0;
    G->floored = 1;
    if (fit) {
        mk_pl_tail_load(S, fi, p.pp);
        return mk_pl_heap_push(S, group_bound(S, &p, e, ck), G->index, gi, 1) < 0 ? -1 : 1;
    }
    G->done = 1, G->fit = 0;
    S->r->settled += G->nov, S->r->pruned_memory += G->nov;
    S->fam[fi].pending--;
    fam_release(S, fi);
    if (mk_pl_grow(&S->deferred, &S->capdeferred, S->ndeferred + 1, sizeof *S->deferred, 256) < 0) return -1;
    S->deferred[S->ndeferred++] = gi;
    return 1;
}


/* Nothing fits: the put-by auto groups settled in full, for the report
 * of the candidate closest to fitting (note_miss, in enumeration order). */
void mk_pl_settle_deferred(mk_search_t *S)
{
    for (long i = 0; i < S->ndeferred; i++) {
        long gi = S->deferred[i], fi = S->grp[gi].fam;
        mk_plan_t p;
        int ck[MK_PLAN_MAX_VSTAGES];
        mk_pl_load_plan(S, S->fam[fi].mid, S->fam[fi].off, 0, &p);
        p.recompute.kind = MK_RECOMPUTE_AUTO, p.recompute.ratio = 1.0;
        group_fits(S, gi, &p, mk_pl_cache_of(S, &p)->g, ck);
        fam_release(S, fi);
    }
}


/* Settle group gi: its memory, then its candidates that fit into the
 * queue at their true bounds.  Returns 1 when it fits, 0 not, -1 error. */
int mk_pl_settle_group(mk_search_t *S, long gi)
{
    mk_cgroup_t *G = &S->grp[gi];
    if (G->done) return G->fit;
    G->done = 1;
    mk_plan_t p;
    long fi = G->fam;
    mk_pl_load_plan(S, S->fam[fi].mid, S->fam[fi].off, 0, &p);
    p.recompute.kind = (mk_recompute_kind_t)G->rk, p.recompute.ratio = 1.0;
    const mk_gcache_t *e = mk_pl_cache_of(S, &p);
    S->r->settled += G->nov;
    /* with a fixed policy ZeRO-2 is never faster than ZeRO-1 (the same
     * reductions, plus one per micro-batch): only worth it where ZeRO-1
     * does not fit */
    int z1 = G->z1 >= 0 ? mk_pl_settle_group(S, G->z1) : 0, ck[MK_PLAN_MAX_VSTAGES], fit = 0;
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
    mk_pl_tail_load(S, fi, p.pp);
    long first = S->n;
    for (int ov = 0; ov <= 1; ov++) {
        if (!mk_pl_ov_searched(S, &p, ov)) continue;
        p.tp_overlap = ov_level(S, ov); /* memory does not depend on TP overlap: settled once for both */
        if (mk_pl_push(S, &p, lower_bound(&p, e, ck, &S->tail), G->index + ov) < 0) return -1;
    }
    if (S->n == first + 2) S->c[first].sib = first + 1, S->c[first + 1].sib = first; /* one walk for both */
    return 1;
}
