/* ZeRO-2 and ZeRO-3 (FSDP) during a step (--zero 2|3; layout: exec_zero.c).
 *
 * Gradients: a unit's gradient buffer (its full size) exists from the
 * first backward that writes it until that micro-batch's gradient of the
 * unit is complete (the layer's B or B_W; the embedding's and the head's
 * B or B_IN); then it is reduce-scattered over the sharding group
 * (MPI_Ireduce_scatter, traced `RS.dp`) and this rank's summed piece is
 * added to its shard of the gradients, so no rank holds the full gradient
 * block beyond the buffers in flight (DeepSpeed ZeRO-2 and FSDP reduce
 * every micro-batch's gradient, not only the last one's: m reductions per
 * step for m micro-batches).  Without overlap_grad_reduce the buffers
 * accumulate the whole step and REDUCE_GRADS reduces them all.  A hybrid
 * group then sums each reduced piece over the replicas (`AR.dp`, as
 * PyTorch's HYBRID_SHARD).  16-bit gradients (exec_g16.c): the buffer,
 * rounded after each backward, goes packed (half the bytes, an MPI sum
 * rounding after each addition) and the summed piece is added into the
 * 16-bit pieces, rounded.
 *
 * Parameters (ZeRO-3): each rank keeps its pieces; before a layer's
 * forward, recompute or backward its units are all-gathered into working
 * buffers (MPI_Iallgatherv, traced `AG.zero`), the next layer's gather of
 * the pass is started behind the layer's compute (polled between layers;
 * with --no-zero3-prefetch each layer's gather starts as the layer does),
 * and the buffers are freed after the layer (pinned while a prefetch or a
 * use still needs them).  B_W reads no weights, nor does the embedding's
 * backward.  The head at pp 1 reads the embedding's wte unit too.
 * ZeRO-2 all-gathers the updated parameters after OPT_STEP (`AG.dp`). */
#include "config.h"
#include "exec/exec_internal.h"
#include "merak/trace.h"

#include <stdlib.h>

static int splits(const mk_gpt_t *g, int l)
{
    mk_gpt_kind_t k = mk_gpt_layer_kind(g, l);
    return k == MK_GPT_ATTN || k == MK_GPT_MLP || k == MK_GPT_HEAD;
}

/* A block's or the head's B_IN writes its norm's gradients, B_W its
 * linears' (gpt_layers.c); the embedding does all of its in B or B_IN. */
static int writes(const mk_gpt_t *g, int l, int mode) { return splits(g, l) || mode != MK_BWD_W; }
static int completes(const mk_gpt_t *g, int l, int mode)
{
    return splits(g, l) ? mode != MK_BWD_IN : mode != MK_BWD_W;
}

static int needs_params(const mk_exec_t *e, int l, int phase)
{
    return e->zero.on == 3 && mk_exec_reads_params(e, l, phase);
}

/* The units layer l reads: its own, and the head's borrowed wte (pp 1). */
static int units_of(const mk_exec_t *e, int l, int *out)
{
    int n = 0;
    for (int j = e->zero.lu[l]; j < e->zero.lu[l + 1]; j++) out[n++] = j;
    if (l == e->g->n_layers - 1 && mk_gpt_head_weight(e->g) == 0 && e->zero.wte_unit >= 0) out[n++] = e->zero.wte_unit;
    return n;
}

/* Point the tensors of unit u at base (their unit offsets), or at NULL. */
static void point(mk_exec_t *e, const mk_zunit_t *u, float **ptr, float *base)
{
    const mk_gpt_t *g = e->g;
    for (int k = g->first[u->layer]; k < g->first[u->layer + 1]; k++)
        if (g->t[k].owned && g->t[k].off >= u->off && g->t[k].off < u->off + u->n)
            ptr[k] = base ? base + (g->t[k].off - u->off) : NULL;
}

static size_t piece(const mk_exec_t *e, const mk_zunit_t *u) { (void)e; return (size_t)u->cnt[u->gi]; }

/* The floats a reduction buffer of n gradients takes: 16-bit gradients
 * (exec_g16.c) go packed, half the bytes. */
static size_t fly_floats(const mk_exec_t *e, size_t n) { return e->g16.dt ? mk_exec_floats16(n) : (n ? n : 1); }

/* ---- gradients ---- */

/* Unit u's request completed.  After the reduce-scatter a hybrid group
 * all-reduces the piece over the replicas (the same request); then the
 * piece joins this rank's gradients and the buffers go.  1: finished, 0:
 * the all-reduce is in flight, -1. */
static int rs_step(mk_exec_t *e, mk_zunit_t *u)
{
    size_t c = piece(e, u);
    mk_grad_buf_t b = mk_exec_grad_buf(e, u->soff);
    mk_exec_trace_ev(e, MK_TRACE_DP, u->ar_on ? "AR.dp" : "RS.dp", u->rs_t0, -1, 0, u->layer);
    if (!u->ar_on && u->rc != MPI_COMM_NULL) {
        u->ar_on = 1;
        u->rs_t0 = e->trace.on ? mk_exec_now(e) : 0.0;
        if (MPI_Iallreduce(MPI_IN_PLACE, u->hr, (int)c, b.t, b.op, u->rc, &u->rs) != MPI_SUCCESS)
            return mk_error_set("MPI_Iallreduce failed");
        return 0;
    }
    mk_comm_unstage(&e->comm, u->rfly, u->hr, c * b.size, 1);
    mk_comm_unstage(&e->comm, u->gfly, u->hg, u->n * b.size, 0);
    if (e->g16.dt) mk_exec_g16_add(e, u->soff, (const uint16_t *)u->rfly, c); /* rounded, as the store */
    else e->g->be->acc(e->g->be->ctx, e->zero.grads + u->soff, u->rfly, (int)c);
    mk_gpt_release(&e->run, e->g, u->rfly, fly_floats(e, c));
    mk_gpt_release(&e->run, e->g, u->gfly, fly_floats(e, u->n));
    u->rfly = u->gfly = NULL;
    u->ar_on = 0;
    e->zero.fly = -1;
    return 1;
}

static int rs_wait(mk_exec_t *e, mk_zunit_t *u)
{
    int rc = 0;
    while (u->gfly && rc == 0)
        if ((rc = mk_comm_wait_for(&e->comm, &u->rs, "the ZeRO gradient reduce-scatter", -1)) == 0) rc = rs_step(e, u) < 0 ? -1 : 0;
    return rc;
}

/* Reduce-scatter unit u's accumulated gradient.  One reduce-scatter in
 * flight per rank: the one before completes first, so at most one unit's
 * full gradient waits for the network beside those being computed. */
static int rs_start(mk_exec_t *e, mk_zunit_t *u)
{
    if (!u->gbuf) return 0;
    if (e->zero.fly >= 0 && rs_wait(e, &e->zero.u[e->zero.fly]) < 0) return -1;
    e->zero.fly = (int)(u - e->zero.u);
    size_t c = piece(e, u);
    mk_grad_buf_t b = mk_exec_grad_buf(e, u->soff);
    point(e, u, e->g->gw, NULL);
    u->gfly = u->gbuf, u->gbuf = NULL;
    if (e->g16.dt) { /* the unit's gradient packed (its fp32 values are fp16's, mk_exec_grads16_layer) */
        float *p = mk_gpt_alloc_raw(&e->run, e->g, fly_floats(e, u->n));
        if (!p) return -1;
        e->g->be->pack16(e->g->be->ctx, p, u->gfly, u->n, e->g16.dt);
        mk_gpt_release(&e->run, e->g, u->gfly, u->n);
        u->gfly = p;
    }
    if (!(u->rfly = mk_gpt_alloc(&e->run, e->g, fly_floats(e, c)))) return -1;
    u->hg = mk_comm_stage(&e->comm, u->gfly, u->n * b.size, 1);
    u->hr = mk_comm_stage(&e->comm, u->rfly, c * b.size, 0);
    u->rs_t0 = e->trace.on ? mk_exec_now(e) : 0.0;
    if (MPI_Ireduce_scatter(u->hg, u->hr, u->cnt, b.t, b.op, u->c, &u->rs) != MPI_SUCCESS)
        return mk_error_set("MPI_Ireduce_scatter failed");
    return 0;
}

/* Layer l's gradient buffers, zeroed when new (the layers accumulate). */
static int grads_ready(mk_exec_t *e, int l)
{
    int js[4], n = units_of(e, l, js);
    for (int i = 0; i < n; i++) {
        mk_zunit_t *u = &e->zero.u[js[i]];
        if (!u->gbuf && !(u->gbuf = mk_gpt_alloc(&e->run, e->g, u->n))) return -1;
        point(e, u, e->g->gw, u->gbuf);
    }
    return 0;
}

/* ---- parameters (ZeRO-3) ---- */

static void ag_done(mk_exec_t *e, mk_zunit_t *u)
{
    if (e->p16.dt) { /* the 16-bit unit: its vectors widened, its matrices viewed (host: 16-bit runs are the CPU's) */
        mk_exec_p16_unit_ready(e, u);
    } else {
        mk_comm_unstage(&e->comm, u->work, u->hw, u->n * sizeof(float), 1);
        mk_comm_unstage(&e->comm, e->zero.params + u->soff, u->hs, piece(e, u) * sizeof(float), 0);
        u->hw = u->hs = NULL;
    }
    u->ag_on = 0;
    mk_exec_trace_ev(e, MK_TRACE_DP, "AG.zero", u->ag_t0, -1, 0, u->layer);
}

/* Pin layer l's units, starting the gather of those not held. */
static int acquire(mk_exec_t *e, int l)
{
    int js[4], n = units_of(e, l, js);
    for (int i = 0; i < n; i++) {
        mk_zunit_t *u = &e->zero.u[js[i]];
        if (u->pins++ || u->work) continue;
        size_t c = piece(e, u);
        MPI_Datatype t = e->p16.dt ? MPI_UINT16_T : MPI_FLOAT;
        if (e->p16.dt) { /* the masters' pieces rounded: the layers' 16-bit weights, half the bytes */
            if (mk_exec_p16_unit_begin(e, u) < 0) return -1;
        } else {
            if (!(u->work = mk_gpt_alloc(&e->run, e->g, u->n))) return -1;
            u->hs = mk_comm_stage(&e->comm, e->zero.params + u->soff, c * sizeof(float), 1);
            u->hw = mk_comm_stage(&e->comm, u->work, u->n * sizeof(float), 0);
        }
        u->ag_t0 = e->trace.on ? mk_exec_now(e) : 0.0;
        if (MPI_Iallgatherv(u->hs, (int)c, t, u->hw, u->cnt, u->dsp, t, u->c, &u->ag) != MPI_SUCCESS)
            return mk_error_set("MPI_Iallgatherv failed");
        u->ag_on = 1;
    }
    return 0;
}

static int await(mk_exec_t *e, int l)
{
    int js[4], n = units_of(e, l, js);
    for (int i = 0; i < n; i++) {
        mk_zunit_t *u = &e->zero.u[js[i]];
        if (u->ag_on) {
            if (mk_comm_wait_for(&e->comm, &u->ag, "the ZeRO-3 weight all-gather", -1) < 0) return -1;
            ag_done(e, u);
        }
        if (e->p16.dt) mk_exec_p16_unit_point(e, u, 1);
        else point(e, u, e->g->pw, u->work);
    }
    return 0;
}

static void release(mk_exec_t *e, int l)
{
    int js[4], n = units_of(e, l, js);
    for (int i = 0; i < n; i++) {
        mk_zunit_t *u = &e->zero.u[js[i]];
        if (--u->pins > 0) continue;
        if (e->p16.dt) {
            mk_exec_p16_unit_point(e, u, 0);
            mk_exec_p16_unit_end(e, u);
        } else {
            point(e, u, e->g->pw, NULL);
            mk_gpt_release(&e->run, e->g, u->work, u->n);
            u->work = NULL;
        }
        u->pins = 0;
    }
}

/* ---- the step's hooks ---- */

int mk_exec_fsdp_begin(mk_exec_t *e, int l, int next, int phase)
{
    if (mk_exec_p16_begin(e, l, phase) < 0 || mk_exec_g16_begin(e, l, phase) < 0) return -1;
    if (e->zero.on < 2) return 0;
    int p = needs_params(e, l, phase);
    if (p && e->zero.pre != l && acquire(e, l) < 0) return -1;
    e->zero.pre = -1;
    if (next >= 0 && e->o->ctx->plan.zero3_prefetch && needs_params(e, next, phase)) {
        if (acquire(e, next) < 0) return -1;
        e->zero.pre = next;
    }
    if (p && await(e, l) < 0) return -1;
    return phase >= MK_FSDP_BWD && writes(e->g, l, phase) ? grads_ready(e, l) : 0;
}

int mk_exec_fsdp_end(mk_exec_t *e, int l, int phase)
{
    mk_exec_p16_end(e, l, phase);
    mk_exec_g16_end(e, l, phase);
    if (e->zero.on < 2) return 0;
    if (needs_params(e, l, phase)) release(e, l);
    if (phase < MK_FSDP_BWD || !completes(e->g, l, phase) || !e->o->ctx->plan.overlap_grad_reduce) return 0;
    for (int j = e->zero.lu[l]; j < e->zero.lu[l + 1]; j++)
        if (rs_start(e, &e->zero.u[j]) < 0) return -1;
    return 0;
}

void mk_exec_fsdp_poll(mk_exec_t *e)
{
    if (e->zero.on < 2) return;
    int done = 0;
    mk_zunit_t *f = e->zero.fly >= 0 ? &e->zero.u[e->zero.fly] : NULL;
    if (f && MPI_Test(&f->rs, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) rs_step(e, f);
    for (int j = 0; j < e->zero.n_units; j++) {
        mk_zunit_t *u = &e->zero.u[j];
        done = 0;
        if (u->ag_on && MPI_Test(&u->ag, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) ag_done(e, u);
    }
}

int mk_exec_fsdp_reduce(mk_exec_t *e)
{
    if (e->zero.on < 2) return 0;
    for (int j = 0; j < e->zero.n_units; j++)
        if (rs_start(e, &e->zero.u[j]) < 0) return -1;
    for (int j = 0; j < e->zero.n_units; j++)
        if (rs_wait(e, &e->zero.u[j]) < 0) return -1;
    return 0;
}

int mk_exec_fsdp_tied(mk_exec_t *e)
{
    for (int j = 0; j < e->zero.n_units; j++) {
        mk_zunit_t *u = &e->zero.u[j];
        if (!u->tied) continue;
        if (rs_start(e, u) < 0 || rs_wait(e, u) < 0) return -1;
        double t = e->trace.on ? mk_exec_now(e) : 0.0;
        mk_grad_buf_t b = mk_exec_grad_buf(e, u->soff);
        int rc = mk_comm_allreduce(&e->comm, e->comm.tied, b.p, (int)piece(e, u), b.t, b.op,
                                   "the tied embedding's all-reduce");
        mk_exec_trace_ev(e, MK_TRACE_DP, "AR.tied", t, -1, 0, u->layer);
        if (rc < 0) return -1;
    }
    return 0;
}

int mk_exec_fsdp_gather(mk_exec_t *e)
{
    if (e->zero.on != 2) return 0;
    int n = e->zero.n_units, rc = 0;
    MPI_Request *r = malloc((n ? n : 1) * sizeof *r);
    void **h = calloc(n ? n : 1, sizeof *h);
    if (!r || !h) { free(r); free(h); return mk_error_set("out of memory"); }
    double t = e->trace.on ? mk_exec_now(e) : 0.0;
    for (int j = 0; j < n; j++) {
        const mk_zunit_t *u = &e->zero.u[j];
        h[j] = mk_comm_stage(&e->comm, e->g->params + u->off, u->n * sizeof(float), 1);
        if (MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, h[j], u->cnt, u->dsp, MPI_FLOAT, u->c, &r[j]) !=
            MPI_SUCCESS)
            rc = mk_error_set("MPI_Iallgatherv failed"), r[j] = MPI_REQUEST_NULL;
    }
    if (mk_comm_waitall_for(&e->comm, n, r, "the ZeRO-3 collectives", -1) < 0) rc = -1;
    for (int j = 0; j < n; j++)
        mk_comm_unstage(&e->comm, e->g->params + e->zero.u[j].off, h[j], e->zero.u[j].n * sizeof(float), rc == 0);
    mk_exec_trace_ev(e, MK_TRACE_DP, "AG.dp", t, -1, 0, -1);
    free(r); free(h);
    return rc;
}

float *mk_exec_fsdp_full_grads(mk_exec_t *e)
{
    float *full = calloc(e->g->n_params ? e->g->n_params : 1, sizeof *full);
    for (int j = 0; full && j < e->zero.n_units; j++) {
        const mk_zunit_t *u = &e->zero.u[j];
        if (mk_comm_allgatherv(&e->comm, u->c, e->zero.grads + u->soff, (int)piece(e, u), full + u->off, u->cnt, u->dsp,
                               MPI_FLOAT, "the gradient dump's gather") < 0)
            return free(full), NULL;
    }
    return full;
}

void mk_exec_fsdp_free(mk_exec_t *e)
{
    for (int j = 0; e->zero.u && j < e->zero.n_units; j++) {
        mk_zunit_t *u = &e->zero.u[j];
        size_t c = piece(e, u);
        mk_gpt_release(&e->run, e->g, u->gbuf, u->n);
        mk_gpt_release(&e->run, e->g, u->gfly, fly_floats(e, u->n));
        mk_gpt_release(&e->run, e->g, u->rfly, fly_floats(e, c));
        if (e->p16.dt) mk_exec_p16_unit_end(e, u); /* (also a 16-bit gather a failed step left in flight) */
        else mk_gpt_release(&e->run, e->g, u->work, u->n);
        u->gbuf = u->gfly = u->rfly = u->work = NULL;
    }
}
