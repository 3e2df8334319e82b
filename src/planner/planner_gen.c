/* The planner's candidate generator: every layout of the GPUs, micro-batch
 * size, schedule, partition and recompute / ZeRO variant, as groups. */
#include "merak/cost.h"
#include "planner/planner_internal.h"

#include <stdint.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A candidate's attention core: the search's (settled at cp 1), but a
 * fused one under CP, which runs on nothing else (plan.c check_cp_comm;
 * merak plan --attention-backend unfused searches no CP). */
static mk_attn_backend_t cand_attention(const mk_search_t *S, int cp)
{
    return cp > 1 && S->attention == MK_ATTN_UNFUSED ? MK_ATTN_FLASH : S->attention;
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
    q.model = *S->model, q.dtype = S->o->dtype, q.mbs = mbs, q.tp = tp, q.ep = ep, q.attention = cand_attention(S, cp);
    q.moe_deepep = S->o->moe_deepep;
    q.cross_entropy = S->o->cross_entropy, q.eager = S->o->eager, q.fp8_recipe = S->o->fp8_recipe;
    if (S->o->moe_imbalance > 0) q.moe_imbalance = S->o->moe_imbalance;
    e->mbs = mbs, e->tp = tp, e->cp = cp, e->ep = ep;
    for (int i = 0; i < S->ngc && !e->g; i++) /* another cp's: the graph reads cp only through the attention */
        if (S->gc[i].mbs == mbs && S->gc[i].tp == tp && S->gc[i].ep == ep && cand_attention(S, S->gc[i].cp) == q.attention)
            e->g = S->gc[i].g;
    if (!e->g && !(e->own = 1, e->g = mk_plan_graph(&q))) return NULL;
    int L = e->g->n_layers;
    double tokens = (double)mbs * S->model->seq / cp; /* a CP rank's (the simulator's tokens_of) */
    if (!(e->bd = calloc(1, sizeof *e->bd))) return NULL;
    e->bd->cl = S->cl, e->bd->so = &S->so, e->bd->last = -1, e->bd->share = &S->bshare;
    for (int sp = 0; sp < 2; sp++) {
        e->f[sp] = malloc(L * sizeof(double));
        e->b[sp] = malloc(L * sizeof(double));
        if (!e->f[sp] || !e->b[sp]) return NULL;
        for (int l = 0; l < L; l++) {
            int t = e->g->layers[l].twin; /* the same costs, made once */
            e->f[sp][l] = t >= 0 ? e->f[sp][t] : mk_cost_layer_compute(S->cl, e->g, l, tp, sp, tokens, S->o->dtype, 0);
            e->b[sp][l] = t >= 0 ? e->b[sp][t] : mk_cost_layer_compute(S->cl, e->g, l, tp, sp, tokens, S->o->dtype, 1);
        }
    }
    S->ngc++;
    return e;
}


/* Stage bounds for one partition method, layout and cost setting.  The
 * compute split reads only the layer costs and the virtual stages (not
 * the schedule): made once per (seqpar, recompute costs, stages) and kept
 * in e; the uniform split only the stages and the first and last stages'
 * blocks, once per those.  Out of memory for the keeping: made each time. */
static int bounds_for(mk_search_t *S, mk_plan_t *p, mk_gcache_t *e, const char *method, int rcon)
{
    int uni = !strcmp(method, "uniform");
    if (!uni && strcmp(method, "compute")) return mk_partition(p, e->g, method);
    const mk_graph_t *g = e->g;
    int nv = (int)mk_plan_vstages(p), sp = uni ? p->pp : p->seqpar, rc_key = uni ? 0 : rcon;
    int first = uni ? p->first_stage_layers : 0, last = uni ? p->last_stage_layers : 0;
    for (int i = 0; i < e->npart; i++) {
        const mk_part_memo_t *m = &e->part[i];
        if (m->uni != uni || m->sp != sp || m->rcon != rc_key || m->nv != nv || m->first != first || m->last != last)
            continue;
        if (m->rc < 0) return mk_error_set("%s", m->err);
        p->n_vstages = nv;
        memcpy(p->bounds, m->bounds, (nv + 1) * sizeof *p->bounds);
        mk_strlcpy(p->partition, method, sizeof p->partition);
        return 0;
    }
    double cost[4096];
    if (!uni && g->n_layers > 4096) return mk_partition(p, g, method);
    for (int l = 0; !uni && l < g->n_layers; l++)
        cost[l] = e->f[p->seqpar][l] + e->b[p->seqpar][l] + (rcon && mk_layer_checkpointable(g, l) ? e->f[p->seqpar][l] : 0);
    int rc = uni ? mk_partition(p, g, method) : mk_partition_costs(p, g, method, cost);
    mk_part_memo_t *n = realloc(e->part, (e->npart + 1) * sizeof *n),
                   m = {sp, rc_key, nv, rc, uni, first, last, NULL, ""};
    if (!n) return rc;
    e->part = n;
    if (rc < 0) mk_strlcpy(m.err, mk_error_last(), sizeof m.err);
    else if (!(m.bounds = malloc((nv + 1) * sizeof *m.bounds))) return rc;
    else memcpy(m.bounds, p->bounds, (nv + 1) * sizeof *m.bounds);
    e->part[e->npart++] = m;
    return rc;
}


/* A non-uniform method that lands on the uniform split adds nothing when
 * uniform is searched too. */
static int same_as_uniform(mk_search_t *S, const mk_plan_t *p, mk_gcache_t *e, const char *method)
{
    unsigned pm = S->o->partition_mask ? S->o->partition_mask : 1u | 4u;
    if (!strcmp(method, "uniform") || !(pm & 1u)) return 0;
    mk_plan_t u = *p;
    if (bounds_for(S, &u, e, "uniform", 0) < 0) return 0;
    return !memcmp(u.bounds, p->bounds, (p->n_vstages + 1) * sizeof *p->bounds);
}


/* The ZeRO variants of a layout: (stage, sharding group) pairs, stage 0..3
 * (1..3 need dp > 1), over the whole DP group or (hybrid) a node's DP
 * ranks where that is a smaller group dividing dp.  Returns the count. */
static int zero_variants(const mk_search_t *S, const mk_plan_t *base, int zs[8][2])
{
    const mk_planner_opts_t *o = S->o;
    mk_plan_t q = *base;
    int n = 0, node = mk_plan_zero_shard_node(&q, S->cl->gpus_per_node) == 0 ? q.zero_shard : 0;
    q.zero = 1;
    if (node && !mk_plan_zero_ep_ok(&q)) node = 0; /* a node's group cuts an EP group */
    for (int z = 0; z <= 3; z++) {
        if ((o->zero >= 0 ? z != o->zero : z > o->zero_max) || (z && mk_plan_dp_cp(base) == 1)) continue;
        for (int h = 0; h <= (z && node); h++) {
            if (o->zero_hybrid >= 0 && h != o->zero_hybrid) continue;
            zs[n][0] = z, zs[n][1] = h ? node : 0, n++;
        }
    }
    return n;
}


/* One split's families (fam[zi], made as their first group is kept) and
 * their tails (tl[zi], tail[zi] made), shared by its recompute kinds. */
typedef struct {
    long fam[8];
    int made[8];
    double *tl[8];
    double sends[2 * MK_PLAN_MAX_VSTAGES]; /* its p2p transfers (mk_sim_bound_sends), once made */
    int have_sends;
} split_fams_t;

/* Split bp's family of ZeRO variant zi (p: its plan), made on first use
 * (with the other split's tail where the splits are one); -1 on error. */
static long split_fam(mk_search_t *S, const mk_plan_t *p, int zi, split_fams_t *F, const split_fams_t *other)
{
    if (F->fam[zi] >= 0) return F->fam[zi];
    long o = other ? other->fam[zi] : -1, share = -1;
    if (o >= 0 && !memcmp(S->ints + S->fam[o].off, p->bounds, (p->n_vstages + 1) * sizeof *p->bounds))
        share = S->fam[o].toff;
    return F->fam[zi] = mk_pl_fam_new(S, p, F->tl[zi], share);
}

/* The groups of recompute kind rk on split bp (terms t), one per ZeRO
 * variant zs[0..nz).  A group whose bound is no less than the K-th best
 * so far is not kept (mk_pl_cut: the search would never settle it), but
 * for a fixed policy's ZeRO-1 group whose ZeRO-2 group is kept, which
 * asks whether it fits: then it is kept, not queued (z1at: its index). */
/* --overlap-param-gather on a ZeRO-1 candidate (mk_plan_check's rule: the
 * distributed optimizer with the overlapped gradient reduction). */
static int param_gather_of(const mk_search_t *S, const mk_plan_t *p)
{
    return S->o->overlap_param_gather && p->zero == 1 && p->overlap_grad_reduce;
}

static int kind_groups(mk_search_t *S, const mk_gcache_t *e, const mk_plan_t *bp, int rk, const mk_pl_terms_t *t,
                       int zs[8][2], int nz, split_fams_t *F, const split_fams_t *other)
{
    int nov = t->on[0] + t->on[1], fixed = !mk_pl_rcon_adapts(rk), pp = bp->pp, z1zi[2] = {-1, -1};
    double cut = mk_pl_cut(S), z1lb[2] = {0, 0};
    long z1[2] = {-1, -1}, z1at[2] = {0, 0}; /* this kind's ZeRO-1 groups, over the whole group / hybrid */
    int none = mk_pl_terms_lb(t, pp, NULL) >= cut;
    for (int zi = 0; zi < nz; zi++) {
        int h = zs[zi][1] != 0;
        long at = S->combo * MK_PL_COMBO_SEQ + S->combo_seq;
        mk_pl_group_skip(S, nov); /* counted and indexed, kept or not */
        if (none) continue; /* every variant's bound passes the cut: none kept, no ZeRO-1 asked */
        mk_plan_t p = *bp;
        p.recompute.kind = (mk_recompute_kind_t)rk, p.recompute.ratio = 1.0;
        p.zero = zs[zi][0], p.zero_shard = zs[zi][1];
        p.overlap_param_gather = param_gather_of(S, &p);
        p.moe_a2a_overlap = bp->moe_a2a_overlap && !mk_plan_moe_a2a_overlap_why(&p);
        if (!F->made[zi] && mk_pl_tail(S, &p, e->g, F->tl[zi]) < 0) return -1;
        F->made[zi] = 1;
        double lb = mk_pl_terms_lb(t, pp, F->tl[zi]);
        if (zs[zi][0] == 1 && fixed && lb >= cut) z1zi[h] = zi, z1at[h] = at, z1lb[h] = lb; /* if its ZeRO-2 is kept */
        if (lb >= cut) continue;
        if (zs[zi][0] == 2 && fixed && z1[h] < 0 && z1zi[h] >= 0) { /* the ZeRO-1 group it asks */
            mk_plan_t q = p;
            q.zero = 1;
            q.overlap_param_gather = param_gather_of(S, &q);
            long f1 = split_fam(S, &q, z1zi[h], F, other);
            if (f1 < 0 || (z1[h] = mk_pl_group_new(S, f1, rk, -1, z1lb[h], nov, z1at[h], 0)) < 0) return -1;
        }
        long fi = split_fam(S, &p, zi, F, other);
        long gi = fi < 0 ? -1 : mk_pl_group_new(S, fi, rk, zs[zi][0] == 2 && fixed ? z1[h] : -1, lb, nov, at, 1);
        if (gi < 0) return -1;
        if (zs[zi][0] == 1) z1[h] = gi;
    }
    return 0;
}


/* All recompute / ZeRO choices on one (schedule, vpp, partition, sp), as
 * groups (their overlaps inside): families F[rcon] made here. */
static int variant_candidates(mk_search_t *S, const mk_plan_t *base, mk_gcache_t *e, const char *method)
{
    const mk_planner_opts_t *o = S->o;
    unsigned rm = o->recompute_mask ? o->recompute_mask : 0x1fu; /* none..auto */
    int have[2] = {0, 0}, zs[8][2], nz = zero_variants(S, base, zs), nt = 0;
    split_fams_t F[2];
    mk_pl_terms_t T[MK_RECOMPUTE_AUTO + 1];
    mk_plan_t bp[2];
    if (!mk_pl_ov_searched(S, base, 0) && !mk_pl_ov_searched(S, base, 1)) return 0;
    if (!S->tscr && !(S->tscr = malloc(2 * 8 * 2 * MK_PLAN_MAX_VSTAGES * sizeof *S->tscr)))
        return mk_error_set("out of memory");
    for (int rk = 0; rk <= MK_RECOMPUTE_AUTO; rk++) {
        if (!mk_pl_has(rm, rk) || (rk == MK_RECOMPUTE_STAGE_AWARE && base->pp == 1)) continue;
        int rcon = rk == MK_RECOMPUTE_FULL || rk == MK_RECOMPUTE_STAGE_AWARE || rk == MK_RECOMPUTE_AUTO;
        if (!have[rcon]) {
            bp[rcon] = *base;
            bp[rcon].moe_a2a_overlap = 0; /* checked per recompute kind (kind_groups) */
            if (bounds_for(S, &bp[rcon], e, method, rcon) < 0 || mk_plan_check(&bp[rcon], e->g) < 0) return 0;
            bp[rcon].moe_a2a_overlap = base->moe_a2a_overlap; /* the bounds' terms may hide the all-to-alls */
            if (same_as_uniform(S, &bp[rcon], e, method)) return 0; /* already a uniform candidate */
            have[rcon] = 1;
            F[rcon].have_sends = 0;
            for (int zi = 0; zi < nz; zi++)
                F[rcon].fam[zi] = -1, F[rcon].made[zi] = 0,
                F[rcon].tl[zi] = S->tscr + (size_t)(rcon * 8 + zi) * 2 * MK_PLAN_MAX_VSTAGES;
        }
        const mk_pl_terms_t *t = mk_pl_terms_of(S, e, &bp[rcon], rk, rcon, T, &nt, F[rcon].sends, &F[rcon].have_sends);
        if (!t || kind_groups(S, e, &bp[rcon], rk, t, zs, nz, &F[rcon], have[!rcon] ? &F[!rcon] : NULL) < 0)
            return -1;
    }
    return 0;
}


/* Llama 3's split as Megatron-Core writes it (--decoder-first/last-
 * pipeline-num-layers): the first and the last stage f blocks each, the
 * others o' = o + 1 or o + 2 (o = blocks / pp) evenly, the first o' that
 * divides; 0 where none does, or pp < 3, or the plain uniform split is
 * that already (blocks = pp o' - 2 puts its remainder in the middle). */
static int uneven_ends(int blocks, int pp)
{
    if (pp < 3) return 0;
    for (int o = blocks / pp + 1; o <= blocks / pp + 2; o++) {
        int rest = blocks - (pp - 2) * o;
        if (rest < 2 || rest % 2) continue;
        int f = rest / 2;
        int plain = f == blocks / pp && blocks % pp == pp - 2; /* the uniform split's own shares */
        return f >= 1 && f < o && !plain ? f : 0;
    }
    return 0;
}

/* Whether this rank takes unit u (one (vpp, partition, sp, uneven ends)
 * of schedule k) of the current (layout, micro-batch) combo.  A (vpp,
 * partition)'s four units go together, dealt by a multiplicative hash of
 * their number, so the work near the best plan (a few units' candidates:
 * their settling, walks and simulations) spreads over the ranks.  Two
 * ranks' instructions, the larger, dealing whole (combo, schedule)
 * triples / single units / a (vpp, partition)'s four: Llama-3.1-405B /
 * 16,384 3.80 / 3.59 / 3.57 G, Llama-3-70B / 256 1.53 / 1.41 / 1.41 G,
 * Mixtral-8x22B / 1,024 1.85 / 1.78 / 1.80 G, GPT-175B / 1,024 0.47 /
 * 0.54 / 0.49 G (round-robin triples, earlier: the 405B search's ranks did
 * 0.37 and 0.53 s).  A unit's candidates take the indices [u
 * MK_PL_UNIT_SEQ, (u + 1) MK_PL_UNIT_SEQ) of the schedule's range whatever
 * the split, in generation order. */
static int unit_mine(const mk_search_t *S, int k, int u)
{
    int size = S->o->size > 0 ? S->o->size : 1;
    uint64_t n = ((uint64_t)(S->combo - 1) * MK_SCHED_COUNT + (uint64_t)k) * MK_PL_UNITS + (uint64_t)(u / 4) + 1;
    uint64_t h = n * 0x9E3779B97F4A7C15ull;
    return (int)((h >> 33) % (uint64_t)size) == S->o->rank;
}

/* Unit u of schedule k (base: the schedule's first index) on split method
 * pi of plan p, when this rank has it. */
static int unit_candidates(mk_search_t *S, const mk_plan_t *p, mk_gcache_t *e, const char *method, int k, int u,
                           long base)
{
    if (!unit_mine(S, k, u)) return 0;
    S->combo_seq = base + (long)u * MK_PL_UNIT_SEQ;
    if (variant_candidates(S, p, e, method) < 0) return -1;
    if (S->combo_seq > base + (long)(u + 1) * MK_PL_UNIT_SEQ) /* the ranges' sizes above: a bug */
        return mk_error_set("a unit of candidates took more than %ld indices", MK_PL_UNIT_SEQ);
    return 0;
}

/* The plan of one (schedule k, vpp v, sp) on a layout, or 0 where the schedule cannot run it. */
static int unit_plan(mk_search_t *S, mk_plan_t *p, const mk_gcache_t *e, int dp, int cp, int ep, int pp, int tp,
                     int mbs, int k, int v, int sp)
{
    const mk_planner_opts_t *o = S->o;
    const mk_sched_traits_t *tr = mk_sched_traits((mk_sched_kind_t)k);
    mk_plan_init(p);
    p->model = *S->model;
    mk_strlcpy(p->cluster, S->cl->name, sizeof p->cluster);
    p->dtype = o->dtype, p->gbs = o->gbs, p->attention = cand_attention(S, cp);
    p->cross_entropy = o->cross_entropy, p->eager = o->eager, p->optimizer_offload = o->optimizer_offload;
    p->fp8_recipe = o->fp8_recipe;
    p->grad_reduce_dtype = o->grad_reduce_dtype;
    p->cp_comm = cp > 1 ? (mk_cp_comm_t)o->cp_comm : MK_CP_COMM_P2P;
    p->tp_comm_overlap = o->tp_comm_overlap && sp && tp > 1;
    p->scatter_gather_p2p = o->scatter_gather_p2p;
    p->dp = dp, p->cp = cp, p->ep = ep, p->pp = pp, p->tp = tp, p->vpp = v, p->mbs = mbs, p->seqpar = sp;
    if (o->moe_imbalance > 0) p->moe_imbalance = o->moe_imbalance;
    p->moe_deepep = o->moe_deepep;
    p->schedule = (mk_sched_kind_t)k;
    p->moe_a2a_overlap = o->moe_a2a_overlap; /* kept where Megatron-Core runs it (kind_groups) */
    p->n_vstages = (int)mk_plan_vstages(p);
    p->m = mk_plan_micro_batches(p);
    if (tr->interleaved && ((tr->m_per_pp && p->m % pp) || p->n_vstages > e->g->n_layers)) return 0;
    return p->m >= tr->min_m_per_pp * pp;
}

/* Candidates of one layout (dp, cp, ep, pp, tp) and micro-batch size:
 * per schedule, its units (unit_mine: this rank's share). */
static int layout_candidates(mk_search_t *S, int dp, int cp, int ep, int pp, int tp, int mbs)
{
    const mk_planner_opts_t *o = S->o;
    unsigned sm = o->sched_mask ? o->sched_mask : MK_PLANNER_SCHEDULES;
    unsigned pm = o->partition_mask ? o->partition_mask : 1u | 4u;
    static const char *const parts[] = {"uniform", "parameters", "compute"};
    int size = o->size > 0 ? o->size : 1;
    long seq0 = S->combo_seq; /* this ep's range of the combo's indices */
    int moe = mk_model_is_moe(S->model);
    if ((S->combo - 1) % size == o->rank) S->r->layouts++; /* counted once over the ranks */
    mk_gcache_t *e = NULL; /* made when a schedule runs on the layout */
    for (int k = 0; k < MK_SCHED_COUNT; k++) {
        const mk_sched_traits_t *tr = mk_sched_traits((mk_sched_kind_t)k);
        if (!mk_pl_has(sm, k) || pp < tr->min_pp) continue;
        if (!e && !(e = graph_for(S, mbs, tp, cp, ep))) return -1;
        long base = seq0 + (long)k * MK_PL_SCHED_SEQ;
        int u = 0;
        for (int v = 1; v <= 4; v *= 2) {
            if (tr->interleaved != (v > 1) || (tr->max_vpp && v > tr->max_vpp)) continue;
            for (int pi = 0; pi < 3; pi++) {
                if (!mk_pl_has(pm, pi) || (pp == 1 && pi > 0 && (pm & 1u))) continue; /* one stage: one split */
                for (int sp = 0; sp <= 1; sp++, u += 2) {
                    if ((o->seqpar >= 0 && sp != o->seqpar) || (sp && tp == 1)) continue;
                    if (!sp && tp > 1 && moe) continue; /* Megatron-LM asserts SP for MoE with TP (as run needs) */
                    mk_plan_t p;
                    if (!unit_plan(S, &p, e, dp, cp, ep, pp, tp, mbs, k, v, sp)) continue;
                    if (unit_candidates(S, &p, e, parts[pi], k, u, base) < 0) return -1;
                    /* the uniform split with lighter first and last stages */
                    int f = pi == 0 && v == 1 ? uneven_ends(S->model->num_layers, pp) : 0;
                    if (!f) continue;
                    p.first_stage_layers = p.last_stage_layers = f;
                    if (unit_candidates(S, &p, e, parts[pi], k, u + 1, base) < 0) return -1;
                }
            }
        }
    }
    return 0;
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


/* The micro-batch sizes of one layout: its (layout, micro-batch) combos. */
static int layout_batches(mk_search_t *S, int dp, int cp, int pp, int tp, int *any_batch, char *too_long, size_t n)
{
    const mk_planner_opts_t *o = S->o;
    int max_mbs = o->max_mbs > 0 ? o->max_mbs : 8;
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
        if (++S->combo >= MK_PL_MAX_COMBOS) return mk_error_set("more than %ld (layout, micro-batch) pairs to search", MK_PL_MAX_COMBOS);
        S->combo_seq = 0; /* the ranks' shares: layout_candidates */
        /* expert parallelism: every ep dividing the stage's tp x cp x dp ranks
           (MoE parallel folding) and the experts, 1 first (a dense model has
           only ep 1: its candidates are unchanged) */
        int ranks = tp * cp * dp, E = S->model->num_experts > 0 ? S->model->num_experts : 1;
        for (int ep = 1, epi = 0; ep <= ranks && ep <= E; ep++) {
            if (!divides(ep, ranks) || !divides(ep, E)) continue;
            S->combo_seq = epi++ * MK_SCHED_COUNT * MK_PL_SCHED_SEQ;
            if (S->counting) {
                S->combos++;
                continue;
            }
            if (layout_candidates(S, dp, cp, ep, pp, tp, mbs) < 0) return -1;
            S->combos_done++;
            /* a K-th best to compare with early, and better ones as the
               layouts go on: a few simulations (mk_pl_probe) */
            long d = S->combos_done;
            if (((d & (d - 1)) == 0 || d % 64 == 0) && mk_pl_probe(S) < 0) return -1;
            mk_pl_report(S, 0);
        }
    }
    return 0;
}


/* Every layout of N GPUs and micro-batch size; cp 1's first, so that
 * their candidate indices (ties) are what they were without CP. */
int mk_pl_enumerate(mk_search_t *S)
{
    const mk_planner_opts_t *o = S->o;
    int N = o->gpus, blocks = S->model->num_layers, any_layout = 0, any_batch = 0;
    char too_long[256] = "";
    for (int cp = 1; cp <= N && cp <= MK_MAX_CP && (!o->max_cp || cp <= o->max_cp); cp++) {
        if (!divides(cp, N) || !cp_searched(S->model, cp)) continue;
        for (int tp = 1; tp <= N / cp && tp <= S->cl->gpus_per_node && (!o->max_tp || tp <= o->max_tp); tp++) {
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
