/* Per-chunk activation figures (mk_sim_chunk_act, mk_sim_chunk_act_all):
 * what F keeps for B under each checkpoint count, the largest recompute
 * group, the backward's gradient buffers. */
#include "sim/sim_internal.h"

#include <stdlib.h>
#include <string.h>

/* Bytes of the gradients at op i's output and input on one TP rank while
 * its backward runs (both live), the attention core's also its scratch
 * (mk_sim_attn_scratch): a split tensor is /t (column outputs, row inputs,
 * inside a pair, the vocabulary-split logits), a replicated one /t only
 * under SP.  The largest is the LM head's (the logits' gradient, s b V/t),
 * the MLP's 4h-wide pair, the attention's with its scratch or an MoE op's
 * experts' (mk_op_t.bwd_grads: replicated, a TP rank's rows under SP, as
 * its saved rows). */
static double op_grads(const mk_graph_t *g, int i, int tp, double tsp, int cp)
{
    const mk_op_t *o = &g->ops[i];
    double N = (double)g->opts.mbs * g->cfg.seq, dt = mk_dtype_bytes(g->opts.dtype);
    mk_tp_role_t r = o->tp_role;
    int inside = r == MK_TP_SPLIT || r == MK_TP_HEADS;
    int out_split = inside || r == MK_TP_COLUMN || o->kind == MK_OPK_LM_HEAD;
    int in_split = inside || r == MK_TP_ROW || o->kind == MK_OPK_LOSS;
    double gout = o->kind == MK_OPK_LOSS ? 0 : o->out_bytes / (out_split ? tp : tsp);
    double gin = o->n_in < 1 || o->in[0] == MK_GRAPH_INPUT ? 0 : N * o->in_width * dt / (in_split ? tp : tsp);
    if (o->kind == MK_OPK_ATTENTION) gin += mk_sim_attn_scratch(g, o, tp, cp);
    if (o->kind == MK_OPK_LOSS && g->opts.xent == MK_XENT_TORCH) gin = mk_sim_loss_torch_grads(g, o, tp);
    if (o->kind == MK_OPK_MOE && o->bwd_grads / tsp > gout + gin) return o->bwd_grads / tsp; /* its experts' */
    return gout + gin;
}

/* Gradient bytes live during layer l's backward on one TP rank: the
 * gradient arriving at its output (kept for the residual branch) and the
 * one it builds at its input, plus the largest pair of one of its ops
 * (merak run's scratch: grad_a/grad_b and s_a, s_b, s_att, s_c). */
static double layer_grads(const mk_graph_t *g, int l, int tp, double tsp, int cp)
{
    const mk_layer_t *L = &g->layers[l];
    double inner = 0;
    for (int i = L->first_op; i < L->first_op + L->n_ops; i++) {
        double x = op_grads(g, i, tp, tsp, cp);
        if (x > inner) inner = x;
    }
    return (L->out_bytes + (l > 0 ? L->in_bytes : 0)) / tsp + inner;
}

/* Activation figures of chunk k (virtual stage) per micro-batch on one TP
 * rank, with its first ck checkpointable layers checkpointed:
 *   stored  what F keeps for B.  Checkpointing is per transformer block:
 *           consecutive checkpointed layers of one block (attention and
 *           MLP) form a recompute group that keeps only its input, as
 *           Megatron-LM's full recompute (--recompute-granularity full
 *           --recompute-method uniform --recompute-num-layers 1: one
 *           tensor_parallel.checkpoint per ParallelTransformerLayer),
 *           Megatron-DeepSpeed's --checkpoint-activations and merak run
 *           (exec_stream.c) do; Korthikanti et al. 2022 (arXiv:2205.05198,
 *           sec. 5): 2sbh bytes per transformer layer with full recompute.
 *           Under selective-op the group also keeps what the op-level
 *           policy keeps (mk_sim_opsac_layer_bytes), and rebuilds the rest.
 *           With activation offload the offloaded blocks keep nothing on
 *           the device but the largest one, in flight to or from the host
 *           (Transformer Engine's offload copies a layer while the next
 *           computes).
 *   wmax    the largest group's activations rebuilt in B (all of its
 *           layers at once, less what it stored).
 *   gbuf    the largest layer's backward gradients (layer_grads; NULL: not
 *           wanted, which skips the per-op loop).
 *
 * The count splits the chunk where its ck-th checkpointable layer starts:
 * before it every checkpointable layer is checkpointed, from it on none
 * is.  stored is (P + Q + offloaded) / cp, P the bytes before the split
 * summed in layer order, Q those from it on summed from the chunk's end
 * back, so that one pass each way gives every count's figure (the planner
 * asks for all of them: mk_sim_chunk_act_all) and a single count's is the
 * very same sum.  Activation offload runs no recompute (mk_plan_check),
 * so its in-flight block is the one of count 0 at every count. */
typedef struct {
    const mk_plan_t *p;
    const mk_graph_t *g;
    int sel, sp, opsac;
    double tsp;
} act_ctx_t;

static void act_ctx(act_ctx_t *x, const mk_plan_t *p, const mk_graph_t *g)
{
    x->p = p, x->g = g;
    x->sel = p->recompute.kind == MK_RECOMPUTE_SELECTIVE, x->sp = p->seqpar && p->tp > 1;
    x->opsac = p->recompute.kind == MK_RECOMPUTE_SELECTIVE_OP;
    x->tsp = x->sp ? p->tp : 1;
}

/* The forward pass: P and the largest group before each split j (out
 * slot j, or only want's in slot 0 when want >= 0) and the offloaded
 * blocks' largest; returns the chunk's checkpointable layers. */
static int act_forward(const act_ctx_t *x, int k, int want, double *P, double *W, double *off)
{
    const mk_plan_t *p = x->p;
    const mk_graph_t *g = x->g;
    double st = 0, wm = 0, grp = 0, blk = 0, blk_max = 0;
    int j = 0, in_grp = 0, l0 = p->bounds[k], l1 = p->bounds[k + 1];
    for (int l = l0; l < l1; l++) {
        double a = mk_layer_act_bytes(g, l, p->tp, x->sp, x->sel);
        int ckable = mk_layer_checkpointable(g, l);
        if (mk_sim_act_offloaded(p, g, l)) { /* (count 0: every layer is offloaded, none kept) */
            blk = l > l0 && g->layers[l].block == g->layers[l - 1].block ? blk + a : a;
            if (blk > blk_max) blk_max = blk;
        }
        if (ckable) {
            if (want < 0 || want == j) P[want < 0 ? j : 0] = st, W[want < 0 ? j : 0] = wm;
            j++;
            double kept = x->opsac ? mk_sim_opsac_layer_bytes(g, l, p->tp, x->tsp) : 0;
            if (kept > a) kept = a;
            st += kept, a -= kept; /* the rebuild makes the rest */
            if (in_grp && g->layers[l].block == g->layers[l - 1].block) {
                grp += a; /* joins the group: its input is rebuilt from the group's */
            } else {
                double in = mk_layer_ckpt_bytes(g, l, p->tp, x->sp);
                st += in, grp = a > in ? a - in : 0;
            }
            if (grp > wm) wm = grp;
        } else if (!mk_sim_act_offloaded(p, g, l)) {
            st += a;
        }
        in_grp = ckable;
    }
    if (want < 0 || want >= j) P[want < 0 ? j : 0] = st, W[want < 0 ? j : 0] = wm;
    *off = blk_max;
    return j;
}

double mk_sim_chunk_gbuf(const mk_plan_t *p, const mk_graph_t *g, int k)
{
    act_ctx_t x;
    act_ctx(&x, p, g);
    double gb = 0, cp = p->cp > 1 ? p->cp : 1;
    for (int l = p->bounds[k]; l < p->bounds[k + 1]; l++) {
        double lg = layer_grads(g, l, p->tp, x.tsp, (int)cp);
        if (lg > gb) gb = lg;
    }
    return gb / cp;
}

/* What a split backward's B_W reads, held from its B_IN on (zero-bubble
 * schedules): each weight-gradient GEMM's operands on one TP rank, the
 * linear's saved input whole (a column linear's gathered one under SP:
 * Transformer Engine's delayed wgrad keeps inputmat_total, the zero-bubble
 * implementations' WeightGradStore the input the GEMM takes) and the
 * gradient at its output (a column output's and the LM head's split over
 * tp, a row output's whole); an MoE op's expert and shared-expert
 * GEMMs' inputs and output gradients (a TP rank's rows with sequence
 * parallelism).  B_W's GEMMs, as its time (mk_cost_op_wgrad_time);
 * everything else F kept is freed at B_IN, a recomputed layer's inputs
 * kept (they are these).  Per micro-batch, / cp. */
static double layer_wstash(const mk_plan_t *p, const mk_graph_t *g, int l)
{
    const mk_layer_t *L = &g->layers[l];
    double t = p->tp > 1 ? p->tp : 1;
    return L->wgrad_rep + L->wgrad_split / t + L->wgrad_moe / (p->seqpar ? t : 1);
}

double mk_sim_chunk_wstash(const mk_plan_t *p, const mk_graph_t *g, int k)
{
    double x = 0, cp = p->cp > 1 ? p->cp : 1;
    for (int l = p->bounds[k]; l < p->bounds[k + 1]; l++) x += layer_wstash(p, g, l);
    return x / cp;
}

/* B_IN frees layer by layer, last layer first: as it computes layer l it
 * holds the stash of the layers it finished and l's, what F kept of the
 * layers not done (l's included), and with ck checkpointed layers the
 * rebuilt part of l's recompute group (act_forward's groups).  The most of
 * that over l, less the slot's stored bytes: what a B_IN adds to them
 * besides its gradient buffers (the stash of finished layers beside the
 * next group's rebuilt activations under full recompute).  / cp. */
double mk_sim_chunk_bin_extra(const mk_plan_t *p, const mk_graph_t *g, int k, int ck)
{
    act_ctx_t x;
    act_ctx(&x, p, g);
    int l0 = p->bounds[k], n = p->bounds[k + 1] - l0, j = 0, in_grp = 0;
    double buf[2 * 256], *kept = n <= 256 ? buf : malloc(2 * (size_t)n * sizeof *kept), all = 0, grp = 0;
    if (!kept) return 0; /* (the figure without it: an under-count, never a crash) */
    double *reb = kept + n;
    for (int i = 0, first = 0; i < n; i++) { /* what F keeps of each layer, and its group's rebuilt part */
        int l = l0 + i, ck_l = mk_layer_checkpointable(g, l) && j++ < ck;
        double a = mk_sim_act_offloaded(p, g, l) ? 0 : mk_layer_act_bytes(g, l, p->tp, x.sp, x.sel);
        reb[i] = 0, kept[i] = a;
        if (ck_l) {
            double op = x.opsac ? mk_sim_opsac_layer_bytes(g, l, p->tp, x.tsp) : 0;
            kept[i] = op < a ? op : a;
            double rest = a - (op < a ? op : a), in = mk_layer_ckpt_bytes(g, l, p->tp, x.sp);
            if (!(in_grp && g->layers[l].block == g->layers[l - 1].block)) /* a group's input is its first layer's */
                first = i, kept[i] += in, grp = rest > in ? rest - in : 0;
            else grp += rest;
            for (int q = first; q <= i; q++) reb[q] = grp; /* the whole group rebuilt while any of it runs */
        }
        in_grp = ck_l;
        all += kept[i];
    }
    double done = 0, left = all, peak = 0;
    for (int i = n - 1; i >= 0; i--) {
        double s = layer_wstash(p, g, l0 + i), h = done + s + left + reb[i];
        if (h > peak) peak = h;
        done += s, left -= kept[i];
    }
    if (kept != buf) free(kept);
    double cp = p->cp > 1 ? p->cp : 1;
    return peak > all ? (peak - all) / cp : 0;
}

/* The backward pass: Q from each split j on (slot j, or want's in slot
 * 0), every layer uncheckpointed. */
static void act_backward(const act_ctx_t *x, int k, int n, int want, double *Q)
{
    const mk_plan_t *p = x->p;
    const mk_graph_t *g = x->g;
    double st = 0;
    int j = n;
    if (want < 0 || want >= n) Q[want < 0 ? n : 0] = 0;
    for (int l = p->bounds[k + 1] - 1; l >= p->bounds[k]; l--) {
        if (!mk_sim_act_offloaded(p, g, l)) st += mk_layer_act_bytes(g, l, p->tp, x->sp, x->sel);
        if (mk_layer_checkpointable(g, l) && (--j == want || want < 0)) Q[want < 0 ? j : 0] = st;
    }
}

void mk_sim_chunk_act(const mk_plan_t *p, const mk_graph_t *g, int k, int ck, double *stored, double *wmax,
                      double *gbuf)
{
    if (gbuf) *gbuf = mk_sim_chunk_gbuf(p, g, k);
    if (!stored && !wmax) return; /* the gradient buffers alone: no count changes them */
    act_ctx_t x;
    act_ctx(&x, p, g);
    double P, W, Q, off, cp = p->cp > 1 ? p->cp : 1;
    int n = act_forward(&x, k, ck, &P, &W, &off);
    if (!stored) Q = 0;
    else act_backward(&x, k, n, ck, &Q);
    /* context parallelism: every one of these is per token, and a CP rank
       holds s/cp tokens of each sequence (the attention scores too: its
       queries against one K/V block at a time) */
    if (stored) *stored = (P + Q + off) / cp;
    if (wmax) *wmax = W / cp;
}

int mk_sim_chunk_nck(const mk_plan_t *p, const mk_graph_t *g, int k)
{
    int n = 0;
    for (int l = p->bounds[k]; l < p->bounds[k + 1]; l++) n += mk_layer_checkpointable(g, l);
    return n;
}

void mk_sim_chunk_act_all(const mk_plan_t *p, const mk_graph_t *g, int k, double *stored, double *wmax,
                          double *gbuf, double *scratch)
{
    act_ctx_t x;
    act_ctx(&x, p, g);
    double off, cp = p->cp > 1 ? p->cp : 1;
    int n = act_forward(&x, k, -1, stored, wmax, &off);
    act_backward(&x, k, n, -1, scratch);
    for (int j = 0; j <= n; j++) stored[j] = (stored[j] + scratch[j] + off) / cp, wmax[j] /= cp;
    if (gbuf) *gbuf = mk_sim_chunk_gbuf(p, g, k);
}
