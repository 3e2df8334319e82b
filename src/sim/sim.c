/* The discrete-event engine (see include/merak/sim.h).
 *
 * Events are "stage s may run its next instruction at time T", kept in a
 * binary heap ordered by (T, sequence number), so every shared resource
 * (a node's NIC, a rank's p2p and DP streams) is reserved in time order.
 * A stage runs instructions until one takes time (then it re-queues at
 * its end) or blocks (a RECV whose send is not issued, REDUCE_TIED before
 * its peer); the matching send or peer wakes it.
 *
 * Instruction times (seconds, per representative rank):
 *   F, F_PRE   TP sub-pipeline over the chunk's layers (src/sim/tp.c), forward
 *   R          the same over the checkpointed layers
 *   B          recompute of the checkpointed layers (unless R ran) + the
 *              backward sub-pipeline (+ attention-core forward, selective)
 *   B_IN, B_W  backward split: B_W = the linears' weight-gradient GEMMs
 *              (one forward-sized GEMM each), B_IN = the rest, with TP comm
 *   SEND_*     alpha + S/beta on the p2p stream (NIC reserved when the peer
 *              is on another node); RECV waits for the arrival
 *   REDUCE_TIED  all-reduce of the tied embedding gradient, first <-> last
 *   REDUCE_GRADS waits for its bucket: buckets of the stage's gradients
 *              become final during the stage's last backward (bucket k of
 *              nb at (k+1)/nb of it) and queue on the DP stream as ring/
 *              hierarchical all-reduces (reduce-scatters with ZeRO-1)
 *   OPT_STEP   launch + 28 bytes per local parameter / memory bandwidth
 *              (reads grad, master, m, v; writes master, m, v, weight),
 *              /d with ZeRO-1, then the ZeRO-1 all-gather of the weights
 *   LOAD       0 (input tokens are tiny)
 * Under opts.unit_costs, compute ops take the scheduler's unit costs (mk_sched_costs_unit) instead
 * and everything else 0. */
#include "sim/sim_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct mk_sim {
    mk_cluster_t c;
};

void mk_sim_opts_init(mk_sim_opts_t *o)
{
    memset(o, 0, sizeof *o);
}

mk_sim_t *mk_sim_new(const mk_cluster_t *c)
{
    mk_sim_t *s = calloc(1, sizeof *s);
    if (!s) return mk_error_set("out of memory"), NULL;
    s->c = *c;
    return s;
}

void mk_sim_free(mk_sim_t *s)
{
    free(s);
}

/* ---- per-chunk costs ---- */

typedef struct chunk {
    int k, nl, nck;           /* virtual stage, layers, checkpointable layers */
    mk_tpl_t *fwd, *bwd, *bin; /* [nl] per layer, bwd/bin in backward order */
    mk_tpl_t *ckf;            /* [nck] forward pieces of checkpointable layers */
    double f, f_comm, b, b_comm, bi, bi_comm, bw, sel;
    double *rec, *rec_comm;   /* [nck+1] recompute of the first k checkpointable layers */
    double *stored, *wmax;    /* [nck+1] */
    double s_full, gbuf;
} chunk_t;

typedef struct heap_ev {
    double t;
    long seq;
    int st;
} heap_ev_t;

typedef struct stage {
    int pc, blocked, n_tied, n_grads, last_bwd, rank, node;
    double now, block_t, busy, exposed[MK_COMM_KINDS], comm[MK_COMM_KINDS];
    double stat, stored, peak;
    mk_mem_breakdown_t at_peak;
    mk_stage_static_t ss;
    double p2p_free, dp_free;
    double *mb_stored;        /* [m*vpp] */
    int *mb_ck;               /* [m*vpp] F's ckpt (-1: none yet) */
    unsigned char *mb_rec;    /* [m*vpp] R ran */
    double *bucket_end;       /* [nb] (-1: not launched) */
    int inflight, max_inflight;
    int wait_key;
} stage_t;

typedef struct run {
    const mk_cluster_t *c;
    const mk_plan_t *p;
    const mk_graph_t *g;
    const mk_sim_opts_t *o;
    const mk_sched_t *sch;
    chunk_t *ch;              /* [pp*vpp] by virtual stage k */
    stage_t *st;              /* [pp] */
    heap_ev_t *heap;
    int nheap, capheap;
    long seq, events;
    double *arrival, *xfer;   /* [2*m*V] message arrival and transfer time */
    double *nic_free;         /* [nodes] */
    int nodes, nb, V;
    mk_group_t tpg, dpg, tiedg;
    double tied_t;
    int tied_waiting;         /* stage blocked in REDUCE_TIED, or -1 */
    int tied_count[2];
    mk_trace_t *tr;
} run_t;

static double tokens_of(const mk_graph_t *g)
{
    return (double)g->opts.mbs * (g->cfg.seq > 0 ? g->cfg.seq : 1);
}

/* Fill a layer's forward (dir 0), backward (1) or input-gradient (2) pieces. */
static void layer_piece(run_t *R, int l, int dir, mk_tpl_t *t)
{
    const mk_graph_t *g = R->g;
    const mk_plan_t *p = R->p;
    const mk_layer_t *L = &g->layers[l];
    double N = tokens_of(g);
    int sp = p->seqpar && p->tp > 1, bwd = dir != 0;
    memset(t, 0, sizeof *t);
    t->layer = l;
    t->block = L->block;
    int vocab_emb = 0, head = 0;
    for (int i = L->first_op; i < L->first_op + L->n_ops; i++) {
        const mk_op_t *o = &g->ops[i];
        double full = mk_cost_op_time(R->c, g, i, p->tp, sp, N, p->dtype, bwd);
        double half = mk_cost_op_time(R->c, g, i, p->tp, sp, N / 2, p->dtype, bwd);
        if (dir == 2 && (o->kind == MK_OPK_LINEAR || o->kind == MK_OPK_LM_HEAD)) {
            /* B_IN: the backward minus the weight-gradient GEMM */
            double wf = mk_cost_op_time(R->c, g, i, p->tp, sp, N, p->dtype, 0);
            double wh = mk_cost_op_time(R->c, g, i, p->tp, sp, N / 2, p->dtype, 0);
            full = full > wf ? full - wf : 0;
            half = half > wh ? half - wh : 0;
        }
        t->c_full += full;
        t->c_half += 2 * half;
        if (o->tp_role == (bwd ? MK_TP_COLUMN : MK_TP_ROW)) t->row_full += full, t->row_half += half;
        if (o->kind == MK_OPK_EMBEDDING && o->tp_role == MK_TP_VOCAB) vocab_emb = 1;
        if (o->kind == MK_OPK_LM_HEAD && o->tp_role == MK_TP_VOCAB) head = 1;
    }
    t->c_half /= 2; /* c_half is one half's time */
    if (p->tp > 1 && !R->c->ideal && !R->o->unit_costs) {
        t->n_ar = L->n_tp_allreduce + (bwd ? head : vocab_emb);
        double S = L->out_bytes;
        if (sp) {
            t->ar_full = mk_cost_coll(R->c, MK_COLL_REDUCE_SCATTER, MK_ALGO_AUTO, &R->tpg, S) +
                         mk_cost_coll(R->c, MK_COLL_ALLGATHER, MK_ALGO_AUTO, &R->tpg, S);
            t->ar_half = mk_cost_coll(R->c, MK_COLL_REDUCE_SCATTER, MK_ALGO_AUTO, &R->tpg, S / 2) +
                         mk_cost_coll(R->c, MK_COLL_ALLGATHER, MK_ALGO_AUTO, &R->tpg, S / 2);
        } else {
            t->ar_full = mk_cost_coll(R->c, MK_COLL_ALLREDUCE, MK_ALGO_AUTO, &R->tpg, S);
            t->ar_half = mk_cost_coll(R->c, MK_COLL_ALLREDUCE, MK_ALGO_AUTO, &R->tpg, S / 2);
        }
    }
}

static double sel_extra(run_t *R, int l)
{
    const mk_layer_t *L = &R->g->layers[l];
    double t = 0;
    for (int i = L->first_op; i < L->first_op + L->n_ops; i++)
        if (R->g->ops[i].kind == MK_OPK_ATTENTION)
            t += mk_cost_op_time(R->c, R->g, i, R->p->tp, R->p->seqpar && R->p->tp > 1, tokens_of(R->g),
                                 R->p->dtype, 0);
    return t;
}

static void chunk_free(chunk_t *c)
{
    free(c->fwd), free(c->bwd), free(c->bin), free(c->ckf);
    free(c->rec), free(c->rec_comm), free(c->stored), free(c->wmax);
}

static int chunk_build(run_t *R, int k, chunk_t *c)
{
    const mk_plan_t *p = R->p;
    const mk_graph_t *g = R->g;
    int l0 = p->bounds[k], l1 = p->bounds[k + 1], lvl = p->tp_overlap;
    memset(c, 0, sizeof *c);
    c->k = k;
    c->nl = l1 - l0;
    for (int l = l0; l < l1; l++) c->nck += mk_sim_is_ckptable(g, l);
    c->fwd = calloc(c->nl, sizeof *c->fwd);
    c->bwd = calloc(c->nl, sizeof *c->bwd);
    c->bin = calloc(c->nl, sizeof *c->bin);
    c->ckf = calloc(c->nck + 1, sizeof *c->ckf);
    c->rec = calloc(c->nck + 1, sizeof *c->rec);
    c->rec_comm = calloc(c->nck + 1, sizeof *c->rec_comm);
    c->stored = calloc(c->nck + 1, sizeof *c->stored);
    c->wmax = calloc(c->nck + 1, sizeof *c->wmax);
    if (!c->fwd || !c->bwd || !c->bin || !c->ckf || !c->rec || !c->rec_comm || !c->stored || !c->wmax)
        return mk_error_set("out of memory");
    int j = 0;
    for (int i = 0; i < c->nl; i++) {
        int l = l0 + i;
        layer_piece(R, l, 0, &c->fwd[i]);
        layer_piece(R, l1 - 1 - i, 1, &c->bwd[i]);
        layer_piece(R, l1 - 1 - i, 2, &c->bin[i]);
        if (mk_sim_is_ckptable(g, l)) c->ckf[j++] = c->fwd[i];
        if (p->recompute.kind == MK_RECOMPUTE_SELECTIVE) c->sel += sel_extra(R, l);
        double wf = 0;
        const mk_layer_t *L = &g->layers[l1 - 1 - i];
        for (int o = L->first_op; o < L->first_op + L->n_ops; o++)
            if (g->ops[o].kind == MK_OPK_LINEAR || g->ops[o].kind == MK_OPK_LM_HEAD)
                wf += mk_cost_op_time(R->c, g, o, p->tp, p->seqpar && p->tp > 1, tokens_of(g), p->dtype, 0);
        c->bw += wf;
    }
    c->f = mk_tp_run(c->fwd, c->nl, lvl, NULL, &c->f_comm, NULL, NULL);
    c->b = mk_tp_run(c->bwd, c->nl, lvl, NULL, &c->b_comm, NULL, NULL);
    c->bi = mk_tp_run(c->bin, c->nl, lvl, NULL, &c->bi_comm, NULL, NULL);
    /* recompute prefixes: rec[k] = the sub-pipeline over the first k
     * checkpointable layers (synchronised at its end) */
    double *end = calloc(c->nck + 1, sizeof *end);
    if (!end) return mk_error_set("out of memory");
    double comm = 0;
    mk_tp_run(c->ckf, c->nck, lvl, end, &comm, NULL, NULL);
    double csum = 0;
    for (int i = 1; i <= c->nck; i++) {
        c->rec[i] = end[i - 1];
        double n = c->ckf[i - 1].n_ar;
        csum += lvl >= 1 ? 2 * n * c->ckf[i - 1].ar_half : n * c->ckf[i - 1].ar_full;
        c->rec_comm[i] = csum;
    }
    free(end);
    for (int i = 0; i <= c->nck; i++) mk_sim_chunk_act(p, g, k, i, &c->stored[i], &c->wmax[i], &c->gbuf);
    c->s_full = c->stored[0];
    return 0;
}

/* ---- heap ---- */

static int heap_push(run_t *R, double t, int st)
{
    if (R->nheap == R->capheap) {
        int cap = R->capheap ? 2 * R->capheap : 64;
        heap_ev_t *h = realloc(R->heap, cap * sizeof *h);
        if (!h) return mk_error_set("out of memory");
        R->heap = h, R->capheap = cap;
    }
    heap_ev_t e = {t, R->seq++, st};
    int i = R->nheap++;
    while (i > 0) {
        int up = (i - 1) / 2;
        heap_ev_t *u = &R->heap[up];
        if (u->t < e.t || (u->t == e.t && u->seq < e.seq)) break;
        R->heap[i] = *u;
        i = up;
    }
    R->heap[i] = e;
    return 0;
}

static heap_ev_t heap_pop(run_t *R)
{
    heap_ev_t top = R->heap[0], last = R->heap[--R->nheap];
    int i = 0, n = R->nheap;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        heap_ev_t *best = &last;
        if (l < n && (R->heap[l].t < best->t || (R->heap[l].t == best->t && R->heap[l].seq < best->seq)))
            m = l, best = &R->heap[l];
        if (r < n && (R->heap[r].t < best->t || (R->heap[r].t == best->t && R->heap[r].seq < best->seq)))
            m = r, best = &R->heap[r];
        if (m == i) break;
        R->heap[i] = R->heap[m];
        i = m;
    }
    if (n) R->heap[i] = last;
    return top;
}

/* ---- helpers ---- */

static int msg_key(run_t *R, int stage, const mk_instr_t *in)
{
    int p = R->p->pp, k = in->chunk * p + stage, dst;
    int grad = in->op == MK_INSTR_SEND_GRAD || in->op == MK_INSTR_RECV_GRAD;
    if (in->op == MK_INSTR_SEND_ACT) dst = k + 1;
    else if (in->op == MK_INSTR_SEND_GRAD) dst = k - 1;
    else dst = k;
    if (in->mb < 0 || in->mb >= R->p->m || dst < 0 || dst >= R->V) return -1;
    return (grad * R->p->m + in->mb) * R->V + dst;
}

static void mem_note(run_t *R, int s, double transient, double t)
{
    stage_t *S = &R->st[s];
    double cur = S->stat + S->stored + transient;
    if (cur > S->peak) {
        S->peak = cur;
        S->at_peak.weights = S->ss.weights, S->at_peak.grads = S->ss.grads;
        S->at_peak.optimizer = S->ss.optimizer, S->at_peak.buffers = S->ss.buffers;
        S->at_peak.activations = S->stored, S->at_peak.working = transient;
        S->at_peak.total = cur;
    }
    (void)t;
}

static void mem_trace(run_t *R, int s, double t)
{
    if (R->tr) mk_trace_counter(R->tr, R->st[s].rank, "memory", t, R->st[s].stat + R->st[s].stored);
}

typedef struct emit_ctx {
    run_t *R;
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

static void launch_buckets(run_t *R, int s, double t0, double dur)
{
    stage_t *S = &R->st[s];
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

/* Compute op duration (s); sets *recomputes (B/B_IN replays the forward),
 * *tpc (TP communication inside it, s) and *transient (bytes held only
 * while it runs). */
static double compute_time(run_t *R, int s, const mk_instr_t *in, int slot, int *recomputes, double *tpc,
                           double *transient)
{
    const mk_plan_t *p = R->p;
    stage_t *S = &R->st[s];
    chunk_t *c = &R->ch[in->chunk * p->pp + s];
    int ck = S->mb_ck[slot] < 0 ? 0 : S->mb_ck[slot];
    if (ck > c->nck) ck = c->nck;
    *recomputes = 0, *tpc = 0, *transient = 0;
    int unit = R->o->unit_costs;
    switch (in->op) {
    case MK_INSTR_F:
    case MK_INSTR_F_PRE: {
        int k = in->op == MK_INSTR_F_PRE ? c->nck : (in->ckpt < c->nck ? in->ckpt : c->nck);
        *transient = c->wmax[k];
        *tpc = c->f_comm;
        return unit ? 1 : c->f;
    }
    case MK_INSTR_R:
        *tpc = c->rec_comm[ck];
        *transient = 0;
        return unit ? 1 : c->rec[ck];
    case MK_INSTR_B:
    case MK_INSTR_B_IN: {
        int rc = ck > 0 && !S->mb_rec[slot];
        *recomputes = rc;
        *transient = (rc ? c->wmax[ck] : 0) + c->gbuf;
        if (unit) return (in->op == MK_INSTR_B ? 2 : 1) + rc;
        double t = (in->op == MK_INSTR_B ? c->b : c->bi) + c->sel + (rc ? c->rec[ck] : 0);
        *tpc = (in->op == MK_INSTR_B ? c->b_comm : c->bi_comm) + (rc ? c->rec_comm[ck] : 0);
        return t;
    }
    case MK_INSTR_B_W:
        *transient = c->gbuf;
        return unit ? 1 : c->bw;
    default: return 0;
    }
}

/* Pure compute inside a compute op as the TP sub-pipeline counts it; the
 * rest of its duration is exposed TP communication. */
static double pure_sum(const mk_tpl_t *L, int n, int level)
{
    double cs = 0;
    for (int i = 0; i < n; i++) {
        if (level <= 0 || (level == 1 && L[i].n_ar == 0)) cs += L[i].c_full;
        else if (level == 1) cs += L[i].c_full - L[i].row_full + 2 * L[i].row_half;
        else cs += 2 * L[i].c_half;
    }
    return cs;
}

static double pure_compute(run_t *R, chunk_t *c, const mk_instr_t *in, int rc, int ck, double d)
{
    int lvl = R->p->tp_overlap;
    double cs = 0;
    if (in->op == MK_INSTR_F || in->op == MK_INSTR_F_PRE) cs = pure_sum(c->fwd, c->nl, lvl);
    else if (in->op == MK_INSTR_B) cs = pure_sum(c->bwd, c->nl, lvl) + c->sel;
    else if (in->op == MK_INSTR_B_IN) cs = pure_sum(c->bin, c->nl, lvl) + c->sel;
    else if (in->op == MK_INSTR_B_W) return d;
    if (in->op == MK_INSTR_R || ((in->op == MK_INSTR_B || in->op == MK_INSTR_B_IN) && rc))
        cs += pure_sum(c->ckf, ck, lvl);
    return cs;
}

static void emit_compute_tp(run_t *R, int s, const mk_instr_t *in, chunk_t *c, int rc, int ck, double t0)
{
    if (!R->tr || R->p->tp <= 1) return;
    emit_ctx_t e = {R, s, in->mb, in->chunk, t0};
    double off = 0;
    if (in->op == MK_INSTR_R || ((in->op == MK_INSTR_B || in->op == MK_INSTR_B_IN) && rc)) {
        off = mk_tp_run(c->ckf, ck, R->p->tp_overlap, NULL, NULL, emit_tp, &e);
        e.base += off;
    }
    if (in->op == MK_INSTR_F || in->op == MK_INSTR_F_PRE) mk_tp_run(c->fwd, c->nl, R->p->tp_overlap, NULL, NULL, emit_tp, &e);
    else if (in->op == MK_INSTR_B) mk_tp_run(c->bwd, c->nl, R->p->tp_overlap, NULL, NULL, emit_tp, &e);
    else if (in->op == MK_INSTR_B_IN) mk_tp_run(c->bin, c->nl, R->p->tp_overlap, NULL, NULL, emit_tp, &e);
}

/* Run stage s from time T until it takes time or blocks. */
static int step_stage(run_t *R, int s, double T)
{
    const mk_plan_t *p = R->p;
    stage_t *S = &R->st[s];
    const mk_stream_t *str = &R->sch->streams[s];
    int unit = R->o->unit_costs;
    char name[48];
    if (!S->blocked && T > S->now) S->now = T;
    while (S->pc < str->n) {
        const mk_instr_t *in = &str->v[S->pc];
        double t = S->now;
        int slot = in->mb >= 0 && in->mb < p->m ? in->mb * p->vpp + in->chunk : -1;
        switch (in->op) {
        case MK_INSTR_F:
        case MK_INSTR_F_PRE:
        case MK_INSTR_R:
        case MK_INSTR_B:
        case MK_INSTR_B_IN:
        case MK_INSTR_B_W: {
            if (slot < 0 || in->chunk < 0 || in->chunk >= p->vpp)
                return mk_error_set("stage %d: %s with bad micro-batch %d / chunk %d", s,
                                    mk_instr_op_name(in->op), in->mb, in->chunk);
            chunk_t *c = &R->ch[in->chunk * p->pp + s];
            if (in->op == MK_INSTR_F || in->op == MK_INSTR_F_PRE) {
                int k = in->op == MK_INSTR_F_PRE ? c->nck : (in->ckpt < c->nck ? in->ckpt : c->nck);
                S->mb_ck[slot] = k;
                S->mb_rec[slot] = 0;
                S->mb_stored[slot] = c->stored[k];
                S->stored += c->stored[k];
                S->inflight++;
                if (S->inflight > S->max_inflight) S->max_inflight = S->inflight;
            }
            int rc, ck = S->mb_ck[slot] < 0 ? 0 : S->mb_ck[slot];
            double tpc, tr, pure;
            double d = compute_time(R, s, in, slot, &rc, &tpc, &tr);
            mem_note(R, s, tr, t);
            pure = pure_compute(R, c, in, rc, ck, d);
            if (!unit) {
                double ex = d - pure;
                if (ex < 0) ex = 0;
                if (ex > tpc) ex = tpc;
                S->exposed[MK_COMM_TP] += ex;
                S->comm[MK_COMM_TP] += tpc;
            }
            if (in->op == MK_INSTR_R) {
                S->stored += c->s_full - S->mb_stored[slot];
                S->mb_stored[slot] = c->s_full;
                S->mb_rec[slot] = 1;
            }
            if (R->tr) {
                mk_trace_instr_name(name, sizeof name, mk_instr_op_name(in->op), in->mb);
                mk_trace_complete(R->tr, S->rank, MK_TRACE_COMPUTE, name, t, d, s, in->mb, in->chunk, -1);
                if (!unit) emit_compute_tp(R, s, in, c, rc, ck, t);
            }
            if (S->pc == S->last_bwd) launch_buckets(R, s, t, d);
            S->now = t + d;
            S->busy += d;
            if (in->op == MK_INSTR_B || in->op == MK_INSTR_B_W) {
                S->stored -= S->mb_stored[slot];
                S->mb_stored[slot] = 0;
                S->inflight--;
            }
            mem_note(R, s, 0, S->now);
            mem_trace(R, s, S->now);
            break;
        }
        case MK_INSTR_SEND_ACT:
        case MK_INSTR_SEND_GRAD: {
            int key = msg_key(R, s, in);
            if (key < 0) return mk_error_set("stage %d: bad %s (mb %d, chunk %d)", s, mk_instr_op_name(in->op), in->mb, in->chunk);
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
            double d = unit ? 0 : mk_cost_p2p(R->c, inter, sharers, bytes);
            S->p2p_free = st + d;
            if (inter) R->nic_free[S->node] = st + d;
            R->arrival[key] = st + d;
            R->xfer[key] = d;
            S->comm[MK_COMM_PP] += d;
            R->events++;
            if (R->tr) {
                mk_trace_instr_name(name, sizeof name, mk_instr_op_name(in->op), in->mb);
                mk_trace_complete(R->tr, S->rank, MK_TRACE_P2P, name, st, d, s, in->mb, in->chunk, -1);
            }
            stage_t *D = &R->st[ds];
            if (D->blocked == 1 && D->wait_key == key)
                if (heap_push(R, st + d > D->block_t ? st + d : D->block_t, ds) < 0) return -1;
            break;
        }
        case MK_INSTR_RECV_ACT:
        case MK_INSTR_RECV_GRAD: {
            int key = msg_key(R, s, in);
            if (key < 0) return mk_error_set("stage %d: bad %s (mb %d, chunk %d)", s, mk_instr_op_name(in->op), in->mb, in->chunk);
            if (R->arrival[key] < 0) {
                S->blocked = 1, S->wait_key = key, S->block_t = t;
                return 0;
            }
            double a = R->arrival[key], wait = a > t ? a - t : 0;
            S->blocked = 0;
            S->exposed[MK_COMM_PP] += wait < R->xfer[key] ? wait : R->xfer[key];
            if (R->tr && wait > 0) {
                mk_trace_instr_name(name, sizeof name, mk_instr_op_name(in->op), in->mb);
                mk_trace_complete(R->tr, S->rank, MK_TRACE_COMPUTE, name, t, wait, s, in->mb, in->chunk, -1);
            }
            S->now = t + wait;
            break;
        }
        case MK_INSTR_REDUCE_TIED: {
            int other = s == 0 ? p->pp - 1 : 0;
            if (R->tied_waiting < 0) {
                R->tied_waiting = s;
                S->blocked = 2, S->block_t = t;
                return 0;
            }
            stage_t *O = &R->st[other];
            double st = t > O->block_t ? t : O->block_t;
            double d = unit ? 0 : mk_cost_coll(R->c, MK_COLL_ALLREDUCE, MK_ALGO_AUTO, &R->tiedg, S->ss.tied_bytes);
            R->tied_waiting = -1;
            R->events++;
            stage_t *both[2] = {S, O};
            for (int i = 0; i < 2; i++) {
                stage_t *X = both[i];
                X->exposed[MK_COMM_DP] += d;
                X->comm[MK_COMM_DP] += d;
                if (R->tr) mk_trace_complete(R->tr, X->rank, MK_TRACE_DP, "AR.tied", st, d, X == S ? s : other, -1, 0, -1);
            }
            O->blocked = 0, O->now = st + d, O->pc++;
            if (heap_push(R, st + d, other) < 0) return -1;
            S->now = st + d;
            break;
        }
        case MK_INSTR_REDUCE_GRADS: {
            if (S->n_grads < R->nb && S->bucket_end[S->n_grads] < 0) launch_buckets(R, s, t, 0);
            double e = S->n_grads < R->nb ? S->bucket_end[S->n_grads] : t;
            S->n_grads++;
            if (e > t) S->exposed[MK_COMM_DP] += e - t, S->now = e;
            break;
        }
        case MK_INSTR_OPT_STEP: {
            double d = 0;
            double local = S->ss.params / (mk_plan_zero(p) ? p->dp : 1);
            if (!unit && !R->c->ideal) d = R->c->dev.launch_s + 28.0 * local / R->c->dev.mem_bw_Bps;
            if (R->tr) mk_trace_complete(R->tr, S->rank, MK_TRACE_COMPUTE, "OPT", t, d, s, -1, 0, -1);
            S->now = t + d;
            S->busy += d;
            if (mk_plan_zero(p) && !unit) {
                double w = p->dtype == MK_DTYPE_FP32 ? 4 : 2;
                double st = S->now > S->dp_free ? S->now : S->dp_free;
                double ag = mk_cost_coll(R->c, MK_COLL_ALLGATHER, MK_ALGO_AUTO, &R->dpg, w * S->ss.params);
                if (R->tr) mk_trace_complete(R->tr, S->rank, MK_TRACE_DP, "AG.dp", st, ag, s, -1, 0, -1);
                S->exposed[MK_COMM_DP] += st + ag - S->now;
                S->comm[MK_COMM_DP] += ag;
                S->now = S->dp_free = st + ag;
                R->events++;
            }
            break;
        }
        default: /* LOAD */
            break;
        }
        S->pc++;
        R->events++;
        if (S->now > T) return heap_push(R, S->now, s);
    }
    return 0;
}

static void run_free(run_t *R)
{
    if (R->ch)
        for (int k = 0; k < R->V; k++) chunk_free(&R->ch[k]);
    if (R->st)
        for (int s = 0; s < R->p->pp; s++) {
            free(R->st[s].mb_stored), free(R->st[s].mb_ck), free(R->st[s].mb_rec);
            free(R->st[s].bucket_end);
        }
    free(R->ch), free(R->st), free(R->heap), free(R->arrival), free(R->xfer), free(R->nic_free);
}

/* Forward FLOPs recomputed in one step, from the streams: every F or
 * F_PRE recomputes the forward of the first `ckpt` checkpointable layers
 * of its chunk (F_PRE: all of them), on every DP replica.  Full recompute
 * gives Megatron-LM's 96-convention count, none the 72 one (README.md "The model"), partial
 * policies (stage-aware, auto, merak's last stage) what they really do. */
static double recompute_flops(const mk_sched_t *sch, const mk_plan_t *p, const mk_graph_t *g)
{
    double f = 0;
    for (int s = 0; s < p->pp; s++)
        for (int i = 0; i < sch->streams[s].n; i++) {
            const mk_instr_t *in = &sch->streams[s].v[i];
            if ((in->op != MK_INSTR_F && in->op != MK_INSTR_F_PRE) || in->ckpt <= 0) continue;
            int k = in->chunk * p->pp + s, left = in->op == MK_INSTR_F_PRE ? 1 << 30 : in->ckpt;
            for (int l = p->bounds[k]; l < p->bounds[k + 1] && left > 0; l++)
                if (mk_layer_checkpointable(g, l)) f += g->layers[l].fwd_flops, left--;
        }
    return f * p->dp;
}

int mk_sim_run(mk_sim_t *sim, const mk_plan_ctx_t *ctx, const mk_sim_opts_t *opts, mk_sim_result_t *out)
{
    mk_sim_opts_t dflt;
    if (!opts) mk_sim_opts_init(&dflt), opts = &dflt;
    if (!sim || !ctx || !out) return mk_error_set("mk_sim_run: NULL argument");
    const mk_plan_t p = ctx->plan; /* resolved: checked, auto settled (mk_plan_resolve) */
    const mk_graph_t *g = ctx->g;
    const mk_cluster_t *c = &sim->c;

    run_t R;
    memset(&R, 0, sizeof R);
    R.c = c, R.p = &p, R.g = g, R.o = opts, R.tr = opts->trace, R.V = p.n_vstages;
    R.tied_waiting = -1;
    int gpn = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
    int rc = -1;
    mk_sched_t *own = NULL;

    /* statics and buckets */
    R.st = calloc(p.pp, sizeof *R.st);
    if (!R.st) { mk_error_set("out of memory"); goto done; }
    double gmax = 0;
    for (int s = 0; s < p.pp; s++) {
        mk_sim_stage_static(&p, g, s, opts, p.dp > 1, &R.st[s].ss);
        if (R.st[s].ss.grad_comm_bytes > gmax) gmax = R.st[s].ss.grad_comm_bytes;
    }
    R.nb = 0;
    if (p.dp > 1) {
        R.nb = (int)ceil(gmax / mk_sim_bucket_bytes(opts));
        if (R.nb < 1) R.nb = 1;
        if (R.nb > 64) R.nb = 64;
    }
    const mk_sched_t *sch = opts->sched;
    if (!sch) {
        mk_sched_spec_t spec = ctx->spec;
        spec.grad_buckets = R.nb;
        own = mk_sched_build(&spec);
        if (!own) goto done;
        sch = own;
    } else {
        R.nb = sch->spec.grad_buckets;
        if (sch->spec.pp != p.pp || sch->spec.m != p.m || sch->spec.vpp != p.vpp) {
            mk_error_set("the given streams do not match the plan (pp, micro-batches, vpp)");
            goto done;
        }
    }
    R.sch = sch;
    R.tpg = mk_group_make(c, 0, 1, p.tp, p.tp);
    int sh = p.dp * p.tp < gpn ? p.dp * p.tp : gpn;
    R.dpg = mk_group_make(c, 0, p.tp, p.dp, sh);
    R.tiedg = mk_group_make(c, 0, p.pp > 1 ? (p.pp - 1) * p.dp * p.tp : 1, 2, sh);
    R.ch = calloc(R.V, sizeof *R.ch);
    long nmsg = 2L * p.m * R.V;
    R.arrival = malloc(nmsg * sizeof *R.arrival);
    R.xfer = malloc(nmsg * sizeof *R.xfer);
    R.nodes = (int)(((long)p.dp * p.pp * p.tp + gpn - 1) / gpn);
    R.nic_free = calloc(R.nodes, sizeof *R.nic_free);
    if (!R.ch || !R.arrival || !R.xfer || !R.nic_free) { mk_error_set("out of memory"); goto done; }
    for (long i = 0; i < nmsg; i++) R.arrival[i] = -1, R.xfer[i] = 0;
    for (int k = 0; k < R.V; k++)
        if (chunk_build(&R, k, &R.ch[k]) < 0) goto done;
    for (int s = 0; s < p.pp; s++) {
        stage_t *S = &R.st[s];
        int nmc = p.m * p.vpp;
        S->rank = s * p.dp * p.tp;
        S->node = S->rank / gpn;
        S->stat = S->ss.weights + S->ss.grads + S->ss.optimizer + S->ss.buffers;
        S->mb_stored = calloc(nmc, sizeof *S->mb_stored);
        S->mb_ck = malloc(nmc * sizeof *S->mb_ck);
        S->mb_rec = calloc(nmc, 1);
        S->bucket_end = malloc((R.nb + 1) * sizeof *S->bucket_end);
        if (!S->mb_stored || !S->mb_ck || !S->mb_rec || !S->bucket_end) { mk_error_set("out of memory"); goto done; }
        for (int i = 0; i < nmc; i++) S->mb_ck[i] = -1;
        for (int i = 0; i <= R.nb; i++) S->bucket_end[i] = -1;
        S->last_bwd = -1;
        const mk_stream_t *str = &sch->streams[s];
        int has_bw = 0;
        for (int i = 0; i < str->n; i++) has_bw |= str->v[i].op == MK_INSTR_B_W;
        for (int i = 0; i < str->n; i++)
            if (str->v[i].op == (has_bw ? MK_INSTR_B_W : MK_INSTR_B)) S->last_bwd = i;
        mem_note(&R, s, 0, 0);
        if (R.tr) {
            char label[64];
            snprintf(label, sizeof label, "rank %d (stage %d)", S->rank, s);
            mk_trace_rank(R.tr, S->rank, label);
            mem_trace(&R, s, 0);
        }
        if (heap_push(&R, 0, s) < 0) goto done;
    }
    while (R.nheap) {
        heap_ev_t e = heap_pop(&R);
        if (R.st[e.st].blocked == 2) continue; /* woken by its peer (REDUCE_TIED) */
        if (step_stage(&R, e.st, e.t) < 0) goto done;
    }
    double step = 0;
    for (int s = 0; s < p.pp; s++) {
        if (R.st[s].pc < sch->streams[s].n) {
            const mk_instr_t *in = &sch->streams[s].v[R.st[s].pc];
            mk_error_set("simulation deadlock: stage %d stuck at %s mb %d", s, mk_instr_op_name(in->op), in->mb);
            goto done;
        }
        if (R.st[s].now > step) step = R.st[s].now;
    }

    /* results */
    memset(out, 0, sizeof *out);
    out->pp = p.pp;
    out->step_time_s = step;
    double gpus = (double)p.dp * p.pp * p.tp;
    double rf = recompute_flops(sch, &p, g);
    out->flops_recompute = rf > 0;
    out->flops_per_iteration = mk_graph_flops_per_iteration(g, p.gbs, 0) + rf;
    if (step > 0) {
        out->tokens_per_s = (double)p.gbs * g->cfg.seq / step;
        out->tflops_per_gpu = out->flops_per_iteration / step / gpus / 1e12;
        out->mfu = out->flops_per_iteration / step / gpus / c->dev.matmul_flops[p.dtype];
    }
    out->memory_limit_bytes = c->dev.mem_bytes;
    out->fits = 1;
    out->worst_stage = -1;
    double worst = -1;
    for (int s = 0; s < p.pp; s++) {
        stage_t *S = &R.st[s];
        out->bubble_fraction[s] = step > 0 ? 1.0 - S->busy / step : 0;
        if (out->bubble_fraction[s] < 0) out->bubble_fraction[s] = 0;
        out->peak_memory_bytes[s] = S->peak;
        out->mem[s] = S->at_peak;
        out->max_inflight[s] = S->max_inflight;
        if (S->peak > worst) worst = S->peak, out->worst_stage = s;
        for (int k = 0; k < MK_COMM_KINDS; k++) {
            double ex = S->exposed[k] < S->comm[k] ? S->exposed[k] : S->comm[k];
            out->exposed_comm_s[k] += ex / p.pp;
            out->overlapped_comm_s[k] += (S->comm[k] - ex) / p.pp;
        }
    }
    if (worst > out->memory_limit_bytes) out->fits = 0, out->shortfall_bytes = worst - out->memory_limit_bytes;
    out->events = R.events;
    rc = 0;
done:
    run_free(&R);
    mk_sched_free(own);
    return rc;
}

json_t *mk_sim_result_json(const mk_sim_result_t *r, const mk_plan_t *p)
{
    json_t *bub = json_array(), *peak = json_array(), *mem = json_array(), *inf = json_array();
    for (int s = 0; s < r->pp; s++) {
        json_array_append_new(bub, json_real(r->bubble_fraction[s]));
        json_array_append_new(peak, json_real(r->peak_memory_bytes[s]));
        const mk_mem_breakdown_t *m = &r->mem[s];
        json_array_append_new(mem, json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "weights", m->weights,
                                             "grads", m->grads, "optimizer", m->optimizer, "activations",
                                             m->activations, "working", m->working, "buffers", m->buffers,
                                             "total", m->total));
        json_array_append_new(inf, json_integer(r->max_inflight[s]));
    }
    json_t *ex = json_pack("{s:f, s:f, s:f}", "pp", r->exposed_comm_s[MK_COMM_PP], "tp", r->exposed_comm_s[MK_COMM_TP],
                           "dp", r->exposed_comm_s[MK_COMM_DP]);
    json_t *ov = json_pack("{s:f, s:f, s:f}", "pp", r->overlapped_comm_s[MK_COMM_PP], "tp",
                           r->overlapped_comm_s[MK_COMM_TP], "dp", r->overlapped_comm_s[MK_COMM_DP]);
    json_t *j = json_pack("{s:f, s:f, s:f, s:f, s:s, s:f, s:o, s:o, s:o, s:o, s:f, s:b, s:i, s:f, s:o, s:o, s:I}",
                          "step_time_s", r->step_time_s, "tokens_per_s", r->tokens_per_s, "tflops_per_gpu",
                          r->tflops_per_gpu, "mfu", r->mfu, "flops_convention",
                          r->flops_recompute ? "72BslH^2 + recomputed forwards (96BslH^2 with full recompute)"
                                             : "72BslH^2 (without recompute)",
                          "flops_per_iteration", r->flops_per_iteration, "bubble_fraction", bub,
                          "peak_memory_bytes", peak, "memory_breakdown", mem, "max_inflight", inf,
                          "memory_limit_bytes", r->memory_limit_bytes, "fits", r->fits, "worst_stage",
                          r->worst_stage, "shortfall_bytes", r->shortfall_bytes, "exposed_comm_s", ex,
                          "overlapped_comm_s", ov, "events", (json_int_t)r->events);
    if (j && p) json_object_set_new(j, "plan", mk_plan_to_json(p));
    return j;
}
