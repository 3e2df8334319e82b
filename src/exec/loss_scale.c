/* Loss scaling (merak/loss_scale.h): Megatron-LM's ConstantGradScaler and
 * DynamicGradScaler, step for step.  Growth 2x and back-off 0.5x are
 * Megatron's (its optimizer setup fixes them); the scale stays a double,
 * exact for the powers of two these factors make, so scaling the loss and
 * dividing the gradients by the same scale changes no fp32 value unless
 * something overflows. */
#include "merak/limits.h"
#include "merak/loss_scale.h"

void mk_loss_scaler_init(mk_loss_scaler_t *s, mk_loss_scale_kind_t kind, double initial, double min_scale,
                         int window, int hysteresis)
{
    s->kind = kind;
    s->scale = kind == MK_LOSS_SCALE_NONE ? 1.0 : initial;
    s->min_scale = min_scale;
    s->window = window > 0 ? window : 1;
    s->hysteresis = hysteresis > 0 ? hysteresis : 1;
    s->growth_tracker = 0;
    s->hysteresis_tracker = s->hysteresis;
}

int mk_loss_scaler_update(mk_loss_scaler_t *s, int found_inf)
{
    if (s->kind == MK_LOSS_SCALE_NONE) return 0;
    if (s->kind == MK_LOSS_SCALE_CONSTANT) return found_inf != 0;
    if (found_inf) {
        s->growth_tracker = 0;
        if (--s->hysteresis_tracker <= 0) { /* Megatron counts on below 0, to the same effect: stop at 0 */
            s->hysteresis_tracker = 0;
            s->scale *= 0.5;
            if (s->scale < s->min_scale) s->scale = s->min_scale;
        }
        return 1;
    }
    if (++s->growth_tracker == s->window) {
        s->growth_tracker = 0;
        s->hysteresis_tracker = s->hysteresis;
        /* Megatron has no ceiling; a scale past fp32's range would make every gradient inf */
        if (s->scale * 2.0 <= MK_MAX_LOSS_SCALE) s->scale *= 2.0;
    }
    return 0;
}
