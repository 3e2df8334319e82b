/* Mixture-of-experts kernels of the CPU backend (see merak/backend.h):
 * the router's softmax and top-k with its backward, and the row gathers
 * and scatters of token dispatch and combine (src/exec/gpt_moe.c); the
 * column gathers of multi-head latent attention (src/exec/gpt_mla.c). */
#include "config.h"
#include "merak/kernels_cpu.h"

#include <math.h>
#include <string.h>

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
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            int taken = 0;
            for (int i = 0; i < j; i++) taken |= ti[i] == e;
            if (!taken && (best < 0 || p[e] > p[best])) best = e;
        }
        ti[j] = best;
        sk += p[best];
    }
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

void mk_cpu_moe_rowdot(void *ctx, float *out, const float *a, const int *idx, const float *b, int n, int C)
{
    (void)ctx;
    for (int i = 0; i < n; i++) {
        const float *x = a + (size_t)idx[i] * C, *y = b + (size_t)i * C;
        double s = 0;
        for (int c = 0; c < C; c++) s += (double)x[c] * y[c];
        out[i] = (float)s;
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
