/* A plan resolved once.  mk_plan_resolve checks a plan (sizes, layout,
 * the engine's own rules, GPUs against the cluster or ranks against the
 * world), settles recompute `auto`, builds the graph and fills everything
 * the engines derive from a plan.  The simulator, the planner and the
 * executor then take a const mk_plan_ctx_t * and neither re-derive nor
 * re-check anything of the layout: virtual stages are ctx->plan.n_vstages,
 * micro-batches ctx->plan.m, stage bounds ctx->plan.bounds, checkpoint
 * counts ctx->plan.ckpt, ZeRO ctx->zero, the dtype ctx->plan.dtype.
 *
 * A context is not copied (its spec points into it); free it with
 * mk_plan_ctx_free. */
#ifndef MERAK_PLAN_CTX_H
#define MERAK_PLAN_CTX_H

#include "merak/cluster.h"
#include "merak/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a plan is resolved against.  Zero-initialise, then set what applies. */
typedef struct mk_plan_resolve_opts {
    const mk_cluster_t *cluster; /* the GPUs dp*pp*tp must fit it (sim, plan); NULL: none (run) */
    int world;                   /* > 0: dp*pp*tp must equal this rank count (run) */
    const char *partition;       /* non-NULL: the plan has no stage bounds yet; split by this
                                    method (mk_partition) before the layout is checked */
    const mk_graph_t *graph;     /* the plan's graph (mk_plan_graph_opts), borrowed: it must
                                    outlive the context (the planner's cache); NULL: built */
    /* The engine's own rules beyond the plan's (the executor's), checked
     * after the plan's and before the GPU or rank count; NULL: none. */
    int (*check)(const mk_plan_t *p, const mk_graph_t *g);
    /* Recompute `auto` without checkpoint counts: fills p->ckpt from a
     * memory model (the simulator's mk_sim_resolve_auto: passed in, so
     * that plan/ does not depend on sim/).  Needs cluster.  NULL: left to
     * the engine's check. */
    int (*resolve_auto)(const mk_cluster_t *c, mk_plan_t *p, const mk_graph_t *g);
} mk_plan_resolve_opts_t;

typedef struct mk_plan_ctx {
    mk_plan_t plan;              /* checked: m, n_vstages, bounds and (auto) ckpt filled */
    const mk_graph_t *g;         /* the plan's graph: built here (own) or borrowed */
    const mk_cluster_t *cluster; /* what it was resolved against (NULL: none) */
    int world;                   /* the rank count it was checked against (0: none) */
    int zero;                    /* ZeRO stage in effect (mk_plan_zero) */
    int layers[MK_PLAN_MAX_VSTAGES]; /* checkpointable layers of (stage s, chunk c) at [s*vpp + c] */
    mk_sched_spec_t spec;        /* the scheduler's spec (one REDUCE_GRADS bucket when dp > 1);
                                    points into layers and plan.ckpt */
    mk_graph_t *own;             /* g when built here (freed by mk_plan_ctx_free) */
} mk_plan_ctx_t;

/* Resolve p (copied) into ctx.  Order of the checks, each made once:
 * sizes and tp (mk_plan_check_sizes, mk_model_check_tp), the graph, the
 * partition (opts->partition), the layout (mk_plan_check_layout),
 * opts->check, GPUs against opts->cluster, dp*pp*tp against opts->world,
 * then recompute auto.  Returns 0, or -1 with mk_error_last() (ctx holds
 * nothing to free).  Never prints. */
int mk_plan_resolve(mk_plan_ctx_t *ctx, const mk_plan_t *p, const mk_plan_resolve_opts_t *opts);
void mk_plan_ctx_free(mk_plan_ctx_t *ctx);

#ifdef __cplusplus
}
#endif
#endif
