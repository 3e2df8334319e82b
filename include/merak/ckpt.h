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

/* The dynamic loss scaler's state (merak/loss_scale.h), kept for an exact
 * resume: metadata "loss_scaler" = "SCALE GROWTH HYSTERESIS" (the scale in
 * %.17g, in [1, MK_MAX_LOSS_SCALE]; its good steps since the last change,
 * in [0, MK_MAX_LOSS_SCALE_WINDOW]; overflows left before a back-off, in
 * [0, MK_MAX_HYSTERESIS]).  Optional: 1 read, 0 absent (a checkpoint of a
 * run without one), -1 malformed with one line naming it. */
typedef struct { double scale; int growth, hysteresis; } mk_ckpt_scaler_t;
#define MK_CKPT_SCALER_KEY "loss_scaler"
int mk_ckpt_read_scaler(const mk_st_reader_t *r, const char *path, mk_ckpt_scaler_t *s);
void mk_ckpt_format_scaler(const mk_ckpt_scaler_t *s, char *buf, size_t n);

/* Steps skipped for inf/NaN gradients before the checkpoint's step:
 * metadata "skipped_steps", a decimal in [0, step], written where it is
 * not 0.  The lr schedule and Adam's step count only the updates (step -
 * skipped), as Megatron-LM's scheduler and optimizer do, so a resume needs
 * it.  Optional: absent is 0.  0 (*skipped set), or -1 with one line. */
#define MK_CKPT_SKIPPED_KEY "skipped_steps"
int mk_ckpt_read_skipped(const mk_st_reader_t *r, const char *path, uint64_t step, uint64_t *skipped);

#ifdef __cplusplus
}
#endif
#endif
