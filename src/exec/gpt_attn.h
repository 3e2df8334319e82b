/* The executor's attention-layer row helpers (gpt_attn.c): Qwen3's q/k
 * norms and the document segments (--reset-position-ids,
 * --reset-attention-mask), called by gpt_layers.c. */
#ifndef MERAK_EXEC_GPT_ATTN_H
#define MERAK_EXEC_GPT_ATTN_H

#include "merak/gpt.h"

/* RoPE (sign +1 forward, -1 backward) on rows [r0, r0+nr) of x, ld floats a row: its q and k
 * heads (mk_gpt_rope_rows), or its first nheads heads of hs (with --reset-position-ids per document). */
void mk_gpt_rope_rows(mk_gpt_t *g, const mk_gpt_run_t *run, float *x, int r0, int nr, int ld, int sign);
void mk_gpt_rope_heads(mk_gpt_t *g, const mk_gpt_run_t *run, float *x, int r0, int nr, int ld, int nheads, int hs,
                       int sign);
/* The attention core on whole sequences rows [r0, r0+nr): forward (dout
 * NULL: out the context, att the probabilities, or with g->fused_attn each
 * row's lse) or backward (out dq|dk|dv +=, datt scratch; fused: fo the
 * forward's context), one call per document with --reset-attention-mask. */
void mk_gpt_attn_rows(mk_gpt_t *g, mk_gpt_run_t *run, float *out, void *att, const float *qkv, void *datt,
                      const float *dout, const float *fo, int r0, int nr);
/* Floats a sequence's saved attention statistics take: nh T T
 * probabilities, or with g->fused_attn or cp > 1 nh T log-sum-exps. */
size_t mk_gpt_att_seq(const mk_gpt_t *g);
/* Whether they hold the materialised probabilities (kept 16-bit in a
 * 16-bit run), not log-sum-exps (fused; ring attention's, cp > 1: fp32). */
int mk_gpt_att_probs(const mk_gpt_t *g);
/* Whether the probabilities and their gradient's scratch are stored
 * 16-bit (a 16-bit run on a backend with attention16_fwd/bwd): made
 * rounded by the kernel, so never rounded again, and copied whole
 * when the internals are packed.  Else fp32 floats. */
int mk_gpt_att16(const mk_gpt_t *g, const mk_gpt_run_t *run);
/* Floats the statistics of seqs sequences take (two 16-bit values a
 * float where mk_gpt_att16), and the place of sequence seqs's in a block
 * of them starting at base. */
/* Materialised probabilities of seqs sequences kept 16-bit but made fp32
 * (a backend without attention16_fwd): rounded after the kernel that
 * also did their P.V, the one value the forward used unrounded. */
void mk_gpt_att_round(const mk_gpt_t *g, int l, const mk_gpt_run_t *run, void *att, size_t seqs);
size_t mk_gpt_att_floats(const mk_gpt_t *g, const mk_gpt_run_t *run, size_t seqs);
void *mk_gpt_att_at(const mk_gpt_t *g, const mk_gpt_run_t *run, void *base, size_t seqs);
/* Selective recompute (run->drop_core, Megatron-LM's --recompute-granularity
 * selective): whether layer l drops its probabilities between its forward
 * (which writes them to run->s_att) and its backward (a materialised core
 * without CP or MLA), and the floats it keeps for them (0 where dropped). */
int mk_gpt_att_dropped(const mk_gpt_t *g, int l, const mk_gpt_run_t *run);
size_t mk_gpt_att_kept(const mk_gpt_t *g, int l, const mk_gpt_run_t *run);
/* The core's backward on rows [r0, r0+nr) of layer l (mk_gpt_attn_rows's,
 * att the kept probabilities), where the layer dropped them first remaking
 * them from qkv as its forward made them.  0, or -1 out of memory. */
int mk_gpt_attn_bwd_rows(mk_gpt_t *g, mk_gpt_run_t *run, int l, float *dqkv, void *att, const float *qkv, void *datt,
                         const float *dout, const float *fo, int r0, int nr);
/* The embedding (out = wte[tok] (+ wpe)) and its gradients (dwte,
 * dwpe +=) on rows [0, N): with --reset-position-ids, per document. */
void mk_gpt_embed_fwd_rows(mk_gpt_t *g, const mk_gpt_run_t *run, float *out, const int *tokens, const float *wte,
                           const float *wpe, int N);
void mk_gpt_embed_bwd_rows(mk_gpt_t *g, const mk_gpt_run_t *run, float *dwte, float *dwpe, const float *dout,
                           const int *tokens, int N);

/* Qwen3's q/k norms on rows [r0, r0+nr) of the QKV GEMM's output x1 (in
 * place; qk keeps the rows, qkr each head's 1/rms), and back: dmid's q|k
 * columns to the norms' input, their weights' gradients (TP-summed) added. */
void mk_gpt_qk_norm_fwd(mk_gpt_t *g, int l, float *x1, float *qk, float *qkr, int r0, int nr);
int mk_gpt_qk_norm_bwd(mk_gpt_t *g, mk_gpt_run_t *run, int l, const float *qk, const float *qkr, float *dmid, int r0,
                       int nr);

#endif
