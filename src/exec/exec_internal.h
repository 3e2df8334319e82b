/* Executor internals shared by its files: exec.c (validation, optimizer,
 * data), exec_setup.c (setup, training loop, results), exec_stream.c (the
 * instruction interpreter), exec_tp.c, exec_trace.c, exec_ckpt.c,
 * exec_zero.c, exec_fsdp.c, exec_faults.c and exec_cp.c. */
#ifndef MERAK_EXEC_INTERNAL_H
#define MERAK_EXEC_INTERNAL_H

#include "exec/comm.h"
#include "merak/exec.h"
#include "merak/gpt.h"
#include "merak/walk.h"
#include "merak/safetensors.h"

#include <jansson.h>
#include <stdint.h>

/* One model chunk on this rank: layers [l0, l1) of virtual stage vs. */
typedef struct mk_chunk {
    int vs, l0, l1;
    mk_gpt_act_t *act;     /* [m * (l1 - l0)] */
    float **out;           /* [m] output waiting for SEND_ACT */
    float **gin;           /* [m] gradient at the output (RECV_GRAD) */
    float **gout;          /* [m] gradient at the input waiting for SEND_GRAD */
    int nbwd;              /* weight-gradient passes done this step */
} mk_chunk_t;

typedef struct mk_pending {
    MPI_Request req;
    float *buf;            /* released when the send completes */
    void *host;            /* what MPI sends: buf, or its host copy (mk_comm_stage) */
    size_t n;
    double ts;             /* traced: when it was posted */
    int op, mb, chunk;
} mk_pending_t;

/* A measured trace event (exec_trace.c); tid -1: memory counter (dur = bytes). */
typedef struct mk_xev {
    char name[24];
    int tid, stage, mb, chunk, layer;
    double ts, dur;
} mk_xev_t;

/* The pipeline side of this rank: its chunks, the micro-batches of a step
 * and the activation / gradient sends in flight. */
typedef struct mk_exec_pipeline {
    int n_micro;           /* m: micro-batches of this replica per step */
    int n_tokens;          /* N = mbs * seq: tokens of one micro-batch */
    int n_vstages;         /* pp * vpp */
    int n_chunks;          /* vpp: chunks (virtual stages) on this rank */
    int *bounds;           /* [n_vstages + 1] first layer of each virtual stage, then n_layers */
    mk_chunk_t *chunks;    /* [n_chunks] chunk v is virtual stage v * pp + pp_rank */
    int **tokens;          /* [n_micro] (n_tokens) token ids of this replica's micro-batches */
    int **targets;         /* [n_micro] (n_tokens) next-token targets */
    unsigned char **docs;  /* [n_micro] (n_tokens) 1 where a document starts (--reset-*), or NULL */
    float *grad_a, *grad_b;/* (n_tokens, C) ping-pong of the gradient between a chunk's layers */
    mk_pending_t *sends;   /* [n_sends] SEND_ACT / SEND_GRAD in flight; cap_sends allocated */
    int n_sends, cap_sends;
    mk_walk_t walk;        /* this stage's stream walker (exec_stream.c, one-stage mode) */
    int *ckpt_cap;         /* [pp * n_chunks] at stage * n_chunks + chunk: most layers an F
                              checkpoints (the chunk's layers but the embedding) */
    int64_t step;          /* the step mk_exec_step runs (OPT_STEP's lr and bias corrections) */
} mk_exec_pipeline_t;

/* Where a layer's data-parallel gradient reduction stands this step. */
enum { MK_DP_NOT_FINAL = 0, MK_DP_FINAL, MK_DP_STARTED };

/* Data parallelism without ZeRO: one nonblocking all-reduce per layer,
 * started once the layer's gradient is final, completed by polls or at
 * REDUCE_GRADS. */
typedef struct mk_exec_dp {
    MPI_Request *req;      /* [n_layers] the layer's reduction, MPI_REQUEST_NULL when none */
    int *state;            /* [n_layers] MK_DP_NOT_FINAL | MK_DP_FINAL (deferred) | MK_DP_STARTED */
    void **host;           /* [n_layers] host staging of a started reduction, or NULL (lazily allocated) */
} mk_exec_dp_t;

/* A ZeRO sharding unit (exec_zero.c): a range of whole tensors of the
 * local parameter block (this TP rank's slices, this stage's layers) cut
 * into `group` pieces of S = ceil(n / group) floats; sharding-group rank i
 * holds [min(i S, n), min((i + 1) S, n)).  ZeRO-1: one unit, the block;
 * ZeRO-2/3: one per layer; with the tied pair on two stages (pp > 1) the
 * word embedding and the head's copy a unit each, so both ends cut it alike. */
typedef struct mk_zunit {
    size_t off, n;         /* the range (floats) */
    size_t S, soff;        /* piece size; this rank's piece in the shard arrays */
    int layer;             /* the layer whose backward completes a micro-batch's gradient of it */
    int tied;              /* the tied word embedding (or its copy): REDUCE_TIED */
    int *cnt, *dsp;        /* [G] every piece's size and start in the unit */
    int G, gi;             /* its sharding group's size and this rank's index: ZeRO's group, or for
                              the routed experts' ranges of ZeRO-1 with EP their holders (exec_zero.c) */
    MPI_Comm c;            /* that group (MPI_COMM_NULL: G 1) */
    MPI_Comm rc;           /* hybrid ZeRO: the ranks holding the same piece in the other sharding
                              groups, whose sums it adds (MPI_COMM_NULL: none) */
    /* ZeRO-2/3 (exec_fsdp.c) */
    float *gbuf;           /* (n) the gradient accumulating, or NULL */
    float *gfly, *rfly;    /* its reduce-scatter in flight: input (n), this rank's summed piece (16-bit
                              gradients, exec_g16.c: their 16-bit values packed, mk_exec_floats16) */
    MPI_Request rs;        /* the reduce-scatter, then (hybrid, ar_on) the piece's all-reduce over the replicas */
    int ar_on;
    float *work;           /* ZeRO-3: (n) the gathered parameters, or NULL; 16-bit weights: (wn) the
                              widened ones (exec_p16.c), the others viewed at virt, their bits in hw */
    float *virt;
    size_t wn;
    int pins;              /* ZeRO-3: uses of work acquired and not yet released */
    MPI_Request ag;        /* ZeRO-3: the gather into work in flight (ag_on) */
    int ag_on;
    void *hg, *hr, *hs, *hw;  /* what MPI reads and writes for gfly, rfly, the piece sent, work
                              (host copies of device buffers, mk_comm_stage) */
    double rs_t0, ag_t0;   /* traced: their starts */
} mk_zunit_t;

/* ZeRO (exec_zero.c, exec_fsdp.c): this rank's pieces of the sharded
 * state, contiguous in unit order. */
typedef struct mk_exec_zero {
    int on;                /* the stage in effect (mk_plan_zero): 0 off, 1, 2, 3 */
    int group, gi, ri;     /* the sharding group's size, this rank's index in it, its replica (dp_rank / group) */
    MPI_Comm zsc, zrc;     /* the sharding group (dpc when it is the DP group); the replicas of
                              this piece (hybrid only, else MPI_COMM_NULL) */
    mk_zunit_t *u;
    int n_units;
    int *lu;               /* [n_layers + 1] ZeRO-2/3: layer l's units are [lu[l], lu[l + 1]) */
    int wte_unit;          /* ZeRO-2/3: the unit of tensor 0 (the head borrows it at pp 1), or -1 */
    size_t ns;             /* floats of this rank's pieces */
    float *params, *grads, *m, *v;  /* [max(ns, 1)]; params: ZeRO-3's, or 16-bit weights' masters;
                                       grads: ZeRO-1's is the full block's start (its in-place reduce-scatter) */
    int pre;               /* ZeRO-3: the layer gathered ahead by the last begin, or -1 */
    int fly;               /* ZeRO-2/3: the unit whose reduce-scatter is in flight, or -1 */
} mk_exec_zero_t;

/* The optimizer's ranges of the parameter block: all of it, or (ZeRO)
 * this rank's piece of a unit; element i's parameter, gradient and moments
 * at p[i - lo], g[i - lo], m[i - lo], v[i - lo]. */
typedef struct { size_t lo, hi; float *p, *g, *m, *v; } mk_opt_range_t;

/* Tracing (--trace, exec_trace.c): the events of the traced step, times from t0. */
typedef struct mk_exec_tracing {
    int on;                /* recording now */
    double t0;             /* MPI_Wtime() after the barrier that starts the traced step */
    mk_xev_t *ev;          /* [n] events; cap allocated */
    int n, cap;
    double *dp_t0;         /* [n_layers] start of a DP reduction, -1 when none (lazily allocated) */
    /* context of TP collectives (their trace events, the TP slots) */
    int cur_mb, cur_chunk, cur_layer;
} mk_exec_tracing_t;

/* A nonblocking TP all-reduce of sub-pipelined TP (exec_tp.c).  In flight
 * at once: two halves, plus one carried from an attention layer into its
 * MLP at level 2. */
#define MK_TP_SLOTS 4
typedef struct mk_tp_slot {
    MPI_Request req;
    float *buf;            /* [n] device or host */
    void *host;            /* what MPI reduces: buf, or its host copy */
    int n, used, done;     /* done: completion observed (traced then) */
    int mb, chunk, layer;  /* trace context at the start */
    double t0;             /* start (traced) */
} mk_tp_slot_t;

/* Context parallelism (exec_cp.c): the CP ring of this replica, stage
 * and TP rank, and its buffers (mbs sequences). */
typedef struct mk_exec_cp {
    int n, rank;           /* cp (1: none), this rank's place in the ring */
    MPI_Comm c;            /* the CP group, MPI_COMM_NULL when n == 1 */
    int next, prev;        /* ring neighbours in c */
    int gather;            /* --cp-comm-type allgather: every block gathered (all), no ring */
    float *a2a[6];         /* --cp-comm-type a2a (exec_cp_a2a.c): its staging and head-split buffers, else NULL */
    float *kv[2];          /* (mbs, T, 2 kv hs) the K/V block in hand and the one arriving; allgather:
                              kv[0] the cp blocks gathered, kv[1] NULL */
    float *dkv[3];         /* the same shape: dK|dV parts sent (alternating) and the sum arriving;
                              allgather: dkv[0] the cp blocks' parts before their reduce-scatter */
    float *m, *l;          /* (mbs, nh, T) forward: running max, sum; backward: rowsum(dO O) in m */
} mk_exec_cp_t;

/* Expert parallelism (exec_ep.c). */
typedef struct mk_exec_ep {
    int n, rank;           /* ep (1: none), this rank's place in the EP group (mk_exec_ep_index mod ep) */
    int fold;              /* MoE layers on this TP rank's rows (sequence parallelism, tp > 1): EP over tp x dp */
    int edp, edpn;         /* this rank's place in, and the size of, the group holding its experts */
    MPI_Comm c, dc;        /* the EP group; the group holding the same experts (MPI_COMM_NULL: size 1) */
    int zn, zi;            /* hybrid ZeRO: of dc, the ranks in this rank's sharding group (zdc) and
                              this rank's place there; zrc: those at its place in the other groups */
    MPI_Comm zdc, zrc;     /* (MPI_COMM_NULL: not hybrid) */
    MPI_Comm tc;           /* MoE: the ranks holding one micro-batch's tokens (CP, and TP with SP), or NULL */
} mk_exec_ep_t;

/* One rank of a run (mk_exec_train). */
/* 16-bit weights with fp32 masters (exec_p16.c). */
typedef struct mk_exec_p16 {
    int dt;                /* the run's 16-bit type (mk_dtype_t BF16 or FP16), 0: fp32 weights */
    uint16_t *store;       /* (n_params) the 16-bit weights, or NULL (ZeRO-3: gathered in 16 bits) */
    size_t *lo, *n;        /* [n_layers] layer l's range of the block */
    float **work;          /* [n_layers] its widened weights while pinned, or NULL */
    float **virt;          /* [n_layers] the address range its GEMMs' weights are viewed at, or NULL */
    int *pins;             /* [n_layers] passes pinning them */
    float *wte_virt;       /* the head's view of the embedding's wte at pp 1 while borrowed, or NULL */
    int wte_pins;          /* passes borrowing it */
} mk_exec_p16_t;

/* 16-bit gradient buffers (exec_g16.c): fp16 runs without
 * --accumulate-allreduce-grads-in-fp32 (and --grad-reduce-dtype bf16). */
typedef struct mk_exec_g16 {
    int dt;                /* the gradients' 16-bit type (mk_dtype_t), 0: fp32 gradient buffers */
    uint16_t *store;       /* the accumulated gradients, 16-bit (NULL: dt 0): the block's (n_params), or
                              ZeRO-2/3's pieces (zero.ns) */
    size_t store_n;
    float **work;          /* [n_layers] layer l's gradients widened while a backward pins them */
    int *pins;             /* [n_layers] passes pinning them */
    float *main;           /* the optimizer step's gradients, fp32: this rank's range (NULL between steps) */
    size_t main_n;
    MPI_Op sum;            /* the 16-bit sum, rounded after each addition (made: 1 once created) */
    int made;
} mk_exec_g16_t;

typedef struct mk_exec {
    const mk_exec_opts_t *o;
    mk_comm_t comm;
    mk_gpt_t *g;
    mk_gpt_run_t run;
    mk_sched_t *sched;
    mk_exec_pipeline_t pipe;
    mk_exec_dp_t dp;
    mk_exec_zero_t zero;
    mk_exec_p16_t p16;
    mk_exec_g16_t g16;
    mk_exec_tracing_t trace;
    mk_exec_cp_t cp;
    mk_exec_ep_t ep;
    mk_tp_slot_t tp_slots[MK_TP_SLOTS];
    double loss;           /* sum of token losses this step (head rank) */
    double step_loss;      /* mean loss over the global batch, after OPT_STEP */
    double step_aux;       /* MoE: the aux losses' share of the objective (run.aux summed), after OPT_STEP */
    mk_loss_scaler_t scaler; /* loss scaling (o->loss_scaler's state, moved by each step) */
    int64_t skipped;       /* steps of this run skipped for inf/NaN gradients */
    int64_t updates;       /* updates applied before this step, the checkpoint's included: the lr schedule's
                              and Adam's step (Megatron-LM's: a skipped step moves neither) */
    double lr;             /* the learning rate of the last OPT_STEP (applied, or skipped) */
    int step_skipped;      /* the last OPT_STEP skipped its update */
    /* first step of this run (after --load) and the lr schedule's length:
       64-bit, as a checkpoint's step may be anything a 64-bit counter holds */
    int64_t step0, horizon;
    int64_t warmup;               /* linear warm-up steps: o->warmup, or the default for the horizon */
    int eval;              /* this step measures the validation loss only */
    int load_unverified;   /* --load read a file without checksums (written elsewhere) */
    struct mk_data *data;  /* --data, or NULL (synthetic) */
} mk_exec_t;

/* exec_setup.c: a device error (sticky in the backend: mk_backend_t.status)
 * fails the run on every rank alike; collective over world, called after
 * each step and before a checkpoint is committed (step -1: outside a step).
 * One collective only where a rank can fail this way (a backend with status,
 * or MK_TEST_DEVICE_FAIL armed), the same on every rank.  0, or -1 on every
 * rank with the lowest failing rank's message. */
int mk_exec_device_ok(mk_exec_t *e, int64_t step);
/* exec_stream.c: the walker over this stage's stream (after the schedule
 * is built; 0 or -1), one step of it, polling and draining the sends. */
int mk_exec_stream_init(mk_exec_t *e);
void mk_exec_stream_free(mk_exec_t *e);
int mk_exec_step(mk_exec_t *e, int64_t step);
int mk_exec_poll(mk_exec_t *e);
int mk_exec_drain(mk_exec_t *e);
/* exec_tp.c: the nonblocking TP all-reduce of sub-pipelined TP */
void mk_exec_tp_setup(mk_exec_t *e);
/* exec_trace.c: trace events; also the blocking TP all-reduce (timed as a trace event) */
double mk_exec_now(const mk_exec_t *e);
void mk_exec_trace_ev(mk_exec_t *e, int tid, const char *name, double ts, int mb, int chunk, int layer);
void mk_exec_trace_mem(mk_exec_t *e);
/* a counter sample: name's value now */
void mk_exec_trace_count(mk_exec_t *e, const char *name, double value);
void mk_exec_trace_start(mk_exec_t *e);
void mk_exec_trace_peak(mk_exec_t *e);
int mk_exec_trace_write(mk_exec_t *e, const char *path);
int mk_exec_tp_allreduce(void *ctx, float *buf, int n, int is_max);
size_t mk_exec_act_floats(const mk_exec_t *e);
/* exec_ckpt.c: collective; meta = {step, data position, lr decay steps},
 * each checked on load to lie in [0, INT64_MAX] */
/* step < 0: the weights as a Hugging Face model directory at path (--save-hf). */
int mk_exec_save(mk_exec_t *e, const char *path, int64_t step);
/* exec.c: the learning rate after `updates` applied updates (warm-up, then cosine to min_lr) */
double mk_exec_lr_at(const mk_exec_t *e, int64_t updates);
/* exec_setup.c: one line to the log handler (mk_log) from rank 0 when the run logs (o->log_interval > 0) */
void mk_exec_log(const mk_exec_t *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* exec_ckpt.c: --load (collective); meta: step, data position, lr decay steps, steps skipped before it */
int mk_exec_load(mk_exec_t *e, const char *path, int64_t meta[4]);
/* exec_hf.c: tensors as Hugging Face names them (the checkpoints' names
 * too) and its model directories: the canonical tensors (all but the
 * head's tied copy), whether a weight is stored transposed (GPT-2's
 * Conv1D), tensor k's state `kind` (0 weight, 1 m, 2 v) as a file entry,
 * config.json's text, a shape as text */
int mk_hf_n_canon(const mk_gpt_t *g);
int mk_hf_transposed(const mk_gpt_tensor_t *t);
void mk_hf_entry(const mk_gpt_t *g, int k, int kind, mk_st_tensor_t *d);
void mk_hf_config_json(const mk_gpt_t *g, char *buf, size_t n);
const char *mk_hf_shape_str(const mk_st_tensor_t *t, char *buf, size_t n);
/* --save-hf DIR (rank 0): config.json, then the weights in shards of at
 * most o->hf_max_shard_bytes (Hugging Face's max_shard_size, 5 GB) written
 * whole or not at all: begin, put tensor k in order, commit (with
 * model.safetensors.index.json for more than one shard) or abort.
 * mk_hf_layout_ok: before training, DIR holds no file of the other layout
 * (a model.safetensors beside an index: the hub's loaders read the one). */
typedef struct {
    mk_st_writer_t **w;
    int n;
    int *of; /* tensor k's shard */
} mk_hf_out_t;
int mk_hf_layout_ok(const mk_exec_t *e, const char *dir);
int mk_hf_save_begin(mk_exec_t *e, const char *dir, mk_hf_out_t *o);
int mk_hf_save_put(mk_hf_out_t *o, int k, const float *data, size_t n);
int mk_hf_save_commit(const mk_exec_t *e, const char *dir, mk_hf_out_t *o);
void mk_hf_save_abort(mk_hf_out_t *o);
/* --load DIR (rank 0): DIR/config.json (checked against the run's model),
 * DIR/model.safetensors or the shards DIR/model.safetensors.index.json's
 * weight_map names (plain file names in DIR), every canonical weight with
 * its shape; the reader holding a tensor */
#define MK_HF_MAX_SHARDS 256
typedef struct {
    mk_st_reader_t *r[MK_HF_MAX_SHARDS];
    char name[MK_HF_MAX_SHARDS][256];
    int n;
    json_t *map; /* weight_map, or NULL: one file */
} mk_hf_src_t;
int mk_hf_open(mk_exec_t *e, const char *dir, mk_hf_src_t *s);
/* mk_hf_open's two halves, no run needed (tests/fuzz/fuzz_hfdir.c): DIR's
 * config.json as a model, and its safetensors (the index's shards) opened */
int mk_hf_dir_model(const char *dir, mk_model_config_t *cfg);
int mk_hf_dir_files(const char *dir, mk_hf_src_t *s);
int mk_hf_check(mk_exec_t *e, const mk_hf_src_t *s, const char *dir);
mk_st_reader_t *mk_hf_reader(const mk_hf_src_t *s, const char *tensor);
void mk_hf_close(mk_hf_src_t *s);
/* exec_zero.c: the units and shard arrays (after mk_gpt_new; collective
 * over dpc), the ranges of the optimizer, ZeRO-1's reduce-scatter and
 * gather at OPT_STEP, tensor k's sharded state (kind 0 params, 1 m, 2 v)
 * assembled on the host (collective over zsc) or set from it */
int mk_exec_zero_init(mk_exec_t *e);
void mk_exec_zero_free(mk_exec_t *e);
int mk_exec_zero_n_ranges(const mk_exec_t *e);
void mk_exec_zero_range(const mk_exec_t *e, int i, mk_opt_range_t *r);
int mk_exec_zero_scatter(mk_exec_t *e);
int mk_exec_zero_gather(mk_exec_t *e);
int mk_exec_zero_get(mk_exec_t *e, int k, int kind, float *host);
void mk_exec_zero_set(mk_exec_t *e, int k, int kind, const float *host);
/* exec_fsdp.c: ZeRO-2/3 during a step.  begin/end around each layer of a
 * pass (phase: MK_FSDP_FWD, _RECOMPUTE, or the backward's mode + _BWD;
 * next: the pass's next layer or -1): ZeRO-3 gathers the layer's
 * parameters (started ahead by the previous layer's begin) and starts the
 * next one's; around a backward, the layer's gradient buffers are made
 * and, once a micro-batch's gradient of a unit is complete, reduce-scattered.
 * poll completes what finished; reduce (REDUCE_GRADS, OPT_STEP) starts
 * the reductions left and waits for all; tied all-reduces the tied unit's
 * piece (REDUCE_TIED); after the update, ZeRO-2 gathers the parameters;
 * full_grads assembles the summed gradient block on the host (--dump-grads). */
enum { MK_FSDP_FWD = -2, MK_FSDP_RECOMPUTE = -1, MK_FSDP_BWD = 0 };
/* exec_cp_a2a.c: --cp-comm-type a2a's attention hooks and buffers (from mk_exec_cp_init). */
int mk_exec_cp_a2a_init(mk_exec_t *e);
void mk_exec_cp_a2a_free(mk_exec_t *e);
/* exec_p16.c: 16-bit weights (e->p16.dt set before mk_exec_zero_init):
 * init after ZeRO's (the store, the layers' ranges), refresh rounds the
 * masters into the store (after an update or a load; collective over the
 * sharding group with ZeRO-1/2), begin/end widen a layer's weights around
 * a pass that reads them (inside mk_exec_fsdp_begin/end).  Whether the
 * optimizer's parameters are pieces (ZeRO-3, or ZeRO-1/2 with 16-bit
 * weights), and whether a pass of layer l reads its weights. */
int mk_exec_p16_init(mk_exec_t *e);
void mk_exec_p16_free(mk_exec_t *e);
int mk_exec_p16_refresh(mk_exec_t *e);
int mk_exec_p16_begin(mk_exec_t *e, int l, int phase);
void mk_exec_p16_end(mk_exec_t *e, int l, int phase);
int mk_exec_zero_params_sharded(const mk_exec_t *e);
int mk_exec_reads_params(const mk_exec_t *e, int l, int phase);
/* ZeRO-3 with 16-bit weights, a unit's gather (exec_fsdp.c): begin makes
 * the buffers (the rounded piece to send, hs; the 16-bit unit, hw; the
 * widened tensors, work; the viewed range, virt), ready follows the
 * gather (widens, views), point sets (on) or clears the tensors' g->pw,
 * end frees what begin made. */
int mk_exec_p16_unit_begin(mk_exec_t *e, mk_zunit_t *u);
void mk_exec_p16_unit_ready(mk_exec_t *e, mk_zunit_t *u);
void mk_exec_p16_unit_point(mk_exec_t *e, const mk_zunit_t *u, int on);
void mk_exec_p16_unit_end(mk_exec_t *e, mk_zunit_t *u);
/* the floats an allocation of n 16-bit values takes (at least 1); the
 * bytes of this rank's model state: weights (16-bit and masters),
 * gradients (ZeRO-2/3: their pieces), Adam moments */
size_t mk_exec_floats16(size_t n);
size_t mk_exec_state_bytes(const mk_exec_t *e);
int mk_exec_fsdp_begin(mk_exec_t *e, int l, int next, int phase);
int mk_exec_fsdp_end(mk_exec_t *e, int l, int phase);
void mk_exec_fsdp_poll(mk_exec_t *e);
int mk_exec_fsdp_reduce(mk_exec_t *e);
int mk_exec_fsdp_tied(mk_exec_t *e);
int mk_exec_fsdp_gather(mk_exec_t *e);
float *mk_exec_fsdp_full_grads(mk_exec_t *e);
void mk_exec_fsdp_free(mk_exec_t *e);
/* exec_faults.c: fault injection for the tests (MK_TEST_*; no-ops when unset) */
void mk_fault_rank_step(int rank, int64_t step);  /* MK_TEST_FAIL: exit(1) here */
int mk_fault_nan(int64_t step);                   /* MK_TEST_NAN: nonzero at that step */
int mk_fault_grad_inf(int rank, int64_t step);    /* MK_TEST_GRAD_INF: nonzero at that rank and step */
void mk_fault_save_written(int written);          /* MK_TEST_SAVE_DIE_AFTER: _exit(3) */
int mk_fault_device_armed(void);                  /* MK_TEST_DEVICE_FAIL is set (on every rank) */
int mk_fault_device(int rank, int64_t step);      /* -1 (mk_error_set) at that rank and step */
/* exec_cp.c: the CP group and ring attention (after mk_gpt_new, before
 * mk_gpt_run_init: makes g->T the local rows; collective over dpc), its
 * end, and this rank's chunks of the micro-batches' whole sequences
 * (tokens and targets, in place) */
int mk_exec_cp_init(mk_exec_t *e);
void mk_exec_cp_free(mk_exec_t *e);
void mk_exec_cp_select(mk_exec_t *e);
/* The data-parallel replica of this rank: its DP-group rank over cp. */
static inline int mk_exec_replica(const mk_exec_t *e) { return e->comm.dp_rank / e->cp.n; }
/* exec_ep.c: the EP group and the run's all-to-all callbacks (before the
 * model is built), their end; the experts' gradient sum over the replicas
 * holding them (REDUCE_GRADS). */
int mk_exec_ep_init(mk_exec_t *e);
/* The place of the rank at DP rank d, TP rank t of a stage among the ranks EP groups are cut from:
   d, or folded d * tp + t (ep consecutive ones make a group). */
int mk_exec_ep_index(const mk_exec_t *e, int d, int t);
void mk_exec_ep_free(mk_exec_t *e);
int mk_exec_ep_reduce(mk_exec_t *e);
/* DeepSeek-V3's score biases: every rank's whole copy (gpt.h moe_bias) from
 * the masters after a load, collective over ZeRO's sharding groups; the
 * masters from the copy after its step. */
int mk_exec_moe_bias_pull(mk_exec_t *e);
void mk_exec_moe_bias_push(mk_exec_t *e);
/* exec.c */
mk_sched_t *mk_exec_build_sched(const mk_plan_ctx_t *ctx);
int mk_exec_opt_step(mk_exec_t *e, int64_t step, double *loss_out);
/* exec_g16.c: 16-bit gradient buffers (e->g16.dt: an fp16 run's
 * gradients without --accumulate-allreduce-grads-in-fp32, on a backend
 * that packs 16-bit values).  init after p16's (the store: the block's,
 * or ZeRO-2/3's pieces; the fp32 ones go); begin/end widen a layer's
 * gradients around a backward pass of it (inside mk_exec_fsdp_begin/end;
 * ZeRO-2/3's per-layer buffers are fp32 already) and round them back;
 * grad_buf is where the reductions find the gradients at element off (of
 * the block, or ZeRO-2/3's pieces), in which MPI type and sum; add sums
 * n 16-bit values into the store at off, rounded; widen makes the step's
 * fp32 gradients of the reduced store (the optimizer's range: g->grads,
 * or ZeRO's zero.grads) and clear ends them and zeroes the store. */
int mk_exec_g16_init(mk_exec_t *e);
void mk_exec_g16_free(mk_exec_t *e);
int mk_exec_g16_begin(mk_exec_t *e, int l, int phase);
void mk_exec_g16_end(mk_exec_t *e, int l, int phase);
typedef struct { void *p; MPI_Datatype t; MPI_Op op; size_t size; } mk_grad_buf_t;
mk_grad_buf_t mk_exec_grad_buf(const mk_exec_t *e, size_t off);
void mk_exec_g16_add(mk_exec_t *e, size_t off, const uint16_t *x, size_t n);
int mk_exec_g16_widen(mk_exec_t *e);
void mk_exec_g16_clear(mk_exec_t *e);
/* exec.c: 16-bit gradient buffers (o->grad_dtype and the backend's round16;
 * else nothing): layer l's owned gradients rounded after a backward added
 * to them (Megatron's fp16 main_grad accumulation), and at the optimizer
 * step the reduced sums (its fp16 all-reduce's result). */
void mk_exec_grads16_layer(mk_exec_t *e, int l);
int mk_exec_dump_grads(mk_exec_t *e, const char *path, const float *grads);
void mk_exec_make_batch(mk_exec_t *e, int64_t step);

#endif
