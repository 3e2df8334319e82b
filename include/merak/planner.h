/* The planner: given a model, a cluster, a GPU count and a global batch,
 * find the fastest plan that fits.
 *
 * Search space: every dp*cp*pp*tp = N with tp inside a node and dividing the
 * heads, pp not above the blocks, cp 1 and, where the sequence is at least
 * 4096 tokens, every cp whose 2cp chunks of at least 512 tokens divide it
 * (planner.c cp_searched); micro-batch sizes (powers of two up to
 * max_mbs dividing the per-replica batch); schedules 1f1b, interleaved
 * (v = 2, 4 where defined), merak, zb-h1; recompute none, full,
 * selective, stage-aware (the smallest ratio on a 0.1 grid that fits) and
 * auto; sequence parallelism and TP overlap on and off where they apply;
 * ZeRO 0..3 over the whole DP group and (hybrid) a node's DP ranks where
 * that divides dp; uniform and compute partitioning.  The best plan is refined by
 * moving layers off its slowest stage while the simulated step drops.
 *
 * Branch and bound: every candidate gets a lower bound on its step time
 * (mk_sim_bound_step: pipeline fill + a stage's m micro-batches of
 * forward, backward and recompute at the simulator's own op durations +
 * drain, with the p2p sends; the DP stream and optimizer tails: no
 * schedule can beat it) and a closed-form
 * memory check; candidates are simulated in order of their bound until
 * the bound reaches the K-th best simulated step time.  Per-layer costs
 * are cached per (micro-batch, tp, cp, ep) and layout.  With MPI each
 * rank generates, checks and simulates every size-th (layout,
 * micro-batch, schedule) share of the space and the ranks' top-K lists are merged:
 * the top K of a union is the top K of the parts' top Ks, and candidate
 * indices (ties) do not depend on the split, so the answer is the same as
 * on one rank.  While they search the ranks share their K best step times
 * (opts.share): each prunes at the K-th best of all, not of its own. */
#ifndef MERAK_PLANNER_H
#define MERAK_PLANNER_H

#include "merak/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mk_planner_progress;

/* The schedules searched by default: every one but gpipe and the merak
 * variants' ablations (merak-pre, merak-last). */
#define MK_PLANNER_SCHEDULES                                                                            \
    (1u << MK_SCHED_1F1B | 1u << MK_SCHED_INTERLEAVED | 1u << MK_SCHED_MERAK | 1u << MK_SCHED_ZB_H1 |  \
     1u << MK_SCHED_LOOPED_BFS | 1u << MK_SCHED_ZB_H2 | 1u << MK_SCHED_ZB_V | 1u << MK_SCHED_DUALPIPEV)

typedef struct mk_planner_opts {
    int gpus, gbs;
    mk_dtype_t dtype;
    int top;                  /* K plans to return (default 5) */
    unsigned sched_mask;      /* bits 1u << mk_sched_kind_t; 0: MK_PLANNER_SCHEDULES */
    unsigned recompute_mask;  /* bits 1u << mk_recompute_kind_t; 0: all but explicit */
    int seqpar, tp_overlap, zero; /* -1 search on and off (zero: 0..3), else fixed (tp_overlap: the level
                                     used when on) */
    int zero_max;             /* zero -1: stages 0..zero_max (default 3) */
    int zero_hybrid;          /* -1 search ZeRO over the whole DP group and (where it divides dp) a
                                 node's DP ranks; 0 the whole group only; 1 the node's only */
    int max_pp;               /* 0: any; else pipeline stages at most (1: the fsdp baseline) */
    int max_tp, max_cp;       /* 0: any; else tensor / context parallel size at most (the why's
                                 families: 1) */
    unsigned partition_mask;  /* 1 uniform, 2 parameters, 4 compute; 0: uniform|compute */
    int max_mbs;              /* 0: 8 */
    int exhaustive;           /* simulate every candidate that fits (tests) */
    int refine;               /* refine the best plan's partition (default on: -1) */
    double moe_imbalance;     /* MoE: every candidate's --moe-imbalance (0: 1, balanced) */
    int moe_deepep;           /* MoE: every candidate's dispatcher (mk_plan_t.moe_deepep) */
    mk_attn_backend_t attention; /* every candidate's attention core (auto: settled against the
                                    cluster once, mk_plan_attention), but flash for an unfused one
                                    under CP, which runs fused kernels only; mk_planner_opts_init:
                                    unfused, merak plan: auto (unfused asked: no CP searched) */
    mk_xent_t cross_entropy;  /* every candidate's loss implementation (memory; mk_xent_t) */
    int eager;                /* every candidate's element-wise kernels eager (mk_plan_t.eager) */
    mk_fp8_recipe_t fp8_recipe; /* every fp8 candidate's scaling recipe (mk_plan_t.fp8_recipe) */
    int optimizer_offload;    /* every candidate offloads its optimizer (mk_planner_search also
                                 sets it for a second search when nothing fits) */
    int grad_reduce_dtype;    /* every candidate's mk_plan_t.grad_reduce_dtype (0: the dtype's default) */
    int cp_comm;              /* the cp_comm (mk_cp_comm_t) of every candidate with cp > 1 (0: p2p) */
    int moe_a2a_overlap;      /* every candidate Megatron-Core can run so (mk_plan_moe_a2a_overlap_ok)
                                 overlaps its EP all-to-alls (mk_plan_t.moe_a2a_overlap; a fixed knob) */
    int tp_comm_overlap;      /* every sequence-parallel candidate with tp > 1 runs Transformer Engine's
                                 TP communication overlap (mk_plan_t.tp_comm_overlap; a fixed knob,
                                 not searched) */
    int overlap_param_gather; /* every ZeRO-1 candidate gathers its weights behind the next step's
                                 forward (mk_plan_t.overlap_param_gather; a fixed knob) */
    int scatter_gather_p2p;   /* every candidate's pipeline sends scatter-gathered over TP
                                 (mk_plan_t.scatter_gather_p2p; a fixed knob) */
    int rank, size;           /* this process's share of the (layout, micro-batch, schedule) triples */
    /* A search split over ranks (size > 1) prunes with the K best step
       times of every rank, exchanged while the ranks search (merak plan:
       MPI_Iallreduce, cli_plan_mpi.c).  Called between candidates with
       this rank's K best so far (mine[0..n), ascending) and done = 1 once
       its queue is empty (or it failed): writes the K best of the ranks'
       contributions of the last completed exchange into all[0..top)
       (+inf past the known ones) and returns 1 when an exchange
       completed, 0 when none did yet, 2 when it completed with every
       rank done (the last: called with done = 1 until it returns 2), -1
       on error.  NULL: each rank prunes with its own K best. */
    int (*share)(void *ctx, const double *mine, int n, int done, double *all);
    void *share_ctx;
    /* progress of the whole search (this rank's share), called after each
       layout while generating, after each candidate while
       simulating, and once at the end */
    void (*progress)(void *ctx, const struct mk_planner_progress *p);
    void *progress_ctx;
} mk_planner_opts_t;

typedef struct mk_planner_progress {
    int phase;                /* 0 generating candidates, 1 simulating them, 2 done */
    long combos_done, combos; /* layouts generated, of this rank's share (the summary's "layouts":
                                 dp, cp, ep, pp, tp and micro-batch size) */
    long candidates;          /* generated so far (= the summary's "searched") */
    long settled;             /* of them, memory settled (the search settles a group of candidates
                                 only when its bound comes up: the rest stay unsettled) */
    long pruned_memory, duplicates; /* of the settled, over the memory limit; the same plan as another
                                       candidate (auto / stage-aware that came out as none or full, or
                                       a fixed policy's ZeRO-2 where ZeRO-1 fits) */
    long fit, simulated;      /* of the settled, fit (and are queued); simulated */
    long pruned_bound;        /* phase 2: candidates - pruned_memory - duplicates - simulated (the
                                 bound ruled them out, settled or not) */
    long left_at_most;        /* phase 1: candidates still to simulate at most (their bound, or
                                 their group's, is below the K-th best so far) */
    double elapsed_s;         /* since the search started */
} mk_planner_progress_t;

typedef struct mk_planner_entry {
    mk_plan_t plan;
    mk_sim_result_t res;
    long index;               /* candidate index (ties break on it) */
} mk_planner_entry_t;

typedef struct mk_planner_result {
    int n;                    /* entries in best[] (<= top) */
    mk_planner_entry_t *best; /* best first */
    /* candidates = pruned_memory + duplicates + simulated + pruned_bound; settled: those whose
       memory was settled (mk_planner_progress_t) */
    long candidates, simulated, pruned_memory, pruned_bound, layouts, settled, duplicates;
    long bound_violations;    /* simulated step below its bound (must stay 0; tests check) */
    double search_time_s, enumerate_time_s; /* all, and generating + checking candidates */
    /* when nothing fits: the candidate closest to fitting */
    int have_closest;
    mk_plan_t closest;
    mk_mem_breakdown_t closest_mem;
    int closest_stage;
    double closest_shortfall;
    long closest_index;       /* its candidate index (ties between ranks' closest go to the lower) */
    int offloaded;            /* nothing fit on the devices alone: these plans offload the optimizer
                                 to the host (the second search; mk_planner_search) */
} mk_planner_result_t;

MK_API void mk_planner_opts_init(mk_planner_opts_t *o);
/* Search.  Returns 0 (r->n may be 0 when no plan fits: see closest), or
 * -1 on bad input (no valid layout, undividable batch). */
MK_API int mk_planner_search(const mk_model_config_t *m, const mk_cluster_t *c, const mk_planner_opts_t *o,
                      mk_planner_result_t *r);
MK_API void mk_planner_result_free(mk_planner_result_t *r);
/* List r's plans in the tie order: equal steps by lower peak memory, then
 * fewer ranks in tp x cp, then fewer stages, then the candidate generated
 * first (mk_planner_search and mk_planner_merge end with it). */
MK_API void mk_planner_order_ties(mk_planner_result_t *r);
/* Merge entries (e.g. gathered from MPI ranks) into r's top K. */
MK_API void mk_planner_merge(mk_planner_result_t *r, const mk_planner_entry_t *e, int n, int top);
/* Refine a plan's partition (vpp 1): move a layer off the stage with the
 * most compute to a neighbour while the simulated step time drops.
 * Updates *e when it finds a faster plan that fits; returns the number of
 * moves kept, or -1 on error. */
MK_API int mk_planner_refine(const mk_cluster_t *c, mk_planner_entry_t *e, int max_moves);
/* Why best beats the runner-up: its lead, the knobs that differ ("ZeRO-0
 * vs ZeRO-1", or "same knobs"), and the step-time component that moved
 * most, in the best and the runner-up plan (seconds per step). */
typedef struct mk_planner_why {
    double faster_pct;
    char faster[32];        /* faster_pct in words, never rounded to 0: "1.5%", "0.033%" */
    char knobs[256];
    char tie[96];           /* equal steps: what the tie order decided by (mk_planner_order_ties:
                               "lower peak memory (68.7 vs 70.4 GiB)", ...); "" otherwise */
    const char *what;       /* "compute", "exposed DP communication", ... */
    const char *what_long;  /* the same, saying what the figure is */
    double a_s, b_s;
} mk_planner_why_t;
MK_API void mk_planner_why(const mk_planner_entry_t *a, const mk_planner_entry_t *b, mk_planner_why_t *w);
/* A lead in percent as the planner says it: one decimal, or two significant
 * digits where one decimal would print 0.0 ("0.033%"), "under 0.001%"
 * below that: a plan that is not a tie is never called 0.0% faster. */
MK_API void mk_planner_pct(double pct, char *buf, size_t n);
/* The runner-up the why compares best[0] with: the first of best[1..n)
 * that is not best[0] in effect (the same step, peak and knobs but for the
 * recompute policy's name, as stage-aware:0.1 and auto checkpointing the
 * same layers), or 1 where all are; -1 for n < 2.  twins says, into buf,
 * which of best[1..k) are best[0] in effect ("" for k 1). */
MK_API int mk_planner_runner_up(const mk_planner_entry_t *best, int n);
MK_API void mk_planner_twins(const mk_planner_entry_t *best, int k, char *buf, size_t n);
/* One line on why best[0] beats the runner-up (the JSON "why"). */
MK_API void mk_planner_explain(const mk_planner_entry_t *best, int n, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
