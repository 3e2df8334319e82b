/* `merak profile`, in-step phase (issue 15): the model's own training step
 * (the executor's GPT, one micro-batch of one sequence at a time: forward
 * through every layer, then backward, as one pipeline stage runs 1F1B) on
 * every rank at once, with its GEMMs and attention cores timed through a
 * wrapper of the backend.  A kernel inside a step runs on the step's data
 * and cache state, which the isolated sweeps do not reproduce (measured on
 * the 2-core EPYC: a layer's GEMM takes 1.2-1.5x its time repeated in
 * place, its weights having left L2 since the last micro-batch; GELU on
 * the step's pre-activations (|x| up to ~1.5) takes 1.45x its time on the
 * sweep's [-0.5, 0.5) data; the cost model's backward-vector = twice the
 * forward's holds for GELU bandwidth, not for its tanh-bound CPU loop).
 * The device's rates are then fitted so that the cost model, op by op on
 * the model's proxy graph, gives the step's measured times per class:
 *   GEMMs: matmul_flops scaled by predicted / measured backward GEMM time,
 *          gemm_fwd_scale by the forwards' (the isolated sweep's curve keeps
 *          its shape over the shapes the step does not run: tp shards);
 *   attention core: attention_flops, attention_bwd_flops = graph FLOPs /
 *          measured time;
 *   the rest of each layer (norms, GELU, residual adds, embedding, loss,
 *          the activations' allocation): vector_flops (forward) and
 *          vector_bwd_flops (backward) solved so that the cost model's sum
 *          over those ops equals the measured time;
 *   the optimizer step (gradient norm and AdamW over every parameter):
 *          mem_bw_Bps = the cost model's 28 bytes per parameter / its time
 *          (fitted first: memory-bound ops in the classes above use it).
 * Each figure is the minimum over the measured micro-batches (interference
 * from other jobs only adds), then the slowest rank's. */
#include "config.h"
#include "merak/cost.h"
#include "merak/gpt.h"
#include "merak/graph.h"
#include "merak/plan.h"
#include "merak/profile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { C_GEMM = 0, C_ATTN, C_REST, N_CLS };

/* The wrapper's state: time of the timed kernels in the current layer call. */
typedef struct {
    const mk_backend_t *in;
    double cls[N_CLS];
    int in_moe;  /* the layer running is an MoE layer: its experts' SwiGLU is the MoE op's */
} timer_t_;

static timer_t_ T_;  /* one per process: the profile runs one step at a time */

#define TIMED(k_, call)                                                                                     \
    do {                                                                                                    \
        double t0_ = MPI_Wtime();                                                                           \
        call;                                                                                               \
        T_.cls[k_] += MPI_Wtime() - t0_;                                                                    \
    } while (0)

static void t_lf(void *c, float *o, const float *i, const float *w, const float *b, int N, int IC, int OC)
{
    (void)c;
    TIMED(C_GEMM, T_.in->linear_fwd(T_.in->ctx, o, i, w, b, N, IC, OC));
}
static void t_lbi(void *c, float *d, const float *o, const float *w, int N, int IC, int OC)
{
    (void)c;
    TIMED(C_GEMM, T_.in->linear_bwd_in(T_.in->ctx, d, o, w, N, IC, OC));
}
static void t_lbw(void *c, float *dw, float *db, const float *o, const float *i, int N, int IC, int OC)
{
    (void)c;
    TIMED(C_GEMM, T_.in->linear_bwd_w(T_.in->ctx, dw, db, o, i, N, IC, OC));
}
static void t_af(void *c, float *o, float *a, const float *q, int B, int T, int NH, int KV, int hs, int window)
{
    (void)c;
    TIMED(C_ATTN, T_.in->attention_fwd(T_.in->ctx, o, a, q, B, T, NH, KV, hs, window));
}
static void t_ab(void *c, float *d, float *da, const float *o, const float *q, const float *a, int B, int T, int NH,
                 int KV, int hs)
{
    (void)c;
    TIMED(C_ATTN, T_.in->attention_bwd(T_.in->ctx, d, da, o, q, a, B, T, NH, KV, hs));
}

/* An MoE layer's dispatch and combine (the token gathers and scatters
 * around its experts, the weighted combine's row dots) and its experts'
 * SwiGLU are part of the cost model's MoE op, whose class is C_GEMM
 * (op_class); a dense MLP's SwiGLU is an op of its own (C_REST, by
 * subtraction). */
static void t_sf(void *c, float *out, const float *gu, int N, int F)
{
    (void)c;
    if (!T_.in_moe) T_.in->swiglu_fwd(T_.in->ctx, out, gu, N, F);
    else TIMED(C_GEMM, T_.in->swiglu_fwd(T_.in->ctx, out, gu, N, F));
}
static void t_sb(void *c, float *dgu, const float *dout, const float *gu, int N, int F)
{
    (void)c;
    if (!T_.in_moe) T_.in->swiglu_bwd(T_.in->ctx, dgu, dout, gu, N, F);
    else TIMED(C_GEMM, T_.in->swiglu_bwd(T_.in->ctx, dgu, dout, gu, N, F));
}
static void t_mg(void *c, float *dst, const float *src, const int *idx, const float *scale, int n, int C)
{
    (void)c;
    TIMED(C_GEMM, T_.in->moe_gather(T_.in->ctx, dst, src, idx, scale, n, C));
}
static void t_ms(void *c, float *dst, const float *src, const int *idx, const float *scale, int n, int C)
{
    (void)c;
    TIMED(C_GEMM, T_.in->moe_scatter(T_.in->ctx, dst, src, idx, scale, n, C));
}

/* Per layer and direction (0 forward, 1 backward): the minimum over
 * micro-batches of each class's time in it (C_REST: the layer's wall time
 * less its timed kernels). */
typedef struct {
    int n_layers;
    double (*t)[2][N_CLS];
    double opt;        /* the optimizer step: gradient norm and AdamW over every parameter */
    double n_params;
} step_times_t;

static void layer_done(step_times_t *st, int l, int dir, double wall, int first)
{
    double v[N_CLS] = {T_.cls[C_GEMM], T_.cls[C_ATTN], wall - T_.cls[C_GEMM] - T_.cls[C_ATTN]};
    for (int k = 0; k < N_CLS; k++)
        if (first || v[k] < st->t[l][dir][k]) st->t[l][dir][k] = v[k];
}

/* One micro-batch through every layer and back (the executor's order and
 * buffers: exec_stream.c forward / backward on one stage).  mbs: 0 is the
 * warm-up (not recorded). */
static int one_mb(mk_gpt_t *g, mk_gpt_run_t *run, mk_gpt_act_t *act, float *const ga[2], const int *tok,
                  const int *tgt, step_times_t *st, int mb)
{
    int L = g->n_layers;
    size_t NC = (size_t)run->B * g->T * g->C;
    double loss = 0;
    for (int l = 0; l < L; l++) {
        float *out = NULL;
        if (mk_gpt_layer_kind(g, l) != MK_GPT_HEAD) {
            if (!(out = mk_gpt_alloc(run, g, NC))) return -1;
            act[l + 1].in = out;
        }
        memset(T_.cls, 0, sizeof T_.cls);
        T_.in_moe = mk_gpt_layer_is_moe(g, l);
        double t0 = MPI_Wtime();
        if (mk_gpt_forward(g, run, l, &act[l], tok, tgt, out, 0, &loss) < 0) return -1;
        if (mb > 0) layer_done(st, l, 0, MPI_Wtime() - t0, mb == 1);
    }
    const float *dout = NULL;
    for (int l = L - 1; l >= 0; l--) {
        float *din = l > 0 ? (dout == ga[0] ? ga[1] : ga[0]) : NULL;
        memset(T_.cls, 0, sizeof T_.cls);
        T_.in_moe = mk_gpt_layer_is_moe(g, l);
        double t0 = MPI_Wtime();
        if (mk_gpt_backward(g, run, l, &act[l], MK_BWD_FULL, dout, din, tok, tgt) < 0) return -1;
        if (mb > 0) layer_done(st, l, 1, MPI_Wtime() - t0, mb == 1);
        dout = din;
    }
    return 0;
}

/* Build the model on this rank alone (tp 1, every layer), run n_mb + 1
 * micro-batches, record their minima in st.  0 or -1. */
static int run_steps(const mk_model_config_t *cfg, int n_mb, step_times_t *st, const mk_backend_t *cpu)
{
    mk_backend_t be = *cpu;  /* a copy with timed entries, never freed */
    T_.in = cpu;
    be.linear_fwd = t_lf, be.linear_bwd_in = t_lbi, be.linear_bwd_w = t_lbw;
    be.attention_fwd = t_af, be.attention_bwd = t_ab;
    if (cpu->moe_gather) be.moe_gather = t_mg, be.moe_scatter = t_ms;
    if (cpu->swiglu_fwd) be.swiglu_fwd = t_sf, be.swiglu_bwd = t_sb;
    int L = mk_gpt_n_layers(cfg), rc = -1;
    int *own = malloc(L * sizeof *own), *tok = malloc(2 * (size_t)cfg->seq * sizeof *tok);
    mk_gpt_act_t *act = calloc(L + 1, sizeof *act);
    mk_gpt_run_t run;
    memset(&run, 0, sizeof run);
    run.defer.h = -1;
    mk_gpt_t *g = NULL;
    float *ga[2] = {NULL, NULL};
    if (!own || !tok || !act) goto out;
    for (int l = 0; l < L; l++) own[l] = 1;
    if (!(g = mk_gpt_new(cfg, &be, 1, 0, own, 0, &run)) || mk_gpt_run_init(&run, g, 1) < 0) goto out;
    mk_gpt_init_params(g, 1234);
    run.loss_scale = run.grad_scale = 1.0f / cfg->seq;  /* no loss scaling */
    for (int i = 0; i < 2 * cfg->seq; i++) tok[i] = (int)((i * 2654435761u) % (unsigned)cfg->vocab);
    if (!(ga[0] = mk_gpt_alloc(&run, g, (size_t)g->T * g->C)) || !(ga[1] = mk_gpt_alloc(&run, g, (size_t)g->T * g->C)))
        goto out;
    for (int mb = 0; mb <= n_mb; mb++)
        if (one_mb(g, &run, act, ga, tok, tok + cfg->seq, st, mb) < 0) goto out;
    for (int rep = 0; rep < 3; rep++) { /* the executor's OPT (exec.c mk_exec_opt_step), whole block at once */
        double t0 = MPI_Wtime();
        be.sumsq(be.ctx, g->grads, g->n_params);
        be.adamw(be.ctx, g->params, g->grads, g->m, g->v, g->n_params, 1e-4f, 0.9f, 0.95f, 0.1f, 0.05f, 1e-8f, 0.0f,
                 1.0f);
        double t = MPI_Wtime() - t0;
        if (rep == 0 || t < st->opt) st->opt = t;
    }
    st->n_params = (double)g->n_params;
    rc = 0;
out:
    if (g) {
        for (int l = 0; l < L; l++) mk_gpt_act_clear(&run, g, l, &act[l]);
        mk_gpt_release(&run, g, ga[0], (size_t)g->T * g->C);
        mk_gpt_release(&run, g, ga[1], (size_t)g->T * g->C);
        mk_gpt_run_free(&run, g);
        mk_gpt_free(g);
    }
    free(own), free(tok), free(act);
    return rc;
}

/* The class whose timed kernels run op kind k: the linears, the LM head
 * and an MoE layer's experts go through the backend's linear entries
 * (gpt_moe.c: each expert's GEMMs are linear_fwd / linear_bwd_*, which
 * the wrapper times as GEMMs), the attention core through its own. */
static int op_class(mk_opkind_t k)
{
    return k == MK_OPK_LINEAR || k == MK_OPK_LM_HEAD || k == MK_OPK_MOE ? C_GEMM : k == MK_OPK_ATTENTION ? C_ATTN : C_REST;
}

/* The cost model's time of one class of the graph's ops (one micro-batch
 * of one sequence, tp 1, fp32), forward (bwd 0) or backward. */
static double class_time(const mk_cluster_t *c, const mk_graph_t *g, int cls, int bwd)
{
    double t = 0;
    for (int i = 0; i < g->n_ops; i++) {
        int ci = op_class(g->ops[i].kind);
        if (ci == cls) t += mk_cost_op_time(c, g, i, 1, 0, g->cfg.seq, MK_DTYPE_FP32, bwd);
    }
    return t;
}

static double attn_flops(const mk_graph_t *g, int bwd)
{
    double f = 0;
    for (int i = 0; i < g->n_ops; i++)
        if (g->ops[i].kind == MK_OPK_ATTENTION) f += bwd ? g->ops[i].bwd_flops : g->ops[i].fwd_flops;
    return f;
}

/* The vector rate (forward: vector_flops, backward: vector_bwd_flops) at
 * which the cost model's non-GEMM, non-attention ops take `meas` seconds:
 * their time falls as the rate rises (bisection over 1e6..1e15 FLOP/s, in
 * log).  0 when no rate gets there (memory- or launch-bound ops alone
 * exceed meas): the caller keeps the isolated figure. */
static double fit_vector(mk_cluster_t *c, const mk_graph_t *g, int bwd, double meas)
{
    double *rate = bwd ? &c->dev.vector_bwd_flops : &c->dev.vector_flops, keep = *rate, lo = 6, hi = 15;
    *rate = 1e15;
    if (class_time(c, g, C_REST, bwd) > meas) {
        *rate = keep;
        return 0;
    }
    for (int it = 0; it < 60; it++) {
        *rate = pow(10, (lo + hi) / 2);
        if (class_time(c, g, C_REST, bwd) > meas) lo = (lo + hi) / 2;
        else hi = (lo + hi) / 2;
    }
    return *rate;
}

/* Fit the device's rates to the measured class times m[dir][cls] (see the
 * top).  The GEMM scales are iterated: launch_s does not scale. */
static void fit_step(mk_cluster_t *c, const mk_graph_t *g, double m[2][N_CLS], const step_times_t *st)
{
    mk_device_t *d = &c->dev;
    /* the cost model's optimizer step moves 28 bytes per parameter at
       mem_bw (sim_step.c OPT_STEP); the CPU's AdamW loop is bound by its
       arithmetic (sqrt, divide), so the bandwidth that gives its time is
       the one measured in it */
    if (st->opt > 0) d->mem_bw_Bps = 28.0 * st->n_params / st->opt;
    for (int it = 0; it < 4; it++) {
        double kb = class_time(c, g, C_GEMM, 1) / m[1][C_GEMM];
        for (int i = 0; i < 3; i++) d->matmul_flops[i] *= kb;
        double kf = m[0][C_GEMM] / class_time(c, g, C_GEMM, 0);
        d->gemm_fwd_scale = (d->gemm_fwd_scale > 0 ? d->gemm_fwd_scale : 1.0) * kf;
    }
    if (m[0][C_ATTN] > 0) d->attention_flops = attn_flops(g, 0) / m[0][C_ATTN];
    if (m[1][C_ATTN] > 0) d->attention_bwd_flops = attn_flops(g, 1) / m[1][C_ATTN];
    fit_vector(c, g, 0, m[0][C_REST]);
    if (!d->vector_bwd_flops) d->vector_bwd_flops = d->vector_flops;
    fit_vector(c, g, 1, m[1][C_REST]);
}

int mk_profile_step(MPI_Comm comm, const mk_model_config_t *cfg, int quick, mk_profile_t *p)
{
    if (!cfg || mk_gpt_block_kind(cfg) < 0) return 0; /* no model the executor trains: isolated figures */
    mk_graph_opts_t o;
    mk_graph_opts_init(&o);
    o.dtype = MK_DTYPE_FP32, o.dropout = mk_plan_dropout(MK_DTYPE_FP32);
    mk_graph_t *g = mk_graph_build(cfg, &o);
    if (!g) return -1;
    /* params, grads and two Adam moments in fp32, within a quarter of the
       rank's memory (the step phase is skipped, and said so, otherwise) */
    if (16 * mk_graph_params(g) > p->c.dev.mem_bytes / 4) {
        mk_graph_free(g);
        return 0;
    }
    int L = mk_gpt_n_layers(cfg), n_mb = quick ? 2 : 8;
    step_times_t st = {L, calloc(L, sizeof *st.t), 0, 0};
    /* the CPU backend at the executor's thread count (mk_runtime_bind) */
    mk_backend_t *cpu = mk_backend_new("cpu");
    if (cpu) cpu->set_threads(cpu->ctx, p->kernel_threads);
    int rc = st.t && cpu ? run_steps(cfg, n_mb, &st, cpu) : mk_error_set("profile: out of memory");
    mk_backend_free(cpu);
    int all;  /* every rank agrees before the reduction */
    MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MIN, comm);
    double m[2][N_CLS] = {{0}};
    for (int l = 0; all == 0 && l < L; l++)
        for (int dir = 0; dir < 2; dir++)
            for (int k = 0; k < N_CLS; k++) m[dir][k] += st.t[l][dir][k];
    if (all == 0) MPI_Allreduce(MPI_IN_PLACE, m, 2 * N_CLS, MPI_DOUBLE, MPI_MAX, comm);
    if (all == 0) {
        for (int dir = 0; dir < 2; dir++)
            for (int k = 0; k < N_CLS; k++)
                p->step_meas[dir][k] = m[dir][k], p->step_iso[dir][k] = class_time(&p->c, g, k, dir);
        MPI_Allreduce(MPI_IN_PLACE, &st.opt, 1, MPI_DOUBLE, MPI_MAX, comm);
        p->step_opt = st.opt;
        fit_step(&p->c, g, m, &st);
        p->step_mbs = n_mb;
    }
    free(st.t);
    mk_graph_free(g);
    return all == 0 ? 0 : (rc < 0 ? -1 : mk_error_set("profile: the in-step phase failed on another rank"));
}
