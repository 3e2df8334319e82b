/* The instruction interpreter: one step of this stage's stream, with the
 * semantics of sched.h (buffered sends via MPI_Isend, blocking receives,
 * DP reductions started per layer during the last backward pass and
 * completed at REDUCE_GRADS).  Communication progresses by polling
 * between layers. */
#include "config.h"
#include "exec/exec_internal.h"
#include "merak/trace.h"

#include <stdlib.h>
#include <time.h>

static size_t act_floats(const mk_exec_t *e) { return (size_t)e->pipe.n_tokens * e->g->C; }

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

/* Layer l's gradient range in the parameter block. */
static float *layer_grads(mk_exec_t *e, int l, size_t *n)
{
    mk_gpt_t *g = e->g;
    const mk_gpt_tensor_t *a = &g->t[g->first[l]], *z = &g->t[g->first[l + 1] - 1];
    *n = z->off + (size_t)z->lrows * z->lcols - a->off;
    return g->grads + a->off;
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
    float *gr = layer_grads(e, l, &n);
    mk_comm_unstage(&e->comm, gr, e->dp.host[l], n * sizeof(float), 1);
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
        if (mk_comm_wait(&e->comm, &e->pipe.sends[i].req) < 0) return -1;
        send_done(e, &e->pipe.sends[i]);
    }
    e->pipe.n_sends = 0;
    return 0;
}

/* Message tags: (kind, receiving virtual stage, micro-batch) are unique per step. */
static int tag_of(const mk_exec_t *e, int kind, int vdst, int mb)
{
    return (kind * e->pipe.n_vstages + vdst) * e->pipe.n_micro + mb;
}

static int peer_rank(const mk_exec_t *e, int vs)
{
    return mk_comm_rank_of(&e->comm, e->comm.dp_rank, vs % e->comm.pp, e->comm.tp_rank);
}

static int send(mk_exec_t *e, float *buf, int vdst, int kind, int mb, int chunk)
{
    if (e->pipe.n_sends == e->pipe.cap_sends) {
        e->pipe.cap_sends = e->pipe.cap_sends ? 2 * e->pipe.cap_sends : 16;
        e->pipe.sends = realloc(e->pipe.sends, e->pipe.cap_sends * sizeof *e->pipe.sends);
    }
    mk_pending_t *p = &e->pipe.sends[e->pipe.n_sends++];
    p->buf = buf;
    p->n = act_floats(e);
    p->ts = e->trace.on ? mk_exec_now(e) : 0.0;
    p->op = kind ? MK_INSTR_SEND_GRAD : MK_INSTR_SEND_ACT;
    p->mb = mb, p->chunk = chunk;
    p->host = mk_comm_stage(&e->comm, buf, p->n * sizeof(float), 1);
    MPI_Isend(p->host, (int)p->n, MPI_FLOAT, peer_rank(e, vdst), tag_of(e, kind, vdst, mb),
              e->comm.world, &p->req);
    return 0;
}

static float *recv(mk_exec_t *e, int vsrc, int vdst, int kind, int mb)
{
    float *buf = mk_gpt_alloc(&e->run, e->g, act_floats(e));
    if (!buf) return NULL;
    MPI_Request r;
    void *h = mk_comm_stage(&e->comm, buf, act_floats(e) * sizeof(float), 0);
    MPI_Irecv(h, (int)act_floats(e), MPI_FLOAT, peer_rank(e, vsrc), tag_of(e, kind, vdst, mb),
              e->comm.world, &r);
    /* keep earlier sends moving while we wait */
    for (;;) {
        int done = 0;
        MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        if (done) {
            mk_comm_unstage(&e->comm, buf, h, act_floats(e) * sizeof(float), 1);
            return buf;
        }
        mk_exec_poll(e);
        if (e->comm.polite) {
            struct timespec ts = {0, e->comm.sleep_ns};
            nanosleep(&ts, NULL);
        }
    }
}

/* Checkpointable layers are the chunk's layers but the embedding, in order. */
static int forward(mk_exec_t *e, mk_chunk_t *c, int mb, int ckpt)
{
    int k = 0;
    for (int l = c->l0; l < c->l1; l++) {
        mk_gpt_act_t *a = act_of(e, c, mb, l);
        float *out = NULL;
        e->trace.cur_layer = l;
        if (l > 0 && !a->in) return mk_error_set("F%d: no input for layer %d", mb, l);
        if (mk_gpt_layer_kind(e->g, l) != MK_GPT_HEAD) {
            if (!(out = mk_gpt_alloc(&e->run, e->g, act_floats(e)))) return -1;
            if (l + 1 < c->l1) act_of(e, c, mb, l + 1)->in = out;
            else if (e->comm.pp == 1) act_of(e, c + 1, mb, l + 1)->in = out; /* next chunk, here */
            else c->out[mb] = out;
        }
        int cp = l > 0 && k++ < ckpt;
        e->run.next_local = l + 1 < c->l1;
        if (mk_gpt_forward(e->g, &e->run, l, a, e->pipe.tokens[mb], e->pipe.targets[mb], out, cp, &e->loss) < 0)
            return -1;
        mk_exec_poll(e);
    }
    return 0;
}

static int recompute(mk_exec_t *e, mk_chunk_t *c, int mb)
{
    for (int l = c->l0; l < c->l1; l++) {
        e->trace.cur_layer = l;
        if (mk_gpt_recompute(e->g, &e->run, l, act_of(e, c, mb, l), e->pipe.tokens[mb], e->pipe.targets[mb]) < 0)
            return -1;
        mk_exec_poll(e);
    }
    return 0;
}

static void start_dp(mk_exec_t *e, int l)
{
    size_t n;
    float *gr = layer_grads(e, l, &n);
    /* device gradients go through a host copy (dp_done copies the sum back) */
    if (!e->dp.host) e->dp.host = calloc(e->g->n_layers, sizeof *e->dp.host);
    void *h = mk_comm_stage(&e->comm, gr, n * sizeof(float), 1);
    e->dp.host[l] = h != (void *)gr ? h : NULL;
    if (e->trace.on) {
        if (!e->trace.dp_t0) e->trace.dp_t0 = malloc(e->g->n_layers * sizeof *e->trace.dp_t0);
        e->trace.dp_t0[l] = mk_exec_now(e);
    }
    MPI_Iallreduce(MPI_IN_PLACE, h, (int)n, MPI_FLOAT, MPI_SUM, e->comm.dpc, &e->dp.req[l]);
    e->dp.state[l] = MK_DP_STARTED;
}

/* A layer's gradient is final: start its DP reduction, unless it holds the
 * tied embedding (then REDUCE_TIED or REDUCE_GRADS starts it, never both
 * reductions on one buffer at once). */
static void layer_final(mk_exec_t *e, int l)
{
    if (e->comm.dp == 1 || e->zero.on) return;  /* ZeRO: reduce-scattered at OPT_STEP */
    e->dp.state[l] = MK_DP_FINAL;
    if (!(e->comm.pp > 1 && (l == 0 || l == e->g->n_layers - 1))) start_dp(e, l);
}

static int backward(mk_exec_t *e, mk_chunk_t *c, int mb, mk_bwd_mode_t mode)
{
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
        if (mk_gpt_backward(e->g, &e->run, l, act_of(e, c, mb, l), mode, dout, din, e->pipe.tokens[mb],
                            e->pipe.targets[mb]) < 0)
            return -1;
        if (last) layer_final(e, l);
        mk_exec_poll(e);
        dout = din;
    }
    if (mode != MK_BWD_W) {
        mk_gpt_release(&e->run, e->g, c->gin[mb], act_floats(e));
        c->gin[mb] = NULL;
        /* one stage: the previous chunk is on this rank, no SEND_GRAD */
        if (c->l0 > 0 && e->comm.pp == 1) c[-1].gin[mb] = din;
        else if (c->l0 > 0) c->gout[mb] = din;
    }
    if (mode != MK_BWD_IN) c->nbwd++;
    return 0;
}

static int reduce_tied(mk_exec_t *e)
{
    mk_gpt_t *g = e->g;
    if (e->comm.tied == MPI_COMM_NULL) return 0;
    int k = e->comm.pp_rank == 0 ? 0 : g->n_tensors - 1;
    int l = g->t[k].layer;
    if (e->dp.req[l] != MPI_REQUEST_NULL && mk_comm_wait(&e->comm, &e->dp.req[l]) < 0) return -1;
    dp_done(e, l);
    size_t n = (size_t)g->t[k].lrows * g->t[k].lcols;
    double t = e->trace.on ? mk_exec_now(e) : 0.0;
    int rc = mk_comm_allreduce(&e->comm, e->comm.tied, g->grads + g->t[k].off, (int)n, MPI_FLOAT, MPI_SUM);
    mk_exec_trace_ev(e, MK_TRACE_DP, "AR.tied", t, -1, 0, l);
    return rc;
}

static int reduce_grads(mk_exec_t *e)
{
    if (e->comm.dp == 1 || e->zero.on) return 0;
    for (int l = 0; l < e->g->n_layers; l++)
        if (e->g->t[e->g->first[l]].owned && e->dp.state[l] != MK_DP_STARTED) start_dp(e, l);
    if (mk_comm_waitall(&e->comm, e->g->n_layers, e->dp.req) < 0) return -1;
    for (int l = 0; l < e->g->n_layers; l++) dp_done(e, l);
    return 0;
}

static int run_instr1(mk_exec_t *e, const mk_instr_t *in, int64_t step)
{
    mk_chunk_t *c = &e->pipe.chunks[in->chunk];
    int mb = in->mb;
    switch (in->op) {
    case MK_INSTR_LOAD: return 0;  /* the step's batch is generated up front */
    case MK_INSTR_F: return forward(e, c, mb, in->ckpt);
    case MK_INSTR_F_PRE: return forward(e, c, mb, c->l1 - c->l0);
    case MK_INSTR_R: return recompute(e, c, mb);
    case MK_INSTR_B: return backward(e, c, mb, MK_BWD_FULL);
    case MK_INSTR_B_IN: return backward(e, c, mb, MK_BWD_IN);
    case MK_INSTR_B_W: return backward(e, c, mb, MK_BWD_W);
    case MK_INSTR_SEND_ACT:
        if (!c->out[mb]) return mk_error_set("SEND_ACT%d before its F", mb);
        send(e, c->out[mb], c->vs + 1, 0, mb, in->chunk);
        c->out[mb] = NULL;
        return 0;
    case MK_INSTR_SEND_GRAD:
        if (!c->gout[mb]) return mk_error_set("SEND_GRAD%d before its B", mb);
        send(e, c->gout[mb], c->vs - 1, 1, mb, in->chunk);
        c->gout[mb] = NULL;
        return 0;
    case MK_INSTR_RECV_ACT:
        return (act_of(e, c, mb, c->l0)->in = recv(e, c->vs - 1, c->vs, 0, mb)) ? 0 : -1;
    case MK_INSTR_RECV_GRAD:
        return (c->gin[mb] = recv(e, c->vs + 1, c->vs, 1, mb)) ? 0 : -1;
    case MK_INSTR_REDUCE_TIED: return reduce_tied(e);
    case MK_INSTR_REDUCE_GRADS: return reduce_grads(e);
    case MK_INSTR_OPT_STEP: return mk_exec_opt_step(e, step, NULL);
    default: return mk_error_set("unknown instruction %d", (int)in->op);
    }
}

/* One instruction, traced: compute ops and receive waits on the compute
 * stream (as the simulator), OPT, and a memory sample after each. */
static int run_instr(mk_exec_t *e, const mk_instr_t *in, int64_t step)
{
    if (!e->trace.on) return run_instr1(e, in, step);
    double t = mk_exec_now(e);
    e->trace.cur_mb = in->mb, e->trace.cur_chunk = in->chunk, e->trace.cur_layer = -1;
    int rc = run_instr1(e, in, step);
    char name[32];
    switch (in->op) {
    case MK_INSTR_F: case MK_INSTR_F_PRE: case MK_INSTR_R: case MK_INSTR_B: case MK_INSTR_B_IN:
    case MK_INSTR_B_W: case MK_INSTR_RECV_ACT: case MK_INSTR_RECV_GRAD:
        mk_trace_instr_name(name, sizeof name, mk_instr_op_name(in->op), in->mb);
        mk_exec_trace_ev(e, MK_TRACE_COMPUTE, name, t, in->mb, in->chunk, -1);
        break;
    default: break;
    }
    mk_exec_trace_mem(e);
    return rc;
}

int mk_exec_step(mk_exec_t *e, int64_t step)
{
    const mk_stream_t *s = &e->sched->streams[e->comm.pp_rank];
    e->loss = 0.0;
    for (int v = 0; v < e->pipe.n_chunks; v++) e->pipe.chunks[v].nbwd = 0;
    for (int l = 0; l < e->g->n_layers; l++) e->dp.state[l] = MK_DP_NOT_FINAL;
    for (int i = 0; i < s->n; i++)
        if (run_instr(e, &s->v[i], step) < 0) return -1;
    return mk_exec_drain(e);
}
