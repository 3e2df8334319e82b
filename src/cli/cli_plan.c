/* The plan behind `merak sim` and `merak run`: from flags or a plan file. */
#include "config.h"
#include "cli/cli.h"
#include "merak/partition.h"
#include "merak/plan.h"

#include <string.h>

static int plan_from_flags(const mk_args_t *a, const char *model_default, const char *cluster_default,
                           int world, int dtype_default, mk_plan_t *p)
{
    mk_plan_init(p);
    if (mk_args_model(a, model_default, &p->model) < 0) return -1;
    mk_strlcpy(p->cluster, a->cluster ? a->cluster : cluster_default, sizeof p->cluster);
    p->dtype = (mk_dtype_t)dtype_default;
    if (a->dtype && mk_dtype_parse(a->dtype, &p->dtype) < 0) return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
    p->pp = a->pp ? a->pp : 1;
    p->tp = a->tp ? a->tp : 1;
    p->mbs = a->mbs ? a->mbs : 1;
    if (a->dp) p->dp = a->dp;
    else if (world > 0 && world % (p->pp * p->tp) == 0) p->dp = world / (p->pp * p->tp);
    else p->dp = 1;
    p->gbs = a->gbs ? a->gbs : 512;
    if (a->schedule && mk_sched_kind_parse(a->schedule, &p->schedule) < 0)
        return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
    if (a->recompute && mk_recompute_parse(a->recompute, &p->recompute) < 0)
        return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
    p->vpp = a->vpp ? a->vpp : 1;
    if (a->vpp_layers) {
        int per = p->pp * a->vpp_layers;
        if (p->model.num_layers % per)
            return mk_cli_fail(a->cmd, "--num-layers-per-virtual-pipeline-stage %d does not divide "
                               "%d blocks over pp %d", a->vpp_layers, p->model.num_layers, p->pp), -1;
        p->vpp = p->model.num_layers / per;
    }
    if (p->vpp > 1 && !a->schedule) p->schedule = MK_SCHED_INTERLEAVED;
    p->tp_overlap = a->tp_overlap > 0 ? a->tp_overlap : 0;
    p->zero = a->zero;
    p->seqpar = a->seqpar;
    return 0;
}

int mk_args_plan(const mk_args_t *a, const char *model_default, const char *cluster_default, int world,
                 int dtype_default, mk_plan_t *p, mk_graph_t **gout)
{
    *gout = NULL;
    if (a->plan_file) {
        if (a->layout_given || a->dtype)
            return mk_cli_fail(a->cmd, "--plan takes the model and layout from the plan file; "
                               "do not combine it with model or layout flags"), -1;
        if (mk_plan_load(a->plan_file, p) < 0) return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
        if (a->cluster) mk_strlcpy(p->cluster, a->cluster, sizeof p->cluster);
    } else if (plan_from_flags(a, model_default, cluster_default, world, dtype_default, p) < 0) {
        return -1;
    }
    if (mk_plan_check_sizes(p) < 0 || mk_model_check_tp(&p->model, p->tp) < 0)
        return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
    mk_graph_t *g = mk_plan_graph(p);
    if (!g) return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
    /* partition from flags (a plan file carries its bounds); a pipeline
     * deeper than the blocks is left for mk_plan_check to name */
    int blocks = g->cfg.family == MK_FAMILY_CUSTOM ? g->n_layers : g->cfg.num_layers;
    p->n_vstages = p->pp * p->vpp;
    int bad = !a->plan_file && p->pp <= blocks && mk_partition(p, g, a->partition ? a->partition : "uniform") < 0;
    if (bad || mk_plan_check(p, g) < 0) {
        mk_graph_free(g);
        return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
    }
    *gout = g;
    return 0;
}
