/* Private to the token-data readers (data.c, data_megatron.c). */
#ifndef MERAK_DATA_INTERNAL_H
#define MERAK_DATA_INTERNAL_H

#include "merak/data.h"

struct mk_data {
    uint32_t *ids;      /* every token, in file order */
    size_t n, n_train;
    int seq;
    const char *format;
};

/* Megatron-LM's indexed dataset PREFIX.idx + PREFIX.bin into d (ids,
 * n, format): 0, or -1 naming the file and what is wrong. */
int mk_data_megatron(struct mk_data *d, const char *prefix);

#endif
