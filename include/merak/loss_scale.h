/* Loss scaling for 16-bit gradients, with Megatron-LM's rules
 * (megatron/core/optimizer/grad_scaler.py; its flags --loss-scale,
 * --initial-loss-scale, --min-loss-scale, --loss-scale-window,
 * --hysteresis).  The loss, and so every gradient, is multiplied by the
 * scale; the optimizer divides it out.  A step whose gradients hold an
 * inf or NaN is skipped (no update), and the dynamic scaler then counts
 * one overflow: after `hysteresis` of them (not reset by good steps; only
 * a growth resets it) the scale halves, never below min_scale; after
 * `window` good steps in a row it doubles (at most MK_MAX_LOSS_SCALE).
 * A constant scaler keeps its scale and still skips such steps. */
#ifndef MERAK_LOSS_SCALE_H
#define MERAK_LOSS_SCALE_H

#include "merak/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MK_LOSS_SCALE_NONE = 0, MK_LOSS_SCALE_CONSTANT, MK_LOSS_SCALE_DYNAMIC } mk_loss_scale_kind_t;

typedef struct mk_loss_scaler {
    mk_loss_scale_kind_t kind;
    double scale;             /* the loss's multiplier now (1 with NONE) */
    double min_scale;         /* dynamic: the back-off's floor */
    int window;               /* dynamic: good steps in a row before the scale doubles */
    int hysteresis;           /* dynamic: overflows before the scale halves */
    int growth_tracker;       /* good steps since the last overflow or growth */
    int hysteresis_tracker;   /* overflows left before a back-off */
} mk_loss_scaler_t;

/* A scaler of the kind given (initial: its first scale, > 0). */
MK_API void mk_loss_scaler_init(mk_loss_scaler_t *s, mk_loss_scale_kind_t kind, double initial, double min_scale,
                         int window, int hysteresis);
/* After a step's gradients are known: found_inf nonzero when any is inf or
 * NaN (on any rank: the caller reduces it).  Moves the scale; returns 1 when
 * the step must be skipped, else 0. */
MK_API int mk_loss_scaler_update(mk_loss_scaler_t *s, int found_inf);

#ifdef __cplusplus
}
#endif
#endif
