/* Per-chunk costs of one run (sim_internal.h): every layer of a chunk as
 * TP sub-pipeline pieces (forward, backward, B_IN), the chunk's F, B, B_IN,
 * B_W and recompute times from them (sim/tp.c), and the activation
 * bytes per checkpoint count (memory.c).  Built once per mk_sim_run; the
 * instruction handlers (sim_step.c) only look them up.
 *
 *   F, F_PRE   the forward sub-pipeline over the chunk's layers
 *   R          the same over the checkpointed layers
 *   B          recompute of the checkpointed layers (unless R ran) + the
 *              backward sub-pipeline (+ attention-core forward, selective)
 *   B_IN, B_W  backward split: B_W = the weight-gradient GEMMs (linears, head,
 *              an MoE op's experts: mk_cost_op_wgrad_time)
 *              (one forward-sized GEMM each), B_IN = the rest, with TP comm
 * Under opts.unit_costs the scheduler's unit costs (mk_sched_costs_unit). */
#include "sim/sim_internal.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>

/* The tokens of a micro-batch one rank computes: b x s, of which a CP
 * rank holds s/cp of each sequence (chunks i and 2cp-1-i: with a causal
 * mask the attention work balances too, so every op, the attention core
 * included, is 1/cp of the sequence's on each CP rank). */
static double tokens_of(const mk_plan_t *p, const mk_graph_t *g)
{
    return (double)g->opts.mbs * (g->cfg.seq > 0 ? g->cfg.seq : 1) / (p->cp > 1 ? p->cp : 1);
}

static int seqpar_of(const mk_plan_t *p)
{
    return p->seqpar && p->tp > 1;
}

/* One TP all-reduce of S bytes (or RS+AG with sequence parallelism). */
static double tp_collective(const mk_sim_state_t *R, double S)
{
    if (!seqpar_of(R->p)) return mk_cost_coll(R->c, MK_COLL_ALLREDUCE, &R->tpg, S);
    return mk_cost_coll(R->c, MK_COLL_REDUCE_SCATTER, &R->tpg, S) +
           mk_cost_coll(R->c, MK_COLL_ALLGATHER, &R->tpg, S);
}

/* Transformer Engine's userbuffers overlap (Megatron-Core's
 * --tp-comm-overlap; sequence parallelism): a block's all-gather is split
 * into tp pieces that a ring exchange passes on while the GEMM reading
 * them runs on the piece already there, and its reduce-scatter into tp
 * pieces sent on as the GEMM making them finishes each (TE's
 * "ring-exchange" and "pipelined" overlaps).  A GEMM of time G paired with
 * a transfer of time C then takes max(G, C + G/tp): the first piece's GEMM
 * (all-gather) or the last piece's transfer (reduce-scatter) cannot
 * overlap, so C - (1 - 1/tp) G of the transfer stays exposed where
 * positive.  The all-gather (half of a unit's RS + AG, equal volumes)
 * pairs with the layer's column-parallel GEMMs (col), the reduce-scatter
 * with its row-parallel ones (row_full); backward the other way round.
 * The n_blk block collectives are overlapped, the embedding's and the
 * head's (n_ar - n_blk) are not (TE overlaps its own linears only).  The
 * GEMMs TE overlaps by SMs (the row parts: the forward's row-parallel and
 * the backward's column-parallel linears, te_sm_margin) run on the SMs its
 * communication kernels leave them.  Not charged: the GEMM pieces' lower
 * efficiency (sim/README.md "TP communication overlap"). */
static void te_overlap(int tp, int n_blk, double col, mk_tpl_t *t)
{
    if (n_blk <= 0 || t->n_ar <= 0 || t->ar_full <= 0) return;
    double k = 1.0 - 1.0 / tp, half = t->ar_full / 2;
    double ag = fmax(0.0, half - k * col / n_blk), rs = fmax(0.0, half - k * t->row_full / n_blk);
    double full = (n_blk * (ag + rs) + (t->n_ar - n_blk) * t->ar_full) / t->n_ar;
    t->ar_half *= full / t->ar_full; /* the halves (tp_overlap >= 1) are refused beside it */
    t->ar_full = full;
}

/* TE's "pipeline" and "bulk" overlaps launch the GEMMs they pair with on
 * sms - MK_TE_UB_COMM_SMS of the device's SMs (cost.h): the layer's row
 * part (forward: proj and fc2; backward: qkv's and fc1's gradients) takes
 * sms / (sms - 16) of its time, its casts' passes included (an upper
 * bound); nothing without the device's SM count. */
static void te_sm_margin(const mk_cluster_t *c, mk_tpl_t *t)
{
    int sms = c->dev.sms;
    if (sms <= MK_TE_UB_COMM_SMS) return;
    double f = (double)MK_TE_UB_COMM_SMS / (sms - MK_TE_UB_COMM_SMS); /* the added share */
    t->c_full += f * t->row_full, t->c_half += f * t->row_half;
    t->row_full *= 1 + f, t->row_half *= 1 + f;
}

/* Context parallelism's ring inside layer l's attention core (op i),
 * Megatron-LM's (Liu et al. 2023, Ring Attention): the rank computes on
 * the K/V block it holds while it passes that block on and receives the
 * next, cp-1 transfers over cp blocks.  Forward a step carries K and V
 * (mk_sim_kv_block_bytes for N tokens); backward K, V and dK, dV (twice
 * that).  A step's transfer hides behind its block's attention (1/cp of
 * the rank's core time) and is exposed only where it is longer.  The ring
 * runs between the CP neighbours, stride tp ranks apart: inside a node
 * when tp*cp <= gpus_per_node, else the node's rings share its NICs. */
static void cp_ring(const mk_sim_state_t *R, int i, double N, int bwd, mk_tpl_t *t)
{
    const mk_plan_t *p = R->p;
    const mk_graph_t *g = R->g;
    int cp = p->cp, gpn = R->c->gpus_per_node > 0 ? R->c->gpus_per_node : 1;
    int inter = R->cpg.per_node < R->cpg.n, rings = gpn / R->cpg.per_node;
    double blk = mk_sim_kv_block_bytes(p, g) * (bwd ? 2 : 1); /* for tokens_of's N */
    double step[2], xfer[2], exp[2];
    for (int h = 0; h < 2; h++) { /* whole micro-batch, one half */
        double n = h ? N / 2 : N;
        step[h] = mk_cost_op_time(R->c, g, i, p->tp, seqpar_of(p), n, p->dtype, bwd) / cp;
        xfer[h] = mk_cost_p2p(R->c, inter, rings, h ? blk / 2 : blk);
        exp[h] = (cp - 1) * (xfer[h] > step[h] ? xfer[h] - step[h] : 0);
    }
    t->n_kv = cp - 1;
    t->kv_full = xfer[0], t->kv_half = xfer[1];
    t->ring_full = exp[0], t->ring_half = exp[1];
    t->kv_step = xfer[0] > step[0] ? xfer[0] : step[0];
}

/* Context parallelism's exchange by collectives (--cp-comm-type),
 * Transformer Engine's other two kernels, neither overlapped with the
 * core it feeds: allgather (AttnFuncWithCPAndKVAllGather) gathers the
 * K/V of the whole sequence, cp blocks, over the CP group before the core,
 * and in the backward gathers them again and reduce-scatters dK/dV; a2a
 * (AttnFuncWithCPAndQKVOA2A, DeepSpeed-Ulysses) turns the sequence split
 * into a head split by an all-to-all of the rank's Q, K and V before the
 * core and turns it back by one of the output after it (backward: the
 * output gradient before, dQ, dK, dV after).  The attention's FLOPs on a
 * rank are the ring's (1/cp of the sequence's, causal work balanced);
 * all of the exchange lengthens the layer. */
static double cp_coll_time(const mk_sim_state_t *R, double blk, int bwd)
{
    const mk_plan_t *p = R->p;
    const mk_graph_t *g = R->g;
    if (p->cp_comm == MK_CP_COMM_ALLGATHER) {
        double ag = mk_cost_coll(R->c, MK_COLL_ALLGATHER, &R->cpg, p->cp * blk);
        return bwd ? ag + mk_cost_coll(R->c, MK_COLL_REDUCE_SCATTER, &R->cpg, p->cp * blk) : ag;
    }
    int kvh = g->cfg.kv_heads > 0 ? g->cfg.kv_heads : g->cfg.heads;
    double q = blk / 2 * g->cfg.heads / kvh; /* Q (and the output): the K block's width x heads / K/V heads */
    return mk_cost_coll(R->c, MK_COLL_ALLTOALL, &R->cpg, q + blk) + mk_cost_coll(R->c, MK_COLL_ALLTOALL, &R->cpg, q);
}

static void cp_collective(const mk_sim_state_t *R, int bwd, mk_tpl_t *t)
{
    double blk = mk_sim_kv_block_bytes(R->p, R->g); /* for tokens_of's N */
    t->n_kv = 1;
    t->kv_full = t->ring_full = t->kv_step = cp_coll_time(R, blk, bwd);
    t->kv_half = t->ring_half = cp_coll_time(R, blk / 2, bwd);
}

/* Expert parallelism's all-to-alls of layer l's MoE op (Megatron-Core's
 * MoEAlltoAllTokenDispatcher): forward, dispatch (the k routed copies of
 * the rank's N tokens to the experts' ranks) and combine (the expert
 * outputs back); backward, the same two with the gradients.  A rank's send
 * buffer is N k w x dtype (one TP rank: the experts are whole on each;
 * with sequence parallelism a TP rank holds, and computes, N/t of the
 * tokens), of which (ep-1)/ep leaves it; the group spans ep
 * consecutive ranks of the stage (MoE parallel folding: inside a node
 * when ep <= gpus_per_node), every rank of the node in one at once
 * (sharers). */
static void ep_alltoall(const mk_sim_state_t *R, const mk_op_t *o, double N, mk_tpl_t *t)
{
    double S = N * o->topk * o->width * mk_dtype_bytes(R->p->dtype) / (seqpar_of(R->p) ? R->p->tp : 1);
    t->n_a2a = 2;
    if (R->p->moe_deepep) { /* a token once to each node holding its experts, then NVLink */
        t->a2a_full = mk_cost_a2a_deepep(R->c, &R->epg, S, o->topk, o->experts);
        t->a2a_half = mk_cost_a2a_deepep(R->c, &R->epg, S / 2, o->topk, o->experts);
        return;
    }
    t->a2a_full = mk_cost_coll(R->c, MK_COLL_ALLTOALL, &R->epg, S);
    t->a2a_half = mk_cost_coll(R->c, MK_COLL_ALLTOALL, &R->epg, S / 2);
}

/* Op i's device time in a layer piece of n tokens (dir as below), its
 * host's issue time in *host: B_IN (dir 2) is the backward less the
 * weight-gradient GEMMs (B_W's). */
static double op_piece(const mk_sim_state_t *R, int i, double n, int dir, double *host)
{
    const mk_plan_t *p = R->p;
    int sp = seqpar_of(p);
    double t = mk_cost_op_parts(R->c, R->g, i, p->tp, sp, n, p->dtype, dir != 0, host);
    if (dir == 2) {
        double wh, w = mk_cost_op_wgrad_parts(R->c, R->g, i, p->tp, sp, n, p->dtype, &wh);
        t = t > w ? t - w : 0;
        *host = *host > wh ? *host - wh : 0;
    }
    return t;
}

/* Fill a layer's forward (dir 0), backward (1) or input-gradient (2) pieces:
 * its ops one run of the host's issue queue (mk_cost_queue_t), for the
 * whole micro-batch and for a half; the row and column parts in the
 * share of the ops' own times that the queue leaves. */
static void layer_piece_build(const mk_sim_state_t *R, int l, int dir, mk_tpl_t *t)
{
    const mk_graph_t *g = R->g;
    const mk_plan_t *p = R->p;
    const mk_layer_t *L = &g->layers[l];
    double N = tokens_of(p, g);
    int bwd = dir != 0;
    memset(t, 0, sizeof *t);
    t->layer = l;
    t->block = L->block;
    int vocab_emb = 0, head = 0;
    double col_full = 0; /* the GEMMs at the layer's start (TE's all-gather overlap) */
    double alone_full = 0, alone_half = 0;
    mk_cost_queue_t qf = {0, 0, 0}, qh = {0, 0, 0};
    for (int i = L->first_op; i < L->first_op + L->n_ops; i++) {
        const mk_op_t *o = &g->ops[i];
        double hf, hh, df = op_piece(R, i, N, dir, &hf), dh = op_piece(R, i, N / 2, dir, &hh);
        int sync = mk_cost_op_syncs(g, i);
        mk_cost_queue_op(&qf, hf, df, sync);
        mk_cost_queue_op(&qh, hh, dh, sync);
        double full = hf > df ? hf : df, half = hh > dh ? hh : dh; /* the op alone */
        alone_full += full, alone_half += half;
        if (o->tp_role == (bwd ? MK_TP_COLUMN : MK_TP_ROW)) t->row_full += full, t->row_half += half;
        if (o->tp_role == (bwd ? MK_TP_ROW : MK_TP_COLUMN)) col_full += full;
        if (o->kind == MK_OPK_EMBEDDING && o->tp_role == MK_TP_VOCAB) vocab_emb = 1;
        if (o->kind == MK_OPK_LM_HEAD && o->tp_role == MK_TP_VOCAB) head = 1;
        if (o->kind == MK_OPK_ATTENTION && p->cp > 1 && !R->c->ideal && !R->o->unit_costs) {
            if (p->cp_comm == MK_CP_COMM_P2P) cp_ring(R, i, N, bwd, t);
            else cp_collective(R, bwd, t);
        }
        if (o->kind == MK_OPK_MOE && p->ep > 1 && !R->c->ideal && !R->o->unit_costs) ep_alltoall(R, o, N, t);
    }
    t->c_full = mk_cost_queue_time(&qf), t->c_half = mk_cost_queue_time(&qh); /* c_half is one half's time */
    double rf = alone_full > 0 ? t->c_full / alone_full : 1, rh = alone_half > 0 ? t->c_half / alone_half : 1;
    t->row_full *= rf, col_full *= rf, t->row_half *= rh;
    if (p->tp > 1 && !R->c->ideal && !R->o->unit_costs) {
        t->n_ar = L->n_tp_allreduce + (bwd ? head : vocab_emb);
        double S = L->out_bytes / (p->cp > 1 ? p->cp : 1); /* a CP rank's s/cp tokens */
        t->ar_full = tp_collective(R, S);
        t->ar_half = tp_collective(R, S / 2);
        if (p->tp_comm_overlap) {
            if (L->n_tp_allreduce > 0) te_sm_margin(R->c, t);
            te_overlap(p->tp, L->n_tp_allreduce, col_full, t);
        }
    }
}

/* layer_piece_build's, kept by the handle (sim_cache.c) when R->lc is set. */
void mk_chunk_layer_piece(const mk_sim_state_t *R, int l, int dir, mk_tpl_t *t)
{
    int tw = R->g->layers[l].twin, at = tw >= 0 ? tw : l; /* twins share the entry */
    const mk_tpl_t *k = R->lc ? mk_layer_cache_piece(R->lc, at, dir) : NULL;
    if (k) {
        mk_tpl_rename(t, k, R->g, l);
        return;
    }
    layer_piece_build(R, at, dir, t);
    if (R->lc) mk_layer_cache_put_piece(R->lc, at, dir, t);
    mk_tpl_rename(t, t, R->g, l);
}

/* Forward time of some of layer l's ops: the attention cores (attention = 1:
 * what selective recompute replays), else the weight-gradient GEMMs (B_W:
 * the linears', the head's and an MoE op's experts', one
 * forward-sized GEMM a weight: mk_cost_op_wgrad_time). */
double mk_chunk_ops_fwd(const mk_sim_state_t *R, int l, int attention)
{
    const mk_graph_t *g = R->g;
    const mk_layer_t *L = &g->layers[l];
    double t = 0;
    if (L->twin >= 0) return mk_chunk_ops_fwd(R, L->twin, attention); /* the same ops */
    if (R->lc && mk_layer_cache_ops(R->lc, l, attention, &t)) return t;
    for (int i = L->first_op; i < L->first_op + L->n_ops; i++) {
        if (!attention)
            t += mk_cost_op_wgrad_time(R->c, g, i, R->p->tp, seqpar_of(R->p), tokens_of(R->p, g), R->p->dtype);
        else if (g->ops[i].kind == MK_OPK_ATTENTION)
            t += mk_cost_op_time(R->c, g, i, R->p->tp, seqpar_of(R->p), tokens_of(R->p, g), R->p->dtype, 0);
    }
    if (R->lc) mk_layer_cache_put_ops(R->lc, l, attention, t);
    return t;
}

/* --recompute selective-op: layer l's recompute replays only the ops the
 * policy did not keep (opsac.c), so its forward piece loses the kept
 * ops' compute (the half micro-batch's in proportion); its TP collectives
 * stay (an upper bound: torchtitan's policy also keeps reduce-scatter
 * outputs). */
static void opsac_piece(const mk_sim_state_t *R, int l, mk_tpl_t *t)
{
    const mk_graph_t *g = R->g;
    const mk_layer_t *L = &g->layers[l];
    double kept = 0;
    for (int i = L->first_op; i < L->first_op + L->n_ops; i++) {
        double f = mk_sim_opsac_kept(g, l, i);
        if (f > 0)
            kept += f * mk_cost_op_time(R->c, g, i, R->p->tp, seqpar_of(R->p), tokens_of(R->p, g), R->p->dtype, 0);
    }
    if (kept <= 0 || t->c_full <= 0) return;
    double r = kept < t->c_full ? 1 - kept / t->c_full : 0;
    t->c_full *= r, t->c_half *= r, t->row_full *= r, t->row_half *= r;
}

void mk_chunk_cost_free(mk_chunk_cost_t *c)
{
    free(c->fwd), free(c->bwd), free(c->bin), free(c->ckf);
    free(c->rec), free(c->rec_comm), free(c->stored), free(c->wmax), free(c->binx);
    mk_zero_chunk_free(c);
}

static int chunk_alloc(mk_chunk_cost_t *c)
{
    c->fwd = calloc(c->nl, sizeof *c->fwd);
    c->bwd = calloc(c->nl, sizeof *c->bwd);
    c->bin = calloc(c->nl, sizeof *c->bin);
    c->ckf = calloc(c->nck + 1, sizeof *c->ckf);
    c->rec = calloc(c->nck + 1, sizeof *c->rec);
    c->rec_comm = calloc(c->nck + 1, sizeof *c->rec_comm);
    c->stored = calloc(c->nck + 1, sizeof *c->stored);
    c->wmax = calloc(c->nck + 1, sizeof *c->wmax);
    c->binx = calloc(c->nck + 1, sizeof *c->binx);
    if (!c->fwd || !c->bwd || !c->bin || !c->ckf || !c->rec || !c->rec_comm || !c->stored || !c->wmax || !c->binx)
        return mk_error_set("out of memory");
    return 0;
}

/* Recompute prefixes: rec[k] = the sub-pipeline over the first k
 * checkpointable layers (synchronised at its end). */
static int chunk_recompute(mk_chunk_cost_t *c, int lvl)
{
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
    return 0;
}

int mk_chunk_cost_build(const mk_sim_state_t *R, int k, mk_chunk_cost_t *c)
{
    const mk_plan_t *p = R->p;
    const mk_graph_t *g = R->g;
    int l0 = p->bounds[k], l1 = p->bounds[k + 1], lvl = p->tp_overlap;
    memset(c, 0, sizeof *c);
    c->k = k;
    c->nl = l1 - l0;
    for (int l = l0; l < l1; l++) c->nck += mk_layer_checkpointable(g, l);
    if (chunk_alloc(c) < 0) return -1;
    int j = 0;
    for (int i = 0; i < c->nl; i++) {
        int l = l0 + i;
        mk_chunk_layer_piece(R, l, 0, &c->fwd[i]);
        mk_chunk_layer_piece(R, l1 - 1 - i, 1, &c->bwd[i]);
        mk_chunk_layer_piece(R, l1 - 1 - i, 2, &c->bin[i]);
        if (mk_layer_checkpointable(g, l)) {
            c->ckf[j] = c->fwd[i];
            if (p->recompute.kind == MK_RECOMPUTE_SELECTIVE_OP) opsac_piece(R, l, &c->ckf[j]);
            j++;
        }
        if (p->recompute.kind == MK_RECOMPUTE_SELECTIVE) c->sel += mk_chunk_ops_fwd(R, l, 1);
        c->bw += mk_chunk_ops_fwd(R, l1 - 1 - i, 0);
    }
    c->f = mk_tp_run(c->fwd, c->nl, lvl, NULL, &c->f_comm, NULL, NULL);
    c->b = mk_tp_run(c->bwd, c->nl, lvl, NULL, &c->b_comm, NULL, NULL);
    c->bi = mk_tp_run(c->bin, c->nl, lvl, NULL, &c->bi_comm, NULL, NULL);
    mk_sim_act_offload_time(R, c);
    if (chunk_recompute(c, lvl) < 0) return -1;
    double *q = malloc((c->nck + 1) * sizeof *q);
    if (!q) return mk_error_set("out of memory");
    mk_sim_chunk_act_all(p, g, k, c->stored, c->wmax, &c->gbuf, q);
    free(q);
    c->s_full = c->stored[0];
    c->wstash = mk_sim_chunk_wstash(p, g, k);
    if (mk_sched_traits(p->schedule)->split_backward) /* (only a split backward's B_IN keeps a stash) */
        for (int i = 0; i <= c->nck; i++) c->binx[i] = mk_sim_chunk_bin_extra(p, g, k, i);
    c->fscr = mk_sim_chunk_fscratch(p, g, k);
    return mk_zero_chunk_build(R, c);
}

double mk_chunk_cost_time(const mk_chunk_cost_t *c, mk_instr_op_t op, int ck, int recomputes, int unit,
                          double *tpc, double *transient)
{
    if (ck > c->nck) ck = c->nck;
    *tpc = 0, *transient = 0;
    switch (op) {
    case MK_INSTR_F:
    case MK_INSTR_F_PRE:
        *transient = c->wmax[ck] > c->fscr ? c->wmax[ck] : c->fscr;
        *tpc = c->f_comm;
        return unit ? 1 : c->f;
    case MK_INSTR_R:
        *tpc = c->rec_comm[ck];
        return unit ? 1 : c->rec[ck];
    case MK_INSTR_B:
    case MK_INSTR_B_IN: {
        int rc = recomputes;
        *transient = (rc ? c->wmax[ck] : 0) + c->gbuf;
        if (op == MK_INSTR_B_IN && c->binx[rc ? ck : 0] > *transient - c->gbuf) *transient = c->binx[rc ? ck : 0] + c->gbuf;
        if (unit) return (op == MK_INSTR_B ? 2 : 1) + rc;
        double t = (op == MK_INSTR_B ? c->b : c->bi) + c->sel + (rc ? c->rec[ck] : 0);
        *tpc = (op == MK_INSTR_B ? c->b_comm : c->bi_comm) + (rc ? c->rec_comm[ck] : 0);
        return t;
    }
    case MK_INSTR_B_W:
        *transient = c->gbuf;
        return unit ? 1 : c->bw;
    default: return 0;
    }
}

/* Pure compute of layers L[0, n) in the sub-pipeline of the given level. */
static double pure_sum(const mk_tpl_t *L, int n, int level)
{
    double cs = 0;
    for (int i = 0; i < n; i++) {
        if (level <= 0 || (level == 1 && L[i].n_ar == 0)) cs += L[i].c_full + mk_tpl_block_full(&L[i]);
        else if (level == 1) cs += L[i].c_full - L[i].row_full + mk_tpl_block_full(&L[i]) + 2 * L[i].row_half;
        else cs += 2 * (L[i].c_half + mk_tpl_block_half(&L[i]));
    }
    return cs;
}

/* The CP ring (a2a 0) or the EP all-to-alls (1) of layers L[0, n):
 * exposed seconds; *comm += transfers (the all-to-alls: all exposed). */
static double ring_sum(const mk_tpl_t *L, int n, int level, int a2a, double *comm)
{
    double ex = 0;
    for (int i = 0; i < n; i++) {
        int halves = level >= 2; /* mk_tp_run's halves */
        if (a2a) {
            double t = L[i].n_a2a * (halves ? 2 * L[i].a2a_half : L[i].a2a_full);
            ex += t, *comm += t;
            continue;
        }
        ex += halves ? 2 * L[i].ring_half : L[i].ring_full;
        *comm += L[i].n_kv * (halves ? 2 * L[i].kv_half : L[i].kv_full);
    }
    return ex;
}

/* The blocking communication of one compute op (ring_sum's kinds). */
static double blocking_comm(const mk_chunk_cost_t *c, mk_instr_op_t op, int lvl, int rc, int ck, int a2a,
                            double *comm)
{
    double ex = 0;
    *comm = 0;
    if (op == MK_INSTR_F || op == MK_INSTR_F_PRE) ex = ring_sum(c->fwd, c->nl, lvl, a2a, comm);
    else if (op == MK_INSTR_B) ex = ring_sum(c->bwd, c->nl, lvl, a2a, comm);
    else if (op == MK_INSTR_B_IN) ex = ring_sum(c->bin, c->nl, lvl, a2a, comm);
    if (ck > c->nck) ck = c->nck;
    if (op == MK_INSTR_R || ((op == MK_INSTR_B || op == MK_INSTR_B_IN) && rc))
        ex += ring_sum(c->ckf, ck, lvl, a2a, comm);
    return ex;
}

double mk_chunk_cost_ring(const mk_chunk_cost_t *c, mk_instr_op_t op, int lvl, int rc, int ck, double *comm)
{
    return blocking_comm(c, op, lvl, rc, ck, 0, comm);
}

double mk_chunk_cost_a2a(const mk_chunk_cost_t *c, mk_instr_op_t op, int lvl, int rc, int ck, double *comm)
{
    return blocking_comm(c, op, lvl, rc, ck, 1, comm);
}

double mk_chunk_cost_pure(const mk_chunk_cost_t *c, mk_instr_op_t op, int lvl, int rc, int ck, double d)
{
    double cs = 0;
    if (op == MK_INSTR_F || op == MK_INSTR_F_PRE) cs = pure_sum(c->fwd, c->nl, lvl);
    else if (op == MK_INSTR_B) cs = pure_sum(c->bwd, c->nl, lvl) + c->sel;
    else if (op == MK_INSTR_B_IN) cs = pure_sum(c->bin, c->nl, lvl) + c->sel;
    else if (op == MK_INSTR_B_W) return d;
    if (op == MK_INSTR_R || ((op == MK_INSTR_B || op == MK_INSTR_B_IN) && rc)) cs += pure_sum(c->ckf, ck, lvl);
    return cs;
}

double mk_chunk_cost_rec(const mk_chunk_cost_t *c, mk_instr_op_t op, int lvl, int rc, int ck, double d)
{
    if (op != MK_INSTR_R && op != MK_INSTR_B && op != MK_INSTR_B_IN) return 0;
    if (op == MK_INSTR_R) return d;
    double t = c->sel;
    if (rc) {
        if (ck > c->nck) ck = c->nck;
        double comm = 0;
        t += pure_sum(c->ckf, ck, lvl) - ring_sum(c->ckf, ck, lvl, 0, &comm) - ring_sum(c->ckf, ck, lvl, 1, &comm);
    }
    return t;
}
