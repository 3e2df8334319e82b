/* mk_plan_resolve: a plan checked once and everything derived from it
 * (see merak/plan_ctx.h). */
#include "merak/plan_ctx.h"
#include "merak/partition.h"

#include <string.h>

/* The graph: the caller's (it must be the plan's: same micro-batch) or
 * built here. */
static int ctx_graph(mk_plan_ctx_t *ctx, const mk_plan_resolve_opts_t *o)
{
    if (o->graph) {
        if (o->graph->opts.mbs != ctx->plan.mbs)
            return mk_error_set("graph built for micro-batch %d, plan has %d", o->graph->opts.mbs, ctx->plan.mbs);
        ctx->g = o->graph;
        return 0;
    }
    if (!(ctx->own = mk_plan_graph(&ctx->plan))) return -1;
    ctx->g = ctx->own;
    return 0;
}

/* Stage bounds by the requested method; a pipeline deeper than the
 * blocks is left for mk_plan_check_layout to name. */
static int ctx_partition(mk_plan_ctx_t *ctx, const char *method)
{
    const mk_graph_t *g = ctx->g;
    int blocks = g->cfg.family == MK_FAMILY_CUSTOM ? g->n_layers : g->cfg.num_layers;
    return ctx->plan.pp <= blocks ? mk_partition(&ctx->plan, g, method) : 0;
}

/* What the plan must fit: the cluster's GPUs and dtype, the world's ranks. */
static int ctx_fit(const mk_plan_t *p, const mk_plan_resolve_opts_t *o)
{
    if (o->cluster && (mk_plan_check_gpus(p, o->cluster) < 0 || mk_cluster_check_dtype(o->cluster, p->dtype) < 0))
        return -1;
    if (o->world > 0 && mk_plan_gpus(p) != o->world) /* within MK_MAX_GPUS: checked sizes */
        return mk_error_set("the layout's ranks, %s = %lld but there are %d ranks", mk_plan_layout_str(p, " x ").s,
                            (long long)mk_plan_gpus(p), o->world);
    return 0;
}

static int ctx_check(mk_plan_ctx_t *ctx, const mk_plan_resolve_opts_t *o)
{
    mk_plan_t *p = &ctx->plan;
    if (mk_plan_check_sizes(p) < 0 || mk_model_check_tp(&p->model, p->tp) < 0) return -1;
    if (ctx_graph(ctx, o) < 0) return -1;
    if (o->partition && ctx_partition(ctx, o->partition) < 0) return -1;
    if (mk_plan_check_layout(p, ctx->g) < 0) return -1;
    if (!o->partition && mk_plan_check_partition(p, ctx->g) < 0) return -1; /* bounds as given */
    if (o->check && o->check(p, ctx->g) < 0) return -1;
    if (ctx_fit(p, o) < 0) return -1;
    if (p->recompute.kind == MK_RECOMPUTE_AUTO && !p->has_ckpt && o->resolve_auto) {
        if (!o->cluster) return mk_error_set("recompute auto needs a cluster to fit");
        if (o->resolve_auto(o->cluster, p, ctx->g) < 0) return -1;
    }
    return 0;
}

int mk_plan_resolve(mk_plan_ctx_t *ctx, const mk_plan_t *p, const mk_plan_resolve_opts_t *opts)
{
    static const mk_plan_resolve_opts_t none;
    const mk_plan_resolve_opts_t *o = opts ? opts : &none;
    memset(ctx, 0, sizeof *ctx);
    ctx->plan = *p;
    ctx->plan.attention = mk_plan_attention(p, o->cluster); /* auto settled before the graph */
    if (ctx_check(ctx, o) < 0) {
        mk_plan_ctx_free(ctx);
        return -1;
    }
    ctx->cluster = o->cluster;
    ctx->world = o->world;
    ctx->zero = mk_plan_zero(&ctx->plan);
    /* a gradient bucket when gradients are reduced: over dp x cp */
    mk_plan_sched_spec(&ctx->plan, ctx->g, mk_plan_dp_cp(&ctx->plan) > 1, ctx->layers, &ctx->spec);
    return 0;
}

void mk_plan_ctx_free(mk_plan_ctx_t *ctx)
{
    if (!ctx) return;
    mk_graph_free(ctx->own);
    ctx->own = NULL;
    ctx->g = NULL;
}
