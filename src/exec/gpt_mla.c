/* Multi-head latent attention (DeepSeek-V2/V3: arXiv:2405.04434 2.1;
 * Hugging Face's DeepseekV3Attention), one TP rank's H = nh heads:
 *   q  = q_b(RMSNorm(q_a(x)))                    (N, H (qk + rp)), per head [nope | pe]
 *   kv = kv_a_proj_with_mqa(x) = [c (kl) | k_pe (rp)], k_pe one part shared by the heads
 *   [k_nope | v] = kv_b(RMSNorm(c))              (N, H (qk + vd))
 *   the RoPE parts turned (interleaved pairs: transformers' apply_rotary_pos_emb_interleave
 *   reorders a part to [evens | odds] and rotates halves; the dot products of q and k are
 *   the same in that order, so it is the order kept here),
 *   the core on q = [q_nope | q_pe], k = [k_nope | k_pe], v, scaled 1/sqrt(qk + rp)
 *   (the backends' attention with hs = qk + rp: v padded with zeros to hs, the output's
 *   first vd of each head kept), then o_proj (row-parallel, gpt_layers.c).
 * The down-projections and latent norms are every TP rank's (replicated, as
 * Megatron-Core's): each rank's heads give part of the latents' gradient,
 * made whole by one TP all-reduce before the latent norms' backward, so
 * every rank computes the same down-projection gradients and TP rank 0
 * alone adds their input gradient (the layer sums it over TP after).
 * The pieces move between layouts by the backends' column gathers, one
 * index map each (g->mla_map). */
#include "config.h"
#include "exec/gpt_mla.h"
#include "exec/gpt_attn.h"

#include <stdlib.h>
#include <string.h>

/* transformers' DeepseekV3RMSNorm default (q_a_layernorm and kv_a_layernorm are built
   without the config's rms_norm_eps), also DeepSeek's own inference/model.py */
#define MLA_LATENT_EPS 1e-6f

/* tensor roles after the layer's first (gpt.c mla_tensors) */
enum { T_QA = 1, T_QN, T_QB, T_KVA, T_KVN, T_KVB };
/* the index maps, in g->mla_map's order */
enum { M_XQ, M_XPE, M_XKV, M_PEQ, M_PEK, M_O, N_MAPS };

static int w_x1(const mk_gpt_t *g) { return 3 * g->nh * g->hs; }
static int w_q(const mk_gpt_t *g) { return g->nh * g->hs; }
static int w_kv(const mk_gpt_t *g) { return g->nh * (g->qk + g->vd); }
static int w_pe(const mk_gpt_t *g) { return (g->nh + 1) * g->rp; }
static int w_o(const mk_gpt_t *g) { return g->nh * g->vd; }

static int map_len(const mk_gpt_t *g, int m)
{
    switch (m) {
    case M_XQ: case M_XPE: case M_XKV: return w_x1(g);
    case M_PEQ: case M_PEK: return w_pe(g);
    default: return w_o(g);
    }
}

static const int *map(const mk_gpt_t *g, int m)
{
    const int *p = g->mla_map;
    for (int i = 0; i < m; i++) p += map_len(g, i);
    return p;
}

/* a RoPE part's column j in transformers' [evens | odds] order */
static int pe_src(const mk_gpt_t *g, int j)
{
    int h = g->rp / 2;
    return j < h ? 2 * j : 2 * (j - h) + 1;
}

static void fill_maps(const mk_gpt_t *g, int *m)
{
    int H = g->nh, hq = g->hs, qk = g->qk, rp = g->rp, kvw = qk + g->vd;
    int *xq = m, *xpe = xq + w_x1(g), *xkv = xpe + w_x1(g), *peq = xkv + w_x1(g), *pek = peq + w_pe(g);
    int *o = pek + w_pe(g);
    for (int j = 0; j < 3 * w_x1(g) + 2 * w_pe(g); j++) m[j] = -1;
    for (int h = 0; h < H; h++) {
        int q = h * hq, k = (H + h) * hq, v = (2 * H + h) * hq;
        for (int j = 0; j < qk; j++) xq[q + j] = q + j, xkv[k + j] = h * kvw + j;
        for (int j = 0; j < rp; j++) xpe[q + qk + j] = h * rp + j, xpe[k + qk + j] = H * rp + j;
        for (int j = 0; j < g->vd; j++) xkv[v + j] = h * kvw + qk + j, o[h * g->vd + j] = h * hq + j;
        for (int j = 0; j < rp; j++) peq[h * rp + j] = h * hq + qk + pe_src(g, j);
    }
    for (int j = 0; j < rp; j++) pek[H * rp + j] = pe_src(g, j);
}

int mk_gpt_mla_init(mk_gpt_t *g)
{
    if (!g->be->cols_gather || !g->be->cols_scatter)
        return mk_error_set("multi-latent attention needs the backend's column gathers: the %s backend has none",
                            g->be->name);
    if (g->hs < g->vd)
        return mk_error_set("multi-latent attention with --v-head-dim %d over the q/k head (%d) is not supported by "
                            "run", g->vd, g->hs);
    size_t n = 0;
    for (int i = 0; i < N_MAPS; i++) n += (size_t)map_len(g, i);
    if (!(g->mla_map = malloc(n * sizeof(int)))) return mk_error_set("out of memory");
    fill_maps(g, g->mla_map);
    return 0;
}

/* The saved pieces of rows [0, N), in mx: the latents before and after
 * their norms (with 1/rms), k's RoPE part, the up-projections, the RoPE
 * parts turned, the core's hs-wide output. */
typedef struct { float *dq, *qn, *rq, *c, *cn, *rc, *kpe, *qb, *kvb, *pe, *o; } mla_parts_t;

static mla_parts_t parts(const mk_gpt_t *g, float *mx, size_t N)
{
    mla_parts_t m;
    m.dq = mx, m.qn = m.dq + N * g->ql, m.rq = m.qn + N * g->ql, m.c = m.rq + N, m.cn = m.c + N * g->kl;
    m.rc = m.cn + N * g->kl, m.kpe = m.rc + N, m.qb = m.kpe + N * g->rp, m.kvb = m.qb + N * w_q(g);
    m.pe = m.kvb + N * w_kv(g), m.o = m.pe + N * w_pe(g);
    return m;
}

size_t mk_gpt_mla_row(const mk_gpt_t *g)
{
    return 2 * (size_t)g->ql + 2 * (size_t)g->kl + 2 + g->rp + w_q(g) + w_kv(g) + w_pe(g) + w_q(g);
}

/* the backward's: d of the core's output, of q, of [k_nope | v], of the
 * RoPE parts; the latents' (q, c, k_pe: one all-reduce) and the norms' inputs' */
typedef struct { float *o, *qb, *kvb, *pe, *z, *dq, *dc; } mla_grads_t;

static mla_grads_t grads(const mk_gpt_t *g, float *s, size_t N)
{
    mla_grads_t d;
    d.o = s, d.qb = d.o + N * w_q(g), d.kvb = d.qb + N * w_q(g), d.pe = d.kvb + N * w_kv(g);
    d.z = d.pe + N * w_pe(g), d.dq = d.z + N * (g->ql + g->kl + g->rp), d.dc = d.dq + N * g->ql;
    return d;
}

size_t mk_gpt_mla_scratch_row(const mk_gpt_t *g)
{
    return 2 * (size_t)w_q(g) + w_kv(g) + w_pe(g) + 2 * ((size_t)g->ql + g->kl) + g->rp;
}

static const float *W(const mk_gpt_t *g, int l, int role) { return mk_gpt_param(g, g->first[l] + role); }
static float *dW(const mk_gpt_t *g, int l, int role) { return mk_gpt_grad(g, g->first[l] + role); }

static void gather(const mk_gpt_t *g, int m, float *dst, const float *src, int ws, int nr)
{
    g->be->cols_gather(g->be->ctx, dst, src, map(g, m), nr, ws, map_len(g, m));
}

static void scatter(const mk_gpt_t *g, int m, float *dsrc, const float *ddst, int ws, int nr)
{
    g->be->cols_scatter(g->be->ctx, dsrc, ddst, map(g, m), nr, ws, map_len(g, m));
}

/* the latents and the up-projections of rows [r0, r0+nr), each rounded
 * where made in a 16-bit run (mk_gpt_round_kept: kept 16-bit) */
static void latents_fwd(mk_gpt_t *g, const mk_gpt_run_t *run, int l, const float *ln, mla_parts_t *m, size_t r0,
                        int nr)
{
    const mk_backend_t *be = g->be;
    int C = g->C, ql = g->ql, kl = g->kl, rp = g->rp;
    const float *x = ln + r0 * C;
    size_t n = (size_t)nr;
    be->linear_fwd(be->ctx, m->dq + r0 * ql, x, W(g, l, T_QA), NULL, nr, C, ql);
    mk_gpt_round_kept(g, l, run, m->dq + r0 * ql, n * ql);
    be->rmsnorm_fwd(be->ctx, m->qn + r0 * ql, m->rq + r0, m->dq + r0 * ql, W(g, l, T_QN), MLA_LATENT_EPS, nr, ql);
    mk_gpt_round_kept(g, l, run, m->qn + r0 * ql, n * ql);
    be->linear_fwd(be->ctx, m->qb + r0 * w_q(g), m->qn + r0 * ql, W(g, l, T_QB), NULL, nr, ql, w_q(g));
    mk_gpt_round_kept(g, l, run, m->qb + r0 * w_q(g), n * w_q(g));
    /* kv_a's rows: the latent's kl, then k_pe's rp: two GEMMs, each output contiguous */
    be->linear_fwd(be->ctx, m->c + r0 * kl, x, W(g, l, T_KVA), NULL, nr, C, kl);
    mk_gpt_round_kept(g, l, run, m->c + r0 * kl, n * kl);
    be->linear_fwd(be->ctx, m->kpe + r0 * rp, x, W(g, l, T_KVA) + (size_t)kl * C, NULL, nr, C, rp);
    mk_gpt_round_kept(g, l, run, m->kpe + r0 * rp, n * rp);
    be->rmsnorm_fwd(be->ctx, m->cn + r0 * kl, m->rc + r0, m->c + r0 * kl, W(g, l, T_KVN), MLA_LATENT_EPS, nr, kl);
    mk_gpt_round_kept(g, l, run, m->cn + r0 * kl, n * kl);
    be->linear_fwd(be->ctx, m->kvb + r0 * w_kv(g), m->cn + r0 * kl, W(g, l, T_KVB), NULL, nr, kl, w_kv(g));
    mk_gpt_round_kept(g, l, run, m->kvb + r0 * w_kv(g), n * w_kv(g));
}

int mk_gpt_mla_runs(const mk_gpt_t *g, const mk_gpt_run_t *run, mk_gpt_run16_t *s)
{
    size_t N = (size_t)run->B * g->T;
    s[0] = (mk_gpt_run16_t){2 * N * g->ql, 1}; /* dq, qn */
    s[1] = (mk_gpt_run16_t){N, 0};              /* rq */
    s[2] = (mk_gpt_run16_t){2 * N * g->kl, 1}; /* c, cn */
    s[3] = (mk_gpt_run16_t){N, 0};              /* rc */
    s[4] = (mk_gpt_run16_t){N * ((size_t)g->rp + 2 * w_q(g) + w_kv(g) + w_pe(g)), 1}; /* kpe, qb, kvb, pe, o */
    return 5;
}

void mk_gpt_mla_fwd(mk_gpt_t *g, const mk_gpt_run_t *run, int l, const float *ln, float *x1, void *att, float *x3,
                    float *mx, int r0, int nr)
{
    const mk_backend_t *be = g->be;
    size_t N = (size_t)run->B * g->T, r = (size_t)r0;
    mla_parts_t m = parts(g, mx, N);
    latents_fwd(g, run, l, ln, &m, r, nr);
    float *pe = m.pe + r * w_pe(g), *x = x1 + r * w_x1(g);
    gather(g, M_PEQ, pe, m.qb + r * w_q(g), w_q(g), nr);
    gather(g, M_PEK, pe, m.kpe + r * g->rp, g->rp, nr);
    mk_gpt_rope_heads(g, run, m.pe, r0, nr, w_pe(g), g->nh + 1, g->rp, 1);
    mk_gpt_round_kept(g, l, run, pe, (size_t)nr * w_pe(g)); /* x1 gathers rounded values only: exact */
    be->zero(be->ctx, x, (size_t)nr * w_x1(g) * sizeof(float)); /* v's padding stays 0 */
    gather(g, M_XQ, x, m.qb + r * w_q(g), w_q(g), nr);
    gather(g, M_XPE, x, pe, w_pe(g), nr);
    gather(g, M_XKV, x, m.kvb + r * w_kv(g), w_kv(g), nr);
    mk_gpt_attn_rows(g, (mk_gpt_run_t *)run, m.o, att, x1, NULL, NULL, NULL, r0, nr);
    /* the probabilities after their P.V, as a dense attention's; x3 gathers the rounded output */
    mk_gpt_att_round(g, l, run, att, (size_t)(nr / g->T));
    mk_gpt_round_kept(g, l, run, m.o + r * w_q(g), (size_t)nr * w_q(g));
    gather(g, M_O, x3 + r * w_o(g), m.o + r * w_q(g), w_q(g), nr);
}

/* x1's gradient (dmid's rows) -> those of the up-projections' outputs and
 * of the RoPE parts, turned back: on whole sequences, as RoPE's positions
 * are (the later pieces go by rows: mk_gpt_mla_bwd_in on the halves of
 * sub-pipelined TP). */
static void split_bwd(mk_gpt_t *g, mk_gpt_run_t *run, const float *dmid, mla_grads_t *d, size_t r, int nr)
{
    const mk_backend_t *be = g->be;
    float *qb = d->qb + r * w_q(g), *kvb = d->kvb + r * w_kv(g), *pe = d->pe + r * w_pe(g);
    const float *x = dmid + r * w_x1(g);
    be->zero(be->ctx, qb, (size_t)nr * w_q(g) * sizeof(float));
    be->zero(be->ctx, kvb, (size_t)nr * w_kv(g) * sizeof(float));
    be->zero(be->ctx, pe, (size_t)nr * w_pe(g) * sizeof(float));
    scatter(g, M_XQ, qb, x, w_q(g), nr);
    scatter(g, M_XPE, pe, x, w_pe(g), nr);
    scatter(g, M_XKV, kvb, x, w_kv(g), nr);
    mk_gpt_rope_heads(g, run, d->pe, (int)r, nr, w_pe(g), g->nh + 1, g->rp, -1);
}

void mk_gpt_mla_bwd_core(mk_gpt_t *g, mk_gpt_run_t *run, const float *dx3, float *dmid, const float *x1,
                         void *att, void *datt, float *mx, int r0, int nr)
{
    size_t N = (size_t)run->B * g->T, r = (size_t)r0;
    mla_grads_t d = grads(g, run->s_mla, N);
    mla_parts_t m = parts(g, mx, N);
    g->be->zero(g->be->ctx, d.o + r * w_q(g), (size_t)nr * w_q(g) * sizeof(float));
    scatter(g, M_O, d.o + r * w_q(g), dx3 + r * w_o(g), w_q(g), nr);
    mk_gpt_attn_rows(g, run, dmid, att, x1, datt, d.o, m.o, r0, nr);
    split_bwd(g, run, dmid, &d, r, nr);
}

int mk_gpt_mla_bwd_in(mk_gpt_t *g, mk_gpt_run_t *run, int l, const float *ln, const float *dmid, float *dln,
                      float *mx, int r0, int nr)
{
    const mk_backend_t *be = g->be;
    size_t N = (size_t)run->B * g->T, r = (size_t)r0;
    int C = g->C, ql = g->ql, kl = g->kl, rp = g->rp;
    mla_parts_t m = parts(g, mx, N);
    mla_grads_t d = grads(g, run->s_mla, N);
    /* z: this call's rows of the latents' gradients, [q (nr ql) | c (nr kl) | k_pe (nr rp)] */
    float *zq = d.z, *zc = zq + (size_t)nr * ql, *zpe = zc + (size_t)nr * kl;
    (void)dmid; /* taken apart by mk_gpt_mla_bwd_core */
    be->zero(be->ctx, d.z, (size_t)nr * (ql + kl + rp) * sizeof(float));
    scatter(g, M_PEQ, d.qb + r * w_q(g), d.pe + r * w_pe(g), w_q(g), nr);
    scatter(g, M_PEK, zpe, d.pe + r * w_pe(g), g->rp, nr);
    be->linear_bwd_in(be->ctx, zq, d.qb + r * w_q(g), W(g, l, T_QB), nr, ql, w_q(g));
    be->linear_bwd_w(be->ctx, dW(g, l, T_QB), NULL, d.qb + r * w_q(g), m.qn + r * ql, nr, ql, w_q(g));
    be->linear_bwd_in(be->ctx, zc, d.kvb + r * w_kv(g), W(g, l, T_KVB), nr, kl, w_kv(g));
    be->linear_bwd_w(be->ctx, dW(g, l, T_KVB), NULL, d.kvb + r * w_kv(g), m.cn + r * kl, nr, kl, w_kv(g));
    if (g->tp > 1 && run->allreduce(run->ctx, d.z, nr * (ql + kl + rp), 0) < 0) return -1;
    be->zero(be->ctx, d.dq, (size_t)nr * ql * sizeof(float));
    be->zero(be->ctx, d.dc, (size_t)nr * kl * sizeof(float));
    be->rmsnorm_bwd(be->ctx, d.dq, dW(g, l, T_QN), zq, m.dq + r * ql, W(g, l, T_QN), m.rq + r, nr, ql);
    be->rmsnorm_bwd(be->ctx, d.dc, dW(g, l, T_KVN), zc, m.c + r * kl, W(g, l, T_KVN), m.rc + r, nr, kl);
    const float *x = ln + r * C;
    float *dkva = dW(g, l, T_KVA);
    be->linear_bwd_w(be->ctx, dW(g, l, T_QA), NULL, d.dq, x, nr, C, ql);
    be->linear_bwd_w(be->ctx, dkva, NULL, d.dc, x, nr, C, kl);
    be->linear_bwd_w(be->ctx, dkva + (size_t)kl * C, NULL, zpe, x, nr, C, rp);
    if (g->tp_rank) return 0; /* the others' share of dln: 0 */
    float *dx = dln + r * C;
    be->linear_bwd_in(be->ctx, dx, d.dq, W(g, l, T_QA), nr, C, ql);
    be->linear_bwd_in(be->ctx, dx, d.dc, W(g, l, T_KVA), nr, C, kl);
    be->linear_bwd_in(be->ctx, dx, zpe, W(g, l, T_KVA) + (size_t)kl * C, nr, C, rp);
    return 0;
}
