/* "What if" (issue 21): a cluster changed one knob at a time, and the best
 * plan the planner finds for a model on a cluster (what `merak plan`
 * reports as #1), for the baselines, the what-if clusters and the scaling
 * sweep of `merak plan --explain / --what-if / --gpus N1,N2,...`. */
#ifndef MERAK_WHATIF_H
#define MERAK_WHATIF_H

#include "merak/planner.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mk_cluster_knob {
    MK_KNOB_INTRA_BW = 0, /* intra-node link bandwidth (intra.beta_Bps) */
    MK_KNOB_INTER_BW,     /* inter-node NIC bandwidth (inter.beta_Bps) */
    MK_KNOB_FLOPS,        /* every compute rate of the device */
    MK_KNOB_MEMORY,       /* device memory capacity */
    MK_KNOB_GPUS,         /* the GPU count (the planner's --gpus; the cluster's node cap) */
    MK_KNOB_COUNT
} mk_cluster_knob_t;

/* The knob's name as printed ("intra-node bandwidth", ...). */
const char *mk_cluster_knob_name(mk_cluster_knob_t k);

/* Scale knob k of *c by f > 0 (for MK_KNOB_GPUS: the node cap, when the
 * cluster has one; the caller scales the GPU count).  MK_KNOB_FLOPS scales
 * every device rate consistently: the matmul peaks of every dtype (so the
 * GEMM efficiency curve, which is a share of them), the vector rates
 * forward and backward, and the optional attention and FlashAttention
 * rates; memory bandwidth, launch and host time stay (they are not
 * FLOP/s).  Returns 0, or -1 for f outside (0, 1e6] or an unknown knob. */
int mk_cluster_scale(mk_cluster_t *c, mk_cluster_knob_t k, double f);

/* The best plan of a search of o's space (o->top is ignored: one plan) and,
 * where o->refine, its refined partition, as `merak plan` reports it.
 * Returns 1 with *best filled, 0 when no plan fits (or no layout exists:
 * mk_error_last() says which), -1 on error. */
int mk_planner_best(const mk_model_config_t *m, const mk_cluster_t *c, const mk_planner_opts_t *o,
                    mk_planner_entry_t *best);

#ifdef __cplusplus
}
#endif
#endif
