/* Graph sharding and tensor-parallel roles.
 *
 * TP roles come from a pattern, not a per-model table: a linear that widens
 * its input (width w -> more), then a simple chain of elementwise ops or an
 * attention core, then a linear whose output returns to width w, is a
 * Megatron column/row pair; the chain between runs on split tensors.  So
 * Llama's fused q,k,v (rope and attention between) and fused gate/up
 * (swiglu between) are column-parallel, o and down row-parallel.
 * Embeddings, the LM head and the loss split over the vocabulary.
 *
 * Layers: cut after op i when exactly one activation produced at or before
 * i is read after i.  A piece without a weight-bearing op joins a
 * neighbour: a norm joins the layer it feeds; a dropout, activation or
 * loss tail (and the last piece) joins the layer that produced its input. */
#include "merak/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* sole[p] = index of the only consumer of op p, or -1 when it has zero or
 * several; one pass, so role assignment stays linear in the ops. */
static int *sole_consumers(const mk_graph_t *g)
{
    int *sole = malloc((g->n_ops ? g->n_ops : 1) * sizeof *sole);
    if (!sole) return NULL;
    for (int p = 0; p < g->n_ops; p++) sole[p] = -2; /* -2: no consumer yet */
    for (int i = 0; i < g->n_ops; i++)
        for (int k = 0; k < g->ops[i].n_in; k++) {
            int p = g->ops[i].in[k];
            if (p >= 0) sole[p] = sole[p] == -2 || sole[p] == i ? i : -1;
        }
    for (int p = 0; p < g->n_ops; p++)
        if (sole[p] == -2) sole[p] = -1;
    return sole;
}

static int is_elementwise(mk_opkind_t k)
{
    return k == MK_OPK_GELU || k == MK_OPK_DROPOUT || k == MK_OPK_ROPE || k == MK_OPK_SWIGLU || k == MK_OPK_QK_NORM;
}

static int assign_tp_roles(mk_graph_t *g)
{
    int *sole = sole_consumers(g);
    if (!sole) return mk_error_set("out of memory");
    for (int i = 0; i < g->n_ops; i++) {
        mk_op_t *o = &g->ops[i];
        if (o->kind == MK_OPK_EMBEDDING || o->kind == MK_OPK_LM_HEAD || o->kind == MK_OPK_LOSS)
            o->tp_role = MK_TP_VOCAB;
    }
    for (int i = 0; i < g->n_ops; i++) {
        mk_op_t *o = &g->ops[i];
        /* MLA's up-projection starts the pair (its latents are every rank's, Megatron-Core's down
           projections replicated), which the output projection back to the block's width ends */
        int mla = o->kind == MK_OPK_MLA_UP;
        if ((!mla && (o->kind != MK_OPK_LINEAR || o->width <= o->in_width)) || o->tp_role != MK_TP_REPLICATED)
            continue;
        int w0 = mla ? g->cfg.hidden : o->in_width, cur = i, end = -1;
        for (;;) {
            int nx = sole[cur];
            if (nx < 0 || g->ops[nx].n_in != 1) break;
            const mk_op_t *n = &g->ops[nx];
            if (n->kind == MK_OPK_LINEAR) {
                if (n->width == w0) end = nx;
                break;
            }
            if (!is_elementwise(n->kind) && n->kind != MK_OPK_ATTENTION) break;
            cur = nx;
        }
        if (end < 0) continue;
        o->tp_role = MK_TP_COLUMN;
        g->ops[end].tp_role = MK_TP_ROW;
        for (int k = sole[i]; k != end; k = sole[k])
            g->ops[k].tp_role = g->ops[k].kind == MK_OPK_ATTENTION ? MK_TP_HEADS : MK_TP_SPLIT;
    }
    /* What an op saves is split when its saved tensor is: a row linear's
     * input, anything inside a pair, the vocabulary-split loss softmax. */
    for (int i = 0; i < g->n_ops; i++) {
        mk_op_t *o = &g->ops[i];
        int split = o->tp_role == MK_TP_ROW || o->tp_role == MK_TP_SPLIT ||
                    o->tp_role == MK_TP_HEADS || o->kind == MK_OPK_LOSS;
        if (split) {
            o->act_split = o->act_rep;
            o->act_rep = 0;
        }
    }
    free(sole);
    return 0;
}

static int is_anchor(mk_opkind_t k)
{
    return k == MK_OPK_EMBEDDING || k == MK_OPK_LINEAR || k == MK_OPK_ATTENTION || k == MK_OPK_LM_HEAD ||
           k == MK_OPK_MOE || k == MK_OPK_MLA_UP;
}

/* Ops that finish their producer's work rather than start new work. */
static int is_post_op(mk_opkind_t k)
{
    return k == MK_OPK_DROPOUT || k == MK_OPK_GELU || k == MK_OPK_ADD || k == MK_OPK_LOSS ||
           k == MK_OPK_ROPE || k == MK_OPK_SWIGLU || k == MK_OPK_QK_NORM;
}

/* Candidate cut points: after op i, one live activation.  Linear in the
 * ops: each producer adds 1 to the cuts it is live across. */
static int *find_cuts(const mk_graph_t *g, int *ncuts)
{
    int n = g->n_ops;
    int *last_use = malloc((n + 1) * sizeof *last_use); /* [n] = graph input */
    int *cuts = malloc((n + 1) * sizeof *cuts);
    int *delta = calloc(n + 1, sizeof *delta); /* change of the live count at each i */
    if (!last_use || !cuts || !delta) {
        free(last_use);
        free(cuts);
        free(delta);
        return NULL;
    }
    for (int i = 0; i <= n; i++) last_use[i] = -1;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < g->ops[i].n_in; k++) {
            int p = g->ops[i].in[k];
            last_use[p == MK_GRAPH_INPUT ? n : p] = i;
        }
    /* An op without activation inputs (a position embedding) only reads
     * broadcast inputs, so it is as if computed at the start: live from
     * there until its last reader, and no cut separates it from that. */
    /* Activation p is live after op i for i in [first, last_use[p]),
     * first = p (0 for the graph input and broadcast-only ops): counted
     * with a difference array, so the scan is linear in the ops. */
    /* Token ids (no input_width) are broadcast as the labels are, so a
     * second embedding of them (multi-token prediction's) keeps nothing
     * live; a graph input of features is an activation. */
    for (int p = 0; p <= n; p++) {
        if (p == n && !g->input_width) continue;
        int first = p == n || g->ops[p].n_in == 0 ? 0 : p;
        if (last_use[p] > first) delta[first]++, delta[last_use[p]]--;
    }
    int nc = 0, live = 0;
    for (int i = 0; i < n - 1; i++) {
        live += delta[i];
        if (live == 1) cuts[nc++] = i + 1; /* a layer starts at i+1 */
    }
    cuts[nc++] = n;
    free(last_use);
    free(delta);
    *ncuts = nc;
    return cuts;
}

static void layer_name(const mk_graph_t *g, mk_layer_t *L)
{
    int has[MK_OPK_COUNT] = {0};
    int block = -1;
    for (int i = L->first_op; i < L->first_op + L->n_ops; i++) {
        has[g->ops[i].kind] = 1;
        if (block < 0 && is_anchor(g->ops[i].kind)) block = g->ops[i].block;
    }
    /* multi-token prediction's embedding joins projections: their weights are read backward (zero.c) */
    const char *kind = has[MK_OPK_EMBEDDING] && has[MK_OPK_LINEAR] ? "mtp"
                       : has[MK_OPK_EMBEDDING] ? "embedding"
                       : has[MK_OPK_LOSS] || has[MK_OPK_LM_HEAD] ? "head"
                       : has[MK_OPK_ATTENTION] ? "attention"
                       : has[MK_OPK_MOE] ? "moe"
                       : (has[MK_OPK_GELU] || has[MK_OPK_SWIGLU]) && has[MK_OPK_LINEAR] ? "mlp"
                       : "layer";
    mk_strlcpy(L->kind, kind, sizeof L->kind);
    L->block = block;
    if (block >= 0) snprintf(L->name, sizeof L->name, "%s.%d", kind, block);
    else mk_strlcpy(L->name, kind, sizeof L->name);
}

static void layer_sums(const mk_graph_t *g, mk_layer_t *L)
{
    for (int i = L->first_op; i < L->first_op + L->n_ops; i++) {
        const mk_op_t *o = &g->ops[i];
        L->params += o->params;
        L->active_params += o->active_params;
        L->fwd_flops += o->fwd_flops;
        L->bwd_flops += o->bwd_flops;
        L->fwd_flops_causal += o->fwd_flops_causal;
        L->vec_flops += o->vec_flops;
        L->bytes_moved += o->bytes_moved + o->pass_bytes[0];
        L->act_rep += o->act_rep, L->act_split += o->act_split, L->act_scores += o->act_scores;
        if (o->kind == MK_OPK_LINEAR || o->kind == MK_OPK_LM_HEAD) {
            int out_split = o->tp_role == MK_TP_COLUMN || o->tp_role == MK_TP_SPLIT || o->kind == MK_OPK_LM_HEAD;
            L->wgrad_rep += o->act_rep + (out_split ? 0 : o->out_bytes);
            L->wgrad_split += o->act_split + (out_split ? o->out_bytes : 0);
        }
        /* a q/k norm runs on a rank's heads but holds the whole (per-head) weight */
        if (o->tp_role == MK_TP_REPLICATED || o->kind == MK_OPK_QK_NORM) L->params_rep += o->params;
        else L->params_split += o->params;
        if (o->kind == MK_OPK_MOE) L->wgrad_moe += o->wgrad_bytes;
        if (o->kind == MK_OPK_MOE && o->tp_role == MK_TP_REPLICATED) L->expert_rep += o->expert_params;
        else if (o->kind == MK_OPK_MOE) L->expert_split += o->expert_params;
        if (o->tp_role == MK_TP_ROW) L->n_tp_allreduce++, L->has_tp_pair = 1;
    }
    const double N = (double)g->opts.mbs * g->cfg.seq;
    const double dt = mk_dtype_bytes(g->opts.dtype);
    L->in_bytes = L->first_op > 0 ? g->ops[L->first_op - 1].out_bytes
                  : g->input_width ? N * g->input_width * dt : N * 4;
    L->out_bytes = g->ops[L->first_op + L->n_ops - 1].out_bytes;
}

static int build_layers(mk_graph_t *g)
{
    int nc;
    int *cuts = find_cuts(g, &nc);
    if (!cuts) return mk_error_set("out of memory");
    g->layers = calloc(nc, sizeof *g->layers);
    if (!g->layers) {
        free(cuts);
        return mk_error_set("out of memory");
    }
    int start = 0, nl = 0, pending = 0; /* pending: anchorless piece waiting to join */
    for (int c = 0; c < nc; c++) {
        int end = cuts[c], anchor = 0;
        for (int i = start; i < end; i++) anchor |= is_anchor(g->ops[i].kind);
        int back = !anchor && nl > 0 && !pending &&
                   (end == g->n_ops || is_post_op(g->ops[start].kind));
        if (back) { /* a dropout, activation or loss tail joins its producer's layer */
            g->layers[nl - 1].n_ops += end - start;
            start = end;
            continue;
        }
        if (!anchor && end < g->n_ops) { /* a norm joins the layer it feeds */
            if (!pending) pending = 1, g->layers[nl].first_op = start;
            start = end;
            continue;
        }
        if (!pending) g->layers[nl].first_op = start;
        g->layers[nl].n_ops = end - g->layers[nl].first_op;
        nl++;
        pending = 0;
        start = end;
    }
    free(cuts);
    g->n_layers = nl;
    for (int l = 0; l < nl; l++) {
        layer_name(g, &g->layers[l]);
        layer_sums(g, &g->layers[l]);
    }
    return 0;
}

/* Op o of a layer starting at op first, but for what differs between
 * copies of a layer: no name, whether it is in a block (not which), its
 * inputs relative to the layer (unused ones 0). */
static mk_op_t op_key(const mk_op_t *o, int first)
{
    mk_op_t x = *o;
    memset(x.name, 0, sizeof x.name);
    x.block = x.block >= 0;
    for (int j = 0; j < 2; j++)
        x.in[j] = j >= x.n_in ? 0 : x.in[j] == MK_GRAPH_INPUT ? MK_GRAPH_INPUT : x.in[j] - first;
    return x;
}

/* Ops a and b (of layers starting at fa and fb) the same but for their
 * places: every other byte compared, so that a field added later counts too. */
static int op_same(const mk_op_t *a, int fa, const mk_op_t *b, int fb)
{
    mk_op_t x = op_key(a, fa), y = op_key(b, fb);
    return !memcmp(&x, &y, sizeof x);
}

static int layer_same(const mk_graph_t *g, int a, int b)
{
    mk_layer_t x = g->layers[a], y = g->layers[b];
    if (x.n_ops != y.n_ops || (x.block >= 0) != (y.block >= 0)) return 0;
    for (int i = 0; i < x.n_ops; i++)
        if (!op_same(&g->ops[x.first_op + i], x.first_op, &g->ops[y.first_op + i], y.first_op)) return 0;
    memset(x.name, 0, sizeof x.name), memset(y.name, 0, sizeof y.name);
    x.first_op = y.first_op = x.block = y.block = x.twin = y.twin = 0;
    return !memcmp(&x, &y, sizeof x);
}

/* Each layer's twin among the four before it (a block's attention and
 * MLP layers alternate; dense and MoE blocks may too), or -1. */
static void layer_twins(mk_graph_t *g)
{
    for (int l = 0; l < g->n_layers; l++) {
        g->layers[l].twin = -1;
        for (int d = 1; d <= 4 && d <= l; d++)
            if (layer_same(g, l, l - d)) {
                int t = g->layers[l - d].twin;
                g->layers[l].twin = t >= 0 ? t : l - d;
                break;
            }
    }
}

int mk_graph_finish(mk_graph_t *g)
{
    if (g->n_ops < 1) return mk_error_set("model '%s' has no ops", g->cfg.name);
    if (assign_tp_roles(g) < 0) return -1;
    int tied = 0;
    for (int i = 0; i < g->n_ops; i++) {
        const mk_op_t *o = &g->ops[i];
        tied |= o->kind == MK_OPK_LM_HEAD && o->tied;
        if (o->kind == MK_OPK_EMBEDDING) *(o->tp_role == MK_TP_REPLICATED ? &g->tied_rep : &g->tied_split) += o->params;
    }
    if (!tied) g->tied_rep = g->tied_split = 0;
    if (build_layers(g) < 0) return -1;
    layer_twins(g);
    return 0;
}

double mk_layer_act_bytes(const mk_graph_t *g, int layer, int tp, int seqpar, int selective)
{
    const mk_layer_t *L = &g->layers[layer];
    double t = tp > 0 ? tp : 1;
    return L->act_rep / (seqpar ? t : 1) + L->act_split / t + (selective ? 0 : L->act_scores / t);
}

double mk_layer_ckpt_bytes(const mk_graph_t *g, int layer, int tp, int seqpar)
{
    return g->layers[layer].in_bytes / (seqpar && tp > 1 ? tp : 1);
}

int mk_layer_checkpointable(const mk_graph_t *g, int l)
{
    return g->layers[l].block >= 0 && g->layers[l].params > 0;
}

void mk_graph_op_tensors(const mk_op_t *o, mk_op_tensors_t *t)
{
    int b = o->bias ? 1 : 0, m = o->gated ? 3 : 2;
    memset(t, 0, sizeof *t);
    switch (o->kind) {
    case MK_OPK_EMBEDDING: case MK_OPK_POS_EMBEDDING: t->matrices = o->params > 0; break;
    case MK_OPK_LAYERNORM: case MK_OPK_RMSNORM: case MK_OPK_QK_NORM: case MK_OPK_MLA_NORM:
        t->vectors = o->kind == MK_OPK_RMSNORM ? 1 : o->kind == MK_OPK_QK_NORM ? 2 * (1 + b) : 2;
        t->vector_params = o->params;
        break;
    case MK_OPK_LINEAR: t->matrices = 1, t->vectors = b, t->vector_params = b * o->width; break;
    case MK_OPK_MLA_UP: t->matrices = 2; break;
    case MK_OPK_LM_HEAD: t->matrices = !o->tied, t->vectors = b, t->vector_params = b * o->vocab; break;
    case MK_OPK_MOE:
        t->experts = o->experts * m * (1 + b);
        t->matrices = o->shared_ffn > 0 ? m : 0;
        t->vectors = (o->shared_ffn > 0 ? m * b : 0) + (o->shared_gate ? 1 : 0);
        t->vector_params = (o->shared_ffn > 0 && b ? (m - 1.0) * o->shared_ffn + o->width : 0) +
                           (o->shared_gate ? o->width : 0);
        break;
    default: break;
    }
}

double mk_graph_params(const mk_graph_t *g)
{
    double p = 0;
    for (int l = 0; l < g->n_layers; l++) p += g->layers[l].params;
    return p;
}

double mk_graph_active_params(const mk_graph_t *g)
{
    double p = 0;
    for (int l = 0; l < g->n_layers; l++) p += g->layers[l].active_params;
    return p;
}

double mk_graph_flops_per_iteration(const mk_graph_t *g, int gbs, int recompute)
{
    double f = 0, per_seq = 1.0 / g->opts.mbs;
    for (int l = 0; l < g->n_layers; l++) {
        const mk_layer_t *L = &g->layers[l];
        f += L->fwd_flops + L->bwd_flops;
        if (recompute && mk_layer_checkpointable(g, l)) f += L->fwd_flops;
    }
    return f * per_seq * gbs;
}
