/* The simulator's interface to the planner's search (not installed): the
 * closed-form memory's fixed parts, recompute `auto` on pooled streams,
 * the stages' tails and the lower bound of the branch and bound. */
#ifndef MERAK_SIM_SEARCH_H
#define MERAK_SIM_SEARCH_H

#include "merak/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The parts of every stage's closed-form peak (mk_sim_stage_memory with
 * inflight < 0) that no checkpoint count changes (static bytes, in-flight
 * counts, gradient buffers), for many counts of one plan (the planner's
 * recompute search): valid while the plan's layout, schedule, m, bounds
 * and ZeRO settings stay; o must outlive it.  NULL with mk_error_last()
 * on failure. */
typedef struct mk_sim_fixed mk_sim_fixed_t;
mk_sim_fixed_t *mk_sim_fixed_new(const mk_plan_t *p, const mk_graph_t *g, const mk_sim_opts_t *o);
void mk_sim_fixed_free(mk_sim_fixed_t *F);
/* Give back the activation tables F made for many counts (they hold the
 * graph's layers several times over): a search keeping many F's trims
 * each when it is done with it for now. */
void mk_sim_fixed_trim(mk_sim_fixed_t *F);
/* mk_sim_stage_memory(c, p, g, s, ckpt, -1, o, out) from F: the same figures
 * (F keeps what it computes for stage s).  0 or -1. */
int mk_sim_stage_memory_fixed(mk_sim_fixed_t *F, const mk_plan_t *p, const mk_graph_t *g, int s,
                              const int *ckpt, mk_mem_breakdown_t *out);
/* The same with no activation in flight (mk_sim_stage_memory with no
 * count and inflight 0): what no recompute policy can avoid. */
int mk_sim_stage_state_fixed(mk_sim_fixed_t *F, const mk_plan_t *p, const mk_graph_t *g, int s,
                             mk_mem_breakdown_t *out);

/* Stream-walk peaks kept across many plans: a stage's activation peak is
 * a function of its instruction stream, the checkpoint count and its
 * chunks' activation figures only (not of its static bytes, which add),
 * and a search meets the same ones many times over (ZeRO levels, TP
 * overlaps, micro-batch counts that leave a stage's stream alike).  Keyed
 * by two independent 64-bit hashes of all of that; a fixed table (~400
 * KB), the newest entry kept where two meet.  NULL: out of memory. */
typedef struct mk_sim_peak_memo mk_sim_peak_memo_t;
mk_sim_peak_memo_t *mk_sim_peak_memo_new(void);
void mk_sim_peak_memo_free(mk_sim_peak_memo_t *m);

/* The same with the search's streams built from and recycled to pool
 * (merak/sched.h; the planner keeps one for all its candidates) and the
 * stage walks' peaks kept in memo (NULL: none). */
int mk_sim_resolve_auto_pooled(const mk_cluster_t *c, mk_plan_t *p, const mk_graph_t *g, const mk_sim_opts_t *o,
                               mk_sched_pool_t *pool, mk_sim_peak_memo_t *memo);

/* Lower bounds for a search (the planner's branch and bound) on a checked
 * plan with its recompute settled, per stage s of pp: after[s], the seconds
 * stage s still runs after its last compute op (OPT_STEP; ZeRO-1/2: the
 * weights' all-gather after it); dp[s], the seconds its DP stream carries,
 * queued one after another, before its last REDUCE_GRADS returns (so the
 * stage ends no sooner than dp[s] + after[s]).  Neither depends on the
 * schedule's order or on TP overlap.  o NULL: defaults.  0 or -1. */
int mk_sim_stage_tail(const mk_cluster_t *c, const mk_plan_t *p, const mk_graph_t *g, const mk_sim_opts_t *o,
                      double *after, double *dp);

/* A lower bound on the simulated step of many plans that share a graph
 * and the layer costs (tp, cp, ep, sequence parallelism, dtype and the
 * groups those read): per layer the pieces the simulator's chunk costs are
 * built from (sim_bound.c), so that a plan's bound costs O(layers).  NULL
 * with mk_error_last() on failure.  p: any plan of the set (checked). */
typedef struct mk_sim_bound mk_sim_bound_t;
mk_sim_bound_t *mk_sim_bound_new(const mk_cluster_t *c, const mk_plan_t *p, const mk_graph_t *g,
                                 const mk_sim_opts_t *o);
/* The same, its memo of chunk durations shared with share's (NULL: its
 * own): the bounds of one search, one table (sim_internal.h). */
mk_sim_bound_t *mk_sim_bound_new_sharing(const mk_cluster_t *c, const mk_plan_t *p, const mk_graph_t *g,
                                         const mk_sim_opts_t *o, const mk_sim_bound_t *share);
void mk_sim_bound_free(mk_sim_bound_t *b);
/* The first of v[0..n) (one cluster's) whose layer costs are plan p's
 * (on their graph and cluster), or -1. */
int mk_sim_bound_find(const mk_sim_bound_t *const *v, int n, const mk_plan_t *p);
/* No run of plan p (b's graph, checked, recompute settled; ckpt: the
 * scheduler's count per (stage, chunk) at s*vpp+c; after, dp:
 * mk_sim_stage_tail's) has a shorter step than this, whatever its
 * schedule (DESIGN-NOTES.md "The planner's lower bound"). */
double mk_sim_bound_step(const mk_sim_bound_t *b, const mk_plan_t *p, const int *ckpt, const double *after,
                         const double *dp);
/* mk_sim_bound_step in two parts, for plans that differ only in their
 * tails (the ZeRO variants of one split and recompute policy): the terms
 * no tail changes, 3 per stage into v[3 * pp] (returns 1 where the bound
 * is 0: unit costs, else 0), then the bound of one tail from them, the
 * very value mk_sim_bound_step gives. */
int mk_sim_bound_terms(const mk_sim_bound_t *b, const mk_plan_t *p, const int *ckpt, const double *sends,
                       double *v);
/* The p2p transfers the terms take between stages s and s + 1 (the
 * activation down at 2 s, the gradient back at 2 s + 1; pp - 1 pairs):
 * they read only the split and the layout, so plans of one split share
 * them (sends NULL above: computed there). */
void mk_sim_bound_sends(const mk_sim_bound_t *b, const mk_plan_t *p, double *sends);
double mk_sim_bound_finish(const double *v, int pp, const double *after, const double *dp);
/* Stage s's m micro-batches of compute alone (the terms' busy part, no
 * fill, drain or tail): a cheaper bound on the same plans, O(vpp), for
 * pruning before the terms are made. */
double mk_sim_bound_busy(const mk_sim_bound_t *b, const mk_plan_t *p, const int *ckpt, int s);
/* A tighter bound on the same plan, at the cost of walking its streams
 * sch (mk_plan_sched_spec's, any bucket count): the compute ops at the
 * durations mk_sim_bound_step takes, the sends at their transfer times,
 * the rest free (sim_bound.c); never less than what the run of p takes to
 * its last instruction, with the tails: out[0] at TP overlap level
 * lvl[0], out[1] at lvl[1] from the same walk (lvl[1] < 0: none).  0
 * where it cannot be walked. */
void mk_sim_bound_walk(const mk_sim_bound_t *b, const mk_plan_t *p, const mk_sched_t *sch, const double *after,
                       const double *dp, const int lvl[2], double out[2]);
/* The same in two parts, for many plans on the same streams: the walk's
 * events recorded once (NULL with mk_error_last() where the streams cannot
 * be walked), then run with one plan's durations: the very out[] of
 * mk_sim_bound_walk (sim_bound_walk.c).  A program holds
 * mk_sim_bound_prog_bytes (8 bytes a p2p or compute instruction). */
typedef struct mk_sim_bound_prog mk_sim_bound_prog_t;
mk_sim_bound_prog_t *mk_sim_bound_prog_new(const mk_sched_t *sch);
void mk_sim_bound_prog_free(mk_sim_bound_prog_t *q);
size_t mk_sim_bound_prog_bytes(const mk_sim_bound_prog_t *q);
void mk_sim_bound_walk_prog(const mk_sim_bound_t *b, const mk_plan_t *p, const mk_sim_bound_prog_t *q,
                            const double *after, const double *dp, const int lvl[2], double out[2]);

#ifdef __cplusplus
}
#endif
#endif
