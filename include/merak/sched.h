/* The shared pipeline scheduler: a plan's pipeline -> one ordered
 * instruction stream per stage.  The simulator and the executor both
 * interpret these streams, through the one stream walker (merak/walk.h);
 * nothing else decides the order of work.
 *
 * Semantics the streams assume (the verifier checks them):
 *  - Each stage runs its stream in order, one instruction at a time.
 *  - SEND_ACT / SEND_GRAD are buffered: they never block (the executor
 *    posts MPI_Isend and completes it later).  RECV_ACT / RECV_GRAD block
 *    until the matching send on the peer stage has been issued.
 *  - Sends and receives between a pair of stages match in issue order per
 *    (kind, micro-batch, chunk).
 *  - REDUCE_TIED is a collective between the first and the last stage,
 *    REDUCE_GRADS a collective among DP replicas of the same stage (engines
 *    may start a bucket's reduction as soon as its gradients are final in
 *    the last backward; the instruction marks where it must be complete),
 *    OPT_STEP ends the step.
 *  - F_PRE keeps only its input (all of the chunk's layers checkpointed);
 *    R recomputes that micro-batch's activations before its gradient
 *    arrives; B recomputes first what F checkpointed unless an R ran.
 *  - B_IN computes input gradients (recomputing first if needed), B_W the
 *    weight gradients of the same micro-batch (zero-bubble schedules).
 *  - A transfer between two chunks on the same stage (interleaved with
 *    pp = 1, the V's bottom) is local: no SEND/RECV, the stream order
 *    carries it.
 *  - A B_IN with overlap set runs together with the F just before it on
 *    the stage (another micro-batch and chunk): engines may hide each
 *    one's all-to-alls behind the other's compute (DualPipe); the
 *    executor runs them one after the other, the same results.
 *
 * Which semantics hold: every schedule is deadlock-free with buffered sends
 * (the verifier fails otherwise).  mk_sched_verify also runs the streams
 * with rendezvous sends (a send completes only when the peer is at the
 * matching receive) and reports the result in rendezvous_ok; engines that
 * use blocking sends must check it (1F1B-family steady states need the
 * paired send/recv that Megatron uses, so they are not rendezvous-safe).
 *
 * In flight: a micro-batch (per chunk) holds activations on a stage from its
 * F/F_PRE until the end of its B, or of its B_W in zb-h1 (B_W still needs
 * the stored layer inputs).  max_inflight is the largest count along the
 * stream order. */
#ifndef MERAK_SCHED_H
#define MERAK_SCHED_H

#include "merak/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MK_INSTR_LOAD = 0, MK_INSTR_F, MK_INSTR_F_PRE, MK_INSTR_R, MK_INSTR_B, MK_INSTR_B_IN,
    MK_INSTR_B_W, MK_INSTR_SEND_ACT, MK_INSTR_RECV_ACT, MK_INSTR_SEND_GRAD, MK_INSTR_RECV_GRAD,
    MK_INSTR_REDUCE_TIED, MK_INSTR_REDUCE_GRADS, MK_INSTR_OPT_STEP, MK_INSTR_COUNT
} mk_instr_op_t;

typedef struct mk_instr {
    mk_instr_op_t op;
    int mb;     /* micro-batch, -1 when not per micro-batch */
    int chunk;  /* model chunk on this stage (0 without interleaving) */
    int peer;   /* the other stage for p2p, -1 otherwise */
    int ckpt;   /* F/F_PRE: how many of the chunk's layers are checkpointed */
    int overlap; /* B_IN: runs overlapped with the F just before it on this stage, each one's
                    communication behind the other's compute (dualpipev's F&B pairs); 0 else */
} mk_instr_t;

typedef enum {
    MK_SCHED_GPIPE = 0, MK_SCHED_1F1B, MK_SCHED_INTERLEAVED, MK_SCHED_MERAK,
    MK_SCHED_MERAK_PRE, MK_SCHED_MERAK_LAST, MK_SCHED_ZB_H1, MK_SCHED_LOOPED_BFS,
    MK_SCHED_ZB_H2, MK_SCHED_ZB_V, MK_SCHED_DUALPIPEV, MK_SCHED_COUNT
} mk_sched_kind_t;

typedef enum {
    MK_RECOMPUTE_NONE = 0, MK_RECOMPUTE_FULL, MK_RECOMPUTE_SELECTIVE,
    MK_RECOMPUTE_STAGE_AWARE, MK_RECOMPUTE_AUTO, MK_RECOMPUTE_EXPLICIT,
    MK_RECOMPUTE_SELECTIVE_OP   /* torchtitan's op-level selective checkpointing (sim/opsac.c) */
} mk_recompute_kind_t;

typedef struct mk_recompute {
    mk_recompute_kind_t kind;
    double ratio;               /* stage-aware:R */
} mk_recompute_t;

typedef struct mk_sched_spec {
    mk_sched_kind_t kind;
    int pp;                     /* pipeline stages */
    int m;                      /* micro-batches per step (per DP replica) */
    int vpp;                    /* model chunks per stage (interleaved), else 1 */
    mk_recompute_t recompute;
    const int *layers;          /* [pp*vpp] checkpointable layers of (stage s, chunk c) at
                                   s*vpp+c; NULL: one each */
    const int *ckpt;            /* [pp*vpp] explicit checkpoint counts (EXPLICIT, or AUTO
                                   once resolved by the planner); NULL otherwise */
    int grad_buckets;           /* REDUCE_GRADS per stage (0 when dp = 1) */
    int tied;                   /* REDUCE_TIED on the first and last stage (pp > 1) */
} mk_sched_spec_t;

typedef struct mk_stream {
    int n, cap;
    mk_instr_t *v;
} mk_stream_t;

typedef struct mk_sched {
    mk_sched_spec_t spec;       /* pointers in it are not kept (NULL) */
    int *ckpt;                  /* [pp*vpp] resolved checkpoint counts of plain F */
    int *layers;                /* [pp*vpp] layers of (stage, chunk) (1 each if not given) */
    int layers_given;           /* spec.layers was given */
    int n_vstages;              /* pp*vpp virtual stages (mk_vstages) */
    int vshape;                 /* the V placement (mk_sched_vstage) */
    mk_stream_t *streams;       /* [pp] */
} mk_sched_t;

typedef struct mk_sched_report {
    int *max_inflight;          /* [pp] most micro-batches whose activations are held */
    double makespan;            /* under the unit costs (mk_sched_costs_unit) */
    int rendezvous_ok;          /* 1: also deadlock-free with rendezvous sends */
} mk_sched_report_t;

/* Costs of the compute ops for mk_sched_timeline.  recompute is added to a
 * B or B_IN that recomputes (its F had ckpt > 0 and no R ran). */
typedef struct mk_sched_costs {
    double f, b, r, b_in, b_w, recompute;
} mk_sched_costs_t;

/* The unit costs (src/sched/README.md "Pipeline schedules"): F = F_PRE = 1, B = 2, R = 1, B_IN = 1, B_W = 1,
 * recompute +1, everything else 0. */
MK_API void mk_sched_costs_unit(mk_sched_costs_t *c);

/* Start and end of every instruction (same indexing as the streams). */
typedef struct mk_sched_timeline {
    int pp;
    double **start, **end;      /* [pp][streams[s].n] */
    double *busy;               /* [pp] time spent in compute ops */
    double makespan;            /* last end over all stages */
} mk_sched_timeline_t;

/* Run the streams under buffered-send semantics: compute ops take their
 * cost, a RECV waits for its matching SEND's time, sends and other ops
 * take 0, REDUCE_TIED waits for both ends.  costs NULL: the unit costs.
 * Returns -1 (deadlock, unmatched receive) naming the stuck instruction. */
MK_API int mk_sched_timeline(const mk_sched_t *s, const mk_sched_costs_t *costs,
                      mk_sched_timeline_t *tl);
MK_API void mk_sched_timeline_free(mk_sched_timeline_t *tl);

/* Stage-aware recomputation: share of stage i's layers checkpointed, from
 * the first stage's share r over S stages: 1 - (1-r)(S-1)/(S-1-i) for
 * i < S-1, clamped at 0; 0 for the last stage. */
MK_API double mk_recompute_stage_ratio(double r, int S, int i);

/* Checkpoint count of a stage with n layers at ratio ri: its first
 * floor(n*ri) layers.  Without spec.layers (one layer of unknown size per
 * stage, as `merak sched` without --model) a stage counts 1 when ri > 0. */
MK_API int mk_recompute_count(int n, double ri);

/* Virtual stages of pp stages x vpp chunks (k = chunk*pp + stage): the one
 * place this product is taken, in 64 bits (mk_sched_check_size bounds it);
 * the plan (mk_plan_vstages) and mk_sched_t.n_vstages come from it. */
MK_API int64_t mk_vstages(int pp, int vpp);

/* Placement: the virtual stage chunk c of stage s runs (p stages).  The
 * loop (vshape 0: interleaved, looped-bfs) is chunk-major, k = c*p + s, so
 * the last stage's chunk c feeds the first stage's chunk c+1; the V
 * (vshape 1: zb-v, dualpipev; Qi et al. 2024) sends odd chunks back down,
 * k = c*p + p-1-s, so the last stage feeds itself and the first stage
 * holds the first and the last virtual stage.  Inline: the walker asks it
 * per instruction. */
static inline int mk_sched_vstage(int vshape, int p, int s, int c)
{
    return c * p + (vshape && (c & 1) ? p - 1 - s : s);
}

/* The stage that runs virtual stage k (mk_sched_vstage's inverse). */
static inline int mk_sched_vstage_stage(int vshape, int p, int k)
{
    int c = k / p, r = k - c * p;
    return vshape && (c & 1) ? p - 1 - r : r;
}

/* 1 if the first and the last virtual stage (the embedding and the head)
 * are on different stages: then a tied embedding has two copies, summed
 * by REDUCE_TIED.  pp > 1 but for the V-shaped schedules. */
MK_API int mk_sched_ends_apart(mk_sched_kind_t k, int pp, int vpp);

/* Is this op a compute op (F, F_PRE, R, B, B_IN, B_W)?  They are the
 * enum's range F..B_W (inline: every stream walk asks it per instruction). */
static inline int mk_instr_is_compute(mk_instr_op_t op)
{
    return op >= MK_INSTR_F && op <= MK_INSTR_B_W;
}


/* What a schedule's generator does, stated once (src/sched/sched_traits.c)
 * for the memory model, the planner's bound and candidate generator and
 * the verifier; tests/test_sched_traits.c checks each against the streams. */
typedef struct mk_sched_traits {
    int min_pp;         /* fewest stages it is searched with (2: a pipeline schedule; 1: also pp 1) */
    int interleaved;    /* runs vpp > 1 chunks per stage, and only those */
    int m_per_pp;       /* needs m a multiple of pp (Megatron's interleaved order) */
    int min_vpp;        /* fewest chunks a stage it builds with (0: 1; looped-bfs 2: one is gpipe) */
    int max_vpp;        /* most chunks (0: no limit; the V-shaped schedules exactly 2) */
    int vshape;         /* V placement (mk_sched_vstage): chunk 1 comes back down the stages */
    int min_m_per_pp;   /* fewest micro-batches per stage (dualpipev 2: m >= 2p), 0: none */
    int split_backward; /* B_IN + B_W per micro-batch and chunk instead of B */
    int replays_early;  /* its R (replayed forward) may run before the gradient arrives */
    int list_scheduled; /* its order comes from a clock (sched_zb_list.c): warm-up and tail have no
                           closed form; the peak in flight is at most its cap (the cap but in rare
                           mixed-cost cases), the tail at most that */
    int reads_counts;   /* its streams depend on the checkpoint counts' values and the chunks' layer
                           counts (Merak's: stage p-2's extra forward, F_PRE keeping every layer);
                           the others' only on which chunks checkpoint at all (a recomputing B_IN
                           is a tick longer on the list scheduler's clock) */
} mk_sched_traits_t;
MK_API const mk_sched_traits_t *mk_sched_traits(mk_sched_kind_t k);
/* Stage s of p (m micro-batches, v chunks): the forwards (F or F_PRE) it
 * runs before its first backward (B or B_IN); ckpts: whether the stage
 * checkpoints anything (merak's stage p-2 then runs one more); -1 for a
 * list-scheduled schedule (no closed form; nothing reads it but the peak). */
MK_API int mk_sched_warmup(mk_sched_kind_t k, int p, int m, int v, int s, int ckpts);
/* Its peak of (micro-batch, chunk) slots in flight: forwarded, not yet
 * released by B (or, split, by B_W), as the stream walker counts them
 * (list-scheduled: their cap, which the streams reach all but rarely, never
 * pass). */
MK_API int mk_sched_peak_inflight(mk_sched_kind_t k, int p, int m, int v, int s, int ckpts);
/* The zero-bubble list schedules' cap on slots in flight on stage s
 * (zb-h2, zb-v: sched_zb_list.c). */
MK_API int mk_sched_zb_cap(mk_sched_kind_t k, int p, int m, int v, int s);
/* The B_Ws it runs after its last B_IN (its tail; 0 unless split); for a
 * list-scheduled one the most it can be, its cap (a B_W is for a slot
 * held), which is all the planner's lower bound needs. */
MK_API int mk_sched_tail_bw(mk_sched_kind_t k, int p, int m, int s);

MK_API int mk_sched_kind_parse(const char *s, mk_sched_kind_t *out);
MK_API const char *mk_sched_kind_name(mk_sched_kind_t k);
MK_API int mk_recompute_parse(const char *s, mk_recompute_t *out);
MK_API const char *mk_instr_op_name(mk_instr_op_t op);

/* A step of pp stages x vpp chunks x m micro-batches is within
 * MK_MAX_SCHED_UNITS (merak/limits.h): checked in 64 bits before anything
 * is built.  Returns 0 or -1 naming the cap. */
MK_API int mk_sched_check_size(int pp, int vpp, int m);

/* Stream buffers kept between builds: a search builds streams thousands
 * of times, and fresh memory for each cost more in page faults than the
 * build itself (a third of `merak plan`'s time).  A pooled build takes its
 * streams' buffers from the pool and mk_sched_recycle gives them back, so
 * the pages are touched once.  Zero-initialise; at most MK_SCHED_POOL_MAX
 * buffers (two builds of MK_MAX_VSTAGES stages) are kept. */
#define MK_SCHED_POOL_MAX 1024
typedef struct mk_sched_pool {
    mk_stream_t *spare;         /* [n] buffers (their n is 0), cap slots */
    int n, cap;
} mk_sched_pool_t;

MK_API void mk_sched_pool_free(mk_sched_pool_t *pool);

/* Build the streams.  Returns NULL on a bad spec (p or m < 1, interleaved
 * with m not a multiple of p, ...) with mk_error_last() naming it. */
MK_API mk_sched_t *mk_sched_build(const mk_sched_spec_t *spec);
MK_API void mk_sched_free(mk_sched_t *s);
/* The same with the streams' buffers from and back to pool (NULL: none). */
MK_API mk_sched_t *mk_sched_build_pooled(const mk_sched_spec_t *spec, mk_sched_pool_t *pool);
MK_API void mk_sched_recycle(mk_sched_t *s, mk_sched_pool_t *pool);

/* A 128-bit hash of everything mk_sched_build reads of spec (its kind,
 * sizes, recompute, layers and ckpt arrays, buckets, tied): two specs
 * with the same hash build the same streams.  The one identity of a spec
 * for the caches that keep what was built from one (the planner's walk
 * programs, the memory search's stream hashes). */
MK_API void mk_sched_spec_hash(const mk_sched_spec_t *spec, uint64_t h[2]);

/* The checkpoint count of every plain F (ckpt[pp*vpp] at s*vpp+c, as
 * mk_sched_t.ckpt) that mk_sched_build would resolve from spec, without
 * building the streams.  Returns 0, or -1 on a bad spec as mk_sched_build. */
MK_API int mk_sched_ckpt_counts(const mk_sched_spec_t *spec, int *ckpt);

/* Completeness and deadlock freedom; fills rep (caller frees
 * rep->max_inflight with free()).  Returns 0, or -1 naming the violation. */
MK_API int mk_sched_verify(const mk_sched_t *s, mk_sched_report_t *rep);

#ifdef __cplusplus
}
#endif
#endif
