/* Why one plan beats another (mk_planner_why, mk_planner_explain) and the
 * layer-moving refinement of the best plan (mk_planner_refine). */
#include "planner/planner_internal.h"

#include <stdio.h>
#include <math.h>
#include <string.h>

static double mean_bubble(const mk_sim_result_t *r)
{
    double s = 0;
    for (int i = 0; i < r->pp; i++) s += r->bubble_fraction[i];
    return r->pp ? s / r->pp : 0;
}


/* x and y (x != y) in unit u with the fewest significant digits (3 at
 * least) that print them apart, "X vs Y" into buf: a tie decided by a
 * lower peak never reads "74.1 vs 74.1 GiB". */
static void apart(double x, double y, double u, const char *un, char *buf, size_t n)
{
    char a[25], b[25];
    for (int d = 3; d <= 17; d++) {
        snprintf(a, sizeof a, "%.*g", d, x / u), snprintf(b, sizeof b, "%.*g", d, y / u);
        if (strcmp(a, b)) break;
    }
    snprintf(buf, n, "%s vs %s %s", a, b, un);
}

/* Equal steps: which key of the tie order (mk_planner_order_ties) put a
 * before b, in words, into buf; "" when the steps differ. */
static void tie_reason(const mk_planner_entry_t *a, const mk_planner_entry_t *b, char *buf, size_t n)
{
    double ma = mk_pl_entry_peak(a), mb = mk_pl_entry_peak(b), top = ma > mb ? ma : mb;
    double u = top >= 0x1p30 ? 0x1p30 : top >= 0x1p20 ? 0x1p20 : 0x1p10; /* the larger's unit */
    const char *un = u == 0x1p30 ? "GiB" : u == 0x1p20 ? "MiB" : "KiB";
    int ca = a->plan.tp * a->plan.cp, cb = b->plan.tp * b->plan.cp;
    if (a->res.step_time_s != b->res.step_time_s) buf[0] = 0;
    else if (ma != mb) {
        char v[64];
        apart(ma, mb, u, un, v, sizeof v);
        snprintf(buf, n, "lower peak memory (%s)", v);
    }
    else if (ca != cb) snprintf(buf, n, "fewer ranks in tp x cp (%d vs %d)", ca, cb);
    else if (a->plan.pp != b->plan.pp) snprintf(buf, n, "fewer pipeline stages (%d vs %d)", a->plan.pp, b->plan.pp);
    else snprintf(buf, n, "generated first (the same peak, tp x cp and stages)");
}

void mk_planner_pct(double pct, char *buf, size_t n)
{
    if (pct > 0 && pct < 0.001) snprintf(buf, n, "under 0.001%%"); /* rounding's noise, or as good as */
    else snprintf(buf, n, fabs(pct) >= 0.05 || pct == 0 ? "%.1f%%" : "%.2g%%", pct);
}

/* The knobs p and q differ in, "layout dp16 pp4 tp2 vs ..., cp 2 vs 4",
 * into diff (n bytes; "" when none); returns how many differ besides the
 * recompute policy. */
static int knob_diff(const mk_plan_t *p, const mk_plan_t *q, char *diff, size_t n)
{
    char ra[32], rb[32];
    size_t d = 0;
    int others = 0;
    diff[0] = 0;
    mk_recompute_format(&p->recompute, ra, sizeof ra);
    mk_recompute_format(&q->recompute, rb, sizeof rb);
#define DIFF(cond, ...)                                                                   \
    if (cond) {                                                                           \
        others++;                                                                         \
        if (d < n - 64) {                                                                 \
            if (d) d += snprintf(diff + d, n - d, ", ");                                  \
            d += snprintf(diff + d, n - d, __VA_ARGS__);                                  \
        }                                                                                 \
    }
    DIFF(p->dp != q->dp || p->pp != q->pp || p->tp != q->tp, "layout dp%d pp%d tp%d vs dp%d pp%d tp%d", p->dp,
         p->pp, p->tp, q->dp, q->pp, q->tp);
    DIFF(p->cp != q->cp, "cp %d vs %d", p->cp, q->cp);
    DIFF(p->ep != q->ep, "ep %d vs %d", p->ep, q->ep);
    DIFF(p->mbs != q->mbs, "micro-batch %d vs %d", p->mbs, q->mbs);
    DIFF(p->schedule != q->schedule || p->vpp != q->vpp, "schedule %s vs %s", mk_sched_kind_name(p->schedule),
         mk_sched_kind_name(q->schedule));
    others -= strcmp(ra, rb) != 0; /* counted apart */
    DIFF(strcmp(ra, rb), "recompute %s vs %s", ra, rb);
    DIFF(p->seqpar != q->seqpar, "sequence parallel %s", p->seqpar ? "on vs off" : "off vs on");
    DIFF(p->tp_overlap != q->tp_overlap, "TP overlap %d vs %d", p->tp_overlap, q->tp_overlap);
    DIFF(p->zero != q->zero, "ZeRO-%d vs ZeRO-%d", p->zero, q->zero);
    DIFF(p->zero_shard != q->zero_shard, "ZeRO group %d vs %d", mk_plan_zero_group(p), mk_plan_zero_group(q));
    DIFF(strcmp(p->partition, q->partition), "partition %s vs %s", p->partition, q->partition);
    DIFF(p->first_stage_layers != q->first_stage_layers || p->last_stage_layers != q->last_stage_layers,
         "first/last stage blocks %d/%d vs %d/%d (0: even)", p->first_stage_layers, p->last_stage_layers,
         q->first_stage_layers, q->last_stage_layers);
    DIFF(p->moe_deepep != q->moe_deepep || p->moe_a2a_overlap != q->moe_a2a_overlap, "MoE dispatch %s%s vs %s%s",
         p->moe_deepep ? "DeepEP" : "all-to-all", p->moe_a2a_overlap ? " overlapped" : "",
         q->moe_deepep ? "DeepEP" : "all-to-all", q->moe_a2a_overlap ? " overlapped" : "");
#undef DIFF
    return others;
}

/* b is a in effect: the same step and peak, and no knob apart but the
 * recompute policy's name (stage-aware:0.1 and auto checkpointing the same
 * layers, say). */
static int same_in_effect(const mk_planner_entry_t *a, const mk_planner_entry_t *b)
{
    char diff[256];
    return a->res.step_time_s == b->res.step_time_s && mk_pl_entry_peak(a) == mk_pl_entry_peak(b) &&
           knob_diff(&a->plan, &b->plan, diff, sizeof diff) == 0;
}

int mk_planner_runner_up(const mk_planner_entry_t *best, int n)
{
    if (n < 2) return -1;
    for (int k = 1; k < n; k++)
        if (!same_in_effect(&best[0], &best[k])) return k;
    return 1;
}

void mk_planner_twins(const mk_planner_entry_t *best, int k, char *buf, size_t n)
{
    size_t d = 0;
    buf[0] = 0;
    for (int i = 1; i < k && d < n - 80; i++) {
        char ri[32];
        mk_recompute_format(&best[i].plan.recompute, ri, sizeof ri);
        d += snprintf(buf + d, n - d, "%s#%d", i > 1 ? ", " : "", i + 1);
        if (i == k - 1) d += snprintf(buf + d, n - d, " %s #1 in effect (recompute %s: the same step and peak)",
                                      k > 2 ? "are" : "is", ri);
    }
}

/* The comparison behind mk_planner_explain. */
void mk_planner_why(const mk_planner_entry_t *a, const mk_planner_entry_t *b, mk_planner_why_t *w)
{
    const mk_plan_t *p = &a->plan, *q = &b->plan;
    char diff[256];
    knob_diff(p, q, diff, sizeof diff);
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
    mk_planner_pct(w->faster_pct, w->faster, sizeof w->faster);
    tie_reason(a, b, w->tie, sizeof w->tie);
    mk_strlcpy(w->knobs, diff[0] ? diff : "same knobs", sizeof w->knobs);
    w->what = what[k], w->what_long = what_long[k];
    w->a_s = va[k], w->b_s = vb[k];
}


/* Names the knobs that differ, then the step-time component that moved most. */
void mk_planner_explain(const mk_planner_entry_t *best, int n, char *buf, size_t len)
{
    mk_planner_why_t w;
    int k = mk_planner_runner_up(best, n);
    char tw[160];
    if (k < 0) return (void)(buf[0] = 0);
    mk_planner_why(&best[0], &best[k], &w);
    mk_planner_twins(best, k, tw, sizeof tw);
    if (w.tie[0])
        snprintf(buf, len, "#1 and #%d tie at %.4g s per step (%s): #1 by %s%s%s", k + 1, best[0].res.step_time_s,
                 w.knobs, w.tie, tw[0] ? "; " : "", tw);
    else
        snprintf(buf, len, "#1 is %s faster than #%d (%s): less %s, %.4g s vs %.4g s per step%s%s", w.faster, k + 1,
                 w.knobs, w.what, w.a_s, w.b_s, tw[0] ? "; " : "", tw);
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
