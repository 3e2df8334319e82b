/* Partitioning layers into (virtual) pipeline stages.
 *
 *  uniform     equal blocks per stage (Megatron-LM); embedding on the first
 *              stage, head on the last (mk_plan_partition_uniform)
 *  parameters  contiguous stages balancing parameter counts (DeepSpeed)
 *  compute     contiguous stages minimising the slowest stage's time:
 *              forward + backward + recompute per layer, embedding and
 *              head included (dynamic programming, exact)
 *  refine      compute, then moves layers off the stage on the simulated
 *              critical path while the step time drops (needs the
 *              simulator: see mk_partition_refine in the planner)
 */
#ifndef MERAK_PARTITION_H
#define MERAK_PARTITION_H

#include "merak/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Set p->bounds (p->pp, p->vpp given) by a method name; layer_cost may be
 * NULL (then a FLOP-based estimate is used).  Returns 0 or -1. */
int mk_partition(mk_plan_t *p, const mk_graph_t *g, const char *method);
int mk_partition_costs(mk_plan_t *p, const mk_graph_t *g, const char *method, const double *layer_cost);

/* Per-layer time estimate (seconds-like units) used by `compute` when no
 * cost model is given: matmul FLOPs of forward + backward, plus a forward
 * for layers the plan's recompute policy checkpoints, plus memory traffic. */
void mk_partition_default_costs(const mk_plan_t *p, const mk_graph_t *g, double *cost);

/* Contiguous split of n costs into k non-empty parts minimising the
 * largest part; bounds[0..k].  Returns the largest part's cost. */
double mk_partition_balance(const double *cost, int n, int k, int *bounds);

#ifdef __cplusplus
}
#endif
#endif
