/* The cost model: op, layer, p2p and collective times on a cluster.
 *
 * Formulas (implemented in sim/cost.c and sim/collective.c, each repeated
 * in the comment of the function that implements it):
 *
 *   op time       t = max(host, launch + max(F / (P_mm[dtype] * eff(d)), V / P_vec, M / BW))
 *                 host = host_op_s (2x in backward): the framework issues the op's
 *                 kernels no faster than that; a collective takes at least host_op_s too
 *                 F matmul FLOPs, V vector FLOPs, M bytes moved (per TP rank),
 *                 eff(d) = gemm_eff * d / (d + gemm_half_dim), d the GEMM's
 *                 smallest dimension; backward: 2 launches, 2x bytes and
 *                 vector FLOPs, the op's backward matmul FLOPs.
 *   p2p           t = alpha + S / beta_eff   (intra: the node's fabric;
 *                 inter: one NIC shared by the flows leaving the node:
 *                 beta_eff = beta * min(1, nics / sharers))
 *   ring AR       2(n-1) alpha + 2 (n-1)/n * S / beta;  RS, AG: half
 *   tree AR       2 ceil(log2 n) alpha + 2 S / beta (pipelined double tree)
 *   hierarchical  n = g per node x k nodes:
 *                 RS_intra(g, S) + AR_inter(k, S/g, beta_eff) + AG_intra(g, S)
 *                 = 2[(g-1) a_i + (g-1)/g S/b_i] + 2(k-1) a_e + 2(k-1)/k (S/g)/b_e
 *                 RS, AG: one phase of each, at the latency of NCCL's flat ring
 *                 (tuning.cc): (n-k) a_i + (k-1) a_e + (g-1)/g S/b_i + (k-1)/k (S/g)/b_e
 *   auto          the ring inside one node (NCCL's tree is a chain there:
 *                 its latency 2((n/nodes - 1) a_intra + log2(nodes) a_inter),
 *                 NCCL src/graph/tuning.cc, so no shorter than the ring's);
 *                 min(ring, tree) with one member per node; hierarchical
 *                 otherwise.
 *   all-to-all    pairwise exchange (MPICH's MPI_Alltoall for long messages,
 *                 Thakur, Rabenseifner & Gropp 2005): n-1 steps, each sending
 *                 S/n to one peer and receiving S/n from another; of the n-1
 *                 peers g-1 share the node, n-g do not:
 *                 (g-1)(a_i + S/(n b_i)) + (n-g)(a_e + S/(n b_e)),
 *                 = (n-1)(alpha + S/(n beta)) inside one node; S = the rank's
 *                 whole send buffer (its own S/n stays), any algorithm.
 * Under the `ideal` cluster every collective, p2p and non-F/B/R cost is 0. */
#ifndef MERAK_COST_H
#define MERAK_COST_H

#include "merak/cluster.h"
#include "merak/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MK_COLL_ALLREDUCE = 0, MK_COLL_REDUCE_SCATTER, MK_COLL_ALLGATHER, MK_COLL_ALLTOALL } mk_coll_kind_t;

/* A communication group: n ranks, g of them on each node it spans
 * (g = n inside one node, g = 1 for one member per node), and sharers =
 * how many ranks of a node use its NICs at the same time (>= g). */
typedef struct mk_group {
    int n, per_node, sharers;
} mk_group_t;

/* Group of n ranks whose global ranks are first + stride*i (i < n) on the
 * cluster's nodes; sharers = ranks per node running the same collective
 * concurrently (symmetric replicas), at least per_node. */
mk_group_t mk_group_make(const mk_cluster_t *c, int first, int stride, int n, int sharers);

/* Efficiency of a GEMM whose smallest dimension is d, running at the
 * matmul rate `peak` (0: the device's 16-bit rate). */
double mk_cost_gemm_eff(const mk_device_t *d, double dim, double peak);
/* One op's forward (bwd=0) or backward (bwd=1) time on one TP rank of t,
 * for a micro-batch of `tokens` tokens (the graph's b*s, or half of it). */
double mk_cost_op_time(const mk_cluster_t *c, const mk_graph_t *g, int op, int tp, int seqpar,
                       double tokens, mk_dtype_t dtype, int bwd);
/* The host's time to issue one op's kernels (host_op_s x its kernels;
 * 0 under `ideal`). */
double mk_cost_op_host(const mk_cluster_t *c, const mk_graph_t *g, int op, int bwd);
/* The device's time for one op (mk_cost_op_time without the host), and
 * the host's time to issue it in *host. */
double mk_cost_op_parts(const mk_cluster_t *c, const mk_graph_t *g, int op, int tp, int seqpar,
                        double tokens, mk_dtype_t dtype, int bwd, double *host);
/* The weight-gradient GEMMs of one op, what a split backward's B_W runs
 * (one forward-sized GEMM a weight): a linear's or the LM head's forward
 * time, an MoE op's forward GEMMs (its experts' and the shared expert's;
 * the router is a linear) without its dispatch and combine passes; 0 for
 * other ops. */
double mk_cost_op_wgrad_time(const mk_cluster_t *c, const mk_graph_t *g, int op, int tp, int seqpar,
                             double tokens, mk_dtype_t dtype);
/* mk_cost_op_wgrad_time's device time, its host's in *host. */
double mk_cost_op_wgrad_parts(const mk_cluster_t *c, const mk_graph_t *g, int op, int tp, int seqpar,
                              double tokens, mk_dtype_t dtype, double *host);
/* The host runs ahead of the device.  CUDA kernels launch asynchronously
 * (CUDA C++ Programming Guide, "Asynchronous Concurrent Execution": a
 * launch returns before the kernel completes), so the host issues a run
 * of ops into the stream's queue while the device works through it; with
 * no synchronization inside the run, the run's steady state is
 * max(H, D): the host's issue times summed (H, host_op_s x kernels) or
 * the device's (D), whichever is longer, not the sum of each op's
 * max(h, d) (a host-bound layer norm's issue hides behind the GEMM before
 * it).  An op that reads a device value on the host (mk_cost_op_syncs)
 * drains the queue: the run before it ends there, and the op pays
 * max(h, d) alone.  A layer's ops are one run (mk_cost_layer_compute, the
 * simulator's layer pieces); a run's lead in and out (the first op's
 * issue, the last one's kernel) is taken as hidden by the neighbouring
 * layers' runs. */
typedef struct {
    double host, dev; /* the open run's sums */
    double done;      /* the runs closed by a synchronizing op */
} mk_cost_queue_t;
void mk_cost_queue_op(mk_cost_queue_t *q, double host, double dev, int sync);
double mk_cost_queue_time(const mk_cost_queue_t *q);
/* 1 when op i makes the host wait for the device. */
int mk_cost_op_syncs(const mk_graph_t *g, int op);
/* A layer's ops issued as one run (mk_cost_queue_t; no TP communication). */
double mk_cost_layer_compute(const mk_cluster_t *c, const mk_graph_t *g, int layer, int tp, int seqpar,
                             double tokens, mk_dtype_t dtype, int bwd);
/* The per-layer time estimate the planner and the `compute` partitioner
 * use: forward + backward (+ a forward again when recompute) including
 * TP all-reduces without overlap, seconds. */
double mk_cost_layer_time(const mk_cluster_t *c, const mk_graph_t *g, int layer, int tp, int seqpar,
                          int recompute, mk_dtype_t dtype);
/* Point-to-point message of S bytes, intra-node or across nodes with
 * `sharers` flows sharing the node's NICs. */
double mk_cost_p2p(const mk_cluster_t *c, int inter, int sharers, double bytes);
/* Collective of S bytes (the full buffer on each rank) over a group, by
 * the algorithm NCCL's tuner would take for it: inside one node the ring,
 * with one rank per node the cheaper of ring and tree, else hierarchical
 * (no flag selects another: NCCL_ALGO's choice is not modelled). */
double mk_cost_coll(const mk_cluster_t *c, mk_coll_kind_t kind, const mk_group_t *g, double bytes);
/* One rank's EP all-to-all by DeepEP's normal kernels (DeepSeek-V3's
 * report, arXiv:2412.19437 section 3.2.2; deepseek-ai/DeepEP): of its
 * send buffer of S bytes (T tokens x k copies), a token crosses once to
 * each other node holding one of its k experts, to the GPU of its own
 * in-node index there, which forwards it over NVLink; the NIC and NVLink
 * traffic overlap.  With the E experts spread evenly over the group's
 * nodes nn (ppn = g's ranks a node) and routed uniformly, a node is hit
 * with probability h = 1 - prod_{i<k} (E - E/nn - i) / (E - i):
 *   inter = S/k (nn - 1) h / b_nic,   intra = S [(ppn-1)/n + (n-ppn)/n (ppn-1)/ppn] / b_nvl,
 *   time  = a_e + a_i + max(inter, intra)
 * (one node: the pairwise exchange's intra part).  k, E: the MoE op's. */
double mk_cost_a2a_deepep(const mk_cluster_t *c, const mk_group_t *g, double bytes, int k, int E);
/* DeepEP's normal kernels occupy MK_DEEPEP_SMS streaming multiprocessors
 * for as long as they run: Megatron-Core gives them 20
 * (TransformerConfig.moe_deepep_num_sms, 20 for DeepEP; NVIDIA/Megatron-LM
 * megatron/core/transformer/transformer_config.py), as DeepSeek-V3's
 * training gave its cross-node all-to-alls "only 20 SMs" of an H800's 132
 * (arXiv:2412.19437 section 3.2.2). */
#define MK_DEEPEP_SMS 20
/* Transformer Engine's userbuffers TP overlap (--tp-comm-overlap) runs
 * its "pipeline" overlaps (the forward's row-parallel GEMMs, proj_fprop and
 * fc2_fprop, reduce-scattered piece by piece) and its "bulk" ones (the
 * backward's column-parallel dgrad and wgrad GEMMs, qkv_* and fc1_*) with
 * their communication kernels on MK_TE_UB_COMM_SMS streaming
 * multiprocessors and the GEMM launched on the others (set_sm_margin);
 * its ring exchanges (the other four GEMMs) move data with the copy
 * engines and take one SM (transformer_engine/pytorch/module/base.py,
 * initialize_ub's get_default_config: num_sm 16 for "pipeline" and
 * "bulk", set_sm_margin where the method is not "ring_exchange"). */
#define MK_TE_UB_COMM_SMS 16
/* The share of the device's SMs an all-to-all takes from compute it
 * overlaps (a merged or DualPipe pair's, sim_step.c pair_hidden): that
 * compute runs on the rest, so hiding t seconds of all-to-all behind it
 * costs t x share of compute time.  DeepEP: MK_DEEPEP_SMS over the
 * device's SMs (dev.sms; 0 where it has none); NCCL's all-to-all: 0 (its
 * channel count has no figure here). */
double mk_cost_a2a_sm_share(const mk_cluster_t *c, int deepep);
/* The share of the device's SMs a collective on the DP stream takes from
 * the compute it overlaps (sim/dp_share.c): dev.coll_sms over dev.sms (0
 * under `ideal` or without them).  Compute beside it runs on the rest, so
 * t seconds of it behind compute cost t x share of compute time. */
double mk_cost_coll_sm_share(const mk_cluster_t *c);
/* The plain ring formula on one link class: 2(n-1)a + 2(n-1)/n S/b (AR). */
double mk_cost_ring(mk_coll_kind_t kind, int n, double alpha, double beta, double bytes);

#ifdef __cplusplus
}
#endif
#endif
