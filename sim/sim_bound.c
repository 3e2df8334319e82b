/* What a stage's DP stream and optimizer step add to any schedule's step
 * (mk_sim_stage_tail, merak/sim.h): the planner's lower bound takes them
 * from the rules the run uses (sim_step.c, zero.c), so it never exceeds a
 * run's step. */
#include "sim/sim_internal.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Seconds stage S's DP stream carries, FIFO from time 0, before its last
 * REDUCE_GRADS returns: every backward's buckets (ZeRO-2: each micro-batch's
 * reduce-scatter, the last one's included; ZeRO-0/1: the stage's gradient
 * once), or ZeRO-3's per-layer gathers and reductions (zero.c). */
static double dp_floor(const mk_sim_state_t *R, int s, mk_zfloor_memo_t *M)
{
    const mk_plan_t *p = R->p;
    const mk_sim_stage_t *S = &R->st[s];
    int z = mk_plan_zero(p);
    double sum = 0, red, rep;
    if (R->nb <= 0 || R->o->unit_costs) return 0;
    for (int c = 0; c < p->vpp; c++) {
        int k = mk_plan_vstage(p, s, c);
        /* (reshard never gathers and reduces once a step: no floor taken) */
        if (z == 3 && p->reshard == MK_RESHARD_ALWAYS) sum += p->m * mk_zero_chunk_dp_floor(R, k, M);
        if (z != 2) continue;
        mk_sim_bucket_cost(R, S, mk_zero_chunk_gbytes(R, k) / R->nb, &red, &rep);
        sum += (double)p->m * R->nb * (red + rep);
    }
    if (z < 2) {
        mk_sim_bucket_cost(R, S, S->ss.grad_comm_bytes / R->nb, &red, &rep);
        sum += R->nb * (red + rep);
    }
    return sum;
}

int mk_sim_stage_tail(const mk_cluster_t *c, const mk_plan_t *p, const mk_graph_t *g, const mk_sim_opts_t *o,
                      double *after, double *dp)
{
    mk_sim_opts_t dflt;
    if (!o) mk_sim_opts_init(&dflt), o = &dflt;
    mk_sim_state_t R;
    memset(&R, 0, sizeof R);
    R.c = c, R.p = p, R.g = g, R.o = o, R.V = p->n_vstages;
    if (mk_sim_setup_statics(&R) < 0) return -1;
    mk_sim_setup_groups(&R);
    mk_zfloor_memo_t M;
    memset(&M, 0, sizeof M);
    for (int s = 0; s < p->pp; s++) {
        double ag, opt = mk_sim_opt_cost(&R, &R.st[s], &ag);
        /* overlapped, the gather is the DP stream's first work (mk_sim_param_gather_start) */
        after[s] = opt + (p->overlap_param_gather ? 0 : ag);
        dp[s] = dp_floor(&R, s, &M) + (p->overlap_param_gather ? ag : 0);
    }
    free(R.st);
    return 0;
}

/* ---- the step's lower bound (mk_sim_bound_step; DESIGN-NOTES.md) ----
 * A compute op's duration in a run is mk_chunk_cost_time's closed form
 * over the chunk's layer pieces (the TP sub-pipeline, the CP ring's and
 * the EP all-to-alls' exposed parts inside it; ZeRO-3 only lengthens it),
 * whatever the other streams do; the bound runs the same pieces through
 * the same mk_tp_run per chunk, so its F, B, B_IN, B_W and recompute are
 * the run's.  Layers are kept in the orders the chunk costs take them:
 * backward pieces reversed (chunk [l0, l1) backward is rev[L-l1, L-l0)),
 * the checkpointable layers' forward pieces packed (the chunk's are
 * ckf[ckpos[l0], ckpos[l1])); the struct and its memo: sim_internal.h. */
void mk_sim_bound_free(mk_sim_bound_t *b)
{
    if (!b) return;
    free(b->fwd), free(b->bwd), free(b->bin), free(b->ckf), free(b->ckpos), free(b->sel), free(b->bw);
    if (b->memo && --b->memo->refs == 0) free(b->memo->e), free(b->memo);
    free(b);
}

/* A memo table of its own, or share's. */
static mk_bound_memo_tab_t *memo_join(const mk_sim_bound_t *share)
{
    mk_bound_memo_tab_t *m = share ? share->memo : calloc(1, sizeof *m);
    if (!share && m && !(m->e = calloc(MK_BOUND_MEMO, sizeof *m->e))) return free(m), NULL;
    if (m) m->refs++;
    return m;
}

mk_sim_bound_t *mk_sim_bound_new(const mk_cluster_t *c, const mk_plan_t *p, const mk_graph_t *g,
                                 const mk_sim_opts_t *o)
{
    return mk_sim_bound_new_sharing(c, p, g, o, NULL);
}

mk_sim_bound_t *mk_sim_bound_new_sharing(const mk_cluster_t *c, const mk_plan_t *p, const mk_graph_t *g,
                                         const mk_sim_opts_t *o, const mk_sim_bound_t *share)
{
    mk_sim_bound_t *b = calloc(1, sizeof *b);
    size_t L = g->n_layers;
    if (!b) return mk_error_set("out of memory"), NULL;
    if (!(b->memo = memo_join(share))) return free(b), mk_error_set("out of memory"), NULL;
    b->id = b->memo->next_id++;
    b->c = c, b->g = g, b->L = (int)L, b->sp = p->seqpar && p->tp > 1;
    if (o) b->o = *o;
    else mk_sim_opts_init(&b->o);
    b->fwd = malloc(L * sizeof *b->fwd), b->bwd = malloc(L * sizeof *b->bwd), b->bin = malloc(L * sizeof *b->bin);
    b->ckf = malloc(L * sizeof *b->ckf), b->ckpos = malloc((L + 1) * sizeof *b->ckpos);
    b->sel = malloc(L * sizeof *b->sel), b->bw = malloc(L * sizeof *b->bw);
    if (!b->fwd || !b->bwd || !b->bin || !b->ckf || !b->ckpos || !b->sel || !b->bw) {
        mk_sim_bound_free(b);
        return mk_error_set("out of memory"), NULL;
    }
    mk_sim_state_t R; /* what the pieces read of a run (lc NULL: nothing kept) */
    memset(&R, 0, sizeof R);
    R.c = c, R.p = p, R.g = g, R.o = &b->o;
    mk_sim_layer_groups(c, p, &R.tpg, &R.cpg, &R.epg);
    b->tpg = R.tpg, b->cpg = R.cpg, b->epg = R.epg;
    b->ckpos[0] = 0;
    for (size_t l = 0; l < L; l++) {
        int t = g->layers[l].twin; /* its pieces are the twin's, made once */
        if (t >= 0) {
            mk_tpl_rename(&b->fwd[l], &b->fwd[t], g, (int)l);
            mk_tpl_rename(&b->bwd[L - 1 - l], &b->bwd[L - 1 - t], g, (int)l);
            mk_tpl_rename(&b->bin[L - 1 - l], &b->bin[L - 1 - t], g, (int)l);
            b->sel[l] = b->sel[t], b->bw[l] = b->bw[t];
        } else {
            mk_chunk_layer_piece(&R, (int)l, 0, &b->fwd[l]);
            mk_chunk_layer_piece(&R, (int)l, 1, &b->bwd[L - 1 - l]);
            mk_chunk_layer_piece(&R, (int)l, 2, &b->bin[L - 1 - l]);
            b->sel[l] = mk_chunk_ops_fwd(&R, (int)l, 1);
            b->bw[l] = mk_chunk_ops_fwd(&R, (int)l, 0);
        }
        int ck = mk_layer_checkpointable(g, (int)l);
        if (ck) b->ckf[b->ckpos[l]] = b->fwd[l];
        b->ckpos[l + 1] = b->ckpos[l] + ck;
    }
    return b;
}

int mk_sim_bound_find(const mk_sim_bound_t *const *v, int n, const mk_plan_t *p)
{
    mk_group_t tpg, cpg, epg;
    int sp = p->seqpar && p->tp > 1;
    if (n < 1) return -1;
    mk_sim_layer_groups(v[0]->c, p, &tpg, &cpg, &epg); /* once for all: they share the cluster */
    for (int i = 0; i < n; i++)
        if (v[i]->sp == sp && !memcmp(&tpg, &v[i]->tpg, sizeof tpg) && !memcmp(&cpg, &v[i]->cpg, sizeof cpg) &&
            !memcmp(&epg, &v[i]->epg, sizeof epg))
            return i;
    return -1;
}

/* Key's entry in b's memo (its id mixed into the slot). */
static mk_bound_memo_t *memo_slot(const mk_sim_bound_t *b, uint64_t key)
{
    uint64_t h = (key ^ (uint64_t)b->id << 40 ^ (uint64_t)b->id) * 0x9E3779B97F4A7C15ull;
    return &b->memo->e[h >> (64 - MK_BOUND_MEMO_BITS)];
}

/* mk_tp_run over n pieces of array `which` (0 fwd, 1 bin, 2 bwd, 3 ckf)
 * from `from`, at TP overlap level lvl, through the memo. */
static double run_memo(const mk_sim_bound_t *b, int which, int from, int n, int lvl)
{
    static const size_t off[4] = {offsetof(mk_sim_bound_t, fwd), offsetof(mk_sim_bound_t, bin),
                                  offsetof(mk_sim_bound_t, bwd), offsetof(mk_sim_bound_t, ckf)};
    const mk_tpl_t *v = *(mk_tpl_t *const *)((const char *)b + off[which]) + from;
    uint64_t key = 1 + ((uint64_t)which | (uint64_t)(lvl & 0x3f) << 4 | (uint64_t)(uint32_t)from << 10 |
                        (uint64_t)(uint32_t)n << 37);
    mk_bound_memo_t *e = memo_slot(b, key);
    if (e->key != key || e->id != b->id) e->key = key, e->id = b->id, e->v = mk_tp_run(v, n, lvl, NULL, NULL, NULL, NULL);
    return e->v;
}

/* The most all-to-all time n pieces from v can expose (whole or in halves). */
static double a2a_most(const mk_tpl_t *v, int n)
{
    double t = 0;
    for (int i = 0; i < n; i++) t += v[i].n_a2a * fmax(v[i].a2a_full, 2 * v[i].a2a_half);
    return t;
}

/* dualpipev's F&B pairs, and Megatron-Core's merged 1F1B steps
 * (--overlap-moe-expert-parallel-comm), may hide every all-to-all of an F,
 * a B_IN (a B: the same all-to-alls) and its recompute (sim_step.c
 * pair_hidden): the bound takes none of them. */
static void drop_a2a(const mk_sim_bound_t *b, int l0, int l1, int ck, mk_chunk_ops_t *o)
{
    double back = a2a_most(b->bin + (b->L - l1), l1 - l0);
    o->f = fmax(0, o->f - a2a_most(b->fwd + l0, l1 - l0));
    o->bi = fmax(0, o->bi - back);
    o->b = fmax(0, o->b - back);
    if (ck > 0) o->rec = fmax(0, o->rec - a2a_most(b->ckf + b->ckpos[l0], ck));
}

/* The sum of sel (which 0) or bw (1) over layers [l0, l1), in layer
 * order, through the memo (the very sum a new loop would give). */
static double sum_memo(const mk_sim_bound_t *b, int which, int l0, int l1)
{
    uint64_t key = 1 + ((uint64_t)(4 + which) | (uint64_t)(uint32_t)l0 << 10 | (uint64_t)(uint32_t)(l1 - l0) << 37);
    mk_bound_memo_t *e = memo_slot(b, key);
    if (e->key != key || e->id != b->id) {
        const double *v = which ? b->bw : b->sel;
        double s = 0;
        for (int l = l0; l < l1; l++) s += v[l];
        e->key = key, e->id = b->id, e->v = s;
    }
    return e->v;
}

void mk_sim_bound_chunk_ops(const mk_sim_bound_t *b, const mk_plan_t *p, int k, int ck, mk_chunk_ops_t *o)
{
    int l0 = p->bounds[k], l1 = p->bounds[k + 1], n = l1 - l0, lvl = p->tp_overlap;
    int zb = mk_sched_traits(p->schedule)->split_backward, nck = b->ckpos[l1] - b->ckpos[l0];
    memset(o, 0, sizeof *o);
    o->f = run_memo(b, 0, l0, n, lvl);
    /* zb-h1 runs B_IN and B_W, the others B (sched_zbh1.c) */
    if (zb) o->bi = run_memo(b, 1, b->L - l1, n, lvl);
    else o->b = run_memo(b, 2, b->L - l1, n, lvl);
    if (p->recompute.kind == MK_RECOMPUTE_SELECTIVE) o->sel = sum_memo(b, 0, l0, l1);
    if (zb) o->bw = sum_memo(b, 1, l0, l1);
    /* F checkpoints ck (capped at the chunk's checkpointable layers, as the
       walker caps it), F_PRE all of them: the replay (R, or inside B or
       B_IN) takes rec[ck] at least (mk_tp_run's prefix ends grow) */
    if (ck > nck) ck = nck;
    if (ck > 0) o->rec = run_memo(b, 3, b->ckpos[l0], ck, lvl);
    if ((p->schedule == MK_SCHED_DUALPIPEV || p->moe_a2a_overlap) && p->ep > 1) drop_a2a(b, l0, l1, ck, o);
}

/* Stage s runs m micro-batches of every chunk's ops (busy) one after
 * another, none before micro-batch 0 has gone forward through the stages
 * before it, each a chunk-0 forward and a send (fill).  Its last op is a
 * chunk-0 backward, whose gradient then goes back through the stages
 * before it, each a send and a backward (drain), and stage 0 ends no
 * sooner than after[0] after it.  zb-h1's stage s runs min(s+1, m) B_Ws
 * after its last B_IN, the one the gradient leaves from, and stage 0 its
 * last B_W after the drain's B_IN (sched_zbh1.c); the other split
 * schedules at most mk_sched_tail_bw of them, of either chunk.  Each stage also ends no
 * sooner than after[s] after its ops, nor before its DP stream's floor
 * and after[s] (mk_sim_stage_tail). */
void mk_sim_bound_sends(const mk_sim_bound_t *b, const mk_plan_t *p, double *sends)
{
    int inter, vs = mk_sched_traits(p->schedule)->vshape;
    for (int k = 0; k + 1 < p->n_vstages; k++) {
        int s = mk_sched_vstage_stage(vs, p->pp, k), t = mk_sched_vstage_stage(vs, p->pp, k + 1);
        /* two virtual stages on one stage hand over without a transfer (the V's turn) */
        sends[2 * k] = s == t ? 0 : mk_sim_send_cost(b->c, p, b->g, &b->o, s, t, k + 1, 1, &inter);
        sends[2 * k + 1] = s == t ? 0 : mk_sim_send_cost(b->c, p, b->g, &b->o, t, s, k, 0, &inter);
    }
}

/* A chunk's ops of one micro-batch, all of them (its busy time), and the
 * backward op a gradient waits for (B or B_IN with the selective cores,
 * and the replay it holds unless the schedule replays early: pre). */
static double chunk_total(const mk_chunk_ops_t *o) { return o->f + o->b + o->bi + o->bw + o->sel + o->rec; }
static double chunk_bwd(const mk_chunk_ops_t *o, int pre) { return o->b + o->bi + o->sel + (pre ? 0 : o->rec); }

/* One micro-batch's own path bounds every schedule, whatever m (what
 * fill, busy and drain miss where m is small beside the virtual stages):
 * its forward runs through all V virtual stages in order, each handing
 * its activation to the next (a transfer between stages), then its
 * backward back through them, each a B or B_IN with the replay it holds
 * (not for the schedules that replay early) and a gradient transfer; its
 * B_W at virtual stage 0 and stage 0's tail come after.  And no
 * backward work of virtual stage k, of any micro-batch, starts before
 * that path's first micro-batch can reach it (tb[k]): a stage's m
 * micro-batches of backward work (B or B_IN, B_W, selective and held
 * replays) all come after the least tb of its chunks.  ops: [V] by
 * virtual stage; v: the terms (mk_sim_bound_terms), raised where these
 * are higher. */
static void path_terms(const mk_plan_t *p, const mk_chunk_ops_t *ops, const double *sends, int pre, double *v)
{
    int V = p->n_vstages, vs = mk_sched_traits(p->schedule)->vshape;
    double t = 0, tb[MK_PLAN_MAX_VSTAGES], least[MK_PLAN_MAX_VSTAGES], work[MK_PLAN_MAX_VSTAGES];
    for (int k = 0; k < V; k++) t += ops[k].f + (k + 1 < V ? sends[2 * k] : 0);
    for (int k = V - 1; k >= 0; k--) {
        const mk_chunk_ops_t *o = &ops[k];
        tb[k] = t;
        t += chunk_bwd(o, pre) + (k > 0 ? sends[2 * k - 1] : 0);
    }
    /* stage 0's chain term: v[1] + after[0] + v[2] (mk_sim_bound_finish) */
    if (t + ops[0].bw - v[2] > v[1]) v[1] = t + ops[0].bw - v[2];
    for (int s = 0; s < p->pp; s++) least[s] = 1e300, work[s] = 0;
    for (int k = 0; k < V; k++) {
        int s = mk_sched_vstage_stage(vs, p->pp, k);
        const mk_chunk_ops_t *o = &ops[k];
        if (tb[k] < least[s]) least[s] = tb[k];
        work[s] += p->m * (o->b + o->bi + o->bw + o->sel + (pre ? 0 : o->rec));
    }
    for (int s = 0; s < p->pp; s++)
        if (least[s] + work[s] > v[3 * s]) v[3 * s] = least[s] + work[s];
}

int mk_sim_bound_terms(const mk_sim_bound_t *b, const mk_plan_t *p, const int *ckpt, const double *sends, double *v)
{
    if (b->o.unit_costs) return 1; /* the scheduler's unit costs: not these */
    /* the schedule's traits (sched_traits.c): a split backward (B_IN, then
       B_Ws as its tail), or R replayed before the gradient arrives (Merak's
       variants: not in the drain); the others replay inside B / B_IN */
    const mk_sched_traits_t *tr = mk_sched_traits(p->schedule);
    int zb = tr->split_backward, pre = tr->replays_early;
    double fill = 0, drain = 0, bw0 = 0, own[2 * MK_PLAN_MAX_VSTAGES];
    mk_chunk_ops_t ops[MK_PLAN_MAX_VSTAGES];
    if (!sends) mk_sim_bound_sends(b, p, own), sends = own;
    for (int s = 0; s < p->pp; s++) {
        double busy = 0, bw_max = 0, bw_min = 0;
        for (int c = 0; c < p->vpp; c++) {
            int k = mk_plan_vstage(p, s, c);
            mk_chunk_ops_t *o = &ops[k];
            mk_sim_bound_chunk_ops(b, p, k, ckpt[s * p->vpp + c], o);
            busy += chunk_total(o);
            if (c == 0) bw_min = o->bw;
            if (o->bw > bw_max) bw_max = o->bw;
            if (o->bw < bw_min) bw_min = o->bw;
        }
        busy *= p->m;
        if (s == 0) bw0 = bw_min; /* its last B_W: of any chunk, so the cheapest */
        v[3 * s] = fill + busy;
        v[3 * s + 1] = fill + busy + drain;
        /* the tail's B_Ws may be any chunk's: the dearest each, so none is under-subtracted */
        v[3 * s + 2] = zb ? bw0 - mk_sched_tail_bw(p->schedule, p->pp, p->m, s) * bw_max : 0;
        if (s + 1 == p->pp) break;
        const mk_chunk_ops_t *c0 = &ops[s]; /* chunk 0 of stage s: virtual stage s in either placement */
        fill += c0->f + sends[2 * s];
        drain += chunk_bwd(c0, pre) + sends[2 * s + 1];
    }
    path_terms(p, ops, sends, pre, v);
    return 0;
}

double mk_sim_bound_busy(const mk_sim_bound_t *b, const mk_plan_t *p, const int *ckpt, int s)
{
    double busy = 0;
    if (b->o.unit_costs || s < 0 || s >= p->pp) return 0;
    for (int c = 0; c < p->vpp; c++) {
        mk_chunk_ops_t o;
        mk_sim_bound_chunk_ops(b, p, mk_plan_vstage(p, s, c), ckpt[s * p->vpp + c], &o);
        busy += chunk_total(&o);
    }
    return busy * p->m * MK_BOUND_SHAVE; /* the same sum as the terms' v[3 s] - fill */
}

double mk_sim_bound_finish(const double *v, int pp, const double *after, const double *dp)
{
    double worst = 0;
    for (int s = 0; s < pp; s++) {
        double chain = v[3 * s + 1] + after[0] + v[3 * s + 2];
        double end = v[3 * s] + after[s], floor = dp[s] + after[s];
        double lb = chain > end ? chain : end;
        if (floor > lb) lb = floor;
        if (lb * MK_BOUND_SHAVE > worst) worst = lb * MK_BOUND_SHAVE;
    }
    return worst;
}

double mk_sim_bound_step(const mk_sim_bound_t *b, const mk_plan_t *p, const int *ckpt, const double *after,
                         const double *dp)
{
    double v[3 * MK_PLAN_MAX_VSTAGES];
    return mk_sim_bound_terms(b, p, ckpt, NULL, v) ? 0 : mk_sim_bound_finish(v, p->pp, after, dp);
}
