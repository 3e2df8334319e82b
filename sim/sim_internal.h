/* Internal to the simulator (sim/): per-layer TP pieces, per-chunk costs
 * and memory (tp.c, sim_chunk.c, memory.c), and the state of one run that
 * the engine (sim.c), the instruction handlers (sim_step.c) and the result
 * (sim_result.c) share. */
#ifndef MERAK_SIM_INTERNAL_H
#define MERAK_SIM_INTERNAL_H

#include "merak/cost.h"
#include "merak/sim.h"
#include "merak/sim_search.h"
#include "merak/trace.h"
#include "merak/walk.h"
#include "sim/evq.h"

/* One layer as the TP sub-pipeline sees it (one direction). */
typedef struct mk_tpl {
    double c_full, c_half;     /* compute, whole micro-batch / one half */
    double row_full, row_half; /* the part after which the all-reduce starts (level 1) */
    double ar_full, ar_half;   /* one TP all-reduce (or RS+AG with SP), whole / half */
    int n_ar;                  /* all-reduces after this layer */
    /* context parallelism (sim_chunk.c cp_ring): the attention's K/V ring
       of n_kv steps, each a transfer of kv_* seconds overlapping one
       block's attention; ring_* = what it leaves exposed (compute-stream
       seconds added to the layer); kv_step: one step's span (full) */
    int n_kv;
    double kv_full, kv_half, ring_full, ring_half, kv_step;
    /* expert parallelism (sim_chunk.c ep_alltoall): an MoE layer's n_a2a
       all-to-alls over the EP group (dispatch and combine), each a2a_*
       seconds, blocking: the experts need the dispatched tokens, the next
       op the combined ones, so all of it lengthens the layer */
    int n_a2a;
    double a2a_full, a2a_half;
    int block;                 /* transformer block (-1 outside) */
    int layer;                 /* graph layer index */
} mk_tpl_t;

/* *t = twin layer's piece *from (or t itself), as layer l's (graph.h mk_layer_t.twin). */
static inline void mk_tpl_rename(mk_tpl_t *t, const mk_tpl_t *from, const mk_graph_t *g, int l)
{
    if (t != from) *t = *from;
    t->layer = l, t->block = g->layers[l].block;
}

/* What a layer's blocking communication adds to its compute: the CP ring's
 * exposed part and the EP all-to-alls, whole micro-batch / one half. */
static inline double mk_tpl_block_full(const mk_tpl_t *l) { return l->ring_full + l->n_a2a * l->a2a_full; }
static inline double mk_tpl_block_half(const mk_tpl_t *l) { return l->ring_half + l->n_a2a * l->a2a_half; }

/* kind 0: a TP collective; 1: one K/V step of the CP ring; 2: an EP all-to-all. */
typedef void (*mk_tp_emit_fn)(void *ctx, int kind, double start, double dur, int layer);

/* Run layers [0, n) through the TP sub-pipeline of the given overlap
 * level; end[i] (optional) receives the time at which everything up to
 * layer i is complete (compute and comm), measured from 0.  Returns the
 * total; *comm receives the summed comm time. */
double mk_tp_run(const mk_tpl_t *L, int n, int level, double *end, double *comm, mk_tp_emit_fn emit,
                 void *ctx);

/* Static per-stage figures of a plan (one TP rank). */
typedef struct mk_stage_static {
    double params;     /* P on one TP rank (tied copy included) */
    double weights, grads, optimizer, buffers;
    double gathered;          /* ZeRO-3: weights gathered whole while a layer computes */
    double grad_comm_bytes;   /* gradients reduced over DP (comm dtype) */
    double tied_bytes;        /* tied embedding gradient (first/last stage) */
    double expert_params;     /* of params: the routed experts this EP rank holds (E/ep per layer) */
    double fp8_params;        /* fp8 plans: linear-layer parameters (one TP rank), whose FP8
                                 copy and transpose TE keeps beside the bf16 weights */
    double host_bytes;        /* optimizer CPU offload: this rank's optimizer state and fp32
                                 gradient copy in host memory (0 without offload) */
} mk_stage_static_t;

/* Bytes per parameter of each kind for the plan. */
void mk_sim_param_bytes(const mk_plan_t *p, double *w, double *gr, double *opt);
int mk_sim_expert_zero_group(const mk_plan_t *p);
/* Parameters of layers [l0, l1) on one TP rank. */
double mk_sim_layers_params(const mk_graph_t *g, int l0, int l1, int tp);
/* The routed experts' parameters of layers [l0, l1) on one TP rank (all E). */
double mk_sim_expert_params(const mk_graph_t *g, int l0, int l1, int tp);
/* Tied embedding parameters on one TP rank (0 if none). */
double mk_sim_tied_params(const mk_graph_t *g, int tp);
/* Layer l's parameters on one TP rank as ZeRO-3 moves them: gather 1 what
 * its compute gathers (the head of a tied model: the embedding too), 0
 * what its gradient reduce-scatters (the tied copy where the stage holds
 * one, pp > 1). */
double mk_sim_layer_zparams(const mk_plan_t *p, const mk_graph_t *g, int l, int gather);
int mk_sim_stage_static(const mk_plan_t *p, const mk_graph_t *g, int stage, const mk_sim_opts_t *o,
                        mk_stage_static_t *out);
/* Chunk (virtual stage k) activation figures for ck checkpointed layers:
 * stored bytes per micro-batch, the largest recompute group's rebuilt
 * activations (a block's checkpointed layers, see memory.c), and the
 * backward gradient buffers. */
void mk_sim_chunk_act(const mk_plan_t *p, const mk_graph_t *g, int k, int ck, double *stored, double *wmax,
                      double *gbuf);
/* The same for every count 0..n at once (n = mk_sim_chunk_nck, the
 * chunk's checkpointable layers): stored[0..n], wmax[0..n], scratch room
 * for n + 1 more; each the very value mk_sim_chunk_act gives (memory_act.c). */
int mk_sim_chunk_nck(const mk_plan_t *p, const mk_graph_t *g, int k);
/* What chunk k's B_W reads, held from a micro-batch's B_IN to its B_W
 * (the weight-gradient GEMMs' inputs and output gradients; memory_act.c). */
double mk_sim_chunk_wstash(const mk_plan_t *p, const mk_graph_t *g, int k);
/* What a B_IN of chunk k with ck checkpointed layers holds beyond the
 * slot's stored bytes and its gradient buffers, at its most (finished
 * layers' stash, the running group's rebuilt activations; memory_act.c). */
double mk_sim_chunk_bin_extra(const mk_plan_t *p, const mk_graph_t *g, int k, int ck);
/* Chunk k's backward gradient buffers alone (mk_sim_chunk_act's gbuf: no
 * checkpoint count changes them). */
double mk_sim_chunk_gbuf(const mk_plan_t *p, const mk_graph_t *g, int k);
void mk_sim_chunk_act_all(const mk_plan_t *p, const mk_graph_t *g, int k, double *stored, double *wmax,
                          double *gbuf, double *scratch);
/* The loss's forward scratch on chunk k: bytes live beside the stored
 * activations while the softmax of the logits runs (0 on a chunk without
 * the loss; memory.c). */
double mk_sim_chunk_fscratch(const mk_plan_t *p, const mk_graph_t *g, int k);
/* `auto` (memory.c, memory_auto.c): the closed-form first guess (per stage
 * the fewest k whose mk_sim_stage_memory fits, the most when none does);
 * stage s's most checkpointable layers in a chunk; its counts set to k per
 * chunk (capped at the chunk's), 1 if any changed. */
int mk_sim_closed_guess(const mk_cluster_t *c, mk_plan_t *p, const mk_graph_t *g, const mk_sim_opts_t *o,
                        const int *layers);
int mk_sim_stage_nmax(const mk_plan_t *p, const int *layers, int s);
int mk_sim_set_stage_ckpt(mk_plan_t *p, const int *layers, int s, int k);
/* --recompute selective-op: the share of op i's (of layer l) output its
 * policy keeps in the forward (0 to 1; opsac.c). */
double mk_sim_opsac_kept(const mk_graph_t *g, int l, int i);
/* Host offload (offload.c): activation offload's layers and the bytes
 * chunk k sends to the host per micro-batch (one TP rank); the optimizer
 * term moved to out->host_bytes (o bytes a parameter for the optimizer);
 * the CPU optimizer step of `local` parameters, seconds; the activation
 * copies' exposed time added to chunk c's F, B and B_IN. */
int mk_sim_act_offloaded(const mk_plan_t *p, const mk_graph_t *g, int l);
double mk_sim_act_offload_bytes(const mk_plan_t *p, const mk_graph_t *g, int k);
void mk_sim_offload_state(const mk_plan_t *p, double opt, mk_stage_static_t *out);
/* ... and the bytes checkpointed layer l keeps under it, one TP rank. */
double mk_sim_opsac_layer_bytes(const mk_graph_t *g, int l, int tp, double tsp);
/* The attention op o's backward scratch (unfused: the score gradient, one
 * K/V block at a time under CP; flash: FlashAttention-2's workspace) and
 * the loss op o's backward under --cross-entropy torch, bytes on one TP
 * rank (memory_scratch.c). */
double mk_sim_attn_scratch(const mk_graph_t *g, const mk_op_t *o, int tp, int cp);
double mk_sim_loss_torch_grads(const mk_graph_t *g, const mk_op_t *o, int tp);
/* One K/V block the CP ring passes (bytes on one TP rank; 0 without CP). */
double mk_sim_kv_block_bytes(const mk_plan_t *p, const mk_graph_t *g);
double mk_sim_cp_buffer_bytes(const mk_plan_t *p, const mk_graph_t *g);
double mk_sim_bucket_bytes(const mk_sim_opts_t *o);

/* ---- one run (mk_sim_run) ---- */

/* ZeRO-3 (zero.c): a chunk's layers in the order an op runs them.  Seconds. */
typedef struct mk_zseq {
    int n;
    double *dur;                /* [n] the layer's compute (its share of the TP sub-pipeline) */
    double *ag;                 /* [n] all-gather of its weights over the sharding group (0: none) */
    double *rs, *ar;            /* [n] reduce-scatter of its gradient; hybrid: the shard's
                                   all-reduce over the replicas (0: none) */
    int *layer;                 /* [n] graph layer */
    int *ckj;                   /* [n] B, B_IN: the layer's index among the chunk's checkpointable
                                   layers (its replay in z->ck), -1 if it has none */
} mk_zseq_t;

typedef struct mk_zero_chunk {
    mk_zseq_t f, b, bi, bw;     /* F, B, B_IN, B_W (B_W gathers nothing) */
    mk_zseq_t ck;               /* the checkpointable layers: R, and the replay of a recomputing B */
} mk_zero_chunk_t;

/* The costs of one chunk (virtual stage k), built once per run (sim_chunk.c).
 * Seconds per micro-batch on one representative rank; bytes on one TP rank. */
typedef struct mk_chunk_cost {
    int k, nl, nck;             /* virtual stage, layers, checkpointable layers */
    mk_tpl_t *fwd, *bwd, *bin;  /* [nl] per layer, bwd/bin in backward order */
    mk_tpl_t *ckf;              /* [nck] forward pieces of checkpointable layers */
    double f, f_comm;           /* forward, and the TP comm inside it */
    double b, b_comm;           /* backward (no recompute) */
    double bi, bi_comm;         /* B_IN: backward minus the weight-gradient GEMMs */
    double bw;                  /* B_W: those GEMMs */
    double sel;                 /* selective recompute: the attention cores' forward */
    double *rec, *rec_comm;     /* [nck+1] recompute of the first k checkpointable layers */
    double *stored, *wmax;      /* [nck+1] activation bytes kept / largest layer's, k checkpointed */
    double s_full, gbuf;        /* stored with nothing checkpointed; backward gradient buffers */
    double wstash;              /* held from B_IN to B_W (mk_sim_chunk_wstash) */
    double *binx;               /* [nck+1] a B_IN's bytes beyond stored and gbuf (mk_sim_chunk_bin_extra) */
    double fscr;                /* the loss's forward scratch (mk_sim_chunk_fscratch) */
    double gbytes;              /* ZeRO-2/3: gradient bytes one backward of the chunk makes */
    mk_zero_chunk_t *z;         /* ZeRO-3's per-layer pieces (NULL otherwise) */
} mk_chunk_cost_t;

/* Classes of compute-stream busy time (mk_sim_explain_t). */
enum { MK_SIM_FWD = 0, MK_SIM_BWD, MK_SIM_REC, MK_SIM_OPT, MK_SIM_CLASSES };

/* The DP stream's busy runs a stage keeps (dp_share.c): enough to cover
 * the collectives queued behind one compute op. */
#define MK_SIM_DP_RUNS 64

/* One pipeline stage's representative rank: its streams' clocks and what
 * it has used.  Where it is in its instruction stream, and every per-slot
 * rule (a forward's checkpoint count, whether R ran, what is in flight),
 * is the stream walker's (merak/walk.h). */
typedef struct mk_sim_stage {
    int rank, node;
    double now;                 /* compute stream's time (while blocked: when it blocked) */
    double busy;                /* compute time, s */
    double f_comp, f_a2a;       /* the last F's compute and exposed all-to-alls (an overlapped B_IN hides them) */
    double exposed[MK_COMM_KINDS], comm[MK_COMM_KINDS]; /* compute-stream waits on comm; comm time */
    double cls[MK_SIM_CLASSES]; /* busy seconds by class, comm waits inside them removed (explain.c) */
    double idle;                /* compute-stream gaps: waits on peers not counted as comm */
    double stat, stored, peak;  /* bytes: static, stored activations, peak so far */
    mk_mem_breakdown_t at_peak;
    mk_stage_static_t ss;
    double p2p_free, dp_free;   /* when the p2p and DP streams are free */
    double dp_runs[MK_SIM_DP_RUNS][2]; /* the DP stream's last busy runs [start, end) (dp_share.c) */
    int dp_nruns;               /* runs kept so far (a ring past MK_SIM_DP_RUNS) */
    double pg_ag;               /* --overlap-param-gather: the weight all-gather issued at time 0 (s) */
    int pg_next;                /* the first chunk whose first forward has not waited for its buckets */
    double final_bytes;         /* gradient bytes the buckets of the last backward reduce (the
                                   stage's; ZeRO-2: that backward's chunk's) */
    double *mb_stored;          /* [m*vpp] bytes stored by slot mb*vpp+chunk */
    double *bucket_end;         /* [nb+1] when DP bucket k is reduced (-1: not launched) */
    int max_inflight;           /* micro-batch chunks with stored activations */
} mk_sim_stage_t;

/* sim_cache.c: per-layer pieces kept by a handle across its runs. */
typedef struct mk_layer_cache mk_layer_cache_t;
typedef struct mk_sim_state mk_sim_state_t;
double mk_sim_opt_offload_cost(const mk_sim_state_t *R, double local);
void mk_sim_act_offload_time(const mk_sim_state_t *R, mk_chunk_cost_t *c);
typedef struct mk_layer_caches {
    mk_layer_cache_t **e;
    int n, cap;
} mk_layer_caches_t;
/* The entry of run R's graph and layout (R->g, p, o and its groups set);
 * NULL when none can be made (out of memory, or the handle's cap). */
mk_layer_cache_t *mk_layer_cache_find(mk_layer_caches_t *C, const mk_sim_state_t *R);
void mk_layer_caches_free(mk_layer_caches_t *C);
/* Layer l's pieces in direction dir (0 forward, 1 backward, 2 B_IN), NULL if not kept yet. */
const mk_tpl_t *mk_layer_cache_piece(mk_layer_cache_t *e, int l, int dir);
void mk_layer_cache_put_piece(mk_layer_cache_t *e, int l, int dir, const mk_tpl_t *t);
/* mk_chunk_ops_fwd(R, l, attention) if kept (1, into *t), else 0. */
int mk_layer_cache_ops(mk_layer_cache_t *e, int l, int attention, double *t);
void mk_layer_cache_put_ops(mk_layer_cache_t *e, int l, int attention, double t);

struct mk_sim_state {
    const mk_cluster_t *c;
    const mk_plan_t *p;         /* checked, recompute resolved */
    const mk_graph_t *g;
    const mk_sim_opts_t *o;
    const mk_sched_t *sch;
    mk_sched_t *own;            /* sch when built here */
    mk_chunk_cost_t *ch;        /* [pp*vpp] by virtual stage k */
    mk_sim_stage_t *st;         /* [pp] */
    mk_evq_t q;
    mk_walk_t w;                /* the streams' walker, buffered sends (the sim drives it) */
    int ckpt_cap[MK_PLAN_MAX_VSTAGES]; /* [pp*vpp] at s*vpp+c: the chunk's checkpointable layers */
    double T;                   /* when the stage being run was resumed */
    long events;                /* instructions and transfers simulated */
    double *arrival, *xfer;     /* [mk_walk_n_keys] message arrival and transfer time */
    double *nic_free;           /* [nodes] when a node's NIC is free */
    int nodes, nb, V;           /* nodes, DP buckets, virtual stages pp*vpp */
    mk_group_t tpg, dpg, tiedg; /* dpg: the dp x cp ranks gradients are reduced over */
    mk_group_t epg, edpg, ezg;  /* the EP group (ep consecutive ranks of the stage), the
                                   tp x dp x cp / ep ranks an expert's gradient is reduced
                                   over (every ep-th), and ZeRO's expert sharding group
                                   (mk_sim_expert_zero_group of them) */
    mk_group_t cpg;             /* the CP ring (stride tp) */
    mk_group_t zg, rg;          /* ZeRO: the sharding group (dpg unless hybrid), the replicas */
    int zk, nrep;               /* their sizes: zk x nrep = dp x cp */
    mk_trace_t *tr;
    mk_layer_cache_t *lc;       /* the handle's per-layer pieces for this run (NULL: none) */
};

/* sim_chunk.c: the chunk's costs (needs R->c, p, g, o, tpg).  0 or -1. */
int mk_chunk_cost_build(const mk_sim_state_t *R, int k, mk_chunk_cost_t *c);
void mk_chunk_cost_free(mk_chunk_cost_t *c);
/* A compute op's duration (s) on chunk c: ck = the checkpointed layers
 * (F/F_PRE: its own, else its forward's), recomputes = B/B_IN replays the
 * forward first (both from the walker).  Sets *tpc (TP comm inside it, s)
 * and *transient (bytes held only while it runs). */
double mk_chunk_cost_time(const mk_chunk_cost_t *c, mk_instr_op_t op, int ck, int recomputes, int unit,
                          double *tpc, double *transient);
/* The pure compute inside that duration d as the TP sub-pipeline counts
 * it; the rest is exposed TP communication. */
double mk_chunk_cost_pure(const mk_chunk_cost_t *c, mk_instr_op_t op, int level, int recomputes, int ck, double d);
/* The recompute inside that op (R: all of it; B, B_IN: the replayed
 * forward and the selective attention cores), as the pure compute above
 * counts it, without its blocking communication.  Seconds. */
double mk_chunk_cost_rec(const mk_chunk_cost_t *c, mk_instr_op_t op, int level, int recomputes, int ck, double d);
/* The CP ring inside that op: its exposed seconds (part of the pure
 * compute above) and, in *comm, its transfer seconds. */
double mk_chunk_cost_ring(const mk_chunk_cost_t *c, mk_instr_op_t op, int level, int recomputes, int ck,
                          double *comm);
/* The same for the EP all-to-alls (all exposed: seconds both ways). */
double mk_chunk_cost_a2a(const mk_chunk_cost_t *c, mk_instr_op_t op, int level, int recomputes, int ck,
                         double *comm);

/* Layer l's TP sub-pipeline pieces in direction dir (0 forward, 1
 * backward, 2 B_IN), as mk_chunk_cost_build takes them (R->c, p, g, o and
 * the TP, CP and EP groups set; R->lc NULL: built, not kept). */
void mk_chunk_layer_piece(const mk_sim_state_t *R, int l, int dir, mk_tpl_t *t);

/* The forward time of layer l's attention cores (attention 1) or of its
 * linears and head (0: its weight-gradient GEMMs, B_W). */
double mk_chunk_ops_fwd(const mk_sim_state_t *R, int l, int attention);

/* dp_share.c: note the DP stream busy over [start, end); the DP time
 * inside [a, b) (the SMs its collectives hold: mk_cost_coll_sm_share). */
void mk_sim_dp_busy(mk_sim_stage_t *S, double start, double end);
double mk_sim_dp_within(const mk_sim_stage_t *S, double a, double b);

/* zero.c: ZeRO-2/3 pieces of chunk c (gbytes; ZeRO-3: z), after its TP
 * pieces.  0 or -1. */
int mk_zero_chunk_build(const mk_sim_state_t *R, mk_chunk_cost_t *c);
void mk_zero_chunk_free(mk_chunk_cost_t *c);
/* ZeRO-3: the duration of compute op `in` of chunk c on stage s started at
 * t0 with its layers' gathers and gradient reductions on the DP stream
 * (queued behind S->dp_free, which it moves; DP comm counted); *beside:
 * the DP time inside the windows its layers compute (dp_share.c). */
double mk_zero_op(mk_sim_state_t *R, int s, const mk_instr_t *in, const mk_chunk_cost_t *c, int ck, int rc,
                  double t0, double *beside);

/* What one backward of chunk k reduces with ZeRO-2/3 (gradient bytes on
 * one TP rank), and ZeRO-3's DP-stream seconds per micro-batch of it. */
double mk_zero_chunk_gbytes(const mk_sim_state_t *R, int k);
/* Layers' DP-stream floors by their parameter counts (zero.c layer_floor). */
#define MK_ZFLOOR_MEMO 8
typedef struct {
    int n, next;
    struct mk_zfloor { double pg, pr; int once, nt, nv, ne; double v; } e[MK_ZFLOOR_MEMO]; /* layer_tensors' counts */
} mk_zfloor_memo_t;
double mk_zero_chunk_dp_floor(const mk_sim_state_t *R, int k, mk_zfloor_memo_t *M);
/* --zero3-per-param-collectives: stage s's kept-gathered tensors (its
 * vectors) gathered after the optimizer step, seconds (zero.c). */
double mk_zero_persist_gather(const mk_sim_state_t *R, int s);

/* sim.c: a run's per-stage statics and DP bucket count (R->c, p, g, o, V
 * set; R->st allocated), and its communication groups.  0 or -1. */
int mk_sim_setup_statics(mk_sim_state_t *R);
void mk_sim_setup_groups(mk_sim_state_t *R);
/* The groups a layer's pieces read (mk_sim_setup_groups' tpg, cpg, epg). */
void mk_sim_layer_groups(const mk_cluster_t *c, const mk_plan_t *p, mk_group_t *tpg, mk_group_t *cpg,
                         mk_group_t *epg);
/* Stage s's first rank and its node. */
/* Stage s's first rank, and its node (inline: every p2p cost asks both
 * ends', a simulation hundreds of thousands of times). */
static inline int mk_sim_stage_rank(const mk_plan_t *p, int s)
{
    return s * mk_plan_dp_cp(p) * p->tp;
}

static inline int mk_sim_stage_node(const mk_cluster_t *c, const mk_plan_t *p, int s)
{
    return mk_sim_stage_rank(p, s) / (c->gpus_per_node > 0 ? c->gpus_per_node : 1);
}
/* One SEND_ACT (act 1) or SEND_GRAD from stage s to stage ds of the
 * activation entering virtual stage kd or the gradient of the one leaving
 * it: its transfer seconds on the p2p stream (*inter: the stages are on
 * different nodes); 0 under unit costs. */
double mk_sim_send_cost(const mk_cluster_t *c, const mk_plan_t *p, const mk_graph_t *g, const mk_sim_opts_t *o,
                        int s, int ds, int kd, int act, int *inter);

/* sim_step.c: the walker's hooks for the state's walker (ctx = R). */
void mk_sim_hooks(mk_sim_state_t *R, mk_walk_hooks_t *h);
/* Queue stage s to go on at time t.  0 or -1. */
int mk_sim_wake(mk_sim_state_t *R, int s, double t);
/* Note the memory of stage s with `transient` bytes in use. */
void mk_sim_mem_note(mk_sim_state_t *R, int s, double transient, double gathered);
void mk_sim_mem_trace(mk_sim_state_t *R, int s, double t);

/* explain.c: the step breakdown of a finished run (out->explain). */
void mk_sim_explain_fill(const mk_sim_state_t *R, double step, mk_sim_result_t *out);
/* One DP bucket of `bytes` of stage S: *red its reduction (all-reduce, or
 * ZeRO's reduce-scatter over the sharding group), *rep the hybrid
 * replicas' all-reduce of the shard (0 if none).  Seconds. */
void mk_sim_bucket_cost(const mk_sim_state_t *R, const mk_sim_stage_t *S, double bytes, double *red, double *rep);
/* OPT_STEP of stage S on the compute stream (returned) and, ZeRO-1/2, the
 * all-gather of the updated weights after it (*ag, else 0).  Seconds. */
double mk_sim_opt_cost(const mk_sim_state_t *R, const mk_sim_stage_t *S, double *ag);
/* --overlap-param-gather: stage s's weight all-gather issued on its DP
 * stream at time 0 (sim_step.c). */
void mk_sim_param_gather_start(mk_sim_state_t *R, int s);

/* sim_result.c: fill *out from a finished run of makespan `step` (s). */
void mk_sim_result_fill(const mk_sim_state_t *R, double step, mk_sim_result_t *out);

/* ---- the planner's lower bound (sim_bound.c, sim_bound_walk.c) ----
 * The candidates of a search share most chunks (a split's ranges recur
 * across schedules, recompute kinds and ZeRO variants), and mk_tp_run is
 * a pure function of (pieces, count, level): its results are kept in a
 * direct-mapped table keyed by exactly those and the bound's id (its
 * pieces), so a hit returns the very value a new run would.  The bounds
 * of one search share one table (mk_sim_bound_new_sharing; issue 35): a
 * search works through its layouts in turn, so the one in use has the
 * whole table, where 112 tables of their own (Llama-3.1-405B / 16,384)
 * each thrashed at 1,024 entries or took 7 MB at 4,096. */
#define MK_BOUND_MEMO_BITS 14
#define MK_BOUND_MEMO (1 << MK_BOUND_MEMO_BITS)
typedef struct {
    uint64_t key; /* 0: empty */
    unsigned id;  /* the bound's */
    double v;
} mk_bound_memo_t;

typedef struct {
    mk_bound_memo_t *e;  /* [MK_BOUND_MEMO] */
    unsigned next_id;
    int refs;            /* bounds using it: freed with the last */
} mk_bound_memo_tab_t;

struct mk_sim_bound {
    const mk_cluster_t *c;
    const mk_graph_t *g;
    mk_sim_opts_t o;
    int L, sp;
    mk_group_t tpg, cpg, epg;   /* the key (with sp): what the pieces read of the layout */
    mk_tpl_t *fwd, *bwd, *bin;  /* [L]: fwd by layer, bwd and bin reversed */
    mk_tpl_t *ckf;              /* [ckpos[L]] */
    int *ckpos;                 /* [L + 1] checkpointable layers before l */
    double *sel, *bw;           /* [L] attention cores' forward (selective), linears' (B_W) */
    mk_bound_memo_tab_t *memo;  /* chunk durations already run (run_memo), maybe shared */
    unsigned id;                /* its key in the memo */
};

/* One chunk's ops per micro-batch, as mk_chunk_cost_time gives them. */
typedef struct {
    double f, b, bi, bw, sel, rec;
} mk_chunk_ops_t;

/* Virtual stage k's ops at checkpoint count ck (mk_sim_bound_terms). */
void mk_sim_bound_chunk_ops(const mk_sim_bound_t *b, const mk_plan_t *p, int k, int ck, mk_chunk_ops_t *o);

/* Sums taken in another order than a run's clock adds them may round
 * above it: every term is shaved by 1e-12 (relative). */
#define MK_BOUND_SHAVE (1 - 1e-12)

#endif
