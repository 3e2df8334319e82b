/* The instruction handlers: what each instruction of a stage's stream
 * does to the simulated time (see include/merak/sim.h for the streams).
 * The stream walker (merak/walk.h, buffered mode) decodes the streams and
 * keeps the per-slot rules, the message keys and matching and the tied
 * rendezvous; the event queue drives it.  A stage's event runs the walker
 * on the stage, which calls the handler of each instruction's kind, until
 * one takes time (the hook yields; the stage is queued again at its end)
 * or the next one is not ready (a RECV whose send is not issued,
 * REDUCE_TIED before its peer); the walker's wake hook then queues it
 * again when the matching send or the peer has run.
 *
 *   F ... B_W    the chunk's cost (sim_chunk.c); the exposed part of the TP
 *                comm inside it counts as TP wait
 *   SEND_*       alpha + S/beta on the p2p stream (NIC reserved when the peer
 *                is on another node); RECV waits for the arrival
 *   REDUCE_TIED  all-reduce of the tied embedding gradient, first <-> last
 *   REDUCE_GRADS waits for its bucket: buckets of the stage's gradients
 *                become final during the stage's last backward (bucket k of
 *                nb at (k+1)/nb of it) and queue on the DP stream as ring/
 *                hierarchical all-reduces (reduce-scatters over the ZeRO
 *                group with ZeRO-1/2, then hybrid the replicas' all-reduce);
 *                without plan.overlap_grad_reduce all of them queue at the
 *                first REDUCE_GRADS, after the backward.  ZeRO-2 also
 *                reduce-scatters every other backward's gradient (the micro-
 *                batch's is not kept whole); ZeRO-3 reduces each layer's
 *                inside its backward and gathers its weights inside F/B/R
 *                (zero.c)
 *   OPT_STEP     launch + 28 bytes per local parameter / memory bandwidth
 *                (reads grad, master, m, v; writes master, m, v, weight),
 *                /k with ZeRO over k ranks, then (ZeRO-1/2) the all-gather
 *                of the updated weights
 *   LOAD         0 (input tokens are tiny)
 * Under opts.unit_costs everything but compute takes 0. */
#include "sim/sim_internal.h"

#include <math.h>
#include <stdio.h>

/* A handler: instruction ev of stage ev->stage, starting at t = the
 * stage's now.  Returns DONE, NOT_HERE (done by the other end: not counted
 * as an event) or -1. */
enum { DONE = 0, NOT_HERE = 1 };
typedef int (*op_fn)(mk_sim_state_t *R, const mk_walk_ev_t *ev, double t);

enum { EV_STAGE = 0 }; /* the one event kind: a stage may go on */

/* Run stage e->arg from time e->t until it yields, blocks or ends. */
static int on_stage_event(void *ctx, const mk_ev_t *e)
{
    mk_sim_state_t *R = ctx;
    int s = e->arg;
    mk_sim_stage_t *S = &R->st[s];
    /* a blocked stage resumes at its instruction, at the time it blocked */
    if (mk_walk_state(&R->w, s) != MK_WALK_BLOCKED && e->t > S->now) S->idle += e->t - S->now, S->now = e->t;
    R->T = e->t;
    if (mk_walk_stage(&R->w, s) < 0) return -1;
    return mk_walk_state(&R->w, s) == MK_WALK_YIELDED ? mk_sim_wake(R, s, S->now) : 0;
}

int mk_sim_wake(mk_sim_state_t *R, int s, double t)
{
    return mk_evq_push(&R->q, t, EV_STAGE, s, on_stage_event, R);
}

void mk_sim_mem_note(mk_sim_state_t *R, int s, double transient, double gathered)
{
    mk_sim_stage_t *S = &R->st[s];
    double cur = S->stat + S->stored + transient;
    cur += gathered;
    if (cur > S->peak) {
        S->peak = cur;
        S->at_peak.weights = S->ss.weights, S->at_peak.grads = S->ss.grads;
        S->at_peak.optimizer = S->ss.optimizer, S->at_peak.buffers = S->ss.buffers;
        S->at_peak.activations = S->stored, S->at_peak.working = transient;
        S->at_peak.gathered = gathered;
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

typedef struct emit_ctx {
    mk_sim_state_t *R;
    int s, mb, chunk;
    double base;
} emit_ctx_t;

/* kind 1: a step of the CP ring, the block sent and the one received
 * (--cp-comm-type allgather: the all-gather, and in a backward the
 * reduce-scatter after it, AG.cp; a2a: its all-to-alls, A2A.cp); kind 2:
 * an EP all-to-all (on the TP stream: it blocks the layer too) */
static void emit_tp(void *ctx, int kind, double start, double dur, int layer)
{
    emit_ctx_t *e = ctx;
    int rank = e->R->st[e->s].rank;
    if (kind == 2) {
        mk_trace_complete(e->R->tr, rank, MK_TRACE_TP, "A2A.ep", e->base + start, dur, e->s, e->mb, e->chunk, layer);
        return;
    }
    if (kind == 1 && e->R->p->cp_comm != MK_CP_COMM_P2P) {
        mk_trace_complete(e->R->tr, rank, MK_TRACE_CP, e->R->p->cp_comm == MK_CP_COMM_A2A ? "A2A.cp" : "AG.cp",
                          e->base + start, dur, e->s, e->mb, e->chunk, layer);
        return;
    }
    if (kind == 1) {
        mk_trace_complete(e->R->tr, rank, MK_TRACE_CP, "SEND_KV", e->base + start, dur, e->s, e->mb, e->chunk, layer);
        mk_trace_complete(e->R->tr, rank, MK_TRACE_CP, "RECV_KV", e->base + start, dur, e->s, e->mb, e->chunk, layer);
        return;
    }
    if (e->R->p->seqpar) { /* the all-reduce's place: reduce-scatter, then the next region's all-gather */
        mk_trace_complete(e->R->tr, rank, MK_TRACE_TP, "RS.sp", e->base + start, dur / 2, e->s, e->mb, e->chunk, layer);
        mk_trace_complete(e->R->tr, rank, MK_TRACE_TP, "AG.sp", e->base + start + dur / 2, dur / 2, e->s, e->mb,
                          e->chunk, layer);
        return;
    }
    mk_trace_complete(e->R->tr, rank, MK_TRACE_TP, "AR.tp", e->base + start, dur, e->s, e->mb, e->chunk, layer);
}

/* The TP collectives and the CP ring inside a compute op, on the trace's
 * TP and CP streams. */
static void emit_compute_tp(mk_sim_state_t *R, int s, const mk_instr_t *in, const mk_chunk_cost_t *c, int rc,
                            int ck, double t0)
{
    if (!R->tr || (R->p->tp <= 1 && R->p->cp <= 1 && R->p->ep <= 1)) return;
    emit_ctx_t e = {R, s, in->mb, in->chunk, t0};
    int lvl = R->p->tp_overlap;
    if (in->op == MK_INSTR_R || ((in->op == MK_INSTR_B || in->op == MK_INSTR_B_IN) && rc))
        e.base += mk_tp_run(c->ckf, ck, lvl, NULL, NULL, emit_tp, &e);
    if (in->op == MK_INSTR_F || in->op == MK_INSTR_F_PRE) mk_tp_run(c->fwd, c->nl, lvl, NULL, NULL, emit_tp, &e);
    else if (in->op == MK_INSTR_B) mk_tp_run(c->bwd, c->nl, lvl, NULL, NULL, emit_tp, &e);
    else if (in->op == MK_INSTR_B_IN) mk_tp_run(c->bin, c->nl, lvl, NULL, NULL, emit_tp, &e);
}

/* One gradient bucket of `bytes` ready at `ready` on stage s's DP stream:
 * all-reduced (ZeRO-0), or reduce-scattered over the sharding group and,
 * hybrid, the shard all-reduced over the replicas.  Returns its end. */
void mk_sim_bucket_cost(const mk_sim_state_t *R, const mk_sim_stage_t *S, double bytes, double *red, double *rep)
{
    int z = R->p->zero, unit = R->o->unit_costs;
    /* the experts' share of the stage's gradients goes over their own,
       ep-times smaller group (0 without experts: the dense reduction alone) */
    double fe = S->ss.params > 0 ? S->ss.expert_params / S->ss.params : 0;
    mk_coll_kind_t kind = z ? MK_COLL_REDUCE_SCATTER : MK_COLL_ALLREDUCE;
    *red = unit ? 0 : mk_cost_coll(R->c, kind, z ? &R->zg : &R->dpg, bytes * (1 - fe)) +
                          mk_cost_coll(R->c, kind, z ? &R->ezg : &R->edpg, bytes * fe);
    *rep = z && R->nrep > 1 && !unit ? mk_cost_coll(R->c, MK_COLL_ALLREDUCE, &R->rg, bytes / R->zk) : 0;
}

static double queue_bucket(mk_sim_state_t *R, int s, double ready, double bytes)
{
    mk_sim_stage_t *S = &R->st[s];
    int z = R->p->zero;
    double st = ready > S->dp_free ? ready : S->dp_free, d, a;
    mk_sim_bucket_cost(R, S, bytes, &d, &a);
    mk_sim_dp_busy(S, st, st + d);
    S->dp_free = st + d;
    S->comm[MK_COMM_DP] += d;
    R->events++;
    if (R->tr) mk_trace_complete(R->tr, S->rank, MK_TRACE_DP, z ? "RS.dp" : "AR.dp", st, d, s, -1, 0, -1);
    if (z && R->nrep > 1) {
        if (R->tr) mk_trace_complete(R->tr, S->rank, MK_TRACE_DP, "AR.dp", S->dp_free, a, s, -1, 0, -1);
        mk_sim_dp_busy(S, S->dp_free, S->dp_free + a);
        S->dp_free += a;
        S->comm[MK_COMM_DP] += a;
        R->events++;
    }
    return S->dp_free;
}

/* Queue `bytes` of stage s's gradients as its nb buckets on the DP stream:
 * bucket k becomes final at (k+1)/nb of the backward [t0, t0 + dur).  The
 * final ones (the stage's last backward) are what REDUCE_GRADS waits for;
 * ZeRO-3 has reduced them inside that backward (zero.c). */
static void launch_buckets(mk_sim_state_t *R, int s, double t0, double dur, double bytes, int final)
{
    mk_sim_stage_t *S = &R->st[s];
    if (R->nb <= 0) return;
    int z3 = mk_plan_zero(R->p) == 3;
    for (int k = 0; k < R->nb; k++) {
        if (final && S->bucket_end[k] >= 0) continue;
        double ready = t0 + dur * (k + 1) / R->nb;
        double e = z3 ? (S->dp_free > t0 ? S->dp_free : t0) : queue_bucket(R, s, ready, bytes / R->nb);
        if (final) S->bucket_end[k] = e;
    }
}

/* The gradients a backward makes: the last one's buckets during it
 * (overlap_grad_reduce; else at REDUCE_GRADS); with ZeRO-2 every other
 * weight-gradient backward's too (its micro-batch's gradient is not kept
 * whole), after it without overlap. */
static void backward_grads(mk_sim_state_t *R, const mk_walk_ev_t *ev, const mk_chunk_cost_t *c, double t, double d)
{
    mk_sim_stage_t *S = &R->st[ev->stage];
    int z = mk_plan_zero(R->p), ov = R->p->overlap_grad_reduce;
    if (ev->last_bwd && z >= 2) S->final_bytes = c->gbytes;
    if (ev->last_bwd && (ov || z == 3)) launch_buckets(R, ev->stage, t, d, S->final_bytes, 1);
    else if (z == 2 && ev->releases && !ev->last_bwd) launch_buckets(R, ev->stage, ov ? t : t + d, ov ? d : 0, c->gbytes, 0);
}

/* Split `part` seconds of a compute op (its duration without the comm
 * waits inside it) into forward, backward and recompute (explain.c). */
static void explain_classes(mk_sim_stage_t *S, mk_instr_op_t op, const mk_chunk_cost_t *c, int lvl, int rc, int ck,
                            double part)
{
    double rec = mk_chunk_cost_rec(c, op, lvl, rc, ck, part);
    if (rec > part) rec = part;
    if (rec < 0) rec = 0;
    S->cls[MK_SIM_REC] += rec;
    S->cls[op == MK_INSTR_F || op == MK_INSTR_F_PRE ? MK_SIM_FWD : MK_SIM_BWD] += part - rec;
}

/* DualPipe's F&B pairs (an overlapped B_IN, sched.h): each op's
 * all-to-alls run behind the other's compute, so the pair takes its two
 * computes plus only what of each one's all-to-alls the other's compute
 * does not cover.  The F ran first, whole: the B_IN gives back what it
 * hides of the F's and of its own (*aex, the op's exposed all-to-alls,
 * less what it hides), which never undercuts the pair's two computes.
 * An F notes its compute and all-to-alls for the B_IN after it.
 * Megatron-Core's --overlap-moe-expert-parallel-comm (merged): in 1F1B's
 * steady state each backward runs merged with the forward just before it
 * on the stage (schedules.py's combined 1F1B step: the forward of one
 * micro-batch and the backward of another, layer by layer on two
 * streams), the same pair; a backward with no forward since the last one
 * (the cool-down) runs alone.  While an all-to-all hides behind compute
 * it holds its SMs (share: mk_cost_a2a_sm_share, DeepEP's 20 of the
 * device's), and the compute beside it runs on the rest: of each hidden
 * second, share stays on the pair's time (counted as exposed EP time). */
static double pair_hidden(mk_sim_stage_t *S, const mk_instr_t *in, double comp, double *aex, int merged,
                          double share)
{
    if (in->op == MK_INSTR_F || in->op == MK_INSTR_F_PRE) {
        S->f_comp = comp, S->f_a2a = *aex;
        return 0;
    }
    if (!in->overlap && !(merged && (in->op == MK_INSTR_B || in->op == MK_INSTR_B_IN))) return 0;
    double hidden = (fmin(*aex, S->f_comp) + fmin(S->f_a2a, comp)) * (1 - share);
    *aex -= hidden; /* negative: the F's exposure given back */
    S->f_comp = S->f_a2a = 0;
    return hidden;
}

/* Megatron-Core's --overlap-param-gather (its distributed optimizer,
 * optimizer/distrib_optimizer.py at r0.8.0): the all-gather of the weights
 * an optimizer step updated starts with the next step, its first bucket
 * from zero_grad, each further one from the forward pre-hook of the
 * bucket before it, which then waits for its own.  One
 * step of a run of steps: the gather (the step's ZeRO-1 all-gather, ag)
 * issued on the DP stream at time 0, chunk c's buckets landing by
 * ag (c + 1) / vpp; a chunk's first forward runs its nb buckets' layers
 * (d / nb each) as they land (param_gather_wait), the rest of the step
 * as without ZeRO's gather.  What it waits is exposed DP time. */
void mk_sim_param_gather_start(mk_sim_state_t *R, int s)
{
    mk_sim_stage_t *S = &R->st[s];
    double ag;
    mk_sim_opt_cost(R, S, &ag);
    if (!(ag > 0)) return;
    S->pg_ag = S->dp_free = ag;
    mk_sim_dp_busy(S, 0, ag);
    S->comm[MK_COMM_DP] += ag;
    R->events++;
    if (R->tr) mk_trace_complete(R->tr, S->rank, MK_TRACE_DP, "AG.dp", 0, ag, s, -1, 0, -1);
}

/* A forward of chunk c starting at t for d seconds: its length with the
 * waits for the chunk's weight buckets, the first time chunk c (or a
 * later one) runs a forward (*beside: the DP time inside the windows its
 * layers compute, dp_share.c); d otherwise (*beside untouched). */
static double param_gather_wait(const mk_sim_state_t *R, mk_sim_stage_t *S, int c, double t, double d,
                                double *beside)
{
    if (!(S->pg_ag > 0) || c < S->pg_next) return d;
    int v = R->p->vpp, nb = R->nb / v > 0 ? R->nb / v : 1;
    double per = S->pg_ag / v / nb, a0 = S->pg_ag * c / v, e = t;
    S->pg_next = c + 1;
    *beside = 0;
    for (int i = 0; i < nb; i++) {
        double st = fmax(e, a0 + per * (i + 1));
        e = st + d / nb;
        *beside += mk_sim_dp_within(S, st, e);
    }
    return e - t;
}

/* The compute a DP collective slows (dp_share.c): of the DP time inside
 * the op's compute windows (beside; < 0: the whole op [t, t + d)), the
 * SMs' share stays on the op, counted as exposed DP time. */
static double dp_share_extra(const mk_sim_state_t *R, mk_sim_stage_t *S, double t, double d, double beside)
{
    double share = mk_cost_coll_sm_share(R->c);
    if (!(share > 0)) return 0;
    double x = share * (beside >= 0 ? beside : mk_sim_dp_within(S, t, t + d));
    S->exposed[MK_COMM_DP] += x;
    return x;
}

static int op_compute(mk_sim_state_t *R, const mk_walk_ev_t *ev, double t)
{
    const mk_plan_t *p = R->p;
    const mk_instr_t *in = ev->in;
    int s = ev->stage, slot = ev->slot, ck = ev->ckpt, rc = ev->recomputes, unit = R->o->unit_costs;
    mk_sim_stage_t *S = &R->st[s];
    const mk_chunk_cost_t *c = &R->ch[ev->vstage];
    if (ev->holds) { /* F, F_PRE: the micro-batch's activations become stored */
        S->mb_stored[slot] = c->stored[ck];
        S->stored += c->stored[ck];
        if (ev->inflight > S->max_inflight) S->max_inflight = ev->inflight;
    }
    double tpc, tr, beside = -1; /* the DP time beside its compute (dp_share_extra; -1: its whole window) */
    double d = mk_chunk_cost_time(c, in->op, ck, rc, unit, &tpc, &tr);
    mk_sim_mem_note(R, s, tr, in->op != MK_INSTR_B_W ? S->ss.gathered : 0);
    double pure = mk_chunk_cost_pure(c, in->op, p->tp_overlap, rc, ck, d);
    if (unit) S->cls[MK_SIM_FWD] += d; /* unit costs: one class (explain is for real costs) */
    if (!unit) {
        double cp0 = S->exposed[MK_COMM_CP], ep0 = S->exposed[MK_COMM_EP];
        double ex = d - pure;
        if (ex < 0) ex = 0;
        if (ex > tpc) ex = tpc;
        S->exposed[MK_COMM_TP] += ex;
        S->comm[MK_COMM_TP] += tpc;
        if (p->cp > 1) { /* the ring's exposed part is inside `pure` */
            double kv, rex = mk_chunk_cost_ring(c, in->op, p->tp_overlap, rc, ck, &kv);
            S->exposed[MK_COMM_CP] += rex;
            S->comm[MK_COMM_CP] += kv;
        }
        if (p->ep > 1) { /* likewise the all-to-alls, all exposed */
            double a2a, aex = mk_chunk_cost_a2a(c, in->op, p->tp_overlap, rc, ck, &a2a);
            d -= pair_hidden(S, in, pure - aex - (p->cp > 1 ? S->exposed[MK_COMM_CP] - cp0 : 0), &aex,
                             p->moe_a2a_overlap, mk_cost_a2a_sm_share(R->c, p->moe_deepep));
            S->exposed[MK_COMM_EP] += aex;
            S->comm[MK_COMM_EP] += a2a;
        }
        explain_classes(S, in->op, c, p->tp_overlap, rc, ck, d - ex - (p->cp > 1 ? S->exposed[MK_COMM_CP] - cp0 : 0) -
                                                                (p->ep > 1 ? S->exposed[MK_COMM_EP] - ep0 : 0));
        if (c->z) { /* ZeRO-3: the layers wait for their gathers */
            double dz = mk_zero_op(R, s, in, c, ck, rc, t, &beside);
            if (dz > d) S->exposed[MK_COMM_DP] += dz - d, d = dz;
        }
        if (p->overlap_param_gather && (in->op == MK_INSTR_F || in->op == MK_INSTR_F_PRE)) {
            double dg = param_gather_wait(R, S, in->chunk, t, d, &beside);
            S->exposed[MK_COMM_DP] += dg - d, d = dg;
        }
    }
    if (ev->regrows) { /* R: the checkpointed layers' activations are back */
        S->stored += c->s_full - S->mb_stored[slot];
        S->mb_stored[slot] = c->s_full;
    }
    backward_grads(R, ev, c, t, d);
    if (!unit) d += dp_share_extra(R, S, t, d, beside);
    if (R->tr) {
        trace_instr(R, s, in, MK_TRACE_COMPUTE, t, d);
        if (!unit) emit_compute_tp(R, s, in, c, rc, ck, t);
    }
    S->now = t + d;
    S->busy += d;
    if (in->op == MK_INSTR_B_IN) { /* what its B_W reads stays, the rest goes */
        S->stored += c->wstash - S->mb_stored[slot];
        S->mb_stored[slot] = c->wstash;
    }
    if (ev->releases) { /* B, B_W: the micro-batch is done here */
        S->stored -= S->mb_stored[slot];
        S->mb_stored[slot] = 0;
    }
    mk_sim_mem_note(R, s, 0, 0);
    mk_sim_mem_trace(R, s, S->now);
    return DONE;
}

/* A send's time: alpha + S/beta of the rank's share (sequence parallelism:
 * the s/tp rows it holds; scatter-gather without it: a 1/tp slice of the
 * whole tensor), and with scatter-gather the receivers' all-gather of the
 * tp slices over their TP group (Megatron-LM's gather_split_1d_tensor,
 * DeepSpeed's PartitionedTensor.full()), counted in the transfer: the
 * tensor is not there until it is whole. */
double mk_sim_send_cost(const mk_cluster_t *c, const mk_plan_t *p, const mk_graph_t *g, const mk_sim_opts_t *o,
                        int s, int ds, int kd, int act, int *inter)
{
    /* the activation entering kd, or the gradient of the one leaving it */
    double bytes = act ? g->layers[p->bounds[kd]].in_bytes : g->layers[p->bounds[kd + 1] - 1].out_bytes;
    int gather = mk_plan_scatter_gathers(p);
    if ((p->seqpar && p->tp > 1) || gather) bytes /= p->tp;
    if (p->cp > 1) bytes /= p->cp; /* the rank's s/cp tokens */
    *inter = mk_sim_stage_node(c, p, ds) != mk_sim_stage_node(c, p, s);
    int sr = mk_plan_dp_cp(p) * p->tp; /* a stage's ranks, all sending at once */
    int sharers = sr < c->gpus_per_node ? sr : c->gpus_per_node;
    if (o->unit_costs) return 0;
    double t = mk_cost_p2p(c, *inter, sharers, bytes);
    if (gather) {
        mk_group_t tpg, cpg, epg;
        mk_sim_layer_groups(c, p, &tpg, &cpg, &epg);
        t += mk_cost_coll(c, MK_COLL_ALLGATHER, &tpg, bytes * p->tp);
    }
    return t;
}

static int op_send(mk_sim_state_t *R, const mk_walk_ev_t *ev, double t)
{
    const mk_instr_t *in = ev->in;
    int s = ev->stage, key = ev->key, inter;
    mk_sim_stage_t *S = &R->st[s];
    double d = mk_sim_send_cost(R->c, R->p, R->g, R->o, s, ev->peer, ev->vpeer, in->op == MK_INSTR_SEND_ACT, &inter);
    double st = t > S->p2p_free ? t : S->p2p_free;
    if (inter && R->nic_free[S->node] > st) st = R->nic_free[S->node];
    S->p2p_free = st + d;
    if (inter) R->nic_free[S->node] = st + d;
    R->arrival[key] = st + d;
    R->xfer[key] = d;
    S->comm[MK_COMM_PP] += d;
    R->events++;
    if (R->tr) trace_instr(R, s, in, MK_TRACE_P2P, st, d);
    return DONE; /* the walker wakes a receiver waiting for it (on_wake) */
}

/* Runs once the walker has seen the SEND: waits for the arrival. */
static int op_recv(mk_sim_state_t *R, const mk_walk_ev_t *ev, double t)
{
    mk_sim_stage_t *S = &R->st[ev->stage];
    double a = R->arrival[ev->key], wait = a > t ? a - t : 0;
    double ex = wait < R->xfer[ev->key] ? wait : R->xfer[ev->key];
    S->exposed[MK_COMM_PP] += ex;
    S->idle += wait - ex; /* the rest: the sender was late */
    if (R->tr && wait > 0) trace_instr(R, ev->stage, ev->in, MK_TRACE_COMPUTE, t, wait);
    S->now = t + wait;
    return DONE;
}

/* The walker lets the end that arrives second run it (tied_first): the
 * all-reduce for both, from when both are there; the other end (waiting
 * since its now) resumes at its end and has nothing left to do. */
static int op_reduce_tied(mk_sim_state_t *R, const mk_walk_ev_t *ev, double t)
{
    if (!ev->tied_first) return NOT_HERE;
    int s = ev->stage, other = ev->peer;
    mk_sim_stage_t *S = &R->st[s], *O = &R->st[other];
    double st = t > O->now ? t : O->now;
    double d = R->o->unit_costs ? 0
                                : mk_cost_coll(R->c, MK_COLL_ALLREDUCE, &R->tiedg, S->ss.tied_bytes);
    R->events++;
    S->idle += st - t, O->idle += st - O->now; /* waiting for the other end */
    mk_sim_stage_t *both[2] = {S, O};
    for (int i = 0; i < 2; i++) {
        mk_sim_stage_t *X = both[i];
        X->exposed[MK_COMM_DP] += d;
        X->comm[MK_COMM_DP] += d;
        if (R->tr) mk_trace_complete(R->tr, X->rank, MK_TRACE_DP, "AR.tied", st, d, X == S ? s : other, -1, 0, -1);
    }
    O->now = S->now = st + d; /* the walker wakes the other end (on_wake) */
    return DONE;
}

/* Waits for its bucket (launched now if the stage had no backward or the
 * plan does not overlap the gradient reduction). */
static int op_reduce_grads(mk_sim_state_t *R, const mk_walk_ev_t *ev, double t)
{
    int s = ev->stage, b = ev->bucket;
    mk_sim_stage_t *S = &R->st[s];
    if (b < R->nb && S->bucket_end[b] < 0) launch_buckets(R, s, t, 0, S->final_bytes, 1);
    double e = b < R->nb ? S->bucket_end[b] : t;
    if (e > t) S->exposed[MK_COMM_DP] += e - t, S->now = e;
    return DONE;
}

double mk_sim_opt_cost(const mk_sim_state_t *R, const mk_sim_stage_t *S, double *ag)
{
    const mk_plan_t *p = R->p;
    int unit = R->o->unit_costs, z = mk_plan_zero(p);
    double d = 0, local = S->ss.params / (z ? mk_plan_zero_group(p) : 1);
    if (!unit && !R->c->ideal) d = R->c->dev.launch_s + 28.0 * local / R->c->dev.mem_bw_Bps;
    if (!unit && !R->c->ideal && p->optimizer_offload) d = mk_sim_opt_offload_cost(R, local);
    /* fp8: the step's cast of the linear weights to FP8 (memory.c fp8_copies) */
    if (!unit && !R->c->ideal)
        d += mk_dtype_cast_bytes(p->dtype, R->g->opts.fp8_current) * S->ss.fp8_params / R->c->dev.mem_bw_Bps;
    double w = p->dtype == MK_DTYPE_FP32 ? 4 : 2;
    *ag = (z == 1 || z == 2) && !unit ? mk_cost_coll(R->c, MK_COLL_ALLGATHER, &R->zg, w * S->ss.params) : 0;
    /* ZeRO-3 with per-tensor collectives: the tensors kept gathered, gathered anew after the step */
    if (z == 3 && !unit) *ag = mk_zero_persist_gather(R, (int)(S - R->st));
    return d;
}

static int op_opt_step(mk_sim_state_t *R, const mk_walk_ev_t *ev, double t)
{
    const mk_plan_t *p = R->p;
    int s = ev->stage;
    mk_sim_stage_t *S = &R->st[s];
    int unit = R->o->unit_costs;
    double ag, d = mk_sim_opt_cost(R, S, &ag);
    int z = mk_plan_zero(p);
    if (R->tr) mk_trace_complete(R->tr, S->rank, MK_TRACE_COMPUTE, "OPT", t, d, s, -1, 0, -1);
    S->now = t + d;
    S->busy += d;
    S->cls[MK_SIM_OPT] += d;
    /* gather the updated weights (ZeRO-1/2; overlapped, the next step's start), or ZeRO-3 with per-tensor
       collectives its kept-gathered tensors (ZeRO-3 otherwise keeps its shard) */
    if ((z == 1 || z == 2 || ag > 0) && !unit && !p->overlap_param_gather) {
        double st = S->now > S->dp_free ? S->now : S->dp_free;
        if (R->tr) mk_trace_complete(R->tr, S->rank, MK_TRACE_DP, "AG.dp", st, ag, s, -1, 0, -1);
        mk_sim_dp_busy(S, st, st + ag);
        S->exposed[MK_COMM_DP] += st + ag - S->now;
        S->comm[MK_COMM_DP] += ag;
        S->now = S->dp_free = st + ag;
        R->events++;
    }
    return DONE;
}

static int op_load(mk_sim_state_t *R, const mk_walk_ev_t *ev, double t)
{
    return DONE;
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

/* The walker's hook for every instruction: its kind's handler; the stage
 * stops (yields) once the instruction took it past its resume time. */
static int on_instr(void *ctx, const mk_walk_ev_t *ev)
{
    mk_sim_state_t *R = ctx;
    mk_instr_op_t op = ev->in->op;
    int rc = ((unsigned)op < MK_INSTR_COUNT ? handlers[op] : op_load)(R, ev, R->st[ev->stage].now);
    if (rc < 0) return -1;
    if (rc == DONE) R->events++;
    return R->st[ev->stage].now > R->T ? MK_WALK_YIELD : MK_WALK_GO;
}

/* Blocked stage q is ready because of ev (its SEND, or the other end's
 * REDUCE_TIED, which set q's now): it goes on when the message is there. */
static int on_wake(void *ctx, int q, const mk_walk_ev_t *ev)
{
    mk_sim_state_t *R = ctx;
    double t = R->st[q].now;
    if (ev->key >= 0 && R->arrival[ev->key] > t) t = R->arrival[ev->key];
    return mk_sim_wake(R, q, t);
}

void mk_sim_hooks(mk_sim_state_t *R, mk_walk_hooks_t *h)
{
    *h = (mk_walk_hooks_t){.ctx = R, .compute = on_instr, .send = on_instr, .recv = on_instr,
                           .collective = on_instr, .load = on_instr, .wake = on_wake};
}
