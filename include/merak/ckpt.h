/* Merak checkpoint metadata (the safetensors __metadata__ merak writes and
 * reads; format in README "Checkpoints").  No MPI here, so the fuzzing
 * harness checks a file's metadata with the code `merak run --load` uses. */
#ifndef MERAK_CKPT_H
#define MERAK_CKPT_H

#include <stdint.h>
#include "merak/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MK_CKPT_FORMAT "1"

/* The integer fields, each a decimal string in [0, its maximum]. */
enum { MK_CKPT_STEP, MK_CKPT_DATA_POS, MK_CKPT_DECAY, MK_CKPT_SEED, MK_CKPT_N_META };

/* The metadata key of integer field i. */
const char *mk_ckpt_meta_key(int i);

/* Check that r (opened from path) is a merak checkpoint of this format
 * version and read every integer field into v[] (digits only, no sign,
 * within range).  0, or -1 with one line naming the field and its range. */
int mk_ckpt_read_meta(const mk_st_reader_t *r, const char *path, uint64_t v[MK_CKPT_N_META]);

#ifdef __cplusplus
}
#endif
#endif
