/* Transient buffers of the memory model that belong to a kernel or a
 * collective rather than to a layer's stored activations: the CP ring's
 * K/V block in flight, the attention kernel's backward scratch, and the
 * loss's forward scratch and PyTorch backward (memory.c reads them all;
 * sim_chunk.c the forward scratch). */
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

/* The CP exchange's buffers on one TP rank: the ring keeps two K/V blocks
 * in flight (the one computed on, the one arriving); allgather the
 * sequence's K/V, cp blocks, and in the backward its dK/dV before the
 * reduce-scatter, as many; a2a the head-split copies of Q, K, V and the
 * output, as large as the rank's own (Q and the output: the K block's
 * width x heads / K/V heads). */
double mk_sim_cp_buffer_bytes(const mk_plan_t *p, const mk_graph_t *g)
{
    double blk = mk_sim_kv_block_bytes(p, g);
    if (p->cp_comm == MK_CP_COMM_ALLGATHER) return 2.0 * p->cp * blk;
    if (p->cp_comm == MK_CP_COMM_A2A) {
        int kvh = g->cfg.kv_heads > 0 ? g->cfg.kv_heads : g->cfg.heads;
        return blk + 2 * (blk / 2 * g->cfg.heads / kvh);
    }
    return 2 * blk;
}

/* The loss's forward scratch on chunk k, one TP rank: while the softmax
 * of the logits is computed, the LM head's 16-bit logits and their fp32
 * copy are live beside the fp32 softmax the loss keeps (counted in the
 * stored activations), N x Vp/t x (dt + 4) bytes, Vp the padded
 * vocabulary split over TP; fp32 logits have no copy (.float() of an
 * fp32 tensor returns the tensor itself), N x Vp/t x 4.  Megatron-LM: the
 * head's output .float() into
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
    double copy = dt < 4 ? 4 : 0; /* the fp32 copy of 16-bit logits */
    const mk_layer_t *L = &g->layers[l];
    for (int i = L->first_op; i < L->first_op + L->n_ops; i++)
        if (g->ops[i].kind == MK_OPK_LOSS) x += N * g->ops[i].in_width * (dt + copy) / p->tp;
    return x / (p->cp > 1 ? p->cp : 1);
}

/* The attention core's backward scratch beside the gradients at its
 * input and output, on one TP rank (TP splits the heads; the caller
 * divides every figure by cp):
 *   unfused  the gradient of its scores, heads x s^2 x b in the model
 *            dtype; under CP the ring's backward takes one K/V block at a
 *            time, so a rank's s/cp queries meet s/cp keys: s^2 / cp of
 *            it before the caller's / cp.
 *   flash    no s x s tensor: FlashAttention-2's backward (flash_api.cpp
 *            mha_bwd, Dao-AILab/flash-attention) allocates dq_accum, an
 *            fp32 b x s x heads x d accumulator, and softmax_d, fp32
 *            b x heads x s; with grouped K/V heads also dk_expanded and
 *            dv_expanded, b x s x heads x d each in the model dtype,
 *            summed over each group into dK, dV afterwards. */
double mk_sim_attn_scratch(const mk_graph_t *g, const mk_op_t *o, int tp, int cp)
{
    double b = g->opts.mbs, s = g->cfg.seq, dt = mk_dtype_bytes(g->opts.dtype);
    if (!g->opts.flash_attn) return (double)o->heads * s * (s / cp) * b * dt / tp;
    double ctx = b * s * o->width; /* heads x d per token */
    int kvh = g->cfg.kv_heads > 0 ? g->cfg.kv_heads : g->cfg.heads;
    double x = ctx * 4 + (double)o->heads * s * b * 4 + (kvh < g->cfg.heads ? 2 * ctx * dt : 0);
    return x / tp;
}

/* The loss's backward under PyTorch's F.cross_entropy on the fp32 logits
 * (torchtitan's loss_fn; loss_parallel shards it over the vocabulary like
 * Megatron's): nll_loss's backward makes the fp32 gradient of the
 * log-probabilities and log_softmax's backward a second fp32 tensor for
 * the logits, both live beside the saved log-probabilities (stored) until
 * that node ends; the 16-bit cast after it is smaller.  2 x 4 bytes per
 * logit, where Megatron's vocab_parallel_cross_entropy writes its
 * gradient into the saved softmax in place and leaves only the 16-bit
 * gradient (op_grads' default). */
double mk_sim_loss_torch_grads(const mk_graph_t *g, const mk_op_t *o, int tp)
{
    return (double)g->opts.mbs * g->cfg.seq * o->in_width * 8 / tp;
}
