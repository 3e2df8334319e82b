/* Context parallelism by all-to-alls (--cp-comm-type a2a: Transformer
 * Engine's AttnFuncWithCPAndQKVOA2A, DeepSpeed-Ulysses).
 *
 * A CP rank holds its two chunks of every sequence (T rows of S = cp T,
 * cp.h) with all heads.  Before the attention one all-to-all turns that
 * into every row of the sequence for 1/cp of the heads: rank r's share is
 * query heads [r nh/cp, (r+1) nh/cp) and K/V heads [r kv/cp, (r+1) kv/cp),
 * so each query head still meets its own K/V head (group nh/kv kept).  The
 * rows are put in sequence order and the backend's fused causal attention
 * runs on S rows of those heads; one more all-to-all brings the output
 * back to the rank's rows and all heads.  The log-sum-exps stay in the
 * head split ((B, nh/cp, S) floats: as many as (B, nh, T)) for the
 * backward, which all-to-alls Q|K|V (again), the output and its gradient
 * to the head split, runs the fused backward and all-to-alls dQ|dK|dV back
 * (added to the layer's).  Traced A2A.cp.
 *
 * Cost (per attention pass, a rank): forward two all-to-alls of its own
 * Q|K|V and output, (cp-1)/cp of them leaving it; backward four (merak
 * sim counts two each way: the Q|K|V one and the output's). */
#include "config.h"
#include "exec/cp.h"
#include "exec/exec_internal.h"
#include "merak/trace.h"

#include <string.h>

enum { SEND = 0, RECV, QKV, OUT, DOUT, DQKV, NBUF };

/* Column segments of a row: q | k | v heads (qkv), or the output's heads. */
typedef struct { int n; size_t w[3]; } segs_t;

static segs_t qkv_segs(const mk_gpt_t *g)
{
    return (segs_t){3, {(size_t)g->nh * g->hs, (size_t)g->kv * g->hs, (size_t)g->kv * g->hs}};
}
static segs_t out_segs(const mk_gpt_t *g) { return (segs_t){1, {(size_t)g->nh * g->hs, 0, 0}}; }
static size_t full_w(const segs_t *s) { return s->w[0] + s->w[1] + s->w[2]; }

/* A row's share for rank r: block r of each of its segments (cp blocks a
 * segment), side by side: get copies it out of the row, put back in
 * (written, or added). */
static void share_get(const mk_exec_t *e, const segs_t *s, const float *full, float *part, int r)
{
    size_t off = 0, at = 0;
    for (int i = 0; i < s->n; i++) {
        size_t bw = s->w[i] / e->cp.n;
        memcpy(part + at, full + off + (size_t)r * bw, bw * sizeof *part);
        off += s->w[i], at += bw;
    }
}

static void share_put(const mk_exec_t *e, const segs_t *s, float *full, const float *part, int r, int add)
{
    size_t off = 0, at = 0;
    for (int i = 0; i < s->n; i++) {
        size_t bw = s->w[i] / e->cp.n;
        float *f = full + off + (size_t)r * bw;
        if (add) for (size_t k = 0; k < bw; k++) f[k] += part[at + k];
        else memcpy(f, part + at, bw * sizeof *f);
        off += s->w[i], at += bw;
    }
}

static int exchange(mk_exec_t *e, size_t per)
{
    mk_exec_cp_t *c = &e->cp;
    double t0 = mk_exec_now(e);
    MPI_Request r;
    MPI_Ialltoall(c->a2a[SEND], (int)per, MPI_FLOAT, c->a2a[RECV], (int)per, MPI_FLOAT, c->c, &r);
    int rc = mk_comm_wait_for(&e->comm, &r, "the context-parallel all-to-all", -1);
    mk_exec_trace_ev(e, MK_TRACE_CP, "A2A.cp", t0, e->trace.cur_mb, e->trace.cur_chunk, e->trace.cur_layer);
    return rc;
}

/* x (B, T, full) of this rank's rows -> y (B, S, full/cp) of every row, in
 * sequence order, for this rank's heads. */
static int to_heads(mk_exec_t *e, const segs_t *s, const float *x, float *y, int B)
{
    mk_exec_cp_t *c = &e->cp;
    int T = e->g->T, S = T * c->n;
    size_t W = full_w(s), w = W / c->n, per = (size_t)B * T * w;
    for (int r = 0; r < c->n; r++)
        for (size_t row = 0; row < (size_t)B * T; row++)
            share_get(e, s, x + row * W, c->a2a[SEND] + r * per + row * w, r);
    if (exchange(e, per) < 0) return -1;
    for (int r = 0; r < c->n; r++)
        for (int b = 0; b < B; b++)
            for (int j = 0; j < T; j++)
                memcpy(y + ((size_t)b * S + mk_cp_pos(c->n, r, T, j)) * w, c->a2a[RECV] + r * per + ((size_t)b * T + j) * w,
                       w * sizeof *y);
    return 0;
}

/* The inverse: y (B, S, full/cp) -> x (B, T, full), written or (add) added. */
static int from_heads(mk_exec_t *e, const segs_t *s, const float *y, float *x, int B, int add)
{
    mk_exec_cp_t *c = &e->cp;
    int T = e->g->T, S = T * c->n;
    size_t W = full_w(s), w = W / c->n, per = (size_t)B * T * w;
    for (int r = 0; r < c->n; r++)
        for (int b = 0; b < B; b++)
            for (int j = 0; j < T; j++)
                memcpy(c->a2a[SEND] + r * per + ((size_t)b * T + j) * w, y + ((size_t)b * S + mk_cp_pos(c->n, r, T, j)) * w,
                       w * sizeof *x);
    if (exchange(e, per) < 0) return -1;
    for (int r = 0; r < c->n; r++)
        for (size_t row = 0; row < (size_t)B * T; row++)
            share_put(e, s, x + row * W, c->a2a[RECV] + r * per + row * w, r, add);
    return 0;
}

static void a2a_fwd(void *ctx, float *out, float *lse, const float *qkv, int B)
{
    mk_exec_t *e = ctx;
    mk_exec_cp_t *c = &e->cp;
    const mk_gpt_t *g = e->g;
    segs_t sq = qkv_segs(g), so = out_segs(g);
    if (to_heads(e, &sq, qkv, c->a2a[QKV], B) < 0) return; /* a failure stands (comm.h) */
    g->be->attention_fused_fwd(g->be->ctx, c->a2a[OUT], lse, c->a2a[QKV], B, g->T * c->n, g->nh / c->n,
                               g->kv / c->n, g->hs, 0);
    from_heads(e, &so, c->a2a[OUT], out, B, 0);
}

static void a2a_bwd(void *ctx, float *dqkv, const float *dout, const float *qkv, const float *out,
                    const float *lse, int B)
{
    mk_exec_t *e = ctx;
    mk_exec_cp_t *c = &e->cp;
    const mk_gpt_t *g = e->g;
    segs_t sq = qkv_segs(g), so = out_segs(g);
    if (to_heads(e, &sq, qkv, c->a2a[QKV], B) < 0 || to_heads(e, &so, out, c->a2a[OUT], B) < 0 ||
        to_heads(e, &so, dout, c->a2a[DOUT], B) < 0)
        return;
    memset(c->a2a[DQKV], 0, (size_t)B * g->T * full_w(&sq) * sizeof(float));
    g->be->attention_fused_bwd(g->be->ctx, c->a2a[DQKV], c->a2a[DOUT], c->a2a[QKV], c->a2a[OUT], lse, B,
                               g->T * c->n, g->nh / c->n, g->kv / c->n, g->hs, 0);
    from_heads(e, &sq, c->a2a[DQKV], dqkv, B, 1);
}

static size_t buf_floats(const mk_exec_t *e)
{
    const mk_gpt_t *g = e->g;
    return (size_t)e->o->ctx->plan.mbs * g->T * (g->nh + 2 * g->kv) * g->hs;
}

int mk_exec_cp_a2a_init(mk_exec_t *e)
{
    mk_exec_cp_t *c = &e->cp;
    mk_gpt_t *g = e->g;
    if (!g->be->attention_fused_fwd || !g->be->attention_fused_bwd)
        return mk_error_set("--cp-comm-type a2a needs the backend's fused attention");
    if (g->nh % c->n || g->kv % c->n)
        return mk_error_set("--cp-comm-type a2a: a TP rank's %d query and %d K/V heads do not divide by cp %d",
                            g->nh, g->kv, c->n);
    for (int i = 0; i < NBUF; i++)
        if (!(c->a2a[i] = mk_gpt_alloc(&e->run, g, buf_floats(e)))) return -1;
    e->run.cp_attn_fwd = a2a_fwd, e->run.cp_attn_bwd = a2a_bwd;
    return 0;
}

void mk_exec_cp_a2a_free(mk_exec_t *e)
{
    for (int i = 0; i < NBUF; i++) mk_gpt_release(&e->run, e->g, e->cp.a2a[i], buf_floats(e));
    memset(e->cp.a2a, 0, sizeof e->cp.a2a);
}
