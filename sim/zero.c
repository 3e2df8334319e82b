/* ZeRO-3 (FSDP) inside a chunk's compute ops (issue 17).  The parameters
 * are sharded over the group of k = mk_plan_zero_group ranks; every layer's
 * weights are all-gathered (AG.zero, on the DP stream) before it computes,
 * in F, R, B and B_IN, and freed after it.  A recomputing B replays each
 * checkpointed layer's forward just before that layer's backward, under
 * the same gather (activation checkpointing per layer: the recomputed
 * forward and the backward share the unsharded weights, as `merak run`'s
 * executor does).  The gather of the next layer is issued as a
 * layer starts computing (prefetch depth 1, DeepSpeed ZeRO-3's and FSDP's
 * default), so with compute dominating only the op's first gather is
 * exposed; without the prefetch (--no-zero3-prefetch: DeepSpeed's ZeRO-3
 * before 0.6.0, January 2022, whose every parameter gather synchronized
 * the device first: "the async version is not async at all", its PR
 * #1188; PR #1453 brought the prefetch) each gather waits for the layer
 * before it to end, and every one is exposed.  A backward that makes a layer's weight gradient (B, B_W)
 * reduce-scatters it (RS.dp; hybrid: then the shard all-reduced over the
 * dp/k replicas, AR.dp) as the layer ends, after the op without
 * overlap_grad_reduce.  One DP stream, FIFO: gathers and reductions queue
 * in issue order behind whatever the stream still carries.  The
 * scheduler's streams do not change: like the TP collectives, this lives
 * inside F/B/R.
 *
 * Per layer the compute is its share of the chunk's TP sub-pipeline
 * (mk_tp_run's per-layer ends), so without gathers the op takes what it
 * takes without ZeRO-3. */
#include "sim/sim_internal.h"

#include <stdlib.h>
#include <string.h>

static int seq_alloc(mk_zseq_t *q, int n)
{
    q->n = n;
    q->dur = calloc(n + 1, sizeof *q->dur), q->ag = calloc(n + 1, sizeof *q->ag);
    q->rs = calloc(n + 1, sizeof *q->rs), q->ar = calloc(n + 1, sizeof *q->ar);
    q->layer = calloc(n + 1, sizeof *q->layer), q->ckj = calloc(n + 1, sizeof *q->ckj);
    return q->dur && q->ag && q->rs && q->ar && q->layer && q->ckj ? 0 : -1;
}

static void seq_free(mk_zseq_t *q)
{
    free(q->dur), free(q->ag), free(q->rs), free(q->ar), free(q->layer), free(q->ckj);
}

void mk_zero_chunk_free(mk_chunk_cost_t *c)
{
    if (!c->z) return;
    mk_zseq_t *q[] = {&c->z->f, &c->z->b, &c->z->bi, &c->z->bw, &c->z->ck};
    for (int i = 0; i < 5; i++) seq_free(q[i]);
    free(c->z);
    c->z = NULL;
}

/* dur[i] = layer i's share of the sub-pipeline over L[0, n). */
static int tp_durations(const mk_tpl_t *L, int n, int lvl, double *dur)
{
    double *end = calloc(n + 1, sizeof *end);
    if (!end) return -1;
    mk_tp_run(L, n, lvl, end, NULL, NULL, NULL);
    for (int i = 0; i < n; i++) dur[i] = end[i] - (i ? end[i - 1] : 0);
    free(end);
    return 0;
}

/* Layer l's parameter tensors on one rank (mk_graph_op_tensors): its
 * matrices (with the tied embedding's where the layer's gather or
 * reduction carries it, as mk_sim_layer_zparams counts it), its vectors
 * and their elements (*vp: a TP rank's, split as its op's output is), and
 * *ex, this rank's share of its routed experts' tensors. */
static void layer_tensors(const mk_sim_state_t *R, int l, int gather, int *mat, int *vec, int *ex, double *vp)
{
    const mk_graph_t *g = R->g;
    const mk_layer_t *L = &g->layers[l];
    int ep = R->p->ep > 1 ? R->p->ep : 1;
    *mat = *vec = *ex = 0, *vp = 0;
    for (int i = L->first_op; i < L->first_op + L->n_ops; i++) {
        const mk_op_t *o = &g->ops[i];
        mk_op_tensors_t t;
        mk_graph_op_tensors(o, &t);
        int split = o->tp_role == MK_TP_COLUMN || o->tp_role == MK_TP_HEADS || o->tp_role == MK_TP_SPLIT;
        *mat += t.matrices, *vec += t.vectors, *ex += t.experts / ep, *vp += t.vector_params / (split ? R->p->tp : 1);
    }
    if (l == g->n_layers - 1 && (gather || mk_plan_ends_apart(R->p)) && mk_sim_tied_params(g, R->p->tp) > 0)
        (*mat)++;
}

/* --zero3-per-param-collectives (DeepSpeed's ZeRO-3 before 0.5.7:
 * partition_parameters.py _allgather_param and _reduce_scatter_gradient):
 * a collective per parameter tensor, each through torch.distributed's list
 * form, whose NCCL backend flattens the group's n tensors into one buffer
 * and copies each back out (gather) or in (reduce-scatter) with a kernel
 * of its own; the gather zeroes the whole tensor first.  Over T tensors of
 * B bytes in all, beyond the one collective of B: T - 1 collectives' fixed
 * part (each of one byte: its latency, or the host's time to issue it),
 * T n copy kernels (launch_s each), and the copies' bytes (gather: the
 * zeroing, then read and write, 3 B; reduce-scatter 2 B) at the HBM's
 * bandwidth.  Tensors under stage3_param_persistence_threshold (1e5
 * elements: the vectors, biases and norms, at the hidden sizes of its day,
 * under 25,000) stay gathered and are not fetched per use
 * (mk_zero_persist_gather). */
static double per_param_extra(const mk_cluster_t *c, mk_coll_kind_t kind, const mk_group_t *g, int T, double B)
{
    if (c->ideal || T < 1 || B <= 0 || g->n <= 1) return 0;
    double copies = (kind == MK_COLL_ALLGATHER ? 3 : 2) * B;
    return (T - 1) * mk_cost_coll(c, kind, g, 1) + (double)T * g->n * c->dev.launch_s +
           (c->dev.mem_bw_Bps > 0 ? copies / c->dev.mem_bw_Bps : 0);
}

double mk_zero_persist_gather(const mk_sim_state_t *R, int s)
{
    const mk_plan_t *p = R->p;
    if (!p->zero3_per_param || mk_plan_zero(p) != 3 || R->c->ideal || R->zg.n <= 1) return 0;
    double w, gr, opt, vp = 0;
    mk_sim_param_bytes(p, &w, &gr, &opt);
    int T = 0;
    for (int c = 0; c < p->vpp; c++) {
        int k = mk_plan_vstage(p, s, c);
        for (int l = p->bounds[k]; l < p->bounds[k + 1]; l++) {
            int mat, vec, ex;
            double v;
            layer_tensors(R, l, 1, &mat, &vec, &ex, &v);
            T += vec, vp += v;
        }
    }
    if (T < 1) return 0;
    return mk_cost_coll(R->c, MK_COLL_ALLGATHER, &R->zg, w * vp) + (double)T * R->zg.n * R->c->dev.launch_s +
           (R->c->dev.mem_bw_Bps > 0 ? 2 * w * vp / R->c->dev.mem_bw_Bps : 0);
}

/* The gather of layer l's weights, and the reduction of its gradient
 * (reduce-scatter over the group; hybrid: the shard's all-reduce over the
 * replicas): the dense part over the ZeRO group, this rank's experts of
 * an MoE layer over the ranks of it that hold them (R->ezg). */
static void layer_comm(const mk_sim_state_t *R, int l, double *ag, double *rs, double *ar)
{
    double w, gr, opt;
    mk_sim_param_bytes(R->p, &w, &gr, &opt);
    const mk_cluster_t *c = R->c;
    double pe = mk_sim_expert_params(R->g, l, l + 1, R->p->tp) / (R->p->ep > 1 ? R->p->ep : 1);
    double pg = mk_sim_layer_zparams(R->p, R->g, l, 1) - pe, pr = mk_sim_layer_zparams(R->p, R->g, l, 0) - pe;
    *ag = mk_cost_coll(c, MK_COLL_ALLGATHER, &R->zg, w * pg) +
          (pe > 0 ? mk_cost_coll(c, MK_COLL_ALLGATHER, &R->ezg, w * pe) : 0);
    *rs = mk_cost_coll(c, MK_COLL_REDUCE_SCATTER, &R->zg, gr * pr) +
          (pe > 0 ? mk_cost_coll(c, MK_COLL_REDUCE_SCATTER, &R->ezg, gr * pe) : 0);
    *ar = R->nrep > 1 ? mk_cost_coll(c, MK_COLL_ALLREDUCE, &R->rg, gr * (pr + pe) / R->zk) : 0;
    if (!R->p->zero3_per_param) return;
    int mat, vec, ex;
    double vp;
    layer_tensors(R, l, 1, &mat, &vec, &ex, &vp); /* the vectors stay gathered */
    *ag += per_param_extra(c, MK_COLL_ALLGATHER, &R->zg, mat, w * pg) +
           per_param_extra(c, MK_COLL_ALLGATHER, &R->ezg, ex, w * pe);
    layer_tensors(R, l, 0, &mat, &vec, &ex, &vp);
    *rs += per_param_extra(c, MK_COLL_REDUCE_SCATTER, &R->zg, mat + vec, gr * pr) +
           per_param_extra(c, MK_COLL_REDUCE_SCATTER, &R->ezg, ex, gr * pe);
}

/* An embedding layer's backward scatters its gradient into the table's
 * rows and reads no weights: no gather (as in merak run). */
static int reads_no_weights_bwd(const mk_graph_t *g, int l) { return !strcmp(g->layers[l].kind, "embedding"); }

/* Fill the per-layer pieces of chunk c (its TP pieces built). */
static int zero3_fill(const mk_sim_state_t *R, mk_chunk_cost_t *c)
{
    const mk_plan_t *p = R->p;
    mk_zero_chunk_t *z = c->z;
    int l0 = p->bounds[c->k], l1 = p->bounds[c->k + 1], lvl = p->tp_overlap, j = 0;
    if (tp_durations(c->fwd, c->nl, lvl, z->f.dur) < 0 || tp_durations(c->bwd, c->nl, lvl, z->b.dur) < 0 ||
        tp_durations(c->bin, c->nl, lvl, z->bi.dur) < 0 || tp_durations(c->ckf, c->nck, lvl, z->ck.dur) < 0)
        return mk_error_set("out of memory");
    for (int i = 0; i < c->nl; i++) { /* ckj: the backward's layers are the forward's reversed */
        int lb = l1 - 1 - i, before = 0;
        for (int l = l0; l < lb; l++) before += mk_layer_checkpointable(R->g, l);
        z->b.ckj[i] = z->bi.ckj[i] = mk_layer_checkpointable(R->g, lb) ? before : -1;
    }
    for (int i = 0; i < c->nl; i++) {
        int lf = l0 + i, lb = l1 - 1 - i;
        double ag, rs, ar;
        layer_comm(R, lf, &ag, &rs, &ar);
        z->f.ag[i] = ag, z->f.layer[i] = lf;
        if (mk_layer_checkpointable(R->g, lf)) z->ck.ag[j] = ag, z->ck.layer[j++] = lf;
        layer_comm(R, lb, &ag, &rs, &ar);
        if (reads_no_weights_bwd(R->g, lb)) ag = 0;
        z->b.ag[i] = z->bi.ag[i] = ag, z->b.rs[i] = z->bw.rs[i] = rs, z->b.ar[i] = z->bw.ar[i] = ar;
        z->b.layer[i] = z->bi.layer[i] = z->bw.layer[i] = lb;
        /* selective recompute replays the layer's attention cores in its backward */
        if (p->recompute.kind == MK_RECOMPUTE_SELECTIVE) z->b.dur[i] += mk_chunk_ops_fwd(R, lb, 1);
        z->bw.dur[i] = mk_chunk_ops_fwd(R, lb, 0);
    }
    return 0;
}

double mk_zero_chunk_gbytes(const mk_sim_state_t *R, int k)
{
    double w, gr, opt;
    mk_sim_param_bytes(R->p, &w, &gr, &opt);
    int l0 = R->p->bounds[k], l1 = R->p->bounds[k + 1];
    double P = mk_sim_layers_params(R->g, l0, l1, R->p->tp);
    if (k == R->V - 1 && mk_plan_ends_apart(R->p)) P += mk_sim_tied_params(R->g, R->p->tp);
    return gr * P;
}

/* ZeRO-3: what the DP stream carries for one micro-batch of chunk k,
 * whatever the schedule: every layer's gather for its forward and for its
 * backward (B or B_IN), and its gradient's reduction (in B or B_W); a
 * recompute's gathers come on top.  Seconds.  (Reshard never: one gather
 * and one reduction a step, at most this; the bound takes it once.) */
/* Layer l's DP-stream seconds in a micro-batch: its gathers (one for an
 * embedding, whose backward reads no weights) and its reduction.  They
 * read the layer's gathered and reduced parameter counts only: memo M
 * (where given) keeps the last few by those, so a 126-block stage walk
 * costs its few kinds of layer, not every layer. */
static double layer_floor(const mk_sim_state_t *R, int l, mk_zfloor_memo_t *M)
{
    double pg = mk_sim_layer_zparams(R->p, R->g, l, 1), pr = mk_sim_layer_zparams(R->p, R->g, l, 0);
    int once = reads_no_weights_bwd(R->g, l), nt = 0, ne = 0, nv = 0;
    double vp = 0;
    if (R->p->zero3_per_param) layer_tensors(R, l, 1, &nt, &nv, &ne, &vp);
    for (int i = 0; M && i < M->n; i++)
        if (M->e[i].pg == pg && M->e[i].pr == pr && M->e[i].once == once && M->e[i].nt == nt &&
            M->e[i].nv == nv && M->e[i].ne == ne)
            return M->e[i].v;
    double ag, rs, ar;
    layer_comm(R, l, &ag, &rs, &ar);
    double v = ag + (once ? 0 : ag) + rs + ar;
    if (M) M->e[M->n < MK_ZFLOOR_MEMO ? M->n++ : (M->next++ % MK_ZFLOOR_MEMO)] = (struct mk_zfloor){pg, pr, once, nt, nv, ne, v};
    return v;
}

double mk_zero_chunk_dp_floor(const mk_sim_state_t *R, int k, mk_zfloor_memo_t *M)
{
    double sum = 0;
    for (int l = R->p->bounds[k]; l < R->p->bounds[k + 1]; l++) sum += layer_floor(R, l, M);
    return sum;
}

int mk_zero_chunk_build(const mk_sim_state_t *R, mk_chunk_cost_t *c)
{
    int z = mk_plan_zero(R->p);
    if (z >= 2) c->gbytes = mk_zero_chunk_gbytes(R, c->k);
    if (z != 3) return 0;
    if (!(c->z = calloc(1, sizeof *c->z))) return mk_error_set("out of memory");
    mk_zseq_t *q[] = {&c->z->f, &c->z->b, &c->z->bi, &c->z->bw, &c->z->ck};
    for (int i = 0; i < 5; i++)
        if (seq_alloc(q[i], i == 4 ? c->nck : c->nl) < 0) return mk_error_set("out of memory");
    return zero3_fill(R, c);
}

/* The DP stream of one op: free from *q; issues collectives. */
typedef struct {
    mk_sim_state_t *R;
    int s, mb, chunk;
    double t0, q, comm;   /* op start (absolute, for the trace); DP stream free (relative); comm time */
    double beside;        /* DP time inside the layers' compute windows (dp_share.c) */
} zrun_t;

/* Queue d seconds named `name` at `ready` (relative); returns its end. */
static double issue(zrun_t *x, const char *name, double ready, double d, int layer)
{
    if (d <= 0) return ready;
    double st = ready > x->q ? ready : x->q;
    x->q = st + d;
    x->comm += d;
    mk_sim_dp_busy(&x->R->st[x->s], x->t0 + st, x->t0 + x->q);
    x->R->events++;
    if (x->R->tr)
        mk_trace_complete(x->R->tr, x->R->st[x->s].rank, MK_TRACE_DP, name, x->t0 + st, d, x->s, x->mb, x->chunk,
                          layer);
    return x->q;
}

static void reduce(zrun_t *x, const mk_zseq_t *q, int i, double ready)
{
    double e = issue(x, "RS.dp", ready, q->rs[i], q->layer[i]);
    issue(x, "AR.dp", e, q->ar[i], q->layer[i]);
}

/* Layers q[0, n) on the compute stream, each after its gather (gather:
 * else the weights are there); the next gather issued as a layer starts,
 * or without the prefetch (plan.zero3_prefetch 0) as the layer before it
 * ends, so no gather overlaps compute.
 * rec (a recomputing B): the replay of the first rck checkpointable
 * layers, each added to its layer's backward (q->ckj).  red: the
 * gradients are reduced here.  Returns the time. */
static double run_layers(zrun_t *x, const mk_zseq_t *q, int n, const mk_zseq_t *rec, int rck, int late, int gather,
                         int red)
{
    double t = 0, ready = 0;
    int pre = x->R->p->zero3_prefetch;
    if (n > 0 && gather) ready = issue(x, "AG.zero", 0, q->ag[0], q->layer[0]);
    for (int j = 0; j < n; j++) {
        if (j > 0 && gather && !pre) ready = issue(x, "AG.zero", t, q->ag[j], q->layer[j]);
        double start = t > ready ? t : ready;
        if (j + 1 < n && gather && pre) ready = issue(x, "AG.zero", start, q->ag[j + 1], q->layer[j + 1]);
        int r = rec && q->ckj[j] >= 0 && q->ckj[j] < rck ? q->ckj[j] : -1;
        t = start + q->dur[j] + (r >= 0 ? rec->dur[r] : 0);
        x->beside += mk_sim_dp_within(&x->R->st[x->s], x->t0 + start, x->t0 + t);
        if (!late && red) reduce(x, q, j, t);
    }
    for (int j = 0; late && red && j < n; j++) reduce(x, q, j, t);
    return t;
}

double mk_zero_op(mk_sim_state_t *R, int s, const mk_instr_t *in, const mk_chunk_cost_t *c, int ck, int rc,
                  double t0, double *beside)
{
    const mk_zero_chunk_t *z = c->z;
    mk_sim_stage_t *S = &R->st[s];
    if (ck > c->nck) ck = c->nck;
    zrun_t x = {R, s, in->mb, in->chunk, t0, S->dp_free > t0 ? S->dp_free - t0 : 0, 0, 0};
    int late = !R->p->overlap_grad_reduce;
    const mk_zseq_t *rec = rc ? &z->ck : NULL;
    /* reshard never: a chunk's weights are gathered by its first forward
       (micro-batch 0: every schedule runs a chunk's forwards in micro-batch
       order) and kept; its gradients reduced by its last weight-gradient
       backward (micro-batch m - 1, likewise in order) */
    int keep = R->p->reshard == MK_RESHARD_NEVER, ag = !keep || in->mb == 0, red = !keep || in->mb == R->p->m - 1;
    double d = 0;
    switch (in->op) {
    case MK_INSTR_F:
    case MK_INSTR_F_PRE: d = run_layers(&x, &z->f, c->nl, NULL, 0, late, ag, 1); break;
    case MK_INSTR_R: d = run_layers(&x, &z->ck, ck, NULL, 0, late, !keep, 1); break;
    case MK_INSTR_B: d = run_layers(&x, &z->b, c->nl, rec, ck, late, !keep, red); break;
    case MK_INSTR_B_IN: d = run_layers(&x, &z->bi, c->nl, rec, ck, late, !keep, 1); break;
    case MK_INSTR_B_W: d = run_layers(&x, &z->bw, c->nl, NULL, 0, late, !keep, red); break;
    default: return 0;
    }
    if (x.comm > 0) S->dp_free = t0 + x.q;
    S->comm[MK_COMM_DP] += x.comm;
    *beside = x.beside;
    return d;
}
