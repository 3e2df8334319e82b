/* The MoE layer of the executor's GPT (src/exec/gpt_moe.c), called by
 * gpt_layers.c for the MLP layer of an MoE block (mk_gpt_layer_is_moe). */
#ifndef MERAK_EXEC_GPT_MOE_H
#define MERAK_EXEC_GPT_MOE_H
#include "merak/gpt.h"

/* Whether the executor trains cfg's MoE blocks: Llama blocks (SwiGLU
 * experts); be (NULL: not checked) has the MoE kernels.  0 or -1. */
int mk_gpt_moe_check(const mk_model_config_t *cfg, const mk_backend_t *be);
/* Floats of the saved internals of an MoE layer for run->B sequences,
 * and their runs (mk_gpt_buf_runs: kept 16-bit or fp32; the count). */
size_t mk_gpt_moe_internals(const mk_gpt_t *g, const mk_gpt_run_t *run);
int mk_gpt_moe_runs(const mk_gpt_t *g, const mk_gpt_run_t *run, mk_gpt_run16_t *s);
/* The internals from a->in (forward and recompute); the experts' outputs
 * added into out (NULL: a recompute); no aux loss added. */
int mk_gpt_moe_inner(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, float *out);
/* The saved top-k experts (N, k) and router probabilities (N, E) of a
 * forward's internals (tests). */
const int *mk_gpt_moe_routes(const mk_gpt_t *g, const mk_gpt_run_t *run, mk_gpt_act_t *a, const float **probs);
/* Forward: out (N, C) = in + the layer; run->aux += its aux loss's share. */
int mk_gpt_moe_forward(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, float *out);
/* Floats of MoE layer l's dense tensors (the norm, router, shared
 * expert: the layer's first), and the range of this rank's experts'. */
size_t mk_gpt_moe_dense_floats(const mk_gpt_t *g, int l);
void mk_gpt_moe_expert_range(const mk_gpt_t *g, int l, size_t *off, size_t *n);
/* The expert side's runs (a->stash: kept 16-bit or integers, packed with
 * a->buf by mk_gpt_act_pack) and its floats unpacked. */
size_t mk_gpt_moe_side_runs(const mk_gpt_t *g, const mk_gpt_run_t *run, const mk_gpt_act_t *a, mk_gpt_run16_t *s);
/* The runs of what a split backward's B_W reads (a->wgs, sized by its own
 * header: its integers, then values kept 16-bit in a 16-bit run), and its
 * floats unpacked. */
size_t mk_gpt_moe_wgs_runs(const mk_gpt_t *g, const mk_gpt_run_t *run, const mk_gpt_act_t *a, mk_gpt_run16_t *s);
/* Release a->wgs, and the expert side (a->stash; before a->buf, which sizes it). */
void mk_gpt_moe_free_side(mk_gpt_run_t *run, const mk_gpt_t *g, mk_gpt_act_t *a);
/* Every gradient of the layer (input and weights): din (N, C) = dout + . */
/* mode: MK_BWD_FULL everything; MK_BWD_IN all but the expert, shared-expert and router weight
   gradients, whose GEMMs' output gradients it keeps (a->wgs); MK_BWD_W those from a->wgs. */
int mk_gpt_moe_backward(mk_gpt_t *g, mk_gpt_run_t *run, int l, mk_gpt_act_t *a, const float *dout, float *din,
                        mk_bwd_mode_t mode);
/* DeepSeek-V3's score biases after a step: each of g->moe_bias moves by
 * 1e-3 towards the mean of g->moe_load (its layer's tokens per expert over
 * the step, summed over DP by the caller), which is then cleared; the
 * caller writes them to their masters. */
void mk_gpt_moe_bias_step(mk_gpt_t *g);
/* The tensor of layer l's score biases (e_score_correction_bias), where
 * this rank holds them; else -1. */
int mk_gpt_moe_bias_tensor(const mk_gpt_t *g, int l);

#endif
