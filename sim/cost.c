/* The cost model (formulas in include/merak/cost.h; each repeated here at
 * the function that implements it). */
#include "merak/cost.h"

#include <math.h>
#include <string.h>

/* eff(d) = gemm_eff * d / (d + h): small GEMMs reach a smaller share of
 * peak; large ones approach gemm_eff.  h = gemm_half_dim * P / P16: the
 * device's curve is its 16-bit GEMMs' (P16 = matmul_flops[bf16]), and a
 * GEMM's fixed costs (prologue and epilogue, the pipeline's fill, the
 * last wave's tail) take the same time at any math rate, so at rate P it
 * needs dimensions P / P16 times as large to reach the same share of its
 * peak: FP8 (twice the rate) reaches half its asymptote at twice bf16's
 * size.  Published: cuBLAS-like 128x128-tile FP8 GEMMs on an H800 SXM
 * (the H100's SMs and FP8 rate), M = 4096, reach 0.30, 0.50 and 0.52 of
 * the 1979 TFLOP/s peak at K = 512, 1536 and 2048 (N = 32768, 24576,
 * 7168; deepseek-ai/DeepGEMM pull request 73's base kernels); this curve
 * on dgx-h100 gives 0.30, 0.50 and 0.55 (with bf16's h, 0.43, 0.60 and
 * 0.63).  TF32 (half the rate) reaches it at half the size. */
double mk_cost_gemm_eff(const mk_device_t *d, double dim, double peak)
{
    double e = d->gemm_eff > 0 ? d->gemm_eff : 1.0, h = d->gemm_half_dim, p16 = d->matmul_flops[MK_DTYPE_BF16];
    if (dim <= 0 || h <= 0) return e;
    if (peak > 0 && p16 > 0) h *= peak / p16;
    return e * dim / (dim + h);
}

/* Share of an op one TP rank computes: split roles divide by t; replicated
 * ops (norms, residual adds, dropout) are whole on each rank, unless
 * sequence parallelism shards them along the sequence. */
static double tp_share(const mk_op_t *o, int tp, int seqpar)
{
    if (tp <= 1) return 1.0;
    if (o->tp_role == MK_TP_REPLICATED) return seqpar ? 1.0 / tp : 1.0;
    return 1.0 / tp;
}

/* A weight GEMM's shape on one TP rank, tokens x in -> tokens x out
 * (linear layers, the LM head); 0 for other ops. */
static int weight_gemm(const mk_op_t *o, int tp, double *in, double *out)
{
    double t = tp > 1 ? tp : 1;
    *in = o->in_width, *out = o->width;
    switch (o->kind) {
    case MK_OPK_LINEAR:
        if (o->tp_role == MK_TP_ROW) *in /= t;
        if (o->tp_role == MK_TP_COLUMN) *out /= t;
        return 1;
    case MK_OPK_LM_HEAD: *out = o->vocab_padded / t; return 1;
    default: return 0;
    }
}

/* Tile and wave quantization (NVIDIA, "Matrix Multiplication Background
 * User's Guide", section 3): an m x n output is computed in
 * ceil(m/tm) * ceil(n/tn) tiles, which run in waves of one tile per SM; a
 * padded tile or a partly filled last wave takes a full tile's time.
 * A GEMM too small to fill the SMs once with these tiles runs on smaller
 * tiles or split-K instead (the guide, section 2.3): the efficiency curve
 * eff(d) of its smallest dimension covers it, and it is not quantized
 * here.  Returns the useful share of the SM-time, (0, 1]. */
static double wave_util(double m, double n, double tm, double tn, int sms)
{
    double tiles = ceil(m / tm) * ceil(n / tn);
    if (tiles < sms) return 1.0;
    return m * n / (ceil(tiles / sms) * sms * tm * tn);
}

/* The time factor (>= 1) of quantization for a weight GEMM's pass: the
 * forward's tokens x out output, or the backward's two GEMMs of equal
 * FLOPs, data gradient (tokens x in) and weight gradient (in x out).  The
 * better of the device's tile and the half-height one (cuBLAS's 256x128
 * and 128x128), in either orientation, is taken; 1 without the device's
 * SM count or tile (the presets, which give SMs only, and the ideal
 * cluster: see cluster.c). */
static double quant_factor(const mk_device_t *d, double tokens, double in, double out, int bwd)
{
    if (d->sms <= 0 || !(d->gemm_tile_m >= 1 && d->gemm_tile_n >= 1)) return 1.0;
    double tm = d->gemm_tile_m, tn = d->gemm_tile_n;
#define UTIL1(m, n, a, b) fmax(wave_util(m, n, a, b, d->sms), wave_util(m, n, b, a, d->sms))
#define UTIL(m, n) fmax(UTIL1(m, n, tm, tn), UTIL1(m, n, tm / 2, tn))
    if (!bwd) return 1.0 / UTIL(tokens, out);
    return 0.5 / UTIL(tokens, in) + 0.5 / UTIL(in, out);
#undef UTIL
#undef UTIL1
}

/* Smallest GEMM dimension of an op on one TP rank (tokens x in x out). */
static double gemm_dim(const mk_graph_t *g, const mk_op_t *o, int tp, double tokens)
{
    double in = o->in_width, out = o->width, d = tokens;
    switch (o->kind) {
    case MK_OPK_LINEAR:
    case MK_OPK_LM_HEAD: weight_gemm(o, tp, &in, &out); break;
    case MK_OPK_ATTENTION: { /* per head: (s x hd) by (hd x s), hd a head's q/k width */
        double hd = o->v_dim > 0 ? (double)o->qk_dim + o->rope_dim
                    : o->heads > 0 && o->kv_heads > 0 ? in / (o->heads + 2 * o->kv_heads) : in;
        if (hd <= 0) hd = in;
        in = hd, out = g->cfg.seq > 0 ? g->cfg.seq : tokens;
        break;
    }
    case MK_OPK_MLA_UP: /* q_b and kv_b: tokens x latent -> the rank's heads */
        in = o->q_lora < o->kv_lora ? o->q_lora : o->kv_lora, out = o->width / (tp > 1 ? tp : 1);
        break;
    default: return tokens;
    }
    if (in < d) d = in;
    if (out < d) d = out;
    return d;
}

/* An MoE op's matmul time at peak P: the routed experts' GEMMs at the
 * per-expert token count, the busiest expert's load L = ep N k / E x
 * min(imbalance, capacity factor) (an EP rank runs E/ep experts on the
 * tokens of ep ranks: the same FLOPs as E experts on its own, taller GEMMs) (dropless: no cap; tokens above the
 * capacity are dropped, so a factor below 1 computes fewer), its FLOPs
 * L / (N k / E) x the mean's with experts over EP ranks (exact at one
 * expert a rank, an upper bound above: a rank's load is its experts'
 * sum), the mean's at ep 1 (one rank computes every expert: its N k
 * assignments whatever the routing, the imbalance only shaping the
 * GEMMs); the shared expert's at all N tokens.  Every EP rank waits for
 * the busiest (the combine all-to-all needs all of them).  dims: the smallest GEMM dimension, tokens x w x f, with N
 * the tokens this rank routes: with sequence parallelism (tp > 1) a TP
 * rank's N/tp rows (Megatron-Core's dispatcher under SP, merak run's:
 * gpt_moe.c), whose tokens per expert are tp times fewer than the micro-
 * batch's. */
static double moe_matmul_time(const mk_device_t *d, const mk_graph_t *g, const mk_op_t *o, double f, double tokens,
                              double peak)
{
    double m = o->gated ? 3 : 2, w = o->width, fe = o->ffn, fs = o->shared_ffn, k = o->topk;
    double routed = k * m * w * fe / (k * m * w * fe + m * w * fs); /* the routed share of F */
    double lf = g->opts.moe_imbalance > 1 ? g->opts.moe_imbalance : 1.0, cap = g->cfg.moe_capacity;
    if (cap > 0 && cap < lf) lf = cap;
    double ep = g->opts.ep > 1 ? g->opts.ep : 1;
    double te = ep * tokens * k / o->experts * lf, de = fmin(te, fmin(w, fe)), ds = fmin(tokens, fmin(w, fs));
    double t = f * routed * (ep > 1 ? lf : fmin(lf, 1.0)) / (peak * mk_cost_gemm_eff(d, de, peak));
    if (fs > 0) t += f * (1 - routed) / (peak * mk_cost_gemm_eff(d, ds, peak));
    return t;
}

/* Megatron's FusedScaleMaskSoftmax (megatron/model/fused_softmax.py,
 * is_kernel_available, as Megatron-LM 2021 and Megatron-DeepSpeed have it)
 * runs its fused kernel only on 16-bit scores with 16 < sk <= 2048,
 * sq % 4 == 0 and the rank's b x np attention batches a multiple of the
 * kernel's batches per block (4; 8 at sk <= 128, where a warp holds two
 * rows).  Otherwise it takes forward_torch_softmax: the scores cast to
 * fp32 (apply_query_key_layer_scaling, the default, forces fp32 softmax),
 * scaled, masked in place, torch's softmax and the cast back, five kernels
 * where the fused one is one, backward the same; at tp 8 with 16 heads and
 * micro-batch 1, b x np = 2. */
static int softmax_unfused(const mk_graph_t *g, const mk_op_t *o, mk_dtype_t dtype)
{
    int tp = g->opts.tp > 1 ? g->opts.tp : 1, sk = g->cfg.seq;
    long batches = (long)g->opts.mbs * (o->heads / tp);
    return dtype == MK_DTYPE_FP32 || sk <= 16 || sk > 2048 || sk % 4 || batches % (sk <= 128 ? 8 : 4);
}

/* Kernels one MoE op launches (its router's GEMM is the "router" linear
 * before it), counted in Megatron-Core's MoE layer as the Megatron MoE
 * Model Zoo runs it (NVIDIA/Megatron-LM main 1e05700595, 2025-05-24:
 * megatron/core/transformer/moe/{router,moe_utils,token_dispatcher,
 * fused_a2a,experts}.py with --moe-router-dtype fp32, aux_loss balancing,
 * --moe-permute-fusion (TE's fused permute kernels), --moe-grouped-gemm
 * (TE's GroupedLinear: a cuBLAS GEMM per local expert); G = E/ep local
 * experts, t: tp > 1, e: ep > 1, m: G > 1.
 *   forward  router 18 + t: the input's and weight's fp32 casts 2; top-k,
 *              softmax, zeros_like, scatter, zeros_like, int, scatter,
 *              bool, sum (topk_softmax_with_capacity) 9; the aux loss's
 *              softmax, its all-reduce over TP (t), sum, mul, sum, mul and
 *              the logging tracker's div and add 7 + t
 *            flex (DeepEP) 10 + 2t: the TP-expanded map's and probs'
 *              copies (2t), top-k, get_dispatch_layout, notify_dispatch
 *              and dispatch, indices-to-multihot, TE's permute (row-id map
 *              2 + permute), unpermute, combine
 *            all-to-all: preprocess 12 (sum, long, splits, the TP x EP
 *              all-gather of the counts, contiguous, three sums, four
 *              device-to-host copies; 3 without EP and TP), permute 3,
 *              2e all-to-alls, 4t (TP all-gathers of tokens and probs,
 *              each + cat), 2m chunk sort; after the experts 2m sort back,
 *              3t (fp32 cast, TP reduce-scatter, cast back), e all-to-all,
 *              unpermute 1
 *            experts 2G + 1 (fc1's and fc2's G GEMMs, the weighted SwiGLU)
 *            shared expert 4 (fc1, act, fc2, the add), its gate 3
 *   backward router 12 (aux-loss scaler 2, two muls, softmax, gather,
 *              softmax, top-k's zeros and scatter, the two paths' add,
 *              the two casts); flex 11 + t (cached dispatch 2, unpermute,
 *              permute with probs 2, multihot, combine 2, top-k 2, the
 *              expand's sum t, the input gradient's add); all-to-all
 *              4 + 3e + 6t + 4m; experts 4G + 1 (dgrad and wgrad GEMMs);
 *              shared 5, gate 4.
 * fp8 plans add a cast of each GroupedLinear's input (2). */
static int moe_kernels(const mk_graph_t *g, const mk_op_t *o, int bwd)
{
    int G = o->experts / (g->opts.ep > 1 ? g->opts.ep : 1), t = g->opts.tp > 1, e = g->opts.ep > 1, m = G > 1;
    int shared = o->shared_ffn > 0 ? (bwd ? 5 : 4) + (o->shared_gate ? (bwd ? 4 : 3) : 0) : 0;
    int n = shared + 2 * (g->opts.dtype == MK_DTYPE_FP8);
    if (bwd) {
        n += 12 + 4 * G + 1;
        return n + (g->opts.moe_deepep ? 11 + t : 4 + 3 * e + 6 * t + 4 * m);
    }
    n += 18 + t + 2 * G + 1;
    if (g->opts.moe_deepep) return n + 10 + 2 * t;
    return n + (e || t ? 12 : 3) + 3 + 2 * e + 4 * t + 2 * m + 2 * m + 3 * t + e + 1;
}

/* An embedding lookup's kernels, counted in Megatron-LM's
 * VocabParallelEmbedding (megatron/core/tensor_parallel/layers.py) and
 * PyTorch's embedding_dense_backward_cuda (ATen/native/cuda/Embedding.cu,
 * EmbeddingBackwardKernel.cu).  Forward: the lookup, and at tp > 1 for the
 * token table the id masks (two compares and their or), the shifted ids'
 * copy and subtraction, their masked fill and the output's: 8.  Backward:
 * up to 3072 ids one feature kernel and the gradient's zeroing (2); above,
 * the sorting path: the radix sort of the ids (three passes for a 16-bit
 * range) and their positions' arange, the segments' unique_by_key, the
 * partials per segment, their scan and offsets, two zeroings, the
 * per-segment sums and the scatter: 12; the vocabulary-parallel table
 * masks the gradient once more (1). */
static int lookup_kernels(const mk_graph_t *g, const mk_op_t *o, int bwd)
{
    int vocab_tp = o->kind == MK_OPK_EMBEDDING && o->tp_role == MK_TP_VOCAB && g->opts.tp > 1;
    if (!bwd) return vocab_tp ? 8 : 1;
    return ((double)g->opts.mbs * g->cfg.seq > 3072 ? 12 : 2) + vocab_tp;
}

/* Kernels the framework launches for one op: the host issues each one (see
 * host_op_s in cluster.h).  Counted in Megatron-LM's GPT layer as
 * Megatron-LM 2021 and Megatron-DeepSpeed run it (megatron/model/
 * transformer.py; vTrain's src/model/gpt_modeling.py replays the same):
 * forward, fused layer norm 1; a linear 1 GEMM (bias in the epilogue or
 * in the fused bias-gelu / bias-dropout-add that follows); the
 * materialised attention core 5 (baddbmm, fused scale-mask-softmax,
 * dropout, bmm, the context's permute copy; 4 without dropout), flash
 * attention 1; gelu 1 (bias_gelu); dropout 1, the residual add fused into
 * it (bias_dropout_add) or 1 alone.  Backward, a layer norm 5 (apex's
 * three gradient kernels, the gradient accumulation of weight and bias),
 * a linear 5 (data- and weight-gradient GEMMs, the bias-gradient
 * reduction, two gradient accumulations; 3 without bias), the core 8
 * (permute copy, two bmm gradients each of two GEMMs, dropout and softmax
 * gradients, the q/k/v gradient gather; 7 without dropout; flash 3:
 * FlashAttention-2's preprocess, dq/dk/dv and dq-convert kernels), the
 * LM head 1 / 3; the embeddings' lookups as lookup_kernels counts them;
 * Megatron's vocabulary-parallel cross entropy 29 forward (the logits'
 * fp32 cast; _VocabParallelCrossEntropy's max, subtraction, target masks
 * and shift, gathered logits, exp, sum, log, division and its three
 * all-reduces: 20; the loss function's masked mean and the DP average of
 * the logged loss, pretrain_gpt.py loss_func: 8) and 11 backward (the
 * gradient's arange, mask cast, update and scaling, 7; the cast's 1; the
 * mean's 3), the other implementations one; one kernel for the others
 * (elementwise ops).  A GPT block with dropout: 14 forward, 43 backward.  fp8
 * plans: a linear also launches TE's cast-transpose of its input (forward)
 * and of its output gradient (backward).  The core's softmax without its
 * fused kernel adds four each way (softmax_unfused); an MoE layer is
 * counted in Megatron-Core's (moe_kernels). */
static int op_kernels(const mk_graph_t *g, const mk_op_t *o, int bwd)
{
    int drop = g->opts.dropout, cast = g->opts.dtype == MK_DTYPE_FP8;
    if (g->opts.eager) /* a kernel per PyTorch op (graph.c "Eager element-wise ops"), autograd's twice that */
        switch (o->kind) {
        case MK_OPK_RMSNORM: return bwd ? 14 : 7;
        case MK_OPK_ROPE: return bwd ? 12 : 6;
        case MK_OPK_SWIGLU: return bwd ? 4 : 2;
        default: break;
        }
    switch (o->kind) {
    case MK_OPK_LAYERNORM:
    case MK_OPK_RMSNORM: return bwd ? 5 : 1;
    case MK_OPK_LINEAR: return (bwd ? (o->bias ? 5 : 3) : 1) + cast;
    case MK_OPK_LM_HEAD: return bwd ? 3 : 1;
    case MK_OPK_ATTENTION: /* the unfused softmax: 4 more (fp32: scale and mask, 2) */
        if (g->opts.flash_attn) return bwd ? 3 : 1;
        if (softmax_unfused(g, o, g->opts.dtype)) drop += g->opts.dtype == MK_DTYPE_FP32 ? 2 : 4;
        return bwd ? 7 + drop : 4 + drop;
    case MK_OPK_ADD: return bwd || !drop ? 1 : 0;
    case MK_OPK_MOE: return moe_kernels(g, o, bwd);
    case MK_OPK_EMBEDDING:
    case MK_OPK_POS_EMBEDDING: return lookup_kernels(g, o, bwd);
    case MK_OPK_LOSS: return g->opts.xent == MK_XENT_VOCAB_PARALLEL ? (bwd ? 11 : 29) : 1;
    default: return 1;
    }
}

/* Bytes the materialised core's softmax and dropout kernels move between
 * its GEMMs, per micro-batch, whole op (the GEMMs' own score traffic is in
 * the op's bytes_moved).  Forward, Megatron's fused scale-mask-softmax
 * reads the scores and writes the probabilities; with a causal mask it
 * reads only the rows' unmasked halves (scaled_upper_triang_masked_softmax
 * loads elements up to the diagonal, writes whole rows).  Dropout reads
 * them and writes the kept ones and a 1-byte mask.  Backward: dropout
 * reads the gradient and mask and writes the gradient; softmax reads the
 * gradient and its output (halves when causal) and writes the gradient.
 * Where the fused kernel is unavailable (softmax_unfused) the fp32 passes
 * over whole rows: scale (read 4, write 4), the in-place mask (4 + 1 read,
 * 4 written), softmax (4, 4), 25 bytes a score; backward softmax's (two
 * reads, one write: 12), the mask's 9 and the scale's 8, 29; 16-bit
 * scores add the casts to fp32 and back, dt + 4 each way. */
static double score_pass_bytes(const mk_graph_t *g, const mk_op_t *o, mk_dtype_t dtype, int bwd)
{
    double s = g->cfg.seq > 0 ? g->cfg.seq : 1, dt = mk_dtype_bytes(dtype), rd = o->causal ? 0.5 : 1;
    double scores = (double)o->heads * s * s * g->opts.mbs;
    double softmax = bwd ? (1 + 2 * rd) * dt : (1 + rd) * dt;
    if (softmax_unfused(g, o, dtype)) softmax = (bwd ? 29 : 25) + (dtype == MK_DTYPE_FP32 ? 0 : 2 * (dt + 4));
    return scores * (softmax + (g->opts.dropout ? 2 * dt + 1 : 0));
}

/* Bytes an MoE layer's kernels between its experts' GEMMs move, per
 * micro-batch, whole op (the GEMMs' own operands are in the op's
 * bytes_moved): the dispatch's permutation gathers each token's k routed
 * copies (reads and writes N k w), the activation reads the up-projections'
 * outputs and writes their activations (N (k f + fs) (act_in + 1)), the
 * combine reads the k expert outputs and writes each token's sum (N k w +
 * N w) -- Megatron-Core's MoEAlltoAllTokenDispatcher permute / unpermute
 * and TE's grouped MLP activation, separate kernels that run after one
 * another, not under a GEMM.  Backward: twice (the same passes mirrored:
 * the convention for every op's bytes). */
static double moe_pass_bytes(const mk_graph_t *g, const mk_op_t *o, mk_dtype_t dtype, int bwd)
{
    double N = (double)g->opts.mbs * (g->cfg.seq > 0 ? g->cfg.seq : 1), dt = mk_dtype_bytes(dtype);
    double w = o->width, k = o->topk, act_in = o->gated ? 2 : 1;
    double b = N * (3 * k * w + w + (act_in + 1) * (k * o->ffn + o->shared_ffn)) * dt;
    return bwd ? 2 * b : b;
}

/* FlashAttention-2's backward runs 2.5x the forward's matmul FLOPs (it
 * recomputes the scores; the FLOP count of its benchmark,
 * benchmarks/benchmark_flash_attention.py) where the graph counts 2x. */
#define FLASH_BWD_FLOPS 1.25

/* An op's share of its micro-batch's costs on one TP rank: its tokens' part
 * of the micro-batch's (the graph's b x s) times the op's TP share. */
static double op_scale(const mk_graph_t *g, const mk_op_t *o, int tp, int seqpar, double tokens)
{
    double full = (double)g->opts.mbs * (g->cfg.seq > 0 ? g->cfg.seq : 1);
    return (full > 0 ? tokens / full : 1.0) * tp_share(o, tp, seqpar);
}

/* torchao's Float8Linear (opts.fp8_weight_cast) keeps no FP8 weight
 * (torchao/float8/float8_linear.py): each forward reads the rank's weight
 * shard for its amax and casts it, in x out x (2 + 2 + 1) bytes, and each
 * backward copies the FP8 weight it saved transposed for the data
 * gradient's GEMM (torch._scaled_mm takes its second operand column-
 * major), in x out x (1 + 1); per use, so not scaled by the tokens.  0
 * for other ops and plans (TE casts a step's weights once: sim_step.c). */
static double fp8_weight_pass_bytes(const mk_graph_t *g, const mk_op_t *o, int tp, int bwd)
{
    double in, out;
    if (!g->opts.fp8_weight_cast || o->kind != MK_OPK_LINEAR || !weight_gemm(o, tp, &in, &out)) return 0;
    double dt = mk_dtype_bytes(g->opts.dtype), gb = mk_dtype_gemm_bytes(g->opts.dtype);
    return in * out * (bwd ? 2 * gb : 2 * dt + gb);
}

/* The matmul peak an op's GEMMs run at: the dtype's; fp8 plans run the
 * linear layers' GEMMs at the FP8 peak and the others (the attention
 * core, the LM head) at bf16's (see graph.c, fp8 plans). */
static double matmul_peak(const mk_device_t *d, const mk_op_t *o, mk_dtype_t dtype)
{
    if (dtype == MK_DTYPE_FP8 && o->kind != MK_OPK_LINEAR) dtype = MK_DTYPE_BF16;
    return d->matmul_flops[dtype];
}

/* The device's time d = launch + max(F / (P_mm[dtype] * eff(d)) (times gemm_fwd_scale in a
 * forward when the device gives one), V / P_vec, M / BW) per forward; backward: its matmul FLOPs, twice the launches, vector FLOPs
 * and bytes.  (An op alone takes max(host, d), host = host_op_s x the op's kernels, op_kernels:
 * mk_cost_op_time; a layer's ops as one run, mk_cost_queue_t.)  The attention core adds its score passes (score_pass_bytes / BW), or
 * with flash attention runs as F / flash_attn_flops.  F, V, M scale with the tokens of the micro-batch (or of a
 * half) and with the op's TP share.  Under `ideal` only matmuls cost. */
static double op_device_time(const mk_cluster_t *c, const mk_graph_t *g, int op, int tp, int seqpar,
                             double tokens, mk_dtype_t dtype, int bwd)
{
    const mk_op_t *o = &g->ops[op];
    double scale = op_scale(g, o, tp, seqpar, tokens);
    double f = (bwd ? o->bwd_flops : o->fwd_flops) * scale;
    double v = o->vec_flops * scale * (bwd ? 2 : 1), m = o->bytes_moved * scale * (bwd ? 2 : 1);
    const mk_device_t *d = &c->dev;
    double tc = 0;
    if (f > 0 && o->kind == MK_OPK_MOE) /* the tokens this rank routes */
        tc = moe_matmul_time(d, g, o, f, tokens * tp_share(o, tp, seqpar), matmul_peak(d, o, dtype));
    else if (f > 0) {
        double pk = matmul_peak(d, o, dtype);
        tc = f / (pk * mk_cost_gemm_eff(d, gemm_dim(g, o, tp, tokens), pk));
    }
    if (f > 0 && !bwd && d->gemm_fwd_scale > 0 && !c->ideal) tc *= d->gemm_fwd_scale; /* see cluster.h */
    /* an fp8 linear's backward GEMMs (dgrad, wgrad) accumulate precisely (TE's recipe; cluster.c) */
    if (f > 0 && bwd && dtype == MK_DTYPE_FP8 && o->kind == MK_OPK_LINEAR && d->fp8_split_acc_scale > 0 && !c->ideal)
        tc *= d->fp8_split_acc_scale;
    double in, out;
    if (f > 0 && !c->ideal && weight_gemm(o, tp, &in, &out)) tc *= quant_factor(d, tokens, in, out, bwd);
    /* Measured (merak profile, CPU backend, 2-core EPYC): the attention
       core runs as loops at 6.6 GFLOP/s forward and 11.2 backward (graph
       count) where the GEMM curve at head_dim 64 gives ~90, so a device
       may give the core's own rates, forward and backward. */
    int core = o->kind == MK_OPK_ATTENTION && d->attention_flops <= 0;
    if (f > 0 && o->kind == MK_OPK_ATTENTION && d->attention_flops > 0 && !c->ideal)
        tc = f / (bwd && d->attention_bwd_flops > 0 ? d->attention_bwd_flops : d->attention_flops);
    if (c->ideal) return tc;
    int flash = core && g->opts.flash_attn && d->flash_attn_flops > 0;
    if (flash) { /* softmax on-chip; the backward at its own rate where the device gives one */
        double rate = bwd && d->flash_attn_bwd_flops > 0 ? d->flash_attn_bwd_flops : d->flash_attn_flops;
        tc = f * (bwd ? FLASH_BWD_FLOPS : 1) / rate, v = 0;
    }
    /* a fused kernel skips the tiles the causal mask (and a sliding window, FlashAttention-2's window_size)
       masks whole: it does the causal pairs' share of the work, s(s+1)/2 of s^2 (the window's share of
       that), and its published rates count those FLOPs (FlashAttention-2's and -3's benchmarks halve the
       causal count); the materialised core computes every score and masks them */
    if (flash && o->fwd_flops > 0) tc *= o->fwd_flops_causal / o->fwd_flops;
    /* a device may give its backward vector rate apart (cluster.h) */
    double vr = bwd && d->vector_bwd_flops > 0 ? d->vector_bwd_flops : d->vector_flops;
    double tv = vr > 0 ? v / vr : 0, tm = d->mem_bw_Bps > 0 ? m / d->mem_bw_Bps : 0;
    double t = tc;
    if (tv > t) t = tv;
    if (tm > t) t = tm;
    /* the materialised core's softmax and dropout are kernels of their
       own between its GEMMs: their passes follow the GEMMs' time */
    if (core && !g->opts.flash_attn && d->mem_bw_Bps > 0)
        t += score_pass_bytes(g, o, dtype, bwd) * scale / d->mem_bw_Bps;
    /* and an fp8 linear's casts and transposes before its GEMMs (graph.c) */
    if (d->mem_bw_Bps > 0) t += o->pass_bytes[bwd ? 1 : 0] * scale / d->mem_bw_Bps;
    /* and torchao's weight casts */
    if (d->mem_bw_Bps > 0) t += fp8_weight_pass_bytes(g, o, tp, bwd) / d->mem_bw_Bps;
    /* so are an MoE layer's dispatch, activation and combine around its GEMMs */
    if (o->kind == MK_OPK_MOE && d->mem_bw_Bps > 0) t += moe_pass_bytes(g, o, dtype, bwd) * scale / d->mem_bw_Bps;
    return t + d->launch_s * (bwd ? 2 : 1);
}

double mk_cost_op_host(const mk_cluster_t *c, const mk_graph_t *g, int op, int bwd)
{
    return c->ideal ? 0 : c->dev.host_op_s * op_kernels(g, &g->ops[op], bwd);
}

double mk_cost_op_parts(const mk_cluster_t *c, const mk_graph_t *g, int op, int tp, int seqpar,
                        double tokens, mk_dtype_t dtype, int bwd, double *host)
{
    *host = mk_cost_op_host(c, g, op, bwd);
    return op_device_time(c, g, op, tp, seqpar, tokens, dtype, bwd);
}

/* An op issued alone: the device waits for the host when the host issues
 * it more slowly than the device runs it. */
double mk_cost_op_time(const mk_cluster_t *c, const mk_graph_t *g, int op, int tp, int seqpar,
                       double tokens, mk_dtype_t dtype, int bwd)
{
    double host, t = mk_cost_op_parts(c, g, op, tp, seqpar, tokens, dtype, bwd, &host);
    return host > t ? host : t;
}

double mk_cost_op_wgrad_parts(const mk_cluster_t *c, const mk_graph_t *g, int op, int tp, int seqpar,
                              double tokens, mk_dtype_t dtype, double *host)
{
    const mk_op_t *o = &g->ops[op];
    *host = 0;
    if (o->kind == MK_OPK_LINEAR || o->kind == MK_OPK_LM_HEAD)
        return mk_cost_op_parts(c, g, op, tp, seqpar, tokens, dtype, 0, host);
    if (o->kind != MK_OPK_MOE || o->fwd_flops <= 0) return 0;
    const mk_device_t *d = &c->dev;
    double f = o->fwd_flops * op_scale(g, o, tp, seqpar, tokens);
    double t = moe_matmul_time(d, g, o, f, tokens * tp_share(o, tp, seqpar), matmul_peak(d, o, dtype));
    return c->ideal ? t : t + d->launch_s;
}

double mk_cost_op_wgrad_time(const mk_cluster_t *c, const mk_graph_t *g, int op, int tp, int seqpar,
                             double tokens, mk_dtype_t dtype)
{
    double host, t = mk_cost_op_wgrad_parts(c, g, op, tp, seqpar, tokens, dtype, &host);
    return host > t ? host : t;
}

/* Megatron-Core's MoE token dispatchers copy the tokens per expert to the
 * host before they permute (token_dispatcher.py: the .cpu() of
 * num_tokens_per_expert / the output splits), so the host waits there
 * for the device to drain its queue. */
int mk_cost_op_syncs(const mk_graph_t *g, int op)
{
    return g->ops[op].kind == MK_OPK_MOE;
}

/* The formula in merak/cost.h. */
void mk_cost_queue_op(mk_cost_queue_t *q, double host, double dev, int sync)
{
    if (!sync) {
        q->host += host, q->dev += dev;
        return;
    }
    q->done = mk_cost_queue_time(q) + (host > dev ? host : dev);
    q->host = q->dev = 0;
}

double mk_cost_queue_time(const mk_cost_queue_t *q)
{
    return q->done + (q->host > q->dev ? q->host : q->dev);
}

double mk_cost_layer_compute(const mk_cluster_t *c, const mk_graph_t *g, int layer, int tp, int seqpar,
                             double tokens, mk_dtype_t dtype, int bwd)
{
    const mk_layer_t *L = &g->layers[layer];
    mk_cost_queue_t q = {0, 0, 0};
    for (int i = L->first_op; i < L->first_op + L->n_ops; i++) {
        double host, t = mk_cost_op_parts(c, g, i, tp, seqpar, tokens, dtype, bwd, &host);
        mk_cost_queue_op(&q, host, t, mk_cost_op_syncs(g, i));
    }
    return mk_cost_queue_time(&q);
}

double mk_cost_layer_time(const mk_cluster_t *c, const mk_graph_t *g, int layer, int tp, int seqpar,
                          int recompute, mk_dtype_t dtype)
{
    const mk_layer_t *L = &g->layers[layer];
    double tokens = (double)g->opts.mbs * g->cfg.seq;
    double f = mk_cost_layer_compute(c, g, layer, tp, seqpar, tokens, dtype, 0);
    double b = mk_cost_layer_compute(c, g, layer, tp, seqpar, tokens, dtype, 1);
    double ar = 0;
    if (tp > 1 && L->n_tp_allreduce > 0) {
        mk_group_t grp = mk_group_make(c, 0, 1, tp, tp);
        ar = L->n_tp_allreduce * mk_cost_coll(c, MK_COLL_ALLREDUCE, &grp, L->out_bytes);
    }
    int ck = recompute && mk_layer_checkpointable(g, layer);
    return f + b + 2 * ar + (ck ? f + ar : 0);
}
