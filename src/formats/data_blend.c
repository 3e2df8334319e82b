/* Megatron-LM's blend of datasets (--data-path W1 P1 W2 P2 ...): which
 * dataset serves global sample s, and which of its samples, by the greedy
 * rule of megatron/core/datasets/helpers.cpp build_blending_indices: with
 * weights w (normalised to sum 1) and c_i samples taken from dataset i so
 * far, sample s goes to the first i of largest w_i max(s, 1) - c_i, which
 * serves its sample c_i.  The counts are kept every MK_BLEND_STRIDE
 * samples (n int64 each), so any sample is at most a stride of steps away;
 * where that memory cannot grow, the walk starts from the last kept. */
#include "formats/data_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MK_BLEND_STRIDE 4096

struct mk_blend {
    int n;
    double *w;
    int64_t *snap; /* counts before samples 0, STRIDE, 2 STRIDE, ...: nsnap x n */
    long nsnap, capsnap;
    int64_t *cur;  /* scratch counts */
};

mk_blend_t *mk_blend_new(const double *weights, int n)
{
    mk_blend_t *b = calloc(1, sizeof *b);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += weights[i];
    if (!b || n < 1 || !(sum > 0) || !isfinite(sum)) return free(b), NULL;
    b->n = n;
    b->w = malloc(n * sizeof *b->w);
    b->snap = calloc(n, sizeof *b->snap);
    b->cur = malloc(n * sizeof *b->cur);
    if (!b->w || !b->snap || !b->cur) return mk_blend_free(b), NULL;
    for (int i = 0; i < n; i++) b->w[i] = weights[i] / sum;
    b->nsnap = b->capsnap = 1;
    return b;
}

void mk_blend_free(mk_blend_t *b)
{
    if (!b) return;
    free(b->w), free(b->snap), free(b->cur), free(b);
}

/* The dataset sample s goes to, given the counts c before it. */
static int pick(const mk_blend_t *b, int64_t s, const int64_t *c)
{
    double x = s > 1 ? (double)s : 1.0, best = b->w[0] * x - (double)c[0];
    int at = 0;
    for (int i = 1; i < b->n; i++) {
        double e = b->w[i] * x - (double)c[i];
        if (e > best) best = e, at = i;
    }
    return at;
}

/* Counts c (before sample from) walked on to before sample to. */
static void walk(const mk_blend_t *b, int64_t from, int64_t to, int64_t *c)
{
    for (int64_t s = from; s < to; s++) c[pick(b, s, c)]++;
}

/* Keep the counts of every stride up to the one holding sample s (as far
 * as memory allows); returns the last kept stride at or below s's. */
static long keep_strides(mk_blend_t *b, int64_t s)
{
    long want = (long)(s / MK_BLEND_STRIDE);
    while (b->nsnap <= want) {
        if (b->nsnap == b->capsnap) {
            long cap = b->capsnap * 2;
            int64_t *p = realloc(b->snap, (size_t)cap * b->n * sizeof *p);
            if (!p) break; /* walk from the last kept */
            b->snap = p, b->capsnap = cap;
        }
        int64_t *next = b->snap + (size_t)b->nsnap * b->n;
        memcpy(next, next - b->n, b->n * sizeof *next);
        walk(b, (int64_t)(b->nsnap - 1) * MK_BLEND_STRIDE, (int64_t)b->nsnap * MK_BLEND_STRIDE, next);
        b->nsnap++;
    }
    return want < b->nsnap ? want : b->nsnap - 1;
}

int mk_blend_sample(mk_blend_t *b, int64_t s, int64_t *sample)
{
    long k = keep_strides(b, s);
    memcpy(b->cur, b->snap + (size_t)k * b->n, b->n * sizeof *b->cur);
    walk(b, (int64_t)k * MK_BLEND_STRIDE, s, b->cur);
    int i = pick(b, s, b->cur);
    *sample = b->cur[i];
    return i;
}
