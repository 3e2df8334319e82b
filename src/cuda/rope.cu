// Rotary position embeddings, rotate-half form (Hugging Face Llama): one
// thread per (row n, pair i) turns the pair (i, i + hs/2) of each of the
// first nh heads.  The angle p * f_i (merak/rope.h's mk_rope_freq) and
// its cosine and sine are computed in double and rounded once, as the CPU
// kernel does (src/cpu/kernels_llama_cpu.c), so both backends rotate by
// the same float cos/sin.
#include "config.h"
#include "common.cuh"
#include "merak/rope.h"

// sign +1: forward rotation; -1: its inverse (the backward)
__global__ void k_rope(float *out, const float *inp, int N, int T, int nh, int hs, int ld, mk_rope_t r, float sign)
{
    int h2 = hs / 2;
    MKC_GRID_STRIDE(j, (size_t)N * h2) {
        int n = (int)(j / h2), i = (int)(j % h2);
        double a = (double)(n % T) * mk_rope_freq(&r, i, hs);
        float cs = (float)cos(a), sn = sign * (float)sin(a);
        const float *x = inp + (size_t)n * ld;
        float *o = out + (size_t)n * ld;
        for (int h = 0; h < nh; h++) {
            float x1 = x[h * hs + i], x2 = x[h * hs + i + h2];
            o[h * hs + i] = x1 * cs - x2 * sn;
            o[h * hs + i + h2] = x2 * cs + x1 * sn;
        }
    }
}

// the columns past the rotated heads, out of place only
__global__ void k_rope_rest(float *out, const float *inp, int N, int c0, int ld)
{
    int w = ld - c0;
    MKC_GRID_STRIDE(j, (size_t)N * w) {
        size_t n = j / w, c = c0 + j % w;
        out[n * ld + c] = inp[n * ld + c];
    }
}

static void rope(void *ctx, float *out, const float *inp, int N, int T, int nh, int hs, int ld, const mk_rope_t *r,
                 float sign)
{
    mkc_ctx_t *c = mkc(ctx);
    if (N <= 0 || hs < 2) return;
    k_rope<<<mkc_grid((size_t)N * (hs / 2), 256), 256, 0, c->s>>>(out, inp, N, T, nh, hs, ld, *r, sign);
    LAUNCHED(c);
    if (out == inp || ld == nh * hs) return;
    k_rope_rest<<<mkc_grid((size_t)N * (ld - nh * hs), 256), 256, 0, c->s>>>(out, inp, N, nh * hs, ld);
    LAUNCHED(c);
}

void mkc_rope_fwd(void *ctx, float *out, const float *inp, int N, int T, int nh, int hs, int ld, const mk_rope_t *r)
{
    rope(ctx, out, inp, N, T, nh, hs, ld, r, 1.0f);
}

void mkc_rope_bwd(void *ctx, float *dinp, const float *dout, int N, int T, int nh, int hs, int ld, const mk_rope_t *r)
{
    rope(ctx, dinp, dout, N, T, nh, hs, ld, r, -1.0f);
}
