/* Context parallelism's kernels (see exec/cp.h): positions at the global
 * places of a rank's two chunks, and one K/V block's part of ring
 * attention, forward with the online-softmax (log-sum-exp) rule and
 * backward FlashAttention-style from the saved log-sum-exp.  Plain C on
 * host memory (the CPU backend; exec_cp.c refuses others). */
#include "config.h"
#include "exec/cp.h"
#include "merak/kernels_cpu.h"

#include <math.h>
#include <string.h>

/* Each of a sequence's two chunks is c = T/2 consecutive global positions:
 * chunk 0 starts at mk_cp_pos(.., 0), chunk 1 at mk_cp_pos(.., c). */
void mk_cp_pos_fwd(const mk_gpt_t *g, float *out, const float *wpe, int B)
{
    int c = g->T / 2;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < 2; h++)
            g->be->acc(g->be->ctx, out + ((size_t)b * g->T + h * c) * g->C,
                       wpe + (size_t)mk_cp_pos(g->cp, g->cp_rank, g->T, h * c) * g->C, c * g->C);
}

void mk_cp_pos_bwd(const mk_gpt_t *g, float *dwpe, const float *dout, int B)
{
    int c = g->T / 2;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < 2; h++)
            g->be->acc(g->be->ctx, dwpe + (size_t)mk_cp_pos(g->cp, g->cp_rank, g->T, h * c) * g->C,
                       dout + ((size_t)b * g->T + h * c) * g->C, c * g->C);
}

void mk_cp_rope(const mk_gpt_t *g, float *x, int nr, int ld, int sign)
{
    int c = g->T / 2;
    for (int r = 0; r < nr; r += c)
        mk_cpu_rope_at(x + (size_t)r * ld, c, mk_cp_pos(g->cp, g->cp_rank, g->T, r % g->T), g->nh + g->kv, g->hs,
                       ld, &g->rope, sign);
}

/* Row strides: the local q|k|v and a packed K/V block. */
static size_t ld_qkv(const mk_gpt_t *g) { return (size_t)(g->nh + 2 * g->kv) * g->hs; }
static size_t ld_kv(const mk_gpt_t *g) { return (size_t)2 * g->kv * g->hs; }

/* Keys of the block at global positions <= the query's: the block's rows
 * are its owner's two chunks, each contiguous, so a prefix of each. */
static int visible(const mk_gpt_t *g, int owner, int qpos, int chunk)
{
    int c = g->T / 2, k0 = mk_cp_pos(g->cp, owner, g->T, chunk * c);
    return qpos < k0 ? 0 : qpos - k0 + 1 < c ? qpos - k0 + 1 : c;
}

/* Query row q's score against key row u of the block (head offset ko). */
static float score(const mk_gpt_t *g, const float *q, const float *kv, int b, int u, int ko)
{
    const float *k = kv + ((size_t)b * g->T + u) * ld_kv(g) + ko;
    float dot = 0.0f;
    for (int i = 0; i < g->hs; i++) dot += q[i] * k[i];
    return dot / sqrtf((float)g->hs);
}

/* One query row: the block's max score, then (scores recomputed: no
 * per-row scratch) the rescaled running sum and output. */
static void fwd_row(const mk_gpt_t *g, const float *q, const float *kv, int owner, int qpos, int b, int ko,
                    int vo, float *m, float *l, float *o)
{
    int c = g->T / 2, n[2] = {visible(g, owner, qpos, 0), visible(g, owner, qpos, 1)};
    float mx = -INFINITY;
    for (int ch = 0; ch < 2; ch++)
        for (int u = ch * c; u < ch * c + n[ch]; u++) {
            float s = score(g, q, kv, b, u, ko);
            if (s > mx) mx = s;
        }
    if (n[0] + n[1] == 0) return;
    float mnew = *m > mx ? *m : mx, corr = *m == -INFINITY ? 0.0f : expf(*m - mnew);
    *l *= corr;
    for (int i = 0; i < g->hs; i++) o[i] *= corr;
    for (int ch = 0; ch < 2; ch++)
        for (int u = ch * c; u < ch * c + n[ch]; u++) {
            const float *v = kv + ((size_t)b * g->T + u) * ld_kv(g) + vo;
            float p = expf(score(g, q, kv, b, u, ko) - mnew);
            *l += p;
            for (int i = 0; i < g->hs; i++) o[i] += p * v[i];
        }
    *m = mnew;
}

void mk_cp_block_fwd(const mk_gpt_t *g, const float *qkv, const float *kv, int owner, int B, float *m, float *l,
                     float *acc)
{
    int T = g->T, hs = g->hs, nh = g->nh;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++) {
            int ko = KV_HEAD(h, nh, g->kv) * hs, vo = ko + g->kv * hs;
            for (int t = 0; t < T; t++) {
                size_t st = ((size_t)b * nh + h) * T + t, row = (size_t)b * T + t;
                fwd_row(g, qkv + row * ld_qkv(g) + h * hs, kv, owner, mk_cp_pos(g->cp, g->cp_rank, T, t), b, ko,
                        vo, m + st, l + st, acc + row * nh * hs + h * hs);
            }
        }
}

void mk_cp_fwd_finish(const mk_gpt_t *g, float *acc, float *lse, const float *m, const float *l, int B)
{
    int T = g->T, nh = g->nh, hs = g->hs;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++)
            for (int t = 0; t < T; t++) {
                size_t st = ((size_t)b * nh + h) * T + t;
                float *o = acc + ((size_t)b * T + t) * nh * hs + h * hs;
                for (int i = 0; i < hs; i++) o[i] /= l[st];
                lse[st] = m[st] + logf(l[st]);
            }
}

void mk_cp_bwd_rowdot(const mk_gpt_t *g, float *d, const float *dout, const float *out, int B)
{
    int T = g->T, nh = g->nh, hs = g->hs;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++)
            for (int t = 0; t < T; t++) {
                size_t r = ((size_t)b * T + t) * nh * hs + h * hs;
                float dot = 0.0f;
                for (int i = 0; i < hs; i++) dot += dout[r + i] * out[r + i];
                d[((size_t)b * nh + h) * T + t] = dot;
            }
}

/* One query row against the visible keys of the block: p = exp(s - lse),
 * dV += p dO, dS = p (dO.v - D), dQ += scale dS k, dK += scale dS q. */
static void bwd_row(const mk_gpt_t *g, const float *q, const float *dout, float lse, float d, const float *kv,
                    float *dq, float *dkv, int u0, int n, int ko, int vo, int b)
{
    int hs = g->hs;
    size_t lk = ld_kv(g);
    float scale = 1.0f / sqrtf((float)hs);
    for (int u = u0; u < u0 + n; u++) {
        const float *k = kv + ((size_t)b * g->T + u) * lk + ko, *v = kv + ((size_t)b * g->T + u) * lk + vo;
        float *dk = dkv + ((size_t)b * g->T + u) * lk + ko, *dv = dkv + ((size_t)b * g->T + u) * lk + vo;
        float dpv = 0.0f, p = expf(score(g, q, kv, b, u, ko) - lse);
        for (int i = 0; i < hs; i++) { dv[i] += p * dout[i]; dpv += dout[i] * v[i]; }
        float ds = p * (dpv - d) * scale;
        for (int i = 0; i < hs; i++) { dq[i] += ds * k[i]; dk[i] += ds * q[i]; }
    }
}

void mk_cp_block_bwd(const mk_gpt_t *g, const float *qkv, const float *kv, int owner, int B, const float *dout,
                     const float *lse, const float *d, float *dqkv, float *dkv)
{
    int T = g->T, c = T / 2, hs = g->hs, nh = g->nh;
    size_t lq = ld_qkv(g);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++) {
            int ko = KV_HEAD(h, nh, g->kv) * hs, vo = ko + g->kv * hs;
            for (int t = 0; t < T; t++) {
                size_t row = (size_t)b * T + t, st = ((size_t)b * nh + h) * T + t;
                int qpos = mk_cp_pos(g->cp, g->cp_rank, T, t);
                for (int ch = 0; ch < 2; ch++)
                    bwd_row(g, qkv + row * lq + h * hs, dout + row * nh * hs + h * hs, lse[st], d[st], kv,
                            dqkv + row * lq + h * hs, dkv, ch * c, visible(g, owner, qpos, ch), ko, vo, b);
            }
        }
}

void mk_cp_kv_pack(const mk_gpt_t *g, float *kv, const float *qkv, int B)
{
    size_t lq = ld_qkv(g), lk = ld_kv(g), q = (size_t)g->nh * g->hs;
    for (size_t r = 0; r < (size_t)B * g->T; r++) memcpy(kv + r * lk, qkv + r * lq + q, lk * sizeof(float));
}

void mk_cp_kv_add(const mk_gpt_t *g, float *qkv, const float *kv, int B)
{
    size_t lq = ld_qkv(g), lk = ld_kv(g), q = (size_t)g->nh * g->hs;
    for (size_t r = 0; r < (size_t)B * g->T; r++) mk_cpu_acc(NULL, qkv + r * lq + q, kv + r * lk, (int)lk);
}
