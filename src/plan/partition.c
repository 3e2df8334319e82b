/* Partitioners (see partition.h).  The balance step finds the smallest
 * X such that the layers split into k contiguous non-empty parts each
 * costing at most X: a greedy pass decides feasibility for one X exactly
 * (fill a part while it stays within X, but leave one layer for every
 * part still to come), and a bisection on X whose ends are costs a
 * split has (the largest part of a split that fits, the least cost a
 * part of one that does not would have with one more layer) reaches the
 * optimum itself, not a tolerance around it, in a few passes. */
#include "merak/partition.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Greedy split for bound X; returns the number of parts or k+1 if some
 * part must exceed X.  Writes bounds[0..k] when it succeeds, and in *most
 * its largest part's cost; when it fails, in *next the least cost a part
 * would have had with one more layer (no X below it splits otherwise). */
static int greedy_split(const double *cost, int n, int k, double X, int *bounds, double *most, double *next)
{
    int parts = 0, i = 0;
    double big = 0, ext = HUGE_VAL;
    bounds[0] = 0;
    while (i < n) {
        if (parts == k) return *next = ext, k + 1;
        double sum = cost[i++]; /* a part takes at least one layer */
        if (sum > X) return *next = ext < sum ? ext : sum, k + 1;
        int lim = n - k + parts + 1; /* it leaves one layer to each part after it */
        while (i < lim && sum + cost[i] <= X) sum += cost[i++];
        if (i < lim && sum + cost[i] < ext) ext = sum + cost[i];
        if (sum > big) big = sum;
        bounds[++parts] = i;
    }
    *most = big;
    return parts;
}

double mk_partition_balance(const double *cost, int n, int k, int *bounds)
{
    if (k < 1 || k > n) return -1;
    double lo = 0, hi = 0, most = 0, next = 0;
    for (int i = 0; i < n; i++) {
        hi += cost[i];
        if (cost[i] > lo) lo = cost[i];
    }
    for (int it = 0; it < 200 && lo < hi; it++) {
        double mid = 0.5 * (lo + hi);
        if (greedy_split(cost, n, k, mid, bounds, &most, &next) == k) hi = most;
        else lo = next;
    }
    if (greedy_split(cost, n, k, hi, bounds, &most, &next) != k) return -1;
    return most;
}

void mk_partition_default_costs(const mk_plan_t *p, const mk_graph_t *g, double *cost)
{
    /* 100 FLOPs per byte moved: a typical accelerator's balance point, so
     * the embedding (all traffic, no matmul) is not free. */
    int recompute = p->recompute.kind != MK_RECOMPUTE_NONE && p->recompute.kind != MK_RECOMPUTE_SELECTIVE;
    for (int l = 0; l < g->n_layers; l++) {
        const mk_layer_t *L = &g->layers[l];
        int ckptable = mk_layer_checkpointable(g, l);
        cost[l] = L->fwd_flops + L->bwd_flops + (recompute && ckptable ? L->fwd_flops : 0) +
                  100.0 * 3 * L->bytes_moved + 10.0 * L->vec_flops;
    }
}

int mk_partition_costs(mk_plan_t *p, const mk_graph_t *g, const char *method, const double *layer_cost)
{
    if (!strcmp(method, "uniform")) return mk_plan_partition_uniform(p, g);
    if (p->first_stage_layers || p->last_stage_layers)
        return mk_error_set("--decoder-first/last-pipeline-num-layers need --partition uniform (got %s)", method);
    int64_t nv = mk_plan_vstages(p);
    if (nv > g->n_layers || nv > MK_PLAN_MAX_VSTAGES)
        return mk_error_set("%d virtual stages do not fit the model's %d layers", (int)nv, g->n_layers);
    p->n_vstages = (int)nv;
    double *cost = malloc(g->n_layers * sizeof *cost);
    if (!cost) return mk_error_set("out of memory");
    if (!strcmp(method, "parameters")) {
        for (int l = 0; l < g->n_layers; l++) cost[l] = g->layers[l].params;
    } else if (!strcmp(method, "compute") || !strcmp(method, "refine")) {
        if (layer_cost) memcpy(cost, layer_cost, g->n_layers * sizeof *cost);
        else mk_partition_default_costs(p, g, cost);
    } else {
        free(cost);
        return mk_error_set("unknown partition method '%s' (uniform, parameters, compute, refine)", method);
    }
    double worst = mk_partition_balance(cost, g->n_layers, p->n_vstages, p->bounds);
    free(cost);
    if (worst < 0) return mk_error_set("cannot split %d layers into %d stages", g->n_layers, p->n_vstages);
    mk_strlcpy(p->partition, method, sizeof p->partition);
    return 0;
}

int mk_partition(mk_plan_t *p, const mk_graph_t *g, const char *method)
{
    return mk_partition_costs(p, g, method, NULL);
}
