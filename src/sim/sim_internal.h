/* Internal to the simulator (src/sim/): per-layer TP pieces, per-chunk costs
 * and memory, shared by sim.c, tp.c and memory.c. */
#ifndef MERAK_SIM_INTERNAL_H
#define MERAK_SIM_INTERNAL_H

#include "merak/sim.h"

/* One layer as the TP sub-pipeline sees it (one direction). */
typedef struct mk_tpl {
    double c_full, c_half;     /* compute, whole micro-batch / one half */
    double row_full, row_half; /* the part after which the all-reduce starts (level 1) */
    double ar_full, ar_half;   /* one TP all-reduce (or RS+AG with SP), whole / half */
    int n_ar;                  /* all-reduces after this layer */
    int block;                 /* transformer block (-1 outside) */
    int layer;                 /* graph layer index */
} mk_tpl_t;

typedef void (*mk_tp_emit_fn)(void *ctx, double start, double dur, int layer);

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
    double grad_comm_bytes;   /* gradients reduced over DP (comm dtype) */
    double tied_bytes;        /* tied embedding gradient (first/last stage) */
} mk_stage_static_t;

/* Bytes per parameter of each kind for the plan. */
void mk_sim_param_bytes(const mk_plan_t *p, const mk_sim_opts_t *o, double *w, double *gr, double *opt);
/* Parameters of layers [l0, l1) on one TP rank. */
double mk_sim_layers_params(const mk_graph_t *g, int l0, int l1, int tp);
/* Tied embedding parameters on one TP rank (0 if none). */
double mk_sim_tied_params(const mk_graph_t *g, int tp);
int mk_sim_stage_static(const mk_plan_t *p, const mk_graph_t *g, int stage, const mk_sim_opts_t *o,
                        int dp_bucket, mk_stage_static_t *out);
/* Chunk (virtual stage k) activation figures for ck checkpointed layers:
 * stored bytes per micro-batch, the largest checkpointed layer's
 * activations, and the backward gradient buffers. */
void mk_sim_chunk_act(const mk_plan_t *p, const mk_graph_t *g, int k, int ck, double *stored, double *wmax,
                      double *gbuf);
int mk_sim_is_ckptable(const mk_graph_t *g, int l);
double mk_sim_bucket_bytes(const mk_sim_opts_t *o);

#endif
