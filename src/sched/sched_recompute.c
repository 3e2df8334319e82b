/* The recompute policy, resolved into the checkpoint count every plain F
 * carries.  Stage-aware recomputation (Merak): in 1F1B stage i holds
 * S-1-i micro-batches besides the current one, so later stages have spare
 * memory and checkpoint less:
 *     r_i = 1 - (1 - r)(S-1)/(S-1-i)   (i < S-1, none where r_i <= 0),
 *     r_{S-1} = 0.
 * S=8, r=0.8: 0.8 0.767 0.72 0.65 0.533 0.3 none 0. */
#include "config.h"
#include "sched/sched_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int mk_recompute_parse(const char *s, mk_recompute_t *out)
{
    static const char *const names[] = {"none", "full", "selective"};
    memset(out, 0, sizeof *out);
    for (int k = 0; k < 3; k++)
        if (s && !strcmp(s, names[k])) {
            out->kind = (mk_recompute_kind_t)k;
            return 0;
        }
    if (s && !strcmp(s, "auto")) {
        out->kind = MK_RECOMPUTE_AUTO;
        return 0;
    }
    if (s && !strcmp(s, "selective-op")) {
        out->kind = MK_RECOMPUTE_SELECTIVE_OP;
        return 0;
    }
    if (s && !strncmp(s, "stage-aware:", 12)) {
        char *end;
        errno = 0;
        double r = strtod(s + 12, &end);
        if (errno || end == s + 12 || *end || !(r >= 0.0 && r <= 1.0))
            return mk_error_set("stage-aware:R needs a ratio R in [0, 1], got '%s'", s + 12);
        out->kind = MK_RECOMPUTE_STAGE_AWARE;
        out->ratio = r;
        return 0;
    }
    return mk_error_set("unknown recompute '%s' (none, full, selective, stage-aware:R, auto)",
                        s ? s : "");
}

double mk_recompute_stage_ratio(double r, int S, int i)
{
    if (i >= S - 1) return 0.0;
    double ri = 1.0 - (1.0 - r) * (S - 1) / (double)(S - 1 - i);
    return ri > 0.0 ? ri : 0.0;
}

int mk_recompute_count(int n, double ri)
{
    if (ri <= 0.0) return 0;
    int c = (int)floor(n * ri + 1e-9);
    return c < n ? c : n;
}

static int resolve_explicit(mk_sched_t *s, const int *ck)
{
    int nc = s->n_vstages;
    if (!ck)
        return mk_error_set(s->spec.recompute.kind == MK_RECOMPUTE_AUTO
                                ? "recompute auto must first be resolved to per-stage "
                                  "checkpoint counts by the planner (spec.ckpt is NULL)"
                                : "explicit recompute needs per-stage checkpoint counts "
                                  "(spec.ckpt is NULL)");
    for (int i = 0; i < nc; i++) {
        if (ck[i] < 0 || ck[i] > s->layers[i])
            return mk_error_set("checkpoint count %d of stage %d chunk %d is outside 0..%d",
                                ck[i], i / s->spec.vpp, i % s->spec.vpp, s->layers[i]);
        s->ckpt[i] = ck[i];
    }
    return 0;
}

int mk_sched_resolve_ckpt(mk_sched_t *s, const int *explicit_ckpt)
{
    const mk_recompute_t *rc = &s->spec.recompute;
    int p = s->spec.pp, v = s->spec.vpp;
    switch (rc->kind) {
    case MK_RECOMPUTE_NONE:
    case MK_RECOMPUTE_SELECTIVE: /* attention core only: the engines handle it */
        return 0;
    case MK_RECOMPUTE_FULL:
    case MK_RECOMPUTE_SELECTIVE_OP: /* every block checkpointed; what it keeps: the engines */
        memcpy(s->ckpt, s->layers, (size_t)s->n_vstages * sizeof *s->ckpt);
        return 0;
    case MK_RECOMPUTE_STAGE_AWARE:
        if (!(rc->ratio >= 0.0 && rc->ratio <= 1.0))
            return mk_error_set("stage-aware ratio %g is outside [0, 1]", rc->ratio);
        for (int i = 0; i < s->n_vstages; i++) {
            double ri = mk_recompute_stage_ratio(rc->ratio, p, i / v);
            s->ckpt[i] = s->layers_given ? mk_recompute_count(s->layers[i], ri) : ri > 0.0;
        }
        return 0;
    case MK_RECOMPUTE_AUTO:
    case MK_RECOMPUTE_EXPLICIT:
        return resolve_explicit(s, explicit_ckpt);
    }
    return mk_error_set("unknown recompute kind %d", (int)rc->kind);
}
