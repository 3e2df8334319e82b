/* The instruction interpreter: one step of this stage's stream, walked by
 * the stream walker (merak/walk.h: message keys, checkpoint counts, peers)
 * with the semantics of sched.h (buffered sends via MPI_Isend, blocking receives,
 * DP reductions started per layer during the last backward pass, or all
 * at REDUCE_GRADS without plan.overlap_grad_reduce, and completed there;
 * ZeRO-2/3: exec_fsdp.c's hooks around each layer).  Communication
 * progresses by polling between layers. */
#include "config.h"
#include "exec/exec_internal.h"
#include "exec/gpt_moe.h"
#include "merak/trace.h"
#include "merak/walk.h"

#include <stdlib.h>
#include <time.h>

/* A layer boundary's activation: (N, C), with sequence parallelism this
 * TP rank's (N/tp, C). */
size_t mk_exec_act_floats(const mk_exec_t *e)
{
    return (size_t)e->pipe.n_tokens / (e->run.sp ? e->g->tp : 1) * e->g->C;
}
static size_t act_floats(const mk_exec_t *e) { return mk_exec_act_floats(e); }

/* A send finished: its host staging (if any) and its buffer go. */
static void send_done(mk_exec_t *e, mk_pending_t *p)
{
    if (e->trace.on) {
        char name[32];
        mk_trace_instr_name(name, sizeof name, mk_instr_op_name(p->op), p->mb);
        mk_exec_trace_ev(e, MK_TRACE_P2P, name, p->ts, p->mb, p->chunk, -1);
    }
    mk_comm_unstage(&e->comm, p->buf, p->host, p->n * sizeof(float), 0);
    mk_gpt_release(&e->run, e->g, p->buf, p->n);
}

/* Layer l's gradient range in the parameter block (its first element's
 * place, type and sum: mk_exec_grad_buf), its element count in *n. */
static mk_grad_buf_t layer_grads(mk_exec_t *e, int l, size_t *n)
{
    mk_gpt_t *g = e->g;
    const mk_gpt_tensor_t *a = &g->t[g->first[l]], *z = &g->t[g->first[l + 1] - 1];
    *n = z->off + (size_t)z->lrows * z->lcols - a->off;
    /* expert parallel (or folded): the MoE layer's dense tensors here, its
       experts over the ranks holding them (mk_exec_ep_reduce) */
    if ((e->ep.n > 1 || e->ep.fold) && mk_gpt_layer_is_moe(g, l)) *n = mk_gpt_moe_dense_floats(g, l);
    return mk_exec_grad_buf(e, a->off);
}

/* Layer l's DP reduction has completed: copy a host-staged result back. */
static void dp_done(mk_exec_t *e, int l)
{
    size_t n;
    if (e->trace.on && e->trace.dp_t0 && e->trace.dp_t0[l] >= 0) {
        mk_exec_trace_ev(e, MK_TRACE_DP, "AR.dp", e->trace.dp_t0[l], -1, 0, l);
        e->trace.dp_t0[l] = -1;
    }
    if (!e->dp.host || !e->dp.host[l]) return;
    mk_grad_buf_t b = layer_grads(e, l, &n);
    mk_comm_unstage(&e->comm, b.p, e->dp.host[l], n * b.size, 1);
    e->dp.host[l] = NULL;
}

static mk_gpt_act_t *act_of(mk_exec_t *e, mk_chunk_t *c, int mb, int l)
{
    return &c->act[(size_t)mb * (c->l1 - c->l0) + (l - c->l0)];
}

int mk_exec_poll(mk_exec_t *e)
{
    int k = 0;
    for (int i = 0; i < e->pipe.n_sends; i++) {
        int done = 0;
        MPI_Test(&e->pipe.sends[i].req, &done, MPI_STATUS_IGNORE);
        if (done) send_done(e, &e->pipe.sends[i]);
        else e->pipe.sends[k++] = e->pipe.sends[i];
    }
    e->pipe.n_sends = k;
    mk_exec_fsdp_poll(e);
    for (int l = 0; l < e->g->n_layers; l++)
        if (e->dp.req[l] != MPI_REQUEST_NULL) {
            int done;
            MPI_Test(&e->dp.req[l], &done, MPI_STATUS_IGNORE);
            if (done) dp_done(e, l);
        }
    return 0;
}

int mk_exec_drain(mk_exec_t *e)
{
    for (int i = 0; i < e->pipe.n_sends; i++) {
        if (mk_comm_wait_for(&e->comm, &e->pipe.sends[i].req, "a p2p send to be taken", -1) < 0) return -1;
        send_done(e, &e->pipe.sends[i]);
    }
    e->pipe.n_sends = 0;
    return 0;
}

static int peer_rank(const mk_exec_t *e, int stage)
{
    return mk_comm_rank_of(&e->comm, e->comm.dp_rank, stage, e->comm.tp_rank);
}

/* A 16-bit run sends its activations and their gradients 16-bit, as
 * Megatron-LM's p2p sends its params_dtype tensors: every layer's output
 * is rounded to the run's type where it becomes final (mk_gpt_round_out),
 * and so is the gradient at its input (backward, below: Megatron's are
 * 16-bit autograd tensors), so the packing is exact and the receiving
 * stage widens the very values (tests/mpi-mixed.sh: pp 2 trains as one
 * rank, bit for bit).  Half the bytes on the wire and in the buffers a
 * send holds until it is taken. */
static int sends16(const mk_exec_t *e) { return e->run.act16 != 0; }

/* A message's buffer: n values, fp32 or (half) 16-bit, in floats held. */
static size_t msg_floats(size_t n, int half) { return half ? mk_exec_floats16(n) : n; }

/* The MPI tag of a message is the walker's message key (unique per step,
 * the same on the SEND and its RECV); the peer is the walker's too. */
static int send(mk_exec_t *e, float *buf, const mk_walk_ev_t *ev)
{
    if (e->pipe.n_sends == e->pipe.cap_sends) {
        int cap = e->pipe.cap_sends ? 2 * e->pipe.cap_sends : 16;
        mk_pending_t *v = realloc(e->pipe.sends, cap * sizeof *v);
        if (!v) return mk_error_set("out of memory for the sends in flight");
        e->pipe.sends = v, e->pipe.cap_sends = cap;
    }
    size_t n = act_floats(e);
    int half = sends16(e);
    if (half) { /* the fp32 rows go at once, the 16-bit copy until the send is taken */
        float *h = mk_gpt_alloc(&e->run, e->g, mk_exec_floats16(n));
        if (!h) return -1;
        e->g->be->pack16(e->g->be->ctx, h, buf, n, e->run.act16);
        mk_gpt_release(&e->run, e->g, buf, n);
        buf = h;
    }
    mk_pending_t *p = &e->pipe.sends[e->pipe.n_sends++];
    p->buf = buf;
    p->n = msg_floats(n, half);
    p->ts = e->trace.on ? mk_exec_now(e) : 0.0;
    p->op = ev->in->op;
    p->mb = ev->in->mb, p->chunk = ev->in->chunk;
    p->host = mk_comm_stage(&e->comm, buf, p->n * sizeof(float), 1);
    MPI_Isend(p->host, (int)n, half ? MPI_UINT16_T : MPI_FLOAT, peer_rank(e, ev->peer), ev->key,
              e->comm.world, &p->req);
    return 0;
}

/* A 16-bit message's values widened into fp32 rows (the 16-bit buffer freed). */
static float *widen(mk_exec_t *e, float *h, size_t n)
{
    float *buf = mk_gpt_alloc(&e->run, e->g, n);
    if (buf) e->g->be->unpack16(e->g->be->ctx, buf, h, n, e->run.act16);
    mk_gpt_release(&e->run, e->g, h, mk_exec_floats16(n));
    return buf;
}

static float *recv(mk_exec_t *e, const mk_walk_ev_t *ev)
{
    size_t n = act_floats(e);
    int half = sends16(e);
    size_t held = msg_floats(n, half);
    float *buf = mk_gpt_alloc(&e->run, e->g, held);
    if (!buf) return NULL;
    MPI_Request r;
    void *h = mk_comm_stage(&e->comm, buf, held * sizeof(float), 0);
    int peer = peer_rank(e, ev->peer);
    MPI_Irecv(h, (int)n, half ? MPI_UINT16_T : MPI_FLOAT, peer, ev->key, e->comm.world, &r);
    /* keep earlier sends moving while we wait */
    mk_comm_watch_t w = {0};
    for (;;) {
        int done = 0;
        MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        if (done) {
            mk_comm_unstage(&e->comm, buf, h, held * sizeof(float), 1);
            return half ? widen(e, buf, n) : buf;
        }
        mk_exec_poll(e);
        if (mk_comm_watch(&e->comm, &w, ev->in->op == MK_INSTR_RECV_ACT ? "the activations of the stage before"
                                                                         : "the gradients of the stage after",
                          peer) < 0)
            return NULL; /* the job ends: MPI_Abort (merak run) reclaims the pending receive */
    }
}

/* Layer l of chunk c is the MLP of a block whose attention is the layer
 * before it in the chunk: with both checkpointed they are one recompute
 * group, as in Megatron-LM's full recompute (one checkpoint per
 * transformer layer), and only the attention's input (the block's) is
 * kept; the simulator counts the same (sim/memory.c). */
static int joins_block(const mk_exec_t *e, const mk_chunk_t *c, int l)
{
    return l > c->l0 && mk_gpt_layer_kind(e->g, l) == MK_GPT_MLP && mk_gpt_layer_kind(e->g, l - 1) == MK_GPT_ATTN;
}

/* This rank's chunk running virtual stage vs, or NULL (another rank's):
 * a hand-off to it is local, the stream has no SEND/RECV for it. */
static mk_chunk_t *local_chunk(mk_exec_t *e, int vs)
{
    for (int v = 0; v < e->pipe.n_chunks; v++)
        if (e->pipe.chunks[v].vs == vs) return &e->pipe.chunks[v];
    return NULL;
}

/* Checkpointable layers are the chunk's layers but the embedding, in order. */
static int forward(mk_exec_t *e, mk_chunk_t *c, int mb, int ckpt)
{
    e->run.docs = e->pipe.docs ? e->pipe.docs[mb] : NULL; /* --reset-position-ids/-attention-mask */
    int k = 0, prev_cp = 0;
    for (int l = c->l0; l < c->l1; l++) {
        mk_gpt_act_t *a = act_of(e, c, mb, l);
        float *out = NULL;
        e->trace.cur_layer = l;
        if (l > 0 && !a->in) return mk_error_set("F%d: no input for layer %d", mb, l);
        if (mk_gpt_layer_kind(e->g, l) != MK_GPT_HEAD) {
            if (!(out = mk_gpt_alloc(&e->run, e->g, act_floats(e)))) return -1;
            if (l + 1 < c->l1) act_of(e, c, mb, l + 1)->in = out;
            else if (local_chunk(e, c->vs + 1)) act_of(e, local_chunk(e, c->vs + 1), mb, l + 1)->in = out;
            else c->out[mb] = out;
        }
        int cp = l > 0 && k++ < ckpt;
        e->run.next_local = l + 1 < c->l1;
        if (mk_exec_fsdp_begin(e, l, l + 1 < c->l1 ? l + 1 : -1, MK_FSDP_FWD) < 0 ||
            mk_gpt_forward(e->g, &e->run, l, a, e->pipe.tokens[mb], e->pipe.targets[mb], out, cp, &e->loss) < 0 ||
            mk_exec_fsdp_end(e, l, MK_FSDP_FWD) < 0)
            return -1;
        if (cp && prev_cp && joins_block(e, c, l)) { /* regrow_input rebuilds it */
            mk_gpt_release(&e->run, e->g, a->in, act_floats(e));
            a->in = NULL;
        }
        prev_cp = cp;
        /* the previous layer's input is read no more (a sub-pipelined TP
           residual add carried into this layer is done): 16-bit from here */
        if (l > c->l0 && mk_gpt_act_pack(&e->run, e->g, l - 1, act_of(e, c, mb, l - 1)) < 0) return -1;
        mk_exec_poll(e);
    }
    return mk_gpt_act_pack(&e->run, e->g, c->l1 - 1, act_of(e, c, mb, c->l1 - 1));
}

/* The MLP l of a block checkpointed whole gave its input up at F: rebuild
 * it by the attention's full forward from the block's input.  The
 * attention keeps its internals for its own backward, which then
 * recomputes nothing (the group's activations are all live at once). */
static int regrow_input(mk_exec_t *e, mk_chunk_t *c, int mb, int l)
{
    e->run.docs = e->pipe.docs ? e->pipe.docs[mb] : NULL; /* --reset-position-ids/-attention-mask */
    mk_gpt_act_t *a = act_of(e, c, mb, l);
    if (a->in || !joins_block(e, c, l)) return 0;
    if (mk_gpt_act_unpack(&e->run, e->g, l - 1, act_of(e, c, mb, l - 1)) < 0) return -1;
    if (!(a->in = mk_gpt_alloc(&e->run, e->g, act_floats(e)))) return -1;
    double loss = 0; /* an attention layer adds none */
    int next = e->run.next_local, pre = e->zero.pre;
    e->run.next_local = 0; /* no all-reduce left in flight into the MLP */
    e->zero.pre = -1;      /* ZeRO-3: pin the attention's weights for this forward, keep the prefetch */
    int rc = mk_exec_fsdp_begin(e, l - 1, -1, MK_FSDP_RECOMPUTE) < 0 ||
             mk_gpt_forward(e->g, &e->run, l - 1, act_of(e, c, mb, l - 1), e->pipe.tokens[mb],
                            e->pipe.targets[mb], a->in, 0, &loss) < 0 ||
             mk_exec_fsdp_end(e, l - 1, MK_FSDP_RECOMPUTE) < 0 ? -1 : 0;
    e->run.next_local = next;
    e->zero.pre = pre;
    return rc;
}

/* R: every layer's internals, and the inputs the checkpointed blocks gave
 * up (the attention's forward then leaves nothing to recompute). */
static int recompute(mk_exec_t *e, mk_chunk_t *c, int mb)
{
    e->run.docs = e->pipe.docs ? e->pipe.docs[mb] : NULL; /* --reset-position-ids/-attention-mask */
    for (int l = c->l0; l < c->l1; l++) {
        e->trace.cur_layer = l;
        if (mk_gpt_act_unpack(&e->run, e->g, l, act_of(e, c, mb, l)) < 0 ||
            mk_exec_fsdp_begin(e, l, l + 1 < c->l1 ? l + 1 : -1, MK_FSDP_RECOMPUTE) < 0 ||
            (l + 1 < c->l1 && regrow_input(e, c, mb, l + 1) < 0) ||
            mk_gpt_recompute(e->g, &e->run, l, act_of(e, c, mb, l), e->pipe.tokens[mb], e->pipe.targets[mb]) < 0 ||
            mk_exec_fsdp_end(e, l, MK_FSDP_RECOMPUTE) < 0 ||
            mk_gpt_act_pack(&e->run, e->g, l, act_of(e, c, mb, l)) < 0) /* 16-bit until its backward */
            return -1;
        mk_exec_poll(e);
    }
    return 0;
}

static void start_dp(mk_exec_t *e, int l)
{
    size_t n;
    mk_grad_buf_t b = layer_grads(e, l, &n);
    /* device gradients go through a host copy (dp_done copies the sum back) */
    if (!e->dp.host) e->dp.host = calloc(e->g->n_layers, sizeof *e->dp.host);
    void *h = mk_comm_stage(&e->comm, b.p, n * b.size, 1);
    e->dp.host[l] = h != b.p ? h : NULL;
    if (e->trace.on) {
        if (!e->trace.dp_t0) { /* -1: no reduction of that layer to trace (dp_done) */
            e->trace.dp_t0 = malloc(e->g->n_layers * sizeof *e->trace.dp_t0);
            for (int i = 0; e->trace.dp_t0 && i < e->g->n_layers; i++) e->trace.dp_t0[i] = -1;
        }
        if (e->trace.dp_t0) e->trace.dp_t0[l] = mk_exec_now(e);
    }
    MPI_Iallreduce(MPI_IN_PLACE, h, (int)n, b.t, b.op, e->comm.dpc, &e->dp.req[l]);
    e->dp.state[l] = MK_DP_STARTED;
}

/* A layer's gradient is final: start its DP reduction, unless it holds the
 * tied embedding (then REDUCE_TIED or REDUCE_GRADS starts it, never both
 * reductions on one buffer at once) or the plan does not overlap the
 * gradient reduction (REDUCE_GRADS starts all; the sums are the same). */
static void layer_final(mk_exec_t *e, int l)
{
    if (e->comm.dp == 1 || e->zero.on) return;  /* ZeRO: reduce-scattered at OPT_STEP */
    e->dp.state[l] = MK_DP_FINAL;
    if (!e->o->ctx->plan.overlap_grad_reduce) return;
    if (!(e->comm.tied != MPI_COMM_NULL && (l == 0 || l == e->g->n_layers - 1))) start_dp(e, l);
}

static int backward(mk_exec_t *e, mk_chunk_t *c, int mb, mk_bwd_mode_t mode)
{
    e->run.docs = e->pipe.docs ? e->pipe.docs[mb] : NULL; /* --reset-position-ids/-attention-mask */
    int last = mode != MK_BWD_IN && c->nbwd == e->pipe.n_micro - 1;
    const float *dout = c->gin[mb];
    float *din = NULL;
    for (int l = c->l1 - 1; l >= c->l0; l--) {
        din = NULL;
        e->trace.cur_layer = l;
        if (mode != MK_BWD_W && l > 0) {
            if (l == c->l0) {
                if (!(din = mk_gpt_alloc(&e->run, e->g, act_floats(e)))) return -1;
            } else din = dout == e->pipe.grad_a ? e->pipe.grad_b : e->pipe.grad_a;
        }
        if (mk_gpt_act_unpack(&e->run, e->g, l, act_of(e, c, mb, l)) < 0 ||
            mk_exec_fsdp_begin(e, l, l > c->l0 ? l - 1 : -1, (int)mode) < 0 ||
            (mode != MK_BWD_W && regrow_input(e, c, mb, l) < 0) ||
            mk_gpt_backward(e->g, &e->run, l, act_of(e, c, mb, l), mode, dout, din, e->pipe.tokens[mb],
                            e->pipe.targets[mb]) < 0)
            return -1;
        /* the gradient at the layer's input is final: the run's type, as its output */
        if (din) mk_gpt_round_out(e->g, &e->run, din, act_floats(e));
        /* B_W reads them later (zero-bubble schedules): 16-bit meanwhile */
        if (mode == MK_BWD_IN && mk_gpt_act_pack(&e->run, e->g, l, act_of(e, c, mb, l)) < 0) return -1;
        if (mode != MK_BWD_IN) mk_exec_grads16_layer(e, l); /* its weight gradients accumulated */
        if (mk_exec_fsdp_end(e, l, (int)mode) < 0) return -1;
        if (last) layer_final(e, l);
        mk_exec_poll(e);
        dout = din;
    }
    if (mode != MK_BWD_W) {
        mk_gpt_release(&e->run, e->g, c->gin[mb], act_floats(e));
        c->gin[mb] = NULL;
        /* the previous virtual stage on this rank (one stage, the V's
           bottom): no SEND_GRAD */
        if (c->l0 > 0 && local_chunk(e, c->vs - 1)) local_chunk(e, c->vs - 1)->gin[mb] = din;
        else if (c->l0 > 0) c->gout[mb] = din;
    }
    if (mode != MK_BWD_IN) c->nbwd++;
    return 0;
}

static int reduce_tied(mk_exec_t *e)
{
    mk_gpt_t *g = e->g;
    if (e->comm.tied == MPI_COMM_NULL || g->cfg.untied) return 0;  /* untied: nothing shared */
    if (e->zero.on >= 2) return mk_exec_fsdp_tied(e);
    int k = e->comm.pp_rank == 0 ? 0 : g->n_tensors - 1;
    int l = g->t[k].layer;
    if (e->dp.req[l] != MPI_REQUEST_NULL && mk_comm_wait_for(&e->comm, &e->dp.req[l], "the DP gradient all-reduce", -1) < 0)
        return -1;
    dp_done(e, l);
    size_t n = (size_t)g->t[k].lrows * g->t[k].lcols;
    double t = e->trace.on ? mk_exec_now(e) : 0.0;
    mk_grad_buf_t b = mk_exec_grad_buf(e, g->t[k].off);
    int rc = mk_comm_allreduce(&e->comm, e->comm.tied, b.p, (int)n, b.t, b.op, "the tied embedding's all-reduce");
    mk_exec_trace_ev(e, MK_TRACE_DP, "AR.tied", t, -1, 0, l);
    return rc;
}

static int reduce_grads(mk_exec_t *e)
{
    if (e->zero.on >= 2) return mk_exec_fsdp_reduce(e);
    if (e->zero.on) return 0;
    if (e->comm.dp > 1) {
        for (int l = 0; l < e->g->n_layers; l++)
            if (e->g->t[e->g->first[l]].owned && e->dp.state[l] != MK_DP_STARTED) start_dp(e, l);
        if (mk_comm_waitall_for(&e->comm, e->g->n_layers, e->dp.req, "the DP gradient all-reduce", -1) < 0) return -1;
        for (int l = 0; l < e->g->n_layers; l++) dp_done(e, l);
    }
    return mk_exec_ep_reduce(e); /* folded at dp 1: the experts over the TP ranks */
}

/* Tracing around every instruction: compute ops and receive waits are
 * events on the compute stream (as the simulator's), and a memory sample
 * follows each instruction.  begin sets the context of TP collectives. */
static double instr_begin(mk_exec_t *e, const mk_walk_ev_t *ev)
{
    e->comm.at.op = mk_instr_op_name(ev->in->op);  /* for a timeout's message */
    e->comm.at.stage = ev->stage, e->comm.at.index = ev->index;
    e->comm.at.mb = ev->in->mb, e->comm.at.chunk = ev->in->chunk;
    if (!e->trace.on) return 0.0;
    e->trace.cur_mb = ev->in->mb, e->trace.cur_chunk = ev->in->chunk, e->trace.cur_layer = -1;
    return mk_exec_now(e);
}

static int instr_end(mk_exec_t *e, const mk_walk_ev_t *ev, double t, int timed, int rc)
{
    e->comm.at.op = NULL;
    if (!e->trace.on) return rc;
    if (timed) {
        char name[32];
        mk_trace_instr_name(name, sizeof name, mk_instr_op_name(ev->in->op), ev->in->mb);
        mk_exec_trace_ev(e, MK_TRACE_COMPUTE, name, t, ev->in->mb, ev->in->chunk, -1);
    }
    mk_exec_trace_mem(e);
    return rc;
}

/* The walker's hooks (ctx = the executor): each returns MK_WALK_GO (0) or -1.
 * F and F_PRE checkpoint the walker's count (capped by ckpt_cap). */
static int on_compute(void *ctx, const mk_walk_ev_t *ev)
{
    mk_exec_t *e = ctx;
    mk_chunk_t *c = &e->pipe.chunks[ev->in->chunk];
    int mb = ev->in->mb, rc;
    double t = instr_begin(e, ev);
    switch (ev->in->op) {
    case MK_INSTR_F: case MK_INSTR_F_PRE: rc = forward(e, c, mb, ev->ckpt); break;
    case MK_INSTR_R: rc = recompute(e, c, mb); break;
    case MK_INSTR_B: rc = backward(e, c, mb, MK_BWD_FULL); break;
    case MK_INSTR_B_IN: rc = backward(e, c, mb, MK_BWD_IN); break;
    case MK_INSTR_B_W: rc = backward(e, c, mb, MK_BWD_W); break;
    default: rc = mk_error_set("unknown instruction %d", (int)ev->in->op); break;
    }
    return instr_end(e, ev, t, 1, rc);
}

static int on_send(void *ctx, const mk_walk_ev_t *ev)
{
    mk_exec_t *e = ctx;
    mk_chunk_t *c = &e->pipe.chunks[ev->in->chunk];
    int mb = ev->in->mb, act = ev->in->op == MK_INSTR_SEND_ACT, rc = 0;
    float **buf = act ? &c->out[mb] : &c->gout[mb];
    double t = instr_begin(e, ev);
    if (!*buf) rc = mk_error_set("%s%d before its %s", act ? "SEND_ACT" : "SEND_GRAD", mb, act ? "F" : "B");
    else if (send(e, *buf, ev) < 0) rc = -1;
    else *buf = NULL;
    return instr_end(e, ev, t, 0, rc);
}

static int on_recv(void *ctx, const mk_walk_ev_t *ev)
{
    mk_exec_t *e = ctx;
    mk_chunk_t *c = &e->pipe.chunks[ev->in->chunk];
    int mb = ev->in->mb;
    double t = instr_begin(e, ev);
    float *buf = recv(e, ev);
    if (ev->in->op == MK_INSTR_RECV_ACT) act_of(e, c, mb, c->l0)->in = buf;
    else c->gin[mb] = buf;
    return instr_end(e, ev, t, 1, buf ? 0 : -1);
}

static int on_collective(void *ctx, const mk_walk_ev_t *ev)
{
    mk_exec_t *e = ctx;
    double t = instr_begin(e, ev);
    int rc = ev->in->op == MK_INSTR_REDUCE_TIED ? reduce_tied(e)
           : ev->in->op == MK_INSTR_REDUCE_GRADS ? reduce_grads(e)
           : mk_exec_opt_step(e, e->pipe.step, NULL);
    return instr_end(e, ev, t, 0, rc);
}

static int on_load(void *ctx, const mk_walk_ev_t *ev)
{
    mk_exec_t *e = ctx;  /* the step's batch is generated up front */
    return instr_end(e, ev, instr_begin(e, ev), 0, 0);
}

/* The most layers a forward of each chunk checkpoints: all of its layers
 * but the embedding (the head too, unlike the graph's count), so F_PRE
 * keeps only its input and an F's count is the instruction's. */
int mk_exec_stream_init(mk_exec_t *e)
{
    int pp = e->comm.pp, vpp = e->pipe.n_chunks;
    e->pipe.ckpt_cap = malloc((size_t)e->pipe.n_vstages * sizeof *e->pipe.ckpt_cap);
    if (!e->pipe.ckpt_cap) return mk_error_set("out of memory");
    for (int s = 0; s < pp; s++)
        for (int c = 0; c < vpp; c++) {
            const int *b = &e->pipe.bounds[mk_plan_vstage(&e->o->ctx->plan, s, c)];
            e->pipe.ckpt_cap[s * vpp + c] = b[1] - b[0] - (b[0] == 0);
        }
    mk_walk_opts_t wo = {.mode = MK_WALK_LOCAL, .ckpt_cap = e->pipe.ckpt_cap};
    mk_walk_hooks_t h = {.ctx = e, .compute = on_compute, .send = on_send, .recv = on_recv,
                         .collective = on_collective, .load = on_load};
    if (mk_walk_init(&e->pipe.walk, e->sched, &wo, &h) < 0) return mk_error_set("out of memory");
    return 0;
}

void mk_exec_stream_free(mk_exec_t *e)
{
    mk_walk_free(&e->pipe.walk);
    free(e->pipe.ckpt_cap);
}

/* One step of this stage's stream, on the walker in one-stage mode: every
 * instruction is ready, the hooks do the MPI receives and REDUCE_TIED. */
int mk_exec_step(mk_exec_t *e, int64_t step)
{
    int s = e->comm.pp_rank;
    e->loss = 0.0;
    e->run.aux = 0.0;
    e->pipe.step = step;
    for (int v = 0; v < e->pipe.n_chunks; v++) e->pipe.chunks[v].nbwd = 0;
    for (int l = 0; l < e->g->n_layers; l++) e->dp.state[l] = MK_DP_NOT_FINAL;
    mk_walk_reset(&e->pipe.walk);
    if (mk_walk_stage(&e->pipe.walk, s) < 0) return -1;
    if (mk_walk_state(&e->pipe.walk, s) != MK_WALK_ENDED) return mk_walk_done(&e->pipe.walk);
    return mk_exec_drain(e);
}
