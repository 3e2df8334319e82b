/* Multi-head latent attention in the executor (DeepSeek-V2/V3; gpt_mla.c),
 * called by gpt_layers.c for an MLA model's attention layers. */
#ifndef MERAK_EXEC_GPT_MLA_H
#define MERAK_EXEC_GPT_MLA_H

#include "merak/gpt.h"

#include <stddef.h>

/* g->mla_map for g's sizes (g->mla set); 0, or -1 (no column gathers in
 * the backend, out of memory). */
int mk_gpt_mla_init(mk_gpt_t *g);
/* Floats a token row adds to an attention layer's saved internals, and
 * what its backward's scratch (run->s_mla) holds a row. */
size_t mk_gpt_mla_row(const mk_gpt_t *g);
size_t mk_gpt_mla_scratch_row(const mk_gpt_t *g);
/* The MLA internals' runs (mk_gpt_buf_runs: after the attention's own;
 * kept 16-bit or fp32, each rounded where made in a 16-bit run), their count. */
int mk_gpt_mla_runs(const mk_gpt_t *g, const mk_gpt_run_t *run, mk_gpt_run16_t *s);
/* Forward on whole sequences, rows [r0, r0+nr): the norm output ln -> the
 * latents, their norms and up-projections, RoPE, the heads' q|k|v in x1,
 * the attention core (att: these sequences' probabilities), x3 the
 * heads' v-wide outputs (o_proj's input); mx: the layer's MLA internals. */
void mk_gpt_mla_fwd(mk_gpt_t *g, const mk_gpt_run_t *run, int l, const float *ln, float *x1, void *att, float *x3,
                    float *mx, int r0, int nr);
/* Backward of the core on whole sequences: dx3 (o_proj's input gradient)
 * -> dmid (x1's gradient, +=), taken apart into the pieces' gradients
 * (run->s_mla); att, datt as mk_gpt_attn_rows takes them; mx the layer's MLA internals. */
void mk_gpt_mla_bwd_core(mk_gpt_t *g, mk_gpt_run_t *run, const float *dx3, float *dmid, const float *x1,
                         void *att, void *datt, float *mx, int r0, int nr);
/* Backward from the pieces' gradients (mk_gpt_mla_bwd_core's, on any
 * rows) to the norm output's gradient dln (rows zeroed by
 * the caller, summed over TP after), every MLA weight's gradient added
 * (the latents' made whole on every TP rank first).  0 or -1. */
int mk_gpt_mla_bwd_in(mk_gpt_t *g, mk_gpt_run_t *run, int l, const float *ln, const float *dmid, float *dln,
                      float *mx, int r0, int nr);

#endif
