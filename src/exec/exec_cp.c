/* Context parallelism in the executor (exec/cp.h; Megatron's
 * --context-parallel-size): the CP group, the local chunks of each
 * micro-batch's sequences, and attention as a ring over the group.
 *
 * The CP ranks of one replica, stage and TP rank are consecutive in the
 * grid (rank = tp_rank + tp (cp_rank + cp (dp_rank + dp pp_rank))), so the
 * communicator layer sees a DP group of dp x cp ranks (mk_comm_t.dp, its
 * dp_rank = cp_rank + cp dp_rank): gradients are reduced and ZeRO shards
 * over dp x cp, and rank 0 of that group writes checkpoints, with no change
 * there.  The CP group is that group's cp consecutive ranks.
 *
 * Ring attention (forward): each rank's K/V block of its micro-batch
 * travels cp - 1 steps to the next rank (nonblocking MPI_Isend/Irecv,
 * posted before the step's compute, traced SEND_KV / RECV_KV); at every
 * step the local queries meet the block in hand, causal by global
 * positions, merged by the online-softmax rule (kernels_cp_cpu.c).
 * Backward: the same ring carries K/V while the block's dK|dV accumulate
 * on the way: each rank adds its part to the sum that arrives from the
 * previous one and passes it on, so after cp sends the block's gradient is
 * back at its owner.  Every rank posts a step's receives before it waits
 * for anything of that step, so the ring cannot deadlock.
 *
 * --cp-comm-type allgather (Transformer Engine's AttnFuncWithCPAndKVAllGather):
 * every rank's block is all-gathered (traced AG.cp) before the pass, in
 * the backward again, and the local queries meet the blocks in the ring's
 * order, so the forward is the ring's bit for bit; the backward's dK|dV
 * parts of all blocks are reduce-scattered (RS.cp), each rank keeping its
 * own block's sum. */
#include "config.h"
#include "exec/cp.h"
#include "exec/exec_internal.h"
#include "merak/kernels_cpu.h"
#include "merak/trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_KV = 1, TAG_DKV = 2 };

/* Floats of one K/V block of B local sequences. */
static size_t kv_floats(const mk_gpt_t *g, int B) { return (size_t)B * g->T * 2 * g->kv * g->hs; }

/* The block in hand goes to the next rank while the previous rank's arrives. */
static void post_kv(mk_exec_cp_t *c, float *send, float *recv, size_t n, int tag, MPI_Request r[2])
{
    MPI_Irecv(recv, (int)n, MPI_FLOAT, c->prev, tag, c->c, &r[0]);
    MPI_Isend(send, (int)n, MPI_FLOAT, c->next, tag, c->c, &r[1]);
}

static void wait_kv(mk_exec_t *e, MPI_Request r[2], double t0)
{
    mk_comm_waitall_for(&e->comm, 2, r, "the context-parallel K/V ring", -1); /* a failure stands (comm.h) */
    mk_exec_trace_ev(e, MK_TRACE_CP, "SEND_KV", t0, e->trace.cur_mb, e->trace.cur_chunk, e->trace.cur_layer);
    mk_exec_trace_ev(e, MK_TRACE_CP, "RECV_KV", t0, e->trace.cur_mb, e->trace.cur_chunk, e->trace.cur_layer);
}

/* The K/V ring of one attention pass: the block in hand (cur, first this
 * rank's own), passed on at each step while the previous rank's arrives. */
typedef struct {
    float *cur, *nxt;
    MPI_Request r[2];
    double t0;
} kv_ring_t;

static void ring_start(mk_exec_t *e, kv_ring_t *k, const float *qkv, int B)
{
    k->cur = e->cp.kv[0], k->nxt = e->cp.kv[1];
    mk_cp_kv_pack(e->g, k->cur, qkv, B);
}

/* The CP rank whose block a rank meets at step s: the ring's order, which
 * allgather keeps too (so its forward is the ring's bit for bit). */
static int block_at(const mk_exec_cp_t *c, int s) { return (c->rank - s + c->n) % c->n; }

/* Step s begins: the next block is in flight (but at the last step);
 * returns the CP rank whose block is in hand. */
static int ring_step(mk_exec_t *e, kv_ring_t *k, int s, size_t n)
{
    mk_exec_cp_t *c = &e->cp;
    k->t0 = mk_exec_now(e);
    if (s + 1 < c->n) post_kv(c, k->cur, k->nxt, n, TAG_KV, k->r);
    return block_at(c, s);
}

/* Step s ends: the next block has arrived and is in hand. */
static void ring_next(mk_exec_t *e, kv_ring_t *k, int s)
{
    if (s + 1 >= e->cp.n) return;
    wait_kv(e, k->r, k->t0);
    float *t = k->cur;
    k->cur = k->nxt, k->nxt = t;
}

/* A forward pass begins: the online softmax's running max and sum, and the output, empty. */
static void fwd_begin(mk_exec_t *e, float *out, int B)
{
    const mk_gpt_t *g = e->g;
    size_t st = (size_t)B * g->nh * g->T;
    for (size_t i = 0; i < st; i++) e->cp.m[i] = -INFINITY, e->cp.l[i] = 0.0f;
    memset(out, 0, (size_t)B * g->T * g->nh * g->hs * sizeof(float));
}

static void ring_fwd(void *ctx, float *out, float *lse, const float *qkv, int B)
{
    mk_exec_t *e = ctx;
    mk_exec_cp_t *c = &e->cp;
    const mk_gpt_t *g = e->g;
    size_t n = kv_floats(g, B);
    fwd_begin(e, out, B);
    kv_ring_t k;
    ring_start(e, &k, qkv, B);
    for (int s = 0; s < c->n; s++) {
        int src = ring_step(e, &k, s, n);
        mk_cp_block_fwd(g, qkv, k.cur, src, B, c->m, c->l, out);
        ring_next(e, &k, s);
    }
    mk_cp_fwd_finish(g, out, lse, c->m, c->l, B);
}

/* Step s of the backward: dK|dV of the block of rank (rank - s) from the
 * local queries into part, plus the sum that arrived from the previous
 * rank (s > 0), sent on; the next step's sum is then awaited in dkv[2]. */
static void bwd_pass(mk_exec_t *e, int s, float *part, size_t n, MPI_Request *racc, MPI_Request *sacc)
{
    mk_exec_cp_t *c = &e->cp;
    if (s > 0) {
        mk_comm_wait_for(&e->comm, racc, "the context-parallel dK/dV ring", -1);
        mk_cpu_acc(NULL, part, c->dkv[2], (int)n);
    }
    mk_comm_wait_for(&e->comm, sacc, "the context-parallel dK/dV ring", -1); /* the previous step's sum has left */
    MPI_Isend(part, (int)n, MPI_FLOAT, c->next, TAG_DKV, c->c, sacc);
    MPI_Irecv(c->dkv[2], (int)n, MPI_FLOAT, c->prev, TAG_DKV, c->c, racc);
}

static void ring_bwd(void *ctx, float *dqkv, const float *dout, const float *qkv, const float *out,
                     const float *lse, int B)
{
    mk_exec_t *e = ctx;
    mk_exec_cp_t *c = &e->cp;
    const mk_gpt_t *g = e->g;
    size_t n = kv_floats(g, B);
    MPI_Request racc = MPI_REQUEST_NULL, sacc = MPI_REQUEST_NULL;
    mk_cp_bwd_rowdot(g, c->m, dout, out, B);
    kv_ring_t k;
    ring_start(e, &k, qkv, B);
    for (int s = 0; s < c->n; s++) {
        int src = ring_step(e, &k, s, n);
        float *part = c->dkv[s % 2];
        memset(part, 0, n * sizeof(float));
        mk_cp_block_bwd(g, qkv, k.cur, src, B, dout, lse, c->m, dqkv, part);
        bwd_pass(e, s, part, n, &racc, &sacc);
        ring_next(e, &k, s);
    }
    double t0 = mk_exec_now(e);
    MPI_Request r[2] = {racc, sacc};  /* this rank's own block, home after cp sends */
    wait_kv(e, r, t0);
    mk_cp_kv_add(g, dqkv, c->dkv[2], B);
}

/* allgather: every rank's K/V block of this pass into c->kv[0], in CP rank order. */
static int gather_kv(mk_exec_t *e, const float *qkv, int B, size_t n)
{
    mk_exec_cp_t *c = &e->cp;
    double t0 = mk_exec_now(e);
    MPI_Request r;
    mk_cp_kv_pack(e->g, c->kv[0] + (size_t)c->rank * n, qkv, B);
    MPI_Iallgather(MPI_IN_PLACE, 0, MPI_FLOAT, c->kv[0], (int)n, MPI_FLOAT, c->c, &r);
    int rc = mk_comm_wait_for(&e->comm, &r, "the context-parallel K/V all-gather", -1);
    mk_exec_trace_ev(e, MK_TRACE_CP, "AG.cp", t0, e->trace.cur_mb, e->trace.cur_chunk, e->trace.cur_layer);
    return rc;
}

static void gather_fwd(void *ctx, float *out, float *lse, const float *qkv, int B)
{
    mk_exec_t *e = ctx;
    mk_exec_cp_t *c = &e->cp;
    const mk_gpt_t *g = e->g;
    size_t n = kv_floats(g, B);
    fwd_begin(e, out, B);
    if (gather_kv(e, qkv, B, n) < 0) return; /* a failure stands (comm.h) */
    for (int s = 0; s < c->n; s++) {
        int src = block_at(c, s);
        mk_cp_block_fwd(g, qkv, c->kv[0] + (size_t)src * n, src, B, c->m, c->l, out);
    }
    mk_cp_fwd_finish(g, out, lse, c->m, c->l, B);
}

static void gather_bwd(void *ctx, float *dqkv, const float *dout, const float *qkv, const float *out,
                       const float *lse, int B)
{
    mk_exec_t *e = ctx;
    mk_exec_cp_t *c = &e->cp;
    const mk_gpt_t *g = e->g;
    size_t n = kv_floats(g, B);
    mk_cp_bwd_rowdot(g, c->m, dout, out, B);
    if (gather_kv(e, qkv, B, n) < 0) return;
    memset(c->dkv[0], 0, (size_t)c->n * n * sizeof(float));
    for (int s = 0; s < c->n; s++) {
        int src = block_at(c, s);
        mk_cp_block_bwd(g, qkv, c->kv[0] + (size_t)src * n, src, B, dout, lse, c->m, dqkv, c->dkv[0] + (size_t)src * n);
    }
    double t0 = mk_exec_now(e);
    MPI_Request r;
    MPI_Ireduce_scatter_block(MPI_IN_PLACE, c->dkv[0], (int)n, MPI_FLOAT, MPI_SUM, c->c, &r);
    if (mk_comm_wait_for(&e->comm, &r, "the context-parallel dK/dV reduce-scatter", -1) < 0) return;
    mk_exec_trace_ev(e, MK_TRACE_CP, "RS.cp", t0, e->trace.cur_mb, e->trace.cur_chunk, e->trace.cur_layer);
    mk_cp_kv_add(g, dqkv, c->dkv[0], B); /* this rank's block's sum, at the buffer's start */
}

/* Floats of buffer i of kv[] or dkv[]: the ring's two K/V blocks and
 * three dK|dV ones, a block each; allgather's first of each, cp blocks
 * (0: none). */
static size_t cp_buf_floats(const mk_exec_t *e, int i)
{
    size_t n = kv_floats(e->g, e->o->ctx->plan.mbs);
    if (e->o->ctx->plan.cp_comm == MK_CP_COMM_A2A) return 0; /* its own (exec_cp_a2a.c) */
    return !e->cp.gather ? n : i == 0 ? (size_t)e->cp.n * n : 0;
}

int mk_exec_cp_init(mk_exec_t *e)
{
    mk_exec_cp_t *c = &e->cp;
    mk_gpt_t *g = e->g;
    if (c->n <= 1) return 0;
    if (strcmp(e->o->be->name, "cpu"))
        return mk_error_set("--cp %d: context parallelism runs on the cpu backend only (not %s)", c->n,
                            e->o->be->name);
    c->rank = e->comm.dp_rank % c->n;
    MPI_Comm_split(e->comm.dpc, e->comm.dp_rank / c->n, c->rank, &c->c);
    c->next = (c->rank + 1) % c->n, c->prev = (c->rank + c->n - 1) % c->n;
    g->cp = c->n, g->cp_rank = c->rank, g->T /= c->n;
    c->gather = e->o->ctx->plan.cp_comm == MK_CP_COMM_ALLGATHER;
    e->run.cp_attn_fwd = c->gather ? gather_fwd : ring_fwd, e->run.cp_attn_bwd = c->gather ? gather_bwd : ring_bwd;
    size_t st = (size_t)e->o->ctx->plan.mbs * g->nh * g->T;
    for (int i = 0; i < 2; i++)
        if (cp_buf_floats(e, i) && !(c->kv[i] = mk_gpt_alloc(&e->run, g, cp_buf_floats(e, i)))) return -1;
    for (int i = 0; i < 3; i++)
        if (cp_buf_floats(e, i) && !(c->dkv[i] = mk_gpt_alloc(&e->run, g, cp_buf_floats(e, i)))) return -1;
    if (!(c->m = mk_gpt_alloc(&e->run, g, st)) || !(c->l = mk_gpt_alloc(&e->run, g, st))) return -1;
    return e->o->ctx->plan.cp_comm == MK_CP_COMM_A2A ? mk_exec_cp_a2a_init(e) : 0;
}

void mk_exec_cp_free(mk_exec_t *e)
{
    mk_exec_cp_t *c = &e->cp;
    if (c->c == MPI_COMM_NULL) return;  /* cp 1, or setup failed before the split */
    size_t st = (size_t)e->o->ctx->plan.mbs * e->g->nh * e->g->T;
    for (int i = 0; i < 2; i++) mk_gpt_release(&e->run, e->g, c->kv[i], cp_buf_floats(e, i));
    for (int i = 0; i < 3; i++) mk_gpt_release(&e->run, e->g, c->dkv[i], cp_buf_floats(e, i));
    mk_gpt_release(&e->run, e->g, c->m, st);
    mk_gpt_release(&e->run, e->g, c->l, st);
    mk_exec_cp_a2a_free(e);
    MPI_Comm_free(&c->c);
}

/* Keep this rank's chunks of each sequence: x holds mbs whole sequences of
 * S = cp T tokens; row j of local sequence b comes from b S + pos(j), never
 * before b T + j, and those sources only grow, so in place is safe. */
static void select_rows(const mk_exec_t *e, int *x)
{
    int T = e->g->T, S = T * e->cp.n;
    for (int b = 0; b < e->o->ctx->plan.mbs; b++)
        for (int j = 0; j < T; j++) x[b * T + j] = x[b * S + mk_cp_pos(e->cp.n, e->cp.rank, T, j)];
}

void mk_exec_cp_select(mk_exec_t *e)
{
    if (e->cp.n <= 1) return;
    for (int mb = 0; mb < e->pipe.n_micro; mb++) {
        select_rows(e, e->pipe.tokens[mb]);
        select_rows(e, e->pipe.targets[mb]);
    }
}
