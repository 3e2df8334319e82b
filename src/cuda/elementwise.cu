// Elementwise kernels (GELU, add, acc, the column gathers of multi-head
// latent attention) and the vocabulary-parallel embedding.  Each thread computes one entry with the CPU's expression
// verbatim (src/cpu/kernels_cpu.c); accumulations over tokens run in token
// order in one thread per column, so they match the CPU loop exactly.
#include "config.h"
#include "common.cuh"

#define GELU_S 0.7978845608028654f /* sqrt(2/pi) */
#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)(n); \
         i += (size_t)gridDim.x * blockDim.x)

__global__ void k_gelu_fwd(float *out, const float *inp, int n)
{
    GRID_STRIDE(i, n) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_S * (x + 0.044715f * x * x * x)));
    }
}

__global__ void k_gelu_bwd(float *dinp, const float *inp, const float *dout, int n)
{
    GRID_STRIDE(i, n) {
        float x = inp[i], u = GELU_S * (x + 0.044715f * x * x * x);
        float th = tanhf(u), sech2 = 1.0f - th * th;
        float g = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_S * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += g * dout[i];
    }
}

__global__ void k_add(float *out, const float *a, const float *b, int n)
{
    GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ void k_acc(float *out, const float *a, int n)
{
    GRID_STRIDE(i, n) out[i] += a[i];
}

void mkc_gelu_fwd(void *ctx, float *out, const float *inp, int n)
{
    mkc_ctx_t *c = mkc(ctx);
    if (n <= 0) return;
    k_gelu_fwd<<<mkc_grid(n, 256), 256, 0, c->s>>>(out, inp, n);
    LAUNCHED(c);
}

void mkc_gelu_bwd(void *ctx, float *dinp, const float *inp, const float *dout, int n)
{
    mkc_ctx_t *c = mkc(ctx);
    if (n <= 0) return;
    k_gelu_bwd<<<mkc_grid(n, 256), 256, 0, c->s>>>(dinp, inp, dout, n);
    LAUNCHED(c);
}

void mkc_add(void *ctx, float *out, const float *a, const float *b, int n)
{
    mkc_ctx_t *c = mkc(ctx);
    if (n <= 0) return;
    k_add<<<mkc_grid(n, 256), 256, 0, c->s>>>(out, a, b, n);
    LAUNCHED(c);
}

void mkc_acc(void *ctx, float *out, const float *a, int n)
{
    mkc_ctx_t *c = mkc(ctx);
    if (n <= 0) return;
    k_acc<<<mkc_grid(n, 256), 256, 0, c->s>>>(out, a, n);
    LAUNCHED(c);
}

// out[n][c] = (owned token ? wte[tok-v0][c] : 0) (+ wpe[n mod T][c])
__global__ void k_embed_fwd(float *out, const int *tok, const float *wte, const float *wpe, int N,
                            int T, int C, int v0, int Vl)
{
    GRID_STRIDE(i, (size_t)N * C) {
        int n = (int)(i / C), c = (int)(i % C), r = tok[n] - v0;
        float o = r >= 0 && r < Vl ? wte[(size_t)r * C + c] : 0.0f;
        if (wpe) o += wpe[(size_t)(n % T) * C + c];
        out[i] = o;
    }
}

// dwte: one thread per column c, tokens in order (several tokens may share a row)
__global__ void k_embed_bwd_wte(float *dwte, const float *dout, const int *tok, int N, int C, int v0, int Vl)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int n = 0; n < N; n++) {
        int r = tok[n] - v0;
        if (r >= 0 && r < Vl) dwte[(size_t)r * C + c] += dout[(size_t)n * C + c];
    }
}

// dwpe: one thread per (t, c), the tokens at position t (n = b*T + t) in order
__global__ void k_embed_bwd_wpe(float *dwpe, const float *dout, int N, int T, int C)
{
    GRID_STRIDE(i, (size_t)T * C) {
        int t = (int)(i / C), c = (int)(i % C);
        float s = dwpe[i];
        for (int n = t; n < N; n += T) s += dout[(size_t)n * C + c];
        dwpe[i] = s;
    }
}

void mkc_embed_fwd(void *ctx, float *out, const int *tok, const float *wte, const float *wpe, int N, int T, int C,
                   int v0, int Vl)
{
    mkc_ctx_t *c = mkc(ctx);
    if (N <= 0) return;
    const int *dt = mkc_ints(c, tok, N);
    k_embed_fwd<<<mkc_grid((size_t)N * C, 256), 256, 0, c->s>>>(out, dt, wte, wpe, N, T, C, v0, Vl);
    LAUNCHED(c);
}

void mkc_embed_bwd(void *ctx, float *dwte, float *dwpe, const float *dout, const int *tok, int N, int T, int C,
                   int v0, int Vl)
{
    if (N <= 0) return;
    mkc_ctx_t *c = mkc(ctx);
    if (dwte) {
        const int *dt = mkc_ints(c, tok, N);
        k_embed_bwd_wte<<<(C + 127) / 128, 128, 0, c->s>>>(dwte, dout, dt, N, C, v0, Vl);
        LAUNCHED(c);
    }
    if (dwpe) {
        k_embed_bwd_wpe<<<mkc_grid((size_t)T * C, 256), 256, 0, c->s>>>(dwpe, dout, N, T, C);
        LAUNCHED(c);
    }
}

// dst[r][j] = src[r][idx[j]] where idx[j] >= 0: one thread per entry
__global__ void k_cols_gather(float *dst, const float *src, const int *idx, int N, int Ws, int Wd)
{
    GRID_STRIDE(i, (size_t)N * Wd) {
        size_t r = i / Wd;
        int j = (int)(i % Wd);
        if (idx[j] >= 0) dst[i] = src[r * Ws + idx[j]];
    }
}

// dsrc[r][idx[j]] += ddst[r][j]: one thread per row, j ascending as the CPU's
// loop (several j may name one column: k's RoPE part shared by the heads)
__global__ void k_cols_scatter(float *dsrc, const float *ddst, const int *idx, int N, int Ws, int Wd)
{
    GRID_STRIDE(r, N) {
        for (int j = 0; j < Wd; j++)
            if (idx[j] >= 0) dsrc[r * Ws + idx[j]] += ddst[r * Wd + j];
    }
}

void mkc_cols_gather(void *ctx, float *dst, const float *src, const int *idx, int N, int Ws, int Wd)
{
    mkc_ctx_t *c = mkc(ctx);
    if (N <= 0 || Wd <= 0) return;
    const int *di = mkc_ints(c, idx, Wd);
    k_cols_gather<<<mkc_grid((size_t)N * Wd, 256), 256, 0, c->s>>>(dst, src, di, N, Ws, Wd);
    LAUNCHED(c);
}

void mkc_cols_scatter(void *ctx, float *dsrc, const float *ddst, const int *idx, int N, int Ws, int Wd)
{
    mkc_ctx_t *c = mkc(ctx);
    if (N <= 0 || Wd <= 0) return;
    const int *di = mkc_ints(c, idx, Wd);
    k_cols_scatter<<<mkc_grid((size_t)N, 128), 128, 0, c->s>>>(dsrc, ddst, di, N, Ws, Wd);
    LAUNCHED(c);
}
