/* The SMs a DP collective holds (issue 38).  NCCL runs a collective as one
 * CUDA block per channel, each holding an SM for the collective's whole run
 * (dev.coll_sms: src/plan/cluster.c), so compute that runs beside a
 * collective on the DP stream (the gradient buckets' reduction behind the
 * backward, the distributed optimizer's weight gather behind the forward,
 * ZeRO-3's gathers and reductions behind the layers) runs on the other SMs:
 * of each second of DP traffic inside the windows where a compute op's
 * kernels run, share = coll_sms / sms stays on the compute op
 * (mk_cost_coll_sm_share), the rule TE's overlapped GEMMs (sim_chunk.c
 * te_sm_margin) and DeepEP's all-to-alls (sim_step.c pair_hidden) follow.
 *
 * The DP stream is one FIFO, so a stage keeps its busy runs in issue order,
 * the last MK_SIM_DP_RUNS of them (adjacent ones merged): a compute op asks
 * how much of [a, b) they cover (a ring: runs older than that many are
 * long past any compute op still to come). */
#include "sim/sim_internal.h"

#include <math.h>

void mk_sim_dp_busy(mk_sim_stage_t *S, double start, double end)
{
    if (!(end > start)) return;
    if (S->dp_nruns > 0) {
        double *last = S->dp_runs[(S->dp_nruns - 1) % MK_SIM_DP_RUNS];
        if (start <= last[1]) { /* queued behind it: one run */
            if (end > last[1]) last[1] = end;
            return;
        }
    }
    double *r = S->dp_runs[S->dp_nruns % MK_SIM_DP_RUNS];
    r[0] = start, r[1] = end;
    S->dp_nruns++;
}

/* The runs are disjoint and in time order (each starts where the stream
 * is free), so the newest first, back to the first that ends by a. */
double mk_sim_dp_within(const mk_sim_stage_t *S, double a, double b)
{
    int n = S->dp_nruns < MK_SIM_DP_RUNS ? S->dp_nruns : MK_SIM_DP_RUNS;
    double t = 0;
    for (int k = 1; k <= n; k++) {
        const double *r = S->dp_runs[(S->dp_nruns - k) % MK_SIM_DP_RUNS];
        if (r[1] <= a) break;
        double lo = fmax(a, r[0]), hi = fmin(b, r[1]);
        if (hi > lo) t += hi - lo;
    }
    return t;
}
