/* The MoE layer's buffer layouts, row counts and tensor indices (private to
 * gpt_moe.c, the forward, and gpt_moe_bwd.c, the backward). */
#ifndef MERAK_EXEC_GPT_MOE_LAYOUT_H
#define MERAK_EXEC_GPT_MOE_LAYOUT_H

#include "exec/gpt_moe.h"

#define P(g, k) mk_gpt_param(g, k)
#define G(g, k) mk_gpt_grad(g, k)

/* Saved internals (a->buf), A = N*k assignment slots (the kept ones first,
 * by expert, so by EP peer too). */
typedef struct {
    float *ln, *rstd;       /* (N, C), (N) the norm */
    float *probs, *topw;    /* (N, E) router probabilities, (N, k) the top-k weights */
    int *topi;              /* (N, k) the top-k experts */
    int *slot_tok, *slot_src; /* (A) each kept slot's token, and n*k + j (its choice) */
    float *slot_w;          /* (A) its weight */
    int *off;               /* (E+1) expert e's slots [off[e], off[e+1]); off[E] kept */
    float *cnt;             /* (E) assignments routed to e before drops */
    int *rcnt;              /* (E) rows this rank's local expert j got from EP peer s: [s*El + j] */
    int *nrecv;             /* (1) their sum R, the expert side's rows */
    float *sgu, *sh;        /* shared expert: (N, 2Fs), (N, Fs) */
    float *sg;              /* (N) Qwen2-MoE's shared-expert gate, sigmoid(x . w) */
} moe_parts_t;

/* The expert side (a->stash): the R rows dispatched to this rank's El
 * experts, expert-major (expert j's rows [eoff[j], eoff[j+1]), from peer 0
 * first, each peer's in its slot order); perm[i] is row i's place in the
 * peer-major order the all-to-all delivers.  Each row's routing weight wr
 * travels with it and weighs its activation, h = act(gu) wr (Megatron-
 * Core's activation_func_with_probs), so the combine only adds the
 * experts' outputs and keeps none. */
typedef struct {
    int *perm, *eoff;       /* (R), (El+1) */
    float *wr;              /* (R) the rows' routing weights */
    float *xe, *gu, *h;     /* (R, C), (R, 2F), (R, F): h weighted */
} moe_side_t;

/* The layer on this TP rank's rows (sequence parallelism), and on this CP
 * rank's chunks (context parallelism: g->T its tokens of each sequence):
 * part of the micro-batch's tokens, its sums over the ranks holding them. */
static inline int sp_rows(const mk_gpt_t *g, const mk_gpt_run_t *run) { return run->sp && g->tp > 1; }
static inline int cps(const mk_gpt_t *g) { return g->cp > 1 ? g->cp : 1; }
static inline int sliced(const mk_gpt_t *g, const mk_gpt_run_t *run) { return sp_rows(g, run) || cps(g) > 1; }
/* The micro-batch's tokens, this rank's rows of them, and the first one's
 * row among the CP rank's (each sequence's local tokens g->T in a row). */
static inline int tokens(const mk_gpt_t *g, const mk_gpt_run_t *run) { return run->B * g->T * cps(g); }
static inline int rows(const mk_gpt_t *g, const mk_gpt_run_t *run) { return run->B * g->T / (sp_rows(g, run) ? g->tp : 1); }
static inline int row0(const mk_gpt_t *g, const mk_gpt_run_t *run) { return sp_rows(g, run) ? g->tp_rank * rows(g, run) : 0; }
static inline size_t slots(const mk_gpt_t *g, const mk_gpt_run_t *run) { return (size_t)rows(g, run) * g->topk; }
static inline int n_local(const mk_gpt_t *g) { return g->E / g->ep; }

/* The fp32 and integer parts first (the router's, the slots', the counts:
 * their offsets are the same packed or not, so the expert side's size is
 * read either way), then the runs a 16-bit run keeps 16-bit (mk_gpt_moe_runs):
 * the norm's output, the shared expert's gate|up and activation; last
 * Qwen2-MoE's gate values (fp32). */
static inline size_t meta_floats(const mk_gpt_t *g, const mk_gpt_run_t *run)
{
    size_t N = rows(g, run), A = slots(g, run), E = g->E, k = g->topk;
    return N * (1 + E + 2 * k) + 3 * A + 3 * E + 2;
}

static inline moe_parts_t split(const mk_gpt_t *g, const mk_gpt_run_t *run, float *b)
{
    size_t N = rows(g, run), A = slots(g, run), E = g->E, k = g->topk, C = g->C;
    moe_parts_t p;
    p.rstd = b; p.probs = p.rstd + N; p.topw = p.probs + N * E;
    p.topi = (int *)(p.topw + N * k); p.slot_tok = p.topi + N * k; p.slot_src = p.slot_tok + A;
    p.slot_w = (float *)(p.slot_src + A); p.off = (int *)(p.slot_w + A); p.cnt = (float *)(p.off + E + 1);
    p.rcnt = (int *)(p.cnt + E); p.nrecv = p.rcnt + E;
    p.ln = (float *)(p.nrecv + 1);
    p.sgu = p.ln + N * C; p.sh = p.sgu + N * 2 * (size_t)g->Fs; p.sg = p.sh + N * (size_t)g->Fs;
    return p;
}

static inline size_t side_size(const mk_gpt_t *g, size_t R)
{
    return 2 * R + n_local(g) + 1 + R * (g->C + 3 * (size_t)g->Fe);
}

static inline moe_side_t side_split(const mk_gpt_t *g, float *b, size_t R)
{
    moe_side_t q = {NULL, NULL, NULL, NULL, NULL, NULL};
    q.perm = (int *)b; q.eoff = q.perm + R; q.wr = (float *)(q.eoff + n_local(g) + 1);
    q.xe = q.wr + R; q.gu = q.xe + R * g->C; q.h = q.gu + R * 2 * g->Fe;
    return q;
}

/* Tensor indices of an MoE layer l (gpt.c moe_tensors' order). */
static inline int t_norm(const mk_gpt_t *g, int l) { return g->first[l]; }
static inline int t_router(const mk_gpt_t *g, int l) { return g->first[l] + 1; }
static inline int t_bias(const mk_gpt_t *g, int l) { return g->first[l] + 2; } /* with moe_router_bias */
static inline int t_shared(const mk_gpt_t *g, int l) { return g->first[l] + 2 + g->cfg.moe_router_bias; } /* gate|up, down */
static inline int t_sgate(const mk_gpt_t *g, int l) { return t_shared(g, l) + 3; } /* Qwen2-MoE's, after the shared expert */
static inline int t_w13(const mk_gpt_t *g, int l, int e)
{
    return t_shared(g, l) + (g->Fs ? 3 : 0) + (g->cfg.moe_shared_gate ? 1 : 0) + 3 * e;
}
static inline int t_w2(const mk_gpt_t *g, int l, int e) { return t_w13(g, l, e) + 2; }
static inline float topk_scale(const mk_gpt_t *g) { return g->cfg.moe_topk_scale > 0 ? (float)g->cfg.moe_topk_scale : 1.0f; }

/* The all-to-all of a direction (0 dispatch, 1 combine; gpt_moe.c), and the
 * sequence-wise auxiliary loss and its per-expert gradient (DeepSeek-V3's). */
int mk_gpt_moe_exchange(const mk_gpt_t *g, mk_gpt_run_t *run, const moe_parts_t *p, int dir, const float *send,
                        float *recv, int width);
int mk_gpt_moe_seq_aux(const mk_gpt_t *g, const mk_gpt_run_t *run, const moe_parts_t *p, float *dpe, double *aux);

#endif
