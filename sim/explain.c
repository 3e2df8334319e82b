/* The step breakdown (mk_sim_explain_t, issue 21): where one stage's step
 * goes, read off the timeline the run kept (sim_step.c accumulates the
 * classes, the comm waits and the gaps as they happen), the worst stage's
 * memory at its peak, and the MFU's distance from 1 in the same parts.
 *
 * The stage explained is the one whose compute stream ends last (it spans
 * the whole step, so its parts sum to step_time_s; ties go to the busiest).
 * Every part but the bubble is measured; the bubble is the step minus them
 * and is checked against the measured gaps (idle_s: the tests require the
 * two to agree). */
#include "merak/jsonio.h"
#include "sim/sim_internal.h"

/* Model FLOPs one GPU of stage s performs per step: each F/F_PRE the
 * forward of the chunk's layers, B and B_IN their backward (B_W's share is
 * in B_IN's count: the two always come in pairs), and every checkpointed
 * forward's replay; on one of the tp x cp ranks that split a micro-batch. */
static double stage_flops(const mk_sim_state_t *R, int s)
{
    const mk_plan_t *p = R->p;
    const mk_graph_t *g = R->g;
    double f = 0;
    for (int i = 0; i < R->sch->streams[s].n; i++) {
        const mk_instr_t *in = &R->sch->streams[s].v[i];
        int fwd = in->op == MK_INSTR_F || in->op == MK_INSTR_F_PRE, bwd = in->op == MK_INSTR_B || in->op == MK_INSTR_B_IN;
        if (!fwd && !bwd) continue;
        int k = mk_plan_vstage(p, s, in->chunk), left = in->op == MK_INSTR_F_PRE ? 1 << 30 : in->ckpt;
        for (int l = p->bounds[k]; l < p->bounds[k + 1]; l++) {
            f += fwd ? g->layers[l].fwd_flops : g->layers[l].bwd_flops;
            if (fwd && left > 0 && mk_layer_checkpointable(g, l)) f += g->layers[l].fwd_flops, left--;
        }
    }
    return f / ((double)p->tp * (p->cp > 1 ? p->cp : 1));
}

void mk_sim_explain_fill(const mk_sim_state_t *R, double step, mk_sim_result_t *out)
{
    const mk_plan_t *p = R->p;
    mk_sim_explain_t *e = &out->explain;
    int best = 0;
    for (int s = 1; s < p->pp; s++) { /* the compute stream that ends last, then the busiest */
        const mk_sim_stage_t *S = &R->st[s], *B = &R->st[best];
        if (S->now > B->now || (S->now == B->now && S->busy > B->busy)) best = s;
    }
    const mk_sim_stage_t *S = &R->st[best];
    e->stage = best;
    e->forward = S->cls[MK_SIM_FWD], e->backward = S->cls[MK_SIM_BWD];
    e->recompute = S->cls[MK_SIM_REC], e->optimizer = S->cls[MK_SIM_OPT];
    double sum = e->forward + e->backward + e->recompute + e->optimizer;
    for (int k = 0; k < MK_COMM_KINDS; k++) e->exposed[k] = S->exposed[k], sum += S->exposed[k];
    e->bubble = step - sum;
    e->idle_s = S->idle + (step - S->now);
    e->flops_gpu = stage_flops(R, best);
    e->peak_flops = R->c->dev.matmul_flops[p->dtype == MK_DTYPE_FP8 ? MK_DTYPE_BF16 : p->dtype];
}

/* The parts in the order every output lists them. */
int mk_sim_explain_parts(const mk_sim_explain_t *e, const char **names, double *secs)
{
    static const char *const nm[MK_SIM_EXPLAIN_PARTS] = {"forward", "backward", "recompute", "optimizer",
                                                          "exposed_tp", "exposed_cp", "exposed_ep", "exposed_pp",
                                                          "exposed_dp", "bubble"};
    const double v[MK_SIM_EXPLAIN_PARTS] = {e->forward, e->backward, e->recompute, e->optimizer,
                                            e->exposed[MK_COMM_TP], e->exposed[MK_COMM_CP], e->exposed[MK_COMM_EP],
                                            e->exposed[MK_COMM_PP], e->exposed[MK_COMM_DP], e->bubble};
    for (int i = 0; i < MK_SIM_EXPLAIN_PARTS; i++) names[i] = nm[i], secs[i] = v[i];
    return MK_SIM_EXPLAIN_PARTS;
}

static json_t *breakdown_json(const mk_sim_explain_t *e)
{
    const char *nm[MK_SIM_EXPLAIN_PARTS];
    double v[MK_SIM_EXPLAIN_PARTS];
    json_t *b = json_object();
    for (int i = 0, n = mk_sim_explain_parts(e, nm, v); i < n; i++) json_object_set_new(b, nm[i], json_real(v[i]));
    return b;
}

/* 1 - MFU in the breakdown's parts (fractions of the step): the stage's
 * forward, backward and recompute split into their FLOPs at the peak rate
 * and the rest (kernels below peak: small or memory-bound ops, launch and
 * host time), and the gap between the stage's FLOPs at peak and the MFU's
 * counted FLOPs (the FLOP convention's recompute, the stage above or below
 * the mean GPU: `flops_vs_counted`, negative when the stage does less).
 * mfu + every part = 1. */
static json_t *mfu_gap_json(const mk_sim_result_t *r)
{
    const mk_sim_explain_t *e = &r->explain;
    double T = r->step_time_s, inv = T > 0 ? 1 / T : 0;
    double at_peak = e->peak_flops > 0 ? e->flops_gpu / e->peak_flops * inv : 0;
    double compute = (e->forward + e->backward + e->recompute) * inv;
    json_t *m = json_pack("{s:f, s:f, s:f}", "mfu", r->mfu, "flops_vs_counted", at_peak - r->mfu,
                          "kernels_below_peak", compute - at_peak);
    const char *nm[MK_SIM_EXPLAIN_PARTS];
    double v[MK_SIM_EXPLAIN_PARTS];
    for (int i = 0, n = mk_sim_explain_parts(e, nm, v); i < n; i++)
        if (i >= 3) json_object_set_new(m, nm[i], json_real(v[i] * inv)); /* optimizer on */
    return m;
}

json_t *mk_sim_explain_json(const mk_sim_result_t *r)
{
    const mk_sim_explain_t *e = &r->explain;
    double comp = e->forward + e->backward + e->recompute;
    json_t *j = json_pack("{s:i, s:o, s:f}", "stage", e->stage, "breakdown_s", breakdown_json(e), "idle_s",
                          e->idle_s);
    if (r->worst_stage >= 0) {
        const mk_mem_breakdown_t *m = &r->mem[r->worst_stage];
        json_object_set_new(j, "memory_stage", json_integer(r->worst_stage));
        json_object_set_new(j, "memory_bytes",
                            json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "weights", m->weights, "gradients",
                                      m->grads, "optimizer", m->optimizer, "activations", m->activations,
                                      "working", m->working, "buffers", m->buffers, "gathered", m->gathered));
        json_object_set_new(j, "peak_bytes", json_real(m->total));
    }
    json_object_set_new(j, "mfu_gap", mfu_gap_json(r));
    /* the stage's compute at its achieved rate against the peak */
    json_object_set_new(j, "kernel_efficiency",
                        json_real(comp > 0 && e->peak_flops > 0 ? e->flops_gpu / comp / e->peak_flops : 0));
    return j;
}
