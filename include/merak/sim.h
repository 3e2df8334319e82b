/* The discrete-event simulator: a plan's instruction streams (sched.h)
 * interpreted on the cost model (cost.h) of a cluster, with a memory
 * tracker.  Silent, and cheap to call thousands of times (the planner
 * does): a mk_sim_t is a handle on a cluster, every run starts afresh.
 *
 * What is simulated: one representative rank per pipeline stage (DP
 * replicas and TP ranks are symmetric: their traffic is accounted as
 * concurrent flows sharing the node's NICs).  Each rank has a compute
 * stream (runs its instruction stream in order), a p2p stream (buffered
 * sends, serial), a TP stream (all-reduces inside F/B/R, sub-pipelined per
 * --tp-overlap, see sim/tp.c) and a DP stream (gradient buckets, started
 * during the stage's last backward; REDUCE_GRADS waits for its bucket).
 * Inter-node sends reserve the sending node's NIC (a shared resource,
 * FIFO), so contention between stages on one node shows.
 *
 * Memory per stage (mixed-precision Adam, 16-bit weights): weights 2P,
 * grads 4P (fp32: bf16 and fp8 plans by default; fp16's 2P, each as
 * mk_plan_grad_dtype says, which the DP reduction's volume follows too),
 * optimizer 12P (fp32 master weights and Adam moments); fp32 plans:
 * 4P + 4P + 8P; ZeRO over a group of k ranks divides the optimizer state
 * (1), the gradients (2) and the weights (3) by k (sim/memory.c
 * zero_state; ZeRO-3 adds `gathered`, two layers whole, while F/B/R run).  P = the stage's parameters on one TP
 * rank (split ops /t, replicated ops whole; the last stage holds a copy of
 * a tied embedding when pp > 1).  Activations: every in-flight micro-batch
 * keeps, per transformer block checkpointed, its input (mk_layer_ckpt_bytes
 * of its first checkpointed layer) and mk_layer_act_bytes for the rest;
 * working set: the largest recompute group's (block's) activations while
 * it is rebuilt, plus the backward's gradients of the layer that needs
 * most (its own and its widest op's); buffers: the p2p activation sent,
 * gradient received and gradient sent (no DP bucket: gradients are reduced
 * in place).  Details in sim/memory.c.
 *
 * Context parallelism (cp > 1, Megatron-LM's): a rank holds s/cp tokens of
 * every sequence, so every op (the attention core balanced by the 2cp
 * chunks) is 1/cp of the sequence's work, every activation, p2p tensor and
 * TP collective 1/cp of its bytes; the attention passes K/V blocks around
 * the CP group (cp-1 steps forward, K/V and dK/dV backward), each step's
 * transfer exposed only beyond its block's attention (sim/sim_chunk.c
 * cp_ring; MK_COMM_CP, the trace's cp stream); two K/V blocks are
 * buffers; gradients are reduced and ZeRO shards over dp x cp.
 *
 * Expert parallelism (ep > 1, MoE models): ep consecutive ranks of a stage
 * (tp fastest: MoE parallel folding, the experts whole on each) split
 * each MoE layer's experts (E/ep each: their weights, gradients and
 * optimizer state /ep); the layer dispatches and combines its tokens by
 * two all-to-alls forward and two backward over the EP group (pairwise
 * exchange, merak/cost.h; blocking: they lengthen the layer, MK_COMM_EP,
 * A2A.ep in the trace); the experts' GEMMs run at the busiest expert's
 * load, ep N k / E x min(moe_imbalance, capacity factor); expert gradients
 * are reduced over tp x dp x cp / ep ranks (every ep-th of the stage), dense
 * ones over dp x cp. */
#ifndef MERAK_SIM_H
#define MERAK_SIM_H

#include "merak/cluster.h"
#include "merak/plan.h"
#include "merak/sched.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MK_SIM_MAX_STAGES MK_PLAN_MAX_VSTAGES

/* MK_COMM_CP: context parallelism's K/V ring inside the attention (cp > 1);
 * MK_COMM_EP: expert parallelism's all-to-alls inside MoE layers (ep > 1) */
enum { MK_COMM_PP = 0, MK_COMM_TP, MK_COMM_DP, MK_COMM_CP, MK_COMM_EP, MK_COMM_KINDS };

typedef struct mk_sim_opts {
    int unit_costs;          /* the unit costs (F 1, B 2 (+1 recompute), R 1, B_IN 1 (+1),
                                B_W 1, everything else 0): for the scheduler's makespans */
    struct mk_trace *trace;  /* optional: events are written to it (merak/trace.h; caller opens/closes) */
    double bucket_bytes;     /* DP gradient bucket size (0: 64 MiB) */
    const mk_sched_t *sched; /* optional prebuilt streams for the plan (else built) */
} mk_sim_opts_t;

typedef struct mk_mem_breakdown {
    double weights, grads, optimizer, activations, working, buffers;
    double gathered;         /* ZeRO-3: the layer in use and the prefetched one, whole */
    double total;            /* their sum: the stage's peak */
} mk_mem_breakdown_t;

/* Where one stage's step goes (sim/explain.c): the stage whose compute
 * stream ends last (the critical one: its timeline spans the step; ties to
 * the busiest), its compute stream split into measured parts.  forward ..
 * optimizer: busy seconds by class without the comm waits inside them;
 * exposed: its compute-stream waits on each comm kind (TP/CP/EP inside
 * F/B/R, PP at RECV, DP at REDUCE_GRADS, REDUCE_TIED, the ZeRO gathers);
 * bubble = step - all of them, and idle_s the gaps measured in its timeline
 * (waits on peers, the tail after its last instruction): the two agree. */
typedef struct mk_sim_explain {
    int stage;
    double forward, backward, recompute, optimizer;
    double exposed[MK_COMM_KINDS];
    double bubble, idle_s;
    double flops_gpu;        /* model FLOPs one GPU of the stage performs in the step (recompute included) */
    double peak_flops;       /* the MFU denominator's device rate, FLOP/s */
} mk_sim_explain_t;

typedef struct mk_sim_result {
    int pp;
    double step_time_s, tokens_per_s, tflops_per_gpu, mfu;
    int flops_recompute;     /* 1: flops_per_iteration counts recomputed forwards (96-convention when full), else 72 */
    double flops_per_iteration;
    double bubble_fraction[MK_SIM_MAX_STAGES];   /* idle share of the step, compute stream */
    double peak_memory_bytes[MK_SIM_MAX_STAGES];
    mk_mem_breakdown_t mem[MK_SIM_MAX_STAGES];   /* breakdown at each stage's peak */
    int max_inflight[MK_SIM_MAX_STAGES];         /* micro-batch chunks with stored activations */
    double memory_limit_bytes;
    int fits, worst_stage;   /* worst_stage: highest peak (-1 if none) */
    double shortfall_bytes;  /* worst peak - limit when !fits, else 0 */
    double host_memory_bytes, host_limit_bytes; /* optimizer CPU offload: a node's host memory
                                 used (its GPUs x the most a rank keeps there) and the cluster's
                                 (fits also needs used <= limit); 0 without offload */
    double exposed_comm_s[MK_COMM_KINDS];    /* mean over stages of compute-stream waits on comm */
    double overlapped_comm_s[MK_COMM_KINDS]; /* the rest of that comm's time */
    long events;             /* instructions and transfers simulated */
    int zero, zero_group;    /* ZeRO stage in effect and its sharding group (mk_plan_zero_group) */
    int cp;                  /* the plan's context parallel size (MK_COMM_CP's figures when > 1) */
    int ep;                  /* the plan's expert parallel size (MK_COMM_EP's figures when > 1) */
    mk_sim_explain_t explain;
} mk_sim_result_t;

typedef struct mk_sim mk_sim_t;

MK_API void mk_sim_opts_init(mk_sim_opts_t *o);
/* A simulator for a cluster (copied; no other state is kept between runs).
 * NULL on allocation failure. */
MK_API mk_sim_t *mk_sim_new(const mk_cluster_t *c);
MK_API void mk_sim_free(mk_sim_t *s);

/* Simulate one training step of a resolved plan (mk_plan_resolve against
 * this simulator's cluster, with mk_sim_auto as its resolve_auto): the
 * plan, its graph and its scheduler spec come from ctx, checked there and
 * not again.  A plan that does not fit is a result (fits = 0).  Returns 0,
 * or -1 with mk_error_last() (streams that do not build).  Never prints. */
MK_API int mk_sim_run(mk_sim_t *s, const mk_plan_ctx_t *ctx, const mk_sim_opts_t *o, mk_sim_result_t *out);

/* Closed-form peak memory of one stage (no event simulation): weights,
 * grads, optimizer, buffers as in the tracker; activations = inflight x
 * per-micro-batch stored bytes of each chunk with ckpt[c] checkpointed
 * layers (ckpt NULL: the plan's recompute policy for full/none/selective,
 * or p->ckpt when has_ckpt); inflight < 0: the schedule's peak
 * (mk_sched_peak_inflight, merak/sched.h).  Returns 0 or -1. */
MK_API int mk_sim_stage_memory(const mk_cluster_t *c, const mk_plan_t *p, const mk_graph_t *g, int stage,
                        const int *ckpt, int inflight, const mk_sim_opts_t *o, mk_mem_breakdown_t *out);


/* Resolve recompute `auto`: per (stage, chunk) the fewest checkpointed
 * layers such that mk_sim_stage_memory fits the device (all layers where
 * nothing fits).  Sets p->ckpt and p->has_ckpt.  Returns 0 or -1. */
MK_API int mk_sim_resolve_auto(const mk_cluster_t *c, mk_plan_t *p, const mk_graph_t *g, const mk_sim_opts_t *o);
/* mk_sim_resolve_auto with the default options: the resolve_auto of
 * mk_plan_resolve_opts_t (merak/plan_ctx.h) on the simulator's paths. */
MK_API int mk_sim_auto(const mk_cluster_t *c, mk_plan_t *p, const mk_graph_t *g);

/* breakdown_s's parts, names ("forward", ..., "exposed_tp", ..., "bubble")
 * and seconds, in the order every output lists them.  Returns their count. */
#define MK_SIM_EXPLAIN_PARTS 10
MK_API int mk_sim_explain_parts(const mk_sim_explain_t *e, const char **names, double *secs);


/* The result as the `merak sim --json` object's text (sim/README.md "The
 * simulator"), the plan attached when p != NULL: a malloc'd string (free
 * it), NULL on failure. */
MK_API char *mk_sim_result_json_text(const mk_sim_result_t *r, const mk_plan_t *p);

#ifdef __cplusplus
}
#endif
#endif
