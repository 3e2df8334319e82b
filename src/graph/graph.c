/* Proxy graph core: op costs, TP roles by pattern, sharding into layers.
 *
 * Per op, N = b*s tokens, dt = bytes of the dtype, w = output width:
 *   linear     params in*out(+out)  fwd 2*N*in*out   bwd 2*fwd   saves input N*in*dt
 *              (fp8 plans: the input cast to FP8, below)
 *   attention  fwd 4*N*s*w (non-causal; causal (s+1)/(2s) of it, a sliding
 *              window's share of that: mk_model_window_share), bwd 2*fwd,
 *              saves q,k,v N*in*dt (in = 3w, or w + 2*kv*d with grouped K/V
 *              heads) and scores a*s*s*b*dt (+ mask a*s*s*b and dropped
 *              scores a*s*s*b*dt with dropout); with flash attention
 *              q,k,v and an fp32 log-sum-exp a*s*b*4, no s*s terms
 *   layernorm  saves input N*w*dt    gelu saves input N*w*dt
 *   rmsnorm    params w, 4 vector FLOPs an element, saves input N*w*dt
 *   rope       rotates q and k (r = w - kv*d per token): 3*N*r vector FLOPs,
 *              saves nothing (backward is the inverse rotation)
 *   mla_norm   RMSNorm of the q and kv latents (r = q_lora + kv_lora): r
 *              params, 4*N*r vector FLOPs, saves N*r*dt
 *   mla_up     q_b and kv_b: mm = q_lora*a*(qk+rope) + kv_lora*a*(qk+v)
 *              params, fwd 2*N*mm, saves the latents N*r*dt; an MLA
 *              attention does 2*N*s*a*(qk + rope + v) (q.k, then p.v)
 *   qk_norm    RMSNorm (bias: LayerNorm) of each q and k head over d:
 *              params 2*d (4*d), 4*N*r (8*N*r) vector FLOPs, saves its
 *              input N*r*dt; its weights are every TP rank's (replicated)
 *   swiglu     input 2f, output f: 6*N*f vector FLOPs, saves input 2*N*f*dt
 *   dropout    saves a 1-byte mask N*w        add saves nothing
 *   lm head    fwd 2*N*h*Vp (padded vocabulary), saves input N*h*dt
 *   loss       saves fp32 softmax N*Vp*4 (split over the vocabulary)
 *   moe        E experts of width f (m = 3 matrices gated, 2 GELU) and a
 *              shared expert of width fs: params E*m*w*f + m*w*fs (+ biases),
 *              active k*m*w*f + m*w*fs; fwd 2*N*(k*m*w*f + m*w*fs), bwd
 *              2*fwd; the router's softmax and top-k 5*N*E and the combine
 *              2*N*k*w vector FLOPs, activation as swiglu/gelu on N*k*f;
 *              saves the fp32 router probabilities N*E*4 and, for each of
 *              the k routed copies of a token, its input w, the expert's
 *              activation input and its down-projection input f (the
 *              shared expert's likewise); the block input the router
 *              linear saves already; a shared gate (shared_gate) adds w
 *              params, 2*N*w matmul FLOPs and N*(w + 4) vector FLOPs;
 *              bytes: its GEMMs' operands (the dispatch, activation and
 *              combine passes between them: sim/cost.c moe_pass_bytes)
 * With 16-bit types and dropout a GPT block saves s*b*h*(34 + 5*a*s/h)
 * bytes (Korthikanti et al. 2022), of which 10*s*b*h is replicated over TP
 * ranks, 24*s*b*h is split, and 5*a*s*s*b is attention scores.
 *
 * fp8 plans (Transformer Engine's linears with delayed scaling, as
 * Megatron-Core's TE layer spec builds them: TELayerNormColumnParallelLinear
 * where a norm feeds the linear, TERowParallelLinear otherwise;
 * transformer_engine/pytorch/module/linear.py, layernorm_linear.py and
 * base.py grad_output_preprocess): the GEMM reads FP8 operands
 * (N*in + in*out) and writes its output in bf16 (N*out*2), and the op
 * saves its FP8 input (N*in*1) for its weight gradient.  The casts are
 * kernels of their own before the GEMMs (pass_bytes, timed after the
 * GEMM's own time in sim/cost.c, not under it): a plain linear's bf16
 * input goes through one fused cast-transpose that reads it (N*in*2) and
 * writes the FP8 input and its transpose (N*in*1 each), taking the amax as
 * it goes (2 vector FLOPs an element: scale, compare); after a norm, the
 * norm kernel writes the FP8 input itself and the backward transposes the
 * saved copy for the weight gradient (N*in*1 read and written).  Backward,
 * the output gradient is cast-transposed likewise (N*out*(2 + 1 + 1)).
 * Current (tensorwise) scaling (opts.fp8_current, Megatron-Core's
 * --fp8-recipe tensorwise) reads each tensor once more before its cast,
 * for the amax its scale needs (+2 an element: mk_dtype_cast_bytes), and
 * so no norm writes an FP8 output: every linear casts its own input.
 * torchao's Float8Linear (opts.fp8_weight_cast) casts its weight at each
 * use instead of once a step (sim/cost.c fp8_weight_pass_bytes).
 * The other
 * ops (norms, the attention core, which TE's DotProductAttention runs in
 * bf16, the LM head, which Megatron-Core's output layer runs outside TE)
 * are bf16's.
 *
 * Eager element-wise ops (opts.eager: torchtitan's Llama without
 * torch.compile, torchtitan/models/llama3/model.py): a PyTorch op per
 * kernel, each a pass over memory (dt: the activation's bytes, 4 for the
 * fp32 upcasts; x.float() and .type_as(x) are no-ops on fp32):
 *   RMSNorm  x.float() (dt + 4), pow(2) (4 + 4), mean(-1) (4), x * rsqrt
 *            (4 + 4), .type_as(x) (4 + dt), * weight (2 dt): 4 dt + 28
 *            bytes an element, 36 in bf16 (fused: 2 dt), 7 kernels
 *   RoPE     q and k each: .float() (dt + 4), the complex product with the
 *            frequencies (4 + 4), .type_as (4 + dt): 2 dt + 16 bytes an
 *            element, 20 in bf16 (fused: 2 dt), 6 kernels
 *   SwiGLU   F.silu(w1 x) (dt + dt), * w3 x (2 dt + dt): 5 dt bytes an
 *            output element (fused: 3 dt), 2 kernels
 * The same FLOPs and saved tensors as the fused kernels (time only). */
#include "merak/graph.h"
#include "merak/limits.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const mk_opkind_names[MK_OPK_COUNT] = {
    "embedding", "pos_embedding", "layernorm", "linear", "attention",
    "gelu", "add", "dropout", "lm_head", "loss", "rmsnorm", "rope", "swiglu", "moe", "qk_norm", "mla_norm", "mla_up"};

const char *mk_opkind_name(mk_opkind_t k) { return k < MK_OPK_COUNT ? mk_opkind_names[k] : "?"; }

int mk_opkind_parse(const char *s, mk_opkind_t *out)
{
    for (int k = 0; k < MK_OPK_COUNT; k++)
        if (!strcmp(s, mk_opkind_names[k])) {
            *out = (mk_opkind_t)k;
            return 0;
        }
    return -1;
}

const char *mk_tp_role_name(mk_tp_role_t r)
{
    static const char *const n[] = {"replicated", "column", "row", "split", "heads", "vocab"};
    return r <= MK_TP_VOCAB ? n[r] : "?";
}

void mk_graph_opts_init(mk_graph_opts_t *o)
{
    memset(o, 0, sizeof *o); /* options added later are off */
    o->mbs = 1;
    o->dtype = MK_DTYPE_BF16;
    o->dropout = 1;
    o->tp = 1;
}

mk_graph_t *mk_graph_new(const mk_model_config_t *cfg, const mk_graph_opts_t *opts)
{
    mk_graph_t *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->cfg = *cfg;
    g->opts = *opts;
    return g;
}

void mk_graph_free(mk_graph_t *g)
{
    if (!g) return;
    free(g->ops);
    free(g->layers);
    free(g->name_slot);
    free(g);
}

static int producer_width(const mk_graph_t *g, int p)
{
    return p == MK_GRAPH_INPUT ? g->input_width : g->ops[p].width;
}

/* A fused q,k,v input of width (heads + 2*kv)*d: attention outputs the
 * heads*d context, rope and qk_norm the same q,k,v rotated or normalised.
 * kv 0 means heads (MHA). */
static int qkv_shape(mk_op_t *o, int w)
{
    if (o->v_dim > 0) { /* MLA: every head its own q and k of qk_dim + rope_dim, v of v_dim */
        if (o->heads < 1 || (int64_t)o->heads * (2 * (o->qk_dim + o->rope_dim) + o->v_dim) != w)
            return mk_error_set("op '%s': %s reads MLA's fused q|k|v of width heads*(2*(qk+rope) + v), got %d",
                                o->name, mk_opkind_name(o->kind), w);
        o->kv_heads = o->heads;
        o->width = o->kind == MK_OPK_ATTENTION ? o->heads * o->v_dim : w;
        return 0;
    }
    if (o->kv_heads == 0) o->kv_heads = o->heads;
    int a = o->heads, kv = o->kv_heads;
    if (a < 1 || kv < 1 || a % kv || w % (a + 2 * kv))
        return mk_error_set("op '%s': %s needs an input of width (heads + 2*kv_heads)*d with kv_heads "
                            "dividing heads (got width %d, %d heads, %d KV heads)",
                            o->name, mk_opkind_name(o->kind), w, a, kv);
    o->width = o->kind == MK_OPK_ATTENTION ? w / (a + 2 * kv) * a : w;
    return 0;
}

/* MLA's norm and up-projection read [q latent | kv latent | k_pe]; the
 * up-projection writes the heads' [q | k | v] (k_pe joins every head's k). */
static int mla_shape(mk_op_t *o, int w)
{
    if (o->v_dim < 1 || o->q_lora < 1 || o->kv_lora < 1 || o->qk_dim < 1 || o->rope_dim < 1 || o->heads < 1 ||
        (int64_t)o->q_lora + o->kv_lora + o->rope_dim != w)
        return mk_error_set("op '%s': %s needs MLA's ranks and head dims (a built-in model's) and an input of "
                            "q_lora + kv_lora + rope (got %d)", o->name, mk_opkind_name(o->kind), w);
    o->width = o->kind == MK_OPK_MLA_NORM ? w : o->heads * (2 * (o->qk_dim + o->rope_dim) + o->v_dim);
    return 0;
}

/* An MoE op: k of E experts, widths in range, router logits of width E. */
static int moe_shape(const mk_graph_t *g, mk_op_t *o, int w)
{
    if (o->experts < 1 || o->experts > MK_MAX_EXPERTS || o->topk < 1 || o->topk > o->experts)
        return mk_error_set("op '%s': moe needs 1 <= topk <= experts <= %d (got %d of %d)", o->name,
                            MK_MAX_EXPERTS, o->topk, o->experts);
    if (o->ffn < 1 || o->ffn > MK_MAX_MOE_FFN || o->shared_ffn < 0 || o->shared_ffn > MK_MAX_MOE_FFN)
        return mk_error_set("op '%s': moe expert widths must be 1 to %d (shared 0 to %d)", o->name,
                            MK_MAX_MOE_FFN, MK_MAX_MOE_FFN);
    if (producer_width(g, o->in[1]) != o->experts)
        return mk_error_set("op '%s': moe's second input (the router logits) has width %d, not the %d experts",
                            o->name, producer_width(g, o->in[1]), o->experts);
    o->width = w;
    return 0;
}

/* Check the op's inputs and fill in its widths. */
static int op_shape(const mk_graph_t *g, mk_op_t *o)
{
    for (int i = 0; i < o->n_in; i++)
        if (o->in[i] != MK_GRAPH_INPUT && (o->in[i] < 0 || o->in[i] >= g->n_ops))
            return mk_error_set("op '%s': input %d is not an earlier op", o->name, o->in[i]);
    int need = o->kind == MK_OPK_ADD || o->kind == MK_OPK_MOE ? 2 : o->kind == MK_OPK_POS_EMBEDDING ? 0 : 1;
    if (o->n_in != need)
        return mk_error_set("op '%s' (%s) takes %d input(s), got %d", o->name,
                            mk_opkind_name(o->kind), need, o->n_in);
    int w = need ? producer_width(g, o->in[0]) : 0;
    o->in_width = w;
    for (int i = 0; i < o->n_in; i++) {
        if (o->in[i] != MK_GRAPH_INPUT) continue;
        if (!g->input_width && o->kind != MK_OPK_EMBEDDING)
            return mk_error_set("op '%s': only an embedding can read the token input", o->name);
        if (g->input_width && o->kind == MK_OPK_EMBEDDING)
            return mk_error_set("op '%s': an embedding needs token input (drop 'input_width')", o->name);
    }
    switch (o->kind) {
    case MK_OPK_EMBEDDING:
        if (o->in[0] != MK_GRAPH_INPUT || g->input_width)
            return mk_error_set("op '%s': an embedding reads the token input", o->name);
        /* fall through */
    case MK_OPK_POS_EMBEDDING:
        if (o->width < 1) return mk_error_set("op '%s': embedding dim must be >= 1", o->name);
        if (o->kind == MK_OPK_EMBEDDING && o->vocab < 1)
            return mk_error_set("op '%s': vocab must be >= 1", o->name);
        break;
    case MK_OPK_LINEAR:
        if (o->width < 1) return mk_error_set("op '%s': linear 'out' must be >= 1", o->name);
        break;
    case MK_OPK_ATTENTION: case MK_OPK_ROPE: case MK_OPK_QK_NORM:
        if (qkv_shape(o, w) < 0) return -1;
        break;
    case MK_OPK_MLA_NORM: case MK_OPK_MLA_UP:
        if (mla_shape(o, w) < 0) return -1;
        break;
    case MK_OPK_SWIGLU:
        if (w % 2) return mk_error_set("op '%s': swiglu needs an input [gate | up] of even width, got %d",
                                       o->name, w);
        o->width = w / 2;
        break;
    case MK_OPK_MOE:
        if (moe_shape(g, o, w) < 0) return -1;
        break;
    case MK_OPK_ADD:
        if (producer_width(g, o->in[1]) != w)
            return mk_error_set("op '%s': add of widths %d and %d", o->name, w,
                                producer_width(g, o->in[1]));
        /* fall through */
    case MK_OPK_LAYERNORM: case MK_OPK_GELU: case MK_OPK_DROPOUT: case MK_OPK_RMSNORM:
        o->width = w;
        break;
    case MK_OPK_LM_HEAD:
        if (o->vocab < 1) return mk_error_set("op '%s': vocab must be >= 1", o->name);
        o->width = o->vocab;
        break;
    case MK_OPK_LOSS:
        if (o->vocab < 1) o->vocab = w;
        if (w != o->vocab)
            return mk_error_set("op '%s': loss over vocab %d reads width %d", o->name, o->vocab, w);
        o->width = 1;
        break;
    default:
        return mk_error_set("op '%s': unknown kind", o->name);
    }
    return 0;
}

/* Bytes an element RMSNorm, RoPE and SwiGLU move: their fused kernel's
 * (a read and a write; SwiGLU reads two), or a pass per eager PyTorch op
 * (above). */
static double elem_bytes(mk_opkind_t k, double dt, int eager)
{
    double up = dt < 4 ? 2 * (dt + 4) : 0; /* .float() and .type_as(), no-ops in fp32 */
    switch (k) {
    case MK_OPK_RMSNORM: return eager ? up + 20 + 2 * dt : 2 * dt;
    case MK_OPK_ROPE: return eager ? up + 8 : 2 * dt;
    default: return eager ? 5 * dt : 3 * dt; /* SwiGLU */
    }
}

/* Costs of the elementwise ops and norms: vector work over N tokens of
 * width w (input width in). */
static void vector_costs(mk_op_t *o, double N, double dt, int drop, int eager)
{
    const double w = o->width, in = o->in_width;
    switch (o->kind) {
    case MK_OPK_LAYERNORM:
        o->params = 2 * w;
        o->vec_flops = 8 * N * w;
        o->bytes_moved = 2 * N * w * dt;
        o->act_rep = N * w * dt;
        break;
    case MK_OPK_RMSNORM:
        o->params = w;
        o->vec_flops = 4 * N * w;
        o->bytes_moved = N * w * elem_bytes(o->kind, dt, eager);
        o->act_rep = N * w * dt;
        break;
    case MK_OPK_ROPE: {
        double r = w - w / (o->heads + 2 * o->kv_heads) * o->kv_heads; /* q and k, not v */
        if (o->v_dim > 0) r = (double)o->heads * o->rope_dim + o->rope_dim; /* MLA: q_pe, and k_pe before it joins */
        o->vec_flops = 3 * N * r;
        o->bytes_moved = N * r * elem_bytes(o->kind, dt, eager);
        break;
    }
    case MK_OPK_MLA_NORM: { /* the two latents, not k_pe */
        double r = (double)o->q_lora + o->kv_lora;
        o->params = r;
        o->vec_flops = 4 * N * r;
        o->bytes_moved = 2 * N * r * dt;
        o->act_rep = N * r * dt;
        break;
    }
    case MK_OPK_QK_NORM: { /* one weight (and bias) of d for the q heads, one for the k heads */
        double d = w / (o->heads + 2 * o->kv_heads), r = w - d * o->kv_heads;
        o->params = (o->bias ? 2 : 1) * 2 * d;
        o->vec_flops = (o->bias ? 8 : 4) * N * r;
        o->bytes_moved = 2 * N * r * dt;
        o->act_rep = N * r * dt;
        break;
    }
    case MK_OPK_SWIGLU:
        o->vec_flops = 6 * N * w;
        o->bytes_moved = N * w * elem_bytes(o->kind, dt, eager);
        o->act_rep = N * in * dt;
        break;
    case MK_OPK_GELU:
        o->vec_flops = 20 * N * w;
        o->bytes_moved = 2 * N * w * dt;
        o->act_rep = N * w * dt;
        break;
    case MK_OPK_ADD:
        o->vec_flops = N * w;
        o->bytes_moved = 3 * N * w * dt;
        break;
    case MK_OPK_DROPOUT:
        if (!drop) break;
        o->vec_flops = 2 * N * w;
        o->bytes_moved = 2 * N * w * dt + N * w;
        o->act_rep = N * w;
        break;
    default:
        break;
    }
}

/* A linear layer's bytes moved, vector FLOPs and saved bytes (the table
 * on top): operands of gb = mk_dtype_gemm_bytes, the output in dt; fp8
 * adds the casts' passes (after a norm: the saved input's transpose). */
static void linear_bytes(const mk_graph_t *g, mk_op_t *o, double N)
{
    const double dt = mk_dtype_bytes(g->opts.dtype), gb = mk_dtype_gemm_bytes(g->opts.dtype);
    const double in = o->in_width, w = o->width, cast = mk_dtype_cast_bytes(g->opts.dtype, g->opts.fp8_current);
    if (gb == dt) { /* one type throughout */
        o->bytes_moved = (N * in + N * w + in * w) * dt;
        o->act_rep = N * in * dt;
        return;
    }
    mk_opkind_t from = o->n_in > 0 && o->in[0] >= 0 ? g->ops[o->in[0]].kind : MK_OPK_COUNT;
    /* a norm writes the FP8 input itself only with delayed scaling: current scaling needs the
       output's amax before the cast */
    int normed = (from == MK_OPK_LAYERNORM || from == MK_OPK_RMSNORM) && !g->opts.fp8_current;
    o->bytes_moved = (N * in + in * w) * gb + N * w * dt;
    o->vec_flops = 2 * N * in;
    o->act_rep = N * in * gb;
    o->pass_bytes[0] = normed ? 0 : N * in * cast;
    o->pass_bytes[1] = N * w * cast + (normed ? 2 * N * in * gb : 0);
}

/* An MoE op's costs (the table on top); load: the rank's routed tokens
 * over the mean (the busiest EP rank's: the imbalance, capped by the
 * capacity factor, with ep > 1; 1 at ep 1, where one rank takes every
 * assignment), which its routed copies' saved rows scale with. */
static void moe_costs(mk_op_t *o, double N, double dt, double load)
{
    const double w = o->width, E = o->experts, k = o->topk, f = o->ffn, fs = o->shared_ffn;
    const double m = o->gated ? 3 : 2, act_in = o->gated ? 2 : 1, act_flops = o->gated ? 6 : 20;
    const double bias = o->bias ? (o->gated ? 2 : 1) * f + w : 0, sbias = o->bias && fs ? fs * act_in + w : 0;
    const double expert = m * w * f + bias, shared = m * w * fs + sbias;
    o->params = E * expert + shared;
    o->active_params = k * expert + shared;
    o->expert_params = E * expert;
    o->fwd_flops = o->fwd_flops_causal = 2 * N * (k * m * w * f + m * w * fs);
    o->bwd_flops = 2 * o->fwd_flops;
    o->vec_flops = 5 * N * E + 2 * N * k * w + act_flops * N * (k * f + fs);
    if (o->shared_gate) { /* x . g per token (no bias), its sigmoid, the shared output scaled */
        o->params += w, o->active_params += w;
        o->fwd_flops += 2 * N * w, o->fwd_flops_causal += 2 * N * w, o->bwd_flops += 4 * N * w;
        o->vec_flops += 4 * N + N * w;
    }
    /* the experts' GEMMs' operands: the expert weights, and per routed copy
       of a token its input and output rows (w each), the up-projection's
       output (act_in f) and the down-projection's input (f); the shared
       expert's likewise per token.  The dispatch, activation and combine
       kernels between them are passes of their own (sim/cost.c
       moe_pass_bytes) */
    o->bytes_moved = (o->params + N * k * (2 * w + (act_in + 1) * f) + (fs > 0 ? N * (2 * w + (act_in + 1) * fs) : 0)) * dt;
    o->act_rep = N * E * 4 + load * N * k * (w + (act_in + 1) * f) * dt + N * (act_in + 1) * fs * dt;
    /* B_W's operands (the zero-bubble split, as torch's pipelining and DualPipe split an MoE layer):
       per routed copy the up-projection's input (w) and output gradient (act_in f), the down-
       projection's input (f) and output gradient (w); the shared expert's per token (the router is
       a linear of its own) */
    o->wgrad_bytes = (load * N * k * (2 * w + (act_in + 1) * f) + (fs > 0 ? N * (2 * w + (act_in + 1) * fs) : 0)) * dt;
    /* the backward's gradients, one step of autograd at a time (each the
       gradient a kernel reads and the one it writes; what it read goes
       with it): the combine's (n w in, R w routed rows out), the down-
       projection's (R w in, R f out), the activation's (R f, R act_in f:
       gate|up's), the up-projection's (R act_in f, R w), the dispatch's (R
       w, n w); R = load N k routed rows, the shared expert's per token in
       turn.  Megatron-Core's grouped MLP holds these (a dense MLP's are its
       ops' own, op_grads) */
    const double R = load * N * k;
    double routed = fmax((N + R) * w, R * fmax(act_in * f + w, (act_in + 1) * f));
    double own = fs > 0 ? N * fmax(2 * w, fmax(act_in * fs + w, (act_in + 1) * fs)) : 0;
    o->bwd_grads = fmax(routed, own) * dt;
}

/* The loss's kernels over its n logits (bytes a logit), each a pass of
 * its own through HBM (pass_bytes: timed one after another, not under one
 * roofline); a 16-bit head's logits are cast to fp32 first (dt read, 4
 * written: cast) and the gradient back (4 read, dt written), an fp32 one
 * has no cast (.float() returns the tensor itself).  The gathers of the
 * targets' logits and the per-row statistics are N-sized, not counted.
 *   vocab-parallel  Megatron-LM's vocab_parallel_cross_entropy (megatron/
 *       mpu/cross_entropy.py; Megatron-Core's unfused default keeps its
 *       steps): row max 4, in-place subtraction 8, exp in place 8, row sum
 *       4, the softmax's in-place division 8: cast + 32; backward the
 *       in-place product with the loss's gradient 8, + cast.
 *   torch  F.cross_entropy on the fp32 logits (torchtitan): log_softmax's
 *       max and sum-of-exp passes 4 each and its output 4: cast + 12;
 *       backward nll_loss's fp32 gradient 4 (zeroed, then scattered),
 *       log_softmax's 12 (gradient and output read, one written), + cast.
 *   fused  Megatron-Core's fused_cross_entropy.py (--cross-entropy-loss-
 *       fusion, jit-fused): the cast with the max, subtraction-exp-sum 8,
 *       division 8: cast + 16 (fp32: the max's read 4 + 16); backward one
 *       kernel 4 + the gradient written (dt).  merak run's loss passes alike
 *       (kernels_cpu.c xent_max / xent_exp / xent_loss, xent_bwd).
 *   fused-te  Transformer Engine's Triton kernels (pytorch/triton/
 *       cross_entropy.py): an online max-and-sum pass reads dt, a second
 *       reads dt and writes the fp32 gradient (2 dt + 4); backward the
 *       gradient scaled in place (8) and cast to the logits' dtype (4 + dt). */
static void loss_passes(mk_op_t *o, double n, double dt, int xent)
{
    double cast = dt < 4 ? dt + 4 : 0, f, b;
    switch (xent) {
    case MK_XENT_TORCH: f = cast + 12, b = cast + 16; break;
    case MK_XENT_FUSED: f = (cast ? cast : 4) + 16, b = 4 + dt; break;
    case MK_XENT_FUSED_TE: f = 2 * dt + 4, b = 12 + dt; break;
    default: f = cast + 32, b = cast + 8; break;
    }
    o->bytes_moved = 0;
    o->pass_bytes[0] = n * f;
    o->pass_bytes[1] = n * b;
}

/* Costs of one op for one micro-batch (see the table on top). */
static void op_costs(const mk_graph_t *g, mk_op_t *o)
{
    const double N = (double)g->opts.mbs * g->cfg.seq, s = g->cfg.seq, b = g->opts.mbs;
    const double dt = mk_dtype_bytes(g->opts.dtype);
    const double w = o->width, in = o->in_width;
    const int drop = g->opts.dropout;
    o->vocab_padded = o->vocab > 0 ? mk_pad_vocab(o->vocab, g->opts.tp) : 0;
    const double Vp = o->vocab_padded;
    o->out_bytes = N * w * dt;
    o->pass_bytes[0] = o->pass_bytes[1] = o->wgrad_bytes = 0;
    switch (o->kind) {
    case MK_OPK_EMBEDDING:
        o->params = (double)o->vocab * w;
        o->bytes_moved = 2 * N * w * dt;
        break;
    case MK_OPK_POS_EMBEDDING:
        o->params = s * w;
        o->bytes_moved = 2 * N * w * dt;
        break;
    case MK_OPK_LINEAR:
        o->params = in * w + (o->bias ? w : 0);
        o->fwd_flops = o->fwd_flops_causal = 2 * N * in * w;
        o->bwd_flops = 2 * o->fwd_flops;
        linear_bytes(g, o, N);
        break;
    case MK_OPK_MLA_UP: { /* q_b (q_lora -> a (qk + rope)), kv_b (kv_lora -> a (qk + v)) */
        double a = o->heads, mm = o->q_lora * a * (o->qk_dim + o->rope_dim) + o->kv_lora * a * (o->qk_dim + o->v_dim);
        o->params = mm;
        o->fwd_flops = o->fwd_flops_causal = 2 * N * mm;
        o->bwd_flops = 2 * o->fwd_flops;
        o->vec_flops = N * w; /* k_pe copied into every head's k */
        o->bytes_moved = (N * in + N * w + mm) * dt;
        o->act_rep = N * (o->q_lora + o->kv_lora) * dt;
        break;
    }
    case MK_OPK_ATTENTION: {
        double scores = (double)o->heads * s * s * b;
        /* q.k over a head's q/k width, p.v over its v width (MLA: qk + rope and v; else both d = w/a) */
        o->fwd_flops = o->v_dim > 0 ? 2 * N * s * o->heads * ((double)o->qk_dim + o->rope_dim + o->v_dim)
                                    : 4 * N * s * w;
        o->fwd_flops_causal = o->causal ? o->fwd_flops * (s + 1) / (2 * s) : o->fwd_flops;
        if (o->causal && mk_model_window_share(&g->cfg) < 1) o->fwd_flops_causal *= mk_model_window_share(&g->cfg);
        o->bwd_flops = 2 * o->fwd_flops;
        o->vec_flops = (drop ? 7 : 5) * scores;
        o->bytes_moved = (N * in + N * w) * dt + 2 * scores * dt;
        o->act_rep = N * in * dt;
        o->act_scores = scores * dt + (drop ? scores * (1 + dt) : 0);
        if (g->opts.flash_attn) {
            /* FlashAttention (Dao et al., arXiv:2205.14135, sec. 3.1) tiles
               the scores through on-chip memory: the kernel reads q, k, v
               and writes the context; backward it recomputes the scores
               from the fp32 log-sum-exp per row it saved (b x heads x s),
               instead of Korthikanti's 5as^2b of scores, softmax and mask */
            o->bytes_moved = (N * in + N * w) * dt;
            o->act_scores = 4 * (double)o->heads * s * b;
        }
        break;
    }
    case MK_OPK_LM_HEAD:
        o->params = (o->tied ? 0 : (double)o->vocab * in) + (o->bias ? o->vocab : 0);
        o->fwd_flops = o->fwd_flops_causal = 2 * N * in * Vp;
        o->bwd_flops = 2 * o->fwd_flops;
        o->bytes_moved = (N * in + N * Vp + in * Vp) * dt;
        o->act_rep = N * in * dt;
        o->out_bytes = N * Vp * dt;
        break;
    case MK_OPK_LOSS:
        o->vec_flops = 5 * N * Vp;
        loss_passes(o, N * Vp, dt, g->opts.xent); /* no one kernel: its passes */
        o->act_rep = N * Vp * 4;
        o->out_bytes = N * 4;
        break;
    case MK_OPK_MOE: {
        double lf = g->opts.moe_imbalance > 1 ? g->opts.moe_imbalance : 1, cap = g->cfg.moe_capacity;
        moe_costs(o, N, dt, g->opts.ep > 1 ? (cap > 0 && cap < lf ? cap : lf) : 1);
        return;
    }
    default:
        vector_costs(o, N, dt, drop, g->opts.eager);
        break;
    }
    o->active_params = o->params;
}

/* FNV-1a over the name, reduced to a slot of a table of cap slots. */
static int name_home(const char *name, int cap)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) h = (h ^ *c) * 16777619u;
    return (int)(h & (uint32_t)(cap - 1));
}

/* The slot holding name, or the empty slot where it would go. */
static int name_slot(const mk_graph_t *g, const char *name)
{
    int s = name_home(name, g->name_cap);
    while (g->name_slot[s] && strcmp(g->ops[g->name_slot[s] - 1].name, name)) s = (s + 1) & (g->name_cap - 1);
    return s;
}

int mk_graph_find_op(const mk_graph_t *g, const char *name)
{
    return g->name_cap ? g->name_slot[name_slot(g, name)] - 1 : -1;
}

/* Room for one more name: the table stays under half full. */
static int name_reserve(mk_graph_t *g)
{
    if (2 * (g->n_ops + 1) < g->name_cap) return 0;
    int cap = g->name_cap ? 2 * g->name_cap : 64;
    int *slot = calloc((size_t)cap, sizeof *slot);
    if (!slot) return mk_error_set("out of memory");
    free(g->name_slot);
    g->name_slot = slot;
    g->name_cap = cap;
    for (int i = 0; i < g->n_ops; i++) g->name_slot[name_slot(g, g->ops[i].name)] = i + 1;
    return 0;
}

int mk_graph_add_op(mk_graph_t *g, const mk_op_t *op)
{
    mk_op_t o = *op;
    if (g->n_ops >= MK_MAX_GRAPH_OPS)
        return mk_error_set("the graph has more than %d ops (the most a model may have)", MK_MAX_GRAPH_OPS);
    if (!o.name[0]) snprintf(o.name, sizeof o.name, "op%d", g->n_ops);
    if (name_reserve(g) < 0) return -1;
    if (mk_graph_find_op(g, o.name) >= 0) return mk_error_set("op name '%s' is used twice", o.name);
    if (op_shape(g, &o) < 0) return -1;
    op_costs(g, &o);
    /* capacity doubles at each power of two, so n ops cost O(n) copying
       (a realloc per op made a 50,000-op model take a minute) */
    if ((g->n_ops & (g->n_ops - 1)) == 0) {
        mk_op_t *ops = realloc(g->ops, (g->n_ops ? 2 * (size_t)g->n_ops : 1) * sizeof *ops);
        if (!ops) return mk_error_set("out of memory");
        g->ops = ops;
    }
    g->ops[g->n_ops] = o;
    g->name_slot[name_slot(g, o.name)] = ++g->n_ops;
    return 0;
}
