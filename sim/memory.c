/* The memory model: static per-stage bytes, per-chunk activation figures,
 * the closed-form stage peak (mk_sim_stage_memory) and `auto`'s first
 * guess (the stream walks: memory_auto.c).
 *
 *   weights    w P, grads g P, optimizer o P (ZeRO divides them: zero_state)
 *              16-bit plans: w = 2, g = 2 (4 with fp32 grads), o = 12
 *              (fp32 master copy, Adam m and v): 16 (18) bytes/parameter;
 *              fp32 plans: 4 + 4 + 8 = 16.
 *              fp8 plans: bf16's, and the weights term holds + 2 bytes per
 *              linear-layer parameter (fp8_copies; none with torchao's).
 *   activations  inflight x the chunk's stored bytes per micro-batch
 *              (mk_sim_chunk_act: a checkpointed block keeps its input)
 *   working    the largest recompute group's activations (rebuilt in B) +
 *              the backward's gradients of the layer that needs most (the
 *              attention's with its kernel's scratch: mk_sim_attn_scratch); in F
 *              on the last chunk at least the loss's forward scratch, the
 *              logits and their fp32 copy (mk_sim_chunk_fscratch,
 *              memory_scratch.c, with the CP ring's K/V block)
 *   buffers    p2p: the activation sent and the gradient received at the
 *              chunk's output, the gradient sent at its input (mk_sim_stage_static). */
#include "sim/sim_internal.h"
#include "merak/walk.h"

#include <stdlib.h>
#include <string.h>

double mk_sim_bucket_bytes(const mk_sim_opts_t *o)
{
    return o && o->bucket_bytes > 0 ? o->bucket_bytes : 64.0 * 1024 * 1024;
}

void mk_sim_param_bytes(const mk_plan_t *p, double *w, double *gr, double *opt)
{
    *gr = mk_dtype_bytes(mk_plan_grad_dtype(p)); /* the buffers the DP reduction also moves */
    if (p->dtype == MK_DTYPE_FP32) *w = 4, *opt = 8;
    else *w = 2, *opt = 12;
}

/* ZeRO's sharding group for the routed experts: the ranks of a ZeRO group
 * (k DP x CP ranks for each of the tp ranks: tp k consecutive ranks) that
 * hold the same experts, every ep-th (MoE parallel folding: the expert
 * data-parallel ranks); 1 where a group holds each expert once. */
int mk_sim_expert_zero_group(const mk_plan_t *p)
{
    int ep = p->ep > 1 ? p->ep : 1;
    int64_t held = (int64_t)p->tp * (mk_plan_zero(p) ? mk_plan_zero_group(p) : mk_plan_dp_cp(p));
    return held / ep > 1 ? (int)(held / ep) : 1;
}

double mk_sim_layers_params(const mk_graph_t *g, int l0, int l1, int tp)
{
    double sum = 0;
    for (int l = l0; l < l1; l++) sum += g->layers[l].params_rep + g->layers[l].params_split / tp;
    return sum;
}

double mk_sim_expert_params(const mk_graph_t *g, int l0, int l1, int tp)
{
    if (g->cfg.num_experts <= 0) return 0; /* a dense model has none */
    double sum = 0;
    for (int l = l0; l < l1; l++) sum += g->layers[l].expert_rep + g->layers[l].expert_split / tp;
    return sum;
}

double mk_sim_tied_params(const mk_graph_t *g, int tp)
{
    return g->tied_rep + g->tied_split / tp;
}

/* ---- ZeRO (issue 17): the per-rank state over the sharding group ---- */

/* Layer l's parameters on one rank as ZeRO-2/3 gather and reduce them: a
 * TP rank's share, of an MoE layer's routed experts this rank's E/ep
 * (the others' are never gathered here: they live on the other EP ranks),
 * the tied copy where the layer uses or reduces it. */
double mk_sim_layer_zparams(const mk_plan_t *p, const mk_graph_t *g, int l, int gather)
{
    double pe = mk_sim_expert_params(g, l, l + 1, p->tp), ep = p->ep > 1 ? p->ep : 1;
    double x = g->layers[l].params_rep + g->layers[l].params_split / p->tp - pe + pe / ep;
    if (l == g->n_layers - 1 && (gather || mk_plan_ends_apart(p))) x += mk_sim_tied_params(g, p->tp);
    return x;
}

/* ZeRO-2/3 on stage s: the largest whole layer (tied copy where the stage
 * reduces it) and the largest pair of neighbouring layers of a chunk
 * as gathered (a layer in use and the next one prefetched; without the
 * prefetch the largest layer alone), parameters on one TP rank. */
static void zero_layers(const mk_plan_t *p, const mk_graph_t *g, int s, double *layer, double *pair)
{
    *layer = *pair = 0;
    for (int c = 0; c < p->vpp; c++) {
        int k = mk_plan_vstage(p, s, c);
        for (int l = p->bounds[k]; l < p->bounds[k + 1]; l++) {
            double r = mk_sim_layer_zparams(p, g, l, 0), a = mk_sim_layer_zparams(p, g, l, 1);
            double b = p->zero3_prefetch && l + 1 < p->bounds[k + 1] ? mk_sim_layer_zparams(p, g, l + 1, 1) : 0;
            if (r > *layer) *layer = r;
            if (a + b > *pair) *pair = a + b;
        }
    }
}

/* Weights, gradients and optimizer state of P parameters (one TP rank)
 * over a ZeRO group of k = mk_plan_zero_group ranks (README "ZeRO"); of
 * P, the out->expert_params experts this EP rank holds are sharded over
 * k_e = k / ep ranks (at least 1: the ranks that hold the same experts),
 * which makes an expert's state per rank E/ep x 1/k_e = E/k as dense:
 *   ZeRO-0  w P, g P, o P          ZeRO-1  optimizer o P / k
 *   ZeRO-2  + gradients g P / k, and two whole layer gradients: the one
 *           the backward is writing and the one being reduce-scattered
 *           (one reduction in flight: merak run's exec_zero.c; DeepSpeed's
 *           double-buffered reduce buckets)
 *   ZeRO-3  + weights w P / k; gathered: the working set w (two
 *           neighbouring layers whole) while a layer computes (DeepSpeed
 *           ZeRO-3 / FSDP with prefetch 1; one layer without it).  Reshard never: the stage's
 *           weights are whole all step instead (+ w P), and its gradients
 *           accumulate unsharded in fp32 until the last backward reduces
 *           them (+ 4 P: FSDP2 accumulates an unsharded gradient in its
 *           reduce dtype, fp32 in torchtitan's mixed precision, when the
 *           pipeline schedule turns gradient sync off for all but the last
 *           micro-batch). */
static void zero_state(const mk_plan_t *p, const mk_graph_t *g, int s, double w, double gr, double opt, double P,
                       mk_stage_static_t *out)
{
    int z = mk_plan_zero(p), k = z ? mk_plan_zero_group(p) : 1;
    double Pe = out->expert_params, ke = z ? mk_sim_expert_zero_group(p) : 1;
    out->weights = w * P;
    out->grads = gr * P;
    out->optimizer = opt * (P - Pe) / k + opt * Pe / ke;
    out->gathered = 0;
    if (z >= 2) {
        double layer, pair;
        zero_layers(p, g, s, &layer, &pair);
        out->grads = gr * (P - Pe) / k + gr * Pe / ke + 2 * gr * layer;
        if (z == 3) out->weights = w * (P - Pe) / k + w * Pe / ke, out->gathered = w * pair;
        if (z == 3 && p->reshard == MK_RESHARD_NEVER) out->weights += w * P, out->grads += 4 * P, out->gathered = 0;
    }
    mk_sim_offload_state(p, opt, out);
}

/* fp8 plans: parameters of the linear layers of [l0, l1) on one TP rank.
 * Transformer Engine keeps an FP8 copy of each linear weight and its
 * transpose (weight_fp8, weight_t_fp8: transformer_engine/pytorch/module/
 * linear.py), cast once per step on the first micro-batch
 * (is_first_microbatch, which Megatron-Core passes) and kept across the
 * step's micro-batches, 2 x 1 byte per parameter beside the bf16 weight;
 * it is not sharded by ZeRO (a ZeRO-3 stage would cache the copies of
 * its gathered layers the same way).  0 for other dtypes, and for
 * torchao's Float8Linear, which casts a weight where it is used and keeps
 * no copy (torchao/float8/float8_linear.py; torchtitan's float8 rows
 * peak within 0.2 GiB of their bf16 rows, experiments/memory). */
static double fp8_copies(const mk_plan_t *p, const mk_graph_t *g, int l0, int l1)
{
    double P = 0;
    if (p->dtype != MK_DTYPE_FP8 || p->fp8_recipe == MK_FP8_TORCHAO || l1 <= l0) return 0;
    for (int i = g->layers[l0].first_op; i < g->layers[l1 - 1].first_op + g->layers[l1 - 1].n_ops; i++)
        if (g->ops[i].kind == MK_OPK_LINEAR)
            P += g->ops[i].params / (g->ops[i].tp_role == MK_TP_REPLICATED ? 1 : p->tp);
    return P;
}

/* Static bytes of stage s on one TP rank: parameters, their gradients and
 * the optimizer state (mk_sim_param_bytes), and the p2p buffers of each of
 * its chunks: at the chunk's output the activation being sent and the
 * gradient received for it, at its input the gradient being sent.  The
 * activation received at the input is not a buffer of its own: it is the
 * first layer's input, counted in the stored activations (merak run:
 * recv's buffer becomes that layer's input; Megatron-LM's 1F1B keeps the
 * received tensor as input_tensor for the backward).  No DP bucket either:
 * gradients are all-reduced in place in the gradient buffer (merak run:
 * MPI_IN_PLACE per layer, exec_stream.c start_dp; Megatron-LM's
 * DistributedDataParallel: buckets are views into its contiguous grad
 * buffer), so the bucket size is a time figure only (sim.c). */
int mk_sim_stage_static(const mk_plan_t *p, const mk_graph_t *g, int s, const mk_sim_opts_t *o,
                        mk_stage_static_t *out)
{
    memset(out, 0, sizeof *out);
    double w, gr, opt, P = 0, buf = 0, tsp = p->seqpar && p->tp > 1 ? p->tp : 1;
    mk_sim_param_bytes(p, &w, &gr, &opt);
    int V = p->n_vstages;
    for (int c = 0; c < p->vpp; c++) {
        int k = mk_plan_vstage(p, s, c), l0 = p->bounds[k], l1 = p->bounds[k + 1];
        /* EP: this rank's E/ep of each MoE layer's experts */
        double pe = mk_sim_expert_params(g, l0, l1, p->tp), ep = p->ep > 1 ? p->ep : 1;
        P += mk_sim_layers_params(g, l0, l1, p->tp) - pe + pe / ep;
        out->expert_params += pe / ep;
        out->fp8_params += fp8_copies(p, g, l0, l1);
        if (k > 0) buf += g->layers[l0].in_bytes / tsp;
        if (k < V - 1) buf += 2 * g->layers[l1 - 1].out_bytes / tsp;
    }
    double tied = mk_sim_tied_params(g, p->tp);
    if (mk_plan_ends_apart(p) && tied > 0) {
        int head = mk_plan_head_stage(p);
        if (s == head) P += tied;
        if (s == 0 || s == head) out->tied_bytes = tied * gr;
    }
    out->params = P;
    zero_state(p, g, s, w, gr, opt, P, out);
    out->weights += 2.0 * mk_dtype_gemm_bytes(p->dtype) * out->fp8_params;
    out->grad_comm_bytes = gr * P;
    /* CP: the p2p tensors are the rank's s/cp tokens, beside its exchange's buffers */
    out->buffers = p->cp > 1 ? buf / p->cp + mk_sim_cp_buffer_bytes(p, g) : buf;
    return 0;
}

/* Checkpoint count of (stage s, chunk c) under the plan's policy when the
 * caller gives none. */
static int policy_ckpt(const mk_plan_t *p, const mk_graph_t *g, int s, int c, const int *layers)
{
    int n = layers[s * p->vpp + c];
    if (p->has_ckpt) return p->ckpt[s * p->vpp + c];
    switch (p->recompute.kind) {
    case MK_RECOMPUTE_FULL:
    case MK_RECOMPUTE_SELECTIVE_OP: return n;
    case MK_RECOMPUTE_STAGE_AWARE:
        return mk_recompute_count(n, mk_recompute_stage_ratio(p->recompute.ratio, p->pp, s));
    default: return 0;
    }
}

/* What a stage's closed-form peak reads besides the checkpoint counts:
 * its static bytes, its in-flight count, each chunk's backward gradient
 * buffers (the costly part, and the same for every count), and where a
 * search asks for many counts every count's activation figures (tab). */
typedef struct {
    double *a, *w; /* chunk c's stored and wmax at count ck in [off[c] + ck], ck <= n[c] */
    int *off, *n;  /* [vpp] */
    int sel;       /* the recompute kind's reading they were made for (act_sel) */
} act_tab_t;

typedef struct {
    mk_stage_static_t st;
    int inf;    /* given in-flight count, or -1: the schedule's peak (mk_sched_peak_inflight) */
    double *gb; /* [vpp] bytes (the caller's room) */
    double fs;  /* the loss's forward scratch, if a chunk holds it */
    double ws;  /* a micro-batch's B_IN -> B_W stash over the chunks (mk_sim_chunk_wstash), per chunk */
    const act_tab_t *tab; /* NULL, or the figures of every count (for plans with tab->sel) */
} stage_fixed_t;

static void stage_fixed(const mk_plan_t *p, const mk_graph_t *g, int s, int inflight, const mk_sim_opts_t *o,
                        stage_fixed_t *F)
{
    mk_sim_stage_static(p, g, s, o, &F->st);
    F->inf = inflight;
    F->fs = F->ws = 0;
    for (int c = 0; c < p->vpp; c++) {
        mk_sim_chunk_act(p, g, mk_plan_vstage(p, s, c), 0, NULL, NULL, &F->gb[c]);
        if (mk_sched_traits(p->schedule)->split_backward)
            F->ws += mk_sim_chunk_wstash(p, g, mk_plan_vstage(p, s, c)) / p->vpp;
        double fs = mk_sim_chunk_fscratch(p, g, mk_plan_vstage(p, s, c));
        if (fs > F->fs) F->fs = fs;
    }
}

/* What of the recompute kind the activation figures read (memory_act.c):
 * selective drops the attention core, selective-op keeps its ops' share. */
static int act_sel(const mk_plan_t *p)
{
    return p->recompute.kind == MK_RECOMPUTE_SELECTIVE ? 1 : p->recompute.kind == MK_RECOMPUTE_SELECTIVE_OP ? 2 : 0;
}

/* Every count's figures of stage s into T (room for its layers + vpp;
 * scratch as much). */
static void stage_tab(const mk_plan_t *p, const mk_graph_t *g, int s, act_tab_t *T, double *scratch)
{
    T->sel = act_sel(p);
    for (int c = 0, at = 0; c < p->vpp; c++) {
        int k = mk_plan_vstage(p, s, c);
        T->off[c] = at, T->n[c] = mk_sim_chunk_nck(p, g, k);
        mk_sim_chunk_act_all(p, g, k, T->a + at, T->w + at, NULL, scratch);
        at += T->n[c] + 1;
    }
}

/* Chunk c's figures at count ck. */
static void chunk_figures(const mk_plan_t *p, const mk_graph_t *g, int s, const stage_fixed_t *F, int c, int ck,
                          double *a, double *w)
{
    const act_tab_t *T = F->tab;
    if (!T || T->sel != act_sel(p)) {
        mk_sim_chunk_act(p, g, mk_plan_vstage(p, s, c), ck, a, w, NULL);
        return;
    }
    int i = T->off[c] + (ck < T->n[c] ? ck : T->n[c]); /* as many as it has: all of them */
    *a = T->a[i], *w = T->w[i];
}

/* The stage's peak with ckpt[c] checkpointed layers per chunk (NULL: the
 * plan's policy, from layers). */
static void stage_total(const mk_plan_t *p, const mk_graph_t *g, int s, const stage_fixed_t *F, const int *ckpt,
                        const int *layers, mk_mem_breakdown_t *out)
{
    memset(out, 0, sizeof *out);
    out->weights = F->st.weights, out->grads = F->st.grads, out->optimizer = F->st.optimizer;
    out->buffers = F->st.buffers;
    out->gathered = F->st.gathered; /* ZeRO-3: every F and B holds it */
    /* Interleaved counts chunks: spread them over the stage's chunks. */
    double per_mb = 0, wm = 0, gb = 0;
    int any_ck = 0;
    for (int c = 0; c < p->vpp; c++) {
        int ck = ckpt ? ckpt[c] : policy_ckpt(p, g, s, c, layers);
        any_ck |= ck > 0;
        double a = 0, w = 0, b = F->gb[c];
        /* none in flight and no count: nothing held, no group rebuilt (the state) */
        if (F->inf != 0 || ck > 0) chunk_figures(p, g, s, F, c, ck, &a, &w);
        per_mb += a / p->vpp;
        if (w > wm) wm = w;
        if (F->ws > 0) { /* a split backward: its B_IN's layers' stash and rebuilt group (memory_act.c) */
            double bx = mk_sim_chunk_bin_extra(p, g, mk_plan_vstage(p, s, c), ck);
            if (bx > wm) wm = bx;
        }
        if (b > gb) gb = b;
    }
    int inf = F->inf >= 0 ? F->inf : mk_sched_peak_inflight(p->schedule, p->pp, p->m > 0 ? p->m : 1, p->vpp, s, any_ck);
    /* a split backward's slot holds what its B_W reads from its B_IN on:
       either may be the larger (full recompute: B_W's inputs, rebuilt) */
    if (F->ws > per_mb) per_mb = F->ws; /* (ws: a split backward's only) */
    out->activations = inf * per_mb;
    out->working = wm + gb > F->fs ? wm + gb : F->fs;
    out->total = out->weights + out->grads + out->optimizer + out->activations + out->working + out->buffers;
    out->total += out->gathered;
}

static int check_stage(const mk_plan_t *p, int s)
{
    if (s < 0 || s >= p->pp) return mk_error_set("stage %d out of range (pp %d)", s, p->pp);
    if (p->n_vstages != mk_plan_vstages(p)) return mk_error_set("plan has no stage bounds (check it first)");
    return 0;
}

int mk_sim_stage_memory(const mk_cluster_t *cl, const mk_plan_t *p, const mk_graph_t *g, int s,
                        const int *ckpt, int inflight, const mk_sim_opts_t *o, mk_mem_breakdown_t *out)
{
    if (check_stage(p, s) < 0) return -1;
    int layers[MK_PLAN_MAX_VSTAGES] = {0};
    /* only the policy's counts need them; the planner's many calls give ckpt */
    if (!ckpt) mk_plan_ckpt_layers(p, g, layers);
    double gb[MK_PLAN_MAX_VSTAGES];
    stage_fixed_t F = {.gb = gb};
    stage_fixed(p, g, s, inflight, o, &F);
    stage_total(p, g, s, &F, ckpt, layers, out);
    (void)cl;
    return 0;
}

/* A search's fixed parts: each stage's made on its first use (a search
 * stops at the first stage that does not fit), and its activation figures
 * of every count for the recompute kinds asked (one table per act_sel). */
struct mk_sim_fixed {
    int pp, vpp;
    size_t T;            /* the graph's layers + pp vpp: one table's room */
    const mk_sim_opts_t *o;
    stage_fixed_t *st;   /* [pp] */
    unsigned char *made; /* [pp]: bit 0 st, bit 1 + k tab */
    double *gb;          /* [pp vpp] */
    act_tab_t *tab;      /* NULL, or [3 pp]: stage s's for act_sel k at 3 s + k */
    double *tmp, *a, *w; /* [T], [3 T] each: the tables, by act_sel, in stage order */
    int *off, *n;        /* [3 pp vpp] */
};

mk_sim_fixed_t *mk_sim_fixed_new(const mk_plan_t *p, const mk_graph_t *g, const mk_sim_opts_t *o)
{
    if (p->n_vstages != mk_plan_vstages(p)) return mk_error_set("plan has no stage bounds (check it first)"), NULL;
    size_t V = (size_t)p->pp * p->vpp;
    mk_sim_fixed_t *F = calloc(1, sizeof *F);
    if (F) F->st = calloc(p->pp, sizeof *F->st), F->made = calloc(p->pp, 1), F->gb = calloc(V, sizeof *F->gb);
    if (!F || !F->st || !F->made || !F->gb) {
        mk_sim_fixed_free(F);
        return mk_error_set("out of memory"), NULL;
    }
    F->pp = p->pp, F->vpp = p->vpp, F->o = o, F->T = (size_t)g->n_layers + V;
    for (int s = 0; s < p->pp; s++) F->st[s].gb = F->gb + (size_t)s * p->vpp;
    return F;
}

void mk_sim_fixed_trim(mk_sim_fixed_t *F)
{
    if (!F) return;
    free(F->tab), free(F->tmp), free(F->a), free(F->w), free(F->off), free(F->n);
    F->tab = NULL, F->tmp = F->a = F->w = NULL, F->off = F->n = NULL;
    for (int s = 0; s < F->pp; s++) F->made[s] &= 1;
}

void mk_sim_fixed_free(mk_sim_fixed_t *F)
{
    mk_sim_fixed_trim(F);
    if (F) free(F->st), free(F->made), free(F->gb);
    free(F);
}

/* The tables' room (on first use: mk_sim_fixed_trim gives it back),
 * stage s's for act_sel k from the layers before it.  0 or -1. */
static int tab_room(mk_sim_fixed_t *F, const mk_plan_t *p)
{
    size_t V = (size_t)F->pp * F->vpp, T = F->T;
    if (F->tab) return 0;
    F->tab = calloc(3 * (size_t)F->pp, sizeof *F->tab), F->tmp = malloc(T * sizeof *F->tmp);
    F->a = malloc(3 * T * sizeof *F->a), F->w = malloc(3 * T * sizeof *F->w);
    F->off = malloc(3 * V * sizeof *F->off), F->n = malloc(3 * V * sizeof *F->n);
    if (!F->tab || !F->tmp || !F->a || !F->w || !F->off || !F->n) return mk_sim_fixed_trim(F), -1;
    for (int s = 0, at = 0; s < F->pp; s++) {
        for (int k = 0; k < 3; k++) {
            act_tab_t *X = &F->tab[3 * s + k];
            X->a = F->a + k * T + at, X->w = F->w + k * T + at;
            X->off = F->off + k * V + (size_t)s * F->vpp, X->n = F->n + k * V + (size_t)s * F->vpp;
        }
        for (int c = 0; c < F->vpp; c++) {
            int k = mk_plan_vstage(p, s, c);
            at += p->bounds[k + 1] - p->bounds[k] + 1;
        }
    }
    return 0;
}

/* Stage s's fixed parts with the table for p's recompute kind (none if
 * there is no room for it: then the figures are computed per count). */
/* Stage s's fixed figures, made once; with its every-count table (tab)
 * where asked: the state alone (no activation in flight, no count) reads
 * none of it. */
static stage_fixed_t fixed_stage(mk_sim_fixed_t *F, const mk_plan_t *p, const mk_graph_t *g, int s, int tab)
{
    int k = act_sel(p);
    if (!(F->made[s] & 1)) stage_fixed(p, g, s, -1, F->o, &F->st[s]), F->made[s] |= 1;
    stage_fixed_t X = F->st[s];
    if (!tab || tab_room(F, p) < 0) return X;
    if (!(F->made[s] & (2 << k))) stage_tab(p, g, s, &F->tab[3 * s + k], F->tmp), F->made[s] |= (unsigned char)(2 << k);
    X.tab = &F->tab[3 * s + k];
    return X;
}

int mk_sim_stage_memory_fixed(mk_sim_fixed_t *F, const mk_plan_t *p, const mk_graph_t *g, int s, const int *ckpt,
                              mk_mem_breakdown_t *out)
{
    if (check_stage(p, s) < 0) return -1;
    if (p->pp != F->pp || p->vpp != F->vpp) return mk_error_set("stage memory: the plan is not the one prepared");
    stage_fixed_t X = fixed_stage(F, p, g, s, 1);
    stage_total(p, g, s, &X, ckpt, NULL, out);
    return 0;
}

int mk_sim_stage_state_fixed(mk_sim_fixed_t *F, const mk_plan_t *p, const mk_graph_t *g, int s,
                             mk_mem_breakdown_t *out)
{
    if (check_stage(p, s) < 0) return -1;
    if (p->pp != F->pp || p->vpp != F->vpp) return mk_error_set("stage memory: the plan is not the one prepared");
    stage_fixed_t X = fixed_stage(F, p, g, s, 0);
    int zero[MK_PLAN_MAX_VSTAGES] = {0};
    X.inf = 0;
    stage_total(p, g, s, &X, zero, NULL, out);
    return 0;
}

/* The closed-form first guess: per stage the fewest k whose
 * mk_sim_stage_memory fits (the most when none does). */
int mk_sim_closed_guess(const mk_cluster_t *c, mk_plan_t *p, const mk_graph_t *g, const mk_sim_opts_t *o,
                        const int *layers)
{
    for (int s = 0; s < p->pp; s++) {
        int nmax = mk_sim_stage_nmax(p, layers, s), ck[MK_PLAN_MAX_VSTAGES], k;
        double gb[MK_PLAN_MAX_VSTAGES];
        stage_fixed_t F = {.gb = gb}; /* mk_sim_stage_memory's, once for every k */
        if (check_stage(p, s) < 0) return -1;
        stage_fixed(p, g, s, -1, o, &F);
        for (k = 0; k <= nmax; k++) {
            for (int ch = 0; ch < p->vpp; ch++) ck[ch] = k < layers[s * p->vpp + ch] ? k : layers[s * p->vpp + ch];
            mk_mem_breakdown_t m;
            stage_total(p, g, s, &F, ck, NULL, &m);
            if (m.total <= mk_cluster_usable_bytes(c)) break;
        }
        mk_sim_set_stage_ckpt(p, layers, s, k > nmax ? nmax : k);
    }
    p->has_ckpt = 1;
    return 0;
}
