/* Point-to-point and collective times (formulas in include/merak/cost.h). */
#include "merak/cost.h"

#include <math.h>

mk_group_t mk_group_make(const mk_cluster_t *c, int first, int stride, int n, int sharers)
{
    mk_group_t g = {n, n, sharers};
    int gpn = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
    long node0 = first / gpn, per = 0;
    /* Members first + stride*i rise with i, so those on first's node are a
     * prefix: the count is a division, not a walk over n (the DP groups of
     * a 16,384-GPU plan have thousands of members and every simulation
     * makes its groups). */
    if (stride <= 0) {
        for (int i = 0; i < n; i++)
            if ((first + (long)stride * i) / gpn == node0) per++;
    } else {
        per = ((node0 + 1) * gpn - 1 - first) / stride + 1;
        if (per > n) per = n;
    }
    g.per_node = per < 1 ? 1 : (int)per;
    if (g.sharers < g.per_node) g.sharers = g.per_node;
    if (g.sharers > gpn) g.sharers = gpn;
    return g;
}

/* Effective per-flow NIC bandwidth when `sharers` flows leave a node that
 * has `nics` NICs: beta * min(1, nics / sharers). */
static double nic_beta(const mk_cluster_t *c, int sharers)
{
    double nics = c->nics_per_node > 0 ? c->nics_per_node : 1;
    double share = sharers > nics ? nics / sharers : 1.0;
    return c->inter.beta_Bps * share;
}

/* t = alpha + S / beta_eff */
double mk_cost_p2p(const mk_cluster_t *c, int inter, int sharers, double bytes)
{
    if (c->ideal || bytes <= 0) return 0;
    if (!inter) return c->intra.alpha_s + bytes / c->intra.beta_Bps;
    return c->inter.alpha_s + bytes / nic_beta(c, sharers);
}

/* Ring: all-reduce 2(n-1) alpha + 2 (n-1)/n S/beta; reduce-scatter and
 * all-gather (n-1) alpha + (n-1)/n S/beta. */
double mk_cost_ring(mk_coll_kind_t kind, int n, double alpha, double beta, double bytes)
{
    if (n <= 1) return 0;
    double k = kind == MK_COLL_ALLREDUCE ? 2.0 : 1.0;
    return k * (n - 1) * alpha + k * (double)(n - 1) / n * bytes / beta;
}

/* Tree (pipelined double binary tree): all-reduce 2 ceil(log2 n) alpha +
 * 2 S/beta; RS/AG have no tree form here and use the ring. */
static double tree(mk_coll_kind_t kind, int n, double alpha, double beta, double bytes)
{
    if (n <= 1) return 0;
    if (kind != MK_COLL_ALLREDUCE) return mk_cost_ring(kind, n, alpha, beta, bytes);
    return 2.0 * ceil(log2((double)n)) * alpha + 2.0 * bytes / beta;
}

/* Hierarchical over k nodes of g ranks:
 *   AR: RS_intra(g, S) + AR_inter(k, S/g, beta_eff) + AG_intra(g, S)
 *     = 2[(g-1) a_i + (g-1)/g S/b_i] + 2(k-1) a_e + 2(k-1)/k (S/g)/b_e
 *   RS: RS_intra(g, S) + RS_inter(k, S/g);  AG: AG_inter(k, S/g) + AG_intra(g, S),
 *   with the latency of NCCL's one flat ring, which is how NCCL runs them
 *   (ring only for RS and AG): n - 1 steps, of which k - 1 cross a node
 *   boundary, (n - k) a_i + (k - 1) a_e (src/graph/tuning.cc: nsteps - nInterSteps
 *   intra-node and nInterSteps inter-node latencies), where the two phases
 *   alone would count only (g - 1) a_i: 1,344 intra-node steps, not 7, in a
 *   1,536-rank ZeRO-3 gather. */
static double hier(const mk_cluster_t *c, mk_coll_kind_t kind, const mk_group_t *g, double bytes)
{
    int per = g->per_node, k = (g->n + per - 1) / per;
    double be = nic_beta(c, g->sharers);
    double intra = mk_cost_ring(MK_COLL_REDUCE_SCATTER, per, c->intra.alpha_s, c->intra.beta_Bps, bytes);
    double inter = mk_cost_ring(kind, k, c->inter.alpha_s, be, bytes / per);
    if (kind != MK_COLL_ALLREDUCE) intra += (double)(g->n - k - (per - 1)) * c->intra.alpha_s;
    return (kind == MK_COLL_ALLREDUCE ? 2 : 1) * intra + inter;
}

/* A collective is one op the framework issues: it takes at least the
 * host's time to issue it (see mk_cost_op_time). */
static double coll_time(const mk_cluster_t *c, mk_coll_kind_t kind, const mk_group_t *g, double bytes);

double mk_cost_coll(const mk_cluster_t *c, mk_coll_kind_t kind, const mk_group_t *g, double bytes)
{
    double t = coll_time(c, kind, g, bytes);
    double host = c->ideal ? 0 : c->dev.host_op_s;
    return t > 0 && host > t ? host : t;
}

/* Pairwise all-to-all of an S-byte send buffer over g: (g-1)(a_i + S/(n b_i))
 * + (n-g)(a_e + S/(n b_e)), b_e the NIC share of the node's sharers. */
static double alltoall(const mk_cluster_t *c, const mk_group_t *g, double bytes)
{
    int n = g->n, per = g->per_node < n ? g->per_node : n;
    double piece = bytes / n;
    double intra = (per - 1) * (c->intra.alpha_s + piece / c->intra.beta_Bps);
    double inter = (n - per) * (c->inter.alpha_s + piece / nic_beta(c, g->sharers));
    return intra + inter;
}

/* The formula in merak/cost.h. */
double mk_cost_a2a_deepep(const mk_cluster_t *c, const mk_group_t *g, double bytes, int k, int E)
{
    int n = g->n, ppn = g->per_node < n ? g->per_node : n;
    if (c->ideal || n <= 1 || bytes <= 0) return 0;
    if (ppn >= n) return mk_cost_coll(c, MK_COLL_ALLTOALL, g, bytes); /* one node: NVLink only, the pairwise one's */
    double nn = (double)n / ppn, miss = 1, per = E / nn;
    for (int i = 0; i < k && i < E; i++) miss *= E - per - i > 0 ? (E - per - i) / (E - i) : 0;
    double inter = bytes / (k > 0 ? k : 1) * (nn - 1) * (1 - miss) / nic_beta(c, g->sharers);
    double intra = bytes * ((ppn - 1.0) / n + (double)(n - ppn) / n * (ppn - 1.0) / ppn) / c->intra.beta_Bps;
    double t = c->inter.alpha_s + c->intra.alpha_s + (inter > intra ? inter : intra);
    double host = c->dev.host_op_s; /* one op the framework issues, as mk_cost_coll's */
    return host > t ? host : t;
}

double mk_cost_coll_sm_share(const mk_cluster_t *c)
{
    const mk_device_t *d = &c->dev;
    if (c->ideal || d->coll_sms <= 0 || d->sms <= d->coll_sms) return 0;
    return (double)d->coll_sms / d->sms;
}

double mk_cost_a2a_sm_share(const mk_cluster_t *c, int deepep)
{
    if (!deepep || c->ideal || c->dev.sms <= MK_DEEPEP_SMS) return 0;
    return (double)MK_DEEPEP_SMS / c->dev.sms;
}

/* Inside one node NCCL's tree is a chain (tuning.cc's tree latency,
 * 2((n/nodes - 1) intraLat + log2(nodes) interLat), grows with the node's
 * ranks as the ring's does): the ring.  One rank per node: the cheaper of
 * ring and double binary tree.  Else hierarchical. */
static double coll_time(const mk_cluster_t *c, mk_coll_kind_t kind, const mk_group_t *g, double bytes)
{
    if (c->ideal || g->n <= 1 || bytes <= 0) return 0;
    if (kind == MK_COLL_ALLTOALL) return alltoall(c, g, bytes);
    int one_node = g->per_node >= g->n;
    double a = one_node ? c->intra.alpha_s : c->inter.alpha_s;
    double b = one_node ? c->intra.beta_Bps : nic_beta(c, g->sharers);
    if (one_node) return mk_cost_ring(kind, g->n, a, b, bytes);
    if (g->per_node == 1) {
        double r = mk_cost_ring(kind, g->n, a, b, bytes), t = tree(kind, g->n, a, b, bytes);
        return r < t ? r : t;
    }
    return hier(c, kind, g, bytes);
}
