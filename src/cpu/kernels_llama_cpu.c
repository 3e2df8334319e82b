/* CPU kernels of the Llama family (fp32): RMSNorm, rotary position
 * embeddings (rotate-half), SwiGLU; grouped-query attention is the GPT's
 * attention kernel with KV heads (kernels_cpu.c).  Hugging Face
 * LlamaForCausalLM conventions; shapes in merak/backend.h.  Each kernel has
 * a double-precision reference in tests/test_kernels.c. */
#include "config.h"
#include "merak/kernels_cpu.h"

#include <math.h>
#include <string.h>

void mk_cpu_rmsnorm_fwd(void *ctx, float *out, float *rstd, const float *inp, const float *w, float eps,
                        int N, int C)
{
    (void)ctx;
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float ss = 0.0f;
        for (int c = 0; c < C; c++) ss += x[c] * x[c];
        float s = 1.0f / sqrtf(ss / C + eps);
        float *o = out + (size_t)n * C;
        for (int c = 0; c < C; c++) o[c] = x[c] * s * w[c];
        rstd[n] = s;
    }
}

/* y_c = x_c s w_c, s = (mean x^2 + eps)^-1/2, ds/dx_k = -s^3 x_k / C:
 * dx_c = s (w_c dy_c - x_c s^2 mean_k(w_k dy_k x_k)), dw_c = sum_n dy_c x_c s. */
void mk_cpu_rmsnorm_bwd(void *ctx, float *dinp, float *dw, const float *dout, const float *inp,
                        const float *w, const float *rstd, int N, int C)
{
    (void)ctx;
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * C, *x = inp + (size_t)n * C;
        float *di = dinp + (size_t)n * C;
        float s = rstd[n], dot = 0.0f;
        for (int c = 0; c < C; c++) dot += w[c] * d[c] * x[c];
        dot = dot / C * s * s;
        for (int c = 0; c < C; c++) {
            dw[c] += d[c] * x[c] * s;
            di[c] += (w[c] * d[c] - x[c] * dot) * s;
        }
    }
}

/* One rotation for both directions: sign +1 forward, -1 inverse.  The
 * angle and its cosine/sine are computed in double and rounded once, so
 * every backend gets the same table (the CUDA kernel does the same). */
static void rope(float *out, const float *inp, int N, int T, int p0, int nh, int hs, int ld, const mk_rope_t *r,
                 int sign)
{
    int h2 = hs / 2;
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * ld;
        float *o = out + (size_t)n * ld;
        double p = p0 + n % T;
        for (int i = 0; i < h2; i++) {
            double a = p * mk_rope_freq(r, i, hs);
            float cs = (float)cos(a), sn = sign * (float)sin(a);
            for (int h = 0; h < nh; h++) {
                float x1 = x[h * hs + i], x2 = x[h * hs + i + h2];
                o[h * hs + i] = x1 * cs - x2 * sn;
                o[h * hs + i + h2] = x2 * cs + x1 * sn;
            }
        }
        if (o != x) memcpy(o + nh * hs, x + nh * hs, (size_t)(ld - nh * hs) * sizeof(float));
    }
}

void mk_cpu_rope_fwd(void *ctx, float *out, const float *inp, int N, int T, int nh, int hs, int ld,
                     const mk_rope_t *r)
{
    (void)ctx;
    rope(out, inp, N, T, 0, nh, hs, ld, r, 1);
}

void mk_cpu_rope_bwd(void *ctx, float *dinp, const float *dout, int N, int T, int nh, int hs, int ld,
                     const mk_rope_t *r)
{
    (void)ctx;
    rope(dinp, dout, N, T, 0, nh, hs, ld, r, -1);
}

void mk_cpu_rope_at(float *x, int N, int p0, int nh, int hs, int ld, const mk_rope_t *r, int sign)
{
    rope(x, x, N, N, p0, nh, hs, ld, r, sign);
}

void mk_cpu_swiglu_fwd(void *ctx, float *out, const float *gu, int N, int F)
{
    (void)ctx;
    for (int n = 0; n < N; n++) {
        const float *gate = gu + (size_t)n * 2 * F, *up = gate + F;
        float *o = out + (size_t)n * F;
        for (int i = 0; i < F; i++) {
            float g = gate[i];
            o[i] = g / (1.0f + expf(-g)) * up[i];
        }
    }
}

/* d silu(g)/dg = sig(g) (1 + g (1 - sig(g))) */
void mk_cpu_swiglu_bwd(void *ctx, float *dgu, const float *dout, const float *gu, int N, int F)
{
    (void)ctx;
    for (int n = 0; n < N; n++) {
        const float *gate = gu + (size_t)n * 2 * F, *up = gate + F, *d = dout + (size_t)n * F;
        float *dg = dgu + (size_t)n * 2 * F, *du = dg + F;
        for (int i = 0; i < F; i++) {
            float g = gate[i], sg = 1.0f / (1.0f + expf(-g));
            du[i] += g * sg * d[i];
            dg[i] += sg * (1.0f + g * (1.0f - sg)) * up[i] * d[i];
        }
    }
}
