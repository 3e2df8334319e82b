/* Loss scaling (src/exec/loss_scale.c) step by step against Megatron-LM's
 * DynamicGradScaler.update and ConstantGradScaler (grad_scaler.py): each
 * expected scale below is worked out by hand from those rules (overflow:
 * growth tracker to 0, hysteresis tracker down by one, halve at <= 0 with
 * the min floor; good step: growth tracker up, at the window reset both
 * trackers and double). */
#include "merak/limits.h"
#include "merak/loss_scale.h"
#include "check.h"

#include <math.h>

typedef struct { int inf; double scale; int skip; } step_t;

static void run(const char *what, mk_loss_scaler_t *s, const step_t *v, int n)
{
    for (int i = 0; i < n; i++) {
        int skip = mk_loss_scaler_update(s, v[i].inf);
        CHECK(skip == v[i].skip, "%s step %d: skipped %d, want %d", what, i, skip, v[i].skip);
        CHECK(s->scale == v[i].scale, "%s step %d: scale %g, want %g", what, i, s->scale, v[i].scale);
    }
}

int main(void)
{
    const double S = ldexp(1.0, 32); /* Megatron's --initial-loss-scale */
    mk_loss_scaler_t s;
    /* hysteresis 2, window 3, min 1 */
    mk_loss_scaler_init(&s, MK_LOSS_SCALE_DYNAMIC, S, 1.0, 3, 2);
    const step_t dyn[] = {
        {1, S, 1},         /* first overflow: hysteresis 2 -> 1, no back-off */
        {1, S / 2, 1},     /* 1 -> 0: halve */
        {1, S / 4, 1},     /* halve again (the tracker is not reset by a back-off) */
        {0, S / 4, 0}, {0, S / 4, 0},
        {0, S / 2, 0},     /* third good step in a row: double, trackers reset (hysteresis 2) */
        {1, S / 2, 1},     /* 2 -> 1: no back-off */
        {0, S / 2, 0}, {0, S / 2, 0},
        {1, S / 4, 1},     /* 1 -> 0 (good steps did not restore it), and the growth count restarts */
        {0, S / 4, 0}, {0, S / 4, 0},
        {0, S / 2, 0},     /* the window counted from the overflow */
        {0, S / 2, 0}, {0, S / 2, 0}, {0, S, 0},
    };
    run("dynamic", &s, dyn, (int)(sizeof dyn / sizeof *dyn));
    /* the floor: 4 halves to 2 = min and stays there */
    mk_loss_scaler_init(&s, MK_LOSS_SCALE_DYNAMIC, 4.0, 2.0, 1000, 1);
    const step_t floor[] = {{1, 2.0, 1}, {1, 2.0, 1}, {0, 2.0, 0}};
    run("floor", &s, floor, 3);
    /* the ceiling: no growth past MK_MAX_LOSS_SCALE */
    mk_loss_scaler_init(&s, MK_LOSS_SCALE_DYNAMIC, MK_MAX_LOSS_SCALE / 2, 1.0, 1, 2);
    const step_t ceil[] = {{0, MK_MAX_LOSS_SCALE, 0}, {0, MK_MAX_LOSS_SCALE, 0}};
    run("ceiling", &s, ceil, 2);
    /* constant (--loss-scale): never moves, still skips an overflowed step */
    mk_loss_scaler_init(&s, MK_LOSS_SCALE_CONSTANT, 1024.0, 1.0, 1, 1);
    const step_t cst[] = {{1, 1024.0, 1}, {0, 1024.0, 0}, {1, 1024.0, 1}};
    run("constant", &s, cst, 3);
    /* none: scale 1, nothing skipped (the run fails on a NaN loss instead) */
    mk_loss_scaler_init(&s, MK_LOSS_SCALE_NONE, 1024.0, 1.0, 1, 1);
    const step_t none[] = {{1, 1.0, 0}, {0, 1.0, 0}};
    run("none", &s, none, 2);
    CHECK_DONE();
}
