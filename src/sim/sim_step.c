/* The instruction handlers: what each instruction of a stage's stream
 * does to the simulated time (see include/merak/sim.h for the streams).
 * mk_sim_step runs a stage's instructions in order, each through the
 * handler of its kind, until one takes time (the stage is queued again at
 * its end) or blocks (a RECV whose send is not issued, REDUCE_TIED before
 * its peer); the matching send or the peer queues it again.
 *
 *   F ... B_W    the chunk's cost (sim_chunk.c); the exposed part of the TP
 *                comm inside it counts as TP wait
 *   SEND_*       alpha + S/beta on the p2p stream (NIC reserved when the peer
 *                is on another node); RECV waits for the arrival
 *   REDUCE_TIED  all-reduce of the tied embedding gradient, first <-> last
 *   REDUCE_GRADS waits for its bucket: buckets of the stage's gradients
 *                become final during the stage's last backward (bucket k of
 *                nb at (k+1)/nb of it) and queue on the DP stream as ring/
 *                hierarchical all-reduces (reduce-scatters with ZeRO-1)
 *   OPT_STEP     launch + 28 bytes per local parameter / memory bandwidth
 *                (reads grad, master, m, v; writes master, m, v, weight),
 *                /d with ZeRO-1, then the ZeRO-1 all-gather of the weights
 *   LOAD         0 (input tokens are tiny)
 * Under opts.unit_costs everything but compute takes 0. */
#include "sim/sim_internal.h"

#include <stdio.h>

/* A handler: instruction `in` of stage s, starting at t = the stage's now.
 * Returns MK_SIM_DONE, MK_SIM_WAIT or -1. */
typedef int (*op_fn)(mk_sim_state_t *R, int s, const mk_instr_t *in, double t);

enum { EV_STAGE = 0 }; /* the one event kind: a stage may go on */

static int on_stage_event(void *ctx, const mk_ev_t *e)
{
    mk_sim_state_t *R = ctx;
    if (R->st[e->arg].blocked == MK_SIM_BLOCK_TIED) return 0; /* its peer runs it on (REDUCE_TIED) */
    return mk_sim_step(R, e->arg, e->t);
}

int mk_sim_wake(mk_sim_state_t *R, int s, double t)
{
    return mk_evq_push(&R->q, t, EV_STAGE, s, on_stage_event, R);
}

void mk_sim_mem_note(mk_sim_state_t *R, int s, double transient)
{
    mk_sim_stage_t *S = &R->st[s];
    double cur = S->stat + S->stored + transient;
    if (cur > S->peak) {
        S->peak = cur;
        S->at_peak.weights = S->ss.weights, S->at_peak.grads = S->ss.grads;
        S->at_peak.optimizer = S->ss.optimizer, S->at_peak.buffers = S->ss.buffers;
        S->at_peak.activations = S->stored, S->at_peak.working = transient;
        S->at_peak.total = cur;
    }
}

void mk_sim_mem_trace(mk_sim_state_t *R, int s, double t)
{
    if (R->tr) mk_trace_counter(R->tr, R->st[s].rank, "memory", t, R->st[s].stat + R->st[s].stored);
}

/* The compute-stream slice of an instruction in the trace. */
static void trace_instr(mk_sim_state_t *R, int s, const mk_instr_t *in, int stream, double t, double d)
{
    char name[48];
    mk_trace_instr_name(name, sizeof name, mk_instr_op_name(in->op), in->mb);
    mk_trace_complete(R->tr, R->st[s].rank, stream, name, t, d, s, in->mb, in->chunk, -1);
}

/* Where a message goes: (grad, mb, destination virtual stage), -1 if out of range. */
static int msg_key(const mk_sim_state_t *R, int stage, const mk_instr_t *in)
{
    int p = R->p->pp, k = in->chunk * p + stage, dst;
    int grad = in->op == MK_INSTR_SEND_GRAD || in->op == MK_INSTR_RECV_GRAD;
    if (in->op == MK_INSTR_SEND_ACT) dst = k + 1;
    else if (in->op == MK_INSTR_SEND_GRAD) dst = k - 1;
    else dst = k;
    if (in->mb < 0 || in->mb >= R->p->m || dst < 0 || dst >= R->V) return -1;
    return (grad * R->p->m + in->mb) * R->V + dst;
}

typedef struct emit_ctx {
    mk_sim_state_t *R;
    int s, mb, chunk;
    double base;
} emit_ctx_t;

static void emit_tp(void *ctx, double start, double dur, int layer)
{
    emit_ctx_t *e = ctx;
    const char *name = e->R->p->seqpar ? "RS+AG.tp" : "AR.tp";
    mk_trace_complete(e->R->tr, e->R->st[e->s].rank, MK_TRACE_TP, name, e->base + start, dur, e->s, e->mb,
                      e->chunk, layer);
}

/* The TP collectives inside a compute op, on the trace's TP stream. */
static void emit_compute_tp(mk_sim_state_t *R, int s, const mk_instr_t *in, const mk_chunk_cost_t *c, int rc,
                            int ck, double t0)
{
    if (!R->tr || R->p->tp <= 1) return;
    emit_ctx_t e = {R, s, in->mb, in->chunk, t0};
    int lvl = R->p->tp_overlap;
    if (in->op == MK_INSTR_R || ((in->op == MK_INSTR_B || in->op == MK_INSTR_B_IN) && rc))
        e.base += mk_tp_run(c->ckf, ck, lvl, NULL, NULL, emit_tp, &e);
    if (in->op == MK_INSTR_F || in->op == MK_INSTR_F_PRE) mk_tp_run(c->fwd, c->nl, lvl, NULL, NULL, emit_tp, &e);
    else if (in->op == MK_INSTR_B) mk_tp_run(c->bwd, c->nl, lvl, NULL, NULL, emit_tp, &e);
    else if (in->op == MK_INSTR_B_IN) mk_tp_run(c->bin, c->nl, lvl, NULL, NULL, emit_tp, &e);
}

/* Queue stage s's gradient buckets on its DP stream: bucket k becomes
 * final at (k+1)/nb of the backward [t0, t0 + dur). */
static void launch_buckets(mk_sim_state_t *R, int s, double t0, double dur)
{
    mk_sim_stage_t *S = &R->st[s];
    if (R->nb <= 0) return;
    double bytes = S->ss.grad_comm_bytes / R->nb;
    mk_coll_kind_t kind = R->p->zero ? MK_COLL_REDUCE_SCATTER : MK_COLL_ALLREDUCE;
    for (int k = 0; k < R->nb; k++) {
        if (S->bucket_end[k] >= 0) continue;
        double ready = t0 + dur * (k + 1) / R->nb;
        double st = ready > S->dp_free ? ready : S->dp_free;
        double d = R->o->unit_costs ? 0 : mk_cost_coll(R->c, kind, MK_ALGO_AUTO, &R->dpg, bytes);
        S->bucket_end[k] = S->dp_free = st + d;
        S->comm[MK_COMM_DP] += d;
        R->events++;
        if (R->tr)
            mk_trace_complete(R->tr, S->rank, MK_TRACE_DP, R->p->zero ? "RS.dp" : "AR.dp", st, d, s, -1, 0, -1);
    }
}

/* F, F_PRE: the micro-batch's activations become stored. */
static void forward_stores(mk_sim_stage_t *S, const mk_chunk_cost_t *c, const mk_instr_t *in, int slot)
{
    int k = in->op == MK_INSTR_F_PRE ? c->nck : (in->ckpt < c->nck ? in->ckpt : c->nck);
    S->mb_ck[slot] = k;
    S->mb_rec[slot] = 0;
    S->mb_stored[slot] = c->stored[k];
    S->stored += c->stored[k];
    S->inflight++;
    if (S->inflight > S->max_inflight) S->max_inflight = S->inflight;
}

static int op_compute(mk_sim_state_t *R, int s, const mk_instr_t *in, double t)
{
    const mk_plan_t *p = R->p;
    mk_sim_stage_t *S = &R->st[s];
    int unit = R->o->unit_costs;
    int slot = in->mb >= 0 && in->mb < p->m ? in->mb * p->vpp + in->chunk : -1;
    if (slot < 0 || in->chunk < 0 || in->chunk >= p->vpp)
        return mk_error_set("stage %d: %s with bad micro-batch %d / chunk %d", s, mk_instr_op_name(in->op), in->mb,
                            in->chunk);
    const mk_chunk_cost_t *c = &R->ch[in->chunk * p->pp + s];
    if (in->op == MK_INSTR_F || in->op == MK_INSTR_F_PRE) forward_stores(S, c, in, slot);
    int rc, ck = S->mb_ck[slot] < 0 ? 0 : S->mb_ck[slot];
    double tpc, tr;
    double d = mk_chunk_cost_time(c, in, ck, S->mb_rec[slot], unit, &rc, &tpc, &tr);
    mk_sim_mem_note(R, s, tr);
    double pure = mk_chunk_cost_pure(c, in, p->tp_overlap, rc, ck, d);
    if (!unit) {
        double ex = d - pure;
        if (ex < 0) ex = 0;
        if (ex > tpc) ex = tpc;
        S->exposed[MK_COMM_TP] += ex;
        S->comm[MK_COMM_TP] += tpc;
    }
    if (in->op == MK_INSTR_R) { /* the checkpointed layers' activations are back */
        S->stored += c->s_full - S->mb_stored[slot];
        S->mb_stored[slot] = c->s_full;
        S->mb_rec[slot] = 1;
    }
    if (R->tr) {
        trace_instr(R, s, in, MK_TRACE_COMPUTE, t, d);
        if (!unit) emit_compute_tp(R, s, in, c, rc, ck, t);
    }
    if (S->pc == S->last_bwd) launch_buckets(R, s, t, d);
    S->now = t + d;
    S->busy += d;
    if (in->op == MK_INSTR_B || in->op == MK_INSTR_B_W) { /* the micro-batch is done here */
        S->stored -= S->mb_stored[slot];
        S->mb_stored[slot] = 0;
        S->inflight--;
    }
    mk_sim_mem_note(R, s, 0);
    mk_sim_mem_trace(R, s, S->now);
    return MK_SIM_DONE;
}

static int bad_p2p(int s, const mk_instr_t *in)
{
    return mk_error_set("stage %d: bad %s (mb %d, chunk %d)", s, mk_instr_op_name(in->op), in->mb, in->chunk);
}

static int op_send(mk_sim_state_t *R, int s, const mk_instr_t *in, double t)
{
    const mk_plan_t *p = R->p;
    mk_sim_stage_t *S = &R->st[s];
    int key = msg_key(R, s, in);
    if (key < 0) return bad_p2p(s, in);
    int kd = in->op == MK_INSTR_SEND_ACT ? in->chunk * p->pp + s + 1 : in->chunk * p->pp + s - 1;
    int ds = kd % p->pp;
    const mk_graph_t *g = R->g;
    /* the activation entering kd, or the gradient of the one leaving it */
    double bytes = in->op == MK_INSTR_SEND_ACT ? g->layers[p->bounds[kd]].in_bytes
                                               : g->layers[p->bounds[kd + 1] - 1].out_bytes;
    if (p->seqpar && p->tp > 1) bytes /= p->tp;
    int inter = R->st[ds].node != S->node;
    double st = t > S->p2p_free ? t : S->p2p_free;
    if (inter && R->nic_free[S->node] > st) st = R->nic_free[S->node];
    int sharers = p->dp * p->tp < R->c->gpus_per_node ? p->dp * p->tp : R->c->gpus_per_node;
    double d = R->o->unit_costs ? 0 : mk_cost_p2p(R->c, inter, sharers, bytes);
    S->p2p_free = st + d;
    if (inter) R->nic_free[S->node] = st + d;
    R->arrival[key] = st + d;
    R->xfer[key] = d;
    S->comm[MK_COMM_PP] += d;
    R->events++;
    if (R->tr) trace_instr(R, s, in, MK_TRACE_P2P, st, d);
    mk_sim_stage_t *D = &R->st[ds];
    if (D->blocked == MK_SIM_BLOCK_RECV && D->wait_key == key)
        if (mk_sim_wake(R, ds, st + d > D->block_t ? st + d : D->block_t) < 0) return -1;
    return MK_SIM_DONE;
}

static int op_recv(mk_sim_state_t *R, int s, const mk_instr_t *in, double t)
{
    mk_sim_stage_t *S = &R->st[s];
    int key = msg_key(R, s, in);
    if (key < 0) return bad_p2p(s, in);
    if (R->arrival[key] < 0) {
        S->blocked = MK_SIM_BLOCK_RECV, S->wait_key = key, S->block_t = t;
        return MK_SIM_WAIT;
    }
    double a = R->arrival[key], wait = a > t ? a - t : 0;
    S->blocked = 0;
    S->exposed[MK_COMM_PP] += wait < R->xfer[key] ? wait : R->xfer[key];
    if (R->tr && wait > 0) trace_instr(R, s, in, MK_TRACE_COMPUTE, t, wait);
    S->now = t + wait;
    return MK_SIM_DONE;
}

/* The first of the two stages waits; the second runs the all-reduce for
 * both and queues the first again at its end. */
static int op_reduce_tied(mk_sim_state_t *R, int s, const mk_instr_t *in, double t)
{
    mk_sim_stage_t *S = &R->st[s];
    int other = s == 0 ? R->p->pp - 1 : 0;
    if (R->tied_waiting < 0) {
        R->tied_waiting = s;
        S->blocked = MK_SIM_BLOCK_TIED, S->block_t = t;
        return MK_SIM_WAIT;
    }
    mk_sim_stage_t *O = &R->st[other];
    double st = t > O->block_t ? t : O->block_t;
    double d = R->o->unit_costs ? 0
                                : mk_cost_coll(R->c, MK_COLL_ALLREDUCE, MK_ALGO_AUTO, &R->tiedg, S->ss.tied_bytes);
    R->tied_waiting = -1;
    R->events++;
    mk_sim_stage_t *both[2] = {S, O};
    for (int i = 0; i < 2; i++) {
        mk_sim_stage_t *X = both[i];
        X->exposed[MK_COMM_DP] += d;
        X->comm[MK_COMM_DP] += d;
        if (R->tr) mk_trace_complete(R->tr, X->rank, MK_TRACE_DP, "AR.tied", st, d, X == S ? s : other, -1, 0, -1);
    }
    O->blocked = 0, O->now = st + d, O->pc++;
    if (mk_sim_wake(R, other, st + d) < 0) return -1;
    S->now = st + d;
    return MK_SIM_DONE;
}

static int op_reduce_grads(mk_sim_state_t *R, int s, const mk_instr_t *in, double t)
{
    mk_sim_stage_t *S = &R->st[s];
    if (S->n_grads < R->nb && S->bucket_end[S->n_grads] < 0) launch_buckets(R, s, t, 0);
    double e = S->n_grads < R->nb ? S->bucket_end[S->n_grads] : t;
    S->n_grads++;
    if (e > t) S->exposed[MK_COMM_DP] += e - t, S->now = e;
    return MK_SIM_DONE;
}

static int op_opt_step(mk_sim_state_t *R, int s, const mk_instr_t *in, double t)
{
    const mk_plan_t *p = R->p;
    mk_sim_stage_t *S = &R->st[s];
    int unit = R->o->unit_costs;
    double d = 0;
    double local = S->ss.params / (p->zero && p->dp > 1 ? p->dp : 1);
    if (!unit && !R->c->ideal) d = R->c->dev.launch_s + 28.0 * local / R->c->dev.mem_bw_Bps;
    if (R->tr) mk_trace_complete(R->tr, S->rank, MK_TRACE_COMPUTE, "OPT", t, d, s, -1, 0, -1);
    S->now = t + d;
    S->busy += d;
    if (p->zero && p->dp > 1 && !unit) { /* ZeRO-1: gather the updated weights */
        double w = p->dtype == MK_DTYPE_FP32 ? 4 : 2;
        double st = S->now > S->dp_free ? S->now : S->dp_free;
        double ag = mk_cost_coll(R->c, MK_COLL_ALLGATHER, MK_ALGO_AUTO, &R->dpg, w * S->ss.params);
        if (R->tr) mk_trace_complete(R->tr, S->rank, MK_TRACE_DP, "AG.dp", st, ag, s, -1, 0, -1);
        S->exposed[MK_COMM_DP] += st + ag - S->now;
        S->comm[MK_COMM_DP] += ag;
        S->now = S->dp_free = st + ag;
        R->events++;
    }
    return MK_SIM_DONE;
}

static int op_load(mk_sim_state_t *R, int s, const mk_instr_t *in, double t)
{
    return MK_SIM_DONE;
}

static const op_fn handlers[MK_INSTR_COUNT] = {
    [MK_INSTR_LOAD] = op_load,
    [MK_INSTR_F] = op_compute, [MK_INSTR_F_PRE] = op_compute, [MK_INSTR_R] = op_compute,
    [MK_INSTR_B] = op_compute, [MK_INSTR_B_IN] = op_compute, [MK_INSTR_B_W] = op_compute,
    [MK_INSTR_SEND_ACT] = op_send, [MK_INSTR_SEND_GRAD] = op_send,
    [MK_INSTR_RECV_ACT] = op_recv, [MK_INSTR_RECV_GRAD] = op_recv,
    [MK_INSTR_REDUCE_TIED] = op_reduce_tied,
    [MK_INSTR_REDUCE_GRADS] = op_reduce_grads,
    [MK_INSTR_OPT_STEP] = op_opt_step,
};

int mk_sim_step(mk_sim_state_t *R, int s, double T)
{
    mk_sim_stage_t *S = &R->st[s];
    const mk_stream_t *str = &R->sch->streams[s];
    if (!S->blocked && T > S->now) S->now = T;
    while (S->pc < str->n) {
        const mk_instr_t *in = &str->v[S->pc];
        op_fn fn = (unsigned)in->op < MK_INSTR_COUNT ? handlers[in->op] : op_load;
        int rc = fn(R, s, in, S->now);
        if (rc < 0) return -1;
        if (rc == MK_SIM_WAIT) return 0;
        S->pc++;
        R->events++;
        if (S->now > T) return mk_sim_wake(R, s, S->now);
    }
    return 0;
}
