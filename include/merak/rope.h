/* Rotary position frequencies (Hugging Face's rotary embedding): pair i of
 * a head of hs dims turns by p * f_i at position p, f_i = theta^(-2i/hs),
 * and with Llama 3.1's scaling (rope_type "llama3": factor, low and high
 * frequency factors, the original context L; transformers'
 * _compute_llama3_parameters) a wavelength 2 pi / f_i above L/low is
 * f_i / factor, below L/high stays f_i, and between them is
 * (1 - s) f_i / factor + s f_i with s = (L / wavelength - low) / (high -
 * low).  In double, in one function every backend calls (the CUDA kernel
 * too), so the CPU and GPU turn by the same angles. */
#ifndef MERAK_ROPE_H
#define MERAK_ROPE_H

#include <math.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mk_rope {
    double theta;                 /* the base */
    double factor;                /* 0: no scaling */
    double low_freq, high_freq;   /* low_freq_factor, high_freq_factor */
    double orig;                  /* original_max_position_embeddings */
} mk_rope_t;

#ifdef __CUDACC__
#define MK_ROPE_FN __host__ __device__ static inline
#else
#define MK_ROPE_FN static inline
#endif

MK_ROPE_FN double mk_rope_freq(const mk_rope_t *r, int i, int hs)
{
    double f = pow(r->theta, -2.0 * i / hs);
    if (!(r->factor > 0)) return f;
    double wave = 2 * 3.14159265358979323846 / f;
    if (wave < r->orig / r->high_freq) return f;
    if (wave > r->orig / r->low_freq) return f / r->factor;
    double s = (r->orig / wave - r->low_freq) / (r->high_freq - r->low_freq);
    return (1 - s) * f / r->factor + s * f;
}

#ifdef __cplusplus
}
#endif
#endif
