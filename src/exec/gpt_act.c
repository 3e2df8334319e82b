/* The activations' storage: the allocator that counts the peak, and a
 * 16-bit run's packing of what the layers keep for their backward
 * (gpt.h act16; src/exec/README.md "dtype").  The layouts are
 * gpt_layers.c's (mk_gpt_internals, mk_gpt_buf_runs). */
#include "config.h"
#include "merak/gpt.h"
#include "exec/gpt_moe.h"
#include "exec/gpt_attn.h"
#include "exec/gpt_mla.h"

#include <stdlib.h>

void mk_gpt_note_peak(mk_gpt_run_t *run, const mk_gpt_t *g)
{
    size_t s = g->be->scratch_bytes ? g->be->scratch_bytes(g->be->ctx) : 0;
    if (run->mem_cur + s > run->mem_peak) run->mem_peak = run->mem_cur + s;
}

float *mk_gpt_alloc(mk_gpt_run_t *run, const mk_gpt_t *g, size_t floats)
{
    float *p = g->be->alloc(g->be->ctx, floats * sizeof(float));
    if (!p) { mk_error_set("out of memory for activations (%zu floats)", floats); return NULL; }
    run->mem_cur += floats * sizeof(float);
    mk_gpt_note_peak(run, g);
    return p;
}

float *mk_gpt_alloc_raw(mk_gpt_run_t *run, const mk_gpt_t *g, size_t floats)
{
    if (!g->be->alloc_raw) return mk_gpt_alloc(run, g, floats);
    float *p = g->be->alloc_raw(g->be->ctx, floats * sizeof(float));
    if (!p) { mk_error_set("out of memory (%zu floats)", floats); return NULL; }
    run->mem_cur += floats * sizeof(float);
    mk_gpt_note_peak(run, g);
    return p;
}

void mk_gpt_release(mk_gpt_run_t *run, const mk_gpt_t *g, float *p, size_t floats)
{
    if (!p) return;
    mk_gpt_note_peak(run, g); /* what was held until now, with the scratch the kernels grew meanwhile */
    g->be->free(g->be->ctx, p);
    run->mem_cur -= floats * sizeof(float);
}

/* The scratch: s_a (N, widest row with the logits), s_b (N, widest
 * without), s_att (the attention's statistics), s_c (N, C), s_red; under
 * SP s_d; with q/k norms s_qk; MLA's pieces s_mla (gpt.h). */
int mk_gpt_run_init(mk_gpt_run_t *run, const mk_gpt_t *g, int B)
{
    size_t N = (size_t)B * g->T, wide = mk_gpt_scratch_row(g, 1);
    run->B = B;
    run->defer.h = -1;
    if (!(run->s_a = mk_gpt_alloc(run, g, N * wide)) || !(run->s_b = mk_gpt_alloc(run, g, N * mk_gpt_scratch_row(g, 0))) ||
        !(run->s_att = mk_gpt_alloc(run, g, mk_gpt_att_floats(g, run, (size_t)B))) ||
        !(run->s_c = mk_gpt_alloc(run, g, N * g->C)) || !(run->s_red = mk_gpt_alloc(run, g, 3 * N)))
        return -1;
    if (run->sp && g->tp > 1 && !(run->s_d = mk_gpt_alloc(run, g, N * g->C + 2 * (size_t)g->C))) return -1;
    if (g->cfg.qk_norm && !(run->s_qk = mk_gpt_alloc(run, g, (size_t)(g->nh + g->kv + 2) * g->hs))) return -1;
    if (g->mla && !(run->s_mla = mk_gpt_alloc(run, g, N * mk_gpt_mla_scratch_row(g)))) return -1;
    return 0;
}

void mk_gpt_run_free(mk_gpt_run_t *run, const mk_gpt_t *g)
{
    size_t N = (size_t)run->B * g->T, wide = mk_gpt_scratch_row(g, 1);
    mk_gpt_release(run, g, run->s_a, N * wide);
    mk_gpt_release(run, g, run->s_b, N * mk_gpt_scratch_row(g, 0));
    mk_gpt_release(run, g, run->s_att, mk_gpt_att_floats(g, run, (size_t)run->B));
    mk_gpt_release(run, g, run->s_c, N * g->C);
    mk_gpt_release(run, g, run->s_red, 3 * N);
    if (run->sp && g->tp > 1) mk_gpt_release(run, g, run->s_d, N * g->C + 2 * (size_t)g->C);
    if (g->cfg.qk_norm) mk_gpt_release(run, g, run->s_qk, (size_t)(g->nh + g->kv + 2) * g->hs);
    if (g->mla) mk_gpt_release(run, g, run->s_mla, N * mk_gpt_mla_scratch_row(g));
}


/* norm out (n,C), mean, rstd (n) with n = N (SP: this rank's N/tp rows,
 * gathered again where a linear needs them: Korthikanti et al. keep the
 * sequence-parallel shard), mid (N, mid), inner (N, inner), the attention
 * probabilities (B, nh, T, T) */
size_t mk_gpt_internals(const mk_gpt_t *g, int l, const mk_gpt_run_t *run)
{
    size_t B = run->B, N = B * g->T, n = mk_gpt_row_floats(g, run) / g->C, norm = n * g->C + 2 * n;
    if (mk_gpt_layer_is_moe(g, l)) return mk_gpt_moe_internals(g, run);
    switch (mk_gpt_layer_kind(g, l)) {
    case MK_GPT_ATTN: /* with q/k norms also their input rows and each head's 1/rms */
        return norm + N * (mk_gpt_mid_w(g, l) + mk_gpt_inner_w(g, l)) + mk_gpt_att_kept(g, l, run) +
               (g->cfg.qk_norm ? N * (mk_gpt_mid_w(g, l) + (size_t)(g->nh + g->kv)) : 0) +
               (g->mla ? N * mk_gpt_mla_row(g) : 0);
    case MK_GPT_MLP: return norm + N * (mk_gpt_mid_w(g, l) + mk_gpt_inner_w(g, l));
    case MK_GPT_HEAD: return norm + N * g->Vl;
    default: return 0;
    }
}

/* B_IN -> B_W: the linears' output gradients (N, C) and (N, mid), then
 * their inputs, the norm output's rows (loc_rows, C) and (N, inner). */
size_t mk_gpt_stash_floats(const mk_gpt_t *g, int l, const mk_gpt_run_t *run)
{
    size_t N = (size_t)run->B * g->T;
    if (mk_gpt_layer_is_moe(g, l)) return 0;  /* B_IN does all of it */
    switch (mk_gpt_layer_kind(g, l)) {
    case MK_GPT_ATTN: case MK_GPT_MLP: return N * (g->C + mk_gpt_mid_w(g, l) + mk_gpt_inner_w(g, l)) + mk_gpt_row_floats(g, run);
    case MK_GPT_HEAD: return N * g->Vl + mk_gpt_row_floats(g, run); /* the logits' gradient, the norm output */
    default: return 0;
    }
}

/* Floats n values take: fp32, or packed two 16-bit values a float. */
static size_t held(size_t n, int half) { return half ? (n + 1) / 2 : n; }

size_t mk_gpt_runs_floats(const mk_gpt_run16_t *s, int k, int packed)
{
    size_t f = 0;
    for (int i = 0; i < k; i++) f += held(s[i].n, packed && s[i].half);
    return f;
}

/* A layer's input: floats of its fp32 rows, or of their 16-bit copy. */
static size_t in_floats(const mk_gpt_t *g, const mk_gpt_run_t *run, int packed)
{
    return held(mk_gpt_row_floats(g, run), packed);
}

/* The internals kept 16-bit (run->act16): an attention's (q/k norms'
 * input rows, MLA's latents and pieces too: gpt_mla.c; the probabilities
 * where materialised, mk_gpt_att_probs) or MLP's, an MoE layer's
 * (gpt_moe.c: its norm output, the slots' experts' outputs, the shared
 * expert's, its expert side). */
int mk_gpt_internals16(const mk_gpt_t *g, int l, const mk_gpt_run_t *run)
{
    mk_gpt_kind_t k = mk_gpt_layer_kind(g, l);
    return run->act16 && (k == MK_GPT_ATTN || k == MK_GPT_MLP);
}

size_t mk_gpt_buf_floats(const mk_gpt_t *g, int l, const mk_gpt_run_t *run, int packed)
{
    if (!packed) return mk_gpt_internals(g, l, run);
    mk_gpt_run16_t s[MK_GPT_RUNS16];
    return mk_gpt_runs_floats(s, mk_gpt_buf_runs(g, l, run, s), 1);
}

void mk_gpt_act_clear_but_stash(mk_gpt_run_t *run, const mk_gpt_t *g, int l, mk_gpt_act_t *a)
{
    float **keep = mk_gpt_layer_is_moe(g, l) ? &a->wgs : &a->stash, *k = *keep;
    int bw16 = a->bw16;
    *keep = NULL;
    mk_gpt_act_clear(run, g, l, a);
    *keep = k, a->bw16 = bw16;
}

void mk_gpt_act_clear(mk_gpt_run_t *run, const mk_gpt_t *g, int l, mk_gpt_act_t *a)
{
    if (mk_gpt_layer_is_moe(g, l)) mk_gpt_moe_free_side(run, g, a);
    if (l > 0) mk_gpt_release(run, g, a->in, in_floats(g, run, a->in16));
    if (a->buf) mk_gpt_release(run, g, a->buf, mk_gpt_buf_floats(g, l, run, a->buf16));
    mk_gpt_release(run, g, a->stash, held(mk_gpt_stash_floats(g, l, run), a->bw16));
    a->in = NULL; /* the embedding's input is the token array, not ours */
    a->buf = a->stash = NULL;
    a->in16 = a->buf16 = a->bw16 = 0;
}

void mk_gpt_free_internals(mk_gpt_run_t *run, const mk_gpt_t *g, int l, mk_gpt_act_t *a)
{
    if (mk_gpt_layer_is_moe(g, l)) mk_gpt_moe_free_side(run, g, a);
    if (a->buf) mk_gpt_release(run, g, a->buf, mk_gpt_buf_floats(g, l, run, a->buf16));
    a->buf = NULL, a->buf16 = 0;
}

/* Megatron-LM keeps the residual stream in the run's type (no
 * --fp32-residual-connection): the layer boundaries are 16-bit tensors.
 * Rounding each output where it becomes final makes a saved input's
 * 16-bit copy exact, so the recompute and the backward read the very
 * values the forward read. */
void mk_gpt_round_out(const mk_gpt_t *g, const mk_gpt_run_t *run, float *x, size_t n)
{
    if (run->act16) g->be->round16(g->be->ctx, x, n, run->act16);
}

/* Internals kept 16-bit are rounded where made (col_rows, norm_rows). */
void mk_gpt_round_kept(const mk_gpt_t *g, int l, const mk_gpt_run_t *run, float *x, size_t n)
{
    if (mk_gpt_internals16(g, l, run)) g->be->round16(g->be->ctx, x, n, run->act16);
}

/* *p (floats fp32 or packed: pack) into a new buffer of the other form,
 * run by run (segs; NULL: one 16-bit run of n); the old one released. */
static int convert(mk_gpt_run_t *run, const mk_gpt_t *g, float **p, const mk_gpt_run16_t *segs, int k, size_t n,
                   int pack)
{
    mk_gpt_run16_t one = {n, 1};
    if (!segs) segs = &one, k = 1;
    size_t packed = 0;
    for (int i = 0; i < k; i++) packed += held(segs[i].n, segs[i].half);
    float *q = mk_gpt_alloc(run, g, pack ? packed : n), *src = *p, *dst = q;
    if (!q) return -1;
    const mk_backend_t *be = g->be;
    for (int i = 0; i < k; i++) {
        size_t m = segs[i].n, h = held(m, segs[i].half);
        if (!segs[i].half) be->copy(be->ctx, dst, src, m * sizeof(float));
        else if (pack) be->pack16(be->ctx, dst, src, m, run->act16);
        else be->unpack16(be->ctx, dst, src, m, run->act16);
        src += pack ? m : h, dst += pack ? h : m;
    }
    mk_gpt_release(run, g, *p, pack ? n : packed);
    *p = q;
    return 0;
}

/* A split backward's B_IN -> B_W gradients (a dense layer's or the head's
 * stash, an MoE layer's wgs) to 16-bit (pack) or back: B_W reads them only
 * as its weight GEMMs' operands, which a 16-bit run's GEMMs round to the
 * run's type anyway (the bias gradients are B_IN's: gpt_layers.c
 * bwd_block_bias), so they wait exactly, in Megatron-LM's 16 bits
 * (sim/memory_act.c mk_sim_chunk_wstash). */
static int bw_convert(mk_gpt_run_t *run, const mk_gpt_t *g, int l, mk_gpt_act_t *a, int pack)
{
    int moe = mk_gpt_layer_is_moe(g, l);
    float **p = moe ? &a->wgs : &a->stash;
    mk_gpt_run16_t s[2];
    if (!*p || a->bw16 == pack) return 0;
    size_t n = moe ? mk_gpt_moe_wgs_runs(g, run, a, s) : mk_gpt_stash_floats(g, l, run);
    if (convert(run, g, p, moe ? s : NULL, 2, n, pack) < 0) return -1;
    a->bw16 = pack;
    return 0;
}

int mk_gpt_act_pack(mk_gpt_run_t *run, const mk_gpt_t *g, int l, mk_gpt_act_t *a)
{
    mk_gpt_run16_t s[MK_GPT_RUNS16];
    if (!run->act16 || l == 0) return 0;
    if (bw_convert(run, g, l, a, 1) < 0) return -1;
    if (a->in && !a->in16 && convert(run, g, &a->in, NULL, 0, in_floats(g, run, 0), 1) < 0) return -1;
    if (a->in) a->in16 = 1;
    if (!a->buf || a->buf16 || !mk_gpt_internals16(g, l, run)) return 0;
    if (convert(run, g, &a->buf, s, mk_gpt_buf_runs(g, l, run, s), mk_gpt_internals(g, l, run), 1) < 0) return -1;
    a->buf16 = 1;
    /* an MoE layer's expert side goes with it (gpt_moe.c; a->stash is the B_IN -> B_W stash elsewhere) */
    if (mk_gpt_layer_is_moe(g, l) && a->stash &&
        convert(run, g, &a->stash, s, 2, mk_gpt_moe_side_runs(g, run, a, s), 1) < 0)
        return -1;
    return 0;
}

int mk_gpt_act_unpack(mk_gpt_run_t *run, const mk_gpt_t *g, int l, mk_gpt_act_t *a)
{
    mk_gpt_run16_t s[MK_GPT_RUNS16];
    if (bw_convert(run, g, l, a, 0) < 0) return -1;
    if (a->in16 && convert(run, g, &a->in, NULL, 0, in_floats(g, run, 0), 0) < 0) return -1;
    a->in16 = 0;
    if (!a->buf16) return 0;
    if (mk_gpt_layer_is_moe(g, l) && a->stash &&
        convert(run, g, &a->stash, s, 2, mk_gpt_moe_side_runs(g, run, a, s), 0) < 0)
        return -1;
    if (convert(run, g, &a->buf, s, mk_gpt_buf_runs(g, l, run, s), mk_gpt_internals(g, l, run), 0) < 0) return -1;
    a->buf16 = 0;
    return 0;
}

