/* Partitioners (see partition.h).  The balance step is the classic
 * linear-partition dynamic programme: best[j][i] = min over the last cut c
 * of max(best[j-1][c], sum(c..i)), O(k*n^2) time, exact. */
#include "merak/partition.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

double mk_partition_balance(const double *cost, int n, int k, int *bounds)
{
    double *pre = malloc((n + 1) * sizeof *pre);
    double *best = malloc((size_t)(k + 1) * (n + 1) * sizeof *best);
    int *cut = malloc((size_t)(k + 1) * (n + 1) * sizeof *cut);
    if (!pre || !best || !cut || k < 1 || k > n) {
        free(pre), free(best), free(cut);
        return -1;
    }
#define B(j, i) best[(size_t)(j) * (n + 1) + (i)]
#define C(j, i) cut[(size_t)(j) * (n + 1) + (i)]
    pre[0] = 0;
    for (int i = 0; i < n; i++) pre[i + 1] = pre[i] + cost[i];
    for (int i = 0; i <= n; i++) B(1, i) = pre[i], C(1, i) = 0;
    for (int j = 2; j <= k; j++)
        for (int i = j; i <= n; i++) {
            B(j, i) = DBL_MAX;
            for (int c = j - 1; c < i; c++) { /* parts 1..j-1 take layers [0, c) */
                double v = B(j - 1, c) > pre[i] - pre[c] ? B(j - 1, c) : pre[i] - pre[c];
                if (v < B(j, i)) B(j, i) = v, C(j, i) = c;
            }
        }
    double worst = B(k, n);
    bounds[k] = n;
    for (int j = k, i = n; j >= 1; j--) {
        i = j == 1 ? 0 : C(j, i);
        bounds[j - 1] = i;
    }
#undef B
#undef C
    free(pre), free(best), free(cut);
    return worst;
}

void mk_partition_default_costs(const mk_plan_t *p, const mk_graph_t *g, double *cost)
{
    /* 100 FLOPs per byte moved: a typical accelerator's balance point, so
     * the embedding (all traffic, no matmul) is not free. */
    int recompute = p->recompute.kind != MK_RECOMPUTE_NONE && p->recompute.kind != MK_RECOMPUTE_SELECTIVE;
    for (int l = 0; l < g->n_layers; l++) {
        const mk_layer_t *L = &g->layers[l];
        int ckptable = L->params > 0 && strcmp(L->kind, "embedding") != 0 && L->block >= 0;
        cost[l] = L->fwd_flops + L->bwd_flops + (recompute && ckptable ? L->fwd_flops : 0) +
                  100.0 * 3 * L->bytes_moved + 10.0 * L->vec_flops;
    }
}

int mk_partition_costs(mk_plan_t *p, const mk_graph_t *g, const char *method, const double *layer_cost)
{
    p->n_vstages = p->pp * p->vpp;
    if (!strcmp(method, "uniform")) return mk_plan_partition_uniform(p, g);
    if (p->n_vstages > g->n_layers || p->n_vstages > MK_PLAN_MAX_VSTAGES)
        return mk_error_set("%d virtual stages do not fit the model's %d layers", p->n_vstages, g->n_layers);
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
