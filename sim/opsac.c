/* Op-level selective activation checkpointing (`--recompute selective-op`,
 * torchtitan's activation_checkpoint.mode = "selective" with
 * selective_ac_option = "op": torchtitan/parallelisms/parallelize_llama.py
 * _apply_ac_to_transformer_block).  Every transformer block is
 * checkpointed, and under its policy the block's forward keeps, beside its
 * input, the outputs of the attention kernel (SDPA's flash or efficient
 * kernels: the context and its log-sum-exp) and of every second matmul in
 * the order the block issues them (the 1st, 3rd, ...; the count restarts
 * with each block), recomputing the rest in the backward.  A Llama block
 * issues wq, wk, wv, wo, w1, w3, w2 as separate matmuls, where the graph
 * fuses q|k|v ("qkv") and w1|w3 ("gate_up"): they count as their parts,
 * so wq, wv, w1 and w2 are kept.  A GPT block's fused qkv is one matmul.
 * The memory model (memory.c) keeps the kept outputs, the cost model
 * (sim_chunk.c) recomputes only the rest: both read this one rule. */
#include "sim/sim_internal.h"

#include <string.h>

/* The widths of the matmuls op o issues, in order (at most 3). */
static int op_mms(const mk_graph_t *g, const mk_op_t *o, double w[3])
{
    const mk_model_config_t *c = &g->cfg;
    if (o->kind != MK_OPK_LINEAR) return 0;
    if (c->family == MK_FAMILY_LLAMA && !strncmp(o->name, "qkv.", 4) && c->heads > 0) {
        double kv = (double)(c->kv_heads > 0 ? c->kv_heads : c->heads) * (c->hidden / c->heads);
        w[0] = o->width - 2 * kv, w[1] = w[2] = kv;
        return 3;
    }
    if (!strncmp(o->name, "gate_up.", 8)) return w[0] = w[1] = o->width / 2.0, 2;
    return w[0] = o->width, 1;
}

double mk_sim_opsac_kept(const mk_graph_t *g, int l, int i)
{
    const mk_op_t *o = &g->ops[i];
    if (o->kind == MK_OPK_ATTENTION) return g->opts.flash_attn ? 1.0 : 0.0;
    double w[3];
    int n = op_mms(g, o, w), mm = 0;
    if (!n || !mk_layer_checkpointable(g, l)) return 0;
    int l0 = l; /* the block's first layer: the count starts there */
    while (l0 > 0 && g->layers[l0 - 1].block == g->layers[l].block) l0--;
    for (int k = g->layers[l0].first_op; k < i; k++) mm += op_mms(g, &g->ops[k], (double[3]){0});
    double kept = 0;
    for (int k = 0; k < n; k++)
        if ((mm + k + 1) % 2) kept += w[k]; /* the 1st, 3rd, ... matmul of the block */
    return kept / o->width;
}

/* --recompute selective-op: what a checkpointed layer l keeps besides its
 * block's input, on one TP rank: the share of each op's output the policy
 * keeps (mk_sim_opsac_kept), split as the output is (column and head outputs over
 * tp, row outputs over tp under SP), and the attention kernel's fp32
 * log-sum-exp with its context (the op's act_scores under flash). */
double mk_sim_opsac_layer_bytes(const mk_graph_t *g, int l, int tp, double tsp)
{
    const mk_layer_t *L = &g->layers[l];
    double x = 0;
    for (int i = L->first_op; i < L->first_op + L->n_ops; i++) {
        const mk_op_t *o = &g->ops[i];
        double f = mk_sim_opsac_kept(g, l, i);
        if (f <= 0) continue;
        int split = o->tp_role == MK_TP_COLUMN || o->tp_role == MK_TP_HEADS || o->tp_role == MK_TP_SPLIT;
        x += f * o->out_bytes / (split ? tp : tsp);
        if (o->kind == MK_OPK_ATTENTION) x += o->act_scores / tp;
    }
    return x;
}
