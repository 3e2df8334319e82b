/* Executor internals shared by its files: exec.c (validation, optimizer,
 * data), exec_setup.c (setup, training loop, results), exec_stream.c (the
 * instruction interpreter), exec_tp.c, exec_trace.c, exec_ckpt.c,
 * exec_zero.c and exec_faults.c. */
#ifndef MERAK_EXEC_INTERNAL_H
#define MERAK_EXEC_INTERNAL_H

#include "exec/comm.h"
#include "merak/exec.h"
#include "merak/gpt.h"

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

typedef struct mk_exec {
    const mk_exec_opts_t *o;
    mk_comm_t comm;
    mk_gpt_t *g;
    mk_gpt_run_t run;
    mk_sched_t *sched;
    int m, N, nvs, vpp;
    int *bnd;              /* [nvs + 1] */
    mk_chunk_t *ch;        /* [vpp] */
    int **tok, **tgt;      /* [m] (N) token ids and targets of this replica's micro-batches */
    double loss;           /* sum of token losses this step (head rank) */
    double step_loss;      /* mean loss over the global batch, after OPT_STEP */
    mk_pending_t *pend;
    int npend, cappend;
    MPI_Request *dpreq;    /* [n_layers] DP reduction per layer, MPI_REQUEST_NULL when none */
    int *dpstate;          /* [n_layers] 0 not final, 1 final (deferred), 2 started */
    void **dphost;         /* [n_layers] host staging of a started DP reduction, or NULL */
    float *ga, *gb;        /* (N, C) gradient ping-pong */
    /* tracing (--trace): events of the traced step, times from t0 */
    int tracing;           /* recording now */
    double t0;             /* MPI_Wtime() after the barrier that starts the traced step */
    mk_xev_t *ev;
    int nev, capev;
    double *dpt0;          /* [n_layers] start of a DP reduction (traced) */
    int cur_mb, cur_chunk, cur_layer;  /* context of TP collectives (trace events, exec_tp.c slots) */
    /* first step of this run (after --load) and the lr schedule's length:
       64-bit, as a checkpoint's step may be anything a 64-bit counter holds */
    int64_t step0, horizon;
    int eval;              /* this step measures the validation loss only */
    int load_unverified;   /* --load read a file without checksums (written elsewhere) */
    /* ZeRO-1 (exec_zero.c): this DP rank's range [zlo, zhi) of the parameter
       block, its reduced gradients and Adam moments */
    int zero;
    size_t zlo, zhi;
    float *zg, *zm, *zv;
    int *zcounts, *zdispls;  /* [dp] shard sizes and starts */
    struct mk_data *data;    /* --data, or NULL (synthetic) */
} mk_exec_t;

/* exec_setup.c: a device error (sticky in the backend: mk_backend_t.status)
 * fails the run on every rank alike; collective over world, called after
 * each step and before a checkpoint is committed (step -1: outside a step).
 * One collective only where a rank can fail this way (a backend with status,
 * or MK_TEST_DEVICE_FAIL armed), the same on every rank.  0, or -1 on every
 * rank with the lowest failing rank's message. */
int mk_exec_device_ok(mk_exec_t *e, int64_t step);
/* exec_stream.c */
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
