/* Transient buffers of the memory model that belong to a kernel or a
 * collective rather than to a layer's stored activations: the CP ring's
 * K/V block in flight, and the loss's forward scratch (memory.c reads
 * both; sim_chunk.c the second). */
#include "sim/sim_internal.h"

/* One K/V block of the CP ring on one TP rank: K and V of the rank's
 * b x s/cp tokens, kv_heads x head_dim wide split over tp (TP splits the
 * heads), in the model dtype.  0 without CP. */
double mk_sim_kv_block_bytes(const mk_plan_t *p, const mk_graph_t *g)
{
    if (p->cp <= 1 || g->cfg.heads <= 0) return 0;
    int kvh = g->cfg.kv_heads > 0 ? g->cfg.kv_heads : g->cfg.heads;
    double width = (double)kvh * ((double)g->cfg.hidden / g->cfg.heads) / (p->tp > 1 ? p->tp : 1);
    return 2.0 * g->opts.mbs * ((double)g->cfg.seq / p->cp) * width * mk_dtype_bytes(g->opts.dtype);
}

/* The loss's forward scratch on chunk k, one TP rank: while the softmax
 * of the logits is computed, the LM head's 16-bit logits and their fp32
 * copy are live beside the fp32 softmax the loss keeps (counted in the
 * stored activations), N x Vp/t x (dt + 4) bytes, Vp the padded
 * vocabulary split over TP.  Megatron-LM: the head's output .float() into
 * vocab_parallel_cross_entropy, whose max-shifted copy becomes the saved
 * softmax in place (tensor_parallel/cross_entropy.py); torchtitan:
 * F.cross_entropy(pred.float()), log_softmax's output saved, the 16-bit
 * pred freed only after the loss (train.py "del pred").  CP: the rank's
 * s/cp tokens.  0 on a chunk without the loss. */
double mk_sim_chunk_fscratch(const mk_plan_t *p, const mk_graph_t *g, int k)
{
    int l = p->bounds[k + 1] - 1;
    if (l != g->n_layers - 1) return 0;
    double N = (double)g->opts.mbs * g->cfg.seq, dt = mk_dtype_bytes(g->opts.dtype), x = 0;
    const mk_layer_t *L = &g->layers[l];
    for (int i = L->first_op; i < L->first_op + L->n_ops; i++)
        if (g->ops[i].kind == MK_OPK_LOSS) x += N * g->ops[i].in_width * (dt + 4) / p->tp;
    return x / (p->cp > 1 ? p->cp : 1);
}
