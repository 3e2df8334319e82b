/* What a stage's DP stream and optimizer step add to any schedule's step
 * (mk_sim_stage_tail, merak/sim.h): the planner's lower bound takes them
 * from the rules the run uses (sim_step.c, zero.c), so it never exceeds a
 * run's step. */
#include "sim/sim_internal.h"

#include <stdlib.h>
#include <string.h>

/* Seconds stage S's DP stream carries, FIFO from time 0, before its last
 * REDUCE_GRADS returns: every backward's buckets (ZeRO-2: each micro-batch's
 * reduce-scatter, the last one's included; ZeRO-0/1: the stage's gradient
 * once), or ZeRO-3's per-layer gathers and reductions (zero.c). */
static double dp_floor(const mk_sim_state_t *R, int s)
{
    const mk_plan_t *p = R->p;
    const mk_sim_stage_t *S = &R->st[s];
    int z = mk_plan_zero(p);
    double sum = 0, red, rep;
    if (R->nb <= 0 || R->o->unit_costs) return 0;
    for (int c = 0; c < p->vpp; c++) {
        int k = c * p->pp + s;
        if (z == 3) sum += p->m * mk_zero_chunk_dp_floor(R, k);
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
    for (int s = 0; s < p->pp; s++) {
        double ag, opt = mk_sim_opt_cost(&R, &R.st[s], &ag);
        after[s] = opt + ag;
        dp[s] = dp_floor(&R, s);
    }
    free(R.st);
    return 0;
}
