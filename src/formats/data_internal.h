/* Private to the token-data readers (data.c, data_megatron.c). */
#ifndef MERAK_DATA_INTERNAL_H
#define MERAK_DATA_INTERNAL_H

#include "merak/data.h"

/* Megatron-LM's blending of datasets (data_blend.c): the dataset global
 * sample s comes from and which of its samples (*sample), for n weights. */
typedef struct mk_blend mk_blend_t;
mk_blend_t *mk_blend_new(const double *weights, int n);
void mk_blend_free(mk_blend_t *b);
int mk_blend_sample(mk_blend_t *b, int64_t s, int64_t *sample);

#define MK_DATA_MAX_PARTS 256 /* datasets of one blend (Megatron's index is int16) */

struct mk_data {
    uint32_t *ids;      /* every token, in file order */
    size_t n, n_train;
    int seq;
    const char *format;
    size_t *doc, ndoc;     /* a Megatron dataset's documents: the token offset each starts at, ascending */
    struct mk_data **part; /* a blend (--data-path W1 P1 W2 P2 ...): its datasets, no ids of its own */
    int nparts;
    mk_blend_t *blend;
};

/* Megatron-LM's indexed dataset PREFIX.idx + PREFIX.bin into d (ids,
 * n, format): 0, or -1 naming the file and what is wrong. */
int mk_data_megatron(struct mk_data *d, const char *prefix);

#endif
