/* The planner's search: ranking (the top K), the branch-and-bound loop
 * and the entry point (see planner.h for the space and the bound). */
#include "planner/planner_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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


/* The tie order (issue 35): plans whose simulated steps are equal are
 * listed by a stated secondary rule, since a step cannot choose between
 * them: the lower peak memory (the most any stage holds), then fewer ranks
 * in the per-layer collectives (tp x cp), then fewer pipeline stages, then
 * the candidate generated first.  Which plans make the top K stays the
 * (step, candidate) order's, so that a split search and one process agree. */
double mk_pl_entry_peak(const mk_planner_entry_t *e)
{
    double x = 0;
    for (int s = 0; s < e->res.pp; s++) x = fmax(x, e->res.peak_memory_bytes[s]);
    return x;
}

static int tie_cmp(const void *pa, const void *pb)
{
    const mk_planner_entry_t *a = pa, *b = pb;
    if (a->res.step_time_s != b->res.step_time_s) return a->res.step_time_s < b->res.step_time_s ? -1 : 1;
    double ma = mk_pl_entry_peak(a), mb = mk_pl_entry_peak(b);
    if (ma != mb) return ma < mb ? -1 : 1;
    int ca = a->plan.tp * a->plan.cp, cb = b->plan.tp * b->plan.cp;
    if (ca != cb) return ca < cb ? -1 : 1;
    if (a->plan.pp != b->plan.pp) return a->plan.pp < b->plan.pp ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

static int canon_cmp(const void *pa, const void *pb)
{
    const mk_planner_entry_t *a = pa, *b = pb;
    return entry_better(a, b) ? -1 : entry_better(b, a) ? 1 : 0;
}

void mk_planner_order_ties(mk_planner_result_t *r)
{
    if (r->n > 1) qsort(r->best, (size_t)r->n, sizeof *r->best, tie_cmp);
}

void mk_planner_merge(mk_planner_result_t *r, const mk_planner_entry_t *e, int n, int top)
{
    if (r->n > 1) qsort(r->best, (size_t)r->n, sizeof *r->best, canon_cmp); /* membership: (step, candidate) */
    for (int i = 0; i < n; i++) top_insert(r, &e[i], top);
    mk_planner_order_ties(r);
}


/* Progress to o->progress: phase 0 generating, 1 settling and simulating,
 * 2 done.  While simulating: at most the candidates of the queue's
 * entries whose bound is below the K-th best so far are still simulated
 * (the K-th best only drops, a group settles to at most its candidates);
 * counted at most every 0.05 s. */
void mk_pl_report(mk_search_t *S, int phase)
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


static int simulate(mk_search_t *S, mk_sim_t *sim, const mk_plan_t *p, long index, mk_planner_entry_t *out)
{
    mk_plan_resolve_opts_t ro = {.cluster = S->cl, .graph = mk_pl_cache_of(S, p)->g, .resolve_auto = mk_sim_auto};
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


/* The queue's least entry: a group settled (its candidates that fit
 * queued at their true bounds, no less than the group's), or a candidate
 * simulated (into the top K if it fits).  1 when it simulated, 0, -1. */
static int queue_step(mk_search_t *S, mk_sim_t *sim, int report)
{
    int top = S->o->top > 0 ? S->o->top : 5;
    mk_planner_entry_t e;
    mk_hent_t h = mk_pl_heap_pop(S);
    if (h.grp) {
        const mk_cgroup_t *G = &S->grp[h.id];
        int k = G->rk == MK_RECOMPUTE_AUTO && !G->floored && !G->done ? mk_pl_floor_group(S, h.id) : 0;
        return k < 0 || (k == 0 && mk_pl_settle_group(S, h.id) < 0) ? -1 : 0;
    }
    mk_plan_t p;
    mk_pl_cand_plan(S, &S->c[h.id], &p);
    mk_cand_t *c = &S->c[h.id];
    if (!c->refined) mk_pl_refine(S, h.id, &p); /* a simulation costs more than its streams' walk */
    if (S->o->exhaustive) h.lb = c->lb; /* simulated anyway: the walk's bound checked */
    else if (c->lb > h.lb) return mk_pl_heap_push(S, c->lb, h.index, h.id, 0) < 0 ? -1 : 0;
    if (report) mk_pl_report(S, 1);
    int rc = simulate(S, sim, &p, h.index, &e);
    if (rc < 0) return -1;
    if (e.res.step_time_s < h.lb * (1 - 1e-9)) S->r->bound_violations++;
    if (rc > 0) top_insert(S->r, &e, top);
    return 1;
}

double mk_pl_cut(const mk_search_t *S)
{
    return S->o->exhaustive ? INFINITY : kth_best(S);
}

/* Generating is cheaper with a K-th best to compare with: whatever
 * bound is no less is never settled (the search stops at the first such
 * bound), so it need not be kept.  The entries taken here are the ones
 * the search would take first among those made so far; those the search
 * would not have taken at all cost a simulation each. */
int mk_pl_probe(mk_search_t *S)
{
    if (!S->sim || S->o->exhaustive) return 0;
    if (S->all && share_round(S, 0) < 0) return -1; /* the other ranks' K best so far, when they are in */
    int top = S->o->top > 0 ? S->o->top : 5, want = S->r->n < top ? top - S->r->n : 1;
    while (want > 0 && S->nheap > 0 && S->heap[0].lb < kth_best(S)) {
        int rc = queue_step(S, S->sim, 0);
        if (rc < 0) return -1;
        want -= rc;
    }
    return 0;
}

/* Branch and bound over this rank's share of the candidates, A*-like:
 * the least (bound, index) entry of the queue first.  Every candidate thus
 * comes out in the order of the eager search's sorted list, and the search
 * stops where that one did: at the first bound no less than the K-th best
 * step. */
static int bound_and_simulate(mk_search_t *S, mk_sim_t *sim)
{
    const mk_planner_opts_t *o = S->o;
    while (S->nheap > 0) {
        if (S->all && share_round(S, 0) < 0) return -1;
        if (!o->exhaustive && S->heap[0].lb >= kth_best(S)) break;
        if (queue_step(S, sim, 1) < 0) return -1;
    }
    if (share_finish(S) < 0) return -1;
    /* the put-by groups only feed the no-fit report: not when any rank found a plan */
    if (S->r->n == 0 && !(S->all && S->all[0] < INFINITY)) mk_pl_settle_deferred(S);
    /* ruled out by the bound: the candidates never settled, those that fit and were not simulated */
    S->r->pruned_bound = S->r->candidates - S->r->settled + S->n - S->r->simulated;
    mk_pl_report(S, 2);
    return 0;
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
        if (S->gc[i].own) mk_graph_free(S->gc[i].g);
        for (int sp = 0; sp < 2; sp++) free(S->gc[i].f[sp]), free(S->gc[i].b[sp]);
        if (S->gc[i].bd)
            for (int j = 0; j < S->gc[i].bd->n; j++) mk_sim_bound_free(S->gc[i].bd->v[j]);
        if (S->gc[i].bd) free(S->gc[i].bd->v);
        free(S->gc[i].bd);
        for (int j = 0; j < S->gc[i].npart; j++) free(S->gc[i].part[j].bounds);
        free(S->gc[i].part);
    }
    free(S->gc);
    for (long i = 0; i < S->nfam; i++) mk_sim_fixed_free(S->fam[i].fx);
    free(S->c), free(S->ints), free(S->fam), free(S->grp), free(S->dbl), free(S->heap), free(S->deferred);
    mk_pl_tails_free(S);
    free(S->tbuf), free(S->tscr);
    mk_pl_progs_free(S->progs);
    mk_sched_pool_free(&S->pool);
    mk_sim_peak_memo_free(S->pmemo);
}


/* One search; *any: some rank found a plan that fits (the same answer on
 * every rank: the shared K best when the search is split). */
static int search_once(const mk_model_config_t *m, const mk_cluster_t *c, const mk_planner_opts_t *o,
                       mk_planner_result_t *r, int *any)
{
    double t0 = mk_time_now();
    memset(r, 0, sizeof *r);
    int top = o->top > 0 ? o->top : 5;
    mk_search_t S = {.model = m, .cl = c, .o = o, .r = r};
    mk_sim_opts_init(&S.so);
    mk_plan_init(&S.tmpl);
    S.tmpl.model = *m;
    mk_plan_t asked = S.tmpl;
    asked.attention = o->attention;
    S.attention = mk_plan_attention(&asked, c); /* auto settled once, for every candidate */
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
    S.t0 = t0, S.sim = sim;
    S.pmemo = mk_sim_peak_memo_new(); /* NULL: the walks are made each time */
    int rc = (!r->best || !sim) ? mk_error_set("out of memory") : 0;
    if (rc == 0 && o->progress) { /* a first pass counts the pairs: the bar's length while generating */
        S.counting = 1;
        rc = mk_pl_enumerate(&S);
        S.counting = 0, S.combo = 0;
        mk_pl_report(&S, 0);
    }
    if (rc == 0) rc = mk_pl_enumerate(&S);
    r->enumerate_time_s = mk_time_now() - t0;
    if (rc == 0) rc = bound_and_simulate(&S, sim);
    if (rc < 0 && S.all) { /* the others wait for this rank's last exchange */
        char err[512];
        mk_strlcpy(err, mk_error_last(), sizeof err);
        share_finish(&S);
        mk_error_set("%s", err);
    }
    *any = r->n > 0 || (S.all && S.all[0] < INFINITY);
    mk_sim_free(sim);
    search_free(&S);
    r->search_time_s = mk_time_now() - t0;
    return rc;
}

/* When nothing fits and the cluster gives its host figures, the search
 * runs again with every candidate's optimizer offloaded to the host (what
 * a user reaches for then: Megatron-Core's --optimizer-cpu-offload), and
 * its answer replaces the first's (r->offloaded); else the first's stands,
 * with its closest plan. */
int mk_planner_search(const mk_model_config_t *m, const mk_cluster_t *c, const mk_planner_opts_t *o,
                      mk_planner_result_t *r)
{
    int any = 0;
    if (search_once(m, c, o, r, &any) < 0) return -1;
    mk_planner_order_ties(r);
    if (any || o->optimizer_offload || !(c->host.link_Bps > 0) || c->ideal) return 0;
    mk_planner_opts_t off = *o;
    off.optimizer_offload = 1;
    mk_planner_result_t r2;
    int any2 = 0;
    if (search_once(m, c, &off, &r2, &any2) < 0) return -1;
    if (!any2) {
        mk_planner_result_free(&r2);
        return 0;
    }
    mk_planner_order_ties(&r2);
    r2.search_time_s += r->search_time_s, r2.offloaded = 1;
    mk_planner_result_free(r);
    *r = r2;
    return 0;
}
