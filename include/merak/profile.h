/* `merak profile`: measure this machine and write a cluster JSON
 * (include/merak/cluster.h, schema in traces/README.md) whose figures the
 * cost model (include/merak/cost.h) then uses for `merak sim/plan`.
 *
 * What is measured, and how each cluster field follows:
 *  - GEMMs through the executor's backend (linear forward, input and weight
 *    gradient) over the shapes the model uses (its widths, with tp 1 and 2
 *    shards, and 16..512 tokens).  The cost model's curve
 *    rate(d) = P_mm * gemm_eff * d / (d + gemm_half_dim), d = the GEMM's
 *    smallest dimension, is linear in 1/d after inversion:
 *    1/rate = a + b/d with a = 1/(P_mm*gemm_eff), b = gemm_half_dim * a;
 *    a least-squares fit gives both.  matmul_flops (every dtype: the CPU
 *    backend computes in fp32) = the best rate measured; gemm_eff = the
 *    fitted asymptote / that peak (at most 1).
 *  - attention_flops, attention_bwd_flops: the backend's attention core,
 *    forward and backward, at the model's sequence, heads and head size,
 *    counted as the graph counts it (4*T*T*C forward per sequence, twice
 *    that backward): the CPU backend runs it as loops, far below the GEMM
 *    curve.
 *  - mem_bw_Bps: out = a + b over 16 MiB arrays (12 bytes per element).
 *  - vector_flops: GELU (tanh) over one micro-batch's MLP activations
 *    (seq x ffn: cache-resident, as in training), counted as the proxy
 *    graph counts it (20 FLOPs per element); the cost model charges a
 *    backward twice the forward's vector FLOPs, so the rate is fitted to
 *    forward + backward: 3*20n / (t_fwd + t_bwd).
 *  - then, for a model the executor trains, the in-step phase
 *    (profile_step.c, issue 15) refits matmul_flops, gemm_fwd_scale, the
 *    attention rates, vector_flops, vector_bwd_flops and mem_bw_Bps to the
 *    model's own training step (its GEMMs with their weights out of cache,
 *    its non-GEMM ops on its data, its optimizer step); the isolated
 *    figures above stay the GEMM curve's shape and are reported.
 *  - launch_s: median time of a one-element kernel call.
 *  - MPI p2p ping-pong (8 B .. 4 MiB): alpha = one-way time of the
 *    smallest message, beta = the largest message / (its time - alpha);
 *    intra-node between rank 0 and another rank of its node, inter-node
 *    with the first rank on another host.  No such pair: the other link
 *    copies the measured one (noted in "about"); one rank: a memcpy
 *    bandwidth and an MPI self-send latency.
 *  - MPI_Allreduce over all ranks, 4 KiB .. 4 MiB, compared with the cost
 *    model's prediction from the fitted links (reported, not fitted).
 *  - hwloc: packages (sockets), cores, memory; per rank its host and
 *    package, so gpus_per_node = ranks per node, max_nodes = hosts,
 *    mem_bytes = node memory / ranks per node.
 * Every rank measures at once (as ranks train at once), bound to its share
 * of cores as `merak run` binds them; rank 0 reports. */
#ifndef MERAK_PROFILE_H
#define MERAK_PROFILE_H

#include <mpi.h>

#include "merak/cluster.h"
#include "merak/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MK_PROF_MAX 256

typedef struct mk_prof_sample {
    double x, y, z;          /* meaning by table: gemm (d, FLOP/s, FLOPs), p2p/AR (bytes, s, model s) */
    int m, k, n;             /* gemm shape (tokens, in, out) */
    int kind;                /* gemm: 0 forward (y = x W^T), 1 input gradient, 2 weight gradient */
} mk_prof_sample_t;

typedef struct mk_profile {
    mk_cluster_t c;
    int ranks, nodes, ranks_per_node, packages, cores, threads;
    int kernel_threads;  /* the CPU kernels' pool (threads, at most the rank's cores) */
    int same_package;        /* ranks 0 and 1 on one package (socket) */
    int inter_measured, intra_measured;
    char host[64], cpu[96], note[512];
    double gemm_peak, gemm_fit_rate, gemm_fit_half, gemm_fit_rms;  /* fit, and its rms relative error */
    double gemm_fwd_scale;   /* forward GEMM time over the curve (fitted on the backward's) */
    double attn_rate, attn_bwd_rate; /* the backend's attention forward, backward, FLOP/s (graph's count) */
    /* in-step phase (src/profile/profile_step.c): per direction (forward,
       backward) and class (GEMMs, attention core, the rest), seconds per
       micro-batch of one sequence: measured in the step, and the cost
       model's on the isolated figures; step_mbs 0: not run */
    double step_meas[2][3], step_iso[2][3];
    double step_opt;         /* seconds of the optimizer step over the model's parameters */
    int step_mbs;
    mk_device_t iso;         /* the device as the isolated measurements gave it (before the fit) */
    int n_gemm, n_p2p, n_inter, n_ar;
    mk_prof_sample_t gemm[MK_PROF_MAX], p2p[32], inter[32], ar[32];
    double seconds;          /* wall time of the profile */
} mk_profile_t;

/* Collective over comm.  cfg: the model whose GEMM shapes to measure (NULL:
 * gpt-tiny's and a generic set).  quick: fewer repetitions (tests). */
int mk_profile_run(MPI_Comm comm, const mk_model_config_t *cfg, int quick, mk_profile_t *p);
/* The in-step phase (profile_step.c): the model's training step on every
 * rank, its GEMM, attention and other times fitted into p->c's rates (run
 * by mk_profile_run after the isolated figures).  Skipped (0, step_mbs 0)
 * without a model the executor trains or one too large for the rank's
 * memory.  Collective; 0 or -1. */
int mk_profile_step(MPI_Comm comm, const mk_model_config_t *cfg, int quick, mk_profile_t *p);
/* Write p->c as a cluster JSON with an "about" line, atomically (temporary
 * file, validated by mk_cluster_load, then renamed).  0 or -1. */
int mk_profile_write(const mk_profile_t *p, const char *path);

#ifdef __cplusplus
}
#endif
#endif
