/* Executor internals shared by its files: exec.c (validation, optimizer,
 * data), exec_setup.c (setup, training loop, results), exec_stream.c (the
 * instruction interpreter), exec_tp.c, exec_trace.c, exec_ckpt.c,
 * exec_zero.c and exec_faults.c. */
#ifndef MERAK_EXEC_INTERNAL_H
#define MERAK_EXEC_INTERNAL_H

#include "exec/comm.h"
#include "merak/exec.h"
#include "merak/gpt.h"
#include "merak/walk.h"

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

/* ZeRO-1 (exec_zero.c): this DP rank's range [lo, hi) of the parameter
 * block (floats), its reduced gradients and Adam moments. */
typedef struct mk_exec_zero {
    int on;                /* --zero 1 with dp > 1 */
    size_t lo, hi;
    float *grads, *m, *v;  /* [max(hi - lo, 1)] */
    int *counts, *displs;  /* [dp] every DP rank's range size and start (floats) */
} mk_exec_zero_t;

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

/* One rank of a run (mk_exec_train). */
typedef struct mk_exec {
    const mk_exec_opts_t *o;
    mk_comm_t comm;
    mk_gpt_t *g;
    mk_gpt_run_t run;
    mk_sched_t *sched;
    mk_exec_pipeline_t pipe;
    mk_exec_dp_t dp;
    mk_exec_zero_t zero;
    mk_exec_tracing_t trace;
    mk_tp_slot_t tp_slots[MK_TP_SLOTS];
    double loss;           /* sum of token losses this step (head rank) */
    double step_loss;      /* mean loss over the global batch, after OPT_STEP */
    /* first step of this run (after --load) and the lr schedule's length:
       64-bit, as a checkpoint's step may be anything a 64-bit counter holds */
    int64_t step0, horizon;
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
void mk_exec_trace_start(mk_exec_t *e);
void mk_exec_trace_peak(mk_exec_t *e);
int mk_exec_trace_write(mk_exec_t *e, const char *path);
int mk_exec_tp_allreduce(void *ctx, float *buf, int n, int is_max);
/* exec_ckpt.c: collective; meta = {step, data position, lr decay steps},
 * each checked on load to lie in [0, INT64_MAX] */
int mk_exec_save(mk_exec_t *e, const char *path, int64_t step);
int mk_exec_load(mk_exec_t *e, const char *path, int64_t *meta);
/* exec_zero.c */
int mk_exec_zero_init(mk_exec_t *e);
void mk_exec_zero_free(mk_exec_t *e);
int mk_exec_zero_scatter(mk_exec_t *e);
int mk_exec_zero_gather(mk_exec_t *e);
void mk_exec_zero_get(mk_exec_t *e, int k, int kind, float *host);
void mk_exec_zero_set(mk_exec_t *e, int k, int kind, const float *host);
/* exec_faults.c: fault injection for the tests (MK_TEST_*; no-ops when unset) */
void mk_fault_rank_step(int rank, int64_t step);  /* MK_TEST_FAIL: exit(1) here */
int mk_fault_nan(int64_t step);                   /* MK_TEST_NAN: nonzero at that step */
void mk_fault_save_written(int written);          /* MK_TEST_SAVE_DIE_AFTER: _exit(3) */
int mk_fault_device_armed(void);                  /* MK_TEST_DEVICE_FAIL is set (on every rank) */
int mk_fault_device(int rank, int64_t step);      /* -1 (mk_error_set) at that rank and step */
/* exec.c */
mk_sched_t *mk_exec_build_sched(const mk_plan_ctx_t *ctx);
int mk_exec_opt_step(mk_exec_t *e, int64_t step, double *loss_out);
int mk_exec_dump_grads(mk_exec_t *e, const char *path);
void mk_exec_make_batch(mk_exec_t *e, int64_t step);

#endif
