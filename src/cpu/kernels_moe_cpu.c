/* Mixture-of-experts kernels of the CPU backend (see merak/backend.h):
 * the router's softmax and top-k with its backward, and the row gathers
 * and scatters of token dispatch and combine (src/exec/gpt_moe.c); the
 * column gathers of multi-head latent attention (src/exec/gpt_mla.c). */
#include "config.h"
#include "merak/kernels_cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The k largest of c[0..E) into ti, descending, ties the lower index. */
static void top_k(const float *c, int *ti, int E, int k)
{
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            int taken = 0;
            for (int i = 0; i < j; i++) taken |= ti[i] == e;
            if (!taken && (best < 0 || c[e] > c[best])) best = e;
        }
        ti[j] = best;
    }
}

/* Row n: softmax in place (max-subtracted, sum in double), then the k
 * largest by repeated strict-greater scans, so ties go to the lower index. */
static void route_row(float *p, int *ti, float *tw, int E, int k, int renorm)
{
    float mx = p[0];
    for (int e = 1; e < E; e++) if (p[e] > mx) mx = p[e];
    double s = 0;
    for (int e = 0; e < E; e++) s += (p[e] = expf(p[e] - mx));
    for (int e = 0; e < E; e++) p[e] = (float)(p[e] / s);
    double sk = 0;
    top_k(p, ti, E, k);
    for (int j = 0; j < k; j++) sk += p[ti[j]];
    for (int j = 0; j < k; j++) tw[j] = renorm ? (float)(p[ti[j]] / sk) : p[ti[j]];
}

void mk_cpu_moe_route(void *ctx, float *probs, int *topi, float *topw, int N, int E, int k, int renorm)
{
    (void)ctx;
    for (int n = 0; n < N; n++)
        route_row(probs + (size_t)n * E, topi + (size_t)n * k, topw + (size_t)n * k, E, k, renorm);
}

/* d probs = dpe + the top-k weights' gradient (renormalised: w_j = p_j / S,
 * S = sum of the k, so dp_i = (dw_i - sum_j dw_j w_j) / S), then the
 * softmax's backward dlogit_e = p_e (dp_e - sum_f p_f dp_f). */
void mk_cpu_moe_route_bwd(void *ctx, float *dlogits, const float *probs, const int *topi, const float *topw,
                          const float *dtopw, const float *dpe, int N, int E, int k, int renorm)
{
    (void)ctx;
    for (int n = 0; n < N; n++) {
        const float *p = probs + (size_t)n * E, *tw = topw + (size_t)n * k, *dw = dtopw + (size_t)n * k;
        const int *ti = topi + (size_t)n * k;
        float *dl = dlogits + (size_t)n * E;
        for (int e = 0; e < E; e++) dl[e] = dpe ? dpe[e] : 0.0f;
        double sk = 0, wdw = 0;
        for (int j = 0; j < k; j++) sk += p[ti[j]], wdw += (double)tw[j] * dw[j];
        for (int j = 0; j < k; j++) dl[ti[j]] += renorm ? (float)((dw[j] - wdw) / sk) : dw[j];
        double dot = 0;
        for (int e = 0; e < E; e++) dot += (double)p[e] * dl[e];
        for (int e = 0; e < E; e++) dl[e] = (float)(p[e] * (dl[e] - dot));
    }
}

void mk_cpu_moe_gather(void *ctx, float *dst, const float *src, const int *idx, const float *scale, int n, int C)
{
    (void)ctx;
    for (int i = 0; i < n; i++) {
        const float *s = src + (size_t)idx[i] * C;
        float *d = dst + (size_t)i * C, w = scale ? scale[i] : 1.0f;
        for (int c = 0; c < C; c++) d[c] = w * s[c];
    }
}

void mk_cpu_moe_scatter(void *ctx, float *dst, const float *src, const int *idx, const float *scale, int n, int C)
{
    (void)ctx;
    for (int i = 0; i < n; i++) {
        const float *s = src + (size_t)i * C;
        float *d = dst + (size_t)idx[i] * C, w = scale ? scale[i] : 1.0f;
        for (int c = 0; c < C; c++) d[c] += w * s[c];
    }
}

/* Group-limited choice (transformers' DeepseekV3TopkRouter.get_topk_indices):
 * each group's score the sum of its two largest c, the gtopk best groups
 * kept, the others' c set to 0.  gi, gs: scratch of `groups`. */
static void limit_groups(float *c, int E, int groups, int gtopk, int *gi, float *gs)
{
    int w = E / groups, two[2];
    for (int j = 0; j < groups; j++) {
        top_k(c + j * w, two, w, 2);
        gs[j] = c[j * w + two[0]] + c[j * w + two[1]];
    }
    top_k(gs, gi, groups, gtopk);
    for (int j = 0; j < groups; j++) {
        int kept = 0;
        for (int i = 0; i < gtopk; i++) kept |= gi[i] == j;
        for (int e = 0; !kept && e < w; e++) c[j * w + e] = 0.0f;
    }
}

void mk_cpu_moe_route_sig(void *ctx, float *scores, int *topi, float *topw, const float *bias, int N, int E, int k,
                          int groups, int gtopk, int renorm, float scale)
{
    (void)ctx;
    float *c = malloc(((size_t)E + groups) * sizeof *c);
    int *gi = malloc(((size_t)groups + 1) * sizeof *gi);
    for (int n = 0; n < N; n++) {
        float *s = scores + (size_t)n * E, *tw = topw + (size_t)n * k;
        int *ti = topi + (size_t)n * k;
        for (int e = 0; e < E; e++) s[e] = 1.0f / (1.0f + expf(-s[e])), c[e] = s[e] + (bias ? bias[e] : 0.0f);
        if (groups > 1) limit_groups(c, E, groups, gtopk, gi, c + E);
        top_k(c, ti, E, k);
        float sum = 0.0f;
        for (int j = 0; j < k; j++) sum += s[ti[j]];
        for (int j = 0; j < k; j++) tw[j] = (renorm ? s[ti[j]] / (sum + 1e-20f) : s[ti[j]]) * scale;
    }
    free(c);
    free(gi);
}

void mk_cpu_moe_route_sig_bwd(void *ctx, float *dlogits, const float *scores, const int *topi, const float *dtopw,
                              const float *dpe, int N, int E, int k, int T, int renorm, float scale)
{
    (void)ctx;
    for (int n = 0; n < N; n++) {
        const float *s = scores + (size_t)n * E, *dw = dtopw + (size_t)n * k;
        const int *ti = topi + (size_t)n * k;
        float *d = dlogits + (size_t)n * E;
        for (int e = 0; e < E; e++) d[e] = 0.0f;
        double sum = 1e-20, dot = 0;
        for (int j = 0; j < k; j++) sum += s[ti[j]], dot += (double)dw[j] * s[ti[j]];
        for (int j = 0; j < k; j++)
            d[ti[j]] += renorm ? (float)(scale * (dw[j] / sum - dot / (sum * sum))) : scale * dw[j];
        if (dpe) { /* through s' = s / sum_e s */
            const float *g = dpe + (size_t)(n / T) * E;
            double tot = 0, gs = 0;
            for (int e = 0; e < E; e++) tot += s[e], gs += (double)g[e] * s[e];
            for (int e = 0; e < E; e++) d[e] += (float)((g[e] - gs / tot) / tot);
        }
        for (int e = 0; e < E; e++) d[e] *= s[e] * (1.0f - s[e]);
    }
}

void mk_cpu_cols_gather(void *ctx, float *dst, const float *src, const int *idx, int N, int Ws, int Wd)
{
    (void)ctx;
    for (int r = 0; r < N; r++) {
        const float *s = src + (size_t)r * Ws;
        float *d = dst + (size_t)r * Wd;
        for (int j = 0; j < Wd; j++)
            if (idx[j] >= 0) d[j] = s[idx[j]];
    }
}

void mk_cpu_cols_scatter(void *ctx, float *dsrc, const float *ddst, const int *idx, int N, int Ws, int Wd)
{
    (void)ctx;
    for (int r = 0; r < N; r++) {
        float *s = dsrc + (size_t)r * Ws;
        const float *d = ddst + (size_t)r * Wd;
        for (int j = 0; j < Wd; j++)
            if (idx[j] >= 0) s[idx[j]] += d[j];
    }
}
