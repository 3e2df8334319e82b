/* What-if clusters and the best plan of one search (merak/whatif.h). */
#include "merak/whatif.h"

#include <string.h>

const char *mk_cluster_knob_name(mk_cluster_knob_t k)
{
    static const char *const names[MK_KNOB_COUNT] = {"intra-node bandwidth", "inter-node bandwidth",
                                                     "device FLOP/s", "device memory", "GPU count"};
    return (unsigned)k < MK_KNOB_COUNT ? names[k] : "?";
}

/* A rate scaled where it is given (0 means "not given": stays 0). */
static void scale_rate(double *x, double f)
{
    if (*x > 0) *x *= f;
}

int mk_cluster_scale(mk_cluster_t *c, mk_cluster_knob_t k, double f)
{
    if (!(f > 0) || f > 1e6) return mk_error_set("a cluster knob's factor must be in (0, 1e6], got %g", f);
    mk_device_t *d = &c->dev;
    switch (k) {
    case MK_KNOB_INTRA_BW: c->intra.beta_Bps *= f; return 0;
    case MK_KNOB_INTER_BW: c->inter.beta_Bps *= f; return 0;
    case MK_KNOB_MEMORY: d->mem_bytes *= f; return 0;
    case MK_KNOB_GPUS:
        if (c->max_nodes > 0) c->max_nodes = (int)(c->max_nodes * f + 0.999999);
        if (c->max_nodes < 0) c->max_nodes = 1;
        return 0;
    case MK_KNOB_FLOPS:
        for (int i = 0; i < MK_DTYPE_COUNT; i++) scale_rate(&d->matmul_flops[i], f);
        scale_rate(&d->vector_flops, f);
        scale_rate(&d->vector_bwd_flops, f);
        scale_rate(&d->attention_flops, f);
        scale_rate(&d->attention_bwd_flops, f);
        scale_rate(&d->flash_attn_flops, f);
        scale_rate(&d->flash_attn_bwd_flops, f);
        return 0;
    default: return mk_error_set("unknown cluster knob %d", (int)k);
    }
}

int mk_planner_best(const mk_model_config_t *m, const mk_cluster_t *c, const mk_planner_opts_t *o,
                    mk_planner_entry_t *best)
{
    mk_planner_opts_t q = *o;
    q.top = 1; /* the bound prunes against the best alone: the same #1, sooner */
    q.progress = NULL;
    mk_planner_result_t r;
    int rc = mk_planner_search(m, c, &q, &r);
    if (rc < 0) {
        mk_planner_result_free(&r);
        return 0;
    }
    int found = r.n > 0;
    if (found) {
        *best = r.best[0];
        if (q.refine && mk_planner_refine(c, best, 4 * best->plan.pp) < 0) found = -1;
    } else {
        mk_error_set("no plan fits");
    }
    mk_planner_result_free(&r);
    return found;
}
